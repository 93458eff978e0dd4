//! What a model turn used and cost: token counts as providers report them,
//! and amounts of money. Plain values, shared by events, the model catalogue,
//! providers and the journal.

use serde::{Deserialize, Serialize};

/// Token counts reported by a provider for one model turn.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema,
)]
pub struct Usage {
    pub input_tokens: u64,
    pub output_tokens: u64,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub cached_input_tokens: u64,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub reasoning_tokens: u64,
}

fn is_zero(value: &u64) -> bool {
    *value == 0
}

impl Usage {
    pub fn add(&mut self, other: Usage) {
        self.input_tokens += other.input_tokens;
        self.output_tokens += other.output_tokens;
        self.cached_input_tokens += other.cached_input_tokens;
        self.reasoning_tokens += other.reasoning_tokens;
    }
}

/// An amount of money (or credits), as ACP's `Cost` has it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Cost {
    pub amount: f64,
    pub currency: String,
}

impl std::fmt::Display for Cost {
    /// Up to six decimals, at least two: `0.0123 USD`, `1.50 USD`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let text = format!("{:.6}", self.amount);
        let (whole, fraction) = text.split_once('.').unwrap_or((&text, ""));
        let mut fraction = fraction.trim_end_matches('0').to_owned();
        while fraction.len() < 2 {
            fraction.push('0');
        }
        write!(f, "{whole}.{fraction} {}", self.currency)
    }
}

impl Cost {
    /// Adds `other` when it is in the same currency; an amount in another
    /// currency cannot be summed and is left out (and logged).
    pub fn add(&mut self, other: &Cost) {
        if other.currency == self.currency {
            self.amount += other.amount;
        } else {
            tracing::warn!(
                have = %self.currency,
                other = %other.currency,
                "costs in different currencies are not summed"
            );
        }
    }

    /// `total + other`, either side possibly absent.
    pub fn sum(total: Option<Cost>, other: Option<&Cost>) -> Option<Cost> {
        match (total, other) {
            (Some(mut total), Some(other)) => {
                total.add(other);
                Some(total)
            }
            (None, Some(other)) => Some(other.clone()),
            (total, None) => total,
        }
    }
}
