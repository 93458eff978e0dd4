//! The emitter: how a run records what happens. Each event gets the run's next
//! sequence number, goes to the journal (the tape) and is published to the
//! session's subscribers; the run's state moves only as the state machine
//! allows. The agent loop, the gate and the session commands write through
//! it and nothing else.

use std::sync::Arc;

use thiserror::Error;
use tokio::sync::broadcast;

use super::approval::Grant;
use super::event::{Event, EventRecord, RunState, Usage};
use super::ids::{RunId, SessionId};
use super::journal::{Journal, Write};
use super::lease::Fence;
use super::models::Cost;
use super::receipt::ReceiptBody;
use super::run::RunOutcome;
use super::session::{Message, now_millis};
use super::stats::Stats;

/// Appends a run's events to the tape and publishes them, numbering them in order.
pub struct Emitter {
    journal: Arc<dyn Journal>,
    events: broadcast::Sender<Arc<EventRecord>>,
    session_id: SessionId,
    run_id: RunId,
    next_seq: u64,
    /// Where the run is in its state machine; every move is checked against it.
    state: RunState,
    /// Token usage summed over the run's model turns.
    pub usage: Usage,
    /// What the run's priced model turns cost.
    pub cost: Option<Cost>,
    /// Where tool verdicts and provider latency are counted.
    stats: Arc<Stats>,
    /// When the current model turn began, until its first output is seen.
    turn_started: Option<std::time::Instant>,
    /// The lease the run works under: every write it makes carries it, and
    /// the journal refuses them once the lease has moved on.
    fence: Option<Fence>,
}

/// A state change the run state machine does not allow: a bug in the runtime.
#[derive(Debug, Error, PartialEq, Eq)]
#[error("run {run}: cannot move from {from:?} to {to:?}")]
pub struct InvalidTransition {
    pub run: RunId,
    pub from: RunState,
    pub to: RunState,
}

impl Emitter {
    pub(crate) fn new(
        journal: &Arc<dyn Journal>,
        events: &broadcast::Sender<Arc<EventRecord>>,
        session_id: &SessionId,
        run_id: &RunId,
    ) -> Self {
        Self::resume(journal, events, session_id, run_id, 0)
    }

    pub(crate) fn resume(
        journal: &Arc<dyn Journal>,
        events: &broadcast::Sender<Arc<EventRecord>>,
        session_id: &SessionId,
        run_id: &RunId,
        next_seq: u64,
    ) -> Self {
        Self {
            journal: journal.clone(),
            events: events.clone(),
            session_id: session_id.clone(),
            run_id: run_id.clone(),
            next_seq,
            state: RunState::Queued,
            usage: Usage::default(),
            cost: None,
            stats: Arc::default(),
            turn_started: None,
            fence: None,
        }
    }

    /// Counts into the runtime's stats rather than a private set.
    pub(crate) fn with_stats(mut self, stats: &Arc<Stats>) -> Self {
        self.stats = stats.clone();
        self
    }

    /// Makes every later write of the run carry `fence` (the session's
    /// lease, once held).
    pub(crate) fn fence_with(&mut self, fence: Option<Fence>) {
        self.fence = fence;
    }

    /// `write` as the run makes it: fenced by its lease, when it has one.
    pub(crate) fn fenced(&self, write: Write) -> Write {
        match &self.fence {
            Some(fence) => Write::Fenced {
                fence: fence.clone(),
                write: Box::new(write),
            },
            None => write,
        }
    }

    /// Queues one of the run's writes, fenced by its lease.
    pub(crate) fn submit(&self, write: Write) {
        self.journal.submit(self.fenced(write));
    }

    /// Moves the run to `next` if the state machine allows it.
    pub fn enter(&mut self, next: RunState) -> Result<(), InvalidTransition> {
        if !self.state.can_become(next) {
            return Err(InvalidTransition {
                run: self.run_id.clone(),
                from: self.state,
                to: next,
            });
        }
        self.state = next;
        Ok(())
    }

    pub fn run_id(&self) -> &RunId {
        &self.run_id
    }

    pub fn session_id(&self) -> &SessionId {
        &self.session_id
    }

    /// The sequence number the run's next event takes.
    pub(crate) fn next_seq(&self) -> u64 {
        self.next_seq
    }

    fn record(&mut self, event: Event) -> EventRecord {
        let record = EventRecord {
            session_id: self.session_id.clone(),
            run_id: self.run_id.clone(),
            seq: self.next_seq,
            at: now_millis(),
            event,
        };
        self.next_seq += 1;
        record
    }

    /// Appends an event to the tape and publishes it; returns it as published.
    pub fn emit(&mut self, event: Event) -> Arc<EventRecord> {
        if let Event::Usage { usage, cost, .. } = &event {
            self.usage.add(*usage);
            self.cost = Cost::sum(self.cost.take(), cost.as_ref());
        } else if let Event::ToolResult { verdict, .. } = &event {
            self.stats.tool_call(*verdict);
        }
        if let Event::ModelTurn { .. } = &event {
            self.turn_started = Some(std::time::Instant::now());
        } else if let Some(started) = self.turn_started.take() {
            self.stats.first_output(started.elapsed());
        }
        let record = Arc::new(self.record(event));
        self.submit(Write::AppendEvent(EventRecord::clone(&record)));
        // No receivers is fine: nobody is watching this session right now.
        let _ = self.events.send(record.clone());
        record
    }

