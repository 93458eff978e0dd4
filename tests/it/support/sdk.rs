//! The official Rust SDK (`agent-client-protocol`) as an independent client of
//! the real binary. A tee between pincer's stdout and the SDK checks every line
//! against the vendored schema before the SDK parses the very same bytes.
//!
//! Used by the SDK test modules through `use crate::support::sdk;`.
#![allow(dead_code)]

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::process::{Child, ChildStdin, ExitStatus};
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use agent_client_protocol::schema::ProtocolVersion;
use agent_client_protocol::v1::schema::{
    ContentBlock, ContentChunk, InitializeRequest, InitializeResponse, NewSessionRequest,
    PromptRequest, PromptResponse, SessionId, SessionNotification, SessionUpdate, TextContent,
};
use agent_client_protocol::v1::{ActiveSession, ConnectionTo, SessionMessage};
use agent_client_protocol::{Agent, ByteStreams, Dispatch, Error};
use futures::TryStreamExt;
use futures::channel::mpsc;
use pretty_assertions::assert_eq;
use serde_json::Value;

use crate::support::{Schema, TestDir, response_def};

/// Longest any one connection may take before the test fails instead of hanging.
pub const CONNECTION_LIMIT: Duration = Duration::from_secs(8);

/// What the tee saw: every message pincer wrote, and every schema violation.
#[derive(Default)]
struct Log {
    received: Vec<Value>,
    violations: Vec<String>,
}

pub fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The request methods the SDK sent, by id (as JSON text), so the tee can check
/// each response against its method's response definition.
pub type Methods = Arc<Mutex<HashMap<String, String>>>;

/// The SDK's output: written straight to pincer's stdin, each complete line
/// parsed to remember the method of each request id.
pub struct ToPincer {
    stdin: Option<ChildStdin>,
    partial: Vec<u8>,
    methods: Methods,
}

impl ToPincer {
    fn record_lines(&mut self) {
        while let Some(end) = self.partial.iter().position(|b| *b == b'\n') {
            let line: Vec<u8> = self.partial.drain(..=end).collect();
            if let Ok(message) = serde_json::from_slice::<Value>(&line)
                && let (Some(id), Some(method)) = (
                    message.get("id"),
                    message.get("method").and_then(Value::as_str),
                )
            {
                lock(&self.methods).insert(id.to_string(), method.to_owned());
            }
        }
    }
}

impl futures::AsyncWrite for ToPincer {
    fn poll_write(
        self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        let this = self.get_mut();
        // Record before writing: the response cannot arrive before its request.
        this.partial.extend_from_slice(buf);
        this.record_lines();
        let Some(stdin) = this.stdin.as_mut() else {
            return Poll::Ready(Err(std::io::ErrorKind::BrokenPipe.into()));
        };
        // A pipe write of one message does not block while pincer reads its stdin.
        Poll::Ready(stdin.write_all(buf).map(|()| buf.len()))
    }

    fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        let this = self.get_mut();
        Poll::Ready(this.stdin.as_mut().map_or(Ok(()), Write::flush))
    }

    fn poll_close(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        // Closing pincer's stdin is how a client ends the session.
        drop(self.get_mut().stdin.take());
        Poll::Ready(Ok(()))
    }
}

/// Pincer's stdout as the SDK reads it: the exact bytes the tee forwarded.
pub type FromPincer =
    futures::stream::IntoAsyncRead<mpsc::UnboundedReceiver<std::io::Result<Vec<u8>>>>;

/// The transport handed to the SDK.
pub type Transport = ByteStreams<ToPincer, FromPincer>;

/// `pincer acp --script …` with a validating tee on its stdout.
pub struct Pincer {
    child: Child,
    tee: Option<JoinHandle<()>>,
    log: Arc<Mutex<Log>>,
    stderr_path: PathBuf,
}

impl Pincer {
    pub fn spawn(dir: &TestDir, script: &Path) -> (Self, Transport) {
        static N: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let stderr_path = dir.path().join(format!("stderr-sdk-{n}.log"));
        let mut child = dir.spawn_acp(
            &[std::ffi::OsStr::new("--script"), script.as_os_str()],
            &stderr_path,
        );
        let stdout = child.stdout.take().unwrap();
        let methods = Methods::default();
        let log = Arc::new(Mutex::new(Log::default()));
        let (tx, rx) = mpsc::unbounded::<std::io::Result<Vec<u8>>>();
        let tee = std::thread::spawn({
            let methods = methods.clone();
            let log = log.clone();
            move || tee(stdout, &Schema::load(), &methods, &log, tx)
        });
        let transport = ByteStreams::new(
            ToPincer {
                stdin: child.stdin.take(),
                partial: Vec::new(),
                methods,
            },
            rx.into_async_read(),
        );
        let pincer = Self {
            child,
            tee: Some(tee),
            log,
            stderr_path,
        };
        (pincer, transport)
    }

