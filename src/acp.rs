//! The ACP face: `pincer acp` serves the Agent Client Protocol (v1) over stdio.
//!
//! This module is the only one that knows ACP types. It converts requests into
//! runtime calls and the runtime's events into `session/update` notifications.

mod auth;
mod client;
mod commands;
mod convert;
mod extensions;
mod handlers;
pub mod launch;
pub mod peer;
mod questions;

pub use launch::run;

use parking_lot::Mutex;
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;

use agent_client_protocol_schema::v1 as acp;
use agent_client_protocol_schema::v1::Error as RpcError;
use serde::de::DeserializeOwned;
use serde_json::value::RawValue;
use serde_json::{Value, json};
use tokio::io::AsyncBufRead;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::core::approval::ApprovalDecision;
use crate::core::event::{Event, Exchange, RunState, StopReason};
use crate::core::ids::{RunId, SessionId};
use crate::core::journal::{SessionCursor, SessionQuery};
use crate::core::quote::{clip_message, quote};
use crate::core::run::RunOutcome;
use crate::core::runtime::{NewSession, Runtime, RuntimeError, Subscription};
use crate::core::session::{Mode, Origin, PromptSettings, Session};
use crate::core::skills::Invocable;
use crate::core::tool::{
    ClientFiles, ClientTerminal, Progress, ProgressUpdate, TerminalCommand, TerminalExit,
};
use crate::core::usage::Usage;
use crate::stdout::LineSender;
use agent_client_protocol_schema::v1::RequestId;
use client::{ClientFs, ClientTerm};
use commands::{Answer, FaceCommand, SlashCommand};
use handlers::prompt_result;
use peer::{Id, Incoming, Line, LineReader, Peer};

/// The extension methods Pincer serves, advertised in `initialize`.
pub const EXTENSION_METHODS: [&str; 5] = [
    "_pincer/runs/list",
    "_pincer/runs/get",
    "_pincer/runs/tape",
    "_pincer/grants/list",
    "_pincer/context",
];

/// Logins behind `authenticate` and `logout`: the launcher reads the
/// configuration and the stored logins again; the face never does.
pub trait Accounts: Send + Sync {
    /// The providers the configuration and the stored logins give now.
    fn providers(&self) -> Result<crate::core::provider::Providers, String>;
    /// Removes every stored login; the names removed.
    fn logout(&self) -> Result<Vec<String>, String>;
}

/// Settings of the ACP face.
#[derive(Clone)]
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
    /// `authenticate` and `logout` through the stored logins; `None`: the
    /// providers stay as they are and `logout` is not offered.
    pub accounts: Option<Arc<dyn Accounts>>,
    /// Whether the connection is the runtime's only face, so its end shuts
    /// the runtime down (`pincer acp` on stdio). Otherwise (a WebSocket of
    /// `pincer serve`) its end cancels only the runs its prompts started.
    pub owns_runtime: bool,
}

