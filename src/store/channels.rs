//! Rows of the channel tables: the inbox (dedupe), the outbox (durable send
//! intents), polling cursors, conversation → session mapping, paired senders
//! and live drafts. Writes run on the writer thread; reads on reader connections.

use rusqlite::{Connection, OptionalExtension, params};

use super::{StoreError, owner};
use crate::core::channel::{
    ChannelWrite, ConversationKey, Draft, InboxEntry, InboxState, IntentStatus, IntentUpdate,
    Pairing, SendIntent,
};
use crate::core::ids::{RunId, SessionId};
use crate::core::session::Millis;

/// A value stored as JSON.
pub(in crate::store) fn json<T: serde::Serialize>(value: &T) -> Result<String, StoreError> {
    serde_json::to_string(value).map_err(|err| StoreError::Write(err.to_string()))
}

/// A value stored as JSON, in a row either backend read; what does not
/// parse is corrupt.
pub(in crate::store) fn parse<T: serde::de::DeserializeOwned>(
    what: &str,
    text: &str,
) -> Result<T, StoreError> {
    serde_json::from_str(text).map_err(|err| StoreError::Corrupt(format!("{what}: {err}")))
}

/// A conversation's target as its key stores it (`channel_sessions.target`).
pub(in crate::store) fn target_key(key: &ConversationKey) -> Result<String, StoreError> {
    serde_json::to_string(&key.target)
        .map_err(|err| StoreError::Read(format!("conversation target: {err}")))
}

/// An inbox row (`message, state, run_id, received_at`) as either backend
/// read it.
pub(in crate::store) fn inbox_entry(
    message: &str,
    state: &str,
    run_id: Option<String>,
    received_at: Millis,
) -> Result<InboxEntry, StoreError> {
    Ok(InboxEntry {
        message: parse("inbound message", message)?,
        state: InboxState::parse(state)
            .ok_or_else(|| StoreError::Corrupt(format!("inbox state {state:?}")))?,
        run_id: run_id.map(RunId::from_string),
        received_at,
    })
}

/// A draft row (`run_id, target, platform_id, text`) as either backend read
/// it.
pub(in crate::store) fn draft(
    run_id: String,
    target: &str,
    platform_id: String,
    text: String,
) -> Result<Draft, StoreError> {
    Ok(Draft {
        run_id: RunId::from_string(run_id),
        target: parse("draft target", target)?,
        platform_id,
        text,
    })
}

/// A count of intents (`channel, status, count`) as either backend read it.
pub(in crate::store) fn intent_count(
    channel: String,
    status: &str,
    count: i64,
) -> Result<(String, IntentStatus, u64), StoreError> {
    let status = IntentStatus::parse(status)
        .ok_or_else(|| StoreError::Corrupt(format!("intent status {status:?}")))?;
    Ok((channel, status, u64::try_from(count).unwrap_or(0)))
}

