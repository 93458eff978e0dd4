//! Crash recovery at open: runs nobody works on any more (their process
//! gone, their session's lease lapsed) are ended as interrupted, keeping
//! what they streamed.

use rusqlite::{Connection, OptionalExtension as _, params};

use super::runs::{self, Report};
use super::{sessions, tape};
use crate::core::event::{Event, EventRecord, RunState};
use crate::core::ids::{RunId, SessionId};
use crate::core::lease::{Lease, LeaseKey};
use crate::core::session::{Message, Millis, now_millis};
use crate::core::usage::{Cost, Usage};
use crate::store::{Recovery, StoreError, leases, owner, reader};

/// The runs an open looks at for recovery: unfinished ones, read through the
/// partial index `runs_unfinished` (migration 14), whose `WHERE` is this
/// condition word for word, so an open reads none of the finished runs.
pub(in crate::store) const UNFINISHED_RUNS: &str = "SELECT id, session_id, owner, state FROM runs WHERE state IN ('queued', 'running', 'waiting') ORDER BY created_at, id";

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
        if let Some(lease) = leases::stored_in(conn, &key)? {
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
    Ok(match leases::stored_in(conn, &LeaseKey::process(tag))? {
        Some(lease) => (!live(&lease), None),
        None => (!owner::is_alive(tag), None),
    })
}

/// Marks runs nobody works on any more as failed (see [`abandoned`]),
/// keeping what they had streamed: the partial reply of an interrupted
/// model turn joins the history. The lease of each session whose working
/// run it ends is taken over and released in the same transaction, so a
/// holder that was only stopped (not dead) has its late writes refused.
pub(in crate::store) fn recover_interrupted(conn: &mut Connection) -> Result<Recovery, StoreError> {
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
            leases::take_over_in(&tx, &lease, owner::this_process())?;
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

/// Marks one unfinished run failed as interrupted with `error`, keeping what
/// it streamed: the partial reply of a model turn it cut short joins the
/// history, and its tape ends with the failure.
pub(super) fn interrupt_run(
    tx: &Connection,
    run_id: &str,
    session_id: &str,
    error: &str,
    now: Millis,
) -> Result<(), StoreError> {
    let run = RunId::from_string(run_id.to_owned());
    let events = reader::tape(tx, &run, 0, None)?;
    keep_partial_turn(tx, &run, session_id, &events, now)?;
    let (usage, cost) = used(&events);
    let record = EventRecord {
        session_id: SessionId::from_string(session_id.to_owned()),
        run_id: run.clone(),
        seq: events.last().map_or(0, |e| e.seq + 1),
        at: now,
        event: Event::State {
            state: RunState::Failed,
            stop_reason: None,
            error: Some(error.to_owned()),
            usage: (usage != Usage::default()).then_some(usage),
            cost: cost.clone(),
        },
    };
    tape::append_event(tx, &record)?;
    let report = Report {
        stop_reason: None,
        error: Some(error),
        usage: &usage,
        cost: cost.as_ref(),
    };
    runs::set_state(tx, &run, RunState::Failed, &report, now)
}

/// The partial reply of a model turn the run cut short joins the history.
/// A run that stored no message is a session command (a prompt's run
/// stores its prompt first; a command stores its messages when it ends): a
/// summary cut short is no turn of the conversation.
fn keep_partial_turn(
    tx: &Connection,
    run: &RunId,
    session_id: &str,
    events: &[EventRecord],
    now: Millis,
) -> Result<(), StoreError> {
    let (stored, stored_turns): (i64, i64) = tx.query_row(
        "SELECT COUNT(*), COALESCE(SUM(role = 'assistant'), 0) FROM messages WHERE run_id = ?1",
        params![run.as_str()],
        |row| Ok((row.get(0)?, row.get(1)?)),
    )?;
    if stored == 0 {
        return Ok(());
    }
    let last_said = if stored_turns > 0 {
        last_said(tx, run, session_id)?
    } else {
        None
    };
    let partial = crate::core::run::partial_turn(
        events,
        stored_turns as usize,
        last_said.as_ref().map(|(t, th)| (t.as_str(), th.as_str())),
    );
    match partial {
        Some(partial) => sessions::append_message(tx, session_id, Some(run), &partial, now),
        None => Ok(()),
    }
}

/// The text and thought of the run's last stored model turn.
fn last_said(
    tx: &Connection,
    run: &RunId,
    session_id: &str,
) -> Result<Option<(String, String)>, StoreError> {
    let body: Option<String> = tx
        .query_row(
            "SELECT body FROM messages WHERE session_id = ?2 AND run_id = ?1 AND role = 'assistant' \
             ORDER BY seq DESC LIMIT 1",
            params![run.as_str(), session_id],
            |row| row.get(0),
        )
        .optional()?;
    Ok(body
        .and_then(|body| serde_json::from_str::<Message>(&body).ok())
        .and_then(|message| {
            let Message::Assistant { text, thought, .. } = message else {
                return None;
            };
            Some((text, thought))
        }))
}

/// What a run's model turns used and cost, from its tape's usage events.
pub(in crate::store) fn used(events: &[EventRecord]) -> (Usage, Option<Cost>) {
    let mut usage = Usage::default();
    let mut cost = None;
    for event in events {
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
    (usage, cost)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(seq: u64, event: Event) -> EventRecord {
        EventRecord {
            session_id: SessionId::from_string("ses_1".into()),
            run_id: RunId::from_string("run_1".into()),
            seq,
            at: 0,
            event,
        }
    }

    fn turn(input: u64, output: u64, cost: Option<f64>) -> Event {
        Event::Usage {
            usage: Usage {
                input_tokens: input,
                output_tokens: output,
                ..Usage::default()
            },
            model: None,
            cost: cost.map(|amount| Cost {
                amount,
                currency: "USD".into(),
            }),
            context: None,
            session_cost: None,
            budget: None,
        }
    }

    #[test]
    fn an_interrupted_run_reports_what_its_turns_used_and_cost() {
        let events = [
            record(0, Event::TextDelta { text: "Hi".into() }),
            record(1, turn(100, 20, None)),
            record(2, turn(50, 5, Some(0.25))),
            record(3, turn(10, 1, Some(0.5))),
        ];
        let (usage, cost) = used(&events);
        assert_eq!((usage.input_tokens, usage.output_tokens), (160, 26));
        assert_eq!(
            cost,
            Some(Cost {
                amount: 0.75,
                currency: "USD".into()
            })
        );
        let (usage, cost) = used(&events[..1]);
        assert_eq!(
            (usage, cost),
            (Usage::default(), None),
            "no turn, nothing used"
        );
    }
}
