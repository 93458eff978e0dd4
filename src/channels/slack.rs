//! Slack (`kind = "slack"`): a Slack app's bot user, sending with the Web
//! API (`chat.postMessage`, `chat.update`, `chat.delete`) and receiving over
//! Socket Mode (`socket`: a WebSocket from `apps.connections.open`, each
//! envelope acknowledged by its `envelope_id` once the hub has recorded it)
//! or the HTTP Events API (`events`: requests signed with the app's signing
//! secret, on the HTTP face's listener at `/channels/NAME/events`).
//!
//! **Conversations.** A direct message (a `D…` channel) is answered
//! whatever it says; a thread in it is a conversation of its own. In a
//! channel the bot answers only when mentioned (`<@BOT> …`), in a thread
//! under the message that mentioned it (`thread_ts`), which is the
//! conversation: a session per thread. `channels`, when set, are the only
//! channels it answers in. Its own messages and edits are not read. A
//! slash command (`/pincer TEXT`, or one named as a chat command) is the
//! chat command given in its direct message, or at a channel's top level
//! (`commands`).
//!
//! **Sending.** Replies are `mrkdwn` (`mrkdwn`), cut at [`MAX_LEN`]
//! characters; approvals and questions carry Block Kit buttons, whose
//! presses (`block_actions`) come back as button presses. A Web API method
//! answered 429 is not called again before its `Retry-After` has passed
//! (per method, as Slack limits them): a call meanwhile fails at once as
//! `rate_limit` with the time left. A post has no idempotency key, so a
//! post whose answer was lost is `unknown`; an edit sets the whole message
//! and a deletion stays done, so both may be repeated.
//!
//! **Files.** A unit with a file (a run's changes, a long reply whole) is
//! shared in three calls: `files.getUploadURLExternal` (form-encoded: the
//! name and length) for a pre-signed upload URL and a file id, the bytes
//! POSTed to that URL (without the bot token, and only on Slack's file
//! host or `api_base`'s), then `files.completeUploadExternal` into the
//! conversation (its thread) with the unit's text as `initial_comment`.
//! Nothing shows before the last call, and Slack discards an upload never
//! completed, so a failure before it is never `unknown`. The unit's
//! platform id is the file id (`F…`: the completing call answers the file,
//! not the message's `ts`), which a deletion removes with `files.delete`.

mod commands;
mod events;
mod mrkdwn;
mod socket;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use parking_lot::Mutex;
use serde_json::{Value, json};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::{
    Adapter, Capabilities, DeliveryError, FetchError, Hub, Idempotence, Inbound, LengthUnit,
    download, render,
};
use crate::core::channel::{
    Actor, Attachment, ChannelMessage, FailureKind, MessageOrigin, OutFile, Target, TargetKind,
    Unit,
};

pub use mrkdwn::{escape, mrkdwn};

/// The longest message text Pincer sends, in characters of `mrkdwn`: a
/// section block (an approval prompt's text) takes at most 3,000.
pub const MAX_LEN: usize = 3000;

/// How the app receives its events.
#[derive(Clone)]
pub enum Receiving {
    /// Socket Mode with this app-level token (`xapp-…`).
    Socket { app_token: String },
    /// The HTTP Events API, requests signed with this secret: on a
    /// listener of the channel's own (`listen`, any path), or at
    /// `/channels/NAME/events` on `pincer serve --http`.
    Events {
        signing_secret: String,
        listen: Option<std::net::SocketAddr>,
    },
}

impl std::fmt::Debug for Receiving {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Receiving::Socket { .. } => f.write_str("Socket(…)"),
            Receiving::Events { .. } => f.write_str("Events(…)"),
        }
    }
}

/// What the configuration gives a Slack channel.
#[derive(Clone)]
pub struct SlackSettings {
    /// The bot token (`xoxb-…`).
    pub bot_token: String,
    pub receiving: Receiving,
    /// The Web API root (`https://slack.com/api`).
    pub api_base: String,
    /// Channel ids answered in when mentioned; empty: every channel.
    pub channels: Vec<String>,
    /// TLS for the Socket Mode WebSocket (`net::tls_config`).
    pub tls: Arc<rustls::ClientConfig>,
}

/// The method that reserves an upload: its URL and the file's id.
const RESERVE: &str = "files.getUploadURLExternal";
/// The method that shares an uploaded file in a conversation.
const COMPLETE: &str = "files.completeUploadExternal";

