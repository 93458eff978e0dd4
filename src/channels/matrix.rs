//! Matrix (`kind = "matrix"`): a user on a homeserver, through the
//! Client-Server API v3.
//!
//! **Logging in.** With an access token (`access_token_env`) it asks
//! `/account/whoami` whose token it is and on which device. With a password
//! (`password_env`) it logs in with `m.login.password` and keeps the device
//! id and the access token in the channel's cursor store; after a restart
//! it uses the stored token while the homeserver takes it, else logs in
//! again *naming the stored device*: the homeserver deduplicates
//! transaction ids per device, so a send repeated after a restart is still
//! recognised.
//!
//! **Receiving.** `/sync` long polls (30 s). The `since` token is the
//! cursor, stored with the last event of each batch handed to the hub (in
//! the same transaction) or, for a batch with nothing for Pincer, moved
//! with `Hub::skip`. The first start has no token: one sync whose history
//! is skipped. `m.text` messages (not `m.notice`, not edits) of joined
//! rooms from anyone but itself are messages, the event id their id; a
//! room of two members is a direct chat, a larger one a group, where a
//! message is for Pincer only when addressed (`NAME: …` or `NAME, …`, its
//! display name or localpart in any case, or a mention of its user id).
//! Invites are accepted from allowed (or paired) senders and to the
//! `rooms` configured, declined otherwise. An encrypted room gets one
//! notice that encrypted rooms are not supported, and nothing of it is read.
//! A reaction (👍 ✅ allow once, 👎 ❌ reject) to an approval prompt
//! answers it, as a press of the prompt's button would.
//!
//! **Sending.** `PUT …/send/m.room.message/{txnId}`, the transaction id
//! derived from the send's idempotency key: the homeserver answers a repeat
//! with the first event, so a send whose outcome was lost is sent again
//! safely (`idempotent`). The body is the reply's Markdown, with
//! `org.matrix.custom.html` beside it; a reply is cut so that body and
//! HTML together stay under [`MAX_EVENT_BYTES`] (an event is at most
//! 65,536 bytes). Live drafts are `m.replace` edits; a deletion is a
//! redaction. A unit with a file (a run's `changes.diff`, a long reply's
//! `reply.md`) is an `m.file` event: the file is uploaded to the media
//! repository first, and the event names its `mxc://` URI with the unit's
//! text as caption, under the same transaction id. An upload is not
//! idempotent: one repeated (its answer lost, a crash before the event)
//! leaves an unreferenced copy in the media repository, never a second
//! message.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use parking_lot::Mutex;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use super::{
    Adapter, Capabilities, DeliveryError, Hub, Idempotence, Inbound, LengthUnit, Received, render,
};
use crate::core::approval::ApprovalDecision;
use crate::core::channel::{
    Actor, ChannelMessage, FailureKind, MessageOrigin, OutFile, Target, TargetKind, Unit,
};

/// The most a message's body and HTML together take, in bytes: an event
/// is at most 65,536 bytes as federated, and an edit carries the text twice.
pub const MAX_EVENT_BYTES: usize = 24_000;
/// The longest live draft, in characters (plain, sent twice in an edit).
const DRAFT_CHARS: usize = 5_000;
/// One `/sync` long poll.
const SYNC_TIMEOUT: Duration = Duration::from_secs(30);
const SINCE: &str = "since";
const DEVICE: &str = "device_id";
const TOKEN: &str = "access_token";
/// What an encrypted room is told, once.
pub const ENCRYPTED_NOTICE: &str = "[pincer] This room is end-to-end encrypted, and Pincer does not support encrypted rooms: it cannot read what is written here. Invite it to a room without encryption.";

/// How the account proves who it is.
#[derive(Clone)]
pub enum Credentials {
    AccessToken(String),
    Password(String),
}

impl std::fmt::Debug for Credentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Credentials::AccessToken(_) => "AccessToken(…)",
            Credentials::Password(_) => "Password(…)",
        })
    }
}

/// What the configuration gives a Matrix channel.
#[derive(Debug, Clone)]
pub struct MatrixSettings {
    /// `http(s)://HOST[:PORT]`, without the `/_matrix` path.
    pub homeserver: String,
    /// `@localpart:server`.
    pub user_id: String,
    pub credentials: Credentials,
    /// Rooms (ids or aliases) joined at start and whose invites are taken
    /// from anyone.
    pub rooms: Vec<String>,
}

/// The device logged in on.
#[derive(Debug, Clone)]
struct Login {
    token: String,
    device_id: String,
}

/// What is known of a joined room.
#[derive(Debug, Clone, Copy, Default)]
struct RoomInfo {
    members: Option<usize>,
    encrypted: bool,
}

pub struct Matrix {
    name: String,
    settings: MatrixSettings,
    base: String,
    client: reqwest::Client,
    login: Mutex<Option<Login>>,
    /// The display name addressed in groups (the localpart until known).
    display: Mutex<String>,
    rooms: Mutex<HashMap<String, RoomInfo>>,
}

impl Matrix {
    pub fn new(name: &str, settings: MatrixSettings) -> Result<Self, String> {
        let homeserver = settings.homeserver.trim().trim_end_matches('/').to_owned();
        if !(homeserver.starts_with("http://") || homeserver.starts_with("https://")) {
            return Err(format!(
                "homeserver {:?} is not an http:// or https:// URL",
                prefix(&homeserver)
            ));
        }
        if localpart(&settings.user_id).is_none() {
            return Err(format!(
                "user_id {:?} is not a Matrix user id (@localpart:server)",
                prefix(&settings.user_id)
            ));
        }
        let client = crate::net::http_client(SYNC_TIMEOUT + Duration::from_secs(15))
            .map_err(|err| format!("cannot build the HTTP client: {err}"))?;
        let display = localpart(&settings.user_id).unwrap_or_default().to_owned();
        Ok(Self {
            name: name.to_owned(),
            base: homeserver,
            settings,
            client,
            login: Mutex::new(None),
            display: Mutex::new(display),
            rooms: Mutex::new(HashMap::new()),
        })
    }

