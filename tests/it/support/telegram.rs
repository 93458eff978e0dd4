#![allow(dead_code)]
//! A fake Telegram Bot API server on loopback, speaking the documented JSON
//! shapes: `getUpdates` long polling (honouring `offset`, `limit` and
//! `timeout`), `sendMessage`, `editMessageText`, `deleteMessage`,
//! `sendMessageDraft` (private chats only; the drafts shown are recorded,
//! never messages of the chat), `answerCallbackQuery`, `sendDocument` (a
//! multipart upload), `getFile` and the file download route
//! (`/file/bot<token>/<file_path>`), `ok: false` errors and 429 with
//! `retry_after`. It can play an older self-hosted server that has no
//! `sendMessageDraft` (`refuse_drafts`). It
//! can also misbehave as a chaos test needs: answer polls at once whatever
//! their `timeout`, take its time before and after acting on a send or an
//! edit (so a `kill -9` can land between the platform accepting a message and
//! Pincer knowing it), and park a call to act on it later. Like a real
//! server, it acts on a request it took even when its client has gone.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::http::{Loopback, Reply, Request};

pub const TOKEN: &str = "123456:test-token";

/// One Bot API call the fake answered (or is holding).
#[derive(Debug, Clone)]
pub struct Call {
    pub method: String,
    pub body: Value,
    pub at: Instant,
}

#[derive(Default)]
struct State {
    updates: Vec<Value>,
    /// Updates handed out at the next poll whatever its offset (a redelivery).
    forced: Vec<Value>,
    next_update: i64,
    calls: Vec<Call>,
    /// Errors to answer the next calls of a method with: (status, body).
    failures: HashMap<String, VecDeque<(u16, Value)>>,
    /// Calls of these methods are recorded, then never acted on nor answered.
    hold: Vec<String>,
    /// Calls of these methods are acted on (the message is in the chat), then
    /// never answered.
    hold_acted: Vec<String>,
    next_message: i64,
    /// chat id → message id → text, as a user would see it now.
    chats: HashMap<String, Vec<(i64, String)>>,
    /// Private chats (a user's own id), as `user_says` and `press` made them.
    private: std::collections::HashSet<String>,
    /// chat id → every draft `sendMessageDraft` showed there: (draft_id, text).
    drafts: HashMap<String, Vec<(i64, String)>>,
    /// Answer `sendMessageDraft` as a server without it does.
    refuse_drafts: bool,
    /// Offsets `getUpdates` was asked for.
    offsets: Vec<i64>,
    /// When each `getUpdates` arrived.
    polls: Vec<Instant>,
    /// Answer `getUpdates` at once, ignoring its `timeout` (a misbehaving proxy).
    ignore_timeout: bool,
    /// Random delays around a send or edit: (least and most before acting,
    /// most after acting and before answering).
    delays: Option<(Duration, Duration, Duration)>,
    /// Shares of methods' calls that straggle: (method, share, most before
    /// acting).
    straggle: Vec<(String, f64, Duration)>,
    /// The next call of each of these methods is parked: recorded, then not
    /// acted on until `apply_parked`.
    park: Vec<String>,
    /// Calls parked now.
    parked: usize,
    /// Bumped by `apply_parked`: parked calls go on.
    unparked: u64,
    /// What each parked call was answered once it acted: (method, answer).
    late: Vec<(String, Value)>,
    /// Files people sent: file id → (file path, bytes).
    files: HashMap<String, (String, Vec<u8>)>,
    /// File paths downloaded, in order.
    downloads: Vec<String>,
    /// Documents the bot sent: chat id → (message id, file name, content).
    documents: HashMap<String, Vec<(i64, String, String)>>,
}

#[derive(Clone)]
pub struct FakeTelegram {
    pub url: String,
    state: Arc<(Mutex<State>, Condvar)>,
}

