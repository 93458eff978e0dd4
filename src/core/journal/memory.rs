//! A journal that keeps everything in memory: the core's unit tests run on it
//! instead of SQLite files, and it passes the same contract suite
//! ([`super::contract`]) as every real backend. Nothing survives the process,
//! so "durable" here means "applied": writes are applied at once, in order.
//! It keeps the chat channels' records and memory items too, as the SQLite
//! store does (`core::channel::contract`, `core::memory::contract`).

mod channels;
mod memories;
mod schedules;

use parking_lot::Mutex;
use std::collections::HashMap;

use super::{Audit, Journal, JournalError, Reply, RunsFrom, RunsToFollow, SessionQuery, Write};
use crate::core::approval::Grant;
use crate::core::event::{EventRecord, RunState};
use crate::core::ids::{RunId, SessionId};
use crate::core::receipt::{GENESIS, Receipt};
use crate::core::run::RunInfo;
use crate::core::session::{HistoryEntry, Message, Millis, Session};
use crate::core::usage::Cost;

#[derive(Default)]
pub struct MemoryJournal {
    state: Mutex<State>,
    /// Bumped after every applied write (`core::notify`).
    changes: crate::core::notify::Local,
}

#[derive(Default, Clone)]
struct State {
    stopped: bool,
    sessions: HashMap<SessionId, Session>,
    messages: HashMap<SessionId, Vec<HistoryEntry>>,
    runs: HashMap<RunId, RunInfo>,
    /// Each run's position: the order runs were inserted (from 1).
    positions: HashMap<RunId, u64>,
    tape: HashMap<RunId, Vec<EventRecord>>,
    receipts: Vec<Receipt>,
    /// Per session: (tool, scope) → (allow, at), in the order first granted.
    grants: HashMap<SessionId, Vec<(Grant, Millis)>>,
    trusted: Vec<crate::core::hooks::Trust>,
    /// The sessions' leases (`core::lease`), for `Leases` and fenced writes.
    leases: HashMap<crate::core::lease::LeaseKey, crate::core::lease::Lease>,
    /// Requests left for sessions' runs, not taken: (id, session, control).
    controls: Vec<(i64, SessionId, crate::core::control::Control)>,
    next_control: i64,
    /// The chat channels' records (`core::channel`).
    channels: channels::Channels,
    /// Memory items (`core::memory`).
    memories: memories::Items,
    /// Schedules and their fires (`core::schedule`).
    schedules: schedules::Book,
}

impl MemoryJournal {
    pub fn new() -> Self {
        Self::default()
    }

    /// Stops the journal: later commits and flushes fail, as a backend's do.
    pub fn stop(&self) {
        self.state.lock().stopped = true;
    }

    fn apply(&self, write: Write) -> Result<(), JournalError> {
        let applied = {
            let mut state = self.state.lock();
            if state.stopped {
                return Err(JournalError::Stopped);
            }
            // All or nothing: apply to a copy only for writes of several parts.
            if let Write::Together(_) | Write::Fenced { .. } = write {
                let mut copy = state.clone();
                copy.apply(write).map(|()| *state = copy)
            } else {
                state.apply(write)
            }
        };
        if applied.is_ok() {
            self.changes.bump();
        }
        applied
    }

    fn read<T>(&self, f: impl FnOnce(&State) -> T) -> Reply<'_, T>
    where
        T: Send + 'static,
    {
        let value = f(&self.state.lock());
        Box::pin(async move { Ok(value) })
    }
}

fn missing(what: &str, id: &str) -> JournalError {
    JournalError::Backend(format!("{what} {id} does not exist").into())
}

