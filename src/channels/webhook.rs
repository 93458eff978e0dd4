//! A generic webhook channel: signed JSON POSTs both ways.
//!
//! Inbound, a peer POSTs a message to `/channels/NAME/webhook` on `pincer
//! serve --http` (the listener every HTTP adapter shares); outbound, Pincer POSTs
//! each message to the peer's callback URL. Both directions are signed with
//! HMAC-SHA256 over `TIMESTAMP.BODY` with a shared secret
//! (`X-Pincer-Signature: sha256=HEX`, `X-Pincer-Timestamp: UNIX_SECONDS`), and
//! inbound requests older or newer than five minutes are refused, so a captured
//! request cannot be replayed later; within the window, a delivery id already
//! recorded is acknowledged and ignored. Outbound POSTs carry an
//! `Idempotency-Key`, so the peer can deduplicate a retry — which is what lets
//! Pincer replay a send whose outcome it could not learn. See `docs/channels.md`.

use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use parking_lot::Mutex;
use reqwest::StatusCode;
use reqwest::header::HeaderMap;
use serde::Deserialize;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use super::{
    Adapter, Capabilities, DeliveryError, HttpReply, HttpRequest, Hub, Idempotence, Inbound,
    LengthUnit, Received,
};
use crate::core::channel::{
    Actor, ChannelMessage, FailureKind, MessageOrigin, Target, TargetKind, Unit,
};
use crate::core::session::now_millis;
pub use crate::signing::{SIGNATURE, TIMESTAMP, sign};
use crate::signing::{sign_with, verify_with};

/// How far a request's timestamp may be from now.
pub const WINDOW_SECS: i64 = 300;
/// Largest inbound body accepted.
const BODY_LIMIT: usize = 1024 * 1024;
pub const DELIVERY: &str = "x-pincer-delivery";

pub struct Webhook {
    name: String,
    secret: ring::hmac::Key,
    callback: String,
    /// The hub while this process receives for the account (it holds the
    /// account's lease); requests before or after are answered 503.
    hub: Mutex<Option<Arc<Hub>>>,
    client: reqwest::Client,
    max_len: usize,
}

