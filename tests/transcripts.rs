//! ACP transcripts an editor sees, as insta snapshots (`tests/snapshots/`):
//! the slash commands advertised after `session/new`, a plan kept with the
//! `todo` tool, and a shell call run in the client's terminal. Ids, paths and
//! timestamps are replaced by placeholders; everything else is the wire.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::io::Read;
use std::process::{Command, Stdio};

use common::{AcpProcess, TestDir};
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
}

/// Plays the client's side of `terminal/*` for real: runs what the agent asks
/// for as a child process and reports its output and exit.
struct FakeTerminals {
    next: u32,
    running: Vec<(String, std::process::Child)>,
    done: Vec<(String, String, Option<i32>)>,
    created: Vec<Value>,
}

impl FakeTerminals {
    fn new() -> Self {
        Self {
            next: 1,
            running: Vec::new(),
            done: Vec::new(),
            created: Vec::new(),
        }
    }

    fn finish(&mut self, id: &str) -> (String, Option<i32>) {
        if let Some(index) = self.running.iter().position(|(t, _)| t == id) {
            let (_, mut child) = self.running.remove(index);
            let mut output = String::new();
            child
                .stdout
                .take()
                .unwrap()
                .read_to_string(&mut output)
                .unwrap();
            let status = child.wait().unwrap();
            self.done.push((id.to_owned(), output, status.code()));
        }
        let (_, output, code) = self.done.iter().find(|(t, _, _)| t == id).unwrap();
        (output.clone(), *code)
    }

    /// Answers one request from the agent.
    fn answer(&mut self, acp: &mut AcpProcess, request: &Value) {
        let params = &request["params"];
        let result = match request["method"].as_str().unwrap() {
            "terminal/create" => {
                self.created.push(params.clone());
                let id = format!("term-{}", self.next);
                self.next += 1;
                let args: Vec<String> = params["args"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|a| a.as_str().unwrap().to_owned())
                    .collect();
                // Stdout and stderr into one pipe, as a terminal shows them.
                let (reader, writer) = std::io::pipe().unwrap();
                let child = Command::new(params["command"].as_str().unwrap())
                    .args(&args)
                    .current_dir(params["cwd"].as_str().unwrap())
                    .stdin(Stdio::null())
                    .stdout(writer.try_clone().unwrap())
                    .stderr(writer)
                    .spawn()
                    .unwrap();
                let mut child = child;
                // The pipe's read end stands in for the child's stdout.
                child.stdout = Some(unsafe_stdout(reader));
                self.running.push((id.clone(), child));
                json!({"terminalId": id})
            }
            "terminal/wait_for_exit" => {
                let (_, code) = self.finish(params["terminalId"].as_str().unwrap());
                json!({"exitCode": code, "signal": null})
            }
            "terminal/output" => {
                let (output, code) = self.finish(params["terminalId"].as_str().unwrap());
                json!({"output": output, "truncated": false, "exitStatus": {"exitCode": code, "signal": null}})
            }
            "terminal/release" | "terminal/kill" => json!({}),
            other => panic!("unexpected request {other}"),
        };
        acp.send(&json!({"jsonrpc": "2.0", "id": request["id"], "result": result}));
    }
}

/// A pipe's read end as a `ChildStdout` (both are plain file descriptors).
fn unsafe_stdout(reader: std::io::PipeReader) -> std::process::ChildStdout {
    std::process::ChildStdout::from(std::os::fd::OwnedFd::from(reader))
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
    let mut transcript = Vec::new();
    let response = loop {
        let message = acp.recv();
        if message.get("method").is_some() && message.get("id").is_some() {
            transcript.push(message.clone());
            terminals.answer(&mut acp, &message);
            continue;
        }
        if message.get("id") == Some(&id) {
            break message;
        }
        transcript.push(message);
    };
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    // The client ran `pincer sandbox-exec`, which ran the command.
    let created = &terminals.created[0];
    assert_eq!(created["command"], env!("CARGO_BIN_EXE_pincer"));
    assert_eq!(created["args"][0], "sandbox-exec");
    let (output, code) = terminals.finish("term-1");
    assert_eq!(output, "hello from the terminal\nsecond line\n");
    assert_eq!(code, Some(0));
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
