//! One MCP server of a session: started on first use, restarted with backoff
//! after it exits, stopped with the session.

use parking_lot::Mutex;
use std::collections::HashMap;
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use rmcp::model::{
    CallToolRequest, CallToolRequestParams, ClientCapabilities, ClientRequest, Implementation,
    InitializeRequestParams, ProgressNotificationParam, ProgressToken, ServerResult,
};
use rmcp::service::{NotificationContext, PeerRequestOptions, RoleClient, RunningService};
use rmcp::{ClientHandler, ServiceError, ServiceExt};
use tokio::io::AsyncBufReadExt;
use tokio_util::sync::CancellationToken;

use super::{
    McpSettings, RemoteTool, ServerSpec, Transport, base_env, content_text, kind_from_hints,
    report_progress, working_dir,
};
use crate::core::tool::{ToolContext, ToolError};

/// First wait before a restart; doubled after each failure up to `MAX_BACKOFF`.
const FIRST_BACKOFF: Duration = Duration::from_secs(1);
const MAX_BACKOFF: Duration = Duration::from_secs(60);
/// A server that ran this long before it exited starts over at `FIRST_BACKOFF`.
const HEALTHY: Duration = Duration::from_secs(60);
/// A call that finds its server waiting to restart waits at most this long.
const MAX_CALL_WAIT: Duration = Duration::from_secs(5);
/// Longest wait to hand a server a notification (`notifications/cancelled`).
const NOTIFY_TIMEOUT: Duration = Duration::from_secs(2);
/// Longest a server may take to list its tools.
const LIST_TIMEOUT: Duration = Duration::from_secs(30);
/// How long a stopped server may take to exit before it is killed.
const STOP_GRACE: Duration = Duration::from_secs(1);
/// Lines of a server's stderr kept to explain a failed start.
const STDERR_TAIL: usize = 5;

pub(super) struct Server {
    spec: ServerSpec,
    settings: Arc<McpSettings>,
    /// Where a stdio server's process starts.
    workspace: PathBuf,
    /// The connection and restart bookkeeping; held across a start, so two
    /// turns or calls never start the same server twice.
    state: tokio::sync::Mutex<State>,
    /// Fired when the session closes: nothing starts any more.
    stopped: CancellationToken,
}

#[derive(Default)]
struct State {
    conn: Option<Connection>,
    /// The tools of the last connection, kept while the server restarts.
    tools: Option<Vec<RemoteTool>>,
    /// Failures (failed starts, exits) since the server was last healthy.
    failures: u32,
    /// No start is attempted before this.
    retry_at: Option<Instant>,
    /// Why the server is not running.
    last_error: Option<String>,
    /// The start failure last told to the user; the same failure again is
    /// not told twice (cleared once the server runs).
    reported: Option<String>,
}

/// A running server.
struct Connection {
    service: RunningService<RoleClient, Handler>,
    /// Fired when the process exits (stdio) or a call finds the transport closed.
    dead: CancellationToken,
    /// How the process ended, once it has.
    exit: Arc<Mutex<Option<String>>>,
    /// Fired to stop the process (and its process group).
    kill: CancellationToken,
    /// Ends once the process is gone; awaited on shutdown.
    reaper: Option<tokio::task::JoinHandle<()>>,
    started: Instant,
    /// Set by `notifications/tools/list_changed`: list the tools again.
    stale: Arc<AtomicBool>,
}

impl Connection {
    fn is_dead(&self) -> bool {
        self.dead.is_cancelled() || self.service.is_closed()
    }

    fn exit_reason(&self) -> String {
        self.exit
            .lock()
            .clone()
            .unwrap_or_else(|| "the connection closed".to_owned())
    }

    /// Closes the connection (a stdio server sees its stdin end), gives the
    /// process a moment to exit by itself, then kills its process group.
    async fn stop(self) {
        let _ = tokio::time::timeout(Duration::from_secs(2), self.service.cancel()).await;
        if self.reaper.is_some() {
            let _ = tokio::time::timeout(STOP_GRACE, self.dead.cancelled()).await;
        }
        self.kill.cancel();
        if let Some(reaper) = self.reaper {
            let _ = reaper.await;
        }
    }
}

