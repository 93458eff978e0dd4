#![allow(dead_code)]
//! A fake Discord on loopback, written from Discord's published Gateway and
//! HTTP API documents.
//!
//! The Gateway (a WebSocket server) says Hello (op 10) with a heartbeat
//! interval, answers Heartbeats (op 1) with ACKs (op 11), opens a session on
//! Identify (op 2) with READY (its `session_id` and a `resume_gateway_url` of
//! its own, `/resume`), and on Resume (op 6) replays every dispatch after the
//! sequence it was given, then RESUMED; a session it invalidated is answered
//! op 9 `false`. Dispatches (op 0) carry `s` and `t`.
//!
//! The HTTP API serves `/api/v10`: create, edit and delete a message (a create
//! with `enforce_nonce` whose nonce was seen in that channel returns the
//! message already made), and interaction callbacks. A create may upload
//! files ("Uploading Files"): a `multipart/form-data` body of `payload_json`
//! (or the fields as parts) and `files[n]` parts, each with a `filename`, the
//! `attachments` of the payload naming only ids of parts sent; the message
//! then carries them as `attachments`, and the fake keeps their bytes. Every answer carries
//! `X-RateLimit-Limit/Remaining/Reset-After/Bucket`; a request to a bucket
//! with nothing left, or before a 429's `retry_after`, is answered 429 with
//! `Retry-After`, `X-RateLimit-Scope` and a JSON body `{message,
//! retry_after, global}`, and counted as a violation.
//!
//! On command it misbehaves: drops the connection, asks for a reconnect
//! (op 7), invalidates the session (op 9, resumable or not), replays a
//! dispatch, stops acknowledging heartbeats (a zombie), answers the next
//! call of a route 429, or 429 with the global limit (`X-RateLimit-Global:
//! true`, `X-RateLimit-Scope: global`, `global: true`), after which every
//! request but an interaction callback is refused the same way, and counted
//! as a violation, until its `retry_after` has passed.

use std::collections::{HashMap, VecDeque};
use std::io::ErrorKind;
use std::net::TcpListener;
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::{self, Message};

use super::http::{Loopback, Reply, Request};

/// A bot token whose first part is `999` in base64: the bot's user id.
pub const TOKEN: &str = "OTk5.GhIjKl.fake-discord-secret";
pub const BOT: &str = "999";
/// Requests per bucket per window (unless `limit_per_window` says
/// otherwise), and the window.
const LIMIT: u32 = 5;
const WINDOW: Duration = Duration::from_secs(1);

/// One HTTP API call the fake answered.
#[derive(Debug, Clone)]
pub struct Call {
    pub method: String,
    pub path: String,
    pub body: Value,
    pub at: Instant,
    pub status: u16,
    /// The files a multipart create uploaded: (filename, bytes).
    pub files: Vec<(String, Vec<u8>)>,
}

/// A file the bot uploaded with a message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Upload {
    /// The message it came with.
    pub message: String,
    pub filename: String,
    pub bytes: Vec<u8>,
}

/// How a Gateway connection began.
#[derive(Debug, Clone)]
pub struct Connection {
    /// The request path (`/?v=10&encoding=json`, `/resume/?v=10…`).
    pub path: String,
    /// The first payload the client sent after Hello (op 2 or 6).
    pub opening: Value,
}

/// A misbehaviour the live connection acts on.
#[derive(Debug, Clone)]
enum Command {
    Drop,
    Reconnect,
    Invalidate(bool),
    Replay,
}

#[derive(Default)]
struct Bucket {
    remaining: u32,
    reset_at: Option<Instant>,
    /// Nothing before this (a 429's `retry_after`).
    blocked_until: Option<Instant>,
}

