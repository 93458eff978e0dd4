//! The store on PostgreSQL, for several `pincer serve` instances (on one
//! machine or many) sharing one database (`docs/scale-out.md`).
//!
//! The same ports as the SQLite store, the same contract: writes go
//! through one writer per process (`writer`: submission order, group
//! commit, lease decisions ordered with the writes they fence); reads
//! through a pool (`deadpool-postgres`); other instances' commits wake
//! followers by `LISTEN/NOTIFY` (`listen`), with polling as the fallback.
//! The schema migrates at open under an advisory lock (`schema`).
//!
//! Driver: `tokio-postgres` (async, the protocol's pipelining and
//! notifications, no C library) with `deadpool-postgres` for the pool;
//! TLS through rustls, as the rest of Pincer (`connect`).

mod apply;
mod channels;
mod conn;
pub(crate) mod connect;
mod leases;
mod listen;
mod memory;
mod reads;
mod schedules;
mod schema;
mod writer;

use std::sync::Arc;

use futures::FutureExt as _;
use futures::future::BoxFuture;
use tokio::sync::{oneshot, watch};

use self::connect::Server;
use self::writer::{LeaseOp, WriterHandle};
use super::{Recovery, StoreError};
use crate::core::approval::Grant;
use crate::core::channel::{ConversationKey, Draft, InboxEntry, IntentStatus, SendIntent};
use crate::core::event::{EventRecord, RunState};
use crate::core::ids::{RunId, SessionId};
use crate::core::journal::{
    Audit, ChannelJournal, Counts, Journal, JournalError, Reply, RunsFrom, RunsToFollow,
    SessionQuery, Write,
};
use crate::core::lease::{Lease, LeaseError, LeaseKey, Leases};
use crate::core::memory::{
    Memories, MemoryError, MemoryFilter, MemoryHit, MemoryItem, MemorySearch, MemoryWrite,
};
use crate::core::notify::Notifier;
use crate::core::receipt::Receipt;
use crate::core::run::RunInfo;
use crate::core::session::{HistoryEntry, Millis, Session};
use crate::core::usage::Cost;

/// The schema version this Pincer knows on PostgreSQL.
pub fn schema_version() -> i64 {
    schema::MIGRATIONS.len() as i64
}

/// The advisory lock instances migrate under (any number, the same for all).
const MIGRATION_LOCK: i64 = 0x7069_6e63_6572; // "pincer"

/// Connections for reads and the notifier's fallback, per process.
const POOL_SIZE: usize = 8;

/// A failure inside the writer's transaction: the database's (the
/// statement failed; the transaction must roll back) or the store's (a
/// conflict or a fence decided in code; nothing was changed).
pub(super) enum PgFailure {
    Db(tokio_postgres::Error),
    Store(StoreError),
    /// Refused, but what the write did before it found out stands (an
    /// inbound message seen before still moves its polling cursor on, as
    /// on SQLite): reported to the caller, not undone.
    Kept(StoreError),
}

impl From<tokio_postgres::Error> for PgFailure {
    fn from(err: tokio_postgres::Error) -> Self {
        PgFailure::Db(err)
    }
}

/// A driver error as the store's, with the server's own words.
pub(super) fn pg_error(err: &tokio_postgres::Error) -> StoreError {
    StoreError::Postgres(crate::causes::chain(err))
}

/// Handle to the store on PostgreSQL; cheap to clone.
#[derive(Clone)]
pub struct Postgres {
    inner: Arc<Inner>,
}

struct Inner {
    server: Server,
    pool: deadpool_postgres::Pool,
    writer: WriterHandle,
    /// Moves on after this process's commits and other instances' (`listen`).
    changes: Arc<watch::Sender<u64>>,
    /// Stops the listener.
    stop: tokio_util::sync::CancellationToken,
    /// What searching memory keeps in memory (`memory`).
    memory: memory::State,
}

impl Drop for Inner {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

/// What `pincer store status` shows of the database.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Status {
    pub version: i64,
    pub instances: Vec<Instance>,
}

/// An instance that opened the store and still holds its process lease.
pub use crate::core::lease::Instance;

impl Postgres {
    /// Connects, migrates the schema (under an advisory lock), marks the
    /// runs of instances that are gone as interrupted, and starts the
    /// writer and the listener.
    pub async fn open(url: &str) -> Result<(Self, Recovery), StoreError> {
        let server = Server::parse(url).map_err(StoreError::Postgres)?;
        let client = server
            .connect()
            .await
            .map_err(|err| StoreError::Unreachable {
                url: server.shown.clone(),
                reason: crate::causes::chain(&err),
            })?;
        migrate(&client).await?;
        register(&client).await?;
        let statements = conn::Statements::default();
        let recovery = recover(&conn::Conn::new(&client, &statements)).await?;
        let pool = server.pool(POOL_SIZE)?;
        let changes = Arc::new(watch::Sender::new(0_u64));
        let bump = changes.clone();
        drop(client);
        let writer = writer::spawn(
            server.clone(),
            Box::new(move || bump.send_modify(|n| *n = n.wrapping_add(1))),
        )?;
        let stop = tokio_util::sync::CancellationToken::new();
        listen::spawn(server.clone(), changes.clone(), stop.clone());
        Ok((
            Self {
                inner: Arc::new(Inner {
                    server,
                    pool,
                    writer,
                    changes,
                    stop,
                    memory: memory::State::default(),
                }),
            },
            recovery,
        ))
    }