impl State {
    /// Applies one write; each arm delegates to the function for its kind,
    /// as the SQLite writer does (`store::writer`).
    fn apply(&mut self, write: Write) -> Result<(), JournalError> {
        match write {
            Write::InsertSession(session) => self.insert_session(session),
            Write::UpdateSettings {
                id,
                provider,
                model,
                thought_level,
                mode,
                at,
            } => {
                if let Some(session) = self.sessions.get_mut(&id) {
                    session.provider = provider;
                    session.model = model;
                    session.thought_level = thought_level;
                    session.mode = mode;
                    session.updated_at = at;
                }
                Ok(())
            }
            Write::SetTitle { id, title } => {
                if let Some(session) = self.sessions.get_mut(&id) {
                    session.title = Some(title);
                }
                Ok(())
            }
            Write::SetClosed { id, closed, at } => {
                if let Some(session) = self.sessions.get_mut(&id) {
                    session.closed = closed;
                    session.updated_at = at;
                }
                Ok(())
            }
            Write::DeleteSession { id, at: _ } => {
                self.delete_session(&id);
                Ok(())
            }
            Write::AppendMessage {
                session_id,
                run_id,
                message,
                at,
            } => self.append_message(session_id, run_id, message, at),
            Write::InsertRun { id, session_id, at } => self.insert_run(id, session_id, at),
            Write::SetRunState {
                id,
                state,
                stop_reason,
                error,
                usage,
                cost,
                at,
            } => {
                if let Some(run) = self.runs.get_mut(&id) {
                    run.state = state;
                    run.stop_reason = stop_reason;
                    run.error = error;
                    run.usage = usage;
                    run.cost = cost;
                    if state == RunState::Running && run.started_at.is_none() {
                        run.started_at = Some(at);
                    }
                    if state.is_terminal() {
                        run.ended_at = Some(at);
                    }
                }
                Ok(())
            }
            Write::AppendEvent(record) => self.append_event(record),
            Write::AppendReceipt(body) => {
                let (seq, prev) = match self.receipts.last() {
                    Some(last) => (last.seq + 1, last.hash.clone()),
                    None => (1, GENESIS.to_owned()),
                };
                self.receipts.push(body.chain(seq, &prev));
                Ok(())
            }
            Write::PutGrant {
                session_id,
                grant,
                at,
            } => self.put_grant(session_id, grant, at),
            Write::Trust(crate::core::hooks::TrustWrite::Set {
                root,
                trusted,
                files,
                ..
            }) => {
                self.trusted.retain(|t| t.root != root);
                if trusted {
                    self.trusted.push(crate::core::hooks::Trust { root, files });
                }
                Ok(())
            }
            Write::Channel(write) => self.channels.apply(write),
            Write::Memory(write) => self.memories.apply(write),
            Write::Schedule(write) => self.schedules.apply(write),
            Write::Together(writes) => writes.into_iter().try_for_each(|write| self.apply(write)),
            Write::Fenced { fence, write } => self.apply_fenced(&fence, *write),
            Write::Control {
                session, control, ..
            } => {
                self.next_control += 1;
                self.controls.push((self.next_control, session, control));
                Ok(())
            }
            Write::TakeControl { id } => self.take_control(id),
            Write::InterruptRuns { session, error, at } => {
                self.interrupt_runs(&session, &error, at)
            }
        }
    }

    fn insert_session(&mut self, session: Session) -> Result<(), JournalError> {
        if self.sessions.contains_key(&session.id) {
            return Err(JournalError::Backend(
                format!("session {} already exists", session.id).into(),
            ));
        }
        self.sessions.insert(session.id.clone(), session);
        Ok(())
    }

    /// Deletes a session and its subagents' sessions, with their messages,
    /// grants, tapes and channel records.
    fn delete_session(&mut self, id: &SessionId) {
        let gone: Vec<SessionId> = self
            .sessions
            .values()
            .filter(|s| s.id == *id || s.parent.as_ref().is_some_and(|p| p.session == *id))
            .map(|s| s.id.clone())
            .collect();
        self.channels.forget_sessions(&gone);
        for session in &gone {
            self.sessions.remove(session);
            self.messages.remove(session);
            self.grants.remove(session);
            let runs: Vec<RunId> = self
                .runs
                .values()
                .filter(|r| r.session_id == *session)
                .map(|r| r.id.clone())
                .collect();
            for run in runs {
                self.tape.remove(&run);
            }
        }
    }

    fn append_message(
        &mut self,
        session_id: SessionId,
        run_id: Option<RunId>,
        message: Message,
        at: Millis,
    ) -> Result<(), JournalError> {
        let session = self
            .sessions
            .get_mut(&session_id)
            .ok_or_else(|| missing("session", session_id.as_str()))?;
        session.updated_at = at;
        self.messages
            .entry(session_id)
            .or_default()
            .push(HistoryEntry {
                run_id,
                message,
                at,
            });
        Ok(())
    }

