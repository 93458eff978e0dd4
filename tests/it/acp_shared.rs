//! Two editors on one session (`pincer acp` twice on one data directory):
//! the second, which loaded the session, sees the first one's run live (its
//! committed events read from the tape, woken by the journal's notifier),
//! cancels it, and answers its permission request, through the journal's
//! control path (`core::control`).

use std::time::{Duration, Instant};

use crate::support::{AcpProcess, TestDir};
use serde_json::{Value, json};

const WAIT: Duration = Duration::from_secs(20);

fn editor(dir: &TestDir, script: &std::path::Path, mode: &str) -> AcpProcess {
    let mut acp = AcpProcess::spawn(dir, &["--script", script.to_str().unwrap(), "--mode", mode]);
    acp.initialize();
    acp
}

/// Reads until `check` holds for a message, answering nothing; panics after
/// `WAIT`.
fn until(acp: &mut AcpProcess, what: &str, check: impl Fn(&Value) -> bool) -> Value {
    let deadline = Instant::now() + WAIT;
    while Instant::now() < deadline {
        if let Some(message) = acp.recv_timeout(Duration::from_millis(200))
            && check(&message)
        {
            return message;
        }
    }
    panic!("no {what} within {WAIT:?}; stderr:\n{}", acp.stderr());
}

fn chunk_says(message: &Value, text: &str) -> bool {
    message["params"]["update"]["sessionUpdate"] == "agent_message_chunk"
        && message["params"]["update"]["content"]["text"]
            .as_str()
            .is_some_and(|t| t.contains(text))
}

#[test]
fn a_second_editor_follows_the_owners_run_live_and_cancels_it() {
    let dir = TestDir::new();
    let script = dir.script(
        "s.jsonl",
        &[json!([{"text": "Working"}, {"delay_ms": 60000}, {"text": " never"}])],
    );
    let mut a = editor(&dir, &script, "supervised");
    let session = a.new_session(&dir.workspace());
    let prompt = a.prompt_async(&session, "long job");
    until(&mut a, "A's first chunk", |m| chunk_says(m, "Working"));

    let mut b = editor(&dir, &script, "supervised");
    let (_, loaded) = b.request(
        "session/load",
        json!({"sessionId": session, "cwd": dir.workspace(), "mcpServers": []}),
    );
    assert!(loaded.get("result").is_some(), "{loaded}");
    // The run A works shows in B as it is, read from the tape.
    let seen = Instant::now();
    until(&mut b, "A's run in B", |m| chunk_says(m, "Working"));
    assert!(seen.elapsed() < WAIT);

    // B's cancel stops A's run.
    b.notify("session/cancel", json!({"sessionId": session}));
    let deadline = Instant::now() + WAIT;
    let response = loop {
        assert!(
            Instant::now() < deadline,
            "A never ended; A:\n{}\nB:\n{}",
            a.stderr(),
            b.stderr()
        );
        if let Some(m) = a.recv_timeout(Duration::from_millis(200))
            && m.get("id") == Some(&prompt)
            && m.get("method").is_none()
        {
            break m;
        }
    };
    assert_eq!(response["result"]["stopReason"], "cancelled", "{response}");
}

#[test]
fn a_second_editor_answers_the_owners_permission_request_and_the_first_answer_wins() {
    let dir = TestDir::new();
    let script = dir.script(
        "s.jsonl",
        &[
            json!([{"tool_call": {"name": "write_file", "arguments": {"path": "b.txt", "content": "from A's run\n"}}}]),
            json!([{"text": "done"}]),
        ],
    );
    let mut a = editor(&dir, &script, "supervised");
    let session = a.new_session(&dir.workspace());
    let prompt = a.prompt_async(&session, "write it");
    let asked_a = until(&mut a, "A's permission request", |m| {
        m["method"] == "session/request_permission"
    });

    let mut b = editor(&dir, &script, "supervised");
    let (_, loaded) = b.request(
        "session/load",
        json!({"sessionId": session, "cwd": dir.workspace(), "mcpServers": []}),
    );
    assert!(loaded.get("result").is_some(), "{loaded}");
    let asked_b = until(&mut b, "the permission request in B", |m| {
        m["method"] == "session/request_permission"
    });
    assert_eq!(
        asked_b["params"]["toolCall"]["toolCallId"],
        asked_a["params"]["toolCall"]["toolCallId"]
    );
    b.send(&json!({"jsonrpc": "2.0", "id": asked_b["id"], "result": {"outcome": {"outcome": "selected", "optionId": "allow_once"}}}));

    // A's run goes on with B's answer; A's own request is withdrawn.
    let deadline = Instant::now() + WAIT;
    let response = loop {
        assert!(
            Instant::now() < deadline,
            "A's prompt never ended; A:\n{}",
            a.stderr()
        );
        if let Some(m) = a.recv_timeout(Duration::from_millis(200))
            && m.get("id") == Some(&prompt)
            && m.get("method").is_none()
        {
            break m;
        }
    };
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    assert_eq!(
        std::fs::read_to_string(dir.workspace().join("b.txt")).unwrap(),
        "from A's run\n"
    );
    assert!(
        a.received
            .iter()
            .any(|m| m["method"] == "$/cancel_request"
                && m["params"]["requestId"] == asked_a["id"]),
        "A's request was not withdrawn: {:#?}",
        a.received
    );
    // A late answer from A changes nothing.
    a.send(&json!({"jsonrpc": "2.0", "id": asked_a["id"], "result": {"outcome": {"outcome": "selected", "optionId": "reject_once"}}}));
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(
        std::fs::read_to_string(dir.workspace().join("b.txt")).unwrap(),
        "from A's run\n"
    );
}