    /// The server's URL without its password.
    pub fn url(&self) -> &str {
        &self.inner.server.shown
    }

    /// `off`, `prefer`, `require` or `verify-full`.
    pub fn tls(&self) -> &'static str {
        self.inner.server.tls_mode()
    }

    pub fn submit(&self, write: Write) {
        self.inner.writer.send(write, None);
    }

    pub async fn commit(&self, write: Write) -> Result<(), StoreError> {
        let (tx, rx) = oneshot::channel();
        self.inner.writer.send(write, Some(tx));
        rx.await.map_err(|_| StoreError::WriterGone)?
    }

    pub async fn flush(&self) -> Result<(), StoreError> {
        let (tx, rx) = oneshot::channel();
        self.inner.writer.flush(tx);
        rx.await.map_err(|_| StoreError::WriterGone)?
    }

    /// Waits for queued writes and stops the writer; later writes fail.
    pub fn shutdown(&self) {
        self.inner.stop.cancel();
        self.inner.writer.shutdown();
    }

    /// A pooled connection.
    async fn client(&self) -> Result<deadpool_postgres::Object, StoreError> {
        self.inner.pool.get().await.map_err(|err| match err {
            deadpool_postgres::PoolError::Backend(err) => StoreError::Unreachable {
                url: self.inner.server.shown.clone(),
                reason: crate::causes::chain(&err),
            },
            other @ (deadpool_postgres::PoolError::Timeout(_)
            | deadpool_postgres::PoolError::Closed
            | deadpool_postgres::PoolError::NoRuntimeSpecified
            | deadpool_postgres::PoolError::PostCreateHook(_)) => StoreError::Unreachable {
                url: self.inner.server.shown.clone(),
                reason: other.to_string(),
            },
        })
    }

    /// Whether the server answers now (`/readyz`, `pincer doctor`), with
    /// its clock: the skew between it and this machine's matters to leases.
    pub async fn ping(&self) -> Result<Millis, StoreError> {
        let client = self.client().await?;
        let row = client
            .query_one(
                "SELECT (extract(epoch FROM clock_timestamp()) * 1000)::BIGINT",
                &[],
            )
            .await
            .map_err(|err| pg_error(&err))?;
        row.try_get(0).map_err(|err| pg_error(&err))
    }

    /// The schema version and the instances holding leases now.
    pub async fn status(&self) -> Result<Status, StoreError> {
        let client = self.client().await?;
        let version = current_version(&client).await?;
        let now = crate::core::session::now_millis();
        let rows = client
            .query(
                "SELECT i.tag, i.host, i.pid, i.started_at, l.renewed_at, l.expires_at,
                        (SELECT COUNT(*) FROM runs r WHERE r.owner = i.tag
                           AND r.state IN ('queued', 'running', 'waiting'))
                 FROM instances i JOIN leases l ON l.key = 'process:' || i.tag
                 WHERE l.expires_at > $1
                 ORDER BY i.started_at, i.tag",
                &[&now],
            )
            .await
            .map_err(|err| pg_error(&err))?;
        let instances = rows
            .iter()
            .map(|row| {
                let tag: String = row.try_get(0)?;
                Ok(Instance {
                    this: tag == crate::store::process_tag(),
                    tag,
                    host: row.try_get(1)?,
                    pid: row.try_get(2)?,
                    started_at: row.try_get(3)?,
                    renewed_at: row.try_get(4)?,
                    lease_expires_at: row.try_get(5)?,
                    open_runs: row.try_get(6)?,
                })
            })
            .collect::<Result<_, tokio_postgres::Error>>()
            .map_err(|err| pg_error(&err))?;
        Ok(Status { version, instances })
    }

    /// Open runs whose owner holds no live process lease (and whose
    /// session's lease lapsed): what the next recovery will end.
    pub async fn orphaned_runs(&self, now: Millis) -> Result<i64, StoreError> {
        let client = self.client().await?;
        client
            .query_one(
                "SELECT COUNT(*) FROM runs r
                 WHERE r.state IN ('queued', 'running', 'waiting')
                   AND NOT EXISTS (SELECT 1 FROM leases p WHERE p.key = 'process:' || r.owner AND p.expires_at > $1)
                   AND NOT EXISTS (SELECT 1 FROM leases s WHERE s.key = r.session_id AND s.expires_at > $1)",
                &[&now],
            )
            .await
            .and_then(|row| row.try_get(0))
            .map_err(|err| pg_error(&err))
    }

    /// Marks the runs of instances that are gone as interrupted, as an
    /// open does: a long-running instance calls it on an interval, so a
    /// peer that died mid-run has its runs ended by one survivor.
    pub async fn recover_gone(&self) -> Result<Recovery, StoreError> {
        let object = self.client().await?;
        recover(&conn::Conn::pooled(&object)).await
    }

    fn lease_op(&self, op: LeaseOp) -> BoxFuture<'_, Result<Option<Lease>, LeaseError>> {
        let (tx, rx) = oneshot::channel();
        self.inner.writer.lease(op, tx);
        Box::pin(async move {
            rx.await
                .map_err(|_| LeaseError::Backend("the store's writer is gone".into()))?
        })
    }
}