    fn insert_run(
        &mut self,
        id: RunId,
        session_id: SessionId,
        at: Millis,
    ) -> Result<(), JournalError> {
        if self.runs.contains_key(&id) {
            return Err(JournalError::Backend(
                format!("run {id} already exists").into(),
            ));
        }
        let session = self
            .sessions
            .get_mut(&session_id)
            .ok_or_else(|| missing("session", session_id.as_str()))?;
        session.updated_at = at;
        let position = self.positions.len() as u64 + 1;
        self.positions.insert(id.clone(), position);
        self.runs.insert(
            id.clone(),
            RunInfo {
                id,
                session_id,
                state: RunState::Queued,
                stop_reason: None,
                error: None,
                usage: Default::default(),
                cost: None,
                created_at: at,
                started_at: None,
                ended_at: None,
            },
        );
        Ok(())
    }

    /// Puts an event on its run's tape in `seq` order; a `seq` already there
    /// is refused.
    fn append_event(&mut self, record: EventRecord) -> Result<(), JournalError> {
        let tape = self.tape.entry(record.run_id.clone()).or_default();
        if tape.iter().any(|stored| stored.seq == record.seq) {
            return Err(JournalError::Backend(
                format!(
                    "event {} of run {} is already on the tape",
                    record.seq, record.run_id
                )
                .into(),
            ));
        }
        let at = tape.partition_point(|stored| stored.seq < record.seq);
        tape.insert(at, record);
        Ok(())
    }

    fn put_grant(
        &mut self,
        session_id: SessionId,
        grant: Grant,
        at: Millis,
    ) -> Result<(), JournalError> {
        if !self.sessions.contains_key(&session_id) {
            return Err(missing("session", session_id.as_str()));
        }
        let grants = self.grants.entry(session_id).or_default();
        grants.retain(|(old, _)| !(old.tool == grant.tool && old.scope == grant.scope));
        grants.push((grant, at));
        Ok(())
    }

    /// Applies a write only while the lease it was made under is current.
    fn apply_fenced(
        &mut self,
        fence: &crate::core::lease::Fence,
        write: Write,
    ) -> Result<(), JournalError> {
        let stored = self.leases.get(&fence.key);
        if !crate::core::lease::admits(stored, fence) {
            return Err(JournalError::Fenced(format!(
                "{}: the lease this write was made under (token {}) is no longer current; refused",
                fence.key, fence.token
            )));
        }
        self.apply(write)
    }

    fn take_control(&mut self, id: i64) -> Result<(), JournalError> {
        let before = self.controls.len();
        self.controls.retain(|(stored, _, _)| *stored != id);
        if self.controls.len() == before {
            return Err(JournalError::Conflict(format!(
                "control {id} was taken already"
            )));
        }
        Ok(())
    }

    /// Ends a session's working runs as failed, oldest first: each keeps
    /// what it had said (`core::run::partial_turn`), gets a final `State`
    /// event and its failed state.
    fn interrupt_runs(
        &mut self,
        session: &SessionId,
        error: &str,
        at: Millis,
    ) -> Result<(), JournalError> {
        let mut working: Vec<RunInfo> = self
            .runs
            .values()
            .filter(|r| {
                r.session_id == *session && matches!(r.state, RunState::Running | RunState::Waiting)
            })
            .cloned()
            .collect();
        working.sort_by(|a, b| (a.created_at, a.id.as_str()).cmp(&(b.created_at, b.id.as_str())));
        for run in working {
            self.interrupt_run(session, &run, error, at)?;
        }
        Ok(())
    }

    fn interrupt_run(
        &mut self,
        session: &SessionId,
        run: &RunInfo,
        error: &str,
        at: Millis,
    ) -> Result<(), JournalError> {
        let events = self.tape.get(&run.id).cloned().unwrap_or_default();
        if let Some(partial) = self.partial_turn(session, &run.id, &events) {
            self.apply(Write::AppendMessage {
                session_id: session.clone(),
                run_id: Some(run.id.clone()),
                message: partial,
                at,
            })?;
        }
        let next = events.last().map_or(0, |e| e.seq + 1);
        self.apply(Write::AppendEvent(EventRecord {
            session_id: session.clone(),
            run_id: run.id.clone(),
            seq: next,
            at,
            event: crate::core::event::Event::State {
                state: RunState::Failed,
                stop_reason: None,
                error: Some(error.to_owned()),
                usage: None,
                cost: None,
            },
        }))?;
        self.apply(Write::SetRunState {
            id: run.id.clone(),
            state: RunState::Failed,
            stop_reason: None,
            error: Some(error.to_owned()),
            usage: run.usage,
            cost: run.cost.clone(),
            at,
        })
    }

