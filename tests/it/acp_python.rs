//! The ACP face driven by the official Python SDK (`agent-client-protocol`
//! on PyPI, the version tests/fixtures/python-acp/requirements.txt pins) as a
//! third independent client, beside the raw JSON client and the Rust SDK.
//!
//! Each test runs a flow of tests/fixtures/python-acp/flows.py (installed
//! into its `.venv` by `scripts/test-deps.sh`): the script spawns `pincer acp`
//! with the SDK, talks to it through the SDK's typed API, checks what the SDK
//! can check by itself and prints what it saw as JSON; the test asserts on
//! that and on Pincer's side (`pincer sessions show`, tapes, files on disk).
//! A failed check in Python fails the test with the script's traceback.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::support::{BIN, TestDir, of_type};
use pretty_assertions::assert_eq;
use serde_json::{Value, json};

/// Longest a flow may take before the test kills it and fails.
const FLOW_LIMIT: Duration = Duration::from_secs(90);

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/python-acp")
}

/// The virtual environment's interpreter, with the SDK installed.
fn python() -> PathBuf {
    let python = fixtures().join(".venv/bin/python");
    assert!(
        python.exists(),
        "the Python ACP SDK is not installed ({} is missing): run `bash scripts/test-deps.sh`",
        python.display()
    );
    python
}

/// Writes `lines` as the model script and a configuration whose provider
/// `demo` plays it, with two model names (`demo/script`, `demo/fast`).
fn configure(dir: &TestDir, lines: &[Value]) {
    let script = dir.script("model.jsonl", lines);
    dir.write_config(&format!(
        "provider = \"demo\"\n[providers.demo]\nkind = \"scripted\"\nscript = {}\nmodels = [\"script\", \"fast\"]\n",
        serde_json::to_string(script.to_str().unwrap()).unwrap()
    ));
}

/// Runs flow `name` of flows.py with `params` (plus the binary, the
/// workspace and a file for pincer's stderr) in the test's isolated
/// environment, and returns what it printed. Fails the test, with the
/// script's and pincer's stderr, if the flow fails or takes too long.
fn flow(dir: &TestDir, name: &str, mut params: Value) -> Value {
    static N: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let pincer_stderr = dir.path().join(format!("pincer-{name}-{n}.log"));
    let out_path = dir.path().join(format!("python-{name}-{n}.out"));
    let err_path = dir.path().join(format!("python-{name}-{n}.err"));
    params["pincer"] = json!(BIN);
    params["cwd"] = json!(dir.workspace());
    params["stderr"] = json!(pincer_stderr);
    // The same isolated environment `pincer` commands get (HOME, config, data dir).
    let mut cmd = Command::new(python());
    cmd.env_clear();
    for (key, value) in dir.command().get_envs() {
        if let Some(value) = value {
            cmd.env(key, value);
        }
    }
    let mut child = cmd
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .arg(fixtures().join("flows.py"))
        .arg(name)
        .arg(params.to_string())
        .current_dir(dir.path())
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&out_path).unwrap())
        .stderr(std::fs::File::create(&err_path).unwrap())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + FLOW_LIMIT;
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break Some(status);
        }
        if Instant::now() > deadline {
            child.kill().unwrap();
            child.wait().unwrap();
            break None;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let read = |path: &Path| std::fs::read_to_string(path).unwrap_or_default();
    let report = || {
        format!(
            "--- python stderr\n{}\n--- pincer stderr (last 4000 bytes)\n{}",
            read(&err_path),
            tail(&read(&pincer_stderr), 4000)
        )
    };
    match status {
        None => panic!(
            "python flow {name} did not finish within {FLOW_LIMIT:?}\n{}",
            report()
        ),
        Some(status) if !status.success() => {
            panic!("python flow {name} failed ({status})\n{}", report())
        }
        Some(_) => {}
    }
    let stdout = read(&out_path);
    serde_json::from_str(&stdout).unwrap_or_else(|err| {
        panic!(
            "python flow {name} printed no JSON ({err}): {stdout:?}\n{}",
            report()
        )
    })
}

fn tail(text: &str, bytes: usize) -> &str {
    let mut start = text.len().saturating_sub(bytes);
    while !text.is_char_boundary(start) {
        start += 1;
    }
    &text[start..]
}

fn str_of(value: &Value) -> &str {
    value
        .as_str()
        .unwrap_or_else(|| panic!("expected a string, got {value}"))
}

