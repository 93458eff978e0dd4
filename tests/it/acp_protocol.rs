//! The ACP face over real pipes, speaking raw JSON-RPC; every message checked
//! against the vendored schema.

use std::time::Duration;

use crate::support::{AcpProcess, TestDir, agent_text, assert_error, chunks};
use pretty_assertions::assert_eq;
use serde_json::{Value, json};

fn hello_script(dir: &TestDir) -> std::path::PathBuf {
    dir.script(
        "hello.jsonl",
        &[
            json!([{"thought": "thinking "}, {"text": "Hel"}, {"text": "lo"}, {"text": "!"}]),
            json!([{"text": "second"}]),
        ],
    )
}

#[test]
fn prompt_streams_chunks_in_order_and_ends_the_turn() {
    let dir = TestDir::new();
    let script = hello_script(&dir);
    let mut acp = AcpProcess::spawn(&dir, &["--script", script.to_str().unwrap()]);
    let init = acp.initialize();
    assert_eq!(init["protocolVersion"], 1);
    assert_eq!(init["agentCapabilities"]["loadSession"], true);
    assert_eq!(
        init["agentCapabilities"]["_meta"]["pincer"]["extensionMethods"],
        json!([
            "_pincer/runs/list",
            "_pincer/runs/get",
            "_pincer/runs/tape",
            "_pincer/grants/list",
            "_pincer/context"
        ])
    );
    let sandbox = &init["agentCapabilities"]["_meta"]["pincer"]["sandbox"];
    let status = pincer::sandbox::status();
    assert_eq!(sandbox["setting"], "best_effort");
    assert_eq!(sandbox["enforced"], status.enforced);
    assert_eq!(sandbox["landlock"]["abi"], json!(status.abi));
    let session = acp.new_session(&dir.workspace());
    // What the first turn will be sent: the editor's face in the prompt.
    let context = acp.call("_pincer/context", json!({"sessionId": session}));
    let system = context["system"].as_str().unwrap();
    assert!(system.contains("In the person's editor"), "{context}");
    assert_eq!(context["messages"], json!([]));
    assert_eq!(context["sessionId"], session.as_str());
    let (notes, response) = acp.prompt(&session, "hi");
    assert_eq!(response["result"], json!({"stopReason": "end_turn"}));
    let kinds: Vec<&str> = notes
        .iter()
        .map(|n| n["params"]["update"]["sessionUpdate"].as_str().unwrap())
        .collect();
    assert_eq!(
        kinds,
        vec![
            "session_info_update",
            "agent_thought_chunk",
            "agent_message_chunk",
            "agent_message_chunk",
            "agent_message_chunk"
        ]
    );
    // The title comes from the first prompt.
    assert_eq!(notes[0]["params"]["update"]["title"], "hi");
    assert_eq!(agent_text(&notes), "Hello!");
    assert_eq!(chunks(&notes, "agent_thought_chunk"), "thinking ");
    assert!(
        notes
            .iter()
            .all(|n| n["params"]["sessionId"] == session.as_str())
    );
    assert!(acp.finish().success());
}

#[test]
fn newer_protocol_versions_are_answered_with_version_1() {
    let dir = TestDir::new();
    let mut acp = AcpProcess::spawn(&dir, &[]);
    let result = acp.call(
        "initialize",
        json!({"protocolVersion": 7, "clientCapabilities": {}}),
    );
    assert_eq!(result["protocolVersion"], 1);
}

#[test]
fn no_update_precedes_the_session_new_response() {
    let dir = TestDir::new();
    let script = dir.script("s.jsonl", &[json!([{"text": "a"}])]);
    let mut acp = AcpProcess::spawn(&dir, &["--script", script.to_str().unwrap()]);
    acp.initialize();
    let new_id = acp.request_async(
        "session/new",
        json!({"cwd": dir.workspace(), "mcpServers": []}),
    );
    let (before, response) = acp.until_response(&new_id);
    assert!(
        before.is_empty(),
        "updates before the session/new response: {before:?}"
    );
    assert!(response["result"]["sessionId"].is_string());
}

