//! Writes of runs: a run queued, its state changes, the runs of a session
//! another process left working ended as interrupted, and the requests
//! (`core::control`) faces leave for the process working a session's runs.

use rusqlite::{Connection, params};

use super::{recovery, to_json};
use crate::core::control::Control;
use crate::core::event::{RunState, StopReason};
use crate::core::ids::{RunId, SessionId};
use crate::core::session::{Millis, now_millis};
use crate::core::usage::{Cost, Usage};
use crate::store::{StoreError, owner};

/// What a run's state change reports besides the state: why it stopped,
/// its error, and what it has used and cost so far.
pub(super) struct Report<'a> {
    pub(super) stop_reason: Option<StopReason>,
    pub(super) error: Option<&'a str>,
    pub(super) usage: &'a Usage,
    pub(super) cost: Option<&'a Cost>,
}

/// A run queued, owned by this process; its session touched.
pub(super) fn insert(
    conn: &Connection,
    id: &RunId,
    session_id: &SessionId,
    at: Millis,
) -> Result<(), StoreError> {
    conn.prepare_cached(
        "INSERT INTO runs (id, session_id, state, owner, created_at) VALUES (?1, ?2, 'queued', ?3, ?4)",
    )?
    .execute(params![id.as_str(), session_id.as_str(), owner::this_process(), at])?;
    conn.prepare_cached("UPDATE sessions SET updated_at = ?2 WHERE id = ?1")?
        .execute(params![session_id.as_str(), at])?;
    Ok(())
}

/// A run's new state: its start kept from the first time it ran, its end
/// set once it is terminal.
pub(super) fn set_state(
    conn: &Connection,
    id: &RunId,
    state: RunState,
    report: &Report<'_>,
    at: Millis,
) -> Result<(), StoreError> {
    let started = matches!(state, RunState::Running).then_some(at);
    let ended = state.is_terminal().then_some(at);
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
        report.stop_reason.map(|r| r.as_str()),
        report.error,
        report.usage.input_tokens as i64,
        report.usage.output_tokens as i64,
        report.usage.cached_input_tokens as i64,
        report.usage.reasoning_tokens as i64,
        report.cost.map(|c| c.amount),
        report.cost.map(|c| c.currency.as_str()),
        started,
        ended,
    ])?;
    Ok(())
}

/// Ends the runs of `session` left `running` or `waiting`, as interrupted.
pub(super) fn interrupt(
    conn: &Connection,
    session: &SessionId,
    error: &str,
    at: Millis,
) -> Result<(), StoreError> {
    let working: Vec<String> = conn
        .prepare_cached(
            "SELECT id FROM runs WHERE session_id = ?1 AND state IN ('running', 'waiting')
             ORDER BY created_at, id",
        )?
        .query_map(params![session.as_str()], |row| row.get(0))?
        .collect::<Result<_, _>>()?;
    for run in working {
        recovery::interrupt_run(conn, &run, session.as_str(), error, at)?;
    }
    Ok(())
}

/// Leaves a request for the process working the session's runs.
pub(super) fn leave_control(
    conn: &Connection,
    session: &SessionId,
    control: &Control,
    at: Millis,
) -> Result<(), StoreError> {
    conn.prepare_cached(
        "INSERT INTO session_controls (session_id, control, at) VALUES (?1, ?2, ?3)",
    )?
    .execute(params![session.as_str(), to_json(control)?, at])?;
    Ok(())
}

/// Takes a request off the journal, once: a conflict when another took it.
pub(super) fn take_control(conn: &Connection, id: i64) -> Result<(), StoreError> {
    let taken = conn
        .prepare_cached("DELETE FROM session_controls WHERE id = ?1")?
        .execute(params![id])?;
    if taken == 0 {
        return Err(StoreError::Conflict(format!(
            "control {id} was taken already"
        )));
    }
    // Requests nobody took within ten minutes (their owner gone) go too.
    conn.prepare_cached("DELETE FROM session_controls WHERE at < ?1")?
        .execute(params![now_millis() - 600_000])?;
    Ok(())
}
