//! Shared test support: the real binary over pipes, and the vendored ACP schema;
//! `http` (the one loopback HTTP server every fake is built on), `sdk` (the
//! official ACP SDK as a client), `telegram` (a fake Bot API), `webhook` (a
//! webhook peer); real servers
//! started on free ports: `postgres`, `irc` (ngIRCd), `inspircd` (InspIRCd
//! with Anope's NickServ: accounts, SASL, `account-tag`), `mail` (Dovecot
//! with an aiosmtpd server delivering into its Maildirs), `matrix` (Synapse).
#![allow(dead_code)]

pub mod browser;
pub mod discord;
pub mod http;
pub mod inspircd;
pub mod irc;
pub mod mail;
pub mod matrix;
pub mod sdk;
pub mod serve;
pub mod slack;
pub mod telegram;
pub mod webhook;

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError, channel};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

pub const BIN: &str = env!("CARGO_BIN_EXE_pincer");
pub const TIMEOUT: Duration = Duration::from_secs(20);

/// The vendored ACP schema, compiled once per definition asked for.
pub struct Schema {
    root: Value,
    /// The same schema with ACP's unstable parts, for the definitions only
    /// it has (`session/fork`'s).
    unstable: Value,
    agent_message: jsonschema::Validator,
    /// Validators per definition, compiled on first use (compiling is the slow part).
    compiled:
        std::cell::RefCell<std::collections::HashMap<String, std::rc::Rc<jsonschema::Validator>>>,
}

impl Schema {
    pub fn load() -> Self {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("schema/acp/schema.json");
        let root: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        // The first branch of the root `anyOf` is "every message an agent sends".
        let agent = json!({ "$defs": root["$defs"].clone(), "allOf": [root["anyOf"][0].clone()] });
        let agent_message = jsonschema::validator_for(&agent).unwrap();
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("schema/acp/schema.unstable.json");
        let unstable: Value =
            serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        Self {
            root,
            unstable,
            agent_message,
            compiled: Default::default(),
        }
    }

    fn validator(&self, def: &str) -> std::rc::Rc<jsonschema::Validator> {
        if let Some(validator) = self.compiled.borrow().get(def) {
            return validator.clone();
        }
        // A stable definition from the stable schema; one only ACP's
        // unstable surface has from the unstable one.
        let root = if self.root["$defs"].get(def).is_some() {
            &self.root
        } else {
            &self.unstable
        };
        assert!(
            root["$defs"].get(def).is_some(),
            "no definition {def} in the schema"
        );
        let schema = json!({ "$defs": root["$defs"].clone(), "$ref": format!("#/$defs/{def}") });
        let validator = std::rc::Rc::new(jsonschema::validator_for(&schema).unwrap());
        self.compiled
            .borrow_mut()
            .insert(def.to_owned(), validator.clone());
        validator
    }

    /// Panics unless `message` is a valid message from an agent.
    pub fn check_agent_message(&self, message: &Value) {
        let errors: Vec<String> = self
            .agent_message
            .iter_errors(message)
            .map(|e| format!("{} at {}", e, e.instance_path()))
            .collect();
        assert!(
            errors.is_empty(),
            "message does not match the ACP schema: {message}\n{}",
            errors.join("\n")
        );
    }

    /// Panics unless `value` matches the named definition (e.g. `NewSessionResponse`).
    pub fn check(&self, def: &str, value: &Value) {
        let validator = self.validator(def);
        let errors: Vec<String> = validator
            .iter_errors(value)
            .map(|e| format!("{} at {}", e, e.instance_path()))
            .collect();
        assert!(
            errors.is_empty(),
            "{def} does not match the ACP schema: {value}\n{}",
            errors.join("\n")
        );
    }
}

/// The response definition for each method Pincer answers.
pub fn response_def(method: &str) -> Option<&'static str> {
    Some(match method {
        "initialize" => "InitializeResponse",
        "session/new" => "NewSessionResponse",
        "session/load" => "LoadSessionResponse",
        "session/resume" => "ResumeSessionResponse",
        "session/list" => "ListSessionsResponse",
        "session/close" => "CloseSessionResponse",
        "session/prompt" => "PromptResponse",
        "session/set_config_option" => "SetSessionConfigOptionResponse",
        "session/set_mode" => "SetSessionModeResponse",
        "session/delete" => "DeleteSessionResponse",
        "session/fork" => "ForkSessionResponse",
        "logout" => "LogoutResponse",
        "authenticate" => "AuthenticateResponse",
        _ => return None,
    })
}

