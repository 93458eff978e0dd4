//! The console's sessions: which cookies are logged in, their CSRF tokens,
//! and the checks a request the cookie authenticates must pass.
//!
//! Sessions live in this process's memory: a restart ends them all, as does
//! `/ui/logout`. Only a digest of each cookie is kept.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use axum::http::{HeaderMap, Method, header};
use parking_lot::Mutex;
use sha2::{Digest, Sha256};
use thiserror::Error;

use super::super::error::ApiError;
use super::{COOKIE, CSRF_HEADER};
use crate::core::quote::quote;

/// How long a login lasts.
pub const LIFETIME: Duration = Duration::from_secs(12 * 60 * 60);
/// The most sessions kept at once; a login past it ends the oldest.
const MAX_SESSIONS: usize = 256;

/// A logged-in browser.
#[derive(Debug, Clone)]
pub struct ConsoleSession {
    /// The token its changes must carry (in `X-CSRF-Token`, or a form's `csrf`).
    pub csrf: String,
    expires: Instant,
}

/// The console's logged-in sessions.
#[derive(Debug, Default)]
pub struct ConsoleSessions {
    by_digest: Mutex<HashMap<[u8; 32], ConsoleSession>>,
}

/// Why a request the console cookie came with is refused.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum Refusal {
    #[error("the console session has ended or was never opened: log in again at /ui/login")]
    NoSession,
    #[error(
        "request from another origin ({origin}) refused: the console's cookie only works from its own pages"
    )]
    CrossOrigin { origin: String },
    #[error("request from another site refused (Sec-Fetch-Site: {site})")]
    CrossSite { site: String },
    #[error(
        "the browser did not say this change comes from the console's own page (no Sec-Fetch-Site, no Origin): use the console over https or loopback with a current browser"
    )]
    NoOrigin,
    #[error("a change made with the console's cookie must carry the page's CSRF token")]
    Csrf,
    #[error("cannot draw a random session id")]
    Random,
}

impl Refusal {
    pub fn into_api_error(self) -> ApiError {
        match self {
            Refusal::NoSession => ApiError::unauthorized(self.to_string()),
            Refusal::Random => ApiError::internal(self.to_string()),
            Refusal::CrossOrigin { .. }
            | Refusal::CrossSite { .. }
            | Refusal::NoOrigin
            | Refusal::Csrf => ApiError::forbidden(self.to_string()),
        }
    }
}

impl From<Refusal> for ApiError {
    fn from(refusal: Refusal) -> Self {
        refusal.into_api_error()
    }
}

fn digest(value: &str) -> [u8; 32] {
    Sha256::digest(value.as_bytes()).into()
}

fn random_hex() -> Result<String, Refusal> {
    use ring::rand::SecureRandom;
    let mut bytes = [0u8; 32];
    ring::rand::SystemRandom::new()
        .fill(&mut bytes)
        .map_err(|_| Refusal::Random)?;
    Ok(hex::encode(bytes))
}

impl ConsoleSessions {
    /// Opens a session; returns its `Set-Cookie` value.
    pub fn open(&self, secure: bool) -> Result<String, Refusal> {
        let id = random_hex()?;
        let csrf = random_hex()?;
        let now = Instant::now();
        let mut sessions = self.by_digest.lock();
        sessions.retain(|_, session| session.expires > now);
        if sessions.len() >= MAX_SESSIONS
            && let Some(oldest) = sessions
                .iter()
                .min_by_key(|(_, session)| session.expires)
                .map(|(key, _)| *key)
        {
            sessions.remove(&oldest);
        }
        sessions.insert(
            digest(&id),
            ConsoleSession {
                csrf,
                expires: now + LIFETIME,
            },
        );
        Ok(cookie(&id, LIFETIME, secure))
    }

    /// The session a request's cookie names, if it is open.
    pub fn current(&self, headers: &HeaderMap) -> Option<ConsoleSession> {
        let id = cookie_value(headers)?;
        let key = digest(&id);
        let mut sessions = self.by_digest.lock();
        let session = sessions.get(&key)?;
        if session.expires <= Instant::now() {
            sessions.remove(&key);
            return None;
        }
        Some(session.clone())
    }

    /// Whether a request carries the console's cookie at all.
    pub fn presented(headers: &HeaderMap) -> bool {
        cookie_value(headers).is_some()
    }

    /// The checks of a request the cookie authenticates: an open session,
    /// from this origin; and, for a change, the session's CSRF token (from
    /// the header, else `form_csrf`).
    pub fn authorize(
        &self,
        headers: &HeaderMap,
        method: &Method,
        form_csrf: Option<&str>,
    ) -> Result<(), Refusal> {
        let session = self.current(headers).ok_or(Refusal::NoSession)?;
        let changes = !matches!(*method, Method::GET | Method::HEAD | Method::OPTIONS);
        let upgrade = headers.contains_key(header::UPGRADE);
        same_origin(headers, changes || upgrade)?;
        if changes {
            let presented = headers
                .get(CSRF_HEADER)
                .and_then(|value| value.to_str().ok())
                .or(form_csrf)
                .ok_or(Refusal::Csrf)?;
            if digest(presented) != digest(&session.csrf) {
                return Err(Refusal::Csrf);
            }
        }
        Ok(())
    }