/// The schema's version as stored (0 on an empty database).
pub(in crate::store) async fn current_version(
    client: &tokio_postgres::Client,
) -> Result<i64, StoreError> {
    let exists: bool = client
        .query_one("SELECT to_regclass('pincer_schema') IS NOT NULL", &[])
        .await
        .map_err(|err| pg_error(&err))?
        .try_get(0)
        .map_err(|err| pg_error(&err))?;
    if !exists {
        return Ok(0);
    }
    client
        .query_one(
            "SELECT COALESCE(MAX(version), 0)::BIGINT FROM pincer_schema",
            &[],
        )
        .await
        .and_then(|row| row.try_get(0))
        .map_err(|err| pg_error(&err))
}

/// Brings the schema to this Pincer's version, under an advisory lock:
/// instances starting together migrate once. A schema newer than this
/// Pincer knows is refused, naming both versions.
pub async fn migrate(client: &tokio_postgres::Client) -> Result<i64, StoreError> {
    let db = |err: tokio_postgres::Error| pg_error(&err);
    client.batch_execute("BEGIN").await.map_err(db)?;
    let migrated = async {
        client
            .execute("SELECT pg_advisory_xact_lock($1)", &[&MIGRATION_LOCK])
            .await
            .map_err(db)?;
        client
            .batch_execute(
                "CREATE TABLE IF NOT EXISTS pincer_schema (version INTEGER PRIMARY KEY, at BIGINT NOT NULL)",
            )
            .await
            .map_err(db)?;
        let found = current_version(client).await?;
        let known = schema_version();
        if found > known {
            return Err(StoreError::TooNewServer { found, known });
        }
        for (index, migration) in schema::MIGRATIONS.iter().enumerate().skip(usize::try_from(found).unwrap_or(0)) {
            client.batch_execute(migration).await.map_err(db)?;
            let version = i32::try_from(index + 1).unwrap_or(i32::MAX);
            client
                .execute(
                    "INSERT INTO pincer_schema (version, at) VALUES ($1, $2)",
                    &[&version, &crate::core::session::now_millis()],
                )
                .await
                .map_err(db)?;
        }
        client
            .execute(
                "INSERT INTO receipt_head (one, seq, hash) VALUES (TRUE, 0, $1) ON CONFLICT DO NOTHING",
                &[&crate::core::receipt::GENESIS],
            )
            .await
            .map_err(db)?;
        Ok(known)
    }
    .await;
    match migrated {
        Ok(version) => {
            client.batch_execute("COMMIT").await.map_err(db)?;
            Ok(version)
        }
        Err(err) => {
            let _ = client.batch_execute("ROLLBACK").await;
            Err(err)
        }
    }
}

/// This machine's name, as instance tags carry it.
pub(crate) fn host() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|name| name.trim().to_owned())
        .ok()
        .filter(|name| !name.is_empty())
        .unwrap_or_else(|| "localhost".to_owned())
}

/// Records this instance (`pincer store status`); instances gone for a day
/// are forgotten.
async fn register(client: &tokio_postgres::Client) -> Result<(), StoreError> {
    let now = crate::core::session::now_millis();
    let pid = i64::from(std::process::id());
    client
        .execute(
            "INSERT INTO instances (tag, host, pid, started_at) VALUES ($1, $2, $3, $4)
             ON CONFLICT (tag) DO NOTHING",
            &[&crate::store::process_tag(), &host(), &pid, &now],
        )
        .await
        .map_err(|err| pg_error(&err))?;
    client
        .execute(
            "DELETE FROM instances i WHERE i.started_at < $1 AND NOT EXISTS
               (SELECT 1 FROM leases l WHERE l.key = 'process:' || i.tag AND l.expires_at > $2)",
            &[&(now - 86_400_000), &now],
        )
        .await
        .map_err(|err| pg_error(&err))?;
    Ok(())
}

