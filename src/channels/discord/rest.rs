//! Discord's HTTP API: calls classified into [`DeliveryError`]s, paced by
//! the rate limits Discord announces in its headers.
//!
//! Every answer carries `X-RateLimit-Bucket` (the bucket the route shares),
//! `X-RateLimit-Remaining` and `X-RateLimit-Reset-After` (seconds until the
//! bucket refills). A route whose bucket has nothing left waits for its reset
//! before its next request; a 429 waits its `retry_after` (the body's, or
//! `Retry-After`), the whole client when `X-RateLimit-Global` (or the body's
//! `global`) says the limit is global — every route but interaction
//! responses, which the global limit does not bind.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::time::Instant;

use crate::channels::{DeliveryError, FetchError, download, status_kind};
use crate::core::channel::{FailureKind, OutFile};

/// Discord's HTTP API as one bot uses it.
pub struct Rest {
    /// `https://discord.com/api/v10`, or a test server's.
    base: String,
    /// `Bot TOKEN`.
    authorization: String,
    client: reqwest::Client,
    limits: Mutex<Limits>,
}

/// What the headers said so far.
#[derive(Default)]
struct Limits {
    /// A route (`POST /channels/ID/messages`) → the bucket Discord named for it.
    buckets: HashMap<String, String>,
    /// A bucket (or a route not yet told its bucket) → when it may be used again.
    blocked_until: HashMap<String, Instant>,
    /// Until when every request waits (a global 429).
    global_until: Option<Instant>,
}

impl Limits {
    /// When a request on `route` may go. Interaction responses are not
    /// bound by the global limit (Discord's documents), only by their route.
    fn ready_at(&self, route: &str) -> Option<Instant> {
        let key = self.buckets.get(route).map_or(route, String::as_str);
        let bucket = self.blocked_until.get(key).copied();
        let global = self
            .global_until
            .filter(|_| !route.starts_with("POST /interactions/"));
        match (bucket, global) {
            (Some(a), Some(b)) => Some(a.max(b)),
            (a, b) => a.or(b),
        }
    }

    /// Takes in what an answer's headers (and a 429's body) said.
    fn learn(
        &mut self,
        route: &str,
        headers: &reqwest::header::HeaderMap,
        limited: Option<&Value>,
    ) {
        let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
        let now = Instant::now();
        let key = match header("x-ratelimit-bucket") {
            Some(bucket) => {
                self.buckets.insert(route.to_owned(), bucket.to_owned());
                bucket.to_owned()
            }
            None => route.to_owned(),
        };
        let remaining = header("x-ratelimit-remaining").and_then(|v| v.parse::<u64>().ok());
        let reset_after = header("x-ratelimit-reset-after").and_then(seconds);
        if let (Some(0), Some(after)) = (remaining, reset_after) {
            self.blocked_until.insert(key.clone(), now + after);
        } else if remaining.is_some() {
            self.blocked_until.remove(&key);
        }
        if let Some(body) = limited {
            let wait = retry_after(headers, body).unwrap_or(Duration::from_secs(1));
            let global = body["global"].as_bool() == Some(true)
                || header("x-ratelimit-global").is_some_and(|v| v.eq_ignore_ascii_case("true"));
            if global {
                self.global_until = Some(now + wait);
            } else {
                let until = self.blocked_until.entry(key).or_insert(now);
                *until = (*until).max(now + wait);
            }
        }
    }
}

/// Seconds as Discord writes them (`1.234`).
fn seconds(text: &str) -> Option<Duration> {
    text.trim()
        .parse::<f64>()
        .ok()
        .filter(|s| s.is_finite() && *s >= 0.0)
        .map(|s| Duration::from_secs_f64(s.min(3600.0)))
}

/// A 429's wait: the body's `retry_after` (seconds, fractional), else `Retry-After`.
fn retry_after(headers: &reqwest::header::HeaderMap, body: &Value) -> Option<Duration> {
    body["retry_after"]
        .as_f64()
        .and_then(|s| seconds(&s.to_string()))
        .or_else(|| {
            headers
                .get(reqwest::header::RETRY_AFTER)
                .and_then(|v| v.to_str().ok())
                .and_then(seconds)
        })
}

