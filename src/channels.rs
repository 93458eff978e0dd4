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
//!   unknown), deleted and replaced by the reply sent afresh. Where the
//!   platform offers ephemeral previews (Telegram's `sendMessageDraft` in a
//!   private chat), the draft is one of those instead, and the reply is the
//!   only message.
//!
//! Adapters (`telegram`, `webhook`, `irc`, `matrix`) only translate: platform JSON to
//! [`ChannelMessage`](crate::core::channel::ChannelMessage), [`Unit`]s to platform calls, platform errors to
//! [`FailureKind`]s. They know nothing of sessions, runs or the store.

pub mod discord;
pub mod download;
pub mod email;
pub mod health;
pub mod hub;
pub mod irc;
pub mod matrix;
pub mod outbox;
pub mod render;
pub mod slack;
pub mod telegram;
pub mod webhook;

pub use download::FetchError;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use tokio_util::sync::CancellationToken;

use crate::core::channel::{Attachment, FailureKind, Target, Unit};
use crate::core::journal::ChannelJournal;

pub use hub::Hub;

/// What a platform can do, as its adapter declares it: what the hub
/// offers a chat (live drafts, buttons), how it cuts replies, and which
/// calls recovery and retries may make again. Shown by `GET /v1/channels`
/// (`views::CapabilitiesView`).
#[derive(Debug, Clone)]
pub struct Capabilities {
    /// Longest message text, in `length_unit` (the default rendering and
    /// live drafts cut to it).
    pub max_len: usize,
    /// What `max_len` counts.
    pub length_unit: LengthUnit,
    /// Messages can be edited after sending (live drafts, finalize in place).
    pub edit: bool,
    /// Messages can be deleted (a stale live draft); without it
    /// [`Adapter::delete`] refuses.
    pub delete: bool,
    /// Inline buttons (approval prompts); otherwise `y` / `n` / `a` replies.
    pub buttons: bool,
    /// An approval prompt can be answered by reacting to it.
    pub reactions: bool,
    /// Threads within a chat (Telegram topics, mail threads): a reply goes
    /// to the thread its message came from, and `CHAT/THREAD` names one.
    pub threads: bool,
    /// Files can be sent ([`Unit::file`]): the hub sends a run's changes as
    /// `changes.diff` and a reply longer than three messages whole as
    /// `reply.md`.
    pub files: bool,
    /// Least time between two edits of one message.
    pub edit_interval: Duration,
    /// The platform's markup for rendered text (`html`), or plain text.
    pub markup: Option<&'static str>,
    /// Without live drafts: a run still working after this long says so
    /// once (`working…`), so the chat does not look dead; `None`: never.
    pub working_after: Option<Duration>,
    /// Which calls may be made again when their outcome is unknown.
    pub idempotent: Idempotence,
}

impl Capabilities {
    /// As `GET /v1/channels` shows it.
    pub fn view(&self) -> crate::views::CapabilitiesView {
        let millis = |d: Duration| u64::try_from(d.as_millis()).unwrap_or(u64::MAX);
        crate::views::CapabilitiesView {
            max_len: self.max_len,
            length_unit: match self.length_unit {
                LengthUnit::Chars => crate::views::LengthUnit::Chars,
                LengthUnit::Utf16 => crate::views::LengthUnit::Utf16,
                LengthUnit::Bytes => crate::views::LengthUnit::Bytes,
            },
            markup: self.markup,
            edit: self.edit,
            delete: self.delete,
            buttons: self.buttons,
            reactions: self.reactions,
            threads: self.threads,
            files: self.files,
            edit_interval_ms: millis(self.edit_interval),
            working_after_ms: self.working_after.map(millis),
            idempotent: crate::views::IdempotenceView {
                send: self.idempotent.send,
                edit: self.idempotent.edit,
                delete: self.idempotent.delete,
            },
        }
    }
}

/// The unit a platform's message length counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LengthUnit {
    /// Unicode scalar values.
    Chars,
    /// UTF-16 code units (Telegram).
    Utf16,
    /// UTF-8 bytes (IRC's lines).
    Bytes,
}

