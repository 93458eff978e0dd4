//! The model scripts in `examples/` (README, `docs/terminal.md`) run as a
//! person would try them, through `pincer run` in a workspace holding a copy
//! of the repository's `examples/` directory: `approve.jsonl` writes a file
//! only when the approval is given, `tools.jsonl` reads, searches and runs a
//! command, `question.jsonl` asks and is told the answer.

use std::path::Path;
use std::process::Output;

use crate::support::{TestDir, of_type};
use serde_json::Value;

/// A workspace with the repository's `examples/` copied in, as on a fresh clone.
fn workspace(dir: &TestDir) -> std::path::PathBuf {
    let ws = dir.workspace();
    let from = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples");
    std::fs::create_dir_all(ws.join("examples")).unwrap();
    for entry in std::fs::read_dir(&from).unwrap() {
        let entry = entry.unwrap();
        std::fs::copy(entry.path(), ws.join("examples").join(entry.file_name())).unwrap();
    }
    ws
}

/// `pincer run --script examples/NAME --input INPUT --output jsonl` run from the
/// workspace, the script named by its relative path as in the docs.
fn run_example(dir: &TestDir, name: &str, input: &str) -> (Output, Vec<Value>) {
    workspace(dir);
    dir.run_script_jsonl(&format!("examples/{name}"), input)
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn reply(lines: &[Value]) -> String {
    of_type(lines, "text_delta")
        .iter()
        .filter_map(|l| l["text"].as_str())
        .collect()
}

#[test]
fn approve_example_writes_the_file_only_when_approved() {
    let dir = TestDir::new();
    let (out, lines) = run_example(
        &dir,
        "approve.jsonl",
        "{\"prompt\": \"Write a note\"}\n{\"approve\": \"allow_once\", \"tool\": \"write_file\"}\n",
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let requested = of_type(&lines, "approval_requested");
    assert_eq!(requested.len(), 1, "{lines:#?}");
    assert_eq!(requested[0]["tool"], "write_file");
    assert_eq!(
        of_type(&lines, "approval_decided")[0]["decision"],
        "allow_once"
    );
    let note = dir.workspace().join("pincer-note.txt");
    assert_eq!(
        std::fs::read_to_string(&note).unwrap(),
        "Pincer wrote this note after you approved it.\n"
    );
    assert!(reply(&lines).contains("pincer-note.txt"), "{lines:#?}");

    // Rejected: nothing is written, the model is told, the run completes.
    let dir = TestDir::new();
    let (out, lines) = run_example(
        &dir,
        "approve.jsonl",
        "{\"prompt\": \"Write a note\"}\n{\"approve\": \"reject_once\"}\n",
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(
        of_type(&lines, "approval_decided")[0]["decision"],
        "reject_once"
    );
    let result = &of_type(&lines, "tool_result")[0];
    assert_eq!(result["verdict"], "rejected", "{result:#?}");
    assert_eq!(result["is_error"], true, "{result:#?}");
    assert!(!dir.workspace().join("pincer-note.txt").exists());

    // Nobody to answer: refused, and the exit code says so.
    let dir = TestDir::new();
    let (out, lines) = run_example(&dir, "approve.jsonl", "{\"prompt\": \"Write a note\"}\n");
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    assert_eq!(
        of_type(&lines, "approval_decided")[0]["decision"],
        "unattended"
    );
    assert!(stderr(&out).contains("--approve all"), "{}", stderr(&out));
    assert!(!dir.workspace().join("pincer-note.txt").exists());
}

#[test]
fn tools_example_reads_searches_and_runs_a_command_unasked() {
    let dir = TestDir::new();
    let (out, lines) = run_example(&dir, "tools.jsonl", "{\"prompt\": \"Look around\"}\n");
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(
        of_type(&lines, "approval_requested").is_empty(),
        "{lines:#?}"
    );
    let calls: Vec<&str> = of_type(&lines, "tool_call")
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(calls, ["read_file", "grep", "shell"]);
    let results = of_type(&lines, "tool_result");
    assert_eq!(results.len(), 3, "{results:#?}");
    for result in &results {
        assert_eq!(result["is_error"], false, "{result:#?}");
        assert_eq!(result["verdict"], "allowed", "{result:#?}");
    }
    let hello = std::fs::read_to_string(dir.workspace().join("examples/hello.jsonl")).unwrap();
    let output = |i: usize| results[i]["output"].as_str().unwrap().to_owned();
    assert!(
        output(0).contains("A model script for the scripted provider"),
        "{}",
        output(0)
    );
    for example in ["approve.jsonl", "question.jsonl", "tools.jsonl"] {
        assert!(
            output(1).contains(&format!("examples/{example}:")),
            "{}",
            output(1)
        );
    }
    assert!(
        !output(1).contains("examples/hello.jsonl:"),
        "{}",
        output(1)
    );
    assert!(
        output(2).starts_with(&format!("{} examples/hello.jsonl\n", hello.lines().count())),
        "{}",
        output(2)
    );
    assert!(output(2).contains("[exit code 0]"), "{}", output(2));
    assert!(reply(&lines).contains("counted its lines"), "{lines:#?}");
}

#[test]
fn question_example_asks_and_the_model_is_told_the_answer() {
    let dir = TestDir::new();
    let (out, lines) = run_example(
        &dir,
        "question.jsonl",
        "{\"prompt\": \"Greet me\"}\n{\"answer\": \"French\"}\n",
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let asked = &of_type(&lines, "question_asked")[0];
    assert_eq!(
        asked["question"],
        "Which language should the greeting be in?"
    );
    assert_eq!(asked["options"], serde_json::json!(["English", "French"]));
    let answered = &of_type(&lines, "question_answered")[0];
    assert_eq!(answered["outcome"], "answered");
    assert_eq!(answered["answer"], "French");
    assert_eq!(
        of_type(&lines, "tool_result")[0]["output"],
        "The user answered: French"
    );
    assert!(reply(&lines).contains("your answer"), "{lines:#?}");
}

/// The CodeCompanion.nvim configuration the README and `docs/editors.md`
/// show is the example file the editor suite loads, word for word.
#[test]
fn the_codecompanion_snippet_is_the_tested_example_file() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let example =
        std::fs::read_to_string(root.join("editors/neovim/examples/codecompanion.lua")).unwrap();
    for doc in ["README.md", "docs/editors.md"] {
        let text = std::fs::read_to_string(root.join(doc)).unwrap();
        assert!(
            text.contains(&format!("```lua\n{example}```\n")),
            "{doc} does not quote editors/neovim/examples/codecompanion.lua as it is"
        );
        assert!(
            !text.contains("strategies = { chat"),
            "{doc} shows another CodeCompanion configuration"
        );
    }
}
