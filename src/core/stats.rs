//! Counters the runtime keeps about itself, for whoever reports on it (the
//! HTTP face renders them at `/metrics`).
//!
//! Plain atomics: the core knows no metrics format. Counts only grow; a reader
//! takes a [`StatsSnapshot`] and renders it however it likes.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use super::receipt::Verdict;

/// Every verdict a tool call can get, in the order snapshots list them.
pub const VERDICTS: [Verdict; 6] = [
    Verdict::Allowed,
    Verdict::Approved,
    Verdict::Denied,
    Verdict::Rejected,
    Verdict::Invalid,
    Verdict::Cancelled,
];

/// Upper bounds, in seconds, of the provider latency histogram's buckets.
pub const LATENCY_BUCKETS: [f64; 12] = [
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
];

/// The runtime's counters; shared by every run.
#[derive(Debug, Default)]
pub struct Stats {
    /// Tool calls that got a result, by verdict (indexed like [`VERDICTS`]).
    tool_calls: [AtomicU64; VERDICTS.len()],
    /// Time from the start of a model turn to the provider's first output.
    first_output: Histogram,
    /// Wrong pairing codes and the lockouts they led to, by chat channel.
    pairing: parking_lot::Mutex<std::collections::BTreeMap<String, PairingCounts>>,
}

/// What a chat channel's `/pair` refused: wrong codes, and the lockouts
/// they led to.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PairingCounts {
    pub failures: u64,
    pub lockouts: u64,
}

/// A copy of the counters at one moment.
#[derive(Debug, Clone, PartialEq)]
pub struct StatsSnapshot {
    /// Tool calls by verdict.
    pub tool_calls: Vec<(Verdict, u64)>,
    /// Provider latency to first output: observations per bucket (upper
    /// bound in seconds, not cumulative, the last bound infinite), then the
    /// sum in seconds and the count.
    pub first_output_buckets: Vec<(f64, u64)>,
    pub first_output_sum_secs: f64,
    pub first_output_count: u64,
    /// Pairing refusals by chat channel, in the order of their names.
    pub pairing: Vec<(String, PairingCounts)>,
}

impl Stats {
    pub fn tool_call(&self, verdict: Verdict) {
        self.tool_calls[verdict_index(verdict)].fetch_add(1, Ordering::Relaxed);
    }

    pub fn first_output(&self, latency: Duration) {
        self.first_output.observe(latency);
    }

    /// A wrong pairing code sent to `channel`.
    pub fn pairing_failure(&self, channel: &str) {
        self.pairing
            .lock()
            .entry(channel.to_owned())
            .or_default()
            .failures += 1;
    }

    /// A sender of `channel` locked out of pairing for a while.
    pub fn pairing_lockout(&self, channel: &str) {
        self.pairing
            .lock()
            .entry(channel.to_owned())
            .or_default()
            .lockouts += 1;
    }

    pub fn snapshot(&self) -> StatsSnapshot {
        let (buckets, sum, count) = self.first_output.snapshot();
        StatsSnapshot {
            tool_calls: VERDICTS
                .iter()
                .map(|v| {
                    (
                        *v,
                        self.tool_calls[verdict_index(*v)].load(Ordering::Relaxed),
                    )
                })
                .collect(),
            first_output_buckets: buckets,
            first_output_sum_secs: sum,
            first_output_count: count,
            pairing: self
                .pairing
                .lock()
                .iter()
                .map(|(channel, counts)| (channel.clone(), *counts))
                .collect(),
        }
    }
}

fn verdict_index(verdict: Verdict) -> usize {
    match verdict {
        Verdict::Allowed => 0,
        Verdict::Approved => 1,
        Verdict::Denied => 2,
        Verdict::Rejected => 3,
        Verdict::Invalid => 4,
        Verdict::Cancelled => 5,
    }
}

/// A fixed-bucket histogram of durations.
#[derive(Debug, Default)]
struct Histogram {
    /// Observations per bucket (not cumulative); the last slot is `+Inf`.
    buckets: [AtomicU64; LATENCY_BUCKETS.len() + 1],
    sum_micros: AtomicU64,
    count: AtomicU64,
}

impl Histogram {
    fn observe(&self, value: Duration) {
        let secs = value.as_secs_f64();
        let slot = LATENCY_BUCKETS
            .iter()
            .position(|bound| secs <= *bound)
            .unwrap_or(LATENCY_BUCKETS.len());
        self.buckets[slot].fetch_add(1, Ordering::Relaxed);
        let micros = u64::try_from(value.as_micros()).unwrap_or(u64::MAX);
        self.sum_micros.fetch_add(micros, Ordering::Relaxed);
        self.count.fetch_add(1, Ordering::Relaxed);
    }

    /// Observations per bucket (the last bound infinite), the sum in seconds, the count.
    fn snapshot(&self) -> (Vec<(f64, u64)>, f64, u64) {
        let buckets = LATENCY_BUCKETS
            .iter()
            .chain([f64::INFINITY].iter())
            .enumerate()
            .map(|(i, bound)| (*bound, self.buckets[i].load(Ordering::Relaxed)))
            .collect();
        let sum = self.sum_micros.load(Ordering::Relaxed) as f64 / 1e6;
        (buckets, sum, self.count.load(Ordering::Relaxed))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_by_verdict_and_per_bucket() {
        let stats = Stats::default();
        stats.tool_call(Verdict::Denied);
        stats.tool_call(Verdict::Denied);
        stats.tool_call(Verdict::Allowed);
        stats.first_output(Duration::from_millis(3));
        stats.first_output(Duration::from_millis(40));
        stats.first_output(Duration::from_secs(100));
        let snap = stats.snapshot();
        assert_eq!(snap.tool_calls[0], (Verdict::Allowed, 1));
        assert_eq!(snap.tool_calls[2], (Verdict::Denied, 2));
        assert_eq!(snap.first_output_buckets[0], (0.005, 1));
        assert_eq!(snap.first_output_buckets[3], (0.05, 1));
        assert_eq!(snap.first_output_buckets[11], (30.0, 0));
        assert_eq!(snap.first_output_buckets[12], (f64::INFINITY, 1));
        assert_eq!(snap.first_output_count, 3);
        assert!((snap.first_output_sum_secs - 100.043).abs() < 1e-6);
        assert!(snap.pairing.is_empty());
        stats.pairing_failure("telegram");
        stats.pairing_failure("telegram");
        stats.pairing_lockout("telegram");
        stats.pairing_failure("irc");
        assert_eq!(
            stats.snapshot().pairing,
            vec![
                (
                    "irc".to_owned(),
                    PairingCounts {
                        failures: 1,
                        lockouts: 0
                    }
                ),
                (
                    "telegram".to_owned(),
                    PairingCounts {
                        failures: 2,
                        lockouts: 1
                    }
                ),
            ]
        );
    }
}
