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
pub(crate) mod connect;
mod leases;
mod listen;
mod memory;
mod reads;
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
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Instance {
    pub tag: String,
    pub host: String,
    pub pid: i64,
    pub started_at: Millis,
    /// When its lease lapses unless renewed (renewed well before).
    pub lease_expires_at: Millis,
    /// Its runs not ended yet.
    pub open_runs: i64,
}

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
        let recovery = recover(&client).await?;
        let pool = server.pool(POOL_SIZE)?;
        let changes = Arc::new(watch::Sender::new(0_u64));
        let bump = changes.clone();
        let writer = writer::spawn(
            server.clone(),
            client,
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
            other => StoreError::Unreachable {
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
                "SELECT i.tag, i.host, i.pid, i.started_at, l.expires_at,
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
                Ok(Instance {
                    tag: row.try_get(0)?,
                    host: row.try_get(1)?,
                    pid: row.try_get(2)?,
                    started_at: row.try_get(3)?,
                    lease_expires_at: row.try_get(4)?,
                    open_runs: row.try_get(5)?,
                })
            })
            .collect::<Result<_, tokio_postgres::Error>>()
            .map_err(|err| pg_error(&err))?;
        Ok(Status { version, instances })
    }

    /// Marks the runs of instances that are gone as interrupted, as an
    /// open does: a long-running instance calls it on an interval, so a
    /// peer that died mid-run has its runs ended by one survivor.
    pub async fn recover_gone(&self) -> Result<Recovery, StoreError> {
        let client = self.client().await?;
        recover(&client).await
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
async fn current_version(client: &tokio_postgres::Client) -> Result<i64, StoreError> {
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
async fn recover(client: &tokio_postgres::Client) -> Result<Recovery, StoreError> {
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
            .map_err(|failure| match failure {
                PgFailure::Db(err) => pg_error(&err),
                PgFailure::Store(err) => err,
            })?;
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
            PgFailure::Store(err) => err,
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
            let $client = $self.client().await?;
            let $client: &tokio_postgres::Client = &$client;
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

    fn intents(&self, status: Option<IntentStatus>, limit: usize) -> Reply<'_, Vec<SendIntent>> {
        read!(self, |c| channels::intents(c, status, limit))
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

impl Memories for Postgres {
    fn write(&self, write: MemoryWrite) -> crate::core::memory::Reply<'_, ()> {
        memory_port(Postgres::commit(self, Write::Memory(write)))
    }

    fn note(&self, write: MemoryWrite) {
        Postgres::submit(self, Write::Memory(write));
    }

    fn get<'a>(&'a self, id: &'a str) -> crate::core::memory::Reply<'a, Option<MemoryItem>> {
        memory_port(async move {
            let client = self.client().await?;
            memory::get(&client, id).await
        })
    }

    fn list(&self, filter: MemoryFilter) -> crate::core::memory::Reply<'_, Vec<MemoryItem>> {
        memory_port(async move {
            let client = self.client().await?;
            memory::list(&client, &filter).await
        })
    }

    fn search(&self, search: MemorySearch) -> crate::core::memory::Reply<'_, Vec<MemoryHit>> {
        memory_port(async move {
            let client = self.client().await?;
            memory::search(&client, &search, &self.inner.memory).await
        })
    }

    fn unembedded<'a>(
        &'a self,
        model: &'a str,
        limit: usize,
    ) -> crate::core::memory::Reply<'a, Vec<MemoryItem>> {
        memory_port(async move {
            let client = self.client().await?;
            memory::unembedded(&client, model, limit).await
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
            let lease = leases::stored(&client, key, "")
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
