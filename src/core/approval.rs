//! Approvals: a person's answer to "may this call run?", and the answers a
//! session remembers (`allow_always` / `reject_always`).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use serde::{Deserialize, Serialize};
use tokio::sync::oneshot;

use super::event::EventRecord;
use super::ids::SessionId;

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

/// Approvals waiting for an answer, per session. The first answer wins.
#[derive(Default)]
pub struct PendingApprovals {
    waiting: Mutex<HashMap<String, Waiting>>,
}

struct Waiting {
    session: SessionId,
    answer: oneshot::Sender<ApprovalDecision>,
    /// The `approval_requested` event, once it is emitted: what faces that
    /// list approvals (rather than watch events) show.
    request: Option<Arc<EventRecord>>,
}

impl PendingApprovals {
    /// Registers an approval; the receiver gets the first answer.
    pub fn open(
        &self,
        session: &SessionId,
        approval_id: &str,
    ) -> oneshot::Receiver<ApprovalDecision> {
        let (tx, rx) = oneshot::channel();
        lock(&self.waiting).insert(
            approval_id.to_owned(),
            Waiting {
                session: session.clone(),
                answer: tx,
                request: None,
            },
        );
        rx
    }

    /// Attaches the `approval_requested` event to a waiting approval.
    pub fn describe(&self, approval_id: &str, request: Arc<EventRecord>) {
        if let Some(waiting) = lock(&self.waiting).get_mut(approval_id) {
            waiting.request = Some(request);
        }
    }

    /// The `approval_requested` events of the approvals still waiting (of one
    /// session, or of all), oldest first.
    pub fn requests(&self, session: Option<&SessionId>) -> Vec<Arc<EventRecord>> {
        let mut requests: Vec<Arc<EventRecord>> = lock(&self.waiting)
            .values()
            .filter(|w| session.is_none_or(|s| *s == w.session))
            .filter_map(|w| w.request.clone())
            .collect();
        requests.sort_by(|a, b| (a.at, &a.run_id, a.seq).cmp(&(b.at, &b.run_id, b.seq)));
        requests
    }

    /// Answers an approval; false if it is not pending (answered, timed out, cancelled, unknown).
    pub fn answer(
        &self,
        session: &SessionId,
        approval_id: &str,
        decision: ApprovalDecision,
    ) -> bool {
        let mut waiting = lock(&self.waiting);
        match waiting.get(approval_id) {
            Some(w) if w.session == *session => {}
            _ => return false,
        }
        match waiting.remove(approval_id) {
            Some(w) => w.answer.send(decision).is_ok(),
            None => false,
        }
    }

    /// Forgets an approval that ended without an answer.
    pub fn close(&self, approval_id: &str) {
        lock(&self.waiting).remove(approval_id);
    }

    /// Ids of the approvals of a session still waiting.
    pub fn waiting(&self, session: &SessionId) -> Vec<String> {
        let mut ids: Vec<String> = lock(&self.waiting)
            .iter()
            .filter(|(_, w)| w.session == *session)
            .map(|(id, _)| id.clone())
            .collect();
        ids.sort();
        ids
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}
