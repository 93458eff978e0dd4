//! A real Matrix homeserver for tests: Synapse (PyPI `matrix-synapse`, the
//! version `tests/fixtures/synapse/requirements.txt` pins, installed into
//! `tests/fixtures/synapse/.venv` by `bash scripts/test-deps.sh`), started
//! from a throw-away configuration in a temporary directory on a free
//! loopback port, and [`MatrixUser`]s that act on it as people do through
//! the Client-Server API v3. Stopped and removed when dropped; a watchdog
//! stops it, and removes the directory, when the test process ends without
//! dropping it: the one server a test binary shares ([`Synapse::shared`])
//! lives in a static, which is never dropped. The shape is that of the
//! PostgreSQL harness (`src/testing/postgres.rs`).
//!
//! The server: `server_name` `example.org` (user ids `@alice:example.org`),
//! SQLite, one plain HTTP listener on 127.0.0.1 with the client API (and
//! with it the admin API, `/_synapse/admin`), no federation listener and no
//! trusted key servers, registration closed except through the shared
//! secret ([`Synapse::register`]), presence off, URL previews off, logging
//! at WARNING to `homeserver.log` in its directory (the console's output to
//! `console.log`). The configuration is written as JSON, which YAML reads.
//!
//! # What Synapse does, as measured here (1.163.2, Python 3.11, 2 cores)
//!
//! - **Start**: about 1.4 s from spawning Python to `GET
//!   /_matrix/client/versions` answering on a fresh database (SQLite's
//!   schema is made from a snapshot), 2–3 s while two other servers start
//!   beside it; a graceful stop (SIGTERM) and a start again on the same
//!   data about 2 s. `pip install` into a fresh venv takes about 15–25 s
//!   (wheels only, no compiler).
//! - **Transaction ids** (`PUT /rooms/{room}/send/{type}/{txnId}`): a
//!   repeat with the same txn id from the same *device* answers 200 with
//!   the *same* `event_id`, and the room holds one event. The scope is the
//!   device (MSC3970, spec v1.7), not the access token: a re-login that
//!   names the same `device_id` gets a new token and its repeat still
//!   answers the first event; a re-login without it (a new device) sends
//!   a second event under the same txn id. The repeat answers the same
//!   `event_id` after a server restart too: besides a cache of answers by
//!   request path and device (30 minutes, in memory), Synapse keeps the
//!   mapping (room, sender, device, txn id) → event id in its database
//!   (`event_txn_id_device_id`) for 24 hours. So an adapter that
//!   resends after a crash with the txn id it persisted does not double a
//!   message — as long as it keeps its device (store the `device_id`, log
//!   in with it again). Another *content* under a txn id already used is
//!   not checked: the first event's id comes back, nothing new is sent.
//! - **`/sync` long poll**: `GET /sync?since=T&timeout=MS` with nothing new
//!   holds the request for about `timeout` ms and answers 200 with a
//!   `next_batch` (possibly the same `since`); it answers as soon as an
//!   event arrives for the user. Without `since` (an initial sync) it
//!   answers at once. `timeout=0` answers at once. A `since` token from
//!   before a restart still works after it (tokens are stream positions
//!   in the database) and delivers what happened since.
//! - **Invites** appear in the invitee's `/sync` under
//!   `rooms.invite.{room_id}.invite_state.events`: stripped state events
//!   (`type`, `state_key`, `sender`, `content`; no `event_id`), among them
//!   `m.room.member` with `state_key` the invitee and `membership: invite`,
//!   `m.room.create`, `m.room.join_rules`, `m.room.name` when set, and
//!   `m.room.encryption` when the room is encrypted. After the invitee
//!   joins, the next `/sync` has the room under `rooms.join` and no longer
//!   under `rooms.invite`.
//! - **Size limit**: an event's whole JSON (as federated: room id, sender,
//!   hashes and signatures included, UTF-8) may be at most 65,536 bytes; a
//!   larger one is refused with 413 `M_TOO_LARGE` ("event too large"). The
//!   envelope took about 600 bytes here: the longest ASCII `m.text` body
//!   that passed was 64,931 bytes. The tests check that 64,000 passes and
//!   65,536 does not; an adapter should split long replies well below
//!   64 KiB (and count bytes, not characters).
//! - **Media**: `POST /_matrix/media/v3/upload?filename=NAME` with the
//!   file's `Content-Type` answers `{"content_uri": "mxc://example.org/ID"}`.
//!   Authenticated media is on (Synapse's default since 1.120): the media
//!   is downloaded with an access token through
//!   `GET /_matrix/client/v1/media/download/example.org/ID`
//!   ([`MatrixUser::download`]), while the unauthenticated
//!   `/_matrix/media/v3/download/…` answers 404 `M_NOT_FOUND` for it.
//! - **Rate limits raised** (all `per_second: 1000`, `burst_count: 10000`):
//!   `rc_message`, `rc_registration`, `rc_registration_token_validity`,
//!   `rc_login` (`address`, `account`, `failed_attempts`),
//!   `rc_admin_redaction`, `rc_joins` (`local`, `remote`),
//!   `rc_joins_per_room`, `rc_3pid_validation`, `rc_invites` (`per_room`,
//!   `per_user`, `per_issuer`), `rc_third_party_invite`,
//!   `rc_room_creation`, `rc_media_create`, `rc_presence.per_user`,
//!   `rc_delayed_event_mgmt`, `rc_reports`, `rc_user_directory`,
//!   `rc_profile`, `rc_key_requests`. Synapse's default for messages is 0.2
//!   per second with a burst of 10 (per user), which a chatty bot on a real
//!   server meets: it answers 429 with a body `{"errcode":
//!   "M_LIMIT_EXCEEDED", "error": "Too Many Requests", "retry_after_ms":
//!   N}`. [`Synapse::start_with`] lowers a limit for a test of that.
//!
//! No async runtime in the tests' code: requests go through one `reqwest`
//! client on a runtime of this module's own, blocking the calling thread.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, dead_code)]