impl FakeTelegram {
    pub fn start() -> Self {
        let state = Arc::new((
            Mutex::new(State {
                next_update: 1000,
                next_message: 500,
                ..State::default()
            }),
            Condvar::new(),
        ));
        let shared = state.clone();
        let server = Loopback::start(move |request, _| answer(request, &shared));
        Self {
            url: server.url,
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

    /// Forgets every update not yet fetched (as if a bot had confirmed
    /// them all): a new bridge starts from nothing.
    pub fn forget_updates(&self) {
        self.with(|s| {
            s.updates.clear();
            s.forced.clear();
        });
    }

    /// Queues a text message from `user` in their private chat; returns its update id.
    pub fn user_says(&self, user: i64, text: &str) -> i64 {
        self.with(|s| {
            let id = s.next_update;
            s.next_update += 1;
            let message_id = s.next_message;
            s.next_message += 1;
            s.private.insert(user.to_string());
            s.updates.push(json!({
                "update_id": id,
                "message": {
                    "message_id": message_id,
                    "date": 1_700_000_000,
                    "from": {"id": user, "is_bot": false, "first_name": "Ada"},
                    "chat": {"id": user, "type": "private"},
                    "text": text,
                }
            }));
            id
        })
    }

    /// Stores a file as Telegram keeps what people send; returns its
    /// `file_id` (`getFile` gives its path, the file route its bytes).
    pub fn add_file(&self, name: &str, bytes: &[u8]) -> String {
        self.with(|s| {
            let id = format!("file-{}", s.files.len() + 1);
            let path = format!("documents/{}-{name}", s.files.len() + 1);
            s.files.insert(id.clone(), (path, bytes.to_vec()));
            id
        })
    }

    /// Queues a message from `user` in their private chat carrying `item`
    /// under `key` (`photo` with an array of sizes, `document`, …) and
    /// `caption`; returns its update id.
    pub fn user_sends(&self, user: i64, caption: &str, key: &str, item: Value) -> i64 {
        self.with(|s| {
            let id = s.next_update;
            s.next_update += 1;
            let message_id = s.next_message;
            s.next_message += 1;
            s.private.insert(user.to_string());
            let mut message = json!({
                "message_id": message_id,
                "date": 1_700_000_000,
                "from": {"id": user, "is_bot": false, "first_name": "Ada"},
                "chat": {"id": user, "type": "private"},
            });
            message[key] = item;
            if !caption.is_empty() {
                message["caption"] = json!(caption);
            }
            s.updates.push(json!({"update_id": id, "message": message}));
            id
        })
    }

    /// The documents the bot sent to `chat`: (message id, file name, content).
    pub fn documents(&self, chat: i64) -> Vec<(i64, String, String)> {
        self.with(|s| {
            s.documents
                .get(&chat.to_string())
                .cloned()
                .unwrap_or_default()
        })
    }

    /// The file paths downloaded so far.
    pub fn downloads(&self) -> Vec<String> {
        self.with(|s| s.downloads.clone())
    }

    /// Queues a text message from `user` in the group `chat`.
    pub fn group_says(&self, chat: i64, user: i64, text: &str) -> i64 {
        self.with(|s| {
            let id = s.next_update;
            s.next_update += 1;
            let message_id = s.next_message;
            s.next_message += 1;
            s.updates.push(json!({
                "update_id": id,
                "message": {
                    "message_id": message_id,
                    "date": 1_700_000_000,
                    "from": {"id": user, "is_bot": false, "first_name": format!("user{user}")},
                    "chat": {"id": chat, "type": "supergroup", "title": "team"},
                    "text": text,
                }
            }));
            id
        })
    }

    /// Hands out an update again at the next poll, whatever offset it asks
    /// for, as Telegram redelivers an update it thinks unconfirmed.
    pub fn redeliver(&self, update_id: i64) {
        self.with(|s| {
            let update = s
                .updates
                .iter()
                .find(|u| u["update_id"] == update_id)
                .cloned()
                .unwrap();
            s.forced.push(update);
        });
    }

    /// Hands out `update` as it is at the next poll, whatever offset it asks
    /// for: for updates no real Telegram would send.
    pub fn force_update(&self, update: Value) {
        self.with(|s| s.forced.push(update));
    }

    /// Queues a press of an inline button of message `message_id` in `user`'s chat.
    pub fn press(&self, user: i64, message_id: i64, data: &str) {
        self.with(|s| {
            s.private.insert(user.to_string());
            let id = s.next_update;
            s.next_update += 1;
            s.updates.push(json!({
                "update_id": id,
                "callback_query": {
                    "id": format!("cb{id}"),
                    "from": {"id": user, "is_bot": false, "first_name": "Ada"},
                    "message": {"message_id": message_id, "chat": {"id": user, "type": "private"}},
                    "data": data,
                }
            }));
        });
    }

    /// The next `count` calls of `method` fail with this status and description.
    pub fn fail(&self, method: &str, count: usize, status: u16, body: Value) {
        self.with(|s| {
            let queue = s.failures.entry(method.to_owned()).or_default();
            for _ in 0..count {
                queue.push_back((status, body.clone()));
            }
        });
    }

    /// Calls of `method` are recorded (the platform accepted them) but never answered.
    pub fn hold(&self, method: &str) {
        self.with(|s| s.hold.push(method.to_owned()));
    }

    /// Calls of `method` are acted on (a sent message shows in the chat) but
    /// never answered: the platform took it, the caller never learns its id.
    pub fn hold_acted(&self, method: &str) {
        self.with(|s| s.hold_acted.push(method.to_owned()));
    }

    /// Stops holding `method` and forgets queued failures of it.
    pub fn release(&self, method: &str) {
        self.with(|s| {
            s.hold.retain(|m| m != method);
            s.hold_acted.retain(|m| m != method);
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

    pub fn offsets(&self) -> Vec<i64> {
        self.with(|s| s.offsets.clone())
    }

    /// When each `getUpdates` arrived.
    pub fn polls(&self) -> Vec<Instant> {
        self.with(|s| s.polls.clone())
    }

    /// From now on `getUpdates` answers at once, whatever its `timeout`.
    pub fn ignore_timeout(&self) {
        self.with(|s| s.ignore_timeout = true);
    }

    /// From now on a send or an edit waits up to `before` before it acts and
    /// up to `after` between acting and answering (uniformly at random).
    pub fn delay(&self, before: Duration, after: Duration) {
        self.delay_between(Duration::ZERO, before, after);
    }

    /// From now on a send or an edit waits between `least` and `most` before
    /// it acts (a loaded server, acting on the request even when its client
    /// has gone meanwhile) and up to `after` between acting and answering.
    pub fn delay_between(&self, least: Duration, most: Duration, after: Duration) {
        self.with(|s| s.delays = Some((least, most, after)));
    }

    /// From now on this share of `method`'s calls waits up to `most` before
    /// it acts instead (a request stuck in a queue on the platform's side).
    pub fn straggle(&self, method: &str, share: f64, most: Duration) {
        self.with(|s| s.straggle.push((method.to_owned(), share, most)));
    }

    /// The next call of `method` is recorded, then parked: not acted on until
    /// `apply_parked`, whatever happens to its caller meanwhile (a request a
    /// dead process sent, which the server applies late).
    pub fn park_next(&self, method: &str) {
        self.with(|s| s.park.push(method.to_owned()));
    }

    /// How many calls are parked now.
    pub fn parked(&self) -> usize {
        self.with(|s| s.parked)
    }

    /// Parked calls act now, in no particular order.
    pub fn apply_parked(&self) {
        self.with(|s| s.unparked += 1);
    }

    /// What each parked call was answered once it acted: (method, answer).
    pub fn late_answers(&self) -> Vec<(String, Value)> {
        self.with(|s| s.late.clone())
    }

    /// Every call of a method, in order.
    pub fn all_calls(&self) -> Vec<Call> {
        self.with(|s| s.calls.clone())
    }

    /// From now on `sendMessageDraft` is answered as a self-hosted Bot API
    /// server older than 9.3 answers a method it does not have.
    pub fn refuse_drafts(&self) {
        self.with(|s| s.refuse_drafts = true);
    }

    /// Every draft `sendMessageDraft` showed in a chat: (draft_id, text), in
    /// order. A draft is no message: `chat` never lists it.
    pub fn drafts(&self, chat: i64) -> Vec<(i64, String)> {
        self.with(|s| s.drafts.get(&chat.to_string()).cloned().unwrap_or_default())
    }

    /// The messages of a chat as its user sees them now: (id, text), in order.
    pub fn chat(&self, chat: i64) -> Vec<(i64, String)> {
        self.with(|s| s.chats.get(&chat.to_string()).cloned().unwrap_or_default())
    }

    /// Waits until `check` holds, or panics after `timeout` with `what`.
    pub fn wait_for(&self, what: &str, timeout: Duration, check: impl Fn(&Self) -> bool) {
        self.wait_for_every(what, timeout, Duration::from_millis(20), check);
    }

    /// [`FakeTelegram::wait_for`], looking every `every` (a look that costs
    /// more than reading the fake, such as running a `pincer` command).
    pub fn wait_for_every(
        &self,
        what: &str,
        timeout: Duration,
        every: Duration,
        check: impl Fn(&Self) -> bool,
    ) {
        let deadline = Instant::now() + timeout;
        while Instant::now() < deadline {
            if check(self) {
                return;
            }
            std::thread::sleep(every);
        }
        let calls = self.with(|s| s.calls.clone());
        panic!("timed out waiting for {what}; calls: {calls:#?}");
    }
}

/// The Bot API's answer to one call, as Telegram documents it.
fn answer(request: &Request, state: &Arc<(Mutex<State>, Condvar)>) -> Reply {
    let path = &request.path;
    let body = request_body(request);
    if let Some(file_path) = path.strip_prefix(&format!("/file/bot{TOKEN}/")) {
        return download(file_path, state);
    }
    let Some(rest) = path.strip_prefix(&format!("/bot{TOKEN}/")) else {
        return Reply::json(
            404,
            &json!({"ok": false, "error_code": 404, "description": "Not Found"}),
        );
    };
    let method = rest.to_owned();
    let (lock, cvar) = &**state;
    if method == "getUpdates" {
        return get_updates(&body, state);
    }
    let (delays, straggle) = {
        let s = lock.lock().unwrap();
        (s.delays, s.straggle.clone())
    };
    if let Some((least, most, _)) = delays {
        let most = match straggle.iter().find(|(slow, ..)| *slow == method) {
            Some((_, share, late)) if fastrand::f64() < *share => *late,
            _ => most,
        };
        std::thread::sleep(least + most.saturating_sub(least).mul_f64(fastrand::f64()));
    }
    let mut s = lock.lock().unwrap();
    s.calls.push(Call {
        method: method.clone(),
        body: body.clone(),
        at: Instant::now(),
    });
    cvar.notify_all();
    let parked = match s.park.iter().position(|m| *m == method) {
        Some(at) => {
            s.park.remove(at);
            s.parked += 1;
            let ticket = s.unparked;
            while s.unparked == ticket {
                s = cvar.wait(s).unwrap();
            }
            s.parked -= 1;
            true
        }
        None => false,
    };
    if let Some((status, error)) = s.failures.get_mut(&method).and_then(VecDeque::pop_front) {
        drop(s);
        return Reply::json(status, &error);
    }
    if s.hold.contains(&method) {
        drop(s);
        // Accepted, never answered: the caller dies or times out waiting.
        std::thread::sleep(Duration::from_secs(3600));
        return Reply::Drop;
    }
    let chat = body["chat_id"].to_string().trim_matches('"').to_owned();
    let text = body["text"].as_str().unwrap_or_default().to_owned();
    let answer = match method.as_str() {
        "sendMessage" => {
            let id = s.next_message;
            s.next_message += 1;
            s.chats
                .entry(chat.clone())
                .or_default()
                .push((id, text.clone()));
            json!({"ok": true, "result": {"message_id": id, "date": 1_700_000_000, "chat": {"id": body["chat_id"]}, "text": text}})
        }
        "editMessageText" => {
            let id = body["message_id"].as_i64().unwrap_or(0);
            let messages = s.chats.entry(chat).or_default();
            match messages.iter_mut().find(|(m, _)| *m == id) {
                None => {
                    json!({"ok": false, "error_code": 400, "description": "Bad Request: message to edit not found"})
                }
                Some((_, current)) if *current == text => {
                    json!({"ok": false, "error_code": 400, "description": "Bad Request: message is not modified: specified new message content and reply markup are exactly the same as a current content and reply markup of the message"})
                }
                Some((_, current)) => {
                    *current = text.clone();
                    json!({"ok": true, "result": {"message_id": id, "text": text}})
                }
            }
        }
        "deleteMessage" => {
            let id = body["message_id"].as_i64().unwrap_or(0);
            let messages = s.chats.entry(chat).or_default();
            match messages.iter().position(|(m, _)| *m == id) {
                None => {
                    json!({"ok": false, "error_code": 400, "description": "Bad Request: message to delete not found"})
                }
                Some(at) => {
                    messages.remove(at);
                    json!({"ok": true, "result": true})
                }
            }
        }
        "sendMessageDraft" => send_draft(&mut s, &chat, &body),
        "sendDocument" => send_document(&mut s, &chat, &body),
        "answerCallbackQuery" => json!({"ok": true, "result": true}),
        "getFile" => {
            let id = body["file_id"].as_str().unwrap_or_default();
            match s.files.get(id) {
                Some((path, bytes)) => json!({"ok": true, "result": {
                    "file_id": id,
                    "file_unique_id": format!("u{id}"),
                    "file_size": bytes.len(),
                    "file_path": path,
                }}),
                None => {
                    json!({"ok": false, "error_code": 400, "description": "Bad Request: invalid file_id"})
                }
            }
        }
        // What the self-hosted Bot API server answers a method it lacks.
        _ => json!({"ok": false, "error_code": 404, "description": "Not Found: method not found"}),
    };
    if parked {
        s.late.push((method.clone(), answer.clone()));
        cvar.notify_all();
    }
    let held = s.hold_acted.contains(&method);
    drop(s);
    if held {
        std::thread::sleep(Duration::from_secs(3600));
        return Reply::Drop;
    }
    if let Some((_, _, after)) = delays {
        // Acted on, not yet answered: the window a crash makes "unknown".
        std::thread::sleep(after.mul_f64(fastrand::f64()));
    }
    let status = if answer["ok"] == true {
        200
    } else {
        answer["error_code"].as_u64().unwrap_or(400) as u16
    };
    Reply::json(status, &answer)
}

/// `sendMessageDraft` as documented: a private chat's `chat_id`, a non-zero
/// integer `draft_id`, at most 4096 characters of `text`; `True` on
/// success. The descriptions of its refusals are the fake's own (Telegram
/// documents none).
fn send_draft(s: &mut State, chat: &str, body: &Value) -> Value {
    let bad = |what: &str| json!({"ok": false, "error_code": 400, "description": format!("Bad Request: {what}")});
    if s.refuse_drafts {
        return json!({"ok": false, "error_code": 404, "description": "Not Found: method not found"});
    }
    if !s.private.contains(chat) {
        return bad("drafts can be sent to private chats only");
    }
    let Some(draft_id) = body["draft_id"].as_i64().filter(|id| *id != 0) else {
        return bad("draft_id must be a non-zero integer");
    };
    let Some(text) = body["text"]
        .as_str()
        .filter(|t| t.encode_utf16().count() <= 4096)
    else {
        return bad("text must be a string of at most 4096 characters");
    };
    s.drafts
        .entry(chat.to_owned())
        .or_default()
        .push((draft_id, text.to_owned()));
    json!({"ok": true, "result": true})
}

/// The file route: a stored file's bytes by its path, as Telegram serves them.
fn download(file_path: &str, state: &Arc<(Mutex<State>, Condvar)>) -> Reply {
    let (lock, _) = &**state;
    let mut s = lock.lock().unwrap();
    s.downloads.push(file_path.to_owned());
    match s.files.values().find(|(path, _)| path == file_path) {
        Some((_, bytes)) => Reply::new(200, "application/octet-stream", bytes.clone()),
        None => Reply::json(
            404,
            &json!({"ok": false, "error_code": 404, "description": "Not Found"}),
        ),
    }
}

/// `getUpdates`: the updates from `offset` on, waiting up to `timeout`
/// seconds for one (at once when told to ignore it).
fn get_updates(body: &Value, state: &Arc<(Mutex<State>, Condvar)>) -> Reply {
    let (lock, cvar) = &**state;
    let offset = body["offset"].as_i64().unwrap_or(0);
    // Documented: 1 to 100, default 100.
    let limit = body["limit"].as_u64().unwrap_or(100).clamp(1, 100) as usize;
    let mut wait = Duration::from_secs(body["timeout"].as_u64().unwrap_or(0));
    let mut s = lock.lock().unwrap();
    if s.ignore_timeout {
        wait = Duration::ZERO;
    }
    let deadline = Instant::now() + wait;
    s.offsets.push(offset);
    s.polls.push(Instant::now());
    loop {
        let mut ready: Vec<Value> = std::mem::take(&mut s.forced);
        ready.extend(
            s.updates
                .iter()
                .filter(|u| u["update_id"].as_i64().unwrap_or(0) >= offset)
                .cloned(),
        );
        ready.truncate(limit);
        if !ready.is_empty() {
            drop(s);
            return Reply::json(200, &json!({"ok": true, "result": ready}));
        }
        let now = Instant::now();
        if now >= deadline {
            drop(s);
            return Reply::json(200, &json!({"ok": true, "result": []}));
        }
        s = cvar.wait_timeout(s, deadline - now).unwrap().0;
    }
}

/// A request's parameters: its JSON body, or a multipart form's fields (a
/// file as `{"file_name", "content"}`).
fn request_body(request: &Request) -> Value {
    if !request.body.is_null() {
        return request.body.clone();
    }
    let mut fields = serde_json::Map::new();
    for (name, file_name, content) in request.form_parts() {
        let content = String::from_utf8_lossy(&content).to_string();
        match file_name {
            Some(file_name) => {
                fields.insert(name, json!({"file_name": file_name, "content": content}));
            }
            None => {
                fields.insert(name, json!(content));
            }
        }
    }
    Value::Object(fields)
}

/// `sendDocument`: the document in the chat, its caption as its text.
fn send_document(s: &mut State, chat: &str, body: &Value) -> Value {
    let document = &body["document"];
    let Some(file_name) = document["file_name"].as_str() else {
        return json!({"ok": false, "error_code": 400, "description": "Bad Request: there is no document in the request"});
    };
    let id = s.next_message;
    s.next_message += 1;
    let caption = body["caption"].as_str().unwrap_or_default().to_owned();
    s.chats
        .entry(chat.to_owned())
        .or_default()
        .push((id, caption.clone()));
    s.documents.entry(chat.to_owned()).or_default().push((
        id,
        file_name.to_owned(),
        document["content"].as_str().unwrap_or_default().to_owned(),
    ));
    json!({"ok": true, "result": {"message_id": id, "date": 1_700_000_000, "chat": {"id": body["chat_id"]}, "caption": caption, "document": {"file_name": file_name}}})
}