pub(super) fn apply(conn: &Connection, write: &ChannelWrite) -> Result<(), StoreError> {
    match write {
        ChannelWrite::RecordInbound {
            message,
            cursor,
            at,
        } => {
            if let Some((name, value)) = cursor {
                put_cursor(conn, &message.channel, &message.account, name, value)?;
            }
            let inserted = conn
                .prepare_cached(
                    "INSERT OR IGNORE INTO channel_inbox
                        (channel, account, message_id, target, state, message, received_at, updated_at)
                     VALUES (?1, ?2, ?3, ?4, 'recorded', ?5, ?6, ?6)",
                )?
                .execute(params![
                    message.channel,
                    message.account,
                    message.id,
                    json(&message.target)?,
                    json(message)?,
                    at
                ])?;
            if inserted == 0 {
                return Err(StoreError::Conflict(format!(
                    "message {} of {}/{} was already received",
                    message.id, message.channel, message.account
                )));
            }
        }
        ChannelWrite::SetInboxState {
            channel,
            account,
            ids,
            state,
            run_id,
            at,
        } => {
            let mut stmt = conn.prepare_cached(
                "UPDATE channel_inbox SET state = ?4, run_id = COALESCE(?5, run_id), updated_at = ?6
                 WHERE channel = ?1 AND account = ?2 AND message_id = ?3",
            )?;
            for id in ids {
                stmt.execute(params![
                    channel,
                    account,
                    id,
                    state.as_str(),
                    run_id.as_ref().map(RunId::as_str),
                    at
                ])?;
            }
        }
        ChannelWrite::PutCursor {
            channel,
            account,
            name,
            value,
        } => put_cursor(conn, channel, account, name, value)?,
        ChannelWrite::InsertIntent(intent) => {
            conn.prepare_cached(
                "INSERT OR IGNORE INTO channel_outbox
                    (id, channel, account, status, next_attempt_at, owner, intent, created_at, updated_at)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
            )?
            .execute(params![
                intent.id,
                intent.channel,
                intent.account,
                intent.status.as_str(),
                intent.next_attempt_at,
                holder(intent.status),
                json(intent)?,
                intent.created_at,
                intent.updated_at
            ])?;
        }
        ChannelWrite::UpdateIntent(update) => update_intent(conn, update)?,
        ChannelWrite::MapConversation {
            key,
            session_id,
            at,
        } => {
            conn.prepare_cached(
                "INSERT OR REPLACE INTO channel_sessions (channel, account, target, session_id, created_at)
                 VALUES (?1, ?2, ?3, ?4, ?5)",
            )?
            .execute(params![
                key.channel,
                key.account,
                json(&key.target)?,
                session_id.as_str(),
                at
            ])?;
        }
        ChannelWrite::PairPeer {
            channel,
            account,
            sender,
            at,
        } => {
            conn.prepare_cached(
                "INSERT OR IGNORE INTO channel_peers (channel, account, sender, paired_at) VALUES (?1, ?2, ?3, ?4)",
            )?
            .execute(params![channel, account, sender, at])?;
        }
        ChannelWrite::UnpairPeer { channel, sender } => {
            let removed = conn
                .prepare_cached("DELETE FROM channel_peers WHERE channel = ?1 AND sender = ?2")?
                .execute(params![channel, sender])?;
            if removed == 0 {
                return Err(StoreError::Conflict(not_paired(channel, sender)));
            }
        }
        ChannelWrite::DeleteDraft { run_id } => {
            conn.prepare_cached("DELETE FROM channel_drafts WHERE run_id = ?1")?
                .execute(params![run_id.as_str()])?;
        }
    }
    Ok(())
}

fn put_cursor(
    conn: &Connection,
    channel: &str,
    account: &str,
    name: &str,
    value: &str,
) -> Result<(), StoreError> {
    conn.prepare_cached(
        "INSERT OR REPLACE INTO channel_cursors (channel, account, name, value) VALUES (?1, ?2, ?3, ?4)",
    )?
    .execute(params![channel, account, name, value])?;
    Ok(())
}

fn update_intent(conn: &Connection, update: &IntentUpdate) -> Result<(), StoreError> {
    let stored: Option<String> = conn
        .prepare_cached("SELECT intent FROM channel_outbox WHERE id = ?1")?
        .query_row(params![update.id], |row| row.get(0))
        .optional()?;
    let Some(stored) = stored else {
        return Err(StoreError::Conflict(format!(
            "no send intent {}",
            update.id
        )));
    };
    let (intent, owner) = updated(&stored, update)?;
    conn.prepare_cached(
        "UPDATE channel_outbox SET status = ?2, next_attempt_at = ?3, owner = ?4, intent = ?5, updated_at = ?6
         WHERE id = ?1",
    )?
    .execute(params![
        update.id,
        intent.status.as_str(),
        intent.next_attempt_at,
        owner,
        json(&intent)?,
        update.at
    ])?;
    Ok(())
}

