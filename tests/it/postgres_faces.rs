//! Every face on the PostgreSQL store (`docs/scale-out.md`): the same
//! commands as on SQLite, with `PINCER_STORE_URL` naming a fresh database
//! on a real server, and nothing written to the data directory's SQLite.

use std::process::Output;

use serde_json::{Value, json};

use crate::support::postgres;
use crate::support::{AcpProcess, TestDir};

fn pincer(dir: &TestDir, url: &str, args: &[&str]) -> Output {
    dir.command()
        .env("PINCER_STORE_URL", url)
        .current_dir(dir.workspace())
        .args(args)
        .output()
        .unwrap()
}

fn ok(out: &Output) -> String {
    assert!(
        out.status.success(),
        "exit {:?}\nstdout: {}\nstderr: {}",
        out.status.code(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn every_face_reads_and_writes_the_postgres_store() {
    let url = postgres::shared().fresh_database();
    let dir = TestDir::new();
    let workspace = dir.workspace();
    let script = dir.script(
        "s.jsonl",
        &[
            json!([{"tool_call": {"id": "r1", "name": "read_file", "arguments": {"path": "notes.txt"}}}]),
            json!([{"text": "It says hello."}]),
        ],
    );
    std::fs::write(workspace.join("notes.txt"), "hello\n").unwrap();

    // `pincer run`: a run with a tool call (a receipt) on PostgreSQL.
    let out = pincer(
        &dir,
        &url,
        &[
            "run",
            "--script",
            script.to_str().unwrap(),
            "--output",
            "jsonl",
            "read notes.txt",
        ],
    );
    let lines: Vec<Value> = ok(&out)
        .lines()
        .filter_map(|line| serde_json::from_str(line).ok())
        .collect();
    let session = lines
        .iter()
        .find(|l| l["type"] == "session")
        .and_then(|l| l["session_id"].as_str())
        .unwrap()
        .to_owned();
    let run = lines
        .iter()
        .find_map(|l| l["run_id"].as_str())
        .unwrap()
        .to_owned();

    // The inspection commands read it back.
    let listed = ok(&pincer(&dir, &url, &["sessions", "list", "--json"]));
    assert!(listed.contains(&session), "{listed}");
    let shown: Value = serde_json::from_str(&ok(&pincer(
        &dir,
        &url,
        &["sessions", "show", &session, "--json"],
    )))
    .unwrap();
    assert_eq!(shown["runs"][0]["state"], "completed", "{shown}");
    let run_shown = ok(&pincer(&dir, &url, &["runs", "show", &run]));
    assert!(run_shown.contains("completed"), "{run_shown}");
    let tape = ok(&pincer(&dir, &url, &["tape", &run, "--json"]));
    assert!(
        tape.contains("tool_result") && tape.contains("It says hello."),
        "{tape}"
    );
    let verified = ok(&pincer(&dir, &url, &["verify"]));
    assert!(verified.starts_with("ok: 1 receipts"), "{verified}");

    // Memory and trust are kept there too.
    ok(&pincer(
        &dir,
        &url,
        &[
            "memory",
            "add",
            "--scope",
            "user",
            "The build uses cargo nextest",
        ],
    ));
    let found = ok(&pincer(&dir, &url, &["memory", "search", "nextest"]));
    assert!(found.contains("cargo nextest"), "{found}");
    std::fs::create_dir_all(workspace.join(".git")).unwrap();
    ok(&pincer(&dir, &url, &["trust", workspace.to_str().unwrap()]));
    let trusted = ok(&pincer(&dir, &url, &["trust", "--list"]));
    assert!(trusted.contains(workspace.to_str().unwrap()), "{trusted}");
    let outbox = ok(&pincer(&dir, &url, &["channels", "outbox"]));
    assert!(!outbox.contains("error"), "{outbox}");

    // The editor face: a session made and prompted over ACP, on the same store.
    let acp_script = dir.script("acp.jsonl", &[json!([{"text": "From the editor."}])]);
    let mut acp = AcpProcess::spawn_env(
        &dir,
        &["--script", acp_script.to_str().unwrap()],
        &[("PINCER_STORE_URL", url.as_str())],
    );
    acp.initialize();
    let editor_session = acp.new_session(&workspace);
    let (_, response) = acp.prompt(&editor_session, "hello");
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    assert!(acp.finish().success());
    let listed = ok(&pincer(&dir, &url, &["sessions", "list", "--json"]));
    assert!(listed.contains(&editor_session), "{listed}");

    // `pincer store status` and `pincer doctor` describe the server.
    let status: Value =
        serde_json::from_str(&ok(&pincer(&dir, &url, &["store", "status", "--json"]))).unwrap();
    assert_eq!(status["backend"], "postgres", "{status}");
    assert_eq!(status["schemaVersion"], 4, "{status}");
    assert_eq!(status["openRuns"], 0, "{status}");
    assert!(!status["location"].as_str().unwrap().contains("password"));
    let doctor = pincer(&dir, &url, &["doctor"]);
    let report = String::from_utf8_lossy(&doctor.stdout).into_owned();
    for line in ["ok   database     PostgreSQL", "ok   clock", "ok   leases"] {
        assert!(report.contains(line), "{line:?} missing from:\n{report}");
    }

    // Nothing went to SQLite in the data directory.
    assert!(
        !dir.data_dir().join("pincer.db").exists(),
        "a SQLite database was made beside the PostgreSQL store"
    );
}

#[test]
fn a_bad_store_url_is_refused_naming_the_problem() {
    let dir = TestDir::new();
    for (url, says) in [
        ("mysql://ann@db/pincer", "expected a postgres://"),
        (
            "postgres://ann:s3cret@127.0.0.1:1/pincer?sslmode=sometimes",
            "unknown sslmode",
        ),
    ] {
        let out = pincer(&dir, url, &["sessions", "list"]);
        assert_eq!(out.status.code(), Some(2), "{url}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            stderr.contains("PINCER_STORE_URL") && stderr.contains(says),
            "{url}: {stderr}"
        );
        assert!(!stderr.contains("s3cret"), "the password shows: {stderr}");
    }
    // A server that does not answer: a clear failure, not a hang.
    let out = pincer(
        &dir,
        "postgres://ann:s3cret@127.0.0.1:1/pincer?sslmode=disable",
        &["sessions", "list"],
    );
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(
            "cannot reach the PostgreSQL server at postgres://ann:***@127.0.0.1:1/pincer"
        ),
        "{stderr}"
    );
}
