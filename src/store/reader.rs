//! Queries, run on read-only connections.

use std::path::PathBuf;

use rusqlite::types::Value;
use rusqlite::{Connection, OptionalExtension, Row, params};

use super::StoreError;
use crate::core::approval::Grant;
use crate::core::event::{Event, EventRecord, RunState, StopReason, Usage};
use crate::core::ids::{RunId, SessionId};
use crate::core::models::Cost;
use crate::core::prompt::PromptSettings;
use crate::core::receipt::{Receipt, ReceiptBody, Verdict};
use crate::core::run::RunInfo;
use crate::core::session::{HistoryEntry, Message, Mode, Origin, Session, SessionParent};

pub use crate::core::journal::SessionQuery;
use crate::core::journal::{RunsFrom, RunsToFollow, SessionFilter};

const RECEIPT_COLUMNS: &str = "seq, session_id, run_id, call_id, tool, input_hash, output_hash, verdict, is_error, at, prev_hash, hash, hooks, skills";

fn receipt_row(row: &Row<'_>) -> rusqlite::Result<(Receipt, String)> {
    let verdict: String = row.get(7)?;
    let seq: i64 = row.get(0)?;
    Ok((
        Receipt {
            seq: seq as u64,
            body: ReceiptBody {
                session_id: SessionId::from_string(row.get(1)?),
                run_id: RunId::from_string(row.get(2)?),
                call_id: row.get(3)?,
                tool: row.get(4)?,
                input_hash: row.get(5)?,
                output_hash: row.get(6)?,
                // Replaced below once the text is checked.
                verdict: Verdict::Invalid,
                is_error: row.get(8)?,
                at: row.get(9)?,
                hooks: row
                    .get::<_, Option<String>>(12)?
                    .map(|hooks| hooks.lines().map(str::to_owned).collect())
                    .unwrap_or_default(),
                skills: row
                    .get::<_, Option<String>>(13)?
                    .map(|skills| skills.lines().map(str::to_owned).collect())
                    .unwrap_or_default(),
            },
            prev_hash: row.get(10)?,
            hash: row.get(11)?,
        },
        verdict,
    ))
}

pub(in crate::store) fn receipts_from(
    rows: Vec<(Receipt, String)>,
) -> Result<Vec<Receipt>, StoreError> {
    rows.into_iter()
        .map(|(mut receipt, verdict)| {
            receipt.body.verdict =
                Verdict::parse(&verdict).ok_or_else(|| corrupt("receipt verdict", &verdict))?;
            Ok(receipt)
        })
        .collect()
}

pub fn receipts(
    conn: &Connection,
    from_seq: u64,
    limit: usize,
) -> Result<Vec<Receipt>, StoreError> {
    let rows = conn
        .prepare_cached(&format!(
            "SELECT {RECEIPT_COLUMNS} FROM receipts WHERE seq >= ?1 ORDER BY seq LIMIT ?2"
        ))?
        .query_map(params![from_seq as i64, limit as i64], receipt_row)?
        .collect::<Result<Vec<_>, _>>()?;
    receipts_from(rows)
}

pub fn run_receipts(conn: &Connection, run: &RunId) -> Result<Vec<Receipt>, StoreError> {
    let rows = conn
        .prepare_cached(&format!(
            "SELECT {RECEIPT_COLUMNS} FROM receipts WHERE run_id = ?1 ORDER BY seq"
        ))?
        .query_map(params![run.as_str()], receipt_row)?
        .collect::<Result<Vec<_>, _>>()?;
    receipts_from(rows)
}

pub fn missing_receipts(conn: &Connection) -> Result<Vec<(RunId, u64, u64)>, StoreError> {
    let rows = conn
        .prepare_cached(
            "SELECT t.run_id, t.results, COALESCE(r.receipts, 0) FROM
               (SELECT run_id, COUNT(*) AS results FROM tape WHERE kind = 'tool_result' GROUP BY run_id) t
             LEFT JOIN (SELECT run_id, COUNT(*) AS receipts FROM receipts GROUP BY run_id) r
               ON r.run_id = t.run_id
             WHERE t.results > COALESCE(r.receipts, 0)
             ORDER BY t.run_id",
        )?
        .query_map([], |row| {
            let results: i64 = row.get(1)?;
            let receipts: i64 = row.get(2)?;
            Ok((
                RunId::from_string(row.get(0)?),
                results as u64,
                receipts as u64,
            ))
        })?
        .collect::<Result<Vec<_>, _>>()?;
    Ok(rows)
}