    /// Moves the run between `running` and `waiting`, recording the move.
    pub fn set_state(&mut self, state: RunState) {
        if let Err(err) = self.enter(state) {
            tracing::error!(error = %err, "run state machine violated");
            return;
        }
        self.emit(Event::state(state));
        self.submit(Write::SetRunState {
            id: self.run_id.clone(),
            state,
            stop_reason: None,
            error: None,
            usage: self.usage,
            cost: self.cost.clone(),
            at: now_millis(),
        });
    }

    /// Adds a receipt to the chain.
    pub fn receipt(&self, body: ReceiptBody) {
        self.submit(Write::AppendReceipt(body));
    }

    /// Persists an approval the session remembers.
    pub fn remember(&self, grant: Grant) {
        self.submit(Write::PutGrant {
            session_id: self.session_id.clone(),
            grant,
            at: now_millis(),
        });
    }

    /// Adds a message to the session's history.
    pub fn append_message(&self, message: Message) {
        self.submit(Write::AppendMessage {
            session_id: self.session_id.clone(),
            run_id: Some(self.run_id.clone()),
            message,
            at: now_millis(),
        });
    }

    /// Ends the run: records its terminal event and final state, waits until
    /// both are durable, and only then publishes the event, so whoever sees a
    /// run end can rely on it being on disk. When they could not be made
    /// durable, what is published (and returned) is a failure saying so,
    /// never the outcome as if it were saved.
    pub(crate) async fn finish(&mut self, outcome: &RunOutcome) -> RunOutcome {
        if let Err(err) = self.enter(outcome.state()) {
            tracing::error!(error = %err, "run state machine violated");
        }
        let mut record = self.record(Event::State {
            state: outcome.state(),
            stop_reason: outcome.stop_reason(),
            error: outcome.error().map(str::to_owned),
            usage: (self.usage != Usage::default()).then_some(self.usage),
            cost: self.cost.clone(),
        });
        self.submit(Write::AppendEvent(record.clone()));
        let committed = self
            .journal
            .commit(self.fenced(Write::SetRunState {
                id: self.run_id.clone(),
                state: outcome.state(),
                stop_reason: outcome.stop_reason(),
                error: outcome.error().map(str::to_owned),
                usage: self.usage,
                cost: self.cost.clone(),
                at: record.at,
            }))
            .await;
        let outcome = match committed {
            Ok(()) => outcome.clone(),
            Err(err) => {
                tracing::error!(run = %self.run_id, error = %err, "cannot record the end of a run");
                let failed =
                    RunOutcome::Failed(format!("the run's end could not be recorded: {err}"));
                record.event = Event::State {
                    state: failed.state(),
                    stop_reason: None,
                    error: failed.error().map(str::to_owned),
                    usage: (self.usage != Usage::default()).then_some(self.usage),
                    cost: self.cost.clone(),
                };
                failed
            }
        };
        let _ = self.events.send(Arc::new(record));
        outcome
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::journal::memory::MemoryJournal;

    #[tokio::test]
    async fn the_emitter_enforces_the_run_state_machine() {
        let journal: Arc<dyn Journal> = Arc::new(MemoryJournal::new());
        let (events, _) = broadcast::channel(4);
        let run = RunId::generate();
        let mut emitter = Emitter::new(&journal, &events, &SessionId::generate(), &run);
        assert_eq!(
            emitter.enter(RunState::Completed),
            Err(InvalidTransition {
                run: run.clone(),
                from: RunState::Queued,
                to: RunState::Completed
            })
        );
        emitter.enter(RunState::Running).unwrap();
        emitter.enter(RunState::Waiting).unwrap();
        emitter.enter(RunState::Running).unwrap();
        emitter.enter(RunState::Completed).unwrap();
        assert!(
            emitter.enter(RunState::Running).is_err(),
            "terminal states are final"
        );
    }

    #[tokio::test]
    async fn an_end_that_cannot_be_recorded_is_published_as_that_failure() {
        let memory = Arc::new(MemoryJournal::new());
        let journal: Arc<dyn Journal> = memory.clone();
        let (events, mut rx) = broadcast::channel(16);
        let mut emitter = Emitter::new(
            &journal,
            &events,
            &SessionId::generate(),
            &RunId::generate(),
        );
        emitter.enter(RunState::Running).unwrap();
        memory.stop();
        let outcome = emitter
            .finish(&RunOutcome::Completed(
                crate::core::event::StopReason::EndTurn,
            ))
            .await;
        assert!(
            matches!(&outcome, RunOutcome::Failed(m) if m.starts_with("the run's end could not be recorded")),
            "{outcome:?}"
        );
        let published = rx.recv().await.unwrap();
        let Event::State { state, error, .. } = &published.event else {
            panic!("{:?}", published.event);
        };
        assert_eq!(*state, RunState::Failed);
        assert!(error.as_deref().unwrap().contains("could not be recorded"));
    }

    #[tokio::test]
    async fn events_are_numbered_recorded_and_published_in_order() {
        let memory = Arc::new(MemoryJournal::new());
        let journal: Arc<dyn Journal> = memory.clone();
        let (events, mut rx) = broadcast::channel(16);
        let session = SessionId::generate();
        let run = RunId::generate();
        let mut emitter = Emitter::resume(&journal, &events, &session, &run, 3);
        emitter.emit(Event::TextDelta { text: "a".into() });
        emitter.emit(Event::TextDelta { text: "b".into() });
        let published: Vec<u64> = (0..2).map(|_| rx.try_recv().unwrap().seq).collect();
        assert_eq!(published, [3, 4]);
        let tape = journal.tape(&run, 0, None).await.unwrap();
        assert_eq!(tape.iter().map(|r| r.seq).collect::<Vec<_>>(), [3, 4]);
        assert_eq!(emitter.next_seq(), 5);
    }
}