    /// What an interrupted run had said and not yet recorded, if it recorded
    /// any message at all (`core::run::partial_turn`).
    fn partial_turn(
        &self,
        session: &SessionId,
        run: &RunId,
        events: &[EventRecord],
    ) -> Option<Message> {
        let mine: Vec<&HistoryEntry> = self
            .messages
            .get(session)
            .map(|m| {
                m.iter()
                    .filter(|e| e.run_id.as_ref() == Some(run))
                    .collect()
            })
            .unwrap_or_default();
        if mine.is_empty() {
            return None;
        }
        let turns = mine
            .iter()
            .filter(|e| matches!(e.message, Message::Assistant { .. }))
            .count();
        let last_said = mine.iter().rev().find_map(|e| {
            if let Message::Assistant { text, thought, .. } = &e.message {
                Some((text.as_str(), thought.as_str()))
            } else {
                None
            }
        });
        crate::core::run::partial_turn(events, turns, last_said)
    }
}

impl crate::core::lease::Leases for MemoryJournal {
    fn claim<'a>(
        &'a self,
        key: &'a crate::core::lease::LeaseKey,
        holder: &'a str,
        now: Millis,
        ttl_ms: i64,
    ) -> futures::future::BoxFuture<
        'a,
        Result<crate::core::lease::Lease, crate::core::lease::LeaseError>,
    > {
        let result =
            crate::core::lease::claim_in(&mut self.state.lock().leases, key, holder, now, ttl_ms);
        Box::pin(async move { result })
    }

    fn renew<'a>(
        &'a self,
        lease: &'a crate::core::lease::Lease,
        now: Millis,
        ttl_ms: i64,
    ) -> futures::future::BoxFuture<
        'a,
        Result<crate::core::lease::Lease, crate::core::lease::LeaseError>,
    > {
        let result =
            crate::core::lease::renew_in(&mut self.state.lock().leases, lease, now, ttl_ms);
        Box::pin(async move { result })
    }

    fn release<'a>(
        &'a self,
        lease: &'a crate::core::lease::Lease,
    ) -> futures::future::BoxFuture<'a, Result<(), crate::core::lease::LeaseError>> {
        crate::core::lease::release_in(&mut self.state.lock().leases, lease);
        Box::pin(async { Ok(()) })
    }

    fn current<'a>(
        &'a self,
        key: &'a crate::core::lease::LeaseKey,
    ) -> futures::future::BoxFuture<
        'a,
        Result<Option<crate::core::lease::Lease>, crate::core::lease::LeaseError>,
    > {
        let found = self.state.lock().leases.get(key).cloned();
        Box::pin(async move { Ok(found) })
    }
}

impl Journal for MemoryJournal {
    fn submit(&self, write: Write) {
        if let Err(err) = self.apply(write) {
            tracing::error!(error = %err, "write failed");
        }
    }

