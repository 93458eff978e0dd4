//! MCP servers through the real binary: real servers (the reference
//! `server-everything` and a fixture on the official TypeScript SDK) started
//! over stdio and streamable HTTP on loopback, their tools called through the
//! policy gate, crashes, servers that fail to start, tool-list changes and
//! cancellation. The servers come from `tests/fixtures/mcp` (installed by
//! `bash scripts/test-deps.sh`).

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use crate::support::{AcpProcess, TestDir, agent_text};
use pretty_assertions::assert_eq;
use serde_json::{Value, json};

/// The fixture directory, with its npm packages installed; fails (never
/// skips) when they are missing.
pub fn fixtures() -> PathBuf {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/mcp");
    for package in [
        "@modelcontextprotocol/sdk",
        "@modelcontextprotocol/server-everything",
    ] {
        assert!(
            dir.join("node_modules").join(package).is_dir(),
            "the MCP test servers are not installed ({package} is missing): run `bash scripts/test-deps.sh`"
        );
    }
    dir
}

pub fn node() -> String {
    let out = Command::new("sh")
        .args(["-c", "command -v node"])
        .output()
        .unwrap();
    let path = String::from_utf8(out.stdout).unwrap().trim().to_owned();
    assert!(
        !path.is_empty(),
        "node is not installed: run `bash scripts/test-deps.sh`"
    );
    path
}

/// The fixture server over stdio, as an ACP `mcpServers` entry.
fn fixture_server(name: &str) -> Value {
    let script = fixtures().join("server.mjs");
    json!({"name": name, "command": node(), "args": [script, "stdio"], "env": [{"name": "FIXTURE_TOKEN", "value": "s3cret-value-123"}]})
}

fn everything_server() -> Value {
    let script =
        fixtures().join("node_modules/@modelcontextprotocol/server-everything/dist/index.js");
    json!({"name": "everything", "command": node(), "args": [script, "stdio"], "env": []})
}

fn call(name: &str, arguments: Value) -> Value {
    json!([{"tool_call": {"name": name, "arguments": arguments}}])
}

fn text(text: &str) -> Value {
    json!([{"text": text}])
}

/// `pincer acp` with a model script, initialized.
fn acp_with_script(dir: &TestDir, script: &[Value], extra: &[&str]) -> AcpProcess {
    let script = dir.script("s.jsonl", script);
    let mut args = vec!["--script", script.to_str().unwrap()];
    args.extend_from_slice(extra);
    let mut acp = AcpProcess::spawn(dir, &args);
    acp.initialize();
    acp
}

fn new_session(acp: &mut AcpProcess, dir: &TestDir, servers: Value) -> String {
    let result = acp.call(
        "session/new",
        json!({"cwd": dir.workspace(), "mcpServers": servers}),
    );
    result["sessionId"].as_str().unwrap().to_owned()
}

fn updates<'a>(notes: &'a [Value], kind: &str) -> Vec<&'a Value> {
    notes
        .iter()
        .filter(|n| {
            n["method"] == "session/update" && n["params"]["update"]["sessionUpdate"] == kind
        })
        .map(|n| &n["params"]["update"])
        .collect()
}

/// The final update of each tool call: (status, text of its content).
fn tool_results(notes: &[Value]) -> Vec<(String, String)> {
    updates(notes, "tool_call_update")
        .into_iter()
        .filter(|u| u["status"] == "completed" || u["status"] == "failed")
        .map(|u| {
            (
                u["status"].as_str().unwrap().to_owned(),
                u["content"][0]["content"]["text"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned(),
            )
        })
        .collect()
}

fn wait_for(acp: &mut AcpProcess, mut pick: impl FnMut(&Value) -> bool) -> Value {
    loop {
        let message = acp
            .recv_timeout(Duration::from_secs(20))
            .unwrap_or_else(|| panic!("timed out; stderr:\n{}", acp.stderr()));
        if pick(&message) {
            return message;
        }
    }
}

/// The tape of the session's last run, through the extension method.
fn last_tape(acp: &mut AcpProcess, session: &str) -> Vec<Value> {
    let runs = acp.call("_pincer/runs/list", json!({"sessionId": session}));
    let run = runs["runs"].as_array().unwrap().last().unwrap()["runId"]
        .as_str()
        .unwrap()
        .to_owned();
    let tape = acp.call("_pincer/runs/tape", json!({"runId": run}));
    tape["events"].as_array().unwrap().clone()
}

fn tape_events<'a>(tape: &'a [Value], kind: &str) -> Vec<&'a Value> {
    tape.iter().filter(|e| e["type"] == kind).collect()
}

