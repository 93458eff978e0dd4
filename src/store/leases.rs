//! Session leases on SQLite (`core::lease`): one row per session that ever
//! had a lease, decided in an immediate transaction of a connection of
//! their own, so a claim waits for no group commit and two processes'
//! claims are serialized by SQLite's write lock.

use futures::future::BoxFuture;
use rusqlite::{Connection, OptionalExtension as _, TransactionBehavior, params};

use super::Store;
use crate::core::ids::SessionId;
use crate::core::lease::{Lease, LeaseError, Leases, decide_claim, holds};
use crate::core::session::Millis;

fn backend(err: impl std::fmt::Display) -> LeaseError {
    LeaseError::Backend(err.to_string())
}

fn stored(conn: &Connection, session: &SessionId) -> Result<Option<Lease>, LeaseError> {
    conn.prepare_cached(
        "SELECT holder, token, expires_at FROM session_leases WHERE session_id = ?1",
    )
    .map_err(backend)?
    .query_row(params![session.as_str()], |row| {
        Ok(Lease {
            session: session.clone(),
            holder: row.get(0)?,
            token: row.get::<_, i64>(1)?.max(0) as u64,
            expires_at: row.get(2)?,
        })
    })
    .optional()
    .map_err(backend)
}

fn put(conn: &Connection, lease: &Lease) -> Result<(), LeaseError> {
    conn.prepare_cached(
        "INSERT INTO session_leases (session_id, holder, token, expires_at) VALUES (?1, ?2, ?3, ?4) \
         ON CONFLICT (session_id) DO UPDATE SET holder = excluded.holder, token = excluded.token, \
         expires_at = excluded.expires_at",
    )
    .map_err(backend)?
    .execute(params![
        lease.session.as_str(),
        lease.holder,
        i64::try_from(lease.token).map_err(backend)?,
        lease.expires_at
    ])
    .map_err(backend)?;
    Ok(())
}

impl Store {
    /// Runs `f` in an immediate transaction of the leases' own connection
    /// (kept between operations). Its commits are not synced one by one
    /// (`synchronous=NORMAL`): a lease lost in a power cut is a lapsed
    /// lease, and any later synced commit on the same log makes it durable
    /// first, so tokens never go back.
    fn lease_op<'a, T: Send + 'static>(
        &'a self,
        f: impl FnOnce(&Connection) -> Result<T, LeaseError> + Send + 'static,
    ) -> BoxFuture<'a, Result<T, LeaseError>> {
        let inner = self.inner.clone();
        Box::pin(async move {
            tokio::task::spawn_blocking(move || {
                let mut slot = inner
                    .lease_conn
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner);
                if slot.is_none() {
                    let conn = Connection::open(&inner.path).map_err(backend)?;
                    conn.busy_timeout(std::time::Duration::from_secs(10))
                        .map_err(backend)?;
                    conn.pragma_update(None, "synchronous", "NORMAL")
                        .map_err(backend)?;
                    *slot = Some(conn);
                }
                let Some(conn) = slot.as_mut() else {
                    return Err(LeaseError::Backend("no connection".into()));
                };
                let tx = conn
                    .transaction_with_behavior(TransactionBehavior::Immediate)
                    .map_err(backend)?;
                let result = f(&tx)?;
                tx.commit().map_err(backend)?;
                Ok(result)
            })
            .await
            .map_err(backend)?
        })
    }
}

impl Leases for Store {
    fn claim<'a>(
        &'a self,
        session: &'a SessionId,
        holder: &'a str,
        now: Millis,
        ttl_ms: i64,
    ) -> BoxFuture<'a, Result<Lease, LeaseError>> {
        let (session, holder) = (session.clone(), holder.to_owned());
        self.lease_op(move |conn| {
            let mut current = stored(conn, &session)?;
            // A holder that died on this machine (`kill -9`) need not be
            // waited out: its lease is as good as lapsed.
            if let Some(lease) = current.as_mut()
                && lease.holder != holder
                && lease.expires_at > now
                && super::owner::is_dead_here(&lease.holder)
            {
                lease.expires_at = now;
            }
            let lease = decide_claim(current.as_ref(), &session, &holder, now, ttl_ms)?;
            put(conn, &lease)?;
            Ok(lease)
        })
    }

    fn renew<'a>(
        &'a self,
        lease: &'a Lease,
        now: Millis,
        ttl_ms: i64,
    ) -> BoxFuture<'a, Result<Lease, LeaseError>> {
        let lease = lease.clone();
        self.lease_op(move |conn| {
            if !holds(stored(conn, &lease.session)?.as_ref(), &lease, now) {
                return Err(LeaseError::Lost);
            }
            let renewed = Lease {
                expires_at: now.saturating_add(ttl_ms),
                ..lease
            };
            put(conn, &renewed)?;
            Ok(renewed)
        })
    }

    fn release<'a>(&'a self, lease: &'a Lease) -> BoxFuture<'a, Result<(), LeaseError>> {
        let lease = lease.clone();
        self.lease_op(move |conn| {
            conn.prepare_cached(
                "UPDATE session_leases SET expires_at = 0 \
                 WHERE session_id = ?1 AND holder = ?2 AND token = ?3",
            )
            .map_err(backend)?
            .execute(params![
                lease.session.as_str(),
                lease.holder,
                i64::try_from(lease.token).map_err(backend)?
            ])
            .map_err(backend)?;
            Ok(())
        })
    }

    fn current<'a>(
        &'a self,
        session: &'a SessionId,
    ) -> BoxFuture<'a, Result<Option<Lease>, LeaseError>> {
        let session = session.clone();
        self.lease_op(move |conn| stored(conn, &session))
    }
}

#[cfg(test)]
mod tests {
    #[tokio::test]
    async fn sqlite_leases_keep_the_contract_and_two_stores_share_them() {
        use crate::core::lease::{LeaseError, Leases};
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("pincer.db");
        let (store, _) = super::Store::open(&path).unwrap();
        crate::core::lease::contract::one_holder_and_growing_tokens(&store).await;
        // A second process's store sees the first's lease.
        let (other, _) = super::Store::open(&path).unwrap();
        let session = crate::core::ids::SessionId::from_string("ses_shared".into());
        let held = store.claim(&session, "one", 10_000, 1_000).await.unwrap();
        assert!(matches!(
            other.claim(&session, "two", 10_500, 1_000).await,
            Err(LeaseError::Held { .. })
        ));
        store.release(&held).await.unwrap();
        let taken = other.claim(&session, "two", 10_600, 1_000).await.unwrap();
        assert!(taken.token > held.token);
        // A holder that died on this machine is not waited out; a live one,
        // or a name that is no process tag, is.
        let dead = crate::core::ids::SessionId::from_string("ses_dead".into());
        store
            .claim(&dead, "999999999:1", 20_000, 60_000)
            .await
            .unwrap();
        let after = other.claim(&dead, "mine", 20_001, 1_000).await.unwrap();
        assert_eq!(after.holder, "mine");
        let alive = crate::core::ids::SessionId::from_string("ses_alive".into());
        store
            .claim(&alive, super::super::owner::this_process(), 20_000, 60_000)
            .await
            .unwrap();
        assert!(other.claim(&alive, "mine", 20_001, 1_000).await.is_err());
        let named = crate::core::ids::SessionId::from_string("ses_named".into());
        store
            .claim(&named, "instance-a", 20_000, 60_000)
            .await
            .unwrap();
        assert!(other.claim(&named, "mine", 20_001, 1_000).await.is_err());
        store.shutdown();
        other.shutdown();
    }
}