    fn me(&self) -> &str {
        &self.settings.user_id
    }

    /// One request; `token` by default the device's. Errors are classified
    /// and never carry the token.
    async fn request(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Option<&Value>,
        token: Option<&str>,
    ) -> Result<Value, DeliveryError> {
        let mut builder = self.authorized(&method, path, token)?;
        if let Some(body) = body {
            builder = builder.json(body);
        }
        self.exchange(&method, path, builder).await
    }

    /// A request to `path` with `token` (by default the device's); refused
    /// before the login but for the login itself.
    fn authorized(
        &self,
        method: &reqwest::Method,
        path: &str,
        token: Option<&str>,
    ) -> Result<reqwest::RequestBuilder, DeliveryError> {
        let builder = self
            .client
            .request(method.clone(), format!("{}{path}", self.base));
        let stored = self.login.lock().as_ref().map(|l| l.token.clone());
        match token.map(str::to_owned).or(stored) {
            Some(token) => Ok(builder.bearer_auth(token)),
            None if path.ends_with("/login") => Ok(builder),
            None => Err(DeliveryError::new(
                FailureKind::Transient,
                "matrix: not logged in to the homeserver yet",
            )),
        }
    }

    /// Sends a request built for `path` and reads its JSON answer; an
    /// error answer classified.
    async fn exchange(
        &self,
        method: &reqwest::Method,
        path: &str,
        builder: reqwest::RequestBuilder,
    ) -> Result<Value, DeliveryError> {
        let what = path
            .trim_start_matches("/_matrix/client/v3/")
            .trim_start_matches("/_matrix/media/v3/")
            .split(['?', '/'])
            .next()
            .unwrap_or_default()
            .to_owned();
        let call = format!("matrix {method} {what}");
        let response = builder
            .send()
            .await
            .map_err(|err| DeliveryError::unanswered(&call, err))?;
        let status = response.status().as_u16();
        let bytes = response
            .bytes()
            .await
            .map_err(|err| DeliveryError::unreadable(&call, status, err))?;
        let value: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
        if (200..300).contains(&status) {
            return Ok(value);
        }
        Err(classify(&format!("{method} {what}"), status, &value))
    }

    /// Uploads `file` to the homeserver's media repository
    /// (`POST /_matrix/media/v3/upload`): its `mxc://` URI. Not idempotent:
    /// an upload repeated after a lost answer stores the file again, and
    /// only the copy the room's event names is ever shown.
    async fn upload(&self, file: &OutFile) -> Result<String, DeliveryError> {
        let method = reqwest::Method::POST;
        let path = format!("/_matrix/media/v3/upload?filename={}", encode(&file.name));
        let builder = self
            .authorized(&method, &path, None)?
            .header(reqwest::header::CONTENT_TYPE, &file.mime_type)
            .body(file.text.clone().into_bytes());
        let answer = self.exchange(&method, &path, builder).await?;
        answer["content_uri"]
            .as_str()
            .filter(|uri| uri.starts_with("mxc://"))
            .map(str::to_owned)
            .ok_or_else(|| {
                DeliveryError::new(
                    FailureKind::Unknown,
                    "matrix POST upload: the answer has no mxc:// content_uri",
                )
            })
    }

    async fn get(&self, path: &str) -> Result<Value, DeliveryError> {
        self.request(reqwest::Method::GET, path, None, None).await
    }

    async fn put(&self, path: &str, body: &Value) -> Result<Value, DeliveryError> {
        self.request(reqwest::Method::PUT, path, Some(body), None)
            .await
    }

    async fn post(&self, path: &str, body: &Value) -> Result<Value, DeliveryError> {
        self.request(reqwest::Method::POST, path, Some(body), None)
            .await
    }

    /// Logs in (see the module): the device and token in use from now on.
    async fn log_in(&self, hub: &Hub) -> Result<(), DeliveryError> {
        let login = match &self.settings.credentials {
            Credentials::AccessToken(token) => {
                let device_id = self.whoami(token).await?;
                Login {
                    token: token.clone(),
                    device_id,
                }
            }
            Credentials::Password(password) => {
                let device = hub.cursor(DEVICE).await;
                let stored = match (hub.cursor(TOKEN).await, &device) {
                    (Some(token), Some(device)) => match self.whoami(&token).await {
                        Ok(on) if &on == device => Some(Login {
                            token,
                            device_id: on,
                        }),
                        Ok(_) => None,
                        Err(err) if err.kind == FailureKind::Auth => None,
                        Err(err) => return Err(err),
                    },
                    _ => None,
                };
                match stored {
                    Some(login) => login,
                    None => self.password_login(hub, password, device).await?,
                }
            }
        };
        tracing::info!(channel = %self.name, user = %self.me(), device = %login.device_id, "logged in to the Matrix homeserver");
        *self.login.lock() = Some(login);
        if let Ok(profile) = self
            .get(&format!(
                "/_matrix/client/v3/profile/{}/displayname",
                encode(self.me())
            ))
            .await
            && let Some(name) = profile["displayname"].as_str()
            && !name.trim().is_empty()
        {
            *self.display.lock() = name.trim().to_owned();
        }
        Ok(())
    }