/// Ends the runs nobody works on any more (as `store::writer::recovery`
/// decides on SQLite: a working run's session lease lapsed, a queued run's
/// process lease lapsed), each exactly once: the runs are locked `FOR
/// UPDATE SKIP LOCKED`, so two instances recovering together split them.
async fn recover(client: &conn::Conn<'_>) -> Result<Recovery, StoreError> {
    let db = |err: tokio_postgres::Error| pg_error(&err);
    client.batch_execute("BEGIN").await.map_err(db)?;
    let recovered = async {
        let now = crate::core::session::now_millis();
        let rows = client
            .query(
                "SELECT r.id, r.session_id, r.owner, r.state,
                        s.holder, s.token, s.expires_at, p.holder, p.expires_at
                 FROM runs r
                 LEFT JOIN leases s ON s.key = r.session_id
                 LEFT JOIN leases p ON p.key = 'process:' || r.owner
                 WHERE r.state IN ('queued', 'running', 'waiting')
                 ORDER BY r.created_at, r.id
                 FOR UPDATE OF r SKIP LOCKED",
                &[],
            )
            .await
            .map_err(db)?;
        let live = |holder: &str, expires_at: i64| {
            expires_at > now && !crate::store::owner::is_dead_here(holder)
        };
        let mut recovery = Recovery::default();
        let mut fenced: Vec<String> = Vec::new();
        for row in &rows {
            let id: String = row.try_get(0).map_err(db)?;
            let session: String = row.try_get(1).map_err(db)?;
            let owner: Option<String> = row.try_get(2).map_err(db)?;
            let working = row.try_get::<_, String>(3).map_err(db)? != "queued";
            let session_lease: Option<(String, i64, i64)> =
                match row.try_get::<_, Option<String>>(4).map_err(db)? {
                    Some(holder) => Some((
                        holder,
                        row.try_get(5).map_err(db)?,
                        row.try_get(6).map_err(db)?,
                    )),
                    None => None,
                };
            let process_lease: Option<(String, i64)> =
                match row.try_get::<_, Option<String>>(7).map_err(db)? {
                    Some(holder) => Some((holder, row.try_get(8).map_err(db)?)),
                    None => None,
                };
            let (gone, take_over) = match (&session_lease, working) {
                (Some((holder, token, expires_at)), true) => {
                    if live(holder, *expires_at) {
                        (false, None)
                    } else {
                        (true, Some((holder.clone(), *token)))
                    }
                }
                _ => match (&owner, &process_lease) {
                    (None, _) => (true, None),
                    (Some(_), Some((holder, expires_at))) => (!live(holder, *expires_at), None),
                    (Some(tag), None) => (!crate::store::owner::is_alive(tag), None),
                },
            };
            if !gone {
                continue;
            }
            if let Some((holder, token)) = take_over
                && !fenced.contains(&session)
            {
                let key = LeaseKey::session(&SessionId::from_string(session.clone()));
                let lease = Lease {
                    key,
                    holder,
                    token: u64::try_from(token).unwrap_or(0),
                    expires_at: 0,
                };
                // Locked again: another instance may have claimed it since.
                let current = leases::stored(client, &lease.key, "FOR UPDATE")
                    .await
                    .map_err(db)?;
                if current
                    .as_ref()
                    .is_some_and(|c| c.token != lease.token || live(&c.holder, c.expires_at))
                {
                    continue;
                }
                leases::take_over(client, &lease, crate::store::process_tag())
                    .await
                    .map_err(db)?;
                fenced.push(session.clone());
            }
            apply::interrupt_run(
                client,
                &id,
                &session,
                "interrupted: the pincer process stopped before the run ended",
                now,
            )
            .await
            .map_err(StoreError::from)?;
            recovery.interrupted_runs.push(RunId::from_string(id));
        }
        if !recovery.interrupted_runs.is_empty() {
            client
                .execute("SELECT pg_notify('pincer_changes', 'recovered')", &[])
                .await
                .map_err(db)?;
        }
        Ok(recovery)
    }
    .await;
    match recovered {
        Ok(recovery) => {
            client.batch_execute("COMMIT").await.map_err(db)?;
            Ok(recovery)
        }
        Err(err) => {
            let _ = client.batch_execute("ROLLBACK").await;
            Err(err)
        }
    }
}

impl From<PgFailure> for StoreError {
    fn from(failure: PgFailure) -> Self {
        match failure {
            PgFailure::Db(err) => pg_error(&err),
            PgFailure::Store(err) | PgFailure::Kept(err) => err,
        }
    }
}

fn port<'a, T: Send + 'a>(
    future: impl Future<Output = Result<T, StoreError>> + Send + 'a,
) -> Reply<'a, T> {
    future
        .map(|result| result.map_err(JournalError::from))
        .boxed()
}

macro_rules! read {
    ($self:ident, |$client:ident| $body:expr) => {
        port(async move {
            let object = $self.client().await?;
            let $client = &conn::Conn::pooled(&object);
            $body.await
        })
    };
}

impl Journal for Postgres {
    fn submit(&self, write: Write) {
        Postgres::submit(self, write);
    }

