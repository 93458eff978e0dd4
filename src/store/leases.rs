//! Leases on SQLite (`core::lease`): one row per key (a session, a chat
//! channel account) that ever had a lease, decided on the writer thread inside its group transaction
//! (an immediate one), so two processes' claims are serialized by SQLite's
//! write lock, a thousand claims at once share one commit, and a run's
//! fenced writes (`Write::Fenced`) are checked against the very row a claim
//! wrote.

use futures::future::BoxFuture;
use rusqlite::{Connection, OptionalExtension as _, params};

use super::Store;
use crate::core::lease::{Lease, LeaseError, LeaseKey, Leases, decide_claim, holds};
use crate::core::session::Millis;

/// The keys of processes' leases (`LeaseKey::process`) sort between these.
const PROCESS_PREFIX: &str = "process:";
const PROCESS_END: &str = "process;";

fn backend(err: impl std::fmt::Display) -> LeaseError {
    LeaseError::Backend(err.to_string())
}

/// The session's stored lease, for the writer's fence check.
pub(super) fn stored_in(
    conn: &Connection,
    key: &LeaseKey,
) -> Result<Option<Lease>, super::StoreError> {
    stored(conn, key).map_err(|err| super::StoreError::Write(err.to_string()))
}

fn stored(conn: &Connection, key: &LeaseKey) -> Result<Option<Lease>, LeaseError> {
    conn.prepare_cached("SELECT holder, token, expires_at FROM leases WHERE key = ?1")
        .map_err(backend)?
        .query_row(params![key.as_str()], |row| {
            Ok(Lease {
                key: key.clone(),
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
        "INSERT INTO leases (key, holder, token, expires_at) VALUES (?1, ?2, ?3, ?4) \
         ON CONFLICT (key) DO UPDATE SET holder = excluded.holder, token = excluded.token, \
         expires_at = excluded.expires_at",
    )
    .map_err(backend)?
    .execute(params![
        lease.key.as_str(),
        lease.holder,
        i64::try_from(lease.token).map_err(backend)?,
        lease.expires_at
    ])
    .map_err(backend)?;
    Ok(())
}

/// Takes `lease` (found lapsed, or held by a process that died here) over
/// for `holder` and releases it at once, inside the caller's transaction:
/// its token grows, so the writes of the holder it was taken from are
/// refused from now on, and anyone may claim it next.
pub(super) fn take_over_in(
    conn: &Connection,
    lease: &Lease,
    holder: &str,
) -> Result<(), super::StoreError> {
    put(
        conn,
        &Lease {
            key: lease.key.clone(),
            holder: holder.to_owned(),
            token: lease.token + 1,
            expires_at: 0,
        },
    )
    .map_err(|err| super::StoreError::Write(err.to_string()))
}

impl Store {
    /// Decides `f` inside the writer's next group transaction, so a claim,
    /// a renewal or a release costs no transaction (and no sync) of its own
    /// and is ordered with the run writes its token fences. Its answer comes
    /// once the group is committed: a decision rolled back is never told.
    fn lease_op<'a, T: Send + 'static>(
        &'a self,
        f: impl FnOnce(&Connection) -> Result<T, LeaseError> + Send + 'static,
    ) -> BoxFuture<'a, Result<T, LeaseError>> {
        let (tx, rx) = tokio::sync::oneshot::channel();
        self.inner.writer.decide(Box::new(move |conn: &Connection| {
            let decided = f(conn);
            Box::new(move |committed: Result<(), super::StoreError>| {
                let told = match committed {
                    Ok(()) => decided,
                    Err(err) => Err(backend(err)),
                };
                let _ = tx.send(told);
            })
        }));
        Box::pin(async move {
            rx.await
                .map_err(|_| LeaseError::Backend("the store's writer is gone".into()))?
        })
    }
}

impl Leases for Store {
    fn claim<'a>(
        &'a self,
        key: &'a LeaseKey,
        holder: &'a str,
        now: Millis,
        ttl_ms: i64,
    ) -> BoxFuture<'a, Result<Lease, LeaseError>> {
        let (key, holder) = (key.clone(), holder.to_owned());
        self.lease_op(move |conn| {
            let mut current = stored(conn, &key)?;
            // A holder that died on this machine (`kill -9`) need not be
            // waited out: its lease is as good as lapsed.
            if let Some(lease) = current.as_mut()
                && lease.holder != holder
                && lease.expires_at > now
                && super::owner::is_dead_here(&lease.holder)
            {
                lease.expires_at = now;
            }
            let lease = decide_claim(current.as_ref(), &key, &holder, now, ttl_ms)?;
            put(conn, &lease)?;
            // A process's lease is one row per process ever started: those
            // lapsed an hour ago go when the next process takes its own.
            if key.as_str().starts_with(PROCESS_PREFIX) {
                conn.prepare_cached(
                    "DELETE FROM leases WHERE key >= ?1 AND key < ?2 AND key != ?3 AND expires_at < ?4",
                )
                .map_err(backend)?
                .execute(params![
                    PROCESS_PREFIX,
                    PROCESS_END,
                    key.as_str(),
                    now.saturating_sub(3_600_000)
                ])
                .map_err(backend)?;
            }
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
            if !holds(stored(conn, &lease.key)?.as_ref(), &lease, now) {
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
                "UPDATE leases SET expires_at = 0 \
                 WHERE key = ?1 AND holder = ?2 AND token = ?3",
            )
            .map_err(backend)?
            .execute(params![
                lease.key.as_str(),
                lease.holder,
                i64::try_from(lease.token).map_err(backend)?
            ])
            .map_err(backend)?;
            Ok(())
        })
    }

    fn current<'a>(
        &'a self,
        key: &'a LeaseKey,
    ) -> BoxFuture<'a, Result<Option<Lease>, LeaseError>> {
        let key = key.clone();
        self.lease_op(move |conn| stored(conn, &key))
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
        let session = crate::core::lease::LeaseKey::session(
            &crate::core::ids::SessionId::from_string("ses_shared".into()),
        );
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
        let dead = crate::core::lease::LeaseKey::session(
            &crate::core::ids::SessionId::from_string("ses_dead".into()),
        );
        store
            .claim(&dead, "999999999:1", 20_000, 60_000)
            .await
            .unwrap();
        let after = other.claim(&dead, "mine", 20_001, 1_000).await.unwrap();
        assert_eq!(after.holder, "mine");
        let alive = crate::core::lease::LeaseKey::session(
            &crate::core::ids::SessionId::from_string("ses_alive".into()),
        );
        store
            .claim(&alive, super::super::owner::this_process(), 20_000, 60_000)
            .await
            .unwrap();
        assert!(other.claim(&alive, "mine", 20_001, 1_000).await.is_err());
        let named = crate::core::lease::LeaseKey::session(
            &crate::core::ids::SessionId::from_string("ses_named".into()),
        );
        store
            .claim(&named, "instance-a", 20_000, 60_000)
            .await
            .unwrap();
        assert!(other.claim(&named, "mine", 20_001, 1_000).await.is_err());
        store.shutdown();
        other.shutdown();
    }

    /// A fenced write from a process whose lease another process took is
    /// refused, though its store never saw the claim happen.
    #[tokio::test]
    async fn a_write_fenced_by_a_lease_another_store_took_is_refused() {
        use crate::core::journal::{JournalError, Write};
        use crate::core::lease::Leases;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("pincer.db");
        let (one, _) = super::Store::open(&path).unwrap();
        let (two, _) = super::Store::open(&path).unwrap();
        let session = crate::core::ids::SessionId::from_string("ses_two".into());
        let key = crate::core::lease::LeaseKey::session(&session);
        let a = one.claim(&key, "one", 1_000, 100).await.unwrap();
        let title = |t: &str| Write::SetTitle {
            id: session.clone(),
            title: t.into(),
        };
        one.commit(Write::Fenced {
            fence: a.fence(),
            write: Box::new(title("one")),
        })
        .await
        .unwrap();
        two.claim(&key, "two", 2_000, 100).await.unwrap();
        let late = crate::core::journal::Journal::commit(
            &one,
            Write::Fenced {
                fence: a.fence(),
                write: Box::new(title("late")),
            },
        )
        .await;
        assert!(matches!(late, Err(JournalError::Fenced(_))), "{late:?}");
        one.shutdown();
        two.shutdown();
    }
}