    pub fn stderr(&self) -> String {
        std::fs::read_to_string(&self.stderr_path).unwrap_or_default()
    }

    /// Every message pincer has written so far, in order.
    pub fn received(&self) -> Vec<Value> {
        lock(&self.log).received.clone()
    }

    /// Runs one SDK connection over `transport`, failing the test if it takes too long.
    pub async fn run<T>(&self, connection: impl Future<Output = Result<T, Error>>) -> T {
        match tokio::time::timeout(CONNECTION_LIMIT, connection).await {
            Ok(Ok(value)) => value,
            Ok(Err(err)) => panic!(
                "the SDK connection failed: {err:?}\nschema violations: {:?}\nstderr:\n{}",
                lock(&self.log).violations,
                self.stderr()
            ),
            Err(_) => panic!(
                "the SDK connection did not finish within {CONNECTION_LIMIT:?}; stderr:\n{}",
                self.stderr()
            ),
        }
    }

    /// Once the SDK connection is over (its end of stdin closed), waits for pincer
    /// to exit and for the tee to drain; fails on any schema violation.
    pub fn finish(mut self) -> ExitStatus {
        let deadline = Instant::now() + Duration::from_secs(5);
        let status = loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                break status;
            }
            assert!(
                Instant::now() < deadline,
                "pincer did not exit after its stdin closed; stderr:\n{}",
                self.stderr()
            );
            std::thread::sleep(Duration::from_millis(10));
        };
        if let Some(tee) = self.tee.take()
            && let Err(panic) = tee.join()
        {
            std::panic::resume_unwind(panic);
        }
        let violations = std::mem::take(&mut lock(&self.log).violations);
        assert!(
            violations.is_empty(),
            "pincer wrote messages that do not match the ACP schema:\n{}",
            violations.join("\n")
        );
        status
    }
}

impl Drop for Pincer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Reads pincer's stdout line by line, validates each line, and forwards its
/// exact bytes to the SDK. Keeps reading (and validating) after the SDK is gone.
fn tee(
    stdout: std::process::ChildStdout,
    schema: &Schema,
    methods: &Methods,
    log: &Mutex<Log>,
    tx: mpsc::UnboundedSender<std::io::Result<Vec<u8>>>,
) {
    let mut reader = BufReader::new(stdout);
    let mut forward = Some(tx);
    loop {
        let mut line = Vec::new();
        match reader.read_until(b'\n', &mut line) {
            Ok(0) | Err(_) => return,
            Ok(_) => {}
        }
        match check_line(schema, methods, &line) {
            Ok(value) => lock(log).received.push(value),
            Err(problem) => lock(log).violations.push(problem),
        }
        if let Some(tx) = &forward
            && tx.unbounded_send(Ok(line)).is_err()
        {
            forward = None;
        }
    }
}

fn check_line(schema: &Schema, methods: &Methods, line: &[u8]) -> Result<Value, String> {
    let text = String::from_utf8_lossy(line);
    if !line.ends_with(b"\n") {
        return Err(format!("message not newline-terminated: {text:?}"));
    }
    let value: Value = serde_json::from_slice(line)
        .map_err(|e| format!("pincer wrote a line that is not JSON ({e}): {text:?}"))?;
    let def = match (value.get("id"), value.get("result")) {
        (Some(id), Some(_)) => lock(methods)
            .get(&id.to_string())
            .and_then(|method| response_def(method)),
        _ => None,
    };
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        schema.check_agent_message(&value);
        if let Some(def) = def {
            schema.check(def, &value["result"]);
        }
        match value.get("method").and_then(Value::as_str) {
            Some("session/update") => schema.check("SessionNotification", &value["params"]),
            Some("session/request_permission") => {
                schema.check("RequestPermissionRequest", &value["params"]);
            }
            _ => {}
        }
    }))
    .map_err(|panic| {
        panic
            .downcast_ref::<String>()
            .cloned()
            .or_else(|| panic.downcast_ref::<&str>().map(|s| (*s).to_owned()))
            .unwrap_or_else(|| format!("schema check failed for {value}"))
    })?;
    Ok(value)
}

