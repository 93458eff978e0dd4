#![allow(dead_code)]
//! A fake Slack on loopback, written from Slack's published documents: the
//! Web API (`POST /api/METHOD`, a bearer token, `{"ok": true, …}` or
//! `{"ok": false, "error": "…"}`, HTTP 429 with `Retry-After` and
//! `ratelimited`) for `auth.test`, `apps.connections.open`,
//! `chat.postMessage`, `chat.update` and `chat.delete`; files shared as
//! Slack's upload flow has it (`files.getUploadURLExternal`, form-encoded
//! `filename` and `length`, answering a pre-signed `upload_url` on this
//! server and a `file_id`; the bytes POSTed there; then
//! `files.completeUploadExternal` with `files` `[{"id", "title"}]`,
//! `channel_id`, `thread_ts` and `initial_comment`, answering the files)
//! and `files.delete`; and Socket Mode: the
//! WebSocket `apps.connections.open` names, which says `hello`, then sends
//! envelopes (`{"envelope_id", "type": "events_api" | "interactive" |
//! "slash_commands", "payload", "accepts_response_payload",
//! "retry_attempt", "retry_reason"}`; a slash command's payload the fields
//! Slack also POSTs form-encoded to a command's Request URL: `command`,
//! `text`, `user_id`, `user_name`, `channel_id`, `channel_name`,
//! `team_id`, `trigger_id`, `response_url`, `api_app_id`, …), each
//! outstanding until the app sends back `{"envelope_id"}`; one not acknowledged when its connection drops is
//! sent again on the next connection, as Slack retries. Like Slack, it
//! echoes the bot's own posts in a direct message as `message` events.
//!
//! On command it misbehaves: drops a connection without a word, asks for a
//! reconnect (a `disconnect` envelope, `refresh_requested`), answers a
//! method 429 with `Retry-After`, replays an event, and acts on a call
//! without ever answering it.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::extract::ws::{Message, WebSocket, WebSocketUpgrade};
use axum::extract::{Path, Query, State as AxumState};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};
use tokio::sync::mpsc;

pub const BOT_TOKEN: &str = "xoxb-100-200-test-bot-token";
pub const APP_TOKEN: &str = "xapp-1-A100-300-test-app-token";
/// The bot user's id, as `auth.test` names it.
pub const BOT_USER: &str = "UPINCER";
pub const BOT_ID: &str = "BPINCER";

/// One Web API call the fake received.
#[derive(Debug, Clone)]
pub struct Call {
    pub method: String,
    pub body: Value,
    pub at: Instant,
}

/// A message the bot posted, as people see it now.
#[derive(Debug, Clone)]
pub struct Posted {
    pub channel: String,
    pub ts: String,
    pub thread_ts: Option<String>,
    pub text: String,
    pub blocks: Value,
    /// The ids of the files shared with it (`files.completeUploadExternal`).
    pub files: Vec<String>,
    pub deleted: bool,
}

/// A file the bot uploaded, and where it was shared.
#[derive(Debug, Clone, Default)]
pub struct Upload {
    pub file_id: String,
    /// As `files.getUploadURLExternal` named it.
    pub filename: String,
    /// The length it declared.
    pub length: u64,
    /// What was POSTed to the upload URL.
    pub bytes: Option<Vec<u8>>,
    pub content_type: Option<String>,
    /// The `Authorization` header the upload came with, if any.
    pub authorization: Option<String>,
    /// From `files.completeUploadExternal`, once shared.
    pub title: Option<String>,
    pub channel: Option<String>,
    pub thread_ts: Option<String>,
    pub initial_comment: Option<String>,
    pub shared: bool,
    pub deleted: bool,
}

/// An envelope the fake made, and what became of it.
#[derive(Debug, Clone)]
pub struct Envelope {
    pub envelope_id: String,
    pub kind: String,
    pub payload: Value,
    pub retry_attempt: u64,
    /// The connection it last went out on.
    pub sent_on: Option<u64>,
    pub sent_at: Option<Instant>,
    pub acked_at: Option<Instant>,
}

enum Command {
    Text(String),
    /// Close the TCP connection without a close frame.
    Drop,
}

struct Connection {
    id: u64,
    tx: mpsc::UnboundedSender<Command>,
    open: bool,
    /// The app closed it (a close frame).
    closed_by_app: bool,
    opened_at: Instant,
    closed_at: Option<Instant>,
}

