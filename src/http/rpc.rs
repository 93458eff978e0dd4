//! JSON-RPC 2.0 at `/v1/rpc` (jsonrpsee, mounted in the axum router): the REST
//! operations as methods, over a WebSocket or one HTTP POST per call, and
//! subscriptions to run and session events over a WebSocket.

use std::sync::Arc;

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use jsonrpsee::Methods;
use jsonrpsee::server::RegisterMethodError;
use jsonrpsee::server::{
    PendingSubscriptionSink, RpcModule, Server, ServerConfig, ServerHandle, StopHandle,
    TowerServiceBuilder, stop_channel,
};
use jsonrpsee::types::{ErrorObjectOwned, Params};
use serde::Deserialize;
use serde::de::DeserializeOwned;
use tokio_util::sync::CancellationToken;
use tower::Service as _;
use tower::layer::util::Identity;

use super::AppState;
use super::api::{self, Answer, Api, CreateSession, ListSessions, Prompt};
use super::error::{ApiError, rpc_error};
use super::events::{self, Cursor, Scope};
use crate::core::quote::clip_message;
use crate::core::session::ContentPart;

/// What each method handler can reach.
pub struct Context {
    api: Api,
    /// Cancelled when the server stops: ends subscriptions.
    closing: CancellationToken,
}

/// The jsonrpsee service, built per request from these parts.
pub struct Mount {
    builder: TowerServiceBuilder<Identity, Identity>,
    methods: Methods,
    stop: StopHandle,
    /// Stops the WebSocket connections when the server stops.
    pub handle: ServerHandle,
    /// Largest POST body read, in bytes.
    body_limit: usize,
}

impl Mount {
    pub fn new(
        api: Api,
        closing: CancellationToken,
        body_limit: usize,
    ) -> Result<Self, RegisterMethodError> {
        let limit = u32::try_from(body_limit).unwrap_or(u32::MAX);
        let config = ServerConfig::builder()
            .max_request_body_size(limit)
            .max_response_body_size(u32::MAX)
            .max_connections(10_000)
            .build();
        let (stop, handle) = stop_channel();
        Ok(Self {
            builder: Server::builder().set_config(config).to_service_builder(),
            methods: module(Context { api, closing })?.into(),
            stop,
            handle,
            body_limit,
        })
    }
}

/// `GET|POST /v1/rpc`: hands the request (a WebSocket upgrade, or a call in
/// a POST body) to jsonrpsee. The bearer token was checked before.
///
/// What jsonrpsee would refuse in its own words (plain text, or a JSON-RPC
/// parse error with a 4xx status) is refused here first, or rewritten, in the
/// API's one error shape: a GET that is no WebSocket handshake is `400`
/// naming the header; a POST body is JSON whatever its `Content-Type` says,
/// as for every other route; a body that is not JSON is `400`.
pub async fn handle(State(state): State<AppState>, mut request: Request) -> Response {
    if request.method() == Method::GET {
        if let Err(err) = check_upgrade(request.headers(), "/v1/rpc") {
            return err.into_response();
        }
        // None are offered; a malformed offer would fail the handshake.
        request.headers_mut().remove(SEC_WEBSOCKET_EXTENSIONS);
    } else {
        request = match json_body(request, state.shared.rpc.body_limit).await {
            Ok(request) => request,
            Err(err) => return err.into_response(),
        };
    }
    let rpc = &state.shared.rpc;
    let mut service = rpc
        .builder
        .clone()
        .build(rpc.methods.clone(), rpc.stop.clone());
    let response = match service.call(request).await {
        Ok(response) => response.map(Body::new),
        Err(err) => {
            return ApiError::internal(format!("JSON-RPC service failed: {err}")).into_response();
        }
    };
    match response.status() {
        StatusCode::OK | StatusCode::SWITCHING_PROTOCOLS => response,
        StatusCode::BAD_REQUEST => {
            ApiError::bad_request("invalid JSON body: not a JSON-RPC request or batch")
                .into_response()
        }
        StatusCode::PAYLOAD_TOO_LARGE => ApiError::too_large(
            "the request body is larger than the server accepts (`[http] body_limit_bytes`)",
        )
        .into_response(),
        status => {
            tracing::error!(%status, "the JSON-RPC service refused a request");
            ApiError::internal(format!("the JSON-RPC service answered {status}")).into_response()
        }
    }
}