impl LengthUnit {
    pub fn as_str(self) -> &'static str {
        match self {
            LengthUnit::Chars => "chars",
            LengthUnit::Utf16 => "utf16",
            LengthUnit::Bytes => "bytes",
        }
    }

    /// How long `text` is in this unit.
    pub fn measure(self, text: &str) -> usize {
        match self {
            LengthUnit::Chars => render::chars(text),
            LengthUnit::Utf16 => render::utf16(text),
            LengthUnit::Bytes => text.len(),
        }
    }

    /// The longest prefix of `text` at most `max` long in this unit, cut
    /// between characters.
    pub fn prefix(self, text: &str, max: usize) -> &str {
        let mut used = 0;
        for (at, c) in text.char_indices() {
            used += match self {
                LengthUnit::Chars => 1,
                LengthUnit::Utf16 => c.len_utf16(),
                LengthUnit::Bytes => c.len_utf8(),
            };
            if used > max {
                return &text[..at];
            }
        }
        text
    }
}

/// Which of an adapter's calls may be repeated when the outcome of the
/// first is unknown (a timeout after the request went out, a process
/// stopped mid-call) without the chat showing it twice: the one source
/// recovery and retries go by (`outbox`, `hub::recovery`). An operation
/// the platform lacks is `false`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Idempotence {
    /// A send carries a key the platform deduplicates by (Matrix's
    /// transaction id, the webhook's `Idempotency-Key`, a mail's
    /// `Message-ID`); without one a repeat could show the message twice.
    pub send: bool,
    /// An edit sets the whole message, so a repeat shows the same.
    pub edit: bool,
    /// A deleted message stays deleted; a repeat finds it gone.
    pub delete: bool,
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

    /// With the wait the platform asked for.
    #[must_use]
    pub fn with_retry_after(mut self, retry_after: Option<Duration>) -> Self {
        self.retry_after = retry_after;
        self
    }

    /// An HTTP request of `what` (`telegram sendMessage`) that got no
    /// answer. One that never connected (refused, no route, a TLS
    /// handshake failed, the connection timed out) or could not even be
    /// built was not delivered: `transient`. Once it may have been written
    /// (a timeout waiting for the answer, a connection cut mid-way) the
    /// platform may have acted on it: `unknown`. The message never carries
    /// the URL (a Bot API URL holds the token).
    pub fn unanswered(what: &str, err: reqwest::Error) -> Self {
        let err = err.without_url();
        let kind = if err.is_connect() || err.is_builder() {
            FailureKind::Transient
        } else {
            FailureKind::Unknown
        };
        Self::new(kind, format!("{what}: {}", crate::causes::chain(&err)))
    }

    /// An HTTP answer with `status` whose body could not be read (cut off,
    /// or not the JSON expected). A server error is `transient`; any other
    /// status says the request arrived, and what came of it is lost:
    /// `unknown`.
    pub fn unreadable(what: &str, status: u16, err: reqwest::Error) -> Self {
        let kind = if status >= 500 {
            FailureKind::Transient
        } else {
            FailureKind::Unknown
        };
        Self::new(
            kind,
            format!(
                "{what}: HTTP {status}, unreadable answer: {}",
                err.without_url()
            ),
        )
    }

    /// An HTTP error answer, classified by its status alone (adapters
    /// refine it with what their platform's error body says).
    pub fn from_status(status: u16, message: impl Into<String>) -> Self {
        Self::new(status_kind(status), message)
    }
}