#[derive(Default)]
struct State {
    url: String,
    calls: Vec<Call>,
    posted: Vec<Posted>,
    next_ts: u64,
    /// Errors to answer the next calls of a method with: (status, error, Retry-After).
    failures: HashMap<String, VecDeque<(u16, String, Option<u64>)>>,
    /// Calls of these methods are acted on, then never answered.
    hold_acted: Vec<String>,
    /// Calls of these methods are recorded, then neither acted on nor answered.
    hold: Vec<String>,
    connections: Vec<Connection>,
    envelopes: Vec<Envelope>,
    next_id: u64,
    /// Files people shared: private path → bytes.
    files: HashMap<String, Vec<u8>>,
    /// Private paths fetched, with whether the bot token came along.
    downloads: Vec<(String, bool)>,
    /// Files the bot uploaded, in order.
    uploads: Vec<Upload>,
}

#[derive(Clone)]
pub struct FakeSlack {
    pub url: String,
    state: Arc<Mutex<State>>,
}

impl FakeSlack {
    pub fn start() -> Self {
        let state = Arc::new(Mutex::new(State {
            next_ts: 1_700_000_000_000_100,
            ..State::default()
        }));
        let (tx, rx) = std::sync::mpsc::channel();
        let shared = state.clone();
        std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all()
                .build()
                .unwrap();
            runtime.block_on(async move {
                let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
                let url = format!("http://{}", listener.local_addr().unwrap());
                shared.lock().unwrap().url = url.clone();
                tx.send(url).unwrap();
                let app = axum::Router::new()
                    .route("/api/{method}", axum::routing::post(web_api))
                    .route("/link/", axum::routing::get(link))
                    .route("/files-pri/{*path}", axum::routing::get(file))
                    .route("/upload/v1/{ticket}", axum::routing::post(upload))
                    .with_state(shared);
                axum::serve(listener, app).await.unwrap();
            });
        });
        let url = rx.recv().unwrap();
        Self { url, state }
    }

    /// The `api_base` to configure.
    pub fn api_base(&self) -> String {
        format!("{}/api", self.url)
    }

    fn with<T>(&self, f: impl FnOnce(&mut State) -> T) -> T {
        f(&mut self.state.lock().unwrap())
    }

    /// `user` writes `text` in their direct message with the bot (`D` and
    /// the user's id); returns the message's `ts`.
    pub fn dm(&self, user: &str, text: &str) -> String {
        self.say(&format!("D{user}"), "im", user, text, None, "message")
    }

    /// `user` writes `text` in a thread of their direct message.
    pub fn dm_in_thread(&self, user: &str, thread_ts: &str, text: &str) -> String {
        self.say(
            &format!("D{user}"),
            "im",
            user,
            text,
            Some(thread_ts),
            "message",
        )
    }

    /// Keeps a file as Slack keeps what people share; returns its file
    /// object as events carry it (`url_private_download` on this server).
    pub fn add_file(&self, name: &str, mimetype: &str, bytes: &[u8]) -> Value {
        self.with(|s| {
            s.next_id += 1;
            let id = format!("F{}", s.next_id);
            let path = format!("T100-{id}/download/{name}");
            s.files.insert(path.clone(), bytes.to_vec());
            json!({"id": id, "name": name, "title": name, "mimetype": mimetype,
                "filetype": name.rsplit('.').next().unwrap_or_default(), "size": bytes.len(),
                "url_private": format!("{}/files-pri/{path}", s.url),
                "url_private_download": format!("{}/files-pri/{path}", s.url)})
        })
    }

    /// `user` shares `files` with `text` in their direct message (a
    /// `message` event of subtype `file_share`); returns its `ts`.
    pub fn dm_files(&self, user: &str, text: &str, files: Vec<Value>) -> String {
        self.with(|s| {
            let ts = next_ts(s);
            let event = json!({"type": "message", "subtype": "file_share",
                "channel": format!("D{user}"), "channel_type": "im", "user": user,
                "text": escape(text), "ts": ts, "event_ts": ts, "team": "T100",
                "files": files});
            let payload = event_callback(s, event);
            push(s, "events_api", payload);
            ts
        })
    }

    /// The private file paths fetched, with whether the bot token came along.
    pub fn downloads(&self) -> Vec<(String, bool)> {
        self.with(|s| s.downloads.clone())
    }

    /// The files the bot uploaded, in order.
    pub fn uploads(&self) -> Vec<Upload> {
        self.with(|s| s.uploads.clone())
    }

    /// `user` mentions the bot in `channel` (an `app_mention`), at the
    /// top level or in a thread; returns the message's `ts`.
    pub fn mention(&self, channel: &str, user: &str, text: &str, thread: Option<&str>) -> String {
        let text = format!("<@{BOT_USER}> {text}");
        self.say(channel, "channel", user, &text, thread, "app_mention")
    }

    fn say(
        &self,
        channel: &str,
        channel_type: &str,
        user: &str,
        text: &str,
        thread: Option<&str>,
        kind: &str,
    ) -> String {
        self.with(|s| {
            let ts = next_ts(s);
            let mut event = json!({"type": kind, "channel": channel, "user": user,
                "text": escape(text), "ts": ts, "event_ts": ts, "team": "T100"});
            if kind == "message" {
                event["channel_type"] = json!(channel_type);
            }
            if let Some(thread) = thread {
                event["thread_ts"] = json!(thread);
            }
            let payload = event_callback(s, event);
            push(s, "events_api", payload);
            ts
        })
    }

    /// `user` presses the button whose value is `value` on the bot's
    /// message `ts` in `channel`.
    pub fn press(&self, user: &str, channel: &str, ts: &str, value: &str) {
        self.with(|s| {
            let message = s
                .posted
                .iter()
                .find(|p| p.channel == channel && p.ts == ts)
                .cloned()
                .expect("no such message");
            let action_ts = next_ts(s);
            let mut shown = json!({"type": "message", "user": BOT_USER, "bot_id": BOT_ID,
                "ts": ts, "text": message.text, "blocks": message.blocks});
            if let Some(thread) = &message.thread_ts {
                shown["thread_ts"] = json!(thread);
            }
            let payload = json!({
                "type": "block_actions",
                "user": {"id": user, "username": user.to_lowercase(), "team_id": "T100"},
                "api_app_id": "A100",
                "token": "verification-token",
                "container": {"type": "message", "message_ts": ts, "channel_id": channel, "is_ephemeral": false},
                "trigger_id": format!("trigger-{action_ts}"),
                "team": {"id": "T100", "domain": "fake"},
                "channel": {"id": channel, "name": "directmessage"},
                "message": shown,
                "response_url": "https://hooks.slack.invalid/actions/1",
                "actions": [{"action_id": "pincer-0", "block_id": "pincer",
                    "text": {"type": "plain_text", "text": "button"}, "value": value,
                    "type": "button", "action_ts": action_ts}],
            });
            push(s, "interactive", payload);
        });
    }

    /// `user` gives the slash command `command` with `text` in `channel`
    /// (a `slash_commands` envelope); returns its `trigger_id`.
    pub fn slash(&self, user: &str, channel: &str, command: &str, text: &str) -> String {
        self.with(|s| {
            let payload = slash_payload(s, user, channel, command, text);
            let trigger = payload["trigger_id"]
                .as_str()
                .unwrap_or_default()
                .to_owned();
            push(s, "slash_commands", payload);
            trigger
        })
    }

    /// The form body Slack POSTs to a command's Request URL
    /// (`application/x-www-form-urlencoded`, the same fields as the
    /// envelope's payload), and its `trigger_id`.
    pub fn slash_form(
        &self,
        user: &str,
        channel: &str,
        command: &str,
        text: &str,
    ) -> (String, String) {
        self.with(|s| {
            let payload = slash_payload(s, user, channel, command, text);
            let mut form = form_urlencoded::Serializer::new(String::new());
            for (name, value) in payload.as_object().unwrap() {
                form.append_pair(name, value.as_str().unwrap());
            }
            let trigger = payload["trigger_id"].as_str().unwrap().to_owned();
            (form.finish(), trigger)
        })
    }

    /// Sends the envelope of the event with this `ts` (or of the slash
    /// command with this `trigger_id`) again, as Slack retries one (a new
    /// envelope id, the next `retry_attempt`).
    pub fn replay(&self, ts: &str) {
        self.with(|s| {
            let old = s
                .envelopes
                .iter()
                .rev()
                .find(|e| e.payload["event"]["ts"] == ts || e.payload["trigger_id"] == ts)
                .cloned()
                .expect("no such event");
            s.next_id += 1;
            let envelope = Envelope {
                envelope_id: format!("env-{}", s.next_id),
                retry_attempt: old.retry_attempt + 1,
                sent_on: None,
                sent_at: None,
                acked_at: None,
                ..old
            };
            s.envelopes.push(envelope);
            deliver(s);
        });
    }

    /// Forgets every envelope not yet acknowledged (as if an app had
    /// acknowledged them all): a new app starts from nothing.
    pub fn forget_envelopes(&self) {
        self.with(|s| {
            for envelope in &mut s.envelopes {
                envelope.acked_at.get_or_insert_with(Instant::now);
            }
        });
    }

    /// Drops the newest open connection without a close frame.
    pub fn drop_connection(&self) {
        self.with(|s| {
            if let Some(c) = s.connections.iter_mut().rev().find(|c| c.open) {
                let _ = c.tx.send(Command::Drop);
                c.open = false;
            }
        });
    }

    /// Asks the app to reconnect: a `disconnect` envelope
    /// (`refresh_requested`) on the newest open connection, which stays
    /// open until the app closes it.
    pub fn ask_reconnect(&self) {
        self.with(|s| {
            if let Some(c) = s.connections.iter().rev().find(|c| c.open) {
                let frame = json!({"type": "disconnect", "reason": "refresh_requested",
                    "debug_info": {"host": "fake-slack"}});
                let _ = c.tx.send(Command::Text(frame.to_string()));
            }
        });
    }

    /// The next `count` calls of `method` are answered with this HTTP
    /// status and error (429 with `Retry-After` when given).
    pub fn fail(
        &self,
        method: &str,
        count: usize,
        status: u16,
        error: &str,
        retry_after: Option<u64>,
    ) {
        self.with(|s| {
            let queue = s.failures.entry(method.to_owned()).or_default();
            for _ in 0..count {
                queue.push_back((status, error.to_owned(), retry_after));
            }
        });
    }

    /// The next call of `method` is answered 429 `ratelimited` with
    /// `Retry-After: secs`.
    pub fn rate_limit(&self, method: &str, secs: u64) {
        self.fail(method, 1, 429, "ratelimited", Some(secs));
    }

    /// Calls of `method` are acted on (a post shows) but never answered.
    pub fn hold_acted(&self, method: &str) {
        self.with(|s| s.hold_acted.push(method.to_owned()));
    }

    /// Calls of `method` are recorded (they reached Slack) but neither
    /// acted on nor answered.
    pub fn hold(&self, method: &str) {
        self.with(|s| s.hold.push(method.to_owned()));
    }

    /// Stops holding `method` and forgets its queued failures.
    pub fn release(&self, method: &str) {
        self.with(|s| {
            s.hold_acted.retain(|m| m != method);
            s.hold.retain(|m| m != method);
            s.failures.remove(method);
        });
    }

    pub fn calls(&self, method: &str) -> Vec<Call> {
        self.with(|s| {
            s.calls
                .iter()
                .filter(|c| c.method == method)
                .cloned()
                .collect()
        })
    }

    pub fn all_calls(&self) -> Vec<Call> {
        self.with(|s| s.calls.clone())
    }

    /// The bot's messages in `channel` people see now, in order.
    pub fn shown(&self, channel: &str) -> Vec<Posted> {
        self.with(|s| {
            s.posted
                .iter()
                .filter(|p| p.channel == channel && !p.deleted)
                .cloned()
                .collect()
        })
    }

    /// Their texts.
    pub fn texts(&self, channel: &str) -> Vec<String> {
        self.shown(channel).into_iter().map(|p| p.text).collect()
    }

    pub fn envelopes(&self) -> Vec<Envelope> {
        self.with(|s| s.envelopes.clone())
    }

    /// How many connections were opened (greeted with `hello`).
    pub fn connections(&self) -> usize {
        self.with(|s| s.connections.len())
    }

    /// How many are open now.
    pub fn open_connections(&self) -> usize {
        self.with(|s| s.connections.iter().filter(|c| c.open).count())
    }

    /// Whether the app closed connection `n` (from 1) with a close frame.
    pub fn closed_by_app(&self, n: usize) -> bool {
        self.with(|s| s.connections.get(n - 1).is_some_and(|c| c.closed_by_app))
    }

    /// When each connection opened and closed, in order.
    pub fn connection_times(&self) -> Vec<(Instant, Option<Instant>)> {
        self.with(|s| {
            s.connections
                .iter()
                .map(|c| (c.opened_at, c.closed_at))
                .collect()
        })
    }

    /// Waits until `check` holds, or panics after `timeout` with `what`.
    pub fn wait_for(&self, what: &str, timeout: Duration, check: impl Fn(&Self) -> bool) {
        let deadline = Instant::now() + timeout;
        while Instant::now() < deadline {
            if check(self) {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let calls = self.all_calls();
        panic!("timed out waiting for {what}; calls: {calls:#?}");
    }
}

/// Slack's text escaping.
fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        // A mention the fake itself wrote stays a mention.
        .replace(&format!("&lt;@{BOT_USER}&gt;"), &format!("<@{BOT_USER}>"))
}