    /// Ends every session; returns how many there were.
    pub fn end_all(&self) -> usize {
        let mut sessions = self.by_digest.lock();
        let count = sessions.len();
        sessions.clear();
        count
    }
}

/// The value of the console's cookie in a request, if it has one.
fn cookie_value(headers: &HeaderMap) -> Option<String> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(cookie::Cookie::split_parse)
        .filter_map(Result::ok)
        .find(|cookie| cookie.name() == COOKIE)
        .map(|cookie| cookie.value().to_owned())
        .filter(|value| !value.is_empty())
}

/// Whether the request is from a page of this origin.
///
/// Browsers say so in `Sec-Fetch-Site` (over HTTPS and loopback), which no
/// page can forge: where it is sent it must be `same-origin` (or `none`, an
/// address the person typed, for a read). `Origin` must name this host and
/// port wherever it names one; the console's pages send `Origin: null` on
/// their own requests (their `Referrer-Policy: no-referrer` makes browsers
/// do that), which only `Sec-Fetch-Site` can vouch for. `changes`: a change
/// or a WebSocket, which must be vouched for by one of the two.
pub fn same_origin(headers: &HeaderMap, changes: bool) -> Result<(), Refusal> {
    let site = headers
        .get("sec-fetch-site")
        .and_then(|value| value.to_str().ok());
    match site {
        Some("same-origin") => {}
        Some("none") if !changes => {}
        Some(site) => {
            return Err(Refusal::CrossSite {
                site: quote(site).to_string(),
            });
        }
        None => {}
    }
    let host = headers
        .get(header::HOST)
        .and_then(|value| value.to_str().ok());
    match headers
        .get(header::ORIGIN)
        .map(|o| o.to_str().unwrap_or_default())
    {
        Some(text) if text != "null" => {
            let authority = text
                .strip_prefix("http://")
                .or_else(|| text.strip_prefix("https://"));
            match (authority, host) {
                (Some(authority), Some(host)) if authority.eq_ignore_ascii_case(host) => Ok(()),
                _ => Err(Refusal::CrossOrigin {
                    origin: quote(text).to_string(),
                }),
            }
        }
        // Nothing names another origin: a change needs the browser's word.
        _ if changes && site.is_none() => Err(Refusal::NoOrigin),
        _ => Ok(()),
    }
}

/// Whether the browser reached this server over TLS (through a proxy that
/// says so, or by the page's own origin): the cookie is then `Secure`.
pub fn served_over_tls(headers: &HeaderMap) -> bool {
    let forwarded = headers
        .get("x-forwarded-proto")
        .and_then(|value| value.to_str().ok())
        .is_some_and(|proto| proto.eq_ignore_ascii_case("https"));
    let origin = headers
        .get(header::ORIGIN)
        .and_then(|value| value.to_str().ok())
        .is_some_and(|origin| origin.starts_with("https://"));
    forwarded || origin
}

fn cookie(value: &str, lifetime: Duration, secure: bool) -> String {
    let lifetime = i64::try_from(lifetime.as_secs()).unwrap_or(i64::MAX);
    cookie::Cookie::build((COOKIE, value.to_owned()))
        .path("/")
        .http_only(true)
        .same_site(cookie::SameSite::Strict)
        .secure(secure)
        .max_age(cookie::time::Duration::seconds(lifetime))
        .build()
        .to_string()
}

