//! `pincer store migrate` and `pincer store status`: the backend the
//! configuration names (SQLite in the data directory, or PostgreSQL),
//! its schema version and, on PostgreSQL, the instances sharing it; and
//! `pincer store copy` between the two (`store::copy`).

use serde_json::json;

use super::print;
use crate::app::{Failure, Flags, exit};
use crate::cli::StoreCommand;
use crate::core::event::RunState;
use crate::store::Target;

pub async fn store(flags: &Flags, command: &StoreCommand) -> Result<u8, Failure> {
    if let StoreCommand::Copy { from, to, json } = command {
        return copy(from, to, *json).await;
    }
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
        StoreCommand::Copy { .. } => Ok(()),
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
                        "renewedAt": i.renewed_at,
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
                "  {}  host {}  pid {}  started {}  renewed {}  lease until {}  open runs {}\n",
                i.tag,
                i.host,
                i.pid,
                millis_text(i.started_at),
                millis_text(i.renewed_at),
                millis_text(i.lease_expires_at),
                i.open_runs
            ));
        }
    }
    print(&out)
}

/// `pincer store copy`: every table into the empty target, then the
/// counts on both sides.
async fn copy(from: &str, to: &str, json_output: bool) -> Result<u8, Failure> {
    use crate::store::copy::Place;
    let from =
        Place::parse(from).map_err(|err| Failure::usage(anyhow::anyhow!("--from: {err}")))?;
    let to = Place::parse(to).map_err(|err| Failure::usage(anyhow::anyhow!("--to: {err}")))?;
    let copied = crate::store::copy::copy(&from, &to)
        .await
        .map_err(|err| Failure::failed(anyhow::anyhow!("cannot copy {from} to {to}: {err}")))?;
    if json_output {
        let tables: serde_json::Map<String, serde_json::Value> = copied
            .tables
            .iter()
            .map(|(table, source, target)| {
                (
                    (*table).to_owned(),
                    json!({"source": source, "target": target}),
                )
            })
            .collect();
        let migrated = copied
            .source_migrated
            .map(|(from, to)| json!({"from": from, "to": to}));
        print(&format!(
            "{}\n",
            json!({
                "from": from.to_string(),
                "to": to.to_string(),
                "sourceMigrated": migrated,
                "tables": tables,
            })
        ))?;
    } else {
        let mut out = String::new();
        if let Some((old, new)) = copied.source_migrated {
            out.push_str(&format!(
                "migrated the source from schema version {old} to {new} first\n"
            ));
        }
        out.push_str(&format!("copied {from} to {to}\n"));
        for (table, source, target) in &copied.tables {
            out.push_str(&format!("  {table:<17} {source:>9} -> {target}\n"));
        }
        out.push_str("every table's rows counted on both sides: equal\n");
        print(&out)?;
    }
    Ok(exit::OK)
}

/// A time in milliseconds since the epoch, as UTC.
fn millis_text(at: i64) -> String {
    jiff::Timestamp::from_millisecond(at)
        .map(|t| t.strftime("%Y-%m-%d %H:%M:%S UTC").to_string())
        .unwrap_or_else(|_| at.to_string())
}