fn next_ts(s: &mut State) -> String {
    s.next_ts += 100;
    format!("{}.{:06}", s.next_ts / 1_000_000, s.next_ts % 1_000_000)
}

/// A slash command's payload as Slack documents it: every value a string.
fn slash_payload(s: &mut State, user: &str, channel: &str, command: &str, text: &str) -> Value {
    s.next_id += 1;
    let trigger = format!("{}.100.{:032x}", 13_345_224_609u64 + s.next_id, s.next_id);
    let channel_name = if channel.starts_with('D') {
        "directmessage"
    } else {
        "general"
    };
    json!({"token": "verification-token", "team_id": "T100", "team_domain": "fake",
        "channel_id": channel, "channel_name": channel_name, "user_id": user,
        "user_name": user.to_lowercase(), "command": command, "text": text,
        "api_app_id": "A100", "is_enterprise_install": "false",
        "response_url": format!("https://hooks.slack.invalid/commands/T100/{}/x", s.next_id),
        "trigger_id": trigger})
}

fn event_callback(s: &mut State, event: Value) -> Value {
    s.next_id += 1;
    json!({"token": "verification-token", "team_id": "T100", "api_app_id": "A100",
        "event": event, "type": "event_callback", "event_id": format!("Ev{}", s.next_id),
        "event_time": 1_700_000_000, "authorizations": [{"team_id": "T100", "user_id": BOT_USER, "is_bot": true}]})
}

