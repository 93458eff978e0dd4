//! Tool calls through the real binary: headless approvals, modes, the receipt
//! chain and `pincer verify`, client file access over ACP, approval timeouts.

use std::process::{Output, Stdio};
use std::time::Duration;

use crate::support::{AcpProcess, TestDir};
use pretty_assertions::assert_eq;
use serde_json::{Value, json};

fn run(dir: &TestDir, args: &[&str]) -> Output {
    dir.command()
        .args(args)
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn jsonl(out: &Output) -> Vec<Value> {
    String::from_utf8(out.stdout.clone())
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn events<'a>(lines: &'a [Value], kind: &str) -> Vec<&'a Value> {
    lines.iter().filter(|l| l["type"] == kind).collect()
}

fn write_call(path: &str, content: &str) -> Value {
    json!([{"tool_call": {"name": "write_file", "arguments": {"path": path, "content": content}}}])
}

/// `pincer run` in the test's workspace with a script, JSON lines out.
fn run_script(dir: &TestDir, script: &[Value], extra: &[&str]) -> Output {
    let script = dir.script("s.jsonl", script);
    let ws = dir.workspace();
    let mut args = vec![
        "run",
        "--output",
        "jsonl",
        "--cwd",
        ws.to_str().unwrap(),
        "--script",
        script.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    if !extra.contains(&"--input") {
        args.push("go");
    }
    run(dir, &args)
}

#[test]
fn headless_refuses_what_nobody_can_approve_and_approves_with_approve_all() {
    let dir = TestDir::new();
    let script = [write_call("a.txt", "A\n"), json!([{"text": "done"}])];
    let out = run_script(&dir, &script, &[]);
    // The run completed, but a call it needed was refused: exit 3, and
    // stderr names the flags that would have let it run.
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(
        err.contains("refused write_file")
            && err.contains("nobody can give it")
            && err.contains("--approve all")
            && err.contains("--mode full"),
        "{err}"
    );
    let lines = jsonl(&out);
    let decided = events(&lines, "approval_decided");
    assert_eq!(decided.len(), 1, "{lines:#?}");
    assert_eq!(decided[0]["decision"], "unattended");
    let result = events(&lines, "tool_result")[0];
    assert_eq!(result["is_error"], true);
    assert_eq!(result["verdict"], "rejected");
    // The model is told nobody was there to ask, not that a person said no.
    let told = result["output"].as_str().unwrap();
    assert!(
        told.contains("nobody is present") && !told.contains("by the user"),
        "{told}"
    );
    assert!(!dir.workspace().join("a.txt").exists());
    // The run went on to the next model turn.
    assert_eq!(events(&lines, "text_delta")[0]["text"], "done");

    let dir = TestDir::new();
    let out = run_script(&dir, &script, &["--approve", "all"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(
        std::fs::read_to_string(dir.workspace().join("a.txt")).unwrap(),
        "A\n"
    );
    let lines = jsonl(&out);
    let result = events(&lines, "tool_result")[0];
    assert_eq!(result["verdict"], "approved");
    assert_eq!(result["diffs"][0]["new_text"], "A\n");
    // The run was waiting while the approval was open.
    let states: Vec<&str> = events(&lines, "state")
        .iter()
        .map(|s| s["state"].as_str().unwrap())
        .collect();
    assert_eq!(
        states,
        vec!["queued", "running", "waiting", "running", "completed"]
    );
}

#[test]
fn input_scripts_answer_approvals_in_order() {
    let dir = TestDir::new();
    let input = dir.path().join("input.jsonl");
    std::fs::write(
        &input,
        [
            json!({"prompt": "write two files"}),
            json!({"approve": "allow_once", "tool": "write_file"}),
            json!({"approve": "reject_once"}),
        ]
        .iter()
        .map(Value::to_string)
        .collect::<Vec<_>>()
        .join("\n"),
    )
    .unwrap();
    let script = [
        write_call("yes.txt", "y"),
        write_call("no.txt", "n"),
        json!([{"text": "ok"}]),
    ];
    let out = run_script(&dir, &script, &["--input", input.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(dir.workspace().join("yes.txt").exists());
    assert!(!dir.workspace().join("no.txt").exists());
    let lines = jsonl(&out);
    let decisions: Vec<&str> = events(&lines, "approval_decided")
        .iter()
        .map(|d| d["decision"].as_str().unwrap())
        .collect();
    assert_eq!(decisions, vec!["allow_once", "reject_once"]);

    // An answer before any prompt is a usage error naming the line.
    std::fs::write(&input, "{\"approve\": \"allow_once\"}\n").unwrap();
    let out = run_script(&dir, &script, &["--input", input.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("line 1: an approval answer must follow the prompt"),
        "{}",
        stderr(&out)
    );
    std::fs::write(&input, "{\"prompt\": \"x\"}\n{\"approve\": \"maybe\"}\n").unwrap();
    let out = run_script(&dir, &script, &["--input", input.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("line 2"), "{}", stderr(&out));
}

#[test]
fn read_only_mode_denies_mutations_and_full_mode_runs_them() {
    let dir = TestDir::new();
    let script = [write_call("a.txt", "A"), json!([{"text": "fine"}])];
    let out = run_script(&dir, &script, &["--mode", "read_only", "--approve", "all"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let lines = jsonl(&out);
    assert!(events(&lines, "approval_requested").is_empty());
    let result = events(&lines, "tool_result")[0];
    assert_eq!(result["verdict"], "denied");
    assert!(
        result["output"]
            .as_str()
            .unwrap()
            .starts_with("denied by policy: read_only mode"),
        "{result}"
    );
    assert!(!dir.workspace().join("a.txt").exists());

    let out = run_script(&dir, &script, &["--mode", "full"]);
    let lines = jsonl(&out);
    assert!(events(&lines, "approval_requested").is_empty());
    assert_eq!(events(&lines, "tool_result")[0]["verdict"], "allowed");
    assert!(dir.workspace().join("a.txt").exists());

    let out = run_script(&dir, &script, &["--mode", "yolo"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("mode: expected read_only, supervised or full, got \"yolo\""),
        "{}",
        stderr(&out)
    );
}

#[test]
fn every_call_leaves_a_receipt_and_verify_detects_tampering() {
    let dir = TestDir::new();
    std::fs::write(dir.workspace().join("r.txt"), "read me").unwrap();
    let script = [
        json!([
            {"tool_call": {"name": "read_file", "arguments": {"path": "r.txt"}}},
            {"tool_call": {"name": "read_file", "arguments": {"path": "../outside"}}},
            {"tool_call": {"name": "no_such_tool", "arguments": {}}}
        ]),
        write_call("w.txt", "w"),
        json!([{"text": "done"}]),
    ];
    let out = run_script(&dir, &script, &["--approve", "all"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let lines = jsonl(&out);
    let verdicts: Vec<&str> = events(&lines, "tool_result")
        .iter()
        .map(|r| r["verdict"].as_str().unwrap())
        .collect();
    assert_eq!(verdicts, vec!["allowed", "denied", "invalid", "approved"]);

    let verify = run(&dir, &["verify", "--json"]);
    assert_eq!(verify.status.code(), Some(0), "{}", stderr(&verify));
    let report: Value = serde_json::from_slice(&verify.stdout).unwrap();
    assert_eq!(report["ok"], true);
    assert_eq!(report["receipts"], 4);

    // Tamper: someone with the database rewrites a receipt's verdict.
    let db = rusqlite::Connection::open(dir.data_dir().join("pincer.db")).unwrap();
    db.execute_batch(
        "DROP TRIGGER receipts_reject_update;
         UPDATE receipts SET verdict = 'allowed' WHERE seq = 4;",
    )
    .unwrap();
    drop(db);
    let verify = run(&dir, &["verify"]);
    assert_eq!(verify.status.code(), Some(1));
    let text = String::from_utf8(verify.stdout).unwrap();
    assert!(
        text.starts_with("BROKEN at receipt 4: stored hash")
            && text.contains("the receipt was altered"),
        "{text}"
    );

    // Removing the newest receipt cannot break a link, but the tape still
    // records four tool results for the run.
    let dir2 = TestDir::new();
    let out = run_script(&dir2, &script, &["--approve", "all"]);
    assert_eq!(out.status.code(), Some(0));
    let db = rusqlite::Connection::open(dir2.data_dir().join("pincer.db")).unwrap();
    db.execute_batch(
        "DROP TRIGGER receipts_reject_delete;
         DELETE FROM receipts WHERE seq = 4;",
    )
    .unwrap();
    drop(db);
    let verify = run(&dir2, &["verify"]);
    assert_eq!(verify.status.code(), Some(1));
    let text = String::from_utf8(verify.stdout).unwrap();
    assert!(
        text.contains("ok: 3 receipts")
            && text.contains("has 4 tool results on the tape but 3 receipts"),
        "{text}"
    );
}

#[test]
fn the_receipt_table_refuses_updates_and_deletes() {
    let dir = TestDir::new();
    let out = run_script(
        &dir,
        &[
            json!([{"tool_call": {"name": "read_file", "arguments": {"path": "x"}}}]),
            json!([{"text": "."}]),
        ],
        &[],
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let db = rusqlite::Connection::open(dir.data_dir().join("pincer.db")).unwrap();
    let err = db
        .execute("UPDATE receipts SET tool = 'x'", [])
        .unwrap_err();
    assert!(err.to_string().contains("append-only"), "{err}");
    let err = db.execute("DELETE FROM receipts", []).unwrap_err();
    assert!(err.to_string().contains("append-only"), "{err}");
}

/// Reads messages until `pick` returns something, answering nothing else.
fn wait_for(acp: &mut AcpProcess, mut pick: impl FnMut(&Value) -> bool) -> Value {
    loop {
        let message = acp
            .recv_timeout(Duration::from_secs(10))
            .unwrap_or_else(|| panic!("timed out; stderr:\n{}", acp.stderr()));
        if pick(&message) {
            return message;
        }
    }
}

#[test]
fn file_tools_go_through_the_client_when_it_offers_fs() {
    let dir = TestDir::new();
    let ws = dir.workspace();
    let script = dir.script(
        "s.jsonl",
        &[
            json!([{"tool_call": {"name": "read_file", "arguments": {"path": "unsaved.txt"}}}]),
            json!([{"tool_call": {"name": "edit_file", "arguments": {"path": "unsaved.txt", "edits": [{"old_text": "buffer", "new_text": "BUFFER"}]}}}]),
            json!([{"text": "done"}]),
        ],
    );
    let mut acp = AcpProcess::spawn(
        &dir,
        &["--script", script.to_str().unwrap(), "--mode", "full"],
    );
    acp.call(
        "initialize",
        json!({"protocolVersion": 1, "clientCapabilities": {"fs": {"readTextFile": true, "writeTextFile": true}}}),
    );
    let session = acp.new_session(&ws);
    let prompt = acp.prompt_async(&session, "go");
    let path = ws.join("unsaved.txt");
    let mut writes = Vec::new();
    let mut reads = 0;
    let response = loop {
        let message = wait_for(&mut acp, |_| true);
        match message["method"].as_str() {
            Some("fs/read_text_file") => {
                assert_eq!(message["params"]["path"], path.to_str().unwrap());
                assert_eq!(message["params"]["sessionId"], session.as_str());
                reads += 1;
                acp.send(&json!({"jsonrpc": "2.0", "id": message["id"], "result": {"content": "an unsaved buffer\n"}}));
            }
            Some("fs/write_text_file") => {
                writes.push(message["params"]["content"].clone());
                acp.send(&json!({"jsonrpc": "2.0", "id": message["id"], "result": {}}));
            }
            _ if message["id"] == prompt => break message,
            _ => {}
        }
    };
    assert_eq!(response["result"]["stopReason"], "end_turn");
    assert!(
        reads >= 2,
        "the read and the edit's plan read through the client"
    );
    assert_eq!(writes, vec![json!("an unsaved BUFFER\n")]);
    // The edit landed in the editor, not on disk.
    assert!(!path.exists());
    let results: Vec<&Value> = acp
        .received
        .iter()
        .filter(|m| m["params"]["update"]["status"] == "completed")
        .collect();
    assert_eq!(
        results[0]["params"]["update"]["content"][0]["content"]["text"],
        "an unsaved buffer\n"
    );
    acp.finish();
}

#[test]
fn an_unanswered_approval_times_out_as_a_rejection() {
    let dir = TestDir::new();
    let config = dir.path().join("config.toml");
    std::fs::write(&config, "approval_timeout_secs = 1\n").unwrap();
    let script = dir.script(
        "s.jsonl",
        &[write_call("late.txt", "x"), json!([{"text": "moving on"}])],
    );
    let mut acp = AcpProcess::spawn(
        &dir,
        &[
            "--script",
            script.to_str().unwrap(),
            "--config",
            config.to_str().unwrap(),
        ],
    );
    acp.initialize();
    let session = acp.new_session(&dir.workspace());
    let prompt = acp.prompt_async(&session, "go");
    // The request arrives; nobody answers it.
    let request = wait_for(&mut acp, |m| m["method"] == "session/request_permission");
    assert_eq!(request["params"]["toolCall"]["kind"], "edit");
    let (notes, response) = acp.until_response(&prompt);
    assert_eq!(response["result"]["stopReason"], "end_turn");
    let failed = notes
        .iter()
        .find(|n| n["params"]["update"]["status"] == "failed")
        .expect("a failed tool call update");
    let text = failed["params"]["update"]["content"][0]["content"]["text"]
        .as_str()
        .unwrap();
    assert_eq!(text, "rejected: nobody approved the call within 1 s");
    // The withdrawn request is cancelled for the client (before or after the
    // prompt's response: the two are written by independent tasks).
    let is_cancel =
        |n: &Value| n["method"] == "$/cancel_request" && n["params"]["requestId"] == request["id"];
    if !notes.iter().any(is_cancel) {
        wait_for(&mut acp, is_cancel);
    }
    assert!(!dir.workspace().join("late.txt").exists());
    acp.finish();
}

#[test]
fn allow_always_over_acp_is_listed_by_the_grants_extension() {
    let dir = TestDir::new();
    let script = dir.script(
        "s.jsonl",
        &[
            json!([{"tool_call": {"name": "shell", "arguments": {"command": "touch made-by-shell"}}}]),
            json!([{"tool_call": {"name": "shell", "arguments": {"command": "touch made-by-shell"}}}]),
            json!([{"text": "done"}]),
        ],
    );
    let mut acp = AcpProcess::spawn(&dir, &["--script", script.to_str().unwrap()]);
    acp.initialize();
    let session = acp.new_session(&dir.workspace());
    let prompt = acp.prompt_async(&session, "go");
    let request = wait_for(&mut acp, |m| m["method"] == "session/request_permission");
    assert_eq!(request["params"]["toolCall"]["kind"], "execute");
    acp.send(&json!({"jsonrpc": "2.0", "id": request["id"], "result": {"outcome": {"outcome": "selected", "optionId": "allow_always"}}}));
    let (notes, response) = acp.until_response(&prompt);
    assert_eq!(response["result"]["stopReason"], "end_turn");
    // The second, identical command was not asked about.
    assert!(
        !notes
            .iter()
            .any(|n| n["method"] == "session/request_permission")
    );
    let grants = acp.call("_pincer/grants/list", json!({"sessionId": session}));
    assert_eq!(
        grants,
        json!({"grants": [{"tool": "shell", "scope": "touch made-by-shell", "decision": "allow_always"}]})
    );
    acp.finish();
}

#[test]
fn session_load_replays_tool_calls_with_their_kind_and_result() {
    let dir = TestDir::new();
    std::fs::write(dir.workspace().join("r.txt"), "content").unwrap();
    let out = run_script(
        &dir,
        &[
            json!([{"tool_call": {"name": "read_file", "arguments": {"path": "r.txt"}}}]),
            json!([{"text": "read it"}]),
        ],
        &[],
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let session = jsonl(&out)[0]["session_id"].as_str().unwrap().to_owned();
    let script = dir.script("none.jsonl", &[json!([{"text": "-"}])]);
    let mut acp = AcpProcess::spawn(&dir, &["--script", script.to_str().unwrap()]);
    acp.initialize();
    let (notes, response) = acp.request(
        "session/load",
        json!({"sessionId": session, "cwd": dir.workspace(), "mcpServers": []}),
    );
    assert!(response.get("result").is_some(), "{response}");
    let updates: Vec<&Value> = notes.iter().map(|n| &n["params"]["update"]).collect();
    let call = updates
        .iter()
        .find(|u| u["sessionUpdate"] == "tool_call")
        .unwrap();
    assert_eq!(call["kind"], "read");
    assert_eq!(call["rawInput"], json!({"path": "r.txt"}));
    let result = updates
        .iter()
        .find(|u| u["sessionUpdate"] == "tool_call_update")
        .unwrap();
    assert_eq!(result["status"], "completed");
    assert_eq!(result["content"][0]["content"]["text"], "content");
    acp.finish();
}

/// An approval shows the call with secrets redacted — its title, its
/// arguments, its shell command — but an edit's diff as it will be written,
/// so the person approves the exact change (`docs/tools.md`).
#[test]
fn an_approval_shows_the_call_redacted_and_the_diff_as_written() {
    let dir = TestDir::new();
    let key = "sk-proj-Zx98Cv76Bn54Mm32Lk10Jh98";
    let input = dir.path().join("input.jsonl");
    std::fs::write(
        &input,
        [
            json!({"prompt": "store the key"}),
            json!({"approve": "reject_once", "tool": "write_file"}),
            json!({"approve": "reject_once", "tool": "shell"}),
        ]
        .iter()
        .map(Value::to_string)
        .collect::<Vec<_>>()
        .join("\n"),
    )
    .unwrap();
    let command = format!("printf %s {key} > key.txt");
    let script = [
        write_call("env.txt", &format!("OPENAI_KEY={key}\n")),
        json!([{"tool_call": {"name": "shell", "arguments": {"command": command}}}]),
        json!([{"text": "ok"}]),
    ];
    let out = run_script(&dir, &script, &["--input", input.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let lines = jsonl(&out);
    let asked = events(&lines, "approval_requested");
    assert_eq!(asked.len(), 2, "{lines:#?}");
    let (write, shell) = (asked[0], asked[1]);
    assert_eq!(
        write["arguments"],
        json!({"path": "env.txt", "content": "OPENAI_KEY=[REDACTED:openai]\n"})
    );
    assert_eq!(write["diffs"][0]["new_text"], format!("OPENAI_KEY={key}\n"));
    let redacted = "printf %s [REDACTED:openai] > key.txt";
    assert_eq!(shell["arguments"], json!({"command": redacted}));
    assert_eq!(shell["command"], redacted);
    assert_eq!(shell["title"], format!("Run `{redacted}`"));
}

/// A client like avante.nvim: reads come from the disk until it follows an
/// edit's location into a buffer; from then on they come from the buffer,
/// whose text has no final newline, and a file that does not exist reads as
/// `""` (before, `-32002`). Edits it approves (supervised mode, "Allow once")
/// land on disk as planned, each file keeping its final newline.
#[test]
fn approved_edits_land_when_the_client_reads_buffers_without_the_final_newline() {
    let dir = TestDir::new();
    let ws = dir.workspace();
    std::fs::write(ws.join("notes.txt"), "# Notes\nstatus: draft\n").unwrap();
    let script = dir.script(
        "s.jsonl",
        &[
            write_call("hello.txt", "Hello from Pincer\n"),
            json!([{"tool_call": {"name": "edit_file", "arguments": {"path": "notes.txt", "edits": [{"old_text": "status: draft", "new_text": "status: final"}]}}}]),
            json!([{"text": "done"}]),
        ],
    );
    let mut acp = AcpProcess::spawn(
        &dir,
        &["--script", script.to_str().unwrap(), "--mode", "supervised"],
    );
    acp.call(
        "initialize",
        json!({"protocolVersion": 1, "clientCapabilities": {"fs": {"readTextFile": true, "writeTextFile": true}}}),
    );
    let session = acp.new_session(&ws);
    let prompt = acp.prompt_async(&session, "go");
    let mut kinds = std::collections::HashMap::new();
    let mut buffers = std::collections::HashSet::new();
    let (mut disk_reads, mut buffer_reads, mut approvals) = (0, 0, 0);
    let response = loop {
        let message = wait_for(&mut acp, |_| true);
        let params = &message["params"];
        match message["method"].as_str() {
            Some("session/update") => {
                // avante follows the first location of an edit's tool call.
                let update = &params["update"];
                let id = update["toolCallId"].as_str().unwrap_or_default().to_owned();
                if let Some(kind) = update["kind"].as_str() {
                    kinds.insert(id.clone(), kind.to_owned());
                }
                if kinds.get(&id).map(String::as_str) == Some("edit")
                    && let Some(path) = update["locations"][0]["path"].as_str()
                {
                    buffers.insert(path.to_owned());
                }
            }
            Some("fs/read_text_file") => {
                let path = params["path"].as_str().unwrap().to_owned();
                let on_disk = std::fs::read_to_string(&path).ok();
                let answer = if buffers.contains(&path) {
                    buffer_reads += 1;
                    let text = on_disk.unwrap_or_default();
                    json!({"result": {"content": text.strip_suffix('\n').unwrap_or(&text)}})
                } else {
                    disk_reads += 1;
                    match on_disk {
                        Some(text) => json!({"result": {"content": text}}),
                        None => {
                            json!({"error": {"code": -32002, "message": "Resource not found"}})
                        }
                    }
                };
                let mut reply = json!({"jsonrpc": "2.0", "id": message["id"]});
                reply
                    .as_object_mut()
                    .unwrap()
                    .extend(answer.as_object().unwrap().clone());
                acp.send(&reply);
            }
            Some("fs/write_text_file") => {
                std::fs::write(
                    params["path"].as_str().unwrap(),
                    params["content"].as_str().unwrap(),
                )
                .unwrap();
                acp.send(&json!({"jsonrpc": "2.0", "id": message["id"], "result": {}}));
            }
            Some("session/request_permission") => {
                approvals += 1;
                // Nothing is written before the answer.
                assert_eq!(ws.join("hello.txt").exists(), approvals > 1);
                assert_eq!(
                    std::fs::read_to_string(ws.join("notes.txt")).unwrap(),
                    "# Notes\nstatus: draft\n"
                );
                acp.send(&json!({"jsonrpc": "2.0", "id": message["id"], "result": {"outcome": {"outcome": "selected", "optionId": "allow_once"}}}));
            }
            _ if message["id"] == prompt => break message,
            _ => {}
        }
    };
    assert_eq!(response["result"]["stopReason"], "end_turn");
    assert_eq!(approvals, 2);
    // Each file was planned from the disk and read again from its buffer.
    assert_eq!((disk_reads, buffer_reads), (2, 2));
    assert_eq!(
        std::fs::read_to_string(ws.join("hello.txt")).unwrap(),
        "Hello from Pincer\n"
    );
    assert_eq!(
        std::fs::read_to_string(ws.join("notes.txt")).unwrap(),
        "# Notes\nstatus: final\n"
    );
    let failed: Vec<&Value> = acp
        .received
        .iter()
        .filter(|m| m["params"]["update"]["status"] == "failed")
        .collect();
    assert!(failed.is_empty(), "{failed:?}");
    acp.finish();
}
