//! The ACP face: `pincer acp` serves the Agent Client Protocol (v1) over stdio.
//!
//! This module is the only one that knows ACP types. It converts requests into
//! runtime calls and the runtime's events into `session/update` notifications.

mod commands;
mod convert;
mod launch;
pub mod peer;

pub use launch::run;

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use agent_client_protocol_schema::v1 as acp;
use agent_client_protocol_schema::v1::Error as RpcError;
use serde::de::DeserializeOwned;
use serde_json::value::RawValue;
use serde_json::{Value, json};
use tokio::io::AsyncBufRead;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::core::approval::ApprovalDecision;
use crate::core::event::Event;
use crate::core::ids::{RunId, SessionId};
use crate::core::quote::{clip_message, quote};
use crate::core::run::RunOutcome;
use crate::core::runtime::{NewSession, Runtime, RuntimeError, Subscription};
use crate::core::session::{Mode, Origin, Session};
use crate::core::tool::{
    ClientFiles, ClientTerminal, Progress, ProgressUpdate, TerminalCommand, TerminalExit,
};
use crate::stdout::LineSender;
use crate::store::SessionQuery;
use agent_client_protocol_schema::v1::RequestId;
use commands::{FaceCommand, SlashCommand};
use peer::{Id, Incoming, Line, LineReader, Peer};

/// The extension methods Pincer serves, advertised in `initialize`.
pub const EXTENSION_METHODS: [&str; 4] = [
    "_pincer/runs/list",
    "_pincer/runs/get",
    "_pincer/runs/tape",
    "_pincer/grants/list",
];

/// Settings of the ACP face.
#[derive(Debug, Clone)]
pub struct AcpOptions {
    /// Longest line accepted; longer lines are answered with an error and skipped.
    pub max_line_bytes: usize,
    /// Facts about the host shown to the client under `_meta` (sandbox status, version).
    pub meta: Value,
    /// Starts the MCP servers a client passes (with the configured ones);
    /// `None` ignores them.
    pub mcp: Option<Arc<crate::mcp::Factory>>,
    /// How long Pincer waits for the client to answer `fs/read_text_file`
    /// or `fs/write_text_file` before the call fails.
    pub client_timeout: std::time::Duration,
    /// Client requests handled at once; the next line is read when one ends,
    /// so a flood waits in the pipe, not in memory.
    pub max_inflight: usize,
}

impl Default for AcpOptions {
    fn default() -> Self {
        Self {
            max_line_bytes: 16 * 1024 * 1024,
            meta: Value::Null,
            mcp: None,
            client_timeout: std::time::Duration::from_secs(60),
            max_inflight: 64,
        }
    }
}

/// Serves one client until its input ends or `shutdown` fires, then cancels the
/// runs still going, waits for each to record its end, and for every answer to
/// be queued.
pub async fn serve<R>(
    runtime: Runtime,
    input: R,
    out: LineSender,
    options: AcpOptions,
    shutdown: CancellationToken,
) -> std::io::Result<()>
where
    R: AsyncBufRead + Unpin,
{
    let conn = Arc::new(Connection {
        runtime,
        peer: Arc::new(Peer::new(out)),
        options,
        attached: Mutex::new(HashMap::new()),
        prompts: Mutex::new(HashMap::new()),
        inflight: Mutex::new(HashMap::new()),
        ordered: Mutex::new(HashMap::new()),
        tasks: TaskTracker::new(),
        files: Mutex::new(None),
        terminal: Mutex::new(None),
        permissions: Mutex::new(HashMap::new()),
    });
    let slots = Arc::new(tokio::sync::Semaphore::new(
        conn.options.max_inflight.max(1),
    ));
    let mut reader = LineReader::new(input, conn.options.max_line_bytes);
    loop {
        let next = tokio::select! {
            next = reader.next_line() => next,
            _ = shutdown.cancelled() => {
                tracing::info!("shutting down on request");
                break;
            }
        };
        let line = match next {
            Ok(line) => line,
            Err(err) => {
                tracing::error!(error = %err, "cannot read stdin");
                break;
            }
        };
        let bytes = match line {
            Line::End => break,
            Line::TooLong(size) => {
                let error = RpcError::invalid_request().data(format!(
                    "message of {size} bytes exceeds the limit of {} bytes",
                    conn.options.max_line_bytes
                ));
                conn.peer.respond(&Id::null(), Err(error)).await;
                continue;
            }
            Line::Message(bytes) => bytes,
        };
        if bytes.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        match peer::classify(&conn.peer, &bytes) {
            None => {}
            Some(Incoming::Invalid { id, error }) => {
                tracing::debug!(code = i32::from(error.code), "invalid message");
                conn.peer.respond(&id, Err(error)).await;
            }
            Some(Incoming::Notification { method, params }) => {
                let key = session_key(params.as_deref());
                match key {
                    // Behind the session's earlier requests: a cancel sent right
                    // after a prompt must find that prompt's run. With nothing
                    // queued for the session it is handled at once, at no cost.
                    Some(key) if method == "session/cancel" && conn.queued(&key) => {
                        let Some(slot) = take_slot(&slots, &shutdown).await else {
                            break;
                        };
                        conn.enqueue(
                            key,
                            Job {
                                id: None,
                                method,
                                params,
                                token: CancellationToken::new(),
                                slot,
                            },
                        );
                    }
                    _ => conn.notification(&method, params),
                }
            }
            Some(Incoming::Request { id, method, params }) => {
                let Some(slot) = take_slot(&slots, &shutdown).await else {
                    break;
                };
                let token = CancellationToken::new();
                lock(&conn.inflight).insert(id.key().clone(), token.clone());
                let job = Job {
                    id: Some(id),
                    method,
                    params,
                    token,
                    slot,
                };
                match session_key(job.params.as_deref()) {
                    // Requests about one session are handled in the order they
                    // came (a prompt after a mode change sees the new mode; two
                    // prompts queue in order); the rest run concurrently.
                    Some(key) => conn.enqueue(key, job),
                    None => {
                        let task_conn = conn.clone();
                        conn.tasks.spawn(async move { task_conn.handle(job).await });
                    }
                }
            }
        }
    }
    tracing::debug!("stdin closed; shutting down");
    conn.shutdown().await;
    Ok(())
}

/// Waits for room to handle one more client request; `None` on shutdown.
async fn take_slot(
    slots: &Arc<tokio::sync::Semaphore>,
    shutdown: &CancellationToken,
) -> Option<tokio::sync::OwnedSemaphorePermit> {
    tokio::select! {
        slot = slots.clone().acquire_owned() => slot.ok(),
        _ = shutdown.cancelled() => None,
    }
}

