//! Chat channel accounts: their health, what their platforms can do, and
//! their outboxes (`GET /v1/channels`, `pincer channels status --json`).

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::Serialize;

use crate::core::channel::AccountStatus;

/// A chat channel account: its health and its outbox.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
#[schemars(rename = "Channel", deny_unknown_fields)]
pub struct ChannelView {
    /// The channel's name (`[channels.NAME]`)
    pub name: String,
    pub account: String,
    /// The platform (`telegram`, `irc`); absent where only the store was read
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// Whether this process serves the account now (holds its lease);
    /// absent where only the store was read
    #[serde(skip_serializing_if = "Option::is_none")]
    pub serving: Option<bool>,
    /// What the adapter declares it can do; absent where only the store
    /// was read (no adapter at hand)
    #[serde(skip_serializing_if = "Option::is_none")]
    pub capabilities: Option<CapabilitiesView>,
    #[serde(flatten)]
    pub status: AccountStatus,
    /// Send intents by status
    pub outbox: BTreeMap<String, u64>,
}

/// The channels this process runs.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct ChannelList {
    pub channels: Vec<ChannelView>,
}

/// What the channel's platform can do, as its adapter declares it
/// (docs/channels.md, "Capabilities"); only from the process running the
/// adapter (`channels::Capabilities` builds this)
#[derive(Debug, Clone, PartialEq, Eq, Serialize, JsonSchema)]
#[schemars(rename = "ChannelCapabilities", deny_unknown_fields)]
pub struct CapabilitiesView {
    /// Longest message text, in `length_unit`
    #[schemars(range(min = 1))]
    pub max_len: usize,
    /// What `max_len` counts: Unicode characters, UTF-16 code units or
    /// UTF-8 bytes
    pub length_unit: LengthUnit,
    /// The markup of rendered replies (`html`); null: plain text
    pub markup: Option<&'static str>,
    /// Messages can be edited (live drafts, prompts updated)
    pub edit: bool,
    /// Messages can be deleted (a stale live draft)
    pub delete: bool,
    /// Inline buttons answer approvals and questions; otherwise a reply of
    /// y, a or n
    pub buttons: bool,
    /// A reaction to an approval prompt answers it
    pub reactions: bool,
    /// Threads within a chat (topics, mail threads): a reply goes to its
    /// message's thread, and CHAT/THREAD names one
    pub threads: bool,
    /// Files can be sent: a run's changes as a diff, a long reply whole
    pub files: bool,
    /// Least time between two edits of one message
    pub edit_interval_ms: u64,
    /// Without live drafts, a run still working this long says so once;
    /// null: never
    pub working_after_ms: Option<u64>,
    pub idempotent: IdempotenceView,
}

/// What a message's length is counted in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum LengthUnit {
    Chars,
    Utf16,
    Bytes,
}

/// Per operation: whether a call whose outcome is unknown (a timeout, a
/// crash mid-call) may be made again without the chat showing it twice;
/// false for an operation the platform lacks. A send that may not is left
/// unknown_after_send
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct IdempotenceView {
    pub send: bool,
    pub edit: bool,
    pub delete: bool,
}

/// One channel's outbox, most recently changed first (`GET
/// /v1/channels/{name}/outbox`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, JsonSchema)]
#[schemars(rename = "ChannelOutbox", deny_unknown_fields)]
pub struct ChannelOutbox {
    /// The channel's name (`[channels.NAME]`)
    pub channel: String,
    pub intents: Vec<OutboxIntent>,
}

/// A message in a channel's outbox (a send intent, docs/channels.md)
#[derive(Debug, Clone, PartialEq, Eq, Serialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct OutboxIntent {
    /// The intent's id (`reply:RUN`, `message:KEY`, …): what
    /// `POST /v1/channels/{name}/outbox/{intent_id}` names
    pub id: String,
    pub account: String,
    /// reply, approval, notice, message or draft
    pub kind: &'static str,
    /// held, pending, sending, committing, sent, failed,
    /// unknown_after_send, cancelled, expired or withheld
    pub status: &'static str,
    /// The chat: CHAT or CHAT/THREAD in the platform's ids
    pub to: String,
    /// The start of the text, in one line (at most 200 characters)
    pub excerpt: String,
    /// Parts the text was cut into
    pub parts: usize,
    /// Parts the platform confirmed, with its message ids
    pub delivered: Vec<String>,
    /// Attempts begun
    pub attempt: u32,
    /// Why the last attempt failed, or why the outcome is unknown
    pub failure: Option<OutboxFailure>,
    /// When it was decided (ms since the epoch)
    pub created_at: i64,
    /// When its status last changed (ms since the epoch)
    pub updated_at: i64,
}

/// Why an intent's last attempt failed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct OutboxFailure {
    /// transient, rate_limit, auth, permission, not_found, invalid_payload,
    /// conflict or unknown
    pub kind: &'static str,
    pub message: String,
}

impl OutboxIntent {
    /// The longest excerpt shown.
    pub const EXCERPT: usize = 200;
}

impl From<&crate::core::channel::SendIntent> for OutboxIntent {
    fn from(intent: &crate::core::channel::SendIntent) -> Self {
        let target = &intent.target;
        Self {
            id: intent.id.clone(),
            account: intent.account.clone(),
            kind: intent.kind.as_str(),
            status: intent.status.as_str(),
            to: match &target.thread {
                Some(thread) => format!("{}/{thread}", target.id),
                None => target.id.clone(),
            },
            excerpt: intent.excerpt(Self::EXCERPT),
            parts: intent.units.len(),
            delivered: intent
                .receipt
                .parts
                .iter()
                .map(|p| p.platform_id.clone())
                .collect(),
            attempt: intent.attempt,
            failure: intent.failure.as_ref().map(|f| OutboxFailure {
                kind: f.kind.as_str(),
                message: f.message.clone(),
            }),
            created_at: intent.created_at,
            updated_at: intent.updated_at,
        }
    }
}

/// Who may talk to a channel this process runs (`GET
/// /v1/channels/{name}/pairs`): its `allow` list, whether a stranger can
/// pair, and the paired senders. The pairing code itself is never shown: it
/// is a secret of the serving process's environment or log.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct ChannelPairs {
    /// The channel's name (`[channels.NAME]`)
    pub channel: String,
    /// Whether pairing is open: a pairing code is set (from
    /// `pairing_code_env` or made up at start), so `/pair CODE` can pair
    pub pairing_open: bool,
    /// Sender ids served without pairing (`allow`)
    pub allow: Vec<String>,
    /// The paired senders, by account and when they paired
    pub pairs: Vec<crate::core::channel::Pairing>,
}

/// A paired sender revoked (`DELETE /v1/channels/{name}/pairs/{sender}`):
/// their next message is a stranger's.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct PairRevoked {
    pub channel: String,
    /// The sender as the platform compares ids
    pub sender: String,
    pub revoked: bool,
}
