//! What Pincer shows of itself as JSON: one typed shape for each thing,
//! built from the core's records and shared by every face that shows it
//! (`pincer sessions|runs|context|schedule|verify … --json`, the HTTP
//! face's REST routes and JSON-RPC methods, the ACP `_pincer/runs`
//! extension, the web console). A field added here reaches all of them,
//! and `schema/openapi.json` is generated from these types
//! (`http::openapi`), so it describes the same fields.

mod channels;
mod exchanges;
mod health;
mod schedules;
mod schema;
pub use schema::{PersonDecision, PersonOutcome};
mod skills;
mod verify;

use std::path::PathBuf;

use schemars::JsonSchema;
use serde::Serialize;

pub use channels::{
    CapabilitiesView, ChannelList, ChannelOutbox, ChannelPairs, ChannelView, IdempotenceView,
    LengthUnit, OutboxFailure, OutboxIntent, PairRevoked,
};
pub use exchanges::{Answered, ApprovalList, ApprovalView, QuestionList, QuestionView, Replied};
pub use health::{
    HealthSummary, InstanceView, Latency, RunBucket, RunStates, RunsSummary, StoreKind,
};
pub use schedules::{ScheduleAdded, ScheduleDeleted, ScheduleDetails, ScheduleList, ScheduleView};
pub use skills::{SkillCommand, SkillDetails, SkillDiagnostic, SkillList, SkillScope, SkillView};
pub use verify::{MissingReceipts, ReceiptBreak, VerifyView};

use crate::core::event::{EventRecord, RunState, StopReason};
use crate::core::memory::MemoryItem;
use crate::core::models::Cost;
use crate::core::run::RunInfo;
use crate::core::session::{Millis, Mode, Origin, Session, SessionParent};
use crate::core::usage::Usage;

/// A session's settings and times (not its history, runs or grants).
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
#[schemars(rename = "Session", deny_unknown_fields)]
pub struct SessionView {
    #[schemars(regex(pattern = "^ses_"))]
    pub session_id: String,
    pub workspace: PathBuf,
    pub origin: Origin,
    pub provider: String,
    pub model: String,
    pub mode: Mode,
    pub title: Option<String>,
    /// Milliseconds since the Unix epoch
    pub created_at: Millis,
    /// Milliseconds since the Unix epoch
    pub updated_at: Millis,
    pub closed: bool,
    /// The MCP servers the client passed when it made or loaded the session
    /// (ACP `mcpServers`, env and header values redacted); empty for a
    /// session made over HTTP
    #[schemars(with = "Vec<serde_json::Map<String, serde_json::Value>>")]
    pub mcp_servers: serde_json::Value,
    /// The session's thought level (a provider's `reasoning_efforts`
    /// value); absent: the provider's default
    #[serde(skip_serializing_if = "Option::is_none")]
    pub thought_level: Option<String>,
    /// Only a subagent's session: the run and `delegate` call it works for
    #[serde(skip_serializing_if = "Option::is_none")]
    pub parent: Option<ParentView>,
}

/// The run and `delegate` call a subagent's session works for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, JsonSchema)]
#[schemars(rename = "SessionParent", deny_unknown_fields)]
pub struct ParentView {
    #[schemars(regex(pattern = "^ses_"))]
    pub session_id: String,
    #[schemars(regex(pattern = "^run_"))]
    pub run_id: String,
    pub call_id: String,
}

/// A run's state, outcome, usage and times.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
#[schemars(rename = "Run", deny_unknown_fields)]
pub struct RunView {
    #[schemars(regex(pattern = "^run_"))]
    pub run_id: String,
    #[schemars(regex(pattern = "^ses_"))]
    pub session_id: String,
    pub state: RunState,
    pub stop_reason: Option<StopReason>,
    pub error: Option<String>,
    pub usage: Usage,
    pub cost: Option<Cost>,
    /// Milliseconds since the Unix epoch
    pub created_at: Millis,
    pub started_at: Option<Millis>,
    pub ended_at: Option<Millis>,
    /// With `?wait=true` on a prompt: the text the model answered in this run
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reply: Option<String>,
}

impl From<&Session> for SessionView {
    fn from(session: &Session) -> Self {
        SessionView {
            session_id: session.id.as_str().to_owned(),
            workspace: session.workspace.clone(),
            origin: session.origin,
            provider: session.provider.clone(),
            model: session.model.clone(),
            mode: session.mode,
            title: session.title.clone(),
            created_at: session.created_at,
            updated_at: session.updated_at,
            closed: session.closed,
            mcp_servers: session.mcp_servers.clone(),
            thought_level: session.thought_level.clone(),
            parent: session.parent.as_ref().map(ParentView::from),
        }
    }
}

