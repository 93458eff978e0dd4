//! Every request Pincer sends a client, answered every way a client may
//! answer it: `null` (CodeCompanion.nvim answers `fs/write_text_file` so),
//! `{}`, an error, late, or never — with `session/cancel`, stdin closing and
//! SIGTERM in the middle. Whatever the client does, the prompt ends, the next
//! prompt works, the process exits, and no response of the client's is ever
//! answered.

use std::collections::HashSet;
use std::time::{Duration, Instant};

use crate::support::{AcpProcess, TIMEOUT, TestDir};
use pretty_assertions::assert_eq;
use serde_json::{Value, json};

/// How the client answers the requests under test.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Answer {
    /// `"result": null`.
    Null,
    /// `"result": {}`.
    Empty,
    /// A JSON-RPC error.
    Error,
    /// The right answer, after a while.
    Late,
    /// No answer at all.
    Never,
    /// The right answer at once.
    Right,
}

/// What is asked of the client in one process.
#[derive(Debug, Clone, Copy)]
struct Case {
    /// The methods that get the answer under test; others are answered right.
    targets: &'static [&'static str],
    /// A model turn that makes Pincer send them.
    call: fn(usize) -> Value,
    /// The client offers files, terminals; the session's mode.
    fs: bool,
    terminal: bool,
    mode: &'static str,
}

fn read_call(_: usize) -> Value {
    json!([{"tool_call": {"name": "read_file", "arguments": {"path": "a.txt"}}}])
}

/// Each write different, so none is a no-op.
fn write_call(turn: usize) -> Value {
    json!([{"tool_call": {"name": "write_file", "arguments": {"path": "b.txt", "content": format!("new {turn}\n")}}}])
}

fn shell_call(_: usize) -> Value {
    json!([{"tool_call": {"name": "shell", "arguments": {"command": "echo hi"}}}])
}

const READ: Case = Case {
    targets: &["fs/read_text_file"],
    call: read_call,
    fs: true,
    terminal: false,
    mode: "full",
};

const WRITE: Case = Case {
    targets: &["fs/write_text_file"],
    call: write_call,
    fs: true,
    terminal: false,
    mode: "full",
};

const PERMISSION: Case = Case {
    targets: &["session/request_permission"],
    call: write_call,
    fs: false,
    terminal: false,
    mode: "supervised",
};

fn terminal(targets: &'static [&'static str]) -> Case {
    Case {
        targets,
        call: shell_call,
        fs: false,
        terminal: true,
        mode: "full",
    }
}

/// A client in a test: answers Pincer's requests as told, with its own
/// request ids as strings so a response of Pincer's to one of Pincer's own
/// requests (numbers) would stand out.
struct Client {
    acp: AcpProcess,
    session: String,
    case: Case,
    next: u64,
    /// Ids of the requests Pincer sent.
    asked: HashSet<String>,
    /// Ids of the requests we sent.
    ours: HashSet<String>,
    /// Requests answered late, and when.
    late: Vec<(Instant, Value)>,
}

impl Client {
    fn start(dir: &TestDir, case: Case) -> Self {
        let mut turns = Vec::new();
        for turn in 0..12 {
            turns.push((case.call)(turn));
            turns.push(json!([{"text": "done"}]));
        }
        let script = dir.script("s.jsonl", &turns);
        let acp = AcpProcess::spawn(
            dir,
            &["--script", script.to_str().unwrap(), "--mode", case.mode],
        );
        let mut client = Self {
            acp,
            session: String::new(),
            case,
            next: 0,
            asked: HashSet::new(),
            ours: HashSet::new(),
            late: Vec::new(),
        };
        client.call(
            "initialize",
            json!({"protocolVersion": 1, "clientCapabilities": {
                "fs": {"readTextFile": case.fs, "writeTextFile": case.fs},
                "terminal": case.terminal,
            }}),
        );
        let opened = client.call(
            "session/new",
            json!({"cwd": dir.workspace(), "mcpServers": []}),
        );
        client.session = opened["result"]["sessionId"].as_str().unwrap().to_owned();
        client
    }

    fn send_request(&mut self, method: &str, params: Value) -> Value {
        self.next += 1;
        let id = json!(format!("c{}", self.next));
        self.ours.insert(id.to_string());
        self.acp
            .send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        id
    }

    /// Sends a request and answers everything else right until its response.
    fn call(&mut self, method: &str, params: Value) -> Value {
        let id = self.send_request(method, params);
        self.until(&id, Answer::Right, |_| false).1
    }

    fn prompt(&mut self) -> Value {
        let session = self.session.clone();
        self.send_request(
            "session/prompt",
            json!({"sessionId": session, "prompt": [{"type": "text", "text": "go"}]}),
        )
    }