/// A fresh directory for one test: data dir, workspace, scripts.
pub struct TestDir {
    pub dir: tempfile::TempDir,
}

impl TestDir {
    pub fn new() -> Self {
        Self {
            dir: tempfile::tempdir().unwrap(),
        }
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    pub fn data_dir(&self) -> PathBuf {
        self.path().join("data")
    }

    /// A workspace directory (absolute, existing).
    pub fn workspace(&self) -> PathBuf {
        let ws = self.path().join("ws");
        std::fs::create_dir_all(&ws).unwrap();
        ws.canonicalize().unwrap()
    }

    /// Writes the configuration file (`$XDG_CONFIG_HOME/pincer/config.toml`).
    pub fn write_config(&self, text: &str) {
        let dir = self.path().join("config").join("pincer");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("config.toml"), text).unwrap();
    }

    /// Writes a model script and returns its path.
    pub fn script(&self, name: &str, lines: &[Value]) -> PathBuf {
        let path = self.path().join(name);
        let text: Vec<String> = lines.iter().map(Value::to_string).collect();
        std::fs::write(&path, text.join("\n") + "\n").unwrap();
        path
    }

    /// `pincer sessions show ID --json`, parsed: the session, its history and runs.
    pub fn show_session(&self, session: &str) -> Value {
        let out = self
            .command()
            .args(["sessions", "show", session, "--json"])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice(&out.stdout).unwrap()
    }

    /// Starts `pincer acp ARGS` with piped stdin/stdout and stderr to `stderr_path`.
    pub fn spawn_acp<S: AsRef<std::ffi::OsStr>>(&self, args: &[S], stderr_path: &Path) -> Child {
        self.spawn_acp_env(args, &[], stderr_path)
    }

    /// Like [`TestDir::spawn_acp`] with extra environment variables.
    pub fn spawn_acp_env<S: AsRef<std::ffi::OsStr>>(
        &self,
        args: &[S],
        env: &[(&str, &str)],
        stderr_path: &Path,
    ) -> Child {
        let stderr = std::fs::File::create(stderr_path).unwrap();
        self.command()
            .envs(env.iter().copied())
            .arg("acp")
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(stderr)
            .spawn()
            .unwrap()
    }

    /// `pincer run --script SCRIPT --input INPUT --output jsonl` in the
    /// workspace: the output and its JSON lines.
    pub fn run_jsonl(&self, script: &[Value], input: &str) -> (std::process::Output, Vec<Value>) {
        let script = self.script("s.jsonl", script);
        self.run_script_jsonl(script.to_str().unwrap(), input)
    }

    /// `pincer run --script SCRIPT --input INPUT --output jsonl` in the
    /// workspace, `SCRIPT` as given (a path relative to the workspace too).
    pub fn run_script_jsonl(
        &self,
        script: &str,
        input: &str,
    ) -> (std::process::Output, Vec<Value>) {
        let input_path = self.path().join("input.jsonl");
        std::fs::write(&input_path, input).unwrap();
        let workspace = self.workspace();
        let out = self
            .command()
            .current_dir(&workspace)
            .args(["run", "--script", script])
            .args(["--output", "jsonl"])
            .args(["--cwd", workspace.to_str().unwrap()])
            .args(["--input", input_path.to_str().unwrap()])
            .stdin(Stdio::null())
            .output()
            .unwrap();
        let lines = String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect();
        (out, lines)
    }

    /// A run's tape as `pincer tape RUN --json` prints it.
    pub fn tape(&self, run: &str) -> Vec<Value> {
        let out = self
            .command()
            .args(["tape", run, "--json"])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }

    /// `pincer verify` passes: every receipt chained, none missing.
    pub fn verify(&self) {
        let out = self.command().arg("verify").output().unwrap();
        assert_eq!(
            out.status.code(),
            Some(0),
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// What the `pincer` processes a test started wrote to `stderr.log` in
    /// this directory, for failure messages.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.path().join("stderr.log")).unwrap_or_default()
    }

    /// `pincer channels outbox --json`: every send intent, most recently
    /// changed first.
    pub fn outbox(&self) -> Vec<Value> {
        let out = self
            .command()
            .args(["channels", "outbox", "--json"])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }

    /// A `pincer` command isolated in this directory (no user config, own data dir).
    pub fn command(&self) -> Command {
        let mut cmd = Command::new(BIN);
        cmd.env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("HOME", self.path().join("home"))
            .env("XDG_CONFIG_HOME", self.path().join("config"))
            .env("PINCER_DATA_DIR", self.data_dir())
            .env("RUST_LOG", "pincer=debug")
            .current_dir(self.path());
        cmd
    }
}

/// `pincer acp` driven over its pipes with raw JSON, every line checked against the schema.
pub struct AcpProcess {
    pub child: Child,
    stdin: Option<ChildStdin>,
    lines: Receiver<String>,
    schema: Schema,
    next_id: i64,
    /// Methods of requests sent, by id, to validate their responses.
    sent: std::collections::HashMap<String, String>,
    /// Everything received, in order.
    pub received: Vec<Value>,
    pub stderr_path: PathBuf,
}

impl AcpProcess {
    pub fn spawn(dir: &TestDir, args: &[&str]) -> Self {
        Self::spawn_env(dir, args, &[])
    }

