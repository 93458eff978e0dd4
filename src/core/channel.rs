//! Platform-neutral chat messages and durable delivery, as data.
//!
//! A chat platform (Telegram, a webhook peer) is a face; what its messages
//! become inside Pincer is defined here, so the store can keep them and the
//! channel hub can route them without knowing any platform. See
//! `docs/channels.md` for the lifecycle.

#[cfg(test)]
pub mod contract;

use serde::{Deserialize, Serialize};

use super::ids::{RunId, SessionId};
use super::session::Millis;

/// Where a message lives on its platform.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Target {
    pub kind: TargetKind,
    /// The platform's id of the chat, room or peer.
    pub id: String,
    /// A thread or topic within it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thread: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TargetKind {
    Direct,
    Group,
    Channel,
    Thread,
}

impl TargetKind {
    pub fn as_str(self) -> &'static str {
        match self {
            TargetKind::Direct => "direct",
            TargetKind::Group => "group",
            TargetKind::Channel => "channel",
            TargetKind::Thread => "thread",
        }
    }

    /// Whether several people may read the room (self-echoes matter there).
    pub fn is_roomish(self) -> bool {
        !matches!(self, TargetKind::Direct)
    }
}

/// Who wrote a message.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Actor {
    pub id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(default)]
    pub is_bot: bool,
}

/// How a message relates to others.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Relation {
    /// An answer to an inbound message.
    Reply { to: String },
    /// Output Pincer sends on its own account: approval prompts, notices.
    System { reason: String },
}

/// Who produced a message, so Pincer can recognise its own output coming back.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(tag = "source", rename_all = "snake_case")]
pub enum MessageOrigin {
    /// Pincer's own operational output (a failure notice, an approval prompt).
    Pincer {
        kind: String,
    },
    User,
    ExternalBot,
    Platform,
    #[default]
    Unknown,
}

/// A file or media item attached to a message; kept as a reference, its
/// bytes fetched through the adapter when a prompt needs them
/// (`channels::Adapter::fetch`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Attachment {
    /// `photo`, `document`, `voice`, … as the platform names it.
    pub kind: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// The platform's id or URL of the item.
    pub reference: String,
    /// Its size in bytes, where the platform says.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size: Option<u64>,
    /// Its media type, where the platform says (`text/markdown`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mime_type: Option<String>,
}

/// A chat message, normalized from any platform.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChannelMessage {
    /// The platform's message id (unique per channel and account).
    pub id: String,
    /// The channel's configured name (`telegram`, `webhook`).
    pub channel: String,
    /// The bot or account the message arrived through.
    pub account: String,
    pub target: Target,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sender: Option<Actor>,
    pub body: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub attachments: Vec<Attachment>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub relation: Option<Relation>,
    #[serde(default)]
    pub origin: MessageOrigin,
    pub at: Millis,
}

/// Whether the shared echo policy drops this inbound message: Pincer's own
/// tagged operational output, posted by a bot into a room, is never taken as
/// input. Tag-based, not text-based: an untagged bot message with the same
/// words goes through normal authorization.
pub fn is_own_echo(message: &ChannelMessage) -> bool {
    let bot = message.sender.as_ref().is_some_and(|s| s.is_bot);
    bot && message.target.kind.is_roomish()
        && matches!(message.origin, MessageOrigin::Pincer { .. })
}

/// An inline button of an outbound message.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Button {
    pub label: String,
    /// What comes back when it is pressed.
    pub data: String,
}

/// One deliverable part of an outbound message, already rendered for its platform.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Unit {
    pub text: String,
    /// The platform's markup of `text` (`html`), or plain text when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub markup: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub buttons: Vec<Button>,
    /// A file sent with the text as its caption, on platforms that take
    /// files (`Capabilities::files`): a run's changes, a long reply whole.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file: Option<OutFile>,
}

