//! Socket Mode: `apps.connections.open` (with the app-level token) gives a
//! WebSocket URL; Slack says `hello`, then sends envelopes (`events_api`,
//! `interactive`, `slash_commands`), each acknowledged by sending back its `envelope_id`
//! once the hub has recorded what it carries (an envelope not acknowledged
//! is sent again, and the hub recognises it). A `disconnect` envelope
//! (`refresh_requested`, `warning`) asks for a new connection: it is opened
//! and greeted before the old one is closed, so no envelope falls between
//! the two. A connection that drops, or stays silent past
//! [`SILENCE`], is made again after 1 s, doubling to a minute.

use std::sync::Arc;
use std::time::Duration;

use futures::{SinkExt as _, StreamExt as _};
use serde_json::{Value, json};
use tokio::sync::mpsc;
use tokio_tungstenite::tungstenite::Message;
use tokio_util::sync::CancellationToken;

use super::{Slack, backoff};
use crate::channels::{DeliveryError, Hub, Inbound, Received};
use crate::core::channel::FailureKind;

/// How long a connection may say nothing (Slack pings it; it pings Slack)
/// before it is taken as dead.
const SILENCE: Duration = Duration::from_secs(45);
/// How often the client pings.
const PING_EVERY: Duration = Duration::from_secs(15);
/// How long a new connection has to say `hello`.
const HELLO_WITHIN: Duration = Duration::from_secs(15);

type Socket =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

/// What a connection tells the loop that keeps them.
enum Signal {
    /// Slack asked for a new connection (`disconnect`).
    Refresh(u64, String),
    /// The connection is gone, and why.
    Closed(u64, String),
}

/// Keeps one connection up (two while one replaces the other) until `cancel`.
pub(super) async fn run(
    slack: Arc<Slack>,
    hub: Arc<Hub>,
    app_token: String,
    cancel: CancellationToken,
) {
    let (tx, mut rx) = mpsc::unbounded_channel::<Signal>();
    let mut current: Option<(u64, CancellationToken)> = None;
    let mut next_id: u64 = 0;
    let mut failures: u32 = 0;
    loop {
        if current.is_none() {
            let opened = tokio::select! {
                _ = cancel.cancelled() => return,
                opened = open(&slack, &app_token) => opened,
            };
            match opened {
                Ok(socket) => {
                    failures = 0;
                    hub.up();
                    next_id += 1;
                    current = Some(spawn(&slack, &hub, socket, next_id, &tx, &cancel));
                    tracing::info!(connection = next_id, "Slack Socket Mode connected");
                }
                Err(err) => {
                    hub.down(&err.to_string());
                    if err.kind == FailureKind::Auth {
                        tracing::error!(error = %err, "the Slack app-level token was refused; the channel stops receiving");
                        return;
                    }
                    failures += 1;
                    let wait = err.retry_after.unwrap_or_else(|| backoff(failures));
                    tracing::warn!(error = %err, wait_ms = wait.as_millis() as u64, "Slack Socket Mode connection failed");
                    tokio::select! {
                        _ = cancel.cancelled() => return,
                        _ = tokio::time::sleep(wait) => continue,
                    }
                }
            }
        }
        let signal = tokio::select! {
            _ = cancel.cancelled() => return,
            signal = rx.recv() => signal,
        };
        let Some(signal) = signal else { return };
        match signal {
            Signal::Refresh(id, reason) if current.as_ref().is_some_and(|(c, _)| *c == id) => {
                tracing::info!(connection = id, %reason, "Slack asked for a new connection");
                let opened = tokio::select! {
                    _ = cancel.cancelled() => return,
                    opened = open(&slack, &app_token) => opened,
                };
                match opened {
                    Ok(socket) => {
                        next_id += 1;
                        let fresh = spawn(&slack, &hub, socket, next_id, &tx, &cancel);
                        tracing::info!(connection = next_id, "Slack Socket Mode connected");
                        if let Some((_, old)) = current.replace(fresh) {
                            old.cancel();
                        }
                    }
                    Err(err) => {
                        // The old one goes on until it closes; then the loop
                        // connects again with its backoff.
                        tracing::warn!(error = %err, "Slack Socket Mode refresh failed");
                    }
                }
            }
            Signal::Closed(id, reason) if current.as_ref().is_some_and(|(c, _)| *c == id) => {
                current = None;
                hub.down(&format!("the Socket Mode connection closed: {reason}"));
                failures += 1;
                let wait = backoff(failures);
                tracing::warn!(connection = id, %reason, wait_ms = wait.as_millis() as u64, "Slack Socket Mode connection lost");
                tokio::select! {
                    _ = cancel.cancelled() => return,
                    _ = tokio::time::sleep(wait) => {}
                }
            }
            Signal::Refresh(..) | Signal::Closed(..) => {}
        }
    }
}

