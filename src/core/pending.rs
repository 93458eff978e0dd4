//! Approvals waiting for a person's answer, per session: the runtime parks a
//! call here, every face can list and answer it, and the first answer wins.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use tokio::sync::oneshot;

use super::approval::ApprovalDecision;
use super::event::EventRecord;
use super::ids::SessionId;

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
