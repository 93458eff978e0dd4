//! The REST routes: one table, from which the router is built and against
//! which the OpenAPI document is checked.

use std::convert::Infallible;

use axum::body::Bytes;
use axum::extract::{FromRequest, FromRequestParts, Path, Request, State};
use axum::http::request::Parts;
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::response::sse::{Event as SseEvent, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::{MethodFilter, MethodRouter, get, on, post};
use futures::Stream;
use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use super::AppState;
use super::api::{
    self, Answer, CreateSession, ListMemory, ListSessions, ListSkills, MemoryPatch, NewMemory,
    Prompt,
};
use super::error::ApiError;
use super::events::{self, Cursor, Scope};
use super::metrics;
use crate::core::quote::{clip_message, quote};

/// The OpenAPI document of these routes, served at `/openapi.json`.
pub const OPENAPI: &str = include_str!("../../schema/openapi.json");

/// One route: what the router serves and what the OpenAPI document must describe.
pub struct Route {
    pub method: Method,
    pub path: &'static str,
    handler: MethodRouter<AppState>,
}

fn route(method: Method, path: &'static str, handler: MethodRouter<AppState>) -> Route {
    Route {
        method,
        path,
        handler,
    }
}

/// Every route the server answers.
pub fn table() -> Vec<Route> {
    vec![
        route(Method::GET, "/healthz", get(healthz)),
        route(Method::GET, "/readyz", get(readyz)),
        route(Method::GET, "/metrics", get(metrics_text)),
        route(Method::GET, "/openapi.json", get(openapi)),
        route(Method::POST, "/v1/sessions", post(create_session)),
        route(Method::GET, "/v1/sessions", get(list_sessions)),
        route(Method::GET, "/v1/sessions/{session_id}", get(session)),
        route(
            Method::DELETE,
            "/v1/sessions/{session_id}",
            on(MethodFilter::DELETE, delete_session),
        ),
        route(
            Method::POST,
            "/v1/sessions/{session_id}/prompt",
            post(prompt),
        ),
        route(Method::POST, "/v1/sessions/{session_id}/steer", post(steer)),
        route(Method::GET, "/v1/sessions/{session_id}/runs", get(runs)),
        route(
            Method::GET,
            "/v1/sessions/{session_id}/context",
            get(session_context),
        ),
        route(
            Method::GET,
            "/v1/sessions/{session_id}/events",
            get(session_events),
        ),
        route(
            Method::GET,
            "/v1/sessions/{session_id}/approvals",
            get(session_approvals),
        ),
        route(Method::GET, "/v1/runs/{run_id}", get(run)),
        route(Method::POST, "/v1/runs/{run_id}/cancel", post(cancel)),
        route(Method::GET, "/v1/runs/{run_id}/tape", get(tape)),
        route(Method::GET, "/v1/runs/{run_id}/events", get(run_events)),
        route(Method::GET, "/v1/memory", get(list_memory)),
        route(Method::POST, "/v1/memory", post(add_memory)),
        route(Method::GET, "/v1/memory/{memory_id}", get(memory_item)),
        route(
            Method::PATCH,
            "/v1/memory/{memory_id}",
            on(MethodFilter::PATCH, edit_memory),
        ),
        route(
            Method::DELETE,
            "/v1/memory/{memory_id}",
            on(MethodFilter::DELETE, forget_memory),
        ),
        route(Method::GET, "/v1/skills", get(list_skills)),
        route(Method::GET, "/v1/skills/{name}", get(skill)),
        route(Method::GET, "/v1/approvals", get(approvals)),
        route(Method::POST, "/v1/approvals/{approval_id}", post(answer)),
        route(Method::GET, "/v1/questions", get(questions)),
        route(
            Method::GET,
            "/v1/sessions/{session_id}/questions",
            get(session_questions),
        ),
        route(Method::POST, "/v1/questions/{question_id}", post(reply)),
        route(
            Method::GET,
            "/v1/rpc",
            on(MethodFilter::GET, super::rpc::handle),
        ),
        route(Method::GET, "/acp", get(super::acp::handle)),
        route(Method::GET, "/v1/channels", get(super::ingress::list)),
        route(
            Method::POST,
            "/v1/channels/{name}/messages",
            post(super::ingress::send),
        ),
        route(
            Method::POST,
            "/channels/{name}/webhook",
            post(super::ingress::webhook),
        ),
        route(Method::GET, "/v1/schedules", get(super::schedules::list)),
        route(Method::POST, "/v1/schedules", post(super::schedules::add)),
        route(
            Method::GET,
            "/v1/schedules/{schedule_id}",
            get(super::schedules::show),
        ),
        route(
            Method::DELETE,
            "/v1/schedules/{schedule_id}",
            on(MethodFilter::DELETE, super::schedules::remove),
        ),
        route(
            Method::POST,
            "/v1/rpc",
            on(MethodFilter::POST, super::rpc::handle),
        ),
    ]
}

/// (method, path) of every route, as the OpenAPI document names them.
pub fn paths() -> Vec<(String, &'static str)> {
    table()
        .into_iter()
        .map(|r| (r.method.as_str().to_ascii_lowercase(), r.path))
        .collect()
}

/// Paths that need no token: liveness and readiness probes, and chat
/// platforms' requests to their channels (signed their own way).
pub fn is_public(path: &str) -> bool {
    matches!(path, "/healthz" | "/readyz") || path.starts_with(super::ingress::PREFIX)
}

pub fn router() -> axum::Router<AppState> {
    table().into_iter().fold(axum::Router::new(), |router, r| {
        router.route(r.path, r.handler)
    })
}

/// A JSON request body; bad JSON and oversized bodies become API errors.
pub struct JsonBody<T>(pub T);

impl<T: DeserializeOwned, S: Send + Sync> FromRequest<S> for JsonBody<T> {
    type Rejection = ApiError;

    async fn from_request(request: Request, state: &S) -> Result<Self, Self::Rejection> {
        let bytes = Bytes::from_request(request, state)
            .await
            .map_err(|rejection| {
                if rejection.status() == StatusCode::PAYLOAD_TOO_LARGE {
                    ApiError::too_large("the request body is larger than the server accepts (`[http] body_limit_bytes`)")
                } else {
                    ApiError::bad_request(clip_message(&rejection.body_text()))
                }
            })?;
        Ok(Self(api::parse(&bytes)?))
    }
}

/// Query parameters; unknown or malformed ones are API errors.
pub struct QueryParams<T>(pub T);

impl<T: DeserializeOwned, S: Send + Sync> FromRequestParts<S> for QueryParams<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Self, Self::Rejection> {
        let query = parts.uri.query().unwrap_or_default();
        let deserializer =
            serde_urlencoded::Deserializer::new(form_urlencoded::parse(query.as_bytes()));
        serde_path_to_error::deserialize(deserializer)
            .map(QueryParams)
            .map_err(|err| {
                let path = err.path().to_string();
                let inner = clip_message(&err.into_inner().to_string());
                if path == "." || path.is_empty() {
                    ApiError::bad_request(format!("query: {inner}"))
                } else {
                    ApiError::bad_request(format!("`{}`: {inner}", quote(&path)))
                }
            })
    }
}