    fn commit(&self, write: Write) -> Reply<'_, ()> {
        let result = self.apply(write);
        Box::pin(async move { result })
    }

    fn flush(&self) -> Reply<'_, ()> {
        let stopped = self.state.lock().stopped;
        Box::pin(async move {
            if stopped {
                Err(JournalError::Stopped)
            } else {
                Ok(())
            }
        })
    }

    fn session<'a>(&'a self, id: &'a SessionId) -> Reply<'a, Option<Session>> {
        self.read(|state| state.sessions.get(id).cloned())
    }

    fn sessions(&self, query: SessionQuery) -> Reply<'_, Vec<Session>> {
        self.read(move |state| {
            let mut found: Vec<Session> = state
                .sessions
                .values()
                .filter(|s| query.workspace.as_ref().is_none_or(|w| &s.workspace == w))
                .filter(|s| s.parent.is_none())
                .filter(|s| query.filter.passes(s))
                .filter(|s| {
                    query
                        .filter
                        .channel
                        .as_ref()
                        .is_none_or(|channel| state.channels.maps(channel, &s.id))
                })
                .filter(|s| match &query.after {
                    Some(after) => {
                        s.updated_at < after.updated_at
                            || (s.updated_at == after.updated_at
                                && s.id.as_str() < after.id.as_str())
                    }
                    None => true,
                })
                .cloned()
                .collect();
            found.sort_by(|a, b| (b.updated_at, b.id.as_str()).cmp(&(a.updated_at, a.id.as_str())));
            if query.limit > 0 {
                found.truncate(query.limit);
            }
            found
        })
    }

    fn history<'a>(&'a self, id: &'a SessionId) -> Reply<'a, Vec<HistoryEntry>> {
        self.read(|state| state.messages.get(id).cloned().unwrap_or_default())
    }

    fn since_compaction<'a>(&'a self, id: &'a SessionId) -> Reply<'a, Vec<HistoryEntry>> {
        self.read(|state| {
            let messages = state
                .messages
                .get(id)
                .map(Vec::as_slice)
                .unwrap_or_default();
            let from = messages
                .iter()
                .rposition(|entry| matches!(entry.message, Message::Summary { .. }))
                .unwrap_or(0);
            messages[from..].to_vec()
        })
    }

    fn session_cost<'a>(
        &'a self,
        session: &'a SessionId,
        except: &'a RunId,
    ) -> Reply<'a, Option<Cost>> {
        self.read(|state| {
            let mut runs: Vec<&RunInfo> = state
                .runs
                .values()
                .filter(|run| &run.session_id == session && &run.id != except)
                .collect();
            runs.sort_by(|a, b| (a.created_at, a.id.as_str()).cmp(&(b.created_at, b.id.as_str())));
            runs.into_iter()
                .fold(None, |total, run| Cost::sum(total, run.cost.as_ref()))
        })
    }

    fn runs_to_follow<'a>(
        &'a self,
        session: &'a SessionId,
        from: RunsFrom,
    ) -> Reply<'a, RunsToFollow> {
        self.read(|state| {
            let mut runs: Vec<(u64, &RunInfo)> = state
                .runs
                .values()
                .filter(|run| &run.session_id == session)
                .map(|run| (state.positions.get(&run.id).copied().unwrap_or(0), run))
                .filter(|(position, run)| {
                    !run.state.is_terminal()
                        || match from {
                            RunsFrom::Created(at) => run.created_at >= at,
                            RunsFrom::After(after) => *position > after,
                        }
                })
                .collect();
            runs.sort_by_key(|(position, _)| *position);
            RunsToFollow {
                runs: runs.iter().map(|(_, run)| (*run).clone()).collect(),
                next: match from {
                    RunsFrom::Created(_) => state.positions.len() as u64,
                    RunsFrom::After(after) => state.positions.len().max(after as usize) as u64,
                },
            }
        })
    }

    fn runs<'a>(&'a self, session: &'a SessionId) -> Reply<'a, Vec<RunInfo>> {
        self.read(|state| {
            let mut runs: Vec<RunInfo> = state
                .runs
                .values()
                .filter(|run| &run.session_id == session)
                .cloned()
                .collect();
            runs.sort_by(|a, b| (a.created_at, a.id.as_str()).cmp(&(b.created_at, b.id.as_str())));
            runs
        })
    }

    fn run<'a>(&'a self, id: &'a RunId) -> Reply<'a, Option<RunInfo>> {
        self.read(|state| state.runs.get(id).cloned())
    }

    fn waiting_runs(&self) -> Reply<'_, Vec<RunInfo>> {
        self.read(|state| {
            let mut runs: Vec<RunInfo> = state
                .runs
                .values()
                .filter(|run| run.state == crate::core::event::RunState::Waiting)
                .cloned()
                .collect();
            runs.sort_by(|a, b| (a.created_at, a.id.as_str()).cmp(&(b.created_at, b.id.as_str())));
            runs
        })
    }

    fn spent<'a>(&'a self, provider: &'a str, since: Millis) -> Reply<'a, Vec<Cost>> {
        self.read(move |state| {
            let mut sums: Vec<Cost> = Vec::new();
            for run in state.runs.values().filter(|run| run.created_at >= since) {
                let served = state
                    .sessions
                    .get(&run.session_id)
                    .is_some_and(|s| s.provider == provider);
                if let (true, Some(cost)) = (served, &run.cost) {
                    match sums.iter_mut().find(|c| c.currency == cost.currency) {
                        Some(sum) => sum.amount += cost.amount,
                        None => sums.push(cost.clone()),
                    }
                }
            }
            sums
        })
    }

    fn tape<'a>(
        &'a self,
        run: &'a RunId,
        from_seq: u64,
        limit: Option<usize>,
    ) -> Reply<'a, Vec<EventRecord>> {
        self.read(move |state| {
            state
                .tape
                .get(run)
                .map(|tape| {
                    tape.iter()
                        .filter(|record| record.seq >= from_seq)
                        .take(limit.unwrap_or(usize::MAX))
                        .cloned()
                        .collect()
                })
                .unwrap_or_default()
        })
    }

    fn grants<'a>(&'a self, session: &'a SessionId) -> Reply<'a, Vec<Grant>> {
        self.read(|state| {
            let mut grants = state.grants.get(session).cloned().unwrap_or_default();
            grants.sort_by(|(a, a_at), (b, b_at)| {
                (a_at, &a.tool, &a.scope).cmp(&(b_at, &b.tool, &b.scope))
            });
            grants.into_iter().map(|(grant, _)| grant).collect()
        })
    }

    fn trusted_roots(&self) -> Reply<'_, Vec<crate::core::hooks::Trust>> {
        self.read(|state| state.trusted.clone())
    }

    fn skills_last_used(&self) -> Reply<'_, Vec<(String, crate::core::session::Millis)>> {
        self.read(|state| {
            let mut last: std::collections::BTreeMap<String, crate::core::session::Millis> =
                std::collections::BTreeMap::new();
            for record in state.tape.values().flatten() {
                if let crate::core::event::Event::SkillActivated { name, .. } = &record.event {
                    let at = last.entry(name.clone()).or_insert(record.at);
                    *at = (*at).max(record.at);
                }
            }
            last.into_iter().collect()
        })
    }

    fn controls<'a>(
        &'a self,
        session: &'a SessionId,
    ) -> Reply<'a, Vec<(i64, crate::core::control::Control)>> {
        let session = session.clone();
        self.read(move |state| {
            state
                .controls
                .iter()
                .filter(|(_, s, _)| *s == session)
                .map(|(id, _, control)| (*id, control.clone()))
                .collect()
        })
    }
}

