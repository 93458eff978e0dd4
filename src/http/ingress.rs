//! The chat channels through the HTTP face, by a port to the channel face:
//! - platforms' requests to their channels, `POST
//!   /channels/{name}/ENDPOINT` on the one listener of `pincer serve
//!   --http`, a route per endpoint (`webhook`: the webhook channel's
//!   deliveries). No bearer token: each
//!   adapter checks its platform's own signature, and the rate limit of API
//!   tokens does not apply;
//!   A channel may also have a listener of its own (Slack's `listen`,
//!   [`serve_own_listener`]), where every `POST` is its one endpoint;
//! - messages sent first, `POST /v1/channels/{name}/messages` (with the
//!   token), through the channel's outbox;
//! - the outbox read (`GET /v1/channels/{name}/outbox`) and an operator's
//!   decision about a message left `unknown_after_send` (`POST
//!   /v1/channels/{name}/outbox/{intent_id}`).

use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use futures::future::BoxFuture;
use serde_json::{Value, json};

use super::AppState;
use super::error::ApiError;
use super::routes::{JsonBody, QueryParams};
use crate::core::channel::{IntentStatus, Resolution, SendIntent};
use crate::views::{ChannelList, ChannelOutbox, ChannelPairs, OutboxIntent, PairRevoked};

/// The paths under which channels receive.
pub const PREFIX: &str = "/channels/";

/// The channels this process serves that receive over HTTP.
pub trait ChannelIngress: Send + Sync {
    /// One request for channel `name` at `endpoint`: a status and a JSON
    /// body. A channel not served here answers 404; one this process does
    /// not (yet) receive for answers 503, so the platform sends it again.
    fn handle(
        &self,
        name: String,
        endpoint: String,
        headers: HeaderMap,
        body: Vec<u8>,
    ) -> BoxFuture<'static, (u16, Value)>;

    /// Records a message for channel `name` (served by this process): the
    /// send intent's JSON, or 404 (no such channel here), 400 (a target
    /// the platform cannot read) or 503 (not recorded).
    fn send(
        &self,
        name: String,
        message: SendMessage,
    ) -> BoxFuture<'static, Result<SendIntent, Refusal>>;

    /// Every channel this process runs.
    fn list(&self) -> BoxFuture<'static, ChannelList>;

    /// The outbox of channel `name` (run by this process, served here or
    /// not), most recently changed first: 404 (no such channel here) or
    /// 503 (the store did not answer).
    fn outbox(
        &self,
        name: String,
        status: Option<IntentStatus>,
        limit: usize,
    ) -> BoxFuture<'static, Result<ChannelOutbox, Refusal>>;

    /// Records an operator's decision about an `unknown_after_send` intent
    /// of channel `name`: the intent as it is now, or 404 (no such channel
    /// or intent), 409 (not `unknown_after_send`) or 503.
    fn resolve(
        &self,
        name: String,
        intent_id: String,
        resolution: Resolution,
    ) -> BoxFuture<'static, Result<OutboxIntent, Refusal>>;

    /// Who may talk to channel `name` (served by this process): 404 (no
    /// such channel here) or 503 (starting, or the store did not answer).
    fn pairs(&self, name: String) -> BoxFuture<'static, Result<ChannelPairs, Refusal>>;

    /// Revokes a paired sender of channel `name`: 404 (no such channel
    /// here, or the sender is not paired) or 503.
    fn revoke(
        &self,
        name: String,
        sender: String,
    ) -> BoxFuture<'static, Result<PairRevoked, Refusal>>;
}

/// `GET /v1/channels`: the channels this process runs, their health and
/// outboxes.
pub async fn list(State(state): State<AppState>) -> Response {
    match state.shared.ports.channels.clone() {
        Some(channels) => axum::Json(channels.list().await).into_response(),
        None => axum::Json(ChannelList {
            channels: Vec::new(),
        })
        .into_response(),
    }
}

/// Why a message could not be sent: a status and what to say.
pub type Refusal = (u16, String);

/// `POST /v1/channels/{name}/messages`.
#[derive(Debug, serde::Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SendMessage {
    /// The chat: CHAT or CHAT/THREAD in the platform's ids
    #[schemars(length(min = 1), regex(pattern = r"\S"))]
    pub to: String,
    /// The message, in Markdown (at most 16,384 characters and 64 KiB)
    #[schemars(length(min = 1, max = 16384), regex(pattern = r"\S"))]
    pub text: String,
    /// An idempotency key: the same key again sends nothing more
    #[serde(default)]
    #[schemars(
        length(min = 1, max = 200),
        regex(pattern = "^[^\u{0}-\u{1f}\u{7f}-\u{9f}]+$")
    )]
    pub id: Option<String>,
}

