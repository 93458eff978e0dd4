//! The writer on PostgreSQL: one connection per process that writes,
//! committing what is queued in groups, in submission order, on a thread
//! of its own (as the SQLite writer), so stopping it can wait for the last
//! group from anywhere.
//!
//! A group is one transaction. Most groups apply every write without a
//! savepoint; when one fails (a conflict, a fence) the group is rolled back
//! and applied again with a savepoint around each write, so the failing
//! one changes nothing and the others land. Every transaction inserts a
//! marker row: when the connection breaks during `COMMIT`, the writer
//! reconnects and looks the marker up, so a group is neither lost nor
//! written twice. While the server is unreachable the group waits and is
//! tried again (a later write never lands before an earlier one); each
//! commit sends one notification naming the runs and the events it holds,
//! which wakes other instances' followers (`listen`).

use std::collections::BTreeMap;
use std::time::Duration;

use super::conn::{Conn, Statements};
use futures::FutureExt as _;
use futures::future::BoxFuture;
use parking_lot::Mutex;
use tokio::sync::{mpsc, oneshot};
use tokio_postgres::Client;

use super::connect::Server;
use super::{PgFailure, apply};
use crate::core::journal::Write;
use crate::core::lease::{Lease, LeaseError, LeaseKey};
use crate::core::session::Millis;
use crate::store::StoreError;

type Ack = oneshot::Sender<Result<(), StoreError>>;

/// A lease decision, made inside a group's transaction so it is ordered
/// with the writes before and after it (a release never lands before the
/// fenced writes submitted ahead of it).
pub(super) enum LeaseOp {
    Claim {
        key: LeaseKey,
        holder: String,
        now: Millis,
        ttl_ms: i64,
    },
    Renew {
        lease: Lease,
        now: Millis,
        ttl_ms: i64,
    },
    Release {
        lease: Lease,
    },
}

pub(super) type LeaseReply = oneshot::Sender<Result<Option<Lease>, LeaseError>>;

enum Command {
    Write(Box<Write>, Option<Ack>),
    Lease(LeaseOp, LeaseReply),
    Flush(Ack),
    Shutdown,
}

/// Most writes in one transaction.
const MAX_GROUP: usize = 4096;

/// How long a stopping writer keeps trying to reach an unreachable server
/// for what is still queued.
const STOP_PATIENCE: Duration = Duration::from_secs(10);

pub(super) struct WriterHandle {
    tx: mpsc::UnboundedSender<Command>,
    thread: Mutex<Option<std::thread::JoinHandle<()>>>,
}

impl WriterHandle {
    pub(super) fn send(&self, write: Write, ack: Option<Ack>) {
        if let Err(mpsc::error::SendError(Command::Write(_, Some(ack)))) =
            self.tx.send(Command::Write(Box::new(write), ack))
        {
            let _ = ack.send(Err(StoreError::WriterGone));
        }
    }

    pub(super) fn lease(&self, op: LeaseOp, reply: LeaseReply) {
        if let Err(mpsc::error::SendError(Command::Lease(_, reply))) =
            self.tx.send(Command::Lease(op, reply))
        {
            let _ = reply.send(Err(LeaseError::Backend(
                "the store's writer is gone".into(),
            )));
        }
    }

    pub(super) fn flush(&self, ack: Ack) {
        if let Err(mpsc::error::SendError(Command::Flush(ack))) = self.tx.send(Command::Flush(ack))
        {
            let _ = ack.send(Err(StoreError::WriterGone));
        }
    }

    pub(super) fn shutdown(&self) {
        let _ = self.tx.send(Command::Shutdown);
        let handle = self.thread.lock().take();
        if let Some(handle) = handle
            && handle.join().is_err()
        {
            tracing::error!("store writer thread panicked");
        }
    }
}

impl Drop for WriterHandle {
    fn drop(&mut self) {
        self.shutdown();
    }
}