    fn commit(&self, write: Write) -> Reply<'_, ()> {
        port(Postgres::commit(self, write))
    }

    fn flush(&self) -> Reply<'_, ()> {
        port(Postgres::flush(self))
    }

    fn session<'a>(&'a self, id: &'a SessionId) -> Reply<'a, Option<Session>> {
        read!(self, |c| reads::session(c, id))
    }

    fn sessions(&self, query: SessionQuery) -> Reply<'_, Vec<Session>> {
        read!(self, |c| reads::sessions(c, &query))
    }

    fn history<'a>(&'a self, id: &'a SessionId) -> Reply<'a, Vec<HistoryEntry>> {
        read!(self, |c| reads::history(c, id))
    }

    fn since_compaction<'a>(&'a self, id: &'a SessionId) -> Reply<'a, Vec<HistoryEntry>> {
        read!(self, |c| reads::since_compaction(c, id))
    }

    fn runs<'a>(&'a self, session: &'a SessionId) -> Reply<'a, Vec<RunInfo>> {
        read!(self, |c| reads::runs(c, session))
    }

    fn run<'a>(&'a self, id: &'a RunId) -> Reply<'a, Option<RunInfo>> {
        read!(self, |c| reads::run(c, id))
    }

    fn session_cost<'a>(
        &'a self,
        session: &'a SessionId,
        except: &'a RunId,
    ) -> Reply<'a, Option<Cost>> {
        read!(self, |c| reads::session_cost(c, session, except))
    }

    fn runs_to_follow<'a>(
        &'a self,
        session: &'a SessionId,
        from: RunsFrom,
    ) -> Reply<'a, RunsToFollow> {
        read!(self, |c| reads::runs_to_follow(c, session, from))
    }

    fn waiting_runs(&self) -> Reply<'_, Vec<RunInfo>> {
        read!(self, |c| reads::waiting_runs(c))
    }

    fn tape<'a>(
        &'a self,
        run: &'a RunId,
        from_seq: u64,
        limit: Option<usize>,
    ) -> Reply<'a, Vec<EventRecord>> {
        read!(self, |c| reads::tape_in(c, run, from_seq, limit))
    }

    fn grants<'a>(&'a self, session: &'a SessionId) -> Reply<'a, Vec<Grant>> {
        read!(self, |c| reads::grants(c, session))
    }

    fn spent<'a>(&'a self, provider: &'a str, since: Millis) -> Reply<'a, Vec<Cost>> {
        read!(self, |c| reads::spent(c, provider, since))
    }

    fn trusted_roots(&self) -> Reply<'_, Vec<crate::core::hooks::Trust>> {
        read!(self, |c| reads::trusted_roots(c))
    }

    fn skills_last_used(&self) -> Reply<'_, Vec<(String, Millis)>> {
        read!(self, |c| reads::skills_last_used(c))
    }

    fn controls<'a>(
        &'a self,
        session: &'a SessionId,
    ) -> Reply<'a, Vec<(i64, crate::core::control::Control)>> {
        read!(self, |c| reads::controls(c, session))
    }
}

impl Audit for Postgres {
    fn receipts(&self, from_seq: u64, limit: usize) -> Reply<'_, Vec<Receipt>> {
        read!(self, |c| reads::receipts(c, from_seq, limit))
    }

    fn run_receipts<'a>(&'a self, run: &'a RunId) -> Reply<'a, Vec<Receipt>> {
        read!(self, |c| reads::run_receipts(c, run))
    }

    fn missing_receipts(&self) -> Reply<'_, Vec<(RunId, u64, u64)>> {
        read!(self, |c| reads::missing_receipts(c))
    }
}

impl Counts for Postgres {
    fn run_counts(&self) -> Reply<'_, Vec<(RunState, u64)>> {
        read!(self, |c| reads::run_counts(c))
    }

    fn intent_counts(&self) -> Reply<'_, Vec<(String, IntentStatus, u64)>> {
        read!(self, |c| channels::intent_counts(c))
    }

    fn run_window(
        &self,
        since: Millis,
        bucket_ms: i64,
    ) -> Reply<'_, crate::core::journal::RunWindow> {
        read!(self, |c| reads::run_window(c, since, bucket_ms))
    }

    fn instances(&self) -> Reply<'_, Option<Vec<Instance>>> {
        port(async move { Ok(Some(self.status().await?.instances)) })
    }
}

impl ChannelJournal for Postgres {
    fn open_intents<'a>(
        &'a self,
        channel: &'a str,
        account: &'a str,
    ) -> Reply<'a, Vec<(SendIntent, Option<String>)>> {
        read!(self, |c| channels::open_intents(c, channel, account))
    }

    fn intent<'a>(&'a self, id: &'a str) -> Reply<'a, Option<SendIntent>> {
        read!(self, |c| channels::intent(c, id))
    }

    fn intents<'a>(
        &'a self,
        channel: Option<&'a str>,
        status: Option<IntentStatus>,
        limit: usize,
    ) -> Reply<'a, Vec<SendIntent>> {
        read!(self, |c| channels::intents(c, channel, status, limit))
    }

    fn open_inbox<'a>(&'a self, channel: &'a str, account: &'a str) -> Reply<'a, Vec<InboxEntry>> {
        read!(self, |c| channels::open_inbox(c, channel, account))
    }

    fn cursor<'a>(
        &'a self,
        channel: &'a str,
        account: &'a str,
        name: &'a str,
    ) -> Reply<'a, Option<String>> {
        read!(self, |c| channels::cursor(c, channel, account, name))
    }

    fn cursors<'a>(&'a self, name: &'a str) -> Reply<'a, Vec<(String, String, String)>> {
        read!(self, |c| channels::cursors(c, name))
    }

    fn conversation<'a>(&'a self, key: &'a ConversationKey) -> Reply<'a, Option<SessionId>> {
        read!(self, |c| channels::conversation(c, key))
    }

    fn is_paired<'a>(
        &'a self,
        channel: &'a str,
        account: &'a str,
        sender: &'a str,
    ) -> Reply<'a, bool> {
        read!(self, |c| channels::is_paired(c, channel, account, sender))
    }

    fn pairs<'a>(
        &'a self,
        channel: Option<&'a str>,
    ) -> Reply<'a, Vec<crate::core::channel::Pairing>> {
        read!(self, |c| channels::pairs(c, channel))
    }

    fn drafts<'a>(&'a self, channel: &'a str, account: &'a str) -> Reply<'a, Vec<Draft>> {
        read!(self, |c| channels::drafts(c, channel, account))
    }
}