    /// Like [`AcpProcess::spawn`] with extra environment variables (API keys).
    pub fn spawn_env(dir: &TestDir, args: &[&str], env: &[(&str, &str)]) -> Self {
        let stderr_path = dir.path().join(format!("stderr-{}.log", uuid_like()));
        let mut child = dir.spawn_acp_env(args, env, &stderr_path);
        let stdout = child.stdout.take().unwrap();
        let (tx, rx) = channel();
        std::thread::spawn(move || {
            let mut reader = BufReader::new(stdout);
            loop {
                let mut line = String::new();
                match reader.read_line(&mut line) {
                    Ok(0) | Err(_) => return,
                    Ok(_) => {
                        if tx.send(line).is_err() {
                            return;
                        }
                    }
                }
            }
        });
        Self {
            stdin: child.stdin.take(),
            child,
            lines: rx,
            schema: Schema::load(),
            next_id: 1,
            sent: Default::default(),
            received: Vec::new(),
            stderr_path,
        }
    }

    pub fn stderr(&self) -> String {
        std::fs::read_to_string(&self.stderr_path).unwrap_or_default()
    }

    pub fn send_raw(&mut self, bytes: &[u8]) {
        let stdin = self.stdin.as_mut().expect("stdin open");
        stdin.write_all(bytes).unwrap();
        stdin.flush().unwrap();
    }

    pub fn send(&mut self, message: &Value) {
        if let (Some(id), Some(method)) = (
            message.get("id"),
            message.get("method").and_then(Value::as_str),
        ) {
            self.sent.insert(id.to_string(), method.to_owned());
        }
        let mut line = serde_json::to_vec(message).unwrap();
        line.push(b'\n');
        self.send_raw(&line);
    }

    /// Sends a request and returns its id.
    pub fn request_async(&mut self, method: &str, params: Value) -> Value {
        let id = json!(self.next_id);
        self.next_id += 1;
        self.send(&json!({ "jsonrpc": "2.0", "id": id, "method": method, "params": params }));
        id
    }

    pub fn notify(&mut self, method: &str, params: Value) {
        self.send(&json!({ "jsonrpc": "2.0", "method": method, "params": params }));
    }

    /// The next message from the agent, validated against the schema.
    pub fn recv(&mut self) -> Value {
        self.recv_timeout(TIMEOUT).unwrap_or_else(|| {
            panic!(
                "no message from pincer within {TIMEOUT:?}; stderr:\n{}",
                self.stderr()
            )
        })
    }

    pub fn recv_timeout(&mut self, timeout: Duration) -> Option<Value> {
        let line = match self.lines.recv_timeout(timeout) {
            Ok(line) => line,
            Err(RecvTimeoutError::Timeout) => return None,
            Err(RecvTimeoutError::Disconnected) => return None,
        };
        assert!(
            line.ends_with('\n'),
            "message not newline-terminated: {line:?}"
        );
        let value: Value = serde_json::from_str(&line)
            .unwrap_or_else(|e| panic!("pincer wrote a line that is not JSON ({e}): {line:?}"));
        self.schema.check_agent_message(&value);
        if let (Some(id), Some(result)) = (value.get("id"), value.get("result"))
            && let Some(def) = self.sent.get(&id.to_string()).and_then(|m| response_def(m))
        {
            self.schema.check(def, result);
        }
        if value.get("method").and_then(Value::as_str) == Some("session/update") {
            self.schema.check("SessionNotification", &value["params"]);
        }
        self.received.push(value.clone());
        Some(value)
    }

