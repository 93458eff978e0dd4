//! `pincer serve --http` through the real binary: REST, SSE, JSON-RPC over
//! WebSocket, auth, limits, and the OpenAPI document against the running server.

use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};
use std::time::{Duration, Instant};

use crate::support::serve::{HttpServe, TOKEN};
use crate::support::{TIMEOUT, TestDir};
use futures::{SinkExt, StreamExt};
use pretty_assertions::assert_eq;
use reqwest::StatusCode;
use serde_json::{Value, json};

/// A 1×1 PNG, base64.
const PNG: &str = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==";

/// A running `pincer serve --http 127.0.0.1:0` (`support::serve`) with an
/// HTTP client presenting the token.
struct Server {
    serve: HttpServe,
    addr: String,
    client: reqwest::Client,
}

impl Server {
    fn start(dir: &TestDir, script: &Path, config: Option<&str>) -> Self {
        Self::start_with(dir, script, config, &[])
    }

    fn start_with(dir: &TestDir, script: &Path, config: Option<&str>, args: &[&str]) -> Self {
        let script = script.to_str().unwrap();
        let mut all = vec!["--script", script];
        all.extend_from_slice(args);
        Self::spawn(dir, config, &all)
    }

    /// `pincer serve --http 127.0.0.1:0` with these arguments.
    fn spawn(dir: &TestDir, config: Option<&str>, args: &[&str]) -> Self {
        Self::spawn_logging(dir, config, args, "pincer=debug")
    }

    /// Like [`Server::spawn`] with these environment variables too.
    fn spawn_with(
        dir: &TestDir,
        config: Option<&str>,
        args: &[&str],
        env: &[(&str, &str)],
    ) -> Self {
        Self::spawn_env(dir, config, args, "pincer=debug", env)
    }

    /// Like [`Server::spawn`] with this `RUST_LOG`.
    fn spawn_logging(dir: &TestDir, config: Option<&str>, args: &[&str], log: &str) -> Self {
        Self::spawn_env(dir, config, args, log, &[])
    }

    fn spawn_env(
        dir: &TestDir,
        config: Option<&str>,
        args: &[&str],
        log: &str,
        env: &[(&str, &str)],
    ) -> Self {
        let mut env = env.to_vec();
        env.push(("RUST_LOG", log));
        let serve = HttpServe::start_with_env(dir, config, args, &env);
        let _ = rustls::crypto::ring::default_provider().install_default();
        let client = reqwest::Client::builder().timeout(TIMEOUT).build().unwrap();
        Self {
            addr: serve.addr.clone(),
            serve,
            client,
        }
    }

    fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    fn get(&self, path: &str) -> reqwest::RequestBuilder {
        self.client.get(self.url(path)).bearer_auth(TOKEN)
    }

    fn post(&self, path: &str, body: Value) -> reqwest::RequestBuilder {
        self.client
            .post(self.url(path))
            .bearer_auth(TOKEN)
            .json(&body)
    }

    fn stderr(&self) -> String {
        self.serve.stderr()
    }

    /// SIGTERM, then the exit status.
    fn stop(self) -> ExitStatus {
        self.serve.stop()
    }
}

async fn json_of(response: reqwest::Response) -> (StatusCode, Value) {
    let status = response.status();
    let text = response.text().await.unwrap();
    let value = serde_json::from_str(&text).unwrap_or_else(|_| panic!("not JSON: {text}"));
    (status, value)
}

async fn send(request: reqwest::RequestBuilder) -> (StatusCode, Value) {
    json_of(request.send().await.unwrap()).await
}

fn one_turn_script(dir: &TestDir) -> PathBuf {
    dir.script(
        "s.jsonl",
        &[json!([{"text": "Hello"}, {"text": " there"}, {"usage": {"input_tokens": 3, "output_tokens": 2}}])],
    )
}

async fn create_session(server: &Server, dir: &TestDir) -> String {
    let (status, session) =
        send(server.post("/v1/sessions", json!({"workspace": dir.workspace()}))).await;
    assert_eq!(status, StatusCode::CREATED, "{session}");
    session["session_id"].as_str().unwrap().to_owned()
}

/// Reads Server-Sent Events off a streaming response.
struct SseReader {
    response: reqwest::Response,
    buffer: String,
}

impl SseReader {
    async fn open(request: reqwest::RequestBuilder) -> Self {
        let response = request.send().await.unwrap();
        assert_eq!(response.status(), StatusCode::OK);
        assert_eq!(
            response.headers()["content-type"].to_str().unwrap(),
            "text/event-stream"
        );
        Self {
            response,
            buffer: String::new(),
        }
    }

    /// The next event's id and data; `None` when the stream ends.
    async fn next(&mut self) -> Option<(String, Value)> {
        tokio::time::timeout(TIMEOUT, self.next_or_end())
            .await
            .expect("no event within the timeout")
    }

    /// The next event's id and data; `None` when the stream ends. Waits as
    /// long as it takes.
    async fn next_or_end(&mut self) -> Option<(String, Value)> {
        loop {
            if let Some(end) = self.buffer.find("\n\n") {
                let block: String = self.buffer.drain(..end + 2).collect();
                let mut id = None;
                let mut data = String::new();
                for line in block.lines() {
                    if let Some(rest) = line.strip_prefix("id:") {
                        id = Some(rest.trim().to_owned());
                    } else if let Some(rest) = line.strip_prefix("data:") {
                        data.push_str(rest.trim_start());
                    }
                }
                match id {
                    Some(id) => return Some((id, serde_json::from_str(&data).unwrap())),
                    None => continue, // a keep-alive comment
                }
            }
            let chunk = self.response.chunk().await.ok()??;
            self.buffer.push_str(std::str::from_utf8(&chunk).unwrap());
        }
    }
}