/// A Web API call's arguments, as the method takes them.
#[derive(Clone, Copy)]
enum Args<'a> {
    /// A JSON object (`application/json`).
    Json(&'a Value),
    /// Form fields (`application/x-www-form-urlencoded`):
    /// `files.getUploadURLExternal` takes no JSON.
    Form(&'a [(&'a str, &'a str)]),
}

/// Who the bot is, from `auth.test`.
#[derive(Debug, Clone, Default)]
struct Identity {
    /// The bot user's id (`U…`): mentions name it, its messages carry it.
    user_id: String,
    /// The bot's id (`B…`): its messages carry it as `bot_id`.
    bot_id: Option<String>,
}

pub struct Slack {
    name: String,
    /// A digest of the bot token: names the account before Slack is asked.
    account: String,
    settings: SlackSettings,
    client: reqwest::Client,
    /// Learnt at the start of receiving; until then no message is taken.
    identity: Mutex<Option<Identity>>,
    /// Per Web API method, no call before this (a 429's `Retry-After`).
    not_before: Mutex<HashMap<String, Instant>>,
    /// The Events API's signing key (with `Receiving::Events`).
    events_key: Option<ring::hmac::Key>,
    /// The hub while this process receives for the account (the Events
    /// API's requests are handed to it).
    hub: Mutex<Option<Arc<Hub>>>,
}

impl Slack {
    pub fn new(name: &str, settings: SlackSettings) -> Result<Self, String> {
        let api_base = settings.api_base.trim().trim_end_matches('/').to_owned();
        if !(api_base.starts_with("http://") || api_base.starts_with("https://")) {
            return Err(format!(
                "api_base {:?} is not an http:// or https:// URL",
                api_base.chars().take(40).collect::<String>()
            ));
        }
        if !settings.bot_token.starts_with("xoxb-") {
            return Err(
                "the Slack bot token does not look like one (expected xoxb-… from the app's OAuth page)"
                    .to_owned(),
            );
        }
        if let Receiving::Socket { app_token } = &settings.receiving
            && !app_token.starts_with("xapp-")
        {
            return Err(
                "the Slack app-level token does not look like one (expected xapp-… with connections:write)"
                    .to_owned(),
            );
        }
        let client = crate::net::http_client(Duration::from_secs(30))
            .map_err(|err| format!("cannot build the HTTP client: {err}"))?;
        let account = account_of(&settings.bot_token);
        let events_key = match &settings.receiving {
            Receiving::Events { signing_secret, .. } => Some(ring::hmac::Key::new(
                ring::hmac::HMAC_SHA256,
                signing_secret.as_bytes(),
            )),
            Receiving::Socket { .. } => None,
        };
        Ok(Self {
            name: name.to_owned(),
            account,
            settings: SlackSettings {
                api_base,
                ..settings
            },
            client,
            identity: Mutex::new(None),
            not_before: Mutex::new(HashMap::new()),
            events_key,
            hub: Mutex::new(None),
        })
    }

    /// Whether `url` is where Slack keeps files, so the bot token may be
    /// sent there: `https://files.slack.com/`, or the origin of `api_base`
    /// (a test server, an Enterprise Grid proxy).
    fn file_host(&self, url: &str) -> bool {
        download::on_origin(url, &["https://files.slack.com", &self.settings.api_base])
    }

    /// A file's bytes from its private URL, with the bot token (the app
    /// needs `files:read`), at most `limit` bytes.
    async fn download(&self, url: &str, limit: u64) -> Result<Vec<u8>, FetchError> {
        if !self.file_host(url) {
            return Err(FetchError::Failed(
                "the file is not on Slack's file host".to_owned(),
            ));
        }
        let response = self
            .client
            .get(url)
            .bearer_auth(&self.settings.bot_token)
            .send()
            .await
            .map_err(FetchError::request)?;
        // Without `files:read` Slack answers a file's URL with its sign-in page.
        let html = response
            .headers()
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.starts_with("text/html"));
        if html && response.status().is_success() {
            return Err(FetchError::Failed(
                "Slack answered with a web page: the app needs the files:read scope".to_owned(),
            ));
        }
        download::read_capped(response, limit, "Slack's file host").await
    }

    /// Calls a Web API method with the bot token.
    async fn call(&self, method: &str, body: &Value) -> Result<Value, DeliveryError> {
        self.call_as(method, &self.settings.bot_token, Args::Json(body))
            .await
    }

    /// Calls a Web API method with `token`: its arguments in, `{"ok": …}`
    /// out, errors classified and never carrying a token. A method Slack
    /// asked to wait for is not called before its time.
    async fn call_as(
        &self,
        method: &str,
        token: &str,
        args: Args<'_>,
    ) -> Result<Value, DeliveryError> {
        let what = format!("slack {method}");
        self.not_held_back(method)?;
        let url = format!("{}/{method}", self.settings.api_base);
        let mut request = self.client.post(&url).bearer_auth(token);
        request = match args {
            Args::Json(body) => request.json(body),
            Args::Form(fields) => {
                let mut form = form_urlencoded::Serializer::new(String::new());
                for (name, value) in fields {
                    form.append_pair(name, value);
                }
                request
                    .header("content-type", "application/x-www-form-urlencoded")
                    .body(form.finish())
            }
        };
        let response = request
            .send()
            .await
            .map_err(|err| DeliveryError::unanswered(&what, err))?;
        let status = response.status().as_u16();
        let retry_after = retry_after(&response);
        if status == 429 {
            let wait = retry_after.unwrap_or(Duration::from_secs(1));
            self.not_before
                .lock()
                .insert(method.to_owned(), Instant::now() + wait);
            tracing::warn!(
                method,
                wait_secs = wait.as_secs(),
                "Slack rate limited a method"
            );
            return Err(DeliveryError::new(
                FailureKind::RateLimit,
                format!("{what}: 429 ratelimited"),
            )
            .with_retry_after(Some(wait)));
        }
        let value: Value = response
            .json()
            .await
            .map_err(|err| DeliveryError::unreadable(&what, status, err))?;
        if value["ok"].as_bool() == Some(true) {
            return Ok(value);
        }
        Err(classify(&what, status, &value).with_retry_after(retry_after))
    }

    /// Refuses at once, as `rate_limit` with the time left, a call of a
    /// method Slack asked to wait for.
    fn not_held_back(&self, method: &str) -> Result<(), DeliveryError> {
        match self.waiting(method) {
            None => Ok(()),
            Some(left) => Err(DeliveryError::new(
                FailureKind::RateLimit,
                format!(
                    "slack {method}: rate limited for {} ms more",
                    left.as_millis()
                ),
            )
            .with_retry_after(Some(left))),
        }
    }

    /// How long `method` must still wait, if it must.
    fn waiting(&self, method: &str) -> Option<Duration> {
        let mut limits = self.not_before.lock();
        let until = *limits.get(method)?;
        let now = Instant::now();
        if until <= now {
            limits.remove(method);
            return None;
        }
        Some(until - now)
    }

    /// `auth.test`: who the bot is.
    async fn identify(&self) -> Result<Identity, DeliveryError> {
        let answer = self.call("auth.test", &json!({})).await?;
        let user_id = answer["user_id"].as_str().unwrap_or_default().to_owned();
        if user_id.is_empty() {
            return Err(DeliveryError::new(
                FailureKind::Unknown,
                "slack auth.test: the answer has no user_id",
            ));
        }
        let identity = Identity {
            user_id,
            bot_id: answer["bot_id"].as_str().map(str::to_owned),
        };
        tracing::info!(
            channel = %self.name,
            user = %identity.user_id,
            team = answer["team_id"].as_str().unwrap_or_default(),
            "Slack bot identified"
        );
        *self.identity.lock() = Some(identity.clone());
        Ok(identity)
    }

    /// Asks `auth.test` until it answers (a refused token stops: `false`).
    async fn identify_until(&self, hub: &Hub, cancel: &CancellationToken) -> bool {
        let mut failures: u32 = 0;
        loop {
            let err = tokio::select! {
                _ = cancel.cancelled() => return false,
                result = self.identify() => match result {
                    Ok(_) => return true,
                    Err(err) => err,
                },
            };
            hub.down(&err.to_string());
            if matches!(err.kind, FailureKind::Auth) {
                tracing::error!(error = %err, "the Slack bot token was refused; the channel stops");
                return false;
            }
            failures += 1;
            let wait = err.retry_after.unwrap_or_else(|| backoff(failures));
            tracing::warn!(error = %err, wait_secs = wait.as_secs(), "Slack auth.test failed");
            tokio::select! {
                _ = cancel.cancelled() => return false,
                _ = tokio::time::sleep(wait) => {}
            }
        }
    }

    /// The body of a post or an update of `unit` in `target`.
    fn message_body(&self, target: &Target, unit: &Unit) -> Value {
        let (text, markup) = match &unit.markup {
            Some(markup) => (markup.clone(), true),
            None => (escape(&unit.text), false),
        };
        let mut body = json!({
            "channel": target.id,
            "text": text,
            "mrkdwn": markup,
            "unfurl_links": false,
            "unfurl_media": false,
        });
        if unit.buttons.is_empty() {
            body["blocks"] = json!([]);
        } else {
            let section = if markup {
                json!({"type": "mrkdwn", "text": text})
            } else {
                json!({"type": "plain_text", "text": unit.text})
            };
            let buttons: Vec<Value> = unit
                .buttons
                .iter()
                .enumerate()
                .map(|(i, b)| {
                    json!({
                        "type": "button",
                        "action_id": format!("pincer-{i}"),
                        "text": {"type": "plain_text", "text": b.label},
                        "value": b.data,
                    })
                })
                .collect();
            body["blocks"] = json!([
                {"type": "section", "text": section},
                {"type": "actions", "block_id": "pincer", "elements": buttons},
            ]);
        }
        body
    }

    /// Shares `file` in `target` with `unit`'s text as its comment (see
    /// the module's "Files"); the file's id.
    async fn share(
        &self,
        target: &Target,
        unit: &Unit,
        file: &OutFile,
    ) -> Result<String, DeliveryError> {
        // A completion Slack asked to wait for: no upload before its time.
        self.not_held_back(COMPLETE)?;
        let (upload_url, file_id) = self.reserve(file).await.map_err(not_shared)?;
        self.upload(&upload_url, file).await.map_err(not_shared)?;
        let comment = match &unit.markup {
            Some(markup) => markup.clone(),
            None => escape(&unit.text),
        };
        let mut body = json!({
            "files": [{"id": file_id, "title": file.name}],
            "channel_id": target.id,
            "initial_comment": comment,
        });
        if let Some(thread) = &target.thread {
            body["thread_ts"] = json!(thread);
        }
        self.call(COMPLETE, &body).await?;
        Ok(file_id)
    }

    /// `files.getUploadURLExternal`: where to upload `file`, and its id.
    async fn reserve(&self, file: &OutFile) -> Result<(String, String), DeliveryError> {
        let length = file.text.len().to_string();
        let fields = [
            ("filename", file.name.as_str()),
            ("length", length.as_str()),
        ];
        let ticket = self
            .call_as(RESERVE, &self.settings.bot_token, Args::Form(&fields))
            .await?;
        match (ticket["upload_url"].as_str(), ticket["file_id"].as_str()) {
            (Some(url), Some(id)) if !url.is_empty() && !id.is_empty() => {
                Ok((url.to_owned(), id.to_owned()))
            }
            _ => Err(DeliveryError::new(
                FailureKind::Transient,
                format!("slack {RESERVE}: the answer has no upload_url or file_id"),
            )),
        }
    }

    /// POSTs `file`'s bytes to the upload URL Slack gave. The URL is
    /// pre-signed, so the bot token stays home; and it must be Slack's file
    /// host (or `api_base`'s), so a file goes nowhere else.
    async fn upload(&self, url: &str, file: &OutFile) -> Result<(), DeliveryError> {
        const WHAT: &str = "slack file upload";
        if !self.file_host(url) {
            return Err(DeliveryError::new(
                FailureKind::InvalidPayload,
                format!("{WHAT}: the upload URL is not on Slack's file host"),
            ));
        }
        let response = self
            .client
            .post(url)
            .header("content-type", file.mime_type.as_str())
            .body(file.text.clone().into_bytes())
            .send()
            .await
            .map_err(|err| DeliveryError::unanswered(WHAT, err))?;
        let status = response.status().as_u16();
        if response.status().is_success() {
            return Ok(());
        }
        Err(
            DeliveryError::new(super::status_kind(status), format!("{WHAT}: HTTP {status}"))
                .with_retry_after(retry_after(&response)),
        )
    }

    /// An Events API payload (`event_callback`) as a channel event; `None`
    /// for what Pincer does not read (its own messages, edits, other kinds,
    /// a channel message not addressed to it).
    pub fn normalize_event(&self, payload: &Value) -> Option<Inbound> {
        let identity = self.identity.lock().clone()?;
        let event = &payload["event"];
        let kind = event["type"].as_str()?;
        if kind != "message" && kind != "app_mention" {
            return None;
        }
        match event["subtype"].as_str() {
            None | Some("file_share" | "thread_broadcast") => {}
            Some(_) => return None,
        }
        let user = event["user"].as_str()?;
        let bot = event["bot_id"].as_str();
        if user == identity.user_id || (bot.is_some() && bot == identity.bot_id.as_deref()) {
            return None;
        }
        let channel = event["channel"].as_str()?;
        let ts = event["ts"].as_str()?;
        let mention = format!("<@{}>", identity.user_id);
        let raw = event["text"].as_str().unwrap_or_default();
        let direct = channel.starts_with('D');
        let thread = event["thread_ts"].as_str().map(str::to_owned);
        let target = if direct {
            Target {
                kind: if thread.is_some() {
                    TargetKind::Thread
                } else {
                    TargetKind::Direct
                },
                id: channel.to_owned(),
                thread,
            }
        } else {
            let addressed = kind == "app_mention" || raw.contains(&mention);
            let listed = self.settings.channels.is_empty()
                || self.settings.channels.iter().any(|c| c == channel);
            if !addressed || !listed {
                return None;
            }
            Target {
                kind: TargetKind::Thread,
                id: channel.to_owned(),
                thread: Some(thread.unwrap_or_else(|| ts.to_owned())),
            }
        };
        let text = unescape(raw.replace(&mention, " ").trim());
        let attachments: Vec<Attachment> = event["files"]
            .as_array()
            .map(|files| {
                files
                    .iter()
                    .map(|f| Attachment {
                        kind: "file".to_owned(),
                        name: f["name"].as_str().map(str::to_owned),
                        // Where its bytes are (with the bot token), else its id.
                        reference: f["url_private_download"]
                            .as_str()
                            .or_else(|| f["url_private"].as_str())
                            .or_else(|| f["id"].as_str())
                            .unwrap_or_default()
                            .to_owned(),
                        size: f["size"].as_u64(),
                        mime_type: f["mimetype"].as_str().map(str::to_owned),
                    })
                    .collect()
            })
            .unwrap_or_default();
        if text.is_empty() && attachments.is_empty() {
            return None;
        }
        Some(Inbound::Message(ChannelMessage {
            id: format!("{channel}:{ts}"),
            channel: self.name.clone(),
            account: self.account.clone(),
            target,
            sender: Some(Actor {
                id: user.to_owned(),
                name: None,
                is_bot: bot.is_some(),
            }),
            body: text,
            attachments,
            relation: None,
            origin: if bot.is_some() {
                MessageOrigin::ExternalBot
            } else {
                MessageOrigin::User
            },
            at: millis(ts),
        }))
    }

    /// A `block_actions` payload (a button of Pincer's pressed) as a press.
    pub fn normalize_action(&self, payload: &Value) -> Option<Inbound> {
        if payload["type"].as_str() != Some("block_actions") {
            return None;
        }
        let action = payload["actions"].as_array()?.first()?;
        let channel = payload["channel"]["id"]
            .as_str()
            .or_else(|| payload["container"]["channel_id"].as_str())?;
        let message = &payload["message"];
        let message_ts = message["ts"]
            .as_str()
            .or_else(|| payload["container"]["message_ts"].as_str())?;
        let thread = message["thread_ts"].as_str().map(str::to_owned);
        let kind = match (&thread, channel.starts_with('D')) {
            (Some(_), _) => TargetKind::Thread,
            (None, true) => TargetKind::Direct,
            (None, false) => TargetKind::Group,
        };
        Some(Inbound::Button {
            id: format!(
                "{channel}:{message_ts}:{}",
                action["action_ts"].as_str().unwrap_or_default()
            ),
            target: Target {
                kind,
                id: channel.to_owned(),
                thread,
            },
            sender: payload["user"]["id"].as_str()?.to_owned(),
            data: action["value"].as_str().unwrap_or_default().to_owned(),
        })
    }
}