/// Starts the writer thread, which makes its own connection (driven by its
/// own runtime, so stopping it from any thread can wait for its last
/// commit); `committed` is called after each commit (the local notifier).
pub(super) fn spawn(
    server: Server,
    committed: Box<dyn Fn() + Send>,
) -> Result<WriterHandle, StoreError> {
    let (tx, rx) = mpsc::unbounded_channel();
    let thread = std::thread::Builder::new()
        .name("pincer-pg-writer".into())
        .spawn(move || {
            let runtime = match tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            {
                Ok(runtime) => runtime,
                Err(err) => {
                    tracing::error!(error = %err, "cannot start the store writer's runtime");
                    return;
                }
            };
            runtime.block_on(run(server, rx, committed));
        })
        .map_err(|err| StoreError::Write(format!("cannot start writer thread: {err}")))?;
    Ok(WriterHandle {
        tx,
        thread: Mutex::new(Some(thread)),
    })
}

async fn run(
    server: Server,
    mut rx: mpsc::UnboundedReceiver<Command>,
    committed: Box<dyn Fn() + Send>,
) {
    let mut writer = Writer {
        server,
        client: None,
        statements: Statements::default(),
    };
    let mut group: Vec<Command> = Vec::with_capacity(256);
    loop {
        let Some(first) = rx.recv().await else { return };
        group.push(first);
        while group.len() < MAX_GROUP {
            match rx.try_recv() {
                Ok(command) => group.push(command),
                Err(_) => break,
            }
        }
        let stop = group.iter().any(|c| matches!(c, Command::Shutdown));
        if writer.commit_group(&mut group, stop).await {
            committed();
        }
        if stop {
            return;
        }
    }
}

struct Writer {
    server: Server,
    /// `None` after the connection broke, until it is made again.
    client: Option<Client>,
    /// The statements prepared on `client`.
    statements: Statements,
}

/// What one write or lease decision of a group came to.
enum Outcome {
    Write(Result<(), StoreError>),
    Lease(Result<Option<Lease>, LeaseError>),
}

/// Why an attempt at a group's transaction did not commit.
enum Attempt {
    /// A write failed and the transaction was rolled back: apply again with
    /// a savepoint around each write.
    Isolate,
    /// The connection broke (or the server is down): reconnect and try
    /// again, after looking up whether the commit landed.
    Broken { committing: bool },
    /// A deadlock or serialization failure with another instance: the
    /// transaction was rolled back by the server; try again.
    Retry,
}

