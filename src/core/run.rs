//! Runs: one prompt turn of the agent loop, as seen from outside.

use super::event::{Event, RunState, StopReason, Usage};
use super::ids::{RunId, SessionId};
use super::models::Cost;
use super::session::Millis;

/// A run's state, timings and outcome.
#[derive(Debug, Clone, PartialEq)]
pub struct RunInfo {
    pub id: RunId,
    pub session_id: SessionId,
    pub state: RunState,
    pub stop_reason: Option<StopReason>,
    pub error: Option<String>,
    pub usage: Usage,
    /// What the run cost, when the price table covers its models.
    pub cost: Option<Cost>,
    pub created_at: Millis,
    pub started_at: Option<Millis>,
    pub ended_at: Option<Millis>,
}

/// How a run ended, as its submitter learns it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RunOutcome {
    Completed(StopReason),
    Cancelled,
    Failed(String),
}

impl RunOutcome {
    /// The outcome a terminal `State` event announces; `None` for any other event.
    pub fn from_event(event: &Event) -> Option<Self> {
        let Event::State {
            state,
            stop_reason,
            error,
            ..
        } = event
        else {
            return None;
        };
        match state {
            RunState::Completed => Some(RunOutcome::Completed(
                stop_reason.unwrap_or(StopReason::EndTurn),
            )),
            RunState::Cancelled => Some(RunOutcome::Cancelled),
            RunState::Failed => Some(RunOutcome::Failed(
                error.clone().unwrap_or_else(|| "the run failed".to_owned()),
            )),
            RunState::Queued | RunState::Running | RunState::Waiting => None,
        }
    }

    pub fn state(&self) -> RunState {
        match self {
            RunOutcome::Completed(_) => RunState::Completed,
            RunOutcome::Cancelled => RunState::Cancelled,
            RunOutcome::Failed(_) => RunState::Failed,
        }
    }

    pub fn stop_reason(&self) -> Option<StopReason> {
        match self {
            RunOutcome::Completed(reason) => Some(*reason),
            RunOutcome::Cancelled => Some(StopReason::Cancelled),
            RunOutcome::Failed(_) => None,
        }
    }

    pub fn error(&self) -> Option<&str> {
        match self {
            RunOutcome::Failed(message) => Some(message),
            RunOutcome::Completed(_) | RunOutcome::Cancelled => None,
        }
    }
}

/// The partial assistant message of the model turn an interruption cut
/// short, if any: what its text and thought deltas say, given the events of
/// the run and how many assistant messages it stored.
pub fn partial_turn(
    events: &[super::event::EventRecord],
    stored_turns: usize,
) -> Option<super::session::Message> {
    let turns_started = events
        .iter()
        .filter(|e| matches!(e.event, Event::ModelTurn { .. }))
        .count();
    if turns_started <= stored_turns {
        return None;
    }
    let last_turn_start = events
        .iter()
        .rposition(|e| matches!(e.event, Event::ModelTurn { .. }))?;
    let mut text = String::new();
    let mut thought = String::new();
    for record in &events[last_turn_start..] {
        match &record.event {
            Event::TextDelta { text: t } => text.push_str(t),
            Event::ThoughtDelta { text: t } => thought.push_str(t),
            _ => {}
        }
    }
    if text.is_empty() && thought.is_empty() {
        return None;
    }
    Some(super::session::Message::Assistant {
        text,
        thought,
        tool_calls: Vec::new(),
        interrupted: true,
    })
}