/// A client request (or, without an id, a notification) waiting to be handled.
struct Job {
    id: Option<Id>,
    method: String,
    params: Option<Box<RawValue>>,
    /// Fired by `$/cancel_request` for this request.
    token: CancellationToken,
    /// Its place among the requests handled at once, freed when it is done.
    slot: tokio::sync::OwnedSemaphorePermit,
}

/// The session a request is about, if its params name one.
fn session_key(params: Option<&RawValue>) -> Option<String> {
    #[derive(serde::Deserialize)]
    struct Key {
        #[serde(rename = "sessionId")]
        session_id: Option<String>,
    }
    let params = params?;
    serde_json::from_str::<Key>(params.get()).ok()?.session_id
}

enum Reply {
    Now(Result<Value, RpcError>),
    /// The answer is sent later by the session's forwarder (prompts).
    Later,
}

/// One client connection.
struct Connection {
    runtime: Runtime,
    peer: Arc<Peer>,
    options: AcpOptions,
    /// Sessions this client has opened, with the task forwarding their events.
    attached: Mutex<HashMap<SessionId, tokio::task::JoinHandle<()>>>,
    /// Prompt requests waiting for their run to end: the request id, by run.
    prompts: Mutex<HashMap<RunId, Id>>,
    /// Cancellation of each request being handled, by id.
    inflight: Mutex<HashMap<RequestId, CancellationToken>>,
    /// A queue per session id with requests waiting or being handled, worked
    /// through in order by its own task. The task removes its queue once it
    /// is empty, so a made-up session id costs nothing after its answer.
    ordered: Mutex<HashMap<String, tokio::sync::mpsc::UnboundedSender<Job>>>,
    /// Request handlers and forwarders, awaited on shutdown.
    tasks: TaskTracker,
    /// File access through the client, when `initialize` said it offers it.
    files: Mutex<Option<Arc<ClientFs>>>,
    /// The client's terminals, when it offers them (`clientCapabilities.terminal`).
    terminal: Mutex<Option<Arc<ClientTerm>>>,
    /// Our `session/request_permission` requests in flight, by approval id:
    /// cancelled when the approval is settled some other way.
    permissions: Mutex<HashMap<String, PendingPermission>>,
}

/// A `session/request_permission` request in flight.
struct PendingPermission {
    cancel: CancellationToken,
    /// Resolves once the request is over: answered, or withdrawn with
    /// `$/cancel_request`.
    over: tokio::sync::oneshot::Receiver<()>,
}

/// Reads and writes files through the client's `fs/*` methods.
struct ClientFs {
    peer: Arc<Peer>,
    read: bool,
    write: bool,
    /// How long a read or write may wait for the client's answer.
    timeout: std::time::Duration,
}

impl ClientFiles for ClientFs {
    fn can_read(&self) -> bool {
        self.read
    }

    fn can_write(&self) -> bool {
        self.write
    }

    fn read_text(
        &self,
        session: &SessionId,
        path: &std::path::Path,
    ) -> futures::future::BoxFuture<'static, Result<String, String>> {
        let peer = self.peer.clone();
        let request =
            acp::ReadTextFileRequest::new(session.as_str().to_owned(), path.to_path_buf());
        let timeout = self.timeout;
        Box::pin(async move {
            let never = CancellationToken::new();
            ask_client::<_, acp::ReadTextFileResponse>(
                &peer,
                "fs/read_text_file",
                &request,
                &never,
                Some(timeout),
            )
            .await
            .map(|response| response.content)
        })
    }

    fn write_text(
        &self,
        session: &SessionId,
        path: &std::path::Path,
        content: String,
    ) -> futures::future::BoxFuture<'static, Result<(), String>> {
        let peer = self.peer.clone();
        let request = acp::WriteTextFileRequest::new(
            session.as_str().to_owned(),
            path.to_path_buf(),
            content,
        );
        let timeout = self.timeout;
        Box::pin(async move {
            let never = CancellationToken::new();
            ask_client::<_, acp::WriteTextFileResponse>(
                &peer,
                "fs/write_text_file",
                &request,
                &never,
                Some(timeout),
            )
            .await
            .map(|_| ())
        })
    }
}

/// Runs shell calls in the client's terminal (`terminal/*`).
struct ClientTerm {
    peer: Arc<Peer>,
}

/// Sends one of our requests to the client and reads its answer, waiting at
/// most `limit`.
async fn ask_client<P: serde::Serialize, R: DeserializeOwned>(
    peer: &Peer,
    method: &str,
    params: &P,
    cancel: &CancellationToken,
    limit: Option<std::time::Duration>,
) -> Result<R, String> {
    let value = peer
        .request_within(method, params, cancel, limit)
        .await
        .map_err(|err| format!("{method}: {}", rpc_error_text(&err)))?;
    answer(method, value)
}

/// The client's answer to one of our requests, read as `R`. `null` (which
/// JSON-RPC allows) reads as `{}`, so an answer with nothing to say is one.
fn answer<R: DeserializeOwned>(method: &str, value: Value) -> Result<R, String> {
    let value = match value {
        Value::Null => json!({}),
        other => other,
    };
    serde_json::from_value(value)
        .map_err(|err| clip_message(&format!("the client's {method} answer is not valid: {err}")))
}