    /// The device a token is logged in on; refused when it is another user's.
    async fn whoami(&self, token: &str) -> Result<String, DeliveryError> {
        let answer = self
            .request(
                reqwest::Method::GET,
                "/_matrix/client/v3/account/whoami",
                None,
                Some(token),
            )
            .await?;
        let user = answer["user_id"].as_str().unwrap_or_default();
        if user != self.me() {
            return Err(DeliveryError::new(
                FailureKind::Auth,
                format!(
                    "matrix: the access token is {:?}'s, not {}'s",
                    prefix(user),
                    self.me()
                ),
            ));
        }
        Ok(answer["device_id"].as_str().unwrap_or_default().to_owned())
    }

    /// `m.login.password`, on the stored device when there is one; the
    /// device and token stored.
    async fn password_login(
        &self,
        hub: &Hub,
        password: &str,
        device: Option<String>,
    ) -> Result<Login, DeliveryError> {
        let mut body = json!({
            "type": "m.login.password",
            "identifier": {"type": "m.id.user", "user": self.me()},
            "password": password,
            "initial_device_display_name": "Pincer",
        });
        if let Some(device) = &device {
            body["device_id"] = json!(device);
        }
        let answer = self
            .request(
                reqwest::Method::POST,
                "/_matrix/client/v3/login",
                Some(&body),
                None,
            )
            .await?;
        let (Some(token), Some(device_id)) = (
            answer["access_token"].as_str(),
            answer["device_id"].as_str(),
        ) else {
            return Err(DeliveryError::new(
                FailureKind::Unknown,
                "matrix login: the answer has no access_token or device_id",
            ));
        };
        hub.skip(DEVICE, device_id.to_owned());
        hub.skip(TOKEN, token.to_owned());
        Ok(Login {
            token: token.to_owned(),
            device_id: device_id.to_owned(),
        })
    }