/// Records a new envelope and sends what is outstanding.
fn push(s: &mut State, kind: &str, payload: Value) {
    s.next_id += 1;
    s.envelopes.push(Envelope {
        envelope_id: format!("env-{}", s.next_id),
        kind: kind.to_owned(),
        payload,
        retry_attempt: 0,
        sent_on: None,
        sent_at: None,
        acked_at: None,
    });
    deliver(s);
}

/// Sends every envelope not acknowledged and not out on an open connection
/// on the newest open connection (Slack's retry of one whose connection
/// went away counts an attempt).
fn deliver(s: &mut State) {
    let Some(connection) = s.connections.iter().rev().find(|c| c.open) else {
        return;
    };
    let (id, tx) = (connection.id, connection.tx.clone());
    let open: Vec<u64> = s
        .connections
        .iter()
        .filter(|c| c.open)
        .map(|c| c.id)
        .collect();
    for envelope in s.envelopes.iter_mut() {
        let out = envelope.sent_on.is_some_and(|c| open.contains(&c));
        if envelope.acked_at.is_some() || out {
            continue;
        }
        if envelope.sent_on.is_some() {
            envelope.retry_attempt += 1;
        }
        envelope.sent_on = Some(id);
        envelope.sent_at = Some(Instant::now());
        let frame = json!({"envelope_id": envelope.envelope_id, "type": envelope.kind,
            "payload": envelope.payload,
            // Slack takes a response payload in a slash command's acknowledgement.
            "accepts_response_payload": envelope.kind == "slash_commands",
            "retry_attempt": envelope.retry_attempt,
            "retry_reason": if envelope.retry_attempt > 0 { "timeout" } else { "" }});
        let _ = tx.send(Command::Text(frame.to_string()));
    }
}

