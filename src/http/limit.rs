//! Per-token rate limits: a token bucket per token (`governor`, GCRA).

use std::num::NonZeroU32;

use governor::clock::{Clock, DefaultClock};
use governor::{DefaultKeyedRateLimiter, Quota, RateLimiter};

/// The steady rate and the burst above it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RateLimit {
    pub per_minute: NonZeroU32,
    pub burst: NonZeroU32,
}

pub struct Limiter {
    buckets: DefaultKeyedRateLimiter<String>,
    clock: DefaultClock,
}

impl Limiter {
    pub fn new(limit: RateLimit) -> Self {
        let quota = Quota::per_minute(limit.per_minute).allow_burst(limit.burst);
        Self {
            buckets: RateLimiter::keyed(quota),
            clock: DefaultClock::default(),
        }
    }

    /// Takes one request from `key`'s bucket; when it is empty, the whole
    /// seconds until the next request would pass (at least 1).
    pub fn check(&self, key: &str) -> Result<(), u64> {
        match self.buckets.check_key(&key.to_owned()) {
            Ok(()) => Ok(()),
            Err(not_until) => {
                let wait = not_until.wait_time_from(self.clock.now());
                let secs = wait.as_secs() + u64::from(wait.subsec_nanos() > 0);
                Err(secs.max(1))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_burst_passes_then_requests_wait_with_a_retry_after() {
        let limiter = Limiter::new(RateLimit {
            per_minute: NonZeroU32::MIN.saturating_add(59),
            burst: NonZeroU32::MIN.saturating_add(2),
        });
        for _ in 0..3 {
            assert_eq!(limiter.check("a"), Ok(()));
        }
        let wait = limiter.check("a").err().unwrap_or_default();
        assert!((1..=1).contains(&wait), "{wait}");
        assert_eq!(limiter.check("b"), Ok(()), "each token has its own bucket");
    }
}
