//! Everything observable in a run, as one closed enum.
//!
//! Events are appended to the tape (the durable per-run journal) and published to
//! whoever watches the session. Their JSON form is the tape's payload and the
//! `pincer run --output jsonl` schema, so changes to it are changes to a public format.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use super::approval::ApprovalDecision;
use super::ids::{RunId, SessionId};
use super::question::{Question, QuestionOutcome};
use super::receipt::Verdict;
use super::session::{ContentPart, Millis};
use super::tool::{FileDiff, PlanEntry, ToolKind};
use super::usage::Cost;
pub use super::usage::Usage;

fn other_kind() -> ToolKind {
    ToolKind::Other
}

impl Event {
    /// A move to `state` with nothing else to say.
    pub fn state(state: RunState) -> Self {
        Event::State {
            state,
            stop_reason: None,
            error: None,
            usage: None,
            cost: None,
        }
    }
}

fn allowed() -> Verdict {
    Verdict::Allowed
}

/// The life of a run: `queued → running ⇄ waiting → completed | cancelled | failed`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum RunState {
    Queued,
    Running,
    /// Suspended on an approval or on input from a person.
    Waiting,
    Completed,
    Cancelled,
    Failed,
}

impl RunState {
    pub fn as_str(self) -> &'static str {
        match self {
            RunState::Queued => "queued",
            RunState::Running => "running",
            RunState::Waiting => "waiting",
            RunState::Completed => "completed",
            RunState::Cancelled => "cancelled",
            RunState::Failed => "failed",
        }
    }

    pub fn parse(value: &str) -> Option<Self> {
        [
            RunState::Queued,
            RunState::Running,
            RunState::Waiting,
            RunState::Completed,
            RunState::Cancelled,
            RunState::Failed,
        ]
        .into_iter()
        .find(|state| state.as_str() == value)
    }

    pub fn is_terminal(self) -> bool {
        match self {
            RunState::Completed | RunState::Cancelled | RunState::Failed => true,
            RunState::Queued | RunState::Running | RunState::Waiting => false,
        }
    }

    /// Whether the state machine allows moving from `self` to `next`.
    pub fn can_become(self, next: RunState) -> bool {
        use RunState::*;
        match (self, next) {
            (Queued, Running) => true,
            (Running, Waiting) | (Waiting, Running) => true,
            (Queued | Running | Waiting, Completed | Cancelled | Failed) => {
                // A queued run can be cancelled or fail (its session closed, the
                // process died) but cannot complete without running.
                !(self == Queued && next == Completed)
            }
            _ => false,
        }
    }
}

/// Why a run ended, in the vocabulary editors understand.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum StopReason {
    /// The model finished its turn.
    EndTurn,
    /// The model hit its output token limit.
    MaxTokens,
    /// The agent loop hit its iteration cap.
    MaxTurnRequests,
    /// The model refused to go on.
    Refusal,
    Cancelled,
    /// A spending limit was reached (`core::budget`).
    Budget,
    /// A lifecycle hook blocked the prompt or ended the run (`core::hooks`).
    Blocked,
}

impl StopReason {
    pub fn as_str(self) -> &'static str {
        match self {
            StopReason::EndTurn => "end_turn",
            StopReason::MaxTokens => "max_tokens",
            StopReason::MaxTurnRequests => "max_turn_requests",
            StopReason::Refusal => "refusal",
            StopReason::Cancelled => "cancelled",
            StopReason::Budget => "budget",
            StopReason::Blocked => "blocked",
        }
    }

    pub fn parse(value: &str) -> Option<Self> {
        [
            StopReason::EndTurn,
            StopReason::MaxTokens,
            StopReason::MaxTurnRequests,
            StopReason::Refusal,
            StopReason::Cancelled,
            StopReason::Budget,
            StopReason::Blocked,
        ]
        .into_iter()
        .find(|reason| reason.as_str() == value)
    }
}