/// What a call needs of the running connection, taken so the state lock is
/// not held while the call runs.
struct Live {
    peer: rmcp::Peer<RoleClient>,
    dead: CancellationToken,
    exit: Arc<Mutex<Option<String>>>,
    progress: Arc<Mutex<HashMap<ProgressToken, ToolContext>>>,
}

/// Receives the server's notifications.
#[derive(Clone)]
struct Handler {
    server: String,
    stale: Arc<AtomicBool>,
    /// Calls in flight by progress token, to route their progress.
    progress: Arc<Mutex<HashMap<ProgressToken, ToolContext>>>,
}

impl ClientHandler for Handler {
    fn on_progress(
        &self,
        params: ProgressNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) -> impl Future<Output = ()> + Send + '_ {
        let ctx = self.progress.lock().get(&params.progress_token).cloned();
        if let Some(ctx) = ctx {
            let mut text = match params.total {
                Some(total) => format!("{}/{total}", params.progress),
                None => params.progress.to_string(),
            };
            if let Some(message) = &params.message {
                text.push_str(": ");
                text.push_str(message);
            }
            report_progress(&ctx, &self.server, &text);
        }
        std::future::ready(())
    }

    fn on_tool_list_changed(
        &self,
        _context: NotificationContext<RoleClient>,
    ) -> impl Future<Output = ()> + Send + '_ {
        tracing::debug!(target: "pincer::mcp", server = %self.server, "tool list changed");
        self.stale.store(true, Ordering::SeqCst);
        std::future::ready(())
    }

    fn get_info(&self) -> InitializeRequestParams {
        InitializeRequestParams::new(
            ClientCapabilities::default(),
            Implementation::new("pincer", env!("CARGO_PKG_VERSION")),
        )
    }
}

impl Server {
    pub(super) fn new(spec: ServerSpec, settings: Arc<McpSettings>, workspace: PathBuf) -> Self {
        Self {
            spec,
            settings,
            workspace,
            state: tokio::sync::Mutex::new(State::default()),
            stopped: CancellationToken::new(),
        }
    }

    pub(super) fn name(&self) -> &str {
        &self.spec.name
    }

    pub(super) fn spec(&self) -> &ServerSpec {
        &self.spec
    }

    /// Lists the server's tools again on the next [`Server::tools`], as if it
    /// had said its list changed (its notification may still be on its way).
    pub(super) async fn mark_stale(&self) {
        if let Some(conn) = &self.state.lock().await.conn {
            conn.stale.store(true, Ordering::SeqCst);
        }
    }

    /// The server's tools now, starting it if it is due; and a problem to report
    /// when a start failed just now.
    pub(super) async fn tools(&self) -> (Vec<RemoteTool>, Option<String>) {
        if self.stopped.is_cancelled() {
            return (Vec::new(), None);
        }
        let mut state = self.state.lock().await;
        self.bury(&mut state).await;
        let mut problem = None;
        if state.conn.is_none()
            && state.retry_at.is_none_or(|at| at <= Instant::now())
            && let Err(message) = self.start(&mut state).await
            && state.reported.as_ref() != state.last_error.as_ref()
        {
            state.reported = state.last_error.clone();
            problem = Some(message);
        }
        if let Some(conn) = &state.conn {
            let stale = conn.stale.swap(false, Ordering::SeqCst);
            if stale || state.tools.is_none() {
                match tokio::time::timeout(LIST_TIMEOUT, list_tools(conn)).await {
                    Ok(Ok(tools)) => state.tools = Some(tools),
                    Ok(Err(err)) => {
                        tracing::warn!(target: "pincer::mcp", server = %self.spec.name, error = %err, "cannot list the server's tools");
                        conn.stale.store(true, Ordering::SeqCst);
                    }
                    Err(_) => {
                        tracing::warn!(target: "pincer::mcp", server = %self.spec.name, "the server did not list its tools within {} s", LIST_TIMEOUT.as_secs());
                        conn.stale.store(true, Ordering::SeqCst);
                    }
                }
            }
        }
        (state.tools.clone().unwrap_or_default(), problem)
    }

