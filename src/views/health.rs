//! The server's recent runs and the instances sharing its store, as `GET
//! /v1/health/summary` (and JSON-RPC `health.summary`) show them.

use schemars::JsonSchema;
use serde::Serialize;

use crate::core::event::RunState;
use crate::core::journal::RunWindow;
use crate::core::lease::Instance;
use crate::core::models::Cost;
use crate::core::session::Millis;

/// The runs created in the last `window_secs` (in every session, by every
/// process sharing the store) and who shares the store.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
#[schemars(rename = "HealthSummary", deny_unknown_fields)]
pub struct HealthSummary {
    pub window_secs: u64,
    /// The window's start, in milliseconds since the Unix epoch: runs
    /// created at or after it count
    pub since: Millis,
    /// When the summary was made (the window's end), in milliseconds since
    /// the Unix epoch
    pub until: Millis,
    pub runs: RunsSummary,
    /// How wide each of `buckets` is
    pub bucket_secs: u64,
    /// The window cut in `bucket_secs` slices, oldest first, each with the
    /// runs created in it (empty ones included)
    pub buckets: Vec<RunBucket>,
    /// The store's backend
    pub store: StoreKind,
    /// PostgreSQL: the instances holding their lease on the store, oldest
    /// first; null on SQLite (one machine's processes share it)
    pub instances: Option<Vec<InstanceView>>,
}

/// The runs of the window, summed.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct RunsSummary {
    pub total: u64,
    pub by_state: RunStates,
    /// The runs that failed (`by_state.failed`)
    pub failures: u64,
    pub input_tokens: u64,
    pub output_tokens: u64,
    /// What they cost, per currency (runs whose models have no price are
    /// not in it)
    pub cost: Vec<Cost>,
    pub latency_ms: Latency,
}

/// How many runs are in each state.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct RunStates {
    pub queued: u64,
    pub running: u64,
    pub waiting: u64,
    pub completed: u64,
    pub cancelled: u64,
    pub failed: u64,
}

/// From a run's start to its end, over the runs of the window that ended
/// after they started.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct Latency {
    /// How many runs the figures are of
    pub runs: u64,
    /// The median (nearest rank); null when no run ended
    pub p50: Option<Millis>,
    /// The 95th percentile (nearest rank); null when no run ended
    pub p95: Option<Millis>,
}

/// The runs created in one slice of the window.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct RunBucket {
    /// The slice's start, in milliseconds since the Unix epoch
    pub start: Millis,
    pub runs: u64,
    /// Of those, the ones that failed
    pub failed: u64,
}

/// Where the store is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum StoreKind {
    Sqlite,
    Postgres,
}

/// An instance sharing a PostgreSQL store (`pincer store status`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, JsonSchema)]
#[schemars(rename = "Instance", deny_unknown_fields)]
pub struct InstanceView {
    /// Its tag (`pid:start`), as runs name their owner
    pub instance_id: String,
    pub host: String,
    pub pid: i64,
    /// Milliseconds since the Unix epoch
    pub started_at: Millis,
    /// When it last renewed its lease
    pub renewed_at: Millis,
    /// When its lease lapses unless renewed
    pub lease_expires_at: Millis,
    /// Its runs not ended yet
    pub open_runs: i64,
    /// Whether this instance made the summary
    pub answering: bool,
}

impl From<&Instance> for InstanceView {
    fn from(instance: &Instance) -> Self {
        InstanceView {
            instance_id: instance.tag.clone(),
            host: instance.host.clone(),
            pid: instance.pid,
            started_at: instance.started_at,
            renewed_at: instance.renewed_at,
            lease_expires_at: instance.lease_expires_at,
            open_runs: instance.open_runs,
            answering: instance.this,
        }
    }
}

impl HealthSummary {
    /// The summary of `window` (`Counts::run_window` of `until - window_ms`
    /// with buckets `bucket_ms` wide) and of the store's `instances`
    /// (`None`: SQLite).
    pub fn new(
        window: &RunWindow,
        until: Millis,
        window_ms: i64,
        bucket_ms: i64,
        instances: Option<&[Instance]>,
    ) -> Self {
        let since = until - window_ms;
        let bucket_ms = bucket_ms.max(1);
        let mut by_state = RunStates::default();
        for (state, n) in &window.by_state {
            let slot = match state {
                RunState::Queued => &mut by_state.queued,
                RunState::Running => &mut by_state.running,
                RunState::Waiting => &mut by_state.waiting,
                RunState::Completed => &mut by_state.completed,
                RunState::Cancelled => &mut by_state.cancelled,
                RunState::Failed => &mut by_state.failed,
            };
            *slot += n;
        }
        let count = u64::try_from(window_ms.div_euclid(bucket_ms)).unwrap_or(0)
            + u64::from(window_ms.rem_euclid(bucket_ms) > 0);
        let mut buckets: Vec<RunBucket> = (0..count.max(1))
            .map(|i| RunBucket {
                start: since + i64::try_from(i).unwrap_or(0) * bucket_ms,
                runs: 0,
                failed: 0,
            })
            .collect();
        for bucket in &window.buckets {
            // A run stamped after `until` (another instance's clock ahead)
            // counts in the last slice.
            let last = buckets.len() - 1;
            let at = usize::try_from(bucket.index).map_or(last, |i| i.min(last));
            buckets[at].runs += bucket.runs;
            buckets[at].failed += bucket.failed;
        }
        HealthSummary {
            window_secs: u64::try_from(window_ms / 1000).unwrap_or(0),
            since,
            until,
            runs: RunsSummary {
                total: window.by_state.iter().map(|(_, n)| n).sum(),
                by_state,
                failures: by_state.failed,
                input_tokens: window.input_tokens,
                output_tokens: window.output_tokens,
                cost: window.cost.clone(),
                latency_ms: Latency {
                    runs: window.ended,
                    p50: window.p50_ms,
                    p95: window.p95_ms,
                },
            },
            bucket_secs: u64::try_from(bucket_ms / 1000).unwrap_or(0),
            buckets,
            store: if instances.is_some() {
                StoreKind::Postgres
            } else {
                StoreKind::Sqlite
            },
            instances: instances.map(|list| list.iter().map(InstanceView::from).collect()),
        }
    }
}