    /// The right answer to one of Pincer's requests.
    fn right(request: &Value) -> Value {
        match request["method"].as_str().unwrap() {
            "fs/read_text_file" => json!({"result": {"content": "old\n"}}),
            "session/request_permission" => {
                json!({"result": {"outcome": {"outcome": "selected", "optionId": "allow_once"}}})
            }
            "terminal/create" => json!({"result": {"terminalId": "t1"}}),
            "terminal/wait_for_exit" => json!({"result": {"exitCode": 0}}),
            "terminal/output" => json!({"result": {"output": "hi\n", "truncated": false}}),
            _ => json!({"result": {}}),
        }
    }

    fn reply(&mut self, request: &Value, body: Value) {
        let mut message = json!({"jsonrpc": "2.0", "id": request["id"]});
        message
            .as_object_mut()
            .unwrap()
            .extend(body.as_object().unwrap().clone());
        self.acp.send(&message);
    }

    /// Answers one of Pincer's requests as `answer` says.
    fn answer(&mut self, request: &Value, answer: Answer) {
        let body = match answer {
            Answer::Null => json!({"result": null}),
            Answer::Empty => json!({"result": {}}),
            Answer::Error => json!({"error": {"code": -32000, "message": "the editor said no"}}),
            Answer::Late => {
                self.late
                    .push((Instant::now() + Duration::from_millis(300), request.clone()));
                return;
            }
            Answer::Never => return,
            Answer::Right => Self::right(request),
        };
        self.reply(request, body);
    }

    /// Reads until the response to `id`, answering Pincer's requests (the
    /// targets as `answer` says, the rest right). `stop` may end the wait
    /// early on a message; it returns (stopped on, response).
    fn until(
        &mut self,
        id: &Value,
        answer: Answer,
        mut stop: impl FnMut(&Value) -> bool,
    ) -> (Option<Value>, Value) {
        let deadline = Instant::now() + TIMEOUT;
        loop {
            assert!(
                Instant::now() < deadline,
                "no response to {id}; stderr:\n{}",
                self.acp.stderr()
            );
            let due: Vec<Value> = {
                let now = Instant::now();
                let (due, later): (Vec<_>, Vec<_>) =
                    self.late.drain(..).partition(|(at, _)| *at <= now);
                self.late = later;
                due.into_iter().map(|(_, r)| r).collect()
            };
            for request in due {
                let body = Self::right(&request);
                self.reply(&request, body);
            }
            let Some(message) = self.acp.recv_timeout(Duration::from_millis(50)) else {
                continue;
            };
            self.check_not_a_reply_to_a_response(&message);
            if let Some(method) = message["method"].as_str()
                && message.get("id").is_some()
            {
                self.asked.insert(message["id"].to_string());
                let chosen = if self.case.targets.contains(&method) {
                    answer
                } else {
                    Answer::Right
                };
                let stopping = stop(&message);
                self.answer(&message, chosen);
                if stopping {
                    return (Some(message), Value::Null);
                }
                continue;
            }
            if message.get("method").is_none() && message.get("id") == Some(id) {
                return (None, message);
            }
            if stop(&message) {
                return (Some(message), Value::Null);
            }
        }
    }

    /// Pincer answers requests, never responses: every response it writes
    /// carries one of our ids.
    fn check_not_a_reply_to_a_response(&self, message: &Value) {
        if message.get("method").is_none() {
            let id = message["id"].to_string();
            assert!(
                self.ours.contains(&id),
                "pincer answered something that was not our request: {message}"
            );
            assert!(
                !self.asked.contains(&id) || self.ours.contains(&id),
                "pincer answered a response: {message}"
            );
        }
    }

    /// A prompt whose target requests get `answer`: it ends, with a response.
    fn prompt_ends(&mut self, answer: Answer) -> Value {
        let id = self.prompt();
        let (_, response) = self.until(&id, answer, |_| false);
        assert!(
            response.get("result").is_some() || response.get("error").is_some(),
            "{response}"
        );
        response
    }

    /// A prompt whose target request is never answered, once that request
    /// is pending. Returns the prompt's id.
    fn prompt_stuck(&mut self) -> Value {
        let id = self.prompt();
        let targets = self.case.targets;
        let (stopped, response) = self.until(&id, Answer::Never, |m| {
            m["method"]
                .as_str()
                .is_some_and(|method| targets.contains(&method))
                && m.get("id").is_some()
        });
        assert!(
            stopped.is_some(),
            "the prompt ended before pincer asked the client: {response}"
        );
        id
    }