impl Unit {
    /// A unit of plain text, without markup or buttons.
    pub fn plain(text: String) -> Self {
        Self {
            text,
            ..Self::default()
        }
    }
}

/// A text file sent to a chat.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OutFile {
    /// `changes.diff`, `reply.md`.
    pub name: String,
    /// `text/x-diff`, `text/markdown`.
    pub mime_type: String,
    pub text: String,
}

/// What is known of a channel account's connection to its platform
/// (`channels::health`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct AccountStatus {
    /// The platform answers (a connection up, the last poll answered);
    /// null before the first answer.
    #[serde(default)]
    pub connected: Option<bool>,
    /// When `connected` last changed (milliseconds since the epoch).
    #[serde(default)]
    pub since: Option<i64>,
    /// When the last inbound event arrived.
    #[serde(default)]
    pub last_event_at: Option<i64>,
    /// The last error talking to the platform, and when.
    #[serde(default)]
    pub last_error: Option<String>,
    #[serde(default)]
    pub last_error_at: Option<i64>,
}

/// The tools' way to the chat channels (`send_message`): a message sent
/// first, recorded as a send intent that the process serving the channel
/// delivers through its outbox. Implemented outside the core
/// (`app::wiring::courier`).
pub trait Courier: Send + Sync {
    /// The channels a message can go through, by name.
    fn channels(&self) -> Vec<String>;
    /// Records `text` (Markdown) for `to` (`CHAT` or `CHAT/THREAD` in the
    /// platform's ids) on `channel`: the send intent's id, or why not.
    /// `id` (an idempotency key) records a repeat once.
    fn send<'a>(
        &'a self,
        channel: &'a str,
        to: &'a str,
        text: &'a str,
        id: Option<&'a str>,
    ) -> futures::future::BoxFuture<'a, Result<String, String>>;
}

/// One platform message a delivery produced.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReceiptPart {
    /// Which unit of the intent it carries.
    pub index: usize,
    pub platform_id: String,
}

/// Every platform message id of a (possibly multi-part) delivery.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct DeliveryReceipt {
    pub parts: Vec<ReceiptPart>,
}

impl DeliveryReceipt {
    /// The id to thread under or edit later: the first part's.
    pub fn primary(&self) -> Option<&str> {
        self.parts.first().map(|p| p.platform_id.as_str())
    }

    pub fn has(&self, index: usize) -> bool {
        self.parts.iter().any(|p| p.index == index)
    }
}

/// Where a durable send intent is in its lifecycle.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum IntentStatus {
    /// Recorded; its `MessageSending` hooks have not decided yet. Not sent
    /// until they do; a later message to the same chat waits behind it.
    Held,
    /// Recorded; waiting for its (next) attempt.
    Pending,
    /// A platform call may be under way; the unit in flight is `inflight`.
    Sending,
    /// Every unit was accepted and the receipt is on disk; after-send effects remain.
    Committing,
    Sent,
    /// Given up: a failure class that retrying cannot fix, or attempts spent.
    Failed,
    /// The process stopped after a platform call began and before its receipt
    /// was committed: the message may or may not exist. Never replayed blindly.
    UnknownAfterSend,
    Cancelled,
    /// Too old to send when it finally could be; reported instead.
    Expired,
    /// A `MessageSending` hook blocked it (or failed with `on_failure =
    /// "block"`): never sent, kept with the reason.
    Withheld,
}