use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

/// The homeserver's name: user ids are `@localpart:example.org`.
pub const SERVER_NAME: &str = "example.org";

/// The secret of the shared-secret registration API.
pub const SHARED_SECRET: &str = "pincer-test-registration-secret";

/// How long Synapse may take to answer after being started.
const READY_WITHIN: Duration = Duration::from_secs(60);

/// How long a graceful stop may take before the server is killed.
const STOP_WITHIN: Duration = Duration::from_secs(20);

/// Free ports tried when another process takes the one picked first.
const PORT_ATTEMPTS: usize = 5;

/// How long one request may take (more than the longest `/sync` timeout a
/// test should ask for).
const REQUEST_TIMEOUT: Duration = Duration::from_secs(90);

/// What every rate limit in the configuration is raised to.
fn raised() -> Value {
    json!({ "per_second": 1000, "burst_count": 10000 })
}

/// The venv's Python, or a panic telling how to install it.
fn venv_python() -> PathBuf {
    let python =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/synapse/.venv/bin/python");
    assert!(
        python.is_file(),
        "Synapse is not installed ({} is missing): run `bash scripts/test-deps.sh`",
        python.display()
    );
    python
}

/// The last lines of a file from byte `offset` on, for failure messages.
fn tail_from(path: &Path, offset: u64) -> String {
    let text = std::fs::read(path).unwrap_or_default();
    let text = text
        .get(usize::try_from(offset).unwrap_or(0)..)
        .unwrap_or(&[]);
    let text = String::from_utf8_lossy(text);
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(30)..].join("\n")
}

fn file_len(path: &Path) -> u64 {
    std::fs::metadata(path).map_or(0, |m| m.len())
}

/// `text` quoted for `sh`.
fn shell_quote(text: &str) -> String {
    format!("'{}'", text.replace('\'', r"'\''"))
}

/// `segment` percent-encoded for a URL path segment or query value.
pub fn encode(segment: &str) -> String {
    let mut out = String::new();
    for byte in segment.bytes() {
        if byte.is_ascii_alphanumeric() || b"-._~".contains(&byte) {
            out.push(char::from(byte));
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
}

/// A transaction id no other call in this process uses.
pub fn fresh_txn_id() -> String {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    format!(
        "pincer-test-{}-{nanos}-{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::SeqCst)
    )
}

/// The runtime and the client every request of this module goes through.
fn http() -> &'static (tokio::runtime::Runtime, reqwest::Client) {
    static HTTP: OnceLock<(tokio::runtime::Runtime, reqwest::Client)> = OnceLock::new();
    HTTP.get_or_init(|| {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("matrix-test-http")
            .enable_all()
            .build()
            .unwrap();
        let _ = rustls::crypto::ring::default_provider().install_default();
        let client = reqwest::Client::builder()
            .timeout(REQUEST_TIMEOUT)
            .no_proxy()
            // A fresh connection per request: none is left over from before
            // a restart (loopback connections cost next to nothing).
            .pool_max_idle_per_host(0)
            .build()
            .unwrap();
        (runtime, client)
    })
}

/// One HTTP request, blocking: the status and the body as JSON (a body
/// that is not JSON as a JSON string; an unanswered request as status 0
/// and the error as a string).
pub fn request(method: &str, url: &str, token: Option<&str>, body: Option<&Value>) -> (u16, Value) {
    let (runtime, client) = http();
    let method = reqwest::Method::from_bytes(method.as_bytes()).unwrap();
    let mut builder = client.request(method, url);
    if let Some(token) = token {
        builder = builder.bearer_auth(token);
    }
    if let Some(body) = body {
        builder = builder.json(body);
    }
    answer(runtime, builder)
}

/// [`request`] with a body of `content_type` sent as it is (a media
/// upload).
pub fn request_raw(
    method: &str,
    url: &str,
    token: Option<&str>,
    content_type: &str,
    body: &[u8],
) -> (u16, Value) {
    let (runtime, client) = http();
    let method = reqwest::Method::from_bytes(method.as_bytes()).unwrap();
    let mut builder = client
        .request(method, url)
        .header("content-type", content_type)
        .body(body.to_vec());
    if let Some(token) = token {
        builder = builder.bearer_auth(token);
    }
    answer(runtime, builder)
}

/// Sends a request, blocking: its status and body as [`request`] gives them.
fn answer(runtime: &tokio::runtime::Runtime, builder: reqwest::RequestBuilder) -> (u16, Value) {
    runtime.block_on(async move {
        let response = match builder.send().await {
            Ok(response) => response,
            Err(err) => return (0, Value::String(format!("{err:#}"))),
        };
        let status = response.status().as_u16();
        let bytes = response.bytes().await.unwrap_or_default();
        let value = serde_json::from_slice(&bytes)
            .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&bytes).into_owned()));
        (status, value)
    })
}

/// One running (or stopped) Synapse.
pub struct Synapse {
    dir: tempfile::TempDir,
    python: PathBuf,
    port: u16,
    child: Mutex<Option<Child>>,
    localparts: AtomicU64,
    /// Top-level configuration keys that replace the harness's own.
    overrides: Value,
}

impl Synapse {
    /// A server of its own (for a test that stops and restarts it, or
    /// wants one nobody else uses).
    pub fn start() -> Self {
        Self::start_with(json!({}))
    }