/// The stored intent (its JSON) as `update` leaves it, refused as a
/// conflict (the reason given) unless it is in one of the states the
/// update moves from; and who holds it then, as either backend stores it:
/// this process when it is `sending` (claimed, or being sent), no one
/// otherwise.
pub(in crate::store) fn updated(
    stored: &str,
    update: &IntentUpdate,
) -> Result<(SendIntent, Option<&'static str>), StoreError> {
    let mut intent: SendIntent = parse("send intent", stored)?;
    update.apply(&mut intent).map_err(StoreError::Conflict)?;
    Ok((intent, holder(update.status)))
}

/// Who holds an intent recorded or moved to `status`: this process while it
/// is `sending` (a live draft's first send is recorded so), no one
/// otherwise.
pub(in crate::store) fn holder(status: IntentStatus) -> Option<&'static str> {
    (status == IntentStatus::Sending).then(owner::this_process)
}

/// Open intents (held, pending, sending, committing) of one channel account, oldest first.
pub(super) fn open_intents(
    conn: &Connection,
    channel: &str,
    account: &str,
) -> Result<Vec<(SendIntent, Option<String>)>, StoreError> {
    let mut stmt = conn.prepare_cached(
        "SELECT intent, owner FROM channel_outbox
         WHERE channel = ?1 AND account = ?2 AND status IN ('held', 'pending', 'sending', 'committing')
         ORDER BY created_at, id",
    )?;
    let rows = stmt.query_map(params![channel, account], |row| {
        Ok((row.get::<_, String>(0)?, row.get::<_, Option<String>>(1)?))
    })?;
    let mut out = Vec::new();
    for row in rows {
        let (intent, owner) = row?;
        out.push((parse("send intent", &intent)?, owner));
    }
    Ok(out)
}

pub(super) fn intent(conn: &Connection, id: &str) -> Result<Option<SendIntent>, StoreError> {
    let stored: Option<String> = conn
        .prepare_cached("SELECT intent FROM channel_outbox WHERE id = ?1")?
        .query_row(params![id], |row| row.get(0))
        .optional()?;
    stored.map(|s| parse("send intent", &s)).transpose()
}

/// Intents by channel, account and status, newest first, at most `limit`.
pub(super) fn intents(
    conn: &Connection,
    channel: Option<&str>,
    status: Option<IntentStatus>,
    limit: usize,
) -> Result<Vec<SendIntent>, StoreError> {
    let mut stmt = conn.prepare_cached(
        "SELECT intent FROM channel_outbox WHERE (?1 IS NULL OR status = ?1)
         AND (?3 IS NULL OR channel = ?3)
         ORDER BY updated_at DESC, id LIMIT ?2",
    )?;
    let rows = stmt.query_map(
        params![status.map(|s| s.as_str()), limit as i64, channel],
        |row| row.get::<_, String>(0),
    )?;
    let mut out = Vec::new();
    for row in rows {
        out.push(parse("send intent", &row?)?);
    }
    Ok(out)
}

/// How many intents are in each status, per channel.
pub(super) fn intent_counts(
    conn: &Connection,
) -> Result<Vec<(String, IntentStatus, u64)>, StoreError> {
    let mut stmt = conn.prepare_cached(
        "SELECT channel, status, COUNT(*) FROM channel_outbox GROUP BY channel, status",
    )?;
    let rows = stmt.query_map([], |row| {
        Ok((
            row.get::<_, String>(0)?,
            row.get::<_, String>(1)?,
            row.get::<_, i64>(2)?,
        ))
    })?;
    let mut out = Vec::new();
    for row in rows {
        let (channel, status, count) = row?;
        out.push(intent_count(channel, &status, count)?);
    }
    Ok(out)
}

/// Inbound messages not yet done (recorded or dispatched), oldest first.
pub(super) fn open_inbox(
    conn: &Connection,
    channel: &str,
    account: &str,
) -> Result<Vec<InboxEntry>, StoreError> {
    let mut stmt = conn.prepare_cached(
        "SELECT message, state, run_id, received_at FROM channel_inbox
         WHERE channel = ?1 AND account = ?2 AND state IN ('recorded', 'dispatched')
         ORDER BY received_at, message_id",
    )?;
    let rows = stmt.query_map(params![channel, account], |row| {
        Ok((
            row.get::<_, String>(0)?,
            row.get::<_, String>(1)?,
            row.get::<_, Option<String>>(2)?,
            row.get::<_, i64>(3)?,
        ))
    })?;
    let mut out = Vec::new();
    for row in rows {
        let (message, state, run_id, received_at) = row?;
        out.push(inbox_entry(&message, &state, run_id, received_at)?);
    }
    Ok(out)
}

