//! Rows of the schedules (`core::schedule`): each schedule as JSON, and its
//! fires keyed by (schedule, occurrence), so a second record of one
//! occurrence is refused (`StoreError::Conflict`) and it is fired once.

use rusqlite::{Connection, params};

use super::StoreError;
use super::channels::{json, parse};
use crate::core::schedule::{Fire, Schedule, ScheduleWrite};
use crate::core::session::Millis;

pub(super) fn apply(conn: &Connection, write: &ScheduleWrite) -> Result<(), StoreError> {
    match write {
        ScheduleWrite::Put(schedule) => {
            let inserted = conn
                .prepare_cached(
                    "INSERT OR IGNORE INTO schedules (id, schedule, created_at) VALUES (?1, ?2, ?3)",
                )?
                .execute(params![schedule.id, json(schedule)?, schedule.created_at])?;
            if inserted == 0 {
                return Err(already(&schedule.id));
            }
        }
        ScheduleWrite::Remove { id } => {
            conn.prepare_cached("DELETE FROM schedule_fires WHERE schedule_id = ?1")?
                .execute(params![id])?;
            let removed = conn
                .prepare_cached("DELETE FROM schedules WHERE id = ?1")?
                .execute(params![id])?;
            if removed == 0 {
                return Err(unknown(id));
            }
        }
        ScheduleWrite::Claim(fire) => {
            let inserted = conn
                .prepare_cached(
                    "INSERT OR IGNORE INTO schedule_fires
                        (schedule_id, occurrence, state, manual, fire, updated_at)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
                )?
                .execute(params![
                    fire.schedule_id,
                    fire.occurrence,
                    fire.state.as_str(),
                    fire.manual,
                    json(fire)?,
                    fire.updated_at
                ])?;
            if inserted == 0 {
                return Err(fired(fire));
            }
        }
        ScheduleWrite::Settle(fire) => {
            conn.prepare_cached(
                "UPDATE schedule_fires SET state = ?3, fire = ?4, updated_at = ?5
                 WHERE schedule_id = ?1 AND occurrence = ?2",
            )?
            .execute(params![
                fire.schedule_id,
                fire.occurrence,
                fire.state.as_str(),
                json(fire)?,
                fire.updated_at
            ])?;
        }
    }
    Ok(())
}

/// The refusal of a schedule id already taken (either backend).
pub(in crate::store) fn already(id: &str) -> StoreError {
    StoreError::Conflict(format!("a schedule {id} already exists"))
}

/// The refusal of an unknown schedule (either backend).
pub(in crate::store) fn unknown(id: &str) -> StoreError {
    StoreError::Conflict(format!("no schedule {id}"))
}

/// The refusal of an occurrence fired before (either backend).
pub(in crate::store) fn fired(fire: &Fire) -> StoreError {
    StoreError::Conflict(format!(
        "occurrence {} of schedule {} was already fired",
        fire.occurrence, fire.schedule_id
    ))
}

pub(super) fn schedules(conn: &Connection) -> Result<Vec<Schedule>, StoreError> {
    let mut stmt = conn.prepare_cached("SELECT schedule FROM schedules ORDER BY created_at, id")?;
    let rows = stmt.query_map([], |row| row.get::<_, String>(0))?;
    rows.map(|row| parse("schedule", &row?)).collect()
}

pub(super) fn fires(
    conn: &Connection,
    schedule: Option<&str>,
    limit: usize,
) -> Result<Vec<Fire>, StoreError> {
    let limit = i64::try_from(limit).unwrap_or(i64::MAX);
    let mut stmt = conn.prepare_cached(
        "SELECT fire FROM schedule_fires WHERE ?1 IS NULL OR schedule_id = ?1
         ORDER BY occurrence DESC, schedule_id LIMIT ?2",
    )?;
    let rows = stmt.query_map(params![schedule, limit], |row| row.get::<_, String>(0))?;
    rows.map(|row| parse("schedule fire", &row?)).collect()
}

pub(super) fn last_fired(conn: &Connection) -> Result<Vec<(String, Millis)>, StoreError> {
    let mut stmt = conn.prepare_cached(
        "SELECT schedule_id, max(occurrence) FROM schedule_fires WHERE manual = 0
         GROUP BY schedule_id",
    )?;
    let rows = stmt.query_map([], |row| Ok((row.get(0)?, row.get(1)?)))?;
    Ok(rows.collect::<Result<_, _>>()?)
}

pub(super) fn open_fires(conn: &Connection) -> Result<Vec<Fire>, StoreError> {
    let mut stmt = conn.prepare_cached(
        "SELECT fire FROM schedule_fires WHERE state IN ('claimed', 'running')
         ORDER BY occurrence",
    )?;
    let rows = stmt.query_map([], |row| row.get::<_, String>(0))?;
    rows.map(|row| parse("schedule fire", &row?)).collect()
}