#[test]
fn stdio_reference_server_tools_are_namespaced_and_a_read_only_call_runs() {
    let dir = TestDir::new();
    let mut acp = acp_with_script(
        &dir,
        &[
            call("no_such_tool", json!({})),
            call("everything__echo", json!({"message": "hi"})),
            text("done"),
        ],
        &[],
    );
    let session = new_session(&mut acp, &dir, json!([everything_server()]));
    let (notes, response) = acp.prompt(&session, "go");
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    let results = tool_results(&notes);
    assert_eq!(results.len(), 2, "{results:?}");
    // The unknown-tool answer lists what the model was offered: built-in
    // tools and the server's, namespaced.
    let (status, offered) = &results[0];
    assert_eq!(status, "failed");
    for name in [
        "read_file",
        "everything__echo",
        "everything__get-sum",
        "everything__trigger-long-running-operation",
    ] {
        assert!(offered.contains(name), "{name} not in {offered}");
    }
    assert_eq!(results[1], ("completed".to_owned(), "Echo: hi".to_owned()));
    // Read-only by its annotations: no approval asked, kind `read`.
    assert!(
        !notes
            .iter()
            .any(|n| n["method"] == "session/request_permission")
    );
    let call = updates(&notes, "tool_call")
        .into_iter()
        .find(|u| u["title"] == "everything__echo")
        .expect("the echo call");
    assert_eq!(call["kind"], "read");
    let planned = updates(&notes, "tool_call_update")
        .into_iter()
        .find(|u| u["toolCallId"] == call["toolCallId"] && u["title"].is_string())
        .expect("the planned title");
    assert_eq!(planned["title"], "MCP everything: echo");
    // The result reached the model's history and has its receipt.
    let tape = last_tape(&mut acp, &session);
    let result = tape_events(&tape, "tool_result")
        .into_iter()
        .find(|e| e["id"] == call["toolCallId"])
        .unwrap();
    assert_eq!(result["output"], "Echo: hi");
    assert_eq!(result["verdict"], "allowed");
    assert!(acp.finish().success());
    let verify = dir.command().arg("verify").output().unwrap();
    assert!(
        verify.status.success(),
        "{}",
        String::from_utf8_lossy(&verify.stderr)
    );
    let shown = dir.show_session(&session);
    let history = shown["history"].to_string();
    assert!(history.contains("Echo: hi"), "{history}");
}

/// The fixture serving streamable HTTP on a free loopback port; killed on drop.
struct HttpFixture {
    child: Child,
    url: String,
}

