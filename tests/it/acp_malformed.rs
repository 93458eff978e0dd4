//! Bad input against the real binary: every malformed message gets the right
//! JSON-RPC error and the server keeps answering.

use std::time::Duration;

use crate::support::{AcpProcess, TestDir};
use pretty_assertions::assert_eq;
use serde_json::{Value, json};

fn error_code(message: &Value) -> i64 {
    message["error"]["code"]
        .as_i64()
        .unwrap_or_else(|| panic!("not an error: {message}"))
}

/// The server still answers a valid request.
fn assert_alive(acp: &mut AcpProcess) {
    let result = acp.call("session/list", json!({}));
    assert!(result["sessions"].is_array());
}

#[test]
fn invalid_json_is_a_parse_error_with_null_id() {
    let dir = TestDir::new();
    let mut acp = AcpProcess::spawn(&dir, &[]);
    acp.send_raw(b"{\"jsonrpc\": \"2.0\", \"id\": 1, \"method\": \n");
    let reply = acp.recv();
    assert_eq!(error_code(&reply), -32700);
    assert_eq!(reply["id"], Value::Null);
    assert_alive(&mut acp);
}

#[test]
fn non_request_objects_are_invalid_requests() {
    let dir = TestDir::new();
    let mut acp = AcpProcess::spawn(&dir, &[]);
    for (line, id) in [
        ("42", Value::Null),
        ("\"hello\"", Value::Null),
        (
            "[{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\"}]",
            Value::Null,
        ),
        ("{\"jsonrpc\":\"2.0\"}", Value::Null),
        (
            "{\"jsonrpc\":\"1.0\",\"id\":5,\"method\":\"initialize\"}",
            json!(5),
        ),
        ("{\"id\":6,\"method\":\"initialize\"}", json!(6)),
        ("{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":12}", json!(7)),
        (
            "{\"jsonrpc\":\"2.0\",\"id\":[1],\"method\":\"initialize\"}",
            Value::Null,
        ),
    ] {
        acp.send_raw(format!("{line}\n").as_bytes());
        let reply = acp.recv();
        assert_eq!(error_code(&reply), -32600, "for {line}: {reply}");
        assert_eq!(reply["id"], id, "for {line}");
    }
    assert_alive(&mut acp);
}

#[test]
fn unknown_methods_fail_and_unknown_notifications_are_ignored() {
    let dir = TestDir::new();
    let mut acp = AcpProcess::spawn(&dir, &[]);
    let (_, reply) = acp.request("session/teleport", json!({}));
    assert_eq!(error_code(&reply), -32601);
    let (_, reply) = acp.request("_other/extension", json!({}));
    assert_eq!(error_code(&reply), -32601);
    acp.notify("session/teleport", json!({}));
    acp.notify("_other/notice", json!({"x": 1}));
    // Nothing answers the notifications: the next message is the list response.
    let id = acp.request_async("session/list", json!({}));
    let reply = acp.recv();
    assert_eq!(reply["id"], id);
}

#[test]
fn invalid_params_name_the_field() {
    let dir = TestDir::new();
    let mut acp = AcpProcess::spawn(&dir, &[]);
    let (_, reply) = acp.request(
        "initialize",
        json!({"protocolVersion": "one", "clientCapabilities": {}}),
    );
    assert_eq!(error_code(&reply), -32602);
    assert!(
        reply["error"]["message"]
            .as_str()
            .unwrap()
            .contains("protocolVersion"),
        "{reply}"
    );
    let (_, reply) = acp.request("session/new", json!({"mcpServers": []}));
    assert_eq!(error_code(&reply), -32602);
    assert_eq!(
        reply["error"]["message"],
        "Invalid params: missing field `cwd`"
    );
    let (_, reply) = acp.request(
        "session/new",
        json!({"cwd": "relative/dir", "mcpServers": []}),
    );
    assert_eq!(error_code(&reply), -32602);
    assert!(
        reply["error"]["message"]
            .as_str()
            .unwrap()
            .contains("`cwd` must be an absolute path"),
        "{reply}"
    );
    let ws = dir.workspace();
    let session = acp.new_session(&ws);
    let (_, reply) = acp.request(
        "session/prompt",
        json!({"sessionId": session, "prompt": [{"type": "text"}]}),
    );
    assert_eq!(error_code(&reply), -32602);
    assert!(
        reply["error"]["message"]
            .as_str()
            .unwrap()
            .contains("prompt[0]"),
        "{reply}"
    );
    let (_, reply) = acp.request(
        "session/prompt",
        json!({"sessionId": session, "prompt": []}),
    );
    assert_eq!(error_code(&reply), -32602);
    let (_, reply) = acp.request("_pincer/runs/get", json!({}));
    assert_eq!(
        reply["error"]["message"],
        "Invalid params: missing field `runId`"
    );
}