    /// Calls a tool; the text of its result, or the reason it failed.
    pub(super) async fn call(
        &self,
        tool: &str,
        arguments: serde_json::Map<String, serde_json::Value>,
        ctx: &ToolContext,
    ) -> Result<String, ToolError> {
        let Live {
            peer,
            dead,
            exit,
            progress,
        } = self.connection_for_call(ctx).await?;
        let name = &self.spec.name;
        let request = ClientRequest::CallToolRequest(CallToolRequest::new(
            CallToolRequestParams::new(tool.to_owned()).with_arguments(arguments),
        ));
        let handle = peer
            .send_cancellable_request(request, PeerRequestOptions::no_options())
            .await;
        let mut handle = match handle {
            Ok(handle) => handle,
            Err(err @ (ServiceError::TransportClosed | ServiceError::TransportSend(_))) => {
                return Err(self.died(&dead, &exit, Some(&err)).await);
            }
            Err(err) => return Err(self.call_failed(&err)),
        };
        progress
            .lock()
            .insert(handle.progress_token.clone(), ctx.clone());
        enum Ended {
            Answer(
                Box<
                    Result<
                        Result<ServerResult, ServiceError>,
                        tokio::sync::oneshot::error::RecvError,
                    >,
                >,
            ),
            Cancelled,
            Died,
            TimedOut,
        }
        let ended = tokio::select! {
            biased;
            _ = ctx.cancel.cancelled() => Ended::Cancelled,
            answer = &mut handle.rx => Ended::Answer(Box::new(answer)),
            _ = dead.cancelled() => Ended::Died,
            _ = tokio::time::sleep(self.settings.call_timeout) => Ended::TimedOut,
        };
        progress.lock().remove(&handle.progress_token);
        let answer = match ended {
            Ended::Answer(answer) => answer,
            Ended::Cancelled => {
                // Tells the server with `notifications/cancelled`; a server
                // that reads nothing any more is not waited for.
                let _ = tokio::time::timeout(
                    NOTIFY_TIMEOUT,
                    handle.cancel(Some("cancelled by the user".to_owned())),
                )
                .await;
                return Err(ToolError::Cancelled);
            }
            Ended::TimedOut => {
                let _ = tokio::time::timeout(
                    NOTIFY_TIMEOUT,
                    handle.cancel(Some("timed out".to_owned())),
                )
                .await;
                return Err(ToolError::Failed(format!(
                    "MCP server `{name}` did not answer within {} s",
                    self.settings.call_timeout.as_secs()
                )));
            }
            Ended::Died => return Err(self.died(&dead, &exit, None).await),
        };
        let result = match *answer {
            Ok(Ok(result)) => result,
            Ok(Err(err @ (ServiceError::TransportClosed | ServiceError::TransportSend(_)))) => {
                return Err(self.died(&dead, &exit, Some(&err)).await);
            }
            Err(_) => return Err(self.died(&dead, &exit, None).await),
            Ok(Err(err)) => return Err(self.call_failed(&err)),
        };
        let ServerResult::CallToolResult(result) = result else {
            return Err(ToolError::Failed(format!(
                "MCP server `{name}` answered the call with something other than a tool result \
                 (input requests and tasks are not supported)"
            )));
        };
        let blocks: Vec<serde_json::Value> = result
            .content
            .iter()
            .filter_map(|block| serde_json::to_value(block).ok())
            .collect();
        let text = content_text(&blocks, result.structured_content.as_ref());
        if result.is_error == Some(true) {
            return Err(ToolError::Failed(text));
        }
        Ok(text)
    }