/// The WebSocket `apps.connections.open` named.
async fn link(
    ws: WebSocketUpgrade,
    Query(query): Query<HashMap<String, String>>,
    AxumState(state): AxumState<Arc<Mutex<State>>>,
) -> Response {
    if !query
        .get("ticket")
        .is_some_and(|t| t.starts_with("ticket-"))
    {
        return (StatusCode::UNAUTHORIZED, "no ticket").into_response();
    }
    ws.on_upgrade(move |socket| serve(socket, state))
}

async fn serve(mut socket: WebSocket, state: Arc<Mutex<State>>) {
    let (tx, mut rx) = mpsc::unbounded_channel();
    let id = {
        let mut s = state.lock().unwrap();
        let id = s.connections.len() as u64 + 1;
        let hello = json!({"type": "hello", "num_connections": s.connections.iter().filter(|c| c.open).count() + 1,
            "debug_info": {"host": "fake-slack", "build_number": 1, "approximate_connection_time": 18060},
            "connection_info": {"app_id": "A100"}});
        tx.send(Command::Text(hello.to_string())).unwrap();
        s.connections.push(Connection {
            id,
            tx,
            open: true,
            closed_by_app: false,
            opened_at: Instant::now(),
            closed_at: None,
        });
        deliver(&mut s);
        id
    };
    loop {
        tokio::select! {
            command = rx.recv() => match command {
                Some(Command::Text(text)) => {
                    if socket.send(Message::Text(text.into())).await.is_err() {
                        break;
                    }
                }
                Some(Command::Drop) | None => {
                    // Without a close frame: the TCP connection just ends.
                    drop(socket);
                    let mut s = state.lock().unwrap();
                    s.connections[id as usize - 1].open = false;
                    s.connections[id as usize - 1].closed_at = Some(Instant::now());
                    return;
                }
            },
            frame = socket.recv() => match frame {
                Some(Ok(Message::Text(text))) => {
                    let Ok(ack) = serde_json::from_str::<Value>(text.as_str()) else { continue };
                    let mut s = state.lock().unwrap();
                    if let Some(envelope) = s.envelopes.iter_mut().find(|e| ack["envelope_id"] == e.envelope_id.as_str()) {
                        envelope.acked_at.get_or_insert_with(Instant::now);
                    }
                }
                Some(Ok(Message::Close(_))) => {
                    let mut s = state.lock().unwrap();
                    s.connections[id as usize - 1].closed_by_app = true;
                    break;
                }
                Some(Ok(_)) => {}
                Some(Err(_)) | None => break,
            },
        }
    }
    let mut s = state.lock().unwrap();
    s.connections[id as usize - 1].open = false;
    s.connections[id as usize - 1].closed_at = Some(Instant::now());
}

