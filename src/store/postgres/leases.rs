//! Leases on PostgreSQL (`core::lease`): one row per key, decided inside
//! the writer's group transaction with the row locked `FOR UPDATE`, so two
//! instances' claims are serialized by the row lock and a process's lease
//! decisions are ordered with its writes (a release never lands before the
//! fenced writes submitted ahead of it).

use super::conn::Conn;

use super::writer::LeaseOp;
use crate::core::lease::{Lease, LeaseError, LeaseKey, decide_claim, holds};

/// The keys of processes' leases (`LeaseKey::process`) sort between these.
const PROCESS_PREFIX: &str = "process:";
const PROCESS_END: &str = "process;";

/// The lease on `key` as stored, read with `lock` (`FOR UPDATE`, `FOR
/// SHARE` or nothing).
pub(super) async fn stored(
    client: &Conn<'_>,
    key: &LeaseKey,
    lock: &str,
) -> Result<Option<Lease>, tokio_postgres::Error> {
    let row = client
        .query_opt(
            &format!("SELECT holder, token, expires_at FROM leases WHERE key = $1 {lock}"),
            &[&key.as_str()],
        )
        .await?;
    row.map(|row| {
        Ok(Lease {
            key: key.clone(),
            holder: row.try_get(0)?,
            token: u64::try_from(row.try_get::<_, i64>(1)?).unwrap_or(0),
            expires_at: row.try_get(2)?,
        })
    })
    .transpose()
}

fn token(lease: &Lease) -> i64 {
    i64::try_from(lease.token).unwrap_or(i64::MAX)
}

async fn put(
    client: &Conn<'_>,
    lease: &Lease,
    now: crate::core::session::Millis,
) -> Result<(), tokio_postgres::Error> {
    client
        .execute(
            "INSERT INTO leases (key, holder, token, expires_at, renewed_at) VALUES ($1, $2, $3, $4, $5)
             ON CONFLICT (key) DO UPDATE SET holder = excluded.holder, token = excluded.token,
                 expires_at = excluded.expires_at, renewed_at = excluded.renewed_at",
            &[
                &lease.key.as_str(),
                &lease.holder,
                &token(lease),
                &lease.expires_at,
                &now,
            ],
        )
        .await?;
    Ok(())
}

/// Takes `lease` (found lapsed) over for `holder` and releases it at once:
/// its token grows, so the writes of the holder it was taken from are
/// refused from now on, and anyone may claim it next.
pub(super) async fn take_over(
    client: &Conn<'_>,
    lease: &Lease,
    holder: &str,
) -> Result<(), tokio_postgres::Error> {
    put(
        client,
        &Lease {
            key: lease.key.clone(),
            holder: holder.to_owned(),
            token: lease.token + 1,
            expires_at: 0,
        },
        crate::core::session::now_millis(),
    )
    .await
}

/// Makes a lease decision inside the caller's transaction. The outer
/// error is the database's (the transaction is lost); the inner one is
/// the decision (held, lost).
pub(super) async fn decide(
    client: &Conn<'_>,
    op: &LeaseOp,
) -> Result<Result<Option<Lease>, LeaseError>, tokio_postgres::Error> {
    match op {
        LeaseOp::Claim {
            key,
            holder,
            now,
            ttl_ms,
        } => {
            // The row exists before it is locked, so two first claims on a
            // key wait for each other instead of both inserting.
            client
                .execute(
                    "INSERT INTO leases (key, holder, token, expires_at) VALUES ($1, '', 0, 0)
                     ON CONFLICT (key) DO NOTHING",
                    &[&key.as_str()],
                )
                .await?;
            let mut current = stored(client, key, "FOR UPDATE").await?;
            if current.as_ref().is_some_and(|lease| lease.token == 0) {
                current = None;
            }
            // A holder that died on this machine (`kill -9`) need not be
            // waited out: its lease is as good as lapsed.
            if let Some(lease) = current.as_mut()
                && lease.holder != *holder
                && lease.expires_at > *now
                && crate::store::owner::is_dead_here(&lease.holder)
            {
                lease.expires_at = *now;
            }
            let lease = match decide_claim(current.as_ref(), key, holder, *now, *ttl_ms) {
                Ok(lease) => lease,
                Err(err) => return Ok(Err(err)),
            };
            put(client, &lease, *now).await?;
            if key.as_str().starts_with(PROCESS_PREFIX) {
                // A process's lease is one row per process ever started:
                // those lapsed an hour ago go when the next one takes its own.
                client
                    .execute(
                        "DELETE FROM leases WHERE key >= $1 AND key < $2 AND key != $3 AND expires_at < $4",
                        &[
                            &PROCESS_PREFIX,
                            &PROCESS_END,
                            &key.as_str(),
                            &now.saturating_sub(3_600_000),
                        ],
                    )
                    .await?;
            }
            Ok(Ok(Some(lease)))
        }
        LeaseOp::Renew { lease, now, ttl_ms } => {
            let current = stored(client, &lease.key, "FOR UPDATE").await?;
            if !holds(current.as_ref(), lease, *now) {
                return Ok(Err(LeaseError::Lost));
            }
            let renewed = Lease {
                expires_at: now.saturating_add(*ttl_ms),
                ..lease.clone()
            };
            put(client, &renewed, *now).await?;
            Ok(Ok(Some(renewed)))
        }
        LeaseOp::Release { lease } => {
            client
                .execute(
                    "UPDATE leases SET expires_at = 0 WHERE key = $1 AND holder = $2 AND token = $3",
                    &[&lease.key.as_str(), &lease.holder, &token(lease)],
                )
                .await?;
            Ok(Ok(None))
        }
    }
}
