//! `GET /metrics`: OpenMetrics text (which Prometheus scrapes), gathered at
//! scrape time.
//!
//! A scrape first takes a [`Snapshot`] (store counts are async queries, the
//! runtime's counters are atomics), then encodes it with `prometheus-client`.
//! A new gauge is a field on `Snapshot`, one line in [`snapshot`] to fill it,
//! and one block in `Collector::encode` to write it.

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::registry::Registry;

use super::error::ApiError;
use crate::core::channel::IntentStatus;
use crate::core::event::RunState;
use crate::core::journal::Counts;
use crate::core::runtime::Runtime;
use crate::core::stats::StatsSnapshot;

/// Every run state, so a state with no runs reads 0 rather than vanishing.
const STATES: [RunState; 6] = [
    RunState::Queued,
    RunState::Running,
    RunState::Waiting,
    RunState::Completed,
    RunState::Cancelled,
    RunState::Failed,
];

/// What one scrape reports.
#[derive(Debug, Clone)]
pub struct Snapshot {
    /// Runs by state, from the store (every process sharing the database).
    pub runs: Vec<(RunState, u64)>,
    /// Sessions with a worker in this process.
    pub live_sessions: u64,
    /// Tool calls and provider latency, from this process's runtime.
    pub stats: StatsSnapshot,
    /// Chat send intents by channel and status, from the store.
    pub outbox: Vec<(String, IntentStatus, u64)>,
}

/// Gathers the figures of one scrape.
pub async fn snapshot(runtime: &Runtime, journal: &dyn Counts) -> Result<Snapshot, ApiError> {
    let counts = journal.run_counts().await.map_err(|err| {
        tracing::error!(error = %err, "cannot count runs for /metrics");
        ApiError::internal(format!("cannot count runs: {err}"))
    })?;
    let runs = STATES
        .iter()
        .map(|state| {
            let count = counts
                .iter()
                .find(|(s, _)| s == state)
                .map_or(0, |(_, n)| *n);
            (*state, count)
        })
        .collect();
    let outbox = journal.intent_counts().await.map_err(|err| {
        tracing::error!(error = %err, "cannot count send intents for /metrics");
        ApiError::internal(format!("cannot count send intents: {err}"))
    })?;
    Ok(Snapshot {
        runs,
        live_sessions: runtime.live_sessions() as u64,
        stats: runtime.stats().snapshot(),
        outbox,
    })
}

/// The snapshot in the OpenMetrics text format.
pub fn render(snapshot: Snapshot) -> Result<String, ApiError> {
    let mut registry = Registry::with_prefix("pincer");
    registry.register_collector(Box::new(snapshot));
    let mut text = String::new();
    prometheus_client::encoding::text::encode(&mut text, &registry)
        .map_err(|err| ApiError::internal(format!("cannot encode metrics: {err}")))?;
    Ok(text)
}

impl Collector for Snapshot {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let mut family = encoder.encode_descriptor(
            "runs",
            "Runs in the store by state",
            None,
            MetricType::Gauge,
        )?;
        for (state, count) in &self.runs {
            let labels = [("state", state.as_str())];
            ConstGauge::new(*count as i64).encode(family.encode_family(&labels)?)?;
        }

        let gauge = ConstGauge::new(self.live_sessions as i64);
        gauge.encode(encoder.encode_descriptor(
            "live_sessions",
            "Sessions with a worker in this process",
            None,
            gauge.metric_type(),
        )?)?;

        let mut family = encoder.encode_descriptor(
            "tool_calls",
            "Tool calls that got a result, by the gate's verdict",
            None,
            MetricType::Counter,
        )?;
        for (verdict, count) in &self.stats.tool_calls {
            let labels = [("verdict", verdict.as_str())];
            ConstCounter::new(*count).encode(family.encode_family(&labels)?)?;
        }

        let stats = &self.stats;
        encoder
            .encode_descriptor(
                "provider_first_output_seconds",
                "Time from the start of a model turn to the provider's first output",
                None,
                MetricType::Histogram,
            )?
            .encode_histogram::<prometheus_client::encoding::NoLabelSet>(
                stats.first_output_sum_secs,
                stats.first_output_count,
                &stats.first_output_buckets,
                None,
            )?;