/// The account's name: `bot-` and the start of the bot token's SHA-256, so
/// the account is known (its lease, its outbox) before Slack is asked.
fn account_of(token: &str) -> String {
    use sha2::Digest as _;
    let digest = sha2::Sha256::digest(token.as_bytes());
    format!("bot-{}", hex::encode(&digest[..6]))
}

/// 1 s doubling, up to a minute.
fn backoff(failures: u32) -> Duration {
    Duration::from_secs(
        2u64.saturating_pow(failures.saturating_sub(1).min(6))
            .min(60),
    )
}

/// Slack's `ts` (`1700000000.000100`) in milliseconds.
fn millis(ts: &str) -> i64 {
    ts.parse::<f64>()
        .map(|seconds| (seconds * 1000.0) as i64)
        .unwrap_or(0)
}

/// The wait an answer's `Retry-After` asks for.
fn retry_after(response: &reqwest::Response) -> Option<Duration> {
    response
        .headers()
        .get("retry-after")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok())
        .map(Duration::from_secs)
}

/// A failure of an upload before `files.completeUploadExternal`: nothing
/// was shared (Slack discards an upload never completed), so an outcome
/// unknown is `transient`, and the unit is tried again with a new upload.
fn not_shared(err: DeliveryError) -> DeliveryError {
    if err.kind == FailureKind::Unknown {
        DeliveryError {
            kind: FailureKind::Transient,
            ..err
        }
    } else {
        err
    }
}

