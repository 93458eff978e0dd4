//! The HTTP Events API: Slack POSTs events (JSON) and interactions (a form
//! with a `payload` field) to the app's Request URL, here any path on the
//! `listen` address (behind the operator's HTTPS proxy). Each request is
//! checked first: `X-Slack-Request-Timestamp` within five minutes of now
//! and `X-Slack-Signature` the HMAC-SHA256 of `v0:TIMESTAMP:BODY` with the
//! signing secret, compared in constant time; anything else is `401`. A
//! `url_verification` is answered with its `challenge`. An event is
//! answered `200` once recorded, `503` when it could not be (Slack sends
//! it again; the hub recognises a repeat).

use std::net::SocketAddr;
use std::sync::Arc;

use axum::body::Bytes;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use super::Slack;
use crate::channels::{Hub, Inbound, Received};

/// How far a request's timestamp may be from now, in seconds.
const WINDOW_SECS: i64 = 300;
/// The largest request taken.
const BODY_LIMIT: usize = 1 << 20;

struct Events {
    slack: Arc<Slack>,
    hub: Arc<Hub>,
    key: ring::hmac::Key,
}

/// Serves the Events API on `listen` until `cancel`.
pub(super) async fn run(
    slack: Arc<Slack>,
    hub: Arc<Hub>,
    signing_secret: String,
    listen: SocketAddr,
    cancel: CancellationToken,
) {
    let listener = match tokio::net::TcpListener::bind(listen).await {
        Ok(listener) => listener,
        Err(err) => {
            let message = format!("cannot listen on {listen} for Slack's events: {err}");
            tracing::error!("{message}");
            hub.down(&message);
            return;
        }
    };
    tracing::info!(%listen, "Slack Events API listening");
    hub.up();
    let events = Arc::new(Events {
        slack,
        hub,
        key: ring::hmac::Key::new(ring::hmac::HMAC_SHA256, signing_secret.as_bytes()),
    });
    let app = axum::Router::new()
        .fallback(move |headers: HeaderMap, body: Bytes| {
            let events = events.clone();
            async move { events.request(&headers, &body).await }
        })
        .layer(axum::extract::DefaultBodyLimit::max(BODY_LIMIT));
    let served = axum::serve(listener, app)
        .with_graceful_shutdown(async move { cancel.cancelled().await })
        .await;
    if let Err(err) = served {
        tracing::error!(error = %err, "the Slack Events API listener failed");
    }
}

/// Whether `headers` sign `body` with `key` at a time within the window of `now`.
fn verified(
    key: &ring::hmac::Key,
    headers: &HeaderMap,
    body: &[u8],
    now: i64,
) -> Result<(), &'static str> {
    let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    let timestamp = header("x-slack-request-timestamp").ok_or("no X-Slack-Request-Timestamp")?;
    let at: i64 = timestamp
        .trim()
        .parse()
        .map_err(|_| "a timestamp that is not a number")?;
    if (now - at).abs() > WINDOW_SECS {
        return Err("a timestamp more than five minutes off");
    }
    let signature = header("x-slack-signature").ok_or("no X-Slack-Signature")?;
    let tag = signature
        .strip_prefix("v0=")
        .and_then(|hex| hex::decode(hex).ok())
        .ok_or("a signature that is not v0=HEX")?;
    let mut message = format!("v0:{timestamp}:").into_bytes();
    message.extend_from_slice(body);
    ring::hmac::verify(key, &message, &tag).map_err(|_| "a bad signature")
}

impl Events {
    async fn request(&self, headers: &HeaderMap, body: &[u8]) -> Response {
        let now = crate::core::session::now_millis() / 1000;
        if let Err(why) = verified(&self.key, headers, body, now) {
            tracing::warn!(why, "a Slack request refused");
            return (StatusCode::UNAUTHORIZED, axum::Json(json!({"error": why}))).into_response();
        }
        let form = headers
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.starts_with("application/x-www-form-urlencoded"));
        let payload: Option<Value> = if form {
            form_urlencoded::parse(body)
                .find(|(name, _)| name == "payload")
                .and_then(|(_, value)| serde_json::from_str(&value).ok())
        } else {
            serde_json::from_slice(body).ok()
        };
        let Some(payload) = payload else {
            return (
                StatusCode::BAD_REQUEST,
                axum::Json(json!({"error": "not an event or a payload"})),
            )
                .into_response();
        };
        let inbound: Option<Inbound> = match payload["type"].as_str().unwrap_or_default() {
            "url_verification" => {
                return axum::Json(json!({"challenge": payload["challenge"]})).into_response();
            }
            "event_callback" => self.slack.normalize_event(&payload),
            "block_actions" => self.slack.normalize_action(&payload),
            _ => None,
        };
        if let Some(inbound) = inbound
            && let Received::Failed(reason) = self.hub.receive(inbound, None).await
        {
            tracing::warn!(%reason, "Slack event not recorded; Slack will send it again");
            return (
                StatusCode::SERVICE_UNAVAILABLE,
                axum::Json(json!({"error": "not recorded"})),
            )
                .into_response();
        }
        StatusCode::OK.into_response()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn signed(key: &[u8], at: i64, body: &[u8]) -> HeaderMap {
        let key = ring::hmac::Key::new(ring::hmac::HMAC_SHA256, key);
        let mut message = format!("v0:{at}:").into_bytes();
        message.extend_from_slice(body);
        let tag = ring::hmac::sign(&key, &message);
        let mut headers = HeaderMap::new();
        headers.insert("x-slack-request-timestamp", at.to_string().parse().unwrap());
        headers.insert(
            "x-slack-signature",
            format!("v0={}", hex::encode(tag.as_ref())).parse().unwrap(),
        );
        headers
    }

    #[test]
    fn only_a_fresh_request_signed_with_the_secret_passes() {
        let key = ring::hmac::Key::new(ring::hmac::HMAC_SHA256, b"secret");
        let body = br#"{"type":"event_callback"}"#;
        let now = 1_700_000_000;
        assert_eq!(
            verified(&key, &signed(b"secret", now - 10, body), body, now),
            Ok(())
        );
        assert_eq!(
            verified(&key, &signed(b"other", now, body), body, now),
            Err("a bad signature")
        );
        assert_eq!(
            verified(&key, &signed(b"secret", now - 301, body), body, now),
            Err("a timestamp more than five minutes off")
        );
        assert_eq!(
            verified(&key, &signed(b"secret", now, body), b"{}", now),
            Err("a bad signature")
        );
        assert_eq!(
            verified(&key, &HeaderMap::new(), body, now),
            Err("no X-Slack-Request-Timestamp")
        );
    }
}
