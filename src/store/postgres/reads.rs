//! The journal's reads on PostgreSQL (`Journal`, `Audit`, `Counts`): the
//! same answers as the SQLite reader's (`store::reader`), whose row types
//! they share.

use std::path::PathBuf;

use super::conn::Conn;
use tokio_postgres::Row;

use crate::core::approval::Grant;
use crate::core::event::{Event, EventRecord, RunState};
use crate::core::ids::{RunId, SessionId};
use crate::core::journal::{RunsFrom, RunsToFollow, SessionFilter, SessionQuery};
use crate::core::models::Cost;
use crate::core::receipt::{Receipt, ReceiptBody, Verdict};
use crate::core::run::RunInfo;
use crate::core::session::{HistoryEntry, Message, Millis, Origin, Session, SessionParent};
use crate::store::StoreError;
use crate::store::reader::{RawRun, RawSession, corrupt, receipts_from};

type Read<T> = Result<T, StoreError>;

fn db(err: tokio_postgres::Error) -> StoreError {
    super::pg_error(&err)
}

fn count(n: i64) -> u64 {
    u64::try_from(n).unwrap_or(0)
}

fn int(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

const SESSION_COLUMNS: &str = "id, workspace, origin, provider, model, mode, title, mcp_servers, created_at, updated_at, closed, conversation, system_prompt, instructions, parent_session, parent_run, parent_call, thought_level";

fn session_row(row: &Row) -> Result<RawSession, tokio_postgres::Error> {
    Ok(RawSession {
        id: row.try_get(0)?,
        workspace: row.try_get(1)?,
        origin: row.try_get(2)?,
        provider: row.try_get(3)?,
        model: row.try_get(4)?,
        mode: row.try_get(5)?,
        title: row.try_get(6)?,
        mcp_servers: row.try_get(7)?,
        created_at: row.try_get(8)?,
        updated_at: row.try_get(9)?,
        closed: row.try_get(10)?,
        conversation: row.try_get(11)?,
        system_prompt: row.try_get(12)?,
        instructions: row.try_get(13)?,
        parent: match (
            row.try_get::<_, Option<String>>(14)?,
            row.try_get::<_, Option<String>>(15)?,
            row.try_get::<_, Option<String>>(16)?,
        ) {
            (Some(session), Some(run), Some(call)) => Some(SessionParent {
                session: SessionId::from_string(session),
                run: RunId::from_string(run),
                call,
            }),
            _ => None,
        },
        thought_level: row.try_get(17)?,
    })
}

fn sessions_from(rows: Vec<Row>) -> Read<Vec<Session>> {
    rows.iter()
        .map(|row| session_row(row).map_err(db)?.into_session())
        .collect()
}

pub(super) async fn session(client: &Conn<'_>, id: &SessionId) -> Read<Option<Session>> {
    let row = client
        .query_opt(
            &format!("SELECT {SESSION_COLUMNS} FROM sessions WHERE id = $1 AND deleted_at IS NULL"),
            &[&id.as_str()],
        )
        .await
        .map_err(db)?;
    row.map(|row| session_row(&row).map_err(db)?.into_session())
        .transpose()
}

/// Text with its ASCII capitals in lower case: the case `LIKE` ignores in
/// SQLite, and in the memory journal, ignored here too (where `ILIKE` would
/// ignore every letter's).
fn ascii_lower(column: &str) -> String {
    format!("translate({column}, 'ABCDEFGHIJKLMNOPQRSTUVWXYZ', 'abcdefghijklmnopqrstuvwxyz')")
}

/// Sessions newest first; the filter's words as an array of patterns
/// (`$8`), each of which some column must match.
pub(super) async fn sessions(client: &Conn<'_>, query: &SessionQuery) -> Read<Vec<Session>> {
    let workspace = query
        .workspace
        .as_ref()
        .map(|path| path.to_string_lossy().into_owned());
    let (after_at, after_id) = match &query.after {
        Some(cursor) => (Some(cursor.updated_at), Some(cursor.id.as_str().to_owned())),
        None => (None, None),
    };
    let limit = (query.limit > 0).then(|| int(query.limit as u64));
    let filter = &query.filter;
    let origin = filter.origin.map(Origin::as_str);
    let patterns: Vec<String> = filter
        .words
        .iter()
        .map(|word| SessionFilter::like_pattern(word))
        .collect();
    let matches = [
        "COALESCE(sessions.title, '')",
        "sessions.id",
        "sessions.model",
        "sessions.workspace",
    ]
    .map(|column| format!("{} LIKE word ESCAPE '\\'", ascii_lower(column)))
    .join(" OR ");
    let sql = format!(
        "SELECT {SESSION_COLUMNS} FROM sessions
         WHERE parent_session IS NULL AND deleted_at IS NULL
           AND ($1::TEXT IS NULL OR workspace = $1)
           AND ($2::BIGINT IS NULL OR (updated_at, id) < ($2, $3::TEXT))
           AND ($5::TEXT IS NULL OR origin = $5)
           AND ($6::BOOLEAN IS NULL OR closed = $6)
           AND ($7::TEXT IS NULL OR id IN
                (SELECT session_id FROM channel_sessions WHERE channel = $7))
           AND ($9::TEXT IS NULL OR conversation = $9)
           AND NOT EXISTS (SELECT 1 FROM unnest($8::TEXT[]) AS words(word)
                           WHERE NOT ({matches}))
         ORDER BY updated_at DESC, id DESC LIMIT $4"
    );
    let rows = client
        .query(
            &sql,
            &[
                &workspace,
                &after_at,
                &after_id,
                &limit,
                &origin,
                &filter.closed,
                &filter.channel,
                &patterns,
                &filter.conversation,
            ],
        )
        .await
        .map_err(db)?;
    sessions_from(rows)
}

fn history_from(rows: Vec<Row>, id: &SessionId) -> Read<Vec<HistoryEntry>> {
    rows.iter()
        .map(|row| {
            let run_id: Option<String> = row.try_get(0).map_err(db)?;
            let body: String = row.try_get(1).map_err(db)?;
            let at: i64 = row.try_get(2).map_err(db)?;
            let message: Message = serde_json::from_str(&body)
                .map_err(|err| StoreError::Corrupt(format!("message of session {id}: {err}")))?;
            Ok(HistoryEntry {
                run_id: run_id.map(RunId::from_string),
                message,
                at,
            })
        })
        .collect()
}

pub(super) async fn history(client: &Conn<'_>, id: &SessionId) -> Read<Vec<HistoryEntry>> {
    let rows = client
        .query(
            "SELECT run_id, body, at FROM messages WHERE session_id = $1 ORDER BY seq",
            &[&id.as_str()],
        )
        .await
        .map_err(db)?;
    history_from(rows, id)
}

pub(super) async fn since_compaction(client: &Conn<'_>, id: &SessionId) -> Read<Vec<HistoryEntry>> {
    let rows = client
        .query(
            "SELECT run_id, body, at FROM messages
             WHERE session_id = $1 AND seq >= COALESCE(
                 (SELECT seq FROM messages WHERE session_id = $1 AND role = 'summary'
                  ORDER BY seq DESC LIMIT 1), 0)
             ORDER BY seq",
            &[&id.as_str()],
        )
        .await
        .map_err(db)?;
    history_from(rows, id)
}

const RUN_COLUMNS: &str = "id, session_id, state, stop_reason, error, input_tokens, output_tokens, created_at, started_at, ended_at, cached_input_tokens, reasoning_tokens, cost, currency";

fn run_row(row: &Row) -> Result<RawRun, tokio_postgres::Error> {
    Ok(RawRun {
        id: row.try_get(0)?,
        session_id: row.try_get(1)?,
        state: row.try_get(2)?,
        stop_reason: row.try_get(3)?,
        error: row.try_get(4)?,
        input_tokens: row.try_get(5)?,
        output_tokens: row.try_get(6)?,
        created_at: row.try_get(7)?,
        started_at: row.try_get(8)?,
        ended_at: row.try_get(9)?,
        cached_input_tokens: row.try_get(10)?,
        reasoning_tokens: row.try_get(11)?,
        cost: row.try_get(12)?,
        currency: row.try_get(13)?,
    })
}

fn runs_from(rows: &[Row]) -> Read<Vec<RunInfo>> {
    rows.iter()
        .map(|row| run_row(row).map_err(db)?.into_info())
        .collect()
}

pub(super) async fn runs(client: &Conn<'_>, session: &SessionId) -> Read<Vec<RunInfo>> {
    let rows = client
        .query(
            &format!(
                "SELECT {RUN_COLUMNS} FROM runs WHERE session_id = $1 ORDER BY created_at, id"
            ),
            &[&session.as_str()],
        )
        .await
        .map_err(db)?;
    runs_from(&rows)
}

pub(super) async fn run(client: &Conn<'_>, id: &RunId) -> Read<Option<RunInfo>> {
    let row = client
        .query_opt(
            &format!("SELECT {RUN_COLUMNS} FROM runs WHERE id = $1"),
            &[&id.as_str()],
        )
        .await
        .map_err(db)?;
    row.map(|row| run_row(&row).map_err(db)?.into_info())
        .transpose()
}

pub(super) async fn session_cost(
    client: &Conn<'_>,
    session: &SessionId,
    except: &RunId,
) -> Read<Option<Cost>> {
    let kept = client
        .query_opt(
            "SELECT currency, amount FROM session_costs
             WHERE session_id = $1 ORDER BY first_at, currency LIMIT 1",
            &[&session.as_str()],
        )
        .await
        .map_err(db)?;
    let Some(kept) = kept else {
        return Ok(None);
    };
    let mut total = Cost {
        currency: kept.try_get(0).map_err(db)?,
        amount: kept.try_get(1).map_err(db)?,
    };
    let own = client
        .query_opt(
            "SELECT cost FROM runs WHERE id = $1 AND session_id = $2 AND currency = $3 AND cost IS NOT NULL",
            &[&except.as_str(), &session.as_str(), &total.currency],
        )
        .await
        .map_err(db)?;
    if let Some(own) = own {
        total.amount -= own.try_get::<_, f64>(0).map_err(db)?;
    }
    Ok(Some(total))
}

/// The runs a follower has not looked at: positions are the runs' places
/// in their session (`runs.pos`), handed out in commit order.
pub(super) async fn runs_to_follow(
    client: &Conn<'_>,
    session: &SessionId,
    from: RunsFrom,
) -> Read<RunsToFollow> {
    let newest: i64 = client
        .query_one(
            "SELECT COALESCE(MAX(pos), 0) FROM runs WHERE session_id = $1",
            &[&session.as_str()],
        )
        .await
        .map_err(db)?
        .try_get(0)
        .map_err(db)?;
    let rows = match from {
        RunsFrom::Created(at) => client
            .query(
                &format!(
                    "SELECT {RUN_COLUMNS}, pos FROM runs
                     WHERE session_id = $1 AND (created_at >= $2 OR state IN ('queued', 'running', 'waiting'))
                     ORDER BY pos"
                ),
                &[&session.as_str(), &at],
            )
            .await
            .map_err(db)?,
        RunsFrom::After(after) => client
            .query(
                &format!(
                    "SELECT {RUN_COLUMNS}, pos FROM runs
                     WHERE session_id = $1 AND (pos > $2 OR state IN ('queued', 'running', 'waiting'))
                     ORDER BY pos"
                ),
                &[&session.as_str(), &int(after)],
            )
            .await
            .map_err(db)?,
    };
    let mut next = newest;
    for row in &rows {
        next = next.max(row.try_get::<_, i64>(14).map_err(db)?);
    }
    if let RunsFrom::After(after) = from {
        next = next.max(int(after));
    }
    Ok(RunsToFollow {
        runs: runs_from(&rows)?,
        next: count(next),
    })
}

pub(super) async fn waiting_runs(client: &Conn<'_>) -> Read<Vec<RunInfo>> {
    let rows = client
        .query(
            &format!(
                "SELECT {RUN_COLUMNS} FROM runs WHERE state IN ('queued', 'running', 'waiting') AND state = 'waiting' ORDER BY created_at, id"
            ),
            &[],
        )
        .await
        .map_err(db)?;
    runs_from(&rows)
}

pub(super) async fn spent(client: &Conn<'_>, provider: &str, since: Millis) -> Read<Vec<Cost>> {
    let rows = client
        .query(
            "SELECT r.currency, sum(r.cost) FROM runs r JOIN sessions s ON s.id = r.session_id
             WHERE s.provider = $1 AND r.created_at >= $2 AND r.cost IS NOT NULL AND r.currency IS NOT NULL
             GROUP BY r.currency ORDER BY r.currency",
            &[&provider, &since],
        )
        .await
        .map_err(db)?;
    rows.iter()
        .map(|row| {
            Ok(Cost {
                currency: row.try_get(0).map_err(db)?,
                amount: row.try_get(1).map_err(db)?,
            })
        })
        .collect()
}

pub(super) async fn run_counts(client: &Conn<'_>) -> Read<Vec<(RunState, u64)>> {
    let rows = client
        .query(
            "SELECT state, COUNT(*) FROM runs GROUP BY state ORDER BY state",
            &[],
        )
        .await
        .map_err(db)?;
    rows.iter()
        .map(|row| {
            let state: String = row.try_get(0).map_err(db)?;
            let n: i64 = row.try_get(1).map_err(db)?;
            let state = RunState::parse(&state).ok_or_else(|| corrupt("run state", &state))?;
            Ok((state, count(n)))
        })
        .collect()
}

/// The runs of a window that ended after they started.
const ENDED: &str =
    "FROM runs WHERE created_at >= $1 AND started_at IS NOT NULL AND ended_at IS NOT NULL";

/// The runs created at or after `since`, summed (`Counts::run_window`).
/// Each figure is one query over `runs_by_created` (migration 3).
pub(super) async fn run_window(
    client: &Conn<'_>,
    since: Millis,
    bucket_ms: i64,
) -> Read<crate::core::journal::RunWindow> {
    use crate::core::journal::{RunWindow, WindowBucket, nearest_rank};
    let mut window = RunWindow::default();
    let rows = client
        .query(
            "SELECT state, COUNT(*), COALESCE(sum(input_tokens), 0)::BIGINT,
                    COALESCE(sum(output_tokens), 0)::BIGINT
             FROM runs WHERE created_at >= $1 GROUP BY state ORDER BY state",
            &[&since],
        )
        .await
        .map_err(db)?;
    for row in &rows {
        let state: String = row.try_get(0).map_err(db)?;
        let state = RunState::parse(&state).ok_or_else(|| corrupt("run state", &state))?;
        window
            .by_state
            .push((state, count(row.try_get(1).map_err(db)?)));
        window.input_tokens += count(row.try_get(2).map_err(db)?);
        window.output_tokens += count(row.try_get(3).map_err(db)?);
    }
    let rows = client
        .query(
            "SELECT currency, sum(cost) FROM runs
             WHERE created_at >= $1 AND cost IS NOT NULL AND currency IS NOT NULL
             GROUP BY currency ORDER BY currency",
            &[&since],
        )
        .await
        .map_err(db)?;
    for row in &rows {
        window.cost.push(Cost {
            currency: row.try_get(0).map_err(db)?,
            amount: row.try_get(1).map_err(db)?,
        });
    }
    let ended: i64 = client
        .query_one(&format!("SELECT COUNT(*) {ENDED}"), &[&since])
        .await
        .map_err(db)?
        .try_get(0)
        .map_err(db)?;
    window.ended = count(ended);
    let nth = format!("SELECT ended_at - started_at AS d {ENDED} ORDER BY d LIMIT 1 OFFSET $2");
    for (percent, slot) in [(50, &mut window.p50_ms), (95, &mut window.p95_ms)] {
        if let Some(rank) = nearest_rank(window.ended, percent) {
            let row = client
                .query_one(&nth, &[&since, &int(rank)])
                .await
                .map_err(db)?;
            *slot = Some(row.try_get(0).map_err(db)?);
        }
    }
    let rows = client
        .query(
            "SELECT (created_at - $1) / $2 AS b, COUNT(*),
                    COUNT(*) FILTER (WHERE state = 'failed')
             FROM runs WHERE created_at >= $1 GROUP BY b ORDER BY b",
            &[&since, &bucket_ms.max(1)],
        )
        .await
        .map_err(db)?;
    for row in &rows {
        let index: i64 = row.try_get(0).map_err(db)?;
        window.buckets.push(WindowBucket {
            index: count(index),
            runs: count(row.try_get(1).map_err(db)?),
            failed: count(row.try_get(2).map_err(db)?),
        });
    }
    Ok(window)
}

/// A run's events from `from_seq` on (at most `limit`), in order.
pub(super) async fn tape_in(
    client: &Conn<'_>,
    run: &RunId,
    from_seq: u64,
    limit: Option<usize>,
) -> Read<Vec<EventRecord>> {
    let limit = limit.map(|n| int(n as u64));
    let rows = client
        .query(
            "SELECT session_id, seq, at, payload FROM tape WHERE run_id = $1 AND seq >= $2 ORDER BY seq LIMIT $3",
            &[&run.as_str(), &int(from_seq), &limit],
        )
        .await
        .map_err(db)?;
    rows.iter()
        .map(|row| {
            let session_id: String = row.try_get(0).map_err(db)?;
            let seq: i64 = row.try_get(1).map_err(db)?;
            let at: i64 = row.try_get(2).map_err(db)?;
            let payload: String = row.try_get(3).map_err(db)?;
            let event: Event = serde_json::from_str(&payload).map_err(|err| {
                StoreError::Corrupt(format!("tape of run {run}, seq {seq}: {err}"))
            })?;
            Ok(EventRecord {
                session_id: SessionId::from_string(session_id),
                run_id: run.clone(),
                seq: count(seq),
                at,
                event,
            })
        })
        .collect()
}

pub(super) async fn grants(client: &Conn<'_>, session: &SessionId) -> Read<Vec<Grant>> {
    let rows = client
        .query(
            "SELECT tool, scope, allow FROM grants WHERE session_id = $1 ORDER BY at, tool, scope",
            &[&session.as_str()],
        )
        .await
        .map_err(db)?;
    rows.iter()
        .map(|row| {
            Ok(Grant {
                tool: row.try_get(0).map_err(db)?,
                scope: row.try_get(1).map_err(db)?,
                allow: row.try_get(2).map_err(db)?,
            })
        })
        .collect()
}

pub(super) async fn trusted_roots(client: &Conn<'_>) -> Read<Vec<crate::core::hooks::Trust>> {
    let rows = client
        .query(
            "SELECT root, files FROM trusted_roots ORDER BY at, root",
            &[],
        )
        .await
        .map_err(db)?;
    rows.iter()
        .map(|row| {
            let root: String = row.try_get(0).map_err(db)?;
            let files: String = row.try_get(1).map_err(db)?;
            let files = serde_json::from_str(&files).map_err(|err| {
                StoreError::Corrupt(format!("the trusted files of {root}: {err}"))
            })?;
            Ok(crate::core::hooks::Trust {
                root: PathBuf::from(root),
                files,
            })
        })
        .collect()
}

pub(super) async fn skills_last_used(client: &Conn<'_>) -> Read<Vec<(String, Millis)>> {
    let rows = client
        .query(
            "SELECT COALESCE(payload::jsonb ->> 'name', '') AS name, max(at) FROM tape
             WHERE kind = 'skill_activated' GROUP BY name ORDER BY name",
            &[],
        )
        .await
        .map_err(db)?;
    rows.iter()
        .map(|row| Ok((row.try_get(0).map_err(db)?, row.try_get(1).map_err(db)?)))
        .collect()
}

pub(super) async fn controls(
    client: &Conn<'_>,
    session: &SessionId,
) -> Read<Vec<(i64, crate::core::control::Control)>> {
    let rows = client
        .query(
            "SELECT id, control FROM session_controls WHERE session_id = $1 ORDER BY id",
            &[&session.as_str()],
        )
        .await
        .map_err(db)?;
    rows.iter()
        .map(|row| {
            let id: i64 = row.try_get(0).map_err(db)?;
            let control: String = row.try_get(1).map_err(db)?;
            let control = serde_json::from_str(&control)
                .map_err(|err| StoreError::Corrupt(format!("control {id}: {err}")))?;
            Ok((id, control))
        })
        .collect()
}

const RECEIPT_COLUMNS: &str = "seq, session_id, run_id, call_id, tool, input_hash, output_hash, verdict, is_error, at, prev_hash, hash, hooks, skills";

fn receipt_rows(rows: &[Row]) -> Read<Vec<Receipt>> {
    let lines = |text: Option<String>| {
        text.map(|text| text.lines().map(str::to_owned).collect())
            .unwrap_or_default()
    };
    let raw = rows
        .iter()
        .map(|row| {
            let seq: i64 = row.try_get(0)?;
            Ok((
                Receipt {
                    seq: count(seq),
                    body: ReceiptBody {
                        session_id: SessionId::from_string(row.try_get(1)?),
                        run_id: RunId::from_string(row.try_get(2)?),
                        call_id: row.try_get(3)?,
                        tool: row.try_get(4)?,
                        input_hash: row.try_get(5)?,
                        output_hash: row.try_get(6)?,
                        verdict: Verdict::Invalid,
                        is_error: row.try_get(8)?,
                        at: row.try_get(9)?,
                        hooks: lines(row.try_get(12)?),
                        skills: lines(row.try_get(13)?),
                    },
                    prev_hash: row.try_get(10)?,
                    hash: row.try_get(11)?,
                },
                row.try_get::<_, String>(7)?,
            ))
        })
        .collect::<Result<Vec<_>, tokio_postgres::Error>>()
        .map_err(db)?;
    receipts_from(raw)
}

pub(super) async fn receipts(client: &Conn<'_>, from_seq: u64, limit: usize) -> Read<Vec<Receipt>> {
    let rows = client
        .query(
            &format!(
                "SELECT {RECEIPT_COLUMNS} FROM receipts WHERE seq >= $1 ORDER BY seq LIMIT $2"
            ),
            &[&int(from_seq), &int(limit as u64)],
        )
        .await
        .map_err(db)?;
    receipt_rows(&rows)
}

pub(super) async fn run_receipts(client: &Conn<'_>, run: &RunId) -> Read<Vec<Receipt>> {
    let rows = client
        .query(
            &format!("SELECT {RECEIPT_COLUMNS} FROM receipts WHERE run_id = $1 ORDER BY seq"),
            &[&run.as_str()],
        )
        .await
        .map_err(db)?;
    receipt_rows(&rows)
}

pub(super) async fn missing_receipts(client: &Conn<'_>) -> Read<Vec<(RunId, u64, u64)>> {
    let rows = client
        .query(
            "SELECT t.run_id, t.results, COALESCE(r.receipts, 0) FROM
               (SELECT run_id, COUNT(*) AS results FROM tape WHERE kind = 'tool_result' GROUP BY run_id) t
             LEFT JOIN (SELECT run_id, COUNT(*) AS receipts FROM receipts GROUP BY run_id) r
               ON r.run_id = t.run_id
             WHERE t.results > COALESCE(r.receipts, 0)
             ORDER BY t.run_id",
            &[],
        )
        .await
        .map_err(db)?;
    rows.iter()
        .map(|row| {
            let run: String = row.try_get(0).map_err(db)?;
            let results: i64 = row.try_get(1).map_err(db)?;
            let receipts: i64 = row.try_get(2).map_err(db)?;
            Ok((RunId::from_string(run), count(results), count(receipts)))
        })
        .collect()
}