/// One observable thing that happened in a run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Event {
    /// The run moved to a new state. Terminal states carry the stop reason or the error.
    State {
        state: RunState,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        stop_reason: Option<StopReason>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        error: Option<String>,
        /// On the terminal state: tokens summed over the run's model turns.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        usage: Option<Usage>,
        /// On the terminal state: what the run cost, when the price table
        /// covers its models.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        cost: Option<Cost>,
    },
    /// The prompt that started the run.
    UserMessage {
        content: Vec<ContentPart>,
    },
    /// A provider turn began; `index` counts turns within the run from 0.
    ModelTurn {
        index: u32,
        provider: String,
        model: String,
    },
    TextDelta {
        text: String,
    },
    ThoughtDelta {
        text: String,
    },
    /// The model asked for a tool call.
    ToolCall {
        id: String,
        name: String,
        arguments: serde_json::Value,
        /// The tool's kind (`other` for a tool Pincer does not have).
        #[serde(default = "other_kind")]
        kind: ToolKind,
    },
    /// The call's arguments were understood: what it will touch and change.
    ToolPlanned {
        id: String,
        title: String,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        locations: Vec<PathBuf>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        command: Option<String>,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        diffs: Vec<FileDiff>,
    },
    /// The policy wants a person to approve the call; the run waits.
    ApprovalRequested {
        approval_id: String,
        call_id: String,
        tool: String,
        kind: ToolKind,
        title: String,
        /// Why the policy asks.
        reason: String,
        arguments: serde_json::Value,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        locations: Vec<PathBuf>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        command: Option<String>,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        diffs: Vec<FileDiff>,
    },
    /// The approval was answered (or timed out, or the run was cancelled).
    ApprovalDecided {
        approval_id: String,
        call_id: String,
        decision: ApprovalDecision,
    },
    /// The model asks the person (`ask_user`); the run waits for the answer.
    QuestionAsked {
        question_id: String,
        call_id: String,
        question: String,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        options: Vec<String>,
    },
    /// The question was answered (or declined, timed out, cancelled, or
    /// nobody could answer).
    QuestionAnswered {
        question_id: String,
        call_id: String,
        outcome: QuestionOutcome,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        answer: Option<String>,
    },
    /// A `delegate` call handed its task to a subagent: a child run in a
    /// child session (the link from the parent's tape to the child's).
    SubagentStarted {
        call_id: String,
        session_id: SessionId,
        run_id: RunId,
        task: String,
    },
    /// The subagent's run ended.
    SubagentEnded {
        call_id: String,
        session_id: SessionId,
        run_id: RunId,
        state: RunState,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        stop_reason: Option<StopReason>,
    },
    /// The call passed the gate and is running.
    ToolStarted {
        id: String,
    },
    /// A tool call finished; its output is what the model sees.
    ToolResult {
        id: String,
        output: String,
        is_error: bool,
        /// How the gate decided the call.
        #[serde(default = "allowed")]
        verdict: Verdict,
        /// The changes the call made.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        diffs: Vec<FileDiff>,
        /// What the safety pass did to the output (redactions, truncation, injection markers).
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        safety: Vec<String>,
    },
    /// A running call's output so far: more lines (through the safety pass),
    /// or the client terminal it runs in.
    ToolProgress {
        id: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        output: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        terminal_id: Option<String>,
    },
    /// The model's task list, whole, each time it changes.
    Plan {
        entries: Vec<PlanEntry>,
    },
    /// The session got a title (from its first prompt).
    SessionInfo {
        title: String,
    },
    /// Tokens of one model turn, what they cost, and how full the context is.
    Usage {
        usage: Usage,
        /// The model that served the turn (a failover member's own, if it has one).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        model: Option<String>,
        /// What the turn cost, when the price table covers the model.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        cost: Option<Cost>,
        /// Tokens in the context after the turn, and the model's window.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        context: Option<ContextUse>,
        /// The session's cost so far, this turn included.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        session_cost: Option<Cost>,
        /// What is left of the configured budgets (`core::budget`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        budget: Option<super::budget::BudgetLeft>,
    },
    /// Something the user should know that is not part of the model's reply
    /// (an MCP server that failed to start); shown, never sent to the model.
    Notice {
        message: String,
    },
    /// A model turn that failed before any output is tried again after a
    /// wait; the faces show it as one status line, the log has the detail.
    Retrying {
        /// The attempt about to be made, from 2.
        attempt: u32,
        /// Attempts in all, the first included.
        attempts: u32,
        /// Milliseconds until it is made.
        wait_ms: u64,
        /// Why the last attempt failed, in a few words (`429 Too Many Requests`).
        reason: String,
    },
    /// A compaction of the conversation began (`in_progress`) or ended; the
    /// same `compaction_id` ties the two. The person is told in words by a
    /// reply (`/compact`) or a notice (automatic) as well; this is the
    /// structured record editors show as a compaction.
    Compaction {
        compaction_id: String,
        /// `manual` (`/compact`) or `auto`.
        trigger: CompactionTrigger,
        status: CompactionStatus,
        /// The summary that replaced the conversation, once `completed`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        summary: Option<String>,
        /// Why it did not complete, once `failed`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        error: Option<String>,
    },
    /// A skill's instructions joined the conversation (`core::skills`): the
    /// model loaded it with the `skill` tool or read its `SKILL.md`. The
    /// receipts of the calls made while it is active name it.
    SkillActivated {
        name: String,
        /// Its `SKILL.md`.
        location: PathBuf,
        by: super::skills::ActivatedBy,
    },
}

