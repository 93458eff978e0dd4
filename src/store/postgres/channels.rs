//! The chat channels' rows on PostgreSQL: the inbox (deduplicated by its
//! primary key), the outbox (durable send intents), polling cursors,
//! conversation → session mappings, paired senders and live drafts. The
//! same effects as the SQLite store's (`store::channels`, whose row
//! conversions these share). An intent is changed with its row locked;
//! claiming it for a send (moving it to `sending` from another state)
//! skips a row another instance holds (`FOR UPDATE SKIP LOCKED`) and is
//! refused as a conflict rather than waited for, while the holder's own
//! progress on a send it claimed waits for the lock like any other change.

use super::conn::Conn;

use super::PgFailure;
use crate::core::channel::{
    ChannelWrite, ConversationKey, Draft, InboxEntry, IntentStatus, IntentUpdate, Pairing,
    SendIntent,
};
use crate::core::ids::{RunId, SessionId};
use crate::store::channels::{
    draft, holder, inbox_entry, intent_count, parse, target_key, updated,
};
use crate::store::{self, StoreError};

fn db(err: tokio_postgres::Error) -> StoreError {
    super::pg_error(&err)
}

fn json<T: serde::Serialize>(value: &T) -> Result<String, PgFailure> {
    store::channels::json(value).map_err(PgFailure::Store)
}

fn conflict(message: String) -> PgFailure {
    PgFailure::Store(StoreError::Conflict(message))
}

