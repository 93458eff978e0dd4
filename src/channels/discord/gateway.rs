//! Discord's Gateway: one WebSocket session, kept alive and resumed.
//!
//! Hello (op 10) gives the heartbeat interval; the first heartbeat (op 1,
//! the last sequence seen) goes after a random share of it, the next ones
//! every interval. A heartbeat not acknowledged (op 11) by the time the next
//! is due is a zombie connection: it is closed and the session resumed.
//! Identify (op 2) opens a session; READY names it and the URL to resume it
//! at (`resume_gateway_url`). A connection lost, a Reconnect (op 7) or a
//! resumable Invalid Session (op 9, `d: true`) reconnects there and sends
//! Resume (op 6) with the session id and the last sequence taken in, so
//! Discord replays what came after; an Invalid Session that cannot be
//! resumed waits one to five seconds and identifies afresh. Close codes
//! 4004 and 4010–4014 (a bad token, shards, intents) stop the channel.
//!
//! The sequence advances only past a dispatch the channel took in: one it
//! could not record ends the connection, and the resume replays it.

use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use futures::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio::time::Instant;
use tokio_tungstenite::tungstenite::Message;
use tokio_util::sync::CancellationToken;

/// GUILDS | GUILD_MESSAGES | DIRECT_MESSAGES | MESSAGE_CONTENT.
pub const INTENTS: u64 = (1 << 0) | (1 << 9) | (1 << 12) | (1 << 15);

/// How a Gateway connects.
pub struct GatewaySettings {
    /// `wss://gateway.discord.gg`, or a test server's.
    pub url: String,
    pub token: String,
    pub tls: Arc<rustls::ClientConfig>,
}

/// What the gateway tells the adapter.
pub enum Event {
    /// A session is open (identified or resumed).
    Up,
    /// The connection is lost or refused, and why.
    Down(String),
    /// A dispatch (op 0): its name and data. The answer says whether it was
    /// taken in; `false` ends the connection so the resume replays it.
    Dispatch(String, Value),
}

