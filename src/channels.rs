//! The chat-channel face: platform adapters around one durable message lifecycle.
//!
//! Three contexts (see `docs/channels.md`):
//! - **receive** (`hub`): normalize → dedupe against the inbox → drop tagged
//!   self-echoes → authorize (allowlist or pairing code) → record (with the
//!   polling cursor, in one transaction) → acknowledge → commands / approval
//!   answers / coalesced dispatch of a run;
//! - **send** (`outbox`): an intent is on disk before any platform call, its
//!   receipt after; `pending → sending → committing → sent | failed |
//!   unknown_after_send`, retried by failure class, recovered on start;
//! - **live** (`hub`): a draft message edited in place as deltas arrive,
//!   throttled, finalized in place by the reply intent.
//!
//! Adapters (`telegram`, `webhook`) only translate: platform JSON to
//! [`ChannelMessage`], [`Unit`]s to platform calls, platform errors to
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

/// An error with its causes, `outer: inner: innermost` (reqwest hides the
/// reason a request failed in its sources).
pub fn with_causes(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let cause_text = cause.to_string();
        if !text.contains(&cause_text) {
            text.push_str(": ");
            text.push_str(&cause_text);
        }
        source = cause.source();
    }
    text
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

/// Starts the named channels (`--channel NAME`): a `[channels.NAME]` table,
/// or `telegram` / `webhook` with their defaults. Each runs until `cancel`.
pub async fn start(
    runtime: &crate::core::runtime::Runtime,
    config: &crate::config::Config,
    names: &[String],
    env: &dyn Fn(&str) -> Option<String>,
    cancel: CancellationToken,
) -> anyhow::Result<Vec<Arc<Hub>>> {
    use anyhow::{Context, anyhow};

    use crate::config::{ChannelConfig, ChannelKind};

    let mut hubs = Vec::new();
    for name in names {
        let table = match config.channels.get(name) {
            Some(table) => table.clone(),
            None if matches!(name.as_str(), "telegram" | "webhook") => ChannelConfig::default(),
            None => {
                let known: Vec<&str> = config.channels.keys().map(String::as_str).collect();
                return Err(anyhow!(
                    "--channel {name}: no [channels.{name}] table in the config{}",
                    if known.is_empty() {
                        String::new()
                    } else {
                        format!(" (configured: {})", known.join(", "))
                    }
                ));
            }
        };
        let kind = table
            .kind_for(name)
            .ok_or_else(|| anyhow!("--channel {name}: set kind = \"telegram\" or \"webhook\""))?;
        let workspace = match &table.workspace {
            Some(dir) => dir.clone(),
            None => std::env::current_dir().context("cannot read the current directory")?,
        };
        let workspace = std::fs::canonicalize(&workspace).with_context(|| {
            format!(
                "channel {name}: workspace {} is not a directory",
                workspace.display()
            )
        })?;
        let mut settings = ChannelSettings::new(workspace);
        settings.allow = table.allow.clone();
        if let Some(ms) = table.coalesce_ms {
            settings.coalesce = Duration::from_millis(ms);
        }
        if let Some(secs) = table.expire_after_secs {
            settings.expire_after = Duration::from_secs(secs);
        }
        if let Some(attempts) = table.max_attempts {
            settings.max_attempts = attempts;
        }
        if let Some(live) = table.live_drafts {
            settings.live_drafts = live;
        }
        let adapter: Arc<dyn Adapter> = match kind {
            ChannelKind::Telegram => {
                let var = table
                    .token_env
                    .clone()
                    .unwrap_or_else(|| "TELEGRAM_BOT_TOKEN".to_owned());
                let token = env(&var).filter(|t| !t.trim().is_empty()).ok_or_else(|| {
                    anyhow!("channel {name}: set {var} to the bot token from @BotFather")
                })?;
                let base = table
                    .api_base
                    .clone()
                    .unwrap_or_else(|| "https://api.telegram.org".to_owned());
                let timeout = Duration::from_secs(table.poll_timeout_secs.unwrap_or(30));
                Arc::new(
                    telegram::Telegram::new(name, token.trim(), &base, timeout)
                        .map_err(|e| anyhow!("channel {name}: {e}"))?,
                )
            }
            ChannelKind::Webhook => {
                let var = table
                    .secret_env
                    .clone()
                    .unwrap_or_else(|| "PINCER_WEBHOOK_SECRET".to_owned());
                let secret = env(&var)
                    .filter(|s| !s.trim().is_empty())
                    .ok_or_else(|| anyhow!("channel {name}: set {var} to the secret shared with the peer (16 characters or more)"))?;
                let callback = table.callback_url.clone().ok_or_else(|| {
                    anyhow!("channel {name}: set callback_url, where outbound messages are POSTed")
                })?;
                let listen = table.listen.as_deref().unwrap_or("127.0.0.1:8788");
                let listen: std::net::SocketAddr = listen.parse().map_err(|_| {
                    anyhow!("channel {name}: listen = {listen:?} is not an address such as 127.0.0.1:8788")
                })?;
                if !listen.ip().is_loopback() {
                    tracing::warn!(channel = %name, %listen, "the webhook listener is reachable beyond this machine; requests are still signed");
                }
                Arc::new(
                    webhook::Webhook::new(
                        name,
                        secret.trim(),
                        &callback,
                        listen,
                        Duration::from_secs(30),
                    )
                    .map_err(|e| anyhow!("channel {name}: {e}"))?,
                )
            }
        };
        let code_var = table
            .pairing_code_env
            .clone()
            .unwrap_or_else(|| "PINCER_PAIRING_CODE".to_owned());
        settings.pairing_code = env(&code_var).filter(|c| !c.trim().is_empty());
        if settings.pairing_code.is_none() && settings.allow.is_empty() {
            let code: String = std::iter::repeat_with(fastrand::alphanumeric)
                .take(10)
                .collect();
            tracing::warn!(
                channel = %name,
                "no allowed senders are configured; senders can pair by sending: /pair {code}"
            );
            settings.pairing_code = Some(code);
        }
        tracing::info!(channel = %name, kind = kind.as_str(), account = adapter.account(), "channel starting");
        let hub = Hub::start(runtime.clone(), adapter, settings, cancel.clone())
            .await
            .with_context(|| format!("channel {name}: cannot start"))?;
        hubs.push(hub);
    }
    Ok(hubs)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, thiserror::Error)]
    #[error("outer")]
    struct Outer(#[source] std::io::Error);

    #[test]
    fn errors_keep_their_causes() {
        let error = Outer(std::io::Error::other("connection refused"));
        assert_eq!(with_causes(&error), "outer: connection refused");
    }
}
