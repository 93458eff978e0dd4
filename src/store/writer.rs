//! The writer thread: the only connection that writes, committing in groups.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use rusqlite::{Connection, OptionalExtension as _, params};
use tokio::sync::oneshot;

use super::{Recovery, StoreError, Write, owner};
use crate::core::event::{Event, EventRecord, RunState};
use crate::core::ids::{RunId, SessionId};
use crate::core::lease::{Lease, LeaseKey};
use crate::core::models::Cost;
use crate::core::receipt::{GENESIS, ReceiptBody};
use crate::core::session::{Message, now_millis};

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
        let handle = self.thread.lock().ok().and_then(|mut slot| slot.take());
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

fn apply(conn: &Connection, write: &Write) -> Result<(), StoreError> {
    apply_in(conn, write, &mut GroupLeases::default())
}

fn apply_in(conn: &Connection, write: &Write, leases: &mut GroupLeases) -> Result<(), StoreError> {
    match write {
        Write::InsertSession(s) => {
            conn.prepare_cached(
                "INSERT INTO sessions (id, workspace, origin, provider, model, mode, title, mcp_servers, created_at, updated_at, closed, conversation, system_prompt, instructions, parent_session, parent_run, parent_call, thought_level)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18)",
            )?
            .execute(params![
                s.id.as_str(),
                s.workspace.to_string_lossy(),
                s.origin.as_str(),
                s.provider,
                s.model,
                s.mode.as_str(),
                s.title,
                to_json(&s.mcp_servers)?,
                s.created_at,
                s.updated_at,
                s.closed,
                s.conversation,
                s.prompt.system_prompt,
                s.prompt.instructions,
                s.parent.as_ref().map(|p| p.session.as_str()),
                s.parent.as_ref().map(|p| p.run.as_str()),
                s.parent.as_ref().map(|p| p.call.as_str()),
                s.thought_level,
            ])?;
        }
        Write::UpdateSettings {
            id,
            provider,
            model,
            thought_level,
            mode,
            at,
        } => {
            conn.prepare_cached(
                "UPDATE sessions SET provider = ?2, model = ?3, mode = ?4, updated_at = ?5, thought_level = ?6 WHERE id = ?1",
            )?
            .execute(params![id.as_str(), provider, model, mode.as_str(), at, thought_level])?;
        }
        Write::SetTitle { id, title } => {
            conn.prepare_cached("UPDATE sessions SET title = ?2 WHERE id = ?1")?
                .execute(params![id.as_str(), title])?;
        }
        Write::SetClosed { id, closed, at } => {
            conn.prepare_cached("UPDATE sessions SET closed = ?2, updated_at = ?3 WHERE id = ?1")?
                .execute(params![id.as_str(), closed, at])?;
        }
        Write::DeleteSession { id, at } => {
            // The session and its subagents' sessions: tombstones first, so
            // the tape's trigger lets their tapes go.
            conn.prepare_cached(
                "UPDATE sessions SET deleted_at = ?2, closed = 1, title = NULL, mcp_servers = '[]',
                        system_prompt = NULL, instructions = NULL, updated_at = ?2
                 WHERE (id = ?1 OR parent_session = ?1) AND deleted_at IS NULL",
            )?
            .execute(params![id.as_str(), at])?;
            for table in ["messages", "grants", "tape", "channel_sessions"] {
                conn.prepare_cached(&format!(
                    "DELETE FROM {table} WHERE session_id IN
                       (SELECT id FROM sessions WHERE (id = ?1 OR parent_session = ?1) AND deleted_at IS NOT NULL)"
                ))?
                .execute(params![id.as_str()])?;
            }
        }
        Write::AppendMessage {
            session_id,
            run_id,
            message,
            at,
        } => append_message(conn, session_id.as_str(), run_id.as_ref(), message, *at)?,
        Write::InsertRun { id, session_id, at } => {
            conn.prepare_cached(
                "INSERT INTO runs (id, session_id, state, owner, created_at) VALUES (?1, ?2, 'queued', ?3, ?4)",
            )?
            .execute(params![id.as_str(), session_id.as_str(), owner::this_process(), at])?;
            conn.prepare_cached("UPDATE sessions SET updated_at = ?2 WHERE id = ?1")?
                .execute(params![session_id.as_str(), at])?;
        }
        Write::SetRunState {
            id,
            state,
            stop_reason,
            error,
            usage,
            cost,
            at,
        } => {
            let started = matches!(state, RunState::Running).then_some(*at);
            let ended = state.is_terminal().then_some(*at);
            conn.prepare_cached(
                "UPDATE runs SET state = ?2, stop_reason = ?3, error = ?4,
                    input_tokens = ?5, output_tokens = ?6,
                    cached_input_tokens = ?7, reasoning_tokens = ?8, cost = ?9, currency = ?10,
                    started_at = COALESCE(started_at, ?11), ended_at = COALESCE(?12, ended_at)
                 WHERE id = ?1",
            )?
            .execute(params![
                id.as_str(),
                state.as_str(),
                stop_reason.map(|r| r.as_str()),
                error,
                usage.input_tokens as i64,
                usage.output_tokens as i64,
                usage.cached_input_tokens as i64,
                usage.reasoning_tokens as i64,
                cost.as_ref().map(|c| c.amount),
                cost.as_ref().map(|c| c.currency.as_str()),
                started,
                ended,
            ])?;
        }
        Write::AppendEvent(record) => append_event(conn, record)?,
        Write::AppendReceipt(body) => append_receipt(conn, body)?,
        Write::Channel(write) => super::channels::apply(conn, write)?,
        Write::Memory(write) => super::memory::apply(conn, write)?,
        Write::Fenced { fence, write } => {
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
            apply_in(conn, write, leases)?;
        }
        Write::Control {
            session,
            control,
            at,
        } => {
            conn.prepare_cached(
                "INSERT INTO session_controls (session_id, control, at) VALUES (?1, ?2, ?3)",
            )?
            .execute(params![session.as_str(), to_json(control)?, at])?;
        }
        Write::TakeControl { id } => {
            let taken = conn
                .prepare_cached("DELETE FROM session_controls WHERE id = ?1")?
                .execute(params![id])?;
            if taken == 0 {
                return Err(StoreError::Conflict(format!(
                    "control {id} was taken already"
                )));
            }
            // Requests nobody took within ten minutes (their owner gone)
            // go too.
            conn.prepare_cached("DELETE FROM session_controls WHERE at < ?1")?
                .execute(params![now_millis() - 600_000])?;
        }
        Write::InterruptRuns { session, error, at } => {
            let working: Vec<String> = conn
                .prepare_cached(
                    "SELECT id FROM runs WHERE session_id = ?1 AND state IN ('running', 'waiting')
                     ORDER BY created_at, id",
                )?
                .query_map(params![session.as_str()], |row| row.get(0))?
                .collect::<Result<_, _>>()?;
            for run in working {
                interrupt_run(conn, &run, session.as_str(), error, *at)?;
            }
        }
        Write::Together(writes) => {
            // A savepoint inside the group's transaction: one failing write
            // undoes the others of this batch and nothing else of the group.
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
        }
        Write::PutGrant {
            session_id,
            grant,
            at,
        } => {
            conn.prepare_cached(
                "INSERT OR REPLACE INTO grants (session_id, tool, scope, allow, at) VALUES (?1, ?2, ?3, ?4, ?5)",
            )?
            .execute(params![session_id.as_str(), grant.tool, grant.scope, grant.allow, at])?;
        }
        Write::Trust(crate::core::hooks::TrustWrite::Set {
            root,
            trusted,
            at,
            files,
        }) => {
            let root = root.to_string_lossy();
            if *trusted {
                let files = serde_json::to_string(files)
                    .map_err(|err| StoreError::Write(format!("trusted files: {err}")))?;
                conn.prepare_cached(
                    "INSERT INTO trusted_roots (root, at, files) VALUES (?1, ?2, ?3) \
                     ON CONFLICT (root) DO UPDATE SET at = excluded.at, files = excluded.files",
                )?
                .execute(params![root, at, files])?;
            } else {
                conn.prepare_cached("DELETE FROM trusted_roots WHERE root = ?1")?
                    .execute(params![root])?;
            }
        }
    }
    Ok(())
}

