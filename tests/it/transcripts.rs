//! ACP transcripts an editor sees, as insta snapshots (`tests/it/snapshots/`):
//! the slash commands advertised after `session/new`, a plan kept with the
//! `todo` tool, and a shell call run in the client's terminal. Ids, paths and
//! timestamps are replaced by placeholders; everything else is the wire.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::Read;
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::support::{AcpProcess, TestDir};
use serde_json::{Value, json};

/// The transcript with what changes from run to run replaced.
fn normalize(messages: &[Value], dir: &TestDir) -> Value {
    let text = serde_json::to_string(messages).unwrap();
    let text = text.replace(&dir.path().display().to_string(), "[dir]");
    let text = text.replace(env!("CARGO_BIN_EXE_pincer"), "[pincer]");
    let rules = [
        (r"ses_[0-9a-f]{32}", "[session]"),
        (r"run_[0-9a-f]{32}", "[run]"),
        (r"apr_[0-9a-f]{32}", "[approval]"),
        (r"/tmp/pincer-exec-[^\x22\\]+\.json", "[spec]"),
        (r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", "[time]"),
        // A kernel without Landlock adds this note; the transcript is the same otherwise.
        (r"\\n\[not sandboxed: [^\]]*\]", ""),
    ];
    let mut text = text;
    for (pattern, placeholder) in rules {
        text = regex::Regex::new(pattern)
            .unwrap()
            .replace_all(&text, placeholder)
            .into_owned();
    }
    serde_json::from_str(&text).unwrap()
}

#[test]
fn slash_commands_are_advertised_after_session_new() {
    let dir = TestDir::new();
    let mut acp = AcpProcess::spawn(&dir, &[]);
    acp.initialize();
    let (notes, response) = acp.request(
        "session/new",
        json!({"cwd": dir.workspace(), "mcpServers": []}),
    );
    assert!(
        notes.is_empty(),
        "nothing may come before the response: {notes:?}"
    );
    let session = response["result"]["sessionId"].as_str().unwrap().to_owned();
    let commands = acp.expect_commands(&session);
    insta::assert_json_snapshot!("commands_after_session_new", normalize(&[commands], &dir));
}

#[test]
fn a_plan_is_sent_whole_each_time_the_model_updates_its_task_list() {
    let dir = TestDir::new();
    let script = dir.script(
        "plan.jsonl",
        &[
            json!([{"tool_call": {"name": "todo", "arguments": {"todos": [
                {"content": "Read the failing test", "status": "in_progress", "priority": "high"},
                {"content": "Fix the parser", "status": "pending"},
                {"content": "Run the tests", "status": "pending", "priority": "low"}
            ]}}}]),
            json!([{"tool_call": {"name": "todo", "arguments": {"todos": [
                {"content": "Read the failing test", "status": "completed", "priority": "high"},
                {"content": "Fix the parser", "status": "in_progress"},
                {"content": "Run the tests", "status": "pending", "priority": "low"}
            ]}}}]),
            json!([{"text": "Working on the parser."}]),
        ],
    );
    let mut acp = AcpProcess::spawn(&dir, &["--script", script.to_str().unwrap()]);
    acp.initialize();
    let session = acp.new_session(&dir.workspace());
    let (notes, response) = acp.prompt(&session, "fix the parser bug");
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    let plans: Vec<&Value> = notes
        .iter()
        .filter(|n| n["params"]["update"]["sessionUpdate"] == "plan")
        .collect();
    assert_eq!(plans.len(), 2, "one plan per todo call: {notes:?}");
    assert_eq!(
        plans[1]["params"]["update"]["entries"][0]["status"],
        "completed"
    );
    insta::assert_json_snapshot!("plan_from_todo_calls", normalize(&notes, &dir));
    let last_plan = plans[1]["params"]["update"].clone();
    assert!(acp.finish().success());

    // A client that loads the session later sees the plan as it was left.
    let mut acp = AcpProcess::spawn(&dir, &["--script", script.to_str().unwrap()]);
    acp.initialize();
    let (notes, response) = acp.request(
        "session/load",
        json!({"sessionId": session, "cwd": dir.workspace(), "mcpServers": []}),
    );
    assert!(response.get("result").is_some(), "{response}");
    let replayed: Vec<&Value> = notes
        .iter()
        .map(|n| &n["params"]["update"])
        .filter(|u| u["sessionUpdate"] == "plan")
        .collect();
    assert_eq!(replayed, vec![&last_plan]);
}

/// Plays the client's side of `terminal/*` for real: runs what the agent asks
/// for as a child process, collects its output, answers `wait_for_exit` when
/// it exits, kills it on `terminal/kill`.
struct FakeTerminals {
    next: u32,
    terminals: Vec<Terminal>,
    /// `wait_for_exit` requests not answered yet: (request id, terminal id).
    waits: Vec<(Value, String)>,
    created: Vec<Value>,
    killed: Vec<String>,
}

struct Terminal {
    id: String,
    child: std::process::Child,
    output: Arc<Mutex<String>>,
    reader: Option<std::thread::JoinHandle<()>>,
    exit: Option<Option<i32>>,
}

impl FakeTerminals {
    fn new() -> Self {
        Self {
            next: 1,
            terminals: Vec::new(),
            waits: Vec::new(),
            created: Vec::new(),
            killed: Vec::new(),
        }
    }

    fn terminal(&mut self, id: &str) -> &mut Terminal {
        self.terminals.iter_mut().find(|t| t.id == id).unwrap()
    }

    /// The exit status once the child is gone and its output read.
    fn exited(&mut self, id: &str) -> Option<Option<i32>> {
        let terminal = self.terminal(id);
        if terminal.exit.is_none()
            && let Some(status) = terminal.child.try_wait().unwrap()
        {
            terminal.reader.take().unwrap().join().unwrap();
            terminal.exit = Some(status.code());
        }
        terminal.exit
    }

    /// Answers the waits whose command has exited.
    fn poll(&mut self, acp: &mut AcpProcess) {
        let waits = std::mem::take(&mut self.waits);
        for (request, id) in waits {
            match self.exited(&id) {
                Some(code) => acp.send(&json!({"jsonrpc": "2.0", "id": request,
                    "result": {"exitCode": code, "signal": null}})),
                None => self.waits.push((request, id)),
            }
        }
    }

    /// Answers one request from the agent (`wait_for_exit` once the command ends).
    fn answer(&mut self, acp: &mut AcpProcess, request: &Value) {
        let params = &request["params"];
        let result = match request["method"].as_str().unwrap() {
            "terminal/create" => {
                self.created.push(params.clone());
                let id = format!("term-{}", self.next);
                self.next += 1;
                let args: Vec<&str> = params["args"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|a| a.as_str().unwrap())
                    .collect();
                // Stdout and stderr into one pipe, as a terminal shows them.
                let (mut reader, writer) = std::io::pipe().unwrap();
                let child = Command::new(params["command"].as_str().unwrap())
                    .args(&args)
                    .current_dir(params["cwd"].as_str().unwrap())
                    .stdin(Stdio::null())
                    .stdout(writer.try_clone().unwrap())
                    .stderr(writer)
                    .spawn()
                    .unwrap();
                let output = Arc::new(Mutex::new(String::new()));
                let sink = output.clone();
                let reader = std::thread::spawn(move || {
                    let mut text = String::new();
                    reader.read_to_string(&mut text).unwrap();
                    sink.lock().unwrap().push_str(&text);
                });
                self.terminals.push(Terminal {
                    id: id.clone(),
                    child,
                    output,
                    reader: Some(reader),
                    exit: None,
                });
                json!({"terminalId": id})
            }
            "terminal/wait_for_exit" => {
                let id = params["terminalId"].as_str().unwrap().to_owned();
                self.waits.push((request["id"].clone(), id));
                self.poll(acp);
                return;
            }
            "terminal/output" => {
                let id = params["terminalId"].as_str().unwrap();
                let code = self.exited(id);
                let output = self.terminal(id).output.lock().unwrap().clone();
                let status = code.map(|code| json!({"exitCode": code, "signal": null}));
                json!({"output": output, "truncated": false, "exitStatus": status})
            }
            "terminal/kill" => {
                let id = params["terminalId"].as_str().unwrap().to_owned();
                self.terminal(&id).child.kill().unwrap();
                // Wait for it, as a client's kill does before answering.
                while self.exited(&id).is_none() {
                    std::thread::sleep(Duration::from_millis(10));
                }
                self.killed.push(id);
                json!({})
            }
            "terminal/release" => json!({}),
            other => panic!("unexpected request {other}"),
        };
        acp.send(&json!({"jsonrpc": "2.0", "id": request["id"], "result": result}));
    }

    /// Reads until the response to `id`, answering terminal requests on the
    /// way; returns every other message and the requests, in order.
    fn until_response(&mut self, acp: &mut AcpProcess, id: &Value) -> (Vec<Value>, Value) {
        let mut transcript = Vec::new();
        let deadline = std::time::Instant::now() + Duration::from_secs(60);
        loop {
            assert!(std::time::Instant::now() < deadline, "no response to {id}");
            self.poll(acp);
            let Some(message) = acp.recv_timeout(Duration::from_millis(50)) else {
                continue;
            };
            if message.get("method").is_some() && message.get("id").is_some() {
                transcript.push(message.clone());
                self.answer(acp, &message);
                continue;
            }
            if message.get("id") == Some(id) {
                return (transcript, message);
            }
            transcript.push(message);
        }
    }
}

#[test]
fn a_shell_call_runs_in_the_clients_terminal_and_stays_embedded() {
    let dir = TestDir::new();
    let script = dir.script(
        "shell.jsonl",
        &[
            json!([{"tool_call": {"id": "call_1", "name": "shell", "arguments": {"command": "echo hello from the terminal; echo second line"}}}]),
            json!([{"text": "It printed two lines."}]),
        ],
    );
    let mut acp = AcpProcess::spawn(
        &dir,
        &["--script", script.to_str().unwrap(), "--mode", "full"],
    );
    acp.call(
        "initialize",
        json!({"protocolVersion": 1, "clientCapabilities": {"terminal": true}}),
    );
    let session = acp.new_session(&dir.workspace());
    let id = acp.prompt_async(&session, "say hello");
    let mut terminals = FakeTerminals::new();
    let (transcript, response) = terminals.until_response(&mut acp, &id);
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    // The client ran `pincer sandbox-exec`, which ran the command.
    let created = &terminals.created[0];
    assert_eq!(created["command"], env!("CARGO_BIN_EXE_pincer"));
    assert_eq!(created["args"][0], "sandbox-exec");
    assert_eq!(terminals.exited("term-1"), Some(Some(0)));
    assert_eq!(
        *terminals.terminal("term-1").output.lock().unwrap(),
        "hello from the terminal\nsecond line\n"
    );
    // The model read the terminal's output.
    let result = transcript
        .iter()
        .filter(|m| m["params"]["update"]["sessionUpdate"] == "tool_call_update")
        .find(|m| m["params"]["update"]["status"] == "completed")
        .unwrap();
    let content = result["params"]["update"]["content"].as_array().unwrap();
    assert_eq!(
        content[0],
        json!({"type": "terminal", "terminalId": "term-1"})
    );
    assert!(
        content[1]["content"]["text"]
            .as_str()
            .unwrap()
            .contains("hello from the terminal\nsecond line\n[exit code 0]"),
        "{content:?}"
    );
    // Our requests to the client and the session's updates travel
    // independently (a tool's request does not wait for the event forwarder),
    // so each is a transcript of its own, in its own order.
    let (requests, updates): (Vec<Value>, Vec<Value>) =
        transcript.into_iter().partition(|m| m.get("id").is_some());
    insta::assert_json_snapshot!(
        "shell_call_in_client_terminal",
        json!({
            "client_requests": normalize(&requests, &dir),
            "session_updates": normalize(&updates, &dir),
        })
    );
}

#[test]
fn a_cancel_kills_the_command_in_the_clients_terminal() {
    let dir = TestDir::new();
    let script = dir.script(
        "shell.jsonl",
        &[json!([{"tool_call": {"id": "call_1", "name": "shell", "arguments": {"command": "sleep 30.4242"}}}])],
    );
    let mut acp = AcpProcess::spawn(
        &dir,
        &["--script", script.to_str().unwrap(), "--mode", "full"],
    );
    acp.call(
        "initialize",
        json!({"protocolVersion": 1, "clientCapabilities": {"terminal": true}}),
    );
    let session = acp.new_session(&dir.workspace());
    let id = acp.prompt_async(&session, "sleep");
    let mut terminals = FakeTerminals::new();
    // Until Pincer waits for the command's exit, and the command has started.
    loop {
        let message = acp.recv();
        if message.get("method").is_some() && message.get("id").is_some() {
            terminals.answer(&mut acp, &message);
        }
        if message["method"] == "terminal/wait_for_exit" {
            break;
        }
    }
    std::thread::sleep(Duration::from_millis(300));
    let started = std::time::Instant::now();
    acp.notify("session/cancel", json!({"sessionId": session}));
    let (transcript, response) = terminals.until_response(&mut acp, &id);
    assert_eq!(response["result"]["stopReason"], "cancelled", "{response}");
    assert!(started.elapsed() < Duration::from_secs(10));
    assert_eq!(terminals.killed, vec!["term-1".to_owned()]);
    let methods: Vec<&str> = transcript
        .iter()
        .filter(|m| m.get("id").is_some())
        .map(|m| m["method"].as_str().unwrap())
        .collect();
    assert_eq!(
        methods,
        vec!["terminal/kill", "terminal/output", "terminal/release"]
    );
    // The killed wrapper took its command down with it.
    assert_ne!(terminals.exited("term-1"), Some(Some(0)));
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    loop {
        let found = Command::new("pgrep")
            .args(["-f", "sleep 30.4242"])
            .output()
            .unwrap();
        if !found.status.success() {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the command outlived its terminal: {}",
            String::from_utf8_lossy(&found.stdout)
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(acp.finish().success());
}
