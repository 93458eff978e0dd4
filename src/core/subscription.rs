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
    /// Runs whose terminal event was delivered, while they matter
    /// (`Finished`).
    finished: Finished,
    /// Messages of the broadcast received or lagged past: where in it this
    /// subscription is.
    passed: u64,
    /// The greatest run id forgotten (`Finished`). Run ids grow with time
    /// (`RunId::generate`) and a session's runs take turns in the order they
    /// were queued, so a run not expected with an id up to this one is one
    /// already ended: the copy of a forgotten run's end that the emitter
    /// publishes after the commit the tape showed.
    forgotten: Option<RunId>,
    /// Times it lagged (for tests to know they reached that path).
    #[cfg(test)]
    lags: usize,
    /// Events read back from the tape, waiting to be delivered; at most one page.
    backlog: VecDeque<Arc<EventRecord>>,
    /// Set by a lag: the runs it expects are read from the tape, a page at
    /// a time, until the tape has nothing past where they are; only then
    /// does it wait on the broadcast again.
    catching_up: bool,
    /// Moves on when the journal changes: a hint to look for runs of other
    /// processes (`following`).
    wake: Option<tokio::sync::watch::Receiver<u64>>,
    /// Runs whose events this process publishes: never read from the tape
    /// on a wake-up. A run leaves it when it leaves `finished`.
    local: HashSet<RunId>,
    /// Where the journal's listing of the session's runs was last read to
    /// (`Journal::runs_to_follow`): each look lists only the runs inserted
    /// since, and the unfinished ones, not every run the session ever had.
    listed: Option<u64>,
}

/// Events read back from the tape at a time: bounds a lagging subscriber's memory.
const TAPE_PAGE: usize = 2048;

/// The runs a subscription delivered the end of, kept while they matter: a
/// copy of a finished run's events may still wait in the broadcast (after a
/// lag, what was read back from the tape may be in the buffer too), and the
/// journal lists a run again (`Journal::runs_to_follow`: the runs inserted
/// since the last look, and the unfinished ones) until it is looked at after
/// the run ended. A run is forgotten once the subscription has received, or
/// lagged past, everything that was in the broadcast when its end was
/// delivered, and the journal was listed since: so a subscription that
/// follows a session through ten thousand runs holds about as many ids as
/// its buffer holds events, not ten thousand.
struct Finished {
    /// The runs, oldest first, each with the broadcast position past which
    /// no copy of its events can be.
    order: VecDeque<(RunId, u64)>,
    set: HashSet<RunId>,
    /// Runs at the front of `order` that ended before the journal's runs
    /// were last listed.
    listed: usize,
    /// Runs that end between two looks at the journal made to forget them.
    every: usize,
}

impl Finished {
    fn new(every: usize) -> Self {
        Self {
            order: VecDeque::new(),
            set: HashSet::new(),
            listed: 0,
            every: every.max(1),
        }
    }

    fn contains(&self, run: &RunId) -> bool {
        self.set.contains(run)
    }

    /// `run` ended; no copy of its events is in the broadcast past `due`.
    fn insert(&mut self, run: RunId, due: u64) {
        if self.set.insert(run.clone()) {
            self.order.push_back((run, due));
        }
    }

    /// The journal's runs were just listed: every run held ended before.
    fn listed(&mut self) {
        self.listed = self.order.len();
    }

    /// Whether to list the journal's runs so the ones ended since can be
    /// forgotten: after `every` of them.
    fn wants_listing(&self) -> bool {
        self.order.len() - self.listed >= self.every
    }

    /// Forgets the runs that no longer matter, the broadcast received up to
    /// `passed`; returns them.
    fn forget(&mut self, passed: u64) -> Vec<RunId> {
        let mut gone = Vec::new();
        while self.listed > 0 {
            match self.order.front() {
                Some((_, due)) if *due <= passed => {}
                _ => break,
            }
            if let Some((run, _)) = self.order.pop_front() {
                self.set.remove(&run);
                gone.push(run);
            }
            self.listed -= 1;
        }
        gone
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.order.len()
    }
}