/// What the adapter does with each [`Event`].
pub type Handler<'a> = &'a (dyn Fn(Event) -> BoxFuture<'a, bool> + Send + Sync);

/// A session to resume.
#[derive(Debug, Clone)]
struct Session {
    id: String,
    resume_url: String,
    /// The last sequence taken in.
    seq: Option<u64>,
}

/// How a connection ended.
enum End {
    Cancelled,
    /// Reconnect and resume (the session, if any, stays).
    Resume(String),
    /// Reconnect and identify afresh.
    Fresh(String),
    /// Stop: the configuration must change.
    Fatal(String),
}

/// Runs the Gateway until `cancel` or a fatal close.
pub async fn run(settings: &GatewaySettings, handler: Handler<'_>, cancel: &CancellationToken) {
    let mut session: Option<Session> = None;
    let mut failures: u32 = 0;
    loop {
        let base = session
            .as_ref()
            .map_or(settings.url.as_str(), |s| s.resume_url.as_str());
        // The version and encoding are this client's; a query in the
        // configured URL is replaced.
        let base = base.split('?').next().unwrap_or(base);
        let url = format!("{}/?v=10&encoding=json", base.trim_end_matches('/'));
        let connector = tokio_tungstenite::Connector::Rustls(settings.tls.clone());
        let connected = tokio::select! {
            () = cancel.cancelled() => return,
            c = tokio_tungstenite::connect_async_tls_with_config(url.as_str(), None, true, Some(connector)) => c,
        };
        let mut opened = false;
        let end = match connected {
            Ok((ws, _)) => {
                connection(ws, settings, &mut session, &mut opened, handler, cancel).await
            }
            Err(err) => End::Resume(format!("cannot connect to the Gateway: {err}")),
        };
        let reason = match end {
            End::Cancelled => return,
            End::Fatal(reason) => {
                tracing::error!(%reason, "the Discord Gateway refused this bot; the channel stops receiving");
                handler(Event::Down(reason)).await;
                return;
            }
            End::Fresh(reason) => {
                session = None;
                reason
            }
            End::Resume(reason) => reason,
        };
        failures = if opened { 1 } else { failures + 1 };
        tracing::warn!(%reason, resumable = session.is_some(), "Discord Gateway connection ended");
        handler(Event::Down(reason)).await;
        // The first reconnection at once; then back off (1, 2, 4 … 60 s).
        let wait = if failures <= 1 {
            Duration::ZERO
        } else {
            Duration::from_secs(2u64.saturating_pow(failures.min(7) - 2).min(60))
        };
        tokio::select! {
            () = cancel.cancelled() => return,
            () = tokio::time::sleep(wait) => {}
        }
    }
}

type Socket =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

fn payload(op: u8, d: Value) -> Message {
    Message::text(json!({"op": op, "d": d}).to_string())
}

/// One connection: hello, identify or resume, then dispatches until it ends.
async fn connection(
    mut ws: Socket,
    settings: &GatewaySettings,
    session: &mut Option<Session>,
    opened: &mut bool,
    handler: Handler<'_>,
    cancel: &CancellationToken,
) -> End {
    let hello = tokio::select! {
        () = cancel.cancelled() => return End::Cancelled,
        () = tokio::time::sleep(Duration::from_secs(30)) => return End::Resume("no Hello within 30 s".into()),
        hello = ws.next() => hello,
    };
    let interval = match hello.as_ref().map(|m| m.as_ref().map(frame)) {
        Some(Ok(Ok(Some(hello)))) if hello["op"] == 10 => hello["d"]["heartbeat_interval"]
            .as_u64()
            .map_or(Duration::from_secs(41), Duration::from_millis)
            .max(Duration::from_millis(100)),
        _ => return End::Resume("the Gateway did not say Hello".into()),
    };
    let start = match session {
        Some(s) => payload(
            6,
            json!({"token": settings.token, "session_id": s.id, "seq": s.seq}),
        ),
        None => payload(
            2,
            json!({"token": settings.token, "intents": INTENTS,
                "properties": {"os": std::env::consts::OS, "browser": "pincer", "device": "pincer"}}),
        ),
    };
    if let Err(err) = ws.send(start).await {
        return End::Resume(format!("cannot identify: {err}"));
    }
    let mut seq = session.as_ref().and_then(|s| s.seq);
    let mut next_beat = Instant::now() + first_heartbeat(interval, fastrand::f64());
    let mut acked = true;
    loop {
        let message = tokio::select! {
            () = cancel.cancelled() => {
                let _ = ws.close(None).await;
                return End::Cancelled;
            }
            () = tokio::time::sleep_until(next_beat) => {
                if !acked {
                    let _ = ws.close(Some(tokio_tungstenite::tungstenite::protocol::CloseFrame {
                        code: 4000.into(),
                        reason: "zombie".into(),
                    })).await;
                    return End::Resume("no heartbeat ACK: a zombie connection".into());
                }
                if let Err(err) = ws.send(payload(1, json!(seq))).await {
                    return End::Resume(format!("cannot send a heartbeat: {err}"));
                }
                acked = false;
                next_beat = Instant::now() + interval;
                continue;
            }
            message = ws.next() => message,
        };
        let message = match message {
            None => return End::Resume("the Gateway closed the connection".into()),
            Some(Err(err)) => return End::Resume(format!("the Gateway connection failed: {err}")),
            Some(Ok(message)) => message,
        };
        if let Message::Close(close) = &message {
            let code = close.as_ref().map_or(1005, |c| u16::from(c.code));
            return closed(code);
        }
        let value = match frame(&message) {
            Ok(Some(value)) => value,
            Ok(None) => continue,
            Err(err) => return End::Resume(err),
        };
        match value["op"].as_u64() {
            Some(0) => {
                let name = value["t"].as_str().unwrap_or_default().to_owned();
                let data = value["d"].clone();
                let s = value["s"].as_u64();
                match name.as_str() {
                    "READY" => {
                        *session = Some(Session {
                            id: data["session_id"].as_str().unwrap_or_default().to_owned(),
                            resume_url: data["resume_gateway_url"]
                                .as_str()
                                .unwrap_or(&settings.url)
                                .to_owned(),
                            seq: s,
                        });
                        seq = s;
                        *opened = true;
                        handler(Event::Dispatch(name, data)).await;
                        handler(Event::Up).await;
                        continue;
                    }
                    "RESUMED" => {
                        *opened = true;
                        handler(Event::Up).await;
                    }
                    _ => {
                        if !handler(Event::Dispatch(name, data)).await {
                            return End::Resume("a dispatch could not be recorded".into());
                        }
                    }
                }
                if let Some(s) = s {
                    seq = Some(s);
                    if let Some(session) = session.as_mut() {
                        session.seq = Some(s);
                    }
                }
            }
            Some(1) => {
                if let Err(err) = ws.send(payload(1, json!(seq))).await {
                    return End::Resume(format!("cannot send a heartbeat: {err}"));
                }
            }
            Some(7) => return End::Resume("the Gateway asked for a reconnect (op 7)".into()),
            Some(9) => {
                if value["d"].as_bool() == Some(true) && session.is_some() {
                    return End::Resume("invalid session, resumable (op 9)".into());
                }
                let wait = Duration::from_millis(1000 + fastrand::u64(0..4000));
                tokio::select! {
                    () = cancel.cancelled() => return End::Cancelled,
                    () = tokio::time::sleep(wait) => {}
                }
                return End::Fresh("invalid session (op 9)".into());
            }
            Some(11) => acked = true,
            _ => {}
        }
    }
}

/// When the first heartbeat goes after Hello: `interval × jitter`, a
/// random `jitter` in [0, 1) (Discord's documents), so bots restarted
/// together do not beat together; a jitter out of range is taken as 0.
fn first_heartbeat(interval: Duration, jitter: f64) -> Duration {
    let jitter = if (0.0..1.0).contains(&jitter) {
        jitter
    } else {
        0.0
    };
    interval.mul_f64(jitter)
}

/// A text frame as JSON; `None` for pings and the like.
fn frame(message: &Message) -> Result<Option<Value>, String> {
    match message {
        Message::Text(text) => serde_json::from_str(text.as_str())
            .map(Some)
            .map_err(|err| format!("a Gateway frame is not JSON: {err}")),
        Message::Binary(_)
        | Message::Ping(_)
        | Message::Pong(_)
        | Message::Close(_)
        | Message::Frame(_) => Ok(None),
    }
}

/// What a close code asks for.
fn closed(code: u16) -> End {
    let said = format!("the Gateway closed the connection ({code})");
    match code {
        4004 => End::Fatal(format!("{said}: authentication failed")),
        4010..=4014 => End::Fatal(format!("{said}: shards or intents refused")),
        4007 | 4009 => End::Fresh(said),
        _ => End::Resume(said),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn close_codes_say_what_follows() {
        assert!(matches!(closed(4004), End::Fatal(_)));
        assert!(matches!(closed(4014), End::Fatal(_)));
        assert!(matches!(closed(4009), End::Fresh(_)));
        assert!(matches!(closed(4000), End::Resume(_)));
        assert!(matches!(closed(1001), End::Resume(_)));
        assert_eq!(INTENTS, 37377);
    }

    #[test]
    fn the_first_heartbeat_comes_after_a_random_share_of_the_interval() {
        let interval = Duration::from_millis(41_250);
        assert_eq!(first_heartbeat(interval, 0.0), Duration::ZERO);
        assert_eq!(
            first_heartbeat(interval, 0.5),
            Duration::from_millis(20_625)
        );
        assert!(first_heartbeat(interval, 0.999_999) < interval);
        assert_eq!(first_heartbeat(interval, 1.0), Duration::ZERO);
        assert_eq!(first_heartbeat(interval, f64::NAN), Duration::ZERO);
        // As `connection` draws it: within [0, interval), spread over it.
        let delays: Vec<Duration> = (0..200)
            .map(|_| first_heartbeat(interval, fastrand::f64()))
            .collect();
        assert!(delays.iter().all(|d| *d < interval));
        let least = delays.iter().min().copied().unwrap_or_default();
        let most = delays.iter().max().copied().unwrap_or_default();
        assert!(
            least < interval / 4 && most > interval * 3 / 4,
            "{least:?} {most:?}"
        );
    }
}