fn memory_port<'a, T: Send + 'a>(
    future: impl Future<Output = Result<T, StoreError>> + Send + 'a,
) -> crate::core::memory::Reply<'a, T> {
    future
        .map(|result| result.map_err(MemoryError::from))
        .boxed()
}

impl crate::core::journal::Schedules for Postgres {
    fn schedules(&self) -> Reply<'_, Vec<crate::core::schedule::Schedule>> {
        read!(self, |c| schedules::schedules(c))
    }

    fn fires<'a>(
        &'a self,
        schedule: Option<&'a str>,
        limit: usize,
    ) -> Reply<'a, Vec<crate::core::schedule::Fire>> {
        read!(self, |c| schedules::fires(c, schedule, limit))
    }

    fn last_fired(&self) -> Reply<'_, Vec<(String, crate::core::session::Millis)>> {
        read!(self, |c| schedules::last_fired(c))
    }

    fn open_fires(&self) -> Reply<'_, Vec<crate::core::schedule::Fire>> {
        read!(self, |c| schedules::open_fires(c))
    }
}

impl Memories for Postgres {
    fn write(&self, write: MemoryWrite) -> crate::core::memory::Reply<'_, ()> {
        memory_port(Postgres::commit(self, Write::Memory(write)))
    }

    fn note(&self, write: MemoryWrite) {
        Postgres::submit(self, Write::Memory(write));
    }

    fn get<'a>(&'a self, id: &'a str) -> crate::core::memory::Reply<'a, Option<MemoryItem>> {
        memory_port(async move {
            let object = self.client().await?;
            memory::get(&conn::Conn::pooled(&object), id).await
        })
    }

    fn list(&self, filter: MemoryFilter) -> crate::core::memory::Reply<'_, Vec<MemoryItem>> {
        memory_port(async move {
            let object = self.client().await?;
            memory::list(&conn::Conn::pooled(&object), &filter).await
        })
    }

    fn search(&self, search: MemorySearch) -> crate::core::memory::Reply<'_, Vec<MemoryHit>> {
        memory_port(async move {
            let object = self.client().await?;
            memory::search(&conn::Conn::pooled(&object), &search, &self.inner.memory).await
        })
    }

    fn unembedded<'a>(
        &'a self,
        model: &'a str,
        limit: usize,
    ) -> crate::core::memory::Reply<'a, Vec<MemoryItem>> {
        memory_port(async move {
            let object = self.client().await?;
            memory::unembedded(&conn::Conn::pooled(&object), model, limit).await
        })
    }
}

impl Leases for Postgres {
    fn claim<'a>(
        &'a self,
        key: &'a LeaseKey,
        holder: &'a str,
        now: Millis,
        ttl_ms: i64,
    ) -> BoxFuture<'a, Result<Lease, LeaseError>> {
        let decided = self.lease_op(LeaseOp::Claim {
            key: key.clone(),
            holder: holder.to_owned(),
            now,
            ttl_ms,
        });
        Box::pin(async move {
            decided
                .await?
                .ok_or_else(|| LeaseError::Backend("a claim decided no lease".into()))
        })
    }

    fn renew<'a>(
        &'a self,
        lease: &'a Lease,
        now: Millis,
        ttl_ms: i64,
    ) -> BoxFuture<'a, Result<Lease, LeaseError>> {
        let decided = self.lease_op(LeaseOp::Renew {
            lease: lease.clone(),
            now,
            ttl_ms,
        });
        Box::pin(async move {
            decided
                .await?
                .ok_or_else(|| LeaseError::Backend("a renewal decided no lease".into()))
        })
    }

    fn release<'a>(&'a self, lease: &'a Lease) -> BoxFuture<'a, Result<(), LeaseError>> {
        let decided = self.lease_op(LeaseOp::Release {
            lease: lease.clone(),
        });
        Box::pin(async move { decided.await.map(|_| ()) })
    }

    fn current<'a>(
        &'a self,
        key: &'a LeaseKey,
    ) -> BoxFuture<'a, Result<Option<Lease>, LeaseError>> {
        Box::pin(async move {
            // What is committed: whatever this process queued before is
            // decided first.
            self.flush()
                .await
                .map_err(|err| LeaseError::Backend(err.to_string()))?;
            let client = self
                .client()
                .await
                .map_err(|err| LeaseError::Backend(err.to_string()))?;
            let lease = leases::stored(&conn::Conn::pooled(&client), key, "")
                .await
                .map_err(|err| LeaseError::Backend(crate::causes::chain(&err)))?;
            Ok(lease.filter(|lease| lease.token > 0))
        })
    }
}