    /// The error of a call whose server went away; marks the connection dead
    /// (a stdio server's once its process has been seen to end, so the error
    /// can say how it ended).
    async fn died(
        &self,
        dead: &CancellationToken,
        exit: &Mutex<Option<String>>,
        err: Option<&ServiceError>,
    ) -> ToolError {
        let name = &self.spec.name;
        match &self.spec.transport {
            Transport::Stdio { .. } => {
                let _ = tokio::time::timeout(Duration::from_secs(2), dead.cancelled()).await;
                dead.cancel();
                ToolError::Failed(format!("MCP server `{name}` exited: {}", exit_text(exit)))
            }
            Transport::Http { .. } => {
                dead.cancel();
                ToolError::Failed(match err {
                    Some(err) => format!("MCP server `{name}` closed the connection: {err}"),
                    None => format!("MCP server `{name}` closed the connection"),
                })
            }
        }
    }

    fn call_failed(&self, err: &ServiceError) -> ToolError {
        let name = &self.spec.name;
        if let ServiceError::McpError(error) = err {
            ToolError::Failed(format!(
                "MCP server `{name}` refused the call: {}",
                error.message
            ))
        } else {
            ToolError::Failed(format!("MCP server `{name}`: {err}"))
        }
    }

    /// A running connection for a call: starts the server if needed, waiting a
    /// little for a restart that is due soon.
    async fn connection_for_call(&self, ctx: &ToolContext) -> Result<Live, ToolError> {
        let name = &self.spec.name;
        loop {
            if self.stopped.is_cancelled() {
                return Err(ToolError::Failed(format!(
                    "MCP server `{name}` was stopped with the session"
                )));
            }
            let mut state = self.state.lock().await;
            self.bury(&mut state).await;
            if let Some(conn) = &state.conn {
                return Ok(Live {
                    peer: conn.service.peer().clone(),
                    dead: conn.dead.clone(),
                    exit: conn.exit.clone(),
                    progress: conn.service.service().progress.clone(),
                });
            }
            let wait = state
                .retry_at
                .map(|at| at.saturating_duration_since(Instant::now()))
                .unwrap_or_default();
            if wait.is_zero() {
                tokio::select! {
                    biased;
                    _ = ctx.cancel.cancelled() => return Err(ToolError::Cancelled),
                    started = self.start(&mut state) => started.map_err(ToolError::Failed)?,
                }
                continue;
            }
            if wait > MAX_CALL_WAIT {
                return Err(ToolError::Failed(format!(
                    "MCP server `{name}` is not running ({}); the next start is in {} s",
                    state.last_error.as_deref().unwrap_or("it failed"),
                    wait.as_secs().max(1)
                )));
            }
            drop(state);
            tokio::select! {
                biased;
                _ = ctx.cancel.cancelled() => return Err(ToolError::Cancelled),
                _ = tokio::time::sleep(wait) => {}
            }
        }
    }

    /// Clears away a connection whose server exited, and schedules the restart.
    async fn bury(&self, state: &mut State) {
        if !state.conn.as_ref().is_some_and(Connection::is_dead) {
            return;
        }
        let Some(conn) = state.conn.take() else {
            return;
        };
        let reason = conn.exit_reason();
        if conn.started.elapsed() >= HEALTHY {
            state.failures = 0;
        }
        tracing::warn!(target: "pincer::mcp", server = %self.spec.name, "MCP server exited: {reason}");
        self.failed(state, format!("it exited: {reason}"));
        conn.stop().await;
    }

    fn failed(&self, state: &mut State, reason: String) {
        state.failures = state.failures.saturating_add(1);
        state.retry_at = Some(Instant::now() + backoff(state.failures));
        state.last_error = Some(reason);
    }

    /// Starts the server; on failure records it (with backoff) and returns the
    /// message to show the user.
    async fn start(&self, state: &mut State) -> Result<(), String> {
        let name = &self.spec.name;
        let started = tokio::select! {
            biased;
            _ = self.stopped.cancelled() => Err("the session closed".to_owned()),
            started = tokio::time::timeout(self.settings.start_timeout, self.connect()) => {
                started.unwrap_or_else(|_| Err(format!(
                    "it did not finish starting within {} s",
                    self.settings.start_timeout.as_secs()
                )))
            }
        };
        match started {
            Ok(conn) => {
                tracing::info!(target: "pincer::mcp", server = %name, "MCP server started");
                state.conn = Some(conn);
                state.tools = None;
                state.retry_at = None;
                state.last_error = None;
                state.reported = None;
                Ok(())
            }
            Err(reason) => {
                self.failed(state, reason.clone());
                let wait = state
                    .retry_at
                    .map(|at| at.saturating_duration_since(Instant::now()))
                    .unwrap_or_default();
                let message = format!(
                    "MCP server `{name}` failed to start: {reason}; its tools are unavailable \
                     (next attempt in {} s)",
                    wait.as_secs().max(1)
                );
                tracing::warn!(target: "pincer::mcp", server = %name, "{message}");
                Err(message)
            }
        }
    }