fn is_terminal(event: &Value) -> bool {
    event["type"] == "state"
        && matches!(
            event["state"].as_str(),
            Some("completed" | "cancelled" | "failed")
        )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_is_required_everywhere_but_the_health_probes() {
    let dir = TestDir::new();
    let server = Server::start(&dir, &one_turn_script(&dir), None);
    for path in ["/healthz", "/readyz"] {
        let (status, body) =
            json_of(server.client.get(server.url(path)).send().await.unwrap()).await;
        assert_eq!(status, StatusCode::OK, "{path}: {body}");
    }
    for (method, path) in [
        ("GET", "/v1/sessions"),
        ("POST", "/v1/sessions"),
        ("GET", "/metrics"),
        ("GET", "/openapi.json"),
        ("GET", "/v1/rpc"),
        ("POST", "/v1/rpc"),
        ("GET", "/acp"),
        ("GET", "/v1/runs/run_x/events"),
        ("POST", "/v1/channels/telegram/messages"),
        ("GET", "/no/such/route"),
    ] {
        let request = server
            .client
            .request(method.parse().unwrap(), server.url(path));
        let response = request.send().await.unwrap();
        assert_eq!(
            response.headers()["www-authenticate"],
            "Bearer realm=\"pincer\"",
            "{method} {path}"
        );
        let (status, body) = json_of(response).await;
        assert_eq!(status, StatusCode::UNAUTHORIZED, "{method} {path}");
        assert_eq!(body["error"]["code"], "unauthorized");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_tokens_are_refused_and_the_right_one_passes() {
    let dir = TestDir::new();
    let server = Server::start(&dir, &one_turn_script(&dir), None);
    for header in [
        "Bearer wrong-token-0123456789abcdef",
        &format!("Bearer {TOKEN}x"),
        &format!("Basic {TOKEN}"),
        TOKEN,
        "Bearer",
    ] {
        let (status, body) = send(
            server
                .client
                .get(server.url("/v1/sessions"))
                .header("authorization", header),
        )
        .await;
        assert_eq!(status, StatusCode::UNAUTHORIZED, "{header}: {body}");
    }
    let (status, body) = send(server.get("/v1/sessions")).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body, json!({"sessions": [], "next_cursor": null}));
    assert!(
        server
            .stderr()
            .contains("HTTP token from environment variable PINCER_HTTP_TOKEN")
    );
    assert!(
        !server.stderr().contains(TOKEN),
        "the token is never printed"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_generated_token_is_kept_in_the_data_dir_with_mode_0600() {
    use std::os::unix::fs::PermissionsExt;
    let dir = TestDir::new();
    let script = one_turn_script(&dir);
    let ready = dir.path().join("ready");
    let mut child = dir
        .command()
        .args(["serve", "--http", "127.0.0.1:0", "--ready-file"])
        .arg(&ready)
        .arg("--script")
        .arg(&script)
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let started = Instant::now();
    while !ready.exists() {
        assert!(started.elapsed() < TIMEOUT);
        std::thread::sleep(Duration::from_millis(20));
    }
    let path = dir.data_dir().join("http-token");
    let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
    let token = std::fs::read_to_string(&path).unwrap().trim().to_owned();
    let addr = std::fs::read_to_string(&ready).unwrap().trim().to_owned();
    let _ = rustls::crypto::ring::default_provider().install_default();
    let client = reqwest::Client::new();
    let status = client
        .get(format!("http://{addr}/v1/sessions"))
        .bearer_auth(&token)
        .send()
        .await
        .unwrap()
        .status();
    assert_eq!(status, StatusCode::OK);
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    assert!(child.wait().unwrap().success());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_body_over_the_limit_is_refused_with_413() {
    let dir = TestDir::new();
    let server = Server::start(
        &dir,
        &one_turn_script(&dir),
        Some("[http]\nbody_limit_bytes = 1000\n"),
    );
    let session = create_session(&server, &dir).await;
    let path = format!("/v1/sessions/{session}/prompt");
    let (status, body) = send(server.post(&path, json!({"prompt": "x".repeat(5000)}))).await;
    assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE, "{body}");
    assert_eq!(body["error"]["code"], "payload_too_large");
    let (status, body) =
        send(server.post(&format!("{path}?wait=true"), json!({"prompt": "hi"}))).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["state"], "completed");
    // Waiting, a person sees the answer in the response.
    assert_eq!(body["reply"], "Hello there", "{body}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn over_the_rate_limit_requests_get_429_with_retry_after() {
    let dir = TestDir::new();
    let server = Server::start(
        &dir,
        &one_turn_script(&dir),
        Some("[http]\nrate_limit_per_minute = 1\nrate_limit_burst = 3\n"),
    );
    for _ in 0..3 {
        let (status, _) = send(server.get("/v1/sessions")).await;
        assert_eq!(status, StatusCode::OK);
    }
    let response = server.get("/v1/sessions").send().await.unwrap();
    let retry_after: u64 = response.headers()["retry-after"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!((1..=60).contains(&retry_after), "{retry_after}");
    let (status, body) = json_of(response).await;
    assert_eq!(status, StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(body["error"]["code"], "rate_limited");
    // The probes are not limited.
    let status = server
        .client
        .get(server.url("/healthz"))
        .send()
        .await
        .unwrap()
        .status();
    assert_eq!(status, StatusCode::OK);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[allow(clippy::too_many_lines, reason = "one scenario, read top to bottom")]
async fn bad_input_is_400_naming_the_field_and_unknown_things_are_404() {
    let dir = TestDir::new();
    let server = Server::start(&dir, &one_turn_script(&dir), None);
    let session = create_session(&server, &dir).await;
    let cases = [
        (
            server.post("/v1/sessions", json!({"workspace": "relative"})),
            StatusCode::BAD_REQUEST,
            "`workspace`",
        ),
        (
            server.post(
                "/v1/sessions",
                json!({"workspace": dir.workspace(), "mode": "yolo"}),
            ),
            StatusCode::BAD_REQUEST,
            "`mode`",
        ),
        (
            server.post(
                "/v1/sessions",
                json!({"workspace": dir.workspace(), "colour": 1}),
            ),
            StatusCode::BAD_REQUEST,
            "unknown field `colour`",
        ),
        (
            server.post(
                "/v1/sessions",
                json!({"workspace": dir.workspace(), "model": "nope/none"}),
            ),
            StatusCode::NOT_FOUND,
            "`model`",
        ),
        (
            server
                .client
                .post(server.url("/v1/sessions"))
                .bearer_auth(TOKEN)
                .body("{not json"),
            StatusCode::BAD_REQUEST,
            "invalid JSON body",
        ),
        (
            server.post(
                &format!("/v1/sessions/{session}/prompt"),
                json!({"prompt": 7}),
            ),
            StatusCode::BAD_REQUEST,
            "`prompt`",
        ),
        (
            server.post(&format!("/v1/sessions/{session}/prompt"), json!({})),
            StatusCode::BAD_REQUEST,
            "`prompt`",
        ),
        (
            server.post(
                &format!("/v1/sessions/{session}/prompt?wait=maybe"),
                json!({"prompt": "x"}),
            ),
            StatusCode::BAD_REQUEST,
            "`wait`",
        ),
        (
            server.get("/v1/sessions?limit=0"),
            StatusCode::BAD_REQUEST,
            "`limit`",
        ),
        (
            server.get("/v1/sessions?cursor=zzz"),
            StatusCode::BAD_REQUEST,
            "`cursor`",
        ),
        (
            server.get("/v1/sessions/ses_nope"),
            StatusCode::NOT_FOUND,
            "ses_nope",
        ),
        (
            server.post("/v1/sessions/ses_nope/prompt", json!({"prompt": "x"})),
            StatusCode::NOT_FOUND,
            "ses_nope",
        ),
        (
            server.get("/v1/runs/run_nope"),
            StatusCode::NOT_FOUND,
            "run_nope",
        ),
        (
            server.get("/v1/runs/run_nope/events"),
            StatusCode::NOT_FOUND,
            "run_nope",
        ),
        (
            server
                .get(&format!("/v1/sessions/{session}/events"))
                .header("last-event-id", "garbage"),
            StatusCode::BAD_REQUEST,
            "Last-Event-ID",
        ),
        (
            server.post("/v1/approvals/apr_nope", json!({"decision": "allow_once"})),
            StatusCode::NOT_FOUND,
            "apr_nope",
        ),
        (
            server.post("/v1/approvals/apr_nope", json!({"decision": "perhaps"})),
            StatusCode::BAD_REQUEST,
            "`decision`",
        ),
        (
            server
                .client
                .delete(server.url("/v1/sessions"))
                .bearer_auth(TOKEN),
            StatusCode::METHOD_NOT_ALLOWED,
            "DELETE",
        ),
        // `/v1/rpc` answers in the same shape: a GET that is no WebSocket
        // handshake, a body that is not JSON, a method it does not take.
        (server.get("/v1/rpc"), StatusCode::BAD_REQUEST, "`Upgrade`"),
        (
            server
                .get("/v1/rpc")
                .header("upgrade", "websocket")
                .header("connection", "Upgrade")
                .header("sec-websocket-version", "13")
                .header("sec-websocket-key", "short"),
            StatusCode::BAD_REQUEST,
            "`Sec-WebSocket-Key`",
        ),
        (
            server
                .client
                .post(server.url("/v1/rpc"))
                .bearer_auth(TOKEN)
                .body("{not json"),
            StatusCode::BAD_REQUEST,
            "invalid JSON body",
        ),
        (
            server.client.put(server.url("/v1/rpc")).bearer_auth(TOKEN),
            StatusCode::METHOD_NOT_ALLOWED,
            "PUT",
        ),
        (
            server
                .get(&format!("/v1/sessions/{session}/events"))
                .header("last-event-id", format!("run_{}:0", "0".repeat(32))),
            StatusCode::NOT_FOUND,
            "is not an event of session",
        ),
    ];
    for (request, expected, fragment) in cases {
        let (status, body) = send(request).await;
        assert_eq!(status, expected, "{body}");
        let message = body["error"]["message"].as_str().unwrap();
        assert!(
            message.contains(fragment),
            "{fragment:?} not in {message:?}"
        );
    }
    // A JSON-RPC call whatever its `Content-Type` says, like every body.
    let (status, body) = send(
        server
            .client
            .post(server.url("/v1/rpc"))
            .bearer_auth(TOKEN)
            .header("content-type", "text/plain")
            .body(r#"{"jsonrpc": "2.0", "id": 1, "method": "sessions.get", "params": {"session_id": "ses_nope"}}"#),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["error"]["code"], -32002, "{body}");
    // The server is still fine.
    let (status, run) = send(server.post(
        &format!("/v1/sessions/{session}/prompt?wait=true"),
        json!({"prompt": "hi"}),
    ))
    .await;
    assert_eq!(status, StatusCode::OK);
    let run_id = run["run_id"].as_str().unwrap();
    let (status, body) = send(server.post(&format!("/v1/runs/{run_id}/cancel"), json!({}))).await;
    assert_eq!(status, StatusCode::CONFLICT, "{body}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sse_resumes_with_last_event_id_without_gaps_or_duplicates() {
    let dir = TestDir::new();
    let slow = json!([{"text": "a"}, {"delay_ms": 40}, {"text": "b"}, {"delay_ms": 40}, {"text": "c"}, {"delay_ms": 40}, {"text": "d"}]);
    let script = dir.script("s.jsonl", &[slow.clone(), slow]);
    let server = Server::start(&dir, &script, None);
    let session = create_session(&server, &dir).await;
    let events_path = format!("/v1/sessions/{session}/events");
    let mut stream = SseReader::open(server.get(&events_path)).await;
    let (status, first) = send(server.post(
        &format!("/v1/sessions/{session}/prompt"),
        json!({"prompt": "one"}),
    ))
    .await;
    assert_eq!(status, StatusCode::ACCEPTED);
    let first_run = first["run_id"].as_str().unwrap().to_owned();
    // Read part of the first run, then drop the connection.
    let mut received = Vec::new();
    let mut last_id = String::new();
    while received.len() < 5 {
        let (id, event) = stream.next().await.unwrap();
        assert_eq!(
            id,
            format!("{}:{}", event["run_id"].as_str().unwrap(), event["seq"])
        );
        last_id = id;
        received.push(event);
    }
    drop(stream);
    // While disconnected: the first run finishes and a second one runs whole.
    let (status, second) = send(server.post(
        &format!("/v1/sessions/{session}/prompt?wait=true"),
        json!({"prompt": "two"}),
    ))
    .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(second["state"], "completed");
    let second_run = second["run_id"].as_str().unwrap().to_owned();
    // Reconnect where we left off: the rest of the first run, then the second.
    let mut stream =
        SseReader::open(server.get(&events_path).header("last-event-id", &last_id)).await;
    loop {
        let (_, event) = stream.next().await.unwrap();
        let done = is_terminal(&event) && event["run_id"] == second_run.as_str();
        received.push(event);
        if done {
            break;
        }
    }
    let mut expected = Vec::new();
    for run in [&first_run, &second_run] {
        let (_, tape) = send(server.get(&format!("/v1/runs/{run}/tape"))).await;
        expected.extend(tape["events"].as_array().unwrap().clone());
    }
    assert_eq!(received, expected);

    // The run stream resumes the same way, and ends with its run.
    let cursor = format!("{first_run}:3");
    let mut stream =
        SseReader::open(server.get(&format!("/v1/runs/{first_run}/events?after={cursor}"))).await;
    let mut rest = Vec::new();
    while let Some((_, event)) = stream.next().await {
        rest.push(event);
    }
    let (_, tape) = send(server.get(&format!("/v1/runs/{first_run}/tape?from_seq=4"))).await;
    assert_eq!(Value::Array(rest), tape["events"]);

    // `from=start`: the session's history from its first event, then live
    // (the console's transcript); a cursor, as a reconnect sends, wins.
    let read_to_end = |mut stream: SseReader| {
        let second_run = second_run.clone();
        async move {
            let mut events = Vec::new();
            loop {
                let (_, event) = stream.next().await.unwrap();
                let done = is_terminal(&event) && event["run_id"] == second_run.as_str();
                events.push(event);
                if done {
                    return events;
                }
            }
        }
    };
    let history =
        read_to_end(SseReader::open(server.get(&format!("{events_path}?from=start"))).await).await;
    assert_eq!(history, expected);
    let resumed = read_to_end(
        SseReader::open(
            server
                .get(&format!("{events_path}?from=start"))
                .header("last-event-id", &last_id),
        )
        .await,
    )
    .await;
    assert_eq!(resumed, expected[5..].to_vec());
    for path in [
        format!("{events_path}?from=yesterday"),
        format!("/v1/runs/{first_run}/events?from=start"),
    ] {
        let (status, body) = send(server.get(&path)).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{path}: {body}");
        assert!(
            body["error"]["message"]
                .as_str()
                .unwrap()
                .contains("`from`"),
            "{body}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[allow(clippy::too_many_lines, reason = "one scenario, read top to bottom")]
async fn websocket_json_rpc_calls_and_a_subscription_to_session_events() {
    use tokio_tungstenite::tungstenite::Message;
    use tokio_tungstenite::tungstenite::client::IntoClientRequest;
    let dir = TestDir::new();
    let server = Server::start(&dir, &one_turn_script(&dir), None);
    let url = format!("ws://{}/v1/rpc", server.addr);
    // No token, no WebSocket.
    let refused = tokio_tungstenite::connect_async(url.as_str()).await;
    match refused {
        Err(tokio_tungstenite::tungstenite::Error::Http(response)) => {
            assert_eq!(response.status(), 401)
        }
        other => panic!("expected 401, got {other:?}"),
    }
    let mut request = url.into_client_request().unwrap();
    request
        .headers_mut()
        .insert("authorization", format!("Bearer {TOKEN}").parse().unwrap());
    let (mut socket, _) = tokio_tungstenite::connect_async(request).await.unwrap();
    let mut notifications = Vec::new();
    let call = async |socket: &mut tokio_tungstenite::WebSocketStream<_>,
                      id: u64,
                      method: &str,
                      params: Value,
                      notifications: &mut Vec<Value>|
           -> Value {
        let message = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        socket
            .send(Message::text(message.to_string()))
            .await
            .unwrap();
        loop {
            let frame = tokio::time::timeout(TIMEOUT, socket.next())
                .await
                .unwrap()
                .unwrap()
                .unwrap();
            let Message::Text(text) = frame else { continue };
            let value: Value = serde_json::from_str(&text).unwrap();
            if value["id"] == id {
                return value;
            }
            notifications.push(value);
        }
    };
    let created = call(
        &mut socket,
        1,
        "sessions.create",
        json!({"workspace": dir.workspace()}),
        &mut notifications,
    )
    .await;
    let session = created["result"]["session_id"].as_str().unwrap().to_owned();
    assert_eq!(created["result"]["origin"], "http");
    let bad = call(
        &mut socket,
        2,
        "sessions.create",
        json!({"workspace": 3}),
        &mut notifications,
    )
    .await;
    assert_eq!(bad["error"]["code"], -32602);
    assert!(
        bad["error"]["message"]
            .as_str()
            .unwrap()
            .contains("`workspace`"),
        "{bad}"
    );
    // `sessions.list` takes the filters `GET /v1/sessions` takes.
    let listed = call(
        &mut socket,
        20,
        "sessions.list",
        json!({"origin": "http", "state": "open", "q": session.to_uppercase()}),
        &mut notifications,
    )
    .await;
    assert_eq!(
        listed["result"]["sessions"][0]["session_id"],
        session.as_str(),
        "{listed}"
    );
    let none = call(
        &mut socket,
        21,
        "sessions.list",
        json!({"origin": "headless"}),
        &mut notifications,
    )
    .await;
    assert_eq!(none["result"]["sessions"], json!([]), "{none}");
    let bad = call(
        &mut socket,
        22,
        "sessions.list",
        json!({"state": "shut"}),
        &mut notifications,
    )
    .await;
    assert_eq!(bad["error"]["code"], -32602, "{bad}");
    assert!(
        bad["error"]["message"]
            .as_str()
            .unwrap()
            .contains("`state`"),
        "{bad}"
    );
    let missing = call(
        &mut socket,
        3,
        "runs.get",
        json!({"run_id": "run_nope"}),
        &mut notifications,
    )
    .await;
    assert_eq!(missing["error"]["code"], -32002);
    let subscribed = call(
        &mut socket,
        4,
        "sessions.subscribe",
        json!({"session_id": session}),
        &mut notifications,
    )
    .await;
    let subscription = subscribed["result"].clone();
    assert!(
        subscription.is_string() || subscription.is_number(),
        "{subscribed}"
    );
    let prompted = call(
        &mut socket,
        5,
        "sessions.prompt",
        json!({"session_id": session, "prompt": "hi"}),
        &mut notifications,
    )
    .await;
    let run = prompted["result"]["run_id"].as_str().unwrap().to_owned();
    while !notifications
        .last()
        .is_some_and(|n| is_terminal(&n["params"]["result"]))
    {
        let frame = tokio::time::timeout(TIMEOUT, socket.next())
            .await
            .unwrap_or_else(|_| {
                panic!(
                    "no event within the timeout after {notifications:#?}\n{}",
                    server.stderr()
                )
            })
            .unwrap()
            .unwrap();
        if let Message::Text(text) = frame {
            notifications.push(serde_json::from_str(&text).unwrap());
        }
    }
    for n in &notifications {
        assert_eq!(n["method"], "sessions.event");
        assert_eq!(n["params"]["subscription"], subscription);
    }
    let events: Vec<Value> = notifications
        .iter()
        .map(|n| n["params"]["result"].clone())
        .collect();
    let tape = call(
        &mut socket,
        6,
        "runs.tape",
        json!({"run_id": run}),
        &mut Vec::new(),
    )
    .await;
    assert_eq!(Value::Array(events), tape["result"]["events"]);
    // A run subscription resumes after a sequence number and ends with the run.
    let mut more = Vec::new();
    call(
        &mut socket,
        7,
        "runs.subscribe",
        json!({"run_id": run, "after_seq": 2}),
        &mut more,
    )
    .await;
    while !more
        .last()
        .is_some_and(|n| is_terminal(&n["params"]["result"]))
    {
        let frame = tokio::time::timeout(TIMEOUT, socket.next())
            .await
            .unwrap()
            .unwrap()
            .unwrap();
        if let Message::Text(text) = frame {
            more.push(serde_json::from_str(&text).unwrap());
        }
    }
    let resumed: Vec<Value> = more.iter().map(|n| n["params"]["result"].clone()).collect();
    assert_eq!(
        Value::Array(resumed),
        Value::Array(tape["result"]["events"].as_array().unwrap()[3..].to_vec())
    );
    socket.close(None).await.unwrap();
    // One call over a plain POST works too.
    let (status, body) = send(server.post(
        "/v1/rpc",
        json!({"jsonrpc": "2.0", "id": 1, "method": "runs.get", "params": {"run_id": run}}),
    ))
    .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(body["result"]["state"], "completed");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_prompts_to_many_sessions_all_complete() {
    const SESSIONS: usize = 100;
    let dir = TestDir::new();
    let server = Server::start(
        &dir,
        &one_turn_script(&dir),
        Some("[http]\nrate_limit_per_minute = 0\n"),
    );
    let sessions =
        futures::future::join_all((0..SESSIONS).map(|_| create_session(&server, &dir))).await;
    let runs = futures::future::join_all(sessions.iter().map(|session| {
        send(server.post(
            &format!("/v1/sessions/{session}/prompt?wait=true"),
            json!({"prompt": "hi"}),
        ))
    }))
    .await;
    for (status, run) in &runs {
        assert_eq!(*status, StatusCode::OK, "{run}");
        assert_eq!(run["state"], "completed", "{run}");
    }
    let mut ids: Vec<&str> = runs
        .iter()
        .map(|(_, run)| run["session_id"].as_str().unwrap())
        .collect();
    ids.sort();
    ids.dedup();
    assert_eq!(ids.len(), SESSIONS);
    let metrics = server
        .get("/metrics")
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        metrics.contains(&format!("pincer_runs{{state=\"completed\"}} {SESSIONS}\n")),
        "{metrics}"
    );
    assert!(
        metrics.contains(&format!(
            "pincer_provider_first_output_seconds_count {SESSIONS}\n"
        )),
        "{metrics}"
    );
    assert!(server.stop().success());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn approvals_are_listed_and_the_first_answer_wins() {
    let dir = TestDir::new();
    let script = dir.script(
        "s.jsonl",
        &[
            json!([{"tool_call": {"id": "w1", "name": "write_file", "arguments": {"path": "a.txt", "content": "hi\n"}}}]),
            json!([{"text": "done"}]),
        ],
    );
    let server = Server::start(&dir, &script, None);
    let session = create_session(&server, &dir).await;
    let (_, run) = send(server.post(
        &format!("/v1/sessions/{session}/prompt"),
        json!({"prompt": "write"}),
    ))
    .await;
    let run_id = run["run_id"].as_str().unwrap().to_owned();
    let approval = loop {
        let (status, body) = send(server.get("/v1/approvals")).await;
        assert_eq!(status, StatusCode::OK);
        if let Some(first) = body["approvals"].as_array().unwrap().first() {
            break first.clone();
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert_eq!(approval["type"], "approval_requested");
    assert_eq!(approval["tool"], "write_file");
    assert_eq!(approval["run_id"], run_id.as_str());
    let (_, listed) = send(server.get(&format!("/v1/sessions/{session}/approvals"))).await;
    assert_eq!(listed["approvals"], json!([approval.clone()]));
    let id = approval["approval_id"].as_str().unwrap();
    let (status, answered) = send(server.post(
        &format!("/v1/approvals/{id}"),
        json!({"decision": "allow_once"}),
    ))
    .await;
    assert_eq!(status, StatusCode::OK, "{answered}");
    assert_eq!(answered["decision"], "allow_once");
    let (status, again) = send(server.post(
        &format!("/v1/approvals/{id}"),
        json!({"decision": "reject_once"}),
    ))
    .await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{again}");
    let mut stream = SseReader::open(server.get(&format!("/v1/runs/{run_id}/events"))).await;
    let mut last = Value::Null;
    while let Some((_, event)) = stream.next().await {
        last = event;
    }
    assert_eq!(last["state"], "completed");
    assert_eq!(
        std::fs::read_to_string(dir.workspace().join("a.txt")).unwrap(),
        "hi\n"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancel_ends_a_running_run_and_sigterm_cancels_the_rest_and_exits_0() {
    let dir = TestDir::new();
    let long = json!([{"text": "a"}, {"delay_ms": 60000}, {"text": "b"}]);
    let script = dir.script("s.jsonl", &[long]);
    let server = Server::start(&dir, &script, None);
    let one = create_session(&server, &dir).await;
    let two = create_session(&server, &dir).await;
    let (_, run) = send(server.post(
        &format!("/v1/sessions/{one}/prompt"),
        json!({"prompt": "go"}),
    ))
    .await;
    let run_id = run["run_id"].as_str().unwrap().to_owned();
    let (status, cancelled) =
        send(server.post(&format!("/v1/runs/{run_id}/cancel"), json!({}))).await;
    assert_eq!(status, StatusCode::OK, "{cancelled}");
    assert_eq!(cancelled["state"], "cancelled");
    let (_, run) = send(server.post(
        &format!("/v1/sessions/{two}/prompt"),
        json!({"prompt": "go"}),
    ))
    .await;
    let other = run["run_id"].as_str().unwrap().to_owned();
    let mut stream = SseReader::open(server.get(&format!("/v1/runs/{other}/events"))).await;
    loop {
        let (_, event) = stream.next().await.unwrap();
        if event["type"] == "text_delta" {
            break;
        }
    }
    let status = server.stop();
    assert!(status.success(), "{status:?}");
    let shown = dir.show_session(&two);
    assert_eq!(shown["runs"][0]["state"], "cancelled");
}

#[test]
fn a_non_loopback_address_is_refused_unless_allowed() {
    let dir = TestDir::new();
    let script = one_turn_script(&dir);
    let out = dir
        .command()
        .args(["serve", "--http", "0.0.0.0:0", "--script"])
        .arg(&script)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("not a loopback address") && stderr.contains("--allow-remote"),
        "{stderr}"
    );
    let out = dir.command().args(["serve"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("nothing to serve"));
}

/// The OpenAPI document against the running server: every route the router
/// serves is documented and every documented route exists, and each answers
/// with a body valid against the schema documented for its status.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[allow(clippy::too_many_lines, reason = "one scenario, read top to bottom")]
async fn the_openapi_document_describes_the_running_server() {
    let doc: Value = serde_json::from_str(pincer::http::routes::OPENAPI).unwrap();
    let mut documented: Vec<(String, String)> = doc["paths"]
        .as_object()
        .unwrap()
        .iter()
        .flat_map(|(path, item)| {
            item.as_object()
                .unwrap()
                .keys()
                .map(move |method| (method.clone(), path.clone()))
        })
        .collect();
    documented.sort();
    let mut served: Vec<(String, String)> = pincer::http::routes::paths()
        .into_iter()
        .map(|(method, path)| (method, path.to_owned()))
        .collect();
    served.sort();
    assert_eq!(served, documented);

    let dir = TestDir::new();
    let script = dir.script(
        "s.jsonl",
        &[
            json!([{"tool_call": {"id": "w1", "name": "write_file", "arguments": {"path": "a.txt", "content": "x"}}}]),
            json!([{"tool_call": {"id": "q1", "name": "ask_user", "arguments": {"question": "Which one?", "options": ["Red", "Blue"]}}}]),
            json!([{"text": "ok"}]),
            json!([{"text": "more"}]),
            json!([{"text": "again"}, {"delay_ms": 60000}]),
        ],
    );
    let server = Server::start(&dir, &script, None);
    let check = |method: &str, path: &str, status: StatusCode, body: &Value| {
        let response = &doc["paths"][path][method]["responses"][status.as_str()];
        assert!(
            response.is_object(),
            "{method} {path}: status {status} is not documented"
        );
        let schema = &response["content"]["application/json"]["schema"];
        let root = json!({"allOf": [schema], "components": doc["components"]});
        let validator = jsonschema::validator_for(&root).unwrap();
        let errors: Vec<String> = validator
            .iter_errors(body)
            .map(|e| format!("{e} at {}", e.instance_path()))
            .collect();
        assert!(
            errors.is_empty(),
            "{method} {path} {status}: {body}\n{}",
            errors.join("\n")
        );
    };
    let mut exercised = Vec::new();
    macro_rules! hit {
        ($method:expr, $template:expr, $request:expr, $expect:expr) => {{
            let (status, body) = send($request).await;
            assert_eq!(status, $expect, "{} {}: {body}", $method, $template);
            check($method, $template, status, &body);
            exercised.push(($method.to_owned(), $template.to_owned()));
            body
        }};
    }
    hit!(
        "get",
        "/healthz",
        server.client.get(server.url("/healthz")),
        StatusCode::OK
    );
    hit!(
        "get",
        "/readyz",
        server.client.get(server.url("/readyz")),
        StatusCode::OK
    );
    hit!(
        "get",
        "/openapi.json",
        server.get("/openapi.json"),
        StatusCode::OK
    );
    let session = hit!(
        "post",
        "/v1/sessions",
        server.post("/v1/sessions", json!({"workspace": dir.workspace()})),
        StatusCode::CREATED
    );
    let sid = session["session_id"].as_str().unwrap().to_owned();
    hit!(
        "post",
        "/v1/sessions",
        server.post("/v1/sessions", json!({})),
        StatusCode::BAD_REQUEST
    );
    hit!(
        "get",
        "/v1/sessions",
        server.get("/v1/sessions?limit=1"),
        StatusCode::OK
    );
    // Every query parameter documented is one the server takes.
    let parameters: Vec<&str> = doc["paths"]["/v1/sessions"]["get"]["parameters"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        parameters,
        [
            "workspace",
            "limit",
            "cursor",
            "origin",
            "state",
            "channel",
            "q"
        ]
    );
    let filtered = hit!(
        "get",
        "/v1/sessions",
        server.get(&format!(
            "/v1/sessions?workspace={}&limit=5&origin=http&state=open&channel=&q=SES_",
            dir.workspace().display()
        )),
        StatusCode::OK
    );
    assert_eq!(filtered["sessions"][0]["session_id"], sid.as_str());
    hit!(
        "get",
        "/v1/sessions",
        server.get("/v1/sessions?state=shut"),
        StatusCode::BAD_REQUEST
    );
    hit!(
        "get",
        "/v1/sessions/{session_id}",
        server.get(&format!("/v1/sessions/{sid}")),
        StatusCode::OK
    );
    hit!(
        "get",
        "/v1/sessions/{session_id}",
        server.get("/v1/sessions/ses_none"),
        StatusCode::NOT_FOUND
    );
    let run = hit!(
        "post",
        "/v1/sessions/{session_id}/prompt",
        server.post(
            &format!("/v1/sessions/{sid}/prompt"),
            json!({"prompt": "write"})
        ),
        StatusCode::ACCEPTED
    );
    let rid = run["run_id"].as_str().unwrap().to_owned();
    let approval = loop {
        let body = hit!(
            "get",
            "/v1/approvals",
            server.get("/v1/approvals"),
            StatusCode::OK
        );
        if let Some(first) = body["approvals"].as_array().unwrap().first() {
            break first.clone();
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    hit!(
        "get",
        "/v1/sessions/{session_id}/approvals",
        server.get(&format!("/v1/sessions/{sid}/approvals")),
        StatusCode::OK
    );
    let aid = approval["approval_id"].as_str().unwrap();
    hit!(
        "post",
        "/v1/approvals/{approval_id}",
        server.post(
            &format!("/v1/approvals/{aid}"),
            json!({"decision": "allow_once"})
        ),
        StatusCode::OK
    );
    hit!(
        "post",
        "/v1/approvals/{approval_id}",
        server.post(
            &format!("/v1/approvals/{aid}"),
            json!({"decision": "allow_once"})
        ),
        StatusCode::NOT_FOUND
    );
    let question = loop {
        let body = hit!(
            "get",
            "/v1/questions",
            server.get("/v1/questions"),
            StatusCode::OK
        );
        if let Some(first) = body["questions"].as_array().unwrap().first() {
            break first.clone();
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert_eq!(question["type"], "question_asked");
    assert_eq!(question["question"], "Which one?");
    assert_eq!(question["options"], json!(["Red", "Blue"]));
    let listed = hit!(
        "get",
        "/v1/sessions/{session_id}/questions",
        server.get(&format!("/v1/sessions/{sid}/questions")),
        StatusCode::OK
    );
    assert_eq!(listed["questions"], json!([question.clone()]));
    hit!(
        "get",
        "/v1/sessions/{session_id}/questions",
        server.get("/v1/sessions/ses_none/questions"),
        StatusCode::NOT_FOUND
    );
    let qid = question["question_id"].as_str().unwrap();
    let bad = hit!(
        "post",
        "/v1/questions/{question_id}",
        server.post(
            &format!("/v1/questions/{qid}"),
            json!({"answer": "Red", "decline": true})
        ),
        StatusCode::BAD_REQUEST
    );
    assert!(
        bad["error"]["message"]
            .as_str()
            .unwrap()
            .contains("not both"),
        "{bad}"
    );
    let replied = hit!(
        "post",
        "/v1/questions/{question_id}",
        server.post(&format!("/v1/questions/{qid}"), json!({"answer": "2"})),
        StatusCode::OK
    );
    assert_eq!(replied["outcome"], "answered");
    assert_eq!(replied["answer"], "Blue");
    hit!(
        "post",
        "/v1/questions/{question_id}",
        server.post(&format!("/v1/questions/{qid}"), json!({"decline": true})),
        StatusCode::NOT_FOUND
    );
    let mut stream = SseReader::open(server.get(&format!("/v1/runs/{rid}/events"))).await;
    while stream.next().await.is_some() {}
    exercised.push(("get".into(), "/v1/runs/{run_id}/events".into()));
    hit!(
        "post",
        "/v1/sessions/{session_id}/prompt",
        server.post(
            &format!("/v1/sessions/{sid}/prompt?wait=true"),
            json!({"content": [{"type": "text", "text": "more"}]})
        ),
        StatusCode::OK
    );
    hit!(
        "get",
        "/v1/sessions/{session_id}/runs",
        server.get(&format!("/v1/sessions/{sid}/runs")),
        StatusCode::OK
    );
    hit!(
        "get",
        "/v1/sessions/{session_id}/context",
        server.get(&format!("/v1/sessions/{sid}/context")),
        StatusCode::OK
    );
    hit!(
        "get",
        "/v1/runs/{run_id}",
        server.get(&format!("/v1/runs/{rid}")),
        StatusCode::OK
    );
    hit!(
        "get",
        "/v1/runs/{run_id}/tape",
        server.get(&format!("/v1/runs/{rid}/tape")),
        StatusCode::OK
    );
    hit!(
        "post",
        "/v1/runs/{run_id}/cancel",
        server.post(&format!("/v1/runs/{rid}/cancel"), json!({})),
        StatusCode::CONFLICT
    );
    let idle = hit!(
        "post",
        "/v1/sessions/{session_id}/steer",
        server.post(
            &format!("/v1/sessions/{sid}/steer"),
            json!({"prompt": "nothing works now"})
        ),
        StatusCode::OK
    );
    assert_eq!(
        idle,
        json!({"outcome": "promptRequired", "reason": "noRunningTurn"})
    );
    hit!(
        "post",
        "/v1/sessions/{session_id}/steer",
        server.post(&format!("/v1/sessions/{sid}/steer"), json!({})),
        StatusCode::BAD_REQUEST
    );
    // `/undo` with no edit to revert: queued as a run of its own all the same.
    hit!(
        "post",
        "/v1/sessions/{session_id}/commands",
        server.post(
            &format!("/v1/sessions/{sid}/commands"),
            json!({"command": "undo"})
        ),
        StatusCode::ACCEPTED
    );
    hit!(
        "post",
        "/v1/sessions/{session_id}/commands",
        server.post(
            &format!("/v1/sessions/{sid}/commands"),
            json!({"command": "rm -rf"})
        ),
        StatusCode::BAD_REQUEST
    );
    // A well-formed image for a model that takes none (a model script
    // takes none unless told): content the model cannot take, not a bad
    // request.
    let image = json!({"content": [{"type": "image", "mime_type": "image/png", "data": PNG}]});
    hit!(
        "post",
        "/v1/sessions/{session_id}/prompt",
        server.post(&format!("/v1/sessions/{sid}/prompt"), image.clone()),
        StatusCode::UNPROCESSABLE_ENTITY
    );
    hit!(
        "post",
        "/v1/sessions/{session_id}/steer",
        server.post(&format!("/v1/sessions/{sid}/steer"), image),
        StatusCode::UNPROCESSABLE_ENTITY
    );
    let long = hit!(
        "post",
        "/v1/sessions/{session_id}/prompt",
        server.post(
            &format!("/v1/sessions/{sid}/prompt"),
            json!({"prompt": "long"})
        ),
        StatusCode::ACCEPTED
    );
    // Once the long run works, a message steers it.
    let steered = loop {
        let answer = hit!(
            "post",
            "/v1/sessions/{session_id}/steer",
            server.post(
                &format!("/v1/sessions/{sid}/steer"),
                json!({"prompt": "and also this"})
            ),
            StatusCode::OK
        );
        if answer["outcome"] == "injected" {
            break answer;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert_eq!(steered["run_id"], long["run_id"]);
    let mut stream =
        SseReader::open(server.get(&format!("/v1/sessions/{sid}/events?after={rid}:0"))).await;
    let (id, _) = stream.next().await.unwrap();
    assert_eq!(id, format!("{rid}:1"));
    drop(stream);
    exercised.push(("get".into(), "/v1/sessions/{session_id}/events".into()));
    let lid = long["run_id"].as_str().unwrap();
    hit!(
        "post",
        "/v1/runs/{run_id}/cancel",
        server.post(&format!("/v1/runs/{lid}/cancel"), json!({})),
        StatusCode::OK
    );
    let metrics = server.get("/metrics").send().await.unwrap();
    assert_eq!(metrics.status(), StatusCode::OK);
    assert!(
        metrics.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("application/openmetrics-text")
    );
    assert!(doc["paths"]["/metrics"]["get"]["responses"]["200"]["content"]["application/openmetrics-text"].is_object());
    exercised.push(("get".into(), "/metrics".into()));
    let rpc = hit!("post", "/v1/rpc", server.post("/v1/rpc", json!({"jsonrpc": "2.0", "id": 1, "method": "sessions.get", "params": {"session_id": sid}})), StatusCode::OK);
    assert_eq!(rpc["result"]["session_id"], sid.as_str());
    // The WebSocket route is exercised by its own test; here, that it upgrades.
    let mut request =
        tokio_tungstenite::tungstenite::client::IntoClientRequest::into_client_request(format!(
            "ws://{}/v1/rpc",
            server.addr
        ))
        .unwrap();
    request
        .headers_mut()
        .insert("authorization", format!("Bearer {TOKEN}").parse().unwrap());
    let (_, response) = tokio_tungstenite::connect_async(request).await.unwrap();
    assert_eq!(response.status(), 101);
    assert!(doc["paths"]["/v1/rpc"]["get"]["responses"]["101"].is_object());
    exercised.push(("get".into(), "/v1/rpc".into()));
    // ACP over WebSocket: its own test below; here, that it upgrades.
    let mut request =
        tokio_tungstenite::tungstenite::client::IntoClientRequest::into_client_request(format!(
            "ws://{}/acp",
            server.addr
        ))
        .unwrap();
    request
        .headers_mut()
        .insert("authorization", format!("Bearer {TOKEN}").parse().unwrap());
    let (_, response) = tokio_tungstenite::connect_async(request).await.unwrap();
    assert_eq!(response.status(), 101);
    assert!(doc["paths"]["/acp"]["get"]["responses"]["101"].is_object());
    exercised.push(("get".into(), "/acp".into()));
    let verdict = hit!(
        "get",
        "/v1/verify",
        server.get("/v1/verify"),
        StatusCode::OK
    );
    assert_eq!(verdict["ok"], true, "{verdict}");
    let summary = hit!(
        "get",
        "/v1/health/summary",
        server.get("/v1/health/summary?window=2h"),
        StatusCode::OK
    );
    assert_eq!(summary["window_secs"], 7200, "{summary}");
    let refused = hit!(
        "get",
        "/v1/health/summary",
        server.get("/v1/health/summary?window=a%20while"),
        StatusCode::BAD_REQUEST
    );
    assert!(
        refused["error"]["message"]
            .as_str()
            .unwrap()
            .contains("`window`"),
        "{refused}"
    );
    let listed = hit!(
        "get",
        "/v1/channels",
        server.get("/v1/channels"),
        StatusCode::OK
    );
    assert_eq!(listed, json!({"channels": []}));
    // No channel runs in this server: the channel routes say so (their
    // use is tested in tests/it/webhook.rs and tests/it/send.rs).
    hit!(
        "post",
        "/v1/channels/{name}/messages",
        server.post(
            "/v1/channels/telegram/messages",
            json!({"to": "42", "text": "hello"})
        ),
        StatusCode::NOT_FOUND
    );
    hit!(
        "get",
        "/v1/channels/{name}/outbox",
        server.get("/v1/channels/telegram/outbox?status=unknown_after_send"),
        StatusCode::NOT_FOUND
    );
    hit!(
        "get",
        "/v1/channels/{name}/outbox",
        server.get("/v1/channels/telegram/outbox?limit=0"),
        StatusCode::BAD_REQUEST
    );
    hit!(
        "post",
        "/v1/channels/{name}/outbox/{intent_id}",
        server.post(
            "/v1/channels/telegram/outbox/reply:run_1",
            json!({"resolve": "resend"})
        ),
        StatusCode::NOT_FOUND
    );
    hit!(
        "post",
        "/v1/channels/{name}/outbox/{intent_id}",
        server.post(
            "/v1/channels/telegram/outbox/reply:run_1",
            json!({"resolve": "maybe"})
        ),
        StatusCode::BAD_REQUEST
    );
    hit!(
        "get",
        "/v1/channels/{name}/pairs",
        server.get("/v1/channels/telegram/pairs"),
        StatusCode::NOT_FOUND
    );
    hit!(
        "delete",
        "/v1/channels/{name}/pairs/{sender}",
        server
            .client
            .delete(server.url("/v1/channels/telegram/pairs/u1"))
            .bearer_auth(TOKEN),
        StatusCode::NOT_FOUND
    );
    hit!(
        "post",
        "/channels/{name}/webhook",
        server
            .client
            .post(server.url("/channels/webhook/webhook"))
            .json(&json!({})),
        StatusCode::NOT_FOUND
    );
    hit!(
        "post",
        "/channels/{name}/events",
        server
            .client
            .post(server.url("/channels/slack/events"))
            .json(&json!({})),
        StatusCode::NOT_FOUND
    );
    let ws = dir.workspace();
    // Schedules (their firing is tested in tests/it/schedules.rs).
    hit!(
        "post",
        "/v1/schedules",
        server.post(
            "/v1/schedules",
            json!({"cron": "0 9 * * MON-FRI", "tz": "Europe/Berlin", "prompt": "Report", "workspace": ws, "id": "morning"})
        ),
        StatusCode::CREATED
    );
    hit!(
        "post",
        "/v1/schedules",
        server.post(
            "/v1/schedules",
            json!({"cron": "0 9 * *", "prompt": "Report", "workspace": ws})
        ),
        StatusCode::UNPROCESSABLE_ENTITY
    );
    let schedules = hit!(
        "get",
        "/v1/schedules",
        server.get("/v1/schedules"),
        StatusCode::OK
    );
    assert_eq!(schedules["schedules"][0]["schedule"]["id"], "morning");
    hit!(
        "get",
        "/v1/schedules/{schedule_id}",
        server.get("/v1/schedules/morning"),
        StatusCode::OK
    );
    hit!(
        "delete",
        "/v1/schedules/{schedule_id}",
        server
            .client
            .delete(server.url("/v1/schedules/morning"))
            .bearer_auth(TOKEN),
        StatusCode::OK
    );
    let item = hit!(
        "post",
        "/v1/memory",
        server.post(
            "/v1/memory",
            json!({"text": "Deploys need the VPN", "workspace": ws, "tags": ["ops"]})
        ),
        StatusCode::CREATED
    );
    let mid = item["id"].as_str().unwrap().to_owned();
    hit!(
        "post",
        "/v1/memory",
        server.post("/v1/memory", json!({"text": "x", "scope": "workspace"})),
        StatusCode::BAD_REQUEST
    );
    hit!(
        "get",
        "/v1/memory",
        server.get(&format!("/v1/memory?session_id={sid}&q=deploys")),
        StatusCode::OK
    );
    hit!(
        "get",
        "/v1/memory/{memory_id}",
        server.get(&format!("/v1/memory/{mid}")),
        StatusCode::OK
    );
    hit!(
        "patch",
        "/v1/memory/{memory_id}",
        server
            .client
            .patch(server.url(&format!("/v1/memory/{mid}")))
            .bearer_auth(TOKEN)
            .json(&json!({"pinned": true})),
        StatusCode::OK
    );
    hit!(
        "delete",
        "/v1/memory/{memory_id}",
        server
            .client
            .delete(server.url(&format!("/v1/memory/{mid}")))
            .bearer_auth(TOKEN),
        StatusCode::OK
    );
    hit!(
        "get",
        "/v1/memory/{memory_id}",
        server.get(&format!("/v1/memory/{mid}")),
        StatusCode::NOT_FOUND
    );
    // Skills: a workspace's, one of them, and one that is not there.
    let skill_dir = dir.workspace().join(".agents/skills/demo");
    std::fs::create_dir_all(&skill_dir).unwrap();
    std::fs::write(
        skill_dir.join("SKILL.md"),
        "---\nname: demo\ndescription: Demonstrates.\nlicense: MIT\n---\nDo it.\n",
    )
    .unwrap();
    let workspace = dir.workspace().canonicalize().unwrap();
    let query: String = form_urlencoded::Serializer::new(String::new())
        .append_pair("workspace", workspace.to_str().unwrap())
        .finish();
    let listed = hit!(
        "get",
        "/v1/skills",
        server.get(&format!("/v1/skills?{query}")),
        StatusCode::OK
    );
    assert_eq!(listed["skills"][0]["name"], "demo");
    assert_eq!(listed["skills"][0]["offered"], false, "{listed}");
    let shown = hit!(
        "get",
        "/v1/skills/{name}",
        server.get(&format!("/v1/skills/demo?{query}")),
        StatusCode::OK
    );
    assert_eq!(shown["body"], "Do it.");
    hit!(
        "get",
        "/v1/skills/{name}",
        server.get(&format!("/v1/skills/absent?{query}")),
        StatusCode::NOT_FOUND
    );
    hit!(
        "get",
        "/v1/skills",
        server.get("/v1/skills?workspace=relative"),
        StatusCode::BAD_REQUEST
    );
    // Every error a guard gives is documented where it can happen.
    hit!(
        "get",
        "/v1/runs/{run_id}",
        server.client.get(server.url(&format!("/v1/runs/{rid}"))),
        StatusCode::UNAUTHORIZED
    );
    let doomed = create_session(&server, &dir).await;
    let deleted = hit!(
        "delete",
        "/v1/sessions/{session_id}",
        server
            .client
            .delete(server.url(&format!("/v1/sessions/{doomed}")))
            .bearer_auth(TOKEN),
        StatusCode::OK
    );
    assert_eq!(deleted, json!({"session_id": doomed, "deleted": true}));
    hit!(
        "delete",
        "/v1/sessions/{session_id}",
        server
            .client
            .delete(server.url(&format!("/v1/sessions/{doomed}")))
            .bearer_auth(TOKEN),
        StatusCode::NOT_FOUND
    );
    exercised.sort();
    exercised.dedup();
    assert_eq!(exercised, documented, "every documented route is exercised");
}

/// `GET /v1/verify` answers what `pincer verify --json` prints: on a clean
/// store, the chain intact with a receipt for each tool call.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn verify_shows_the_receipt_chain_as_pincer_verify_does() {
    let dir = TestDir::new();
    let script = dir.script(
        "s.jsonl",
        &[
            json!([{"tool_call": {"id": "w1", "name": "write_file", "arguments": {"path": "a.txt", "content": "x"}}}]),
            json!([{"tool_call": {"id": "w2", "name": "write_file", "arguments": {"path": "b.txt", "content": "y"}}}]),
            json!([{"text": "done"}]),
        ],
    );
    let server = Server::start(&dir, &script, None);
    let (status, session) = send(server.post(
        "/v1/sessions",
        json!({"workspace": dir.workspace(), "mode": "full"}),
    ))
    .await;
    assert_eq!(status, StatusCode::CREATED, "{session}");
    let sid = session["session_id"].as_str().unwrap();
    let (status, run) = send(server.post(
        &format!("/v1/sessions/{sid}/prompt?wait=true"),
        json!({"prompt": "write two files"}),
    ))
    .await;
    assert_eq!(status, StatusCode::OK, "{run}");
    assert_eq!(run["state"], "completed", "{run}");
    let (status, verdict) = send(server.get("/v1/verify")).await;
    assert_eq!(status, StatusCode::OK, "{verdict}");
    assert_eq!(verdict["ok"], true, "{verdict}");
    assert_eq!(verdict["receipts"], 2, "{verdict}");
    assert_eq!(verdict["broken"], Value::Null, "{verdict}");
    assert_eq!(verdict["missing"], json!([]), "{verdict}");
    assert_eq!(verdict["head"].as_str().unwrap().len(), 64, "{verdict}");
    let (status, call) = send(server.post(
        "/v1/rpc",
        json!({"jsonrpc": "2.0", "id": 1, "method": "receipts.verify"}),
    ))
    .await;
    assert_eq!(status, StatusCode::OK, "{call}");
    assert_eq!(call["result"], verdict, "{call}");
    assert!(server.stop().success());
    let out = dir.command().args(["verify", "--json"]).output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let printed: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(printed, verdict);
}

/// `GET /v1/health/summary` (and JSON-RPC `health.summary`) sums the runs
/// created in its window, in every session: by state, failures, tokens,
/// latency and per bucket; a run created before the window is left out.
#[tokio::test]
async fn the_health_summary_counts_the_runs_of_its_window() {
    let dir = TestDir::new();
    let turn =
        |text: &str| json!([{"text": text}, {"usage": {"input_tokens": 3, "output_tokens": 2}}]);
    let script = dir.script(
        "s.jsonl",
        &[
            turn("one"),
            turn("two"),
            turn("three"),
            json!([{"error": {"kind": "auth", "message": "bad key"}}]),
        ],
    );
    let server = Server::start(&dir, &script, None);
    let (status, empty) = send(server.get("/v1/health/summary")).await;
    assert_eq!(status, StatusCode::OK, "{empty}");
    assert_eq!(empty["window_secs"], 3600, "{empty}");
    assert_eq!(empty["runs"]["total"], 0, "{empty}");
    assert_eq!(empty["runs"]["latency_ms"]["p50"], Value::Null, "{empty}");
    assert_eq!(empty["bucket_secs"], 300, "{empty}");
    assert_eq!(empty["buckets"].as_array().unwrap().len(), 12, "{empty}");
    assert_eq!(empty["store"], "sqlite", "{empty}");
    assert_eq!(empty["instances"], Value::Null, "{empty}");
    let mut runs = Vec::new();
    let session = create_session(&server, &dir).await;
    for prompt in ["one", "two", "three", "four"] {
        let (status, run) = send(server.post(
            &format!("/v1/sessions/{session}/prompt?wait=true"),
            json!({ "prompt": prompt }),
        ))
        .await;
        assert_eq!(status, StatusCode::OK, "{run}");
        runs.push(run);
    }
    let states: Vec<&str> = runs.iter().map(|r| r["state"].as_str().unwrap()).collect();
    assert_eq!(states, ["completed", "completed", "completed", "failed"]);
    // The first run was created two hours ago.
    let db = rusqlite::Connection::open(dir.data_dir().join("pincer.db")).unwrap();
    db.busy_timeout(TIMEOUT).unwrap();
    db.execute(
        "UPDATE runs SET created_at = created_at - 7200000, started_at = started_at - 7200000, ended_at = ended_at - 7200000 WHERE id = ?1",
        [runs[0]["run_id"].as_str().unwrap()],
    )
    .unwrap();
    drop(db);
    let (status, summary) = send(server.get("/v1/health/summary")).await;
    assert_eq!(status, StatusCode::OK, "{summary}");
    let counted = &summary["runs"];
    assert_eq!(counted["total"], 3, "{summary}");
    assert_eq!(
        counted["by_state"],
        json!({"queued": 0, "running": 0, "waiting": 0, "completed": 2, "cancelled": 0, "failed": 1}),
        "{summary}"
    );
    assert_eq!(counted["failures"], 1, "{summary}");
    assert_eq!(
        (&counted["input_tokens"], &counted["output_tokens"]),
        (&json!(6), &json!(4)),
        "{summary}"
    );
    assert_eq!(counted["latency_ms"]["runs"], 3, "{summary}");
    let (p50, p95) = (
        counted["latency_ms"]["p50"].as_i64().unwrap(),
        counted["latency_ms"]["p95"].as_i64().unwrap(),
    );
    assert!(0 <= p50 && p50 <= p95, "{summary}");
    let buckets = summary["buckets"].as_array().unwrap();
    let in_buckets: u64 = buckets.iter().map(|b| b["runs"].as_u64().unwrap()).sum();
    let failed: u64 = buckets.iter().map(|b| b["failed"].as_u64().unwrap()).sum();
    assert_eq!((in_buckets, failed), (3, 1), "{summary}");
    assert_eq!(
        buckets.last().unwrap()["start"].as_i64().unwrap() + 300_000,
        summary["until"].as_i64().unwrap(),
        "the last bucket ends now: {summary}"
    );
    let (status, wider) = send(server.get("/v1/health/summary?window=3h")).await;
    assert_eq!(status, StatusCode::OK, "{wider}");
    assert_eq!(wider["runs"]["total"], 4, "{wider}");
    assert_eq!(wider["runs"]["by_state"]["completed"], 3, "{wider}");
    let (status, call) = send(server.post(
        "/v1/rpc",
        json!({"jsonrpc": "2.0", "id": 1, "method": "health.summary", "params": {"window": "3h"}}),
    ))
    .await;
    assert_eq!(status, StatusCode::OK, "{call}");
    assert_eq!(call["result"]["runs"], wider["runs"], "{call}");
    let (status, call) = send(server.post(
        "/v1/rpc",
        json!({"jsonrpc": "2.0", "id": 2, "method": "health.summary", "params": {"window": "2d"}}),
    ))
    .await;
    assert_eq!(status, StatusCode::OK, "{call}");
    assert_eq!(call["error"]["code"], -32602, "{call}");
    assert!(
        call["error"]["message"]
            .as_str()
            .unwrap()
            .contains("`window`"),
        "{call}"
    );
}

/// Reads a stream until it has delivered `runs` run ends, or nothing more
/// comes for a while; returns what it got.
async fn read_runs(stream: &mut SseReader, runs: usize) -> Vec<(String, Value)> {
    let mut got = Vec::new();
    let mut ended = 0;
    while ended < runs {
        let Ok(Some((id, event))) = tokio::time::timeout(TIMEOUT, stream.next_or_end()).await
        else {
            break;
        };
        if is_terminal(&event) {
            ended += 1;
        }
        got.push((id, event));
    }
    got
}

/// Every event of the runs, in order, as the tape holds them, with its id.
async fn tapes(server: &Server, runs: &[String]) -> Vec<(String, Value)> {
    let mut all = Vec::new();
    for run in runs {
        let (_, tape) = send(server.get(&format!("/v1/runs/{run}/tape"))).await;
        for event in tape["events"].as_array().unwrap() {
            all.push((format!("{run}:{}", event["seq"]), event.clone()));
        }
    }
    all
}

/// Many live session streams and many short runs one after the other: every
/// stream gets every event of every run, the end of each run included (a
/// stream must not take a run for finished before it read the run's end).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_live_session_stream_gets_every_event_of_many_sequential_runs() {
    const STREAMS: usize = 20;
    const PROMPTS: usize = 30;
    let dir = TestDir::new();
    let turn = json!([{"text": "a"}, {"text": "b"}, {"text": "c"}, {"usage": {"input_tokens": 1, "output_tokens": 3}}]);
    let script = dir.script("s.jsonl", &vec![turn; PROMPTS]);
    let server = Server::start(&dir, &script, Some("[http]\nrate_limit_per_minute = 0\n"));
    let session = create_session(&server, &dir).await;
    let path = format!("/v1/sessions/{session}/events");
    let mut readers = Vec::new();
    for _ in 0..STREAMS {
        let mut stream = SseReader::open(server.get(&path)).await;
        readers.push(tokio::spawn(async move {
            read_runs(&mut stream, PROMPTS).await
        }));
    }
    let mut runs = Vec::new();
    for i in 0..PROMPTS {
        let (status, run) = send(server.post(
            &format!("/v1/sessions/{session}/prompt?wait=true"),
            json!({"prompt": format!("prompt {i}")}),
        ))
        .await;
        assert_eq!(status, StatusCode::OK, "{run}");
        assert_eq!(run["state"], "completed", "{run}");
        runs.push(run["run_id"].as_str().unwrap().to_owned());
    }
    let expected = tapes(&server, &runs).await;
    for (i, reader) in readers.into_iter().enumerate() {
        let got = reader.await.unwrap();
        assert_eq!(
            got.len(),
            expected.len(),
            "stream {i} got {} of {} events",
            got.len(),
            expected.len()
        );
        assert_eq!(got, expected, "stream {i}");
    }
}

/// A WebSocket JSON-RPC subscription's events.
struct WsEvents {
    socket: tokio_tungstenite::WebSocketStream<
        tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>,
    >,
}

impl WsEvents {
    /// Connects and calls `method` (a `*.subscribe`) with `params`.
    async fn subscribe(server: &Server, method: &str, params: Value) -> Self {
        use tokio_tungstenite::tungstenite::Message;
        use tokio_tungstenite::tungstenite::client::IntoClientRequest;
        let mut request = format!("ws://{}/v1/rpc", server.addr)
            .into_client_request()
            .unwrap();
        request
            .headers_mut()
            .insert("authorization", format!("Bearer {TOKEN}").parse().unwrap());
        let (mut socket, _) = tokio_tungstenite::connect_async(request).await.unwrap();
        let call = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params});
        socket.send(Message::text(call.to_string())).await.unwrap();
        let mut events = Self { socket };
        let answer = events.message().await.unwrap();
        assert!(
            answer["result"].is_u64() || answer["result"].is_string(),
            "{answer}"
        );
        events
    }

    async fn message(&mut self) -> Option<Value> {
        use tokio_tungstenite::tungstenite::Message;
        loop {
            match self.socket.next().await? {
                Ok(Message::Text(text)) => return Some(serde_json::from_str(&text).unwrap()),
                Ok(Message::Close(_)) | Err(_) => return None,
                Ok(_) => continue,
            }
        }
    }

    /// The next event with its id (`RUN_ID:SEQ`, as SSE would name it);
    /// `None` when the connection ends.
    async fn next_or_end(&mut self) -> Option<(String, Value)> {
        let message = self.message().await?;
        let event = message["params"]["result"].clone();
        Some((
            format!("{}:{}", event["run_id"].as_str()?, event["seq"]),
            event,
        ))
    }
}

/// One subscriber of the crash test: an SSE stream or a WebSocket subscription.
enum Subscriber {
    Sse(SseReader),
    Ws(Box<WsEvents>),
}

impl Subscriber {
    async fn next_or_end(&mut self) -> Option<(String, Value)> {
        match self {
            Subscriber::Sse(stream) => stream.next_or_end().await,
            Subscriber::Ws(events) => events.next_or_end().await,
        }
    }
}

/// Session streams (SSE and WebSocket) and a run stream follow runs of two
/// sessions that are in the middle of streaming when the server is killed
/// with SIGKILL. After a restart each resumes from the last id it got: no
/// gap, no duplicate, every id it saw before the crash names the same event
/// after it, and every run it saw begin is seen to end.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn event_streams_resume_across_a_kill_9_without_gaps_or_lost_ends() {
    use std::sync::{Arc, Mutex};
    const DELTAS: usize = 5;
    let dir = TestDir::new();
    let mut steps = Vec::new();
    for i in 0..200 {
        steps.push(json!({"text": format!("t{i} ")}));
        steps.push(json!({"delay_ms": 15}));
    }
    steps.push(json!({"delay_ms": 60000}));
    let script = dir.script("s.jsonl", &[Value::Array(steps), json!([{"text": "next"}])]);
    let config = Some("[http]\nrate_limit_per_minute = 0\n");
    let server = Server::start(&dir, &script, config);
    let sessions = [
        create_session(&server, &dir).await,
        create_session(&server, &dir).await,
    ];
    let mut subscribers = Vec::new();
    for session in &sessions {
        let path = format!("/v1/sessions/{session}/events");
        subscribers.push((
            format!("sse {session}"),
            Subscriber::Sse(SseReader::open(server.get(&path)).await),
        ));
        let ws = WsEvents::subscribe(
            &server,
            "sessions.subscribe",
            json!({"session_id": session}),
        )
        .await;
        subscribers.push((format!("ws {session}"), Subscriber::Ws(Box::new(ws))));
    }
    let mut first_runs = Vec::new();
    for session in &sessions {
        // One run streaming, one queued behind it.
        for prompt in ["stream", "queued"] {
            let (status, run) = send(server.post(
                &format!("/v1/sessions/{session}/prompt"),
                json!({"prompt": prompt}),
            ))
            .await;
            assert_eq!(status, StatusCode::ACCEPTED, "{run}");
            if prompt == "stream" {
                first_runs.push(run["run_id"].as_str().unwrap().to_owned());
            }
        }
    }
    let run_path = format!("/v1/runs/{}/events", first_runs[0]);
    subscribers.push((
        format!("run {}", first_runs[0]),
        Subscriber::Sse(SseReader::open(server.get(&run_path)).await),
    ));

    // Each subscriber reads until the server dies; the one whose event makes
    // every subscriber have seen a few chunks kills it at once, so the kill
    // lands while events are going out.
    let counts = Arc::new(Mutex::new(vec![0usize; subscribers.len()]));
    let pid = server.serve.pid() as i32;
    let mut readers = Vec::new();
    for (i, (name, mut subscriber)) in subscribers.into_iter().enumerate() {
        let counts = counts.clone();
        readers.push(tokio::spawn(async move {
            let mut got = Vec::new();
            while let Ok(Some((id, event))) =
                tokio::time::timeout(TIMEOUT, subscriber.next_or_end()).await
            {
                let delta = event["type"] == "text_delta";
                got.push((id, event));
                if delta {
                    let mut counts = counts.lock().unwrap();
                    counts[i] += 1;
                    if counts.iter().all(|n| *n >= DELTAS) {
                        unsafe { libc::kill(pid, libc::SIGKILL) };
                    }
                }
            }
            (name, got)
        }));
    }
    let mut before = Vec::new();
    for reader in readers {
        before.push(reader.await.unwrap());
    }
    drop(server);
    for (name, got) in &before {
        let deltas = got
            .iter()
            .filter(|(_, e)| e["type"] == "text_delta")
            .count();
        assert!(
            deltas >= DELTAS,
            "{name} got {deltas} chunks before the kill"
        );
    }

    let server = Server::start(&dir, &script, config);
    for (name, mut got) in before {
        let (kind, scope) = name.split_once(' ').unwrap();
        let (last_id, _) = got.last().unwrap().clone();
        let (runs, mut resumed) = match kind {
            "run" => {
                let path = format!("/v1/runs/{scope}/events");
                let stream = SseReader::open(server.get(&path).header("last-event-id", &last_id));
                (vec![scope.to_owned()], Subscriber::Sse(stream.await))
            }
            _ => {
                let (_, list) = send(server.get(&format!("/v1/sessions/{scope}/runs"))).await;
                let mut runs: Vec<String> = list["runs"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|r| r["run_id"].as_str().unwrap().to_owned())
                    .collect();
                runs.sort();
                let subscriber = if kind == "sse" {
                    let path = format!("/v1/sessions/{scope}/events");
                    let stream = server.get(&path).header("last-event-id", &last_id);
                    Subscriber::Sse(SseReader::open(stream).await)
                } else {
                    let params = json!({"session_id": scope, "after": last_id});
                    Subscriber::Ws(Box::new(
                        WsEvents::subscribe(&server, "sessions.subscribe", params).await,
                    ))
                };
                (runs, subscriber)
            }
        };
        let expected = tapes(&server, &runs).await;
        while got.len() < expected.len() {
            match tokio::time::timeout(Duration::from_secs(5), resumed.next_or_end()).await {
                Ok(Some(event)) => got.push(event),
                Ok(None) | Err(_) => break,
            }
        }
        let ids: Vec<&str> = got.iter().map(|(id, _)| id.as_str()).collect();
        let want: Vec<&str> = expected.iter().map(|(id, _)| id.as_str()).collect();
        assert_eq!(ids, want, "{name}: the ids before and after the crash");
        assert_eq!(got, expected, "{name}");
        for run in &runs {
            let end = got
                .iter()
                .rfind(|(_, e)| e["run_id"] == run.as_str())
                .map(|(_, e)| e.clone());
            assert!(
                end.as_ref().is_some_and(|e| e["state"] == "failed"),
                "{name}: run {run} seen to begin but not to end: {end:?}"
            );
        }
    }
}

/// The OpenAPI fuzzer schemathesis, with all its checks, against the running
/// server and `schema/openapi.json`: every answer is documented (status,
/// content type, schema, headers), every request the document calls valid is
/// accepted and every one it calls invalid is refused. Installed by
/// `scripts/test-deps.sh`; its settings are in tests/fixtures/schemathesis.
#[test]
fn schemathesis_finds_no_failure_against_the_running_server() {
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/schemathesis");
    let st = fixtures.join(".venv/bin/st");
    assert!(
        st.exists(),
        "schemathesis is not installed ({} is missing): run `bash scripts/test-deps.sh`",
        st.display()
    );
    // Twice: with a model that takes images, so a prompt with a well-formed
    // image is run as the document says; and with one that takes none, so
    // such a prompt or steer is refused `422 unsupported_content` as it
    // says. No rate limit, so the fuzzer reaches every route's logic.
    for images in [true, false] {
        let dir = TestDir::new();
        let script = dir.script("s.jsonl", &[json!([{"text": "hi"}])]);
        let config = format!(
            "provider = \"demo\"\n\n[providers.demo]\nkind = \"scripted\"\nscript = {:?}\nimages = {images}\n\n[http]\nrate_limit_per_minute = 0\n",
            script.to_str().unwrap()
        );
        let server = Server::spawn(&dir, Some(&config), &[]);
        let schema = Path::new(env!("CARGO_MANIFEST_DIR")).join("schema/openapi.json");
        let out = std::process::Command::new(&st)
            .arg("--config-file")
            .arg(fixtures.join("schemathesis.toml"))
            .arg("run")
            .arg(&schema)
            .args(["--url", &format!("http://{}", server.addr)])
            .args(["--header", &format!("Authorization: Bearer {TOKEN}")])
            .args(["--checks", "all"])
            .args(["--max-examples", "20"])
            .args(["--seed", "1"])
            .args(["--request-timeout", "5"])
            .args(["--generation-with-security-parameters", "false"])
            .args(["--generation-database", "none"])
            .args(["--no-color"])
            .current_dir(dir.path())
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "schemathesis found failures (images = {images}):\n{stdout}\n{}\nserver log:\n{}",
            String::from_utf8_lossy(&out.stderr),
            server.stderr()
        );
        assert!(stdout.contains(" passed"), "{stdout}");
    }
}

/// Errors quote what the client sent as a short prefix with its length,
/// never whole: path segments, ids, cursors, fields and serde's messages
/// about values, in the answer and in the server's log.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn errors_quote_outside_values_short_in_answers_and_logs() {
    let dir = TestDir::new();
    let script = one_turn_script(&dir);
    // The request log at debug level: where a request's path shows.
    let server = Server::spawn_logging(
        &dir,
        Some("[http]\nrate_limit_per_minute = 0\n"),
        &["--script", script.to_str().unwrap()],
        "pincer=debug,tower_http=debug",
    );
    let session = create_session(&server, &dir).await;
    let long = "x".repeat(20_000);
    let cases = [
        server.get(&format!("/v1/sessions/ses_{long}")),
        server.get(&format!("/v1/runs/run_{long}/events")),
        server.get(&format!("/v1/{long}")),
        server.get(&format!("/v1/sessions?cursor={long}")),
        server.get(&format!("/v1/sessions?limit={long}")),
        server.post(
            &format!("/v1/sessions/{session}/prompt?wait={long}"),
            json!({"prompt": "x"}),
        ),
        server.get(&format!("/v1/sessions/{session}/events?after={long}")),
        server
            .get(&format!("/v1/sessions/{session}/events"))
            .header("last-event-id", &long[..8_000]),
        server.post("/v1/sessions", json!({"workspace": format!("/{long}")})),
        server.post("/v1/sessions", json!({"workspace": long})),
        server.post("/v1/sessions", json!({"workspace": "/", "mode": long})),
        server.post("/v1/sessions", json!({"workspace": "/", "model": long})),
        server.post("/v1/sessions", json!({"workspace": "/", long.clone(): 1})),
        server.post(
            &format!("/v1/sessions/{session}/prompt"),
            json!({"content": long}),
        ),
        server.post("/v1/approvals/apr_1", json!({"decision": long})),
        server.post(
            &format!("/v1/approvals/apr_{long}"),
            json!({"decision": "allow_once"}),
        ),
        server
            .client
            .request(
                reqwest::Method::from_bytes(&long.as_bytes()[..5_000]).unwrap(),
                server.url("/v1/sessions"),
            )
            .bearer_auth(TOKEN),
    ];
    for request in cases {
        let (status, body) = send(request).await;
        assert!(status.is_client_error(), "{status}: {body}");
        let message = body["error"]["message"].as_str().unwrap();
        // At most a 120-character prefix of the value.
        assert!(
            message.len() < 600 && !message.contains(&long[..121]),
            "{status}: {} bytes: {}",
            message.len(),
            &message[..message.len().min(600)]
        );
    }
    // JSON-RPC errors too.
    let (_, body) = send(server.post(
        "/v1/rpc",
        json!({"jsonrpc": "2.0", "id": 1, "method": "sessions.get", "params": {"session_id": format!("ses_{long}")}}),
    ))
    .await;
    let message = body["error"]["message"].as_str().unwrap();
    assert!(
        message.len() < 600 && message.contains("… (20004 bytes)"),
        "{message}"
    );
    let log = server.stderr();
    assert!(
        !log.contains(&long[..1_000]),
        "the log holds an outside value whole"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_s_context_shows_what_the_next_turn_would_send() {
    let dir = TestDir::new();
    let script = dir.script("s.jsonl", &[json!([{"text": "an answer"}])]);
    let server = Server::start(&dir, &script, None);
    let session = create_session(&server, &dir).await;
    let (status, _) = send(server.post(
        &format!("/v1/sessions/{session}/prompt?wait=true"),
        json!({"prompt": "a question"}),
    ))
    .await;
    assert_eq!(status, StatusCode::OK);
    let (status, context) = send(server.get(&format!("/v1/sessions/{session}/context"))).await;
    assert_eq!(status, StatusCode::OK, "{context}");
    assert_eq!(context["session_id"], session.as_str());
    let system = context["system"].as_str().unwrap();
    assert!(system.contains("Through Pincer's HTTP API"), "{system}");
    let messages = context["messages"].as_array().unwrap();
    assert_eq!(messages.len(), 2, "{context}");
    assert_eq!(messages[1]["text"], "an answer");
    let parts = context["system_tokens"].as_u64().unwrap()
        + context["tool_tokens"].as_u64().unwrap()
        + context["message_tokens"]
            .as_array()
            .unwrap()
            .iter()
            .map(|n| n.as_u64().unwrap())
            .sum::<u64>();
    assert_eq!(context["total_tokens"].as_u64().unwrap(), parts);
    let (status, _) = send(server.get("/v1/sessions/ses_made_up/context")).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    // A session with its own prompt and instructions.
    let (status, own) = send(server.post(
        "/v1/sessions",
        json!({"workspace": dir.workspace(), "system_prompt": "You translate.", "instructions": "Into Welsh."}),
    ))
    .await;
    assert_eq!(status, StatusCode::CREATED, "{own}");
    let own = own["session_id"].as_str().unwrap();
    let (_, context) = send(server.get(&format!("/v1/sessions/{own}/context"))).await;
    assert_eq!(
        context["system"].as_str().unwrap(),
        "You translate.\n\n# Instructions\n\nInto Welsh."
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn memory_is_managed_over_http_and_recalled_into_a_sessions_context() {
    let dir = TestDir::new();
    let script = dir.script("s.jsonl", &[json!([{"text": "an answer"}])]);
    let server = Server::start(&dir, &script, None);
    let session = create_session(&server, &dir).await;
    let ws = dir.workspace();
    let (status, item) = send(server.post(
        "/v1/memory",
        json!({"text": "  The release checklist lives in docs/RELEASE.md\n", "session_id": session, "tags": ["Release", "docs"]}),
    ))
    .await;
    assert_eq!(status, StatusCode::CREATED, "{item}");
    assert_eq!(
        item["text"],
        "The release checklist lives in docs/RELEASE.md"
    );
    assert_eq!(item["scope"], "workspace");
    assert_eq!(item["scope_key"], ws.to_str().unwrap());
    assert_eq!(item["tags"], json!(["docs", "release"]));
    assert_eq!(item["source"], json!({"session": session, "by": "person"}));
    let id = item["id"].as_str().unwrap().to_owned();
    let (status, convo) = send(server.post(
        "/v1/memory",
        json!({"text": "This session is about the 2.0 release", "scope": "conversation", "session_id": session}),
    ))
    .await;
    assert_eq!(status, StatusCode::CREATED, "{convo}");
    assert_eq!(convo["scope_key"], session.as_str());

    // The session sees both; the workspace alone sees the workspace item.
    let (_, seen) = send(server.get(&format!("/v1/memory?session_id={session}"))).await;
    assert_eq!(seen["items"].as_array().unwrap().len(), 2, "{seen}");
    let (_, seen) = send(server.get(&format!("/v1/memory?workspace={}", ws.display()))).await;
    assert_eq!(seen["items"].as_array().unwrap().len(), 1, "{seen}");
    let (_, found) = send(server.get("/v1/memory?q=where%20is%20the%20release%20checklist")).await;
    assert_eq!(found["items"][0]["id"], id.as_str(), "{found}");

    // A prompt on the subject: the context holds the recalled block.
    let (status, _) = send(server.post(
        &format!("/v1/sessions/{session}/prompt?wait=true"),
        json!({"prompt": "where is the release checklist?"}),
    ))
    .await;
    assert_eq!(status, StatusCode::OK);
    let (_, context) = send(server.get(&format!("/v1/sessions/{session}/context"))).await;
    let text = context.to_string();
    assert!(text.contains("<memory>"), "{context:#}");
    assert!(text.contains("docs/RELEASE.md"), "{context:#}");

    // Edit, then forget; bad input is named.
    let patch = |body: Value| {
        server
            .client
            .patch(server.url(&format!("/v1/memory/{id}")))
            .bearer_auth(TOKEN)
            .json(&body)
    };
    let (status, edited) = send(patch(
        json!({"text": "The checklist moved to RELEASING.md", "tags": null}),
    ))
    .await;
    assert_eq!(status, StatusCode::OK, "{edited}");
    assert_eq!(edited["text"], "The checklist moved to RELEASING.md");
    assert_eq!(edited["tags"], json!(["docs", "release"]));
    let (status, refused) = send(patch(
        json!({"text": "key sk-proj-Abcdefghijklmnopqrstuvwxyz0123456789ABCD"}),
    ))
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    let message = refused["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("looks like a secret") && !message.contains("sk-proj"),
        "{message}"
    );
    let (status, refused) = send(server.post(
        "/v1/memory",
        json!({"text": "x", "scope": "team", "workspace": ws}),
    ))
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert!(
        refused["error"]["message"]
            .as_str()
            .unwrap()
            .contains("`scope`"),
        "{refused}"
    );
    let (status, _) = send(server.post(
        "/v1/memory",
        json!({"text": "x", "workspace": "/no/such/dir"}),
    ))
    .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (status, _) =
        send(server.post("/v1/memory", json!({"text": "x", "scope": "conversation"}))).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    let delete = || {
        server
            .client
            .delete(server.url(&format!("/v1/memory/{id}")))
            .bearer_auth(TOKEN)
    };
    let (status, _) = send(delete()).await;
    assert_eq!(status, StatusCode::OK);
    let (status, gone) = send(delete()).await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{gone}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_budget_ends_a_run_with_its_reason_over_http() {
    let dir = TestDir::new();
    // Each turn calls `todo` and costs 0.006 USD; a run may cost 0.005.
    let turn = |n: usize| {
        json!([
            {"tool_call": {"id": format!("c{n}"), "name": "todo", "arguments": {"todos": [{"content": "x", "status": "in_progress"}]}}},
            {"usage": {"input_tokens": 2000, "output_tokens": 200}}
        ])
    };
    let script = dir.script("s.jsonl", &[turn(0), turn(1), turn(2)]);
    let config = "currency = \"USD\"\n[models.\"script\"]\ninput_price = 2.0\noutput_price = 10.0\n[budget]\nrun = 0.005\n";
    let server = Server::start(&dir, &script, Some(config));
    let session = create_session(&server, &dir).await;
    let (status, run) = send(server.post(
        &format!("/v1/sessions/{session}/prompt?wait=true"),
        json!({"prompt": "work"}),
    ))
    .await;
    assert_eq!(status, StatusCode::OK, "{run}");
    let run_id = run["run_id"].as_str().unwrap();
    let (_, info) = send(server.get(&format!("/v1/runs/{run_id}"))).await;
    assert_eq!(info["state"], "completed");
    assert_eq!(info["stop_reason"], "budget", "{info}");
    let (_, tape) = send(server.get(&format!("/v1/runs/{run_id}/tape"))).await;
    let text = tape.to_string();
    assert!(text.contains("This request reached its budget"), "{tape}");
    assert!(
        text.contains("\"budget\":{\"run\":0.0,\"currency\":\"USD\"}"),
        "{tape}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_conversation_near_the_window_is_compacted_with_a_notice_over_http() {
    let dir = TestDir::new();
    // The scripted model plays its turns by the assistant turns a request
    // holds: the first prompt and the summary request (a transcript) get the
    // first, the answer after the summary (which stands for two) the third.
    let script = dir.script(
        "s.jsonl",
        &[
            json!([{"text": "Noted."}]),
            json!([{"text": "never played"}]),
            json!([{"text": "Done."}]),
        ],
    );
    let config = "context_window = 6000\ncompact_at = 0.5\n";
    let server = Server::start(&dir, &script, Some(config));
    let session = create_session(&server, &dir).await;
    let log = |tag: &str| format!("{tag}: ") + &"line of a long build log\n".repeat(140);
    let mut last = String::new();
    for prompt in [log("FIRST LOG"), log("SECOND LOG")] {
        let (status, run) = send(server.post(
            &format!("/v1/sessions/{session}/prompt?wait=true"),
            json!({ "prompt": prompt }),
        ))
        .await;
        assert_eq!(status, StatusCode::OK, "{run}");
        last = run["run_id"].as_str().unwrap().to_owned();
        let (_, info) = send(server.get(&format!("/v1/runs/{last}"))).await;
        assert_eq!(info["state"], "completed", "{info}");
    }
    let (_, tape) = send(server.get(&format!("/v1/runs/{last}/tape"))).await;
    let events = tape["events"].as_array().unwrap();
    let notice = events
        .iter()
        .find(|e| e["type"] == "notice")
        .unwrap_or_else(|| panic!("no notice: {tape}"));
    assert!(
        notice
            .to_string()
            .contains("neared the model's context window"),
        "{notice}"
    );
    // The summary is not the reply: the run answered after it.
    let said: String = events
        .iter()
        .filter(|e| e["type"] == "text_delta")
        .filter_map(|e| e["text"].as_str())
        .collect();
    assert_eq!(said, "Done.", "{tape}");
    // The next turn starts from the summary.
    let (_, context) = send(server.get(&format!("/v1/sessions/{session}/context"))).await;
    let first = &context["messages"][0];
    assert_eq!(first["role"], "summary", "{first}");
    assert!(!context.to_string().contains("FIRST LOG"), "{context}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn overflow_recovery_and_the_loop_guard_over_http() {
    let dir = TestDir::new();
    let script = crate::support::overflow_then_loop_script(&dir);
    let server = Server::start(&dir, &script, None);
    let session = create_session(&server, &dir).await;
    let mut runs = Vec::new();
    for prompt in [
        crate::support::long_log().as_str(),
        "second",
        "read a.txt until it changes",
    ] {
        let (status, run) = send(server.post(
            &format!("/v1/sessions/{session}/prompt?wait=true"),
            json!({ "prompt": prompt }),
        ))
        .await;
        assert_eq!(status, StatusCode::OK, "{run}");
        runs.push(run["run_id"].as_str().unwrap().to_owned());
    }
    // The second run: refused as too long, compacted, answered.
    let (_, info) = send(server.get(&format!("/v1/runs/{}", runs[1]))).await;
    assert_eq!(info["state"], "completed", "{info}");
    let (_, tape) = send(server.get(&format!("/v1/runs/{}/tape", runs[1]))).await;
    assert!(
        tape.to_string()
            .contains("The provider refused the request as too long"),
        "{tape}"
    );
    let said: String = tape["events"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["type"] == "text_delta")
        .filter_map(|e| e["text"].as_str())
        .collect();
    assert_eq!(said, "Done.");
    // The third: stopped by the loop guard.
    let (_, info) = send(server.get(&format!("/v1/runs/{}", runs[2]))).await;
    assert_eq!(info["state"], "failed", "{info}");
    assert!(
        info["error"]
            .as_str()
            .unwrap_or_default()
            .contains("stopped by the loop guard: the model called `read_file` with the same arguments 4 times"),
        "{info}"
    );
}

/// An ACP client over the WebSocket at `/acp`: one JSON-RPC message per
/// text frame, each checked against the ACP schema.
struct AcpSocket {
    socket: tokio_tungstenite::WebSocketStream<
        tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>,
    >,
    schema: crate::support::Schema,
    next: u64,
}

impl AcpSocket {
    async fn connect(server: &Server) -> Self {
        use tokio_tungstenite::tungstenite::client::IntoClientRequest;
        let mut request = format!("ws://{}/acp", server.addr)
            .into_client_request()
            .unwrap();
        request
            .headers_mut()
            .insert("authorization", format!("Bearer {TOKEN}").parse().unwrap());
        let (socket, response) = tokio_tungstenite::connect_async(request).await.unwrap();
        assert_eq!(response.status(), 101);
        Self {
            socket,
            schema: crate::support::Schema::load(),
            next: 0,
        }
    }

    async fn send_text(&mut self, text: String) {
        use tokio_tungstenite::tungstenite::Message;
        self.socket.send(Message::text(text)).await.unwrap();
    }

    async fn recv(&mut self) -> Value {
        use tokio_tungstenite::tungstenite::Message;
        loop {
            let frame = tokio::time::timeout(TIMEOUT, self.socket.next())
                .await
                .expect("a message in time")
                .expect("the socket open")
                .unwrap();
            let Message::Text(text) = frame else { continue };
            assert!(!text.contains('\n'), "one message per frame: {text}");
            let value: Value = serde_json::from_str(&text).unwrap();
            self.schema.check_agent_message(&value);
            return value;
        }
    }

    /// Calls `method`; the notifications before the response, and it.
    /// `initialize`, then `session/new` in `cwd`: the session's id.
    async fn open_session(&mut self, cwd: &Path) -> String {
        self.request(
            "initialize",
            json!({"protocolVersion": 1, "clientCapabilities": {}}),
        )
        .await;
        let (_, created) = self
            .request("session/new", json!({"cwd": cwd, "mcpServers": []}))
            .await;
        created["result"]["sessionId"].as_str().unwrap().to_owned()
    }

    async fn request(&mut self, method: &str, params: Value) -> (Vec<Value>, Value) {
        self.next += 1;
        let id = self.next;
        self.send_text(
            json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}).to_string(),
        )
        .await;
        let mut before = Vec::new();
        loop {
            let message = self.recv().await;
            if message["id"] == id && message.get("method").is_none() {
                if let (Some(def), Some(result)) =
                    (crate::support::response_def(method), message.get("result"))
                {
                    self.schema.check(def, result);
                }
                return (before, message);
            }
            before.push(message);
        }
    }
}

/// The ids of a listing's sessions, in order.
fn ids_of(listing: &Value) -> Vec<String> {
    listing["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["session_id"].as_str().unwrap().to_owned())
        .collect()
}

/// `GET /v1/sessions` filters on the server, by origin (sessions made over
/// HTTP, by `pincer run`, an editor, a chat), state, chat channel and words,
/// with the workspace; a filtered listing is still newest first, and paged
/// one at a time through `next_cursor` it holds each session once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[allow(clippy::too_many_lines, reason = "one scenario, read top to bottom")]
async fn sessions_are_filtered_by_the_server_and_paged_through_the_filter() {
    use crate::support::webhook::{Peer, SECRET, deliver};
    let peer = Peer::start();
    let dir = TestDir::new();
    let turns: Vec<Value> = (0..6).map(|_| json!([{"text": "ok"}])).collect();
    let script = dir.script("s.jsonl", &turns);
    // A headless session, made before the server runs.
    let out = dir
        .command()
        .args(["run", "--script", script.to_str().unwrap(), "--cwd"])
        .arg(dir.workspace())
        .arg("Summarize the changelog")
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let config = format!(
        "[channels.webhook]\ncallback_url = \"{}\"\nallow = [\"u1\"]\nworkspace = \"{}\"\ncoalesce_ms = 50\nlive_drafts = false\n",
        peer.url,
        dir.workspace().display()
    );
    let server = Server::spawn_with(
        &dir,
        Some(&config),
        &["--script", script.to_str().unwrap(), "--channel", "webhook"],
        &[("PINCER_WEBHOOK_SECRET", SECRET)],
    );
    // Three over HTTP, the first asked to fix the parser.
    let fixing = create_session(&server, &dir).await;
    let (status, run) = send(server.post(
        &format!("/v1/sessions/{fixing}/prompt?wait=true"),
        json!({"prompt": "Fix the Parser"}),
    ))
    .await;
    assert_eq!(status, StatusCode::OK, "{run}");
    create_session(&server, &dir).await;
    create_session(&server, &dir).await;
    // One from an editor, closed.
    let mut acp = AcpSocket::connect(&server).await;
    let editor = acp.open_session(&dir.workspace()).await;
    let (_, closed) = acp
        .request("session/close", json!({"sessionId": editor}))
        .await;
    assert!(closed.get("result").is_some(), "{closed}");
    // One a chat made through the webhook channel (503 until it receives).
    let inbound = server.url("/channels/webhook/webhook");
    let says = json!({"message": {"chat": "room-1", "sender": {"id": "u1", "name": "Ada"}, "text": "hello"}});
    let deadline = Instant::now() + TIMEOUT;
    loop {
        let (url, body) = (inbound.clone(), says.clone());
        let (status, answer) =
            tokio::task::spawn_blocking(move || deliver(&url, Some("d1"), &body, SECRET, 0))
                .await
                .unwrap();
        if status == 200 {
            break;
        }
        assert!(
            status == 503 && Instant::now() < deadline,
            "{status} {answer}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let chat = loop {
        let (_, listing) = send(server.get("/v1/sessions?channel=webhook")).await;
        if let [one] = ids_of(&listing).as_slice() {
            break one.clone();
        }
        assert!(Instant::now() < deadline, "{listing}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };

    let (_, all) = send(server.get("/v1/sessions")).await;
    let all = all["sessions"].as_array().unwrap().clone();
    assert_eq!(all.len(), 6, "{all:#?}");
    let headless: Vec<String> = all
        .iter()
        .filter(|s| s["origin"] == "headless")
        .map(|s| s["session_id"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(headless.len(), 1);
    // Each filter against the full listing, filtered here, in its order.
    let expect = |keep: &dyn Fn(&Value) -> bool| -> Vec<String> {
        all.iter()
            .filter(|s| keep(s))
            .map(|s| s["session_id"].as_str().unwrap().to_owned())
            .collect()
    };
    let listed = async |query: &str| -> Vec<String> {
        let (status, body) = send(server.get(&format!("/v1/sessions?{query}"))).await;
        assert_eq!(status, StatusCode::OK, "{query}: {body}");
        ids_of(&body)
    };
    let http = expect(&|s| s["origin"] == "http");
    assert_eq!(http.len(), 3);
    assert_eq!(listed("origin=http").await, http);
    assert_eq!(listed("origin=headless").await, headless);
    assert_eq!(listed("origin=editor").await, [editor.as_str()]);
    assert_eq!(listed("origin=channel").await, [chat.as_str()]);
    assert_eq!(listed("state=closed").await, [editor.as_str()]);
    assert_eq!(
        listed("state=open").await,
        expect(&|s| s["session_id"] != editor.as_str())
    );
    assert_eq!(
        listed("origin=http&state=closed").await,
        Vec::<String>::new()
    );
    assert_eq!(listed("channel=other").await, Vec::<String>::new());
    // Empty values ask for nothing.
    assert_eq!(listed("origin=&state=&channel=&q=").await.len(), 6);
    // Words: each one in the title, id, model or workspace, case aside.
    assert_eq!(listed("q=parser").await, [fixing.as_str()]);
    assert_eq!(listed("q=FIX+parser").await, [fixing.as_str()]);
    assert_eq!(listed("q=changelog").await, headless);
    assert_eq!(listed("q=fix+changelog").await, Vec::<String>::new());
    assert_eq!(
        listed(&format!("q={}", &chat[4..16])).await,
        [chat.as_str()]
    );
    assert_eq!(listed("q=%25").await, Vec::<String>::new());
    // However many words: a thousand, each the same as one.
    let one = &chat[4..5];
    let many = vec![one; 1000].join("+");
    let found = listed(&format!("q={one}")).await;
    assert!(found.contains(&chat), "{found:?}");
    assert_eq!(listed(&format!("q={many}")).await, found);
    let workspace = dir.workspace().display().to_string();
    let name = workspace.rsplit('/').next().unwrap().to_uppercase();
    assert_eq!(listed(&format!("q={name}&origin=http")).await, http);
    assert_eq!(
        listed(&format!("workspace={workspace}&origin=http")).await,
        http
    );
    // Paged one at a time through the filter: each once, in order.
    let mut paged = Vec::new();
    let mut cursor: Option<String> = None;
    loop {
        let query = match &cursor {
            Some(cursor) => format!("/v1/sessions?origin=http&limit=1&cursor={cursor}"),
            None => "/v1/sessions?origin=http&limit=1".to_owned(),
        };
        let (status, page) = send(server.get(&query)).await;
        assert_eq!(status, StatusCode::OK, "{page}");
        paged.extend(ids_of(&page));
        assert!(paged.len() <= 3, "{paged:?}");
        match page["next_cursor"].as_str() {
            Some(next) => cursor = Some(next.to_owned()),
            None => break,
        }
    }
    assert_eq!(paged, http);
    // `pincer sessions list` filters alike.
    let cli = |args: &[&str]| -> Vec<String> {
        let out = dir
            .command()
            .args(["sessions", "list", "--json"])
            .args(args)
            .output()
            .unwrap();
        assert!(out.status.success(), "{args:?}: {out:?}");
        String::from_utf8(out.stdout)
            .unwrap()
            .lines()
            .map(|line| {
                serde_json::from_str::<Value>(line).unwrap()["session_id"]
                    .as_str()
                    .unwrap()
                    .to_owned()
            })
            .collect()
    };
    assert_eq!(cli(&["--origin", "http"]), http);
    assert_eq!(cli(&["--state", "closed"]), [editor.as_str()]);
    assert_eq!(cli(&["--channel", "webhook"]), [chat.as_str()]);
    assert_eq!(
        cli(&["--search", "FIX parser", "--origin", "http"]),
        [fixing.as_str()]
    );
    assert_eq!(cli(&["--search", "no-such-words"]), Vec::<String>::new());
    // A value that names nothing is 400 naming its parameter.
    let long = format!("q={}", "w".repeat(2001));
    for (query, named) in [
        ("origin=robot", "`origin`"),
        ("state=shut", "`state`"),
        (long.as_str(), "`q`"),
    ] {
        let (status, body) = send(server.get(&format!("/v1/sessions?{query}"))).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{query}: {body}");
        assert!(body.to_string().contains(named), "{query}: {body}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acp_over_websocket_serves_the_same_sessions_as_every_face() {
    let dir = TestDir::new();
    let server = Server::start(&dir, &one_turn_script(&dir), None);
    // No token: 401; no handshake: 400 naming the header.
    match tokio_tungstenite::connect_async(format!("ws://{}/acp", server.addr)).await {
        Err(tokio_tungstenite::tungstenite::Error::Http(response)) => {
            assert_eq!(response.status(), 401)
        }
        other => panic!("expected 401, got {other:?}"),
    }
    let (status, body) = send(server.get("/acp")).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert!(body["error"].to_string().contains("`Upgrade`"), "{body}");

    let mut acp = AcpSocket::connect(&server).await;
    // A message written over several lines is still one message.
    acp.next += 1;
    acp.send_text(
        serde_json::to_string_pretty(&json!({"jsonrpc": "2.0", "id": 1, "method": "initialize",
            "params": {"protocolVersion": 1, "clientCapabilities": {}}}))
        .unwrap(),
    )
    .await;
    let init = acp.recv().await;
    assert_eq!(init["id"], 1);
    assert_eq!(init["result"]["protocolVersion"], 1);
    assert!(!init["result"]["authMethods"].as_array().unwrap().is_empty());
    let (_, created) = acp
        .request(
            "session/new",
            json!({"cwd": dir.workspace(), "mcpServers": []}),
        )
        .await;
    let session = created["result"]["sessionId"].as_str().unwrap().to_owned();
    let (updates, response) = acp
        .request(
            "session/prompt",
            json!({"sessionId": session, "prompt": [{"type": "text", "text": "hi"}]}),
        )
        .await;
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    let text: String = updates
        .iter()
        .filter(|u| u["params"]["update"]["sessionUpdate"] == "agent_message_chunk")
        .map(|u| {
            u["params"]["update"]["content"]["text"]
                .as_str()
                .unwrap()
                .to_owned()
        })
        .collect();
    assert_eq!(text, "Hello there");
    // Bad input is answered, and the connection goes on.
    acp.send_text("{not json".into()).await;
    let error = acp.recv().await;
    assert_eq!(error["error"]["code"], -32700, "{error}");

    // The same session over REST, with its run.
    let (status, shown) = send(server.get(&format!("/v1/sessions/{session}"))).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(shown["origin"], "editor");
    let (_, runs) = send(server.get(&format!("/v1/sessions/{session}/runs"))).await;
    assert_eq!(runs["runs"].as_array().unwrap().len(), 1, "{runs}");

    // Another connection loads it and sees its history.
    let mut other = AcpSocket::connect(&server).await;
    other
        .request(
            "initialize",
            json!({"protocolVersion": 1, "clientCapabilities": {}}),
        )
        .await;
    let (replayed, loaded) = other
        .request(
            "session/load",
            json!({"sessionId": session, "cwd": dir.workspace(), "mcpServers": []}),
        )
        .await;
    assert!(loaded.get("result").is_some(), "{loaded}");
    let kinds: Vec<&str> = replayed
        .iter()
        .filter_map(|u| u["params"]["update"]["sessionUpdate"].as_str())
        .collect();
    assert!(
        kinds.starts_with(&["user_message_chunk", "agent_message_chunk"]),
        "{kinds:?}"
    );
    // Closing one connection leaves the server serving the other.
    acp.socket.close(None).await.unwrap();
    let (_, listed) = other.request("session/list", json!({})).await;
    assert_eq!(
        listed["result"]["sessions"][0]["sessionId"],
        session.as_str()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn closing_the_acp_websocket_cancels_its_runs() {
    let dir = TestDir::new();
    let script = dir.script(
        "slow.jsonl",
        &[json!([{"text": "start"}, {"delay_ms": 30000}, {"text": "never"}])],
    );
    let server = Server::start(&dir, &script, None);
    let mut acp = AcpSocket::connect(&server).await;
    let session = acp.open_session(&dir.workspace()).await;
    acp.send_text(
        json!({"jsonrpc": "2.0", "id": 99, "method": "session/prompt",
               "params": {"sessionId": session, "prompt": [{"type": "text", "text": "go"}]}})
        .to_string(),
    )
    .await;
    loop {
        let message = acp.recv().await;
        if message["params"]["update"]["content"]["text"] == "start" {
            break;
        }
    }
    acp.socket.close(None).await.unwrap();
    let started = Instant::now();
    loop {
        let (_, runs) = send(server.get(&format!("/v1/sessions/{session}/runs"))).await;
        if runs["runs"][0]["state"] == "cancelled" {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "the run was not cancelled: {runs}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// A session's workspace named through a symbolic link is stored as the
/// directory it names, and listed under either name.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_symlinked_workspace_is_stored_as_the_directory_it_names() {
    let dir = TestDir::new();
    let script = one_turn_script(&dir);
    let server = Server::start(&dir, &script, None);
    let real = dir.workspace();
    let link = dir.path().canonicalize().unwrap().join("link");
    std::os::unix::fs::symlink(&real, &link).unwrap();
    let (status, session) = send(server.post("/v1/sessions", json!({"workspace": link}))).await;
    assert_eq!(status, StatusCode::CREATED, "{session}");
    assert_eq!(session["workspace"], real.to_str().unwrap());
    for name in [&link, &real] {
        // A temporary directory's path needs no escaping in a query.
        let (status, listed) =
            send(server.get(&format!("/v1/sessions?workspace={}", name.display()))).await;
        assert_eq!(status, StatusCode::OK, "{listed}");
        let ids: Vec<&Value> = listed["sessions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| &s["session_id"])
            .collect();
        assert_eq!(ids, [&session["session_id"]], "{name:?}");
    }
}

/// A prompt or steer with an image, for a model that takes no images, is
/// answered `422 unsupported_content` (its own JSON-RPC code on `/v1/rpc`):
/// well-formed content the session's model cannot take; a malformed image
/// stays `400`. The run is never made.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn content_the_model_cannot_take_is_422_unsupported_content() {
    let dir = TestDir::new();
    let script = dir.script("s.jsonl", &[json!([{"text": "ok"}])]);
    let server = Server::start(&dir, &script, None);
    let sid = create_session(&server, &dir).await;
    let image = |data: &str| json!([{"type": "image", "mime_type": "image/png", "data": data}]);
    let refused = "model script does not accept images; choose a model that does, or set `images = true` in [models.\"script\"] if it does";
    for route in ["prompt", "steer"] {
        let (status, body) = send(server.post(
            &format!("/v1/sessions/{sid}/{route}"),
            json!({"content": image(PNG)}),
        ))
        .await;
        assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{route}: {body}");
        assert_eq!(
            body,
            json!({"error": {"code": "unsupported_content", "message": refused}}),
            "{route}"
        );
        let (status, body) = send(server.post(
            &format!("/v1/sessions/{sid}/{route}"),
            json!({"content": image("not base64!")}),
        ))
        .await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{route}: {body}");
        assert_eq!(body["error"]["code"], "bad_request", "{route}");
        assert!(
            body["error"]["message"]
                .as_str()
                .unwrap()
                .starts_with("`content[0]`: image data is not valid base64"),
            "{route}: {body}"
        );
    }
    let (status, body) = send(server.post(
        "/v1/rpc",
        json!({"jsonrpc": "2.0", "id": 1, "method": "sessions.prompt", "params": {"session_id": sid, "content": image(PNG)}}),
    ))
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(
        body["error"],
        json!({"code": -32004, "message": refused, "data": {"code": "unsupported_content"}})
    );
    // Nothing ran.
    let (_, runs) = send(server.get(&format!("/v1/sessions/{sid}/runs"))).await;
    assert_eq!(runs, json!({"runs": []}));
}

/// Reads the editor's messages until `check` holds for one; panics after
/// `TIMEOUT`.
fn editor_until(
    acp: &mut crate::support::AcpProcess,
    what: &str,
    check: impl Fn(&Value) -> bool,
) -> Value {
    let deadline = Instant::now() + TIMEOUT;
    while Instant::now() < deadline {
        if let Some(message) = acp.recv_timeout(Duration::from_millis(100))
            && check(&message)
        {
            return message;
        }
    }
    panic!("no {what} within {TIMEOUT:?}; stderr:\n{}", acp.stderr());
}

/// `pincer serve --http` as a second process beside an editor (`pincer
/// acp`) on one data directory: it lists the permission request the
/// editor's run waits on, its answer reaches that run (which goes on), and
/// its cancel ends a run the editor works.
#[tokio::test]
async fn http_beside_an_editor_answers_its_approval_and_cancels_its_run() {
    let dir = TestDir::new();
    let script = dir.script(
        "s.jsonl",
        &[
            json!([{"tool_call": {"name": "write_file", "arguments": {"path": "b.txt", "content": "from the editor's run\n"}}}]),
            json!([{"text": "done"}]),
            json!([{"text": "Working"}, {"delay_ms": 60000}, {"text": " never"}]),
        ],
    );
    let mut editor = crate::support::AcpProcess::spawn(
        &dir,
        &["--script", script.to_str().unwrap(), "--mode", "supervised"],
    );
    editor.initialize();
    let session = editor.new_session(&dir.workspace());
    let prompt = editor.prompt_async(&session, "write it");
    editor_until(&mut editor, "the editor's permission request", |m| {
        m["method"] == "session/request_permission"
    });

    let server = Server::start(&dir, &script, None);
    let (status, listed) = send(server.get("/v1/approvals")).await;
    assert_eq!(status, StatusCode::OK, "{listed}");
    let approvals = listed["approvals"].as_array().unwrap();
    assert_eq!(approvals.len(), 1, "{listed}");
    assert_eq!(approvals[0]["session_id"], session.as_str());
    assert_eq!(approvals[0]["tool"], "write_file");
    let (_, of_session) = send(server.get(&format!("/v1/sessions/{session}/approvals"))).await;
    assert_eq!(of_session["approvals"], listed["approvals"]);
    let id = approvals[0]["approval_id"].as_str().unwrap();
    let (status, answered) = send(server.post(
        &format!("/v1/approvals/{id}"),
        json!({"decision": "allow_once"}),
    ))
    .await;
    assert_eq!(status, StatusCode::OK, "{answered}");
    let done = editor_until(&mut editor, "the editor's prompt to end", |m| {
        m.get("id") == Some(&prompt) && m.get("method").is_none()
    });
    assert_eq!(done["result"]["stopReason"], "end_turn", "{done}");
    assert_eq!(
        std::fs::read_to_string(dir.workspace().join("b.txt")).unwrap(),
        "from the editor's run\n"
    );
    let (_, after) = send(server.get("/v1/approvals")).await;
    assert_eq!(after["approvals"], json!([]), "{after}");

    // A run the editor works, cancelled through HTTP.
    let long = editor.prompt_async(&session, "long job");
    editor_until(&mut editor, "the long run's first chunk", |m| {
        m["params"]["update"]["content"]["text"] == "Working"
    });
    let (_, runs) = send(server.get(&format!("/v1/sessions/{session}/runs"))).await;
    let run = runs["runs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["state"] == "running")
        .unwrap_or_else(|| panic!("no running run: {runs}"))["run_id"]
        .as_str()
        .unwrap()
        .to_owned();
    // Its stream here follows it from the tape, though the session is not
    // live in this process, to the end the editor records.
    let mut stream = SseReader::open(server.get(&format!("/v1/runs/{run}/events"))).await;
    // A message for the editor's working run, through the journal: taken
    // there, and joining the conversation when the run stops.
    let (status, steered) = send(server.post(
        &format!("/v1/sessions/{session}/steer"),
        json!({"prompt": "also this"}),
    ))
    .await;
    assert_eq!(status, StatusCode::OK, "{steered}");
    assert_eq!(steered["outcome"], "injected", "{steered}");
    assert_eq!(steered["run_id"], run.as_str());
    let (status, cancelled) = send(server.post(&format!("/v1/runs/{run}/cancel"), json!({}))).await;
    assert_eq!(status, StatusCode::OK, "{cancelled}");
    assert_eq!(cancelled["state"], "cancelled", "{cancelled}");
    let ended = editor_until(&mut editor, "the long prompt to end", |m| {
        m.get("id") == Some(&long) && m.get("method").is_none()
    });
    assert_eq!(ended["result"]["stopReason"], "cancelled", "{ended}");
    let mut last = Value::Null;
    while let Some((_, event)) = stream.next().await {
        last = event;
    }
    assert_eq!(last["type"], "state", "{last}");
    assert_eq!(last["state"], "cancelled", "{last}");
    let history = dir.show_session(&session)["history"].clone();
    assert!(
        history
            .as_array()
            .unwrap()
            .iter()
            .any(|m| m["message"]["role"] == "user"
                && m["message"]["content"][0]["text"] == "also this"),
        "{history:#}"
    );
    // With no run working anywhere, a steer asks for a prompt.
    let (_, idle) = send(server.post(
        &format!("/v1/sessions/{session}/steer"),
        json!({"prompt": "nobody listens"}),
    ))
    .await;
    assert_eq!(idle["outcome"], "promptRequired", "{idle}");
}

/// `pincer sessions show --json`, `pincer runs show --json` and the REST
/// routes show a session and a run in one shape (`views`): the same fields
/// with the same values, a subagent's `parent` and `mcp_servers` included.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cli_and_the_http_face_show_a_session_and_a_run_alike() {
    let dir = TestDir::new();
    dir.write_config("");
    // A subagent's session, made by `pincer run` before the server starts.
    let delegate = json!({"tool_call": {"id": "d1", "name": "delegate", "arguments": {"task": "say hi", "label": "hi"}}});
    let (out, lines) = dir.run_jsonl(
        &[
            json!([delegate]),
            json!([{"text": "done"}]),
            json!([{"text": "hi"}]),
        ],
        "{\"prompt\": \"go\"}\n",
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let started = lines
        .iter()
        .find(|l| l["type"] == "subagent_started")
        .unwrap_or_else(|| panic!("no subagent started: {lines:#?}"));
    let child = started["session_id"].as_str().unwrap().to_owned();
    let script = dir.script(
        "serve.jsonl",
        &[json!([{"text": "Hello"}, {"usage": {"input_tokens": 3, "output_tokens": 2}}])],
    );
    let server = Server::start(&dir, &script, None);
    let id = create_session(&server, &dir).await;
    let (status, ran) = send(server.post(
        &format!("/v1/sessions/{id}/prompt?wait=true"),
        json!({"prompt": "hi"}),
    ))
    .await;
    assert_eq!(status, StatusCode::OK, "{ran}");
    let run = ran["run_id"].as_str().unwrap().to_owned();

    for session in [&id, &child] {
        let shown = dir.show_session(session);
        let (status, got) = send(server.get(&format!("/v1/sessions/{session}"))).await;
        assert_eq!(status, StatusCode::OK, "{got}");
        let (mut shown_session, mut got) = (shown["session"].clone(), got);
        if *session == id {
            // The serving process's live copy of a session it runs moves
            // `updated_at` when a prompt comes in; the store moves it again
            // with each message recorded, which the CLI reads. Only the
            // time differs, and only while the session is live.
            let (stored, live) = (&shown_session["updated_at"], &got["updated_at"]);
            assert!(live.as_i64() <= stored.as_i64(), "{live} {stored}");
            shown_session["updated_at"] = Value::Null;
            got["updated_at"] = Value::Null;
        }
        assert_eq!(shown_session, got, "session {session}");
        let (status, runs) = send(server.get(&format!("/v1/sessions/{session}/runs"))).await;
        assert_eq!(status, StatusCode::OK, "{runs}");
        assert_eq!(shown["runs"], runs["runs"], "runs of {session}");
    }
    let shown = dir.show_session(&child);
    assert_eq!(shown["session"]["parent"]["call_id"], "d1", "{shown}");
    assert_eq!(shown["session"]["mcp_servers"], json!([]), "{shown}");
    assert!(dir.show_session(&id)["session"].get("parent").is_none());

    let out = dir
        .command()
        .args(["runs", "show", &run, "--json"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let shown: Value = serde_json::from_slice(&out.stdout).unwrap();
    let (status, got) = send(server.get(&format!("/v1/runs/{run}"))).await;
    assert_eq!(status, StatusCode::OK, "{got}");
    assert_eq!(shown, got);
    assert_eq!(got["state"], "completed");
    assert_eq!(got["usage"]["input_tokens"], 3);
    // The prompt's own answer is the same run, with the reply beside it.
    let mut reply = ran.clone();
    reply.as_object_mut().unwrap().remove("reply");
    assert_eq!(reply, got);
    server.stop();
}

/// `/compact` and `/undo` over HTTP (what the web console's buttons send):
/// each a run of its own, doing what it does in an editor.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn session_commands_compact_and_undo_run_as_runs_of_their_own() {
    let dir = TestDir::new();
    let script = dir.script(
        "s.jsonl",
        &[
            json!([{"tool_call": {"id": "w1", "name": "write_file", "arguments": {"path": "a.txt", "content": "made\n"}}}]),
            json!([{"text": "wrote it"}]),
            json!([{"text": "The person asked for a file; it was written and then undone."}]),
        ],
    );
    let server = Server::start(&dir, &script, None);
    let (status, session) = send(server.post(
        "/v1/sessions",
        json!({"workspace": dir.workspace(), "mode": "full"}),
    ))
    .await;
    assert_eq!(status, StatusCode::CREATED, "{session}");
    let sid = session["session_id"].as_str().unwrap().to_owned();
    let (status, run) = send(server.post(
        &format!("/v1/sessions/{sid}/prompt?wait=true"),
        json!({"prompt": "write a.txt"}),
    ))
    .await;
    assert_eq!(
        (status, run["state"].as_str()),
        (StatusCode::OK, Some("completed")),
        "{run}"
    );
    assert!(dir.workspace().join("a.txt").exists());
    let ended = |run: Value| {
        let server = &server;
        async move {
            let id = run["run_id"].as_str().unwrap().to_owned();
            let deadline = std::time::Instant::now() + TIMEOUT;
            loop {
                let (_, now) = send(server.get(&format!("/v1/runs/{id}"))).await;
                if matches!(
                    now["state"].as_str(),
                    Some("completed" | "failed" | "cancelled")
                ) {
                    let (_, tape) = send(server.get(&format!("/v1/runs/{id}/tape"))).await;
                    return (now, tape["events"].as_array().unwrap().clone());
                }
                assert!(std::time::Instant::now() < deadline, "{now}");
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
    };
    let (status, undo) = send(server.post(
        &format!("/v1/sessions/{sid}/commands"),
        json!({"command": "undo"}),
    ))
    .await;
    assert_eq!(status, StatusCode::ACCEPTED, "{undo}");
    let (undone, tape) = ended(undo).await;
    assert_eq!(undone["state"], "completed", "{undone}");
    assert_eq!(tape[1]["type"], "user_message");
    assert_eq!(tape[1]["content"][0]["text"], "/undo");
    assert!(
        !dir.workspace().join("a.txt").exists(),
        "undo left the file"
    );

    let (status, compact) = send(server.post(
        &format!("/v1/sessions/{sid}/commands"),
        json!({"command": "compact"}),
    ))
    .await;
    assert_eq!(status, StatusCode::ACCEPTED, "{compact}");
    let (compacted, tape) = ended(compact).await;
    assert_eq!(compacted["state"], "completed", "{compacted}");
    assert!(
        tape.iter()
            .any(|e| e["type"] == "compaction" && e["status"] == "completed"),
        "{tape:?}"
    );
    // Any other command is refused, naming the field.
    let (status, body) = send(server.post(
        &format!("/v1/sessions/{sid}/commands"),
        json!({"command": "forget everything"}),
    ))
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("`command`"),
        "{body}"
    );
    assert!(server.stop().success());
}
