//! Chat platforms' requests to their channels: `POST
//! /channels/{name}/{endpoint}` on the one listener of `pincer serve --http`
//! (the webhook channel's deliveries today), handed through a port to the
//! channel face. No bearer token: each adapter checks its platform's own
//! signature, and the rate limit of API tokens does not apply.

use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use futures::future::BoxFuture;
use serde_json::{Value, json};

use super::AppState;

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
}

/// `POST /channels/{name}/{endpoint}`.
pub async fn handle(
    State(state): State<AppState>,
    Path((name, endpoint)): Path<(String, String)>,
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
        .handle(name, endpoint, headers, body.to_vec())
        .await;
    let status = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    (status, axum::Json(value)).into_response()
}