/// The `Set-Cookie` value that removes the cookie.
pub fn removal(secure: bool) -> String {
    cookie("", Duration::ZERO, secure)
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.append(*name, HeaderValue::from_str(value).unwrap());
        }
        map
    }

    fn logged_in(sessions: &ConsoleSessions) -> (String, String) {
        let set = sessions.open(false).unwrap();
        let id = set
            .split(';')
            .next()
            .unwrap()
            .trim_start_matches("pincer_console=")
            .to_owned();
        let csrf = sessions
            .current(&headers(&[("cookie", &format!("pincer_console={id}"))]))
            .unwrap()
            .csrf;
        (id, csrf)
    }

    #[test]
    fn the_cookie_is_http_only_strict_and_expires() {
        let sessions = ConsoleSessions::default();
        let set = sessions.open(false).unwrap();
        assert!(set.contains("HttpOnly"), "{set}");
        assert!(set.contains("SameSite=Strict"), "{set}");
        assert!(set.contains("Max-Age=43200"), "{set}");
        assert!(set.contains("Path=/"), "{set}");
        assert!(!set.contains("Secure"), "{set}");
        assert!(sessions.open(true).unwrap().contains("Secure"));
        assert!(removal(false).contains("Max-Age=0"));
    }

    #[test]
    fn a_change_needs_the_csrf_token_and_this_origin() {
        let sessions = ConsoleSessions::default();
        let (id, csrf) = logged_in(&sessions);
        let cookie = format!("other=1; pincer_console={id}");
        let good = headers(&[
            ("cookie", &cookie),
            ("host", "127.0.0.1:8787"),
            ("origin", "http://127.0.0.1:8787"),
            ("x-csrf-token", &csrf),
        ]);
        assert_eq!(sessions.authorize(&good, &Method::POST, None), Ok(()));
        let no_token = headers(&[
            ("cookie", &cookie),
            ("host", "127.0.0.1:8787"),
            ("origin", "http://127.0.0.1:8787"),
        ]);
        assert_eq!(
            sessions.authorize(&no_token, &Method::POST, None),
            Err(Refusal::Csrf)
        );
        assert_eq!(
            sessions.authorize(&no_token, &Method::POST, Some(&csrf)),
            Ok(())
        );
        assert_eq!(sessions.authorize(&no_token, &Method::GET, None), Ok(()));
        let wrong = headers(&[
            ("cookie", &cookie),
            ("host", "127.0.0.1:8787"),
            ("origin", "http://127.0.0.1:8787"),
            ("x-csrf-token", "0000"),
        ]);
        assert_eq!(
            sessions.authorize(&wrong, &Method::DELETE, None),
            Err(Refusal::Csrf)
        );
        let elsewhere = headers(&[
            ("cookie", &cookie),
            ("host", "127.0.0.1:8787"),
            ("origin", "http://127.0.0.1:9999"),
            ("x-csrf-token", &csrf),
        ]);
        assert!(matches!(
            sessions.authorize(&elsewhere, &Method::POST, None),
            Err(Refusal::CrossOrigin { .. })
        ));
        assert!(matches!(
            sessions.authorize(&elsewhere, &Method::GET, None),
            Err(Refusal::CrossOrigin { .. })
        ));
        let no_origin = headers(&[
            ("cookie", &cookie),
            ("host", "127.0.0.1:8787"),
            ("x-csrf-token", &csrf),
        ]);
        assert_eq!(
            sessions.authorize(&no_origin, &Method::POST, None),
            Err(Refusal::NoOrigin)
        );
        let same_site = headers(&[
            ("cookie", &cookie),
            ("host", "127.0.0.1:8787"),
            ("sec-fetch-site", "same-site"),
        ]);
        assert!(matches!(
            sessions.authorize(&same_site, &Method::GET, None),
            Err(Refusal::CrossSite { .. })
        ));
        // The console's own pages send `Origin: null` (no-referrer); the
        // browser's Sec-Fetch-Site vouches for them, and only it.
        let null_same = headers(&[
            ("cookie", &cookie),
            ("host", "127.0.0.1:8787"),
            ("origin", "null"),
            ("sec-fetch-site", "same-origin"),
            ("x-csrf-token", &csrf),
        ]);
        assert_eq!(sessions.authorize(&null_same, &Method::POST, None), Ok(()));
        let null_alone = headers(&[
            ("cookie", &cookie),
            ("host", "127.0.0.1:8787"),
            ("origin", "null"),
            ("x-csrf-token", &csrf),
        ]);
        assert_eq!(
            sessions.authorize(&null_alone, &Method::POST, None),
            Err(Refusal::NoOrigin)
        );
        let null_cross = headers(&[
            ("cookie", &cookie),
            ("host", "127.0.0.1:8787"),
            ("origin", "null"),
            ("sec-fetch-site", "cross-site"),
            ("x-csrf-token", &csrf),
        ]);
        assert!(matches!(
            sessions.authorize(&null_cross, &Method::POST, None),
            Err(Refusal::CrossSite { .. })
        ));
        let typed = headers(&[
            ("cookie", &cookie),
            ("host", "127.0.0.1:8787"),
            ("sec-fetch-site", "none"),
            ("x-csrf-token", &csrf),
        ]);
        assert_eq!(sessions.authorize(&typed, &Method::GET, None), Ok(()));
        assert!(matches!(
            sessions.authorize(&typed, &Method::POST, None),
            Err(Refusal::CrossSite { .. })
        ));
        let upgrade = headers(&[
            ("cookie", &cookie),
            ("host", "127.0.0.1:8787"),
            ("upgrade", "websocket"),
        ]);
        assert_eq!(
            sessions.authorize(&upgrade, &Method::GET, None),
            Err(Refusal::NoOrigin)
        );
    }

    #[test]
    fn logout_ends_every_session() {
        let sessions = ConsoleSessions::default();
        let (first, _) = logged_in(&sessions);
        let (second, _) = logged_in(&sessions);
        assert_eq!(sessions.end_all(), 2);
        for id in [first, second] {
            let map = headers(&[("cookie", &format!("pincer_console={id}"))]);
            assert!(sessions.current(&map).is_none());
            assert_eq!(
                sessions.authorize(&map, &Method::GET, None),
                Err(Refusal::NoSession)
            );
        }
    }

    #[test]
    fn an_unknown_cookie_is_no_session() {
        let sessions = ConsoleSessions::default();
        let map = headers(&[("cookie", "pincer_console=abc")]);
        assert!(sessions.current(&map).is_none());
        assert!(ConsoleSessions::presented(&map));
        assert!(!ConsoleSessions::presented(&headers(&[("cookie", "x=1")])));
    }
}
