//! The web console over raw HTTP (`docs/console.md`): the login exchange,
//! the cookie's attributes, the checks every request the cookie carries
//! passes (origin, site, CSRF token), logout everywhere, the headers of
//! every page, and the console turned off. What a browser does with all
//! of it is in `console_browser.rs`.

use reqwest::StatusCode;
use reqwest::header::{HeaderMap, HeaderValue};
use serde_json::{Value, json};

use crate::support::TestDir;
use crate::support::serve::{HttpServe, TOKEN};

/// A form body, as a browser posts one.
trait FormBody {
    fn form_body(self, fields: &[(&str, &str)]) -> Self;
}

impl FormBody for reqwest::RequestBuilder {
    fn form_body(self, fields: &[(&str, &str)]) -> Self {
        let body = form_urlencoded::Serializer::new(String::new())
            .extend_pairs(fields)
            .finish();
        self.header("content-type", "application/x-www-form-urlencoded")
            .body(body)
    }
}

fn client() -> reqwest::Client {
    let _ = rustls::crypto::ring::default_provider().install_default();
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap()
}

/// A logged-in browser, as far as HTTP goes: its cookie, its page's CSRF
/// token, and the origin its pages have.
struct Browser {
    client: reqwest::Client,
    server: String,
    origin: String,
    cookie: String,
    csrf: String,
}

fn cookie_of(response: &reqwest::Response) -> String {
    let set = response
        .headers()
        .get("set-cookie")
        .expect("a Set-Cookie header")
        .to_str()
        .unwrap()
        .to_owned();
    set.split(';').next().unwrap().to_owned()
}

async fn log_in(server: &HttpServe) -> (Browser, String) {
    let client = client();
    let origin = format!("http://{}", server.addr);
    let response = client
        .post(server.url("/ui/login"))
        .header("origin", &origin)
        .header("sec-fetch-site", "same-origin")
        .form_body(&[("token", TOKEN)])
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::SEE_OTHER);
    assert_eq!(response.headers()["location"], "/ui/sessions");
    let set_cookie = response.headers()["set-cookie"]
        .to_str()
        .unwrap()
        .to_owned();
    let cookie = cookie_of(&response);
    let page = client
        .get(server.url("/ui/sessions"))
        .header("cookie", &cookie)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let csrf = page
        .split("name=\"pincer-csrf\" content=\"")
        .nth(1)
        .and_then(|rest| rest.split('"').next())
        .unwrap_or_else(|| panic!("no CSRF token in the page: {page}"))
        .to_owned();
    (
        Browser {
            client,
            server: server.url(""),
            origin,
            cookie,
            csrf,
        },
        set_cookie,
    )
}

impl Browser {
    /// A request as the console's script makes it: the cookie, this origin,
    /// the CSRF token on changes.
    fn request(&self, method: reqwest::Method, path: &str) -> reqwest::RequestBuilder {
        let changes = method != reqwest::Method::GET;
        let mut builder = self
            .client
            .request(method, format!("{}{path}", self.server))
            .header("cookie", &self.cookie)
            .header("sec-fetch-site", "same-origin");
        if changes {
            builder = builder
                .header("origin", &self.origin)
                .header("x-csrf-token", &self.csrf);
        }
        builder
    }
}