impl Writer {
    /// Commits the group; true when something was committed.
    async fn commit_group(&mut self, group: &mut Vec<Command>, stopping: bool) -> bool {
        let writes = group
            .iter()
            .any(|c| matches!(c, Command::Write(..) | Command::Lease(..)));
        if !writes {
            // Nothing to write: a flush still learns that the server
            // answers (`/readyz`), waiting while it does not.
            let flushing = group.iter().any(|c| matches!(c, Command::Flush(_)));
            if flushing && !stopping {
                self.reachable().await;
            }
            for command in group.drain(..) {
                if let Command::Flush(ack) = command {
                    let _ = ack.send(Ok(()));
                }
            }
            return false;
        }
        let marker = uuid::Uuid::now_v7().to_string();
        let mut isolate = false;
        let mut pause = Duration::from_millis(50);
        let started = std::time::Instant::now();
        let outcomes = 'group: loop {
            if stopping && started.elapsed() > STOP_PATIENCE {
                fail_all(
                    group,
                    "the database could not be reached before the store stopped",
                );
                return false;
            }
            if let Err(err) = self.connected().await {
                tracing::warn!(error = %crate::causes::chain(&err), "the database is unreachable; the writes wait");
                tokio::time::sleep(pause).await;
                pause = (pause * 2).min(Duration::from_secs(2));
                continue;
            }
            let Some(client) = self.client.as_ref() else {
                continue;
            };
            let conn = Conn::new(client, &self.statements);
            match attempt(&conn, group, &marker, isolate).await {
                Ok(outcomes) => break outcomes,
                Err(Attempt::Isolate) => isolate = true,
                Err(Attempt::Retry) => {
                    tokio::time::sleep(Duration::from_millis(fastrand::u64(1..20))).await;
                }
                Err(Attempt::Broken { committing }) => {
                    self.client = None;
                    if !committing {
                        continue;
                    }
                    // The commit may have landed: its marker says, once the
                    // server can be asked.
                    loop {
                        match self.landed(&marker).await {
                            Some(true) => break 'group landed_outcomes(group),
                            Some(false) => break,
                            None if stopping && started.elapsed() > STOP_PATIENCE => {
                                fail_all(
                                    group,
                                    "the database could not be reached before the store stopped",
                                );
                                return false;
                            }
                            None => {
                                tokio::time::sleep(pause).await;
                                pause = (pause * 2).min(Duration::from_secs(2));
                            }
                        }
                    }
                }
            }
        };
        let mut outcomes = outcomes.into_iter();
        for command in group.drain(..) {
            match command {
                Command::Write(write, ack) => {
                    let result = match outcomes.next() {
                        Some(Outcome::Write(result)) => result,
                        Some(Outcome::Lease(_)) | None => Ok(()),
                    };
                    match &result {
                        Err(err @ StoreError::Conflict(_)) => {
                            tracing::debug!(error = %err, "conditional write not applied");
                        }
                        Err(err) => tracing::error!(error = %err, ?write, "write failed"),
                        Ok(()) => {}
                    }
                    if let Some(ack) = ack {
                        let _ = ack.send(result);
                    }
                }
                Command::Lease(_, reply) => {
                    let result = match outcomes.next() {
                        Some(Outcome::Lease(result)) => result,
                        Some(Outcome::Write(_)) | None => {
                            Err(LeaseError::Backend("the lease was not decided".into()))
                        }
                    };
                    let _ = reply.send(result);
                }
                Command::Flush(ack) => {
                    outcomes.next();
                    let _ = ack.send(Ok(()));
                }
                Command::Shutdown => {
                    outcomes.next();
                }
            }
        }
        true
    }

    async fn connected(&mut self) -> Result<&Client, tokio_postgres::Error> {
        let client = match self.client.take() {
            Some(client) if !client.is_closed() => client,
            Some(_) | None => {
                // A new connection has none of the old one's statements.
                self.statements.clear();
                self.server.connect().await?
            }
        };
        Ok(self.client.insert(client))
    }

    /// Waits until the server answers.
    async fn reachable(&mut self) {
        let mut pause = Duration::from_millis(50);
        loop {
            match self.connected().await {
                Ok(client) => match client.simple_query("SELECT 1").await {
                    Ok(_) => return,
                    Err(err) => {
                        tracing::warn!(error = %crate::causes::chain(&err), "the database is unreachable");
                        self.client = None;
                    }
                },
                Err(err) => {
                    tracing::warn!(error = %crate::causes::chain(&err), "the database is unreachable");
                }
            }
            tokio::time::sleep(pause).await;
            pause = (pause * 2).min(Duration::from_secs(2));
        }
    }

    /// Whether the transaction with `marker` committed; `None` while that
    /// cannot be known (the server is still unreachable).
    async fn landed(&mut self, marker: &str) -> Option<bool> {
        let client = self.connected().await.ok()?;
        match client
            .query_opt("SELECT 1 FROM writer_commits WHERE id = $1", &[&marker])
            .await
        {
            Ok(row) => Some(row.is_some()),
            Err(_) => {
                self.client = None;
                None
            }
        }
    }
}

/// What a group that committed though its connection broke came to: its
/// writes are on disk, so they succeeded; what each lease decision was is
/// lost with the connection, so the caller asks again.
fn landed_outcomes(group: &[Command]) -> Vec<Outcome> {
    group
        .iter()
        .map(|command| match command {
            Command::Lease(..) => Outcome::Lease(Err(LeaseError::Backend(
                "the connection broke while the lease was committed; ask again".into(),
            ))),
            Command::Write(..) | Command::Flush(_) | Command::Shutdown => Outcome::Write(Ok(())),
        })
        .collect()
}

fn fail_all(group: &mut Vec<Command>, reason: &str) {
    for command in group.drain(..) {
        match command {
            Command::Write(_, Some(ack)) | Command::Flush(ack) => {
                let _ = ack.send(Err(StoreError::Write(reason.to_owned())));
            }
            Command::Lease(_, reply) => {
                let _ = reply.send(Err(LeaseError::Backend(reason.to_owned())));
            }
            Command::Write(_, None) | Command::Shutdown => {}
        }
    }
}

/// Whether `err` is the connection's (not a statement's).
fn broken(err: &tokio_postgres::Error) -> bool {
    err.as_db_error().is_none() || err.is_closed()
}