    /// A server of its own whose configuration has `overrides`' top-level
    /// keys in place of the harness's (e.g. `{"rc_message": {"per_second":
    /// 0.2, "burst_count": 3}}` for a test of 429 `M_LIMIT_EXCEEDED`).
    pub fn start_with(overrides: Value) -> Self {
        assert!(
            overrides.is_object(),
            "overrides are a JSON object: {overrides}"
        );
        let python = venv_python();
        let dir = tempfile::Builder::new()
            .prefix("pincer-synapse-")
            .tempdir()
            .unwrap();
        let mut server = Self {
            dir,
            python,
            port: 0,
            child: Mutex::new(None),
            localparts: AtomicU64::new(0),
            overrides,
        };
        // Before anything runs: a test process killed mid-start leaves nothing.
        server.watch(std::process::id());
        server.write_signing_key();
        server.write_log_config();
        for attempt in 1..=PORT_ATTEMPTS {
            server.port = super::free_port();
            server.write_config();
            let logged = file_len(&server.console_path());
            match server.spawn_and_wait() {
                Ok(()) => return server,
                // Another process took the port between our probe and
                // Synapse's bind: another one.
                Err(_) if attempt < PORT_ATTEMPTS && server.bind_failed_since(logged) => {}
                Err(why) => panic!("Synapse did not start on port {}: {why}", server.port),
            }
        }
        unreachable!("the last attempt returns or panics")
    }

