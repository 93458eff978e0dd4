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
/// the run, how many assistant messages it stored and the text and thought
/// of the last one. Not every model turn stores an assistant message (a compaction's
/// summary, an attempt the provider refused as too long and retried), so
/// the count alone cannot say the last turn is missing: it is taken as
/// stored when the run's last assistant message says what it streamed.
pub fn partial_turn(
    events: &[super::event::EventRecord],
    stored_turns: usize,
    last_stored: Option<(&str, &str)>,
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
        if let Event::TextDelta { text: t } = &record.event {
            text.push_str(t);
        } else if let Event::ThoughtDelta { text: t } = &record.event {
            thought.push_str(t);
        }
    }
    if text.is_empty() && thought.is_empty() {
        return None;
    }
    if last_stored == Some((text.as_str(), thought.as_str())) {
        return None;
    }
    Some(super::session::Message::Assistant {
        text,
        thought,
        tool_calls: Vec::new(),
        interrupted: true,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::event::EventRecord;
    use crate::core::ids::SessionId;
    use crate::core::session::Message;

    fn tape(events: Vec<Event>) -> Vec<EventRecord> {
        events
            .into_iter()
            .enumerate()
            .map(|(seq, event)| EventRecord {
                session_id: SessionId::from_string("ses_t".into()),
                run_id: crate::core::ids::RunId::from_string("run_t".into()),
                seq: seq as u64,
                at: 0,
                event,
            })
            .collect()
    }

    fn turn(index: u32) -> Event {
        Event::ModelTurn {
            index,
            provider: "p".into(),
            model: "m".into(),
        }
    }

    fn text(t: &str) -> Event {
        Event::TextDelta { text: t.into() }
    }

    /// A compaction's summary turn stores no assistant message: the turn
    /// after it, stored, is not taken for one cut short (which would put
    /// the reply in the history twice).
    #[test]
    fn a_stored_turn_after_a_summary_turn_is_not_added_again() {
        let events = tape(vec![turn(0), turn(0), text("Let me look."), text(" Done")]);
        assert_eq!(
            partial_turn(&events, 1, Some(("Let me look. Done", ""))),
            None
        );
    }

    #[test]
    fn a_turn_cut_short_is_kept_as_interrupted() {
        let events = tape(vec![turn(0), text("First."), turn(1), text("Half")]);
        assert_eq!(
            partial_turn(&events, 1, Some(("First.", ""))),
            Some(Message::Assistant {
                text: "Half".into(),
                thought: String::new(),
                tool_calls: Vec::new(),
                interrupted: true,
            })
        );
        // Every turn stored: nothing to add.
        assert_eq!(partial_turn(&events, 2, Some(("Half", ""))), None);
        // A turn that streamed nothing adds nothing.
        assert_eq!(partial_turn(&tape(vec![turn(0)]), 0, None), None);
    }

    fn state(state: RunState, stop_reason: Option<StopReason>, error: Option<&str>) -> Event {
        Event::State {
            state,
            stop_reason,
            error: error.map(str::to_owned),
            usage: None,
            cost: None,
        }
    }

    /// Only a terminal state ends a run, and the event a run's end is
    /// recorded with (made from its outcome) gives that outcome back.
    #[test]
    fn a_terminal_state_gives_back_the_outcome_it_was_made_from() {
        for running in [RunState::Queued, RunState::Running, RunState::Waiting] {
            assert_eq!(RunOutcome::from_event(&state(running, None, None)), None);
        }
        assert_eq!(RunOutcome::from_event(&text("x")), None);
        for outcome in [
            RunOutcome::Completed(StopReason::MaxTokens),
            RunOutcome::Cancelled,
            RunOutcome::Failed("boom".into()),
        ] {
            let event = state(outcome.state(), outcome.stop_reason(), outcome.error());
            assert_eq!(RunOutcome::from_event(&event), Some(outcome));
        }
        assert_eq!(
            RunOutcome::from_event(&state(RunState::Failed, None, None)),
            Some(RunOutcome::Failed("the run failed".into()))
        );
    }
}