impl IntentStatus {
    pub const ALL: [IntentStatus; 10] = [
        IntentStatus::Held,
        IntentStatus::Pending,
        IntentStatus::Sending,
        IntentStatus::Committing,
        IntentStatus::Sent,
        IntentStatus::Failed,
        IntentStatus::UnknownAfterSend,
        IntentStatus::Cancelled,
        IntentStatus::Expired,
        IntentStatus::Withheld,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            IntentStatus::Held => "held",
            IntentStatus::Pending => "pending",
            IntentStatus::Sending => "sending",
            IntentStatus::Committing => "committing",
            IntentStatus::Sent => "sent",
            IntentStatus::Failed => "failed",
            IntentStatus::UnknownAfterSend => "unknown_after_send",
            IntentStatus::Cancelled => "cancelled",
            IntentStatus::Expired => "expired",
            IntentStatus::Withheld => "withheld",
        }
    }

    pub fn parse(value: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|s| s.as_str() == value)
    }

    pub fn is_open(self) -> bool {
        matches!(
            self,
            IntentStatus::Held
                | IntentStatus::Pending
                | IntentStatus::Sending
                | IntentStatus::Committing
        )
    }
}

/// Closed classes of delivery failure; adapters map platform errors onto them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FailureKind {
    /// The platform did not take the message (connection refused, 5xx): retry.
    Transient,
    /// The platform asked us to slow down: retry after its delay.
    RateLimit,
    /// Bad credentials: no retry until the configuration changes.
    Auth,
    /// The bot may not post there: no retry.
    Permission,
    /// The chat or the message to edit is gone.
    NotFound,
    /// The platform refused the content: no retry (a plain-text fallback may be tried).
    InvalidPayload,
    /// The platform reports a clash (e.g. an edit with no change).
    Conflict,
    /// We cannot tell whether the platform acted (a timeout after sending).
    Unknown,
}

impl FailureKind {
    pub fn as_str(self) -> &'static str {
        match self {
            FailureKind::Transient => "transient",
            FailureKind::RateLimit => "rate_limit",
            FailureKind::Auth => "auth",
            FailureKind::Permission => "permission",
            FailureKind::NotFound => "not_found",
            FailureKind::InvalidPayload => "invalid_payload",
            FailureKind::Conflict => "conflict",
            FailureKind::Unknown => "unknown",
        }
    }

    /// Every kind, in the order declared.
    pub const ALL: [FailureKind; 8] = [
        FailureKind::Transient,
        FailureKind::RateLimit,
        FailureKind::Auth,
        FailureKind::Permission,
        FailureKind::NotFound,
        FailureKind::InvalidPayload,
        FailureKind::Conflict,
        FailureKind::Unknown,
    ];

    pub fn parse(value: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|k| k.as_str() == value)
    }
}

/// What an outbound message is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum IntentKind {
    /// The final answer of a run.
    Reply,
    /// An approval prompt, or a question to the person (`ask_user`).
    Approval,
    /// Pincer's own notice (a failure, an interrupted run, a command's answer).
    Notice,
    /// A message sent first, answering nothing: `pincer send`, `POST
    /// /v1/channels/NAME/messages`, a schedule, the `send_message` tool.
    Message,
    /// The first send of a run's live draft, made by the hub itself (never by
    /// the outbox worker); its receipt names the draft message that the
    /// run's reply finalizes in place.
    Draft,
}

impl IntentKind {
    pub fn as_str(self) -> &'static str {
        match self {
            IntentKind::Reply => "reply",
            IntentKind::Approval => "approval",
            IntentKind::Notice => "notice",
            IntentKind::Message => "message",
            IntentKind::Draft => "draft",
        }
    }

    pub fn parse(value: &str) -> Option<Self> {
        [
            IntentKind::Reply,
            IntentKind::Approval,
            IntentKind::Notice,
            IntentKind::Message,
            IntentKind::Draft,
        ]
        .into_iter()
        .find(|k| k.as_str() == value)
    }
}