impl crate::core::notify::Notifier for MemoryJournal {
    fn watch(&self) -> tokio::sync::watch::Receiver<u64> {
        self.changes.watch()
    }
}

impl Audit for MemoryJournal {
    fn receipts(&self, from_seq: u64, limit: usize) -> Reply<'_, Vec<Receipt>> {
        self.read(move |state| {
            state
                .receipts
                .iter()
                .filter(|receipt| receipt.seq >= from_seq)
                .take(limit)
                .cloned()
                .collect()
        })
    }

    fn run_receipts<'a>(&'a self, run: &'a RunId) -> Reply<'a, Vec<Receipt>> {
        self.read(|state| {
            state
                .receipts
                .iter()
                .filter(|receipt| &receipt.body.run_id == run)
                .cloned()
                .collect()
        })
    }

    fn missing_receipts(&self) -> Reply<'_, Vec<(RunId, u64, u64)>> {
        self.read(|state| {
            let mut missing = Vec::new();
            for (run, tape) in &state.tape {
                let results = tape
                    .iter()
                    .filter(|record| record.event.kind() == "tool_result")
                    .count() as u64;
                let receipts = state
                    .receipts
                    .iter()
                    .filter(|receipt| &receipt.body.run_id == run)
                    .count() as u64;
                if results > receipts {
                    missing.push((run.clone(), results, receipts));
                }
            }
            missing.sort();
            missing
        })
    }
}

impl crate::core::journal::Schedules for MemoryJournal {
    fn schedules(&self) -> Reply<'_, Vec<crate::core::schedule::Schedule>> {
        self.read(|state| state.schedules.schedules())
    }

    fn fires<'a>(
        &'a self,
        schedule: Option<&'a str>,
        limit: usize,
    ) -> Reply<'a, Vec<crate::core::schedule::Fire>> {
        self.read(|state| state.schedules.fires(schedule, limit))
    }

    fn last_fired(&self) -> Reply<'_, Vec<(String, Millis)>> {
        self.read(|state| state.schedules.last_fired())
    }

    fn open_fires(&self) -> Reply<'_, Vec<crate::core::schedule::Fire>> {
        self.read(|state| state.schedules.open_fires())
    }
}