#[test]
fn cancel_mid_stream_ends_the_turn_with_cancelled() {
    let dir = TestDir::new();
    let script = dir.script(
        "slow.jsonl",
        &[
            json!([{"text": "first"}, {"delay_ms": 30000}, {"text": "never"}]),
            json!([{"text": "after"}]),
        ],
    );
    let mut acp = AcpProcess::spawn(&dir, &["--script", script.to_str().unwrap()]);
    acp.initialize();
    let session = acp.new_session(&dir.workspace());
    let id = acp.prompt_async(&session, "go");
    let info = acp.recv();
    assert_eq!(
        info["params"]["update"]["sessionUpdate"],
        "session_info_update"
    );
    // Wait for the first chunk, then cancel.
    let first = acp.recv();
    assert_eq!(first["params"]["update"]["content"]["text"], "first");
    let sent = std::time::Instant::now();
    acp.notify("session/cancel", json!({"sessionId": session}));
    let (notes, response) = acp.until_response(&id);
    let elapsed = sent.elapsed();
    assert!(notes.is_empty(), "{notes:?}");
    assert_eq!(response["result"], json!({"stopReason": "cancelled"}));
    assert!(elapsed < Duration::from_secs(2), "cancel took {elapsed:?}");
    // The session goes on: the next prompt plays the next model turn.
    let (notes, response) = acp.prompt(&session, "again");
    assert_eq!(response["result"]["stopReason"], "end_turn");
    assert_eq!(agent_text(&notes), "after");
}

#[test]
fn cancel_request_on_a_prompt_cancels_its_run() {
    let dir = TestDir::new();
    let script = dir.script(
        "slow.jsonl",
        &[json!([{"text": "first"}, {"delay_ms": 30000}])],
    );
    let mut acp = AcpProcess::spawn(&dir, &["--script", script.to_str().unwrap()]);
    acp.initialize();
    let session = acp.new_session(&dir.workspace());
    let id = acp.prompt_async(&session, "go");
    acp.recv();
    acp.notify("$/cancel_request", json!({"requestId": id}));
    let (_, response) = acp.until_response(&id);
    assert_eq!(response["result"], json!({"stopReason": "cancelled"}));
}

