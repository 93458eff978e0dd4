//! What waits for a person's answer, per session: approvals and questions.
//! The runtime parks a call here, every face can list and answer it, and the
//! first answer wins.

use parking_lot::Mutex;
use std::collections::HashMap;
use std::sync::Arc;

use tokio::sync::oneshot;

use super::approval::ApprovalDecision;
use super::event::EventRecord;
use super::ids::SessionId;
use super::question::QuestionAnswer;

/// Approvals waiting for an answer.
pub type PendingApprovals = Pending<ApprovalDecision>;
/// Questions to the person (`ask_user`) waiting for an answer.
pub type PendingQuestions = Pending<QuestionAnswer>;

/// Requests waiting for an answer of type `T`, per session. The first answer wins.
pub struct Pending<T> {
    waiting: Mutex<HashMap<String, Waiting<T>>>,
}

impl<T> Default for Pending<T> {
    fn default() -> Self {
        Self {
            waiting: Mutex::new(HashMap::new()),
        }
    }
}

struct Waiting<T> {
    /// The sessions whose faces may see and answer it: the asking session,
    /// then (for a subagent's) the sessions it works for.
    sessions: Vec<SessionId>,
    answer: oneshot::Sender<T>,
    /// The event that asks (`approval_requested`, `question_asked`), once it
    /// is emitted: what faces that list requests (rather than watch events)
    /// show.
    request: Option<Arc<EventRecord>>,
}

impl<T> Pending<T> {
    /// Registers a request; the receiver gets the first answer.
    pub fn open(&self, session: &SessionId, id: &str) -> oneshot::Receiver<T> {
        self.open_for(vec![session.clone()], id)
    }

    /// Registers a request any of `sessions` may answer.
    pub fn open_for(&self, sessions: Vec<SessionId>, id: &str) -> oneshot::Receiver<T> {
        let (tx, rx) = oneshot::channel();
        self.waiting.lock().insert(
            id.to_owned(),
            Waiting {
                sessions,
                answer: tx,
                request: None,
            },
        );
        rx
    }

    /// Attaches the event that asks to a waiting request.
    pub fn describe(&self, id: &str, request: Arc<EventRecord>) {
        if let Some(waiting) = self.waiting.lock().get_mut(id) {
            waiting.request = Some(request);
        }
    }

    /// The events that asked of the requests still waiting (of one session,
    /// or of all), oldest first.
    pub fn requests(&self, session: Option<&SessionId>) -> Vec<Arc<EventRecord>> {
        let mut requests: Vec<Arc<EventRecord>> = self
            .waiting
            .lock()
            .values()
            .filter(|w| session.is_none_or(|s| w.sessions.contains(s)))
            .filter_map(|w| w.request.clone())
            .collect();
        requests.sort_by(|a, b| (a.at, &a.run_id, a.seq).cmp(&(b.at, &b.run_id, b.seq)));
        requests
    }

    /// Answers a request; false if it is not pending (answered, timed out, cancelled, unknown).
    pub fn answer(&self, session: &SessionId, id: &str, answer: T) -> bool {
        let mut waiting = self.waiting.lock();
        match waiting.get(id) {
            Some(w) if w.sessions.contains(session) => {}
            _ => return false,
        }
        match waiting.remove(id) {
            Some(w) => w.answer.send(answer).is_ok(),
            None => false,
        }
    }

    /// Forgets a request that ended without an answer.
    pub fn close(&self, id: &str) {
        self.waiting.lock().remove(id);
    }

    /// Ids of the requests of a session still waiting.
    pub fn waiting(&self, session: &SessionId) -> Vec<String> {
        let mut ids: Vec<String> = self
            .waiting
            .lock()
            .iter()
            .filter(|(_, w)| w.sessions.contains(session))
            .map(|(id, _)| id.clone())
            .collect();
        ids.sort();
        ids
    }
}