fn transient(err: &tokio_postgres::Error) -> bool {
    use tokio_postgres::error::SqlState;
    matches!(
        err.code(),
        Some(code) if *code == SqlState::T_R_DEADLOCK_DETECTED || *code == SqlState::T_R_SERIALIZATION_FAILURE
    )
}

/// One try at the group's transaction.
async fn attempt(
    client: &Conn<'_>,
    group: &[Command],
    marker: &str,
    isolate: bool,
) -> Result<Vec<Outcome>, Attempt> {
    let classify = |err: &tokio_postgres::Error, committing: bool| {
        if broken(err) {
            Attempt::Broken { committing }
        } else if transient(err) {
            Attempt::Retry
        } else {
            Attempt::Isolate
        }
    };
    client
        .batch_execute("BEGIN")
        .await
        .map_err(|err| classify(&err, false))?;
    let mut outcomes = Vec::with_capacity(group.len());
    let mut leases = GroupLeases::default();
    let mut events: BTreeMap<String, u64> = BTreeMap::new();
    for command in group {
        let outcome = match command {
            Command::Write(write, _) => {
                note_events(write, &mut events);
                let result = if isolate {
                    isolated(client, |c, l| apply::apply(c, write, l), &mut leases).await
                } else {
                    apply::apply(client, write, &mut leases).await
                };
                match result {
                    Ok(()) => Outcome::Write(Ok(())),
                    Err(PgFailure::Kept(err)) => Outcome::Write(Err(err)),
                    Err(PgFailure::Db(err)) if broken(&err) || transient(&err) || !isolate => {
                        let _ = client.batch_execute("ROLLBACK").await;
                        return Err(classify(&err, false));
                    }
                    Err(PgFailure::Store(err)) if !isolate => {
                        let _ = client.batch_execute("ROLLBACK").await;
                        tracing::debug!(error = %err, "a write of the group failed; applying it alone");
                        return Err(Attempt::Isolate);
                    }
                    Err(PgFailure::Db(err)) => Outcome::Write(Err(super::pg_error(&err))),
                    Err(PgFailure::Store(err)) => Outcome::Write(Err(err)),
                }
            }
            Command::Lease(op, _) => {
                leases = GroupLeases::default();
                let result = if isolate {
                    isolated_lease(client, op).await
                } else {
                    super::leases::decide(client, op).await
                };
                match result {
                    Ok(decided) => Outcome::Lease(decided),
                    Err(err) => {
                        let _ = client.batch_execute("ROLLBACK").await;
                        return Err(classify(&err, false));
                    }
                }
            }
            Command::Flush(_) | Command::Shutdown => Outcome::Write(Ok(())),
        };
        outcomes.push(outcome);
    }
    let payload = notification(&events);
    let finish = async {
        client
            .execute(
                "INSERT INTO writer_commits (id, at) VALUES ($1, $2)",
                &[&marker, &crate::core::session::now_millis()],
            )
            .await?;
        client
            .execute("SELECT pg_notify('pincer_changes', $1)", &[&payload])
            .await?;
        Ok::<_, tokio_postgres::Error>(())
    };
    if let Err(err) = finish.await {
        let _ = client.batch_execute("ROLLBACK").await;
        return Err(classify(&err, false));
    }
    client
        .batch_execute("COMMIT")
        .await
        .map_err(|err| classify(&err, true))?;
    Ok(outcomes)
}