/// The failure class of an HTTP error status: 429 `rate_limit`, 401
/// `auth`, 403 `permission`, 404 and 410 `not_found`, 409 `conflict`, 400,
/// 413 and 422 `invalid_payload`, 5xx `transient`; any other `unknown`.
pub fn status_kind(status: u16) -> FailureKind {
    match status {
        429 => FailureKind::RateLimit,
        401 => FailureKind::Auth,
        403 => FailureKind::Permission,
        404 | 410 => FailureKind::NotFound,
        409 => FailureKind::Conflict,
        400 | 413 | 422 => FailureKind::InvalidPayload,
        500..=599 => FailureKind::Transient,
        _ => FailureKind::Unknown,
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
    /// The JSON answered; `null` answers an empty body.
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
    /// `max_len` in `length_unit`, as written, without markup.
    fn render(&self, markdown: &str) -> Vec<Unit> {
        let caps = self.capabilities();
        let unit = caps.length_unit;
        render::chunk(markdown, caps.max_len, &|piece| unit.measure(piece))
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
    /// A sender's id as the platform compares ids: the allow list, pairing
    /// and its records match senders in this form (IRC folds nicks' and
    /// accounts' case, email addresses' case). The default: as given.
    fn sender_key(&self, id: &str) -> String {
        id.to_owned()
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
    /// `FailureKind::NotFound`. Platforms that cannot delete (`delete:
    /// false` in their capabilities) keep the default, which refuses
    /// (`Permission`).
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
    /// Whether a live draft in `target` is an ephemeral preview
    /// ([`Adapter::draft`]) instead of a message sent and edited in place.
    /// Such a preview is never a message: there is nothing to finalize,
    /// delete or lose track of, and the reply is the only message sent.
    /// The default: never.
    fn ephemeral_drafts(&self, _target: &Target) -> bool {
        false
    }
    /// Shows `unit` as the ephemeral preview of the reply named `draft`
    /// (one name per reply, the same across processes: a change of the
    /// same draft replaces it). A refusal meaning the platform has no such
    /// previews (an older server) turns [`Adapter::ephemeral_drafts`] off
    /// for the process's life. The default refuses (`Permission`).
    fn draft<'a>(
        &'a self,
        _target: &'a Target,
        _draft: &'a str,
        _unit: &'a Unit,
    ) -> BoxFuture<'a, Result<(), DeliveryError>> {
        let channel = self.channel().to_owned();
        Box::pin(async move {
            Err(DeliveryError::new(
                FailureKind::Permission,
                format!("{channel} has no ephemeral drafts"),
            ))
        })
    }
    /// How long the platform remembers a send's key (`Idempotence::send`):
    /// a send whose attempt began longer ago than this is not made again
    /// when its outcome is unknown, since the platform would no longer
    /// recognise the repeat (Discord checks a `nonce` for a few minutes).
    /// `None`: for as long as the intent lives.
    fn send_key_lifetime(&self) -> Option<Duration> {
        None
    }
    /// The bytes of a file a person attached, through the platform's
    /// download API; at most `limit` bytes, refused as
    /// [`FetchError::TooLarge`] past it (the hub has already left out a
    /// file whose declared size is larger). The default: the platform's
    /// files cannot be fetched.
    fn fetch<'a>(
        &'a self,
        _attachment: &'a Attachment,
        _limit: u64,
    ) -> BoxFuture<'a, Result<Vec<u8>, FetchError>> {
        let channel = self.channel().to_owned();
        Box::pin(async move { Err(FetchError::Unsupported(channel)) })
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
    /// A listener of the channel's own for what it receives over HTTP
    /// (Slack's `listen`), served by the HTTP face on `pincer serve`.
    fn own_listener(&self) -> Option<OwnListener> {
        None
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
    /// How long a sender is refused `/pair` after too many wrong codes
    /// the first time; each further lockout twice as long, up to an hour.
    pub pairing_lockout: Duration,
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
            pairing_lockout: Duration::from_secs(60),
            workspace,
            coalesce: Duration::from_millis(1500),
            expire_after: Duration::from_secs(15 * 60),
            max_attempts: 8,
            live_drafts: true,
        }
    }
}

/// Where a channel that receives over HTTP ([`Adapter::own_listener`])
/// takes its requests: every `POST` to `addr`, whatever its path, is its
/// `endpoint`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OwnListener {
    pub addr: std::net::SocketAddr,
    pub endpoint: &'static str,
}

/// What of HTTP a process serves for its channels.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HttpReceiving {
    /// Nothing (`pincer acp`).
    None,
    /// The channels' own listeners (`pincer serve` without `--http`).
    OwnListeners,
    /// Those and the HTTP face's `/channels/NAME/…` (`pincer serve --http`).
    All,
}

