//! Resumable event streams, shared by SSE and the WebSocket subscriptions: a
//! run's or a session's events from a cursor, replayed from the tape and then
//! live, with no duplicates and no gaps.
//!
//! A stream delivers runs whole and in run id order (ids are time-ordered):
//! every event of a run, then the next run. Events of a later run that arrive
//! while an earlier one is still going are not held; they are read back from
//! the tape when that run's turn comes. So a cursor `RUN:SEQ` names one exact
//! position: everything of the runs before `RUN`, and `RUN` up to `SEQ`.
//!
//! Every event a stream sends is read from the tape, so it is committed: a
//! live event is only news that the tape has more. Events are published
//! before their group commit, and crash recovery numbers a run's `failed` end
//! after the last committed event; an uncommitted event's id could name
//! another event after a restart, so no client may see one.

use std::collections::{BTreeMap, HashSet};
use std::fmt;
use std::sync::Arc;

use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::api::{run_id, session_id, shown};
use super::error::ApiError;
use crate::core::event::EventRecord;
use crate::core::ids::RunId;
use crate::core::quote::quote;
use crate::core::runtime::{Runtime, Subscription};

/// Events read from the tape at a time.
const PAGE: usize = 256;
/// Events buffered between the reader and a slow client; past that the
/// reader waits (and the runtime's subscription re-reads the tape later).
const BUFFER: usize = 64;

/// A position in a stream: the last event the client has.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cursor {
    pub run: RunId,
    pub seq: u64,
}

impl Cursor {
    /// Parses `RUN_ID:SEQ`, an id this server gives events: a generated run
    /// id and at most 19 digits (the pattern of the OpenAPI document).
    pub fn parse(text: &str) -> Result<Self, ApiError> {
        let bad = || {
            ApiError::bad_request(format!(
                "`Last-Event-ID`: expected RUN_ID:SEQ, got {}",
                shown(text)
            ))
        };
        let (run, seq) = text.rsplit_once(':').ok_or_else(bad)?;
        let digits = !seq.is_empty() && seq.len() <= 19 && seq.bytes().all(|b| b.is_ascii_digit());
        if !digits || RunId::parse_generated(run).is_none() {
            return Err(bad());
        }
        let seq = seq.parse().map_err(|_| bad())?;
        let run = run_id(run).map_err(|_| bad())?;
        Ok(Self { run, seq })
    }

    pub fn of(record: &EventRecord) -> Self {
        Self {
            run: record.run_id.clone(),
            seq: record.seq,
        }
    }
}

impl fmt::Display for Cursor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.run, self.seq)
    }
}

/// What a stream follows.
#[derive(Debug, Clone)]
pub enum Scope {
    /// One run, from its first event (or after the cursor) to its end.
    Run(String),
    /// Every run of a session, from now (or after the cursor) on, until the
    /// client goes away or the server stops.
    Session(String),
    /// The same, beginning with the session's first event (without a
    /// cursor): its history, then live.
    SessionFromStart(String),
}

