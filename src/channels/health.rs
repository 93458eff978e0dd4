//! A channel account's health as the process serving it sees it: whether
//! the platform answers, when the last event came, the last error. Kept in
//! memory (`GET /v1/channels`) and in the store as the account's `status`
//! cursor, written when it changes and at most every 30 s for events
//! (`pincer channels status` reads it from any process).

use parking_lot::Mutex;

pub use crate::core::channel::AccountStatus as Status;
use crate::core::session::now_millis;

/// How often an event alone is written to the store.
const EVENT_EVERY_MS: i64 = 30_000;

/// The name of the cursor holding it.
pub const CURSOR: &str = "status";

/// The live status, and when an event was last written.
#[derive(Debug, Default)]
pub struct Health {
    status: Mutex<Status>,
    written_event_at: Mutex<i64>,
}

impl Health {
    pub fn status(&self) -> Status {
        self.status.lock().clone()
    }

    /// The platform answered; `Some` with the status to write when that is news.
    pub fn up(&self) -> Option<Status> {
        let mut status = self.status.lock();
        if status.connected == Some(true) {
            return None;
        }
        status.connected = Some(true);
        status.since = Some(now_millis());
        Some(status.clone())
    }

    /// The platform did not answer (`error`); the status to write.
    pub fn down(&self, error: &str) -> Status {
        let mut status = self.status.lock();
        let now = now_millis();
        if status.connected != Some(false) {
            status.connected = Some(false);
            status.since = Some(now);
        }
        status.last_error = Some(error.chars().take(300).collect());
        status.last_error_at = Some(now);
        status.clone()
    }

    /// An inbound event; the status to write when the last write of one is
    /// `EVENT_EVERY_MS` old.
    pub fn event(&self) -> Option<Status> {
        let now = now_millis();
        let mut status = self.status.lock();
        status.last_event_at = Some(now);
        let mut written = self.written_event_at.lock();
        if now - *written < EVENT_EVERY_MS {
            return None;
        }
        *written = now;
        Some(status.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn news_is_written_and_repeats_are_not() {
        let health = Health::default();
        assert_eq!(health.status().connected, None);
        let up = health.up().unwrap();
        assert_eq!(up.connected, Some(true));
        assert!(health.up().is_none(), "already up");
        let down = health.down("connection refused");
        assert_eq!(down.connected, Some(false));
        assert_eq!(down.last_error.as_deref(), Some("connection refused"));
        let since = down.since;
        assert_eq!(health.down("again").since, since, "still down since then");
        assert!(health.event().is_some(), "the first event is written");
        assert!(health.event().is_none(), "the next within 30 s is not");
        assert!(health.status().last_event_at.is_some());
        let back: Status =
            serde_json::from_str(&serde_json::to_string(&health.status()).unwrap()).unwrap();
        assert_eq!(back, health.status());
    }
}