/// What started a compaction.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CompactionTrigger {
    Manual,
    Auto,
}

/// Where a compaction is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CompactionStatus {
    InProgress,
    Completed,
    Failed,
    Cancelled,
}

impl CompactionStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            CompactionStatus::InProgress => "in_progress",
            CompactionStatus::Completed => "completed",
            CompactionStatus::Failed => "failed",
            CompactionStatus::Cancelled => "cancelled",
        }
    }
}

/// How full the model's context window is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ContextUse {
    /// Tokens the last turn read and wrote: what the next turn starts from.
    pub used: u64,
    /// The model's context window.
    pub size: u64,
}

impl Event {
    /// A short name of the variant, stored beside the payload for queries.
    pub fn kind(&self) -> &'static str {
        match self {
            Event::State { .. } => "state",
            Event::UserMessage { .. } => "user_message",
            Event::ModelTurn { .. } => "model_turn",
            Event::TextDelta { .. } => "text_delta",
            Event::ThoughtDelta { .. } => "thought_delta",
            Event::ToolCall { .. } => "tool_call",
            Event::ToolPlanned { .. } => "tool_planned",
            Event::ApprovalRequested { .. } => "approval_requested",
            Event::ApprovalDecided { .. } => "approval_decided",
            Event::QuestionAsked { .. } => "question_asked",
            Event::QuestionAnswered { .. } => "question_answered",
            Event::SubagentStarted { .. } => "subagent_started",
            Event::SubagentEnded { .. } => "subagent_ended",
            Event::ToolStarted { .. } => "tool_started",
            Event::ToolResult { .. } => "tool_result",
            Event::ToolProgress { .. } => "tool_progress",
            Event::Plan { .. } => "plan",
            Event::SessionInfo { .. } => "session_info",
            Event::Usage { .. } => "usage",
            Event::Notice { .. } => "notice",
            Event::Retrying { .. } => "retrying",
            Event::Compaction { .. } => "compaction",
            Event::SkillActivated { .. } => "skill_activated",
        }
    }

    /// Every name [`Event::kind`] gives, in the order of the variants: the
    /// list the OpenAPI document and `docs/headless.md` are checked against.
    pub const KINDS: [&'static str; 23] = [
        "state",
        "user_message",
        "model_turn",
        "text_delta",
        "thought_delta",
        "tool_call",
        "tool_planned",
        "approval_requested",
        "approval_decided",
        "question_asked",
        "question_answered",
        "subagent_started",
        "subagent_ended",
        "tool_started",
        "tool_result",
        "tool_progress",
        "plan",
        "session_info",
        "usage",
        "notice",
        "retrying",
        "compaction",
        "skill_activated",
    ];

    /// The one line a person waiting is shown for a `retrying` event:
    /// `retrying in 2 s (429 Too Many Requests), 2 of 3`.
    pub fn retry_status(&self) -> Option<String> {
        let Event::Retrying {
            attempt,
            attempts,
            wait_ms,
            reason,
        } = self
        else {
            return None;
        };
        // Whole seconds, or tenths below ten seconds when not whole.
        let wait = if *wait_ms >= 10_000 || wait_ms % 1000 == 0 {
            format!("{}", wait_ms.div_ceil(1000))
        } else {
            format!("{:.1}", *wait_ms as f64 / 1000.0)
        };
        Some(format!(
            "retrying in {wait} s ({reason}), {attempt} of {attempts}"
        ))
    }

    /// The one line a person is shown for a `skill_activated` event:
    /// `skill pdf activated (read its SKILL.md)`.
    pub fn skill_status(&self) -> Option<String> {
        let Event::SkillActivated { name, by, .. } = self else {
            return None;
        };
        Some(match by {
            super::skills::ActivatedBy::Tool => format!("skill {name} activated"),
            super::skills::ActivatedBy::ReadFile => {
                format!("skill {name} activated (read its SKILL.md)")
            }
            super::skills::ActivatedBy::Person => format!("skill {name} activated by /{name}"),
        })
    }

    /// The id and the question of a `question_asked` event.
    pub fn question(&self) -> Option<(&str, Question)> {
        let Event::QuestionAsked {
            question_id,
            question,
            options,
            ..
        } = self
        else {
            return None;
        };
        Some((
            question_id,
            Question {
                text: question.clone(),
                options: options.clone(),
            },
        ))
    }

    /// What the event asks of whoever answers for the session, or settles:
    /// the one place that sorts every variant for the faces and relays that
    /// answer approvals and questions (a new variant is decided here, not at
    /// each of them).
    pub fn exchange(&self) -> Option<Exchange<'_>> {
        match self {
            Event::ApprovalRequested {
                approval_id,
                call_id,
                title,
                reason,
                ..
            } => Some(Exchange::ApprovalAsked {
                approval_id,
                call_id,
                title,
                reason,
            }),
            Event::ApprovalDecided {
                approval_id,
                call_id,
                decision,
            } => Some(Exchange::ApprovalDecided {
                approval_id,
                call_id,
                decision: *decision,
            }),
            Event::QuestionAsked {
                question_id,
                call_id,
                ..
            } => Some(Exchange::QuestionAsked {
                question_id,
                call_id,
            }),
            Event::QuestionAnswered {
                question_id,
                call_id,
                ..
            } => Some(Exchange::QuestionAnswered {
                question_id,
                call_id,
            }),
            Event::State { .. }
            | Event::UserMessage { .. }
            | Event::ModelTurn { .. }
            | Event::TextDelta { .. }
            | Event::ThoughtDelta { .. }
            | Event::ToolCall { .. }
            | Event::ToolPlanned { .. }
            | Event::SubagentStarted { .. }
            | Event::SubagentEnded { .. }
            | Event::ToolStarted { .. }
            | Event::ToolResult { .. }
            | Event::ToolProgress { .. }
            | Event::Plan { .. }
            | Event::SessionInfo { .. }
            | Event::Usage { .. }
            | Event::Notice { .. }
            | Event::Retrying { .. }
            | Event::Compaction { .. }
            | Event::SkillActivated { .. } => None,
        }
    }

    /// The terminal state this event announces, if it ends the run.
    pub fn terminal_state(&self) -> Option<RunState> {
        let Event::State { state, .. } = self else {
            return None;
        };
        state.is_terminal().then_some(*state)
    }
}

