//! The schedules' rows on PostgreSQL: the same effects as the SQLite
//! store's (`store::schedules`). A fire's primary key (schedule,
//! occurrence) is what makes one instance of several fire an occurrence:
//! the second insert finds the row and is refused as a conflict.

use super::PgFailure;
use super::conn::Conn;
use crate::core::schedule::{Fire, Schedule, ScheduleWrite};
use crate::core::session::Millis;
use crate::store::channels::parse;
use crate::store::schedules::{already, fired, unknown};
use crate::store::{self, StoreError};

fn db(err: tokio_postgres::Error) -> StoreError {
    super::pg_error(&err)
}

fn json<T: serde::Serialize>(value: &T) -> Result<String, PgFailure> {
    store::channels::json(value).map_err(PgFailure::Store)
}

pub(super) async fn apply(client: &Conn<'_>, write: &ScheduleWrite) -> Result<(), PgFailure> {
    match write {
        ScheduleWrite::Put(schedule) => {
            let inserted = client
                .execute(
                    "INSERT INTO schedules (id, schedule, created_at) VALUES ($1, $2, $3)
                     ON CONFLICT (id) DO NOTHING",
                    &[&schedule.id, &json(schedule)?, &schedule.created_at],
                )
                .await?;
            if inserted == 0 {
                return Err(PgFailure::Store(already(&schedule.id)));
            }
        }
        ScheduleWrite::Remove { id } => {
            client
                .execute("DELETE FROM schedule_fires WHERE schedule_id = $1", &[id])
                .await?;
            let removed = client
                .execute("DELETE FROM schedules WHERE id = $1", &[id])
                .await?;
            if removed == 0 {
                return Err(PgFailure::Store(unknown(id)));
            }
        }
        ScheduleWrite::Claim(fire) => {
            let inserted = client
                .execute(
                    "INSERT INTO schedule_fires
                        (schedule_id, occurrence, state, manual, fire, updated_at)
                     VALUES ($1, $2, $3, $4, $5, $6)
                     ON CONFLICT (schedule_id, occurrence) DO NOTHING",
                    &[
                        &fire.schedule_id,
                        &fire.occurrence,
                        &fire.state.as_str(),
                        &fire.manual,
                        &json(fire)?,
                        &fire.updated_at,
                    ],
                )
                .await?;
            if inserted == 0 {
                return Err(PgFailure::Store(fired(fire)));
            }
        }
        ScheduleWrite::Settle(fire) => {
            client
                .execute(
                    "UPDATE schedule_fires SET state = $3, fire = $4, updated_at = $5
                     WHERE schedule_id = $1 AND occurrence = $2",
                    &[
                        &fire.schedule_id,
                        &fire.occurrence,
                        &fire.state.as_str(),
                        &json(fire)?,
                        &fire.updated_at,
                    ],
                )
                .await?;
        }
    }
    Ok(())
}

pub(super) async fn schedules(client: &Conn<'_>) -> Result<Vec<Schedule>, StoreError> {
    let rows = client
        .query(
            "SELECT schedule FROM schedules ORDER BY created_at, id",
            &[],
        )
        .await
        .map_err(db)?;
    rows.iter()
        .map(|row| parse("schedule", &row.try_get::<_, String>(0).map_err(db)?))
        .collect()
}

pub(super) async fn fires(
    client: &Conn<'_>,
    schedule: Option<&str>,
    limit: usize,
) -> Result<Vec<Fire>, StoreError> {
    let limit = i64::try_from(limit).unwrap_or(i64::MAX);
    let rows = client
        .query(
            "SELECT fire FROM schedule_fires WHERE $1::TEXT IS NULL OR schedule_id = $1
             ORDER BY occurrence DESC, schedule_id LIMIT $2",
            &[&schedule, &limit],
        )
        .await
        .map_err(db)?;
    rows.iter()
        .map(|row| parse("schedule fire", &row.try_get::<_, String>(0).map_err(db)?))
        .collect()
}

pub(super) async fn last_fired(client: &Conn<'_>) -> Result<Vec<(String, Millis)>, StoreError> {
    let rows = client
        .query(
            "SELECT schedule_id, max(occurrence) FROM schedule_fires WHERE NOT manual
             GROUP BY schedule_id",
            &[],
        )
        .await
        .map_err(db)?;
    rows.iter()
        .map(|row| Ok((row.try_get(0).map_err(db)?, row.try_get(1).map_err(db)?)))
        .collect()
}

pub(super) async fn open_fires(client: &Conn<'_>) -> Result<Vec<Fire>, StoreError> {
    let rows = client
        .query(
            "SELECT fire FROM schedule_fires WHERE state IN ('claimed', 'running')
             ORDER BY occurrence",
            &[],
        )
        .await
        .map_err(db)?;
    rows.iter()
        .map(|row| parse("schedule fire", &row.try_get::<_, String>(0).map_err(db)?))
        .collect()
}
