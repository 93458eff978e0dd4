//! A face's view of a session: its events in order with no gaps. Live events
//! come from the session's broadcast; a subscriber that falls behind it reads
//! what it missed back from the journal's tape, a page at a time, so a slow
//! face never slows a run. Runs another process works on the session reach
//! no broadcast here: woken by the journal's notifier (`core::notify`), the
//! subscription reads their committed events from the tape.

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::Arc;

use tokio::sync::broadcast;

use super::event::EventRecord;
use super::ids::{RunId, SessionId};
use super::journal::{Journal, JournalError};
use super::session::now_millis;

/// A session's events in order, with no gaps: when the subscriber falls behind
/// the live stream, the missed events are read back from the tape.
pub struct Subscription {
    session_id: SessionId,
    rx: broadcast::Receiver<Arc<EventRecord>>,
    journal: Arc<dyn Journal>,
    /// Runs created before this are not re-read after a lag.
    since: i64,
    /// The sequence number expected next, per run seen and not yet ended.
    expected: HashMap<RunId, u64>,
    /// Runs whose terminal event was delivered.
    finished: HashSet<RunId>,
    /// Events read back from the tape, waiting to be delivered; at most one page.
    backlog: VecDeque<Arc<EventRecord>>,
    /// Moves on when the journal changes: a hint to look for runs of other
    /// processes (`following`).
    wake: Option<tokio::sync::watch::Receiver<u64>>,
    /// Runs whose events this process publishes: never read from the tape
    /// on a wake-up.
    local: HashSet<RunId>,
}

/// Events read back from the tape at a time: bounds a lagging subscriber's memory.
const TAPE_PAGE: usize = 2048;

impl Subscription {
    /// Follows a session's events from `rx` on, reading missed ones from `journal`.
    pub(crate) fn new(
        session_id: &SessionId,
        rx: broadcast::Receiver<Arc<EventRecord>>,
        journal: Arc<dyn Journal>,
    ) -> Self {
        Self {
            session_id: session_id.clone(),
            rx,
            journal,
            since: now_millis(),
            expected: HashMap::new(),
            finished: HashSet::new(),
            backlog: VecDeque::new(),
            wake: None,
            local: HashSet::new(),
        }
    }

    /// Also delivers the events of runs other processes work on the session,
    /// read from the tape whenever `wake` moves on.
    pub(crate) fn following(mut self, wake: Option<tokio::sync::watch::Receiver<u64>>) -> Self {
        self.wake = wake.map(|mut wake| {
            // Look once at the start: a run already waiting commits nothing
            // more until someone answers it.
            wake.mark_changed();
            wake
        });
        self
    }

    /// The next event, or `None` once the session is closed.
    pub async fn next(&mut self) -> Option<Arc<EventRecord>> {
        loop {
            if let Some(record) = self.backlog.pop_front() {
                if self.accept(&record) {
                    return Some(record);
                }
                continue;
            }
            let received = match self.wake.as_mut() {
                Some(wake) => tokio::select! {
                    biased;
                    received = self.rx.recv() => received,
                    changed = wake.changed() => {
                        if changed.is_err() {
                            self.wake = None;
                        } else {
                            self.follow_others().await;
                        }
                        continue;
                    }
                },
                None => self.rx.recv().await,
            };
            match received {
                Ok(record) => {
                    if !self.local.contains(&record.run_id) {
                        self.local.insert(record.run_id.clone());
                    }
                    if let Some(expected) = self.expected.get(&record.run_id).copied()
                        && record.seq > expected
                    {
                        // Events between were missed: read them (and this one) from the tape.
                        self.read_page(&record.run_id.clone(), expected).await;
                        continue;
                    }
                    if self.accept(&record) {
                        return Some(record);
                    }
                }
                Err(broadcast::error::RecvError::Lagged(missed)) => {
                    tracing::debug!(session = %self.session_id, missed, "subscriber lagged; re-reading the tape");
                    if let Err(err) = self.on_lag().await {
                        tracing::error!(session = %self.session_id, error = %err, "cannot re-read the tape after a lag");
                    }
                }
                Err(broadcast::error::RecvError::Closed) => return None,
            }
        }
    }

    /// Whether a record is the next one of its run; if so records it as delivered.
    fn accept(&mut self, record: &EventRecord) -> bool {
        if self.finished.contains(&record.run_id) {
            return false;
        }
        if let Some(expected) = self.expected.get(&record.run_id)
            && record.seq != *expected
        {
            return false;
        }
        if record.event.terminal_state().is_some() {
            self.expected.remove(&record.run_id);
            self.finished.insert(record.run_id.clone());
        } else {
            self.expected.insert(record.run_id.clone(), record.seq + 1);
        }
        true
    }

    /// After a lag: learn of runs that started unseen, and read the first page of
    /// what was missed. Later pages are read as gaps show up.
    async fn on_lag(&mut self) -> Result<(), JournalError> {
        self.journal.flush().await?;
        for run in self.journal.runs(&self.session_id).await? {
            if !self.finished.contains(&run.id) && run.created_at >= self.since {
                self.expected.entry(run.id).or_insert(0);
            }
        }
        let mut pending: Vec<(RunId, u64)> = self
            .expected
            .iter()
            .map(|(run, seq)| (run.clone(), *seq))
            .collect();
        pending.sort();
        if let Some((run, from)) = pending.first() {
            self.read_page(run, *from).await;
        }
        Ok(())
    }

    /// Reads what other processes' runs of the session committed since this
    /// subscription last looked: runs it has not seen that began after it
    /// subscribed or still work, from their start; runs it follows, from
    /// where it is. One page each; the next wake-up reads on.
    async fn follow_others(&mut self) {
        let runs = match self.journal.runs(&self.session_id).await {
            Ok(runs) => runs,
            Err(err) => {
                tracing::warn!(session = %self.session_id, error = %err, "cannot look for other processes' runs");
                return;
            }
        };
        for run in runs {
            if self.finished.contains(&run.id) || self.local.contains(&run.id) {
                continue;
            }
            let from = match self.expected.get(&run.id) {
                Some(seq) => *seq,
                None if run.created_at >= self.since || !run.state.is_terminal() => 0,
                None => continue,
            };
            match self.journal.tape(&run.id, from, Some(TAPE_PAGE)).await {
                Ok(records) => self.backlog.extend(records.into_iter().map(Arc::new)),
                Err(err) => {
                    tracing::warn!(session = %self.session_id, run = %run.id, error = %err, "cannot read another process's run");
                }
            }
        }
    }

    async fn read_page(&mut self, run: &RunId, from: u64) {
        let page = async {
            self.journal.flush().await?;
            self.journal.tape(run, from, Some(TAPE_PAGE)).await
        }
        .await;
        match page {
            Ok(records) => self.backlog.extend(records.into_iter().map(Arc::new)),
            Err(err) => {
                tracing::error!(session = %self.session_id, run = %run, error = %err, "cannot re-read the tape");
            }
        }
    }
}