async fn healthz() -> Response {
    axum::Json(json!({ "status": "ok" })).into_response()
}

/// How long `/readyz` waits for the store.
const READY_WAIT: std::time::Duration = std::time::Duration::from_secs(3);

async fn readyz(State(state): State<AppState>) -> Result<Response, ApiError> {
    if state.shared.closing.is_cancelled() {
        return Err(ApiError::unavailable("the server is shutting down"));
    }
    // A store that does not answer (a database server down) fails the
    // check rather than hanging it; the store reconnects by itself.
    let flushed = tokio::time::timeout(READY_WAIT, state.shared.api.runtime.flush())
        .await
        .map_err(|_| {
            ApiError::unavailable(format!(
                "the store did not answer within {} s",
                READY_WAIT.as_secs()
            ))
        })?;
    flushed.map_err(|err| ApiError::unavailable(format!("the store is not writable: {err}")))?;
    Ok(axum::Json(json!({ "status": "ready" })).into_response())
}

async fn metrics_text(State(state): State<AppState>) -> Result<Response, ApiError> {
    let snapshot =
        metrics::snapshot(&state.shared.api.runtime, state.shared.counts.as_ref()).await?;
    let text = metrics::render(snapshot)?;
    Ok((
        [(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/openmetrics-text; version=1.0.0; charset=utf-8"),
        )],
        text,
    )
        .into_response())
}

async fn openapi() -> Response {
    (
        [(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        )],
        OPENAPI,
    )
        .into_response()
}

async fn create_session(
    State(state): State<AppState>,
    JsonBody(request): JsonBody<CreateSession>,
) -> Result<(StatusCode, axum::Json<Value>), ApiError> {
    let session = state.shared.api.create_session(request).await?;
    Ok((StatusCode::CREATED, axum::Json(session)))
}