fn append_message(
    conn: &Connection,
    session_id: &str,
    run_id: Option<&RunId>,
    message: &Message,
    at: i64,
) -> Result<(), StoreError> {
    let role = match message {
        Message::User { .. } => "user",
        Message::Assistant { .. } => "assistant",
        Message::Tool { .. } => "tool",
        Message::Summary { .. } => "summary",
        Message::Note { .. } => "note",
    };
    conn.prepare_cached(
        "INSERT INTO messages (session_id, seq, run_id, role, body, at)
         VALUES (?1, (SELECT COALESCE(MAX(seq), 0) + 1 FROM messages WHERE session_id = ?1), ?2, ?3, ?4, ?5)",
    )?
    .execute(params![
        session_id,
        run_id.map(RunId::as_str),
        role,
        to_json(message)?,
        at
    ])?;
    conn.prepare_cached("UPDATE sessions SET updated_at = ?2 WHERE id = ?1")?
        .execute(params![session_id, at])?;
    Ok(())
}

fn append_event(conn: &Connection, record: &EventRecord) -> Result<(), StoreError> {
    conn.prepare_cached(
        "INSERT INTO tape (run_id, session_id, seq, at, kind, payload) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
    )?
    .execute(params![
        record.run_id.as_str(),
        record.session_id.as_str(),
        record.seq as i64,
        record.at,
        record.event.kind(),
        to_json(&record.event)?,
    ])?;
    Ok(())
}

