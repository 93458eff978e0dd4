//! Time as a port: the composition root hands the runtime a [`Clock`], so
//! what depends on the time of day or on time passing (a lease's expiry, the
//! daily budget's midnight, memory recency, later schedules) is tested by
//! setting the time, not by sleeping.

use std::sync::atomic::{AtomicI64, Ordering};

use super::session::Millis;

/// What time it is, in milliseconds since the Unix epoch.
pub trait Clock: Send + Sync {
    fn now_millis(&self) -> Millis;
}

/// The machine's clock.
#[derive(Debug, Default, Clone, Copy)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now_millis(&self) -> Millis {
        super::session::now_millis()
    }
}

/// A clock that moves only when told: for tests of time-driven behaviour.
#[derive(Debug, Default)]
pub struct ManualClock(AtomicI64);

impl ManualClock {
    /// A clock showing `at`.
    pub fn at(at: Millis) -> Self {
        Self(AtomicI64::new(at))
    }

    pub fn set(&self, at: Millis) {
        self.0.store(at, Ordering::SeqCst);
    }

    pub fn advance(&self, by: Millis) {
        self.0.fetch_add(by, Ordering::SeqCst);
    }
}

impl Clock for ManualClock {
    fn now_millis(&self) -> Millis {
        self.0.load(Ordering::SeqCst)
    }
}