/// Checks the request and starts following; the receiver yields the events.
pub async fn follow(
    runtime: &Runtime,
    scope: Scope,
    after: Option<Cursor>,
    closing: CancellationToken,
) -> Result<mpsc::Receiver<Arc<EventRecord>>, ApiError> {
    let (tx, rx) = mpsc::channel(BUFFER);
    let mut follower = Follower {
        runtime: runtime.clone(),
        tx,
        tracks: BTreeMap::new(),
        finished: HashSet::new(),
        start: None,
        single: false,
    };
    let subscription = match scope {
        Scope::Run(id) => {
            let run = runtime.run(&run_id(&id)?).await?;
            let from = match after {
                Some(cursor) if cursor.run != run.id => {
                    return Err(ApiError::not_found(format!(
                        "`Last-Event-ID`: {} is not an event of run {}",
                        quote(&cursor.to_string()),
                        run.id
                    )));
                }
                Some(cursor) => {
                    committed(runtime, &cursor).await?;
                    cursor.seq + 1
                }
                None => 0,
            };
            follower.single = true;
            follower.tracks.insert(run.id.clone(), from);
            if run.state.is_terminal() {
                None
            } else if let Ok(subscription) = runtime.subscribe(&run.session_id) {
                Some(Woken::Live(Box::new(subscription)))
            } else {
                // Its session is not live here: another process runs it, and
                // its commits (the journal's changes) say when the tape has more.
                runtime.journal_changes().map(Woken::Changes)
            }
        }
        Scope::Session(ref id) | Scope::SessionFromStart(ref id) => {
            let from_start = matches!(scope, Scope::SessionFromStart(_));
            let id = session_id(id)?;
            let session = runtime.session(&id).await?;
            if session.closed {
                return Err(ApiError::conflict(format!(
                    "session {id} is closed; prompt it to open it again"
                )));
            }
            runtime.open_session(&id).await?;
            // Subscribed before the tape is read: whatever the reads miss comes live.
            let subscription = runtime.subscribe(&id)?;
            let runs = runtime.runs(&id).await?;
            match after {
                Some(cursor) => {
                    if !runs.iter().any(|run| run.id == cursor.run) {
                        return Err(ApiError::not_found(format!(
                            "`Last-Event-ID`: {} is not an event of session {id}",
                            quote(&cursor.to_string())
                        )));
                    }
                    committed(runtime, &cursor).await?;
                    for run in runs.iter().filter(|run| run.id >= cursor.run) {
                        let from = if run.id == cursor.run {
                            cursor.seq + 1
                        } else {
                            0
                        };
                        follower.tracks.insert(run.id.clone(), from);
                    }
                    follower.start = Some(cursor.run);
                }
                None if from_start => {
                    for run in &runs {
                        follower.tracks.insert(run.id.clone(), 0);
                    }
                }
                None => {
                    // From now: runs in progress continue from their current end.
                    for run in runs.iter().filter(|run| !run.state.is_terminal()) {
                        let tape = runtime.tape(&run.id, 0).await?;
                        if tape.iter().any(|r| r.event.terminal_state().is_some()) {
                            follower.finished.insert(run.id.clone());
                        } else {
                            follower.tracks.insert(run.id.clone(), tape.len() as u64);
                        }
                    }
                    for run in runs.iter().filter(|run| run.state.is_terminal()) {
                        follower.finished.insert(run.id.clone());
                    }
                }
            }
            Some(Woken::Live(Box::new(subscription)))
        }
    };
    tokio::spawn(async move { follower.run(subscription, closing).await });
    Ok(rx)
}

/// Checks that the cursor names an event on the tape. Streams send committed
/// events only, so any other cursor is one this server never gave.
async fn committed(runtime: &Runtime, cursor: &Cursor) -> Result<(), ApiError> {
    let found = runtime
        .committed_tape(&cursor.run, cursor.seq, 1)
        .await
        .map_err(|err| {
            tracing::error!(error = %err, "cannot read the tape for a stream");
            ApiError::internal(format!("cannot read the tape: {err}"))
        })?;
    if found.first().is_some_and(|record| record.seq == cursor.seq) {
        Ok(())
    } else {
        Err(ApiError::not_found(format!(
            "`Last-Event-ID`: run {} has no event {}",
            cursor.run, cursor.seq
        )))
    }
}

/// What tells a stream that the tape may hold more.
enum Woken {
    /// The session's subscription here: its events, live.
    Live(Box<Subscription>),
    /// The journal's changes, for a run of a session not live here.
    Changes(tokio::sync::watch::Receiver<u64>),
}

/// Delivers events in order; one per stream.
struct Follower {
    runtime: Runtime,
    tx: mpsc::Sender<Arc<EventRecord>>,
    /// Runs not yet delivered to their end, with the sequence number to deliver
    /// next. The first is the one being delivered; the others wait their turn.
    tracks: BTreeMap<RunId, u64>,
    /// Runs delivered to their end (or ended before the stream began).
    finished: HashSet<RunId>,
    /// Runs before this one are not the stream's (it resumed after them).
    start: Option<RunId>,
    /// A run stream: it ends with its run.
    single: bool,
}

enum Step {
    /// The current run has no more events on the tape yet; wait for live ones.
    Live,
    /// Nothing more to deliver, or the client went away.
    Stop,
}

impl Follower {
    async fn run(mut self, woken: Option<Woken>, closing: CancellationToken) {
        if let Step::Stop = self.catch_up().await {
            return;
        }
        let mut subscription = match woken {
            None => return,
            Some(Woken::Live(subscription)) => subscription,
            Some(Woken::Changes(mut changes)) => loop {
                tokio::select! {
                    changed = changes.changed() => if changed.is_err() { return },
                    _ = self.tx.closed() => return,
                    _ = closing.cancelled() => return,
                }
                if let Step::Stop = self.catch_up().await {
                    return;
                }
            },
        };
        loop {
            let record = tokio::select! {
                record = subscription.next() => record,
                _ = self.tx.closed() => return,
                _ = closing.cancelled() => return,
            };
            let Some(record) = record else { return };
            let step = self.on_live(&record).await;
            if let Step::Stop = step {
                return;
            }
        }
    }