const SEC_WEBSOCKET_EXTENSIONS: &str = "sec-websocket-extensions";

/// A POST's body, read and checked to be JSON (an object or an array, as a
/// call or a batch is), labelled as JSON for jsonrpsee whatever the client
/// said: jsonrpsee would answer a body that is not JSON in its own words.
async fn json_body(request: Request, limit: usize) -> Result<Request, ApiError> {
    let (mut parts, body) = request.into_parts();
    let bytes = axum::body::to_bytes(body, limit).await.map_err(|_| {
        ApiError::too_large(
            "the request body is larger than the server accepts (`[http] body_limit_bytes`)",
        )
    })?;
    if let Err(err) = serde_json::from_slice::<serde::de::IgnoredAny>(&bytes) {
        let message = err.to_string();
        let message = message.split(" at line ").next().unwrap_or(&message);
        return Err(ApiError::bad_request(format!(
            "invalid JSON body: {}",
            clip_message(message)
        )));
    }
    if !matches!(
        bytes.iter().find(|b| !b.is_ascii_whitespace()),
        Some(b'{' | b'[')
    ) {
        return Err(ApiError::bad_request(
            "invalid JSON body: expected a JSON-RPC call (an object) or a batch (an array)",
        ));
    }
    parts.headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    parts.headers.remove(header::CONTENT_LENGTH);
    Ok(Request::from_parts(parts, Body::from(bytes)))
}

/// The headers of a WebSocket handshake (RFC 6455), as the OpenAPI document
/// describes them.
pub(super) fn check_upgrade(headers: &HeaderMap, path: &str) -> Result<(), ApiError> {
    let value = |name: &str| {
        headers
            .get(name)
            .map(|v| v.to_str().unwrap_or_default())
            .ok_or_else(|| {
                ApiError::bad_request(if path == "/v1/rpc" {
                    format!(
                        "`{name}`: missing; `GET /v1/rpc` is a WebSocket handshake (send JSON-RPC calls with POST)"
                    )
                } else {
                    format!("`{name}`: missing; `GET {path}` is a WebSocket handshake")
                })
            })
    };
    let bad = |name: &str, expected: &str, got: &str| {
        ApiError::bad_request(format!(
            "`{name}`: expected {expected}, got {}",
            api::shown(got)
        ))
    };
    let upgrade = value("Upgrade")?;
    if !upgrade.eq_ignore_ascii_case("websocket") {
        return Err(bad("Upgrade", "websocket", upgrade));
    }
    let connection = value("Connection")?;
    let tokens: Vec<&str> = connection
        .split(',')
        .map(|t| t.trim_matches([' ', '\t']))
        .collect();
    let token = |t: &&str| {
        !t.is_empty()
            && t.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
    };
    if !tokens.iter().all(token) || !tokens.iter().any(|t| t.eq_ignore_ascii_case("upgrade")) {
        return Err(bad(
            "Connection",
            "a list of tokens with upgrade",
            connection,
        ));
    }
    let version = value("Sec-WebSocket-Version")?;
    if version != "13" {
        return Err(bad("Sec-WebSocket-Version", "13", version));
    }
    let key = value("Sec-WebSocket-Key")?;
    if !websocket_key(key) {
        return Err(bad("Sec-WebSocket-Key", "16 bytes in base64", key));
    }
    Ok(())
}

/// 16 bytes in padded base64: 21 characters, one that ends the bits, `==`.
fn websocket_key(key: &str) -> bool {
    let bytes = key.as_bytes();
    bytes.len() == 24
        && bytes[..21]
            .iter()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'+' | b'/'))
        && matches!(bytes[21], b'A' | b'Q' | b'g' | b'w')
        && &bytes[22..] == b"=="
}