#[derive(Default)]
struct State {
    /// The REST server's root (`http://127.0.0.1:PORT`), which also serves
    /// attachments as Discord's CDN does.
    base: String,
    /// Attachments people sent: path → bytes.
    files: HashMap<String, Vec<u8>>,
    /// Attachment paths fetched, with whether an `Authorization` came along.
    fetched: Vec<(String, bool)>,
    next_id: u64,
    /// Session id → its dispatches, in order (each with its `s`).
    sessions: HashMap<String, Vec<Value>>,
    invalid: Vec<String>,
    /// The session dispatches go to.
    current: Option<String>,
    connections: Vec<Connection>,
    commands: VecDeque<Command>,
    zombie: bool,
    heartbeats: Vec<(Instant, Value)>,
    /// channel id → (message id, content, components).
    messages: HashMap<String, Vec<(String, String, Value)>>,
    nonces: HashMap<(String, String), String>,
    /// channel id → the files the bot uploaded there, in order.
    uploads: HashMap<String, Vec<Upload>>,
    calls: Vec<Call>,
    buckets: HashMap<String, Bucket>,
    /// Routes (`POST messages`) whose next call is answered 429 with this wait.
    limit_next: VecDeque<(String, f64)>,
    /// Routes whose next call is answered with a global 429 of this wait.
    global_next: VecDeque<(String, f64)>,
    /// Until when every request is refused (a global 429 given).
    global_until: Option<Instant>,
    /// Requests that came to a bucket before it allowed them.
    violations: Vec<String>,
    /// Routes whose next call is acted on (the message is in the channel),
    /// then never answered: a `kill -9` lands after Discord acted.
    hold_acted: Vec<String>,
    /// Creates answered 502, as with Discord down.
    down: bool,
    /// Requests per bucket per window.
    limit: u32,
}

#[derive(Clone)]
pub struct FakeDiscord {
    /// `http://127.0.0.1:PORT/api/v10`.
    pub api: String,
    /// `ws://127.0.0.1:PORT`.
    pub gateway: String,
    state: Arc<(Mutex<State>, Condvar)>,
}

impl FakeDiscord {
    pub fn start() -> Self {
        Self::with_heartbeat(Duration::from_millis(400))
    }