        let mut channels: Vec<&str> = self.outbox.iter().map(|(c, _, _)| c.as_str()).collect();
        channels.sort_unstable();
        channels.dedup();
        let sum = |channel: &str, keep: fn(IntentStatus) -> bool| -> i64 {
            self.outbox
                .iter()
                .filter(|(c, s, _)| c == channel && keep(*s))
                .map(|(_, _, n)| *n as i64)
                .sum()
        };
        let mut family = encoder.encode_descriptor(
            "outbox_depth",
            "Chat messages decided but not yet delivered (held, pending, sending, committing)",
            None,
            MetricType::Gauge,
        )?;
        for channel in &channels {
            ConstGauge::new(sum(channel, IntentStatus::is_open))
                .encode(family.encode_family(&[("channel", *channel)])?)?;
        }
        let mut family = encoder.encode_descriptor(
            "delivery_failures",
            "Chat messages that will not be delivered (failed, unknown after send, expired)",
            None,
            MetricType::Gauge,
        )?;
        for channel in &channels {
            let failed = |s: IntentStatus| {
                matches!(
                    s,
                    IntentStatus::Failed | IntentStatus::UnknownAfterSend | IntentStatus::Expired
                )
            };
            ConstGauge::new(sum(channel, failed))
                .encode(family.encode_family(&[("channel", *channel)])?)?;
        }
        let mut family = encoder.encode_descriptor(
            "outbox_intents",
            "Chat send intents by channel and status",
            None,
            MetricType::Gauge,
        )?;
        for (channel, status, count) in &self.outbox {
            let labels = [("channel", channel.as_str()), ("status", status.as_str())];
            ConstGauge::new(*count as i64).encode(family.encode_family(&labels)?)?;
        }

        let mut family = encoder.encode_descriptor(
            "channel_pairing_failures",
            "Wrong pairing codes sent to a chat channel, counted by this process",
            None,
            MetricType::Counter,
        )?;
        for (channel, counts) in &self.stats.pairing {
            ConstCounter::new(counts.failures)
                .encode(family.encode_family(&[("channel", channel.as_str())])?)?;
        }
        let mut family = encoder.encode_descriptor(
            "channel_pairing_lockouts",
            "Senders refused pairing for a while after too many wrong codes, counted by this process",
            None,
            MetricType::Counter,
        )?;
        for (channel, counts) in &self.stats.pairing {
            ConstCounter::new(counts.lockouts)
                .encode(family.encode_family(&[("channel", channel.as_str())])?)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::receipt::Verdict;

    #[test]
    fn renders_every_family_in_the_text_format() {
        let snapshot = Snapshot {
            runs: STATES.iter().map(|s| (*s, 2)).collect(),
            live_sessions: 3,
            stats: StatsSnapshot {
                tool_calls: vec![(Verdict::Allowed, 4), (Verdict::Denied, 1)],
                first_output_buckets: vec![(0.01, 1), (0.1, 1), (f64::INFINITY, 1)],
                first_output_sum_secs: 0.06,
                first_output_count: 3,
                pairing: vec![(
                    "telegram".into(),
                    crate::core::stats::PairingCounts {
                        failures: 6,
                        lockouts: 2,
                    },
                )],
            },
            outbox: vec![
                ("telegram".into(), IntentStatus::Pending, 2),
                ("telegram".into(), IntentStatus::Sent, 5),
                ("telegram".into(), IntentStatus::UnknownAfterSend, 1),
                ("telegram".into(), IntentStatus::Expired, 1),
            ],
        };
        let text = render(snapshot).unwrap_or_else(|e| panic!("{e:?}"));
        for expected in [
            "# TYPE pincer_runs gauge",
            "pincer_runs{state=\"completed\"} 2",
            "pincer_live_sessions 3",
            "# TYPE pincer_tool_calls counter",
            "pincer_tool_calls_total{verdict=\"denied\"} 1",
            "# TYPE pincer_provider_first_output_seconds histogram",
            "pincer_provider_first_output_seconds_bucket{le=\"0.1\"} 2",
            "pincer_provider_first_output_seconds_bucket{le=\"+Inf\"} 3",
            "pincer_provider_first_output_seconds_count 3",
            "pincer_outbox_depth{channel=\"telegram\"} 2",
            "pincer_delivery_failures{channel=\"telegram\"} 2",
            "pincer_outbox_intents{channel=\"telegram\",status=\"sent\"} 5",
            "# TYPE pincer_channel_pairing_failures counter",
            "pincer_channel_pairing_failures_total{channel=\"telegram\"} 6",
            "pincer_channel_pairing_lockouts_total{channel=\"telegram\"} 2",
        ] {
            assert!(text.contains(expected), "{expected} missing from:\n{text}");
        }
    }
}