    fn past(&self, run: &RunId) -> bool {
        self.finished.contains(run) || self.start.as_ref().is_some_and(|start| run < start)
    }

    /// A live event is news that the tape holds more: events are delivered
    /// from the tape only, so a client never sees an event that is not
    /// committed (a crash cannot take back an id it has seen).
    async fn on_live(&mut self, record: &EventRecord) -> Step {
        if self.past(&record.run_id) {
            return Step::Live;
        }
        if !self.tracks.contains_key(&record.run_id) {
            if self.single {
                return Step::Live;
            }
            self.tracks.insert(record.run_id.clone(), 0);
        }
        match self.tracks.first_key_value() {
            // An event of the run being delivered, not yet sent.
            Some((current, next)) if *current == record.run_id && record.seq >= *next => {
                self.catch_up().await
            }
            // One already sent (read with an earlier page), or a later run's,
            // read from the tape in its turn.
            _ => Step::Live,
        }
    }

    /// Sends the next event of the current run; moves on if it ended it.
    async fn deliver(&mut self, record: Arc<EventRecord>) -> bool {
        let ended = record.event.terminal_state().is_some();
        let run = record.run_id.clone();
        if self.tx.send(record).await.is_err() {
            return false;
        }
        if ended {
            self.tracks.remove(&run);
            self.finished.insert(run);
        } else if let Some(next) = self.tracks.get_mut(&run) {
            *next += 1;
        }
        true
    }

    /// Delivers committed events from the tape until the current run has
    /// nothing more on it.
    async fn catch_up(&mut self) -> Step {
        // The run whose end the runs table showed before the last read: a
        // read that starts after that sees everything the run wrote.
        let mut seen_ended: Option<RunId> = None;
        loop {
            let Some((run, next)) = self
                .tracks
                .first_key_value()
                .map(|(run, next)| (run.clone(), *next))
            else {
                return if self.single { Step::Stop } else { Step::Live };
            };
            let page = self.runtime.committed_tape(&run, next, PAGE).await;
            let page = match page {
                Ok(page) => page,
                Err(err) => {
                    tracing::error!(run = %run, error = %err, "cannot read the tape for a stream");
                    return Step::Stop;
                }
            };
            let full = page.len() == PAGE;
            let empty = page.is_empty();
            let mut ended = false;
            for record in page {
                ended = record.event.terminal_state().is_some();
                if !self.deliver(Arc::new(record)).await {
                    return Step::Stop;
                }
                if ended {
                    break;
                }
            }
            if ended || full {
                continue;
            }
            if seen_ended.as_ref() == Some(&run) {
                if empty {
                    // Ended, and the tape has no end for it (a process died
                    // before writing one): nothing more will come.
                    self.tracks.remove(&run);
                    self.finished.insert(run);
                    seen_ended = None;
                }
                continue;
            }
            // The tape has no more of this run yet. A live run's next event
            // wakes the stream; one that ended elsewhere (another process, or
            // recovery) wakes nothing, so ask, and if it ended, read again
            // before moving on: its last events may have been committed
            // after this read.
            match self.runtime.run(&run).await {
                Ok(info) if info.state.is_terminal() => seen_ended = Some(run),
                Ok(_) => return Step::Live,
                Err(err) => {
                    tracing::error!(run = %run, error = %err, "cannot read a run for a stream");
                    return Step::Stop;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cursors_round_trip_and_bad_ones_name_the_header() {
        let id = "run_0190abcd0190abcd0190abcd0190abcd:12";
        let cursor = Cursor::parse(id).unwrap_or_else(|e| panic!("{e:?}"));
        assert_eq!(cursor.seq, 12);
        assert_eq!(cursor.to_string(), id);
        for bad in [
            "",
            "run_x",
            "run_x:",
            "ses_1:3",
            "run_x:-1",
            "run_x:a",
            "run_0190abc:1",
            "run_0190abcd0190abcd0190abcd0190abcd:12345678901234567890",
        ] {
            let err = Cursor::parse(bad)
                .err()
                .map(|e| e.message)
                .unwrap_or_default();
            assert!(err.contains("Last-Event-ID"), "{bad}: {err}");
        }
    }
}
