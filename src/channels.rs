//! The chat-channel face: platform adapters around one durable message lifecycle.
//!
//! Three contexts (see `docs/channels.md`):
//! - **receive** (`hub`): normalize (the adapter) → drop tagged self-echoes
//!   → record, deduplicated against the inbox (with the polling cursor, in
//!   one transaction) → acknowledge → authorize (allowlist or pairing code)
//!   → `MessageReceived` hooks → commands / approval and question answers /
//!   coalesced dispatch of a run;
//! - **send** (`outbox`): an intent is on disk before any platform call, its
//!   receipt after; `pending → sending → committing → sent | failed |
//!   unknown_after_send`, retried by failure class, recovered on start;
//! - **live** (`hub`): a draft message edited in place as deltas arrive,
//!   throttled, finalized in place by the reply intent — or, when an edit of
//!   it may still land (a stopped process's, or one whose outcome is
//!   unknown), deleted and replaced by the reply sent afresh.
//!
//! Adapters (`telegram`, `webhook`) only translate: platform JSON to
//! [`ChannelMessage`](crate::core::channel::ChannelMessage), [`Unit`]s to platform calls, platform errors to
//! [`FailureKind`]s. They know nothing of sessions, runs or the store.

pub mod hub;
pub mod outbox;
pub mod render;
pub mod telegram;
pub mod webhook;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use tokio_util::sync::CancellationToken;

use crate::core::channel::{FailureKind, Target, Unit};
use crate::core::journal::ChannelJournal;

pub use hub::Hub;

/// What a platform can do with outbound messages.
#[derive(Debug, Clone)]
pub struct Capabilities {
    /// Longest message text, in characters.
    pub max_len: usize,
    /// Messages can be edited after sending (live drafts, finalize in place).
    pub edit: bool,
    /// Inline buttons (approval prompts); otherwise `y` / `n` / `a` replies.
    pub buttons: bool,
    /// Least time between two edits of one message.
    pub edit_interval: Duration,
    /// The platform's markup for rendered text (`html`), or plain text.
    pub markup: Option<&'static str>,
}

/// A platform call that did not succeed, classified.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{kind:?}: {message}")]
pub struct DeliveryError {
    pub kind: FailureKind,
    pub message: String,
    /// How long the platform asked us to wait.
    pub retry_after: Option<Duration>,
}

impl DeliveryError {
    pub fn new(kind: FailureKind, message: impl Into<String>) -> Self {
        Self {
            kind,
            message: message.into(),
            retry_after: None,
        }
    }
}

/// An inbound event an adapter hands to the hub.
#[derive(Debug, Clone)]
pub enum Inbound {
    Message(crate::core::channel::ChannelMessage),
    /// An inline button was pressed.
    Button {
        /// The platform's id of the press (deduplicated like a message id).
        id: String,
        target: Target,
        sender: String,
        data: String,
    },
}

/// How the hub answered an inbound event; the adapter acknowledges the
/// platform (advances its offset) for every outcome but `Failed`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Received {
    /// Recorded and taken in (a run, a command, an approval answer).
    Accepted,
    /// Seen before (a redelivery): ignored.
    Duplicate,
    /// Pincer's own tagged output echoed back: dropped.
    Echo,
    /// The sender is not allowed; told how to pair.
    Unauthorized,
    /// Could not be recorded; the platform should redeliver it.
    Failed(String),
}

/// A chat platform.
pub trait Adapter: Send + Sync + 'static {
    /// The channel's configured name (`telegram`).
    fn channel(&self) -> &str;
    /// The bot or account this adapter speaks as.
    fn account(&self) -> &str;
    fn capabilities(&self) -> Capabilities;
    /// Whether a replay after an unknown outcome is safe: the platform
    /// deduplicates by the idempotency key the send carries.
    fn idempotent(&self) -> bool {
        false
    }
    /// Sends one unit; returns the platform's message id.
    fn send<'a>(
        &'a self,
        target: &'a Target,
        unit: &'a Unit,
        reply_to: Option<&'a str>,
        idempotency_key: &'a str,
    ) -> BoxFuture<'a, Result<String, DeliveryError>>;
    /// Replaces the text (and buttons) of a message sent earlier.
    fn edit<'a>(
        &'a self,
        target: &'a Target,
        platform_id: &'a str,
        unit: &'a Unit,
    ) -> BoxFuture<'a, Result<(), DeliveryError>>;
    /// Deletes a message sent earlier. A message already gone is
    /// `FailureKind::NotFound`. Platforms that cannot delete keep the default,
    /// which refuses (`Permission`).
    fn delete<'a>(
        &'a self,
        _target: &'a Target,
        _platform_id: &'a str,
    ) -> BoxFuture<'a, Result<(), DeliveryError>> {
        let channel = self.channel().to_owned();
        Box::pin(async move {
            Err(DeliveryError::new(
                FailureKind::Permission,
                format!("{channel} cannot delete a message"),
            ))
        })
    }
    /// Receives until `cancel`: hands every inbound event to `hub` and
    /// acknowledges it to the platform per the hub's answer.
    fn receive(self: Arc<Self>, hub: Arc<Hub>, cancel: CancellationToken)
    -> BoxFuture<'static, ()>;
}

/// How a channel treats the people who write to it.
#[derive(Debug, Clone)]
pub struct ChannelSettings {
    /// Sender ids allowed without pairing.
    pub allow: Vec<String>,
    /// A code a sender can send as `/pair CODE` to be allowed.
    pub pairing_code: Option<String>,
    /// The workspace of sessions this channel creates.
    pub workspace: PathBuf,
    /// Messages from one sender within this window become one prompt.
    pub coalesce: Duration,
    /// Intents older than this when they could finally be sent are expired.
    pub expire_after: Duration,
    /// Attempts of one intent before it fails.
    pub max_attempts: u32,
    /// Show replies as they are written (where the platform can edit).
    pub live_drafts: bool,
}

impl ChannelSettings {
    pub fn new(workspace: PathBuf) -> Self {
        Self {
            allow: Vec::new(),
            pairing_code: None,
            workspace,
            coalesce: Duration::from_millis(1500),
            expire_after: Duration::from_secs(15 * 60),
            max_attempts: 8,
            live_drafts: true,
        }
    }
}

/// Starts a hub for each planned channel (`app::wiring::channels`), on the
/// channels' port of the journal. Each runs until `cancel`.
pub async fn start(
    runtime: &crate::core::runtime::Runtime,
    journal: Arc<dyn ChannelJournal>,
    planned: Vec<(Arc<dyn Adapter>, ChannelSettings)>,
    cancel: CancellationToken,
) -> anyhow::Result<Vec<Arc<Hub>>> {
    use anyhow::Context as _;

    let mut hubs = Vec::new();
    for (adapter, settings) in planned {
        let name = adapter.channel().to_owned();
        tracing::info!(channel = %name, account = adapter.account(), "channel starting");
        let hub = Hub::start(
            runtime.clone(),
            journal.clone(),
            adapter,
            settings,
            cancel.clone(),
        )
        .await
        .with_context(|| format!("channel {name}: cannot start"))?;
        hubs.push(hub);
    }
    Ok(hubs)
}