/// A session update as (kind, text) for the chunk kinds, for comparisons.
#[allow(
    clippy::wildcard_enum_match_arm,
    reason = "the SDK's SessionUpdate is non_exhaustive: other kinds are shown by their Debug form"
)]
pub fn describe(update: &SessionUpdate) -> (String, String) {
    let chunk = |kind: &str, chunk: &ContentChunk| {
        let text = if let ContentBlock::Text(text) = &chunk.content {
            text.text.clone()
        } else {
            format!("<non-text content {:?}>", chunk.content)
        };
        (kind.to_owned(), text)
    };
    match update {
        SessionUpdate::UserMessageChunk(c) => chunk("user_message_chunk", c),
        SessionUpdate::AgentMessageChunk(c) => chunk("agent_message_chunk", c),
        SessionUpdate::AgentThoughtChunk(c) => chunk("agent_thought_chunk", c),
        SessionUpdate::AvailableCommandsUpdate(update) => (
            "available_commands_update".to_owned(),
            update
                .available_commands
                .iter()
                .map(|c| format!("/{}", c.name))
                .collect::<Vec<_>>()
                .join(" "),
        ),
        SessionUpdate::SessionInfoUpdate(update) => (
            "session_info_update".to_owned(),
            serde_json::to_value(update).unwrap()["title"]
                .as_str()
                .unwrap_or_default()
                .to_owned(),
        ),
        other => (format!("{other:?}"), String::new()),
    }
}

pub fn pair(kind: &str, text: &str) -> (String, String) {
    (kind.to_owned(), text.to_owned())
}

/// One item of an `ActiveSession` stream, decoded.
pub enum Item {
    Update(Box<SessionNotification>),
    Done(Result<PromptResponse, Error>),
}

pub async fn next_item(session: &mut ActiveSession<'_, Agent>) -> Item {
    match session
        .read_update()
        .await
        .expect("the session stream ended")
    {
        SessionMessage::PromptResponse(result) => Item::Done(result),
        SessionMessage::Message(Dispatch::Notification(message)) => {
            assert_eq!(message.method(), "session/update", "{message:?}");
            Item::Update(Box::new(
                serde_json::from_value(message.params().clone()).unwrap(),
            ))
        }
        SessionMessage::Message(other) => panic!("unexpected message from pincer: {other:?}"),
        other => panic!("unexpected session item: {other:?}"),
    }
}

/// Reads the session stream up to the prompt response: (updates, response).
pub async fn read_turn(
    session: &mut ActiveSession<'_, Agent>,
) -> (Vec<(String, String)>, Result<PromptResponse, Error>) {
    let mut updates = Vec::new();
    loop {
        match next_item(session).await {
            Item::Update(note) => {
                assert_eq!(&note.session_id, session.session_id());
                updates.push(describe(&note.update));
            }
            Item::Done(result) => return (updates, result),
        }
    }
}

pub async fn initialize(cx: &ConnectionTo<Agent>) -> InitializeResponse {
    cx.send_request(InitializeRequest::new(ProtocolVersion::V1))
        .block_task()
        .await
        .expect("initialize")
}

pub fn text_prompt(session: &SessionId, text: &str) -> PromptRequest {
    PromptRequest::new(
        session.clone(),
        vec![ContentBlock::Text(TextContent::new(text))],
    )
}

pub async fn new_session(cx: &ConnectionTo<Agent>, cwd: &Path) -> SessionId {
    cx.send_request(NewSessionRequest::new(cwd))
        .block_task()
        .await
        .expect("session/new")
        .session_id
}

/// The position in `log` of the response to the request with `id`.
pub fn response_position(log: &[Value], id: &Value) -> usize {
    log.iter()
        .position(|m| m.get("id") == Some(id) && m.get("method").is_none())
        .unwrap_or_else(|| panic!("no response to {id} in {log:#?}"))
}

/// Reads the `available_commands_update` a session gets right after the
/// response that opened it.
pub async fn expect_commands(session: &mut ActiveSession<'_, Agent>) {
    match next_item(session).await {
        Item::Update(note) => assert_eq!(
            describe(&note.update),
            pair(
                "available_commands_update",
                "/compact /undo /mode /model /runs /memory /trust /help"
            )
        ),
        Item::Done(result) => panic!("a prompt ended before the session's commands: {result:?}"),
    }
}

/// Reads past a loaded session's replayed history to its
/// `available_commands_update`.
pub async fn skip_to_commands(session: &mut ActiveSession<'_, Agent>) {
    loop {
        match next_item(session).await {
            Item::Update(note) => {
                if matches!(note.update, SessionUpdate::AvailableCommandsUpdate(_)) {
                    return;
                }
            }
            Item::Done(result) => {
                panic!("a prompt ended before the session's commands: {result:?}")
            }
        }
    }
}