async fn error_code(response: reqwest::Response) -> (StatusCode, String) {
    let status = response.status();
    let body: Value = response.json().await.unwrap();
    (
        status,
        body["error"]["code"].as_str().unwrap_or("").to_owned(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_token_is_exchanged_once_for_a_strict_http_only_cookie() {
    let dir = TestDir::new();
    let server = HttpServe::start(&dir, None, &[]);
    let client = client();
    // Without a session, every page sends the browser to the login form.
    for path in ["/ui", "/ui/", "/ui/sessions", "/ui/approvals", "/ui/runs/x"] {
        let response = client.get(server.url(path)).send().await.unwrap();
        assert_eq!(response.status(), StatusCode::SEE_OTHER, "{path}");
        assert_eq!(response.headers()["location"], "/ui/login", "{path}");
    }
    let login = client.get(server.url("/ui/login")).send().await.unwrap();
    assert_eq!(login.status(), StatusCode::OK);
    assert_security_headers(login.headers());
    let page = login.text().await.unwrap();
    assert!(
        page.contains("<form method=\"post\" action=\"/ui/login\">"),
        "{page}"
    );

    let origin = server.url("");
    // A wrong token: no cookie, the form again with the reason.
    let wrong = client
        .post(server.url("/ui/login"))
        .header("origin", &origin)
        .form_body(&[("token", "not-the-token-at-all")])
        .send()
        .await
        .unwrap();
    assert_eq!(wrong.status(), StatusCode::UNAUTHORIZED);
    assert!(wrong.headers().get("set-cookie").is_none());
    let page = wrong.text().await.unwrap();
    assert!(page.contains("That is not this server"), "{page}");
    assert!(!page.contains("not-the-token-at-all"), "{page}");
    // A login another site's page makes (login CSRF) is refused, and so is
    // one that does not say where it comes from.
    for (name, value) in [
        ("origin", "http://evil.example"),
        ("sec-fetch-site", "cross-site"),
    ] {
        let forced = client
            .post(server.url("/ui/login"))
            .header(name, value)
            .header("origin", if name == "origin" { value } else { &origin })
            .form_body(&[("token", TOKEN)])
            .send()
            .await
            .unwrap();
        assert_eq!(forced.status(), StatusCode::FORBIDDEN, "{name}: {value}");
        assert!(forced.headers().get("set-cookie").is_none());
    }
    let bare = client
        .post(server.url("/ui/login"))
        .form_body(&[("token", TOKEN)])
        .send()
        .await
        .unwrap();
    assert_eq!(bare.status(), StatusCode::FORBIDDEN);

    let (browser, set_cookie) = log_in(&server).await;
    for attribute in ["HttpOnly", "SameSite=Strict", "Path=/", "Max-Age=43200"] {
        assert!(set_cookie.contains(attribute), "{attribute}: {set_cookie}");
    }
    assert!(!set_cookie.contains("Secure"), "plain HTTP: {set_cookie}");
    assert!(!set_cookie.contains(TOKEN));
    // Behind a TLS proxy the cookie is Secure.
    let tls = client
        .post(server.url("/ui/login"))
        .header("origin", &origin)
        .header("x-forwarded-proto", "https")
        .form_body(&[("token", TOKEN)])
        .send()
        .await
        .unwrap();
    assert!(
        tls.headers()["set-cookie"]
            .to_str()
            .unwrap()
            .contains("Secure")
    );
    // The token appears in no page and no asset.
    for path in [
        "/ui/sessions",
        "/ui/approvals",
        "/ui/assets/console.js",
        "/ui/assets/console.css",
    ] {
        let response = browser
            .request(reqwest::Method::GET, path)
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), StatusCode::OK, "{path}");
        assert_security_headers(response.headers());
        let text = response.text().await.unwrap();
        assert!(!text.contains(TOKEN), "{path} shows the token");
    }
    // A logged-in browser going to the login form goes to the sessions.
    let again = browser
        .request(reqwest::Method::GET, "/ui/login")
        .send()
        .await
        .unwrap();
    assert_eq!(again.status(), StatusCode::SEE_OTHER);
    assert_eq!(again.headers()["location"], "/ui/sessions");
    server.stop();
}

fn assert_security_headers(headers: &HeaderMap) {
    let csp = headers["content-security-policy"].to_str().unwrap();
    for part in [
        "default-src 'none'",
        "script-src 'self'",
        "frame-ancestors 'none'",
        "base-uri 'none'",
        "form-action 'self'",
    ] {
        assert!(csp.contains(part), "{part}: {csp}");
    }
    assert!(!csp.contains("unsafe-inline"), "{csp}");
    assert_eq!(headers["x-content-type-options"], "nosniff");
    assert_eq!(headers["referrer-policy"], "no-referrer");
    assert_eq!(headers["x-frame-options"], "DENY");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cookie_acts_only_from_this_origin_and_changes_need_the_csrf_token() {
    let dir = TestDir::new();
    let workspace = dir.workspace();
    let script = dir.script("s.jsonl", &[json!([{"text": "hi"}])]);
    let server = HttpServe::start(&dir, None, &["--script", script.to_str().unwrap()]);
    let (browser, _) = log_in(&server).await;
    let create = json!({"workspace": workspace});

    // Reading with the cookie works from the console's pages.
    let listed = browser
        .request(reqwest::Method::GET, "/v1/sessions")
        .send()
        .await
        .unwrap();
    assert_eq!(listed.status(), StatusCode::OK);
    // A change with the token and this origin works.
    let created = browser
        .request(reqwest::Method::POST, "/v1/sessions")
        .json(&create)
        .send()
        .await
        .unwrap();
    assert_eq!(created.status(), StatusCode::CREATED);
    let session: Value = created.json().await.unwrap();
    let session_id = session["session_id"].as_str().unwrap();

    // Without the CSRF token, with a wrong one, without an origin, from
    // another origin (another port of this host too), from another site.
    let plain = || {
        browser
            .client
            .post(server.url("/v1/sessions"))
            .header("cookie", &browser.cookie)
            .json(&create)
    };
    let cases: Vec<(&str, reqwest::RequestBuilder)> = vec![
        ("no CSRF token", plain().header("origin", &browser.origin)),
        (
            "a wrong CSRF token",
            plain()
                .header("origin", &browser.origin)
                .header("x-csrf-token", "0".repeat(64)),
        ),
        ("no origin", plain().header("x-csrf-token", &browser.csrf)),
        (
            "another origin",
            plain()
                .header("origin", "http://evil.example")
                .header("x-csrf-token", &browser.csrf),
        ),
        (
            "another port",
            plain()
                .header("origin", "http://127.0.0.1:1")
                .header("x-csrf-token", &browser.csrf),
        ),
        (
            "another site",
            plain()
                .header("origin", &browser.origin)
                .header("sec-fetch-site", "same-site")
                .header("x-csrf-token", &browser.csrf),
        ),
    ];
    for (case, request) in cases {
        let (status, code) = error_code(request.send().await.unwrap()).await;
        assert_eq!(
            (status, code.as_str()),
            (StatusCode::FORBIDDEN, "forbidden"),
            "{case}"
        );
    }
    // A read from another origin is refused too (a page elsewhere cannot
    // read anything), and so are the event stream and the WebSocket.
    for path in [
        "/v1/sessions".to_owned(),
        format!("/v1/sessions/{session_id}/events"),
    ] {
        let response = browser
            .client
            .get(server.url(&path))
            .header("cookie", &browser.cookie)
            .header("origin", "http://evil.example")
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), StatusCode::FORBIDDEN, "{path}");
    }
    let url = format!("ws://{}/v1/rpc", server.addr);
    for origin in [Some("http://evil.example"), None] {
        use tokio_tungstenite::tungstenite::client::IntoClientRequest;
        let mut request = url.as_str().into_client_request().unwrap();
        request
            .headers_mut()
            .insert("cookie", HeaderValue::from_str(&browser.cookie).unwrap());
        if let Some(origin) = origin {
            request
                .headers_mut()
                .insert("origin", HeaderValue::from_static(origin));
        }
        match tokio_tungstenite::connect_async(request).await {
            Err(tokio_tungstenite::tungstenite::Error::Http(response)) => {
                assert_eq!(response.status().as_u16(), 403, "origin {origin:?}");
            }
            other => panic!(
                "origin {origin:?}: the WebSocket opened: {:?}",
                other.is_ok()
            ),
        }
    }
    // From the console's own origin the WebSocket opens.
    {
        use tokio_tungstenite::tungstenite::client::IntoClientRequest;
        let mut request = url.as_str().into_client_request().unwrap();
        let headers = request.headers_mut();
        headers.insert("cookie", HeaderValue::from_str(&browser.cookie).unwrap());
        headers.insert("origin", HeaderValue::from_str(&browser.origin).unwrap());
        let opened = tokio_tungstenite::connect_async(request).await;
        assert!(opened.is_ok(), "{:?}", opened.err());
    }
    // A bearer token still works as before, whatever the origin says.
    let bearer = browser
        .client
        .get(server.url("/v1/sessions"))
        .bearer_auth(TOKEN)
        .header("origin", "http://elsewhere.example")
        .send()
        .await
        .unwrap();
    assert_eq!(bearer.status(), StatusCode::OK);
    server.stop();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn logout_ends_every_console_session() {
    let dir = TestDir::new();
    let server = HttpServe::start(&dir, None, &[]);
    let (first, _) = log_in(&server).await;
    let (second, _) = log_in(&server).await;
    // Logging out is a change: without the page's token it is refused.
    let forced = first
        .client
        .post(server.url("/ui/logout"))
        .header("cookie", &first.cookie)
        .header("origin", &first.origin)
        .form_body(&[("csrf", "nope")])
        .send()
        .await
        .unwrap();
    assert_eq!(forced.status(), StatusCode::FORBIDDEN);
    let out = first
        .client
        .post(server.url("/ui/logout"))
        .header("cookie", &first.cookie)
        .header("origin", &first.origin)
        .form_body(&[("csrf", first.csrf.as_str())])
        .send()
        .await
        .unwrap();
    assert_eq!(out.status(), StatusCode::SEE_OTHER);
    assert_eq!(out.headers()["location"], "/ui/login");
    assert!(
        out.headers()["set-cookie"]
            .to_str()
            .unwrap()
            .contains("Max-Age=0")
    );
    // Both browsers are out: the API refuses their cookies, the pages send
    // them to the login form.
    for browser in [&first, &second] {
        let (status, code) = error_code(
            browser
                .request(reqwest::Method::GET, "/v1/sessions")
                .send()
                .await
                .unwrap(),
        )
        .await;
        assert_eq!(
            (status, code.as_str()),
            (StatusCode::UNAUTHORIZED, "unauthorized")
        );
        let page = browser
            .request(reqwest::Method::GET, "/ui/sessions")
            .send()
            .await
            .unwrap();
        assert_eq!(page.status(), StatusCode::SEE_OTHER);
    }
    server.stop();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restart_ends_console_sessions() {
    let dir = TestDir::new();
    let server = HttpServe::start(&dir, None, &[]);
    let (browser, _) = log_in(&server).await;
    assert!(server.stop().success());
    let server = HttpServe::start(&dir, None, &[]);
    let response = browser
        .client
        .get(server.url("/v1/sessions"))
        .header("cookie", &browser.cookie)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::UNAUTHORIZED);
    server.stop();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_console_can_be_turned_off() {
    let dir = TestDir::new();
    let server = HttpServe::start(&dir, Some("[http]\nconsole = false\n"), &[]);
    let client = client();
    for path in ["/ui", "/ui/login", "/ui/sessions", "/ui/assets/console.js"] {
        let (status, code) = error_code(client.get(server.url(path)).send().await.unwrap()).await;
        // Off, the console's paths are like any unknown path: behind the token.
        assert_eq!(
            (status, code.as_str()),
            (StatusCode::UNAUTHORIZED, "unauthorized"),
            "{path}"
        );
        let (status, code) = error_code(
            client
                .get(server.url(path))
                .bearer_auth(TOKEN)
                .send()
                .await
                .unwrap(),
        )
        .await;
        assert_eq!(
            (status, code.as_str()),
            (StatusCode::NOT_FOUND, "not_found"),
            "{path}"
        );
    }
    let login = client
        .post(server.url("/ui/login"))
        .header("origin", server.url(""))
        .form_body(&[("token", TOKEN)])
        .send()
        .await
        .unwrap();
    assert!(login.headers().get("set-cookie").is_none());
    // A cookie means nothing while the console is off.
    let response = client
        .get(server.url("/v1/sessions"))
        .header("cookie", "pincer_console=0123")
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::UNAUTHORIZED);
    server.stop();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn logins_count_against_the_rate_limit() {
    let dir = TestDir::new();
    let server = HttpServe::start(
        &dir,
        Some("[http]\nrate_limit_per_minute = 1\nrate_limit_burst = 1\n"),
        &[],
    );
    let client = client();
    let attempt = || {
        client
            .post(server.url("/ui/login"))
            .header("origin", server.url(""))
            .form_body(&[("token", "a-wrong-token-guessed")])
            .send()
    };
    assert_eq!(attempt().await.unwrap().status(), StatusCode::UNAUTHORIZED);
    let limited = attempt().await.unwrap();
    assert_eq!(limited.status(), StatusCode::TOO_MANY_REQUESTS);
    assert!(limited.headers().contains_key("retry-after"));
    server.stop();
}