impl Default for AcpOptions {
    fn default() -> Self {
        Self {
            max_line_bytes: 16 * 1024 * 1024,
            meta: Value::Null,
            mcp: None,
            client_timeout: std::time::Duration::from_secs(60),
            max_inflight: 64,
            accounts: None,
            owns_runtime: true,
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
        elicitation_form: Mutex::new(false),
        view: Mutex::new(convert::ClientView::default()),
        terminal_auth: Mutex::new(false),
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
                conn.inflight.lock().insert(id.key().clone(), token.clone());
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

/// The task forwarding an attached session's events, and its stop: a
/// forwarder replaced (`session/load` or `session/resume` of a session this
/// client has open) stops between two events, never within one, so an
/// answer it began is sent whole.
struct Attached {
    forward: tokio::task::JoinHandle<()>,
    stop: CancellationToken,
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
    attached: Mutex<HashMap<SessionId, Attached>>,
    /// Prompt requests waiting for their run to end: the request id and the
    /// run's session, by run.
    prompts: Mutex<HashMap<RunId, (Id, SessionId)>>,
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
    /// Also our `elicitation/create` and question requests, by question id.
    permissions: Mutex<HashMap<String, PendingPermission>>,
    /// The client runs terminal logins (`clientCapabilities.auth.terminal`,
    /// or the Registry's `_meta["terminal-auth"]` marker).
    terminal_auth: Mutex<bool>,
    /// The client takes form elicitation (`clientCapabilities.elicitation.form`):
    /// questions are asked as forms.
    elicitation_form: Mutex<bool>,
    /// The optional updates the client advertised (`notice`, compaction).
    view: Mutex<convert::ClientView>,
}

/// A `session/request_permission` request in flight.
struct PendingPermission {
    cancel: CancellationToken,
    /// Resolves once the request is over: answered, or withdrawn with
    /// `$/cancel_request`.
    over: tokio::sync::oneshot::Receiver<()>,
}

fn rpc_error_text(err: &RpcError) -> String {
    clip_message(&match &err.data {
        Some(data) => format!("{} ({data})", err.message),
        None => err.message.clone(),
    })
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
        // Only a session made or forked names a workspace, by its `cwd`.
        RuntimeError::NoWorkspace { .. } => {
            invalid_params(format!("`cwd`: {}", clip_message(&err.to_string())))
        }
        RuntimeError::RelativeWorkspace(_)
        | RuntimeError::UnknownModel(..)
        | RuntimeError::UnknownThoughtLevel(..)
        | RuntimeError::ForkPastEnd { .. }
        | RuntimeError::ImagesNotAccepted { .. } => invalid_params(clip_message(&err.to_string())),
        // The face names parts `prompt[N]`, as its own checks do.
        RuntimeError::InvalidContent { index, message } => {
            invalid_params(format!("prompt[{index}]: {}", clip_message(&message)))
        }
        RuntimeError::ShuttingDown
        | RuntimeError::Journal(_)
        | RuntimeError::Busy { .. }
        | RuntimeError::Lease(_) => {
            let text = clip_message(&err.to_string());
            tracing::error!(error = %text, "request failed");
            RpcError::internal_error().data(text)
        }
    }
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
        self.inflight.lock().remove(id.key());
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
        self.ordered.lock().contains_key(key)
    }

    /// Queues a request behind the earlier ones about the same session.
    fn enqueue(self: &Arc<Self>, key: String, job: Job) {
        let mut ordered = self.ordered.lock();
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
                    let mut ordered = conn.ordered.lock();
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
                    if let Some(token) = self.inflight.lock().get(&target) {
                        token.cancel();
                    }
                    // A prompt's request is no longer in flight once its run is queued;
                    // cancel that run instead.
                    let run = self
                        .prompts
                        .lock()
                        .iter()
                        .find_map(|(run, (id, _))| (*id.key() == target).then(|| run.clone()));
                    if let Some(run) = run {
                        let sessions: Vec<SessionId> =
                            self.attached.lock().keys().cloned().collect();
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
            "authenticate" => self.authenticate(raw),
            "logout" if self.options.accounts.is_some() => self.logout(raw),
            "session/new" => return self.new_session(id, raw).await,
            "session/load" => return self.load_session(id, raw, cancel).await,
            "session/resume" => return self.resume_session(id, raw).await,
            "session/list" => self.list_sessions(raw).await,
            "session/close" => self.close_session(raw).await,
            "session/delete" => self.delete_session(raw).await,
            "session/fork" => return self.fork_session(id, raw).await,
            "session/prompt" => return self.prompt(id, raw, cancel).await,
            "session/set_config_option" => self.set_config_option(raw).await,
            "session/set_mode" => self.set_mode(raw).await,
            "session/set_model" => self.set_model_alias(raw).await,
            "_session/steering" => self.steer(raw).await,
            "_pincer/runs/list" => self.runs_list(raw).await,
            "_pincer/runs/get" => self.runs_get(raw).await,
            "_pincer/runs/tape" => self.runs_tape(raw).await,
            "_pincer/grants/list" => self.grants_list(raw).await,
            "_pincer/context" => self.context(raw).await,
            other => {
                Err(RpcError::method_not_found().data(format!("unknown method {}", quoted(other))))
            }
        };
        Reply::Now(result)
    }

    /// Sends a session's events to the client and answers prompts when
    /// their runs end, until the session closes or `stop` fires (checked
    /// between events).
    async fn forward(
        self: Arc<Self>,
        session: SessionId,
        mut subscription: Subscription,
        stop: CancellationToken,
        // The skills and commands the client was offered: offered again
        // when a run ends and they changed (one added on disk, say).
        mut advertised: Vec<Invocable>,
    ) {
        let mut live = convert::LiveUpdates::new(*self.view.lock());
        loop {
            let record = tokio::select! {
                biased;
                _ = stop.cancelled() => return,
                record = subscription.next() => record,
            };
            let Some(record) = record else {
                return;
            };
            // Approvals and questions are asked of the client and withdrawn
            // once settled; the rest ask nothing of it: their updates follow.
            match record.event.exchange() {
                Some(Exchange::ApprovalAsked { approval_id, .. }) => {
                    self.ask_permission(&session, &record.run_id, approval_id, &record.event);
                }
                Some(Exchange::QuestionAsked { .. }) => {
                    self.ask_question(&session, &record.run_id, &record.event)
                }
                Some(
                    settled
                    @ (Exchange::ApprovalDecided { .. } | Exchange::QuestionAnswered { .. }),
                ) => {
                    let pending = settled
                        .settled()
                        .and_then(|id| self.permissions.lock().remove(id));
                    if let Some(pending) = pending {
                        pending.cancel.cancel();
                        // The withdrawal reaches the client before what follows
                        // the decision (the prompt's response among it), not
                        // whenever the requesting task gets to run.
                        let _ = pending.over.await;
                    }
                }
                None => {}
            }
            let own = self.prompts.lock().contains_key(&record.run_id);
            for update in live.updates(&record.event, own) {
                if !self.notify_update(&session, update).await {
                    return;
                }
            }
            if let Some(outcome) = RunOutcome::from_event(&record.event) {
                let usage = if let Event::State { usage, .. } = &record.event {
                    usage.as_ref()
                } else {
                    None
                };
                let result = prompt_result(&record.run_id, &outcome, usage);
                let waiting = self.prompts.lock().remove(&record.run_id);
                if let Some((id, _)) = waiting {
                    self.peer.respond(&id, result).await;
                }
                let now = self.invocable(&session).await;
                if now != advertised {
                    advertised = now;
                    let update = commands::available(&advertised);
                    if !self.notify_update(&session, update).await {
                        return;
                    }
                }
            }
        }
    }

    /// Answers the prompts of `session` whose runs ended, as the journal has
    /// them: a forwarder that `attach` replaced stopped before the events it
    /// had not reached, and the new one's subscription began after them.
    async fn answer_ended(&self, session: &SessionId) {
        let runs: Vec<RunId> = self
            .prompts
            .lock()
            .iter()
            .filter(|(_, (_, of))| of == session)
            .map(|(run, _)| run.clone())
            .collect();
        for run in runs {
            let Ok(info) = self.runtime.run(&run).await else {
                continue;
            };
            let outcome = match info.state {
                RunState::Completed => {
                    RunOutcome::Completed(info.stop_reason.unwrap_or(StopReason::EndTurn))
                }
                RunState::Cancelled => RunOutcome::Cancelled,
                RunState::Failed => {
                    RunOutcome::Failed(info.error.unwrap_or_else(|| "the run failed".to_owned()))
                }
                RunState::Queued | RunState::Running | RunState::Waiting => continue,
            };
            let usage = (info.usage != Usage::default()).then_some(&info.usage);
            let waiting = self.prompts.lock().remove(&run);
            if let Some((id, _)) = waiting {
                self.peer
                    .respond(&id, prompt_result(&run, &outcome, usage))
                    .await;
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
        self.permissions.lock().insert(
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
            conn.permissions.lock().remove(&approval_id);
            let decision = match answer {
                Ok(value) => match serde_json::from_value::<acp::RequestPermissionResponse>(value) {
                    Ok(response) => {
                        if let acp::RequestPermissionOutcome::Selected(selected) = response.outcome
                        {
                            let chosen = ApprovalDecision::parse(&selected.option_id.0)
                                .filter(|d| ApprovalDecision::OPTIONS.contains(d));
                            if chosen.is_none() {
                                tracing::warn!(approval = %approval_id, option = %quote(&selected.option_id.0), "the client chose an option that was not offered; treating it as a rejection");
                            }
                            Some(chosen.unwrap_or(ApprovalDecision::RejectOnce))
                        } else {
                            // The client cancelled the prompt turn. It should also send
                            // session/cancel; cancelling the run here means a client
                            // that does not cannot leave it waiting forever.
                            conn.runtime.cancel_run(&session, &run);
                            None
                        }
                    }
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
            if let Some(decision) = decision {
                match conn
                    .runtime
                    .answer_approval_of(&session, &run, &approval_id, decision)
                    .await
                {
                    Ok(true) => {}
                    Ok(false) => {
                        tracing::debug!(approval = %approval_id, "approval was already settled");
                    }
                    Err(err) => {
                        tracing::warn!(approval = %approval_id, error = %err, "cannot pass the answer on");
                    }
                }
            }
        });
    }

    async fn shutdown(&self) {
        // Ending the per-session queues lets their tasks finish.
        self.ordered.lock().clear();
        if self.options.owns_runtime {
            // The runtime cancels every run as soon as its shutdown starts;
            // then our requests still waiting on the client fail, so a
            // client that never answers cannot hold a run, and so the
            // shutdown.
            tokio::join!(self.runtime.shutdown(), async { self.peer.close() });
        } else {
            self.peer.close();
            self.cancel_own_runs().await;
            // Nobody is left to forward the sessions' events to.
            for (_, attached) in self.attached.lock().drain() {
                attached.forward.abort();
            }
        }
        self.tasks.close();
        self.tasks.wait().await;
    }

    /// Cancels the runs this connection's prompts started and waits (at
    /// most 10 s) until each has recorded its end; the runtime and its
    /// other faces go on.
    async fn cancel_own_runs(&self) {
        let runs: Vec<RunId> = self.prompts.lock().keys().cloned().collect();
        if runs.is_empty() {
            return;
        }
        let sessions: Vec<SessionId> = self.attached.lock().keys().cloned().collect();
        for run in &runs {
            for session in &sessions {
                if self.runtime.cancel_run(session, run) {
                    break;
                }
            }
        }
        let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(10);
        while !self.prompts.lock().is_empty() && tokio::time::Instant::now() < deadline {
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
    }
}