pub fn grants(conn: &Connection, session: &SessionId) -> Result<Vec<Grant>, StoreError> {
    let rows = conn
        .prepare_cached(
            "SELECT tool, scope, allow FROM grants WHERE session_id = ?1 ORDER BY at, tool, scope",
        )?
        .query_map(params![session.as_str()], |row| {
            Ok(Grant {
                tool: row.get(0)?,
                scope: row.get(1)?,
                allow: row.get(2)?,
            })
        })?
        .collect::<Result<Vec<_>, _>>()?;
    Ok(rows)
}

const SESSION_COLUMNS: &str = "id, workspace, origin, provider, model, mode, title, mcp_servers, created_at, updated_at, closed, conversation, system_prompt, instructions, parent_session, parent_run, parent_call, thought_level";

pub(in crate::store) fn corrupt(what: &str, value: &str) -> StoreError {
    StoreError::Corrupt(format!("unknown {what} {value:?}"))
}

fn session_row(row: &Row<'_>) -> rusqlite::Result<RawSession> {
    Ok(RawSession {
        id: row.get(0)?,
        workspace: row.get(1)?,
        origin: row.get(2)?,
        provider: row.get(3)?,
        model: row.get(4)?,
        mode: row.get(5)?,
        title: row.get(6)?,
        mcp_servers: row.get(7)?,
        created_at: row.get(8)?,
        updated_at: row.get(9)?,
        closed: row.get(10)?,
        conversation: row.get(11)?,
        system_prompt: row.get(12)?,
        instructions: row.get(13)?,
        parent: match (
            row.get::<_, Option<String>>(14)?,
            row.get::<_, Option<String>>(15)?,
            row.get::<_, Option<String>>(16)?,
        ) {
            (Some(session), Some(run), Some(call)) => Some(SessionParent {
                session: SessionId::from_string(session),
                run: RunId::from_string(run),
                call,
            }),
            _ => None,
        },
        thought_level: row.get(17)?,
    })
}

pub(in crate::store) struct RawSession {
    pub(in crate::store) id: String,
    pub(in crate::store) workspace: String,
    pub(in crate::store) origin: String,
    pub(in crate::store) provider: String,
    pub(in crate::store) model: String,
    pub(in crate::store) mode: String,
    pub(in crate::store) title: Option<String>,
    pub(in crate::store) mcp_servers: String,
    pub(in crate::store) created_at: i64,
    pub(in crate::store) updated_at: i64,
    pub(in crate::store) closed: bool,
    pub(in crate::store) conversation: Option<String>,
    pub(in crate::store) system_prompt: Option<String>,
    pub(in crate::store) instructions: Option<String>,
    pub(in crate::store) parent: Option<SessionParent>,
    pub(in crate::store) thought_level: Option<String>,
}

impl RawSession {
    pub(in crate::store) fn into_session(self) -> Result<Session, StoreError> {
        Ok(Session {
            origin: Origin::parse(&self.origin).ok_or_else(|| corrupt("origin", &self.origin))?,
            mode: Mode::parse(&self.mode).ok_or_else(|| corrupt("mode", &self.mode))?,
            mcp_servers: serde_json::from_str(&self.mcp_servers)
                .map_err(|err| StoreError::Corrupt(format!("mcp_servers of {}: {err}", self.id)))?,
            id: SessionId::from_string(self.id),
            workspace: PathBuf::from(self.workspace),
            provider: self.provider,
            model: self.model,
            title: self.title,
            created_at: self.created_at,
            updated_at: self.updated_at,
            closed: self.closed,
            conversation: self.conversation,
            prompt: PromptSettings {
                system_prompt: self.system_prompt,
                instructions: self.instructions,
            },
            parent: self.parent,
            thought_level: self.thought_level,
        })
    }
}

pub(super) fn session(conn: &Connection, id: &SessionId) -> Result<Option<Session>, StoreError> {
    let raw = conn
        .prepare_cached(&format!(
            "SELECT {SESSION_COLUMNS} FROM sessions WHERE id = ?1 AND deleted_at IS NULL"
        ))?
        .query_row(params![id.as_str()], session_row)
        .optional()?;
    raw.map(RawSession::into_session).transpose()
}

