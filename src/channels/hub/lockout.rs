//! Wrong pairing codes, limited per sender: three within [`WINDOW`] lock
//! the sender out of `/pair` for the channel's `pairing_lockout` (a minute
//! unless configured), each further lockout twice as long up to
//! [`LONGEST`]; a right code forgets it all. Kept in the memory of the
//! process serving the channel (`docs/channels.md`, "Who may talk to it"):
//! a restart forgets it, and only one process serves an account at a time.

use std::collections::HashMap;
use std::time::{Duration, Instant};

/// Wrong codes within [`WINDOW`] that lock a sender out.
pub(super) const WRONG_CODES: usize = 3;
/// The time within which that many wrong codes lock a sender out.
pub(super) const WINDOW: Duration = Duration::from_secs(15 * 60);
/// The longest lockout (unless the first one configured is longer).
pub(super) const LONGEST: Duration = Duration::from_secs(60 * 60);
/// A sender with no wrong code for this long starts again from nothing.
const FORGET_AFTER: Duration = Duration::from_secs(24 * 60 * 60);

/// One sender's wrong codes.
#[derive(Debug, Default)]
struct Strikes {
    /// When the wrong codes since the last lockout came, within [`WINDOW`].
    wrong: Vec<Instant>,
    /// Lockouts so far: the next one lasts `first × 2^lockouts`.
    lockouts: u32,
    /// Locked out until then.
    until: Option<Instant>,
    /// The last wrong code.
    last: Option<Instant>,
}

/// Every sender's wrong codes on one channel account.
#[derive(Debug)]
pub(super) struct Lockouts {
    first: Duration,
    senders: HashMap<String, Strikes>,
}

/// What a wrong code came to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Wrong {
    /// Counted; this many more lock the sender out.
    Counted { left: usize },
    /// The sender is locked out for this long.
    LockedOut(Duration),
}

impl Lockouts {
    /// `first`: the first lockout's length.
    pub(super) fn new(first: Duration) -> Self {
        Self {
            first,
            senders: HashMap::new(),
        }
    }

    /// How long `sender` is still locked out, if they are.
    pub(super) fn locked(&self, sender: &str, now: Instant) -> Option<Duration> {
        let until = self.senders.get(sender)?.until?;
        (until > now).then(|| until - now)
    }

    /// Counts a wrong code of `sender`.
    pub(super) fn wrong(&mut self, sender: &str, now: Instant) -> Wrong {
        self.senders.retain(|_, s| {
            s.last
                .is_some_and(|last| now.saturating_duration_since(last) < FORGET_AFTER)
        });
        let first = self.first;
        let strikes = self.senders.entry(sender.to_owned()).or_default();
        strikes.last = Some(now);
        strikes
            .wrong
            .retain(|at| now.saturating_duration_since(*at) < WINDOW);
        strikes.wrong.push(now);
        if strikes.wrong.len() < WRONG_CODES {
            return Wrong::Counted {
                left: WRONG_CODES - strikes.wrong.len(),
            };
        }
        let longest = LONGEST.max(first);
        let wait = first
            .checked_mul(1_u32.checked_shl(strikes.lockouts).unwrap_or(u32::MAX))
            .map_or(longest, |wait| wait.min(longest));
        strikes.wrong.clear();
        strikes.lockouts = strikes.lockouts.saturating_add(1);
        strikes.until = Some(now + wait);
        Wrong::LockedOut(wait)
    }

    /// `sender` paired: their wrong codes are forgotten.
    pub(super) fn paired(&mut self, sender: &str) {
        self.senders.remove(sender);
    }
}

/// A wait as a person reads it, rounded up: `40 seconds`, `2 minutes`, `1 hour`.
pub(super) fn wait_text(wait: Duration) -> String {
    let secs = wait.as_secs() + u64::from(wait.subsec_nanos() > 0);
    let (n, unit) = if secs < 60 {
        (secs.max(1), "second")
    } else if secs < 60 * 60 {
        (secs.div_ceil(60), "minute")
    } else {
        (secs.div_ceil(60 * 60), "hour")
    };
    if n == 1 {
        format!("1 {unit}")
    } else {
        format!("{n} {unit}s")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MINUTE: Duration = Duration::from_secs(60);

    #[test]
    fn three_wrong_codes_lock_out_for_longer_each_time_up_to_an_hour() {
        let mut lockouts = Lockouts::new(MINUTE);
        let mut now = Instant::now();
        let mut waits = Vec::new();
        for _ in 0..8 {
            assert_eq!(lockouts.wrong("ada", now), Wrong::Counted { left: 2 });
            assert_eq!(lockouts.wrong("ada", now), Wrong::Counted { left: 1 });
            let Wrong::LockedOut(wait) = lockouts.wrong("ada", now) else {
                panic!("not locked out");
            };
            assert_eq!(lockouts.locked("ada", now), Some(wait));
            assert_eq!(lockouts.locked("bob", now), None, "per sender");
            now += wait;
            assert_eq!(lockouts.locked("ada", now), None);
            waits.push(wait.as_secs() / 60);
        }
        assert_eq!(waits, [1, 2, 4, 8, 16, 32, 60, 60]);
        // A right code forgets it all.
        lockouts.paired("ada");
        lockouts.wrong("ada", now);
        lockouts.wrong("ada", now);
        assert_eq!(lockouts.wrong("ada", now), Wrong::LockedOut(MINUTE));
    }

    #[test]
    fn wrong_codes_count_within_the_window_and_are_forgotten_after_a_day() {
        let mut lockouts = Lockouts::new(MINUTE);
        let start = Instant::now();
        lockouts.wrong("ada", start);
        lockouts.wrong("ada", start + Duration::from_secs(60));
        // The first is out of the window by the third.
        assert_eq!(
            lockouts.wrong("ada", start + WINDOW + Duration::from_secs(1)),
            Wrong::Counted { left: 1 }
        );
        let later = start + WINDOW + Duration::from_secs(2);
        lockouts.wrong("ada", later);
        assert_eq!(lockouts.locked("ada", later), Some(MINUTE));
        // A day without a wrong code: the next lockout is the first again.
        let next_day = later + FORGET_AFTER;
        lockouts.wrong("ada", next_day);
        lockouts.wrong("ada", next_day);
        assert_eq!(lockouts.wrong("ada", next_day), Wrong::LockedOut(MINUTE));
    }

    #[test]
    fn a_first_lockout_longer_than_an_hour_is_kept() {
        let mut lockouts = Lockouts::new(2 * LONGEST);
        let now = Instant::now();
        lockouts.wrong("ada", now);
        lockouts.wrong("ada", now);
        assert_eq!(lockouts.wrong("ada", now), Wrong::LockedOut(2 * LONGEST));
    }

    #[test]
    fn waits_read_rounded_up() {
        assert_eq!(wait_text(Duration::from_millis(300)), "1 second");
        assert_eq!(wait_text(Duration::from_millis(4001)), "5 seconds");
        assert_eq!(wait_text(MINUTE), "1 minute");
        assert_eq!(wait_text(Duration::from_secs(61)), "2 minutes");
        assert_eq!(wait_text(LONGEST), "1 hour");
        assert_eq!(wait_text(3 * LONGEST), "3 hours");
    }
}