/// A message Pincer has decided to send, on disk before any platform call.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SendIntent {
    /// Also the idempotency key: derived from what the message is for
    /// (`reply:RUN`), so deciding twice records it once.
    pub id: String,
    pub channel: String,
    pub account: String,
    pub target: Target,
    pub kind: IntentKind,
    pub units: Vec<Unit>,
    /// The whole text the units were cut from, as decided, when
    /// `MessageSending` hooks are to read it (they may rewrite the units).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    /// A live draft to finalize in place with unit 0, instead of a fresh send.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub edit_of: Option<String>,
    /// A live draft to delete before unit 0 goes out as a fresh message: one
    /// whose edits may still be in flight from a process that stopped (or
    /// whose last edit's outcome is unknown), which a late edit could
    /// overwrite if it were finalized in place. A late edit of a deleted
    /// message fails harmlessly. Cleared, with the deletion committed, before
    /// the fresh send.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retract: Option<String>,
    /// The inbound message this answers, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reply_to: Option<String>,
    pub status: IntentStatus,
    /// Attempts begun so far.
    pub attempt: u32,
    /// When the next attempt may start.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_attempt_at: Option<Millis>,
    /// The unit whose platform call may be under way (while `sending`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub inflight: Option<usize>,
    /// The parts delivered so far; complete once `committing`.
    #[serde(default)]
    pub receipt: DeliveryReceipt,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure: Option<Failure>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_id: Option<SessionId>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_id: Option<RunId>,
    pub created_at: Millis,
    pub updated_at: Millis,
    /// When an operator last asked for it to be sent again (`resend`, from
    /// `unknown_after_send`): its expiry counts from then.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resent_at: Option<Millis>,
}

impl SendIntent {
    /// An intent of `channel`'s `account` decided at `now`: pending, nothing
    /// attempted or delivered yet, answering no message, of no run; the
    /// caller sets what differs.
    pub fn new(
        id: String,
        (channel, account): (&str, &str),
        target: Target,
        kind: IntentKind,
        units: Vec<Unit>,
        now: Millis,
    ) -> Self {
        Self {
            id,
            channel: channel.to_owned(),
            account: account.to_owned(),
            target,
            kind,
            units,
            text: None,
            edit_of: None,
            retract: None,
            reply_to: None,
            status: IntentStatus::Pending,
            attempt: 0,
            next_attempt_at: None,
            inflight: None,
            receipt: DeliveryReceipt::default(),
            failure: None,
            session_id: None,
            run_id: None,
            created_at: now,
            updated_at: now,
            resent_at: None,
        }
    }

    /// When it was decided, for its expiry: when it was last asked to be
    /// sent again, if it was.
    pub fn decided_at(&self) -> Millis {
        self.resent_at.unwrap_or(self.created_at)
    }

    /// What its chat would read, in a line: the text as decided (or its
    /// units'), at most `max` characters.
    pub fn excerpt(&self, max: usize) -> String {
        let whole = match &self.text {
            Some(text) => text.clone(),
            None => self
                .units
                .iter()
                .map(|u| u.text.as_str())
                .collect::<Vec<_>>()
                .join(" "),
        };
        let line = whole.split_whitespace().collect::<Vec<_>>().join(" ");
        if line.chars().count() <= max {
            return line;
        }
        let mut cut: String = line.chars().take(max.saturating_sub(1)).collect();
        cut.push('…');
        cut
    }
}

/// What an operator decided about an `unknown_after_send` intent after
/// checking the chat (`pincer channels resolve`, `POST
/// /v1/channels/{name}/outbox/{intent_id}`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Resolution {
    /// The person saw it arrive: `sent`.
    Arrived,
    /// It did not arrive: `pending`, sent again by the process serving the
    /// account.
    Resend,
    /// Leave it unsent: `cancelled`.
    Drop,
}