    async fn sync(&self, since: Option<&str>, timeout: Duration) -> Result<Value, DeliveryError> {
        let mut path = format!("/_matrix/client/v3/sync?timeout={}", timeout.as_millis());
        match since {
            Some(since) => path.push_str(&format!("&since={}", encode(since))),
            // The first sync: state, and no more history than needed.
            None => path.push_str(&format!(
                "&filter={}",
                encode(r#"{"room":{"timeline":{"limit":1}}}"#)
            )),
        }
        self.get(&path).await
    }

    /// Logs in, then syncs until `cancel`.
    async fn run(&self, hub: &Arc<Hub>, cancel: &CancellationToken) {
        let mut failures: u32 = 0;
        loop {
            let outcome = tokio::select! {
                _ = cancel.cancelled() => return,
                outcome = self.log_in(hub) => outcome,
            };
            match outcome {
                Ok(()) => break,
                Err(err) if err.kind == FailureKind::Auth => {
                    tracing::error!(channel = %self.name, error = %err, "the Matrix homeserver refused the login; the channel stops");
                    hub.down(&err.to_string());
                    return;
                }
                Err(err) => {
                    failures += 1;
                    let wait = backoff(&err, failures);
                    tracing::warn!(channel = %self.name, error = %err, wait_secs = wait.as_secs(), "cannot log in to the Matrix homeserver");
                    hub.down(&err.to_string());
                    if sleep(cancel, wait).await {
                        return;
                    }
                }
            }
        }
        for room in &self.settings.rooms {
            if let Err(err) = self
                .post(
                    &format!("/_matrix/client/v3/join/{}", encode(room)),
                    &json!({}),
                )
                .await
            {
                tracing::warn!(channel = %self.name, room = %room, error = %err, "cannot join a configured Matrix room");
            }
        }
        let mut since = hub.cursor(SINCE).await;
        let mut failures: u32 = 0;
        let mut relogged = false;
        loop {
            let initial = since.is_none();
            let timeout = if initial {
                Duration::ZERO
            } else {
                SYNC_TIMEOUT
            };
            let answer = tokio::select! {
                _ = cancel.cancelled() => return,
                answer = self.sync(since.as_deref(), timeout) => answer,
            };
            let answer = match answer {
                Ok(answer) => {
                    failures = 0;
                    relogged = false;
                    hub.up();
                    answer
                }
                Err(err) => {
                    failures += 1;
                    hub.down(&err.to_string());
                    if err.kind == FailureKind::Auth {
                        // A password login can be made again (a token
                        // revoked, expired); a token given cannot.
                        let again = matches!(self.settings.credentials, Credentials::Password(_))
                            && !relogged;
                        if again {
                            relogged = true;
                            hub.skip(TOKEN, String::new());
                            if self.log_in(hub).await.is_ok() {
                                continue;
                            }
                        }
                        tracing::error!(channel = %self.name, error = %err, "the Matrix homeserver refused the access token; the channel stops");
                        return;
                    }
                    let wait = backoff(&err, failures);
                    tracing::warn!(channel = %self.name, error = %err, wait_secs = wait.as_secs(), "Matrix sync failed");
                    if sleep(cancel, wait).await {
                        return;
                    }
                    continue;
                }
            };
            let batch = parse_sync(&answer, self.me());
            if batch.next.is_empty() {
                tracing::warn!(channel = %self.name, "a Matrix sync answer without next_batch; asking again");
                if sleep(cancel, Duration::from_secs(1)).await {
                    return;
                }
                continue;
            }
            if self.take(hub, &batch, initial).await {
                since = Some(batch.next);
            } else if sleep(cancel, Duration::from_secs(1)).await {
                return;
            }
        }
    }

    /// One sync batch: invites answered, rooms' state noted, its events
    /// handed to the hub with the batch's token on the last. `false`: an
    /// event was not recorded (the batch is fetched again). `initial`: the
    /// first sync, whose messages are history, not for Pincer.
    async fn take(&self, hub: &Arc<Hub>, batch: &Batch, initial: bool) -> bool {
        for invite in &batch.invites {
            self.on_invite(hub, invite).await;
        }
        let mut inbound = Vec::new();
        for room in &batch.rooms {
            {
                let mut rooms = self.rooms.lock();
                let info = rooms.entry(room.room.clone()).or_default();
                if room.members.is_some() {
                    info.members = room.members;
                } else if room.membership_changed {
                    info.members = None;
                }
                info.encrypted |= room.encrypted;
            }
            if room.encrypted {
                let target = Target {
                    kind: TargetKind::Group,
                    id: room.room.clone(),
                    thread: None,
                };
                let id = format!("matrix-encrypted:{}", room.room);
                if let Err(err) = hub.deliver(target, ENCRYPTED_NOTICE, Some(&id)).await {
                    tracing::warn!(channel = %self.name, room = %room.room, error = %err, "cannot record the notice for an encrypted room");
                }
            }
            if initial || room.events.is_empty() {
                continue;
            }
            let info = match self.room_info(&room.room).await {
                Ok(info) => info,
                Err(err) => {
                    tracing::warn!(channel = %self.name, room = %room.room, error = %err, "cannot read a Matrix room's members");
                    return false;
                }
            };
            if info.encrypted {
                continue;
            }
            let target = Target {
                kind: if info.members.unwrap_or(0) <= 2 {
                    TargetKind::Direct
                } else {
                    TargetKind::Group
                },
                id: room.room.clone(),
                thread: None,
            };
            for event in &room.events {
                if let Some(item) = self.inbound(hub, &target, event).await {
                    inbound.push(item);
                }
            }
        }
        let count = inbound.len();
        let mut stored = false;
        for (index, item) in inbound.into_iter().enumerate() {
            let last = index + 1 == count;
            let cursor = last.then(|| (SINCE.to_owned(), batch.next.clone()));
            match hub.receive(item, cursor).await {
                Received::Failed(reason) => {
                    tracing::warn!(channel = %self.name, %reason, "a Matrix event not recorded; it will be fetched again");
                    return false;
                }
                Received::Duplicate => {}
                Received::Accepted | Received::Echo | Received::Unauthorized => stored = last,
            }
        }
        if !stored {
            hub.skip(SINCE, batch.next.clone());
        }
        true
    }

    /// A room's member count and encryption, asked of the homeserver when
    /// not known.
    async fn room_info(&self, room: &str) -> Result<RoomInfo, DeliveryError> {
        let known = self.rooms.lock().get(room).copied().unwrap_or_default();
        if known.members.is_some() {
            return Ok(known);
        }
        let path = |rest: &str| format!("/_matrix/client/v3/rooms/{}/{rest}", encode(room));
        let members = self.get(&path("joined_members")).await?;
        let count = members["joined"].as_object().map_or(0, |m| m.len());
        let encrypted = match self.get(&path("state/m.room.encryption/")).await {
            Ok(_) => true,
            Err(err) if err.kind == FailureKind::NotFound => false,
            Err(err) => return Err(err),
        };
        let mut rooms = self.rooms.lock();
        let info = rooms.entry(room.to_owned()).or_default();
        info.members = Some(count);
        info.encrypted |= encrypted;
        Ok(*info)
    }

    /// A timeline event as what the hub takes: a message (in a group, only
    /// when addressed), or a reaction answering an approval prompt.
    async fn inbound(&self, hub: &Hub, target: &Target, event: &Event) -> Option<Inbound> {
        match event {
            Event::Text {
                id,
                sender,
                body,
                mentioned,
                at,
            } => {
                let body = if target.kind == TargetKind::Group {
                    let display = self.display.lock().clone();
                    addressed(body, &display, self.me(), *mentioned)?
                } else {
                    body.clone()
                };
                if body.trim().is_empty() {
                    return None;
                }
                Some(Inbound::Message(ChannelMessage {
                    id: id.clone(),
                    channel: self.name.clone(),
                    account: self.me().to_owned(),
                    target: target.clone(),
                    sender: Some(Actor {
                        id: sender.clone(),
                        name: localpart(sender).map(str::to_owned),
                        is_bot: false,
                    }),
                    body,
                    attachments: Vec::new(),
                    relation: None,
                    origin: MessageOrigin::User,
                    at: *at,
                }))
            }
            Event::Reaction {
                id,
                sender,
                to,
                key,
            } => {
                let decision = reaction_decision(key)?;
                let data = hub.approval_press(target, to, decision).await?;
                Some(Inbound::Button {
                    id: id.clone(),
                    target: target.clone(),
                    sender: sender.clone(),
                    data,
                })
            }
        }
    }

    /// Joins when the inviter is allowed (or paired) or the room is one of
    /// `rooms`; declines otherwise.
    async fn on_invite(&self, hub: &Hub, invite: &Invite) {
        let wanted = self.settings.rooms.iter().any(|r| r == &invite.room)
            || hub.allows(&invite.inviter).await;
        let room = encode(&invite.room);
        let (path, verb) = if wanted {
            (format!("/_matrix/client/v3/join/{room}"), "joined")
        } else {
            (format!("/_matrix/client/v3/rooms/{room}/leave"), "declined")
        };
        match self.post(&path, &json!({})).await {
            Ok(_) => {
                tracing::info!(channel = %self.name, room = %invite.room, inviter = %invite.inviter, "Matrix invite {verb}");
            }
            Err(err) => {
                tracing::warn!(channel = %self.name, room = %invite.room, error = %err, "cannot answer a Matrix invite");
            }
        }
    }
}

/// How long to wait after the `failures`-th failure in a row.
fn backoff(err: &DeliveryError, failures: u32) -> Duration {
    err.retry_after
        .unwrap_or_else(|| Duration::from_secs(2u64.saturating_pow(failures.min(6))))
}

/// Sleeps `wait`; `true` when cancelled meanwhile.
async fn sleep(cancel: &CancellationToken, wait: Duration) -> bool {
    tokio::select! {
        _ = cancel.cancelled() => true,
        _ = tokio::time::sleep(wait) => false,
    }
}

/// `@localpart:server`'s localpart.
fn localpart(user_id: &str) -> Option<&str> {
    let (local, server) = user_id.strip_prefix('@')?.split_once(':')?;
    (!local.is_empty() && !server.is_empty() && !user_id.contains(char::is_whitespace))
        .then_some(local)
}

/// At most 40 characters of what someone wrote.
fn prefix(text: &str) -> String {
    text.chars().take(40).collect()
}

/// `segment` percent-encoded for a URL path segment or query value.
fn encode(segment: &str) -> String {
    let mut out = String::new();
    for byte in segment.bytes() {
        if byte.is_ascii_alphanumeric() || b"-._~".contains(&byte) {
            out.push(char::from(byte));
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
}

/// A transaction id derived from `parts`: the same parts, the same id.
fn txn_id(kind: &str, parts: &[&str]) -> String {
    let mut context = ring::digest::Context::new(&ring::digest::SHA256);
    for part in parts {
        context.update(part.as_bytes());
        context.update(b"\0");
    }
    let digest = hex::encode(context.finish().as_ref());
    format!("pincer-{kind}-{}", &digest[..32])
}

/// A group message's text for Pincer when it is addressed: `NAME: …` or
/// `NAME, …` (the display name or the user id's localpart, any case) with
/// the name taken off, or any text that mentions its user id.
fn addressed(body: &str, display: &str, me: &str, mentioned: bool) -> Option<String> {
    let trimmed = body.trim_start();
    let names = [display, localpart(me).unwrap_or_default(), me];
    for name in names.iter().filter(|n| !n.is_empty()) {
        if let Some(head) = trimmed.get(..name.len())
            && head.eq_ignore_ascii_case(name)
            && let Some(rest) = trimmed[name.len()..].strip_prefix([':', ','])
        {
            return Some(rest.trim().to_owned());
        }
    }
    if mentioned || body.contains(me) {
        return Some(body.replace(me, "").trim().to_owned());
    }
    None
}

/// The approval decision a reaction gives: 👍 ✅ allow once, 👎 ❌ reject.
fn reaction_decision(key: &str) -> Option<ApprovalDecision> {
    // Without the variation selector some clients add (U+FE0F).
    match key.trim_end_matches('\u{fe0f}') {
        "👍" | "✅" | "✔" => Some(ApprovalDecision::AllowOnce),
        "👎" | "❌" | "✖" => Some(ApprovalDecision::RejectOnce),
        _ => None,
    }
}

/// A homeserver's error answer as a failure class: by its `errcode` where
/// that says more than the status, else by the status
/// (`channels::status_kind`).
fn classify(what: &str, status: u16, value: &Value) -> DeliveryError {
    let code = value["errcode"].as_str().unwrap_or_default();
    let error = value["error"].as_str().unwrap_or("no description");
    let kind = match code {
        "M_LIMIT_EXCEEDED" => FailureKind::RateLimit,
        "M_UNKNOWN_TOKEN" | "M_MISSING_TOKEN" => FailureKind::Auth,
        "M_TOO_LARGE" => FailureKind::InvalidPayload,
        "M_NOT_FOUND" => FailureKind::NotFound,
        _ => super::status_kind(status),
    };
    let message = format!(
        "matrix {what}: {status} {}{}",
        if code.is_empty() {
            String::new()
        } else {
            format!("{code} ")
        },
        prefix_long(error)
    );
    DeliveryError::new(kind, message.trim_end_matches('.'))
        .with_retry_after(value["retry_after_ms"].as_u64().map(Duration::from_millis))
}

/// At most 200 characters of a server's words.
fn prefix_long(text: &str) -> String {
    text.chars().take(200).collect()
}

/// An invite seen in a sync.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Invite {
    room: String,
    inviter: String,
}

/// An event of a joined room for Pincer.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Event {
    Text {
        id: String,
        sender: String,
        body: String,
        /// `m.mentions.user_ids` names this account.
        mentioned: bool,
        at: i64,
    },
    Reaction {
        id: String,
        sender: String,
        /// The event reacted to.
        to: String,
        key: String,
    },
}

/// A joined room in a sync.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct Room {
    room: String,
    /// `summary.m.joined_member_count`, when the server sent it.
    members: Option<usize>,
    /// Someone joined or left (the count asked again).
    membership_changed: bool,
    /// `m.room.encryption` in its state or timeline.
    encrypted: bool,
    events: Vec<Event>,
}

