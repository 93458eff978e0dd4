//! A reader that goes away is success (`docs/style.md`): every command that
//! writes to stdout exits 0, without a panic or an error, when its stdout is a
//! pipe whose reader was closed, before it writes or after the first line.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

use crate::support::TestDir;
use serde_json::json;

/// When the test closes the reader.
#[derive(Clone, Copy)]
enum Close {
    /// Before the command writes anything.
    AtOnce,
    /// After the first line it wrote.
    AfterOneLine,
}

/// Runs `command` with its stdout a pipe closed as `close` says, and checks
/// it exits 0 and says nothing about the pipe on stderr.
fn survives_closed_reader(command: Command, close: Close) {
    survives_closed_reader_with(command, close, 0);
}

/// Like [`survives_closed_reader`], for a command whose exit code is `code`
/// whatever stdout is (`pincer doctor` finding a problem exits 1).
fn survives_closed_reader_with(mut command: Command, close: Close, code: i32) {
    let mut child = command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .env("RUST_BACKTRACE", "0")
        .spawn()
        .unwrap();
    let out = child.stdout.take().unwrap();
    match close {
        Close::AtOnce => drop(out),
        Close::AfterOneLine => {
            let mut line = String::new();
            BufReader::new(out).read_line(&mut line).unwrap();
            assert!(!line.is_empty(), "the command wrote nothing");
        }
    }
    let done = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&done.stderr);
    assert_eq!(done.status.code(), Some(code), "{stderr}");
    assert!(
        !stderr.contains("panicked") && !stderr.to_lowercase().contains("broken pipe"),
        "{stderr}"
    );
}

fn pincer(dir: &TestDir, args: &[&str]) -> Command {
    let mut command = dir.command();
    command.args(args);
    command
}

#[test]
fn completions_with_the_reader_gone() {
    let dir = TestDir::new();
    for shell in ["zsh", "bash", "fish"] {
        survives_closed_reader(pincer(&dir, &["completions", shell]), Close::AtOnce);
        survives_closed_reader(pincer(&dir, &["completions", shell]), Close::AfterOneLine);
    }
}

#[test]
fn help_and_version_with_the_reader_gone() {
    let dir = TestDir::new();
    for args in [&["--help"][..], &["--version"], &["run", "--help"]] {
        survives_closed_reader(pincer(&dir, args), Close::AtOnce);
    }
    survives_closed_reader(pincer(&dir, &["--help"]), Close::AfterOneLine);
}

#[test]
fn config_show_with_the_reader_gone() {
    let dir = TestDir::new();
    dir.write_config("max_turn_requests = 9\nmode = \"full\"\n");
    survives_closed_reader(pincer(&dir, &["config", "show"]), Close::AtOnce);
    survives_closed_reader(pincer(&dir, &["config", "show"]), Close::AfterOneLine);
}

#[test]
fn sessions_list_of_many_sessions_with_the_reader_gone() {
    let dir = TestDir::new();
    let script = dir.script("s.jsonl", &[json!([{"text": "hi"}])]);
    let script = script.to_str().unwrap();
    for i in 0..25 {
        let out = pincer(&dir, &["run", "--script", script, &format!("prompt {i}")])
            .stdin(Stdio::null())
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    for args in [&["sessions", "list"][..], &["sessions", "list", "--json"]] {
        survives_closed_reader(pincer(&dir, args), Close::AtOnce);
        survives_closed_reader(pincer(&dir, args), Close::AfterOneLine);
    }
}

/// A run whose reply is far larger than a pipe's buffer: its tape, replayed,
/// outlives the reader that read one line; so does the run's own output.
#[test]
fn tape_of_a_long_run_with_the_reader_gone() {
    let dir = TestDir::new();
    let chunk = "all work and no play makes a long tape\n".repeat(100);
    let steps: Vec<_> = (0..100).map(|_| json!({"text": chunk})).collect();
    let (out, lines) = dir.run_jsonl(&[json!(steps)], "{\"prompt\": \"go\"}\n");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let run = lines
        .iter()
        .find_map(|l| l["run_id"].as_str())
        .unwrap()
        .to_owned();
    for args in [&["tape", &run][..], &["tape", &run, "--json"]] {
        survives_closed_reader(pincer(&dir, args), Close::AtOnce);
        survives_closed_reader(pincer(&dir, args), Close::AfterOneLine);
    }
    for args in [&["runs", "show", &run][..], &["verify"]] {
        survives_closed_reader(pincer(&dir, args), Close::AtOnce);
    }
    let doctor = pincer(&dir, &["doctor"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(!doctor.stdout.is_empty());
    survives_closed_reader_with(
        pincer(&dir, &["doctor"]),
        Close::AtOnce,
        doctor.status.code().unwrap(),
    );
    survives_closed_reader(pincer(&dir, &["memory", "list"]), Close::AtOnce);

    let script = dir.script("long.jsonl", &[json!(steps)]);
    let script = script.to_str().unwrap();
    for output in ["text", "jsonl"] {
        survives_closed_reader(
            pincer(&dir, &["run", "--script", script, "--output", output, "go"]),
            Close::AfterOneLine,
        );
    }
}