fn params<T: DeserializeOwned>(params: &Params<'_>) -> Result<T, ErrorObjectOwned> {
    api::parse(params.as_str().unwrap_or("{}").as_bytes()).map_err(rpc_error)
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SessionRef {
    session_id: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RunRef {
    run_id: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct TapeParams {
    run_id: String,
    #[serde(default)]
    from_seq: u64,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PromptParams {
    session_id: String,
    prompt: Option<String>,
    content: Option<Vec<ContentPart>>,
    #[serde(default)]
    wait: bool,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct CommandParams {
    session_id: String,
    command: super::api::CommandName,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct ApprovalsParams {
    session_id: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ReplyParams {
    question_id: String,
    answer: Option<String>,
    #[serde(default)]
    decline: bool,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct AnswerParams {
    approval_id: String,
    decision: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RunSubscribe {
    run_id: String,
    /// Resume after this event of the run.
    after_seq: Option<u64>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SessionSubscribe {
    session_id: String,
    /// Resume after this event (`RUN_ID:SEQ`).
    after: Option<String>,
}

/// What the server reports of the store: the receipt chain, the health
/// summary.
fn reports(module: &mut RpcModule<Context>) -> Result<(), RegisterMethodError> {
    module.register_async_method("receipts.verify", |_, cx, _| async move {
        cx.api.verify().await.map_err(rpc_error)
    })?;
    module.register_async_method("health.summary", |p, cx, _| async move {
        let request: super::health::SummaryQuery = if p.as_str().is_some() {
            params(&p)?
        } else {
            super::health::SummaryQuery::default()
        };
        cx.api.health_summary(request).await.map_err(rpc_error)
    })?;
    Ok(())
}

fn module(context: Context) -> Result<RpcModule<Context>, RegisterMethodError> {
    let mut module = RpcModule::new(context);
    module.register_async_method("sessions.create", |p, cx, _| async move {
        let request: CreateSession = params(&p)?;
        cx.api.create_session(request).await.map_err(rpc_error)
    })?;
    module.register_async_method("sessions.list", |p, cx, _| async move {
        let request: ListSessions = if p.as_str().is_some() {
            params(&p)?
        } else {
            ListSessions::default()
        };
        cx.api.list_sessions(request).await.map_err(rpc_error)
    })?;
    module.register_async_method("sessions.get", |p, cx, _| async move {
        let request: SessionRef = params(&p)?;
        cx.api.session(&request.session_id).await.map_err(rpc_error)
    })?;
    module.register_async_method("sessions.prompt", |p, cx, _| async move {
        let request: PromptParams = params(&p)?;
        let prompt = Prompt {
            prompt: request.prompt,
            content: request.content,
        };
        cx.api
            .prompt(&request.session_id, prompt, request.wait)
            .await
            .map_err(rpc_error)
    })?;
    module.register_async_method("sessions.command", |p, cx, _| async move {
        let request: CommandParams = params(&p)?;
        let command = super::api::RunCommand {
            command: request.command,
        };
        cx.api
            .command(&request.session_id, command)
            .await
            .map_err(rpc_error)
    })?;
    module.register_async_method("runs.list", |p, cx, _| async move {
        let request: SessionRef = params(&p)?;
        cx.api.runs(&request.session_id).await.map_err(rpc_error)
    })?;
    module.register_async_method("runs.get", |p, cx, _| async move {
        let request: RunRef = params(&p)?;
        cx.api.run(&request.run_id).await.map_err(rpc_error)
    })?;
    module.register_async_method("runs.cancel", |p, cx, _| async move {
        let request: RunRef = params(&p)?;
        cx.api.cancel(&request.run_id).await.map_err(rpc_error)
    })?;
    module.register_async_method("runs.tape", |p, cx, _| async move {
        let request: TapeParams = params(&p)?;
        cx.api
            .tape(&request.run_id, request.from_seq)
            .await
            .map_err(rpc_error)
    })?;
    module.register_async_method("approvals.list", |p, cx, _| async move {
        let request: ApprovalsParams = if p.as_str().is_some() {
            params(&p)?
        } else {
            ApprovalsParams::default()
        };
        cx.api
            .approvals(request.session_id.as_deref())
            .await
            .map_err(rpc_error)
    })?;
    module.register_async_method("approvals.answer", |p, cx, _| async move {
        let request: AnswerParams = params(&p)?;
        cx.api
            .answer(
                &request.approval_id,
                Answer {
                    decision: request.decision,
                },
            )
            .await
            .map_err(rpc_error)
    })?;
    module.register_async_method("questions.list", |p, cx, _| async move {
        let request: ApprovalsParams = if p.as_str().is_some() {
            params(&p)?
        } else {
            ApprovalsParams::default()
        };
        cx.api
            .questions(request.session_id.as_deref())
            .await
            .map_err(rpc_error)
    })?;
    module.register_async_method("questions.answer", |p, cx, _| async move {
        let request: ReplyParams = params(&p)?;
        cx.api
            .reply(
                &request.question_id,
                super::api::Reply {
                    answer: request.answer,
                    decline: request.decline,
                },
            )
            .await
            .map_err(rpc_error)
    })?;
    reports(&mut module)?;
    module.register_subscription(
        "runs.subscribe",
        "runs.event",
        "runs.unsubscribe",
        |p, pending, cx, _| async move {
            let scope = params::<RunSubscribe>(&p).and_then(|request| {
                let after = match request.after_seq {
                    Some(seq) => Some(Cursor {
                        run: api::run_id(&request.run_id).map_err(rpc_error)?,
                        seq,
                    }),
                    None => None,
                };
                Ok((Scope::Run(request.run_id), after))
            });
            stream(pending, cx, scope).await;
        },
    )?;
    module.register_subscription(
        "sessions.subscribe",
        "sessions.event",
        "sessions.unsubscribe",
        |p, pending, cx, _| async move {
            let scope = params::<SessionSubscribe>(&p).and_then(|request| {
                let after = match request.after.as_deref() {
                    Some(text) => Some(Cursor::parse(text).map_err(|mut err| {
                        err.message = err.message.replace("`Last-Event-ID`", "`after`");
                        rpc_error(err)
                    })?),
                    None => None,
                };
                Ok((Scope::Session(request.session_id), after))
            });
            stream(pending, cx, scope).await;
        },
    )?;
    Ok(module)
}

/// Sends a stream's events as notifications until it ends or the client
/// unsubscribes or goes away.
async fn stream(
    pending: PendingSubscriptionSink,
    cx: Arc<Context>,
    scope: Result<(Scope, Option<Cursor>), ErrorObjectOwned>,
) {
    let (scope, after) = match scope {
        Ok(scope) => scope,
        Err(err) => return pending.reject(err).await,
    };
    let mut events = match events::follow(&cx.api.runtime, scope, after, cx.closing.clone()).await {
        Ok(events) => events,
        Err(err) => return pending.reject(rpc_error(err)).await,
    };
    let Ok(sink) = pending.accept().await else {
        return;
    };
    loop {
        let record = tokio::select! {
            record = events.recv() => record,
            _ = sink.closed() => return,
        };
        let Some(record) = record else { return };
        let message = match serde_json::value::to_raw_value(&*record) {
            Ok(message) => message,
            Err(err) => {
                tracing::error!(error = %err, "cannot encode an event");
                return;
            }
        };
        if sink.send(message).await.is_err() {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    fn handshake(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut headers = HeaderMap::new();
        for (name, value) in pairs {
            headers.insert(
                *name,
                HeaderValue::from_str(value).unwrap_or_else(|e| panic!("{e}")),
            );
        }
        headers
    }

    const GOOD: [(&str, &str); 4] = [
        ("upgrade", "websocket"),
        ("connection", "keep-alive, Upgrade"),
        ("sec-websocket-version", "13"),
        ("sec-websocket-key", "dGhlIHNhbXBsZSBub25jZQ=="),
    ];

    #[test]
    fn a_websocket_handshake_passes_and_each_bad_header_is_named() {
        assert_eq!(check_upgrade(&handshake(&GOOD), "/v1/rpc"), Ok(()));
        let cases = [
            (0, "WebSockets", "`Upgrade`"),
            (1, "keep-alive", "`Connection`"),
            (1, "upgrade,", "`Connection`"),
            (2, "8", "`Sec-WebSocket-Version`"),
            (3, "dGhlIHNhbXBsZSBub25jZQ=", "`Sec-WebSocket-Key`"),
            (3, "dGhlIHNhbXBsZSBub25jZR==", "`Sec-WebSocket-Key`"),
        ];
        for (index, value, named) in cases {
            let mut pairs = GOOD;
            pairs[index].1 = value;
            let message = check_upgrade(&handshake(&pairs), "/v1/rpc")
                .err()
                .map(|e| e.message)
                .unwrap_or_default();
            assert!(message.starts_with(named), "{value}: {message}");
        }
        for missing in 0..GOOD.len() {
            let pairs: Vec<_> = GOOD
                .iter()
                .enumerate()
                .filter(|(i, _)| *i != missing)
                .map(|(_, pair)| *pair)
                .collect();
            let message = check_upgrade(&handshake(&pairs), "/v1/rpc")
                .err()
                .map(|e| e.message)
                .unwrap_or_default();
            assert!(message.contains("missing"), "{message}");
        }
    }
}