/// Starts a hub for each planned channel (`app::wiring::channels`), on the
/// channels' port of the journal. Each runs until `cancel`. `http`: what
/// this process serves, so which channels that receive over it can run.
pub async fn start(
    runtime: &crate::core::runtime::Runtime,
    journal: Arc<dyn ChannelJournal>,
    planned: Vec<(Arc<dyn Adapter>, ChannelSettings)>,
    http: HttpReceiving,
    cancel: CancellationToken,
) -> anyhow::Result<Vec<Arc<Hub>>> {
    use anyhow::Context as _;

    let mut hubs = Vec::new();
    for (adapter, settings) in planned {
        if adapter.receives_over_http() {
            let channel = adapter.channel();
            match (http, adapter.own_listener()) {
                (HttpReceiving::All, _) | (HttpReceiving::OwnListeners, Some(_)) => {}
                (HttpReceiving::OwnListeners, None) => anyhow::bail!(
                    "channel {channel} receives over HTTP: serve it with `pincer serve --http --channel {channel}`"
                ),
                (HttpReceiving::None, Some(_)) => anyhow::bail!(
                    "channel {channel} receives over HTTP on its listen address: serve it with `pincer serve --channel {channel}`"
                ),
                (HttpReceiving::None, None) => anyhow::bail!(
                    "channel {channel} receives over HTTP: serve it with `pincer serve --http --channel {channel}`"
                ),
            }
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

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    /// What a loopback server does with a request once it has read it whole.
    #[derive(Clone, Copy)]
    pub(crate) enum Answer {
        /// Writes these bytes, then closes.
        Raw(&'static str),
        /// Closes without a word.
        Close,
        /// Keeps the connection open and says nothing.
        Hold,
    }

    /// A loopback HTTP server for one request: its URL, and the request as
    /// it arrived once read.
    pub(crate) async fn serve_once(
        answer: Answer,
    ) -> (String, tokio::sync::oneshot::Receiver<String>) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let (got, request) = tokio::sync::oneshot::channel();
        tokio::spawn(async move {
            let (mut socket, _) = listener.accept().await.unwrap();
            let mut read = Vec::new();
            let mut buffer = [0u8; 4096];
            // The head, then as much body as it announces.
            loop {
                let n = socket.read(&mut buffer).await.unwrap();
                read.extend_from_slice(&buffer[..n]);
                let text = String::from_utf8_lossy(&read).into_owned();
                if let Some((head, body)) = text.split_once("\r\n\r\n") {
                    let length = head
                        .lines()
                        .find_map(|l| {
                            let (name, value) = l.split_once(':')?;
                            name.eq_ignore_ascii_case("content-length")
                                .then(|| value.trim().parse::<usize>().ok())?
                        })
                        .unwrap_or(0);
                    if body.len() >= length {
                        break;
                    }
                }
                if n == 0 {
                    break;
                }
            }
            let _ = got.send(String::from_utf8_lossy(&read).into_owned());
            match answer {
                Answer::Raw(bytes) => {
                    socket.write_all(bytes.as_bytes()).await.unwrap();
                    socket.shutdown().await.unwrap();
                }
                Answer::Close => drop(socket),
                Answer::Hold => {
                    tokio::time::sleep(Duration::from_secs(3600)).await;
                    drop(socket);
                }
            }
        });
        (url, request)
    }

    /// A client giving up on an answer after 300 ms.
    fn client() -> reqwest::Client {
        crate::net::http_client(Duration::from_millis(300)).unwrap()
    }

    #[tokio::test]
    async fn a_request_that_never_connected_was_not_sent_and_is_retried() {
        // A port nobody listens on any more.
        let addr = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap();
        let err = client()
            .post(format!("http://{addr}/botSECRET/sendMessage"))
            .json(&serde_json::json!({"text": "hi"}))
            .send()
            .await
            .unwrap_err();
        let err = DeliveryError::unanswered("telegram sendMessage", err);
        assert_eq!(err.kind, FailureKind::Transient, "{err}");
        assert!(err.message.starts_with("telegram sendMessage: "), "{err}");
        // The URL (a Bot API URL holds the token) is never in the message.
        assert!(!err.message.contains("SECRET"), "{err}");
    }

    #[tokio::test]
    async fn a_request_written_then_unanswered_may_have_been_sent() {
        for answer in [Answer::Hold, Answer::Close] {
            let (url, request) = serve_once(answer).await;
            let err = client()
                .post(format!("{url}/botSECRET/sendMessage"))
                .json(&serde_json::json!({"text": "hi"}))
                .send()
                .await
                .unwrap_err();
            // The platform had the whole request: it may have acted on it.
            assert!(request.await.unwrap().ends_with(r#"{"text":"hi"}"#));
            let err = DeliveryError::unanswered("telegram sendMessage", err);
            assert_eq!(err.kind, FailureKind::Unknown, "{err}");
            assert!(!err.message.contains("SECRET"), "{err}");
        }
    }

    #[tokio::test]
    async fn an_answer_cut_off_is_transient_from_a_server_error_else_unknown() {
        for (head, kind) in [
            ("HTTP/1.1 502 Bad Gateway", FailureKind::Transient),
            ("HTTP/1.1 200 OK", FailureKind::Unknown),
        ] {
            let raw: &'static str = Box::leak(
                format!("{head}\r\ncontent-length: 100\r\n\r\n{{\"ok\":").into_boxed_str(),
            );
            let (url, _) = serve_once(Answer::Raw(raw)).await;
            let response = client().post(&url).send().await.unwrap();
            let status = response.status().as_u16();
            let err = response.bytes().await.unwrap_err();
            let err = DeliveryError::unreadable("matrix PUT rooms", status, err);
            assert_eq!(err.kind, kind, "{err}");
            assert!(
                err.message.starts_with(&format!(
                    "matrix PUT rooms: HTTP {status}, unreadable answer: "
                )),
                "{err}"
            );
        }
    }

    #[test]
    fn statuses_are_classified() {
        let limited = DeliveryError::from_status(429, "slow down")
            .with_retry_after(Some(Duration::from_secs(7)));
        assert_eq!(limited.kind, FailureKind::RateLimit);
        assert_eq!(limited.retry_after, Some(Duration::from_secs(7)));
        assert_eq!(limited.message, "slow down");
        for status in [500, 502, 503, 504, 599] {
            assert_eq!(status_kind(status), FailureKind::Transient, "{status}");
        }
        for (status, kind) in [
            (400, FailureKind::InvalidPayload),
            (401, FailureKind::Auth),
            (403, FailureKind::Permission),
            (404, FailureKind::NotFound),
            (409, FailureKind::Conflict),
            (410, FailureKind::NotFound),
            (413, FailureKind::InvalidPayload),
            (422, FailureKind::InvalidPayload),
            (418, FailureKind::Unknown),
            (302, FailureKind::Unknown),
        ] {
            assert_eq!(status_kind(status), kind, "{status}");
        }
    }

    #[test]
    fn lengths_are_measured_and_cut_in_the_declared_unit() {
        let text = "añ😀";
        assert_eq!(LengthUnit::Chars.measure(text), 3);
        assert_eq!(LengthUnit::Utf16.measure(text), 4);
        assert_eq!(LengthUnit::Bytes.measure(text), 7);
        assert_eq!(LengthUnit::Chars.prefix(text, 2), "añ");
        assert_eq!(LengthUnit::Utf16.prefix(text, 3), "añ");
        assert_eq!(LengthUnit::Utf16.prefix(text, 4), text);
        assert_eq!(LengthUnit::Bytes.prefix(text, 2), "a");
        assert_eq!(LengthUnit::Bytes.prefix(text, 6), "añ");
        assert_eq!(LengthUnit::Bytes.prefix(text, 0), "");
    }

    #[test]
    fn capabilities_are_shown_with_their_units() {
        let caps = Capabilities {
            max_len: 4096,
            length_unit: LengthUnit::Utf16,
            edit: true,
            delete: true,
            buttons: true,
            reactions: false,
            threads: true,
            files: false,
            edit_interval: Duration::from_secs(1),
            markup: Some("html"),
            working_after: None,
            idempotent: Idempotence {
                send: false,
                edit: true,
                delete: true,
            },
        };
        assert_eq!(
            serde_json::to_value(caps.view()).unwrap(),
            serde_json::json!({
                "max_len": 4096, "length_unit": "utf16", "markup": "html",
                "edit": true, "delete": true, "buttons": true, "reactions": false,
                "threads": true, "files": false, "edit_interval_ms": 1000, "working_after_ms": null,
                "idempotent": {"send": false, "edit": true, "delete": true},
            })
        );
    }
}