#[test]
fn prompts_queue_in_order_within_a_session() {
    let dir = TestDir::new();
    let script = dir.script(
        "q.jsonl",
        &[
            json!([{"delay_ms": 200}, {"text": "one"}]),
            json!([{"text": "two"}]),
        ],
    );
    let mut acp = AcpProcess::spawn(&dir, &["--script", script.to_str().unwrap()]);
    acp.initialize();
    let session = acp.new_session(&dir.workspace());
    let first = acp.prompt_async(&session, "1");
    let second = acp.prompt_async(&session, "2");
    let (notes, response) = acp.until_response(&first);
    assert_eq!(response["result"]["stopReason"], "end_turn");
    assert_eq!(agent_text(&notes), "one", "{:#?}", acp.received);
    let (notes, response) = acp.until_response(&second);
    assert_eq!(response["result"]["stopReason"], "end_turn");
    assert_eq!(agent_text(&notes), "two");
    let runs = acp.call("_pincer/runs/list", json!({"sessionId": session}));
    let states: Vec<&str> = runs["runs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["state"].as_str().unwrap())
        .collect();
    assert_eq!(states, vec!["completed", "completed"]);
    let a = &runs["runs"][0];
    let b = &runs["runs"][1];
    assert!(
        a["endedAt"].as_str().unwrap() <= b["startedAt"].as_str().unwrap(),
        "runs overlapped: {a} {b}"
    );
}

#[test]
fn a_prompt_sent_right_after_a_mode_change_runs_in_the_new_mode() {
    let dir = TestDir::new();
    let script = dir.script(
        "mode.jsonl",
        &[
            json!([{"tool_call": {"id": "w1", "name": "write_file",
                "arguments": {"path": "made.txt", "content": "made\n"}}}]),
            json!([{"text": "written"}]),
        ],
    );
    let mut acp = AcpProcess::spawn(&dir, &["--script", script.to_str().unwrap()]);
    acp.initialize();
    let session = acp.new_session(&dir.workspace());
    // Both sent before either is answered: the prompt queues behind the
    // mode change, so `full` writes without asking (supervised would ask).
    let mode = acp.request_async(
        "session/set_mode",
        json!({"sessionId": session, "modeId": "full"}),
    );
    let prompt = acp.prompt_async(&session, "write it");
    let (_, response) = acp.until_response(&mode);
    assert!(response.get("error").is_none(), "{response}");
    let (notes, response) = acp.until_response(&prompt);
    assert_eq!(response["result"]["stopReason"], "end_turn", "{notes:#?}");
    assert!(
        !notes
            .iter()
            .any(|n| n["method"] == "session/request_permission"),
        "{notes:#?}"
    );
    assert_eq!(
        std::fs::read_to_string(dir.workspace().join("made.txt")).unwrap(),
        "made\n"
    );
}

#[test]
fn iteration_cap_ends_the_run_with_max_turn_requests() {
    let dir = TestDir::new();
    let call = json!([{"tool_call": {"name": "read_file", "arguments": {"path": "a"}}}]);
    let script = dir.script(
        "loop.jsonl",
        &[call.clone(), call.clone(), call.clone(), call],
    );
    let mut acp = AcpProcess::spawn(
        &dir,
        &[
            "--script",
            script.to_str().unwrap(),
            "--max-turn-requests",
            "2",
        ],
    );
    acp.initialize();
    let session = acp.new_session(&dir.workspace());
    let (notes, response) = acp.prompt(&session, "loop");
    assert_eq!(response["result"]["stopReason"], "max_turn_requests");
    let results = notes
        .iter()
        .filter(|n| {
            n["params"]["update"]["sessionUpdate"] == "tool_call_update"
                && n["params"]["update"]["status"] == "failed"
        })
        .count();
    assert_eq!(results, 2, "one tool result per model turn: {notes:?}");
}

#[test]
fn provider_failure_is_an_error_response_and_the_run_is_failed() {
    let dir = TestDir::new();
    let script = dir.script(
        "fail.jsonl",
        &[json!([{"text": "partial"}, {"error": {"kind": "server", "message": "upstream exploded"}}])],
    );
    let mut acp = AcpProcess::spawn(&dir, &["--script", script.to_str().unwrap()]);
    acp.initialize();
    let session = acp.new_session(&dir.workspace());
    let (_, response) = acp.prompt(&session, "x");
    assert_eq!(response["error"]["code"], -32603);
    let message = response["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("upstream exploded") && message.contains("mid-stream"),
        "{message}"
    );
    let run_id = response["error"]["data"]["runId"]
        .as_str()
        .unwrap()
        .to_owned();
    let run = acp.call("_pincer/runs/get", json!({"runId": run_id}));
    assert_eq!(run["state"], "failed");
    let tape = acp.call("_pincer/runs/tape", json!({"runId": run_id}));
    let types: Vec<&str> = tape["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["type"].as_str().unwrap())
        .collect();
    assert_eq!(
        types,
        vec![
            "state",
            "user_message",
            "session_info",
            "state",
            "model_turn",
            "text_delta",
            "state"
        ]
    );
    let seqs: Vec<u64> = tape["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["seq"].as_u64().unwrap())
        .collect();
    assert_eq!(seqs, (0..7).collect::<Vec<_>>());
}

#[test]
fn without_a_provider_a_prompt_explains_how_to_configure_one() {
    let dir = TestDir::new();
    let mut acp = AcpProcess::spawn(&dir, &[]);
    acp.initialize();
    let session = acp.new_session(&dir.workspace());
    let (_, response) = acp.prompt(&session, "x");
    let message = response["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("no model provider is configured")
            && message.contains("pincer login")
            && message.contains("OPENAI_API_KEY="),
        "{message}"
    );
}

#[test]
fn resource_links_and_embedded_text_are_accepted_and_images_refused() {
    let dir = TestDir::new();
    let script = dir.script("s.jsonl", &[json!([{"text": "ok"}])]);
    let mut acp = AcpProcess::spawn(&dir, &["--script", script.to_str().unwrap()]);
    acp.initialize();
    let session = acp.new_session(&dir.workspace());
    let (_, response) = acp.request(
        "session/prompt",
        json!({"sessionId": session, "prompt": [
            {"type": "text", "text": "look at"},
            {"type": "resource_link", "uri": "file:///tmp/a.rs", "name": "a.rs"},
            {"type": "resource", "resource": {"uri": "file:///tmp/b.rs", "text": "fn main() {}"}}
        ]}),
    );
    assert_eq!(response["result"]["stopReason"], "end_turn");
    let (_, response) = acp.request(
        "session/prompt",
        json!({"sessionId": session, "prompt": [{"type": "image", "mimeType": "image/png", "data": "iVBORw0KGgoAAAANSUhEUg=="}]}),
    );
    // A script takes images only when its configuration says so (tests/it/images.rs).
    assert_error(&response, -32602, "model script does not accept images");
}

#[test]
fn config_options_switch_mode_and_reject_unknown_values() {
    let dir = TestDir::new();
    let script = dir.script("s.jsonl", &[json!([{"text": "ok"}])]);
    let mut acp = AcpProcess::spawn(&dir, &["--script", script.to_str().unwrap()]);
    acp.initialize();
    let result = acp.call(
        "session/new",
        json!({"cwd": dir.workspace(), "mcpServers": []}),
    );
    let session = result["sessionId"].as_str().unwrap().to_owned();
    let ids: Vec<&str> = result["configOptions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, vec!["model", "mode"]);
    assert_eq!(
        result["configOptions"][0]["currentValue"],
        "scripted/script"
    );
    assert_eq!(result["configOptions"][1]["currentValue"], "supervised");
    let result = acp.call(
        "session/set_config_option",
        json!({"sessionId": session, "configId": "mode", "value": "read_only"}),
    );
    assert_eq!(result["configOptions"][1]["currentValue"], "read_only");
    let (_, response) = acp.request(
        "session/set_config_option",
        json!({"sessionId": session, "configId": "mode", "value": "yolo"}),
    );
    assert_error(&response, -32602, "\"yolo\" is not a mode");
    let (_, response) = acp.request(
        "session/set_config_option",
        json!({"sessionId": session, "configId": "model", "value": "gpt-9"}),
    );
    assert_error(
        &response,
        -32602,
        "unknown model \"gpt-9\"; available: scripted/script",
    );
    let (_, response) = acp.request(
        "session/set_config_option",
        json!({"sessionId": session, "configId": "temperature", "value": "hot"}),
    );
    assert_eq!(response["error"]["code"], -32602);
}

#[test]
fn list_filters_by_cwd_and_close_refuses_later_prompts() {
    let dir = TestDir::new();
    let script = dir.script("s.jsonl", &[json!([{"text": "ok"}])]);
    let mut acp = AcpProcess::spawn(&dir, &["--script", script.to_str().unwrap()]);
    acp.initialize();
    let ws = dir.workspace();
    let other = dir.path().join("other");
    std::fs::create_dir_all(&other).unwrap();
    let a = acp.new_session(&ws);
    let b = acp.new_session(&other);
    acp.call(
        "session/prompt",
        json!({"sessionId": a, "prompt": [{"type": "text", "text": "Title of a"}]}),
    );
    let all = acp.call("session/list", json!({}));
    let ids: Vec<&str> = all["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["sessionId"].as_str().unwrap())
        .collect();
    assert_eq!(
        ids,
        vec![a.as_str(), b.as_str()],
        "most recently active first"
    );
    assert_eq!(all["sessions"][0]["title"], "Title of a");
    let filtered = acp.call("session/list", json!({"cwd": other}));
    assert_eq!(filtered["sessions"].as_array().unwrap().len(), 1);
    assert_eq!(filtered["sessions"][0]["sessionId"], b.as_str());
    acp.call("session/close", json!({"sessionId": a}));
    let (_, response) = acp.prompt(&a, "x");
    assert_eq!(response["error"]["code"], -32002);
    let (_, response) = acp.request("session/close", json!({"sessionId": "ses_missing"}));
    assert_eq!(response["error"]["code"], -32002);
}

#[test]
fn list_pages_with_a_cursor() {
    let dir = TestDir::new();
    let mut acp = AcpProcess::spawn(&dir, &[]);
    acp.initialize();
    let ws = dir.workspace();
    let mut created = Vec::new();
    for _ in 0..55 {
        created.push(acp.new_session(&ws));
    }
    let first = acp.call("session/list", json!({}));
    assert_eq!(first["sessions"].as_array().unwrap().len(), 50);
    let cursor = first["nextCursor"].as_str().unwrap().to_owned();
    let second = acp.call("session/list", json!({"cursor": cursor}));
    assert_eq!(second["sessions"].as_array().unwrap().len(), 5);
    assert!(second.get("nextCursor").is_none_or(Value::is_null));
    let mut seen: Vec<String> = first["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .chain(second["sessions"].as_array().unwrap())
        .map(|s| s["sessionId"].as_str().unwrap().to_owned())
        .collect();
    seen.sort();
    created.sort();
    assert_eq!(seen, created);
    let (_, response) = acp.request("session/list", json!({"cursor": "garbage"}));
    assert_eq!(response["error"]["code"], -32602);

    // Sessions in another workspace: every page of the whole listing and of
    // one workspace holds each of its sessions once, newest first (by time,
    // then by id: sessions made within one millisecond are split by pages too).
    let other = dir.path().join("other");
    std::fs::create_dir_all(&other).unwrap();
    let elsewhere: Vec<String> = (0..3).map(|_| acp.new_session(&other)).collect();
    let walk = |acp: &mut AcpProcess, filter: Value| -> Vec<(String, String)> {
        let mut seen = Vec::new();
        let mut params = filter.clone();
        loop {
            let page = acp.call("session/list", params.clone());
            seen.extend(page["sessions"].as_array().unwrap().iter().map(|s| {
                (
                    s["updatedAt"].as_str().unwrap().to_owned(),
                    s["sessionId"].as_str().unwrap().to_owned(),
                )
            }));
            match page["nextCursor"].as_str() {
                Some(cursor) => {
                    assert_eq!(page["sessions"].as_array().unwrap().len(), 50);
                    params = filter.clone();
                    params["cursor"] = json!(cursor);
                }
                None => return seen,
            }
        }
    };
    let newest_first = |seen: &[(String, String)]| seen.windows(2).all(|w| w[0] > w[1]);
    let all = walk(&mut acp, json!({}));
    assert!(newest_first(&all), "{all:?}");
    let mut ids: Vec<String> = all.into_iter().map(|(_, id)| id).collect();
    ids.sort();
    let mut expected: Vec<String> = created.iter().chain(&elsewhere).cloned().collect();
    expected.sort();
    assert_eq!(ids, expected);
    let in_ws = walk(&mut acp, json!({"cwd": ws}));
    assert!(newest_first(&in_ws), "{in_ws:?}");
    let mut ids: Vec<String> = in_ws.into_iter().map(|(_, id)| id).collect();
    ids.sort();
    assert_eq!(ids, created);
    let in_other = walk(&mut acp, json!({"cwd": other}));
    assert!(newest_first(&in_other), "{in_other:?}");
    let mut ids: Vec<String> = in_other.into_iter().map(|(_, id)| id).collect();
    ids.sort();
    let mut elsewhere = elsewhere;
    elsewhere.sort();
    assert_eq!(ids, elsewhere);
}

#[test]
fn load_after_restart_replays_history_before_responding() {
    let dir = TestDir::new();
    let script = hello_script(&dir);
    let ws = dir.workspace();
    let session = {
        let mut acp = AcpProcess::spawn(&dir, &["--script", script.to_str().unwrap()]);
        acp.initialize();
        let session = acp.new_session(&ws);
        acp.call(
            "session/prompt",
            json!({"sessionId": session, "prompt": [{"type": "text", "text": "hi"}]}),
        );
        assert!(acp.finish().success());
        session
    };
    let mut acp = AcpProcess::spawn(&dir, &["--script", script.to_str().unwrap()]);
    acp.initialize();
    let (notes, response) = acp.request(
        "session/load",
        json!({"sessionId": session, "cwd": ws, "mcpServers": []}),
    );
    assert!(response.get("result").is_some(), "{response}");
    let updates: Vec<(String, String)> = notes
        .iter()
        .map(|n| {
            let u = &n["params"]["update"];
            (
                u["sessionUpdate"].as_str().unwrap().to_owned(),
                u["content"]["text"].as_str().unwrap_or("").to_owned(),
            )
        })
        .collect();
    assert_eq!(
        updates,
        vec![
            ("user_message_chunk".to_owned(), "hi".to_owned()),
            ("agent_thought_chunk".to_owned(), "thinking ".to_owned()),
            ("agent_message_chunk".to_owned(), "Hello!".to_owned()),
        ]
    );
    // The loaded session continues where it left off.
    let (notes, response) = acp.prompt(&session, "more");
    assert_eq!(response["result"]["stopReason"], "end_turn");
    assert_eq!(agent_text(&notes), "second");
    // A wrong cwd or an unknown session is refused.
    let (_, response) = acp.request(
        "session/load",
        json!({"sessionId": session, "cwd": "/elsewhere", "mcpServers": []}),
    );
    assert_eq!(response["error"]["code"], -32602);
    let (_, response) = acp.request(
        "session/load",
        json!({"sessionId": "ses_nope", "cwd": ws, "mcpServers": []}),
    );
    assert_eq!(response["error"]["code"], -32002);
}

#[test]
fn resume_opens_without_replaying() {
    let dir = TestDir::new();
    let script = hello_script(&dir);
    let ws = dir.workspace();
    let mut acp = AcpProcess::spawn(&dir, &["--script", script.to_str().unwrap()]);
    acp.initialize();
    let session = acp.new_session(&ws);
    acp.call(
        "session/prompt",
        json!({"sessionId": session, "prompt": [{"type": "text", "text": "hi"}]}),
    );
    acp.finish();
    let mut acp = AcpProcess::spawn(&dir, &["--script", script.to_str().unwrap()]);
    acp.initialize();
    let (notes, response) = acp.request(
        "session/resume",
        json!({"sessionId": session, "cwd": ws, "mcpServers": []}),
    );
    assert!(notes.is_empty());
    assert!(response.get("result").is_some(), "{response}");
    let (notes, _) = acp.prompt(&session, "more");
    assert_eq!(agent_text(&notes), "second");
}

#[test]
fn mcp_servers_are_accepted_and_stored() {
    let dir = TestDir::new();
    let mut acp = AcpProcess::spawn(&dir, &[]);
    acp.initialize();
    let servers = json!([{"name": "fs", "command": "/usr/bin/mcp-fs", "args": ["--root", "/"], "env": [{"name": "A", "value": "1"}]}]);
    let result = acp.call(
        "session/new",
        json!({"cwd": dir.workspace(), "mcpServers": servers}),
    );
    let session = result["sessionId"].as_str().unwrap().to_owned();
    assert!(acp.finish().success());
    let shown = dir.show_session(&session);
    // Stored without the values of env variables (secrets).
    let mut stored = servers.clone();
    stored[0]["env"][0]["value"] = json!("[redacted]");
    assert_eq!(shown["session"]["mcp_servers"], stored);
    assert_eq!(shown["session"]["origin"], "editor");
}

#[test]
fn a_prompt_sent_right_after_session_new_finds_the_session() {
    // Regression: the session used to be attached only after its response was
    // written, so a fast client's first prompt could get -32002.
    let dir = TestDir::new();
    let script = dir.script("s.jsonl", &[json!([{"text": "ok"}])]);
    let mut acp = AcpProcess::spawn(&dir, &["--script", script.to_str().unwrap()]);
    acp.initialize();
    let ws = dir.workspace();
    for _ in 0..100 {
        let session = acp.new_session(&ws);
        let (_, response) = acp.prompt(&session, "x");
        assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    }
}

#[test]
fn set_mode_and_a_model_given_by_flag_are_offered() {
    let dir = TestDir::new();
    let script = dir.script("s.jsonl", &[json!([{"text": "ok"}])]);
    let mut acp = AcpProcess::spawn(
        &dir,
        &["--script", script.to_str().unwrap(), "--model", "tiny"],
    );
    acp.initialize();
    let result = acp.call(
        "session/new",
        json!({"cwd": dir.workspace(), "mcpServers": []}),
    );
    let session = result["sessionId"].as_str().unwrap().to_owned();
    let model = &result["configOptions"][0];
    assert_eq!(model["currentValue"], "scripted/tiny");
    let values: Vec<&str> = model["options"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["value"].as_str().unwrap())
        .collect();
    assert_eq!(values, vec!["scripted/script", "scripted/tiny"]);
    let result = acp.call(
        "session/set_config_option",
        json!({"sessionId": session, "configId": "model", "value": "scripted/script"}),
    );
    assert_eq!(
        result["configOptions"][0]["currentValue"],
        "scripted/script"
    );
    acp.call(
        "session/set_mode",
        json!({"sessionId": session, "modeId": "full"}),
    );
    let (_, response) = acp.request(
        "session/set_mode",
        json!({"sessionId": session, "modeId": "turbo"}),
    );
    assert_eq!(response["error"]["code"], -32602);
    // The mode and model survive a restart.
    assert!(acp.finish().success());
    let mut acp = AcpProcess::spawn(&dir, &["--script", script.to_str().unwrap()]);
    acp.initialize();
    let result = acp.call(
        "session/resume",
        json!({"sessionId": session, "cwd": dir.workspace(), "mcpServers": []}),
    );
    assert_eq!(
        result["configOptions"][0]["currentValue"],
        "scripted/script"
    );
    assert_eq!(result["configOptions"][1]["currentValue"], "full");
    assert_eq!(result["modes"]["currentModeId"], "full");
}

#[test]
fn a_long_fast_stream_reaches_the_client_whole_even_when_it_lags() {
    // 20,000 chunks with no delay overrun the per-session event buffer, so the
    // forwarder falls behind and catches up from the tape.
    let dir = TestDir::new();
    let script = dir.script(
        "long.jsonl",
        &[json!([{"repeat": {"count": 20000, "text": "x", "apart": true}}, {"text": "END"}])],
    );
    let mut acp = AcpProcess::spawn(&dir, &["--script", script.to_str().unwrap()]);
    acp.initialize();
    let session = acp.new_session(&dir.workspace());
    let (notes, response) = acp.prompt(&session, "go");
    assert_eq!(response["result"]["stopReason"], "end_turn");
    let text = agent_text(&notes);
    assert_eq!(text.len(), 20003);
    assert!(text.ends_with("xEND"));
    // The chunks, and the title the first prompt gives the session.
    assert_eq!(notes.len(), 20002);
    assert!(
        acp.stderr().contains("subscriber lagged"),
        "the test should exercise the lag path; stderr:\n{}",
        acp.stderr()
    );
}

#[test]
fn a_cancel_sent_right_after_a_prompt_cancels_it() {
    // Both lines in one write: the cancel arrives before the prompt is queued.
    // `session/cancel` and `$/cancel_request` must both find the run; of the two
    // answers the spec allows, Pincer gives the cancelled stop reason.
    let dir = TestDir::new();
    let script = dir.script(
        "slow.jsonl",
        &[json!([{"delay_ms": 5000}, {"text": "late"}])],
    );
    let mut acp = AcpProcess::spawn(&dir, &["--script", script.to_str().unwrap()]);
    acp.initialize();
    let session = acp.new_session(&dir.workspace());
    for round in 0..40 {
        let id = format!("p{round}");
        let prompt = json!({"jsonrpc": "2.0", "id": id, "method": "session/prompt",
            "params": {"sessionId": session, "prompt": [{"type": "text", "text": "go"}]}});
        let cancel = if round % 2 == 0 {
            json!({"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": session}})
        } else {
            json!({"jsonrpc": "2.0", "method": "$/cancel_request", "params": {"requestId": id}})
        };
        acp.send_raw(format!("{prompt}\n{cancel}\n").as_bytes());
        let started = std::time::Instant::now();
        let (notes, response) = acp.until_response(&json!(id));
        assert_eq!(
            response["result"]["stopReason"], "cancelled",
            "{cancel}: {response}"
        );
        // Only the first prompt titles the session, cancelled or not.
        let expected: &[&str] = if round == 0 {
            &["session_info_update"]
        } else {
            &[]
        };
        let kinds: Vec<&str> = notes
            .iter()
            .map(|n| n["params"]["update"]["sessionUpdate"].as_str().unwrap())
            .collect();
        assert_eq!(kinds, expected, "{notes:?}");
        assert!(started.elapsed() < Duration::from_secs(2));
    }
}

#[test]
fn a_prompt_is_answered_when_its_session_is_resumed_while_its_events_wait() {
    // The client reads nothing while a run streams 6,000 chunks, so the
    // session's forwarder stalls on a full stdout long before the run's end;
    // the run ends; then the client resumes the session, which replaces the
    // forwarder. The prompt is answered all the same (a forwarder that was
    // stopped dropped the end it had not reached, and the new one subscribed
    // after it).
    use std::io::{BufRead, BufReader, Write};
    let dir = TestDir::new();
    let script = dir.script(
        "long.jsonl",
        &[json!([{"repeat": {"count": 6000, "text": "x", "apart": true}}, {"text": "END"}])],
    );
    let stderr = dir.path().join("stderr-resume.log");
    let mut child = dir.spawn_acp(&["--script", script.to_str().unwrap()], &stderr);
    let mut stdin = child.stdin.take().unwrap();
    let (lines, got) = std::sync::mpsc::channel::<Value>();
    let stdout = child.stdout.take().unwrap();
    let (reading, read) = std::sync::mpsc::channel::<()>();
    std::thread::spawn(move || {
        let mut stdout = BufReader::new(stdout);
        let mut line = String::new();
        loop {
            line.clear();
            if matches!(stdout.read_line(&mut line), Ok(0) | Err(_)) {
                return;
            }
            let value: Value = serde_json::from_str(&line).unwrap();
            let answer = value.get("method").is_none();
            if lines.send(value).is_err() {
                return;
            }
            // After an answer, wait until the test says read on.
            if answer && read.recv().is_err() {
                return;
            }
        }
    });
    let mut send = |message: Value| {
        writeln!(stdin, "{message}").unwrap();
        stdin.flush().unwrap();
    };
    let answer_to = |id: i64| loop {
        let message = got
            .recv_timeout(Duration::from_secs(60))
            .unwrap_or_else(|_| {
                panic!(
                    "no answer to {id}; stderr:\n{}",
                    std::fs::read_to_string(&stderr).unwrap_or_default()
                )
            });
        if message["id"] == json!(id) && message.get("method").is_none() {
            return message;
        }
    };
    send(
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": 1, "clientCapabilities": {}}}),
    );
    answer_to(1);
    reading.send(()).unwrap();
    send(
        json!({"jsonrpc": "2.0", "id": 2, "method": "session/new", "params": {"cwd": dir.workspace(), "mcpServers": []}}),
    );
    let session = answer_to(2)["result"]["sessionId"].clone();
    // Not told to read on: stdout fills up behind the session/new answer.
    send(
        json!({"jsonrpc": "2.0", "id": 3, "method": "session/prompt", "params": {"sessionId": session, "prompt": [{"type": "text", "text": "go"}]}}),
    );
    let db = rusqlite::Connection::open_with_flags(
        dir.data_dir().join("pincer.db"),
        rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY,
    )
    .unwrap();
    db.busy_timeout(Duration::from_secs(10)).unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    loop {
        let ended: i64 = db
            .query_row(
                "SELECT count(*) FROM runs WHERE state = 'completed'",
                [],
                |row| row.get(0),
            )
            .unwrap_or(0);
        if ended == 1 {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "the run did not end");
        std::thread::sleep(Duration::from_millis(20));
    }
    send(
        json!({"jsonrpc": "2.0", "id": 4, "method": "session/resume", "params": {"sessionId": session, "cwd": dir.workspace(), "mcpServers": []}}),
    );
    // Now read on, answer after answer.
    let mut answered = std::collections::BTreeMap::new();
    while answered.len() < 2 {
        reading.send(()).unwrap();
        let message = got
            .recv_timeout(Duration::from_secs(60))
            .unwrap_or_else(|_| {
                panic!(
                    "answered so far: {answered:?}; stderr:\n{}",
                    std::fs::read_to_string(&stderr).unwrap_or_default()
                )
            });
        if message.get("method").is_none() {
            answered.insert(message["id"].as_i64().unwrap(), message);
        }
    }
    assert_eq!(
        answered[&3]["result"]["stopReason"], "end_turn",
        "{:?}",
        answered[&3]
    );
    assert!(answered[&4].get("result").is_some(), "{:?}", answered[&4]);
    let _ = child.kill();
    let _ = child.wait();
}