/// A Discord error answer as a failure class: by its HTTP status, except
/// that `Unknown Message` (JSON code 10008) and `Unknown Channel` (10003)
/// are `not_found` whatever the status.
pub fn classify(what: &str, status: u16, body: &Value) -> DeliveryError {
    let code = body["code"].as_u64().unwrap_or(0);
    let text = body["message"].as_str().unwrap_or("no message");
    let kind = match code {
        10003 | 10008 => FailureKind::NotFound,
        _ => status_kind(status),
    };
    let limited = kind == FailureKind::RateLimit;
    DeliveryError::new(
        kind,
        format!(
            "discord {what}: HTTP {status} {code} {}",
            text.chars().take(120).collect::<String>()
        ),
    )
    .with_retry_after(limited.then(|| {
        body["retry_after"]
            .as_f64()
            .and_then(|s| seconds(&s.to_string()))
            .unwrap_or(Duration::from_secs(1))
    }))
}

impl Rest {
    pub fn new(base: &str, token: &str) -> Result<Self, String> {
        let client = crate::net::http_client(Duration::from_secs(30))
            .map_err(|err| format!("cannot build the HTTP client: {err}"))?;
        Ok(Self {
            base: base.trim_end_matches('/').to_owned(),
            authorization: format!("Bot {token}"),
            client,
            limits: Mutex::default(),
        })
    }

    /// An attachment's bytes from its (signed) CDN URL, without the bot
    /// token, at most `limit` bytes; only from Discord's CDN hosts or the
    /// configured API's host (a test server).
    pub async fn download(&self, url: &str, limit: u64) -> Result<Vec<u8>, FetchError> {
        let hosts = [
            "https://cdn.discordapp.com",
            "https://media.discordapp.net",
            &self.base,
        ];
        if !download::on_origin(url, &hosts) {
            return Err(FetchError::Failed(
                "the attachment is not on Discord's CDN".to_owned(),
            ));
        }
        let response = self
            .client
            .get(url)
            .send()
            .await
            .map_err(FetchError::request)?;
        download::read_capped(response, limit, "Discord's CDN").await
    }

    fn limits(&self) -> std::sync::MutexGuard<'_, Limits> {
        self.limits
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// One call: waits until its route's bucket (and the global limit)
    /// allows it, then sends it. `route` names the rate-limited route
    /// (method and path with its major parameter, `POST /channels/1/messages`).
    /// An answer without a body (204) is `null`.
    pub async fn call(
        &self,
        method: reqwest::Method,
        path: &str,
        route: &str,
        body: Option<&Value>,
    ) -> Result<Value, DeliveryError> {
        self.exchange(method, path, route, |request| {
            Ok(match body {
                Some(body) => request.json(body),
                None => request,
            })
        })
        .await
    }

    /// A call that uploads `file` (Discord's "Uploading Files"): a
    /// `multipart/form-data` body of `payload_json` (the JSON body, whose
    /// `attachments` names the file as id 0) and the file as `files[0]`,
    /// through the same buckets and error classes as [`Rest::call`].
    pub async fn call_with_file(
        &self,
        method: reqwest::Method,
        path: &str,
        route: &str,
        payload: &Value,
        file: &OutFile,
    ) -> Result<Value, DeliveryError> {
        let mut payload = payload.clone();
        payload["attachments"] = json!([{"id": 0, "filename": file.name}]);
        self.exchange(method, path, route, |request| {
            let invalid = |err: reqwest::Error| {
                DeliveryError::new(
                    FailureKind::InvalidPayload,
                    format!("discord: the file's type: {err}"),
                )
            };
            let json = reqwest::multipart::Part::text(payload.to_string())
                .mime_str("application/json")
                .map_err(invalid)?;
            let bytes = reqwest::multipart::Part::bytes(file.text.clone().into_bytes())
                .file_name(file.name.clone())
                .mime_str(&file.mime_type)
                .map_err(invalid)?;
            let form = reqwest::multipart::Form::new()
                .part("payload_json", json)
                .part("files[0]", bytes);
            Ok(request.multipart(form))
        })
        .await
    }