pub(super) async fn apply(client: &Conn<'_>, write: &ChannelWrite) -> Result<(), PgFailure> {
    match write {
        ChannelWrite::RecordInbound {
            message,
            cursor,
            at,
        } => {
            // The cursor moves on even past a message seen before.
            if let Some((name, value)) = cursor {
                put_cursor(client, &message.channel, &message.account, name, value).await?;
            }
            let inserted = client
                .execute(
                    "INSERT INTO channel_inbox
                        (channel, account, message_id, target, state, message, received_at, updated_at)
                     VALUES ($1, $2, $3, $4, 'recorded', $5, $6, $6)
                     ON CONFLICT (channel, account, message_id) DO NOTHING",
                    &[
                        &message.channel,
                        &message.account,
                        &message.id,
                        &json(&message.target)?,
                        &json(message)?,
                        at,
                    ],
                )
                .await?;
            if inserted == 0 {
                return Err(PgFailure::Kept(StoreError::Conflict(format!(
                    "message {} of {}/{} was already received",
                    message.id, message.channel, message.account
                ))));
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
            client
                .execute(
                    "UPDATE channel_inbox SET state = $4, run_id = COALESCE($5, run_id), updated_at = $6
                     WHERE channel = $1 AND account = $2 AND message_id = ANY($3)",
                    &[
                        channel,
                        account,
                        ids,
                        &state.as_str(),
                        &run_id.as_ref().map(RunId::as_str),
                        at,
                    ],
                )
                .await?;
        }
        ChannelWrite::PutCursor {
            channel,
            account,
            name,
            value,
        } => put_cursor(client, channel, account, name, value).await?,
        ChannelWrite::InsertIntent(intent) => {
            let owner = holder(intent.status);
            client
                .execute(
                    "INSERT INTO channel_outbox
                        (id, channel, account, status, next_attempt_at, owner, intent, created_at, updated_at)
                     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
                     ON CONFLICT (id) DO NOTHING",
                    &[
                        &intent.id,
                        &intent.channel,
                        &intent.account,
                        &intent.status.as_str(),
                        &intent.next_attempt_at,
                        &owner,
                        &json(intent)?,
                        &intent.created_at,
                        &intent.updated_at,
                    ],
                )
                .await?;
        }
        ChannelWrite::UpdateIntent(update) => update_intent(client, update).await?,
        ChannelWrite::MapConversation {
            key,
            session_id,
            at,
        } => {
            client
                .execute(
                    "INSERT INTO channel_sessions (channel, account, target, session_id, created_at)
                     VALUES ($1, $2, $3, $4, $5)
                     ON CONFLICT (channel, account, target) DO UPDATE
                     SET session_id = excluded.session_id, created_at = excluded.created_at",
                    &[
                        &key.channel,
                        &key.account,
                        &json(&key.target)?,
                        &session_id.as_str(),
                        at,
                    ],
                )
                .await?;
        }
        ChannelWrite::PairPeer {
            channel,
            account,
            sender,
            at,
        } => {
            client
                .execute(
                    "INSERT INTO channel_peers (channel, account, sender, paired_at) VALUES ($1, $2, $3, $4)
                     ON CONFLICT DO NOTHING",
                    &[channel, account, sender, at],
                )
                .await?;
        }
        ChannelWrite::UnpairPeer { channel, sender } => {
            let removed = client
                .execute(
                    "DELETE FROM channel_peers WHERE channel = $1 AND sender = $2",
                    &[channel, sender],
                )
                .await?;
            if removed == 0 {
                return Err(conflict(store::channels::not_paired(channel, sender)));
            }
        }
        ChannelWrite::DeleteDraft { run_id } => {
            client
                .execute(
                    "DELETE FROM channel_drafts WHERE run_id = $1",
                    &[&run_id.as_str()],
                )
                .await?;
        }
    }
    Ok(())
}

async fn put_cursor(
    client: &Conn<'_>,
    channel: &str,
    account: &str,
    name: &str,
    value: &str,
) -> Result<(), PgFailure> {
    client
        .execute(
            "INSERT INTO channel_cursors (channel, account, name, value) VALUES ($1, $2, $3, $4)
             ON CONFLICT (channel, account, name) DO UPDATE SET value = excluded.value",
            &[&channel, &account, &name, &value],
        )
        .await?;
    Ok(())
}

/// Whether `update` claims an intent for a send: moves it to `sending`
/// from another state (not the progress of a send already claimed).
fn claims(update: &IntentUpdate) -> bool {
    update.status == IntentStatus::Sending
        && update
            .from
            .iter()
            .any(|from| *from != IntentStatus::Sending)
}

async fn update_intent(client: &Conn<'_>, update: &IntentUpdate) -> Result<(), PgFailure> {
    let sql = if claims(update) {
        "SELECT intent FROM channel_outbox WHERE id = $1 FOR UPDATE SKIP LOCKED"
    } else {
        "SELECT intent FROM channel_outbox WHERE id = $1 FOR UPDATE"
    };
    let Some(stored) = client.query_opt(sql, &[&update.id]).await? else {
        let exists = client
            .query_opt("SELECT 1 FROM channel_outbox WHERE id = $1", &[&update.id])
            .await?
            .is_some();
        return Err(conflict(if exists {
            format!(
                "send intent {} is being claimed by another instance",
                update.id
            )
        } else {
            format!("no send intent {}", update.id)
        }));
    };
    let stored: String = stored.try_get(0)?;
    let (intent, owner) = updated(&stored, update).map_err(PgFailure::Store)?;
    client
        .execute(
            "UPDATE channel_outbox SET status = $2, next_attempt_at = $3, owner = $4, intent = $5, updated_at = $6
             WHERE id = $1",
            &[
                &update.id,
                &intent.status.as_str(),
                &intent.next_attempt_at,
                &owner,
                &json(&intent)?,
                &update.at,
            ],
        )
        .await?;
    Ok(())
}

/// Open intents (held, pending, sending, committing) of one channel
/// account, oldest first, each with the process that claimed it.
pub(super) async fn open_intents(
    client: &Conn<'_>,
    channel: &str,
    account: &str,
) -> Result<Vec<(SendIntent, Option<String>)>, StoreError> {
    let rows = client
        .query(
            "SELECT intent, owner FROM channel_outbox
             WHERE channel = $1 AND account = $2 AND status IN ('held', 'pending', 'sending', 'committing')
             ORDER BY created_at, id",
            &[&channel, &account],
        )
        .await
        .map_err(db)?;
    rows.iter()
        .map(|row| {
            let intent: String = row.try_get(0).map_err(db)?;
            let owner: Option<String> = row.try_get(1).map_err(db)?;
            Ok((parse("send intent", &intent)?, owner))
        })
        .collect()
}

pub(super) async fn intent(client: &Conn<'_>, id: &str) -> Result<Option<SendIntent>, StoreError> {
    let row = client
        .query_opt("SELECT intent FROM channel_outbox WHERE id = $1", &[&id])
        .await
        .map_err(db)?;
    row.map(|row| parse("send intent", &row.try_get::<_, String>(0).map_err(db)?))
        .transpose()
}

/// Intents, optionally of one status, most recently changed first.
pub(super) async fn intents(
    client: &Conn<'_>,
    channel: Option<&str>,
    status: Option<IntentStatus>,
    limit: usize,
) -> Result<Vec<SendIntent>, StoreError> {
    let rows = client
        .query(
            "SELECT intent FROM channel_outbox WHERE ($1::TEXT IS NULL OR status = $1)
             AND ($3::TEXT IS NULL OR channel = $3)
             ORDER BY updated_at DESC, id LIMIT $2",
            &[
                &status.map(|s| s.as_str()),
                &i64::try_from(limit).unwrap_or(i64::MAX),
                &channel,
            ],
        )
        .await
        .map_err(db)?;
    rows.iter()
        .map(|row| parse("send intent", &row.try_get::<_, String>(0).map_err(db)?))
        .collect()
}

/// How many intents are in each status, per channel.
pub(super) async fn intent_counts(
    client: &Conn<'_>,
) -> Result<Vec<(String, IntentStatus, u64)>, StoreError> {
    let rows = client
        .query(
            "SELECT channel, status, COUNT(*) FROM channel_outbox GROUP BY channel, status ORDER BY channel, status",
            &[],
        )
        .await
        .map_err(db)?;
    rows.iter()
        .map(|row| {
            intent_count(
                row.try_get(0).map_err(db)?,
                row.try_get(1).map_err(db)?,
                row.try_get(2).map_err(db)?,
            )
        })
        .collect()
}

/// Inbound messages not yet done (recorded or dispatched), oldest first.
pub(super) async fn open_inbox(
    client: &Conn<'_>,
    channel: &str,
    account: &str,
) -> Result<Vec<InboxEntry>, StoreError> {
    let rows = client
        .query(
            "SELECT message, state, run_id, received_at FROM channel_inbox
             WHERE channel = $1 AND account = $2 AND state IN ('recorded', 'dispatched')
             ORDER BY received_at, message_id",
            &[&channel, &account],
        )
        .await
        .map_err(db)?;
    rows.iter()
        .map(|row| {
            inbox_entry(
                row.try_get(0).map_err(db)?,
                row.try_get(1).map_err(db)?,
                row.try_get(2).map_err(db)?,
                row.try_get(3).map_err(db)?,
            )
        })
        .collect()
}

pub(super) async fn cursor(
    client: &Conn<'_>,
    channel: &str,
    account: &str,
    name: &str,
) -> Result<Option<String>, StoreError> {
    client
        .query_opt(
            "SELECT value FROM channel_cursors WHERE channel = $1 AND account = $2 AND name = $3",
            &[&channel, &account, &name],
        )
        .await
        .map_err(db)?
        .map(|row| row.try_get(0).map_err(db))
        .transpose()
}

pub(super) async fn cursors(
    client: &Conn<'_>,
    name: &str,
) -> Result<Vec<(String, String, String)>, StoreError> {
    client
        .query(
            "SELECT channel, account, value FROM channel_cursors WHERE name = $1 ORDER BY channel, account",
            &[&name],
        )
        .await
        .map_err(db)?
        .iter()
        .map(|row| Ok((row.try_get(0).map_err(db)?, row.try_get(1).map_err(db)?, row.try_get(2).map_err(db)?)))
        .collect()
}

pub(super) async fn conversation(
    client: &Conn<'_>,
    key: &ConversationKey,
) -> Result<Option<SessionId>, StoreError> {
    let target = target_key(key)?;
    client
        .query_opt(
            "SELECT session_id FROM channel_sessions WHERE channel = $1 AND account = $2 AND target = $3",
            &[&key.channel, &key.account, &target],
        )
        .await
        .map_err(db)?
        .map(|row| row.try_get::<_, String>(0).map(SessionId::from_string).map_err(db))
        .transpose()
}

pub(super) async fn is_paired(
    client: &Conn<'_>,
    channel: &str,
    account: &str,
    sender: &str,
) -> Result<bool, StoreError> {
    Ok(client
        .query_opt(
            "SELECT 1 FROM channel_peers WHERE channel = $1 AND account = $2 AND sender = $3",
            &[&channel, &account, &sender],
        )
        .await
        .map_err(db)?
        .is_some())
}

pub(super) async fn pairs(
    client: &Conn<'_>,
    channel: Option<&str>,
) -> Result<Vec<Pairing>, StoreError> {
    let rows = client
        .query(
            "SELECT channel, account, sender, paired_at FROM channel_peers
             WHERE $1::TEXT IS NULL OR channel = $1
             ORDER BY channel, account, paired_at, sender",
            &[&channel],
        )
        .await
        .map_err(db)?;
    rows.iter()
        .map(|row| {
            Ok(Pairing {
                channel: row.try_get(0).map_err(db)?,
                account: row.try_get(1).map_err(db)?,
                sender: row.try_get(2).map_err(db)?,
                paired_at: row.try_get(3).map_err(db)?,
            })
        })
        .collect()
}

pub(super) async fn drafts(
    client: &Conn<'_>,
    channel: &str,
    account: &str,
) -> Result<Vec<Draft>, StoreError> {
    let rows = client
        .query(
            "SELECT run_id, target, platform_id, text FROM channel_drafts WHERE channel = $1 AND account = $2",
            &[&channel, &account],
        )
        .await
        .map_err(db)?;
    rows.iter()
        .map(|row| {
            draft(
                row.try_get(0).map_err(db)?,
                row.try_get(1).map_err(db)?,
                row.try_get(2).map_err(db)?,
                row.try_get(3).map_err(db)?,
            )
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::Duration;

    use crate::core::channel::contract::{self, Backend};
    use crate::core::channel::{ChannelWrite, IntentStatus, IntentUpdate};
    use crate::core::journal::{ChannelJournal as _, Write};
    use crate::store::StoreError;
    use crate::store::postgres::Postgres;

    async fn fresh() -> Backend {
        let url = crate::testing::postgres::shared().fresh_database();
        let (store, _) = Postgres::open(&url).await.unwrap();
        Backend {
            journal: Arc::new(store.clone()),
            counts: Arc::new(store),
            dir: None,
        }
    }

    crate::channel_contract!(fresh().await);

    fn update(id: &str, from: IntentStatus, status: IntentStatus, at: i64) -> Write {
        Write::Channel(ChannelWrite::UpdateIntent(IntentUpdate::new(
            id,
            &[from],
            status,
            at,
        )))
    }

    /// While another instance's transaction holds an intent's row, a claim
    /// of it is refused at once as a conflict (`SKIP LOCKED`), not waited
    /// for; the progress of a send this instance claimed waits for the lock
    /// and then lands. Released, the claim goes through.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_claim_skips_an_intent_another_instance_holds_and_progress_waits() {
        use IntentStatus::{Pending, Sending};
        let url = crate::testing::postgres::shared().fresh_database();
        let (store, _) = Postgres::open(&url).await.unwrap();
        for (id, status) in [("reply:a", Pending), ("reply:b", Sending)] {
            let intent = contract::intent(id, "telegram", status, 1);
            store.commit(contract::insert(&intent)).await.unwrap();
        }
        let (other, connection) = tokio_postgres::connect(&url, tokio_postgres::NoTls)
            .await
            .unwrap();
        tokio::spawn(connection);
        other
            .batch_execute("BEGIN; SELECT 1 FROM channel_outbox FOR UPDATE")
            .await
            .unwrap();
        let claim = tokio::time::timeout(
            Duration::from_secs(10),
            store.commit(update("reply:a", Pending, Sending, 2)),
        )
        .await
        .expect("a claim does not wait for a row held");
        assert!(matches!(claim, Err(StoreError::Conflict(_))), "{claim:?}");
        let progress = tokio::spawn({
            let store = store.clone();
            async move { store.commit(update("reply:b", Sending, Sending, 3)).await }
        });
        tokio::time::sleep(Duration::from_millis(300)).await;
        assert!(!progress.is_finished(), "progress waits for the lock");
        other.batch_execute("COMMIT").await.unwrap();
        progress.await.unwrap().unwrap();
        assert_eq!(
            store.intent("reply:b").await.unwrap().unwrap().updated_at,
            3
        );
        let pending = store.intent("reply:a").await.unwrap().unwrap();
        assert_eq!((pending.status, pending.updated_at), (Pending, 1));
        store
            .commit(update("reply:a", Pending, Sending, 4))
            .await
            .unwrap();
        let open = store.open_intents("telegram", "bot").await.unwrap();
        assert_eq!(open.len(), 2);
        assert!(
            open.iter().all(|(intent, owner)| intent.status == Sending
                && owner.as_deref() == Some(crate::store::process_tag())),
            "{open:?}"
        );
        store.shutdown();
    }
}