    async fn connect(&self) -> Result<Connection, String> {
        let stale = Arc::new(AtomicBool::new(false));
        let handler = Handler {
            server: self.spec.name.clone(),
            stale: stale.clone(),
            progress: Arc::default(),
        };
        match &self.spec.transport {
            Transport::Stdio { command, args, env } => {
                self.connect_stdio(handler, stale, command, args, env).await
            }
            Transport::Http { url, headers } => {
                let transport = http_transport(url, headers)?;
                let service = handler
                    .serve(transport)
                    .await
                    .map_err(|err| format!("{err}"))?;
                Ok(Connection {
                    service,
                    dead: CancellationToken::new(),
                    exit: Arc::default(),
                    kill: CancellationToken::new(),
                    reaper: None,
                    started: Instant::now(),
                    stale,
                })
            }
        }
    }

    async fn connect_stdio(
        &self,
        handler: Handler,
        stale: Arc<AtomicBool>,
        command: &str,
        args: &[String],
        env: &[(String, String)],
    ) -> Result<Connection, String> {
        let name = self.spec.name.clone();
        let mut cmd = tokio::process::Command::new(command);
        cmd.args(args)
            .env_clear()
            .envs(base_env())
            .envs(env.iter().map(|(k, v)| (k, v)))
            // Never the protocol pipes: stdin and stdout are the transport,
            // stderr goes to the log.
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .process_group(0);
        if let Some(dir) = working_dir(&self.workspace) {
            cmd.current_dir(dir);
        }
        let mut child = cmd
            .spawn()
            .map_err(|err| format!("cannot run `{command}`: {err}"))?;
        let pid = child.id();
        let (Some(stdin), Some(stdout), Some(stderr)) =
            (child.stdin.take(), child.stdout.take(), child.stderr.take())
        else {
            return Err("its pipes could not be opened".to_owned());
        };
        let tail: Arc<Mutex<Vec<String>>> = Arc::default();
        let log_tail = tail.clone();
        let log_name = name.clone();
        let logger = tokio::spawn(async move {
            let mut lines = tokio::io::BufReader::new(stderr).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                tracing::info!(target: "pincer::mcp", server = %log_name, "stderr: {line}");
                let mut tail = log_tail.lock();
                if tail.len() == STDERR_TAIL {
                    tail.remove(0);
                }
                tail.push(line);
            }
        });
        let dead = CancellationToken::new();
        let kill = CancellationToken::new();
        let exit: Arc<Mutex<Option<String>>> = Arc::default();
        let reaper = {
            let (dead, kill, exit) = (dead.clone(), kill.clone(), exit.clone());
            tokio::spawn(async move {
                let status = tokio::select! {
                    status = child.wait() => status,
                    _ = kill.cancelled() => {
                        // The server's whole group: helpers it started do
                        // not outlive it.
                        if let Some(pid) = pid {
                            crate::process::kill_group(pid);
                        }
                        let _ = child.kill().await;
                        child.wait().await
                    }
                };
                let text = match status {
                    Ok(status) => status.to_string(),
                    Err(err) => format!("cannot wait for the process: {err}"),
                };
                *exit.lock() = Some(text);
                // Whatever the server still wrote to stderr is logged before
                // anyone reads why it ended.
                let _ = tokio::time::timeout(Duration::from_secs(1), logger).await;
                dead.cancel();
            })
        };
        // If this start is abandoned (its run cancelled), the process is killed.
        let abandoned = kill.clone().drop_guard();
        let served = tokio::select! {
            served = handler.serve((stdout, stdin)) => served.map_err(|err| err.to_string()),
            _ = dead.cancelled() => Err("it exited during the handshake".to_owned()),
        };
        abandoned.disarm();
        match served {
            Ok(service) => Ok(Connection {
                service,
                dead,
                exit,
                kill,
                reaper: Some(reaper),
                started: Instant::now(),
                stale,
            }),
            Err(reason) => {
                // A process that quit by itself explains more than the
                // protocol error its quitting caused.
                let exited = tokio::time::timeout(Duration::from_secs(2), dead.cancelled())
                    .await
                    .is_ok();
                kill.cancel();
                let _ = reaper.await;
                let status = exit.lock().clone().unwrap_or_default();
                let mut message = if exited {
                    format!("it exited during the handshake ({status})")
                } else {
                    reason
                };
                let tail = tail.lock().clone();
                if let Some(last) = tail.last() {
                    message.push_str(&format!("; its last output: {last}"));
                }
                Err(message)
            }
        }
    }

    /// Stops the server for good.
    pub(super) async fn shutdown(&self) {
        self.stopped.cancel();
        let conn = self.state.lock().await.conn.take();
        if let Some(conn) = conn {
            conn.stop().await;
            tracing::debug!(target: "pincer::mcp", server = %self.spec.name, "MCP server stopped");
        }
    }
}

