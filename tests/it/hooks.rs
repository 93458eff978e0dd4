//! Lifecycle hooks through `pincer run` (`docs/hooks.md`): each event fires
//! with the documented input; exit 2 and JSON decisions block, allow, ask,
//! rewrite and end; HTTP hooks are signed; slow and failing hooks follow
//! `on_failure`; receipts record what hooks decided and `pincer verify`
//! still holds.

use std::path::Path;
use std::process::{Output, Stdio};

use crate::support::TestDir;
use serde_json::{Value, json};

/// A hook command that appends its input, one JSON object a line, to
/// `events/NAME.jsonl` under the test directory, then runs `then` (a shell
/// line) if given.
fn recorder(dir: &TestDir, name: &str, then: &str) -> String {
    let events = dir.path().join("events");
    std::fs::create_dir_all(&events).unwrap();
    let log = events.join(format!("{name}.jsonl"));
    format!(
        "{{ cat; echo; }} >> '{}'{}",
        log.display(),
        if then.is_empty() {
            String::new()
        } else {
            format!("; {then}")
        }
    )
}

/// The inputs a recorder saw.
fn recorded(dir: &TestDir, name: &str) -> Vec<Value> {
    let log = dir.path().join("events").join(format!("{name}.jsonl"));
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// A shell line printing `value` as JSON on standard output.
fn prints(value: Value) -> String {
    format!("printf '%s' '{}'", value.to_string().replace('\'', "'\\''"))
}

fn toml_string(text: &str) -> String {
    serde_json::to_string(text).unwrap()
}

fn run(dir: &TestDir, config: &str, script: &[Value], args: &[&str]) -> (Output, Vec<Value>) {
    dir.write_config(config);
    let workspace = dir.workspace();
    std::fs::write(workspace.join("a.txt"), "alpha\n").unwrap();
    let script = dir.script("s.jsonl", script);
    let mut command = dir.command();
    command.args([
        "run",
        "--script",
        script.to_str().unwrap(),
        "--output",
        "jsonl",
    ]);
    // A continued session keeps its workspace.
    if !args.contains(&"--session") {
        command.args(["--cwd", workspace.to_str().unwrap()]);
    }
    let out = command.args(args).stdin(Stdio::null()).output().unwrap();
    let lines = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    (out, lines)
}

fn of_type<'a>(lines: &'a [Value], kind: &str) -> Vec<&'a Value> {
    lines.iter().filter(|l| l["type"] == kind).collect()
}

fn session_id(lines: &[Value]) -> String {
    of_type(lines, "session")[0]["session_id"]
        .as_str()
        .unwrap()
        .to_owned()
}

/// The stop reason of the run's terminal state.
fn stop_reason(lines: &[Value]) -> String {
    of_type(lines, "state")
        .last()
        .and_then(|l| l["stop_reason"].as_str())
        .unwrap_or_default()
        .to_owned()
}

fn notices(lines: &[Value]) -> String {
    of_type(lines, "notice")
        .iter()
        .map(|l| l["message"].as_str().unwrap_or_default().to_owned())
        .collect::<Vec<_>>()
        .join("\n")
}

/// The `hooks` column of every receipt, in order.
fn receipt_hooks(dir: &TestDir) -> Vec<Option<String>> {
    let db = rusqlite::Connection::open(dir.data_dir().join("pincer.db")).unwrap();
    let mut statement = db
        .prepare("SELECT hooks FROM receipts ORDER BY seq")
        .unwrap();
    statement
        .query_map([], |row| row.get(0))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap()
}

fn call(name: &str, arguments: Value) -> Value {
    json!([{"tool_call": {"name": name, "arguments": arguments}}])
}

fn text(text: &str) -> Value {
    json!([{"text": text}])
}

fn hook(event: &str, matcher: &str, command: &str) -> String {
    format!(
        "[[hooks.{event}]]\nmatcher = {}\ncommand = {}\n",
        toml_string(matcher),
        toml_string(command)
    )
}