/// A write inside a savepoint: when it fails, nothing of it stays and the
/// transaction goes on.
async fn isolated<'a, F>(
    client: &'a Conn<'a>,
    apply: F,
    leases: &'a mut GroupLeases,
) -> Result<(), PgFailure>
where
    F: FnOnce(&'a Conn<'a>, &'a mut GroupLeases) -> BoxFuture<'a, Result<(), PgFailure>>,
{
    client
        .batch_execute("SAVEPOINT write")
        .await
        .map_err(PgFailure::Db)?;
    // The savepoint's rollback may release what the write locked: the
    // leases it read are read again.
    let result = apply(client, leases).await;
    match result {
        Ok(()) | Err(PgFailure::Kept(_)) => {
            client
                .batch_execute("RELEASE SAVEPOINT write")
                .await
                .map_err(PgFailure::Db)?;
            result
        }
        Err(err) => {
            client
                .batch_execute("ROLLBACK TO SAVEPOINT write; RELEASE SAVEPOINT write")
                .await
                .map_err(PgFailure::Db)?;
            Err(err)
        }
    }
}

async fn isolated_lease(
    client: &Conn<'_>,
    op: &LeaseOp,
) -> Result<Result<Option<Lease>, LeaseError>, tokio_postgres::Error> {
    client.batch_execute("SAVEPOINT lease").await?;
    match super::leases::decide(client, op).await {
        Ok(decided) => {
            client.batch_execute("RELEASE SAVEPOINT lease").await?;
            Ok(decided)
        }
        Err(err) => {
            client
                .batch_execute("ROLLBACK TO SAVEPOINT lease; RELEASE SAVEPOINT lease")
                .await?;
            Ok(Err(LeaseError::Backend(crate::causes::chain(&err))))
        }
    }
}

/// The newest event of each run a write appends (also inside `Together`
/// and `Fenced`).
fn note_events(write: &Write, events: &mut BTreeMap<String, u64>) {
    match write {
        Write::AppendEvent(record) => {
            let seq = events.entry(record.run_id.as_str().to_owned()).or_default();
            *seq = (*seq).max(record.seq);
        }
        Write::Together(writes) => {
            for write in writes {
                note_events(write, events);
            }
        }
        Write::Fenced { write, .. } => note_events(write, events),
        Write::InsertSession(_)
        | Write::UpdateSettings { .. }
        | Write::SetTitle { .. }
        | Write::SetClosed { .. }
        | Write::DeleteSession { .. }
        | Write::AppendMessage { .. }
        | Write::InsertRun { .. }
        | Write::SetRunState { .. }
        | Write::AppendReceipt(_)
        | Write::PutGrant { .. }
        | Write::Trust(_)
        | Write::Channel(_)
        | Write::Memory(_)
        | Write::Schedule(_)
        | Write::Control { .. }
        | Write::TakeControl { .. }
        | Write::InterruptRuns { .. } => {}
    }
}

/// The commit's notification: `RUN:SEQ` for each run it appended events
/// to, space-separated, within PostgreSQL's 8,000-byte payload (the rest
/// left out: a wake-up is a hint to read the tape, never the news itself).
fn notification(events: &BTreeMap<String, u64>) -> String {
    let mut payload = String::new();
    for (run, seq) in events {
        let item = format!("{run}:{seq}");
        if payload.len() + item.len() + 1 > 7_900 {
            break;
        }
        if !payload.is_empty() {
            payload.push(' ');
        }
        payload.push_str(&item);
    }
    payload
}

/// The lease each fenced write of a group was checked against, read once
/// per key with `FOR SHARE` (held to the end of the transaction, so no
/// claim elsewhere moves it meanwhile).
#[derive(Default)]
pub(super) struct GroupLeases {
    known: BTreeMap<String, Option<Lease>>,
}

impl GroupLeases {
    pub(super) async fn stored(
        &mut self,
        client: &Conn<'_>,
        key: &LeaseKey,
    ) -> Result<Option<Lease>, PgFailure> {
        if let Some(known) = self.known.get(key.as_str()) {
            return Ok(known.clone());
        }
        let lease = super::leases::stored(client, key, "FOR SHARE")
            .await
            .map_err(PgFailure::Db)?;
        self.known.insert(key.as_str().to_owned(), lease.clone());
        Ok(lease)
    }
}

/// Boxes an apply for `isolated`.
pub(super) fn boxed<'a>(
    future: impl Future<Output = Result<(), PgFailure>> + Send + 'a,
) -> BoxFuture<'a, Result<(), PgFailure>> {
    future.boxed()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_notification_names_each_runs_newest_event_and_fits_a_payload() {
        let mut events = BTreeMap::new();
        events.insert("run_a".to_owned(), 7);
        events.insert("run_b".to_owned(), 2);
        assert_eq!(notification(&events), "run_a:7 run_b:2");
        for n in 0..2_000 {
            events.insert(format!("run_{n:05}"), n);
        }
        assert!(notification(&events).len() <= 7_900);
    }
}
