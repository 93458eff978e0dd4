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
//! Adapters (`telegram`, `webhook`, `irc`, `matrix`) only translate: platform JSON to
//! [`ChannelMessage`](crate::core::channel::ChannelMessage), [`Unit`]s to platform calls, platform errors to
//! [`FailureKind`]s. They know nothing of sessions, runs or the store.

pub mod email;
pub mod health;
pub mod hub;
pub mod irc;
pub mod matrix;
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
    /// Longest message text in the platform's unit (the default rendering
    /// and live drafts count characters).
    pub max_len: usize,
    /// Messages can be edited after sending (live drafts, finalize in place).
    pub edit: bool,
    /// Inline buttons (approval prompts); otherwise `y` / `n` / `a` replies.
    pub buttons: bool,
    /// Least time between two edits of one message.
    pub edit_interval: Duration,
    /// The platform's markup for rendered text (`html`), or plain text.
    pub markup: Option<&'static str>,
    /// Without live drafts: a run still working after this long says so
    /// once (`working…`), so the chat does not look dead; `None`: never.
    pub working_after: Option<Duration>,
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

/// A request a platform sent over HTTP to a channel: `POST
/// /channels/NAME/…` on `pincer serve --http` (the one listener every
/// adapter that receives HTTP shares).
#[derive(Debug, Clone)]
pub struct HttpRequest {
    /// The path after `/channels/NAME/`.
    pub endpoint: String,
    pub headers: reqwest::header::HeaderMap,
    pub body: Vec<u8>,
}

/// The adapter's answer to an [`HttpRequest`]: a status and a JSON body.
#[derive(Debug, Clone, PartialEq)]
pub struct HttpReply {
    pub status: u16,
    pub body: serde_json::Value,
}

impl HttpReply {
    pub fn new(status: u16, body: serde_json::Value) -> Self {
        Self { status, body }
    }

    /// `status` with `{"error": message}`.
    pub fn error(status: u16, message: impl Into<String>) -> Self {
        Self::new(status, serde_json::json!({"error": message.into()}))
    }
}

/// A chat platform.
pub trait Adapter: Send + Sync + 'static {
    /// The channel's configured name (`telegram`).
    fn channel(&self) -> &str;
    /// The bot or account this adapter speaks as.
    fn account(&self) -> &str;
    /// The platform (`telegram`, `irc`): the table's `kind`.
    fn kind(&self) -> &'static str;
    fn capabilities(&self) -> Capabilities;
    /// The reply's Markdown as the platform's messages, each fitting one
    /// message in the platform's own unit and carrying its markup
    /// (`render` has the parts). The default: pieces of at most
    /// `max_len` characters, as written, without markup.
    fn render(&self, markdown: &str) -> Vec<Unit> {
        let max = self.capabilities().max_len;
        render::chunk(markdown, max, &render::chars)
            .into_iter()
            .map(Unit::plain)
            .collect()
    }
    /// The chat a message sent first goes to, from what a person wrote
    /// (`pincer send --to`): `CHAT` or `CHAT/THREAD`. The default takes a
    /// direct chat of that id.
    fn target(&self, to: &str) -> Result<Target, String> {
        default_target(to, crate::core::channel::TargetKind::Direct)
    }
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
    /// Whether the platform delivers its events over HTTP, to
    /// `/channels/NAME/…` on `pincer serve --http` ([`Adapter::http`]).
    fn receives_over_http(&self) -> bool {
        false
    }
    /// One request the platform sent over HTTP. The default has no endpoint.
    fn http(&self, request: HttpRequest) -> BoxFuture<'_, HttpReply> {
        let endpoint = request.endpoint;
        let channel = self.channel().to_owned();
        Box::pin(async move {
            HttpReply::error(
                404,
                format!(
                    "channel {channel} has no endpoint {}",
                    crate::core::quote::quote(&endpoint)
                ),
            )
        })
    }
}

/// `CHAT` or `CHAT/THREAD` as a target of `kind`; an empty chat refused.
pub fn default_target(to: &str, kind: crate::core::channel::TargetKind) -> Result<Target, String> {
    let to = to.trim();
    let (id, thread) = match to.rsplit_once('/') {
        Some((id, thread)) if !thread.is_empty() => (id, Some(thread.to_owned())),
        _ => (to, None),
    };
    if id.is_empty() || id.chars().any(char::is_control) {
        return Err("expected a chat: CHAT or CHAT/THREAD".to_owned());
    }
    Ok(Target {
        kind: if thread.is_some() {
            crate::core::channel::TargetKind::Thread
        } else {
            kind
        },
        id: id.to_owned(),
        thread,
    })
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
/// channels' port of the journal. Each runs until `cancel`. `http`: this
/// process serves HTTP, so channels that receive over it can run.
pub async fn start(
    runtime: &crate::core::runtime::Runtime,
    journal: Arc<dyn ChannelJournal>,
    planned: Vec<(Arc<dyn Adapter>, ChannelSettings)>,
    http: bool,
    cancel: CancellationToken,
) -> anyhow::Result<Vec<Arc<Hub>>> {
    use anyhow::Context as _;

    let mut hubs = Vec::new();
    for (adapter, settings) in planned {
        if adapter.receives_over_http() && !http {
            anyhow::bail!(
                "channel {} receives over HTTP: serve it with `pincer serve --http --channel {}`",
                adapter.channel(),
                adapter.channel()
            );
        }
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