    /// Waits until `route` may go, sends the request `body` completes, and
    /// reads its answer: the JSON, or the error classified; the headers
    /// (and a 429's body) are learned either way.
    async fn exchange(
        &self,
        method: reqwest::Method,
        path: &str,
        route: &str,
        body: impl FnOnce(reqwest::RequestBuilder) -> Result<reqwest::RequestBuilder, DeliveryError>,
    ) -> Result<Value, DeliveryError> {
        loop {
            let ready = self.limits().ready_at(route);
            match ready {
                Some(at) if at > Instant::now() => tokio::time::sleep_until(at).await,
                _ => break,
            }
        }
        let what = route.split('/').take(2).collect::<Vec<_>>().join("/");
        let request = body(
            self.client
                .request(method, format!("{}{path}", self.base))
                .header(reqwest::header::AUTHORIZATION, &self.authorization),
        )?;
        let response = request
            .send()
            .await
            .map_err(|err| DeliveryError::unanswered(&format!("discord {what}"), err))?;
        let status = response.status().as_u16();
        let headers = response.headers().clone();
        let bytes = response
            .bytes()
            .await
            .map_err(|err| DeliveryError::unreadable(&format!("discord {what}"), status, err))?;
        let value: Value = if bytes.is_empty() {
            Value::Null
        } else {
            serde_json::from_slice(&bytes).unwrap_or(Value::Null)
        };
        self.limits()
            .learn(route, &headers, (status == 429).then_some(&value));
        if (200..300).contains(&status) {
            return Ok(value);
        }
        let mut err = classify(&what, status, &value);
        if status == 429 {
            err.retry_after = retry_after(&headers, &value).or(err.retry_after);
        }
        Err(err)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &str)]) -> reqwest::header::HeaderMap {
        let mut map = reqwest::header::HeaderMap::new();
        for (name, value) in pairs {
            map.insert(*name, value.parse().unwrap());
        }
        map
    }

    #[tokio::test]
    async fn buckets_and_the_global_limit_hold_requests_back() {
        let mut limits = Limits::default();
        let route = "POST /channels/1/messages";
        limits.learn(
            route,
            &headers(&[
                ("x-ratelimit-bucket", "abc"),
                ("x-ratelimit-remaining", "0"),
                ("x-ratelimit-reset-after", "2.5"),
            ]),
            None,
        );
        let at = limits.ready_at(route).unwrap();
        let left = at - Instant::now();
        assert!(left > Duration::from_millis(2400) && left <= Duration::from_millis(2500));
        // Another route of the same bucket waits too, once it is known to share it.
        limits.learn(
            "PATCH /channels/1/messages",
            &headers(&[("x-ratelimit-bucket", "abc")]),
            None,
        );
        assert!(limits.ready_at("PATCH /channels/1/messages").is_some());
        // A global 429 holds every route.
        limits.learn(
            "DELETE /channels/2/messages",
            &headers(&[("x-ratelimit-global", "true")]),
            Some(&json!({"message": "You are being rate limited.", "retry_after": 4.0, "global": true})),
        );
        assert!(
            limits.ready_at("GET /anything").unwrap() - Instant::now()
                > Duration::from_millis(3900)
        );
        // Not an interaction response, which the global limit does not bind.
        assert!(limits.ready_at("POST /interactions/77").is_none());
    }

    #[test]
    fn errors_are_classified() {
        let limited = classify(
            "POST /channels",
            429,
            &json!({"message": "You are being rate limited.", "retry_after": 1.5, "global": false}),
        );
        assert_eq!(limited.kind, FailureKind::RateLimit);
        assert_eq!(limited.retry_after, Some(Duration::from_millis(1500)));
        let gone = classify(
            "PATCH /channels",
            404,
            &json!({"message": "Unknown Message", "code": 10008}),
        );
        assert_eq!(gone.kind, FailureKind::NotFound);
        let token = classify(
            "POST /channels",
            401,
            &json!({"message": "401: Unauthorized", "code": 0}),
        );
        assert_eq!(token.kind, FailureKind::Auth);
        let long = classify(
            "POST /channels",
            400,
            &json!({"message": "Invalid Form Body", "code": 50035}),
        );
        assert_eq!(long.kind, FailureKind::InvalidPayload);
        let down = classify("POST /channels", 502, &Value::Null);
        assert_eq!(down.kind, FailureKind::Transient);
    }
}
