//! The loop guard through `pincer run`: the same tool with the same
//! arguments, a third time in one run, is answered with a note instead of
//! running; a fourth ends the run with the reason. Receipts and `pincer
//! verify` still hold: every call gets one result and one receipt.

use std::process::{Output, Stdio};

use crate::support::TestDir;
use serde_json::{Value, json};

fn read_same() -> Value {
    json!([{"tool_call": {"name": "read_file", "arguments": {"path": "a.txt"}}}])
}

fn run(dir: &TestDir, script: &[Value], config: &str) -> (Output, Vec<Value>) {
    let config_dir = dir.path().join("config").join("pincer");
    std::fs::create_dir_all(&config_dir).unwrap();
    std::fs::write(config_dir.join("config.toml"), config).unwrap();
    let workspace = dir.workspace();
    std::fs::write(workspace.join("a.txt"), "same every time").unwrap();
    let script = dir.script("s.jsonl", script);
    let out = dir
        .command()
        .args([
            "run",
            "--script",
            script.to_str().unwrap(),
            "--output",
            "jsonl",
            "--cwd",
            workspace.to_str().unwrap(),
            "read a.txt until it changes",
        ])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let lines = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    (out, lines)
}

fn results(lines: &[Value]) -> Vec<(String, String)> {
    lines
        .iter()
        .filter(|l| l["type"] == "tool_result")
        .map(|l| {
            (
                l["verdict"].as_str().unwrap_or_default().to_owned(),
                l["output"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect()
}

#[test]
fn a_third_identical_call_gets_a_note_and_a_fourth_ends_the_run() {
    let dir = TestDir::new();
    let script = [
        read_same(),
        read_same(),
        read_same(),
        read_same(),
        json!([{"text": "never reached"}]),
    ];
    let (out, lines) = run(&dir, &script, "");
    let results = results(&lines);
    assert_eq!(results.len(), 4, "{lines:#?}");
    assert_eq!(
        results[0],
        ("allowed".to_owned(), "same every time".to_owned())
    );
    assert_eq!(results[1].1, "same every time");
    assert_eq!(results[2].0, "denied");
    assert!(
        results[2]
            .1
            .contains("was called with these same arguments 3 times"),
        "{}",
        results[2].1
    );
    assert_eq!(results[3].0, "denied");
    let end = lines.last().unwrap();
    assert_eq!(end["state"], "failed", "{end}");
    assert!(
        end["error"]
            .as_str()
            .unwrap()
            .contains("stopped by the loop guard: the model called `read_file` with the same arguments 4 times"),
        "{end}"
    );
    assert_eq!(out.status.code(), Some(1));
    assert!(!String::from_utf8_lossy(&out.stdout).contains("never reached"));
    dir.verify();
}

#[test]
fn a_model_that_takes_the_note_finishes_and_the_guard_can_be_turned_off() {
    let dir = TestDir::new();
    let script = [
        read_same(),
        read_same(),
        read_same(),
        json!([{"text": "It does not change; stopping here."}]),
    ];
    let (out, lines) = run(&dir, &script, "");
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(results(&lines)[2].0, "denied");
    dir.verify();
    let dir = TestDir::new();
    let script = [
        read_same(),
        read_same(),
        read_same(),
        read_same(),
        json!([{"text": "done"}]),
    ];
    let (out, lines) = run(&dir, &script, "loop_guard = 0\n");
    assert_eq!(out.status.code(), Some(0));
    assert!(
        results(&lines)
            .iter()
            .all(|(verdict, _)| verdict == "allowed")
    );
}
