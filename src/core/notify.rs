//! Wake-ups when the journal may have changed: a commit by any process that
//! shares it. A face following a session another process runs reads that
//! process's committed events from the tape when woken
//! ([`super::subscription::Subscription`]): a wake-up is a hint to look
//! again, never the news itself, so nothing is lost when wake-ups merge.

use tokio::sync::watch;

/// Tells whoever watches that the journal may have changed.
pub trait Notifier: Send + Sync {
    /// A counter that moves on after commits (of any process sharing the
    /// journal); several commits may move it once.
    fn watch(&self) -> watch::Receiver<u64>;
}

/// A [`Notifier`] for one process: whoever writes calls [`Local::bump`].
#[derive(Debug)]
pub struct Local {
    changes: watch::Sender<u64>,
}

impl Default for Local {
    fn default() -> Self {
        Self {
            changes: watch::Sender::new(0),
        }
    }
}

impl Local {
    /// Something changed.
    pub fn bump(&self) {
        self.changes.send_modify(|n| *n = n.wrapping_add(1));
    }
}

impl Notifier for Local {
    fn watch(&self) -> watch::Receiver<u64> {
        self.changes.subscribe()
    }
}