impl Resolution {
    pub fn as_str(self) -> &'static str {
        match self {
            Resolution::Arrived => "arrived",
            Resolution::Resend => "resend",
            Resolution::Drop => "drop",
        }
    }

    /// The update recording the decision about `intent` at `at`; refused,
    /// with why, unless it is `unknown_after_send` (and, to be sent again,
    /// not a live draft: its run's reply went out on its own).
    pub fn update(self, intent: &SendIntent, at: Millis) -> Result<IntentUpdate, String> {
        if intent.status != IntentStatus::UnknownAfterSend {
            return Err(format!(
                "send intent {} is {}: only an unknown_after_send one is resolved",
                intent.id,
                intent.status.as_str()
            ));
        }
        let status = match self {
            Resolution::Arrived => IntentStatus::Sent,
            Resolution::Drop => IntentStatus::Cancelled,
            Resolution::Resend if intent.kind == IntentKind::Draft => {
                return Err(format!(
                    "send intent {} is a live draft: it is not sent again (its run's reply went out on its own); resolve it arrived or drop",
                    intent.id
                ));
            }
            Resolution::Resend => IntentStatus::Pending,
        };
        let mut update =
            IntentUpdate::new(&intent.id, &[IntentStatus::UnknownAfterSend], status, at);
        if self == Resolution::Resend {
            update.resent_at = Some(at);
        }
        Ok(update)
    }
}

/// The id of a run's live draft intent (`draft:RUN`): its first send, and
/// the message the run's reply finalizes or deletes.
pub fn draft_intent_id(run: &RunId) -> String {
    format!("draft:{run}")
}

/// Why the last attempt failed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Failure {
    pub kind: FailureKind,
    pub message: String,
}

/// A change of an intent's state, applied only if the intent is in one of the
/// `from` states (so two workers can never both move it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IntentUpdate {
    pub id: String,
    pub from: Vec<IntentStatus>,
    pub status: IntentStatus,
    pub attempt: Option<u32>,
    pub next_attempt_at: Option<Millis>,
    pub inflight: Option<usize>,
    pub receipt: Option<DeliveryReceipt>,
    pub failure: Option<Failure>,
    pub edit_of: Option<Option<String>>,
    pub retract: Option<Option<String>>,
    /// New units (a `MessageSending` hook rewrote the text).
    pub units: Option<Vec<Unit>>,
    /// An operator asked for it to be sent again (`Resolution::Resend`).
    pub resent_at: Option<Millis>,
    pub at: Millis,
}

impl IntentUpdate {
    pub fn new(id: &str, from: &[IntentStatus], status: IntentStatus, at: Millis) -> Self {
        Self {
            id: id.to_owned(),
            from: from.to_vec(),
            status,
            attempt: None,
            next_attempt_at: None,
            inflight: None,
            receipt: None,
            failure: None,
            edit_of: None,
            retract: None,
            units: None,
            resent_at: None,
            at,
        }
    }

    /// Applies the update to `intent` (the one its `id` names), as every
    /// backend does: refused, with the reason, unless the intent is in one
    /// of the `from` states. The status and the time changed are set;
    /// `next_attempt_at` and `inflight` are always replaced (an update
    /// without them clears them); a failure, once set, is kept until
    /// another replaces it (a later success does not clear it); the other
    /// fields change only when given.
    pub fn apply(&self, intent: &mut SendIntent) -> Result<(), String> {
        if !self.from.contains(&intent.status) {
            return Err(format!(
                "send intent {} is {}, not {}",
                self.id,
                intent.status.as_str(),
                self.from
                    .iter()
                    .map(|s| s.as_str())
                    .collect::<Vec<_>>()
                    .join(" or ")
            ));
        }
        intent.status = self.status;
        if let Some(attempt) = self.attempt {
            intent.attempt = attempt;
        }
        intent.next_attempt_at = self.next_attempt_at;
        intent.inflight = self.inflight;
        if let Some(receipt) = &self.receipt {
            intent.receipt = receipt.clone();
        }
        if self.failure.is_some() {
            intent.failure = self.failure.clone();
        }
        if let Some(edit_of) = &self.edit_of {
            intent.edit_of = edit_of.clone();
        }
        if let Some(retract) = &self.retract {
            intent.retract = retract.clone();
        }
        if let Some(units) = &self.units {
            intent.units = units.clone();
        }
        if self.resent_at.is_some() {
            intent.resent_at = self.resent_at;
        }
        intent.updated_at = self.at;
        Ok(())
    }
}

