//! Writes of the record of what happened: a run's tape of events, and the
//! receipts of tool calls, chained by hash.

use rusqlite::{Connection, OptionalExtension as _, params};

use super::to_json;
use crate::core::event::EventRecord;
use crate::core::receipt::{GENESIS, ReceiptBody};
use crate::store::StoreError;

pub(super) fn append_event(conn: &Connection, record: &EventRecord) -> Result<(), StoreError> {
    conn.prepare_cached(
        "INSERT INTO tape (run_id, session_id, seq, at, kind, payload) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
    )?
    .execute(params![
        record.run_id.as_str(),
        record.session_id.as_str(),
        record.seq as i64,
        record.at,
        record.event.kind(),
        to_json(&record.event)?,
    ])?;
    Ok(())
}

/// Joins the receipt chain: numbered after the newest stored receipt and
/// linked to its hash.
pub(super) fn append_receipt(conn: &Connection, body: &ReceiptBody) -> Result<(), StoreError> {
    // Read inside the writer's transaction: no other writer can slip in between.
    let last: Option<(i64, String)> = conn
        .prepare_cached("SELECT seq, hash FROM receipts ORDER BY seq DESC LIMIT 1")?
        .query_row([], |row| Ok((row.get(0)?, row.get(1)?)))
        .optional()?;
    let (seq, prev) = match last {
        Some((seq, hash)) => (seq as u64 + 1, hash),
        None => (1, GENESIS.to_owned()),
    };
    let receipt = body.clone().chain(seq, &prev);
    conn.prepare_cached(
        "INSERT INTO receipts (seq, session_id, run_id, call_id, tool, input_hash, output_hash, verdict, is_error, at, prev_hash, hash, hooks, skills)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14)",
    )?
    .execute(params![
        receipt.seq as i64,
        body.session_id.as_str(),
        body.run_id.as_str(),
        body.call_id,
        body.tool,
        body.input_hash,
        body.output_hash,
        body.verdict.as_str(),
        body.is_error,
        body.at,
        receipt.prev_hash,
        receipt.hash,
        (!body.hooks.is_empty()).then(|| body.hooks.join("\n")),
        (!body.skills.is_empty()).then(|| body.skills.join("\n")),
    ])?;
    Ok(())
}