#[test]
fn unknown_sessions_and_runs_are_resource_not_found() {
    let dir = TestDir::new();
    let mut acp = AcpProcess::spawn(&dir, &[]);
    let (_, reply) = acp.request(
        "session/prompt",
        json!({"sessionId": "ses_x", "prompt": [{"type": "text", "text": "hi"}]}),
    );
    assert_eq!(error_code(&reply), -32002);
    let (_, reply) = acp.request(
        "session/load",
        json!({"sessionId": "ses_x", "cwd": "/tmp", "mcpServers": []}),
    );
    assert_eq!(error_code(&reply), -32002);
    let (_, reply) = acp.request("_pincer/runs/get", json!({"runId": "run_x"}));
    assert_eq!(error_code(&reply), -32002);
    let (_, reply) = acp.request("_pincer/runs/list", json!({"sessionId": "ses_x"}));
    assert_eq!(error_code(&reply), -32002);
}

#[test]
fn a_64_mib_line_is_refused_and_the_server_goes_on() {
    let dir = TestDir::new();
    let mut acp = AcpProcess::spawn(&dir, &[]);
    let mut line = vec![b'x'; 64 * 1024 * 1024];
    line.push(b'\n');
    acp.send_raw(&line);
    let reply = acp.recv();
    assert_eq!(error_code(&reply), -32600);
    assert!(
        reply["error"]["data"]
            .as_str()
            .unwrap()
            .contains("exceeds the limit"),
        "{reply}"
    );
    assert_alive(&mut acp);
    // A 64 MiB line that looks like a request is refused the same way.
    let mut big =
        b"{\"jsonrpc\":\"2.0\",\"id\":99,\"method\":\"session/list\",\"params\":{\"cursor\":\""
            .to_vec();
    big.extend(std::iter::repeat_n(b'a', 64 * 1024 * 1024));
    big.extend(b"\"}}\n");
    acp.send_raw(&big);
    let reply = acp.recv();
    assert_eq!(error_code(&reply), -32600);
    assert_alive(&mut acp);
}

#[test]
fn binary_garbage_and_a_thousand_bad_lines_leave_the_server_answering() {
    let dir = TestDir::new();
    let mut acp = AcpProcess::spawn(&dir, &[]);
    // Deterministic pseudo-random bytes, newlines included.
    let mut state: u64 = 0x9e3779b97f4a7c15;
    let garbage: Vec<u8> = (0..200_000)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state & 0xff) as u8
        })
        .collect();
    acp.send_raw(&garbage);
    acp.send_raw(b"\n");
    let mut bad = Vec::new();
    for i in 0..1000 {
        bad.extend(format!("{{not json {i}\n").as_bytes());
    }
    acp.send_raw(&bad);
    let id = acp.request_async("session/list", json!({}));
    let (errors, reply) = acp.until_response(&id);
    assert!(reply["result"]["sessions"].is_array());
    assert!(
        errors.len() >= 1000,
        "one error per bad line, got {}",
        errors.len()
    );
    assert!(
        errors
            .iter()
            .all(|e| e["id"] == Value::Null && e["error"]["code"].is_i64())
    );
    let parse_errors = errors
        .iter()
        .filter(|e| e["error"]["code"] == -32700)
        .count();
    assert!(parse_errors >= 1000, "{parse_errors}");
}

#[test]
fn stdin_closing_exits_cleanly_with_writes_on_disk() {
    let dir = TestDir::new();
    let script = dir.script("s.jsonl", &[json!([{"text": "done"}])]);
    let mut acp = AcpProcess::spawn(&dir, &["--script", script.to_str().unwrap()]);
    acp.initialize();
    let session = acp.new_session(&dir.workspace());
    acp.call(
        "session/prompt",
        json!({"sessionId": session, "prompt": [{"type": "text", "text": "hi"}]}),
    );
    let status = acp.finish();
    assert!(status.success(), "{status:?}");
    let shown = dir.show_session(&session);
    assert_eq!(shown["runs"][0]["state"], "completed");
    assert_eq!(shown["history"].as_array().unwrap().len(), 2);
    assert_eq!(shown["history"][1]["message"]["text"], "done");
}

#[test]
fn stdin_closing_mid_run_cancels_it_and_records_the_end() {
    let dir = TestDir::new();
    let script = dir.script(
        "slow.jsonl",
        &[json!([{"text": "part"}, {"delay_ms": 30000}])],
    );
    let mut acp = AcpProcess::spawn(&dir, &["--script", script.to_str().unwrap()]);
    acp.initialize();
    let session = acp.new_session(&dir.workspace());
    acp.prompt_async(&session, "hi");
    let info = acp.recv();
    assert_eq!(
        info["params"]["update"]["sessionUpdate"],
        "session_info_update"
    );
    let part = acp.recv();
    assert_eq!(part["params"]["update"]["content"]["text"], "part");
    let started = std::time::Instant::now();
    let status = acp.finish();
    assert!(status.success());
    assert!(started.elapsed() < Duration::from_secs(5));
    let shown = dir.show_session(&session);
    assert_eq!(shown["runs"][0]["state"], "cancelled");
    assert_eq!(shown["history"][1]["message"]["text"], "part");
    assert_eq!(shown["history"][1]["message"]["interrupted"], true);
}

