//! `pincer store copy` through the binary: a SQLite data directory to
//! PostgreSQL and back, `pincer verify` on each, the same sessions, runs,
//! receipts and memory on every side, and a target that is not empty
//! refused.

use std::process::Output;

use serde_json::{Value, json};

use crate::support::TestDir;
use crate::support::postgres;

fn pincer(dir: &TestDir, args: &[&str]) -> Output {
    dir.command()
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

fn show(dir: &TestDir, store: &[&str], session: &str) -> Value {
    let mut args = store.to_vec();
    args.extend(["sessions", "show", session, "--json"]);
    serde_json::from_str(&ok(&pincer(dir, &args))).unwrap()
}

#[test]
fn a_sqlite_store_copied_to_postgres_and_back_keeps_everything() {
    let dir = TestDir::new();
    let workspace = dir.workspace();
    std::fs::write(workspace.join("notes.txt"), "hello\n").unwrap();
    let script = dir.script(
        "s.jsonl",
        &[
            json!([{"tool_call": {"id": "r1", "name": "read_file", "arguments": {"path": "notes.txt"}}}]),
            json!([{"text": "It says hello."}]),
            json!([{"text": "Second answer."}]),
            json!([{"text": "Third, on PostgreSQL."}]),
        ],
    );
    let script = script.to_str().unwrap();
    let out = ok(&pincer(
        &dir,
        &[
            "run",
            "--script",
            script,
            "--output",
            "jsonl",
            "read notes.txt",
        ],
    ));
    let session = out
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .find(|l| l["type"] == "session")
        .and_then(|l| l["session_id"].as_str().map(str::to_owned))
        .unwrap();
    ok(&pincer(
        &dir,
        &["run", "--script", script, "--session", &session, "again"],
    ));
    ok(&pincer(
        &dir,
        &[
            "memory",
            "add",
            "--scope",
            "user",
            "Deploys go through staging",
        ],
    ));
    let data = dir.data_dir();
    let data = data.to_str().unwrap();
    let before = show(&dir, &[], &session);

    // SQLite → PostgreSQL.
    let url = postgres::shared().fresh_database();
    let copied: Value = serde_json::from_str(&ok(&pincer(
        &dir,
        &["store", "copy", "--from", data, "--to", &url, "--json"],
    )))
    .unwrap();
    assert_eq!(
        copied["tables"]["runs"],
        json!({"source": 2, "target": 2}),
        "{copied}"
    );
    assert_eq!(
        copied["tables"]["receipts"],
        json!({"source": 1, "target": 1})
    );
    assert_eq!(
        copied["tables"]["memories"],
        json!({"source": 1, "target": 1})
    );
    assert!(copied["tables"]["tape"]["source"].as_u64().unwrap() > 2);
    assert_eq!(copied["sourceMigrated"], Value::Null);
    for (table, counts) in copied["tables"].as_object().unwrap() {
        assert_eq!(counts["source"], counts["target"], "{table}");
    }
    let verified = ok(&pincer(&dir, &["--store", &url, "verify"]));
    assert!(verified.starts_with("ok: 1 receipts"), "{verified}");
    let listed = ok(&pincer(&dir, &["--store", &url, "sessions", "list"]));
    assert!(listed.contains(&session), "{listed}");
    assert_eq!(show(&dir, &["--store", &url], &session), before);
    let found = ok(&pincer(
        &dir,
        &["--store", &url, "memory", "search", "staging"],
    ));
    assert!(found.contains("Deploys go through staging"), "{found}");
    // The session goes on on PostgreSQL, its runs in order.
    ok(&pincer(
        &dir,
        &[
            "--store",
            &url,
            "run",
            "--script",
            script,
            "--session",
            &session,
            "more",
        ],
    ));
    let on_pg = show(&dir, &["--store", &url], &session);
    assert_eq!(on_pg["runs"].as_array().unwrap().len(), 3, "{on_pg}");

    // A target that holds sessions is refused, and left as it was.
    let again = pincer(&dir, &["store", "copy", "--from", data, "--to", &url]);
    assert_eq!(again.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&again.stderr);
    assert!(
        stderr.contains(
            "the target is not empty: it holds 1 session(s), 1 receipt(s) and 1 memory item(s); copy into an empty database"
        ),
        "{stderr}"
    );
    assert_eq!(show(&dir, &["--store", &url], &session), on_pg);

    // PostgreSQL → a new SQLite data directory.
    let back = dir.path().join("back");
    let back = back.to_str().unwrap();
    let text = ok(&pincer(
        &dir,
        &["store", "copy", "--from", &url, "--to", back],
    ));
    assert!(text.contains("equal"), "{text}");
    assert!(
        text.lines()
            .any(|line| line.split_whitespace().collect::<Vec<_>>() == ["runs", "3", "->", "3"]),
        "{text}"
    );
    let verified = ok(&pincer(&dir, &["--data-dir", back, "verify"]));
    assert!(verified.starts_with("ok: 1 receipts"), "{verified}");
    assert_eq!(show(&dir, &["--data-dir", back], &session), on_pg);
    let listed = ok(&pincer(&dir, &["--data-dir", back, "memory", "list"]));
    assert!(listed.contains("Deploys go through staging"), "{listed}");
    // A copy of the copy counts the same rows, both ways.
    let copied = |from: &str, to: &str| -> Value {
        serde_json::from_str(&ok(&pincer(
            &dir,
            &["store", "copy", "--from", from, "--to", to, "--json"],
        )))
        .unwrap()
    };
    let pg_again = postgres::shared().fresh_database();
    let there = copied(back, &pg_again);
    let home = dir.path().join("home");
    let home = copied(&pg_again, home.to_str().unwrap());
    assert_eq!(there["tables"], home["tables"]);
    assert_eq!(home["tables"]["runs"], json!({"source": 3, "target": 3}));

    // A data directory that holds sessions is refused too.
    let into_sqlite = pincer(&dir, &["store", "copy", "--from", &url, "--to", data]);
    assert_eq!(into_sqlite.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&into_sqlite.stderr);
    assert!(
        stderr.contains("the target is not empty: it holds 1 session(s)")
            && stderr.contains("copy into a new data directory"),
        "{stderr}"
    );
}

#[test]
fn a_copy_names_what_is_wrong_with_its_places() {
    let dir = TestDir::new();
    let empty = dir.path().join("nothing-here");
    let url = postgres::shared().fresh_database();
    for (args, code, says) in [
        (
            vec!["store", "copy", "--from", "mysql://db/x", "--to", &url],
            2,
            "--from: expected a data directory or a postgres:// URL",
        ),
        (
            vec![
                "store",
                "copy",
                "--from",
                empty.to_str().unwrap(),
                "--to",
                &url,
            ],
            1,
            "no Pincer store at",
        ),
        (
            vec!["store", "copy", "--from", &url, "--to", &url],
            1,
            "the same store",
        ),
    ] {
        let out = pincer(&dir, &args);
        assert_eq!(out.status.code(), Some(code), "{args:?}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains(says), "{args:?}: {stderr}");
    }
}