/// One `/sync` answer, as what Pincer takes of it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct Batch {
    next: String,
    invites: Vec<Invite>,
    rooms: Vec<Room>,
}

/// Reads a `/sync` answer for `me`.
fn parse_sync(answer: &Value, me: &str) -> Batch {
    let mut batch = Batch {
        next: answer["next_batch"].as_str().unwrap_or_default().to_owned(),
        ..Batch::default()
    };
    if let Some(invites) = answer["rooms"]["invite"].as_object() {
        for (room, invite) in invites {
            let events = invite["invite_state"]["events"]
                .as_array()
                .cloned()
                .unwrap_or_default();
            let inviter = events.iter().find_map(|event| {
                (event["type"] == "m.room.member"
                    && event["state_key"] == me
                    && event["content"]["membership"] == "invite")
                    .then(|| event["sender"].as_str())
                    .flatten()
            });
            if let Some(inviter) = inviter {
                batch.invites.push(Invite {
                    room: room.clone(),
                    inviter: inviter.to_owned(),
                });
            }
        }
    }
    let Some(joined) = answer["rooms"]["join"].as_object() else {
        return batch;
    };
    for (id, room) in joined {
        let state = room["state"]["events"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        let timeline = room["timeline"]["events"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        let mut parsed = Room {
            room: id.clone(),
            members: room["summary"]["m.joined_member_count"]
                .as_u64()
                .and_then(|n| usize::try_from(n).ok()),
            ..Room::default()
        };
        for event in state.iter().chain(&timeline) {
            match event["type"].as_str() {
                Some("m.room.encryption") => parsed.encrypted = true,
                Some("m.room.member") => parsed.membership_changed = true,
                _ => {}
            }
        }
        parsed.events = timeline.iter().filter_map(|e| event(e, me)).collect();
        batch.rooms.push(parsed);
    }
    batch
}

/// A timeline event for Pincer: an `m.text` message from someone else
/// (not an edit), or someone's reaction.
fn event(event: &Value, me: &str) -> Option<Event> {
    let sender = event["sender"].as_str()?;
    if sender == me {
        return None;
    }
    let id = event["event_id"].as_str()?.to_owned();
    let content = &event["content"];
    match event["type"].as_str()? {
        "m.room.message" => {
            if content["msgtype"] != "m.text" || content["m.relates_to"]["rel_type"] == "m.replace"
            {
                return None;
            }
            let mentioned = content["m.mentions"]["user_ids"]
                .as_array()
                .is_some_and(|ids| ids.iter().any(|id| id == me));
            Some(Event::Text {
                id,
                sender: sender.to_owned(),
                body: content["body"].as_str()?.to_owned(),
                mentioned,
                at: event["origin_server_ts"].as_i64().unwrap_or_default(),
            })
        }
        "m.reaction" => {
            let relates = &content["m.relates_to"];
            if relates["rel_type"] != "m.annotation" {
                return None;
            }
            Some(Event::Reaction {
                id,
                sender: sender.to_owned(),
                to: relates["event_id"].as_str()?.to_owned(),
                key: relates["key"].as_str()?.to_owned(),
            })
        }
        _ => None,
    }
}

/// A message's content: the Markdown as body, its HTML beside it.
fn content(unit: &Unit) -> Value {
    let mut content = json!({"msgtype": "m.text", "body": unit.text});
    if let Some(html) = &unit.markup {
        content["format"] = json!("org.matrix.custom.html");
        content["formatted_body"] = json!(html);
    }
    content
}

/// A file message's content (`m.file`): the uploaded file at `url`, its
/// name, type and size, and the unit's text as its caption (Matrix 1.10:
/// `body` is a caption when `filename` is there and differs from it).
fn file_content(unit: &Unit, file: &OutFile, url: &str) -> Value {
    let mut content = if unit.text.trim().is_empty() {
        json!({"body": file.name})
    } else {
        content(unit)
    };
    content["msgtype"] = json!("m.file");
    content["filename"] = json!(file.name);
    content["url"] = json!(url);
    content["info"] = json!({"mimetype": file.mime_type, "size": file.text.len()});
    content
}

/// A room id (`!id:server`) as a target; an alias is refused.
fn room_target(to: &str) -> Result<Target, String> {
    let to = to.trim();
    if to.starts_with('#') {
        return Err(format!(
            "{:?} is a room alias: give the room's id (!…:server), which the room's settings show",
            prefix(to)
        ));
    }
    let valid = to
        .strip_prefix('!')
        .and_then(|rest| rest.split_once(':'))
        .is_some_and(|(local, server)| !local.is_empty() && !server.is_empty())
        && !to.contains(|c: char| c.is_whitespace() || c.is_control() || c == '/');
    if !valid {
        return Err("expected a Matrix room id: !ROOM:server".to_owned());
    }
    Ok(Target {
        kind: TargetKind::Group,
        id: to.to_owned(),
        thread: None,
    })
}

impl Adapter for Matrix {
    fn channel(&self) -> &str {
        &self.name
    }

    fn account(&self) -> &str {
        self.me()
    }

    fn kind(&self) -> &'static str {
        "matrix"
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities {
            // A live draft's; a reply's messages are cut by bytes
            // (`render`, [`MAX_EVENT_BYTES`]).
            max_len: DRAFT_CHARS,
            length_unit: LengthUnit::Chars,
            edit: true,
            delete: true,
            buttons: false,
            // 👍 ✅ 👎 ❌ on an approval prompt answer it.
            reactions: true,
            // Rooms only: a thread's messages are read as the room's, and
            // replies go to the room.
            threads: false,
            // `m.file` events of media uploaded first.
            files: true,
            edit_interval: Duration::from_secs(1),
            markup: Some("html"),
            working_after: None,
            // Sends, edits and redactions all go by transaction ids the
            // homeserver deduplicates per device, derived from what they do.
            idempotent: Idempotence {
                send: true,
                edit: true,
                delete: true,
            },
        }
    }

    /// The Markdown as body with `org.matrix.custom.html` beside it, cut
    /// so that both together stay under [`MAX_EVENT_BYTES`].
    fn render(&self, markdown: &str) -> Vec<Unit> {
        let measure =
            |piece: &str| piece.len() + render::html(piece, render::Dialect::Common).len();
        render::chunk(markdown, MAX_EVENT_BYTES, &measure)
            .into_iter()
            .map(|piece| Unit {
                markup: Some(render::html(&piece, render::Dialect::Common)),
                text: piece,
                ..Unit::default()
            })
            .collect()
    }

    fn target(&self, to: &str) -> Result<Target, String> {
        room_target(to)
    }

    fn send<'a>(
        &'a self,
        target: &'a Target,
        unit: &'a Unit,
        _reply_to: Option<&'a str>,
        idempotency_key: &'a str,
    ) -> BoxFuture<'a, Result<String, DeliveryError>> {
        Box::pin(async move {
            let txn = txn_id("send", &[idempotency_key]);
            let path = format!(
                "/_matrix/client/v3/rooms/{}/send/m.room.message/{txn}",
                encode(&target.id)
            );
            let content = match &unit.file {
                None => content(unit),
                Some(file) => file_content(unit, file, &self.upload(file).await?),
            };
            let sent = self.put(&path, &content).await?;
            sent["event_id"].as_str().map(str::to_owned).ok_or_else(|| {
                DeliveryError::new(
                    FailureKind::Unknown,
                    "matrix send: the answer has no event_id",
                )
            })
        })
    }

    /// An `m.replace` edit; its transaction id derived from the message and
    /// the new content, so a repeat is the same edit.
    fn edit<'a>(
        &'a self,
        target: &'a Target,
        platform_id: &'a str,
        unit: &'a Unit,
    ) -> BoxFuture<'a, Result<(), DeliveryError>> {
        Box::pin(async move {
            let markup = unit.markup.as_deref().unwrap_or_default();
            let txn = txn_id("edit", &[platform_id, &unit.text, markup]);
            let body = json!({
                "msgtype": "m.text",
                "body": format!("* {}", unit.text),
                "m.new_content": content(unit),
                "m.relates_to": {"rel_type": "m.replace", "event_id": platform_id},
            });
            let path = format!(
                "/_matrix/client/v3/rooms/{}/send/m.room.message/{txn}",
                encode(&target.id)
            );
            self.put(&path, &body).await.map(|_| ())
        })
    }

    /// A redaction. A message gone already is `not_found`.
    fn delete<'a>(
        &'a self,
        target: &'a Target,
        platform_id: &'a str,
    ) -> BoxFuture<'a, Result<(), DeliveryError>> {
        Box::pin(async move {
            let txn = txn_id("redact", &[platform_id]);
            let path = format!(
                "/_matrix/client/v3/rooms/{}/redact/{}/{txn}",
                encode(&target.id),
                encode(platform_id)
            );
            self.put(&path, &json!({})).await.map(|_| ())
        })
    }

    fn receive(
        self: Arc<Self>,
        hub: Arc<Hub>,
        cancel: CancellationToken,
    ) -> BoxFuture<'static, ()> {
        Box::pin(async move { self.run(&hub, &cancel).await })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ME: &str = "@pincer:example.org";

    #[test]
    fn a_sync_answer_gives_messages_reactions_invites_and_room_state() {
        let answer = json!({
            "next_batch": "s72_4",
            "rooms": {
                "invite": {"!inv:example.org": {"invite_state": {"events": [
                    {"type": "m.room.create", "state_key": "", "sender": "@bob:example.org", "content": {}},
                    {"type": "m.room.member", "state_key": ME, "sender": "@bob:example.org",
                     "content": {"membership": "invite"}}
                ]}}},
                "join": {"!dm:example.org": {
                    "summary": {"m.joined_member_count": 2},
                    "state": {"events": [{"type": "m.room.encryption", "state_key": "", "sender": "@a:example.org", "content": {}}]},
                    "timeline": {"events": [
                        {"type": "m.room.message", "event_id": "$1", "sender": "@alice:example.org",
                         "origin_server_ts": 5, "content": {"msgtype": "m.text", "body": "hi"}},
                        {"type": "m.room.message", "event_id": "$2", "sender": ME,
                         "content": {"msgtype": "m.text", "body": "mine"}},
                        {"type": "m.room.message", "event_id": "$3", "sender": "@bot:example.org",
                         "content": {"msgtype": "m.notice", "body": "a bot"}},
                        {"type": "m.room.message", "event_id": "$4", "sender": "@alice:example.org",
                         "content": {"msgtype": "m.text", "body": "* hi!", "m.new_content": {"body": "hi!"},
                                     "m.relates_to": {"rel_type": "m.replace", "event_id": "$1"}}},
                        {"type": "m.reaction", "event_id": "$5", "sender": "@alice:example.org",
                         "content": {"m.relates_to": {"rel_type": "m.annotation", "event_id": "$9", "key": "👍"}}},
                        {"type": "m.room.member", "event_id": "$6", "sender": "@carol:example.org", "state_key": "@carol:example.org",
                         "content": {"membership": "join"}}
                    ]}
                }}
            }
        });
        let batch = parse_sync(&answer, ME);
        assert_eq!(batch.next, "s72_4");
        assert_eq!(
            batch.invites,
            [Invite {
                room: "!inv:example.org".into(),
                inviter: "@bob:example.org".into()
            }]
        );
        let room = &batch.rooms[0];
        assert_eq!(room.members, Some(2));
        assert!(room.encrypted && room.membership_changed);
        assert_eq!(
            room.events,
            [
                Event::Text {
                    id: "$1".into(),
                    sender: "@alice:example.org".into(),
                    body: "hi".into(),
                    mentioned: false,
                    at: 5
                },
                Event::Reaction {
                    id: "$5".into(),
                    sender: "@alice:example.org".into(),
                    to: "$9".into(),
                    key: "👍".into()
                }
            ]
        );
        assert_eq!(parse_sync(&json!({}), ME), Batch::default());
    }

    #[test]
    fn errors_are_classified() {
        let err = |status, body: Value| classify("PUT send", status, &body);
        let limited = err(
            429,
            json!({"errcode": "M_LIMIT_EXCEEDED", "error": "Too Many Requests", "retry_after_ms": 1500}),
        );
        assert_eq!(limited.kind, FailureKind::RateLimit);
        assert_eq!(limited.retry_after, Some(Duration::from_millis(1500)));
        assert_eq!(
            err(401, json!({"errcode": "M_UNKNOWN_TOKEN"})).kind,
            FailureKind::Auth
        );
        assert_eq!(
            err(403, json!({"errcode": "M_FORBIDDEN"})).kind,
            FailureKind::Permission
        );
        assert_eq!(
            err(404, json!({"errcode": "M_NOT_FOUND"})).kind,
            FailureKind::NotFound
        );
        let large = err(
            413,
            json!({"errcode": "M_TOO_LARGE", "error": "event too large."}),
        );
        assert_eq!(large.kind, FailureKind::InvalidPayload);
        assert!(!large.message.ends_with('.'), "{}", large.message);
        assert_eq!(err(502, Value::Null).kind, FailureKind::Transient);
        assert_eq!(err(418, Value::Null).kind, FailureKind::Unknown);
        // The errcode decides over the status; without one, the status as
        // any HTTP answer's.
        assert_eq!(
            err(400, json!({"errcode": "M_LIMIT_EXCEEDED"})).kind,
            FailureKind::RateLimit
        );
        assert_eq!(err(409, Value::Null).kind, FailureKind::Conflict);
        assert_eq!(err(422, Value::Null).kind, FailureKind::InvalidPayload);
    }

    #[test]
    fn groups_answer_only_when_addressed() {
        let a = |body, mentioned| addressed(body, "Pincer Bot", ME, mentioned);
        assert_eq!(a("pincer: hi", false).as_deref(), Some("hi"));
        assert_eq!(
            a("Pincer Bot, hello there", false).as_deref(),
            Some("hello there")
        );
        assert_eq!(a("@pincer:example.org: y", false).as_deref(), Some("y"));
        assert_eq!(
            a("ask @pincer:example.org now", false).as_deref(),
            Some("ask  now")
        );
        assert_eq!(a("pincers are sharp", false), None);
        assert_eq!(a("hello all", false), None);
        assert_eq!(a("hello all", true).as_deref(), Some("hello all"));
    }

    #[test]
    fn transaction_ids_follow_what_they_send() {
        let a = txn_id("send", &["reply:r1:0"]);
        assert_eq!(a, txn_id("send", &["reply:r1:0"]));
        assert_ne!(a, txn_id("send", &["reply:r1:1"]));
        assert_ne!(
            txn_id("edit", &["$e", "ab", ""]),
            txn_id("edit", &["$e", "a", "b"])
        );
        assert!(a.chars().all(|c| c.is_ascii_alphanumeric() || c == '-'));
    }

    #[test]
    fn a_file_is_an_m_file_event_captioned_with_the_units_text() {
        let file = OutFile {
            name: "changes.diff".into(),
            mime_type: "text/x-diff".into(),
            text: "+é\n".into(),
        };
        let unit = Unit::plain("Changes to 1 file: a.rs".into());
        assert_eq!(
            file_content(&unit, &file, "mxc://example.org/abc"),
            json!({
                "msgtype": "m.file",
                "body": "Changes to 1 file: a.rs",
                "filename": "changes.diff",
                "url": "mxc://example.org/abc",
                "info": {"mimetype": "text/x-diff", "size": 4},
            })
        );
        // No caption: the body is the file's name.
        let bare = file_content(&Unit::default(), &file, "mxc://example.org/abc");
        assert_eq!(bare["body"], "changes.diff");
        assert_eq!(bare["filename"], "changes.diff");
    }

    #[test]
    fn reactions_and_targets() {
        assert_eq!(reaction_decision("👍"), Some(ApprovalDecision::AllowOnce));
        assert_eq!(reaction_decision("✅"), Some(ApprovalDecision::AllowOnce));
        assert_eq!(reaction_decision("❌"), Some(ApprovalDecision::RejectOnce));
        assert_eq!(reaction_decision("🎉"), None);
        assert_eq!(
            room_target("!abc:example.org").unwrap().id,
            "!abc:example.org"
        );
        assert!(
            room_target("#room:example.org")
                .unwrap_err()
                .contains("alias")
        );
        assert!(room_target("abc").is_err());
        assert!(room_target("!abc").is_err());
    }

    #[test]
    fn long_replies_fit_an_event() {
        let matrix = Matrix::new(
            "matrix",
            MatrixSettings {
                homeserver: "http://127.0.0.1:9".into(),
                user_id: ME.into(),
                credentials: Credentials::AccessToken("t".into()),
                rooms: Vec::new(),
            },
        )
        .unwrap();
        let long = "word & <b> ".repeat(6000);
        let units = matrix.render(&long);
        assert!(units.len() > 2);
        for unit in &units {
            let size = unit.text.len() + unit.markup.as_deref().map_or(0, str::len);
            assert!(size <= MAX_EVENT_BYTES, "{size}");
        }
        assert!(
            Matrix::new(
                "m",
                MatrixSettings {
                    homeserver: "127.0.0.1:8008".into(),
                    user_id: ME.into(),
                    credentials: Credentials::AccessToken("t".into()),
                    rooms: Vec::new(),
                }
            )
            .is_err()
        );
    }
}
