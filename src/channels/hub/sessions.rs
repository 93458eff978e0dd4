//! A chat's sessions, as an editor has them: `/sessions` lists every
//! session the chat has had (each carries the chat's conversation key,
//! `Session::conversation`, whatever the chat maps now), `/resume N` maps
//! the chat back to one of them, `/usage` says what the chat's session used.

use super::{Hub, HubError};
use crate::core::channel::{ChannelWrite, ConversationKey};
use crate::core::ids::SessionId;
use crate::core::journal::{SessionFilter, SessionQuery, Write};
use crate::core::run::RunInfo;
use crate::core::session::{Origin, Session, now_millis};
use crate::core::usage::{Cost, Usage};

/// The most sessions `/sessions` lists (and `/resume` picks from).
pub(super) const SESSIONS_SHOWN: usize = 20;

/// A time as a chat shows it: to the minute, in UTC.
fn when(millis: i64) -> String {
    jiff::Timestamp::from_millisecond(millis)
        .map(|t| t.strftime("%Y-%m-%d %H:%M UTC").to_string())
        .unwrap_or_default()
}

/// One session of the list: its number, title (its first prompt's start)
/// and when it was last active; the chat's current one marked.
fn session_line(number: usize, session: &Session, current: Option<&SessionId>) -> String {
    let title = session.title.as_deref().unwrap_or("(no prompt yet)");
    let mark = if current == Some(&session.id) {
        " (current)"
    } else {
        ""
    };
    format!(
        "{number}. {title} — {}, {}{mark}",
        when(session.updated_at),
        session.id
    )
}

/// What `/resume WHICH` picks among `listed` sessions: its index, or why
/// none.
fn pick(which: &str, listed: usize) -> Result<usize, String> {
    if which.is_empty() {
        return Err("Say which session: /resume N, with N from /sessions.".to_owned());
    }
    let Ok(number) = which.parse::<usize>() else {
        return Err(format!(
            "/resume takes a session's number from /sessions, not {}.",
            crate::core::quote::quote(which)
        ));
    };
    match listed {
        0 => Err("This chat has no sessions yet: send a message to start one.".to_owned()),
        _ if number == 0 || number > listed => Err(format!(
            "There {} {listed} session{} (/sessions lists them): /resume {number} names none.",
            if listed == 1 { "is" } else { "are" },
            if listed == 1 { "" } else { "s" },
        )),
        _ => Ok(number - 1),
    }
}

/// The sums of a session's runs: tokens, and cost per currency in the
/// order the currencies first came.
fn totals(runs: &[RunInfo]) -> (Usage, Vec<Cost>) {
    let mut usage = Usage::default();
    let mut costs: Vec<Cost> = Vec::new();
    for run in runs {
        usage.add(run.usage);
        if let Some(cost) = &run.cost {
            match costs.iter_mut().find(|c| c.currency == cost.currency) {
                Some(total) => total.add(cost),
                None => costs.push(cost.clone()),
            }
        }
    }
    (usage, costs)
}

/// `/usage` of a session and its runs, in the words `/runs` uses for one run.
fn usage_text(session: &SessionId, runs: &[RunInfo]) -> String {
    if runs.is_empty() {
        return format!("Session {session} has no runs yet.");
    }
    let (usage, costs) = totals(runs);
    let mut text = format!(
        "Session {session}: {} run{}, {} tokens in, {} out",
        runs.len(),
        if runs.len() == 1 { "" } else { "s" },
        usage.input_tokens,
        usage.output_tokens
    );
    let mut more: Vec<String> = Vec::new();
    if usage.cached_input_tokens > 0 {
        more.push(format!("{} cached", usage.cached_input_tokens));
    }
    if usage.reasoning_tokens > 0 {
        more.push(format!("{} reasoning", usage.reasoning_tokens));
    }
    if !more.is_empty() {
        text.push_str(&format!(" ({})", more.join(", ")));
    }
    if costs.is_empty() {
        text.push_str("; no cost (its models have no price).");
    } else {
        let costs: Vec<String> = costs.iter().map(ToString::to_string).collect();
        text.push_str(&format!("; cost {}.", costs.join(", ")));
    }
    text
}

impl Hub {
    /// The sessions this chat has had, most recently active first.
    async fn chat_sessions(&self, key: &ConversationKey) -> Result<Vec<Session>, HubError> {
        Ok(self
            .runtime
            .list_sessions(SessionQuery {
                workspace: None,
                after: None,
                limit: SESSIONS_SHOWN,
                filter: SessionFilter {
                    origin: Some(Origin::Channel),
                    conversation: Some(key.as_scope_key()),
                    ..SessionFilter::default()
                },
            })
            .await?)
    }