pub(super) fn cursor(
    conn: &Connection,
    channel: &str,
    account: &str,
    name: &str,
) -> Result<Option<String>, StoreError> {
    Ok(conn
        .prepare_cached(
            "SELECT value FROM channel_cursors WHERE channel = ?1 AND account = ?2 AND name = ?3",
        )?
        .query_row(params![channel, account, name], |row| row.get(0))
        .optional()?)
}

pub(super) fn cursors(
    conn: &Connection,
    name: &str,
) -> Result<Vec<(String, String, String)>, StoreError> {
    let mut statement = conn.prepare_cached(
        "SELECT channel, account, value FROM channel_cursors WHERE name = ?1 ORDER BY channel, account",
    )?;
    let rows = statement.query_map(params![name], |row| {
        Ok((row.get(0)?, row.get(1)?, row.get(2)?))
    })?;
    Ok(rows.collect::<Result<_, _>>()?)
}

pub(super) fn conversation(
    conn: &Connection,
    key: &ConversationKey,
) -> Result<Option<SessionId>, StoreError> {
    let id: Option<String> = conn
        .prepare_cached(
            "SELECT session_id FROM channel_sessions WHERE channel = ?1 AND account = ?2 AND target = ?3",
        )?
        .query_row(
            params![key.channel, key.account, target_key(key)?],
            |row| row.get(0),
        )
        .optional()?;
    Ok(id.map(SessionId::from_string))
}

pub(super) fn is_paired(
    conn: &Connection,
    channel: &str,
    account: &str,
    sender: &str,
) -> Result<bool, StoreError> {
    Ok(conn
        .prepare_cached(
            "SELECT 1 FROM channel_peers WHERE channel = ?1 AND account = ?2 AND sender = ?3",
        )?
        .query_row(params![channel, account, sender], |_| Ok(()))
        .optional()?
        .is_some())
}

/// What revoking a sender not paired fails with.
pub(in crate::store) fn not_paired(channel: &str, sender: &str) -> String {
    format!(
        "{} is not paired on channel {}",
        crate::core::quote::quote(sender),
        crate::core::quote::quote(channel)
    )
}

pub(super) fn pairs(conn: &Connection, channel: Option<&str>) -> Result<Vec<Pairing>, StoreError> {
    let mut stmt = conn.prepare_cached(
        "SELECT channel, account, sender, paired_at FROM channel_peers
         WHERE ?1 IS NULL OR channel = ?1
         ORDER BY channel, account, paired_at, sender",
    )?;
    let rows = stmt.query_map(params![channel], |row| {
        Ok(Pairing {
            channel: row.get(0)?,
            account: row.get(1)?,
            sender: row.get(2)?,
            paired_at: row.get(3)?,
        })
    })?;
    Ok(rows.collect::<Result<_, _>>()?)
}

pub(super) fn drafts(
    conn: &Connection,
    channel: &str,
    account: &str,
) -> Result<Vec<Draft>, StoreError> {
    let mut stmt = conn.prepare_cached(
        "SELECT run_id, target, platform_id, text FROM channel_drafts WHERE channel = ?1 AND account = ?2",
    )?;
    let rows = stmt.query_map(params![channel, account], |row| {
        Ok((
            row.get::<_, String>(0)?,
            row.get::<_, String>(1)?,
            row.get::<_, String>(2)?,
            row.get::<_, String>(3)?,
        ))
    })?;
    let mut out = Vec::new();
    for row in rows {
        let (run_id, target, platform_id, text) = row?;
        out.push(draft(run_id, &target, platform_id, text)?);
    }
    Ok(out)
}