impl Notifier for Postgres {
    fn watch(&self) -> watch::Receiver<u64> {
        self.inner.changes.subscribe()
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::Postgres;
    use crate::core::journal::contract::Backend;

    /// A fresh database on the test server, as a URL.
    pub(crate) fn fresh_url() -> String {
        crate::testing::postgres::shared().fresh_database()
    }

    async fn fresh() -> Backend {
        let (store, _) = Postgres::open(&fresh_url()).await.unwrap();
        let stop = store.clone();
        Backend {
            journal: Arc::new(store.clone()),
            audit: Arc::new(store.clone()),
            schedules: Arc::new(store.clone()),
            counts: Arc::new(store.clone()),
            leases: Arc::new(store),
            stop: Box::new(move || stop.shutdown()),
            dir: None,
        }
    }

    crate::journal_contract!(fresh().await);

    #[tokio::test]
    async fn postgres_leases_keep_the_contract() {
        let (store, _) = Postgres::open(&fresh_url()).await.unwrap();
        crate::core::lease::contract::one_holder_and_growing_tokens(&store).await;
        store.shutdown();
    }

    fn receipt(n: usize) -> crate::core::receipt::ReceiptBody {
        crate::core::receipt::ReceiptBody {
            session_id: crate::core::ids::SessionId::from_string("ses_chain".into()),
            run_id: crate::core::ids::RunId::from_string(format!("run_{}", n % 7)),
            call_id: format!("call_{n}"),
            tool: "read_file".into(),
            input_hash: format!("{n:064}"),
            output_hash: format!("{n:064}"),
            verdict: crate::core::receipt::Verdict::Allowed,
            is_error: false,
            at: 1_000 + n as i64,
            hooks: Vec::new(),
            skills: Vec::new(),
        }
    }

    async fn sql(url: &str, statement: &str) -> Result<u64, String> {
        let server = super::connect::Server::parse(url).unwrap();
        let client = server.connect().await.unwrap();
        client
            .execute(statement, &[])
            .await
            .map_err(|err| crate::causes::chain(&err))
    }

    /// The tape and the receipts are append-only in the database itself:
    /// a person with `psql` cannot change or remove a line either.
    #[tokio::test]
    async fn the_database_refuses_to_change_the_tape_or_the_receipts() {
        use crate::core::journal::Write;
        let url = fresh_url();
        let (store, _) = Postgres::open(&url).await.unwrap();
        let session = crate::core::ids::SessionId::from_string("ses_kept".into());
        let run = crate::core::ids::RunId::from_string("run_kept".into());
        store
            .commit(Write::AppendEvent(crate::core::event::EventRecord {
                session_id: session,
                run_id: run,
                seq: 0,
                at: 1,
                event: crate::core::event::Event::TextDelta {
                    text: "kept".into(),
                },
            }))
            .await
            .unwrap();
        store
            .commit(Write::AppendReceipt(receipt(1)))
            .await
            .unwrap();
        for statement in [
            "UPDATE tape SET payload = '{}'",
            "DELETE FROM tape",
            "TRUNCATE tape",
            "UPDATE receipts SET hash = 'x'",
            "DELETE FROM receipts",
            "TRUNCATE receipts",
        ] {
            let err = sql(&url, statement).await.unwrap_err();
            assert!(err.contains("append-only"), "{statement}: {err}");
        }
        store.shutdown();
    }

    /// Two instances appending receipts at once make one chain: each
    /// append takes the head under a row lock inside its transaction.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn two_instances_never_fork_the_receipt_chain() {
        use crate::core::journal::{Audit as _, Write};
        let url = fresh_url();
        let (one, _) = Postgres::open(&url).await.unwrap();
        let (two, _) = Postgres::open(&url).await.unwrap();
        let mut tasks = Vec::new();
        for (k, store) in [one.clone(), two.clone()].into_iter().enumerate() {
            tasks.push(tokio::spawn(async move {
                for n in 0..150 {
                    let write = Write::AppendReceipt(receipt(k * 1_000 + n));
                    if n % 10 == 9 {
                        store.commit(write).await.unwrap();
                    } else {
                        store.submit(write);
                    }
                }
                store.flush().await.unwrap();
            }));
        }
        for task in tasks {
            task.await.unwrap();
        }
        let receipts = one.receipts(1, 10_000).await.unwrap();
        assert_eq!(receipts.len(), 300);
        let (count, _) = crate::core::receipt::verify(&receipts).unwrap();
        assert_eq!(count, 300);
        one.shutdown();
        two.shutdown();
    }

