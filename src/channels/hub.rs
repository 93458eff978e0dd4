//! One channel account's hub: the receive and live contexts between a
//! platform adapter and the runtime (`docs/channels.md`).
//!
//! **What an adapter gives the hub.** Every inbound event, as an
//! [`Inbound`](super::Inbound), through [`Hub::receive`], with the platform's
//! acknowledgement watermark (its cursor: Telegram's `offset`), which is
//! stored in the same transaction as the message. The
//! [`Received`](super::Received) answer
//! says whether to acknowledge it: every answer but `Failed`. A receive loop
//! resumes from [`Hub::cursor`], and moves the watermark past events Pincer
//! takes no interest in with [`Hub::skip`].
//!
//! **What the hub asks of an adapter** ([`Adapter`]): its channel and
//! account names, its [`Capabilities`](super::Capabilities) (message length
//! and its unit, edits, deletions, buttons, reactions, threads, markup, and
//! which of its calls may be repeated after an unknown outcome:
//! `idempotent`), and four calls: `send`, `edit` and `delete` a message,
//! each failure classed by [`FailureKind`](crate::core::channel::FailureKind),
//! and `receive` until cancelled; where the platform offers ephemeral
//! previews in a chat (`ephemeral_drafts`), `draft` shows one. An adapter knows nothing of sessions,
//! runs or the store; the hub knows no platform.
//!
//! The hub's concerns, a module each:
//! - `account`: the account's lease: serving it, standing by, taking over;
//! - `recovery`: what a stopped process left: held intents, inbox entries
//!   not answered, the live drafts of their runs;
//! - `inbound`: an event recorded once (deduplicated, with the cursor),
//!   tagged self-echoes dropped, an authorized message routed;
//! - `access`: who may talk: the allow list and pairing;
//! - `lockout`: wrong pairing codes limited per sender;
//! - `hooks`: `MessageReceived` on the way in, `MessageSending` on the way out;
//! - `commands`: the commands given in the chat;
//! - `sessions`: the chat's sessions (`/sessions`, `/resume`) and `/usage`;
//! - `dispatch`: coalescing, the chat's session, a run started and followed;
//! - `approvals`: approvals and questions, asked and answered in the chat;
//! - `drafts`: the live draft of a run's reply, throttled: a message edited
//!   in place, or an ephemeral preview;
//! - `reply`: the reply, and every outbound message, recorded as a send
//!   intent the outbox delivers;
//! - `deliver`: messages sent first, recorded by any process, adopted by
//!   the one serving the account.

mod access;
mod account;
mod approvals;
mod attachments;
mod commands;
mod deliver;
mod dispatch;
mod drafts;
mod hooks;
mod inbound;
mod lockout;
mod operator;
mod recovery;
mod reply;
mod sessions;
#[cfg(test)]
mod testing;

use parking_lot::Mutex;
use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::health::{self, Health, Status};
use super::outbox::Outbox;
use super::{Adapter, ChannelSettings};
use crate::core::channel::{ChannelMessage, ChannelWrite, ConversationKey};
use crate::core::ids::SessionId;
use crate::core::journal::{ChannelJournal, JournalError, Write};
use crate::core::question::Question;
use crate::core::runtime::Runtime;

pub use deliver::{ADOPT_EVERY, message_intent};
pub use drafts::{DRAFT_LOST, DRAFT_STALE};

/// A conversation's state in this process.
#[derive(Default)]
struct Conversation {
    /// Messages waiting for their sender's coalescing window to close, by sender.
    buffers: HashMap<String, Vec<ChannelMessage>>,
    /// Approvals asked in this chat and not yet answered: (session, approval id).
    approvals: Vec<(SessionId, String)>,
    /// Questions (`ask_user`) asked in this chat and not yet answered: the
    /// next message answers the newest.
    questions: Vec<(SessionId, String, Question)>,
}

/// One channel account: receives, dispatches runs, renders and sends their output.
pub struct Hub {
    runtime: Runtime,
    store: Arc<dyn ChannelJournal>,
    adapter: Arc<dyn Adapter>,
    settings: ChannelSettings,
    outbox: Arc<Outbox>,
    conversations: Mutex<HashMap<ConversationKey, Conversation>>,
    /// Senders told how to pair, so they are told once per process.
    told: Mutex<HashSet<String>>,
    /// Wrong pairing codes per sender, and who is locked out of `/pair`.
    lockouts: Mutex<lockout::Lockouts>,
    /// Held while a conversation's session is looked up or created, so two
    /// senders writing at once to a new chat get one session.
    sessions: tokio::sync::Mutex<()>,
    /// Held intents whose `MessageSending` hooks (or rendering) this
    /// process is deciding, so each is decided once here.
    screening: Mutex<HashSet<String>>,
    /// Wakes the adoption of held messages (`deliver`).
    adopting: tokio::sync::Notify,
    /// Whether the platform answers, the last event and error.
    health: Health,
    /// Whether this process serves the account now (holds its lease).
    serving: std::sync::atomic::AtomicBool,
    tasks: TaskTracker,
    cancel: CancellationToken,
}

