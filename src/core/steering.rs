//! Steering: a message a person sends while a run works is taken into that
//! run at its next turn boundary instead of waiting for the run to end.
//!
//! A [`SteerBox`] belongs to a live session. It is open while a prompt's
//! run works: `Runtime::steer` puts messages in, the agent loop takes them
//! before each model turn, and the loop closes it only when it ends with
//! nothing left (so a message put in is always either taken or refused,
//! never lost between the two).

use parking_lot::Mutex;

use super::ids::RunId;
use super::session::ContentPart;

#[derive(Default)]
pub struct SteerBox {
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    /// The run taking messages, while one does.
    open: Option<RunId>,
    waiting: Vec<Vec<ContentPart>>,
}

impl SteerBox {
    /// A run that takes steering starts.
    pub fn open(&self, run: RunId) {
        let mut state = self.state.lock();
        state.open = Some(run);
        state.waiting.clear();
    }

    /// Puts a message in: the run that will take it, or `None` when no run
    /// takes messages now.
    pub fn put(&self, content: Vec<ContentPart>) -> Option<RunId> {
        let mut state = self.state.lock();
        if state.open.is_some() {
            state.waiting.push(content);
        }
        state.open.clone()
    }

    /// The messages put in since the last take.
    pub fn take(&self) -> Vec<Vec<ContentPart>> {
        std::mem::take(&mut self.state.lock().waiting)
    }

    /// Closes the box if nothing waits (the run may end); else the messages
    /// that came meanwhile, and it stays open.
    pub fn close_if_empty(&self) -> Vec<Vec<ContentPart>> {
        let mut state = self.state.lock();
        if state.waiting.is_empty() {
            state.open = None;
        }
        std::mem::take(&mut state.waiting)
    }

    /// Closes the box whatever waits: what was left, for the conversation.
    pub fn close(&self) -> Vec<Vec<ContentPart>> {
        let mut state = self.state.lock();
        state.open = None;
        std::mem::take(&mut state.waiting)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(t: &str) -> Vec<ContentPart> {
        vec![ContentPart::Text { text: t.into() }]
    }

    #[test]
    fn a_message_is_taken_or_refused_never_lost() {
        let steer = SteerBox::default();
        let run = RunId::from_string("run_1".into());
        assert_eq!(steer.put(text("before any run")), None);
        steer.open(run.clone());
        assert_eq!(steer.put(text("one")), Some(run.clone()));
        assert_eq!(steer.take(), vec![text("one")]);
        assert!(steer.put(text("two")).is_some());
        // The run wanted to end, but a message came: it stays open.
        assert_eq!(steer.close_if_empty(), vec![text("two")]);
        assert!(steer.put(text("three")).is_some());
        assert_eq!(steer.close(), vec![text("three")]);
        assert_eq!(steer.put(text("after")), None);
    }
}