/// `apps.connections.open`, the WebSocket, and its `hello`.
async fn open(slack: &Slack, app_token: &str) -> Result<Socket, DeliveryError> {
    let opened = slack
        .call_as("apps.connections.open", app_token, super::Args::Form(&[]))
        .await?;
    let url = opened["url"].as_str().ok_or_else(|| {
        DeliveryError::new(
            FailureKind::Transient,
            "slack apps.connections.open: the answer has no url",
        )
    })?;
    let connector = tokio_tungstenite::Connector::Rustls(slack.settings.tls.clone());
    let (mut socket, _) =
        tokio_tungstenite::connect_async_tls_with_config(url, None, true, Some(connector))
            .await
            .map_err(|err| {
                DeliveryError::new(
                    FailureKind::Transient,
                    format!("slack socket mode: cannot connect: {err}"),
                )
            })?;
    let hello = tokio::time::timeout(HELLO_WITHIN, async {
        while let Some(frame) = socket.next().await {
            match frame {
                Ok(Message::Text(text)) => {
                    let value: Value = serde_json::from_str(text.as_str()).unwrap_or_default();
                    if value["type"] == "hello" {
                        return Ok(());
                    }
                    tracing::debug!(kind = %value["type"], "Slack frame before hello ignored");
                }
                Ok(_) => {}
                Err(err) => return Err(err.to_string()),
            }
        }
        Err("closed before hello".to_owned())
    })
    .await;
    match hello {
        Ok(Ok(())) => Ok(socket),
        Ok(Err(reason)) => Err(DeliveryError::new(
            FailureKind::Transient,
            format!("slack socket mode: {reason}"),
        )),
        Err(_) => Err(DeliveryError::new(
            FailureKind::Transient,
            "slack socket mode: no hello within 15 s",
        )),
    }
}

/// Serves a greeted connection in a task of its own; its token closes it.
fn spawn(
    slack: &Arc<Slack>,
    hub: &Arc<Hub>,
    socket: Socket,
    id: u64,
    tx: &mpsc::UnboundedSender<Signal>,
    cancel: &CancellationToken,
) -> (u64, CancellationToken) {
    let stop = cancel.child_token();
    let task = Connection {
        slack: slack.clone(),
        hub: hub.clone(),
        id,
        tx: tx.clone(),
    };
    tokio::spawn(task.serve(socket, stop.clone()));
    (id, stop)
}

struct Connection {
    slack: Arc<Slack>,
    hub: Arc<Hub>,
    id: u64,
    tx: mpsc::UnboundedSender<Signal>,
}

impl Connection {
    async fn serve(self, socket: Socket, stop: CancellationToken) {
        let (mut write, mut read) = socket.split();
        let mut ping = tokio::time::interval(PING_EVERY);
        ping.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut heard = tokio::time::Instant::now();
        let reason = loop {
            tokio::select! {
                _ = stop.cancelled() => {
                    let _ = write.send(Message::Close(None)).await;
                    tracing::debug!(connection = self.id, "Slack connection closed");
                    return;
                }
                _ = ping.tick() => {
                    if heard.elapsed() > SILENCE {
                        break "silent too long".to_owned();
                    }
                    if write.send(Message::Ping(Vec::new().into())).await.is_err() {
                        break "cannot write".to_owned();
                    }
                }
                frame = read.next() => {
                    heard = tokio::time::Instant::now();
                    match frame {
                        None => break "closed".to_owned(),
                        Some(Err(err)) => break err.to_string(),
                        Some(Ok(Message::Close(frame))) => {
                            break frame.map_or_else(|| "closed by Slack".to_owned(), |f| format!("closed by Slack: {}", f.reason));
                        }
                        Some(Ok(Message::Text(text))) => {
                            let Ok(envelope) = serde_json::from_str::<Value>(text.as_str()) else {
                                tracing::warn!("a Slack frame that is not JSON; ignored");
                                continue;
                            };
                            if let Some(ack) = self.envelope(&envelope).await
                                && write.send(Message::text(ack.to_string())).await.is_err()
                            {
                                break "cannot write".to_owned();
                            }
                        }
                        Some(Ok(Message::Ping(data))) => {
                            let _ = write.send(Message::Pong(data)).await;
                        }
                        Some(Ok(_)) => {}
                    }
                }
            }
        };
        let _ = self.tx.send(Signal::Closed(self.id, reason));
    }

    /// One envelope: handed to the hub, and the acknowledgement to send
    /// back once recorded (`None`: nothing to acknowledge, or not
    /// recorded, so Slack sends it again).
    async fn envelope(&self, envelope: &Value) -> Option<Value> {
        let kind = envelope["type"].as_str().unwrap_or_default();
        if kind == "disconnect" {
            let reason = envelope["reason"].as_str().unwrap_or("unknown").to_owned();
            if reason == "link_disabled" {
                tracing::error!("Socket Mode is turned off for the Slack app");
            }
            let _ = self.tx.send(Signal::Refresh(self.id, reason));
            return None;
        }
        let envelope_id = envelope["envelope_id"].as_str()?;
        let payload = &envelope["payload"];
        let inbound: Option<Inbound> = match kind {
            "events_api" => self.slack.normalize_event(payload),
            "interactive" => self.slack.normalize_action(payload),
            "slash_commands" => self.slack.normalize_command(payload),
            _ => None,
        };
        if let Some(inbound) = inbound {
            let retry = envelope["retry_attempt"].as_u64().unwrap_or(0);
            match self.hub.receive(inbound, None).await {
                Received::Failed(reason) => {
                    tracing::warn!(%reason, retry, "Slack event not recorded; Slack will send it again");
                    return None;
                }
                outcome @ (Received::Accepted
                | Received::Duplicate
                | Received::Echo
                | Received::Unauthorized) => {
                    tracing::debug!(?outcome, retry, "Slack event taken");
                }
            }
        }
        Some(json!({"envelope_id": envelope_id}))
    }
}