#[test]
fn every_event_fires_with_the_documented_input() {
    let dir = TestDir::new();
    let config = [
        "SessionStart",
        "UserPromptSubmit",
        "PreToolUse",
        "PostToolUse",
        "Notification",
        "Stop",
        "SessionEnd",
    ]
    .iter()
    .map(|event| hook(event, "*", &recorder(&dir, event, "")))
    .collect::<String>();
    let script = [
        call("read_file", json!({"path": "a.txt"})),
        call("write_file", json!({"path": "b.txt", "content": "beta"})),
        text("done reading"),
    ];
    let (out, lines) = run(&dir, &config, &script, &["read a.txt"]);
    assert_eq!(out.status.code(), Some(3), "{lines:#?}");
    let workspace = dir.workspace();
    let cwd = workspace.to_str().unwrap();
    let session = session_id(&lines);
    let common = |input: &Value, event: &str| {
        assert_eq!(input["hook_event_name"], event, "{input}");
        assert_eq!(input["session_id"], session.as_str(), "{input}");
        assert_eq!(input["cwd"], cwd, "{input}");
        assert_eq!(input["permission_mode"], "supervised", "{input}");
    };
    let start = recorded(&dir, "SessionStart");
    assert_eq!(start.len(), 1);
    common(&start[0], "SessionStart");
    assert_eq!(start[0]["source"], "startup");
    let prompt = recorded(&dir, "UserPromptSubmit");
    common(&prompt[0], "UserPromptSubmit");
    assert_eq!(prompt[0]["prompt"], "read a.txt");
    let pre = recorded(&dir, "PreToolUse");
    assert_eq!(pre.len(), 2, "{pre:#?}");
    common(&pre[0], "PreToolUse");
    assert_eq!(pre[0]["tool_name"], "read_file");
    assert_eq!(pre[0]["tool_input"], json!({"path": "a.txt"}));
    assert!(
        pre[0]["tool_use_id"]
            .as_str()
            .is_some_and(|id| !id.is_empty())
    );
    assert_eq!(pre[1]["tool_name"], "write_file");
    // Only the read ran (the write needed an approval nobody gave).
    let post = recorded(&dir, "PostToolUse");
    assert_eq!(post.len(), 1, "{post:#?}");
    common(&post[0], "PostToolUse");
    assert_eq!(post[0]["tool_name"], "read_file");
    assert_eq!(post[0]["tool_use_id"], pre[0]["tool_use_id"]);
    assert!(
        post[0]["tool_response"]["output"]
            .as_str()
            .unwrap()
            .contains("alpha"),
        "{post:#?}"
    );
    assert_eq!(post[0]["tool_response"]["is_error"], false);
    let notification = recorded(&dir, "Notification");
    common(&notification[0], "Notification");
    assert_eq!(notification[0]["notification_type"], "permission_prompt");
    assert!(
        notification[0]["message"]
            .as_str()
            .unwrap()
            .contains("b.txt")
    );
    let stop = recorded(&dir, "Stop");
    common(&stop[0], "Stop");
    assert_eq!(stop[0]["stop_hook_active"], false);
    assert_eq!(stop[0]["last_assistant_message"], "done reading");
    let end = recorded(&dir, "SessionEnd");
    common(&end[0], "SessionEnd");
    assert_eq!(end[0]["reason"], "prompt_input_exit");
    dir.verify();
}

#[test]
fn exit_2_blocks_the_call_with_the_reason_the_model_reads() {
    let dir = TestDir::new();
    let config = format!(
        "mode = \"full\"\n{}",
        hook(
            "PreToolUse",
            "shell",
            "echo 'no shells in this repository' >&2; exit 2"
        )
    );
    let script = [
        call("shell", json!({"command": "touch made.txt"})),
        call("read_file", json!({"path": "a.txt"})),
        text("ok"),
    ];
    let (out, lines) = run(&dir, &config, &script, &["go"]);
    assert_eq!(out.status.code(), Some(0), "{lines:#?}");
    let results = of_type(&lines, "tool_result");
    assert_eq!(results[0]["verdict"], "denied");
    assert_eq!(
        results[0]["output"],
        "denied by a hook: no shells in this repository"
    );
    assert!(!dir.workspace().join("made.txt").exists());
    // The matcher left the read alone.
    assert_eq!(results[1]["verdict"], "allowed");
    let hooks = receipt_hooks(&dir);
    assert_eq!(
        hooks[0].as_deref(),
        Some("PreToolUse echo 'no shells in this repository' >&2; exit 2: block")
    );
    assert_eq!(hooks[1], None);
    dir.verify();
}