/// A failure the hub reports; inbound handling never panics on one.
#[derive(Debug, thiserror::Error)]
pub enum HubError {
    #[error(transparent)]
    Journal(#[from] JournalError),
    #[error(transparent)]
    Runtime(#[from] crate::core::runtime::RuntimeError),
    #[error("the channel account's lease: {0}")]
    Lease(crate::core::lease::LeaseError),
}

impl Hub {
    /// Starts serving one channel account: once this process holds the
    /// account's lease (`LeaseKey::channel`), recovers what the previous
    /// holder left, then starts the outbox worker and the adapter's
    /// receive loop. While another process holds it, this one stands by
    /// and takes over when that lease lapses; a lease lost while serving
    /// (the process stopped past it) stops both until it is held again.
    /// Everything stops with `cancel`.
    pub async fn start(
        runtime: Runtime,
        store: Arc<dyn ChannelJournal>,
        adapter: Arc<dyn Adapter>,
        settings: ChannelSettings,
        cancel: CancellationToken,
    ) -> Result<Arc<Hub>, HubError> {
        let outbox = Arc::new(Outbox::new(
            adapter.clone(),
            store.clone(),
            settings.expire_after,
            settings.max_attempts,
            runtime.gate().safety.clone(),
        ));
        let first_lockout = settings.pairing_lockout;
        let hub = Arc::new(Hub {
            runtime,
            store,
            adapter,
            settings,
            outbox,
            conversations: Mutex::new(HashMap::new()),
            told: Mutex::new(HashSet::new()),
            lockouts: Mutex::new(lockout::Lockouts::new(first_lockout)),
            sessions: tokio::sync::Mutex::new(()),
            screening: Mutex::new(HashSet::new()),
            adopting: tokio::sync::Notify::new(),
            health: Health::default(),
            serving: std::sync::atomic::AtomicBool::new(false),
            tasks: TaskTracker::new(),
            cancel,
        });
        hub.take_account().await?;
        Ok(hub)
    }

    /// The adapter's acknowledgement watermark as last stored (`name`: e.g.
    /// Telegram's `offset`).
    pub async fn cursor(&self, name: &str) -> Option<String> {
        self.store
            .cursor(self.adapter.channel(), self.adapter.account(), name)
            .await
            .unwrap_or_else(|err| {
                tracing::error!(error = %err, "cannot read the channel's cursor");
                None
            })
    }

    /// Moves the watermark past an event Pincer takes no interest in.
    pub fn skip(&self, name: &str, value: String) {
        self.store.submit(Write::Channel(ChannelWrite::PutCursor {
            channel: self.adapter.channel().to_owned(),
            account: self.adapter.account().to_owned(),
            name: name.to_owned(),
            value,
        }));
    }

    /// The platform answered (a connection up, a poll answered).
    pub fn up(&self) {
        if let Some(status) = self.health.up() {
            self.write_status(&status);
        }
    }

    /// The platform did not answer: `error` says why.
    pub fn down(&self, error: &str) {
        let error = self.runtime.gate().safety.redact(error).0;
        let status = self.health.down(&error);
        self.write_status(&status);
    }

    /// The account's health as this process sees it.
    pub fn health(&self) -> Status {
        self.health.status()
    }

    /// Whether this process serves the account now.
    pub fn serving(&self) -> bool {
        self.serving.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// The account as `GET /v1/channels` shows it.
    pub async fn view(&self) -> crate::views::ChannelView {
        let adapter = &self.adapter;
        let outbox = match self.store.intent_counts().await {
            Ok(counts) => counts
                .into_iter()
                .filter(|(channel, _, _)| channel == adapter.channel())
                .map(|(_, status, n)| (status.as_str().to_owned(), n))
                .collect(),
            Err(err) => {
                tracing::warn!(error = %err, "cannot count the outbox");
                Default::default()
            }
        };
        let status = self.health.status();
        crate::views::ChannelView {
            name: adapter.channel().to_owned(),
            account: adapter.account().to_owned(),
            kind: Some(adapter.kind().to_owned()),
            serving: Some(self.serving()),
            capabilities: Some(adapter.capabilities().view()),
            status,
            outbox,
        }
    }

    fn write_status(&self, status: &Status) {
        match serde_json::to_string(status) {
            Ok(value) => self.store.submit(Write::Channel(ChannelWrite::PutCursor {
                channel: self.adapter.channel().to_owned(),
                account: self.adapter.account().to_owned(),
                name: health::CURSOR.to_owned(),
                value,
            })),
            Err(err) => tracing::warn!(error = %err, "cannot write the channel's status"),
        }
    }

    pub fn adapter(&self) -> &Arc<dyn Adapter> {
        &self.adapter
    }

    pub fn outbox(&self) -> &Arc<Outbox> {
        &self.outbox
    }

    /// Waits for the hub's tasks after `cancel`.
    pub async fn stopped(&self) {
        self.tasks.close();
        self.tasks.wait().await;
    }
}