    /// Waits for the process to exit on its own (after stdin closed or a
    /// signal), answering nothing.
    fn exits(mut self) -> std::process::ExitStatus {
        let deadline = Instant::now() + TIMEOUT;
        loop {
            if let Some(status) = self.acp.child.try_wait().unwrap() {
                while let Some(message) = self.acp.recv_timeout(Duration::from_millis(10)) {
                    self.check_not_a_reply_to_a_response(&message);
                }
                return status;
            }
            assert!(
                Instant::now() < deadline,
                "pincer did not exit; stderr:\n{}",
                self.acp.stderr()
            );
            while let Some(message) = self.acp.recv_timeout(Duration::from_millis(10)) {
                self.check_not_a_reply_to_a_response(&message);
            }
        }
    }
}

/// One case through every answer, `session/cancel` while a request is
/// pending, the next prompt, then stdin closing while a request is pending;
/// and SIGTERM in a second process.
fn run_case(case: Case) {
    let dir = TestDir::new();
    let mut client = Client::start(&dir, case);
    for answer in [Answer::Null, Answer::Empty, Answer::Error, Answer::Late] {
        let response = client.prompt_ends(answer);
        assert!(
            response.get("result").is_some() || response.get("error").is_some(),
            "{answer:?}: {response}"
        );
    }
    // Never answered, then cancelled: the prompt ends `cancelled`.
    let stuck = client.prompt_stuck();
    let session = client.session.clone();
    client
        .acp
        .notify("session/cancel", json!({"sessionId": session}));
    let (_, response) = client.until(&stuck, Answer::Never, |_| false);
    assert_eq!(
        response["result"]["stopReason"], "cancelled",
        "{case:?}: {response}"
    );
    // The next prompt works.
    let response = client.prompt_ends(Answer::Right);
    assert!(
        response["result"]["stopReason"].is_string(),
        "{case:?}: {response}"
    );
    // Stdin closes while a request waits: the process ends, cleanly.
    client.prompt_stuck();
    let status = client.acp.finish();
    assert!(status.success(), "{case:?}: {status:?}");

    // SIGTERM while a request waits.
    let dir = TestDir::new();
    let mut client = Client::start(&dir, case);
    client.prompt_stuck();
    let killed = std::process::Command::new("kill")
        .args(["-TERM", &client.acp.child.id().to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    let status = client.exits();
    assert!(status.success(), "{case:?}: {status:?}");
}

#[test]
fn fs_read_text_file_answered_any_way() {
    run_case(READ);
}

#[test]
fn fs_write_text_file_answered_any_way() {
    run_case(WRITE);
}

#[test]
fn request_permission_answered_any_way() {
    run_case(PERMISSION);
}

#[test]
fn terminal_create_answered_any_way() {
    run_case(terminal(&["terminal/create"]));
}

#[test]
fn terminal_wait_for_exit_answered_any_way() {
    run_case(terminal(&["terminal/wait_for_exit"]));
}

#[test]
fn terminal_output_answered_any_way() {
    run_case(terminal(&["terminal/output"]));
}

#[test]
fn terminal_release_answered_any_way() {
    run_case(terminal(&["terminal/release"]));
}

/// `terminal/kill` is sent when a command is cancelled: with the wait for
/// its exit never answered, a cancel makes Pincer kill it.
#[test]
fn terminal_kill_answered_any_way() {
    run_case(terminal(&["terminal/wait_for_exit", "terminal/kill"]));
}

/// CodeCompanion.nvim's answer to a write, exactly: the write counts as done
/// and the call succeeds.
#[test]
fn a_null_result_to_a_write_is_a_successful_write() {
    let dir = TestDir::new();
    let mut client = Client::start(&dir, WRITE);
    let id = client.prompt();
    let (_, response) = client.until(&id, Answer::Null, |_| false);
    assert_eq!(response["result"]["stopReason"], "end_turn");
    let completed = client.acp.received.iter().any(|m| {
        m["params"]["update"]["sessionUpdate"] == "tool_call_update"
            && m["params"]["update"]["status"] == "completed"
    });
    assert!(completed, "the write was not reported done");
    assert!(
        !client
            .acp
            .received
            .iter()
            .any(|m| m["error"]["code"] == -32600),
        "a response was answered as an invalid request"
    );
}

/// The first update of a tool call says `status: pending` on the wire (the
/// schema crate leaves the default out).
#[test]
fn a_tool_call_starts_pending() {
    let dir = TestDir::new();
    let mut client = Client::start(&dir, READ);
    let id = client.prompt();
    client.until(&id, Answer::Right, |_| false);
    let first = client
        .acp
        .received
        .iter()
        .find(|m| m["params"]["update"]["sessionUpdate"] == "tool_call")
        .expect("a tool_call update");
    assert_eq!(first["params"]["update"]["status"], "pending", "{first}");
}
