//! Writes of sessions: a session made, its settings and title changed, it
//! closed or deleted, and its conversation's messages.

use rusqlite::{Connection, params};

use super::to_json;
use crate::core::ids::{RunId, SessionId};
use crate::core::session::{Message, Millis, Mode, Session};
use crate::store::StoreError;

pub(super) fn insert(conn: &Connection, s: &Session) -> Result<(), StoreError> {
    conn.prepare_cached(
        "INSERT INTO sessions (id, workspace, origin, provider, model, mode, title, mcp_servers, created_at, updated_at, closed, conversation, system_prompt, instructions, parent_session, parent_run, parent_call, thought_level)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18)",
    )?
    .execute(params![
        s.id.as_str(),
        s.workspace.to_string_lossy(),
        s.origin.as_str(),
        s.provider,
        s.model,
        s.mode.as_str(),
        s.title,
        to_json(&s.mcp_servers)?,
        s.created_at,
        s.updated_at,
        s.closed,
        s.conversation,
        s.prompt.system_prompt,
        s.prompt.instructions,
        s.parent.as_ref().map(|p| p.session.as_str()),
        s.parent.as_ref().map(|p| p.run.as_str()),
        s.parent.as_ref().map(|p| p.call.as_str()),
        s.thought_level,
    ])?;
    Ok(())
}

pub(super) fn update_settings(
    conn: &Connection,
    id: &SessionId,
    provider: &str,
    model: &str,
    thought_level: Option<&str>,
    mode: Mode,
    at: Millis,
) -> Result<(), StoreError> {
    conn.prepare_cached(
        "UPDATE sessions SET provider = ?2, model = ?3, mode = ?4, updated_at = ?5, thought_level = ?6 WHERE id = ?1",
    )?
    .execute(params![id.as_str(), provider, model, mode.as_str(), at, thought_level])?;
    Ok(())
}

pub(super) fn set_title(conn: &Connection, id: &SessionId, title: &str) -> Result<(), StoreError> {
    conn.prepare_cached("UPDATE sessions SET title = ?2 WHERE id = ?1")?
        .execute(params![id.as_str(), title])?;
    Ok(())
}

pub(super) fn set_closed(
    conn: &Connection,
    id: &SessionId,
    closed: bool,
    at: Millis,
) -> Result<(), StoreError> {
    conn.prepare_cached("UPDATE sessions SET closed = ?2, updated_at = ?3 WHERE id = ?1")?
        .execute(params![id.as_str(), closed, at])?;
    Ok(())
}

/// The session and its subagents' sessions: tombstones first, so the
/// tape's trigger lets their tapes go.
pub(super) fn delete(conn: &Connection, id: &SessionId, at: Millis) -> Result<(), StoreError> {
    conn.prepare_cached(
        "UPDATE sessions SET deleted_at = ?2, closed = 1, title = NULL, mcp_servers = '[]',
                system_prompt = NULL, instructions = NULL, updated_at = ?2
         WHERE (id = ?1 OR parent_session = ?1) AND deleted_at IS NULL",
    )?
    .execute(params![id.as_str(), at])?;
    for table in ["messages", "grants", "tape", "channel_sessions"] {
        conn.prepare_cached(&format!(
            "DELETE FROM {table} WHERE session_id IN
               (SELECT id FROM sessions WHERE (id = ?1 OR parent_session = ?1) AND deleted_at IS NOT NULL)"
        ))?
        .execute(params![id.as_str()])?;
    }
    Ok(())
}

/// Appends a message to the session's conversation, numbered after its last.
pub(super) fn append_message(
    conn: &Connection,
    session_id: &str,
    run_id: Option<&RunId>,
    message: &Message,
    at: Millis,
) -> Result<(), StoreError> {
    let role = match message {
        Message::User { .. } => "user",
        Message::Assistant { .. } => "assistant",
        Message::Tool { .. } => "tool",
        Message::Summary { .. } => "summary",
        Message::Note { .. } => "note",
    };
    conn.prepare_cached(
        "INSERT INTO messages (session_id, seq, run_id, role, body, at)
         VALUES (?1, (SELECT COALESCE(MAX(seq), 0) + 1 FROM messages WHERE session_id = ?1), ?2, ?3, ?4, ?5)",
    )?
    .execute(params![
        session_id,
        run_id.map(RunId::as_str),
        role,
        to_json(message)?,
        at
    ])?;
    conn.prepare_cached("UPDATE sessions SET updated_at = ?2 WHERE id = ?1")?
        .execute(params![session_id, at])?;
    Ok(())
}