/// `[sessionUpdate, toolCallId, status]` of each tool call update, in order.
fn tool_updates(updates: &Value) -> Vec<(String, String, String)> {
    updates
        .as_array()
        .unwrap()
        .iter()
        .filter(|u| u["sessionUpdate"] == "tool_call" || u["sessionUpdate"] == "tool_call_update")
        .map(|u| {
            (
                str_of(&u["sessionUpdate"]).to_owned(),
                str_of(&u["toolCallId"]).to_owned(),
                u["status"].as_str().unwrap_or("-").to_owned(),
            )
        })
        .collect()
}

fn triples(items: &[(&str, &str, &str)]) -> Vec<(String, String, String)> {
    items
        .iter()
        .map(|(a, b, c)| ((*a).to_owned(), (*b).to_owned(), (*c).to_owned()))
        .collect()
}

/// The one run of `session` and its tape.
fn only_run_tape(dir: &TestDir, session: &str) -> Vec<Value> {
    let shown = dir.show_session(session);
    let runs = shown["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 1, "{shown:#}");
    dir.tape(str_of(&runs[0]["run_id"]))
}

#[test]
fn initialize_new_session_and_a_streamed_reply() {
    let dir = TestDir::new();
    configure(
        &dir,
        &[
            json!([{"text": "Hello"}, {"text": ", "}, {"text": "Python"},
                 {"usage": {"input_tokens": 12, "output_tokens": 3}}]),
        ],
    );
    let out = flow(&dir, "basic", json!({"prompt": "hi"}));

    let init = &out["initialize"];
    assert_eq!(init["protocolVersion"], 1);
    let caps = &init["agentCapabilities"];
    assert_eq!(caps["loadSession"], true);
    for cap in ["list", "resume", "close", "delete"] {
        assert_eq!(
            caps["sessionCapabilities"][cap],
            json!({}),
            "{cap}: {caps:#}"
        );
    }
    let auth: Vec<&str> = init["authMethods"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| str_of(&m["id"]))
        .collect();
    assert!(auth.contains(&"pincer-provider"), "{auth:?}");
    let options: Vec<(&str, &str)> = out["newSession"]["configOptions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| (str_of(&o["id"]), str_of(&o["currentValue"])))
        .collect();
    assert_eq!(
        options,
        vec![("model", "demo/script"), ("mode", "supervised")]
    );

    assert_eq!(out["chunks"], json!(["Hello", ", ", "Python"]));
    assert_eq!(out["reply"], "Hello, Python");
    assert_eq!(out["stopReason"], "end_turn");
    // The run's tokens, read by the SDK's (draft) `usage` of the response.
    assert_eq!(
        out["response"],
        json!({"stopReason": "end_turn",
               "usage": {"inputTokens": 12, "outputTokens": 3, "totalTokens": 15}})
    );
    assert_eq!(out["exitCode"], 0);
    let session = str_of(&out["sessionId"]);
    for update in out["updates"].as_array().unwrap() {
        assert_eq!(update["sessionId"], session, "{update}");
    }

    // Pincer's side: the history and the tape hold the same reply.
    let shown = dir.show_session(session);
    assert_eq!(shown["runs"][0]["state"], "completed", "{shown:#}");
    assert_eq!(shown["history"][1]["message"]["text"], "Hello, Python");
    let tape = only_run_tape(&dir, session);
    let streamed: String = of_type(&tape, "text_delta")
        .iter()
        .map(|e| str_of(&e["text"]))
        .collect();
    assert_eq!(streamed, "Hello, Python");
    let user = of_type(&tape, "user_message");
    assert_eq!(user[0]["content"], json!([{"type": "text", "text": "hi"}]));
}

#[test]
fn permission_requests_are_answered_by_the_python_client() {
    let dir = TestDir::new();
    let args = json!({"path": "src.txt", "edits": [{"old_text": "b", "new_text": "c"}]});
    configure(
        &dir,
        &[
            json!([{"tool_call": {"id": "e1", "name": "edit_file", "arguments": args}}]),
            json!([{"text": "as you wish"}]),
        ],
    );
    let src = dir.workspace().join("src.txt");
    std::fs::write(&src, "a\nb\n").unwrap();

    // Rejected: the file stays, the call fails, the run goes on.
    let out = flow(
        &dir,
        "permission",
        json!({"prompt": "go", "answers": ["reject_once"]}),
    );
    assert_eq!(out["stopReason"], "end_turn");
    assert_eq!(std::fs::read_to_string(&src).unwrap(), "a\nb\n");
    let requests = out["permissions"].as_array().unwrap();
    assert_eq!(requests.len(), 1, "{requests:#?}");
    let call = &requests[0]["toolCall"];
    assert_eq!(call["toolCallId"], "e1");
    assert_eq!(call["kind"], "edit");
    assert_eq!(call["title"], "Edit src.txt");
    assert_eq!(
        call["content"],
        json!([{"type": "diff", "path": src, "oldText": "a\nb\n", "newText": "a\nc\n"}])
    );
    let offered: Vec<&str> = requests[0]["options"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| str_of(&o["optionId"]))
        .collect();
    assert_eq!(
        offered,
        ["allow_once", "allow_always", "reject_once", "reject_always"]
    );
    assert_eq!(
        tool_updates(&out["updates"]),
        triples(&[
            ("tool_call", "e1", "pending"),
            ("tool_call_update", "e1", "-"),
            ("tool_call_update", "e1", "failed"),
        ])
    );
    let session = str_of(&out["sessionId"]);
    let tape = only_run_tape(&dir, session);
    assert_eq!(
        of_type(&tape, "approval_decided")[0]["decision"],
        "reject_once"
    );
    assert_eq!(of_type(&tape, "tool_result")[0]["verdict"], "rejected");

    // Allowed once, in a new session: the edit lands on disk.
    let out = flow(
        &dir,
        "permission",
        json!({"prompt": "go", "answers": ["allow_once"]}),
    );
    assert_eq!(out["stopReason"], "end_turn");
    assert_eq!(std::fs::read_to_string(&src).unwrap(), "a\nc\n");
    assert_eq!(
        tool_updates(&out["updates"]),
        triples(&[
            ("tool_call", "e1", "pending"),
            ("tool_call_update", "e1", "-"),
            ("tool_call_update", "e1", "in_progress"),
            ("tool_call_update", "e1", "completed"),
        ])
    );
    let tape = only_run_tape(&dir, str_of(&out["sessionId"]));
    assert_eq!(
        of_type(&tape, "approval_decided")[0]["decision"],
        "allow_once"
    );
    assert_eq!(of_type(&tape, "tool_result")[0]["verdict"], "approved");
    assert_ne!(str_of(&out["sessionId"]), session);
}

#[test]
fn a_cancel_while_permission_is_asked_withdraws_the_request() {
    let dir = TestDir::new();
    configure(
        &dir,
        &[
            json!([{"tool_call": {"id": "w1", "name": "write_file", "arguments": {"path": "out.txt", "content": "x\n"}}}]),
            json!([{"text": "never reached"}]),
        ],
    );
    // The client's handler sends session/cancel, waits for `$/cancel_request`
    // naming the permission request, then answers `cancelled`.
    let out = flow(
        &dir,
        "permission",
        json!({"prompt": "go", "answers": ["cancel"]}),
    );
    assert_eq!(out["stopReason"], "cancelled");
    assert_eq!(out["permissionIds"].as_array().unwrap().len(), 1, "{out:#}");
    assert_eq!(out["withdrawn"], out["permissionIds"]);
    assert!(!dir.workspace().join("out.txt").exists());
    assert_eq!(
        tool_updates(&out["updates"]),
        triples(&[
            ("tool_call", "w1", "pending"),
            ("tool_call_update", "w1", "-"),
            ("tool_call_update", "w1", "failed"),
        ])
    );
    let session = str_of(&out["sessionId"]);
    assert_eq!(dir.show_session(session)["runs"][0]["state"], "cancelled");
    let tape = only_run_tape(&dir, session);
    assert_eq!(
        of_type(&tape, "approval_decided")[0]["decision"],
        "cancelled"
    );
}

#[test]
fn file_tools_read_and_write_the_python_clients_buffers() {
    let dir = TestDir::new();
    configure(
        &dir,
        &[
            json!([{"tool_call": {"name": "read_file", "arguments": {"path": "unsaved.txt"}}}]),
            json!([{"tool_call": {"name": "edit_file", "arguments": {"path": "unsaved.txt", "edits": [{"old_text": "buffer", "new_text": "BUFFER"}]}}}]),
            json!([{"text": "done"}]),
        ],
    );
    let path = dir.workspace().join("unsaved.txt");
    let key = path.to_str().unwrap();
    let out = flow(
        &dir,
        "client_fs",
        json!({"prompt": "go", "answers": ["allow_once"], "buffers": {key: "an unsaved buffer\n"}}),
    );
    assert_eq!(out["stopReason"], "end_turn");
    let session = str_of(&out["sessionId"]);
    let calls = out["fsCalls"].as_array().unwrap();
    let reads: Vec<&Value> = calls
        .iter()
        .filter(|c| c["method"] == "fs/read_text_file")
        .collect();
    // The read, and the edit's read of the text it changes.
    assert!(reads.len() >= 2, "{calls:#?}");
    for read in &reads {
        assert_eq!(read["path"], key);
        assert_eq!(read["sessionId"], session);
    }
    let writes: Vec<&Value> = calls
        .iter()
        .filter(|c| c["method"] == "fs/write_text_file")
        .collect();
    assert_eq!(
        writes,
        vec![
            &json!({"method": "fs/write_text_file", "sessionId": session, "path": key,
                     "content": "an unsaved BUFFER\n"})
        ]
    );
    assert_eq!(out["buffers"][key], "an unsaved BUFFER\n");
    // The edit landed in the editor's buffer, not on disk.
    assert!(!path.exists());
    // The read's result is the buffer's text.
    let completed: Vec<&Value> = out["updates"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|u| u["status"] == "completed")
        .collect();
    assert_eq!(completed.len(), 2, "{completed:#?}");
    assert_eq!(
        completed[0]["content"][0]["content"]["text"],
        "an unsaved buffer\n"
    );
    assert_eq!(out["permissions"].as_array().unwrap().len(), 1);
}

#[test]
fn load_list_config_options_cancel_close_and_resume_through_the_python_sdk() {
    let dir = TestDir::new();
    configure(
        &dir,
        &[
            json!([{"text": "Hel"}, {"text": "lo"}]),
            json!([{"text": "second"}]),
            json!({"section": "SLOW"}),
            json!([{"text": "first"}, {"delay_ms": 30000}]),
        ],
    );
    let first = flow(&dir, "basic", json!({"prompt": "hi"}));
    assert_eq!(first["reply"], "Hello");
    let loaded = str_of(&first["sessionId"]);

    // A second process: load, list, configure, prompt, cancel.
    let out = flow(
        &dir,
        "sessions",
        json!({"load": loaded, "model": "demo/fast", "slow": "SLOW down"}),
    );
    let replayed = |updates: &Value| -> Vec<(String, String)> {
        updates
            .as_array()
            .unwrap()
            .iter()
            .map(|u| {
                (
                    str_of(&u["sessionUpdate"]).to_owned(),
                    str_of(&u["content"]["text"]).to_owned(),
                )
            })
            .collect()
    };
    let history = vec![
        ("user_message_chunk".to_owned(), "hi".to_owned()),
        ("agent_message_chunk".to_owned(), "Hello".to_owned()),
    ];
    // On the wire, the history comes before the load response.
    assert_eq!(replayed(&out["replayedOnWire"]), history);
    let seen: Vec<&Value> = out["replayed"].as_array().unwrap().iter().take(2).collect();
    assert_eq!(replayed(&json!(seen)), history);
    let load_options: Vec<&str> = out["load"]["configOptions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| str_of(&o["id"]))
        .collect();
    assert_eq!(load_options, ["model", "mode"]);

    let listed = out["list"]["sessions"].as_array().unwrap();
    assert_eq!(listed.len(), 1, "{listed:#?}");
    assert_eq!(listed[0]["sessionId"], loaded);
    assert_eq!(listed[0]["title"], "hi");
    assert_eq!(listed[0]["cwd"], json!(dir.workspace()));
    assert_eq!(out["listHere"], json!([loaded]));

    // Each answer carries every option, the changed one changed.
    let current = |response: &Value| -> Vec<(String, String)> {
        response["configOptions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|o| {
                (
                    str_of(&o["id"]).to_owned(),
                    str_of(&o["currentValue"]).to_owned(),
                )
            })
            .collect()
    };
    let pairs = |items: &[(&str, &str)]| -> Vec<(String, String)> {
        items
            .iter()
            .map(|(a, b)| ((*a).to_owned(), (*b).to_owned()))
            .collect()
    };
    assert_eq!(
        current(&out["setMode"]),
        pairs(&[("model", "demo/script"), ("mode", "read_only")])
    );
    assert_eq!(
        current(&out["setModel"]),
        pairs(&[("model", "demo/fast"), ("mode", "read_only")])
    );
    let models: Vec<&str> = out["setModel"]["configOptions"][0]["options"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| str_of(&o["value"]))
        .collect();
    assert_eq!(models, ["demo/script", "demo/fast"]);
    assert_eq!(out["badMode"]["code"], -32602, "{}", out["badMode"]);
    assert!(
        str_of(&out["badMode"]["message"]).contains("yolo"),
        "{}",
        out["badMode"]
    );

    // The loaded session goes on with the script's next turn.
    assert_eq!(
        out["more"],
        json!({"stopReason": "end_turn", "reply": "second"})
    );
    let cancel = &out["cancel"];
    assert_eq!(cancel["stopReason"], "cancelled");
    assert_eq!(cancel["reply"], "first");
    // Promptly: the turn would otherwise wait 30 s.
    assert!(cancel["secs"].as_f64().unwrap() < 5.0, "{cancel}");

    // `_pincer/runs/list` through the SDK's extension method.
    let runs: Vec<(&str, &str)> = out["runs"]["runs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| (str_of(&r["state"]), str_of(&r["stopReason"])))
        .collect();
    assert_eq!(runs, [("completed", "end_turn"), ("completed", "end_turn")]);

    // Closed, then resumed: the settings made before, and no replay.
    assert_eq!(
        current(&out["resume"]),
        pairs(&[("model", "demo/fast"), ("mode", "read_only")])
    );
    assert_eq!(out["resume"]["modes"]["currentModeId"], "read_only");
    assert_eq!(out["beforeResume"], json!([]));
    assert_eq!(out["exitCode"], 0);

    // Pincer's side: the settings (the mode set last by session/set_mode)
    // and both runs are stored.
    let shown = dir.show_session(loaded);
    assert_eq!(shown["session"]["model"], "fast", "{shown:#}");
    assert_eq!(shown["session"]["mode"], "full", "{shown:#}");
    let states: Vec<&str> = shown["runs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| str_of(&r["state"]))
        .collect();
    assert_eq!(states, ["completed", "completed"], "{shown:#}");
    let slow = dir.show_session(str_of(&cancel["sessionId"]));
    assert_eq!(slow["runs"][0]["state"], "cancelled", "{slow:#}");
}

#[test]
fn delete_through_the_python_sdks_raw_request() {
    let dir = TestDir::new();
    configure(&dir, &[json!([{"text": "secret answer"}])]);
    let doomed = flow(&dir, "basic", json!({"prompt": "hi"}));
    let doomed = str_of(&doomed["sessionId"]).to_owned();
    let run = str_of(&dir.show_session(&doomed)["runs"][0]["run_id"]).to_owned();
    let kept = flow(&dir, "basic", json!({"prompt": "hello"}));
    let kept = str_of(&kept["sessionId"]).to_owned();

    let out = flow(&dir, "delete", json!({"delete": doomed}));
    assert_eq!(out["delete"], json!({}));
    assert_eq!(out["deleteOnWire"]["result"], json!({}));
    assert_eq!(out["listed"], json!([kept]));
    for (method, error) in out["errors"].as_object().unwrap() {
        assert_eq!(error["code"], -32002, "{method}: {error}");
        assert!(
            str_of(&error["message"]).contains(&doomed),
            "{method}: {error}"
        );
    }
    let mut methods: Vec<&String> = out["errors"].as_object().unwrap().keys().collect();
    methods.sort();
    assert_eq!(methods, ["deleteAgain", "load", "prompt", "resume"]);
    assert_eq!(out["exitCode"], 0);

    // Pincer's side: gone from the shell's list, its tape gone, the chain intact.
    let list = dir
        .command()
        .args(["sessions", "list", "--json"])
        .output()
        .unwrap();
    let list = String::from_utf8_lossy(&list.stdout);
    assert!(!list.contains(&doomed), "{list}");
    assert!(list.contains(&kept), "{list}");
    let tape = dir
        .command()
        .args(["tape", &run, "--json"])
        .output()
        .unwrap();
    assert!(!String::from_utf8_lossy(&tape.stdout).contains("secret answer"));
    dir.verify();
}

#[test]
fn a_failed_check_in_python_fails_the_test_with_its_message() {
    let dir = TestDir::new();
    configure(&dir, &[json!([{"text": "Hello"}])]);
    let failed = std::panic::catch_unwind(|| {
        flow(
            &dir,
            "basic",
            json!({"prompt": "hi", "expect_reply": "something else"}),
        )
    });
    let panic = failed.expect_err("a flow whose check fails must fail the test");
    let message = panic.downcast_ref::<String>().cloned().unwrap_or_default();
    assert!(message.contains("python flow basic failed"), "{message}");
    assert!(
        message.contains("Failure: the reply is 'Hello', not 'something else'"),
        "{message}"
    );
}