/// Slack's escaped text (`&amp;`, `&lt;`, `&gt;`) as written.
fn unescape(text: &str) -> String {
    text.replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&amp;", "&")
}

/// A Web API error (`ok: false`) as a failure class, by its `error` code
/// first, then by the HTTP status.
fn classify(what: &str, status: u16, value: &Value) -> DeliveryError {
    let error = value["error"].as_str().unwrap_or("no error code");
    let kind = match error {
        "ratelimited" => FailureKind::RateLimit,
        "invalid_auth" | "not_authed" | "account_inactive" | "token_revoked" | "token_expired"
        | "no_permission" => FailureKind::Auth,
        "missing_scope"
        | "not_in_channel"
        | "is_archived"
        | "restricted_action"
        | "cant_update_message"
        | "cant_delete_message"
        | "edit_window_closed"
        | "team_access_not_granted"
        | "ekm_access_denied"
        | "file_uploads_disabled"
        | "file_uploads_except_images_disabled"
        | "file_type_not_allowed"
        | "cant_delete_file"
        | "delete_not_allowed" => FailureKind::Permission,
        "channel_not_found" | "message_not_found" | "thread_not_found" | "file_not_found"
        | "file_deleted" => FailureKind::NotFound,
        "msg_too_long"
        | "no_text"
        | "invalid_blocks"
        | "invalid_blocks_format"
        | "invalid_arguments"
        | "invalid_json"
        | "json_not_object"
        | "too_many_attachments"
        | "missing_argument"
        | "file_upload_size_restricted" => FailureKind::InvalidPayload,
        // Slack: "it's possible some aspect of the operation succeeded".
        "internal_error" | "fatal_error" => FailureKind::Unknown,
        "service_unavailable" | "request_timeout" => FailureKind::Transient,
        _ if status == 200 => FailureKind::InvalidPayload,
        _ => super::status_kind(status),
    };
    DeliveryError::new(
        kind,
        format!("{what}: {}", error.chars().take(80).collect::<String>()),
    )
}