    /// Opening migrates once however many instances open together; a
    /// schema newer than this Pincer knows is refused, naming both.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn instances_migrate_once_and_refuse_a_newer_schema() {
        let url = fresh_url();
        let opens: Vec<_> = (0..4)
            .map(|_| {
                let url = url.clone();
                tokio::spawn(async move { Postgres::open(&url).await.map(|(s, _)| s) })
            })
            .collect();
        for open in opens {
            let store = open.await.unwrap().unwrap();
            assert_eq!(
                store.status().await.unwrap().version,
                super::schema_version()
            );
            store.shutdown();
        }
        let server = super::connect::Server::parse(&url).unwrap();
        let client = server.connect().await.unwrap();
        assert_eq!(
            super::migrate(&client).await.unwrap(),
            super::schema_version()
        );
        let rows = client
            .query_one("SELECT COUNT(*) FROM pincer_schema", &[])
            .await
            .unwrap()
            .get::<_, i64>(0);
        assert_eq!(rows, super::schema_version());
        let newer = super::schema_version() + 1;
        client
            .execute(
                "INSERT INTO pincer_schema (version, at) VALUES ($1, 0)",
                &[&i32::try_from(newer).unwrap()],
            )
            .await
            .unwrap();
        let err = Postgres::open(&url).await.err().unwrap().to_string();
        assert!(
            err.contains(&format!("schema version {newer}"))
                && err.contains(&format!("({})", super::schema_version())),
            "{err}"
        );
    }

    /// What was committed is there for the next instance that opens, and
    /// another instance's commit wakes this one's followers.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn commits_outlive_the_instance_and_wake_the_others() {
        use crate::core::journal::{Journal as _, Write};
        use crate::core::notify::Notifier as _;
        let url = fresh_url();
        let (one, _) = Postgres::open(&url).await.unwrap();
        let (two, _) = Postgres::open(&url).await.unwrap();
        let mut woken = two.watch();
        woken.borrow_and_update();
        let session = crate::core::ids::SessionId::from_string("ses_wake".into());
        one.commit(Write::InsertSession(crate::core::session::Session {
            id: session.clone(),
            workspace: "/ws".into(),
            origin: crate::core::session::Origin::Headless,
            provider: "p".into(),
            model: "m".into(),
            mode: crate::core::session::Mode::Supervised,
            title: Some("kept".into()),
            mcp_servers: serde_json::json!([]),
            created_at: 1,
            updated_at: 1,
            closed: false,
            conversation: None,
            prompt: crate::core::session::PromptSettings::default(),
            parent: None,
            thought_level: None,
        }))
        .await
        .unwrap();
        tokio::time::timeout(std::time::Duration::from_secs(2), woken.changed())
            .await
            .expect("the other instance was not woken within 2 s")
            .unwrap();
        one.shutdown();
        let (three, _) = Postgres::open(&url).await.unwrap();
        let kept = three.session(&session).await.unwrap().unwrap();
        assert_eq!(kept.title.as_deref(), Some("kept"));
        two.shutdown();
        three.shutdown();
    }

    /// TLS with rustls: `verify-full` checks the certificate against the
    /// CA named and the host name; `require` encrypts without checking;
    /// a server that only takes TLS refuses `disable`; a certificate from
    /// another CA is refused, naming the failure.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn tls_is_verified_as_sslmode_asks() {
        let server = crate::testing::postgres::PgServer::start_tls();
        let url = server.fresh_database();
        assert!(url.contains("sslmode=verify-full"), "{url}");
        let (store, _) = Postgres::open(&url).await.unwrap();
        assert_eq!(store.tls(), "verify-full");
        assert!(store.ping().await.is_ok());
        store.shutdown();
        let database = url
            .split('/')
            .nth(3)
            .and_then(|rest| rest.split('?').next())
            .unwrap()
            .to_owned();
        let port = server.port();
        let required = format!("postgres://pincer@127.0.0.1:{port}/{database}?sslmode=require");
        let (store, _) = Postgres::open(&required).await.unwrap();
        assert_eq!(store.tls(), "require");
        store.shutdown();
        let plain = format!("postgres://pincer@127.0.0.1:{port}/{database}?sslmode=disable");
        let err = Postgres::open(&plain).await.err().unwrap().to_string();
        assert!(err.contains("cannot reach the PostgreSQL server"), "{err}");
        // Another CA: the certificate does not verify.
        let other = crate::testing::postgres::PgServer::start_tls();
        let wrong = format!(
            "postgres://pincer@localhost:{port}/{database}?sslmode=verify-full&sslrootcert={}",
            other.ca_path().display()
        );
        let err = Postgres::open(&wrong).await.err().unwrap().to_string();
        assert!(
            err.contains("cannot reach the PostgreSQL server")
                && err.to_lowercase().contains("certificate"),
            "{err}"
        );
    }
}