    /// The server this test binary shares, started on first use: each test
    /// registers users of its own ([`Synapse::fresh_localpart`]). Never
    /// dropped, never stopped; its watchdog stops it when the test process
    /// exits. A test that stops or restarts a server starts its own.
    pub fn shared() -> &'static Self {
        static SHARED: OnceLock<Synapse> = OnceLock::new();
        SHARED.get_or_init(Self::start)
    }

    /// The temporary directory: configuration, database, logs, media.
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    /// `http://127.0.0.1:PORT` (no trailing slash): the homeserver URL a
    /// client is given.
    pub fn base_url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// Synapse's own log (WARNING and above).
    pub fn log_path(&self) -> PathBuf {
        self.dir.path().join("homeserver.log")
    }

    /// What Synapse printed on its standard output and error.
    pub fn console_path(&self) -> PathBuf {
        self.dir.path().join("console.log")
    }

    fn config_path(&self) -> PathBuf {
        self.dir.path().join("homeserver.yaml")
    }

    /// The file naming the running server's process id, for the watchdog.
    fn pid_path(&self) -> PathBuf {
        self.dir.path().join("server.pid")
    }

    /// The running server's process id.
    pub fn pid(&self) -> Option<u32> {
        self.child.lock().unwrap().as_ref().map(Child::id)
    }

    /// A localpart no other call on this server uses: `prefix` and a number.
    pub fn fresh_localpart(&self, prefix: &str) -> String {
        format!(
            "{prefix}-{}",
            self.localparts.fetch_add(1, Ordering::SeqCst)
        )
    }

    /// An ed25519 signing key in Synapse's format (`ed25519 VERSION SEED`,
    /// the 32-byte seed in unpadded base64), so no `--generate-keys` run.
    fn write_signing_key(&self) {
        use base64::Engine as _;
        use ring::rand::SecureRandom as _;
        let mut seed = [0u8; 32];
        ring::rand::SystemRandom::new().fill(&mut seed).unwrap();
        let seed = base64::engine::general_purpose::STANDARD_NO_PAD.encode(seed);
        std::fs::write(
            self.dir.path().join("signing.key"),
            format!("ed25519 a_test {seed}\n"),
        )
        .unwrap();
    }

    fn write_log_config(&self) {
        let config = json!({
            "version": 1,
            "formatters": { "precise": {
                "format": "%(asctime)s - %(name)s - %(lineno)d - %(levelname)s - %(request)s - %(message)s"
            }},
            "filters": { "context": { "()": "synapse.logging.context.LoggingContextFilter", "request": "" } },
            "handlers": { "file": {
                "class": "logging.FileHandler",
                "formatter": "precise",
                "filters": ["context"],
                "filename": self.log_path(),
                "encoding": "utf8",
            }},
            "root": { "level": "WARNING", "handlers": ["file"] },
            "disable_existing_loggers": false,
        });
        std::fs::write(
            self.dir.path().join("log.config.yaml"),
            serde_json::to_string_pretty(&config).unwrap(),
        )
        .unwrap();
    }

    fn write_config(&self) {
        let dir = self.dir.path();
        let secret = |name: &str| format!("pincer-test-{name}-{}", fresh_txn_id());
        let limit = raised();
        let mut config = json!({
            "server_name": SERVER_NAME,
            "public_baseurl": format!("{}/", self.base_url()),
            "report_stats": false,
            "listeners": [{
                "port": self.port,
                "bind_addresses": ["127.0.0.1"],
                "type": "http",
                "tls": false,
                "x_forwarded": false,
                "resources": [{ "names": ["client"], "compress": false }],
            }],
            "database": {
                "name": "sqlite3",
                "args": { "database": dir.join("homeserver.db") },
            },
            "log_config": dir.join("log.config.yaml"),
            "media_store_path": dir.join("media"),
            "signing_key_path": dir.join("signing.key"),
            "registration_shared_secret": SHARED_SECRET,
            "enable_registration": false,
            "macaroon_secret_key": secret("macaroon"),
            "form_secret": secret("form"),
            "trusted_key_servers": [],
            "suppress_key_server_warning": true,
            "presence": { "enabled": false },
            "url_preview_enabled": false,
            "enable_metrics": false,
            "rc_message": limit,
            "rc_registration": limit,
            "rc_registration_token_validity": limit,
            "rc_login": { "address": limit, "account": limit, "failed_attempts": limit },
            "rc_admin_redaction": limit,
            "rc_joins": { "local": limit, "remote": limit },
            "rc_joins_per_room": limit,
            "rc_3pid_validation": limit,
            "rc_invites": { "per_room": limit, "per_user": limit, "per_issuer": limit },
            "rc_third_party_invite": limit,
            "rc_room_creation": limit,
            "rc_media_create": limit,
            "rc_presence": { "per_user": limit },
            "rc_delayed_event_mgmt": limit,
            "rc_reports": limit,
            "rc_user_directory": limit,
            "rc_profile": limit,
            "rc_key_requests": limit,
        });
        for (key, value) in self.overrides.as_object().unwrap() {
            config[key] = value.clone();
        }
        std::fs::write(
            self.config_path(),
            serde_json::to_string_pretty(&config).unwrap(),
        )
        .unwrap();
    }

    /// Starts Synapse and waits until `GET /_matrix/client/versions`
    /// answers; why not otherwise (the console's and the log's tails).
    fn spawn_and_wait(&self) -> Result<(), String> {
        let console_offset = file_len(&self.console_path());
        let log_offset = file_len(&self.log_path());
        let console = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.console_path())
            .unwrap();
        let mut child = Command::new(&self.python)
            .args(["-m", "synapse.app.homeserver", "-c"])
            .arg(self.config_path())
            .current_dir(self.dir.path())
            .env("PYTHONUNBUFFERED", "1")
            .stdin(Stdio::null())
            .stdout(console.try_clone().unwrap())
            .stderr(console)
            .spawn()
            .unwrap_or_else(|err| panic!("cannot run {}: {err}", self.python.display()));
        std::fs::write(self.pid_path(), child.id().to_string()).unwrap();
        let failure = |what: String| {
            format!(
                "{what}\n--- {} ---\n{}\n--- {} ---\n{}",
                self.console_path().display(),
                tail_from(&self.console_path(), console_offset),
                self.log_path().display(),
                tail_from(&self.log_path(), log_offset)
            )
        };
        let url = format!("{}/_matrix/client/versions", self.base_url());
        let deadline = Instant::now() + READY_WITHIN;
        loop {
            if let Some(status) = child.try_wait().unwrap() {
                let _ = std::fs::remove_file(self.pid_path());
                return Err(failure(format!("Synapse exited ({status})")));
            }
            if request("GET", &url, None, None).0 == 200 {
                *self.child.lock().unwrap() = Some(child);
                return Ok(());
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                let _ = child.wait();
                let _ = std::fs::remove_file(self.pid_path());
                return Err(failure(format!(
                    "Synapse did not answer within {READY_WITHIN:?}"
                )));
            }
            std::thread::sleep(Duration::from_millis(25));
        }
    }

    /// Whether the console, past its first `offset` bytes, says the port was taken.
    fn bind_failed_since(&self, offset: u64) -> bool {
        let text = tail_from(&self.console_path(), offset);
        text.contains("Failed to listen on TCP port") || text.contains("Address already in use")
    }

    /// A graceful stop (SIGTERM, then SIGKILL after 20 s): what Synapse
    /// committed stays. Stopping a stopped server does nothing.
    pub fn stop(&self) {
        let Some(mut child) = self.child.lock().unwrap().take() else {
            return;
        };
        let pid = i32::try_from(child.id()).unwrap();
        // SAFETY: kill has no memory preconditions; `pid` is our child, not yet waited for.
        unsafe { libc::kill(pid, libc::SIGTERM) };
        let deadline = Instant::now() + STOP_WITHIN;
        while child.try_wait().unwrap().is_none() {
            if Instant::now() > deadline {
                eprintln!("Synapse (pid {pid}) did not stop within {STOP_WITHIN:?}: killed");
                let _ = child.kill();
                let _ = child.wait();
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = std::fs::remove_file(self.pid_path());
    }

    /// Kills the server at once (SIGKILL), as a crash would.
    pub fn kill(&self) {
        if let Some(mut child) = self.child.lock().unwrap().take() {
            let _ = child.kill();
            let _ = child.wait();
            let _ = std::fs::remove_file(self.pid_path());
        }
    }

    /// Starts the server again after [`Synapse::stop`] (or stops it first):
    /// same data, same port, same signing key.
    pub fn restart(&self) {
        self.stop();
        // The old socket may linger a moment after the process has gone.
        let deadline = Instant::now() + READY_WITHIN;
        loop {
            let logged = file_len(&self.console_path());
            match self.spawn_and_wait() {
                Ok(()) => return,
                Err(_) if Instant::now() < deadline && self.bind_failed_since(logged) => {
                    std::thread::sleep(Duration::from_millis(200));
                }
                Err(why) => panic!("Synapse did not start again on port {}: {why}", self.port),
            }
        }
    }

    /// Whether the server process runs.
    pub fn is_running(&self) -> bool {
        self.child
            .lock()
            .unwrap()
            .as_mut()
            .is_some_and(|child| child.try_wait().unwrap().is_none())
    }

    /// Kills the running server and removes the directory once process
    /// `pid` has ended, unless the directory is gone by then (the server
    /// was dropped). A detached `sh` that polls twice a second, in a process
    /// group of its own, so that a Ctrl-C or a kill of the test process's
    /// group does not take it along. The server's pid is read from
    /// `server.pid` at the end, so it follows restarts.
    pub fn watch(&self, pid: u32) {
        let dir = shell_quote(&self.dir.path().display().to_string());
        let pid_file = shell_quote(&self.pid_path().display().to_string());
        let script = format!(
            "(while kill -0 {pid} 2>/dev/null && [ -d {dir} ]; do sleep 0.5; done; \
             if [ -d {dir} ]; then p=$(cat {pid_file} 2>/dev/null); \
             [ -n \"$p\" ] && kill -9 \"$p\"; rm -rf {dir}; fi) \
             </dev/null >/dev/null 2>&1 &"
        );
        // The outer `sh` returns at once; the loop is left to init.
        let status = Command::new("sh")
            .args(["-c", &script])
            .current_dir("/")
            .stdin(Stdio::null())
            .process_group(0)
            .status()
            .unwrap_or_else(|err| panic!("cannot run sh (the watchdog of Synapse): {err}"));
        assert!(status.success(), "the watchdog of Synapse failed: {status}");
    }

    /// A request to this server (`path` from `/_matrix/...` or
    /// `/_synapse/...`), without a token.
    pub fn request(&self, method: &str, path: &str, body: Option<&Value>) -> (u16, Value) {
        request(method, &format!("{}{path}", self.base_url()), None, body)
    }

    /// A new user through the shared-secret admin API (`GET`, then `POST
    /// /_synapse/admin/v1/register` with the nonce and an HMAC-SHA1 of
    /// nonce, user, password and admin flag): logged in on a new device.
    pub fn register(&self, localpart: &str, password: &str, admin: bool) -> MatrixUser {
        let path = "/_synapse/admin/v1/register";
        let (status, body) = self.request("GET", path, None);
        assert_eq!(status, 200, "GET {path}: {body}");
        let nonce = body["nonce"].as_str().unwrap().to_owned();
        let key = ring::hmac::Key::new(
            ring::hmac::HMAC_SHA1_FOR_LEGACY_USE_ONLY,
            SHARED_SECRET.as_bytes(),
        );
        let message = [
            nonce.as_bytes(),
            localpart.as_bytes(),
            password.as_bytes(),
            if admin { b"admin" } else { b"notadmin" },
        ]
        .join(&b'\0');
        let mac = hex::encode(ring::hmac::sign(&key, &message).as_ref());
        let (status, body) = self.request(
            "POST",
            path,
            Some(&json!({
                "nonce": nonce,
                "username": localpart,
                "password": password,
                "admin": admin,
                "mac": mac,
            })),
        );
        assert_eq!(status, 200, "registering {localpart}: {body}");
        MatrixUser {
            user_id: body["user_id"].as_str().unwrap().to_owned(),
            access_token: body["access_token"].as_str().unwrap().to_owned(),
            device_id: body["device_id"].as_str().unwrap().to_owned(),
            password: password.to_owned(),
            base_url: self.base_url(),
        }
    }

    /// Password login (`m.login.password`): the new access token and
    /// device id. `user` is a localpart or a full user id.
    pub fn login(&self, user: &str, password: &str) -> (String, String) {
        let user = self.login_as(user, password, None);
        (user.access_token, user.device_id)
    }

    /// Password login as a [`MatrixUser`], on `device_id` when given (a
    /// new access token for that device: its transaction ids carry over),
    /// else on a new device.
    pub fn login_as(&self, user: &str, password: &str, device_id: Option<&str>) -> MatrixUser {
        let mut body = json!({
            "type": "m.login.password",
            "identifier": { "type": "m.id.user", "user": user },
            "password": password,
        });
        if let Some(device_id) = device_id {
            body["device_id"] = json!(device_id);
        }
        let (status, body) = self.request("POST", "/_matrix/client/v3/login", Some(&body));
        assert_eq!(status, 200, "login as {user}: {body}");
        MatrixUser {
            user_id: body["user_id"].as_str().unwrap().to_owned(),
            access_token: body["access_token"].as_str().unwrap().to_owned(),
            device_id: body["device_id"].as_str().unwrap().to_owned(),
            password: password.to_owned(),
            base_url: self.base_url(),
        }
    }
}

impl Drop for Synapse {
    fn drop(&mut self) {
        self.kill();
    }
}

/// One timeline or state event as the server gave it.
#[derive(Debug, Clone)]
pub struct Event {
    pub event_id: String,
    /// `type`.
    pub kind: String,
    pub sender: String,
    pub content: Value,
    pub state_key: Option<String>,
    pub origin_server_ts: i64,
    pub unsigned: Value,
    /// The whole event.
    pub raw: Value,
}

impl Event {
    pub fn from_json(raw: Value) -> Self {
        let text = |key: &str| raw[key].as_str().unwrap_or_default().to_owned();
        Self {
            event_id: text("event_id"),
            kind: text("type"),
            sender: text("sender"),
            content: raw["content"].clone(),
            state_key: raw["state_key"].as_str().map(str::to_owned),
            origin_server_ts: raw["origin_server_ts"].as_i64().unwrap_or_default(),
            unsigned: raw["unsigned"].clone(),
            raw,
        }
    }

    /// `content.body`, when there is one.
    pub fn body(&self) -> Option<&str> {
        self.content["body"].as_str()
    }

    /// `content.m.relates_to`: its `rel_type` and `event_id`.
    pub fn relation(&self) -> Option<(&str, &str)> {
        let relates = &self.content["m.relates_to"];
        Some((relates["rel_type"].as_str()?, relates["event_id"].as_str()?))
    }

    /// The event a redaction redacts (`content.redacts` from room version
    /// 11 on, the top-level `redacts` before).
    pub fn redacts(&self) -> Option<&str> {
        self.content["redacts"]
            .as_str()
            .or_else(|| self.raw["redacts"].as_str())
    }

    /// Whether this event has been redacted.
    pub fn is_redacted(&self) -> bool {
        !self.unsigned["redacted_because"].is_null()
    }
}

/// A person on the homeserver: a user logged in on one device.
#[derive(Debug, Clone)]
pub struct MatrixUser {
    pub user_id: String,
    pub access_token: String,
    pub device_id: String,
    pub password: String,
    base_url: String,
}

impl MatrixUser {
    /// A request with this user's token (`path` from `/_matrix/...`): the
    /// status and the body.
    pub fn request(&self, method: &str, path: &str, body: Option<&Value>) -> (u16, Value) {
        request(
            method,
            &format!("{}{path}", self.base_url),
            Some(&self.access_token),
            body,
        )
    }

    /// Like [`MatrixUser::request`], panicking unless the answer is 200.
    pub fn ok(&self, method: &str, path: &str, body: Option<&Value>) -> Value {
        let (status, answer) = self.request(method, path, body);
        assert_eq!(
            status, 200,
            "{method} {path} as {} answered {status}: {answer}",
            self.user_id
        );
        answer
    }

    fn room_path(room: &str, rest: &str) -> String {
        format!("/_matrix/client/v3/rooms/{}/{rest}", encode(room))
    }

    /// A private room named `name`, `invite` invited, end-to-end
    /// encryption switched on (`m.room.encryption` in its initial state)
    /// when `encrypted`: its id.
    pub fn create_room(&self, name: &str, invite: &[&str], encrypted: bool) -> String {
        let mut body = json!({
            "name": name,
            "preset": "private_chat",
            "invite": invite,
            "is_direct": false,
        });
        if encrypted {
            body["initial_state"] = json!([{
                "type": "m.room.encryption",
                "state_key": "",
                "content": { "algorithm": "m.megolm.v1.aes-sha2" },
            }]);
        }
        let answer = self.ok("POST", "/_matrix/client/v3/createRoom", Some(&body));
        answer["room_id"].as_str().unwrap().to_owned()
    }

    pub fn invite(&self, room: &str, user_id: &str) {
        self.ok(
            "POST",
            &Self::room_path(room, "invite"),
            Some(&json!({ "user_id": user_id })),
        );
    }

    /// Joins a room (by id or alias) this user was invited to or may join.
    pub fn join(&self, room: &str) {
        self.ok(
            "POST",
            &format!("/_matrix/client/v3/join/{}", encode(room)),
            Some(&json!({})),
        );
    }

    pub fn leave(&self, room: &str) {
        self.ok("POST", &Self::room_path(room, "leave"), Some(&json!({})));
    }

    /// The rooms this user has joined.
    pub fn joined_rooms(&self) -> Vec<String> {
        let answer = self.ok("GET", "/_matrix/client/v3/joined_rooms", None);
        answer["joined_rooms"]
            .as_array()
            .unwrap()
            .iter()
            .map(|room| room.as_str().unwrap().to_owned())
            .collect()
    }

    /// An `m.text` message with a fresh transaction id: its event id.
    pub fn send_text(&self, room: &str, body: &str) -> String {
        self.send_raw(
            room,
            "m.room.message",
            &json!({ "msgtype": "m.text", "body": body }),
            &fresh_txn_id(),
        )
    }

    /// `PUT /rooms/{room}/send/{event_type}/{txn_id}`: the status and the
    /// answer (for a test that expects a refusal).
    pub fn try_send_raw(
        &self,
        room: &str,
        event_type: &str,
        content: &Value,
        txn_id: &str,
    ) -> (u16, Value) {
        self.request(
            "PUT",
            &Self::room_path(
                room,
                &format!("send/{}/{}", encode(event_type), encode(txn_id)),
            ),
            Some(content),
        )
    }

    /// Sends an event under the transaction id given (a repeat is the same
    /// send): its event id.
    pub fn send_raw(&self, room: &str, event_type: &str, content: &Value, txn_id: &str) -> String {
        let (status, answer) = self.try_send_raw(room, event_type, content, txn_id);
        assert_eq!(
            status, 200,
            "sending {event_type} as {} answered {status}: {answer}",
            self.user_id
        );
        answer["event_id"].as_str().unwrap().to_owned()
    }

    /// An edit of `event_id` (`m.replace`) to show `new_body`: its event id.
    pub fn edit(&self, room: &str, event_id: &str, new_body: &str) -> String {
        self.send_raw(
            room,
            "m.room.message",
            &json!({
                "msgtype": "m.text",
                "body": format!("* {new_body}"),
                "m.new_content": { "msgtype": "m.text", "body": new_body },
                "m.relates_to": { "rel_type": "m.replace", "event_id": event_id },
            }),
            &fresh_txn_id(),
        )
    }

    /// A reaction (`m.reaction`, an `m.annotation` with `key`) to `event_id`:
    /// its event id.
    pub fn react(&self, room: &str, event_id: &str, key: &str) -> String {
        self.send_raw(
            room,
            "m.reaction",
            &json!({
                "m.relates_to": { "rel_type": "m.annotation", "event_id": event_id, "key": key }
            }),
            &fresh_txn_id(),
        )
    }

    /// Redacts `event_id`: the redaction's event id.
    pub fn redact(&self, room: &str, event_id: &str, reason: Option<&str>) -> String {
        let body = reason.map_or_else(|| json!({}), |reason| json!({ "reason": reason }));
        let answer = self.ok(
            "PUT",
            &Self::room_path(
                room,
                &format!("redact/{}/{}", encode(event_id), encode(&fresh_txn_id())),
            ),
            Some(&body),
        );
        answer["event_id"].as_str().unwrap().to_owned()
    }

    /// Every timeline event of the room this user may see, oldest first
    /// (`GET /rooms/{room}/messages?dir=b`, paginated to the start).
    pub fn messages(&self, room: &str) -> Vec<Event> {
        let mut events = Vec::new();
        let mut from: Option<String> = None;
        loop {
            let mut path = Self::room_path(room, "messages?dir=b&limit=100");
            if let Some(from) = &from {
                path.push_str(&format!("&from={}", encode(from)));
            }
            let answer = self.ok("GET", &path, None);
            let chunk = answer["chunk"].as_array().cloned().unwrap_or_default();
            let done = chunk.is_empty();
            events.extend(chunk.into_iter().map(Event::from_json));
            match answer["end"].as_str() {
                Some(end) if !done && from.as_deref() != Some(end) => from = Some(end.to_owned()),
                _ => break,
            }
        }
        events.reverse();
        events
    }

    /// The bytes of an `mxc://SERVER/ID` URI's media, downloaded as this
    /// user (authenticated media, `GET /_matrix/client/v1/media/download`,
    /// which Synapse requires for media uploaded since 1.120).
    pub fn download(&self, mxc: &str) -> Vec<u8> {
        let (server, id) = mxc
            .strip_prefix("mxc://")
            .and_then(|rest| rest.split_once('/'))
            .unwrap_or_else(|| panic!("not an mxc:// URI: {mxc}"));
        let url = format!(
            "{}/_matrix/client/v1/media/download/{}/{}",
            self.base_url,
            encode(server),
            encode(id)
        );
        let (runtime, client) = http();
        let request = client.get(url).bearer_auth(&self.access_token);
        runtime.block_on(async move {
            let response = request.send().await.unwrap();
            let status = response.status().as_u16();
            let bytes = response.bytes().await.unwrap().to_vec();
            assert_eq!(
                status,
                200,
                "downloading {mxc}: {}",
                String::from_utf8_lossy(&bytes)
            );
            bytes
        })
    }

    /// The room's current state events.
    pub fn state(&self, room: &str) -> Vec<Event> {
        let answer = self.ok("GET", &Self::room_path(room, "state"), None);
        answer
            .as_array()
            .unwrap()
            .iter()
            .cloned()
            .map(Event::from_json)
            .collect()
    }

    /// What `sender`'s newest message in the room shows now: the
    /// `m.new_content` body of its newest edit (`m.replace` by the same
    /// sender), else its own body; `None` when `sender` has sent no
    /// message with a body. Edits are not messages of their own here.
    pub fn latest_text(&self, room: &str, sender: &str) -> Option<String> {
        latest_text(&self.messages(room), sender)
    }

    /// Waits until an event in the room matches `predicate`: the first
    /// that does. Panics after `timeout`, listing what the room holds.
    pub fn wait_for(
        &self,
        room: &str,
        predicate: impl Fn(&Event) -> bool,
        timeout: Duration,
    ) -> Event {
        let deadline = Instant::now() + timeout;
        loop {
            let events = self.messages(room);
            if let Some(event) = events.iter().find(|event| predicate(event)) {
                return event.clone();
            }
            if Instant::now() > deadline {
                let listed: Vec<String> = events
                    .iter()
                    .map(|e| format!("{} {} {}", e.kind, e.sender, e.content))
                    .collect();
                panic!(
                    "no matching event in {room} (as {}) within {timeout:?}; it holds:\n{}",
                    self.user_id,
                    listed.join("\n")
                );
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// `GET /sync` (from `since` when given, holding up to `timeout_ms`):
    /// the answer.
    pub fn sync(&self, since: Option<&str>, timeout_ms: u64) -> Value {
        let mut path = format!("/_matrix/client/v3/sync?timeout={timeout_ms}");
        if let Some(since) = since {
            path.push_str(&format!("&since={}", encode(since)));
        }
        self.ok("GET", &path, None)
    }
}

/// [`MatrixUser::latest_text`] over events already fetched (oldest first).
pub fn latest_text(events: &[Event], sender: &str) -> Option<String> {
    let is_edit = |event: &Event| matches!(event.relation(), Some(("m.replace", _)));
    let original = events.iter().rev().find(|event| {
        event.kind == "m.room.message"
            && event.sender == sender
            && !is_edit(event)
            && event.body().is_some()
    })?;
    let edited = events.iter().rev().find_map(|event| {
        let (_, target) = event.relation().filter(|(rel, _)| *rel == "m.replace")?;
        (target == original.event_id && event.sender == sender && event.kind == "m.room.message")
            .then(|| event.content["m.new_content"]["body"].as_str())
            .flatten()
    });
    Some(edited.or(original.body()).unwrap().to_owned())
}

/// Where a [`MatrixProxy`] holds a request its rule matches.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Hold {
    /// Before the homeserver sees it: it lands when released (a request a
    /// slow server acts on late, after its client died).
    Request,
    /// After the homeserver acted on it, before its answer goes back (the
    /// platform accepted; the client does not know yet).
    Answer,
    /// Not held: the homeserver acts on it and its answer is lost (the
    /// connection closes unanswered), once per request caught.
    Lose,
}

type Rule = (
    Hold,
    Box<dyn Fn(&super::http::Request) -> bool + Send + Sync>,
);

#[derive(Default)]
struct Holding {
    rule: Option<Rule>,
    /// Requests held now.
    held: usize,
    /// Requests caught by a rule so far.
    caught: usize,
    /// Bumped by each release: a request held under an older value goes on.
    releases: u64,
}

#[derive(Default)]
struct ProxyState {
    /// The longest pause, in ms, before and after the homeserver acts on a
    /// request that changes a room (a send, an edit, a redaction).
    jitter: Mutex<Option<(u64, u64)>>,
    holding: Mutex<Holding>,
    released: std::sync::Condvar,
    /// Requests that change a room, under way (not yet answered).
    acting: AtomicU64,
}

/// An HTTP proxy in front of a homeserver, for a client (Pincer) given its
/// URL as the homeserver's: it forwards each request whole, whether or not
/// the client is still there to read the answer, so a request a killed
/// process sent still lands. It can pause around the requests that change
/// a room ([`MatrixProxy::jitter`]) and hold one ([`MatrixProxy::hold`])
/// before the homeserver sees it or before its answer goes back.
pub struct MatrixProxy {
    /// `http://127.0.0.1:PORT`: the homeserver URL the client is given.
    pub url: String,
    state: std::sync::Arc<ProxyState>,
    _server: super::http::Loopback,
}

/// Whether a request changes a room: `PUT …/send/…` or `PUT …/redact/…`.
fn acts(request: &super::http::Request) -> bool {
    request.method == "PUT"
        && (request.path.contains("/send/") || request.path.contains("/redact/"))
}

impl MatrixProxy {
    pub fn start(upstream: &str) -> Self {
        let state = std::sync::Arc::new(ProxyState::default());
        let shared = state.clone();
        let upstream = upstream.to_owned();
        let server = super::http::Loopback::start(move |request, _| {
            let acting = acts(request);
            if acting {
                shared.acting.fetch_add(1, Ordering::SeqCst);
            }
            let jitter = *shared.jitter.lock().unwrap();
            let pause = |max: u64| {
                if max > 0 && acting {
                    std::thread::sleep(Duration::from_millis(fastrand::u64(0..=max)));
                }
            };
            shared.hold_if(request, Hold::Request);
            pause(jitter.map_or(0, |j| j.0));
            let token = request
                .header("authorization")
                .and_then(|h| h.strip_prefix("Bearer "))
                .map(str::to_owned);
            let url = format!("{upstream}{}", request.path);
            // A body that is not JSON (a media upload) goes as it came.
            let (status, value) = match request.header("content-type") {
                Some(kind) if !request.raw.is_empty() && !kind.contains("json") => {
                    self::request_raw(&request.method, &url, token.as_deref(), kind, &request.raw)
                }
                _ => {
                    let body = (!request.raw.is_empty()).then_some(&request.body);
                    self::request(&request.method, &url, token.as_deref(), body)
                }
            };
            shared.hold_if(request, Hold::Answer);
            let lost = shared.loses(request);
            pause(jitter.map_or(0, |j| j.1));
            if acting {
                shared.acting.fetch_sub(1, Ordering::SeqCst);
            }
            if status == 0 || lost {
                super::http::Reply::Drop
            } else {
                super::http::Reply::json(status, &value)
            }
        });
        Self {
            url: server.url.clone(),
            state,
            _server: server,
        }
    }

    /// Pauses up to `before_ms` before the homeserver acts on a request
    /// that changes a room, and up to `after_ms` before its answer goes
    /// back (each pause drawn anew).
    pub fn jitter(&self, before_ms: u64, after_ms: u64) {
        *self.state.jitter.lock().unwrap() = Some((before_ms, after_ms));
    }

    /// From now on, holds the requests `matches` picks at `at`, until
    /// [`MatrixProxy::release`]; replaces the rule before.
    pub fn hold(
        &self,
        at: Hold,
        matches: impl Fn(&super::http::Request) -> bool + Send + Sync + 'static,
    ) {
        self.state.holding.lock().unwrap().rule = Some((at, Box::new(matches)));
    }

    /// Holds nothing more (those held stay held until released).
    pub fn stop_holding(&self) {
        self.state.holding.lock().unwrap().rule = None;
    }

    /// Lets every request held so far go on.
    pub fn release(&self) {
        self.state.holding.lock().unwrap().releases += 1;
        self.state.released.notify_all();
    }

    /// How many requests a rule has caught so far.
    pub fn caught(&self) -> usize {
        self.state.holding.lock().unwrap().caught
    }

    /// How many requests are held now.
    pub fn held(&self) -> usize {
        self.state.holding.lock().unwrap().held
    }

    /// Waits until a rule has caught `count` requests (they are held).
    pub fn wait_caught(&self, count: usize, timeout: Duration) {
        let deadline = Instant::now() + timeout;
        while self.caught() < count {
            assert!(
                Instant::now() < deadline,
                "the proxy caught {} request(s), not {count}, within {timeout:?}",
                self.caught()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Waits until no request that changes a room is under way (those of
    /// killed clients included): everything sent has landed.
    pub fn wait_settled(&self, timeout: Duration) {
        let deadline = Instant::now() + timeout;
        while self.state.acting.load(Ordering::SeqCst) > 0 {
            assert!(
                Instant::now() < deadline,
                "requests still under way after {timeout:?}"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl ProxyState {
    /// Holds `request` here when the rule says so, until a release.
    /// Whether the rule loses this request's answer (counted as caught).
    fn loses(&self, request: &super::http::Request) -> bool {
        let mut holding = self.holding.lock().unwrap();
        let caught = holding
            .rule
            .as_ref()
            .is_some_and(|(when, matches)| *when == Hold::Lose && matches(request));
        if caught {
            holding.caught += 1;
        }
        caught
    }

    fn hold_if(&self, request: &super::http::Request, at: Hold) {
        let mut holding = self.holding.lock().unwrap();
        let caught = holding
            .rule
            .as_ref()
            .is_some_and(|(when, matches)| *when == at && matches(request));
        if !caught {
            return;
        }
        holding.held += 1;
        holding.caught += 1;
        let ticket = holding.releases;
        while holding.releases == ticket {
            holding = self.released.wait(holding).unwrap();
        }
        holding.held -= 1;
    }
}

/// What a room shows of `sender`'s messages, oldest first: each message
/// event (not an edit) with the body of its newest edit by the same sender
/// (the newest by `origin_server_ts`, then event id, as clients choose), or
/// its own; `None` for a redacted one.
pub fn shown_messages(events: &[Event], sender: &str) -> Vec<(String, Option<String>)> {
    let is_edit = |event: &Event| matches!(event.relation(), Some(("m.replace", _)));
    events
        .iter()
        .filter(|e| e.kind == "m.room.message" && e.sender == sender && !is_edit(e))
        .map(|message| {
            if message.is_redacted() || message.body().is_none() {
                return (message.event_id.clone(), None);
            }
            let newest = events
                .iter()
                .filter(|e| {
                    e.kind == "m.room.message"
                        && e.sender == sender
                        && !e.is_redacted()
                        && e.relation() == Some(("m.replace", message.event_id.as_str()))
                })
                .max_by(|a, b| {
                    (a.origin_server_ts, &a.event_id).cmp(&(b.origin_server_ts, &b.event_id))
                });
            let text = newest
                .and_then(|e| e.content["m.new_content"]["body"].as_str())
                .or(message.body())
                .map(str::to_owned);
            (message.event_id.clone(), text)
        })
        .collect()
}