pub(super) fn sessions(
    conn: &Connection,
    query: &SessionQuery,
) -> Result<Vec<Session>, StoreError> {
    let (sql, values) = sessions_sql(query);
    let mut stmt = conn.prepare_cached(&sql)?;
    let rows = stmt.query_map(rusqlite::params_from_iter(values), session_row)?;
    rows.map(|raw| raw.map_err(StoreError::from)?.into_session())
        .collect()
}

/// The listing query of `query`'s shape and its parameters, numbered in the
/// order they come. A statement per shape (in one workspace or all; from a
/// cursor or from the newest; which filters), so SQLite seeks the listing
/// index (`sessions_listed`, migration 14) to the cursor: written once with
/// `?2 IS NULL OR …`, the same query scanned the index from the newest
/// session on every page, and a walk of every page was quadratic. The
/// filters are checked on the rows the walk reads, newest first, so a page
/// stops at `limit` sessions that pass.
pub(super) fn sessions_sql(query: &SessionQuery) -> (String, Vec<Value>) {
    let mut values: Vec<Value> = Vec::new();
    let mut next = |value: Value| {
        values.push(value);
        values.len()
    };
    let mut sql = format!(
        "SELECT {SESSION_COLUMNS} FROM sessions
         WHERE parent_session IS NULL AND deleted_at IS NULL"
    );
    if let Some(workspace) = &query.workspace {
        let n = next(Value::Text(workspace.to_string_lossy().into_owned()));
        sql.push_str(&format!(" AND workspace = ?{n}"));
    }
    if let Some(cursor) = &query.after {
        let at = next(Value::Integer(cursor.updated_at));
        let id = next(Value::Text(cursor.id.as_str().to_owned()));
        sql.push_str(&format!(" AND (updated_at, id) < (?{at}, ?{id})"));
    }
    let filter = &query.filter;
    if let Some(origin) = filter.origin {
        let n = next(Value::Text(origin.as_str().to_owned()));
        sql.push_str(&format!(" AND origin = ?{n}"));
    }
    if let Some(closed) = filter.closed {
        let n = next(Value::Integer(i64::from(closed)));
        sql.push_str(&format!(" AND closed = ?{n}"));
    }
    if let Some(channel) = &filter.channel {
        let n = next(Value::Text(channel.clone()));
        sql.push_str(&format!(
            " AND id IN (SELECT session_id FROM channel_sessions WHERE channel = ?{n})"
        ));
    }
    if let Some(conversation) = &filter.conversation {
        let n = next(Value::Text(conversation.clone()));
        sql.push_str(&format!(" AND conversation = ?{n}"));
    }
    // The words as one JSON array of patterns, each of which some column
    // must match (one parameter however many words: the statement keeps
    // its shape and its depth); SQLite's `LIKE` ignores the case of ASCII
    // letters.
    if !filter.words.is_empty() {
        let patterns: Vec<String> = filter
            .words
            .iter()
            .map(|word| SessionFilter::like_pattern(word))
            .collect();
        let n = next(Value::Text(serde_json::Value::from(patterns).to_string()));
        // Named with their table: `json_each` has an `id` of its own.
        let matches = [
            "COALESCE(sessions.title, '')",
            "sessions.id",
            "sessions.model",
            "sessions.workspace",
        ]
        .map(|column| format!("{column} LIKE word.value ESCAPE '\\'"))
        .join(" OR ");
        sql.push_str(&format!(
            " AND NOT EXISTS (SELECT 1 FROM json_each(?{n}) AS word WHERE NOT ({matches}))"
        ));
    }
    let limit = if query.limit == 0 {
        -1
    } else {
        i64::try_from(query.limit).unwrap_or(i64::MAX)
    };
    let n = next(Value::Integer(limit));
    sql.push_str(&format!(" ORDER BY updated_at DESC, id DESC LIMIT ?{n}"));
    (sql, values)
}

pub(super) fn history(conn: &Connection, id: &SessionId) -> Result<Vec<HistoryEntry>, StoreError> {
    let mut stmt = conn.prepare_cached(
        "SELECT run_id, body, at FROM messages WHERE session_id = ?1 ORDER BY seq",
    )?;
    history_rows(&mut stmt, id)
}

