//! The writer thread: the only connection that writes, committing in
//! groups. Each kind of write is applied by the module of its concern
//! (`sessions`, `runs`, `tape`, `consent`; the chat channels' and memory's
//! by `store::channels` and `store::memory`); `recovery` ends the runs a
//! stopped process left, at open.

mod consent;
mod recovery;
mod runs;
mod sessions;
mod tape;

use parking_lot::Mutex;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{self, Receiver, Sender};
use std::thread::JoinHandle;

use rusqlite::Connection;
use tokio::sync::oneshot;

use super::{StoreError, Write};
use crate::core::lease::{Fence, Lease, LeaseKey};

#[cfg(test)]
pub(super) use recovery::UNFINISHED_RUNS;
pub(super) use recovery::recover_interrupted;
pub(in crate::store) use recovery::used;

type Ack = oneshot::Sender<Result<(), StoreError>>;

/// Work done inside a group's transaction that decides something (a lease):
/// it runs with the group and returns what to tell its caller once the
/// group's commit is known, so nobody hears of a decision that was rolled
/// back.
pub(super) type Decide = Box<dyn FnOnce(&Connection) -> Tell + Send>;

/// What a decision tells its caller, given whether its group committed.
pub(super) type Tell = Box<dyn FnOnce(Result<(), StoreError>) + Send>;

enum Command {
    Write(Box<Write>, Option<Ack>),
    Decide(Decide),
    Flush(Ack),
    Shutdown,
}

/// Most writes applied in one transaction; bounds a commit's latency under load.
const MAX_GROUP: usize = 8192;

pub(super) struct WriterHandle {
    /// Queue into the thread.
    tx: Sender<Command>,
    /// Joined on shutdown so the last group is on disk before the process exits.
    thread: Mutex<Option<JoinHandle<()>>>,
    /// How often another connection held the write lock for longer than the
    /// busy timeout and the writer went on waiting.
    #[cfg(test)]
    lock_waits: Arc<AtomicU64>,
}

impl WriterHandle {
    pub(super) fn send(&self, write: Write, ack: Option<Ack>) {
        if let Err(mpsc::SendError(Command::Write(_, Some(ack)))) =
            self.tx.send(Command::Write(Box::new(write), ack))
        {
            let _ = ack.send(Err(StoreError::WriterGone));
        }
    }

    /// Runs `decide` inside the next group's transaction.
    pub(super) fn decide(&self, decide: Decide) {
        // The writer gone, the decision is dropped unmade: its caller hears
        // that nothing was decided.
        let _ = self.tx.send(Command::Decide(decide));
    }

    /// How often the writer has waited out another connection's write lock
    /// for longer than the busy timeout.
    #[cfg(test)]
    pub(super) fn lock_waits(&self) -> u64 {
        self.lock_waits.load(Ordering::Relaxed)
    }

