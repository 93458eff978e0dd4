//! `kill -9` in the middle of a run, then a restart: the database opens, the
//! session loads, the interrupted run is failed, nothing committed is lost.

use crate::support::{AcpProcess, TestDir, agent_text};
use pretty_assertions::assert_eq;
use serde_json::json;

#[test]
fn kill_9_mid_run_then_restart_recovers_the_session() {
    let dir = TestDir::new();
    let script = dir.script(
        "s.jsonl",
        &[
            json!([{"text": "one "}, {"text": "done"}]),
            json!([{"text": "partial "}, {"text": "reply"}, {"delay_ms": 60000}, {"text": "never"}]),
            json!([{"text": "after restart"}]),
        ],
    );
    let ws = dir.workspace();
    let mut first = AcpProcess::spawn(&dir, &["--script", script.to_str().unwrap()]);
    first.initialize();
    let session = first.new_session(&ws);
    first.call(
        "session/prompt",
        json!({"sessionId": session, "prompt": [{"type": "text", "text": "first"}]}),
    );
    first.prompt_async(&session, "second");
    assert_eq!(
        first.recv()["params"]["update"]["content"]["text"],
        "partial "
    );
    assert_eq!(first.recv()["params"]["update"]["content"]["text"], "reply");
    // Reading the run list flushes the store: the streamed chunks are committed.
    let runs = first.call("_pincer/runs/list", json!({"sessionId": session}));
    assert_eq!(runs["runs"][1]["state"], "running");
    let interrupted = runs["runs"][1]["runId"].as_str().unwrap().to_owned();
    first.child.kill().unwrap(); // SIGKILL
    first.child.wait().unwrap();
    drop(first);

    let mut second = AcpProcess::spawn(&dir, &["--script", script.to_str().unwrap()]);
    second.initialize();
    let (history, response) = second.request(
        "session/load",
        json!({"sessionId": session, "cwd": ws, "mcpServers": []}),
    );
    assert!(response.get("result").is_some(), "{response}");
    let replay: Vec<(String, String)> = history
        .iter()
        .map(|n| {
            let u = &n["params"]["update"];
            (
                u["sessionUpdate"].as_str().unwrap().to_owned(),
                u["content"]["text"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    assert_eq!(
        replay,
        vec![
            ("user_message_chunk".into(), "first".into()),
            ("agent_message_chunk".into(), "one done".into()),
            ("user_message_chunk".into(), "second".into()),
            ("agent_message_chunk".into(), "partial reply".into()),
        ]
    );
    let run = second.call("_pincer/runs/get", json!({"runId": interrupted}));
    assert_eq!(run["state"], "failed");
    assert!(
        run["error"].as_str().unwrap().contains("interrupted"),
        "{run}"
    );
    let tape = second.call("_pincer/runs/tape", json!({"runId": interrupted}));
    let events = tape["events"].as_array().unwrap();
    let last = events.last().unwrap();
    assert_eq!(last["type"], "state");
    assert_eq!(last["state"], "failed");
    let texts: Vec<&str> = events
        .iter()
        .filter(|e| e["type"] == "text_delta")
        .map(|e| e["text"].as_str().unwrap())
        .collect();
    assert_eq!(texts, vec!["partial ", "reply"]);
    // The session carries on with the next model turn.
    let (notes, response) = second.prompt(&session, "third");
    assert_eq!(response["result"]["stopReason"], "end_turn");
    assert_eq!(agent_text(&notes), "after restart");
    assert!(second.finish().success());
}

#[test]
fn a_second_process_leaves_the_runs_of_a_live_one_alone() {
    let dir = TestDir::new();
    let script = dir.script(
        "s.jsonl",
        &[json!([{"text": "working"}, {"delay_ms": 60000}])],
    );
    let ws = dir.workspace();
    let mut owner = AcpProcess::spawn(&dir, &["--script", script.to_str().unwrap()]);
    owner.initialize();
    let session = owner.new_session(&ws);
    let prompt = owner.prompt_async(&session, "go");
    owner.recv();
    owner.call("_pincer/runs/list", json!({"sessionId": session}));
    // Another process opens the same database (an editor's second window, `pincer run`).
    let shown = dir.show_session(&session);
    assert_eq!(
        shown["runs"][0]["state"], "running",
        "the other process must not fail a live run"
    );
    owner.notify("session/cancel", json!({"sessionId": session}));
    let (_, response) = owner.until_response(&prompt);
    assert_eq!(response["result"]["stopReason"], "cancelled");
}