impl ClientTerminal for ClientTerm {
    fn run(
        &self,
        session: &SessionId,
        command: TerminalCommand,
        timeout: std::time::Duration,
        progress: Progress,
        cancel: CancellationToken,
    ) -> futures::future::BoxFuture<'static, Result<TerminalExit, String>> {
        let peer = self.peer.clone();
        let session = session.as_str().to_owned();
        Box::pin(async move {
            let create = acp::CreateTerminalRequest::new(session.clone(), command.command)
                .args(command.args)
                .env(
                    command
                        .env
                        .into_iter()
                        .map(|(name, value)| acp::EnvVariable::new(name, value))
                        .collect(),
                )
                .cwd(command.cwd)
                .output_byte_limit(command.output_limit as u64);
            let created: acp::CreateTerminalResponse =
                ask_client(&peer, "terminal/create", &create, &cancel, Some(FOLLOW_UP)).await?;
            let terminal = created.terminal_id;
            progress.report(ProgressUpdate::Terminal(terminal.0.to_string()));
            let wait = acp::WaitForTerminalExitRequest::new(session.clone(), terminal.clone());
            let waiting = CancellationToken::new();
            let mut timed_out = false;
            let exited = tokio::select! {
                answer = ask_client::<_, acp::WaitForTerminalExitResponse>(&peer, "terminal/wait_for_exit", &wait, &waiting, None) => Some(answer),
                _ = cancel.cancelled() => None,
                _ = tokio::time::sleep(timeout) => {
                    timed_out = true;
                    None
                }
            };
            // Requests after the command ended (or was killed) get a bounded
            // wait: a client that stops answering cannot hold the run. A
            // cancel that comes while one waits withdraws it; once the run is
            // cancelled, they get a short wait instead.
            let never = CancellationToken::new();
            let follow_up = || {
                if cancel.is_cancelled() {
                    (&never, CANCELLED_FOLLOW_UP)
                } else {
                    (&cancel, FOLLOW_UP)
                }
            };
            if exited.is_none() {
                waiting.cancel();
                let kill = acp::KillTerminalRequest::new(session.clone(), terminal.clone());
                let (withdraw, limit) = follow_up();
                if let Err(err) =
                    ask_client::<_, Value>(&peer, "terminal/kill", &kill, withdraw, Some(limit))
                        .await
                {
                    tracing::warn!(%err, "cannot kill the client's terminal");
                }
            }
            let output = acp::TerminalOutputRequest::new(session.clone(), terminal.clone());
            let (withdraw, limit) = follow_up();
            let read: Result<acp::TerminalOutputResponse, String> =
                ask_client(&peer, "terminal/output", &output, withdraw, Some(limit)).await;
            // The client keeps showing a released terminal embedded in the call.
            let release = acp::ReleaseTerminalRequest::new(session.clone(), terminal.clone());
            let (withdraw, limit) = follow_up();
            if let Err(err) =
                ask_client::<_, Value>(&peer, "terminal/release", &release, withdraw, Some(limit))
                    .await
            {
                tracing::warn!(%err, "cannot release the client's terminal");
            }
            let read = read?;
            let status = match exited {
                Some(Ok(waited)) => Some(waited.exit_status),
                Some(Err(err)) => return Err(err),
                None => read.exit_status,
            };
            Ok(TerminalExit {
                terminal_id: terminal.0.to_string(),
                output: read.output,
                truncated: read.truncated,
                exit_code: status.as_ref().and_then(|s| s.exit_code),
                signal: status.and_then(|s| s.signal),
                timed_out,
            })
        })
    }
}

/// How long the terminal requests around a command may wait for the client.
const FOLLOW_UP: std::time::Duration = std::time::Duration::from_secs(10);

/// The same once the run is cancelled: the run is ending and should not wait.
const CANCELLED_FOLLOW_UP: std::time::Duration = std::time::Duration::from_secs(1);