/// An approval or a question asked or settled, as [`Event::exchange`] picks
/// it out of a run's events.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exchange<'a> {
    /// A tool call waits for the person's decision.
    ApprovalAsked {
        approval_id: &'a str,
        call_id: &'a str,
        title: &'a str,
        /// Why the policy asks.
        reason: &'a str,
    },
    ApprovalDecided {
        approval_id: &'a str,
        call_id: &'a str,
        decision: ApprovalDecision,
    },
    /// The model asks the person (its text: [`Event::question`]).
    QuestionAsked {
        question_id: &'a str,
        call_id: &'a str,
    },
    QuestionAnswered {
        question_id: &'a str,
        call_id: &'a str,
    },
}

impl Exchange<'_> {
    /// The approval's or question's id, once it is settled: what a face
    /// asking the person withdraws.
    pub fn settled(&self) -> Option<&str> {
        match self {
            Exchange::ApprovalDecided { approval_id, .. } => Some(approval_id),
            Exchange::QuestionAnswered { question_id, .. } => Some(question_id),
            Exchange::ApprovalAsked { .. } | Exchange::QuestionAsked { .. } => None,
        }
    }
}

/// An event with its place on the tape.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EventRecord {
    pub session_id: SessionId,
    pub run_id: RunId,
    /// Position within the run, from 0 with no gaps.
    pub seq: u64,
    pub at: Millis,
    #[serde(flatten)]
    pub event: Event,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn retrying(wait_ms: u64) -> Event {
        Event::Retrying {
            attempt: 2,
            attempts: 3,
            wait_ms,
            reason: "429 Too Many Requests".into(),
        }
    }

    #[test]
    fn a_retry_reads_as_one_line_with_its_wait_reason_and_count() {
        assert_eq!(
            retrying(2000).retry_status().as_deref(),
            Some("retrying in 2 s (429 Too Many Requests), 2 of 3")
        );
        assert_eq!(
            retrying(1500).retry_status().as_deref(),
            Some("retrying in 1.5 s (429 Too Many Requests), 2 of 3")
        );
        assert_eq!(
            retrying(12_300).retry_status().as_deref(),
            Some("retrying in 13 s (429 Too Many Requests), 2 of 3")
        );
        assert_eq!(
            Event::Notice {
                message: "x".into()
            }
            .retry_status(),
            None
        );
        assert_eq!(retrying(1).kind(), "retrying");
    }

    /// Every event type is in the OpenAPI document's `EventRecord` and in
    /// the table of `docs/headless.md`, and nothing else is.
    #[test]
    fn every_event_type_is_in_the_schema_and_the_docs() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
        let schema: serde_json::Value = serde_json::from_str(
            &std::fs::read_to_string(root.join("schema/openapi.json")).unwrap(),
        )
        .unwrap();
        let listed: Vec<&str> =
            schema["components"]["schemas"]["EventRecord"]["properties"]["type"]["enum"]
                .as_array()
                .unwrap()
                .iter()
                .map(|v| v.as_str().unwrap())
                .collect();
        let mut kinds = Event::KINDS.to_vec();
        kinds.sort_unstable();
        let mut sorted = listed.clone();
        sorted.sort_unstable();
        assert_eq!(sorted, kinds, "schema/openapi.json EventRecord.type");
        let docs = std::fs::read_to_string(root.join("docs/headless.md")).unwrap();
        let mut documented: Vec<&str> = docs
            .lines()
            .filter_map(|line| line.strip_prefix("| `"))
            .filter_map(|rest| rest.split_once('`').map(|(name, _)| name))
            .filter(|name| Event::KINDS.contains(name))
            .collect();
        documented.sort_unstable();
        documented.dedup();
        assert_eq!(documented, kinds, "docs/headless.md event table");
    }

    #[test]
    fn state_machine_allows_only_the_documented_moves() {
        use RunState::*;
        let all = [Queued, Running, Waiting, Completed, Cancelled, Failed];
        let allowed: Vec<(RunState, RunState)> = all
            .iter()
            .flat_map(|from| all.iter().map(move |to| (*from, *to)))
            .filter(|(from, to)| from.can_become(*to))
            .collect();
        assert_eq!(
            allowed,
            vec![
                (Queued, Running),
                (Queued, Cancelled),
                (Queued, Failed),
                (Running, Waiting),
                (Running, Completed),
                (Running, Cancelled),
                (Running, Failed),
                (Waiting, Running),
                (Waiting, Completed),
                (Waiting, Cancelled),
                (Waiting, Failed),
            ]
        );
    }

    #[test]
    fn events_serialize_with_a_type_tag() {
        let record = EventRecord {
            session_id: SessionId::from_string("ses_1".into()),
            run_id: RunId::from_string("run_1".into()),
            seq: 3,
            at: 10,
            event: Event::TextDelta { text: "hi".into() },
        };
        let json = serde_json::to_value(&record).unwrap_or_default();
        assert_eq!(
            json,
            serde_json::json!({"session_id":"ses_1","run_id":"run_1","seq":3,"at":10,"type":"text_delta","text":"hi"})
        );
    }
}
