//! One owner per live session across processes (`core::lease`): two
//! `pincer run --session ID` at once take turns, in order; `--no-wait`
//! refuses with exit code 5 instead of waiting; an owner killed mid-run is
//! taken over at once; a stopped owner is taken over when its lease lapses,
//! and its late writes are refused.

use std::io::{BufRead as _, BufReader};
use std::process::{Child, Stdio};

use crate::support::{TestDir, stop_outside_a_write};
use serde_json::{Value, json};

/// The model script every process plays: a scripted model picks its turn by
/// how many the session already had, so a run computed without the one
/// before it would play that one's turn again.
fn script() -> Vec<Value> {
    vec![
        json!([{"text": "hi"}]),
        // Long enough that A is still mid-turn when a loaded machine gets to
        // stop or kill it (at 2.5 s it had sometimes finished, and exited).
        json!([{"text": "first half"}, {"delay_ms": 8000}, {"text": ", second half"}]),
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
    let history = history(&shown);
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

/// The session's history as (role, text).
fn history(shown: &Value) -> Vec<(String, String)> {
    shown["history"]
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
        .collect()
}

/// The history after B took the session over from A mid-turn: A's partial
/// reply kept, then B's exchange.
const TAKEN_OVER: &[(&str, &str)] = &[
    ("user", "hello"),
    ("assistant", "hi"),
    ("user", "A"),
    ("assistant", "first half"),
    ("user", "B"),
    ("assistant", "B's answer"),
];

fn pairs(expected: &[(&str, &str)]) -> Vec<(String, String)> {
    expected
        .iter()
        .map(|(r, t)| ((*r).to_owned(), (*t).to_owned()))
        .collect()
}

/// A session with one exchange, and A started on its slow second turn,
/// read until it is mid-turn.
/// Its stderr is read as it comes (a full pipe would stall it), by a thread
/// that returns it all at the end.
fn a_mid_turn(
    dir: &TestDir,
) -> (
    String,
    Child,
    BufReader<std::process::ChildStdout>,
    std::thread::JoinHandle<String>,
) {
    let (out, lines) = dir.run_jsonl(&script(), "{\"prompt\": \"hello\"}\n");
    assert!(out.status.success(), "{out:?}");
    let session = lines[0]["session_id"].as_str().unwrap().to_owned();
    let mut a = spawn_run(dir, &session, "A", &[]);
    let mut a_err = a.stderr.take().unwrap();
    let a_err = std::thread::spawn(move || {
        let mut text = String::new();
        let _ = std::io::Read::read_to_string(&mut a_err, &mut text);
        text
    });
    let mut a_out = BufReader::new(a.stdout.take().unwrap());
    let mut line = String::new();
    loop {
        line.clear();
        assert!(a_out.read_line(&mut line).unwrap() > 0, "A ended early");
        if line.contains("first half") {
            break;
        }
    }
    // Shown is not yet stored: wait until the text is on the tape.
    let run = serde_json::from_str::<Value>(&line).unwrap()["run_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while !tape(dir, &run)
        .iter()
        .any(|(_, payload)| payload["text"] == "first half")
    {
        assert!(
            std::time::Instant::now() < deadline,
            "first half never stored"
        );
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    (session, a, a_out, a_err)
}

/// The tape of a run: (kind, payload) in order, from the database.
fn tape(dir: &TestDir, run: &str) -> Vec<(String, Value)> {
    let db = rusqlite::Connection::open_with_flags(
        dir.data_dir().join("pincer.db"),
        rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY,
    )
    .unwrap();
    db.prepare("SELECT kind, payload FROM tape WHERE run_id = ?1 ORDER BY seq")
        .unwrap()
        .query_map([run], |row| {
            Ok((row.get::<_, String>(0)?, row.get::<_, String>(1)?))
        })
        .unwrap()
        .map(|r| {
            let (kind, payload) = r.unwrap();
            (kind, serde_json::from_str(&payload).unwrap())
        })
        .collect()
}

/// The runs of the session shown: (id, state, error).
fn runs(shown: &Value) -> Vec<(String, String, String)> {
    shown["runs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["run_id"].as_str().unwrap().to_owned(),
                r["state"].as_str().unwrap().to_owned(),
                r["error"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect()
}

#[test]
fn an_owner_killed_mid_run_is_taken_over_and_its_run_interrupted_once() {
    let dir = TestDir::new();
    let (session, mut a, _a_out, _a_err) = a_mid_turn(&dir);
    a.kill().unwrap();
    a.wait().unwrap();
    let b = spawn_run(&dir, &session, "B", &[])
        .wait_with_output()
        .unwrap();
    assert!(b.status.success(), "{b:?}");
    let shown = dir.show_session(&session);
    assert_eq!(history(&shown), pairs(TAKEN_OVER));
    let runs = runs(&shown);
    assert_eq!(runs.len(), 3, "{shown:#}");
    assert_eq!(runs[1].1, "failed", "{runs:?}");
    assert!(runs[1].2.starts_with("interrupted"), "{runs:?}");
    assert_eq!(runs[2].1, "completed", "{runs:?}");
    let ends = tape(&dir, &runs[1].0)
        .into_iter()
        .filter(|(kind, payload)| kind == "state" && payload["state"] == "failed")
        .count();
    assert_eq!(ends, 1, "A's run is ended exactly once");
}

#[test]
fn a_stopped_owner_is_taken_over_when_its_lease_lapses_and_its_late_writes_are_refused() {
    let dir = TestDir::new();
    let config = dir.path().join("config").join("pincer");
    std::fs::create_dir_all(&config).unwrap();
    std::fs::write(config.join("config.toml"), "session_lease_secs = 1\n").unwrap();
    let (session, a, mut a_out, a_err) = a_mid_turn(&dir);
    let pid = a.id() as i32;
    // SIGSTOP: alive, holding the lease, renewing nothing. SQLite's write
    // lock is a file lock a stopped process keeps, so stop A at a moment it
    // holds none (its writes hold it a few milliseconds at a time); a
    // process stopped inside a write blocks every writer until it resumes.
    stop_outside_a_write(&dir, pid);
    // B waits for the lease to lapse (or finds it lapsed), then runs.
    let b = spawn_run(&dir, &session, "B", &[])
        .wait_with_output()
        .unwrap();
    assert!(b.status.success(), "{b:?}");
    let a_run = runs(&dir.show_session(&session))[1].0.clone();
    let taken_over = tape(&dir, &a_run).len();
    // A wakes up: it learns it lost the session, and nothing it writes lands.
    assert_eq!(unsafe { libc::kill(pid, libc::SIGCONT) }, 0);
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut a_out, &mut rest).unwrap();
    let a = a.wait_with_output().unwrap();
    let a_err = a_err.join().unwrap();
    assert!(
        !a.status.success(),
        "A after losing its lease: {a:?}\n{rest}\n{a_err}"
    );
    assert!(a_err.contains("no longer current"), "{a_err}");
    let shown = dir.show_session(&session);
    assert_eq!(history(&shown), pairs(TAKEN_OVER));
    let runs = runs(&shown);
    assert_eq!(runs[1].1, "failed", "{runs:?}");
    assert!(runs[1].2.starts_with("interrupted"), "{runs:?}");
    let a_tape = tape(&dir, &runs[1].0);
    // A's tape is as B left it: its late text never landed.
    assert_eq!(runs[1].0, a_run);
    assert_eq!(a_tape.len(), taken_over, "{a_tape:#?}");
    assert!(
        !a_tape
            .iter()
            .any(|(_, payload)| payload.to_string().contains("second half")),
        "{a_tape:#?}"
    );
    assert_eq!(
        a_tape
            .iter()
            .filter(|(kind, payload)| kind == "state" && payload["state"] == "failed")
            .count(),
        1
    );
}