fn append_receipt(conn: &Connection, body: &ReceiptBody) -> Result<(), StoreError> {
    use rusqlite::OptionalExtension;
    // Read inside the writer's transaction: no other writer can slip in between.
    let last: Option<(i64, String)> = conn
        .prepare_cached("SELECT seq, hash FROM receipts ORDER BY seq DESC LIMIT 1")?
        .query_row([], |row| Ok((row.get(0)?, row.get(1)?)))
        .optional()?;
    let (seq, prev) = match last {
        Some((seq, hash)) => (seq as u64 + 1, hash),
        None => (1, GENESIS.to_owned()),
    };
    let receipt = body.clone().chain(seq, &prev);
    conn.prepare_cached(
        "INSERT INTO receipts (seq, session_id, run_id, call_id, tool, input_hash, output_hash, verdict, is_error, at, prev_hash, hash, hooks)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13)",
    )?
    .execute(params![
        receipt.seq as i64,
        body.session_id.as_str(),
        body.run_id.as_str(),
        body.call_id,
        body.tool,
        body.input_hash,
        body.output_hash,
        body.verdict.as_str(),
        body.is_error,
        body.at,
        receipt.prev_hash,
        receipt.hash,
        (!body.hooks.is_empty()).then(|| body.hooks.join("\n")),
    ])?;
    Ok(())
}

/// The runs an open looks at for recovery: unfinished ones, read through the
/// partial index `runs_unfinished` (migration 14), whose `WHERE` is this
/// condition word for word, so an open reads none of the finished runs.
pub(super) const UNFINISHED_RUNS: &str = "SELECT id, session_id, owner, state FROM runs WHERE state IN ('queued', 'running', 'waiting') ORDER BY created_at, id";

/// An unfinished run as recovery sees it.
struct Unfinished {
    id: String,
    session: String,
    owner: Option<String>,
    /// `running` or `waiting` (else `queued`): the run worked under its
    /// session's lease.
    working: bool,
}

fn unfinished(conn: &Connection) -> Result<Vec<Unfinished>, StoreError> {
    let mut stmt = conn.prepare_cached(UNFINISHED_RUNS)?;
    let rows = stmt.query_map([], |row| {
        Ok(Unfinished {
            id: row.get(0)?,
            session: row.get(1)?,
            owner: row.get(2)?,
            working: row.get::<_, String>(3)? != "queued",
        })
    })?;
    Ok(rows.collect::<Result<_, _>>()?)
}

/// Whether nobody works on an unfinished run any more, decided by leases
/// (`core::lease`): a working run belongs to whoever holds its session's
/// lease, so it is abandoned once that lease lapsed (or was released); a
/// queued run waits in the process that made it, which holds its process
/// lease while it lives. Holders that died on this machine count as gone at
/// once (the `/proc` shortcut); a run with no lease to go by (made before
/// leases, or by a process without one) falls back to its owner's `/proc`
/// entry. Returns the session lease to take over with the decision.
fn abandoned(
    conn: &Connection,
    run: &Unfinished,
    now: i64,
) -> Result<(bool, Option<Lease>), StoreError> {
    let live = |lease: &Lease| lease.expires_at > now && !owner::is_dead_here(&lease.holder);
    if run.working {
        let key = LeaseKey::session(&SessionId::from_string(run.session.clone()));
        if let Some(lease) = super::leases::stored_in(conn, &key)? {
            return Ok(if live(&lease) {
                (false, None)
            } else {
                (true, Some(lease))
            });
        }
    }
    let Some(tag) = run.owner.as_deref() else {
        return Ok((true, None));
    };
    Ok(
        match super::leases::stored_in(conn, &LeaseKey::process(tag))? {
            Some(lease) => (!live(&lease), None),
            None => (!owner::is_alive(tag), None),
        },
    )
}

