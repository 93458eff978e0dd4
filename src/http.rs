//! The HTTP face: REST, Server-Sent Events and JSON-RPC over WebSocket for
//! clients that are not editors (`pincer serve --http`, `docs/http.md`);
//! and, at `/acp`, a WebSocket whose messages it hands to the ACP face
//! through a port (`acp::Connections`), for editors elsewhere; at
//! `/channels/{name}/…`, chat platforms' requests, handed to the
//! channel face through another (`ingress::ChannelIngress`).
//!
//! Like every face it converts between its wire form and core calls; it knows
//! no ACP types, and the core knows nothing of it. Events go out in the tape's own JSON form
//! (`docs/headless.md`).

pub mod acp;
pub mod api;
pub mod auth;
pub mod console;
pub mod error;
pub mod events;
pub mod health;
pub mod ingress;
pub mod limit;
pub mod metrics;
pub mod routes;
pub mod rpc;
pub mod schedules;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::{DefaultBodyLimit, Request, State};
use axum::http::{HeaderName, HeaderValue, Method, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use tower_http::cors::{AllowOrigin, CorsLayer};
use tower_http::trace::TraceLayer;

use crate::core::journal::Counts;
use crate::core::quote::quote;
use crate::core::runtime::Runtime;
use api::Api;
use auth::Token;
use limit::{Limiter, RateLimit};

/// Settings of the HTTP face.
#[derive(Debug, Clone)]
pub struct HttpOptions {
    /// The bearer token every request but the health probes must present.
    pub token: Token,
    /// Largest request body accepted, in bytes.
    pub body_limit: usize,
    /// Requests per token; `None` turns the limit off.
    pub rate_limit: Option<RateLimit>,
    /// Origins CORS allows (`*` for any); empty turns CORS off.
    pub cors_origins: Vec<String>,
    /// Whether the web console is served at `/ui` (`[http] console`).
    pub console: bool,
}

/// What every handler reaches; cheap to clone.
#[derive(Clone)]
pub struct AppState {
    shared: Arc<Shared>,
}

struct Shared {
    /// The operations, over the runtime.
    api: Api,
    token: Token,
    /// Per-token buckets; `None` when the limit is off.
    limiter: Option<Limiter>,
    /// The JSON-RPC service mounted at `/v1/rpc`.
    rpc: rpc::Mount,
    /// Cancelled when the server stops: event streams end, `/readyz` fails.
    closing: CancellationToken,
    /// What `/metrics` counts beyond this process: runs and send intents.
    counts: Arc<dyn Counts>,
    /// What other faces serve through this one.
    ports: Ports,
    /// The web console's logins; `None` when the console is off.
    console: Option<console::ConsoleSessions>,
}

/// Other faces behind routes of this one, each optional.
#[derive(Clone, Default)]
pub struct Ports {
    /// The agent behind `/acp`.
    pub acp: Option<Arc<dyn acp::Connections>>,
    /// The chat channels behind `/channels/{name}/…`.
    pub channels: Option<Arc<dyn ingress::ChannelIngress>>,
    /// The schedules behind `/v1/schedules`.
    pub schedules: Option<Arc<dyn schedules::Schedules>>,
}

/// Serves HTTP on `listener` until `shutdown` fires, then stops taking
/// connections, ends event streams and WebSocket sessions, and waits (a
/// bounded time) for requests in flight. The caller shuts the runtime down
/// first, so requests waiting for runs get their answer.
pub async fn serve(
    runtime: Runtime,
    counts: Arc<dyn Counts>,
    skills: api::SkillsAccess,
    listener: TcpListener,
    options: HttpOptions,
    ports: Ports,
    shutdown: CancellationToken,
) -> std::io::Result<()> {
    let closing = shutdown.clone();
    let api = Api {
        runtime,
        skills,
        counts: counts.clone(),
    };
    let rpc = rpc::Mount::new(api.clone(), closing.clone(), options.body_limit)
        .map_err(std::io::Error::other)?;
    let rpc_handle = rpc.handle.clone();
    let state = AppState {
        shared: Arc::new(Shared {
            api,
            token: options.token.clone(),
            limiter: options.rate_limit.map(Limiter::new),
            rpc,
            closing: closing.clone(),
            counts,
            ports,
            console: options.console.then(console::ConsoleSessions::default),
        }),
    };
    let app = app(state, &options);
    let stopped = async move {
        closing.cancelled().await;
        let _ = rpc_handle.stop();
    };
    // Small writes go out at once: an event stream's or a WebSocket's next
    // message must not wait for the previous one's acknowledgement (Nagle
    // with delayed ACKs held ACP chunks over `/acp` up to 40 ms).
    let listener = axum::serve::ListenerExt::tap_io(listener, |tcp: &mut tokio::net::TcpStream| {
        if let Err(err) = tcp.set_nodelay(true) {
            tracing::debug!(error = %err, "cannot set TCP_NODELAY");
        }
    });
    let server = axum::serve(
        listener,
        app.into_make_service_with_connect_info::<SocketAddr>(),
    )
    .with_graceful_shutdown(stopped);
    let mut server = std::pin::pin!(server.into_future());
    tokio::select! {
        served = &mut server => served,
        _ = async {
            shutdown.cancelled().await;
            tokio::time::sleep(GRACE).await;
        } => {
            tracing::warn!("HTTP connections still open {} s after shutdown; closing them", GRACE.as_secs());
            Ok(())
        }
    }
}

/// How long requests in flight may take to finish after shutdown.
const GRACE: Duration = Duration::from_secs(10);

/// The router with every layer: auth and rate limits, CORS, body limit, tracing.
pub fn app(state: AppState, options: &HttpOptions) -> axum::Router {
    let mut router = routes::router();
    if options.console {
        router = router.merge(console::router());
    }
    let mut router = router
        .fallback(routes::not_found)
        .method_not_allowed_fallback(routes::method_not_allowed)
        .layer(axum::middleware::from_fn_with_state(state.clone(), guard))
        .layer(DefaultBodyLimit::max(options.body_limit))
        .with_state(state);
    if !options.cors_origins.is_empty() {
        router = router.layer(cors(&options.cors_origins));
    }
    router.layer(TraceLayer::new_for_http().make_span_with(request_span))
}

/// The span of a request in the log: its method and path, quoted short (the
/// default span would log the whole URI, query included, at any length).
pub(crate) fn request_span<B>(request: &axum::http::Request<B>) -> tracing::Span {
    tracing::debug_span!(
        "request",
        method = %quote(request.method().as_str()),
        path = %quote(request.uri().path()),
    )
}

fn cors(origins: &[String]) -> CorsLayer {
    let allow = if origins.iter().any(|o| o == "*") {
        AllowOrigin::any()
    } else {
        AllowOrigin::list(
            origins
                .iter()
                .filter_map(|o| HeaderValue::from_str(o).ok())
                .collect::<Vec<_>>(),
        )
    };
    CorsLayer::new()
        .allow_origin(allow)
        .allow_methods([Method::GET, Method::POST])
        .allow_headers([
            header::AUTHORIZATION,
            header::CONTENT_TYPE,
            HeaderName::from_static("last-event-id"),
        ])
        .expose_headers([header::RETRY_AFTER])
}

/// Every request but the health probes and the console's own pages: a
/// valid bearer token, or the console's cookie from one of its pages; then
/// a token from its rate limit bucket.
async fn guard(State(state): State<AppState>, request: Request, next: Next) -> Response {
    let path = request.uri().path();
    if routes::is_public(path) || (state.shared.console.is_some() && console::owns(path)) {
        return next.run(request).await;
    }
    if let Err(err) = authorize(&state, &request) {
        return err.into_response();
    }
    if let Some(limiter) = &state.shared.limiter
        && let Err(retry_after) = limiter.check(&state.shared.token.key())
    {
        return error::ApiError::rate_limited(retry_after).into_response();
    }
    next.run(request).await
}

/// A bearer token when the request has an `Authorization` header; else the
/// console's cookie, when the console is on and the request carries it.
fn authorize(state: &AppState, request: &Request) -> Result<(), error::ApiError> {
    let headers = request.headers();
    if !headers.contains_key(header::AUTHORIZATION)
        && let Some(console) = &state.shared.console
        && console::ConsoleSessions::presented(headers)
    {
        return Ok(console.authorize(headers, request.method(), None)?);
    }
    auth::check(headers, &state.shared.token)
}
