//! ACP over a WebSocket at `GET /acp` (the WebSocket profile of ACP's
//! draft "Streamable HTTP & WebSocket transport" RFD): each text frame is
//! one JSON-RPC message, each way. The HTTP face only carries the bytes:
//! each socket's lines are served by the ACP face behind [`Connections`]
//! (wired by `pincer serve`: the same code as `pincer acp` on stdio, over
//! this process's runtime, so the same sessions and tape as every other
//! face). The bearer token was checked before.

use futures::future::BoxFuture;

use axum::extract::ws::{Message, WebSocket, WebSocketUpgrade};
use axum::extract::{FromRequestParts, Request, State};
use axum::response::{IntoResponse, Response};
use futures::{SinkExt, StreamExt};
use tokio::io::AsyncWriteExt;
use tokio_util::sync::CancellationToken;

use super::AppState;
use super::error::ApiError;

/// One connection's input: JSON-RPC messages, one per line.
pub type Input = Box<dyn tokio::io::AsyncBufRead + Send + Unpin>;

/// The agent that serves each socket: reads `input` until it ends or
/// `shutdown` fires, writes each message (one line, newline-terminated) to
/// `output`.
pub trait Connections: Send + Sync {
    fn serve(
        &self,
        input: Input,
        output: tokio::sync::mpsc::Sender<Vec<u8>>,
        shutdown: CancellationToken,
    ) -> BoxFuture<'static, std::io::Result<()>>;

    /// The largest message taken, in bytes.
    fn max_message_bytes(&self) -> usize;
}

/// Messages waiting to be written to the socket before the agent waits.
const OUTGOING: usize = 256;
/// Bytes of incoming messages buffered before the socket is read no further.
const INCOMING_BYTES: usize = 256 * 1024;

/// `GET /acp`: a WebSocket handshake (refused naming the header when it is
/// not one), then ACP on the socket.
pub async fn handle(State(state): State<AppState>, request: Request) -> Response {
    let Some(agent) = state.shared.ports.acp.clone() else {
        return ApiError::not_found("ACP over WebSocket is not served by this process")
            .into_response();
    };
    if let Err(err) = super::rpc::check_upgrade(request.headers(), "/acp") {
        return err.into_response();
    }
    let (mut parts, _) = request.into_parts();
    let upgrade = match WebSocketUpgrade::from_request_parts(&mut parts, &state).await {
        Ok(upgrade) => upgrade,
        Err(err) => return ApiError::bad_request(err.body_text()).into_response(),
    };
    let closing = state.shared.closing.clone();
    let limit = agent.max_message_bytes();
    upgrade
        .max_message_size(limit)
        .max_frame_size(limit)
        .on_upgrade(move |socket| serve_socket(socket, agent, closing))
}

/// Serves one client on `socket` until it closes or the server stops.
async fn serve_socket(
    socket: WebSocket,
    agent: std::sync::Arc<dyn Connections>,
    closing: CancellationToken,
) {
    let (mut sink, mut stream) = socket.split();
    let (tx, mut rx) = tokio::sync::mpsc::channel::<Vec<u8>>(OUTGOING);
    let (mut pipe_in, pipe_out) = tokio::io::duplex(INCOMING_BYTES);
    // Frames in: each message one line of the agent's input. JSON has no
    // raw line breaks but between tokens, so a pretty-printed message
    // stays one message with its breaks as spaces.
    let reader = tokio::spawn(async move {
        while let Some(frame) = stream.next().await {
            let bytes = match frame {
                Ok(Message::Text(text)) => text.as_bytes().to_vec(),
                Ok(Message::Binary(bytes)) => bytes.to_vec(),
                Ok(Message::Close(_)) => break,
                Ok(Message::Ping(_) | Message::Pong(_)) => continue,
                Err(err) => {
                    tracing::debug!(error = %err, "ACP WebSocket read failed");
                    break;
                }
            };
            let mut line: Vec<u8> = bytes
                .into_iter()
                .map(|b| if b == b'\n' || b == b'\r' { b' ' } else { b })
                .collect();
            line.push(b'\n');
            if pipe_in.write_all(&line).await.is_err() {
                break;
            }
        }
        // End of input: the agent finishes its work and stops.
        let _ = pipe_in.shutdown().await;
    });
    // Messages out: each line one text frame.
    let writer = tokio::spawn(async move {
        while let Some(mut line) = rx.recv().await {
            if line.last() == Some(&b'\n') {
                line.pop();
            }
            let text = match String::from_utf8(line) {
                Ok(text) => text,
                Err(err) => String::from_utf8_lossy(err.as_bytes()).into_owned(),
            };
            if sink.send(Message::Text(text.into())).await.is_err() {
                break;
            }
        }
        let _ = sink.send(Message::Close(None)).await;
    });
    let input: Input = Box::new(tokio::io::BufReader::new(pipe_out));
    if let Err(err) = agent.serve(input, tx, closing).await {
        tracing::warn!(error = %err, "ACP over WebSocket ended with an error");
    }
    reader.abort();
    // The writer ends once the connection's last sender is gone; a task
    // that still holds one cannot keep the socket open.
    if tokio::time::timeout(std::time::Duration::from_secs(5), writer)
        .await
        .is_err()
    {
        tracing::warn!("ACP WebSocket writer still busy 5 s after the connection ended");
    }
}