/// The messages from the session's newest summary on: the summary found
/// through the partial index of summaries (`messages_summaries`), then the
/// messages from it through the primary key, so the read is as long as the
/// conversation since the last compaction, whatever came before it.
pub(super) fn since_compaction(
    conn: &Connection,
    id: &SessionId,
) -> Result<Vec<HistoryEntry>, StoreError> {
    let mut stmt = conn.prepare_cached(SINCE_COMPACTION)?;
    history_rows(&mut stmt, id)
}

pub(super) const SINCE_COMPACTION: &str = "SELECT run_id, body, at FROM messages
    WHERE session_id = ?1 AND seq >= COALESCE(
        (SELECT seq FROM messages WHERE session_id = ?1 AND role = 'summary'
         ORDER BY seq DESC LIMIT 1), 0)
    ORDER BY seq";

fn history_rows(
    stmt: &mut rusqlite::CachedStatement<'_>,
    id: &SessionId,
) -> Result<Vec<HistoryEntry>, StoreError> {
    let rows = stmt.query_map(params![id.as_str()], |row| {
        Ok((
            row.get::<_, Option<String>>(0)?,
            row.get::<_, String>(1)?,
            row.get::<_, i64>(2)?,
        ))
    })?;
    rows.map(|row| {
        let (run_id, body, at) = row?;
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

const RUN_COLUMNS: &str = "id, session_id, state, stop_reason, error, input_tokens, output_tokens, created_at, started_at, ended_at, cached_input_tokens, reasoning_tokens, cost, currency";

pub(in crate::store) struct RawRun {
    pub(in crate::store) id: String,
    pub(in crate::store) session_id: String,
    pub(in crate::store) state: String,
    pub(in crate::store) stop_reason: Option<String>,
    pub(in crate::store) error: Option<String>,
    pub(in crate::store) input_tokens: i64,
    pub(in crate::store) output_tokens: i64,
    pub(in crate::store) created_at: i64,
    pub(in crate::store) started_at: Option<i64>,
    pub(in crate::store) ended_at: Option<i64>,
    pub(in crate::store) cached_input_tokens: i64,
    pub(in crate::store) reasoning_tokens: i64,
    pub(in crate::store) cost: Option<f64>,
    pub(in crate::store) currency: Option<String>,
}

fn run_row(row: &Row<'_>) -> rusqlite::Result<RawRun> {
    Ok(RawRun {
        id: row.get(0)?,
        session_id: row.get(1)?,
        state: row.get(2)?,
        stop_reason: row.get(3)?,
        error: row.get(4)?,
        input_tokens: row.get(5)?,
        output_tokens: row.get(6)?,
        created_at: row.get(7)?,
        started_at: row.get(8)?,
        ended_at: row.get(9)?,
        cached_input_tokens: row.get(10)?,
        reasoning_tokens: row.get(11)?,
        cost: row.get(12)?,
        currency: row.get(13)?,
    })
}

impl RawRun {
    pub(in crate::store) fn into_info(self) -> Result<RunInfo, StoreError> {
        let stop_reason = match self.stop_reason {
            Some(value) => {
                Some(StopReason::parse(&value).ok_or_else(|| corrupt("stop reason", &value))?)
            }
            None => None,
        };
        Ok(RunInfo {
            state: RunState::parse(&self.state).ok_or_else(|| corrupt("run state", &self.state))?,
            id: RunId::from_string(self.id),
            session_id: SessionId::from_string(self.session_id),
            stop_reason,
            error: self.error,
            usage: Usage {
                input_tokens: self.input_tokens.max(0) as u64,
                output_tokens: self.output_tokens.max(0) as u64,
                cached_input_tokens: self.cached_input_tokens.max(0) as u64,
                reasoning_tokens: self.reasoning_tokens.max(0) as u64,
            },
            cost: match (self.cost, self.currency) {
                (Some(amount), Some(currency)) => Some(Cost { amount, currency }),
                _ => None,
            },
            created_at: self.created_at,
            started_at: self.started_at,
            ended_at: self.ended_at,
        })
    }
}

pub(super) fn runs(conn: &Connection, session: &SessionId) -> Result<Vec<RunInfo>, StoreError> {
    let mut stmt = conn.prepare_cached(&format!(
        "SELECT {RUN_COLUMNS} FROM runs WHERE session_id = ?1 ORDER BY created_at, id"
    ))?;
    let rows = stmt.query_map(params![session.as_str()], run_row)?;
    rows.map(|raw| raw.map_err(StoreError::from)?.into_info())
        .collect()
}

/// What the session's runs but `except` cost, in the currency of its first
/// costed run: the sums the `session_costs` triggers keep (migration 19),
/// less `except`'s own cost.
pub(super) fn session_cost(
    conn: &Connection,
    session: &SessionId,
    except: &RunId,
) -> Result<Option<Cost>, StoreError> {
    let kept = conn
        .prepare_cached(SESSION_COST)?
        .query_row(params![session.as_str()], |row| {
            Ok(Cost {
                currency: row.get(0)?,
                amount: row.get(1)?,
            })
        })
        .optional()?;
    let Some(mut total) = kept else {
        return Ok(None);
    };
    let own = conn
        .prepare_cached(
            "SELECT cost FROM runs WHERE id = ?1 AND session_id = ?2 AND currency = ?3 AND cost IS NOT NULL",
        )?
        .query_row(
            params![except.as_str(), session.as_str(), total.currency],
            |row| row.get::<_, f64>(0),
        )
        .optional()?;
    if let Some(own) = own {
        total.amount -= own;
    }
    Ok(Some(total))
}

pub(super) const SESSION_COST: &str = "SELECT currency, amount FROM session_costs
    WHERE session_id = ?1 ORDER BY first_at, currency LIMIT 1";

/// The runs a follower of `session` has not looked at: those `from` names
/// (created since, through `runs_by_session`; or inserted after a rowid,
/// through `runs_in_order`) and the unfinished ones
/// (`runs_unfinished_by_session`), in rowid order, each once; with the rowid
/// to look after next time. The session's newest rowid is read first, so a
/// run inserted between the reads is listed now or next time, never missed.
/// Rowids only grow: a run's row is never deleted (`Write::DeleteSession`
/// keeps runs), so SQLite gives each new row a rowid past every other.
pub(super) fn runs_to_follow(
    conn: &Connection,
    session: &SessionId,
    from: RunsFrom,
) -> Result<RunsToFollow, StoreError> {
    let newest: i64 = conn
        .prepare_cached(
            "SELECT rowid FROM runs INDEXED BY runs_in_order WHERE session_id = ?1
             ORDER BY rowid DESC LIMIT 1",
        )?
        .query_row(params![session.as_str()], |row| row.get(0))
        .optional()?
        .unwrap_or(0);
    let mut found: Vec<(i64, RawRun)> = Vec::new();
    let with_rowid = |row: &Row<'_>| Ok((row.get::<_, i64>(14)?, run_row(row)?));
    match from {
        RunsFrom::Created(at) => {
            let mut stmt = conn.prepare_cached(&format!(
                "SELECT {RUN_COLUMNS}, rowid FROM runs INDEXED BY runs_by_session
                 WHERE session_id = ?1 AND created_at >= ?2
                 ORDER BY created_at, id"
            ))?;
            for row in stmt.query_map(params![session.as_str(), at], with_rowid)? {
                found.push(row?);
            }
        }
        RunsFrom::After(after) => {
            let mut stmt = conn.prepare_cached(&format!(
                "SELECT {RUN_COLUMNS}, rowid FROM runs INDEXED BY runs_in_order
                 WHERE session_id = ?1 AND rowid > ?2 ORDER BY rowid"
            ))?;
            let after = i64::try_from(after).unwrap_or(i64::MAX);
            for row in stmt.query_map(params![session.as_str(), after], with_rowid)? {
                found.push(row?);
            }
        }
    }
    let mut stmt = conn.prepare_cached(&format!(
        "SELECT {RUN_COLUMNS}, rowid FROM runs INDEXED BY runs_unfinished_by_session
         WHERE session_id = ?1 AND state IN ('queued', 'running', 'waiting')"
    ))?;
    for row in stmt.query_map(params![session.as_str()], with_rowid)? {
        let (rowid, raw) = row?;
        if !found.iter().any(|(seen, _)| *seen == rowid) {
            found.push((rowid, raw));
        }
    }
    found.sort_by_key(|(rowid, _)| *rowid);
    // Past everything listed too: a run inserted between the two reads and
    // listed now is not listed again.
    let mut next = found.last().map_or(newest, |(rowid, _)| newest.max(*rowid));
    if let RunsFrom::After(after) = from {
        next = next.max(i64::try_from(after).unwrap_or(i64::MAX));
    }
    Ok(RunsToFollow {
        runs: found
            .into_iter()
            .map(|(_, raw)| raw.into_info())
            .collect::<Result<_, _>>()?,
        next: u64::try_from(next).unwrap_or(0),
    })
}

/// The runs waiting for an answer (`waiting`), over every session, oldest
/// first: read through the partial index of unfinished runs.
pub(super) fn waiting_runs(conn: &Connection) -> Result<Vec<RunInfo>, StoreError> {
    let mut stmt = conn.prepare_cached(&format!(
        "SELECT {RUN_COLUMNS} FROM runs WHERE state IN ('queued', 'running', 'waiting') AND state = 'waiting' ORDER BY created_at, id"
    ))?;
    let rows = stmt.query_map([], run_row)?;
    rows.map(|raw| raw.map_err(StoreError::from)?.into_info())
        .collect()
}

/// How many runs are in each state, over every session.
pub(super) fn spent(
    conn: &Connection,
    provider: &str,
    since: i64,
) -> Result<Vec<Cost>, StoreError> {
    let rows = conn
        .prepare_cached(
            "SELECT r.currency, sum(r.cost) FROM runs r JOIN sessions s ON s.id = r.session_id
             WHERE s.provider = ?1 AND r.created_at >= ?2 AND r.cost IS NOT NULL AND r.currency IS NOT NULL
             GROUP BY r.currency ORDER BY r.currency",
        )?
        .query_map(params![provider, since], |row| {
            Ok(Cost {
                currency: row.get(0)?,
                amount: row.get(1)?,
            })
        })?
        .collect::<Result<Vec<_>, _>>()?;
    Ok(rows)
}

pub(super) fn run_counts(conn: &Connection) -> Result<Vec<(RunState, u64)>, StoreError> {
    let mut stmt = conn.prepare_cached("SELECT state, COUNT(*) FROM runs GROUP BY state")?;
    let rows = stmt.query_map([], |row| {
        Ok((row.get::<_, String>(0)?, row.get::<_, i64>(1)?))
    })?;
    let mut counts = Vec::new();
    for row in rows {
        let (state, count) = row?;
        let state = RunState::parse(&state).ok_or_else(|| corrupt("run state", &state))?;
        counts.push((state, count.max(0) as u64));
    }
    Ok(counts)
}

/// The runs of a window that ended after they started.
const ENDED: &str =
    "FROM runs WHERE created_at >= ?1 AND started_at IS NOT NULL AND ended_at IS NOT NULL";

/// The runs created at or after `since`, summed (`Counts::run_window`).
/// Each figure is one query over `runs_by_created` (migration 22).
pub(super) fn run_window(
    conn: &Connection,
    since: i64,
    bucket_ms: i64,
) -> Result<crate::core::journal::RunWindow, StoreError> {
    use crate::core::journal::{RunWindow, WindowBucket, nearest_rank};
    let count = |n: i64| u64::try_from(n).unwrap_or(0);
    let mut window = RunWindow::default();
    let mut stmt = conn.prepare_cached(
        "SELECT state, COUNT(*), COALESCE(sum(input_tokens), 0), COALESCE(sum(output_tokens), 0)
         FROM runs WHERE created_at >= ?1 GROUP BY state ORDER BY state",
    )?;
    let rows = stmt.query_map(params![since], |row| {
        Ok((
            row.get::<_, String>(0)?,
            row.get::<_, i64>(1)?,
            row.get::<_, i64>(2)?,
            row.get::<_, i64>(3)?,
        ))
    })?;
    for row in rows {
        let (state, runs, input, output) = row?;
        let state = RunState::parse(&state).ok_or_else(|| corrupt("run state", &state))?;
        window.by_state.push((state, count(runs)));
        window.input_tokens += count(input);
        window.output_tokens += count(output);
    }
    window.cost = conn
        .prepare_cached(
            "SELECT currency, sum(cost) FROM runs
             WHERE created_at >= ?1 AND cost IS NOT NULL AND currency IS NOT NULL
             GROUP BY currency ORDER BY currency",
        )?
        .query_map(params![since], |row| {
            Ok(Cost {
                currency: row.get(0)?,
                amount: row.get(1)?,
            })
        })?
        .collect::<Result<Vec<_>, _>>()?;
    let ended: i64 = conn
        .prepare_cached(&format!("SELECT COUNT(*) {ENDED}"))?
        .query_row(params![since], |row| row.get(0))?;
    window.ended = count(ended);
    let mut nth = conn.prepare_cached(&format!(
        "SELECT ended_at - started_at AS d {ENDED} ORDER BY d LIMIT 1 OFFSET ?2"
    ))?;
    for (percent, slot) in [(50, &mut window.p50_ms), (95, &mut window.p95_ms)] {
        if let Some(rank) = nearest_rank(window.ended, percent) {
            let rank = i64::try_from(rank).unwrap_or(i64::MAX);
            *slot = Some(nth.query_row(params![since, rank], |row| row.get(0))?);
        }
    }
    let mut stmt = conn.prepare_cached(
        "SELECT (created_at - ?1) / ?2 AS b, COUNT(*), sum(state = 'failed')
         FROM runs WHERE created_at >= ?1 GROUP BY b ORDER BY b",
    )?;
    let rows = stmt.query_map(params![since, bucket_ms.max(1)], |row| {
        Ok((
            row.get::<_, i64>(0)?,
            row.get::<_, i64>(1)?,
            row.get::<_, i64>(2)?,
        ))
    })?;
    for row in rows {
        let (index, runs, failed) = row?;
        window.buckets.push(WindowBucket {
            index: count(index),
            runs: count(runs),
            failed: count(failed),
        });
    }
    Ok(window)
}

pub(super) fn run(conn: &Connection, id: &RunId) -> Result<Option<RunInfo>, StoreError> {
    let raw = conn
        .prepare_cached(&format!("SELECT {RUN_COLUMNS} FROM runs WHERE id = ?1"))?
        .query_row(params![id.as_str()], run_row)
        .optional()?;
    raw.map(RawRun::into_info).transpose()
}

pub(super) fn tape(
    conn: &Connection,
    run: &RunId,
    from_seq: u64,
    limit: Option<usize>,
) -> Result<Vec<EventRecord>, StoreError> {
    let mut stmt = conn.prepare_cached(
        "SELECT session_id, seq, at, payload FROM tape WHERE run_id = ?1 AND seq >= ?2 ORDER BY seq LIMIT ?3",
    )?;
    let limit = limit.map_or(-1, |n| n as i64);
    let rows = stmt.query_map(params![run.as_str(), from_seq as i64, limit], |row| {
        Ok((
            row.get::<_, String>(0)?,
            row.get::<_, i64>(1)?,
            row.get::<_, i64>(2)?,
            row.get::<_, String>(3)?,
        ))
    })?;
    rows.map(|row| {
        let (session_id, seq, at, payload) = row?;
        let event: Event = serde_json::from_str(&payload)
            .map_err(|err| StoreError::Corrupt(format!("tape of run {run}, seq {seq}: {err}")))?;
        Ok(EventRecord {
            session_id: SessionId::from_string(session_id),
            run_id: run.clone(),
            seq: seq.max(0) as u64,
            at,
            event,
        })
    })
    .collect()
}

/// Each skill's latest `skill_activated` event, by name (through the
/// partial index of migration 20: only those events are read).
pub fn skills_last_used(
    conn: &Connection,
) -> Result<Vec<(String, crate::core::session::Millis)>, StoreError> {
    conn.prepare_cached(
        "SELECT json_extract(payload, '$.name') AS name, max(at) FROM tape
         WHERE kind = 'skill_activated' GROUP BY name ORDER BY name",
    )?
    .query_map([], |row| {
        Ok((
            row.get::<_, Option<String>>(0)?.unwrap_or_default(),
            row.get::<_, i64>(1)?,
        ))
    })?
    .map(|row| row.map_err(StoreError::from))
    .collect()
}

pub fn trusted_roots(conn: &Connection) -> Result<Vec<crate::core::hooks::Trust>, StoreError> {
    conn.prepare_cached("SELECT root, files FROM trusted_roots ORDER BY at, root")?
        .query_map([], |row| {
            Ok((row.get::<_, String>(0)?, row.get::<_, String>(1)?))
        })?
        .map(|row| {
            let (root, files) = row?;
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
