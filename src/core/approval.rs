//! Approvals: a person's answer to "may this call run?", and the answers a
//! session remembers (`allow_always` / `reject_always`).

use serde::{Deserialize, Serialize};

/// What a person (or a timeout) answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ApprovalDecision {
    AllowOnce,
    AllowAlways,
    RejectOnce,
    RejectAlways,
    /// Nobody answered within the approval timeout; counts as a rejection.
    TimedOut,
    /// The run was cancelled while waiting.
    Cancelled,
    /// The face has nobody to ask (`pincer run` without `--approve`); counts
    /// as a rejection, and the model is told nobody could approve.
    Unattended,
}

impl ApprovalDecision {
    pub const OPTIONS: [ApprovalDecision; 4] = [
        ApprovalDecision::AllowOnce,
        ApprovalDecision::AllowAlways,
        ApprovalDecision::RejectOnce,
        ApprovalDecision::RejectAlways,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            ApprovalDecision::AllowOnce => "allow_once",
            ApprovalDecision::AllowAlways => "allow_always",
            ApprovalDecision::RejectOnce => "reject_once",
            ApprovalDecision::RejectAlways => "reject_always",
            ApprovalDecision::TimedOut => "timed_out",
            ApprovalDecision::Cancelled => "cancelled",
            ApprovalDecision::Unattended => "unattended",
        }
    }

    pub fn parse(value: &str) -> Option<Self> {
        [
            ApprovalDecision::AllowOnce,
            ApprovalDecision::AllowAlways,
            ApprovalDecision::RejectOnce,
            ApprovalDecision::RejectAlways,
            ApprovalDecision::TimedOut,
            ApprovalDecision::Cancelled,
            ApprovalDecision::Unattended,
        ]
        .into_iter()
        .find(|decision| decision.as_str() == value)
    }

    pub fn allows(self) -> bool {
        matches!(
            self,
            ApprovalDecision::AllowOnce | ApprovalDecision::AllowAlways
        )
    }
}

/// A remembered answer: every later call it covers is decided without asking.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Grant {
    pub tool: String,
    /// For the shell tool, the command (words joined by spaces) the answer covers;
    /// empty for other tools (the answer covers the whole tool).
    pub scope: String,
    pub allow: bool,
}

/// What a face needs to ask a person about a call.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ApprovalRequest {
    pub approval_id: String,
    pub call_id: String,
    pub tool: String,
}