/// The longest message accepted, in bytes.
const MAX_TEXT: usize = 64 * 1024;

/// `POST /v1/channels/{name}/messages`: recorded as a send intent (202,
/// the intent), delivered by the process serving the channel's account.
pub async fn send(
    State(state): State<AppState>,
    Path(name): Path<String>,
    JsonBody(message): JsonBody<SendMessage>,
) -> Response {
    if message.text.trim().is_empty() {
        return ApiError::bad_request("text: the message is empty").into_response();
    }
    if message.text.len() > MAX_TEXT {
        return ApiError::bad_request(format!("text: longer than {MAX_TEXT} bytes"))
            .into_response();
    }
    if let Some(id) = &message.id
        && (id.is_empty() || id.len() > 200 || id.chars().any(char::is_control))
    {
        return ApiError::bad_request(
            "id: expected 1 to 200 characters without control characters",
        )
        .into_response();
    }
    let Some(channels) = state.shared.ports.channels.clone() else {
        return ApiError::not_found("no chat channel runs in this process").into_response();
    };
    match channels.send(name, message).await {
        Ok(intent) => (StatusCode::ACCEPTED, axum::Json(intent)).into_response(),
        Err((404, message)) => ApiError::not_found(message).into_response(),
        Err((400, message)) => ApiError::bad_request(message).into_response(),
        Err((_, message)) => ApiError::unavailable(message).into_response(),
    }
}

/// `GET /v1/channels/{name}/outbox`'s query.
#[derive(Debug, Default, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OutboxQuery {
    /// Only intents in this status; empty: any.
    pub status: Option<String>,
    pub limit: Option<usize>,
}

/// The most intents one outbox read returns.
pub const MAX_OUTBOX: usize = 500;

/// `GET /v1/channels/{name}/outbox`: the channel's send intents, most
/// recently changed first.
pub async fn outbox(
    State(state): State<AppState>,
    Path(name): Path<String>,
    QueryParams(query): QueryParams<OutboxQuery>,
) -> Response {
    let status = match query.status.as_deref() {
        None | Some("") => None,
        Some(name) => match IntentStatus::parse(name) {
            Some(status) => Some(status),
            None => {
                let known: Vec<&str> = IntentStatus::ALL.iter().map(|s| s.as_str()).collect();
                return ApiError::bad_request(format!(
                    "`status`: expected one of {}, got {}",
                    known.join(", "),
                    crate::core::quote::quote(name)
                ))
                .into_response();
            }
        },
    };
    let limit = query.limit.unwrap_or(50);
    if limit == 0 || limit > MAX_OUTBOX {
        return ApiError::bad_request(format!("`limit`: expected 1 to {MAX_OUTBOX}, got {limit}"))
            .into_response();
    }
    let Some(channels) = state.shared.ports.channels.clone() else {
        return ApiError::not_found("no chat channel runs in this process").into_response();
    };
    match channels.outbox(name, status, limit).await {
        Ok(outbox) => axum::Json(outbox).into_response(),
        Err(refusal) => refused(refusal),
    }
}

/// `POST /v1/channels/{name}/outbox/{intent_id}`.
#[derive(Debug, serde::Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ResolveIntent {
    /// What the chat shows: `arrived` (record it sent), `resend` (send it
    /// again) or `drop` (leave it unsent: cancelled)
    pub resolve: Resolution,
}

/// `POST /v1/channels/{name}/outbox/{intent_id}`: an operator's decision
/// about an `unknown_after_send` intent, after checking the chat.
pub async fn resolve(
    State(state): State<AppState>,
    Path((name, intent_id)): Path<(String, String)>,
    JsonBody(body): JsonBody<ResolveIntent>,
) -> Response {
    let Some(channels) = state.shared.ports.channels.clone() else {
        return ApiError::not_found("no chat channel runs in this process").into_response();
    };
    match channels.resolve(name, intent_id, body.resolve).await {
        Ok(intent) => axum::Json(intent).into_response(),
        Err(refusal) => refused(refusal),
    }
}

/// `GET /v1/channels/{name}/pairs`: the channel's `allow` list, whether
/// pairing is open and its paired senders.
pub async fn pairs(State(state): State<AppState>, Path(name): Path<String>) -> Response {
    let Some(channels) = state.shared.ports.channels.clone() else {
        return ApiError::not_found("no chat channel runs in this process").into_response();
    };
    match channels.pairs(name).await {
        Ok(pairs) => axum::Json(pairs).into_response(),
        Err(refusal) => refused(refusal),
    }
}

