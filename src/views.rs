//! What a session and a run look like from outside: one serializable shape
//! each, built from the core's records, shared by every face that shows them
//! as JSON (`pincer sessions show --json`, `pincer runs show --json`, the HTTP
//! face's REST routes and its JSON-RPC methods). A field added here reaches
//! all of them; `schema/openapi.json` describes the same fields (a test below
//! compares them).

use std::path::Path;

use serde::Serialize;

use crate::core::models::Cost;
use crate::core::run::RunInfo;
use crate::core::session::{Millis, Session, SessionParent};
use crate::core::usage::Usage;

/// A session's settings and times (not its history, runs or grants).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SessionView<'a> {
    pub session_id: &'a str,
    pub workspace: &'a Path,
    pub origin: &'static str,
    pub provider: &'a str,
    pub model: &'a str,
    pub mode: &'static str,
    pub title: Option<&'a str>,
    pub created_at: Millis,
    pub updated_at: Millis,
    pub closed: bool,
    /// The MCP servers the client passed, as stored (secrets redacted).
    pub mcp_servers: &'a serde_json::Value,
    /// Left out when the session uses its provider's default.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub thought_level: Option<&'a str>,
    /// Only a subagent's session has one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub parent: Option<ParentView<'a>>,
}

/// The run and `delegate` call a subagent's session works for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ParentView<'a> {
    pub session_id: &'a str,
    pub run_id: &'a str,
    pub call_id: &'a str,
}

/// A run's state, outcome, usage and times.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RunView<'a> {
    pub run_id: &'a str,
    pub session_id: &'a str,
    pub state: &'static str,
    pub stop_reason: Option<&'static str>,
    pub error: Option<&'a str>,
    pub usage: Usage,
    pub cost: Option<&'a Cost>,
    pub created_at: Millis,
    pub started_at: Option<Millis>,
    pub ended_at: Option<Millis>,
}

impl<'a> From<&'a Session> for SessionView<'a> {
    fn from(session: &'a Session) -> Self {
        SessionView {
            session_id: session.id.as_str(),
            workspace: &session.workspace,
            origin: session.origin.as_str(),
            provider: &session.provider,
            model: &session.model,
            mode: session.mode.as_str(),
            title: session.title.as_deref(),
            created_at: session.created_at,
            updated_at: session.updated_at,
            closed: session.closed,
            mcp_servers: &session.mcp_servers,
            thought_level: session.thought_level.as_deref(),
            parent: session.parent.as_ref().map(ParentView::from),
        }
    }
}

impl<'a> From<&'a SessionParent> for ParentView<'a> {
    fn from(parent: &'a SessionParent) -> Self {
        ParentView {
            session_id: parent.session.as_str(),
            run_id: parent.run.as_str(),
            call_id: &parent.call,
        }
    }
}

impl<'a> From<&'a RunInfo> for RunView<'a> {
    fn from(run: &'a RunInfo) -> Self {
        RunView {
            run_id: run.id.as_str(),
            session_id: run.session_id.as_str(),
            state: run.state.as_str(),
            stop_reason: run.stop_reason.map(|reason| reason.as_str()),
            error: run.error.as_deref(),
            usage: run.usage,
            cost: run.cost.as_ref(),
            created_at: run.created_at,
            started_at: run.started_at,
            ended_at: run.ended_at,
        }
    }
}

/// A session as a JSON value.
pub fn session(session: &Session) -> serde_json::Value {
    json(&SessionView::from(session))
}

/// A run as a JSON value.
pub fn run(run: &RunInfo) -> serde_json::Value {
    json(&RunView::from(run))
}

/// A chat channel account: its health and its outbox (`GET /v1/channels`,
/// `pincer channels status --json`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ChannelView<'a> {
    /// The channel's name (`[channels.NAME]`).
    pub name: &'a str,
    pub account: &'a str,
    /// The platform (`telegram`, `irc`); absent where only the store was read.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kind: Option<&'a str>,
    /// Whether the process answering serves the account now; absent where
    /// only the store was read.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub serving: Option<bool>,
    /// What the adapter declares it can do; absent where only the store
    /// was read (no adapter at hand).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub capabilities: Option<CapabilitiesView>,
    #[serde(flatten)]
    pub status: &'a crate::core::channel::AccountStatus,
    /// Send intents of the channel by status.
    pub outbox: std::collections::BTreeMap<&'static str, u64>,
}

/// What a channel's platform can do, as its adapter declares it
/// (`channels::Capabilities`, which builds this).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CapabilitiesView {
    /// Longest message text, in `length_unit`.
    pub max_len: usize,
    /// `chars`, `utf16` or `bytes`.
    pub length_unit: &'static str,
    /// The markup rendered replies carry (`html`), or `None`: plain text.
    pub markup: Option<&'static str>,
    pub edit: bool,
    pub delete: bool,
    pub buttons: bool,
    pub reactions: bool,
    pub threads: bool,
    /// Least time between two edits of one message.
    pub edit_interval_ms: u64,
    /// Where there is no live draft, a run working this long says so once.
    pub working_after_ms: Option<u64>,
    /// Which calls may be repeated after an unknown outcome.
    pub idempotent: IdempotenceView,
}

/// Per operation: whether a repeat after an unknown outcome is safe.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct IdempotenceView {
    pub send: bool,
    pub edit: bool,
    pub delete: bool,
}

/// A channel account as a JSON value.
pub fn channel(view: &ChannelView<'_>) -> serde_json::Value {
    json(view)
}