/// A PreToolUse hook answering `decision` for `write_file`.
fn deciding(decision: &str) -> String {
    hook(
        "PreToolUse",
        "write_file",
        &prints(json!({
            "hookSpecificOutput": {
                "hookEventName": "PreToolUse",
                "permissionDecision": decision,
                "permissionDecisionReason": format!("the hook says {decision}"),
            }
        })),
    )
}

/// Runs one `write_file` call under `mode`, the extra config and a hook
/// deciding `decision`; the call's verdict and output, and whether the
/// file was written.
fn decide(mode: &str, extra: &str, decision: &str) -> (String, String, bool) {
    let dir = TestDir::new();
    let config = format!("mode = \"{mode}\"\n{extra}\n{}", deciding(decision));
    let script = [
        call("write_file", json!({"path": "w.txt", "content": "x"})),
        text("ok"),
    ];
    let (_, lines) = run(&dir, &config, &script, &["write"]);
    let result = of_type(&lines, "tool_result")[0].clone();
    dir.verify();
    (
        result["verdict"].as_str().unwrap().to_owned(),
        result["output"].as_str().unwrap().to_owned(),
        dir.workspace().join("w.txt").exists(),
    )
}

#[test]
fn a_hooks_permission_decision_against_each_mode() {
    // allow: skips the approval supervised mode would ask for (nobody is
    // there to give it, so without the hook the call is refused).
    let (verdict, _, written) = decide("supervised", "", "allow");
    assert_eq!((verdict.as_str(), written), ("allowed", true));
    // …but never a policy deny: read-only mode, or a rule.
    let (verdict, output, written) = decide("read_only", "", "allow");
    assert_eq!((verdict.as_str(), written), ("denied", false), "{output}");
    assert!(output.starts_with("denied by policy"), "{output}");
    let (verdict, _, written) = decide("full", "[tools]\nwrite_file = \"deny\"\n", "allow");
    assert_eq!((verdict.as_str(), written), ("denied", false));
    // ask: asks where full mode would not; nobody answers here.
    let (verdict, output, written) = decide("full", "", "ask");
    assert_eq!((verdict.as_str(), written), ("rejected", false), "{output}");
    assert!(output.contains("needs a person's approval"), "{output}");
    // deny: denied in every mode, with the hook's reason.
    for mode in ["full", "supervised"] {
        let (verdict, output, written) = decide(mode, "", "deny");
        assert_eq!((verdict.as_str(), written), ("denied", false));
        assert_eq!(output, "denied by a hook: the hook says deny");
    }
}

#[test]
fn an_ask_from_a_hook_is_answered_by_the_person() {
    let dir = TestDir::new();
    let config = format!("mode = \"full\"\n{}", deciding("ask"));
    let input = dir.path().join("input.jsonl");
    std::fs::write(
        &input,
        "{\"prompt\": \"write\"}\n{\"approve\": \"allow_once\"}\n",
    )
    .unwrap();
    let script = [
        call("write_file", json!({"path": "w.txt", "content": "x"})),
        text("ok"),
    ];
    let (_, lines) = run(
        &dir,
        &config,
        &script,
        &["--input", input.to_str().unwrap()],
    );
    let asked = of_type(&lines, "approval_requested");
    assert_eq!(asked.len(), 1, "{lines:#?}");
    assert!(
        asked[0]["reason"]
            .as_str()
            .unwrap()
            .contains("a hook asks for approval: the hook says ask"),
        "{asked:#?}"
    );
    assert_eq!(of_type(&lines, "tool_result")[0]["verdict"], "approved");
    assert!(dir.workspace().join("w.txt").exists());
}