/// Where an inbound message is in its lifecycle.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum InboxState {
    /// On disk (and acknowledged to the platform); not yet given to a run.
    Recorded,
    /// Part of a run's prompt.
    Dispatched,
    /// Its run ended and the answer's send intent is on disk.
    Done,
    /// Consumed without a run: a command, an approval answer, a refusal.
    Handled,
}

impl InboxState {
    pub fn as_str(self) -> &'static str {
        match self {
            InboxState::Recorded => "recorded",
            InboxState::Dispatched => "dispatched",
            InboxState::Done => "done",
            InboxState::Handled => "handled",
        }
    }

    pub fn parse(value: &str) -> Option<Self> {
        [
            InboxState::Recorded,
            InboxState::Dispatched,
            InboxState::Done,
            InboxState::Handled,
        ]
        .into_iter()
        .find(|s| s.as_str() == value)
    }
}

/// A stored inbound message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InboxEntry {
    pub message: ChannelMessage,
    pub state: InboxState,
    pub run_id: Option<RunId>,
    pub received_at: Millis,
}

/// The conversation a message belongs to: one Pincer session each.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct ConversationKey {
    pub channel: String,
    pub account: String,
    pub target: Target,
}

impl ConversationKey {
    pub fn of(message: &ChannelMessage) -> Self {
        Self {
            channel: message.channel.clone(),
            account: message.account.clone(),
            target: message.target.clone(),
        }
    }

    /// The conversation as one string (`telegram/bot/group:-100/7`): the key
    /// of its conversation memory, the same for every session of the chat.
    pub fn as_scope_key(&self) -> String {
        let mut key = format!(
            "{}/{}/{}:{}",
            self.channel,
            self.account,
            self.target.kind.as_str(),
            self.target.id
        );
        if let Some(thread) = &self.target.thread {
            key.push('/');
            key.push_str(thread);
        }
        key
    }
}

/// A change to the channel tables (part of the journal's `Write`).
#[derive(Debug, Clone)]
pub enum ChannelWrite {
    /// Records an inbound message and, in the same transaction, advances the
    /// polling cursor past it. A message already recorded fails with
    /// `JournalError::Conflict` (the cursor still advances).
    RecordInbound {
        message: ChannelMessage,
        cursor: Option<(String, String)>,
        at: Millis,
    },
    SetInboxState {
        channel: String,
        account: String,
        ids: Vec<String>,
        state: InboxState,
        run_id: Option<RunId>,
        at: Millis,
    },
    PutCursor {
        channel: String,
        account: String,
        name: String,
        value: String,
    },
    /// Records an intent; one with the same id already recorded is left as it
    /// is. One recorded as `sending` is claimed by this process.
    InsertIntent(SendIntent),
    /// Moves an intent if it is in one of the update's `from` states; otherwise
    /// fails with `JournalError::Conflict`.
    UpdateIntent(IntentUpdate),
    MapConversation {
        key: ConversationKey,
        session_id: SessionId,
        at: Millis,
    },
    PairPeer {
        channel: String,
        account: String,
        sender: String,
        at: Millis,
    },
    /// Forgets a paired sender (`sender`, as the platform compares ids) in
    /// every account of the channel: their next message is a stranger's.
    /// One not paired fails with `JournalError::Conflict`.
    UnpairPeer { channel: String, sender: String },
    /// Forgets a run's row in the live-draft table of earlier versions
    /// (drafts are now `draft:RUN` intents).
    DeleteDraft { run_id: RunId },
}