impl Subscription {
    /// Follows a session's events from `rx` on, reading missed ones from `journal`.
    /// `capacity`: the broadcast's, in events.
    pub(crate) fn new(
        session_id: &SessionId,
        rx: broadcast::Receiver<Arc<EventRecord>>,
        capacity: usize,
        journal: Arc<dyn Journal>,
    ) -> Self {
        Self {
            session_id: session_id.clone(),
            rx,
            journal,
            since: now_millis(),
            expected: HashMap::new(),
            finished: Finished::new(capacity),
            passed: 0,
            forgotten: None,
            #[cfg(test)]
            lags: 0,
            backlog: VecDeque::new(),
            catching_up: false,
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
            if self.finished.wants_listing()
                && let Err(err) = self.learn_runs(false).await
            {
                tracing::warn!(session = %self.session_id, error = %err, "cannot list the session's runs");
            }
            for run in self.finished.forget(self.passed) {
                self.local.remove(&run);
                if self.forgotten.as_ref().is_none_or(|newest| run > *newest) {
                    self.forgotten = Some(run);
                }
            }
            if let Some(record) = self.backlog.pop_front() {
                if self.accept(&record) {
                    return Some(record);
                }
                continue;
            }
            if self.catching_up {
                self.catch_up().await;
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
                    self.passed += 1;
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
                    self.passed += missed;
                    #[cfg(test)]
                    {
                        self.lags += 1;
                    }
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
        if self.finished.contains(&record.run_id) || self.was_forgotten(&record.run_id) {
            return false;
        }
        if let Some(expected) = self.expected.get(&record.run_id)
            && record.seq != *expected
        {
            return false;
        }
        if record.event.terminal_state().is_some() {
            self.expected.remove(&record.run_id);
            // Whatever the broadcast holds now is all that may still copy
            // this run's events.
            let due = self.passed + self.rx.len() as u64;
            self.finished.insert(record.run_id.clone(), due);
        } else {
            self.expected.insert(record.run_id.clone(), record.seq + 1);
        }
        true
    }

    /// Whether `run` ended and was forgotten (`forgotten`).
    fn was_forgotten(&self, run: &RunId) -> bool {
        !self.expected.contains_key(run)
            && self.forgotten.as_ref().is_some_and(|newest| run <= newest)
    }

    /// After a lag: learn of runs that started unseen, and catch up with
    /// what was missed from the tape.
    async fn on_lag(&mut self) -> Result<(), JournalError> {
        self.journal.flush().await?;
        self.learn_runs(false).await?;
        self.catching_up = true;
        Ok(())
    }

    /// Reads the next page of the first run (oldest first) whose tape has
    /// events past where it is; when none has, catching up is over. Runs
    /// ended before the broadcast's newest events show no gap there, so
    /// waiting for one would wait for ever. The broadcast's events until
    /// then are passed over: the tape has them.
    async fn catch_up(&mut self) {
        // What the broadcast holds now was submitted to the journal before
        // the flush below, so the tape has it: passed over, not delivered
        // (a run not known yet, one that began before this subscription, is
        // read from the tape from there on).
        loop {
            match self.rx.try_recv() {
                Ok(record) => {
                    self.passed += 1;
                    if !self.local.contains(&record.run_id) {
                        self.local.insert(record.run_id.clone());
                    }
                    if !self.finished.contains(&record.run_id)
                        && !self.was_forgotten(&record.run_id)
                    {
                        self.expected
                            .entry(record.run_id.clone())
                            .or_insert(record.seq);
                    }
                }
                Err(broadcast::error::TryRecvError::Lagged(missed)) => {
                    self.passed += missed;
                    #[cfg(test)]
                    {
                        self.lags += 1;
                    }
                }
                Err(_) => break,
            }
        }
        let mut pending: Vec<(RunId, u64)> = self
            .expected
            .iter()
            .map(|(run, seq)| (run.clone(), *seq))
            .collect();
        pending.sort();
        if !pending.is_empty()
            && let Err(err) = self.journal.flush().await
        {
            tracing::error!(session = %self.session_id, error = %err, "cannot re-read the tape");
            pending.clear();
        }
        for (run, from) in pending {
            match self.journal.tape(&run, from, Some(TAPE_PAGE)).await {
                Ok(records) if !records.is_empty() => {
                    self.backlog.extend(records.into_iter().map(Arc::new));
                    return;
                }
                Ok(_) => {}
                Err(err) => {
                    tracing::error!(session = %self.session_id, run = %run, error = %err, "cannot re-read the tape");
                    break;
                }
            }
        }
        self.catching_up = false;
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
        self.finished.listed();
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

#[cfg(test)]
impl Subscription {
    /// How many finished runs it holds.
    pub(crate) fn finished_held(&self) -> usize {
        self.finished.len()
    }

    /// How many times it lagged.
    pub(crate) fn lags(&self) -> usize {
        self.lags
    }
}
