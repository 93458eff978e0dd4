//! The store's checks: SQLite opens at its schema version; PostgreSQL
//! answers (with its TLS and schema version), its clock agrees with this
//! machine's (leases compare times written by several machines), and the
//! instances sharing it hold their leases.

use super::Check;
use crate::app::Failure;
use crate::config::Config;
use crate::store::Target;

/// How far this machine's clock may be from the database server's before
/// leases (15 s by default) become unreliable.
const MAX_SKEW_MS: i64 = 2_000;

pub(super) async fn checks(config: &Config) -> Result<Vec<Check>, Failure> {
    let target = config.store_target();
    let (store, _) = match crate::store::open(&target).await {
        Ok(opened) => opened,
        Err(err) => return Ok(vec![Check::fail("database", err.to_string())]),
    };
    let checks = match (&target, store.postgres()) {
        (Target::Sqlite(path), _) => {
            let version = crate::store::probe(path).map_err(Failure::failed)?;
            vec![Check::ok(
                "database",
                format!("{} (schema version {version})", path.display()),
            )]
        }
        (Target::Postgres(_), Some(pg)) => postgres(pg).await,
        (Target::Postgres(_), None) => Vec::new(),
    };
    store.shutdown();
    Ok(checks)
}

async fn postgres(pg: &crate::store::postgres::Postgres) -> Vec<Check> {
    let status = match pg.status().await {
        Ok(status) => status,
        Err(err) => return vec![Check::fail("database", err.to_string())],
    };
    let mut checks = vec![Check::new(
        pg.tls() != "off" || is_loopback(pg.url()),
        "database",
        format!(
            "PostgreSQL {} (schema version {}, TLS {})",
            pg.url(),
            status.version,
            match pg.tls() {
                "off" if is_loopback(pg.url()) => "off: the server is on this machine".to_owned(),
                "off" => "off: add ?sslmode=verify-full to the URL for a server on another machine"
                    .to_owned(),
                "prefer" | "require" => format!(
                    "{}: encrypted, the certificate not checked (sslmode=verify-full checks it)",
                    pg.tls()
                ),
                mode => format!("{mode}: encrypted, the certificate and host checked"),
            }
        ),
    )];
    checks.push(clock(pg).await);
    let now = crate::core::session::now_millis();
    let live = status.instances.len();
    let open: i64 = status.instances.iter().map(|i| i.open_runs).sum();
    checks.push(match pg.orphaned_runs(now).await {
        Ok(0) => Check::ok(
            "leases",
            format!("{live} instance(s) hold leases, with {open} open run(s)"),
        ),
        Ok(orphans) => Check::fail(
            "leases",
            format!(
                "{orphans} open run(s) belong to instances whose lease lapsed: a running instance marks them interrupted within its lease time (`pincer store status` lists the live ones)"
            ),
        ),
        Err(err) => Check::fail("leases", err.to_string()),
    });
    checks
}

/// The server's clock against this machine's, halfway through the round trip.
async fn clock(pg: &crate::store::postgres::Postgres) -> Check {
    let before = crate::core::session::now_millis();
    let server = match pg.ping().await {
        Ok(at) => at,
        Err(err) => return Check::fail("clock", err.to_string()),
    };
    let after = crate::core::session::now_millis();
    let skew = server - (before + after) / 2;
    Check::new(
        skew.abs() <= MAX_SKEW_MS,
        "clock",
        if skew.abs() <= MAX_SKEW_MS {
            format!("within {} ms of the database server's", skew.abs())
        } else {
            format!(
                "{} ms {} the database server's: leases compare times written by every instance; synchronize the clocks (NTP)",
                skew.abs(),
                if skew > 0 { "behind" } else { "ahead of" }
            )
        },
    )
}

fn is_loopback(url: &str) -> bool {
    let Some((_, rest)) = url.split_once("://") else {
        return false;
    };
    let host = rest.rsplit_once('@').map_or(rest, |(_, host)| host);
    host.starts_with("127.")
        || host.starts_with("localhost")
        || host.starts_with("[::1]")
        || host.starts_with('/')
}