impl From<&SessionParent> for ParentView {
    fn from(parent: &SessionParent) -> Self {
        ParentView {
            session_id: parent.session.as_str().to_owned(),
            run_id: parent.run.as_str().to_owned(),
            call_id: parent.call.clone(),
        }
    }
}

impl From<&RunInfo> for RunView {
    fn from(run: &RunInfo) -> Self {
        RunView {
            run_id: run.id.as_str().to_owned(),
            session_id: run.session_id.as_str().to_owned(),
            state: run.state,
            stop_reason: run.stop_reason,
            error: run.error.clone(),
            usage: run.usage,
            cost: run.cost.clone(),
            created_at: run.created_at,
            started_at: run.started_at,
            ended_at: run.ended_at,
            reply: None,
        }
    }
}

impl RunView {
    /// Milliseconds from its start to its end, once it ended.
    pub fn duration_ms(&self) -> Option<Millis> {
        match (self.started_at, self.ended_at) {
            (Some(start), Some(end)) => Some(end - start),
            _ => None,
        }
    }
}

/// A page of sessions, most recently active first.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct SessionList {
    pub sessions: Vec<SessionView>,
    /// The cursor of the next page; null on the last
    pub next_cursor: Option<String>,
}

/// A session's runs, oldest first.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct RunList {
    pub runs: Vec<RunView>,
}

/// A deleted session: its conversation and tapes went; its runs'
/// summaries and receipts stay.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct SessionDeleted {
    pub session_id: String,
    #[schemars(extend("const" = true))]
    pub deleted: bool,
}

/// What became of a steering message: taken in at the run's next turn
/// boundary (`injected`, with the run), or handed back because no prompt
/// works (`promptRequired`: send it as a prompt).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, JsonSchema)]
#[serde(tag = "outcome")]
pub enum Steered {
    #[serde(rename = "injected")]
    Injected { run_id: String },
    #[serde(rename = "promptRequired")]
    PromptRequired { reason: SteerRefusal },
}

/// Why a steering message was handed back.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, JsonSchema)]
pub enum SteerRefusal {
    /// No run of the session is working a turn.
    #[serde(rename = "noRunningTurn")]
    NoRunningTurn,
}

/// What the session's next model turn would be sent, with the estimate of
/// its tokens (`pincer context --json`, `GET /v1/sessions/{id}/context`).
#[derive(Debug, Clone, Serialize, JsonSchema)]
#[schemars(rename = "Context")]
pub struct ContextView {
    #[schemars(regex(pattern = "^ses_"))]
    pub session_id: String,
    #[serde(flatten)]
    pub context: crate::core::runtime::ContextView,
    /// The system prompt's, the tools' and the messages' tokens together
    pub total_tokens: usize,
}

impl ContextView {
    pub fn new(session_id: &str, context: crate::core::runtime::ContextView) -> Self {
        let total_tokens = context.system_tokens
            + context.tool_tokens
            + context.message_tokens.iter().sum::<usize>();
        ContextView {
            session_id: session_id.to_owned(),
            context,
            total_tokens,
        }
    }
}

/// A run's tape from a point on.
#[derive(Debug, Clone, Serialize, JsonSchema)]
#[schemars(rename = "Tape", deny_unknown_fields)]
pub struct TapeView {
    pub events: Vec<EventRecord>,
}

/// Memory items, best match (or newest) first.
#[derive(Debug, Clone, Serialize, JsonSchema)]
#[schemars(rename = "MemoryList", deny_unknown_fields)]
pub struct MemoryList {
    pub items: Vec<MemoryItem>,
}

/// A probe's answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, JsonSchema)]
#[schemars(rename = "Health")]
pub struct Health {
    pub status: HealthStatus,
}

/// `ok` (alive) or `ready` (the store is writable).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum HealthStatus {
    Ok,
    Ready,
}

/// A session as a JSON value.
pub fn session(session: &Session) -> serde_json::Value {
    json(&SessionView::from(session))
}

/// A run as a JSON value.
pub fn run(run: &RunInfo) -> serde_json::Value {
    json(&RunView::from(run))
}

/// A view as a JSON value. The views hold only strings, numbers, options
/// and JSON values, none of which can fail to serialize.
pub fn json(view: &impl Serialize) -> serde_json::Value {
    serde_json::to_value(view).unwrap_or_default()
}

#[cfg(test)]
mod tests;