    /// `/sessions`: this chat's sessions, numbered for `/resume`.
    pub(super) async fn list_sessions(&self, key: &ConversationKey) -> String {
        let listed = match self.chat_sessions(key).await {
            Ok(listed) => listed,
            Err(err) => return format!("Cannot list the sessions: {err}"),
        };
        if listed.is_empty() {
            return "No sessions yet: send a message to start one.".to_owned();
        }
        let current = self.store.conversation(key).await.ok().flatten();
        let mut text = format!(
            "This chat's sessions, most recently active first (/resume N continues one):\n\n{}",
            listed
                .iter()
                .enumerate()
                .map(|(index, session)| session_line(index + 1, session, current.as_ref()))
                .collect::<Vec<_>>()
                .join("\n")
        );
        if listed.len() == SESSIONS_SHOWN {
            text.push_str(&format!(
                "\n\nThe {SESSIONS_SHOWN} most recent are shown (pincer sessions list lists them all)."
            ));
        }
        text
    }

    /// `/resume N`: maps the chat back to session N of `/sessions`; the
    /// next message continues it.
    pub(super) async fn resume(&self, key: &ConversationKey, which: &str) -> String {
        // Held as a new session is: no message starts one meanwhile.
        let _creating = self.sessions.lock().await;
        let listed = match self.chat_sessions(key).await {
            Ok(listed) => listed,
            Err(err) => return format!("Cannot list the sessions: {err}"),
        };
        let index = match pick(which, listed.len()) {
            Ok(index) => index,
            Err(answer) => return answer,
        };
        let session = &listed[index];
        let current = self.store.conversation(key).await.ok().flatten();
        if current.as_ref() == Some(&session.id) {
            return format!("Session {} is this chat's session already.", session.id);
        }
        if let Err(err) = self.runtime.open_session(&session.id).await {
            return format!("Cannot open session {}: {err}", session.id);
        }
        let mapped = self
            .store
            .commit(Write::Channel(ChannelWrite::MapConversation {
                key: key.clone(),
                session_id: session.id.clone(),
                at: now_millis(),
            }))
            .await;
        match mapped {
            Ok(()) => format!(
                "Resumed session {} ({}). The next message continues it.",
                session.id,
                session.title.as_deref().unwrap_or("no prompt yet")
            ),
            Err(err) => format!("Cannot resume session {}: {err}", session.id),
        }
    }

    /// `/usage`: the tokens and cost of the chat's session, summed over its runs.
    pub(super) async fn usage(&self, key: &ConversationKey) -> String {
        match self.store.conversation(key).await {
            Ok(Some(id)) => match self.runtime.runs(&id).await {
                Ok(runs) => usage_text(&id, &runs),
                Err(err) => format!("Cannot read the session's runs: {err}"),
            },
            Ok(None) => "No session yet: send a message to start one.".to_owned(),
            Err(err) => format!("Cannot read the session: {err}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::event::RunState;
    use crate::core::ids::RunId;

    #[test]
    fn resume_names_what_is_wrong_with_its_number() {
        assert_eq!(pick("2", 3), Ok(1));
        assert_eq!(pick("1", 1), Ok(0));
        assert!(pick("", 3).unwrap_err().contains("/resume N"));
        assert_eq!(
            pick("9", 3).unwrap_err(),
            "There are 3 sessions (/sessions lists them): /resume 9 names none."
        );
        assert_eq!(
            pick("0", 1).unwrap_err(),
            "There is 1 session (/sessions lists them): /resume 0 names none."
        );
        assert!(pick("two", 3).unwrap_err().contains("not two"));
        assert!(pick("1", 0).unwrap_err().contains("no sessions yet"));
    }

    fn run(input: u64, output: u64, cost: Option<(f64, &str)>) -> RunInfo {
        RunInfo {
            id: RunId::from_string(format!("run_{input}")),
            session_id: SessionId::from_string("ses_1".into()),
            state: RunState::Completed,
            stop_reason: None,
            error: None,
            usage: Usage {
                input_tokens: input,
                output_tokens: output,
                ..Usage::default()
            },
            cost: cost.map(|(amount, currency)| Cost {
                amount,
                currency: currency.into(),
            }),
            created_at: 0,
            started_at: None,
            ended_at: None,
        }
    }

    #[test]
    fn usage_sums_tokens_and_costs_per_currency() {
        let id = SessionId::from_string("ses_1".into());
        assert_eq!(usage_text(&id, &[]), "Session ses_1 has no runs yet.");
        assert_eq!(
            usage_text(&id, &[run(10, 2, None)]),
            "Session ses_1: 1 run, 10 tokens in, 2 out; no cost (its models have no price)."
        );
        let runs = [
            run(10, 2, Some((0.5, "USD"))),
            run(20, 3, Some((1.0, "EUR"))),
            run(30, 4, Some((0.25, "USD"))),
            run(1, 1, None),
        ];
        assert_eq!(
            usage_text(&id, &runs),
            "Session ses_1: 4 runs, 61 tokens in, 10 out; cost 0.75 USD, 1.00 EUR."
        );
    }
}