/// A view as a JSON value. The views hold only strings, numbers, options
/// and JSON values, none of which can fail to serialize.
fn json(view: &impl Serialize) -> serde_json::Value {
    serde_json::to_value(view).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;
    use std::path::PathBuf;

    use super::*;
    use crate::core::event::{RunState, StopReason};
    use crate::core::ids::{RunId, SessionId};
    use crate::core::session::{Mode, Origin, PromptSettings};

    fn child_session() -> Session {
        Session {
            id: SessionId::from_string("ses_2".into()),
            workspace: PathBuf::from("/w"),
            origin: Origin::Http,
            provider: "p".into(),
            model: "m".into(),
            thought_level: Some("high".into()),
            mode: Mode::Supervised,
            title: Some("t".into()),
            mcp_servers: serde_json::json!([{"name": "fs"}]),
            created_at: 1,
            updated_at: 2,
            closed: false,
            conversation: Some("private".into()),
            prompt: PromptSettings {
                system_prompt: Some("private".into()),
                instructions: None,
            },
            parent: Some(SessionParent {
                session: SessionId::from_string("ses_1".into()),
                run: RunId::from_string("run_1".into()),
                call: "call_1".into(),
            }),
        }
    }

    fn ended_run() -> RunInfo {
        RunInfo {
            id: RunId::from_string("run_1".into()),
            session_id: SessionId::from_string("ses_1".into()),
            state: RunState::Completed,
            stop_reason: Some(StopReason::EndTurn),
            error: None,
            usage: Usage {
                input_tokens: 4,
                output_tokens: 1,
                cached_input_tokens: 2,
                reasoning_tokens: 3,
            },
            cost: Some(Cost {
                amount: 0.5,
                currency: "USD".into(),
            }),
            created_at: 5,
            started_at: Some(6),
            ended_at: Some(7),
        }
    }

    #[test]
    fn a_session_shows_its_settings_and_parent_but_not_its_prompt() {
        let value = session(&child_session());
        assert_eq!(
            value,
            serde_json::json!({
                "session_id": "ses_2",
                "workspace": "/w",
                "origin": "http",
                "provider": "p",
                "model": "m",
                "mode": "supervised",
                "title": "t",
                "created_at": 1,
                "updated_at": 2,
                "closed": false,
                "mcp_servers": [{"name": "fs"}],
                "thought_level": "high",
                "parent": {"session_id": "ses_1", "run_id": "run_1", "call_id": "call_1"},
            })
        );
        let mut own = child_session();
        own.thought_level = None;
        own.parent = None;
        let value = session(&own);
        assert!(value.get("thought_level").is_none() && value.get("parent").is_none());
        assert!(value["title"] == "t" && value["mcp_servers"][0]["name"] == "fs");
    }

    #[test]
    fn a_run_shows_its_outcome_usage_and_times() {
        let value = run(&ended_run());
        assert_eq!(
            value,
            serde_json::json!({
                "run_id": "run_1",
                "session_id": "ses_1",
                "state": "completed",
                "stop_reason": "end_turn",
                "error": null,
                "usage": {"input_tokens": 4, "output_tokens": 1, "cached_input_tokens": 2, "reasoning_tokens": 3},
                "cost": {"amount": 0.5, "currency": "USD"},
                "created_at": 5,
                "started_at": 6,
                "ended_at": 7,
            })
        );
    }

    /// The property names the OpenAPI document gives one of its schemas.
    fn documented(schema: &str) -> BTreeSet<String> {
        let text = include_str!("../schema/openapi.json");
        let document: serde_json::Value = serde_json::from_str(text).unwrap();
        document["components"]["schemas"][schema]["properties"]
            .as_object()
            .unwrap()
            .keys()
            .cloned()
            .collect()
    }

    fn keys(value: &serde_json::Value) -> BTreeSet<String> {
        value.as_object().unwrap().keys().cloned().collect()
    }

    /// Every field a view can carry is documented, and nothing more (a
    /// run's `reply` is added by a prompt that waits).
    #[test]
    fn the_openapi_document_names_every_field_of_the_views() {
        assert_eq!(keys(&session(&child_session())), documented("Session"));
        let mut run_keys = keys(&run(&ended_run()));
        run_keys.insert("reply".into());
        assert_eq!(run_keys, documented("Run"));
        let usage = serde_json::json!(ended_run().usage);
        let document: serde_json::Value =
            serde_json::from_str(include_str!("../schema/openapi.json")).unwrap();
        let usage_schema = &document["components"]["schemas"]["Run"]["properties"]["usage"];
        assert_eq!(
            keys(&usage),
            keys(&usage_schema["properties"]),
            "usage fields"
        );
        let capabilities = CapabilitiesView {
            max_len: 4096,
            length_unit: "utf16",
            markup: Some("html"),
            edit: true,
            delete: true,
            buttons: true,
            reactions: false,
            threads: true,
            edit_interval_ms: 1000,
            working_after_ms: None,
            idempotent: IdempotenceView {
                send: false,
                edit: true,
                delete: true,
            },
        };
        let status = crate::core::channel::AccountStatus::default();
        let view = channel(&ChannelView {
            name: "telegram",
            account: "1",
            kind: Some("telegram"),
            serving: Some(true),
            capabilities: Some(capabilities),
            status: &status,
            outbox: std::collections::BTreeMap::new(),
        });
        assert_eq!(keys(&view), documented("Channel"));
        assert_eq!(
            keys(&view["capabilities"]),
            documented("ChannelCapabilities")
        );
        let idempotent = &document["components"]["schemas"]["ChannelCapabilities"]["properties"]["idempotent"]
            ["properties"];
        assert_eq!(keys(&view["capabilities"]["idempotent"]), keys(idempotent));
    }
}