    /// Reads until the response to `id`, returning the notifications seen before it.
    pub fn until_response(&mut self, id: &Value) -> (Vec<Value>, Value) {
        let mut notes = Vec::new();
        let deadline = Instant::now() + TIMEOUT;
        loop {
            assert!(
                Instant::now() < deadline,
                "no response to {id}; stderr:\n{}",
                self.stderr()
            );
            let message = self.recv();
            if message.get("id") == Some(id) && message.get("method").is_none() {
                return (notes, message);
            }
            notes.push(message);
        }
    }

    /// Sends a request and waits for its response; returns (notifications, response).
    pub fn request(&mut self, method: &str, params: Value) -> (Vec<Value>, Value) {
        let id = self.request_async(method, params);
        self.until_response(&id)
    }

    /// Sends a request and returns its `result`, panicking on an error response.
    pub fn call(&mut self, method: &str, params: Value) -> Value {
        let (_, response) = self.request(method, params);
        match response.get("result") {
            Some(result) => result.clone(),
            None => panic!("{method} failed: {response}"),
        }
    }

    pub fn initialize(&mut self) -> Value {
        self.call(
            "initialize",
            json!({ "protocolVersion": 1, "clientCapabilities": {} }),
        )
    }

    /// Opens a session, and reads the `available_commands_update` that follows
    /// the response.
    pub fn new_session(&mut self, cwd: &Path) -> String {
        let result = self.call("session/new", json!({ "cwd": cwd, "mcpServers": [] }));
        let session = result["sessionId"].as_str().unwrap().to_owned();
        self.expect_commands(&session);
        session
    }

    /// Reads the next message: the `available_commands_update` a session gets
    /// right after the response that opened it.
    pub fn expect_commands(&mut self, session: &str) -> Value {
        let note = self.recv();
        assert_eq!(note["method"], "session/update", "{note}");
        assert_eq!(note["params"]["sessionId"], session, "{note}");
        assert_eq!(
            note["params"]["update"]["sessionUpdate"], "available_commands_update",
            "{note}"
        );
        note
    }

    /// Sends a text prompt; returns (updates, response) once it is answered.
    pub fn prompt(&mut self, session: &str, text: &str) -> (Vec<Value>, Value) {
        self.request(
            "session/prompt",
            json!({ "sessionId": session, "prompt": [{ "type": "text", "text": text }] }),
        )
    }

    /// Sends a text prompt without waiting; returns the request id.
    pub fn prompt_async(&mut self, session: &str, text: &str) -> Value {
        self.request_async(
            "session/prompt",
            json!({ "sessionId": session, "prompt": [{ "type": "text", "text": text }] }),
        )
    }

    /// Closes stdin and waits for the process to exit, returning its status.
    pub fn finish(mut self) -> std::process::ExitStatus {
        drop(self.stdin.take());
        let deadline = Instant::now() + TIMEOUT;
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                // Drain anything left so it is validated too.
                while self.recv_timeout(Duration::from_millis(10)).is_some() {}
                return status;
            }
            assert!(
                Instant::now() < deadline,
                "pincer did not exit after stdin closed; stderr:\n{}",
                self.stderr()
            );
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

impl Drop for AcpProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn uuid_like() -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    format!(
        "{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    )
}

/// Panics unless `response` is an error with `code` whose message contains `fragment`.
pub fn assert_error(response: &Value, code: i64, fragment: &str) {
    assert_eq!(response["error"]["code"], code, "{response}");
    let message = response["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains(fragment),
        "expected {fragment:?} in {response}"
    );
}

/// Text of the `agent_message_chunk` updates among `messages`, concatenated.
pub fn agent_text(messages: &[Value]) -> String {
    chunks(messages, "agent_message_chunk")
}

pub fn chunks(messages: &[Value], kind: &str) -> String {
    messages
        .iter()
        .filter(|m| {
            m["method"] == "session/update" && m["params"]["update"]["sessionUpdate"] == kind
        })
        .map(|m| {
            m["params"]["update"]["content"]["text"]
                .as_str()
                .unwrap_or_default()
                .to_owned()
        })
        .collect()
}

/// A long first prompt (12.5 KB of log lines) for [`overflow_then_loop_script`].
pub fn long_log() -> String {
    "FIRST LOG: ".to_owned() + &"line of a long build log\n".repeat(500)
}

/// The scripted model of the overflow and loop-guard tests of every face,
/// with `a.txt` in the workspace. The scripted model plays its turns by the
/// assistant turns a request holds, so: the first prompt ([`long_log`]) is
/// answered "Noted."; the second prompt's turn is refused as too long, the
/// summary request (fitted into half of what was refused, which leaves the
/// long prompt out) gets the first turn again, and the turn sent once more
/// answers "Done."; a third prompt gets four identical `read_file` calls,
/// and "never reached" must not be.
pub fn overflow_then_loop_script(dir: &TestDir) -> PathBuf {
    std::fs::write(dir.workspace().join("a.txt"), "same every time").unwrap();
    let read = json!([{"tool_call": {"name": "read_file", "arguments": {"path": "a.txt"}}}]);
    dir.script(
        "s.jsonl",
        &[
            json!([{"text": "Noted."}]),
            json!([{"error": {"kind": "context_length", "message": "prompt is too long: 250000 tokens > 200000 maximum"}}]),
            json!([{"text": "Done."}]),
            read.clone(),
            read.clone(),
            read.clone(),
            read,
            json!([{"text": "never reached"}]),
        ],
    )
}

/// The events of one type among `pincer run --output jsonl` lines.
pub fn of_type<'a>(lines: &'a [Value], kind: &str) -> Vec<&'a Value> {
    lines.iter().filter(|l| l["type"] == kind).collect()
}

