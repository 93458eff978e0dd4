#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is a failed test
//! The ACP face driven by the official Rust SDK (`agent-client-protocol`) as an
//! independent client of the real binary. A tee between pincer's stdout and the
//! SDK checks every line against the vendored schema before the SDK parses the
//! very same bytes.

mod common;

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
    CancelNotification, CloseSessionRequest, ContentBlock, ContentChunk, InitializeRequest,
    InitializeResponse, ListSessionsRequest, LoadSessionRequest, NewSessionRequest, PromptRequest,
    PromptResponse, SessionId, SessionNotification, SessionUpdate, StopReason, TextContent,
};
use agent_client_protocol::v1::{ActiveSession, ConnectionTo, SessionMessage, SessionSetup};
use agent_client_protocol::{
    Agent, ByteStreams, Client, Dispatch, Error, ErrorCode, UntypedMessage,
};
use common::{Schema, TestDir, response_def};
use futures::TryStreamExt;
use futures::channel::mpsc;
use pretty_assertions::assert_eq;
use serde_json::{Value, json};

/// Longest any one connection may take before the test fails instead of hanging.
const CONNECTION_LIMIT: Duration = Duration::from_secs(8);

/// What the tee saw: every message pincer wrote, and every schema violation.
#[derive(Default)]
struct Log {
    received: Vec<Value>,
    violations: Vec<String>,
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The request methods the SDK sent, by id (as JSON text), so the tee can check
/// each response against its method's response definition.
type Methods = Arc<Mutex<HashMap<String, String>>>;

/// The SDK's output: written straight to pincer's stdin, each complete line
/// parsed to remember the method of each request id.
struct ToPincer {
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
type FromPincer = futures::stream::IntoAsyncRead<mpsc::UnboundedReceiver<std::io::Result<Vec<u8>>>>;

/// The transport handed to the SDK.
type Transport = ByteStreams<ToPincer, FromPincer>;

/// `pincer acp --script …` with a validating tee on its stdout.
struct Pincer {
    child: Child,
    tee: Option<JoinHandle<()>>,
    log: Arc<Mutex<Log>>,
    stderr_path: PathBuf,
}

impl Pincer {
    fn spawn(dir: &TestDir, script: &Path) -> (Self, Transport) {
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

    fn stderr(&self) -> String {
        std::fs::read_to_string(&self.stderr_path).unwrap_or_default()
    }

    /// Every message pincer has written so far, in order.
    fn received(&self) -> Vec<Value> {
        lock(&self.log).received.clone()
    }

    /// Runs one SDK connection over `transport`, failing the test if it takes too long.
    async fn run<T>(&self, connection: impl Future<Output = Result<T, Error>>) -> T {
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
    fn finish(mut self) -> ExitStatus {
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
        if value.get("method").and_then(Value::as_str) == Some("session/update") {
            schema.check("SessionNotification", &value["params"]);
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
fn describe(update: &SessionUpdate) -> (String, String) {
    let chunk = |kind: &str, chunk: &ContentChunk| {
        let text = match &chunk.content {
            ContentBlock::Text(text) => text.text.clone(),
            other => format!("<non-text content {other:?}>"),
        };
        (kind.to_owned(), text)
    };
    match update {
        SessionUpdate::UserMessageChunk(c) => chunk("user_message_chunk", c),
        SessionUpdate::AgentMessageChunk(c) => chunk("agent_message_chunk", c),
        SessionUpdate::AgentThoughtChunk(c) => chunk("agent_thought_chunk", c),
        other => (format!("{other:?}"), String::new()),
    }
}

fn pair(kind: &str, text: &str) -> (String, String) {
    (kind.to_owned(), text.to_owned())
}

/// One item of an `ActiveSession` stream, decoded.
enum Item {
    Update(Box<SessionNotification>),
    Done(Result<PromptResponse, Error>),
}

async fn next_item(session: &mut ActiveSession<'_, Agent>) -> Item {
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
async fn read_turn(
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

async fn initialize(cx: &ConnectionTo<Agent>) -> InitializeResponse {
    cx.send_request(InitializeRequest::new(ProtocolVersion::V1))
        .block_task()
        .await
        .expect("initialize")
}

fn text_prompt(session: &SessionId, text: &str) -> PromptRequest {
    PromptRequest::new(
        session.clone(),
        vec![ContentBlock::Text(TextContent::new(text))],
    )
}

async fn new_session(cx: &ConnectionTo<Agent>, cwd: &Path) -> SessionId {
    cx.send_request(NewSessionRequest::new(cwd))
        .block_task()
        .await
        .expect("session/new")
        .session_id
}

/// The position in `log` of the response to the request with `id`.
fn response_position(log: &[Value], id: &Value) -> usize {
    log.iter()
        .position(|m| m.get("id") == Some(id) && m.get("method").is_none())
        .unwrap_or_else(|| panic!("no response to {id} in {log:#?}"))
}

#[tokio::test]
async fn initialize_then_a_prompt_streams_chunks_in_order() {
    let dir = TestDir::new();
    let script = dir.script(
        "abc.jsonl",
        &[json!([{"text": "a"}, {"text": "b"}, {"text": "c"}])],
    );
    let ws = dir.workspace();
    let (pincer, transport) = Pincer::spawn(&dir, &script);
    let (init, session_id, updates, response) = pincer
        .run(Client.v1().name("sdk-test").connect_with(
            transport,
            async |cx: ConnectionTo<Agent>| {
                let init = initialize(&cx).await;
                let SessionSetup {
                    mut session,
                    response,
                    ..
                } = cx.build_session(&ws).block_task().start_session().await?;
                assert_eq!(&response.session_id, session.session_id());
                session.send_prompt("hi")?;
                let (updates, result) = read_turn(&mut session).await;
                Ok((init, session.session_id().clone(), updates, result))
            },
        ))
        .await;
    assert_eq!(init.protocol_version, ProtocolVersion::V1);
    assert!(init.agent_capabilities.load_session);
    assert_eq!(
        updates,
        vec![
            pair("agent_message_chunk", "a"),
            pair("agent_message_chunk", "b"),
            pair("agent_message_chunk", "c"),
        ]
    );
    assert_eq!(response.unwrap().stop_reason, StopReason::EndTurn);
    // On the wire too: three chunks for this session, then the response.
    let log = pincer.received();
    let texts: Vec<&str> = log
        .iter()
        .filter(|m| m["method"] == "session/update")
        .map(|m| {
            assert_eq!(m["params"]["sessionId"], session_id.0.as_ref());
            m["params"]["update"]["content"]["text"].as_str().unwrap()
        })
        .collect();
    assert_eq!(texts, vec!["a", "b", "c"]);
    assert_eq!(
        log.last().unwrap()["result"],
        json!({"stopReason": "end_turn"})
    );
    assert!(pincer.finish().success());
}

#[tokio::test]
async fn cancel_mid_stream_ends_the_prompt_with_cancelled() {
    let dir = TestDir::new();
    let script = dir.script(
        "slow.jsonl",
        &[json!([{"text": "first"}, {"delay_ms": 30000}])],
    );
    let ws = dir.workspace();
    let (pincer, transport) = Pincer::spawn(&dir, &script);
    let (first, after_cancel, response, elapsed) = pincer
        .run(
            Client
                .v1()
                .connect_with(transport, async |cx: ConnectionTo<Agent>| {
                    initialize(&cx).await;
                    let SessionSetup { mut session, .. } =
                        cx.build_session(&ws).block_task().start_session().await?;
                    session.send_prompt("go")?;
                    let first = match next_item(&mut session).await {
                        Item::Update(note) => describe(&note.update),
                        Item::Done(result) => panic!("the prompt ended early: {result:?}"),
                    };
                    let sent = Instant::now();
                    session
                        .connection()
                        .send_notification(CancelNotification::new(session.session_id().clone()))?;
                    let (after_cancel, response) =
                        tokio::time::timeout(Duration::from_secs(2), read_turn(&mut session))
                            .await
                            .expect("no prompt response within 2 s of session/cancel");
                    Ok((first, after_cancel, response, sent.elapsed()))
                }),
        )
        .await;
    assert_eq!(first, pair("agent_message_chunk", "first"));
    assert_eq!(after_cancel, vec![], "updates after the cancel");
    let response = response.expect("a cancelled prompt is a response, not an error");
    assert_eq!(response.stop_reason, StopReason::Cancelled);
    assert!(elapsed < Duration::from_secs(2), "cancel took {elapsed:?}");
    assert!(pincer.finish().success());
}

#[tokio::test]
async fn load_after_a_restart_replays_history_before_the_response() {
    let dir = TestDir::new();
    let script = dir.script(
        "two.jsonl",
        &[
            json!([{"text": "Hel"}, {"text": "lo"}]),
            json!([{"text": "second"}]),
        ],
    );
    let ws = dir.workspace();

    // Process 1: create a session and prompt it, then close stdin and exit.
    let (first, transport) = Pincer::spawn(&dir, &script);
    let (session_id, text) = first
        .run(
            Client
                .v1()
                .connect_with(transport, async |cx: ConnectionTo<Agent>| {
                    initialize(&cx).await;
                    let SessionSetup { mut session, .. } =
                        cx.build_session(&ws).block_task().start_session().await?;
                    session.send_prompt("hi")?;
                    let text = session.read_to_string().await?;
                    Ok((session.session_id().clone(), text))
                }),
        )
        .await;
    assert_eq!(text, "Hello");
    assert!(first.finish().success());

    // Process 2, same data dir: session/load replays the history first.
    let (second, transport) = Pincer::spawn(&dir, &script);
    let seen: Arc<Mutex<Vec<SessionNotification>>> = Arc::default();
    let (at_response, load_id, after_prompt, stop) = second
        .run(
            Client
                .v1()
                .on_receive_notification(
                    {
                        let seen = seen.clone();
                        async move |note: SessionNotification, _cx| {
                            lock(&seen).push(note);
                            Ok(())
                        }
                    },
                    agent_client_protocol::on_receive_notification!(),
                )
                .connect_with(transport, async |cx: ConnectionTo<Agent>| {
                    let init = initialize(&cx).await;
                    assert!(init.agent_capabilities.load_session);
                    let load = cx.send_request(LoadSessionRequest::new(session_id.clone(), &ws));
                    let load_id = serde_json::to_value(load.id()).unwrap();
                    load.block_task().await?;
                    // Notification handlers run in the dispatch loop, in arrival order:
                    // what they saw by now arrived before the load response.
                    let at_response = lock(&seen).clone();
                    // The loaded session goes on with the next model turn.
                    let response = cx
                        .send_request(text_prompt(&session_id, "more"))
                        .block_task()
                        .await?;
                    let after_prompt = lock(&seen).clone();
                    Ok((at_response, load_id, after_prompt, response.stop_reason))
                }),
        )
        .await;
    let described: Vec<(String, String)> = at_response
        .iter()
        .map(|note| {
            assert_eq!(note.session_id, session_id);
            describe(&note.update)
        })
        .collect();
    assert_eq!(
        described,
        vec![
            pair("user_message_chunk", "hi"),
            pair("agent_message_chunk", "Hello"),
        ]
    );
    assert_eq!(stop, StopReason::EndTurn);
    let new_updates: Vec<(String, String)> = after_prompt[at_response.len()..]
        .iter()
        .map(|note| describe(&note.update))
        .collect();
    assert_eq!(new_updates, vec![pair("agent_message_chunk", "second")]);
    // On the wire: both replayed updates precede the load response.
    let log = second.received();
    let response_at = response_position(&log, &load_id);
    let before: Vec<&str> = log[..response_at]
        .iter()
        .filter(|m| m["method"] == "session/update")
        .map(|m| m["params"]["update"]["sessionUpdate"].as_str().unwrap())
        .collect();
    assert_eq!(before, vec!["user_message_chunk", "agent_message_chunk"]);
    assert!(second.finish().success());
}

#[tokio::test]
async fn list_returns_the_sessions_and_close_refuses_later_prompts() {
    let dir = TestDir::new();
    let script = dir.script("ok.jsonl", &[json!([{"text": "ok"}])]);
    let ws = dir.workspace();
    let other = dir.path().join("other");
    std::fs::create_dir_all(&other).unwrap();
    let other = other.canonicalize().unwrap();
    let (pincer, transport) = Pincer::spawn(&dir, &script);
    pincer
        .run(
            Client
                .v1()
                .connect_with(transport, async |cx: ConnectionTo<Agent>| {
                    let init = initialize(&cx).await;
                    assert!(init.agent_capabilities.session_capabilities.list.is_some());
                    assert!(init.agent_capabilities.session_capabilities.close.is_some());
                    let a = new_session(&cx, &ws).await;
                    let b = new_session(&cx, &other).await;
                    // Activity is stamped in milliseconds: let the prompt land on a later one.
                    tokio::time::sleep(Duration::from_millis(5)).await;
                    let done = cx
                        .send_request(text_prompt(&a, "Title of a"))
                        .block_task()
                        .await?;
                    assert_eq!(done.stop_reason, StopReason::EndTurn);

                    let list = cx
                        .send_request(ListSessionsRequest::new())
                        .block_task()
                        .await?;
                    let listed: Vec<(SessionId, PathBuf)> = list
                        .sessions
                        .iter()
                        .map(|s| (s.session_id.clone(), s.cwd.clone()))
                        .collect();
                    assert_eq!(
                        listed,
                        vec![(a.clone(), ws.clone()), (b.clone(), other.clone())],
                        "most recently active first"
                    );
                    assert_eq!(list.sessions[0].title.as_deref(), Some("Title of a"));
                    assert_eq!(list.next_cursor, None);

                    cx.send_request(CloseSessionRequest::new(a.clone()))
                        .block_task()
                        .await?;
                    let err = cx
                        .send_request(text_prompt(&a, "after close"))
                        .block_task()
                        .await
                        .expect_err("a prompt on a closed session must fail");
                    assert_eq!(err.code, ErrorCode::RESOURCE_NOT_FOUND, "{err:?}");
                    assert_eq!(i32::from(err.code), -32002);
                    assert!(err.message.contains(a.0.as_ref()), "{err:?}");
                    let err = cx
                        .send_request(CloseSessionRequest::new("ses_missing"))
                        .block_task()
                        .await
                        .expect_err("closing an unknown session must fail");
                    assert_eq!(err.code, ErrorCode::RESOURCE_NOT_FOUND, "{err:?}");
                    Ok(())
                }),
        )
        .await;
    assert!(pincer.finish().success());
}

#[tokio::test]
async fn unknown_methods_get_method_not_found() {
    let dir = TestDir::new();
    let script = dir.script("ok.jsonl", &[json!([{"text": "ok"}])]);
    let (pincer, transport) = Pincer::spawn(&dir, &script);
    pincer
        .run(
            Client
                .v1()
                .connect_with(transport, async |cx: ConnectionTo<Agent>| {
                    initialize(&cx).await;
                    for method in ["_pincer/no_such_method", "session/frobnicate"] {
                        let err = cx
                            .send_request(UntypedMessage::new(method, json!({}))?)
                            .block_task()
                            .await
                            .expect_err("an unknown method must fail");
                        assert_eq!(err.code, ErrorCode::METHOD_NOT_FOUND, "{method}: {err:?}");
                        assert_eq!(i32::from(err.code), -32601);
                    }
                    // An unknown notification is ignored, and the connection goes on.
                    cx.send_notification(UntypedMessage::new("_pincer/no_such_note", json!({}))?)?;
                    let list = cx
                        .send_request(ListSessionsRequest::new())
                        .block_task()
                        .await?;
                    assert_eq!(list.sessions.len(), 0);
                    Ok(())
                }),
        )
        .await;
    let log = pincer.received();
    assert_eq!(log.len(), 4, "initialize, two errors, list: {log:#?}");
    assert!(pincer.finish().success());
}

#[tokio::test]
async fn bad_params_get_invalid_params_naming_the_field() {
    let dir = TestDir::new();
    let script = dir.script("ok.jsonl", &[json!([{"text": "ok"}])]);
    let (pincer, transport) = Pincer::spawn(&dir, &script);
    pincer
        .run(
            Client
                .v1()
                .connect_with(transport, async |cx: ConnectionTo<Agent>| {
                    initialize(&cx).await;
                    let err = cx
                        .send_request(NewSessionRequest::new("relative/ws"))
                        .block_task()
                        .await
                        .expect_err("a relative cwd must be refused");
                    assert_eq!(err.code, ErrorCode::INVALID_PARAMS, "{err:?}");
                    assert_eq!(i32::from(err.code), -32602);
                    assert!(
                        err.message.contains("`cwd`") && err.message.contains("absolute"),
                        "{err:?}"
                    );
                    let err = cx
                        .send_request(UntypedMessage::new(
                            "session/prompt",
                            json!({"prompt": [{"type": "text", "text": "x"}]}),
                        )?)
                        .block_task()
                        .await
                        .expect_err("a prompt without a sessionId must be refused");
                    assert_eq!(err.code, ErrorCode::INVALID_PARAMS, "{err:?}");
                    assert!(err.message.contains("sessionId"), "{err:?}");
                    Ok(())
                }),
        )
        .await;
    assert!(pincer.finish().success());
}