#[test]
fn sigterm_mid_run_exits_cleanly_and_records_the_run_as_cancelled() {
    let dir = TestDir::new();
    let script = dir.script(
        "slow.jsonl",
        &[json!([{"text": "part"}, {"delay_ms": 30000}])],
    );
    let mut acp = AcpProcess::spawn(&dir, &["--script", script.to_str().unwrap()]);
    acp.initialize();
    let session = acp.new_session(&dir.workspace());
    let prompt = acp.prompt_async(&session, "hi");
    acp.recv();
    let status = std::process::Command::new("kill")
        .args(["-TERM", &acp.child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    // The pending prompt is answered before the process exits.
    let (_, response) = acp.until_response(&prompt);
    assert_eq!(response["result"]["stopReason"], "cancelled");
    let status = acp.finish();
    assert!(status.success(), "{status:?}");
    let shown = dir.show_session(&session);
    assert_eq!(shown["runs"][0]["state"], "cancelled");
}

/// Errors quote what the client sent as a short prefix with its length, never
/// whole: a 1 MB method name, `cwd`, `cursor` or `sessionId`, and serde's
/// messages that quote the offending value.
#[test]
fn errors_quote_outside_values_as_a_short_prefix() {
    let dir = TestDir::new();
    let mut acp = AcpProcess::spawn(&dir, &[]);
    let huge = "v".repeat(1 << 20);
    let shown = format!("{}… (1048576 bytes)", "v".repeat(120));
    let cases = [
        (huge.clone(), json!({})),
        (
            "session/new".to_owned(),
            json!({"cwd": huge, "mcpServers": []}),
        ),
        ("session/list".to_owned(), json!({"cursor": huge})),
        (
            "session/set_mode".to_owned(),
            json!({"sessionId": huge, "modeId": "full"}),
        ),
        ("_pincer/runs/get".to_owned(), json!({"runId": huge})),
        (
            "session/new".to_owned(),
            json!({"cwd": "/tmp", "mcpServers": [{"type": huge, "name": "x"}]}),
        ),
        (
            "session/set_config_option".to_owned(),
            json!({"sessionId": "ses_x", "configId": "mode", "value": 7, "x": huge}),
        ),
        (
            "initialize".to_owned(),
            json!({"protocolVersion": huge, "clientCapabilities": {}}),
        ),
    ];
    // The first five name the value; the rest may or may not quote it.
    for (index, (method, params)) in cases.into_iter().enumerate() {
        let (_, reply) = acp.request(&method, params);
        let error = reply["error"].to_string();
        assert!(
            error.len() < 2048,
            "{} bytes for {}: {}",
            error.len(),
            &method[..method.len().min(40)],
            &error[..300]
        );
        assert!(
            index >= 5 || error.contains(&shown),
            "{}: {error}",
            &method[..method.len().min(40)]
        );
    }
    // An unknown variant that serde quotes in backticks.
    let (_, reply) = acp.request(
        "session/prompt",
        json!({"sessionId": "ses_x", "prompt": [{"type": huge}]}),
    );
    let error = reply["error"].to_string();
    assert!(error.len() < 2048, "{}", error.len());
    assert!(error.contains(&shown), "{error}");
    assert_alive(&mut acp);
}

/// An id is echoed as it was written, or, when ACP does not allow it (an
/// int64, a string or null), refused with -32600 and `id: null`.
#[test]
fn ids_come_back_exactly_or_are_refused() {
    let dir = TestDir::new();
    let mut acp = AcpProcess::spawn(&dir, &[]);
    for id in [
        json!(i64::MAX),
        json!(i64::MIN),
        json!(-1),
        json!("a string id"),
        Value::Null,
    ] {
        acp.send(&json!({"jsonrpc": "2.0", "id": id, "method": "session/list", "params": {}}));
        let reply = acp.recv();
        assert_eq!(reply["id"], id, "{reply}");
        assert!(reply["result"]["sessions"].is_array(), "{reply}");
    }
    for id in [
        "123456789012345678901234567890",
        "-9223372036854775809",
        "1.5",
        "true",
        "{\"a\":1}",
    ] {
        acp.send_raw(
            format!("{{\"jsonrpc\":\"2.0\",\"id\":{id},\"method\":\"session/list\"}}\n").as_bytes(),
        );
        let reply = acp.recv();
        assert_eq!(error_code(&reply), -32600, "for {id}: {reply}");
        assert_eq!(reply["id"], Value::Null, "for {id}");
    }
    assert_alive(&mut acp);
}
