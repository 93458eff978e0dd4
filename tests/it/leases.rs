//! One owner per live session across processes (`core::lease`): two
//! `pincer run --session ID` at once take turns, in order; `--no-wait`
//! refuses with exit code 5 instead of waiting.

use std::io::{BufRead as _, BufReader};
use std::process::{Child, Stdio};

use crate::support::TestDir;
use serde_json::{Value, json};

/// The model script every process plays: a scripted model picks its turn by
/// how many the session already had, so a run computed without the one
/// before it would play that one's turn again.
fn script() -> Vec<Value> {
    vec![
        json!([{"text": "hi"}]),
        json!([{"text": "first half"}, {"delay_ms": 2500}, {"text": ", second half"}]),
        json!([{"text": "B's answer"}]),
    ]
}

fn spawn_run(dir: &TestDir, session: &str, prompt: &str, extra: &[&str]) -> Child {
    let script = dir.script("model.jsonl", &script());
    dir.command()
        .args([
            "run",
            "--session",
            session,
            "--script",
            script.to_str().unwrap(),
        ])
        .args(["--output", "jsonl"])
        .args(extra)
        .arg(prompt)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

#[test]
fn two_runs_of_one_session_take_turns_and_no_wait_refuses() {
    let dir = TestDir::new();
    let (out, lines) = dir.run_jsonl(&script(), "{\"prompt\": \"hello\"}\n");
    assert!(out.status.success(), "{out:?}");
    let session = lines[0]["session_id"].as_str().unwrap().to_owned();

    // A: a slow model turn. Read its events until it is mid-turn.
    let mut a = spawn_run(&dir, &session, "A", &[]);
    let mut a_out = BufReader::new(a.stdout.take().unwrap());
    let mut line = String::new();
    loop {
        line.clear();
        assert!(a_out.read_line(&mut line).unwrap() > 0, "A ended early");
        if line.contains("first half") {
            break;
        }
    }
    // C refuses at once rather than wait.
    let c = spawn_run(&dir, &session, "C", &["--no-wait"])
        .wait_with_output()
        .unwrap();
    assert_eq!(c.status.code(), Some(5), "{c:?}");
    let c_err = String::from_utf8_lossy(&c.stderr);
    assert!(
        c_err.contains(&format!(
            "session {session} is being run by another Pincer process"
        )) && c_err.contains("without --no-wait this prompt waits for it"),
        "{c:?}"
    );
    // B waits for A, says so, and then runs.
    let b = spawn_run(&dir, &session, "B", &[]);
    let b = b.wait_with_output().unwrap();
    assert!(b.status.success(), "{b:?}");
    assert!(
        String::from_utf8_lossy(&b.stderr).contains("Another Pincer process"),
        "{}",
        String::from_utf8_lossy(&b.stderr)
    );
    let a = a.wait_with_output().unwrap();
    assert!(a.status.success(), "{a:?}");

    let shown = dir.show_session(&session);
    let history: Vec<(String, String)> = shown["history"]
        .as_array()
        .unwrap()
        .iter()
        .map(|entry| {
            let message = &entry["message"];
            let text = match message["role"].as_str().unwrap() {
                "user" => message["content"][0]["text"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned(),
                _ => message["text"].as_str().unwrap_or_default().to_owned(),
            };
            (message["role"].as_str().unwrap().to_owned(), text)
        })
        .collect();
    let expected: Vec<(String, String)> = [
        ("user", "hello"),
        ("assistant", "hi"),
        ("user", "A"),
        ("assistant", "first half, second half"),
        ("user", "B"),
        ("assistant", "B's answer"),
    ]
    .iter()
    .map(|(r, t)| ((*r).to_owned(), (*t).to_owned()))
    .collect();
    assert_eq!(history, expected);
    // C never became a run that did anything.
    assert_eq!(shown["runs"].as_array().unwrap().len(), 3, "{shown:#}");
}