/// A paired sender of a channel account (`/pair CODE`, the only way to
/// pair): who, and since when.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[schemars(rename = "ChannelPair", deny_unknown_fields)]
pub struct Pairing {
    /// The channel's name (`[channels.NAME]`)
    pub channel: String,
    pub account: String,
    /// The sender's id as the platform compares ids (an IRC account, a
    /// lower-cased mail address)
    pub sender: String,
    /// When they paired, in Unix milliseconds
    pub paired_at: Millis,
}

/// A live draft: the run it shows, where it is, its platform id and text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Draft {
    pub run_id: RunId,
    pub target: Target,
    pub platform_id: String,
    pub text: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_operator_resolves_only_what_is_unknown_and_never_resends_a_draft() {
        let target = Target {
            kind: TargetKind::Direct,
            id: "42".into(),
            thread: None,
        };
        let mut reply = SendIntent::new(
            "reply:r".into(),
            ("telegram", "bot"),
            target,
            IntentKind::Reply,
            vec![Unit {
                text: "Hello\n  there".into(),
                markup: None,
                buttons: Vec::new(),
                file: None,
            }],
            1,
        );
        assert_eq!(reply.excerpt(200), "Hello there");
        assert_eq!(reply.excerpt(4), "Hel…");
        let refused = Resolution::Arrived.update(&reply, 5).unwrap_err();
        assert!(refused.contains("is pending"), "{refused}");
        reply.status = IntentStatus::UnknownAfterSend;
        let cases = [
            (Resolution::Arrived, IntentStatus::Sent, None),
            (Resolution::Resend, IntentStatus::Pending, Some(5)),
            (Resolution::Drop, IntentStatus::Cancelled, None),
        ];
        for (resolution, status, resent_at) in cases {
            let update = resolution.update(&reply, 5).unwrap();
            assert_eq!(
                (update.from.as_slice(), update.status, update.resent_at),
                (
                    [IntentStatus::UnknownAfterSend].as_slice(),
                    status,
                    resent_at
                )
            );
        }
        let mut draft = reply.clone();
        draft.kind = IntentKind::Draft;
        assert!(Resolution::Resend.update(&draft, 5).is_err());
        assert!(Resolution::Drop.update(&draft, 5).is_ok());
    }

    fn message(kind: TargetKind, bot: bool, origin: MessageOrigin) -> ChannelMessage {
        ChannelMessage {
            id: "1".into(),
            channel: "telegram".into(),
            account: "bot".into(),
            target: Target {
                kind,
                id: "c".into(),
                thread: None,
            },
            sender: Some(Actor {
                id: "u".into(),
                name: None,
                is_bot: bot,
            }),
            body: "Agent failed before reply".into(),
            attachments: Vec::new(),
            relation: None,
            origin,
            at: 0,
        }
    }

    #[test]
    fn only_tagged_bot_output_in_rooms_is_an_echo() {
        let tagged = MessageOrigin::Pincer {
            kind: "notice".into(),
        };
        assert!(is_own_echo(&message(
            TargetKind::Group,
            true,
            tagged.clone()
        )));
        // Same words, no tag: not an echo.
        assert!(!is_own_echo(&message(
            TargetKind::Group,
            true,
            MessageOrigin::ExternalBot
        )));
        // A direct chat is not a room.
        assert!(!is_own_echo(&message(
            TargetKind::Direct,
            true,
            tagged.clone()
        )));
        // A person is never an echo.
        assert!(!is_own_echo(&message(TargetKind::Group, false, tagged)));
    }

    #[test]
    fn names_round_trip() {
        for status in IntentStatus::ALL {
            assert_eq!(IntentStatus::parse(status.as_str()), Some(status));
        }
        assert_eq!(
            FailureKind::parse("rate_limit"),
            Some(FailureKind::RateLimit)
        );
        assert_eq!(
            InboxState::parse("dispatched"),
            Some(InboxState::Dispatched)
        );
        assert_eq!(IntentKind::parse("approval"), Some(IntentKind::Approval));
        assert_eq!(IntentKind::parse("draft"), Some(IntentKind::Draft));
    }
}