    /// A fake whose Hello asks for a heartbeat every `interval`.
    pub fn with_heartbeat(interval: Duration) -> Self {
        let state = Arc::new((
            Mutex::new(State {
                next_id: 1_200_000_000_000_000_000,
                limit: LIMIT,
                ..State::default()
            }),
            Condvar::new(),
        ));
        let shared = state.clone();
        let rest = Loopback::start(move |request, _| answer(request, &shared));
        state.0.lock().unwrap().base = rest.url.clone();
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let gateway = format!("ws://{}", listener.local_addr().unwrap());
        let shared = state.clone();
        let resume = gateway.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(stream) = stream else { return };
                let shared = shared.clone();
                let resume = resume.clone();
                std::thread::spawn(move || serve_gateway(stream, &shared, &resume, interval));
            }
        });
        Self {
            api: format!("{}/api/v10", rest.url),
            gateway,
            state,
        }
    }

    fn with<T>(&self, f: impl FnOnce(&mut State) -> T) -> T {
        let (lock, cvar) = &*self.state;
        let mut state = lock.lock().unwrap();
        let out = f(&mut state);
        cvar.notify_all();
        out
    }

    /// Waits until `check` holds; panics naming `what` after `timeout`.
    pub fn wait_for(&self, what: &str, timeout: Duration, check: impl Fn(&Self) -> bool) {
        let deadline = Instant::now() + timeout;
        while !check(self) {
            assert!(Instant::now() < deadline, "timed out waiting for {what}");
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// A direct message from `user` carrying `files` (name, content type,
    /// bytes) as attachments, each at a signed CDN-like URL; returns its id.
    pub fn user_sends_files(
        &self,
        channel: &str,
        user: &str,
        text: &str,
        files: &[(&str, &str, &[u8])],
    ) -> String {
        self.with(|s| {
            s.next_id += 1;
            let id = s.next_id.to_string();
            let mut attachments = Vec::new();
            for (n, (name, content_type, bytes)) in files.iter().enumerate() {
                let path = format!("/attachments/{channel}/{id}{n}/{name}");
                s.files.insert(path.clone(), bytes.to_vec());
                attachments.push(json!({"id": format!("{id}{n}"), "filename": name,
                    "content_type": content_type, "size": bytes.len(),
                    "url": format!("{}{path}?ex=6a&is=69&hm=ab", s.base),
                    "proxy_url": format!("{}{path}", s.base)}));
            }
            dispatch(
                s,
                "MESSAGE_CREATE",
                json!({"id": id, "channel_id": channel, "type": 0, "content": text,
                    "author": {"id": user, "username": "ada", "global_name": "Ada"},
                    "mentions": [], "attachments": attachments,
                    "timestamp": "2026-11-28T00:00:00.000000+00:00"}),
            );
            id
        })
    }

    /// The attachment paths fetched, with whether an `Authorization` came along.
    pub fn fetched(&self) -> Vec<(String, bool)> {
        self.with(|s| s.fetched.clone())
    }

    /// A direct message from `user` in DM channel `channel`; returns its id.
    pub fn user_says(&self, channel: &str, user: &str, text: &str) -> String {
        self.with(|s| say(s, channel, user, text))
    }

    /// A message from `user` in guild `guild`'s channel (or thread)
    /// `channel`, mentioning the bot (`<@BOT>` in the text and `mentions`)
    /// when `mention`; returns its id.
    pub fn guild_says(
        &self,
        guild: &str,
        channel: &str,
        user: &str,
        text: &str,
        mention: bool,
    ) -> String {
        self.with(|s| {
            s.next_id += 1;
            let id = s.next_id.to_string();
            let (content, mentions) = if mention {
                (
                    format!("<@{BOT}> {text}"),
                    json!([{"id": BOT, "username": "pincer", "bot": true}]),
                )
            } else {
                (text.to_owned(), json!([]))
            };
            dispatch(
                s,
                "MESSAGE_CREATE",
                json!({"id": id, "channel_id": channel, "guild_id": guild, "type": 0,
                    "content": content, "mentions": mentions, "attachments": [],
                    "author": {"id": user, "username": "ada"},
                    "member": {"roles": []},
                    "timestamp": "2026-11-28T00:00:00.000000+00:00"}),
            );
            id
        })
    }

    /// Drops the live connection, then `user` writes while the bot is away:
    /// only a resume brings the message.
    pub fn drop_then_say(&self, channel: &str, user: &str, text: &str) -> String {
        self.with(|s| {
            s.commands.push_back(Command::Drop);
            say(s, channel, user, text)
        })
    }

    /// Presses a button (`custom_id`) of message `message` in `channel`:
    /// an INTERACTION_CREATE of type 3; returns the interaction's id.
    pub fn press(&self, channel: &str, user: &str, message: &str, custom_id: &str) -> String {
        self.with(|s| {
            s.next_id += 1;
            let id = s.next_id.to_string();
            dispatch(
                s,
                "INTERACTION_CREATE",
                json!({"id": id, "application_id": BOT, "type": 3, "token": format!("tok-{id}"),
                    "version": 1, "channel_id": channel, "user": {"id": user, "username": "ada"},
                    "message": {"id": message, "channel_id": channel},
                    "data": {"custom_id": custom_id, "component_type": 2}}),
            );
            id
        })
    }

    pub fn drop_connection(&self) {
        self.with(|s| s.commands.push_back(Command::Drop));
    }

    /// Sends op 7 Reconnect.
    pub fn ask_reconnect(&self) {
        self.with(|s| s.commands.push_back(Command::Reconnect));
    }

    /// Sends op 9; a session not `resumable` can no longer be resumed.
    pub fn invalidate(&self, resumable: bool) {
        self.with(|s| s.commands.push_back(Command::Invalidate(resumable)));
    }

    /// Sends the last dispatch again on the live connection.
    pub fn replay_last(&self) {
        self.with(|s| s.commands.push_back(Command::Replay));
    }

    /// Stops (or resumes) acknowledging heartbeats.
    pub fn zombie(&self, on: bool) {
        self.with(|s| s.zombie = on);
    }

    /// The next call whose route starts with `route` (`POST messages`,
    /// `PATCH messages`) is answered 429 with `retry_after` seconds.
    pub fn limit_next(&self, route: &str, retry_after: f64) {
        self.with(|s| s.limit_next.push_back((route.to_owned(), retry_after)));
    }

    /// The next call whose route starts with `route` is answered with a
    /// global 429 of `retry_after` seconds: nothing else may come before.
    pub fn limit_global_next(&self, route: &str, retry_after: f64) {
        self.with(|s| s.global_next.push_back((route.to_owned(), retry_after)));
    }

    /// The next call whose route starts with `route` (`POST messages`, or
    /// `POST messages upload`: a create with files) is acted on, then never
    /// answered (its client waits until it is killed).
    pub fn hold_acted_next(&self, route: &str) {
        self.with(|s| s.hold_acted.push(route.to_owned()));
    }

    /// Each bucket allows `limit` requests a window from now on.
    pub fn limit_per_window(&self, limit: u32) {
        self.with(|s| s.limit = limit);
    }

    /// Creates answered 502 from now on (`true`), or served again.
    pub fn down(&self, down: bool) {
        self.with(|s| s.down = down);
    }

    pub fn connections(&self) -> Vec<Connection> {
        self.with(|s| s.connections.clone())
    }

    pub fn heartbeats(&self) -> Vec<(Instant, Value)> {
        self.with(|s| s.heartbeats.clone())
    }

    pub fn calls(&self, method: &str, contains: &str) -> Vec<Call> {
        self.with(|s| {
            s.calls
                .iter()
                .filter(|c| c.method == method && c.path.contains(contains))
                .cloned()
                .collect()
        })
    }

    /// Every call answered, in order.
    pub fn all_calls(&self) -> Vec<Call> {
        self.with(|s| s.calls.clone())
    }

    pub fn violations(&self) -> Vec<String> {
        self.with(|s| s.violations.clone())
    }

    /// The messages of `channel` as a person sees them now: (id, content, components).
    pub fn channel(&self, channel: &str) -> Vec<(String, String, Value)> {
        self.with(|s| s.messages.get(channel).cloned().unwrap_or_default())
    }

    /// The files the bot uploaded in `channel`, in order.
    pub fn uploads(&self, channel: &str) -> Vec<Upload> {
        self.with(|s| s.uploads.get(channel).cloned().unwrap_or_default())
    }

    pub fn texts(&self, channel: &str) -> Vec<String> {
        self.channel(channel)
            .into_iter()
            .map(|(_, t, _)| t)
            .collect()
    }
}

fn say(s: &mut State, channel: &str, user: &str, text: &str) -> String {
    s.next_id += 1;
    let id = s.next_id.to_string();
    dispatch(
        s,
        "MESSAGE_CREATE",
        json!({"id": id, "channel_id": channel, "type": 0, "content": text,
            "author": {"id": user, "username": "ada", "global_name": "Ada"},
            "mentions": [], "attachments": [], "timestamp": "2026-11-28T00:00:00.000000+00:00"}),
    );
    id
}

/// Appends a dispatch to the current session (or the next one opened).
fn dispatch(s: &mut State, name: &str, data: Value) {
    let key = s.current.clone().unwrap_or_default();
    let log = s.sessions.entry(key).or_default();
    let seq = log.last().and_then(|e| e["s"].as_u64()).unwrap_or(0) + 1;
    log.push(json!({"op": 0, "t": name, "s": seq, "d": data}));
}

fn send(ws: &mut tungstenite::WebSocket<std::net::TcpStream>, value: &Value) -> bool {
    ws.send(Message::text(value.to_string())).is_ok()
}

/// What one Gateway connection knows.
struct Conn {
    /// The request path it was opened on.
    path: String,
    /// The `resume_gateway_url` READY names.
    base: String,
    /// The session it serves.
    session: Option<String>,
    /// The last `s` it sent.
    sent: u64,
}

/// What the connection does after a payload or a look at the commands.
#[derive(Default)]
struct Step {
    out: Vec<Value>,
    /// Close with 4004 (a bad token).
    refuse: bool,
    /// Cut the TCP connection without a close frame.
    drop: bool,
    /// Send `out`, then wait for the client to close.
    end: bool,
}

impl Conn {
    /// A payload the client sent.
    fn payload(&mut self, s: &mut State, payload: &Value) -> Step {
        let mut step = Step::default();
        match payload["op"].as_u64() {
            Some(1) => {
                s.heartbeats.push((Instant::now(), payload["d"].clone()));
                if !s.zombie {
                    step.out.push(json!({"op": 11}));
                }
            }
            Some(2) => self.identify(s, payload, &mut step),
            Some(6) => self.resume(s, payload, &mut step),
            _ => {}
        }
        step
    }

    fn identify(&mut self, s: &mut State, payload: &Value, step: &mut Step) {
        s.connections.push(Connection {
            path: self.path.clone(),
            opening: payload.clone(),
        });
        if payload["d"]["token"] != TOKEN {
            step.refuse = true;
            return;
        }
        s.next_id += 1;
        let id = format!("session-{}", s.next_id);
        // Dispatches queued before any session go to this one.
        let early = s.sessions.remove("").unwrap_or_default();
        let mut log = vec![json!({"op": 0, "t": "READY", "s": 1, "d": {
            "v": 10, "session_id": id,
            "resume_gateway_url": format!("{}/resume", self.base),
            "user": {"id": BOT, "username": "pincer", "bot": true},
            "guilds": [], "application": {"id": BOT, "flags": 0}}})];
        for (n, mut e) in early.into_iter().enumerate() {
            e["s"] = json!(n as u64 + 2);
            log.push(e);
        }
        s.sessions.insert(id.clone(), log);
        s.current = Some(id.clone());
        self.session = Some(id);
        self.sent = 0;
    }

    /// Replays what came after the client's sequence, then RESUMED.
    fn resume(&mut self, s: &mut State, payload: &Value, step: &mut Step) {
        s.connections.push(Connection {
            path: self.path.clone(),
            opening: payload.clone(),
        });
        let id = payload["d"]["session_id"].as_str().unwrap_or_default();
        let seq = payload["d"]["seq"].as_u64().unwrap_or(0);
        if s.invalid.iter().any(|i| i == id) || !s.sessions.contains_key(id) {
            step.out.push(json!({"op": 9, "d": false}));
            return;
        }
        self.session = Some(id.to_owned());
        s.current = Some(id.to_owned());
        let log = s.sessions.get_mut(id).unwrap();
        let last = log.last().and_then(|e| e["s"].as_u64()).unwrap_or(0);
        step.out.extend(
            log.iter()
                .filter(|e| e["s"].as_u64().unwrap_or(0) > seq)
                .cloned(),
        );
        let resumed = json!({"op": 0, "t": "RESUMED", "s": last + 1, "d": {}});
        log.push(resumed.clone());
        step.out.push(resumed);
        self.sent = last + 1;
    }

    /// Misbehaviours first, then dispatches not yet sent.
    fn pending(&mut self, s: &mut State) -> Step {
        let mut step = Step::default();
        let Some(id) = self.session.clone() else {
            return step;
        };
        if s.current.as_deref() != Some(id.as_str()) {
            return step;
        }
        match s.commands.pop_front() {
            Some(Command::Drop) => {
                step.drop = true;
                return step;
            }
            Some(Command::Reconnect) => {
                step.out.push(json!({"op": 7, "d": null}));
                step.end = true;
                return step;
            }
            Some(Command::Invalidate(resumable)) => {
                if !resumable {
                    s.invalid.push(id);
                }
                step.out.push(json!({"op": 9, "d": resumable}));
                step.end = true;
                return step;
            }
            Some(Command::Replay) => {
                if let Some(last) = s.sessions[&id]
                    .iter()
                    .rev()
                    .find(|e| e["t"] == "MESSAGE_CREATE" || e["t"] == "INTERACTION_CREATE")
                {
                    step.out.push(last.clone());
                }
            }
            None => {}
        }
        for e in &s.sessions[&id] {
            let seq = e["s"].as_u64().unwrap_or(0);
            if seq > self.sent {
                step.out.push(e.clone());
                self.sent = seq;
            }
        }
        step
    }
}

fn quiet(err: &tungstenite::Error) -> bool {
    matches!(err, tungstenite::Error::Io(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut))
}

/// Takes a Gateway connection: the handshake (keeping the path), then
/// payloads and commands until it ends.
#[allow(clippy::result_large_err)] // the handshake callback's type is tungstenite's
fn serve_gateway(
    stream: std::net::TcpStream,
    state: &Arc<(Mutex<State>, Condvar)>,
    base: &str,
    interval: Duration,
) {
    let mut path = String::new();
    let Ok(mut ws) = tungstenite::accept_hdr(
        stream,
        |request: &tungstenite::handshake::server::Request,
         response: tungstenite::handshake::server::Response| {
            path = request.uri().to_string();
            Ok(response)
        },
    ) else {
        return;
    };
    let _ = ws
        .get_ref()
        .set_read_timeout(Some(Duration::from_millis(20)));
    let with = |f: &mut dyn FnMut(&mut State) -> Step| {
        let (lock, cvar) = &**state;
        let step = f(&mut lock.lock().unwrap());
        cvar.notify_all();
        step
    };
    let hello = json!({"op": 10, "d": {"heartbeat_interval": interval.as_millis() as u64}});
    if !send(&mut ws, &hello) {
        return;
    }
    let mut conn = Conn {
        path,
        base: base.to_owned(),
        session: None,
        sent: 0,
    };
    loop {
        let step = match ws.read() {
            Ok(Message::Text(text)) => match serde_json::from_str::<Value>(text.as_str()) {
                Ok(payload) => with(&mut |s| conn.payload(s, &payload)),
                Err(_) => continue,
            },
            Ok(Message::Close(_)) => {
                let _ = ws.flush();
                return;
            }
            Ok(_) => Step::default(),
            Err(err) if quiet(&err) => Step::default(),
            Err(_) => return,
        };
        if step.refuse {
            let _ = ws.close(Some(tungstenite::protocol::CloseFrame {
                code: 4004.into(),
                reason: "Authentication failed.".into(),
            }));
            let _ = ws.flush();
            return;
        }
        if !step.out.iter().all(|value| send(&mut ws, value)) {
            return;
        }
        let step = with(&mut |s| conn.pending(s));
        if step.drop {
            let _ = ws.get_ref().shutdown(std::net::Shutdown::Both);
            return;
        }
        if !step.out.iter().all(|value| send(&mut ws, value)) {
            return;
        }
        if step.end {
            // The client closes and reconnects; this side waits for that.
            let deadline = Instant::now() + Duration::from_secs(10);
            while Instant::now() < deadline {
                match ws.read() {
                    Err(err) if quiet(&err) => {}
                    Ok(Message::Close(_)) | Err(_) => return,
                    Ok(_) => {}
                }
            }
            return;
        }
    }
}

fn rate_headers(reply: Reply, bucket_id: &str, bucket: &Bucket, limit: u32, now: Instant) -> Reply {
    let reset = bucket
        .reset_at
        .map_or(0.0, |r| r.saturating_duration_since(now).as_secs_f64());
    reply
        .header("X-RateLimit-Limit", &limit.to_string())
        .header("X-RateLimit-Remaining", &bucket.remaining.to_string())
        .header("X-RateLimit-Reset-After", &format!("{reset:.3}"))
        .header("X-RateLimit-Bucket", bucket_id)
}

fn answer(request: &Request, state: &Arc<(Mutex<State>, Condvar)>) -> Reply {
    let (lock, cvar) = &**state;
    let mut s = lock.lock().unwrap();
    if request.path.starts_with("/attachments/") {
        let path = request
            .path
            .split('?')
            .next()
            .unwrap_or_default()
            .to_owned();
        let authorized = request
            .headers
            .iter()
            .any(|(name, _)| name == "authorization");
        s.fetched.push((path.clone(), authorized));
        return match s.files.get(&path) {
            Some(bytes) => Reply::new(200, "application/octet-stream", bytes.clone()),
            None => Reply::new(404, "text/plain", "Not Found"),
        };
    }
    let (reply, route) = handle(request, &mut s);
    let held = s
        .hold_acted
        .iter()
        .position(|r| route.starts_with(r.as_str()));
    if let Some(at) = held {
        s.hold_acted.remove(at);
    }
    cvar.notify_all();
    drop(s);
    if held.is_some() {
        std::thread::sleep(Duration::from_secs(60));
        return Reply::Drop;
    }
    reply
}

fn handle(request: &Request, s: &mut State) -> (Reply, &'static str) {
    let now = Instant::now();
    let path = request
        .path
        .split('?')
        .next()
        .unwrap_or_default()
        .to_owned();
    let form = form(request);
    let (body, files) = match &form {
        Ok(Some((body, files))) => (body.clone(), files.clone()),
        Ok(None) | Err(_) => (request.body.clone(), Vec::new()),
    };
    let record = |s: &mut State, status: u16| {
        s.calls.push(Call {
            method: request.method.clone(),
            path: path.clone(),
            body: body.clone(),
            at: now,
            status,
            files: files
                .iter()
                .map(|(_, f, b)| (f.clone(), b.clone()))
                .collect(),
        });
    };
    if request.header("authorization") != Some(&format!("Bot {TOKEN}")) {
        record(s, 401);
        return (
            Reply::json(401, &json!({"message": "401: Unauthorized", "code": 0})),
            "",
        );
    }
    let parts: Vec<&str> = path.trim_start_matches("/api/v10/").split('/').collect();
    let (route, bucket_id) = match (request.method.as_str(), parts.as_slice()) {
        ("POST", ["channels", c, "messages"]) => ("POST messages", format!("create-{c}")),
        ("PATCH", ["channels", c, "messages", _]) => ("PATCH messages", format!("edit-{c}")),
        ("DELETE", ["channels", c, "messages", _]) => ("DELETE messages", format!("delete-{c}")),
        ("POST", ["interactions", _, _, "callback"]) => ("POST callback", "callback".to_owned()),
        _ => {
            record(s, 404);
            return (
                Reply::json(404, &json!({"message": "404: Not Found", "code": 0})),
                "",
            );
        }
    };
    if s.down && route == "POST messages" {
        record(s, 502);
        return (
            Reply::json(502, &json!({"message": "502: Bad Gateway", "code": 0})),
            "",
        );
    }
    // The global limit: every route but interaction callbacks.
    if route != "POST callback"
        && let Some(reply) = global_limit(s, route, &format!("{} {path}", request.method), now)
    {
        record(s, 429);
        return (reply, "");
    }
    // The bucket: refilled after its window; a request it does not allow is a violation.
    let limit = s.limit;
    let bucket = s.buckets.entry(bucket_id.clone()).or_default();
    if bucket.reset_at.is_none_or(|r| now >= r) {
        bucket.remaining = limit;
        bucket.reset_at = Some(now + WINDOW);
    }
    let early = bucket.blocked_until.is_some_and(|b| now < b) || bucket.remaining == 0;
    let commanded = s
        .limit_next
        .iter()
        .position(|(r, _)| route.starts_with(r.as_str()))
        .and_then(|at| s.limit_next.remove(at));
    if early || commanded.is_some() {
        if early {
            s.violations.push(format!("{} {path}", request.method));
        }
        let bucket = s.buckets.get_mut(&bucket_id).unwrap();
        let wait = commanded.map_or_else(
            || {
                bucket
                    .blocked_until
                    .or(bucket.reset_at)
                    .map_or(1.0, |b| b.saturating_duration_since(now).as_secs_f64())
            },
            |(_, wait)| wait,
        );
        bucket.blocked_until = Some(now + Duration::from_secs_f64(wait));
        let reply = Reply::json(
            429,
            &json!({"message": "You are being rate limited.", "retry_after": wait, "global": false}),
        )
        .header("Retry-After", &format!("{}", wait.ceil() as u64))
        .header("X-RateLimit-Scope", "user");
        let reply = rate_headers(reply, &bucket_id, bucket, limit, now);
        record(s, 429);
        return (reply, "");
    }
    let bucket = s.buckets.get_mut(&bucket_id).unwrap();
    bucket.remaining -= 1;
    let snapshot = Bucket {
        remaining: bucket.remaining,
        reset_at: bucket.reset_at,
        blocked_until: None,
    };
    let reply = match form {
        Err(error) => Reply::json(
            400,
            &json!({"code": 50035, "message": "Invalid Form Body",
                "errors": {"_errors": [{"code": "BASE_TYPE_INVALID", "message": error}]}}),
        ),
        Ok(_) => act(route, &parts, &body, &files, s),
    };
    let status = match &reply {
        Reply::Answer { status, .. } => *status,
        Reply::Paced { .. } | Reply::Drop => 200,
    };
    record(s, status);
    // A create that uploads is also `POST messages upload`, for `hold_acted_next`.
    let route = if route == "POST messages" && !files.is_empty() {
        "POST messages upload"
    } else {
        route
    };
    (
        rate_headers(reply, &bucket_id, &snapshot, limit, now),
        route,
    )
}

/// A global 429 when one was commanded for `route` or one given has not
/// passed yet (a violation: `call` came early).
fn global_limit(s: &mut State, route: &str, call: &str, now: Instant) -> Option<Reply> {
    let early = s.global_until.is_some_and(|g| now < g);
    let commanded = s
        .global_next
        .iter()
        .position(|(r, _)| route.starts_with(r.as_str()))
        .and_then(|at| s.global_next.remove(at));
    if !early && commanded.is_none() {
        return None;
    }
    if early {
        s.violations.push(format!("global: {call}"));
    }
    let wait = match commanded {
        Some((_, wait)) => {
            s.global_until = Some(now + Duration::from_secs_f64(wait));
            wait
        }
        None => s
            .global_until
            .map_or(0.0, |g| g.saturating_duration_since(now).as_secs_f64()),
    };
    Some(
        Reply::json(
            429,
            &json!({"message": "You are being rate limited.", "retry_after": wait, "global": true}),
        )
        .header("Retry-After", &format!("{}", wait.ceil() as u64))
        .header("X-RateLimit-Global", "true")
        .header("X-RateLimit-Scope", "global"),
    )
}

/// What a call the bucket allowed does to the channel's messages.
fn act(
    route: &str,
    parts: &[&str],
    body: &Value,
    files: &[(u64, String, Vec<u8>)],
    s: &mut State,
) -> Reply {
    match (route, parts) {
        ("POST messages", [_, c, _]) => {
            let channel = (*c).to_owned();
            let nonce = body["nonce"].as_str().map(str::to_owned);
            let known = nonce
                .as_ref()
                .filter(|_| body["enforce_nonce"] == true)
                .and_then(|n| s.nonces.get(&(channel.clone(), n.clone())).cloned());
            let id = match known {
                Some(id) => id,
                None => {
                    s.next_id += 1;
                    let id = s.next_id.to_string();
                    s.messages.entry(channel.clone()).or_default().push((
                        id.clone(),
                        body["content"].as_str().unwrap_or_default().to_owned(),
                        body["components"].clone(),
                    ));
                    if let Some(n) = nonce {
                        s.nonces.insert((channel.clone(), n), id.clone());
                    }
                    for (_, filename, bytes) in files {
                        // Served as Discord's CDN serves attachments.
                        let n = s.uploads.get(&channel).map_or(0, Vec::len);
                        let path = format!("/attachments/{channel}/{id}{n}/{filename}");
                        s.files.insert(path, bytes.clone());
                        s.uploads.entry(channel.clone()).or_default().push(Upload {
                            message: id.clone(),
                            filename: filename.clone(),
                            bytes: bytes.clone(),
                        });
                    }
                    id
                }
            };
            let base = s.base.clone();
            let attachments: Vec<Value> = s
                .uploads
                .get(&channel)
                .into_iter()
                .flatten()
                .enumerate()
                .filter(|(_, u)| u.message == id)
                .map(|(n, u)| {
                    let url = format!("{base}/attachments/{channel}/{id}{n}/{}", u.filename);
                    json!({"id": format!("{id}{n}"), "filename": u.filename,
                        "size": u.bytes.len(), "url": url, "proxy_url": url})
                })
                .collect();
            let content = s.messages[&channel]
                .iter()
                .find(|(i, _, _)| *i == id)
                .map(|(_, t, _)| t.clone())
                .unwrap_or_default();
            Reply::json(
                200,
                &json!({"id": id, "channel_id": channel, "content": content, "type": 0,
                    "author": {"id": BOT, "username": "pincer", "bot": true},
                    "attachments": attachments, "nonce": body["nonce"]}),
            )
        }
        ("PATCH messages", [_, c, _, m]) => {
            let found = s
                .messages
                .get_mut(*c)
                .and_then(|list| list.iter_mut().find(|(i, _, _)| i == m));
            match found {
                Some(message) => {
                    if let Some(content) = body["content"].as_str() {
                        message.1 = content.to_owned();
                    }
                    if body.get("components").is_some() {
                        message.2 = body["components"].clone();
                    }
                    Reply::json(
                        200,
                        &json!({"id": m, "channel_id": c, "content": message.1}),
                    )
                }
                None => Reply::json(404, &json!({"message": "Unknown Message", "code": 10008})),
            }
        }
        ("DELETE messages", [_, c, _, m]) => {
            let list = s.messages.entry((*c).to_owned()).or_default();
            match list.iter().position(|(i, _, _)| i == m) {
                Some(at) => {
                    list.remove(at);
                    Reply::new(204, "application/json", Vec::new())
                }
                None => Reply::json(404, &json!({"message": "Unknown Message", "code": 10008})),
            }
        }
        _ => Reply::new(204, "application/json", Vec::new()),
    }
}

/// A `multipart/form-data` request's JSON body and files (`n` of
/// `files[n]`, filename, bytes), as "Uploading Files" describes them;
/// `None` for a JSON request, an error for a form Discord refuses.
#[allow(clippy::type_complexity)]
fn form(request: &Request) -> Result<Option<(Value, Vec<(u64, String, Vec<u8>)>)>, String> {
    let multipart = request
        .header("content-type")
        .is_some_and(|t| t.starts_with("multipart/form-data"));
    if !multipart {
        return Ok(None);
    }
    let mut body = json!({});
    let mut files = Vec::new();
    for (name, filename, bytes) in request.form_parts() {
        if name == "payload_json" {
            body = serde_json::from_slice(&bytes)
                .map_err(|err| format!("payload_json is not JSON: {err}"))?;
        } else if let Some(n) = name
            .strip_prefix("files[")
            .and_then(|n| n.strip_suffix(']'))
        {
            let n: u64 = n.parse().map_err(|_| format!("{name}: not files[n]"))?;
            let filename = filename.ok_or_else(|| format!("{name} has no filename"))?;
            files.push((n, filename, bytes));
        } else {
            body[name] = json!(String::from_utf8_lossy(&bytes));
        }
    }
    for attachment in body["attachments"].as_array().into_iter().flatten() {
        let id = attachment["id"]
            .as_u64()
            .or_else(|| attachment["id"].as_str().and_then(|i| i.parse().ok()));
        if !files.iter().any(|(n, _, _)| Some(*n) == id) {
            return Err(format!("attachments: no files[n] for {}", attachment["id"]));
        }
    }
    Ok(Some((body, files)))
}
