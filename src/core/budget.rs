//! Spending limits: the most a run, a session, and a provider in one day may
//! cost, in the price table's currency. The agent loop checks them before
//! each model turn; a run that has reached one ends cleanly with the stop
//! reason `budget` and a notice saying which, and each usage event says what
//! is left. Only what the price table prices counts.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::usage::Cost;

/// The configured limits (`[budget]`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Budgets {
    /// The most one run may cost.
    pub run: Option<f64>,
    /// The most one session may cost, over all its runs.
    pub session: Option<f64>,
    /// The most each provider may cost per day (UTC), by provider name.
    pub daily: BTreeMap<String, f64>,
    /// The price table's currency, in which the limits are stated.
    pub currency: String,
}

impl Budgets {
    pub fn is_empty(&self) -> bool {
        self.run.is_none() && self.session.is_none() && self.daily.is_empty()
    }
}

/// What a run has spent, and what the session and its provider had spent
/// before it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Spent {
    pub run: f64,
    pub session_before: f64,
    pub today_before: f64,
}

/// What is left of each budget, as a usage event reports it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BudgetLeft {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session: Option<f64>,
    /// Left of the session provider's daily budget.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub daily: Option<f64>,
    pub currency: String,
}

/// The amount of `cost` in `currency`; another currency counts nothing (the
/// price table has one).
pub fn amount(cost: Option<&Cost>, currency: &str) -> f64 {
    cost.filter(|c| c.currency == currency)
        .map_or(0.0, |c| c.amount)
}

/// What is left of each configured budget; `None` without budgets.
pub fn left(budgets: &Budgets, provider: &str, spent: &Spent) -> Option<BudgetLeft> {
    if budgets.is_empty() {
        return None;
    }
    let round = |value: f64| (value.max(0.0) * 1e6).round() / 1e6;
    Some(BudgetLeft {
        run: budgets.run.map(|limit| round(limit - spent.run)),
        session: budgets
            .session
            .map(|limit| round(limit - spent.session_before - spent.run)),
        daily: budgets
            .daily
            .get(provider)
            .map(|limit| round(limit - spent.today_before - spent.run)),
        currency: budgets.currency.clone(),
    })
}

/// The budget a run has reached, as the notice that ends it says it.
pub fn reached(budgets: &Budgets, provider: &str, spent: &Spent) -> Option<String> {
    let c = &budgets.currency;
    if let Some(limit) = budgets.run
        && spent.run >= limit
    {
        return Some(format!(
            "This request reached its budget: it cost {:.4} {c} of the {limit} {c} a run may (`[budget] run`). Send another message to go on.",
            spent.run
        ));
    }
    if let Some(limit) = budgets.session {
        let total = spent.session_before + spent.run;
        if total >= limit {
            return Some(format!(
                "This session reached its budget: it cost {total:.4} {c} of the {limit} {c} a session may (`[budget] session`). Start a new session, or raise the limit."
            ));
        }
    }
    if let Some(limit) = budgets.daily.get(provider) {
        let total = spent.today_before + spent.run;
        if total >= *limit {
            return Some(format!(
                "Provider {provider} reached its daily budget: {total:.4} {c} of {limit} {c} today (UTC; `[budget.daily] {provider}`). It can be used again tomorrow, or choose another model."
            ));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn budgets() -> Budgets {
        Budgets {
            run: Some(0.5),
            session: Some(2.0),
            daily: BTreeMap::from([("openai".to_owned(), 5.0)]),
            currency: "USD".into(),
        }
    }

    #[test]
    fn each_budget_is_reached_at_its_limit_and_says_which() {
        let b = budgets();
        let spent = |run, session_before, today_before| Spent {
            run,
            session_before,
            today_before,
        };
        assert_eq!(reached(&b, "openai", &spent(0.1, 1.0, 1.0)), None);
        let run = reached(&b, "openai", &spent(0.5, 0.0, 0.0)).unwrap();
        assert!(
            run.starts_with("This request reached its budget: it cost 0.5000 USD of the 0.5 USD"),
            "{run}"
        );
        let session = reached(&b, "openai", &spent(0.2, 1.8, 0.0)).unwrap();
        assert!(
            session.starts_with("This session reached its budget"),
            "{session}"
        );
        let daily = reached(&b, "openai", &spent(0.2, 0.0, 4.9)).unwrap();
        assert!(
            daily.starts_with("Provider openai reached its daily budget"),
            "{daily}"
        );
        // Another provider has no daily limit.
        assert_eq!(reached(&b, "anthropic", &spent(0.2, 0.0, 4.9)), None);
    }

    #[test]
    fn what_is_left_is_never_negative_and_only_for_set_budgets() {
        let b = budgets();
        let left = left(
            &b,
            "openai",
            &Spent {
                run: 0.7,
                session_before: 0.3,
                today_before: 1.0,
            },
        )
        .unwrap();
        assert_eq!(left.run, Some(0.0));
        assert_eq!(left.session, Some(1.0));
        assert_eq!(left.daily, Some(3.3));
        assert_eq!(
            super::left(&Budgets::default(), "openai", &Spent::default()),
            None
        );
        assert_eq!(
            amount(
                Some(&Cost {
                    amount: 1.0,
                    currency: "EUR".into()
                }),
                "USD"
            ),
            0.0
        );
    }
}