    pub(super) fn flush(&self, ack: Ack) {
        if let Err(mpsc::SendError(Command::Flush(ack))) = self.tx.send(Command::Flush(ack)) {
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

pub(super) fn spawn(conn: Connection) -> Result<WriterHandle, StoreError> {
    let (tx, rx) = mpsc::channel();
    let lock_waits = Arc::new(AtomicU64::new(0));
    let waits = lock_waits.clone();
    let thread = std::thread::Builder::new()
        .name("pincer-store-writer".into())
        .spawn(move || run(conn, rx, &waits))
        .map_err(|err| StoreError::Write(format!("cannot start writer thread: {err}")))?;
    Ok(WriterHandle {
        tx,
        thread: Mutex::new(Some(thread)),
        #[cfg(test)]
        lock_waits,
    })
}

fn run(conn: Connection, rx: Receiver<Command>, lock_waits: &AtomicU64) {
    let mut group: Vec<Command> = Vec::with_capacity(256);
    loop {
        let Ok(first) = rx.recv() else { return };
        group.push(first);
        while group.len() < MAX_GROUP {
            match rx.try_recv() {
                Ok(command) => group.push(command),
                Err(_) => break,
            }
        }
        let stop = group.iter().any(|c| matches!(c, Command::Shutdown));
        commit_group(&conn, &mut group, lock_waits);
        if stop {
            return;
        }
    }
}

fn commit_group(conn: &Connection, group: &mut Vec<Command>, lock_waits: &AtomicU64) {
    // A group of flushes and a shutdown writes nothing: every write before
    // them was committed by an earlier group, so they are answered without
    // taking the write lock (a process that only read never waits for
    // another's write group to end before it exits).
    if group
        .iter()
        .all(|c| matches!(c, Command::Flush(_) | Command::Shutdown))
    {
        for command in group.drain(..) {
            if let Command::Flush(ack) = command {
                let _ = ack.send(Ok(()));
            }
        }
        return;
    }
    let mut outcomes: Vec<(Ack, Result<(), StoreError>)> = Vec::new();
    let mut decided: Vec<Tell> = Vec::new();
    // IMMEDIATE: the write lock is taken (waiting out other processes) before
    // any read, so a group that reads then writes never fails to upgrade.
    // Another process may hold the lock for longer than the busy timeout (a
    // migration, a long group on a slow disk): the group waits on, since
    // giving it up would drop its submitted writes while later ones land (a
    // tape with a gap, a receipt lost before one kept; contract rule 2).
    let tx = loop {
        match rusqlite::Transaction::new_unchecked(conn, rusqlite::TransactionBehavior::Immediate) {
            Ok(tx) => break tx,
            Err(err) if err.sqlite_error_code() == Some(rusqlite::ErrorCode::DatabaseBusy) => {
                lock_waits.fetch_add(1, Ordering::Relaxed);
                tracing::warn!(error = %err, "another process holds the database's write lock; still waiting");
            }
            Err(err) => {
                tracing::error!(error = %err, "cannot begin a write transaction");
                fail_all(group, &err.to_string());
                return;
            }
        }
    };
    let mut leases = GroupLeases::default();
    for command in group.drain(..) {
        match command {
            Command::Write(write, ack) => {
                let result = apply_in(&tx, &write, &mut leases);
                match &result {
                    // Expected: a redelivered message, an intent another worker moved.
                    Err(err @ StoreError::Conflict(_)) => {
                        tracing::debug!(error = %err, "conditional write not applied");
                    }
                    Err(err) => tracing::error!(error = %err, ?write, "write failed"),
                    Ok(()) => {}
                }
                if let Some(ack) = ack {
                    outcomes.push((ack, result));
                }
            }
            Command::Decide(decide) => {
                // A decision may move a lease: read them afresh after it.
                leases = GroupLeases::default();
                decided.push(decide(&tx));
            }
            Command::Flush(ack) => outcomes.push((ack, Ok(()))),
            Command::Shutdown => {}
        }
    }
    if let Err(err) = tx.commit() {
        tracing::error!(error = %err, "commit failed");
        for (ack, _) in outcomes {
            let _ = ack.send(Err(StoreError::Write(format!("commit failed: {err}"))));
        }
        for tell in decided {
            tell(Err(StoreError::Write(format!("commit failed: {err}"))));
        }
        return;
    }
    for (ack, result) in outcomes {
        let _ = ack.send(result);
    }
    for tell in decided {
        tell(Ok(()));
    }
}

fn fail_all(group: &mut Vec<Command>, reason: &str) {
    for command in group.drain(..) {
        match command {
            Command::Write(_, Some(ack)) | Command::Flush(ack) => {
                let _ = ack.send(Err(StoreError::Write(reason.to_owned())));
            }
            // Not decided: dropped, its caller hears that nothing was.
            Command::Decide(_) | Command::Write(_, None) | Command::Shutdown => {}
        }
    }
}

fn to_json<T: serde::Serialize>(value: &T) -> Result<String, StoreError> {
    serde_json::to_string(value).map_err(|err| StoreError::Write(err.to_string()))
}

/// The lease a group's fenced writes were last checked against. Inside the
/// group's transaction (IMMEDIATE: no other connection writes) only a
/// `Decide` moves a lease, so a run's thousand fenced events of one group
/// read its lease once, not once each.
#[derive(Default)]
struct GroupLeases {
    last: Option<(LeaseKey, Option<Lease>)>,
}

impl GroupLeases {
    fn stored(&mut self, conn: &Connection, key: &LeaseKey) -> Result<Option<&Lease>, StoreError> {
        let fresh = !matches!(&self.last, Some((known, _)) if known == key);
        if fresh {
            self.last = Some((key.clone(), super::leases::stored_in(conn, key)?));
        }
        Ok(self.last.as_ref().and_then(|(_, lease)| lease.as_ref()))
    }
}

/// Applies one write inside the group's transaction: each kind of write by
/// the module of its concern.
fn apply_in(conn: &Connection, write: &Write, leases: &mut GroupLeases) -> Result<(), StoreError> {
    match write {
        Write::InsertSession(session) => sessions::insert(conn, session),
        Write::UpdateSettings {
            id,
            provider,
            model,
            thought_level,
            mode,
            at,
        } => sessions::update_settings(
            conn,
            id,
            provider,
            model,
            thought_level.as_deref(),
            *mode,
            *at,
        ),
        Write::SetTitle { id, title } => sessions::set_title(conn, id, title),
        Write::SetClosed { id, closed, at } => sessions::set_closed(conn, id, *closed, *at),
        Write::DeleteSession { id, at } => sessions::delete(conn, id, *at),
        Write::AppendMessage {
            session_id,
            run_id,
            message,
            at,
        } => sessions::append_message(conn, session_id.as_str(), run_id.as_ref(), message, *at),
        Write::InsertRun { id, session_id, at } => runs::insert(conn, id, session_id, *at),
        Write::SetRunState {
            id,
            state,
            stop_reason,
            error,
            usage,
            cost,
            at,
        } => {
            let report = runs::Report {
                stop_reason: *stop_reason,
                error: error.as_deref(),
                usage,
                cost: cost.as_ref(),
            };
            runs::set_state(conn, id, *state, &report, *at)
        }
        Write::InterruptRuns { session, error, at } => runs::interrupt(conn, session, error, *at),
        Write::Control {
            session,
            control,
            at,
        } => runs::leave_control(conn, session, control, *at),
        Write::TakeControl { id } => runs::take_control(conn, *id),
        Write::AppendEvent(record) => tape::append_event(conn, record),
        Write::AppendReceipt(body) => tape::append_receipt(conn, body),
        Write::PutGrant {
            session_id,
            grant,
            at,
        } => consent::put_grant(conn, session_id, grant, *at),
        Write::Trust(write) => consent::trust(conn, write),
        Write::Channel(write) => super::channels::apply(conn, write),
        Write::Memory(write) => super::memory::apply(conn, write),
        Write::Schedule(write) => super::schedules::apply(conn, write),
        Write::Fenced { fence, write } => fenced(conn, fence, write, leases),
        Write::Together(writes) => together(conn, writes, leases),
    }
}

/// A write made under a lease: applied only while the lease's token is
/// its key's current one, else refused and nothing applied.
fn fenced(
    conn: &Connection,
    fence: &Fence,
    write: &Write,
    leases: &mut GroupLeases,
) -> Result<(), StoreError> {
    let stored = leases.stored(conn, &fence.key)?;
    if !crate::core::lease::admits(stored, fence) {
        return Err(StoreError::Fenced(format!(
            "{}: the lease this write was made under (token {}) is no longer current{}; refused",
            fence.key,
            fence.token,
            stored.map_or(String::new(), |s| format!(
                " (now token {}, {})",
                s.token, s.holder
            ))
        )));
    }
    apply_in(conn, write, leases)
}

/// Writes that land together: a savepoint inside the group's transaction,
/// so one failing write undoes the others of this batch and nothing else of
/// the group.
fn together(
    conn: &Connection,
    writes: &[Write],
    leases: &mut GroupLeases,
) -> Result<(), StoreError> {
    conn.execute_batch("SAVEPOINT together")?;
    let applied = writes
        .iter()
        .try_for_each(|write| apply_in(conn, write, leases));
    match applied {
        Ok(()) => conn.execute_batch("RELEASE together")?,
        Err(err) => {
            conn.execute_batch("ROLLBACK TO together; RELEASE together")?;
            return Err(err);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use rusqlite::params;

    use super::*;
    use crate::core::ids::SessionId;

    /// A group's fenced writes read their lease once, and afresh after a
    /// decision of the same group, which may have moved it.
    #[test]
    fn fenced_writes_after_a_decision_in_their_group_see_the_lease_it_moved() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("pincer.db");
        let mut conn = Connection::open(&path).unwrap();
        super::super::configure_writer(&conn).unwrap();
        super::super::migrate(&mut conn, &path).unwrap();
        let session = SessionId::from_string("ses_fenced".into());
        let key = LeaseKey::session(&session);
        conn.execute(
            "INSERT INTO leases (key, holder, token, expires_at) VALUES (?1, 'a', 1, 0)",
            params![key.as_str()],
        )
        .unwrap();
        let mut acks = Vec::new();
        let mut fenced = |token: u64| {
            let (tx, rx) = oneshot::channel();
            acks.push(rx);
            Command::Write(
                Box::new(Write::Fenced {
                    fence: Fence {
                        key: key.clone(),
                        token,
                    },
                    write: Box::new(Write::SetTitle {
                        id: session.clone(),
                        title: format!("under {token}"),
                    }),
                }),
                Some(tx),
            )
        };
        let moved = key.clone();
        let mut group = vec![
            fenced(1),
            fenced(1),
            fenced(2),
            Command::Decide(Box::new(move |conn: &Connection| {
                conn.execute(
                    "UPDATE leases SET token = 2, holder = 'b' WHERE key = ?1",
                    params![moved.as_str()],
                )
                .unwrap();
                Box::new(|_| {})
            })),
            fenced(1),
            fenced(2),
        ];
        commit_group(&conn, &mut group, &AtomicU64::new(0));
        let admitted: Vec<bool> = acks
            .into_iter()
            .map(|mut rx| match rx.try_recv().unwrap() {
                Ok(()) => true,
                Err(StoreError::Fenced(_)) => false,
                Err(other) => panic!("{other}"),
            })
            .collect();
        assert_eq!(admitted, [true, true, false, false, true]);
    }
}