async fn list_sessions(
    State(state): State<AppState>,
    QueryParams(query): QueryParams<ListSessions>,
) -> Result<axum::Json<Value>, ApiError> {
    Ok(axum::Json(state.shared.api.list_sessions(query).await?))
}

async fn session(
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> Result<axum::Json<Value>, ApiError> {
    Ok(axum::Json(state.shared.api.session(&id).await?))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PromptQuery {
    #[serde(default)]
    wait: bool,
}

async fn prompt(
    State(state): State<AppState>,
    Path(id): Path<String>,
    QueryParams(query): QueryParams<PromptQuery>,
    JsonBody(request): JsonBody<Prompt>,
) -> Result<(StatusCode, axum::Json<Value>), ApiError> {
    let run = state.shared.api.prompt(&id, request, query.wait).await?;
    let status = if query.wait {
        StatusCode::OK
    } else {
        StatusCode::ACCEPTED
    };
    Ok((status, axum::Json(run)))
}

async fn steer(
    State(state): State<AppState>,
    Path(id): Path<String>,
    JsonBody(request): JsonBody<Prompt>,
) -> Result<axum::Json<Value>, ApiError> {
    Ok(axum::Json(state.shared.api.steer(&id, request).await?))
}

async fn runs(
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> Result<axum::Json<Value>, ApiError> {
    Ok(axum::Json(state.shared.api.runs(&id).await?))
}

async fn session_context(
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> Result<axum::Json<Value>, ApiError> {
    Ok(axum::Json(state.shared.api.context(&id).await?))
}

async fn list_memory(
    State(state): State<AppState>,
    QueryParams(query): QueryParams<ListMemory>,
) -> Result<axum::Json<Value>, ApiError> {
    Ok(axum::Json(state.shared.api.list_memory(query).await?))
}

async fn list_skills(
    State(state): State<AppState>,
    QueryParams(query): QueryParams<ListSkills>,
) -> Result<axum::Json<Value>, ApiError> {
    Ok(axum::Json(state.shared.api.list_skills(query).await?))
}

async fn skill(
    State(state): State<AppState>,
    Path(name): Path<String>,
    QueryParams(query): QueryParams<ListSkills>,
) -> Result<axum::Json<Value>, ApiError> {
    Ok(axum::Json(state.shared.api.skill(&name, query).await?))
}

async fn add_memory(
    State(state): State<AppState>,
    JsonBody(body): JsonBody<NewMemory>,
) -> Result<(StatusCode, axum::Json<Value>), ApiError> {
    Ok((
        StatusCode::CREATED,
        axum::Json(state.shared.api.add_memory(body).await?),
    ))
}

async fn memory_item(
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> Result<axum::Json<Value>, ApiError> {
    Ok(axum::Json(state.shared.api.memory_item(&id).await?))
}

async fn edit_memory(
    State(state): State<AppState>,
    Path(id): Path<String>,
    JsonBody(body): JsonBody<MemoryPatch>,
) -> Result<axum::Json<Value>, ApiError> {
    Ok(axum::Json(state.shared.api.edit_memory(&id, body).await?))
}

async fn delete_session(
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> Result<axum::Json<Value>, ApiError> {
    Ok(axum::Json(state.shared.api.delete_session(&id).await?))
}

async fn forget_memory(
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> Result<axum::Json<Value>, ApiError> {
    Ok(axum::Json(state.shared.api.forget_memory(&id).await?))
}

async fn run(
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> Result<axum::Json<Value>, ApiError> {
    Ok(axum::Json(state.shared.api.run(&id).await?))
}

async fn cancel(
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> Result<axum::Json<Value>, ApiError> {
    Ok(axum::Json(state.shared.api.cancel(&id).await?))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct TapeQuery {
    #[serde(default)]
    from_seq: u64,
}

async fn tape(
    State(state): State<AppState>,
    Path(id): Path<String>,
    QueryParams(query): QueryParams<TapeQuery>,
) -> Result<axum::Json<Value>, ApiError> {
    Ok(axum::Json(
        state.shared.api.tape(&id, query.from_seq).await?,
    ))
}

async fn approvals(State(state): State<AppState>) -> Result<axum::Json<Value>, ApiError> {
    Ok(axum::Json(state.shared.api.approvals(None).await?))
}

async fn session_approvals(
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> Result<axum::Json<Value>, ApiError> {
    Ok(axum::Json(state.shared.api.approvals(Some(&id)).await?))
}

async fn answer(
    State(state): State<AppState>,
    Path(id): Path<String>,
    JsonBody(request): JsonBody<Answer>,
) -> Result<axum::Json<Value>, ApiError> {
    Ok(axum::Json(state.shared.api.answer(&id, request).await?))
}

async fn questions(State(state): State<AppState>) -> Result<axum::Json<Value>, ApiError> {
    Ok(axum::Json(state.shared.api.questions(None).await?))
}

async fn session_questions(
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> Result<axum::Json<Value>, ApiError> {
    Ok(axum::Json(state.shared.api.questions(Some(&id)).await?))
}

async fn reply(
    State(state): State<AppState>,
    Path(id): Path<String>,
    JsonBody(request): JsonBody<super::api::Reply>,
) -> Result<axum::Json<Value>, ApiError> {
    Ok(axum::Json(state.shared.api.reply(&id, request).await?))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct StreamQuery {
    /// Resume after this event (`RUN_ID:SEQ`), for clients that cannot set
    /// `Last-Event-ID`; the header wins.
    after: Option<String>,
    /// `start`: a session's stream without a cursor begins with the
    /// session's first event rather than now.
    from: Option<String>,
}

fn resume_point(headers: &HeaderMap, query: &StreamQuery) -> Result<Option<Cursor>, ApiError> {
    let header = headers
        .get("last-event-id")
        .map(|v| {
            v.to_str()
                .map_err(|_| ApiError::bad_request("`Last-Event-ID`: not text"))
        })
        .transpose()?;
    // Each one given is checked; an empty one is no cursor; the header wins.
    let parse = |text: Option<&str>, name: &str| match text {
        Some(text) if !text.is_empty() => Cursor::parse(text).map(Some).map_err(|mut err| {
            err.message = err.message.replace("`Last-Event-ID`", name);
            err
        }),
        _ => Ok(None),
    };
    let header = parse(header, "`Last-Event-ID`")?;
    let after = parse(query.after.as_deref(), "`after`")?;
    Ok(header.or(after))
}

async fn run_events(
    State(state): State<AppState>,
    Path(id): Path<String>,
    headers: HeaderMap,
    QueryParams(query): QueryParams<StreamQuery>,
) -> Result<Sse<impl Stream<Item = Result<SseEvent, Infallible>>>, ApiError> {
    let after = resume_point(&headers, &query)?;
    if let Some(from) = &query.from {
        return Err(ApiError::bad_request(format!(
            "`from`: a run's stream always begins at its start, got {}",
            api::shown(from)
        )));
    }
    sse(state, Scope::Run(id), after).await
}

async fn session_events(
    State(state): State<AppState>,
    Path(id): Path<String>,
    headers: HeaderMap,
    QueryParams(query): QueryParams<StreamQuery>,
) -> Result<Sse<impl Stream<Item = Result<SseEvent, Infallible>>>, ApiError> {
    let after = resume_point(&headers, &query)?;
    let scope = match query.from.as_deref() {
        None | Some("now") => Scope::Session(id),
        Some("start") => Scope::SessionFromStart(id),
        Some(other) => {
            return Err(ApiError::bad_request(format!(
                "`from`: expected start or now, got {}",
                api::shown(other)
            )));
        }
    };
    sse(state, scope, after).await
}

/// An SSE response: one `data:` line of tape JSON per event, `id: RUN_ID:SEQ`.
async fn sse(
    state: AppState,
    scope: Scope,
    after: Option<Cursor>,
) -> Result<Sse<impl Stream<Item = Result<SseEvent, Infallible>>>, ApiError> {
    let events = events::follow(
        &state.shared.api.runtime,
        scope,
        after,
        state.shared.closing.clone(),
    )
    .await?;
    let stream = futures::stream::unfold(events, |mut events| async move {
        let record = events.recv().await?;
        let data = serde_json::to_string(&*record).unwrap_or_else(|err| {
            tracing::error!(error = %err, "cannot encode an event");
            "{}".to_owned()
        });
        let event = SseEvent::default()
            .id(Cursor::of(&record).to_string())
            .data(data);
        Some((Ok(event), events))
    });
    Ok(Sse::new(stream).keep_alive(KeepAlive::default()))
}

/// The JSON error for a route that does not exist.
pub async fn not_found(method: Method, uri: axum::http::Uri) -> ApiError {
    ApiError::not_found(format!(
        "no route {} {}",
        quote(method.as_str()),
        quote(uri.path())
    ))
}

/// The JSON error for a method a route does not take.
pub async fn method_not_allowed(method: Method, uri: axum::http::Uri) -> ApiError {
    ApiError::method_not_allowed(format!(
        "{} does not take {}",
        quote(uri.path()),
        quote(method.as_str())
    ))
}