/// Stops `pid` (`SIGSTOP`) at a moment it holds no write lock on the
/// database: stopped, then checked with a write transaction of our own, and
/// let go and stopped again a moment later when the lock is held.
pub fn stop_outside_a_write(dir: &TestDir, pid: i32) {
    // The process's state letter: `T` stopped, `Z` ended (not yet reaped).
    let state = || {
        std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .ok()
            .and_then(|stat| {
                stat.rsplit(')')
                    .next()
                    .and_then(|rest| rest.trim_start().chars().next())
            })
            .unwrap_or('X')
    };
    for _ in 0..100 {
        assert_eq!(unsafe { libc::kill(pid, libc::SIGSTOP) }, 0);
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        loop {
            match state() {
                'T' => break,
                'Z' | 'X' => panic!("process {pid} ended before it could be stopped"),
                _ => {}
            }
            assert!(
                std::time::Instant::now() < deadline,
                "process {pid} did not stop within 10 s"
            );
            std::thread::sleep(std::time::Duration::from_millis(2));
        }
        let db = rusqlite::Connection::open(dir.data_dir().join("pincer.db")).unwrap();
        if db.execute_batch("BEGIN IMMEDIATE; ROLLBACK;").is_ok() {
            return;
        }
        drop(db);
        assert_eq!(unsafe { libc::kill(pid, libc::SIGCONT) }, 0);
        std::thread::sleep(std::time::Duration::from_millis(17));
    }
    panic!("the process held the database's write lock at every stop");
}

/// Whether Landlock confines commands here. Without it a test checks only what
/// holds without it, and says so (`without` names what goes unchecked); with
/// `PINCER_TEST_REQUIRE_LANDLOCK=1` (as `.ci/run` sets) a kernel without it
/// fails the test instead, so the sandbox's tests cannot pass by skipping.
pub fn landlock(without: &str) -> bool {
    let status = pincer::sandbox::status();
    if !status.enforced {
        assert!(
            std::env::var_os("PINCER_TEST_REQUIRE_LANDLOCK").is_none_or(|v| v != "1"),
            "PINCER_TEST_REQUIRE_LANDLOCK=1 but Landlock is not available: {}",
            status.detail
        );
        eprintln!("Landlock is not available ({}): {without}", status.detail);
    }
    status.enforced
}

/// `../shared/third_party/agent-skills` beside the repository (the Agent
/// Skills specification, six real skills and a marketplace file), or `None`
/// on a plain clone without it, where the tests that read it say so and
/// skip; under `CI=true` a missing snapshot fails them instead.
pub fn agent_skills() -> Option<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/third_party/agent-skills");
    if dir.join("anthropic-skills").is_dir() {
        return Some(dir.canonicalize().unwrap());
    }
    assert!(
        std::env::var_os("CI").is_none_or(|v| v != "true"),
        "CI=true but {} is missing",
        dir.display()
    );
    eprintln!("{} is missing: skipped", dir.display());
    None
}

/// Copies a folder tree (files written afresh, so the copy is writable even
/// when the source is read-only), for tests that edit copies of fixtures.
pub fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_tree(&entry.path(), &target);
        } else {
            std::fs::write(&target, std::fs::read(entry.path()).unwrap()).unwrap();
        }
    }
}

/// A real PostgreSQL server (`src/testing/postgres.rs`, shared with the
/// library's unit tests).
#[path = "../../../src/testing/postgres.rs"]
pub mod postgres;

/// A loopback port free a moment ago.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A name no other call in this process got (nanoseconds since the epoch).
pub fn unique() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos()
}