#[test]
fn an_updated_input_is_planned_and_checked_again() {
    let dir = TestDir::new();
    let to = |path: &str| {
        prints(json!({
            "hookSpecificOutput": {
                "hookEventName": "PreToolUse",
                "updatedInput": {"path": path, "content": "rewritten"},
                "additionalContext": "files go under b.txt here",
            }
        }))
    };
    let config = format!(
        "mode = \"full\"\n[[hooks.PreToolUse]]\nmatcher = \"write_file\"\ncommand = {}\n",
        toml_string(&format!(
            "if grep -q outside; then {}; else {}; fi",
            to("/etc/pincer-hook-test"),
            to("b.txt")
        ))
    );
    let script = [
        call("write_file", json!({"path": "a.txt", "content": "model's"})),
        call("write_file", json!({"path": "outside.txt", "content": "x"})),
        text("ok"),
    ];
    let (_, lines) = run(&dir, &config, &script, &["write"]);
    let results = of_type(&lines, "tool_result");
    assert_eq!(results[0]["verdict"], "allowed", "{results:#?}");
    // A PreToolUse hook's context reaches the result.
    assert!(
        results[0]["output"]
            .as_str()
            .unwrap()
            .contains("<hook_context>\nfiles go under b.txt here\n</hook_context>"),
        "{results:#?}"
    );
    let workspace = dir.workspace();
    assert_eq!(
        std::fs::read_to_string(workspace.join("b.txt")).unwrap(),
        "rewritten"
    );
    assert_eq!(
        std::fs::read_to_string(workspace.join("a.txt")).unwrap(),
        "alpha\n"
    );
    // The planned title shows the path that was written.
    let planned = of_type(&lines, "tool_planned");
    assert!(
        planned[0]["title"].as_str().unwrap().contains("b.txt"),
        "{planned:#?}"
    );
    // A rewrite out of the workspace is refused like the model's would be.
    assert_eq!(results[1]["verdict"], "denied");
    assert!(
        results[1]["output"]
            .as_str()
            .unwrap()
            .starts_with("the input a hook gave is refused: denied by policy"),
        "{results:#?}"
    );
    assert!(!Path::new("/etc/pincer-hook-test").exists());
    let hooks = receipt_hooks(&dir);
    assert!(
        hooks[0].as_deref().unwrap().ends_with(": updated input"),
        "{hooks:?}"
    );
    dir.verify();
}

