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
use super::journal::{Journal, JournalError, RunsFrom};
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
    /// Where the journal's listing of the session's runs was last read to
    /// (`Journal::runs_to_follow`): each look lists only the runs inserted
    /// since, and the unfinished ones, not every run the session ever had.
    listed: Option<u64>,
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
            listed: None,
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
        self.learn_runs(false).await?;
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
        if let Err(err) = self.learn_runs(true).await {
            tracing::warn!(session = %self.session_id, error = %err, "cannot look for other processes' runs");
            return;
        }
        let mut others: Vec<(RunId, u64)> = self
            .expected
            .iter()
            .filter(|(run, _)| !self.local.contains(*run))
            .map(|(run, seq)| (run.clone(), *seq))
            .collect();
        others.sort();
        for (run, from) in others {
            match self.journal.tape(&run, from, Some(TAPE_PAGE)).await {
                Ok(records) => self.backlog.extend(records.into_iter().map(Arc::new)),
                Err(err) => {
                    tracing::warn!(session = %self.session_id, run = %run, error = %err, "cannot read another process's run");
                }
            }
        }
    }

    /// Learns of the session's runs the journal has that this subscription
    /// has not looked at: those that began after it subscribed (and, with
    /// `others`, those of other processes still working) are expected from
    /// their start; with `others`, this process's own runs are left to the
    /// broadcast. Only the runs inserted since the last look and the
    /// unfinished ones are read, so a look costs the same in a session's
    /// ten-thousandth run as in its first.
    async fn learn_runs(&mut self, others: bool) -> Result<(), JournalError> {
        let from = match self.listed {
            Some(after) => RunsFrom::After(after),
            None => RunsFrom::Created(self.since),
        };
        let found = self.journal.runs_to_follow(&self.session_id, from).await?;
        self.listed = Some(found.next);
        for run in found.runs {
            if self.finished.contains(&run.id) || (others && self.local.contains(&run.id)) {
                continue;
            }
            if run.created_at >= self.since || (others && !run.state.is_terminal()) {
                self.expected.entry(run.id).or_insert(0);
            }
        }
        Ok(())
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
