//! `pincer run` and the inspection commands, through the real binary.

use std::process::{Output, Stdio};
use std::time::Duration;

use crate::support::TestDir;
use pretty_assertions::assert_eq;
use serde_json::{Value, json};

fn run(dir: &TestDir, args: &[&str]) -> Output {
    dir.command()
        .args(args)
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

fn stdout(out: &Output) -> String {
    String::from_utf8(out.stdout.clone()).unwrap()
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn jsonl(out: &Output) -> Vec<Value> {
    stdout(out)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[test]
fn text_output_streams_the_reply_and_exits_0() {
    let dir = TestDir::new();
    let script = dir.script(
        "s.jsonl",
        &[json!([{"thought": "hmm"}, {"text": "Hello"}, {"text": ", world"}])],
    );
    let out = run(
        &dir,
        &["run", "--script", script.to_str().unwrap(), "Say hello"],
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(stdout(&out), "Hello, world\n");
    assert!(
        stderr(&out).contains("completed (end_turn)"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn jsonl_output_is_one_event_per_line() {
    let dir = TestDir::new();
    let script = dir.script(
        "s.jsonl",
        &[json!([{"text": "a"}, {"text": "b"}, {"usage": {"input_tokens": 3, "output_tokens": 2}}])],
    );
    let out = run(
        &dir,
        &[
            "run",
            "--script",
            script.to_str().unwrap(),
            "--output",
            "jsonl",
            "go",
        ],
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let lines = jsonl(&out);
    let types: Vec<&str> = lines.iter().map(|l| l["type"].as_str().unwrap()).collect();
    assert_eq!(
        types,
        vec![
            "session",
            "state",
            "user_message",
            "session_info",
            "state",
            "model_turn",
            "text_delta",
            "text_delta",
            "usage",
            "state"
        ]
    );
    let session = lines[0]["session_id"].as_str().unwrap();
    let run_id = lines[1]["run_id"].as_str().unwrap();
    for (seq, line) in lines[1..].iter().enumerate() {
        assert_eq!(line["seq"], seq as u64);
        assert_eq!(line["session_id"], session);
        assert_eq!(line["run_id"], run_id);
    }
    assert_eq!(lines[3]["title"], "go");
    assert_eq!(lines[9]["state"], "completed");
    assert_eq!(lines[9]["stop_reason"], "end_turn");
    assert_eq!(
        lines[8]["usage"],
        json!({"input_tokens": 3, "output_tokens": 2})
    );
}

#[test]
fn exit_codes_follow_the_documented_table() {
    let dir = TestDir::new();
    let failing = dir.script(
        "f.jsonl",
        &[json!([{"error": {"kind": "auth", "message": "bad key"}}])],
    );
    let out = run(&dir, &["run", "--script", failing.to_str().unwrap(), "x"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(stderr(&out).contains("bad key"));

    let refusing = dir.script("r.jsonl", &[json!([{"text": "no"}, {"stop": "refusal"}])]);
    let out = run(&dir, &["run", "--script", refusing.to_str().unwrap(), "x"]);
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));

    let out = run(&dir, &["run", "x"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("no model provider is configured"),
        "{}",
        stderr(&out)
    );

    let out = run(&dir, &["run", "--script", "/does/not/exist.jsonl", "x"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("cannot read model script /does/not/exist.jsonl"),
        "{}",
        stderr(&out)
    );

    let out = run(&dir, &["run", "--frobnicate"]);
    assert_eq!(out.status.code(), Some(2));

    let out = run(&dir, &["run"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("nothing to run"));

    std::fs::write(dir.path().join("bad.toml"), "max_turns = 1\n").unwrap();
    let out = run(
        &dir,
        &[
            "--config",
            dir.path().join("bad.toml").to_str().unwrap(),
            "run",
            "x",
        ],
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("bad.toml") && stderr(&out).contains("unknown field `max_turns`"),
        "{}",
        stderr(&out)
    );

    // `pincer run --help` lists every code of the table.
    let out = run(&dir, &["run", "--help"]);
    let help = stdout(&out)
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ");
    for code in [
        "0 completed",
        "1 failed",
        "2 usage or configuration error",
        "3 cancelled",
        "4 stopped at a spending limit",
        "5 the session is busy",
    ] {
        assert!(help.contains(code), "missing {code:?} in {help}");
    }
}

#[test]
fn interrupt_cancels_the_run_and_exits_3() {
    let dir = TestDir::new();
    let script = dir.script(
        "slow.jsonl",
        &[json!([{"text": "start"}, {"delay_ms": 60000}])],
    );
    let mut child = dir
        .command()
        .args([
            "run",
            "--script",
            script.to_str().unwrap(),
            "--output",
            "jsonl",
            "go",
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Wait for the first chunk before interrupting.
    let mut stdout = std::io::BufReader::new(child.stdout.take().unwrap());
    let mut seen = String::new();
    while !seen.contains("text_delta") {
        let mut line = String::new();
        assert!(std::io::BufRead::read_line(&mut stdout, &mut line).unwrap() > 0);
        seen.push_str(&line);
    }
    let status = std::process::Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let started = std::time::Instant::now();
    let status = child.wait().unwrap();
    assert!(started.elapsed() < Duration::from_secs(5));
    assert_eq!(status.code(), Some(3));
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut stdout, &mut rest).unwrap();
    let last: Value = serde_json::from_str(rest.lines().last().unwrap()).unwrap();
    assert_eq!(last["state"], "cancelled");
}

#[test]
fn input_scripts_run_prompts_in_order_and_sessions_continue() {
    let dir = TestDir::new();
    let script = dir.script(
        "s.jsonl",
        &[
            json!([{"text": "one"}]),
            json!([{"text": "two"}]),
            json!([{"text": "three"}]),
        ],
    );
    let input = dir.path().join("input.jsonl");
    std::fs::write(
        &input,
        "{\"prompt\": \"first\"}\n# a comment\n{\"prompt\": \"second\"}\n",
    )
    .unwrap();
    let out = run(
        &dir,
        &[
            "run",
            "--script",
            script.to_str().unwrap(),
            "--input",
            input.to_str().unwrap(),
            "--output",
            "jsonl",
        ],
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let lines = jsonl(&out);
    let texts: Vec<&str> = lines
        .iter()
        .filter(|l| l["type"] == "text_delta")
        .map(|l| l["text"].as_str().unwrap())
        .collect();
    assert_eq!(texts, vec!["one", "two"]);
    let session = lines[0]["session_id"].as_str().unwrap().to_owned();

    let prompt_file = dir.path().join("prompt.txt");
    std::fs::write(&prompt_file, "third prompt\n").unwrap();
    let out = run(
        &dir,
        &[
            "run",
            "--script",
            script.to_str().unwrap(),
            "--session",
            &session,
            "--prompt-file",
            prompt_file.to_str().unwrap(),
        ],
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(stdout(&out), "three\n");

    let out = run(&dir, &["sessions", "show", &session, "--json"]);
    let shown: Value = serde_json::from_slice(&out.stdout).unwrap();
    let roles: Vec<&str> = shown["history"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h["message"]["role"].as_str().unwrap())
        .collect();
    assert_eq!(
        roles,
        vec![
            "user",
            "assistant",
            "user",
            "assistant",
            "user",
            "assistant"
        ]
    );
    assert_eq!(shown["session"]["origin"], "headless");
    assert_eq!(shown["session"]["title"], "first");

    let bad = dir.path().join("bad.jsonl");
    std::fs::write(&bad, "{\"prompt\": \"ok\"}\n{\"promt\": \"typo\"}\n").unwrap();
    let out = run(
        &dir,
        &[
            "run",
            "--script",
            script.to_str().unwrap(),
            "--input",
            bad.to_str().unwrap(),
        ],
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("line 2"), "{}", stderr(&out));

    let out = run(
        &dir,
        &[
            "run",
            "--script",
            script.to_str().unwrap(),
            "--session",
            "ses_unknown",
            "x",
        ],
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("session ses_unknown not found"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn inspection_commands_show_sessions_runs_and_the_tape() {
    let dir = TestDir::new();
    let script = dir.script(
        "s.jsonl",
        &[json!([{"text": "hi there"}, {"usage": {"input_tokens": 5, "output_tokens": 2}}])],
    );
    let out = run(
        &dir,
        &[
            "run",
            "--script",
            script.to_str().unwrap(),
            "--output",
            "jsonl",
            "Greet me",
        ],
    );
    let lines = jsonl(&out);
    let session = lines[0]["session_id"].as_str().unwrap().to_owned();
    let run_id = lines[1]["run_id"].as_str().unwrap().to_owned();

    let out = run(&dir, &["sessions", "list"]);
    assert!(out.status.success());
    let listing = stdout(&out);
    let rows: Vec<Vec<&str>> = listing
        .lines()
        .map(|l| {
            l.split("  ")
                .map(str::trim)
                .filter(|c| !c.is_empty())
                .collect()
        })
        .collect();
    assert_eq!(
        rows[0],
        [
            "SESSION",
            "UPDATED",
            "FROM",
            "STATUS",
            "MODEL",
            "WORKSPACE",
            "TITLE"
        ],
        "{listing}"
    );
    assert_eq!(rows[1][0], session, "{listing}");
    assert_eq!(
        rows[1][2..5],
        ["headless", "completed", "scripted/script"],
        "{listing}"
    );
    assert_eq!(rows[1][6], "Greet me", "{listing}");
    let out = run(&dir, &["sessions", "list", "--json"]);
    assert_eq!(jsonl(&out)[0]["session_id"], session.as_str());

    let out = run(&dir, &["runs", "show", &run_id, "--json"]);
    let shown: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(shown["state"], "completed");
    assert_eq!(shown["stop_reason"], "end_turn");
    assert_eq!(shown["usage"]["input_tokens"], 5);
    assert_eq!(shown["usage"]["output_tokens"], 2);

    let out = run(&dir, &["tape", &run_id]);
    assert!(out.status.success());
    let text = stdout(&out);
    assert!(
        text.contains("text \"hi there\"") && text.contains("state completed (end_turn)"),
        "{text}"
    );
    let out = run(&dir, &["tape", &run_id, "--json"]);
    assert_eq!(jsonl(&out).len(), 8);

    let out = run(&dir, &["runs", "show", "run_missing"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("run run_missing not found"));
}

#[test]
fn config_show_doctor_version_and_completions() {
    let dir = TestDir::new();
    let config_dir = dir.path().join("config/pincer");
    std::fs::create_dir_all(&config_dir).unwrap();
    let script = dir.script("s.jsonl", &[json!([{"text": "x"}])]);
    std::fs::write(
        config_dir.join("config.toml"),
        format!("provider = \"demo\"\nmax_turn_requests = 9\n[providers.demo]\nkind = \"scripted\"\nscript = {script:?}\n"),
    )
    .unwrap();
    let out = run(&dir, &["config", "show"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(
        text.contains("provider = \"demo\"  # config file"),
        "{text}"
    );
    assert!(
        text.contains("max_turn_requests = 9  # config file"),
        "{text}"
    );
    assert!(
        text.contains("data_dir = ") && text.contains("# environment variable PINCER_DATA_DIR"),
        "{text}"
    );

    let out = dir
        .command()
        .args(["config", "show"])
        .env("PINCER_MAX_TURN_REQUESTS", "4")
        .output()
        .unwrap();
    assert!(
        stdout(&out)
            .contains("max_turn_requests = 4  # environment variable PINCER_MAX_TURN_REQUESTS")
    );

    // The configured provider answers without flags.
    let out = run(&dir, &["run", "hello"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(stdout(&out), "x\n");

    let out = run(&dir, &["doctor"]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}{}",
        stdout(&out),
        stderr(&out)
    );
    let text = stdout(&out);
    for line in [
        "ok   config",
        "ok   data dir",
        "ok   provider demo scripted",
        "ok   database",
        "ok   http token",
        "sandbox",
    ] {
        assert!(text.contains(line), "missing {line:?} in {text}");
    }

    let out = run(&dir, &["--version"]);
    assert_eq!(
        stdout(&out),
        format!("pincer {}\n", env!("CARGO_PKG_VERSION"))
    );
    let out = run(&dir, &["completions", "bash"]);
    assert!(out.status.success());
    assert!(stdout(&out).contains("_pincer()"));
}

#[test]
fn text_output_shows_the_plan_on_stderr() {
    let dir = TestDir::new();
    let script = dir.script(
        "plan.jsonl",
        &[
            json!([{"tool_call": {"name": "todo", "arguments": {"todos": [
                {"content": "Find the bug", "status": "completed"},
                {"content": "Fix it", "status": "in_progress"}
            ]}}}]),
            json!([{"text": "fixing"}]),
        ],
    );
    let out = run(&dir, &["run", "--script", script.to_str().unwrap(), "go"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(stdout(&out), "fixing\n");
    let err = stderr(&out);
    assert!(
        err.contains("pincer: plan [x] Find the bug\npincer: plan [~] Fix it\n"),
        "{err}"
    );
}

/// stdout and stderr on one terminal: the reply's lines and the progress
/// lines never run together, and the status line comes after the reply.
#[test]
fn the_reply_and_progress_lines_do_not_run_together() {
    let dir = TestDir::new();
    std::fs::write(dir.workspace().join("notes.txt"), "x\n").unwrap();
    let script = dir.script(
        "s.jsonl",
        &[
            json!([{"text": "Let me look."}, {"tool_call": {"name": "read_file", "arguments": {"path": "notes.txt"}}}]),
            json!([{"text": "Hello from Pincer!"}]),
        ],
    );
    let both = dir.path().join("both.txt");
    let file = std::fs::File::create(&both).unwrap();
    let status = dir
        .command()
        .args(["run", "--script", script.to_str().unwrap(), "--cwd"])
        .arg(dir.workspace())
        .arg("Say hello")
        .stdin(Stdio::null())
        .stdout(file.try_clone().unwrap())
        .stderr(file)
        .status()
        .unwrap();
    assert_eq!(status.code(), Some(0));
    let text = std::fs::read_to_string(&both).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    let at = |prefix: &str| {
        lines
            .iter()
            .position(|l| l.starts_with(prefix))
            .unwrap_or_else(|| panic!("no line starts with {prefix:?}:\n{text}"))
    };
    assert!(
        at("Let me look.") < at("pincer: tool call read_file"),
        "{text}"
    );
    assert!(
        at("pincer: tool call read_file") < at("Hello from Pincer!"),
        "{text}"
    );
    assert!(at("Hello from Pincer!") < at("pincer: run "), "{text}");
    assert!(lines.contains(&"Hello from Pincer!"), "{text}");
}

#[test]
fn a_missing_config_file_is_named_once_with_its_cause_once() {
    let dir = TestDir::new();
    let missing = dir.path().join("nope.toml");
    let out = run(&dir, &["--config", missing.to_str().unwrap(), "run", "hi"]);
    assert_eq!(out.status.code(), Some(2));
    let err = stderr(&out);
    assert_eq!(err.matches("os error 2").count(), 1, "{err}");
    assert!(err.contains("nope.toml"), "{err}");
}

/// A burst of text chunks the provider already has waiting goes out as one
/// delta, the same text; a handful of chunks stay one event each.
#[test]
fn a_burst_of_waiting_chunks_is_one_delta_and_a_few_stay_apart() {
    let dir = TestDir::new();
    let many: Vec<Value> = (0..1000)
        .map(|i| json!({"text": format!("w{i} ")}))
        .collect();
    let few = json!([{"text": "a"}, {"text": "b"}, {"text": "c"}]);
    let script = dir.script("s.jsonl", &[Value::Array(many), few]);
    let out = run(
        &dir,
        &[
            "run",
            "--script",
            script.to_str().unwrap(),
            "--output",
            "jsonl",
            "go",
        ],
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let deltas: Vec<String> = jsonl(&out)
        .iter()
        .filter(|l| l["type"] == "text_delta")
        .map(|l| l["text"].as_str().unwrap().to_owned())
        .collect();
    let expected: String = (0..1000).map(|i| format!("w{i} ")).collect();
    assert_eq!(deltas.concat(), expected);
    assert!(deltas.len() < 10, "{} deltas", deltas.len());

    let session = jsonl(&out)[0]["session_id"].as_str().unwrap().to_owned();
    let out = run(
        &dir,
        &[
            "run",
            "--script",
            script.to_str().unwrap(),
            "--output",
            "jsonl",
            "--session",
            &session,
            "more",
        ],
    );
    let deltas: Vec<String> = jsonl(&out)
        .iter()
        .filter(|l| l["type"] == "text_delta")
        .map(|l| l["text"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(deltas, ["a", "b", "c"]);
}

#[test]
fn a_symlinked_cwd_is_stored_as_the_directory_it_names() {
    let dir = TestDir::new();
    let script = dir.script("s.jsonl", &[json!([{"text": "ok"}])]);
    let real = dir.workspace();
    let link = dir.path().canonicalize().unwrap().join("link");
    std::os::unix::fs::symlink(&real, &link).unwrap();
    let out = run(
        &dir,
        &[
            "run",
            "--script",
            script.to_str().unwrap(),
            "--cwd",
            link.to_str().unwrap(),
            "--output",
            "jsonl",
            "hi",
        ],
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let lines = jsonl(&out);
    assert_eq!(lines[0]["type"], "session");
    assert_eq!(lines[0]["workspace"], real.to_str().unwrap());
}