/// `DELETE /v1/channels/{name}/pairs/{sender}`: the sender's next message
/// is a stranger's.
pub async fn revoke(
    State(state): State<AppState>,
    Path((name, sender)): Path<(String, String)>,
) -> Response {
    let Some(channels) = state.shared.ports.channels.clone() else {
        return ApiError::not_found("no chat channel runs in this process").into_response();
    };
    match channels.revoke(name, sender).await {
        Ok(revoked) => axum::Json(revoked).into_response(),
        Err(refusal) => refused(refusal),
    }
}

fn refused((status, message): Refusal) -> Response {
    match status {
        404 => ApiError::not_found(message).into_response(),
        409 => ApiError::conflict(message).into_response(),
        400 => ApiError::bad_request(message).into_response(),
        _ => ApiError::unavailable(message).into_response(),
    }
}

/// `POST /channels/{name}/webhook`: the webhook channel's deliveries.
pub async fn webhook(
    State(state): State<AppState>,
    Path(name): Path<String>,
    headers: HeaderMap,
    body: Result<Bytes, axum::extract::rejection::BytesRejection>,
) -> Response {
    match body {
        Ok(body) => handle(state, name, "webhook", headers, body).await,
        Err(rejection) => rejected(&rejection),
    }
}

/// `POST /channels/{name}/events`: Slack's Events API (events and
/// interactions, signed with the app's signing secret).
pub async fn slack_events(
    State(state): State<AppState>,
    Path(name): Path<String>,
    headers: HeaderMap,
    body: Result<Bytes, axum::extract::rejection::BytesRejection>,
) -> Response {
    match body {
        Ok(body) => handle(state, name, "events", headers, body).await,
        Err(rejection) => rejected(&rejection),
    }
}

/// A platform's request for channel `name` at `endpoint` (each endpoint a
/// route of its own, so an unknown one is the router's 404).
async fn handle(
    state: AppState,
    name: String,
    endpoint: &str,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let Some(channels) = state.shared.ports.channels.clone() else {
        return (
            StatusCode::NOT_FOUND,
            axum::Json(json!({"error": "no channel receives over HTTP in this process"})),
        )
            .into_response();
    };
    let (status, value) = channels
        .handle(name, endpoint.to_owned(), headers, body.to_vec())
        .await;
    channel_reply(status, value)
}

/// A channel's answer: its JSON, or an empty body for `null` (a Slack
/// slash command's acknowledgement, which Slack would show otherwise).
fn channel_reply(status: u16, value: Value) -> Response {
    let status = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    if value.is_null() {
        return status.into_response();
    }
    (status, axum::Json(value)).into_response()
}

/// Serves a channel's own listener (Slack's `listen`) until `shutdown`:
/// every `POST`, whatever its path, is a request for channel `name` at
/// `endpoint`, with the HTTP face's body limit; any other method is 405.
/// No bearer token, as at `/channels/{name}/…`: the adapter checks the
/// platform's signature.
pub async fn serve_own_listener(
    listener: tokio::net::TcpListener,
    name: String,
    endpoint: &'static str,
    ingress: std::sync::Arc<dyn ChannelIngress>,
    body_limit: usize,
    shutdown: tokio_util::sync::CancellationToken,
) -> std::io::Result<()> {
    let receive =
        move |headers: HeaderMap, body: Result<Bytes, axum::extract::rejection::BytesRejection>| {
            let ingress = ingress.clone();
            let name = name.clone();
            async move {
                match body {
                    Ok(body) => {
                        let (status, value) = ingress
                            .handle(name, endpoint.to_owned(), headers, body.to_vec())
                            .await;
                        channel_reply(status, value)
                    }
                    Err(rejection) => rejected(&rejection),
                }
            }
        };
    let app = axum::Router::new()
        .fallback(axum::routing::post(receive))
        .layer(axum::extract::DefaultBodyLimit::max(body_limit))
        .layer(tower_http::trace::TraceLayer::new_for_http().make_span_with(super::request_span));
    axum::serve(listener, app)
        .with_graceful_shutdown(async move { shutdown.cancelled().await })
        .await
}

/// A body that could not be read, as JSON: too large names the setting.
fn rejected(rejection: &axum::extract::rejection::BytesRejection) -> Response {
    let status = rejection.status();
    let message = if status == StatusCode::PAYLOAD_TOO_LARGE {
        "the body is larger than the server accepts (`[http] body_limit_bytes`)".to_owned()
    } else {
        crate::core::quote::clip_message(&rejection.body_text())
    };
    (status, axum::Json(json!({"error": message}))).into_response()
}