fn ok(body: Value) -> Response {
    let mut body = body;
    body["ok"] = json!(true);
    axum::Json(body).into_response()
}

fn error(status: u16, error: &str, retry_after: Option<u64>) -> Response {
    let mut response = (
        StatusCode::from_u16(status).unwrap(),
        axum::Json(json!({"ok": false, "error": error})),
    )
        .into_response();
    if let Some(secs) = retry_after {
        response
            .headers_mut()
            .insert("retry-after", secs.to_string().parse().unwrap());
    }
    response
}

/// An upload URL `files.getUploadURLExternal` gave: takes the bytes (raw
/// or multipart, as Slack takes them; raw here) and answers `200`.
async fn upload(
    Path(ticket): Path<String>,
    AxumState(state): AxumState<Arc<Mutex<State>>>,
    headers: HeaderMap,
    body: axum::body::Bytes,
) -> Response {
    let header = |name: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned)
    };
    let mut s = state.lock().unwrap();
    let Some(upload) = s
        .uploads
        .iter_mut()
        .find(|u| ticket == format!("ticket-{}", u.file_id))
    else {
        return StatusCode::NOT_FOUND.into_response();
    };
    upload.bytes = Some(body.to_vec());
    upload.content_type = header("content-type");
    upload.authorization = header("authorization");
    (StatusCode::OK, format!("OK - {}", body.len())).into_response()
}

/// A file's private URL: its bytes with the bot token; without it,
/// Slack's sign-in page (HTML, status 200), as Slack answers.
async fn file(
    Path(path): Path<String>,
    AxumState(state): AxumState<Arc<Mutex<State>>>,
    headers: HeaderMap,
) -> Response {
    let authed = headers.get("authorization").and_then(|v| v.to_str().ok())
        == Some(format!("Bearer {BOT_TOKEN}").as_str());
    let mut s = state.lock().unwrap();
    s.downloads.push((path.clone(), authed));
    if !authed {
        return (
            [("content-type", "text/html; charset=utf-8")],
            "<html><body>Sign in to Slack</body></html>",
        )
            .into_response();
    }
    match s.files.get(&path) {
        Some(bytes) => (
            [("content-type", "application/octet-stream")],
            bytes.clone(),
        )
            .into_response(),
        None => StatusCode::NOT_FOUND.into_response(),
    }
}

