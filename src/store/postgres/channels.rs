//! The chat channels' rows on PostgreSQL: being written (the helper's part).

use tokio_postgres::Client;

use super::PgFailure;
use crate::core::channel::{
    ChannelWrite, ConversationKey, Draft, InboxEntry, IntentStatus, SendIntent,
};
use crate::core::ids::SessionId;
use crate::store::StoreError;

fn pending() -> StoreError {
    StoreError::Postgres("chat channels on PostgreSQL are not built yet".into())
}

pub(super) async fn apply(_client: &Client, _write: &ChannelWrite) -> Result<(), PgFailure> {
    Err(PgFailure::Store(pending()))
}
pub(super) async fn open_intents(
    _c: &Client,
    _channel: &str,
    _account: &str,
) -> Result<Vec<(SendIntent, Option<String>)>, StoreError> {
    Err(pending())
}
pub(super) async fn intent(_c: &Client, _id: &str) -> Result<Option<SendIntent>, StoreError> {
    Err(pending())
}
pub(super) async fn intents(
    _c: &Client,
    _status: Option<IntentStatus>,
    _limit: usize,
) -> Result<Vec<SendIntent>, StoreError> {
    Err(pending())
}
pub(super) async fn intent_counts(
    _c: &Client,
) -> Result<Vec<(String, IntentStatus, u64)>, StoreError> {
    Err(pending())
}
pub(super) async fn open_inbox(
    _c: &Client,
    _channel: &str,
    _account: &str,
) -> Result<Vec<InboxEntry>, StoreError> {
    Err(pending())
}
pub(super) async fn cursor(
    _c: &Client,
    _channel: &str,
    _account: &str,
    _name: &str,
) -> Result<Option<String>, StoreError> {
    Err(pending())
}
pub(super) async fn conversation(
    _c: &Client,
    _key: &ConversationKey,
) -> Result<Option<SessionId>, StoreError> {
    Err(pending())
}
pub(super) async fn is_paired(
    _c: &Client,
    _channel: &str,
    _account: &str,
    _sender: &str,
) -> Result<bool, StoreError> {
    Err(pending())
}
pub(super) async fn drafts(
    _c: &Client,
    _channel: &str,
    _account: &str,
) -> Result<Vec<Draft>, StoreError> {
    Err(pending())
}
