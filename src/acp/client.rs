//! What Pincer asks of the client: its files (`fs/*`) and terminals (`terminal/*`) behind the core's `ClientFiles` and `ClientTerminal`, each request bounded by a timeout and withdrawn with `$/cancel_request` when its call is cancelled.

use super::*;

/// Reads and writes files through the client's `fs/*` methods.
pub(super) struct ClientFs {
    pub(super) peer: Arc<Peer>,
    pub(super) read: bool,
    pub(super) write: bool,
    /// How long a read or write may wait for the client's answer.
    pub(super) timeout: std::time::Duration,
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
pub(super) struct ClientTerm {
    pub(super) peer: Arc<Peer>,
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
    let value = if value.is_null() { json!({}) } else { value };
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