fn rpc_error_text(err: &RpcError) -> String {
    clip_message(&match &err.data {
        Some(data) => format!("{} ({data})", err.message),
        None => err.message.clone(),
    })
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Parses params into `T`; a failure names the offending field.
fn params<T: DeserializeOwned>(raw: Option<Box<RawValue>>) -> Result<T, RpcError> {
    let text = raw.as_ref().map_or("{}", |raw| raw.get());
    let mut deserializer = serde_json::Deserializer::from_str(text);
    serde_path_to_error::deserialize(&mut deserializer).map_err(|err| {
        let path = err.path().to_string();
        let inner = err.into_inner().to_string();
        let inner = inner.split(" at line ").next().unwrap_or(&inner).to_owned();
        let message = if path == "." || path.is_empty() {
            format!("Invalid params: {inner}")
        } else {
            format!("Invalid params: `{path}`: {inner}")
        };
        RpcError::new(-32602, clip_message(&message))
    })
}

fn invalid_params(message: impl Into<String>) -> RpcError {
    RpcError::new(-32602, format!("Invalid params: {}", message.into()))
}

/// An outside value in an error: quoted, and cut to a short prefix with its
/// length when long.
fn quoted(value: &str) -> String {
    format!("{:?}", quote(value).to_string())
}

fn to_value<T: serde::Serialize>(value: T) -> Result<Value, RpcError> {
    serde_json::to_value(value).map_err(|err| RpcError::internal_error().data(err.to_string()))
}

fn runtime_error(err: RuntimeError) -> RpcError {
    match err {
        RuntimeError::SessionNotFound(id) => {
            let shown = quote(id.as_str()).to_string();
            let mut error = RpcError::session_not_found(shown.clone());
            error.message = format!("Resource not found: session {shown}");
            error
        }
        RuntimeError::RunNotFound(id) => {
            let shown = quote(id.as_str()).to_string();
            let mut error = RpcError::resource_not_found(None).data(json!({ "runId": shown }));
            error.message = format!("Resource not found: run {shown}");
            error
        }
        RuntimeError::RelativeWorkspace(_)
        | RuntimeError::UnknownModel(..)
        | RuntimeError::ImagesNotAccepted { .. } => invalid_params(clip_message(&err.to_string())),
        // The face names parts `prompt[N]`, as its own checks do.
        RuntimeError::InvalidContent { index, message } => {
            invalid_params(format!("prompt[{index}]: {}", clip_message(&message)))
        }
        RuntimeError::ShuttingDown | RuntimeError::Store(_) => {
            let text = clip_message(&err.to_string());
            tracing::error!(error = %text, "request failed");
            RpcError::internal_error().data(text)
        }
    }
}

#[derive(serde::Deserialize)]
#[serde(rename_all = "camelCase")]
struct RunsListParams {
    session_id: String,
}

#[derive(serde::Deserialize)]
#[serde(rename_all = "camelCase")]
struct RunParams {
    run_id: String,
    #[serde(default)]
    from_seq: u64,
}

impl Connection {
    /// Handles one request and answers it (unless the answer comes later).
    async fn handle(self: &Arc<Self>, job: Job) {
        let Job {
            id,
            method,
            params,
            token,
            slot,
        } = job;
        let Some(id) = id else {
            self.notification(&method, params);
            drop(slot);
            return;
        };
        let reply = self.request(&id, &method, params, &token).await;
        lock(&self.inflight).remove(id.key());
        drop(slot);
        if let Reply::Now(result) = reply {
            let result = if token.is_cancelled() && result.is_err() {
                Err(RpcError::request_cancelled())
            } else {
                result
            };
            self.peer.respond(&id, result).await;
        }
    }

    /// Whether requests about this session are waiting or being handled.
    fn queued(&self, key: &str) -> bool {
        lock(&self.ordered).contains_key(key)
    }

    /// Queues a request behind the earlier ones about the same session.
    fn enqueue(self: &Arc<Self>, key: String, job: Job) {
        let mut ordered = lock(&self.ordered);
        let tx = ordered.entry(key.clone()).or_insert_with(|| {
            let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<Job>();
            let conn = self.clone();
            let own = tx.clone();
            self.tasks.spawn(async move {
                loop {
                    while let Ok(job) = rx.try_recv() {
                        conn.handle(job).await;
                    }
                    // Jobs are sent under this lock, so an empty queue seen
                    // under it stays empty once removed.
                    let mut ordered = lock(&conn.ordered);
                    if rx.is_empty() {
                        if ordered.get(&key).is_some_and(|tx| tx.same_channel(&own)) {
                            ordered.remove(&key);
                        }
                        return;
                    }
                }
            });
            tx
        });
        if let Err(err) = tx.send(job) {
            tracing::error!(method = %quote(&err.0.method), "session request queue closed");
        }
    }

    fn notification(self: &Arc<Self>, method: &str, raw: Option<Box<RawValue>>) {
        match method {
            "session/cancel" => match params::<acp::CancelNotification>(raw) {
                Ok(cancel) => {
                    let id = SessionId::from_string(cancel.session_id.0.to_string());
                    if let Err(err) = self.runtime.cancel(&id) {
                        tracing::debug!(error = %clip_message(&err.to_string()), "session/cancel for an unknown session");
                    }
                }
                Err(err) => tracing::warn!(error = %err.message, "bad session/cancel"),
            },
            "$/cancel_request" => match params::<acp::CancelRequestNotification>(raw) {
                Ok(cancel) => {
                    let target = cancel.request_id;
                    if let Some(token) = lock(&self.inflight).get(&target) {
                        token.cancel();
                    }
                    // A prompt's request is no longer in flight once its run is queued;
                    // cancel that run instead.
                    let run = lock(&self.prompts)
                        .iter()
                        .find_map(|(run, id)| (*id.key() == target).then(|| run.clone()));
                    if let Some(run) = run {
                        let sessions: Vec<SessionId> =
                            lock(&self.attached).keys().cloned().collect();
                        for session in sessions {
                            if self.runtime.cancel_run(&session, &run) {
                                break;
                            }
                        }
                    }
                }
                Err(err) => tracing::warn!(error = %err.message, "bad $/cancel_request"),
            },
            other => tracing::debug!(method = %quote(other), "ignoring unknown notification"),
        }
    }

    async fn request(
        self: &Arc<Self>,
        id: &Id,
        method: &str,
        raw: Option<Box<RawValue>>,
        cancel: &CancellationToken,
    ) -> Reply {
        let result = match method {
            "initialize" => self.initialize(raw),
            "authenticate" => params::<acp::AuthenticateRequest>(raw)
                .and_then(|_| to_value(acp::AuthenticateResponse::new())),
            "session/new" => return self.new_session(id, raw).await,
            "session/load" => return self.load_session(id, raw, cancel).await,
            "session/resume" => return self.resume_session(id, raw).await,
            "session/list" => self.list_sessions(raw).await,
            "session/close" => self.close_session(raw).await,
            "session/prompt" => return self.prompt(id, raw, cancel).await,
            "session/set_config_option" => self.set_config_option(raw).await,
            "session/set_mode" => self.set_mode(raw).await,
            "_pincer/runs/list" => self.runs_list(raw).await,
            "_pincer/runs/get" => self.runs_get(raw).await,
            "_pincer/runs/tape" => self.runs_tape(raw).await,
            "_pincer/grants/list" => self.grants_list(raw).await,
            other => {
                Err(RpcError::method_not_found().data(format!("unknown method {}", quoted(other))))
            }
        };
        Reply::Now(result)
    }

    fn initialize(&self, raw: Option<Box<RawValue>>) -> Result<Value, RpcError> {
        let request: acp::InitializeRequest = params(raw)?;
        tracing::info!(client = ?request.client_info.as_ref().map(|i| quote(&i.name).to_string()), version = ?request.protocol_version, "initialize");
        let fs = &request.client_capabilities.fs;
        *lock(&self.files) = (fs.read_text_file || fs.write_text_file).then(|| {
            Arc::new(ClientFs {
                peer: self.peer.clone(),
                read: fs.read_text_file,
                write: fs.write_text_file,
                timeout: self.options.client_timeout,
            })
        });
        *lock(&self.terminal) = request.client_capabilities.terminal.then(|| {
            Arc::new(ClientTerm {
                peer: self.peer.clone(),
            })
        });
        let mut meta = serde_json::Map::new();
        let mut pincer = json!({ "extensionMethods": EXTENSION_METHODS });
        if let (Value::Object(target), Value::Object(extra)) = (&mut pincer, &self.options.meta) {
            target.extend(extra.clone());
        }
        meta.insert("pincer".into(), pincer);
        let capabilities = acp::AgentCapabilities::new()
            .load_session(true)
            .prompt_capabilities(
                // Capabilities are per connection: images are advertised when
                // the model new sessions get takes them. A session switched to
                // another model is checked at each prompt.
                acp::PromptCapabilities::new()
                    .image(self.runtime.default_model_accepts_images())
                    .audio(false)
                    .embedded_context(true),
            )
            // rmcp has no client for the legacy SSE transport.
            .mcp_capabilities(acp::McpCapabilities::new().http(true).sse(false))
            .session_capabilities(
                acp::SessionCapabilities::new()
                    .list(acp::SessionListCapabilities::new())
                    .resume(acp::SessionResumeCapabilities::new())
                    .close(acp::SessionCloseCapabilities::new()),
            )
            .meta(meta);
        let response =
            acp::InitializeResponse::new(agent_client_protocol_schema::ProtocolVersion::V1)
                .agent_capabilities(capabilities)
                .agent_info(
                    acp::Implementation::new("pincer", env!("CARGO_PKG_VERSION"))
                        .title("Pincer".to_owned()),
                );
        to_value(response)
    }

    fn workspace(cwd: PathBuf) -> Result<PathBuf, RpcError> {
        if !cwd.is_absolute() {
            return Err(invalid_params(format!(
                "`cwd` must be an absolute path, got {}",
                quoted(&cwd.display().to_string())
            )));
        }
        Ok(cwd)
    }

    /// Answers a request that opens a session, then starts forwarding its events:
    /// no update can overtake the response. Events meanwhile wait in the subscription.
    async fn answer_and_attach(
        self: &Arc<Self>,
        id: &Id,
        opened: Result<(Value, SessionId, Subscription), RpcError>,
    ) -> Reply {
        match opened {
            Ok((response, session, subscription)) => {
                // Attached before the response, so a prompt sent the moment the
                // client reads it finds the session; forwarding starts after the
                // response is queued, so no update overtakes it.
                let (start, started) = tokio::sync::oneshot::channel();
                let session_id = session.as_str().to_owned();
                self.attach(session, subscription, started);
                self.peer.respond(id, Ok(response)).await;
                self.peer
                    .notify(
                        "session/update",
                        &acp::SessionNotification::new(session_id, commands::available()),
                    )
                    .await;
                let _ = start.send(());
            }
            Err(err) => {
                self.peer.respond(id, Err(err)).await;
            }
        }
        Reply::Later
    }

    fn attach(
        self: &Arc<Self>,
        session: SessionId,
        subscription: Subscription,
        start: tokio::sync::oneshot::Receiver<()>,
    ) {
        let files = lock(&self.files)
            .clone()
            .map(|fs| fs as Arc<dyn ClientFiles>);
        self.runtime.set_client_files(&session, files);
        let terminal = lock(&self.terminal)
            .clone()
            .map(|t| t as Arc<dyn ClientTerminal>);
        self.runtime.set_client_terminal(&session, terminal);
        let conn = self.clone();
        let key = session.clone();
        let handle = self.tasks.spawn(async move {
            if start.await.is_ok() {
                conn.forward(session, subscription).await;
            }
        });
        if let Some(previous) = lock(&self.attached).insert(key, handle) {
            previous.abort();
        }
    }

    fn session_response_parts(
        &self,
        session: &Session,
    ) -> (Vec<acp::SessionConfigOption>, acp::SessionModeState) {
        (
            convert::config_options(session, self.runtime.providers()),
            convert::mode_state(session),
        )
    }

    async fn new_session(self: &Arc<Self>, id: &Id, raw: Option<Box<RawValue>>) -> Reply {
        let result = async {
            let request: acp::NewSessionRequest = params(raw)?;
            let workspace = Self::workspace(request.cwd)?;
            let (servers, mcp_servers) = mcp_servers(&request.mcp_servers)?;
            let session = self
                .runtime
                .create_session(NewSession {
                    workspace,
                    origin: Origin::Editor,
                    mcp_servers,
                })
                .await
                .map_err(runtime_error)?;
            if !servers.is_empty() {
                self.start_mcp(&session, servers).await;
            }
            let subscription = self.runtime.subscribe(&session.id).map_err(runtime_error)?;
            let (options, modes) = self.session_response_parts(&session);
            let response = acp::NewSessionResponse::new(session.id.as_str().to_owned())
                .config_options(options)
                .modes(modes);
            Ok((to_value(response)?, session.id, subscription))
        }
        .await;
        self.answer_and_attach(id, result).await
    }

    /// Gives a live session the configured MCP servers plus `servers` (the
    /// client's, which win by name). They start on the session's first turn.
    async fn start_mcp(&self, session: &Session, servers: Vec<crate::mcp::ServerSpec>) {
        let Some(factory) = &self.options.mcp else {
            if !servers.is_empty() {
                tracing::warn!(session = %session.id, "MCP servers passed but MCP is not set up; ignoring them");
            }
            return;
        };
        if servers.is_empty() && factory.settings().servers.is_empty() {
            self.runtime.set_session_tools(&session.id, None).await;
            return;
        }
        let tools = factory.session(&session.workspace, servers);
        self.runtime
            .set_session_tools(&session.id, Some(Arc::new(tools)))
            .await;
    }

    /// Opens a stored session for this client, checking the workspace matches.
    async fn open(
        &self,
        session_id: &acp::SessionId,
        cwd: PathBuf,
    ) -> Result<(Session, Subscription), RpcError> {
        let cwd = Self::workspace(cwd)?;
        let id = SessionId::from_string(session_id.0.to_string());
        let stored = self.runtime.session(&id).await.map_err(runtime_error)?;
        if stored.workspace != cwd {
            return Err(invalid_params(format!(
                "`cwd` {} does not match the session's workspace {}",
                quote(&cwd.display().to_string()),
                stored.workspace.display()
            )));
        }
        let session = self
            .runtime
            .open_session(&id)
            .await
            .map_err(runtime_error)?;
        let subscription = self.runtime.subscribe(&id).map_err(runtime_error)?;
        Ok((session, subscription))
    }

    async fn load_session(
        self: &Arc<Self>,
        id: &Id,
        raw: Option<Box<RawValue>>,
        cancel: &CancellationToken,
    ) -> Reply {
        let result = async {
            let request: acp::LoadSessionRequest = params(raw)?;
            let (servers, _) = mcp_servers(&request.mcp_servers)?;
            let (session, subscription) = self.open(&request.session_id, request.cwd).await?;
            self.start_mcp(&session, servers).await;
            let history = self
                .runtime
                .history(&session.id)
                .await
                .map_err(runtime_error)?;
            let tools = &self.runtime.gate().tools;
            let kind_of = |name: &str| {
                tools
                    .get(name)
                    .map_or(crate::core::tool::ToolKind::Other, |tool| tool.kind())
            };
            for update in convert::history_updates(&history, kind_of) {
                if cancel.is_cancelled() {
                    return Err(RpcError::request_cancelled());
                }
                self.notify_update(&session.id, update).await;
            }
            // The context meter and cost as the last turn left them, and the
            // model's task list.
            let usage = self
                .runtime
                .last_usage(&session.id)
                .await
                .map_err(runtime_error)?;
            let plan = self
                .runtime
                .last_plan(&session.id)
                .await
                .map_err(runtime_error)?;
            for update in usage
                .iter()
                .chain(plan.iter())
                .flat_map(|e| convert::live_update(e, true))
            {
                self.notify_update(&session.id, update).await;
            }
            let (options, modes) = self.session_response_parts(&session);
            let response = acp::LoadSessionResponse::new()
                .config_options(options)
                .modes(modes);
            Ok((to_value(response)?, session.id, subscription))
        }
        .await;
        self.answer_and_attach(id, result).await
    }

    async fn resume_session(self: &Arc<Self>, id: &Id, raw: Option<Box<RawValue>>) -> Reply {
        let result = async {
            let request: acp::ResumeSessionRequest = params(raw)?;
            let (servers, _) = mcp_servers(&request.mcp_servers)?;
            let (session, subscription) = self.open(&request.session_id, request.cwd).await?;
            self.start_mcp(&session, servers).await;
            let (options, modes) = self.session_response_parts(&session);
            let response = acp::ResumeSessionResponse::new()
                .config_options(options)
                .modes(modes);
            Ok((to_value(response)?, session.id, subscription))
        }
        .await;
        self.answer_and_attach(id, result).await
    }

    async fn list_sessions(&self, raw: Option<Box<RawValue>>) -> Result<Value, RpcError> {
        const PAGE: usize = 50;
        let request: acp::ListSessionsRequest = params(raw)?;
        let workspace = match request.cwd {
            Some(cwd) => Some(Self::workspace(cwd)?),
            None => None,
        };
        let after = match request.cursor.as_deref() {
            None => None,
            Some(cursor) => Some(decode_cursor(cursor).ok_or_else(|| {
                invalid_params(format!(
                    "`cursor` {} is not a cursor this agent issued",
                    quoted(cursor)
                ))
            })?),
        };
        let mut sessions = self
            .runtime
            .list_sessions(SessionQuery {
                workspace,
                after,
                limit: PAGE + 1,
            })
            .await
            .map_err(runtime_error)?;
        let next = if sessions.len() > PAGE {
            sessions.truncate(PAGE);
            sessions
                .last()
                .map(|s| format!("{}:{}", s.updated_at, s.id))
        } else {
            None
        };
        let infos: Vec<acp::SessionInfo> = sessions.iter().map(convert::session_info).collect();
        to_value(acp::ListSessionsResponse::new(infos).next_cursor(next))
    }

    async fn close_session(&self, raw: Option<Box<RawValue>>) -> Result<Value, RpcError> {
        let request: acp::CloseSessionRequest = params(raw)?;
        let id = SessionId::from_string(request.session_id.0.to_string());
        self.runtime
            .close_session(&id)
            .await
            .map_err(runtime_error)?;
        // The forwarder ends by itself once the session's events are drained.
        lock(&self.attached).remove(&id);
        to_value(acp::CloseSessionResponse::new())
    }

    fn attached_session(&self, session_id: &acp::SessionId) -> Result<SessionId, RpcError> {
        let id = SessionId::from_string(session_id.0.to_string());
        if lock(&self.attached).contains_key(&id) {
            Ok(id)
        } else {
            let shown = quote(id.as_str()).to_string();
            let mut error = RpcError::session_not_found(shown.clone());
            error.message = format!(
                "Resource not found: session {shown} (create it with session/new or open it with session/load or session/resume)"
            );
            Err(error)
        }
    }

    async fn prompt(
        self: &Arc<Self>,
        id: &Id,
        raw: Option<Box<RawValue>>,
        cancel: &CancellationToken,
    ) -> Reply {
        let started = async {
            let request: acp::PromptRequest = params(raw)?;
            let session = self.attached_session(&request.session_id)?;
            let content = convert::prompt_content(request.prompt)
                .map_err(|message| invalid_params(clip_message(&message)))?;
            if content.is_empty() {
                return Err(invalid_params(
                    "`prompt` must contain at least one content block",
                ));
            }
            // `/compact` and `/undo` are runs of their own; the other commands
            // are answered here without one.
            let queued_command = match commands::parse(&content) {
                Some(SlashCommand::Queued(command)) => Some(command),
                Some(SlashCommand::Answered(command)) => return Ok(Err((session, command))),
                None => None,
            };
            // Registered before the run exists, so its forwarder always knows the
            // run is this client's own and whom to answer when it ends.
            let run_id = RunId::generate();
            lock(&self.prompts).insert(run_id.clone(), id.clone());
            let started = match queued_command {
                Some(command) => {
                    self.runtime
                        .command_as(&session, run_id.clone(), command)
                        .await
                }
                None => {
                    self.runtime
                        .prompt_as(&session, run_id.clone(), content)
                        .await
                }
            };
            match started {
                // A `$/cancel_request` that came while the run was being queued.
                Ok(_) if cancel.is_cancelled() => {
                    self.runtime.cancel_run(&session, &run_id);
                }
                Ok(_) => {}
                Err(_) => {
                    lock(&self.prompts).remove(&run_id);
                }
            }
            started.map(Ok).map_err(runtime_error)
        }
        .await;
        match started {
            Ok(Ok(_)) => Reply::Later,
            Ok(Err((session, command))) => self.slash_command(&session, command).await,
            Err(err) => Reply::Now(Err(err)),
        }
    }

    /// Answers a slash command that needs no model: its text as an agent
    /// message, then the prompt's response.
    async fn slash_command(self: &Arc<Self>, session: &SessionId, command: FaceCommand) -> Reply {
        let text = match self.command_text(session, command).await {
            Ok(text) => text,
            Err(err) => return Reply::Now(Err(err)),
        };
        self.notify_update(
            session,
            acp::SessionUpdate::AgentMessageChunk(acp::ContentChunk::new(acp::ContentBlock::Text(
                acp::TextContent::new(text),
            ))),
        )
        .await;
        Reply::Now(to_value(acp::PromptResponse::new(acp::StopReason::EndTurn)))
    }

    /// Sends one `session/update`; false once the client is gone.
    async fn notify_update(&self, session: &SessionId, update: acp::SessionUpdate) -> bool {
        let notification = acp::SessionNotification::new(session.as_str().to_owned(), update);
        match convert::notification_json(&notification) {
            Ok(value) => self.peer.notify("session/update", &value).await,
            Err(err) => {
                tracing::error!(error = %err, "cannot serialize a session update");
                true
            }
        }
    }

    async fn command_text(
        self: &Arc<Self>,
        session: &SessionId,
        command: FaceCommand,
    ) -> Result<String, RpcError> {
        match command {
            FaceCommand::Help => Ok(commands::help()),
            FaceCommand::Mode(None) => {
                let current = self.runtime.session(session).await.map_err(runtime_error)?;
                let others: Vec<String> = Mode::ALL
                    .iter()
                    .map(|m| format!("`{}` ({})", m.as_str(), m.description()))
                    .collect();
                Ok(format!(
                    "Mode: {} (`{}`). Modes: {}.",
                    current.mode.title(),
                    current.mode.as_str(),
                    others.join("; ")
                ))
            }
            FaceCommand::Mode(Some(value)) => {
                let Some(mode) = Mode::parse(&value) else {
                    return Ok(format!(
                        "`{}` is not a mode; use read_only, supervised or full.",
                        quote(&value)
                    ));
                };
                let updated = self
                    .runtime
                    .set_mode(session, mode)
                    .await
                    .map_err(runtime_error)?;
                self.announce_settings(&updated, true).await;
                Ok(format!("Mode set to {}.", mode.title()))
            }
            FaceCommand::Model(None) => {
                let current = self.runtime.session(session).await.map_err(runtime_error)?;
                let choices: Vec<String> = self
                    .runtime
                    .providers()
                    .choices()
                    .iter()
                    .map(|c| format!("`{}`", c.id()))
                    .collect();
                Ok(format!(
                    "Model: `{}/{}`. Available: {}.",
                    current.provider,
                    current.model,
                    if choices.is_empty() {
                        "none configured".to_owned()
                    } else {
                        choices.join(", ")
                    }
                ))
            }
            FaceCommand::Model(Some(value)) => {
                match self.runtime.set_model(session, &value).await {
                    Ok(updated) => {
                        self.announce_settings(&updated, false).await;
                        Ok(format!(
                            "Model set to `{}/{}`.",
                            updated.provider, updated.model
                        ))
                    }
                    Err(RuntimeError::UnknownModel(model, available)) => Ok(format!(
                        "`{}` is not a configured model; available: {available}.",
                        quote(&model)
                    )),
                    Err(err) => Err(runtime_error(err)),
                }
            }
            FaceCommand::Runs => {
                const SHOWN: usize = 10;
                let runs = self.runtime.runs(session).await.map_err(runtime_error)?;
                if runs.is_empty() {
                    return Ok("No runs in this session yet.".to_owned());
                }
                let mut text = format!(
                    "Last {} of {} run(s), newest first:\n",
                    runs.len().min(SHOWN),
                    runs.len()
                );
                for run in runs.iter().rev().take(SHOWN) {
                    text.push_str(&format!("- {}\n", convert::run_line(run)));
                }
                Ok(text)
            }
        }
    }

    /// Tells the client the session's mode or model changed on the agent's side.
    async fn announce_settings(&self, session: &Session, mode_changed: bool) {
        if mode_changed {
            self.notify_update(
                &session.id,
                acp::SessionUpdate::CurrentModeUpdate(acp::CurrentModeUpdate::new(
                    session.mode.as_str().to_owned(),
                )),
            )
            .await;
        }
        self.notify_update(
            &session.id,
            acp::SessionUpdate::ConfigOptionUpdate(acp::ConfigOptionUpdate::new(
                convert::config_options(session, self.runtime.providers()),
            )),
        )
        .await;
    }

    async fn set_config_option(&self, raw: Option<Box<RawValue>>) -> Result<Value, RpcError> {
        let request: acp::SetSessionConfigOptionRequest = params(raw)?;
        let id = self.attached_session(&request.session_id)?;
        let value = match &request.value {
            acp::SessionConfigOptionValue::ValueId { value } => value.0.to_string(),
            _ => {
                return Err(invalid_params(format!(
                    "`value` of config option {} must be a value id",
                    quoted(&request.config_id.0)
                )));
            }
        };
        let session = match request.config_id.0.as_ref() {
            convert::MODE_OPTION => {
                let mode = Mode::parse(&value).ok_or_else(|| {
                    invalid_params(format!(
                        "`value` {} is not a mode; expected read_only, supervised or full",
                        quoted(&value)
                    ))
                })?;
                self.runtime
                    .set_mode(&id, mode)
                    .await
                    .map_err(runtime_error)?
            }
            convert::MODEL_OPTION => self
                .runtime
                .set_model(&id, &value)
                .await
                .map_err(runtime_error)?,
            other => {
                return Err(invalid_params(format!(
                    "`configId` {} is not a config option; expected \"model\" or \"mode\"",
                    quoted(other)
                )));
            }
        };
        to_value(acp::SetSessionConfigOptionResponse::new(
            convert::config_options(&session, self.runtime.providers()),
        ))
    }

    async fn set_mode(&self, raw: Option<Box<RawValue>>) -> Result<Value, RpcError> {
        let request: acp::SetSessionModeRequest = params(raw)?;
        let id = self.attached_session(&request.session_id)?;
        let value = request.mode_id.0.to_string();
        let mode = Mode::parse(&value).ok_or_else(|| {
            invalid_params(format!(
                "`modeId` {} is not a mode; expected read_only, supervised or full",
                quoted(&value)
            ))
        })?;
        self.runtime
            .set_mode(&id, mode)
            .await
            .map_err(runtime_error)?;
        to_value(acp::SetSessionModeResponse::new())
    }

    async fn runs_list(&self, raw: Option<Box<RawValue>>) -> Result<Value, RpcError> {
        let request: RunsListParams = params(raw)?;
        let runs = self
            .runtime
            .runs(&SessionId::from_string(request.session_id))
            .await
            .map_err(runtime_error)?;
        Ok(json!({ "runs": runs.iter().map(convert::run_json).collect::<Vec<_>>() }))
    }

    async fn runs_get(&self, raw: Option<Box<RawValue>>) -> Result<Value, RpcError> {
        let request: RunParams = params(raw)?;
        let run = self
            .runtime
            .run(&RunId::from_string(request.run_id))
            .await
            .map_err(runtime_error)?;
        Ok(convert::run_json(&run))
    }

    async fn grants_list(&self, raw: Option<Box<RawValue>>) -> Result<Value, RpcError> {
        let request: RunsListParams = params(raw)?;
        let grants = self
            .runtime
            .grants(&SessionId::from_string(request.session_id))
            .await
            .map_err(runtime_error)?;
        Ok(json!({ "grants": grants.iter().map(|g| json!({
            "tool": g.tool,
            "scope": g.scope,
            "decision": if g.allow { "allow_always" } else { "reject_always" },
        })).collect::<Vec<_>>() }))
    }

    async fn runs_tape(&self, raw: Option<Box<RawValue>>) -> Result<Value, RpcError> {
        let request: RunParams = params(raw)?;
        let events = self
            .runtime
            .tape(&RunId::from_string(request.run_id), request.from_seq)
            .await
            .map_err(runtime_error)?;
        Ok(json!({ "events": to_value(&events)? }))
    }

    /// Sends a session's events to the client and answers prompts when their runs end.
    async fn forward(self: Arc<Self>, session: SessionId, mut subscription: Subscription) {
        let mut live = convert::LiveUpdates::default();
        while let Some(record) = subscription.next().await {
            match &record.event {
                Event::ApprovalRequested { approval_id, .. } => {
                    self.ask_permission(&session, &record.run_id, approval_id, &record.event);
                }
                Event::ApprovalDecided { approval_id, .. } => {
                    let pending = lock(&self.permissions).remove(approval_id);
                    if let Some(pending) = pending {
                        pending.cancel.cancel();
                        // The withdrawal reaches the client before what follows
                        // the decision (the prompt's response among it), not
                        // whenever the requesting task gets to run.
                        let _ = pending.over.await;
                    }
                }
                _ => {}
            }
            let own = lock(&self.prompts).contains_key(&record.run_id);
            for update in live.updates(&record.event, own) {
                if !self.notify_update(&session, update).await {
                    return;
                }
            }
            if let Some(outcome) = RunOutcome::from_event(&record.event) {
                let result = prompt_result(&record.run_id, &outcome);
                let waiting = lock(&self.prompts).remove(&record.run_id);
                if let Some(id) = waiting {
                    self.peer.respond(&id, result).await;
                }
            }
        }
    }

    /// Asks the client about an approval and passes its answer to the runtime.
    /// Runs beside the forwarder, so events keep flowing while a person decides.
    fn ask_permission(
        self: &Arc<Self>,
        session: &SessionId,
        run: &RunId,
        approval_id: &str,
        event: &Event,
    ) {
        let Some(request) = convert::permission_request(session.as_str(), event) else {
            return;
        };
        let token = CancellationToken::new();
        let (over, pending_over) = tokio::sync::oneshot::channel();
        lock(&self.permissions).insert(
            approval_id.to_owned(),
            PendingPermission {
                cancel: token.clone(),
                over: pending_over,
            },
        );
        let conn = self.clone();
        let session = session.clone();
        let run = run.clone();
        let approval_id = approval_id.to_owned();
        self.tasks.spawn(async move {
            let answer = conn
                .peer
                .request("session/request_permission", &request, &token)
                .await;
            drop(over);
            lock(&conn.permissions).remove(&approval_id);
            let decision = match answer {
                Ok(value) => match serde_json::from_value::<acp::RequestPermissionResponse>(value) {
                    Ok(response) => match response.outcome {
                        acp::RequestPermissionOutcome::Selected(selected) => {
                            let chosen = ApprovalDecision::parse(&selected.option_id.0)
                                .filter(|d| ApprovalDecision::OPTIONS.contains(d));
                            if chosen.is_none() {
                                tracing::warn!(approval = %approval_id, option = %quote(&selected.option_id.0), "the client chose an option that was not offered; treating it as a rejection");
                            }
                            Some(chosen.unwrap_or(ApprovalDecision::RejectOnce))
                        }
                        // The client cancelled the prompt turn. It should also send
                        // session/cancel; cancelling the run here means a client
                        // that does not cannot leave it waiting forever.
                        _ => {
                            conn.runtime.cancel_run(&session, &run);
                            None
                        }
                    },
                    Err(err) => {
                        tracing::warn!(error = %clip_message(&err.to_string()), "invalid session/request_permission answer; treating it as a rejection");
                        Some(ApprovalDecision::RejectOnce)
                    }
                },
                Err(err) if token.is_cancelled() => {
                    tracing::debug!(approval = %approval_id, error = %err.message, "permission request withdrawn");
                    None
                }
                Err(err) => {
                    tracing::warn!(approval = %approval_id, error = %rpc_error_text(&err), "session/request_permission failed; treating it as a rejection");
                    Some(ApprovalDecision::RejectOnce)
                }
            };
            if let Some(decision) = decision
                && !conn.runtime.answer_approval(&session, &approval_id, decision)
            {
                tracing::debug!(approval = %approval_id, "approval was already settled");
            }
        });
    }

    async fn shutdown(&self) {
        // Ending the per-session queues lets their tasks finish.
        lock(&self.ordered).clear();
        // The runtime cancels every run as soon as its shutdown starts; then
        // our requests still waiting on the client fail, so a client that
        // never answers cannot hold a run, and so the shutdown.
        tokio::join!(self.runtime.shutdown(), async { self.peer.close() });
        self.tasks.close();
        self.tasks.wait().await;
    }
}

/// The MCP servers of a `session/new`, `session/load` or `session/resume`,
/// and their JSON as stored with the session: env and header values redacted.
fn mcp_servers(
    servers: &[acp::McpServer],
) -> Result<(Vec<crate::mcp::ServerSpec>, Value), RpcError> {
    use crate::mcp::{ServerSpec, Transport, sanitize};
    let mut specs = Vec::new();
    let mut stored = Vec::new();
    for (index, server) in servers.iter().enumerate() {
        match server {
            acp::McpServer::Stdio(stdio) => {
                let env: Vec<(String, String)> = stdio
                    .env
                    .iter()
                    .map(|v| (v.name.clone(), v.value.clone()))
                    .collect();
                stored.push(json!({
                    "name": stdio.name,
                    "command": stdio.command,
                    "args": stdio.args,
                    "env": env.iter().map(|(name, _)| json!({"name": name, "value": "[redacted]"})).collect::<Vec<_>>(),
                }));
                specs.push(ServerSpec {
                    name: sanitize(&stdio.name),
                    transport: Transport::Stdio {
                        command: stdio.command.to_string_lossy().into_owned(),
                        args: stdio.args.clone(),
                        env,
                    },
                });
            }
            acp::McpServer::Http(http) => {
                let headers: Vec<(String, String)> = http
                    .headers
                    .iter()
                    .map(|h| (h.name.clone(), h.value.clone()))
                    .collect();
                stored.push(json!({
                    "type": "http",
                    "name": http.name,
                    "url": http.url,
                    "headers": headers.iter().map(|(name, _)| json!({"name": name, "value": "[redacted]"})).collect::<Vec<_>>(),
                }));
                specs.push(ServerSpec {
                    name: sanitize(&http.name),
                    transport: Transport::Http {
                        url: http.url.clone(),
                        headers,
                    },
                });
            }
            acp::McpServer::Sse(sse) => {
                return Err(invalid_params(format!(
                    "`mcpServers[{index}]`: the MCP server {} uses the SSE transport, which Pincer does not support (mcpCapabilities.sse is false); use streamable HTTP (type \"http\")",
                    quoted(&sse.name)
                )));
            }
            #[allow(unreachable_patterns)]
            _ => {
                return Err(invalid_params(format!(
                    "`mcpServers[{index}]`: a transport Pincer does not support; use stdio or http"
                )));
            }
        }
    }
    Ok((specs, Value::Array(stored)))
}

fn prompt_result(run: &RunId, outcome: &RunOutcome) -> Result<Value, RpcError> {
    match outcome {
        RunOutcome::Completed(reason) => {
            to_value(acp::PromptResponse::new(convert::stop_reason(*reason)))
        }
        RunOutcome::Cancelled => to_value(acp::PromptResponse::new(acp::StopReason::Cancelled)),
        RunOutcome::Failed(message) => {
            let mut error =
                RpcError::internal_error().data(json!({ "runId": run.as_str(), "error": message }));
            error.message = message.clone();
            Err(error)
        }
    }
}

fn decode_cursor(cursor: &str) -> Option<(i64, SessionId)> {
    let (at, id) = cursor.split_once(':')?;
    Some((at.parse().ok()?, SessionId::from_string(id.to_owned())))
}