/// Marks runs nobody works on any more as failed (see [`abandoned`]),
/// keeping what they had streamed: the partial reply of an interrupted
/// model turn joins the history. The lease of each session whose working
/// run it ends is taken over and released in the same transaction, so a
/// holder that was only stopped (not dead) has its late writes refused.
pub(super) fn recover_interrupted(conn: &mut Connection) -> Result<Recovery, StoreError> {
    // Most opens find nothing to recover: look first without the write lock,
    // which a running bridge's writer would otherwise have to wait for.
    if !needs_recovery(conn)? {
        return Ok(Recovery::default());
    }
    let tx = conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
    let mut recovery = Recovery::default();
    let now = now_millis();
    let mut fenced: Vec<LeaseKey> = Vec::new();
    for run in unfinished(&tx)? {
        let (gone, lease) = abandoned(&tx, &run, now)?;
        if !gone {
            continue;
        }
        if let Some(lease) = lease
            && !fenced.contains(&lease.key)
        {
            super::leases::take_over_in(&tx, &lease, owner::this_process())?;
            fenced.push(lease.key);
        }
        interrupt_run(
            &tx,
            &run.id,
            &run.session,
            "interrupted: the pincer process stopped before the run ended",
            now,
        )?;
        recovery.interrupted_runs.push(RunId::from_string(run.id));
    }
    tx.commit()?;
    Ok(recovery)
}

/// Marks one unfinished run failed as interrupted with `error`, keeping what
/// it streamed: the partial reply of a model turn it cut short joins the
/// history, and its tape ends with the failure.
fn interrupt_run(
    tx: &Connection,
    run_id: &str,
    session_id: &str,
    error: &str,
    now: i64,
) -> Result<(), StoreError> {
    let run_id = run_id.to_owned();
    let events = super::reader::tape(tx, &RunId::from_string(run_id.clone()), 0, None)?;
    let next_seq = events.last().map_or(0, |e| e.seq + 1);
    let (stored, stored_turns): (i64, i64) = tx.query_row(
        "SELECT COUNT(*), COALESCE(SUM(role = 'assistant'), 0) FROM messages WHERE run_id = ?1",
        params![run_id],
        |row| Ok((row.get(0)?, row.get(1)?)),
    )?;
    // A run that stored no message is a session command (a prompt's run
    // stores its prompt first; a command stores its messages when it
    // ends): a summary cut short is no turn of the conversation.
    let last_said: Option<(String, String)> = if stored_turns > 0 {
        let body: Option<String> = tx
            .query_row(
                "SELECT body FROM messages WHERE session_id = ?2 AND run_id = ?1 AND role = 'assistant' \
                 ORDER BY seq DESC LIMIT 1",
                params![run_id, session_id],
                |row| row.get(0),
            )
            .optional()?;
        body.and_then(|body: String| serde_json::from_str::<Message>(&body).ok())
            .and_then(|message| match message {
                Message::Assistant { text, thought, .. } => Some((text, thought)),
                _ => None,
            })
    } else {
        None
    };
    if stored > 0
        && let Some(partial) = crate::core::run::partial_turn(
            &events,
            stored_turns as usize,
            last_said.as_ref().map(|(t, th)| (t.as_str(), th.as_str())),
        )
    {
        append_message(
            tx,
            session_id,
            Some(&RunId::from_string(run_id.clone())),
            &partial,
            now,
        )?;
    }
    let error = error.to_owned();
    let mut usage = crate::core::event::Usage::default();
    let mut cost = None;
    for event in &events {
        if let Event::Usage {
            usage: turn,
            cost: turn_cost,
            ..
        } = &event.event
        {
            usage.add(*turn);
            cost = Cost::sum(cost, turn_cost.as_ref());
        }
    }
    let record = EventRecord {
        session_id: crate::core::ids::SessionId::from_string(session_id.to_owned()),
        run_id: RunId::from_string(run_id.clone()),
        seq: next_seq,
        at: now,
        event: Event::State {
            state: RunState::Failed,
            stop_reason: None,
            error: Some(error.clone()),
            usage: (usage != crate::core::event::Usage::default()).then_some(usage),
            cost: cost.clone(),
        },
    };
    append_event(tx, &record)?;
    apply(
        tx,
        &Write::SetRunState {
            id: RunId::from_string(run_id.clone()),
            state: RunState::Failed,
            stop_reason: None,
            error: Some(error),
            usage,
            cost,
            at: now,
        },
    )?;
    Ok(())
}

/// Whether some unfinished run is abandoned (a read, no lock).
fn needs_recovery(conn: &Connection) -> Result<bool, StoreError> {
    let now = now_millis();
    for run in unfinished(conn)? {
        if abandoned(conn, &run, now)?.0 {
            return Ok(true);
        }
    }
    Ok(false)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::lease::Fence;

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