impl Adapter for Slack {
    fn channel(&self) -> &str {
        &self.name
    }

    fn account(&self) -> &str {
        &self.account
    }

    fn kind(&self) -> &'static str {
        "slack"
    }

    fn fetch<'a>(
        &'a self,
        attachment: &'a Attachment,
        limit: u64,
    ) -> BoxFuture<'a, Result<Vec<u8>, FetchError>> {
        Box::pin(self.download(&attachment.reference, limit))
    }

    /// `mrkdwn` in messages of at most [`MAX_LEN`] characters of it, the
    /// plain text beside it (sent instead when Slack refuses the blocks).
    fn render(&self, markdown: &str) -> Vec<Unit> {
        let measure = |piece: &str| render::chars(&mrkdwn(piece));
        render::chunk(markdown, MAX_LEN, &measure)
            .into_iter()
            .map(|piece| Unit {
                markup: Some(mrkdwn(&piece)),
                text: render::plain(&piece),
                buttons: Vec::new(),
                file: None,
            })
            .collect()
    }

    /// A channel id (`D…` a direct message, `C…` or `G…` a channel),
    /// optionally `/THREAD_TS`.
    fn target(&self, to: &str) -> Result<Target, String> {
        let kind = if to.trim().starts_with('D') {
            TargetKind::Direct
        } else {
            TargetKind::Group
        };
        let target = super::default_target(to, kind)?;
        if !target.id.chars().all(|c| c.is_ascii_alphanumeric()) {
            return Err("a Slack channel is its id (C…, G… or D…), not its name".to_owned());
        }
        Ok(target)
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities {
            max_len: MAX_LEN,
            length_unit: LengthUnit::Chars,
            edit: true,
            delete: true,
            buttons: true,
            reactions: false,
            threads: true,
            // `files.getUploadURLExternal`, the upload, then
            // `files.completeUploadExternal` (see the module's "Files").
            files: true,
            // `chat.update` is Tier 3 (50+ a minute).
            edit_interval: Duration::from_secs(1),
            markup: Some("mrkdwn"),
            working_after: None,
            // A post has no idempotency key; an update sets the whole
            // message; a deleted message stays deleted.
            idempotent: Idempotence {
                send: false,
                edit: true,
                delete: true,
            },
        }
    }

    fn send<'a>(
        &'a self,
        target: &'a Target,
        unit: &'a Unit,
        _reply_to: Option<&'a str>,
        _idempotency_key: &'a str,
    ) -> BoxFuture<'a, Result<String, DeliveryError>> {
        Box::pin(async move {
            if let Some(file) = &unit.file {
                return self.share(target, unit, file).await;
            }
            let mut body = self.message_body(target, unit);
            if unit.buttons.is_empty() {
                body.as_object_mut().map(|o| o.remove("blocks"));
            }
            if let Some(thread) = &target.thread {
                body["thread_ts"] = json!(thread);
            }
            let sent = self.call("chat.postMessage", &body).await?;
            sent["ts"].as_str().map(str::to_owned).ok_or_else(|| {
                DeliveryError::new(
                    FailureKind::Unknown,
                    "slack chat.postMessage: the answer has no ts",
                )
            })
        })
    }

    fn edit<'a>(
        &'a self,
        target: &'a Target,
        platform_id: &'a str,
        unit: &'a Unit,
    ) -> BoxFuture<'a, Result<(), DeliveryError>> {
        Box::pin(async move {
            let mut body = self.message_body(target, unit);
            body["ts"] = json!(platform_id);
            self.call("chat.update", &body).await.map(|_| ())
        })
    }

    /// `chat.delete` of a message (its `ts`), `files.delete` of a shared
    /// file (its id, `F…`).
    fn delete<'a>(
        &'a self,
        target: &'a Target,
        platform_id: &'a str,
    ) -> BoxFuture<'a, Result<(), DeliveryError>> {
        Box::pin(async move {
            if platform_id.starts_with('F') {
                let body = json!({"file": platform_id});
                return self.call("files.delete", &body).await.map(|_| ());
            }
            let body = json!({"channel": target.id, "ts": platform_id});
            self.call("chat.delete", &body).await.map(|_| ())
        })
    }

    fn receive(
        self: Arc<Self>,
        hub: Arc<Hub>,
        cancel: CancellationToken,
    ) -> BoxFuture<'static, ()> {
        Box::pin(async move {
            if !self.identify_until(&hub, &cancel).await {
                return;
            }
            match self.settings.receiving.clone() {
                Receiving::Socket { app_token } => {
                    socket::run(self, hub, app_token, cancel).await;
                }
                Receiving::Events { .. } => {
                    hub.up();
                    *self.hub.lock() = Some(hub);
                    tracing::info!(channel = %self.name, endpoint = %format!("/channels/{}/{}", self.name, events::ENDPOINT), "Slack Events API receiving");
                    cancel.cancelled().await;
                    *self.hub.lock() = None;
                }
            }
        })
    }

    fn receives_over_http(&self) -> bool {
        self.events_key.is_some()
    }

    fn own_listener(&self) -> Option<super::OwnListener> {
        match &self.settings.receiving {
            Receiving::Events {
                listen: Some(addr), ..
            } => Some(super::OwnListener {
                addr: *addr,
                endpoint: events::ENDPOINT,
            }),
            Receiving::Events { listen: None, .. } | Receiving::Socket { .. } => None,
        }
    }

    fn http(&self, request: super::HttpRequest) -> BoxFuture<'_, super::HttpReply> {
        Box::pin(async move {
            match &self.events_key {
                Some(key) if request.endpoint == events::ENDPOINT => {
                    self.event_request(key, &request.headers, &request.body)
                        .await
                }
                Some(_) | None => super::HttpReply::error(
                    404,
                    format!(
                        "Slack's events for channel {} are at /channels/{}/{}, with a signing secret",
                        self.name,
                        self.name,
                        events::ENDPOINT
                    ),
                ),
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    pub(super) fn slack() -> Slack {
        let slack = Slack::new(
            "slack",
            SlackSettings {
                bot_token: "xoxb-1-2-secret".into(),
                receiving: Receiving::Socket {
                    app_token: "xapp-1-A1-2-secret".into(),
                },
                api_base: "http://127.0.0.1:9/api".into(),
                channels: vec!["C1".into()],
                tls: Arc::new(crate::net::tls_config(None).unwrap()),
            },
        )
        .unwrap();
        *slack.identity.lock() = Some(Identity {
            user_id: "UBOT".into(),
            bot_id: Some("BBOT".into()),
        });
        slack
    }

    #[test]
    fn errors_are_classified_by_their_code_then_status() {
        for (error, status, kind) in [
            ("invalid_auth", 200, FailureKind::Auth),
            ("channel_not_found", 200, FailureKind::NotFound),
            ("message_not_found", 200, FailureKind::NotFound),
            ("cant_update_message", 200, FailureKind::Permission),
            ("msg_too_long", 200, FailureKind::InvalidPayload),
            ("invalid_blocks", 200, FailureKind::InvalidPayload),
            ("fatal_error", 200, FailureKind::Unknown),
            ("service_unavailable", 503, FailureKind::Transient),
            ("something_new", 200, FailureKind::InvalidPayload),
            ("something_new", 502, FailureKind::Transient),
            ("ratelimited", 429, FailureKind::RateLimit),
            ("file_uploads_disabled", 200, FailureKind::Permission),
            ("file_not_found", 200, FailureKind::NotFound),
            ("file_deleted", 200, FailureKind::NotFound),
            ("cant_delete_file", 200, FailureKind::Permission),
        ] {
            let err = classify(
                "slack chat.postMessage",
                status,
                &json!({"ok": false, "error": error}),
            );
            assert_eq!(err.kind, kind, "{error} {status}");
            assert_eq!(err.message, format!("slack chat.postMessage: {error}"));
        }
    }

    /// A 429 keeps that method, and only that one, from being called
    /// before its `Retry-After`.
    #[tokio::test]
    async fn a_rate_limited_method_waits_out_its_retry_after() {
        use crate::channels::tests::{Answer, serve_once};
        let (url, request) = serve_once(Answer::Raw(
            "HTTP/1.1 429 Too Many Requests\r\nretry-after: 30\r\ncontent-length: 35\r\n\r\n{\"ok\":false,\"error\":\"ratelimited\"}",
        ))
        .await;
        let mut settings = slack().settings.clone();
        settings.api_base = url;
        let slack = Slack::new("slack", settings).unwrap();
        let err = slack.call("chat.update", &json!({})).await.unwrap_err();
        assert_eq!(err.kind, FailureKind::RateLimit);
        assert_eq!(err.retry_after, Some(Duration::from_secs(30)));
        assert!(request.await.unwrap().contains("Bearer xoxb-1-2-secret"));
        // No request: the server is gone, yet the answer is the wait left.
        let again = slack.call("chat.update", &json!({})).await.unwrap_err();
        assert_eq!(again.kind, FailureKind::RateLimit);
        assert!(
            again.retry_after.unwrap() > Duration::from_secs(28),
            "{again}"
        );
        // Another method is not held back (it finds the server gone).
        let other = slack
            .call("chat.postMessage", &json!({}))
            .await
            .unwrap_err();
        assert_eq!(other.kind, FailureKind::Transient, "{other}");
        assert!(!other.message.contains("secret"));
    }

    /// An HTTP answer of `body` (JSON), as `serve_once` writes it.
    fn answer(body: &Value) -> &'static str {
        let body = body.to_string();
        Box::leak(
            format!(
                "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
                body.len()
            )
            .into_boxed_str(),
        )
    }

    fn slack_at(url: String) -> Slack {
        let mut settings = slack().settings.clone();
        settings.api_base = format!("{url}/api");
        Slack::new("slack", settings).unwrap()
    }

    fn file_unit() -> Unit {
        Unit {
            text: "Changes to 1 file: a.rs".into(),
            file: Some(OutFile {
                name: "changes.diff".into(),
                mime_type: "text/x-diff".into(),
                text: "+fn a() {}\n".into(),
            }),
            ..Unit::default()
        }
    }

    /// Nothing is shared before `files.completeUploadExternal`, so an
    /// upload whose first call lost its answer is tried again (`transient`),
    /// never left `unknown`; the call is form-encoded.
    #[tokio::test]
    async fn an_upload_cut_off_before_it_is_shared_is_retried_not_unknown() {
        use crate::channels::tests::{Answer, serve_once};
        let (url, request) = serve_once(Answer::Close).await;
        let slack = slack_at(url);
        let target = slack.target("C1/5.2").unwrap();
        let err = slack
            .send(&target, &file_unit(), None, "k")
            .await
            .unwrap_err();
        assert_eq!(err.kind, FailureKind::Transient, "{err}");
        let request = request.await.unwrap();
        assert!(
            request.starts_with("POST /api/files.getUploadURLExternal "),
            "{request}"
        );
        assert!(request.contains("application/x-www-form-urlencoded"));
        assert!(request.ends_with("\r\n\r\nfilename=changes.diff&length=11"));
    }

    /// The bytes go only to Slack's file host (or `api_base`'s), whatever
    /// URL an answer names.
    #[tokio::test]
    async fn an_upload_url_elsewhere_gets_no_bytes() {
        use crate::channels::tests::{Answer, serve_once};
        let (url, _request) = serve_once(Answer::Raw(answer(&json!({"ok": true,
            "upload_url": "https://files.example.com/upload/v1/x", "file_id": "F1"}))))
        .await;
        let slack = slack_at(url);
        let target = slack.target("C1").unwrap();
        let err = slack
            .send(&target, &file_unit(), None, "k")
            .await
            .unwrap_err();
        assert_eq!(err.kind, FailureKind::InvalidPayload);
        assert_eq!(
            err.message,
            "slack file upload: the upload URL is not on Slack's file host"
        );
    }

    /// A completion Slack asked to wait for holds back the whole upload:
    /// no bytes go up to be discarded.
    #[tokio::test]
    async fn a_rate_limited_completion_holds_back_the_upload() {
        let s = slack();
        s.not_before.lock().insert(
            COMPLETE.to_owned(),
            Instant::now() + Duration::from_secs(30),
        );
        let target = s.target("C1").unwrap();
        // `api_base` is a closed port: any call would fail otherwise.
        let err = s.send(&target, &file_unit(), None, "k").await.unwrap_err();
        assert_eq!(err.kind, FailureKind::RateLimit, "{err}");
        assert!(
            err.message
                .starts_with("slack files.completeUploadExternal: rate limited")
        );
    }

    /// A shared file (its id) is deleted with `files.delete`.
    #[tokio::test]
    async fn a_shared_file_is_deleted_by_its_id() {
        use crate::channels::tests::{Answer, serve_once};
        let (url, request) = serve_once(Answer::Raw(answer(&json!({"ok": true})))).await;
        let slack = slack_at(url);
        let target = slack.target("C1").unwrap();
        slack.delete(&target, "F0123ABC").await.unwrap();
        let request = request.await.unwrap();
        assert!(request.starts_with("POST /api/files.delete "), "{request}");
        assert!(request.ends_with(r#"{"file":"F0123ABC"}"#), "{request}");
    }

    #[test]
    fn messages_mentions_and_presses_normalize() {
        let s = slack();
        let dm = json!({"type": "event_callback", "event": {"type": "message", "channel": "D1",
            "channel_type": "im", "user": "U1", "text": "a &lt;b&gt; &amp; c", "ts": "1700000000.000100"}});
        let Some(Inbound::Message(m)) = s.normalize_event(&dm) else {
            panic!("not a message")
        };
        assert_eq!(m.id, "D1:1700000000.000100");
        assert_eq!(m.target.kind, TargetKind::Direct);
        assert_eq!(m.body, "a <b> & c");
        assert_eq!(m.at, 1_700_000_000_000);
        // A thread in a direct message is a conversation of its own.
        let threaded = json!({"event": {"type": "message", "channel": "D1", "user": "U1",
            "text": "more", "ts": "5.0", "thread_ts": "4.0"}});
        let Some(Inbound::Message(m)) = s.normalize_event(&threaded) else {
            panic!("not a message")
        };
        assert_eq!(m.target.kind, TargetKind::Thread);
        assert_eq!(m.target.thread.as_deref(), Some("4.0"));
        // A channel message: only when mentioned, then in its thread.
        let plain = json!({"event": {"type": "message", "channel": "C1", "user": "U1",
            "text": "hello all", "ts": "5.1"}});
        assert!(s.normalize_event(&plain).is_none());
        let mention = json!({"event": {"type": "app_mention", "channel": "C1", "user": "U1",
            "text": "<@UBOT> /usage", "ts": "5.2"}});
        let Some(Inbound::Message(m)) = s.normalize_event(&mention) else {
            panic!("not a message")
        };
        assert_eq!(m.body, "/usage");
        assert_eq!(m.target.thread.as_deref(), Some("5.2"));
        assert_eq!(m.target.kind, TargetKind::Thread);
        // Not a listed channel; its own message; an edit.
        let elsewhere = json!({"event": {"type": "app_mention", "channel": "C9", "user": "U1",
            "text": "<@UBOT> hi", "ts": "5.3"}});
        assert!(s.normalize_event(&elsewhere).is_none());
        let own = json!({"event": {"type": "message", "channel": "D1", "user": "UBOT",
            "bot_id": "BBOT", "text": "reply", "ts": "5.4"}});
        assert!(s.normalize_event(&own).is_none());
        let edit = json!({"event": {"type": "message", "subtype": "message_changed",
            "channel": "D1", "ts": "5.5"}});
        assert!(s.normalize_event(&edit).is_none());
        let press = json!({"type": "block_actions", "user": {"id": "U1"},
            "channel": {"id": "C1"}, "message": {"ts": "6.1", "thread_ts": "5.2"},
            "actions": [{"action_id": "pincer-0", "value": "ap:x:allow_once", "action_ts": "6.2"}]});
        let Some(Inbound::Button {
            id,
            target,
            data,
            sender,
        }) = s.normalize_action(&press)
        else {
            panic!("not a press")
        };
        assert_eq!(id, "C1:6.1:6.2");
        assert_eq!(target.thread.as_deref(), Some("5.2"));
        assert_eq!((data.as_str(), sender.as_str()), ("ap:x:allow_once", "U1"));
    }

    #[test]
    fn slack_declares_what_it_does_and_renders_within_it() {
        let s = slack();
        let caps = s.capabilities();
        assert_eq!(
            caps.idempotent,
            Idempotence {
                send: false,
                edit: true,
                delete: true
            }
        );
        assert!(caps.threads && caps.buttons && caps.edit && caps.delete && caps.files);
        let long = "**bold** & <b> ".repeat(1_000);
        let units = s.render(&long);
        assert!(units.len() > 1);
        for unit in &units {
            assert!(unit.markup.as_ref().unwrap().chars().count() <= MAX_LEN);
        }
        assert!(s.account().starts_with("bot-"));
        assert!(!s.account().contains("secret"));
        let target = s.target("C1/5.2").unwrap();
        assert_eq!(target.thread.as_deref(), Some("5.2"));
        assert!(s.target("#general").is_err());
    }
}