/// An inbound request, as the peer sends it.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct InboundBody {
    #[serde(default)]
    message: Option<InboundMessage>,
    #[serde(default)]
    button: Option<InboundButton>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct InboundMessage {
    chat: String,
    #[serde(default)]
    chat_kind: Option<TargetKind>,
    #[serde(default)]
    thread: Option<String>,
    sender: InboundSender,
    text: String,
    #[serde(default)]
    origin: Option<MessageOrigin>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct InboundSender {
    id: String,
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    is_bot: bool,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct InboundButton {
    chat: String,
    #[serde(default)]
    chat_kind: Option<TargetKind>,
    sender: String,
    data: String,
}

impl Webhook {
    pub fn new(
        name: &str,
        secret: &str,
        callback: &str,
        timeout: Duration,
    ) -> Result<Self, String> {
        if secret.len() < 16 {
            return Err("the webhook secret must be at least 16 characters".to_owned());
        }
        let url = reqwest::Url::parse(callback)
            .map_err(|err| format!("callback_url {callback:?}: {err}"))?;
        if !matches!(url.scheme(), "http" | "https") {
            return Err(format!("callback_url {callback:?}: expected http or https"));
        }
        let client = crate::net::http_client(timeout)
            .map_err(|err| format!("cannot build the HTTP client: {err}"))?;
        Ok(Self {
            name: name.to_owned(),
            secret: ring::hmac::Key::new(ring::hmac::HMAC_SHA256, secret.as_bytes()),
            callback: callback.to_owned(),
            hub: Mutex::new(None),
            client,
            max_len: 16_000,
        })
    }

    /// Checks the signature and the timestamp window; the delivery id on success.
    /// Public for the fuzzing entry point (`fuzz/`).
    pub fn verify(&self, headers: &HeaderMap, body: &[u8]) -> Result<String, (StatusCode, String)> {
        let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
        let unauthorized = |m: &str| (StatusCode::UNAUTHORIZED, m.to_owned());
        let timestamp: i64 = header(TIMESTAMP)
            .ok_or_else(|| unauthorized("missing X-Pincer-Timestamp"))?
            .trim()
            .parse()
            .map_err(|_| unauthorized("X-Pincer-Timestamp is not a Unix time in seconds"))?;
        let signature =
            header(SIGNATURE).ok_or_else(|| unauthorized("missing X-Pincer-Signature"))?;
        if !verify_with(&self.secret, timestamp, body, signature.trim()) {
            return Err(unauthorized("bad signature"));
        }
        let now = now_millis() / 1000;
        if (now - timestamp).abs() > WINDOW_SECS {
            return Err(unauthorized(
                "X-Pincer-Timestamp is outside the five-minute window (a replay, or a clock off)",
            ));
        }
        let delivery = header(DELIVERY)
            .map(str::trim)
            .filter(|d| !d.is_empty() && d.len() <= 200)
            .ok_or((
                StatusCode::BAD_REQUEST,
                "missing X-Pincer-Delivery (a unique id per delivery, at most 200 characters)"
                    .to_owned(),
            ))?;
        Ok(delivery.to_owned())
    }

    fn normalize(&self, delivery: &str, body: InboundBody) -> Result<Inbound, String> {
        match (body.message, body.button) {
            (Some(message), None) => Ok(Inbound::Message(ChannelMessage {
                id: delivery.to_owned(),
                channel: self.name.clone(),
                account: self.account().to_owned(),
                target: Target {
                    kind: message.chat_kind.unwrap_or(TargetKind::Direct),
                    id: message.chat,
                    thread: message.thread,
                },
                sender: Some(Actor {
                    id: message.sender.id,
                    name: message.sender.name,
                    is_bot: message.sender.is_bot,
                }),
                body: message.text,
                attachments: Vec::new(),
                relation: None,
                origin: message.origin.unwrap_or(MessageOrigin::User),
                at: now_millis(),
            })),
            (None, Some(button)) => Ok(Inbound::Button {
                id: delivery.to_owned(),
                target: Target {
                    kind: button.chat_kind.unwrap_or(TargetKind::Direct),
                    id: button.chat,
                    thread: None,
                },
                sender: button.sender,
                data: button.data,
            }),
            _ => Err("the body needs exactly one of `message` or `button`".to_owned()),
        }
    }

    async fn post(&self, body: Value, key: &str) -> Result<Value, DeliveryError> {
        let raw = serde_json::to_vec(&body)
            .map_err(|err| DeliveryError::new(FailureKind::InvalidPayload, err.to_string()))?;
        let timestamp = now_millis() / 1000;
        let response = self
            .client
            .post(&self.callback)
            .header("content-type", "application/json")
            .header(TIMESTAMP, timestamp.to_string())
            .header(SIGNATURE, sign_with(&self.secret, timestamp, &raw))
            .header("idempotency-key", key)
            .body(raw)
            .send()
            .await
            .map_err(|err| DeliveryError::unanswered("webhook POST", err))?;
        let status = response.status().as_u16();
        let retry_after = crate::providers::retry_after(response.headers());
        // The status says what came of it; a body cut off only loses the
        // message id (the key stands in) or the error's words.
        let text = response.text().await.unwrap_or_default();
        if (200..300).contains(&status) {
            return Ok(serde_json::from_str(&text).unwrap_or(Value::Null));
        }
        let snippet: String = text.chars().take(300).collect();
        Err(
            DeliveryError::from_status(status, format!("webhook POST: HTTP {status} {snippet}"))
                .with_retry_after(retry_after),
        )
    }

    fn outbound(&self, target: &Target, unit: &Unit, key: &str) -> Value {
        json!({
            "id": key,
            "chat": target.id,
            "chat_kind": target.kind.as_str(),
            "thread": target.thread,
            "text": unit.text,
            "buttons": unit.buttons.iter().map(|b| json!({"label": b.label, "data": b.data})).collect::<Vec<_>>(),
            "origin": {"source": "pincer", "kind": "message"},
        })
    }
}

/// The endpoint inbound deliveries are POSTed to: `/channels/NAME/webhook`.
pub const ENDPOINT: &str = "webhook";

impl Webhook {
    /// One inbound delivery: verified, parsed, handed to the hub; answered
    /// once recorded (the HTTP answer is the platform's acknowledgement).
    async fn inbound(&self, headers: &HeaderMap, body: &[u8]) -> HttpReply {
        let reply = |status: StatusCode, value: Value| HttpReply::new(status.as_u16(), value);
        if body.len() > BODY_LIMIT {
            return reply(
                StatusCode::PAYLOAD_TOO_LARGE,
                json!({"error": format!("the body is over {BODY_LIMIT} bytes")}),
            );
        }
        let delivery = match self.verify(headers, body) {
            Ok(delivery) => delivery,
            Err((status, message)) => {
                tracing::warn!(channel = %self.name, %message, "webhook request refused");
                return reply(status, json!({"error": message}));
            }
        };
        let parsed: InboundBody = match serde_json::from_slice(body) {
            Ok(parsed) => parsed,
            Err(err) => return reply(StatusCode::BAD_REQUEST, json!({"error": err.to_string()})),
        };
        let inbound = match self.normalize(&delivery, parsed) {
            Ok(inbound) => inbound,
            Err(message) => return reply(StatusCode::BAD_REQUEST, json!({"error": message})),
        };
        let Some(hub) = self.hub.lock().clone() else {
            return reply(
                StatusCode::SERVICE_UNAVAILABLE,
                json!({"error": "this process does not serve the channel's account now: send it again"}),
            );
        };
        match hub.receive(inbound, None).await {
            Received::Accepted => reply(StatusCode::OK, json!({"status": "accepted"})),
            Received::Duplicate => reply(StatusCode::OK, json!({"status": "duplicate"})),
            Received::Echo => reply(StatusCode::OK, json!({"status": "echo"})),
            Received::Unauthorized => reply(StatusCode::OK, json!({"status": "unauthorized"})),
            Received::Failed(reason) => reply(
                StatusCode::SERVICE_UNAVAILABLE,
                json!({"error": format!("not recorded, send it again: {reason}")}),
            ),
        }
    }
}

impl Adapter for Webhook {
    fn channel(&self) -> &str {
        &self.name
    }

    fn account(&self) -> &str {
        "webhook"
    }

    fn kind(&self) -> &'static str {
        "webhook"
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities {
            max_len: self.max_len,
            length_unit: LengthUnit::Chars,
            edit: true,
            delete: true,
            buttons: true,
            reactions: false,
            // `thread` in and out, as the peer names it.
            threads: true,
            files: false,
            edit_interval: Duration::from_secs(1),
            markup: None,
            working_after: None,
            // Every POST carries an `Idempotency-Key` the peer deduplicates
            // by; an edit carries the whole text, a deletion is keyed by the
            // message.
            idempotent: Idempotence {
                send: true,
                edit: true,
                delete: true,
            },
        }
    }

    fn send<'a>(
        &'a self,
        target: &'a Target,
        unit: &'a Unit,
        reply_to: Option<&'a str>,
        idempotency_key: &'a str,
    ) -> BoxFuture<'a, Result<String, DeliveryError>> {
        Box::pin(async move {
            let mut body = self.outbound(target, unit, idempotency_key);
            body["reply_to"] = json!(reply_to);
            let answer = self.post(body, idempotency_key).await?;
            Ok(answer["message_id"]
                .as_str()
                .map(str::to_owned)
                .or_else(|| answer["message_id"].as_i64().map(|n| n.to_string()))
                .unwrap_or_else(|| idempotency_key.to_owned()))
        })
    }

    fn edit<'a>(
        &'a self,
        target: &'a Target,
        platform_id: &'a str,
        unit: &'a Unit,
    ) -> BoxFuture<'a, Result<(), DeliveryError>> {
        Box::pin(async move {
            let key = format!("edit:{platform_id}:{}", now_millis());
            let mut body = self.outbound(target, unit, &key);
            body["edit_of"] = json!(platform_id);
            self.post(body, &key).await.map(|_| ())
        })
    }

    /// The same POST with `"delete": MESSAGE_ID` and no text, keyed
    /// `delete:MESSAGE_ID`; 404 or 410 means it is gone already.
    fn delete<'a>(
        &'a self,
        target: &'a Target,
        platform_id: &'a str,
    ) -> BoxFuture<'a, Result<(), DeliveryError>> {
        Box::pin(async move {
            let key = format!("delete:{platform_id}");
            let body = json!({
                "id": key,
                "chat": target.id,
                "chat_kind": target.kind.as_str(),
                "thread": target.thread,
                "delete": platform_id,
                "origin": {"source": "pincer", "kind": "message"},
            });
            self.post(body, &key).await.map(|_| ())
        })
    }

    /// Takes deliveries (`http`) while receiving: until `cancel`.
    fn receive(
        self: Arc<Self>,
        hub: Arc<Hub>,
        cancel: CancellationToken,
    ) -> BoxFuture<'static, ()> {
        Box::pin(async move {
            hub.up();
            *self.hub.lock() = Some(hub);
            tracing::info!(channel = %self.name, endpoint = %format!("/channels/{}/{ENDPOINT}", self.name), "webhook receiving");
            cancel.cancelled().await;
            *self.hub.lock() = None;
        })
    }

    fn receives_over_http(&self) -> bool {
        true
    }

    fn http(&self, request: HttpRequest) -> BoxFuture<'_, HttpReply> {
        Box::pin(async move {
            if request.endpoint != ENDPOINT {
                return HttpReply::error(
                    404,
                    format!(
                        "the webhook channel takes deliveries at /channels/{}/{ENDPOINT}",
                        self.name
                    ),
                );
            }
            self.inbound(&request.headers, &request.body).await
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn webhook() -> Webhook {
        Webhook::new(
            "webhook",
            "0123456789abcdef-secret",
            "http://127.0.0.1:9/cb",
            Duration::from_secs(2),
        )
        .unwrap()
    }

    fn headers(timestamp: i64, signature: &str, delivery: &str) -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers.insert(TIMESTAMP, timestamp.to_string().parse().unwrap());
        headers.insert(SIGNATURE, signature.parse().unwrap());
        headers.insert(DELIVERY, delivery.parse().unwrap());
        headers
    }

    #[test]
    fn signatures_and_the_window_are_checked() {
        let w = webhook();
        let body = br#"{"message":{"chat":"c","sender":{"id":"u"},"text":"hi"}}"#;
        let now = now_millis() / 1000;
        let good = sign(b"0123456789abcdef-secret", now, body);
        assert_eq!(w.verify(&headers(now, &good, "d1"), body).unwrap(), "d1");
        // Another body, another secret, an old timestamp: refused.
        assert!(w.verify(&headers(now, &good, "d1"), b"{}").is_err());
        let other = sign(b"another-secret-0123456789", now, body);
        assert!(w.verify(&headers(now, &other, "d1"), body).is_err());
        let old = now - WINDOW_SECS - 5;
        let stale = sign(b"0123456789abcdef-secret", old, body);
        let (status, message) = w.verify(&headers(old, &stale, "d1"), body).unwrap_err();
        assert_eq!(status, StatusCode::UNAUTHORIZED);
        assert!(message.contains("window"), "{message}");
    }

    fn target() -> Target {
        Target {
            kind: TargetKind::Direct,
            id: "room-1".into(),
            thread: None,
        }
    }

    /// The peer's error answers, through the shared classification: the
    /// status decides, `Retry-After` is kept.
    #[tokio::test]
    async fn the_peers_answers_are_classified() {
        use crate::channels::tests::{Answer, serve_once};
        for (answer, kind, retry_after) in [
            (
                "HTTP/1.1 429 Too Many Requests\r\nretry-after: 7\r\ncontent-length: 4\r\n\r\nslow",
                FailureKind::RateLimit,
                Some(Duration::from_secs(7)),
            ),
            (
                "HTTP/1.1 503 Service Unavailable\r\ncontent-length: 4\r\n\r\ndown",
                FailureKind::Transient,
                None,
            ),
            (
                "HTTP/1.1 422 Unprocessable Entity\r\ncontent-length: 2\r\n\r\nno",
                FailureKind::InvalidPayload,
                None,
            ),
            (
                "HTTP/1.1 410 Gone\r\ncontent-length: 0\r\n\r\n",
                FailureKind::NotFound,
                None,
            ),
        ] {
            let (url, _) = serve_once(Answer::Raw(answer)).await;
            let w = Webhook::new(
                "webhook",
                "0123456789abcdef-secret",
                &url,
                Duration::from_secs(5),
            )
            .unwrap();
            let err = w
                .send(&target(), &Unit::plain("hi".into()), None, "reply:r:0")
                .await
                .unwrap_err();
            assert_eq!((err.kind, err.retry_after), (kind, retry_after), "{err}");
            assert!(err.message.starts_with("webhook POST: HTTP "), "{err}");
        }
        // A POST that went out and got no answer: the peer may have it.
        let (url, request) = serve_once(Answer::Close).await;
        let w = Webhook::new(
            "webhook",
            "0123456789abcdef-secret",
            &url,
            Duration::from_secs(5),
        )
        .unwrap();
        let err = w
            .send(&target(), &Unit::plain("hi".into()), None, "reply:r:0")
            .await
            .unwrap_err();
        assert!(
            request
                .await
                .unwrap()
                .contains("idempotency-key: reply:r:0")
        );
        assert_eq!(err.kind, FailureKind::Unknown, "{err}");
    }

    /// What the webhook declares: every call keyed or whole, so each may be
    /// repeated; replies cut in characters.
    #[test]
    fn the_webhook_declares_every_call_repeatable() {
        let caps = webhook().capabilities();
        assert_eq!(
            caps.idempotent,
            crate::channels::Idempotence {
                send: true,
                edit: true,
                delete: true
            }
        );
        assert!(caps.edit && caps.delete && caps.buttons && caps.threads && !caps.reactions);
        let long = "é".repeat(40_000);
        let units = webhook().render(&long);
        assert!(units.len() > 1);
        assert!(
            units
                .iter()
                .all(|u| caps.length_unit.measure(&u.text) <= caps.max_len)
        );
    }

    #[test]
    fn short_secrets_and_bad_urls_are_refused() {
        assert!(Webhook::new("w", "short", "http://x/", Duration::from_secs(1)).is_err());
        let err = Webhook::new("w", "0123456789abcdef", "ftp://x/", Duration::from_secs(1))
            .err()
            .unwrap();
        assert!(err.contains("http"), "{err}");
    }
}
