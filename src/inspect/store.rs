//! `pincer store migrate` and `pincer store status`: the backend the
//! configuration names (SQLite in the data directory, or PostgreSQL),
//! its schema version and, on PostgreSQL, the instances sharing it.

use serde_json::json;

use super::print;
use crate::app::{Failure, Flags, exit};
use crate::cli::StoreCommand;
use crate::core::event::RunState;
use crate::store::Target;

pub async fn store(flags: &Flags, command: &StoreCommand) -> Result<u8, Failure> {
    let config = crate::app::load_config(flags).map_err(Failure::usage)?;
    let target = config.store_target();
    // Opening migrates (under an advisory lock on PostgreSQL), refusing a
    // schema newer than this pincer knows.
    let (store, _) = crate::store::open(&target).await.map_err(Failure::failed)?;
    let result = match command {
        StoreCommand::Migrate => {
            let version = match store.postgres() {
                Some(pg) => pg.status().await.map(|status| status.version),
                None => Ok(crate::store::schema_version()),
            };
            version
                .map_err(Failure::failed)
                .and_then(|version| print(&format!("{target}: schema version {version}\n")))
        }
        StoreCommand::Status { json } => status(&*store, &target, *json).await,
    };
    store.shutdown();
    result.map(|()| exit::OK)
}

async fn status(
    store: &dyn crate::store::Backend,
    target: &Target,
    json_output: bool,
) -> Result<(), Failure> {
    let counts = store.run_counts().await.map_err(Failure::failed)?;
    let open: u64 = counts
        .iter()
        .filter(|(state, _)| !state.is_terminal())
        .map(|(_, n)| n)
        .sum();
    let (backend, place) = match target {
        Target::Sqlite(path) => ("sqlite", path.display().to_string()),
        Target::Postgres(url) => ("postgres", Target::redacted(url)),
    };
    let (version, instances, tls) = match store.postgres() {
        Some(pg) => {
            let status = pg.status().await.map_err(Failure::failed)?;
            (status.version, Some(status.instances), Some(pg.tls()))
        }
        None => (crate::store::schema_version(), None, None),
    };
    if json_output {
        let instances = instances.as_ref().map(|list| {
            list.iter()
                .map(|i| {
                    json!({
                        "id": i.tag,
                        "host": i.host,
                        "pid": i.pid,
                        "startedAt": i.started_at,
                        "leaseExpiresAt": i.lease_expires_at,
                        "openRuns": i.open_runs,
                    })
                })
                .collect::<Vec<_>>()
        });
        let value = json!({
            "backend": backend,
            "location": place,
            "tls": tls,
            "schemaVersion": version,
            "openRuns": open,
            "runs": counts.iter().map(|(state, n)| (state.as_str(), n)).collect::<std::collections::BTreeMap<_, _>>(),
            "instances": instances,
        });
        return print(&format!("{value}\n"));
    }
    let mut out = format!("backend: {backend} ({place})\nschema version: {version}\n");
    if let Some(tls) = tls {
        out.push_str(&format!("tls: {tls}\n"));
    }
    out.push_str(&format!("open runs: {open}"));
    let waiting = counts
        .iter()
        .find(|(state, _)| *state == RunState::Waiting)
        .map_or(0, |(_, n)| *n);
    if waiting > 0 {
        out.push_str(&format!(" ({waiting} waiting for an answer)"));
    }
    out.push('\n');
    if let Some(instances) = instances {
        out.push_str(&format!("instances holding leases: {}\n", instances.len()));
        for i in &instances {
            out.push_str(&format!(
                "  {}  host {}  pid {}  started {}  lease until {}  open runs {}\n",
                i.tag,
                i.host,
                i.pid,
                millis_text(i.started_at),
                millis_text(i.lease_expires_at),
                i.open_runs
            ));
        }
    }
    print(&out)
}

/// A time in milliseconds since the epoch, as UTC.
fn millis_text(at: i64) -> String {
    jiff::Timestamp::from_millisecond(at)
        .map(|t| t.strftime("%Y-%m-%d %H:%M:%S UTC").to_string())
        .unwrap_or_else(|_| at.to_string())
}