async fn web_api(
    Path(method): Path<String>,
    AxumState(state): AxumState<Arc<Mutex<State>>>,
    headers: HeaderMap,
    body: axum::body::Bytes,
) -> Response {
    let token = headers
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .unwrap_or_default()
        .to_owned();
    let form = headers
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/x-www-form-urlencoded"));
    let body: Value = if form {
        // Form fields as a JSON object of strings.
        Value::Object(
            form_urlencoded::parse(&body)
                .map(|(k, v)| (k.into_owned(), Value::String(v.into_owned())))
                .collect(),
        )
    } else {
        serde_json::from_slice(&body).unwrap_or(Value::Null)
    };
    let (answer, held) = {
        let mut s = state.lock().unwrap();
        s.calls.push(Call {
            method: method.clone(),
            body: body.clone(),
            at: Instant::now(),
        });
        if let Some((status, err, retry)) =
            s.failures.get_mut(&method).and_then(VecDeque::pop_front)
        {
            return error(status, &err, retry);
        }
        let wanted = if method == "apps.connections.open" {
            APP_TOKEN
        } else {
            BOT_TOKEN
        };
        if token.is_empty() {
            return error(200, "not_authed", None);
        }
        if token != wanted {
            return error(200, "invalid_auth", None);
        }
        if s.hold.contains(&method) {
            (None, true)
        } else {
            (
                Some(act(&mut s, &method, &body)),
                s.hold_acted.contains(&method),
            )
        }
    };
    if held {
        std::future::pending::<()>().await;
    }
    answer.unwrap_or_else(|| error(500, "internal_error", None))
}

/// What a method does, and its answer.
fn act(s: &mut State, method: &str, body: &Value) -> Response {
    let channel = body["channel"].as_str().unwrap_or_default().to_owned();
    match method {
        "auth.test" => ok(json!({"url": "https://fake.slack.invalid/", "team": "Fake",
            "user": "pincer", "team_id": "T100", "user_id": BOT_USER, "bot_id": BOT_ID,
            "is_enterprise_install": false})),
        "apps.connections.open" => {
            s.next_id += 1;
            let url = format!(
                "{}/link/?ticket=ticket-{}&app_id=A100",
                s.url.replacen("http", "ws", 1),
                s.next_id
            );
            ok(json!({"url": url}))
        }
        "chat.postMessage" => {
            if channel.is_empty() {
                return error(200, "channel_not_found", None);
            }
            let text = body["text"].as_str().unwrap_or_default().to_owned();
            if text.is_empty() && body["blocks"].as_array().is_none_or(Vec::is_empty) {
                return error(200, "no_text", None);
            }
            if text.chars().count() > 40_000 {
                return error(200, "msg_too_long", None);
            }
            let ts = next_ts(s);
            let thread_ts = body["thread_ts"].as_str().map(str::to_owned);
            s.posted.push(Posted {
                channel: channel.clone(),
                ts: ts.clone(),
                thread_ts: thread_ts.clone(),
                text: text.clone(),
                blocks: body["blocks"].clone(),
                files: Vec::new(),
                deleted: false,
            });
            let mut message = json!({"type": "message", "user": BOT_USER, "bot_id": BOT_ID,
                "text": text, "ts": ts});
            if let Some(thread) = &thread_ts {
                message["thread_ts"] = json!(thread);
            }
            if channel.starts_with('D') {
                // Slack tells the app of its own message in a direct message.
                let mut event = message.clone();
                event["channel"] = json!(channel);
                event["channel_type"] = json!("im");
                event["event_ts"] = json!(ts);
                let payload = event_callback(s, event);
                push(s, "events_api", payload);
            }
            ok(json!({"channel": channel, "ts": ts, "message": message}))
        }
        "chat.update" => {
            let ts = body["ts"].as_str().unwrap_or_default();
            let Some(message) = s
                .posted
                .iter_mut()
                .find(|p| p.channel == channel && p.ts == ts && !p.deleted)
            else {
                return error(200, "message_not_found", None);
            };
            if let Some(text) = body["text"].as_str() {
                message.text = text.to_owned();
            }
            if body.get("blocks").is_some() {
                message.blocks = body["blocks"].clone();
            }
            let text = message.text.clone();
            ok(json!({"channel": channel, "ts": ts, "text": text}))
        }
        "chat.delete" => {
            let ts = body["ts"].as_str().unwrap_or_default();
            let Some(message) = s
                .posted
                .iter_mut()
                .find(|p| p.channel == channel && p.ts == ts && !p.deleted)
            else {
                return error(200, "message_not_found", None);
            };
            message.deleted = true;
            ok(json!({"channel": channel, "ts": ts}))
        }
        m if m.starts_with("files.") => files(s, m, body),
        _ => error(200, "unknown_method", None),
    }
}

