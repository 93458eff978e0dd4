//! The HTTP Events API: Slack POSTs events (JSON), interactions (a form
//! with a `payload` field) and slash commands (a form with a `command`
//! field) to the app's Request URLs, which are
//! `/channels/NAME/events` on `pincer serve --http` (the HTTP face's one
//! listener, behind the operator's HTTPS proxy). Each request is checked
//! first: `X-Slack-Request-Timestamp` within five minutes of now and
//! `X-Slack-Signature` the HMAC-SHA256 of `v0:TIMESTAMP:BODY` with the
//! signing secret, compared in constant time; anything else is `401`. A
//! `url_verification` is answered with its `challenge`. An event is
//! answered `200` once recorded, `503` when it could not be (Slack sends
//! it again; the hub recognises a repeat); a slash command `200` with an
//! empty body, which Slack shows nothing of.

use reqwest::header::HeaderMap;
use serde_json::{Value, json};

use super::Slack;
use crate::channels::{HttpReply, Inbound, Received};

/// The endpoint under `/channels/NAME/`.
pub const ENDPOINT: &str = "events";
/// How far a request's timestamp may be from now, in seconds.
const WINDOW_SECS: i64 = 300;
/// The largest request taken.
const BODY_LIMIT: usize = 1 << 20;
/// The type a slash command's form is given here (Slack's has none).
const SLASH_COMMAND: &str = "slash_command";

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

impl Slack {
    /// One request Slack sent to `/channels/NAME/events`.
    pub(super) async fn event_request(
        &self,
        key: &ring::hmac::Key,
        headers: &HeaderMap,
        body: &[u8],
    ) -> HttpReply {
        if body.len() > BODY_LIMIT {
            return HttpReply::error(413, format!("the body is over {BODY_LIMIT} bytes"));
        }
        let now = crate::core::session::now_millis() / 1000;
        if let Err(why) = verified(key, headers, body, now) {
            tracing::warn!(channel = %self.name, why, "a Slack request refused");
            return HttpReply::error(401, why);
        }
        let form = headers
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.starts_with("application/x-www-form-urlencoded"));
        let payload: Option<Value> = if form {
            let mut fields = super::commands::form_fields(body);
            if let Some(payload) = fields["payload"].as_str() {
                // An interaction: its JSON in the `payload` field.
                serde_json::from_str(payload).ok()
            } else if fields["command"].is_string() {
                // A slash command: the fields themselves, given a type here.
                fields["type"] = json!(SLASH_COMMAND);
                Some(fields)
            } else {
                None
            }
        } else {
            serde_json::from_slice(body).ok()
        };
        let Some(payload) = payload else {
            return HttpReply::error(
                400,
                "not an event, an interaction or a slash command payload",
            );
        };
        let kind = payload["type"].as_str().unwrap_or_default();
        if kind == "url_verification" {
            return HttpReply::new(200, json!({"challenge": payload["challenge"]}));
        }
        // Until the bot knows who it is (the hub is set after `auth.test`),
        // nothing can be read: Slack sends it again.
        let Some(hub) = self.hub.lock().clone() else {
            return HttpReply::error(
                503,
                "this process does not serve the channel's account now: send it again",
            );
        };
        let inbound: Option<Inbound> = match kind {
            "event_callback" => self.normalize_event(&payload),
            "block_actions" => self.normalize_action(&payload),
            SLASH_COMMAND => self.normalize_command(&payload),
            _ => None,
        };
        if let Some(inbound) = inbound
            && let Received::Failed(reason) = hub.receive(inbound, None).await
        {
            tracing::warn!(%reason, "Slack event not recorded; Slack will send it again");
            return HttpReply::error(503, "not recorded: send it again");
        }
        if kind == SLASH_COMMAND {
            // An empty body: Slack shows whatever a command's answer says
            // (`{}` too); the reply comes as a message of its own.
            return HttpReply::new(200, Value::Null);
        }
        HttpReply::new(200, json!({"ok": true}))
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