#[test]
fn post_tool_use_feedback_and_context_reach_the_result() {
    let dir = TestDir::new();
    let config = hook(
        "PostToolUse",
        "read_file",
        &prints(json!({
            "decision": "block",
            "reason": "this file is generated; read the template",
            "systemMessage": "post-read check ran",
            "hookSpecificOutput": {
                "hookEventName": "PostToolUse",
                "additionalContext": "template: a.txt.in",
            }
        })),
    );
    let script = [call("read_file", json!({"path": "a.txt"})), text("ok")];
    let (_, lines) = run(&dir, &config, &script, &["read"]);
    let output = of_type(&lines, "tool_result")[0]["output"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(output.contains("alpha"), "{output}");
    assert!(output.contains("template: a.txt.in"), "{output}");
    assert!(
        output.contains("A hook says about this result: this file is generated; read the template"),
        "{output}"
    );
    assert!(
        notices(&lines).contains("post-read check ran"),
        "{lines:#?}"
    );
    dir.verify();
}

#[test]
fn a_blocked_prompt_ends_the_run_and_is_not_kept() {
    let dir = TestDir::new();
    let config = hook(
        "UserPromptSubmit",
        "",
        "grep -q password && { echo 'prompts may not carry passwords' >&2; exit 2; }; echo 'branch: main'",
    );
    let script = [text("answered")];
    let (out, lines) = run(&dir, &config, &script, &["my password is hunter2"]);
    assert_eq!(out.status.code(), Some(3), "{lines:#?}");
    assert_eq!(stop_reason(&lines), "blocked", "{lines:#?}");
    assert!(
        notices(&lines).contains("A hook blocked the prompt: prompts may not carry passwords"),
        "{lines:#?}"
    );
    let shown = dir.show_session(&session_id(&lines));
    assert!(!shown.to_string().contains("hunter2"), "{shown:#}");
    // A prompt it lets through gets its plain output as context.
    let (out, lines) = run(&dir, &config, &script, &["what branch?"]);
    assert_eq!(out.status.code(), Some(0), "{lines:#?}");
    let shown = dir.show_session(&session_id(&lines)).to_string();
    assert!(
        shown.contains("context a UserPromptSubmit hook added: branch: main"),
        "{shown}"
    );
}

#[test]
fn a_stop_hook_keeps_the_run_going_once() {
    let dir = TestDir::new();
    let config = hook(
        "Stop",
        "",
        &format!(
            "grep -q '\"stop_hook_active\":true' || {}",
            prints(json!({"decision": "block", "reason": "run the tests before finishing"}))
        ),
    );
    let script = [text("first answer"), text("tests pass, done")];
    let (out, lines) = run(&dir, &config, &script, &["fix it"]);
    assert_eq!(out.status.code(), Some(0), "{lines:#?}");
    let said: String = of_type(&lines, "text_delta")
        .iter()
        .map(|l| l["text"].as_str().unwrap_or_default())
        .collect();
    assert!(said.contains("first answer"), "{lines:#?}");
    assert!(said.contains("tests pass, done"), "{lines:#?}");
    let shown = dir.show_session(&session_id(&lines)).to_string();
    assert!(
        shown.contains(
            "a Stop hook asks you to go on before finishing: run the tests before finishing"
        ),
        "{shown}"
    );
}

#[test]
fn continue_false_ends_the_run_with_the_hooks_reason() {
    let dir = TestDir::new();
    let config = format!(
        "mode = \"full\"\n{}",
        hook(
            "PostToolUse",
            "*",
            &prints(json!({"continue": false, "stopReason": "the build is broken"}))
        )
    );
    let script = [
        call("read_file", json!({"path": "a.txt"})),
        text("never said"),
    ];
    let (out, lines) = run(&dir, &config, &script, &["go"]);
    assert_eq!(out.status.code(), Some(3), "{lines:#?}");
    assert_eq!(stop_reason(&lines), "blocked");
    assert!(
        notices(&lines).contains("A hook ended the run: the build is broken"),
        "{lines:#?}"
    );
    assert!(!String::from_utf8_lossy(&out.stdout).contains("never said"));
    dir.verify();
}

#[test]
fn a_slow_hook_is_stopped_and_on_failure_decides() {
    for (on_failure, verdict) in [("continue", "allowed"), ("block", "denied")] {
        let dir = TestDir::new();
        let config = format!(
            "[[hooks.PreToolUse]]\ncommand = \"sleep 30\"\ntimeout_secs = 1\non_failure = \"{on_failure}\"\n"
        );
        let script = [call("read_file", json!({"path": "a.txt"})), text("ok")];
        let started = std::time::Instant::now();
        let (_, lines) = run(&dir, &config, &script, &["read"]);
        assert!(started.elapsed() < std::time::Duration::from_secs(20));
        let result = of_type(&lines, "tool_result")[0].clone();
        assert_eq!(result["verdict"], verdict, "{lines:#?}");
        assert!(
            notices(&lines).contains("hook `sleep 30` failed: no answer within 1 s"),
            "{lines:#?}"
        );
        if on_failure == "block" {
            assert_eq!(
                result["output"],
                "denied by a hook: hook `sleep 30` failed: no answer within 1 s (stopped)"
            );
        }
    }
}

#[test]
fn an_http_hook_is_signed_and_its_answer_decides() {
    use crate::support::http::{Loopback, Reply};
    let server = Loopback::start(|request, _| {
        let signature = request.header("x-pincer-signature").unwrap_or_default();
        let timestamp: i64 = request
            .header("x-pincer-timestamp")
            .and_then(|t| t.parse().ok())
            .unwrap_or_default();
        let expected = pincer::signing::sign(b"s3cret", timestamp, &request.raw);
        if signature != expected {
            return Reply::json(401, &json!({}));
        }
        let body = &request.body;
        assert_eq!(request.header("x-pincer-event"), Some("PreToolUse"));
        assert_eq!(request.header("content-type"), Some("application/json"));
        match body["tool_name"].as_str() {
            // Go on, by an empty answer.
            Some("list_dir") => return Reply::new(200, "text/plain", ""),
            // A failure: the call goes on (`on_failure` is `continue`).
            Some("glob") => return Reply::json(500, &json!({})),
            Some("grep") => return Reply::new(200, "text/plain", "yes"),
            // A redirect is no answer: not followed, a failure.
            Some("todo") => {
                return Reply::new(302, "text/plain", "").header("location", "/elsewhere");
            }
            _ => {}
        }
        Reply::json(
            200,
            &json!({
                "hookSpecificOutput": {
                    "hookEventName": "PreToolUse",
                    "permissionDecision": "deny",
                    "permissionDecisionReason": format!("the server saw {}", body["tool_name"].as_str().unwrap()),
                }
            }),
        )
    });
    let dir = TestDir::new();
    let config = format!(
        "[[hooks.PreToolUse]]\nurl = \"{}/hook\"\nsecret_env = \"HOOK_SECRET\"\n",
        server.url
    );
    dir.write_config(&config);
    let workspace = dir.workspace();
    std::fs::write(workspace.join("a.txt"), "alpha\n").unwrap();
    let script = dir.script(
        "s.jsonl",
        &[
            call("read_file", json!({"path": "a.txt"})),
            call("list_dir", json!({"path": "."})),
            call("glob", json!({"pattern": "*.txt"})),
            call("grep", json!({"pattern": "alpha"})),
            call(
                "todo",
                json!({"todos": [{"content": "check", "status": "pending"}]}),
            ),
            text("ok"),
        ],
    );
    let out = dir
        .command()
        .env("HOOK_SECRET", "s3cret")
        .args([
            "run",
            "--script",
            script.to_str().unwrap(),
            "--output",
            "jsonl",
        ])
        .args(["--cwd", workspace.to_str().unwrap(), "read"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let lines: Vec<Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    let results = of_type(&lines, "tool_result");
    assert_eq!(
        results[0]["output"], "denied by a hook: the server saw read_file",
        "{lines:#?}"
    );
    let verdicts: Vec<&str> = results
        .iter()
        .map(|r| r["verdict"].as_str().unwrap())
        .collect();
    assert_eq!(
        verdicts,
        ["denied", "allowed", "allowed", "allowed", "allowed"]
    );
    let said = notices(&lines);
    assert!(said.contains("failed: it answered HTTP 500"), "{said}");
    assert!(
        said.contains("failed: it answered something other than a JSON object: yes"),
        "{said}"
    );
    assert!(said.contains("failed: it answered HTTP 302"), "{said}");
    assert_eq!(server.requests().len(), 5);
    // Without the secret the configuration is refused at start.
    let out = dir
        .command()
        .args(["run", "--script", script.to_str().unwrap(), "read"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("HOOK_SECRET"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn a_misconfigured_hook_is_named_at_start() {
    let dir = TestDir::new();
    for (config, expected) in [
        (
            "[[hooks.PreToolUse]]\nmatcher = \"(unclosed\"\ncommand = \"true\"\n",
            "hooks.PreToolUse[0]: `matcher`: not a regular expression",
        ),
        (
            "[[hooks.Stop]]\ncommand = \"true\"\nurl = \"http://127.0.0.1:1/\"\n",
            "hooks.Stop[0]: give `command` or `url`, not both",
        ),
        (
            "[[hooks.PreTooluse]]\ncommand = \"true\"\n",
            "unknown field `PreTooluse`",
        ),
    ] {
        dir.write_config(config);
        let out = dir
            .command()
            .args(["run", "--script", "/dev/null", "hi"])
            .stdin(Stdio::null())
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{stderr}");
        assert!(stderr.contains(expected), "{stderr}");
    }
}

#[test]
fn a_pre_compact_hook_blocks_an_automatic_compaction() {
    let dir = TestDir::new();
    let config = format!(
        "context_window = 2000\ncompact_at = 0.5\n{}",
        hook(
            "PreCompact",
            "auto",
            &recorder(
                &dir,
                "PreCompact",
                "echo 'keep the whole history' >&2; exit 2"
            )
        )
    );
    let script = [text("first"), text("second")];
    let long = "a long pasted log line\n".repeat(200);
    let (_, lines) = run(&dir, &config, &script, &[&long]);
    let session = session_id(&lines);
    let (out, lines) = run(&dir, &config, &script, &["--session", &session, "and now?"]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        notices(&lines).contains(
            "The conversation was not compacted: a hook blocked it (keep the whole history); older messages are left out to fit instead."
        ),
        "{lines:#?}"
    );
    let input = recorded(&dir, "PreCompact");
    assert_eq!(input.len(), 1, "{input:#?}");
    assert_eq!(input[0]["trigger"], "auto");
    assert_eq!(input[0]["custom_instructions"], "");
    // No summary was made.
    let shown = dir.show_session(&session).to_string();
    assert!(!shown.contains("\"summary\""), "{shown}");
}

#[test]
fn an_editor_sees_what_hooks_decide() {
    use crate::support::AcpProcess;
    let dir = TestDir::new();
    dir.write_config(&format!(
        "{}{}",
        hook(
            "PreToolUse",
            "shell",
            "echo 'no shells in this repository' >&2; exit 2"
        ),
        hook(
            "PreCompact",
            "manual",
            "echo 'compaction is off here' >&2; exit 2"
        )
    ));
    let script = dir.script(
        "s.jsonl",
        &[
            call("shell", json!({"command": "ls"})),
            text("could not list"),
        ],
    );
    let mut acp = AcpProcess::spawn(
        &dir,
        &["--script", script.to_str().unwrap(), "--mode", "full"],
    );
    acp.initialize();
    let session = acp.new_session(&dir.workspace());
    let (updates, response) = acp.prompt(&session, "list files");
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    let failed: Vec<&Value> = updates
        .iter()
        .filter(|u| u["params"]["update"]["sessionUpdate"] == "tool_call_update")
        .filter(|u| u["params"]["update"]["status"] == "failed")
        .collect();
    assert_eq!(failed.len(), 1, "{updates:#?}");
    assert!(
        failed[0]
            .to_string()
            .contains("denied by a hook: no shells in this repository"),
        "{failed:#?}"
    );
    let (updates, response) = acp.prompt(&session, "/compact");
    assert_eq!(response["result"]["stopReason"], "refusal", "{response}");
    assert!(
        crate::support::agent_text(&updates).contains(
            "The conversation was not compacted: a hook blocked it: compaction is off here."
        ),
        "{updates:#?}"
    );
    acp.finish();
}

#[test]
fn stop_hooks_keep_a_run_going_eight_times_at_most() {
    let dir = TestDir::new();
    let config = hook(
        "Stop",
        "",
        &format!(
            "{}; {}",
            recorder(&dir, "Stop", ""),
            prints(json!({"decision": "block", "reason": "not yet"}))
        ),
    );
    let script: Vec<Value> = (0..12).map(|n| text(&format!("answer {n}."))).collect();
    let (out, lines) = run(&dir, &config, &script, &["go"]);
    assert_eq!(out.status.code(), Some(0), "{lines:#?}");
    assert_eq!(of_type(&lines, "model_turn").len(), 9, "{lines:#?}");
    let stops = recorded(&dir, "Stop");
    assert_eq!(stops.len(), 8);
    assert_eq!(stops[0]["stop_hook_active"], false);
    assert_eq!(stops[1]["stop_hook_active"], true);
    assert_eq!(stops[7]["last_assistant_message"], "answer 7.");
}

#[test]
fn session_end_hooks_hold_up_the_exit_five_seconds_at_most() {
    let dir = TestDir::new();
    let config = hook("SessionEnd", "", &recorder(&dir, "SessionEnd", "sleep 30"));
    let started = std::time::Instant::now();
    let (out, _) = run(&dir, &config, &[text("hi")], &["hello"]);
    let took = started.elapsed();
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(recorded(&dir, "SessionEnd").len(), 1);
    assert!(
        took >= std::time::Duration::from_secs(4) && took < std::time::Duration::from_secs(15),
        "{took:?}"
    );
}

/// A workspace (a repository) bringing hooks for Claude Code and Codex.
pub(crate) fn workspace_with_hooks(dir: &TestDir) -> std::path::PathBuf {
    let workspace = dir.workspace();
    std::fs::create_dir_all(workspace.join(".git")).unwrap();
    std::fs::create_dir_all(workspace.join(".claude")).unwrap();
    std::fs::create_dir_all(workspace.join(".codex")).unwrap();
    let settings = json!({
        "hooks": {
            "PreToolUse": [{
                "matcher": "Bash",
                "hooks": [{
                    "type": "command",
                    "command": recorder(dir, "claude-pre", "echo 'the claude hook says no' >&2; exit 2"),
                    "timeout": 10
                }]
            }],
            "PostToolUse": [{
                "matcher": "Edit|Write",
                "hooks": [{"type": "command", "command": recorder(dir, "claude-post", "")}]
            }],
            "PermissionRequest": [{"hooks": [{"type": "command", "command": "true"}]}]
        }
    });
    std::fs::write(
        workspace.join(".claude/settings.json"),
        settings.to_string(),
    )
    .unwrap();
    let codex = json!({
        "hooks": {
            "PreToolUse": [{
                "matcher": "^Bash$",
                "hooks": [{"type": "command", "command": recorder(dir, "codex-pre", "")}]
            }]
        }
    });
    std::fs::write(workspace.join(".codex/hooks.json"), codex.to_string()).unwrap();
    workspace
}

fn trust(dir: &TestDir, args: &[&str]) -> String {
    let out = dir.command().arg("trust").args(args).output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn a_workspaces_own_hooks_run_only_once_trusted_in_their_agents_dialect() {
    let dir = TestDir::new();
    let workspace = workspace_with_hooks(&dir);
    let config = "mode = \"full\"\n[hooks]\nimport = [\"claude\", \"codex\"]\n";
    let script = [
        call("shell", json!({"command": "echo hi"})),
        call("write_file", json!({"path": "w.txt", "content": "x"})),
        text("ok"),
    ];
    // Not trusted: nothing of the workspace's runs, and the person is told.
    let (_, lines) = run(&dir, config, &script, &["go"]);
    let results = of_type(&lines, "tool_result");
    assert_eq!(results[0]["verdict"], "allowed", "{lines:#?}");
    assert!(
        notices(&lines).contains(&format!(
            "This workspace brings 3 hooks for other agents (.claude/settings.json, .codex/hooks.json); they run only once you trust {}",
            workspace.display()
        )),
        "{lines:#?}"
    );
    assert!(recorded(&dir, "claude-pre").is_empty());
    // Trusted: they run, each in its agent's names.
    let said = trust(&dir, &[workspace.to_str().unwrap()]);
    assert!(
        said.starts_with(&format!("Trusted {}", workspace.display())),
        "{said}"
    );
    assert!(
        said.contains(".claude/settings.json: PreToolUse [Bash]"),
        "{said}"
    );
    assert!(
        said.contains(
            "left out: .claude/settings.json: PermissionRequest command (not run by Pincer)"
        ),
        "{said}"
    );
    let (_, lines) = run(&dir, config, &script, &["go"]);
    let results = of_type(&lines, "tool_result");
    assert_eq!(
        results[0]["output"], "denied by a hook: the claude hook says no",
        "{lines:#?}"
    );
    let claude = recorded(&dir, "claude-pre");
    assert_eq!(claude[0]["tool_name"], "Bash");
    assert_eq!(claude[0]["tool_input"]["command"], "echo hi");
    let codex = recorded(&dir, "codex-pre");
    assert_eq!(codex[0]["tool_name"], "Bash");
    let post = recorded(&dir, "claude-post");
    assert_eq!(post[0]["tool_name"], "Write", "{post:#?}");
    assert_eq!(
        post[0]["tool_input"]["file_path"],
        workspace.join("w.txt").to_str().unwrap()
    );
    assert!(!notices(&lines).contains("This workspace brings"));
    let listed = trust(&dir, &["--list"]);
    assert_eq!(
        listed.lines().next(),
        Some(workspace.to_str().unwrap()),
        "{listed}"
    );
    assert!(
        listed.contains("  .claude/settings.json\n    PreToolUse [Bash] "),
        "{listed}"
    );
    // Revoked: they stop.
    trust(&dir, &["--revoke", workspace.to_str().unwrap()]);
    let (_, lines) = run(&dir, config, &script, &["go"]);
    assert_eq!(of_type(&lines, "tool_result")[0]["verdict"], "allowed");
    assert_eq!(recorded(&dir, "claude-pre").len(), 1);
}

#[test]
fn an_editor_trusts_the_workspace_with_slash_trust() {
    use crate::support::AcpProcess;
    let dir = TestDir::new();
    let workspace = workspace_with_hooks(&dir);
    dir.write_config("[hooks]\nimport = [\"claude\"]\n");
    let script = dir.script(
        "s.jsonl",
        &[
            text("hello"),
            call("shell", json!({"command": "echo hi"})),
            text("done"),
        ],
    );
    let mut acp = AcpProcess::spawn(
        &dir,
        &["--script", script.to_str().unwrap(), "--mode", "full"],
    );
    acp.initialize();
    let session = acp.new_session(&workspace);
    let (updates, _) = acp.prompt(&session, "hi");
    assert!(
        updates
            .iter()
            .any(|u| u.to_string().contains("they run only once you trust")),
        "{updates:#?}"
    );
    let (updates, response) = acp.prompt(&session, "/trust");
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    let answer = crate::support::agent_text(&updates);
    assert!(
        answer.contains(&format!(
            "Trusted {}: its hooks run from now on, as long as their files stay as they are now.",
            workspace.display()
        )),
        "{answer}"
    );
    let (updates, _) = acp.prompt(&session, "list");
    assert!(
        updates.iter().any(|u| u
            .to_string()
            .contains("denied by a hook: the claude hook says no")),
        "{updates:#?}"
    );
    acp.finish();
}