/// The file methods: an upload reserved, shared, deleted.
fn files(s: &mut State, method: &str, body: &Value) -> Response {
    match method {
        "files.getUploadURLExternal" => {
            let filename = body["filename"].as_str().unwrap_or_default().to_owned();
            // Form fields are strings; JSON may carry a number.
            let length = body["length"]
                .as_u64()
                .or_else(|| body["length"].as_str().and_then(|l| l.parse().ok()))
                .unwrap_or(0);
            if filename.is_empty() || length == 0 {
                return error(200, "missing_argument", None);
            }
            s.next_id += 1;
            let file_id = format!("F{:08}", s.next_id);
            let upload_url = format!("{}/upload/v1/ticket-{file_id}", s.url);
            s.uploads.push(Upload {
                file_id: file_id.clone(),
                filename,
                length,
                ..Upload::default()
            });
            ok(json!({"upload_url": upload_url, "file_id": file_id}))
        }
        "files.completeUploadExternal" => {
            // A JSON array, or (form-encoded) its text.
            let files = body["files"].as_str().map_or_else(
                || body["files"].clone(),
                |text| serde_json::from_str(text).unwrap_or(Value::Null),
            );
            let Some(files) = files.as_array().filter(|f| !f.is_empty()).cloned() else {
                return error(200, "invalid_arguments", None);
            };
            let uploaded = |id: &Value| {
                s.uploads
                    .iter()
                    .any(|u| id == u.file_id.as_str() && u.bytes.is_some() && !u.shared)
            };
            if !files.iter().all(|f| uploaded(&f["id"])) {
                return error(200, "invalid_arguments", None);
            }
            let channel = body["channel_id"]
                .as_str()
                .or_else(|| body["channels"].as_str())
                .map(str::to_owned);
            let thread_ts = body["thread_ts"].as_str().map(str::to_owned);
            let comment = body["initial_comment"].as_str().map(str::to_owned);
            let ids: Vec<String> = files
                .iter()
                .filter_map(|f| f["id"].as_str().map(str::to_owned))
                .collect();
            let mut answered = Vec::new();
            for file in &files {
                let upload = s
                    .uploads
                    .iter_mut()
                    .find(|u| file["id"] == u.file_id.as_str())
                    .unwrap();
                upload.title = file["title"].as_str().map(str::to_owned);
                upload.channel = channel.clone();
                upload.thread_ts = thread_ts.clone();
                upload.initial_comment = comment.clone();
                upload.shared = true;
                let title = upload
                    .title
                    .clone()
                    .unwrap_or_else(|| upload.filename.clone());
                answered.push(json!({"id": upload.file_id, "title": title}));
            }
            // Shared in a channel: a message of the bot's with the files.
            if let Some(channel) = channel {
                let ts = next_ts(s);
                let text = comment.unwrap_or_default();
                s.posted.push(Posted {
                    channel: channel.clone(),
                    ts: ts.clone(),
                    thread_ts: thread_ts.clone(),
                    text: text.clone(),
                    blocks: Value::Null,
                    files: ids,
                    deleted: false,
                });
                if channel.starts_with('D') {
                    // Slack tells the app of its own file share too.
                    let mut event = json!({"type": "message", "subtype": "file_share",
                        "user": BOT_USER, "bot_id": BOT_ID, "text": text, "ts": ts,
                        "channel": channel, "channel_type": "im", "event_ts": ts,
                        "files": answered});
                    if let Some(thread) = &thread_ts {
                        event["thread_ts"] = json!(thread);
                    }
                    let payload = event_callback(s, event);
                    push(s, "events_api", payload);
                }
            }
            ok(json!({"files": answered}))
        }
        "files.delete" => {
            let id = body["file"].as_str().unwrap_or_default();
            let Some(upload) = s.uploads.iter_mut().find(|u| u.file_id == id) else {
                return error(200, "file_not_found", None);
            };
            if upload.deleted {
                return error(200, "file_deleted", None);
            }
            upload.deleted = true;
            for post in s
                .posted
                .iter_mut()
                .filter(|p| p.files.iter().any(|f| f == id))
            {
                post.deleted = true;
            }
            ok(json!({}))
        }
        _ => error(200, "unknown_method", None),
    }
}