impl HttpFixture {
    fn start(dir: &TestDir) -> Self {
        let port_file = dir.path().join("port");
        let child = Command::new(node())
            .arg(fixtures().join("server.mjs"))
            .args(["http", port_file.to_str().unwrap(), "s3cret-header-456"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let deadline = Instant::now() + Duration::from_secs(20);
        let port = loop {
            if let Ok(port) = std::fs::read_to_string(&port_file)
                && !port.is_empty()
            {
                break port;
            }
            assert!(Instant::now() < deadline, "the HTTP fixture did not start");
            std::thread::sleep(Duration::from_millis(50));
        };
        Self {
            child,
            url: format!("http://127.0.0.1:{port}/mcp"),
        }
    }
}

impl Drop for HttpFixture {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn streamable_http_server_on_loopback() {
    let dir = TestDir::new();
    let server = HttpFixture::start(&dir);
    let mut acp = acp_with_script(
        &dir,
        &[
            call("remote__pid", json!({})),
            call("remote__fail", json!({})),
            text("done"),
        ],
        &[],
    );
    let init = acp.initialize();
    assert_eq!(
        init["agentCapabilities"]["mcpCapabilities"],
        json!({"http": true, "sse": false})
    );
    let servers = json!([{"type": "http", "name": "remote", "url": server.url, "headers": [{"name": "Authorization", "value": "Bearer s3cret-header-456"}]}]);
    let session = new_session(&mut acp, &dir, servers);
    let (notes, response) = acp.prompt(&session, "go");
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    let results = tool_results(&notes);
    assert_eq!(results.len(), 2, "{results:?}");
    assert_eq!(results[0].0, "completed", "{results:?}");
    let pid: u32 = results[0].1.strip_prefix("pid ").unwrap().parse().unwrap();
    assert_eq!(pid, server.child.id());
    // `isError: true` is a tool error.
    assert_eq!(
        results[1],
        ("failed".to_owned(), "it went wrong".to_owned())
    );
    assert!(acp.finish().success());
    // The header was sent (the fixture answers 401 without it) and its value
    // is not stored with the session.
    let shown = dir.show_session(&session);
    assert_eq!(
        shown["session"]["mcp_servers"][0]["headers"],
        json!([{"name": "Authorization", "value": "[redacted]"}])
    );
    assert!(!shown.to_string().contains("s3cret-header-456"));
}

#[test]
fn an_http_server_that_refuses_the_credentials_is_reported() {
    let dir = TestDir::new();
    let server = HttpFixture::start(&dir);
    let mut acp = acp_with_script(&dir, &[text("still here")], &[]);
    let servers = json!([{"type": "http", "name": "remote", "url": server.url, "headers": [{"name": "Authorization", "value": "Bearer wrong"}]}]);
    let session = new_session(&mut acp, &dir, servers);
    let (notes, response) = acp.prompt(&session, "go");
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    let shown = agent_text(&notes);
    assert!(
        shown.starts_with("[pincer] MCP server `remote` failed to start: "),
        "{shown}"
    );
    assert!(shown.contains("401"), "{shown}");
    assert!(shown.ends_with("still here"), "{shown}");
    assert!(!acp.stderr().contains("Bearer wrong"));
    acp.finish();
}

#[test]
fn an_sse_server_is_refused_with_a_clear_message() {
    let dir = TestDir::new();
    let mut acp = acp_with_script(&dir, &[text("x")], &[]);
    let (_, response) = acp.request(
        "session/new",
        json!({"cwd": dir.workspace(), "mcpServers": [{"type": "sse", "name": "old", "url": "http://127.0.0.1:9/sse", "headers": []}]}),
    );
    crate::support::assert_error(&response, -32602, "uses the SSE transport");
    acp.finish();
}

/// Replaces what differs between runs (ids, paths, pids) so the transcript
/// can be compared with its snapshot.
#[allow(
    clippy::wildcard_enum_match_arm,
    reason = "serde_json's Value: scalars stay as they are"
)]
fn normalize(value: &Value, ws: &str, session: &str) -> Value {
    match value {
        Value::String(s) => {
            let mut s = s.replace(ws, "[ws]").replace(session, "[session]");
            if let Some(at) = s.find("apr_") {
                let end = s[at..]
                    .find(|c: char| !c.is_ascii_alphanumeric() && c != '_')
                    .map_or(s.len(), |e| at + e);
                s.replace_range(at..end, "[approval id]");
            }
            Value::String(s)
        }
        Value::Array(items) => {
            Value::Array(items.iter().map(|v| normalize(v, ws, session)).collect())
        }
        Value::Object(map) => Value::Object(
            map.iter()
                .map(|(k, v)| {
                    let v = if k == "id" && v.is_number() {
                        json!("[id]")
                    } else {
                        normalize(v, ws, session)
                    };
                    (k.clone(), v)
                })
                .collect(),
        ),
        other => other.clone(),
    }
}

#[test]
fn an_mcp_call_that_changes_things_needs_approval() {
    let dir = TestDir::new();
    let ws = dir.workspace();
    let rejected = ws.join("rejected.txt");
    let allowed = ws.join("allowed.txt");
    let mut acp = acp_with_script(
        &dir,
        &[
            call(
                "fixture__write_note",
                json!({"path": rejected, "text": "no"}),
            ),
            text("ok, not written"),
            call(
                "fixture__write_note",
                json!({"path": allowed, "text": "yes"}),
            ),
            text("written"),
        ],
        &[],
    );
    let session = new_session(&mut acp, &dir, json!([fixture_server("fixture")]));

    // Rejected: the server never sees the call.
    let prompt = acp.prompt_async(&session, "write one");
    let request = wait_for(&mut acp, |m| m["method"] == "session/request_permission");
    acp.send(&json!({"jsonrpc": "2.0", "id": request["id"], "result": {"outcome": {"outcome": "selected", "optionId": "reject_once"}}}));
    let (notes, response) = acp.until_response(&prompt);
    assert_eq!(response["result"]["stopReason"], "end_turn");
    assert_eq!(tool_results(&notes)[0].0, "failed");
    assert!(!rejected.exists());
    let tape = last_tape(&mut acp, &session);
    assert_eq!(tape_events(&tape, "tool_result")[0]["verdict"], "rejected");

    // Allowed: the transcript, from the prompt to its answer, is the snapshot.
    let first = acp.received.len();
    let prompt = acp.prompt_async(&session, "write another");
    let request = wait_for(&mut acp, |m| m["method"] == "session/request_permission");
    assert_eq!(request["params"]["toolCall"]["kind"], "other");
    assert_eq!(
        request["params"]["toolCall"]["rawInput"],
        json!({"path": allowed, "text": "yes"})
    );
    acp.send(&json!({"jsonrpc": "2.0", "id": request["id"], "result": {"outcome": {"outcome": "selected", "optionId": "allow_once"}}}));
    let (_, response) = acp.until_response(&prompt);
    assert_eq!(response["result"]["stopReason"], "end_turn");
    assert_eq!(std::fs::read_to_string(&allowed).unwrap(), "yes");
    let transcript: Vec<Value> = acp.received[first..]
        .iter()
        .map(|m| normalize(m, ws.to_str().unwrap(), &session))
        .collect();
    insta::assert_json_snapshot!("mcp_call_needing_approval", transcript);
    let tape = last_tape(&mut acp, &session);
    let result = tape_events(&tape, "tool_result")[0];
    assert_eq!(result["verdict"], "approved");
    assert_eq!(result["output"], "wrote 3 bytes");
    let approval = tape_events(&tape, "approval_requested")[0];
    assert_eq!(
        approval["reason"],
        "supervised mode: `fixture__write_note` may change things"
    );
    assert!(acp.finish().success());
}

#[test]
fn read_only_mode_refuses_mcp_tools_that_are_not_read_only() {
    let dir = TestDir::new();
    let ws = dir.workspace();
    let note = ws.join("note.txt");
    std::fs::write(&note, "keep me").unwrap();
    let mut acp = acp_with_script(
        &dir,
        &[
            call(
                "fixture__write_note",
                json!({"path": note, "text": "changed"}),
            ),
            call("fixture__delete_note", json!({"path": note})),
            call("fixture__pid", json!({})),
            text("done"),
        ],
        &[],
    );
    let session = new_session(&mut acp, &dir, json!([fixture_server("fixture")]));
    acp.call(
        "session/set_mode",
        json!({"sessionId": session, "modeId": "read_only"}),
    );
    let (notes, response) = acp.prompt(&session, "go");
    assert_eq!(response["result"]["stopReason"], "end_turn");
    let results = tool_results(&notes);
    assert_eq!(results.len(), 3, "{results:?}");
    assert_eq!(results[0].0, "failed");
    assert!(
        results[0].1.starts_with(
            "denied by policy: read_only mode: `fixture__write_note` may change things"
        ),
        "{results:?}"
    );
    assert_eq!(results[1].0, "failed");
    assert!(results[1].1.contains("(delete)"), "{results:?}");
    assert_eq!(results[2].0, "completed", "{results:?}");
    assert!(
        !notes
            .iter()
            .any(|n| n["method"] == "session/request_permission")
    );
    assert_eq!(std::fs::read_to_string(&note).unwrap(), "keep me");
    let kinds: Vec<&str> = updates(&notes, "tool_call")
        .iter()
        // ACP leaves out the default kind, `other`.
        .map(|u| u["kind"].as_str().unwrap_or("other"))
        .collect();
    assert_eq!(kinds, vec!["other", "delete", "read"]);
    acp.finish();
}

fn pid_of(result: &(String, String)) -> u32 {
    assert_eq!(result.0, "completed", "{result:?}");
    result.1.strip_prefix("pid ").unwrap().parse().unwrap()
}

#[test]
fn a_server_that_crashes_is_restarted_on_next_use() {
    let dir = TestDir::new();
    let mut acp = acp_with_script(
        &dir,
        &[
            call("fixture__pid", json!({})),
            call("fixture__crash", json!({})),
            call("fixture__pid", json!({})),
            text("done"),
        ],
        &[],
    );
    let session = new_session(&mut acp, &dir, json!([fixture_server("fixture")]));
    let (notes, response) = acp.prompt(&session, "go");
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    let results = tool_results(&notes);
    assert_eq!(results.len(), 3, "{results:?}");
    let before = pid_of(&results[0]);
    assert_eq!(
        results[1],
        (
            "failed".to_owned(),
            "MCP server `fixture` exited: exit status: 3".to_owned()
        )
    );
    let after = pid_of(&results[2]);
    assert_ne!(before, after, "the server was not restarted");
    // Its stderr went to Pincer's log, never to the protocol stream.
    let log = acp.stderr();
    assert!(log.contains("fixture: crashing on purpose"), "{log}");
    // Stopped with the session: the restarted process is gone once
    // session/close has answered.
    assert!(Path::new(&format!("/proc/{after}")).exists());
    acp.call("session/close", json!({"sessionId": session}));
    assert!(
        !Path::new(&format!("/proc/{after}")).exists(),
        "pid {after} still runs after session/close"
    );
    assert!(acp.finish().success());
}

#[test]
fn a_server_that_fails_to_start_is_reported_and_the_session_goes_on() {
    let dir = TestDir::new();
    std::fs::write(dir.workspace().join("a.txt"), "x").unwrap();
    let mut acp = acp_with_script(
        &dir,
        &[call("list_dir", json!({"path": "."})), text("listed")],
        &[],
    );
    let quits = json!({"name": "quits", "command": node(), "args": [fixtures().join("server.mjs"), "exit"], "env": []});
    let missing =
        json!({"name": "missing", "command": "/nonexistent/mcp-server", "args": [], "env": []});
    let session = new_session(
        &mut acp,
        &dir,
        json!([quits, missing, fixture_server("fixture")]),
    );
    let (notes, response) = acp.prompt(&session, "go");
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    let shown = agent_text(&notes);
    // Each failure is told once (the second model turn does not repeat it).
    assert_eq!(shown.matches("[pincer] MCP server").count(), 2, "{shown}");
    assert!(
        shown.contains("[pincer] MCP server `missing` failed to start: cannot run `/nonexistent/mcp-server`: No such file or directory"),
        "{shown}"
    );
    assert!(
        shown.contains("[pincer] MCP server `quits` failed to start: it exited during the handshake (exit status: 7); its last output: fixture: exiting on purpose"),
        "{shown}"
    );
    assert!(shown.ends_with("listed"), "{shown}");
    let results = tool_results(&notes);
    assert_eq!(results.len(), 1);
    assert_eq!(results[0].0, "completed");
    assert!(results[0].1.contains("a.txt"));
    // The notices are on the tape too (how headless and HTTP clients see them).
    let tape = last_tape(&mut acp, &session);
    assert_eq!(tape_events(&tape, "notice").len(), 2);
    acp.finish();
}

#[test]
fn tool_list_changes_apply_on_the_next_turn() {
    let dir = TestDir::new();
    let mut acp = acp_with_script(
        &dir,
        &[
            call("fixture__add_tool", json!({})),
            call("fixture__added", json!({})),
            text("done"),
        ],
        &[],
    );
    let session = new_session(&mut acp, &dir, json!([fixture_server("fixture")]));
    let (notes, response) = acp.prompt(&session, "go");
    assert_eq!(response["result"]["stopReason"], "end_turn");
    assert_eq!(
        tool_results(&notes),
        vec![
            ("completed".to_owned(), "added `added`".to_owned()),
            ("completed".to_owned(), "the added tool ran".to_owned()),
        ]
    );
    acp.finish();
}

#[test]
fn cancelling_a_long_call_tells_the_server() {
    let dir = TestDir::new();
    let marker = dir.path().join("cancelled-marker");
    let mut acp = acp_with_script(
        &dir,
        &[
            call("fixture__slow", json!({"seconds": 30, "marker": marker})),
            text("never"),
        ],
        &[],
    );
    let session = new_session(&mut acp, &dir, json!([fixture_server("fixture")]));
    let prompt = acp.prompt_async(&session, "go");
    wait_for(&mut acp, |m| {
        m["params"]["update"]["status"] == "in_progress"
    });
    // The editor sees the progress in the running call before the cancel.
    let progress = wait_for(&mut acp, |m| {
        let update = &m["params"]["update"];
        update["sessionUpdate"] == "tool_call_update"
            && update.get("status").is_none()
            && update["content"][0]["content"]["text"].is_string()
    });
    acp.notify("session/cancel", json!({"sessionId": session}));
    let started = Instant::now();
    let (notes, response) = acp.until_response(&prompt);
    assert_eq!(response["result"]["stopReason"], "cancelled");
    assert!(started.elapsed() < Duration::from_secs(10));
    assert_eq!(tool_results(&notes)[0].0, "failed");
    // The server was told (`notifications/cancelled`) and stopped the work.
    let deadline = Instant::now() + Duration::from_secs(10);
    while !marker.exists() {
        assert!(
            Instant::now() < deadline,
            "the server was not told about the cancel"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let log = acp.stderr();
    assert!(log.contains("progress: 1: step 1"), "{log}");
    let shown = progress["params"]["update"]["content"][0]["content"]["text"]
        .as_str()
        .unwrap();
    assert!(
        shown.starts_with("```\n[progress 1: step 1]\n"),
        "{shown:?}"
    );
    acp.finish();
}

fn run(dir: &TestDir, args: &[&str]) -> Output {
    dir.command()
        .args(args)
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

#[test]
fn configured_servers_serve_pincer_run_and_calls_time_out() {
    let dir = TestDir::new();
    let script = fixtures().join("server.mjs");
    let config = dir.path().join("config.toml");
    std::fs::write(
        &config,
        format!(
            "mcp_call_timeout_secs = 1\n[mcpServers.fixture]\ncommand = {:?}\nargs = [{:?}, \"stdio\"]\nenv = {{ FIXTURE_TOKEN = \"s3cret-config-789\" }}\n",
            node(),
            script.to_str().unwrap()
        ),
    )
    .unwrap();
    let marker = dir.path().join("timed-out-marker");
    let model = dir.script(
        "s.jsonl",
        &[
            call("fixture__pid", json!({})),
            call("fixture__slow", json!({"seconds": 30, "marker": marker})),
            text("done"),
        ],
    );
    let ws = dir.workspace();
    let out = run(
        &dir,
        &[
            "--config",
            config.to_str().unwrap(),
            "run",
            "--output",
            "jsonl",
            "--cwd",
            ws.to_str().unwrap(),
            "--script",
            model.to_str().unwrap(),
            "go",
        ],
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let lines: Vec<Value> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let results: Vec<&Value> = lines
        .iter()
        .filter(|l| l["type"] == "tool_result")
        .collect();
    assert_eq!(results.len(), 2, "{lines:?}");
    assert!(
        results[0]["output"].as_str().unwrap().starts_with("pid "),
        "{}",
        results[0]
    );
    assert_eq!(results[1]["is_error"], true);
    assert_eq!(
        results[1]["output"],
        "MCP server `fixture` did not answer within 1 s"
    );
    // The server learns the call is over.
    let deadline = Instant::now() + Duration::from_secs(10);
    while !marker.exists() {
        assert!(
            Instant::now() < deadline,
            "the server was not told about the timeout"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(!stderr.contains("s3cret-config-789"), "{stderr}");
    // `config show` names the server but not the secret.
    let shown = run(
        &dir,
        &["--config", config.to_str().unwrap(), "config", "show"],
    );
    let shown = String::from_utf8_lossy(&shown.stdout);
    assert!(shown.contains("[mcpServers.fixture]"), "{shown}");
    assert!(!shown.contains("s3cret-config-789"), "{shown}");
}

#[test]
fn session_load_uses_the_servers_it_is_passed() {
    let dir = TestDir::new();
    let mut acp = acp_with_script(
        &dir,
        &[
            call("fixture__pid", json!({})),
            text("first"),
            call("fixture__pid", json!({})),
            text("second"),
            call("fixture__pid", json!({})),
            text("third"),
        ],
        &[],
    );
    let session = new_session(&mut acp, &dir, json!([fixture_server("fixture")]));
    let (notes, _) = acp.prompt(&session, "one");
    let first = pid_of(&tool_results(&notes)[0]);
    assert!(acp.finish().success());
    assert!(!Path::new(&format!("/proc/{first}")).exists());

    // After a restart, loaded with the server: it starts again.
    let script = dir.path().join("s.jsonl");
    let mut acp = AcpProcess::spawn(&dir, &["--script", script.to_str().unwrap()]);
    acp.initialize();
    acp.call(
        "session/load",
        json!({"sessionId": session, "cwd": dir.workspace(), "mcpServers": [fixture_server("fixture")]}),
    );
    let (notes, _) = acp.prompt(&session, "two");
    let second = pid_of(&tool_results(&notes)[0]);
    assert_ne!(first, second);

    // Resumed without it: the stored copy is not used, the tool is gone.
    acp.call(
        "session/resume",
        json!({"sessionId": session, "cwd": dir.workspace(), "mcpServers": []}),
    );
    let (notes, _) = acp.prompt(&session, "three");
    let results = tool_results(&notes);
    assert_eq!(results[0].0, "failed");
    assert!(
        results[0].1.starts_with("unknown tool `fixture__pid`"),
        "{results:?}"
    );
    // Replacing the servers stopped the old one.
    assert!(!Path::new(&format!("/proc/{second}")).exists());
    assert!(acp.finish().success());
}

#[test]
fn a_stdio_server_gets_a_minimal_environment_and_its_secrets_are_redacted() {
    let dir = TestDir::new();
    let everything =
        fixtures().join("node_modules/@modelcontextprotocol/server-everything/dist/index.js");
    let config = dir.path().join("config.toml");
    std::fs::write(
        &config,
        format!(
            "[mcpServers.everything]\ncommand = {:?}\nargs = [{:?}, \"stdio\"]\nenv = {{ SERVICE_KEY = \"s3cret-config-value-42\" }}\n",
            node(),
            everything.to_str().unwrap()
        ),
    )
    .unwrap();
    let model = dir.script(
        "s.jsonl",
        &[call("everything__get-env", json!({})), text("done")],
    );
    let ws = dir.workspace();
    let out = run(
        &dir,
        &[
            "--config",
            config.to_str().unwrap(),
            "run",
            "--output",
            "jsonl",
            "--cwd",
            ws.to_str().unwrap(),
            "--script",
            model.to_str().unwrap(),
            "go",
        ],
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let stdout = String::from_utf8(out.stdout).unwrap();
    let result: Value = stdout
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .find(|l| l["type"] == "tool_result")
        .unwrap();
    assert_eq!(result["is_error"], false, "{result}");
    let output = result["output"].as_str().unwrap();
    // Its own variable arrived (the value redacted on the way back), with
    // PATH and HOME; Pincer's own environment did not.
    assert!(output.contains("\"SERVICE_KEY\""), "{output}");
    assert!(
        output.contains("\"PATH\"") && output.contains("\"HOME\""),
        "{output}"
    );
    assert!(!output.contains("PINCER_DATA_DIR"), "{output}");
    assert!(!output.contains("XDG_CONFIG_HOME"), "{output}");
    assert!(!stdout.contains("s3cret-config-value-42"), "{stdout}");
    assert!(
        result["safety"].to_string().contains("redacted"),
        "{result}"
    );
}

#[test]
fn values_a_client_passes_to_its_server_are_redacted_from_what_the_server_returns() {
    let dir = TestDir::new();
    let mut acp = acp_with_script(
        &dir,
        &[call("everything__get-env", json!({})), text("done")],
        &[],
    );
    let script =
        fixtures().join("node_modules/@modelcontextprotocol/server-everything/dist/index.js");
    // A name no secret rule knows and a value of no known shape: only the
    // fact that the client handed it to the server marks it as a secret.
    let server = json!({"name": "everything", "command": node(), "args": [script, "stdio"],
        "env": [{"name": "PLAIN_SETTING", "value": "client-handed-value-9173"}]});
    let session = new_session(&mut acp, &dir, json!([server]));
    let (notes, response) = acp.prompt(&session, "show the environment");
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    let results = tool_results(&notes);
    assert_eq!(results.len(), 1, "{notes:?}");
    let (status, output) = &results[0];
    assert_eq!(status, "completed", "{output}");
    assert!(output.contains("PLAIN_SETTING"), "{output}");
    assert!(output.contains("[REDACTED:session]"), "{output}");
    let wire = serde_json::to_string(&acp.received).unwrap();
    assert!(!wire.contains("client-handed-value-9173"));
    let tape = serde_json::to_string(&last_tape(&mut acp, &session)).unwrap();
    assert!(!tape.contains("client-handed-value-9173"));
    assert!(acp.finish().success());
}
