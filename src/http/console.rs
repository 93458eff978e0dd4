//! The web console at `/ui` (`docs/console.md`): a few server-rendered
//! pages and one script, embedded in the binary, over the same REST routes
//! every other client uses.
//!
//! Safety first: the bearer token is typed once into the login form and
//! exchanged for a session cookie (`HttpOnly`, `SameSite=Strict`, `Secure`
//! behind TLS, with an expiry); it never travels in a URL, never reaches
//! script and never appears in a page. A request the cookie authenticates
//! must come from this origin (`Origin`, `Sec-Fetch-Site`), and one that
//! changes anything must carry the session's CSRF token too. Every page is
//! served with a strict `Content-Security-Policy` (no inline script, no
//! framing), and the script builds the page from text nodes only, so
//! nothing a model or a chat wrote can become markup.

mod pages;
mod sessions;

use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::{get, post};

pub use sessions::{ConsoleSessions, Refusal};

use super::AppState;
use super::error::ApiError;

/// Where the console lives.
pub const PREFIX: &str = "/ui";
/// The session cookie's name.
pub const COOKIE: &str = "pincer_console";
/// The header a changing request carries the CSRF token in.
pub const CSRF_HEADER: &str = "x-csrf-token";

/// The policy every console response carries: scripts and styles only from
/// this server's own files, requests only to it, no plugins, no framing, no
/// `<base>`, forms only to it.
pub const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; \
connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'";

const SCRIPT: &str = include_str!("console/console.js");
const STYLE: &str = include_str!("console/console.css");

/// The pages the console's script draws (each served the same shell).
pub const PAGES: [&str; 6] = [
    "/ui/sessions",
    "/ui/sessions/{session_id}",
    "/ui/approvals",
    "/ui/runs/{run_id}",
    "/ui/channels",
    "/ui/health",
];

/// (method, path) of every console route, as `routes::paths` gives the API's.
pub fn paths() -> Vec<(String, &'static str)> {
    let mut paths: Vec<(String, &'static str)> = [
        ("get", PREFIX),
        ("get", "/ui/login"),
        ("post", "/ui/login"),
        ("post", "/ui/logout"),
        ("get", "/ui/assets/console.js"),
        ("get", "/ui/assets/console.css"),
    ]
    .into_iter()
    .map(|(method, path)| (method.to_owned(), path))
    .collect();
    paths.extend(PAGES.iter().map(|page| ("get".to_owned(), *page)));
    paths
}

/// Whether a path belongs to the console (which checks its own requests).
pub fn owns(path: &str) -> bool {
    path == PREFIX || path.starts_with("/ui/")
}

/// The console's routes, added to the router when the console is on.
pub fn router() -> axum::Router<AppState> {
    let router = axum::Router::new()
        .route(PREFIX, get(home))
        .route("/ui/", get(home))
        .route("/ui/login", get(login_page).post(login))
        .route("/ui/logout", post(logout))
        .route("/ui/assets/console.js", get(script))
        .route("/ui/assets/console.css", get(style));
    PAGES
        .iter()
        .fold(router, |router, path| router.route(path, get(page)))
        .layer(axum::middleware::from_fn(headers))
}

