//! Memory through the binary: the model saves with `memory_save` in one
//! process and a later session of the same workspace, in another process,
//! is sent the item in a marked block before its prompt (and a session of
//! another workspace is not); user items reach every workspace; pinned items
//! are stated in the system prompt; a secret is refused wherever it comes
//! from; `pincer memory` lists, searches, adds, edits, removes, exports and
//! imports.

use std::path::Path;

use crate::support::TestDir;
use crate::support::http::openai::{message_text as user_text, text_reply, tool_reply};
use crate::support::http::{Loopback, Request};
use serde_json::{Value, json};

/// A model that saves what a prompt starting "remember:" says (with the
/// rest as the text) and answers "ok" otherwise.
fn model() -> Loopback {
    Loopback::start(|request: &Request, _| {
        let messages = request.body["messages"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        let last = messages.last().cloned().unwrap_or(Value::Null);
        if last["role"] == "tool" {
            return text_reply(&format!("tool said: {}", last["content"]));
        }
        let prompt = user_text(&last);
        match prompt.split_once("remember:") {
            Some((_, fact)) => {
                let (scope, fact) = match fact.trim().split_once("|") {
                    Some((scope, fact)) => (scope.trim().to_owned(), fact.trim().to_owned()),
                    None => ("workspace".to_owned(), fact.trim().to_owned()),
                };
                tool_reply(
                    "memory_save",
                    &json!({"text": fact, "scope": scope, "tags": ["testing"]}),
                )
            }
            None => text_reply("ok"),
        }
    })
}

/// `pincer run PROMPT` in `cwd` (mode full, every approval given: a
/// user-scope save asks even in full mode) against `server`; its stdout.
fn run(dir: &TestDir, server: &Loopback, cwd: &Path, prompt: &str) -> String {
    let out = dir
        .command()
        .env("OPENAI_API_KEY", "sk-test")
        .env("OPENAI_BASE_URL", format!("{}/v1", server.url))
        .args([
            "run",
            "--provider",
            "openai",
            "--model",
            "m",
            "--mode",
            "full",
            "--approve",
            "all",
        ])
        .arg("--cwd")
        .arg(cwd)
        .arg(prompt)
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The last request's (system prompt, latest user message).
fn last_sent(server: &Loopback) -> (String, String) {
    let requests = server.requests();
    let messages = requests.last().unwrap().body["messages"]
        .as_array()
        .unwrap()
        .clone();
    let system = messages[0]["content"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    let user = messages
        .iter()
        .rev()
        .find(|m| m["role"] == "user")
        .map(user_text)
        .unwrap_or_default();
    (system, user)
}

fn memory(dir: &TestDir, cwd: &Path, args: &[&str]) -> std::process::Output {
    dir.command()
        .current_dir(cwd)
        .arg("memory")
        .args(args)
        .output()
        .unwrap()
}

fn items(dir: &TestDir) -> Vec<Value> {
    let out = memory(dir, dir.path(), &["list", "--all", "--json"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect()
}

#[test]
fn what_one_session_saves_a_later_session_of_the_workspace_is_told() {
    let dir = TestDir::new();
    let server = model();
    let ws = dir.workspace();
    let other = dir.path().join("other");
    std::fs::create_dir_all(&other).unwrap();
    let other = other.canonicalize().unwrap();

    let said = run(
        &dir,
        &server,
        &ws,
        "remember: The integration tests need the staging fixture loaded first",
    );
    assert!(said.contains("Saved mem_"), "{said}");
    let saved = items(&dir);
    assert_eq!(saved.len(), 1, "{saved:#?}");
    assert_eq!(saved[0]["scope"], "workspace");
    assert_eq!(saved[0]["scope_key"], ws.to_str().unwrap());
    assert_eq!(saved[0]["tags"], json!(["testing"]));
    assert_eq!(saved[0]["source"]["by"], "model");
    assert_eq!(saved[0]["source"]["call"], "call_1");
    assert!(
        saved[0]["source"]["run"]
            .as_str()
            .unwrap()
            .starts_with("run_")
    );

    // A new process and session in the same workspace: recalled before the prompt.
    run(&dir, &server, &ws, "How do I run the integration tests?");
    let (_, user) = last_sent(&server);
    assert!(user.starts_with("<memory>\n"), "{user}");
    assert!(
        user.contains("The integration tests need the staging fixture loaded first"),
        "{user}"
    );
    assert!(
        user.ends_with("How do I run the integration tests?"),
        "{user}"
    );
    // The recalled block went to the model only: the stored conversation
    // holds the prompt as the person wrote it.
    let listed = dir
        .command()
        .args(["sessions", "list", "--json"])
        .output()
        .unwrap();
    let newest: Value =
        serde_json::from_slice(listed.stdout.split(|b| *b == b'\n').next().unwrap()).unwrap();
    let shown = dir.show_session(newest["session_id"].as_str().unwrap());
    let stored = shown["history"][0]["message"].to_string();
    assert!(
        stored.contains("How do I run the integration tests?"),
        "{stored}"
    );
    assert!(!stored.contains("<memory>"), "{stored}");
    assert!(!stored.contains("staging fixture"), "{stored}");
    // Nothing relevant: no block.
    run(&dir, &server, &ws, "What colour is the logo?");
    assert!(!last_sent(&server).1.contains("<memory>"));
    // Another workspace does not see it.
    run(&dir, &server, &other, "How do I run the integration tests?");
    assert!(!last_sent(&server).1.contains("<memory>"));

    // A user item reaches every workspace.
    run(
        &dir,
        &server,
        &ws,
        "remember: user | The person wants British spelling in every answer",
    );
    run(&dir, &server, &other, "Which spelling should answers use?");
    let (_, user) = last_sent(&server);
    assert!(user.contains("(user, mem_"), "{user}");
    assert!(user.contains("British spelling"), "{user}");

    // Recalled items were marked used.
    let used: Vec<Value> = items(&dir)
        .into_iter()
        .filter(|item| item["last_used_at"].is_i64())
        .collect();
    assert_eq!(used.len(), 2, "{used:#?}");

    // A pinned item is in the system prompt of every session of its scope,
    // whatever the prompt.
    let id = saved[0]["id"].as_str().unwrap();
    let out = memory(&dir, &ws, &["edit", id, "--pin"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    run(&dir, &server, &ws, "What colour is the logo?");
    let (system, user) = last_sent(&server);
    assert!(system.contains("# Remembered (pinned)"), "{system}");
    assert!(system.contains("staging fixture"), "{system}");
    assert!(
        !user.contains("<memory>"),
        "a pinned item is not recalled twice: {user}"
    );
    run(&dir, &server, &other, "What colour is the logo?");
    assert!(!last_sent(&server).0.contains("staging fixture"));
}

#[test]
fn a_secret_is_never_stored_from_the_model_or_the_person() {
    let dir = TestDir::new();
    let server = model();
    let ws = dir.workspace();
    let key = "sk-proj-Abcdefghijklmnopqrstuvwxyz0123456789ABCDEFGH";
    let said = run(
        &dir,
        &server,
        &ws,
        &format!("remember: the deploy key is {key}"),
    );
    assert!(said.contains("looks like a secret"), "{said}");
    assert!(!said.contains(key), "{said}");
    let out = memory(&dir, &ws, &["add", &format!("token {key}")]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("looks like a secret"), "{err}");
    assert!(!err.contains(key), "{err}");
    assert!(items(&dir).is_empty());
}

#[test]
fn the_person_manages_memory_from_the_command_line() {
    let dir = TestDir::new();
    let ws = dir.workspace();
    let ok = |out: std::process::Output| -> String {
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let a = ok(memory(
        &dir,
        &ws,
        &["add", "Releases are cut on Tuesdays", "--tag", "Release"],
    ));
    let a = a.trim().to_owned();
    assert!(a.starts_with("mem_"), "{a}");
    let b = ok(memory(
        &dir,
        &ws,
        &["add", "--scope", "user", "Prefers tabs over spaces"],
    ));
    let b = b.trim().to_owned();

    let listed = ok(memory(&dir, &ws, &["list"]));
    assert!(listed.starts_with("ID"), "{listed}");
    assert!(
        listed.contains("Releases are cut on Tuesdays [release]"),
        "{listed}"
    );
    assert!(listed.contains("user"), "{listed}");
    // Another directory sees the user item only.
    let elsewhere = dir.path().join("elsewhere");
    std::fs::create_dir_all(&elsewhere).unwrap();
    let there = ok(memory(&dir, &elsewhere, &["list", "--json"]));
    assert_eq!(there.lines().count(), 1, "{there}");
    assert!(there.contains(&b));

    let found = ok(memory(
        &dir,
        &ws,
        &["search", "when are releases cut", "--json"],
    ));
    assert_eq!(found.lines().count(), 1, "{found}");
    assert!(found.contains(&a));

    let edited = ok(memory(
        &dir,
        &ws,
        &[
            "edit",
            &a,
            "--text",
            "Releases are cut on Wednesdays",
            "--pin",
        ],
    ));
    assert!(edited.contains("Wednesdays"), "{edited}");
    assert!(edited.contains("(pinned)"), "{edited}");
    let pinned = ok(memory(&dir, &ws, &["list", "--pinned", "--json"]));
    assert_eq!(pinned.lines().count(), 1, "{pinned}");

    // Export, remove everything, import back: the same items.
    let exported = ok(memory(&dir, &ws, &["export", "--all"]));
    assert_eq!(exported.lines().count(), 2, "{exported}");
    let removed = ok(memory(&dir, &ws, &["rm", &a, &b]));
    assert_eq!(removed, format!("forgot {a}\nforgot {b}\n"));
    assert!(items(&dir).is_empty());
    let file = dir.path().join("memory.jsonl");
    std::fs::write(
        &file,
        format!("{exported}not json\n{{\"id\":\"mem_x\",\"text\":\"\",\"scope\":\"user\",\"scope_key\":\"\",\"source\":{{\"by\":\"import\"}},\"created_at\":1,\"updated_at\":1}}\n"),
    )
    .unwrap();
    let out = memory(&dir, &ws, &["import", file.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2), "refused lines fail the command");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("line 3: not a memory item"), "{err}");
    assert!(err.contains("line 4: the text is empty"), "{err}");
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "imported 2, already there 0, refused 2\n"
    );
    let mut back: Vec<String> = items(&dir)
        .iter()
        .map(|i| i["id"].as_str().unwrap().to_owned())
        .collect();
    back.sort();
    let mut want = vec![a.clone(), b.clone()];
    want.sort();
    assert_eq!(back, want);
    // Importing again adds nothing.
    std::fs::write(&file, &exported).unwrap();
    let again = ok(memory(&dir, &ws, &["import", file.to_str().unwrap()]));
    assert_eq!(again, "imported 0, already there 2, refused 0\n");

    // Bad input is named.
    let out = memory(&dir, &ws, &["list", "--scope", "team"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("unknown scope team;"));
    let out = memory(&dir, &ws, &["rm", "mem_nothing"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("no memory item mem_nothing"));
    let out = memory(&dir, &ws, &["edit", &a]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("nothing to change"));
}