async fn list_tools(conn: &Connection) -> Result<Vec<RemoteTool>, ServiceError> {
    let peer = conn.service.peer();
    let offers_tools = peer
        .peer_info()
        .is_none_or(|info| info.capabilities.tools.is_some());
    if !offers_tools {
        return Ok(Vec::new());
    }
    let tools = peer.list_all_tools().await?;
    Ok(tools
        .into_iter()
        .map(|tool| {
            let hints = tool.annotations.as_ref();
            RemoteTool {
                name: tool.name.to_string(),
                description: tool.description.as_deref().unwrap_or_default().to_owned(),
                input_schema: serde_json::Value::Object((*tool.input_schema).clone()),
                kind: kind_from_hints(
                    hints.and_then(|h| h.read_only_hint),
                    hints.and_then(|h| h.destructive_hint),
                ),
            }
        })
        .collect())
}

fn http_transport(
    url: &str,
    headers: &[(String, String)],
) -> Result<rmcp::transport::StreamableHttpClientTransport<reqwest::Client>, String> {
    use reqwest::header::{HeaderName, HeaderValue};
    use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
    let mut custom = HashMap::new();
    for (name, value) in headers {
        let header = HeaderName::from_bytes(name.as_bytes())
            .map_err(|_| format!("`{name}` is not a valid header name"))?;
        let value = HeaderValue::from_str(value)
            .map_err(|_| format!("the value of header `{name}` is not valid"))?;
        custom.insert(header, value);
    }
    let client = crate::net::client_builder()
        .connect_timeout(Duration::from_secs(30))
        // Headers carry credentials: never follow a redirect elsewhere.
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .map_err(|err| format!("cannot set up HTTP: {err}"))?;
    let config =
        StreamableHttpClientTransportConfig::with_uri(url.to_owned()).custom_headers(custom);
    Ok(rmcp::transport::StreamableHttpClientTransport::with_client(
        client, config,
    ))
}

/// The wait before the next start after `failures` failures in a row: 1 s,
/// doubling, at most `MAX_BACKOFF`.
fn backoff(failures: u32) -> Duration {
    FIRST_BACKOFF
        .saturating_mul(2u32.saturating_pow(failures.saturating_sub(1)))
        .min(MAX_BACKOFF)
}

fn exit_text(exit: &Mutex<Option<String>>) -> String {
    exit.lock()
        .clone()
        .unwrap_or_else(|| "the connection closed".to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_from_one_second_up_to_a_minute() {
        let waits: Vec<u64> = (1..=9).map(|n| backoff(n).as_secs()).collect();
        assert_eq!(waits, vec![1, 2, 4, 8, 16, 32, 60, 60, 60]);
        assert_eq!(backoff(u32::MAX), MAX_BACKOFF);
    }
}