/// The security headers of every console response.
async fn headers(request: Request, next: Next) -> Response {
    let mut response = next.run(request).await;
    let headers = response.headers_mut();
    for (name, value) in [
        (header::CONTENT_SECURITY_POLICY, CSP),
        (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
        (header::REFERRER_POLICY, "no-referrer"),
        (header::X_FRAME_OPTIONS, "DENY"),
        (header::CACHE_CONTROL, "no-store"),
    ] {
        headers.insert(name, HeaderValue::from_static(value));
    }
    headers.insert(
        "cross-origin-opener-policy",
        HeaderValue::from_static("same-origin"),
    );
    headers.insert(
        "cross-origin-resource-policy",
        HeaderValue::from_static("same-origin"),
    );
    response
}

fn sessions(state: &AppState) -> Result<&ConsoleSessions, ApiError> {
    state
        .shared
        .console
        .as_ref()
        .ok_or_else(|| ApiError::not_found("the console is off (`[http] console = false`)"))
}

async fn home(State(state): State<AppState>, headers: HeaderMap) -> Response {
    match sessions(&state) {
        Ok(console) if console.current(&headers).is_some() => {
            Redirect::to("/ui/sessions").into_response()
        }
        Ok(_) => Redirect::to("/ui/login").into_response(),
        Err(err) => err.into_response(),
    }
}

async fn login_page(State(state): State<AppState>, headers: HeaderMap) -> Response {
    match sessions(&state) {
        Ok(console) if console.current(&headers).is_some() => {
            Redirect::to("/ui/sessions").into_response()
        }
        Ok(_) => html(StatusCode::OK, pages::login(None)),
        Err(err) => err.into_response(),
    }
}

#[derive(serde::Deserialize)]
struct LoginForm {
    token: String,
}

/// Exchanges the token for a session cookie. The form comes from this
/// origin or not at all (a login forced by another site is refused).
async fn login(State(state): State<AppState>, headers: HeaderMap, body: String) -> Response {
    let console = match sessions(&state) {
        Ok(console) => console,
        Err(err) => return err.into_response(),
    };
    if let Err(refusal) = sessions::same_origin(&headers, true) {
        return html(
            StatusCode::FORBIDDEN,
            pages::login(Some(&refusal.to_string())),
        );
    }
    if let Some(limiter) = &state.shared.limiter
        && let Err(retry_after) = limiter.check("console-login")
    {
        return ApiError::rate_limited(retry_after).into_response();
    }
    let form: Result<LoginForm, _> = serde_urlencoded::from_str(&body);
    let token = match form {
        Ok(form) => form.token,
        Err(_) => {
            return html(
                StatusCode::BAD_REQUEST,
                pages::login(Some("The form must carry the token")),
            );
        }
    };
    if !state.shared.token.matches(token.trim()) {
        tracing::info!("console login refused: wrong token");
        return html(
            StatusCode::UNAUTHORIZED,
            pages::login(Some("That is not this server's token")),
        );
    }
    match console.open(sessions::served_over_tls(&headers)) {
        Ok(cookie) => {
            tracing::info!("console login");
            let mut response = Redirect::to("/ui/sessions").into_response();
            set_cookie(&mut response, &cookie);
            response
        }
        Err(err) => err.into_api_error().into_response(),
    }
}

/// Ends every console session (this browser's and all others), then shows
/// the login page. A form post from a console page: cookie, CSRF token and
/// origin checked like any change.
async fn logout(State(state): State<AppState>, headers: HeaderMap, body: String) -> Response {
    let console = match sessions(&state) {
        Ok(console) => console,
        Err(err) => return err.into_response(),
    };
    let csrf = serde_urlencoded::from_str::<Vec<(String, String)>>(&body)
        .ok()
        .and_then(|fields| {
            fields
                .into_iter()
                .find_map(|(name, value)| (name == "csrf").then_some(value))
        });
    if let Err(refusal) = console.authorize(&headers, &Method::POST, csrf.as_deref()) {
        return refusal.into_api_error().into_response();
    }
    let ended = console.end_all();
    tracing::info!(ended, "console logout: every console session ended");
    let mut response = Redirect::to("/ui/login").into_response();
    set_cookie(
        &mut response,
        &sessions::removal(sessions::served_over_tls(&headers)),
    );
    response
}

/// A console page: the shell the script fills, or the login page for a
/// browser without a session.
async fn page(State(state): State<AppState>, headers: HeaderMap) -> Response {
    let console = match sessions(&state) {
        Ok(console) => console,
        Err(err) => return err.into_response(),
    };
    match console.current(&headers) {
        Some(session) => html(StatusCode::OK, pages::shell(&session.csrf)),
        None => Redirect::to("/ui/login").into_response(),
    }
}

async fn script() -> Response {
    asset("text/javascript; charset=utf-8", SCRIPT)
}

async fn style() -> Response {
    asset("text/css; charset=utf-8", STYLE)
}

fn asset(content_type: &'static str, body: &'static str) -> Response {
    (
        [(header::CONTENT_TYPE, HeaderValue::from_static(content_type))],
        body,
    )
        .into_response()
}

fn html(status: StatusCode, markup: String) -> Response {
    (
        status,
        [(
            header::CONTENT_TYPE,
            HeaderValue::from_static("text/html; charset=utf-8"),
        )],
        markup,
    )
        .into_response()
}

fn set_cookie(response: &mut Response, cookie: &str) {
    match HeaderValue::from_str(cookie) {
        Ok(value) => {
            response.headers_mut().append(header::SET_COOKIE, value);
        }
        Err(err) => tracing::error!(error = %err, "cannot set the console cookie"),
    }
}
