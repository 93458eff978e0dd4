//! Schedules (`docs/schedules.md`) through the binary: `pincer schedule
//! add|list|show|rm|run-now`, `pincer serve` firing them on a clock the test
//! sets (`PINCER_TEST_CLOCK_FILE`), in a time zone, across `kill -9`
//! restarts, with the missed-run policy, each occurrence once when two
//! processes serve, the reply delivered through the outbox to the fake
//! Telegram Bot API; and the `schedule` tool the model calls.

use std::path::PathBuf;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::support::TestDir;
use crate::support::telegram::{FakeTelegram, TOKEN};

const USER: i64 = 42;
const WAIT: Duration = Duration::from_secs(30);
const REPLY: &str = "Morning report: all green.";

/// Monday 30 November 2026, 09:00 in Berlin (CET, UTC+1).
const MONDAY_NINE_BERLIN: &str = "2026-11-30T08:00:00Z";

fn millis(at: &str) -> i64 {
    let at: jiff::Timestamp = at.parse().unwrap();
    at.as_millisecond()
}

struct Setup {
    dir: TestDir,
    clock: PathBuf,
    script: PathBuf,
    /// `PINCER_STORE_URL` for every command: PostgreSQL instead of SQLite.
    store: Option<String>,
}

fn setup(fake: Option<&FakeTelegram>) -> Setup {
    let dir = TestDir::new();
    let mut config = String::new();
    if let Some(fake) = fake {
        config.push_str(&format!(
            "[channels.telegram]\napi_base = \"{}\"\nworkspace = \"{}\"\npoll_timeout_secs = 1\nallow = [\"{USER}\"]\n",
            fake.url,
            dir.workspace().display(),
        ));
    }
    dir.write_config(&config);
    let script = dir.script("model.jsonl", &[json!([{"text": REPLY}])]);
    let clock = dir.path().join("clock");
    Setup {
        dir,
        clock,
        script,
        store: None,
    }
}

impl Setup {
    fn set_clock(&self, at: &str) {
        let tmp = self.clock.with_extension("tmp");
        std::fs::write(&tmp, at).unwrap();
        std::fs::rename(&tmp, &self.clock).unwrap();
    }

    /// A `pincer` command on this setup's store and clock.
    fn command(&self) -> std::process::Command {
        let mut command = self.dir.command();
        if let Some(url) = &self.store {
            command.env("PINCER_STORE_URL", url);
        }
        command
    }

    fn pincer(&self, args: &[&str]) -> (i32, String, String) {
        let out = self
            .command()
            .env("TELEGRAM_BOT_TOKEN", TOKEN)
            .env("PINCER_TEST_CLOCK_FILE", &self.clock)
            .args(args)
            .output()
            .unwrap();
        (
            out.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    }

    /// `pincer serve` with the channel when there is one (else HTTP on a
    /// free port), on the test's clock.
    fn serve(&self, telegram: bool) -> Serve {
        let log = self.dir.path().join("stderr.log");
        let mut command = self.command();
        command
            .env("TELEGRAM_BOT_TOKEN", TOKEN)
            .env("PINCER_HTTP_TOKEN", "http-token-0123456789abcdef")
            .env("PINCER_TEST_CLOCK_FILE", &self.clock)
            .args(["serve", "--provider", "scripted", "--script"])
            .arg(&self.script);
        if telegram {
            command.args(["--channel", "telegram"]);
        } else {
            command.args(["--http", "127.0.0.1:0"]);
        }
        let ready = self.dir.path().join(format!(
            "ready-{}",
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos()
        ));
        if !telegram {
            command.arg("--ready-file").arg(&ready);
        }
        let child = command
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(
                std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(&log)
                    .unwrap(),
            )
            .spawn()
            .unwrap();
        let mut serve = Serve { child, addr: None };
        if !telegram {
            wait_until("the HTTP face", || ready.exists(), &self.dir);
            serve.addr = Some(std::fs::read_to_string(&ready).unwrap().trim().to_owned());
        }
        serve
    }

    fn fires(&self, id: &str) -> Vec<Value> {
        let (code, out, err) = self.pincer(&["schedule", "show", id, "--json"]);
        assert_eq!(code, 0, "{out}{err}");
        let view: Value = serde_json::from_str(out.trim()).unwrap();
        view["fires"].as_array().unwrap().clone()
    }

    fn add(&self, args: &[&str]) -> Value {
        let mut all = vec!["schedule", "add", "--json"];
        all.extend_from_slice(args);
        let (code, out, err) = self.pincer(&all);
        assert_eq!(code, 0, "{out}{err}");
        serde_json::from_str(out.trim()).unwrap()
    }
}

struct Serve {
    child: Child,
    /// Where its HTTP face listens, when it has one.
    addr: Option<String>,
}

impl Serve {
    /// `kill -9`.
    fn kill(mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn wait_until(what: &str, check: impl Fn() -> bool, dir: &TestDir) {
    let deadline = Instant::now() + WAIT;
    while !check() {
        assert!(
            Instant::now() < deadline,
            "timed out waiting for {what}\n{}",
            dir.log()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The texts sent to the user's chat.
fn sent(fake: &FakeTelegram) -> Vec<String> {
    fake.calls("sendMessage")
        .into_iter()
        .filter(|c| {
            c.body["chat_id"] == json!(USER) || c.body["chat_id"] == json!(USER.to_string())
        })
        .map(|c| c.body["text"].as_str().unwrap_or_default().to_owned())
        .collect()
}

fn settled(fires: &[Value]) -> bool {
    !fires.is_empty()
        && fires
            .iter()
            .all(|f| f["state"] != "claimed" && f["state"] != "running")
}

#[test]
fn bad_schedules_are_refused_naming_the_option() {
    let s = setup(None);
    for (args, expected) in [
        (
            vec!["--cron", "0 9 * *", "--prompt", "x"],
            "--cron: cron expression \"0 9 * *\": expected 5 fields",
        ),
        (
            vec!["--cron", "0 25 * * *", "--prompt", "x"],
            "--cron: cron expression \"0 25 * * *\"",
        ),
        (
            vec![
                "--cron",
                "0 9 * * *",
                "--tz",
                "Mars/Olympus",
                "--prompt",
                "x",
            ],
            "--tz: time zone \"Mars/Olympus\"",
        ),
        (
            vec!["--at", "2020-01-01T09:00", "--tz", "UTC", "--prompt", "x"],
            "--at: 2020-01-01T09:00+00:00[UTC] is in the past",
        ),
        (
            vec!["--at", "next tuesday", "--prompt", "x"],
            "--at: time \"next tuesday\": expected YYYY-MM-DDTHH:MM",
        ),
        (
            vec!["--cron", "0 9 * * *", "--prompt", "  "],
            "--prompt: empty",
        ),
        (
            vec!["--cron", "0 9 * * *", "--prompt", "x", "--catch-up", "soon"],
            "--catch-up: \"soon\" is not a duration",
        ),
        (
            vec![
                "--cron",
                "0 9 * * *",
                "--prompt",
                "x",
                "--deliver",
                "nowhere",
            ],
            "--deliver: expected CHANNEL:TARGET",
        ),
        (
            vec![
                "--cron",
                "0 9 * * *",
                "--prompt",
                "x",
                "--deliver",
                "team:#dev",
            ],
            "--deliver: no channel team is configured",
        ),
        (
            vec![
                "--cron",
                "0 9 * * *",
                "--prompt",
                "x",
                "--session",
                "ses_nope",
            ],
            "--session: no session ses_nope",
        ),
        (
            vec!["--cron", "0 9 * * *", "--prompt", "x", "--id", "no spaces"],
            "--id: expected 1 to 64 letters, digits",
        ),
    ] {
        let mut all = vec!["schedule", "add"];
        all.extend_from_slice(&args);
        let (code, out, err) = s.pincer(&all);
        assert_eq!(code, 2, "{args:?}: {out}{err}");
        assert!(err.contains(expected), "{args:?}: {err}");
        assert!(!err.trim_end().ends_with('.'), "{err}");
    }
    let (code, _, err) = s.pincer(&["schedule", "add", "--prompt", "x"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("--cron") && err.contains("--at"), "{err}");
}

#[test]
fn schedules_are_added_listed_shown_and_removed() {
    let s = setup(None);
    let ws = s.dir.workspace();
    let ws = ws.to_str().unwrap();

    let added = s.add(&[
        "--cron",
        "0 9 * * MON-FRI",
        "--tz",
        "Europe/Berlin",
        "--prompt",
        "Summarise the night",
        "--workspace",
        ws,
        "--id",
        "morning",
        "--catch-up",
        "30m",
    ]);
    assert_eq!(added["schedule"]["id"], "morning");
    assert_eq!(added["schedule"]["catch_up_ms"], 30 * 60 * 1000);
    assert_eq!(added["schedule"]["place"]["workspace"], ws);
    // Its next occurrence is a weekday at 09:00 in Berlin.
    let next = added["next"].as_i64().unwrap();
    let local = jiff::Timestamp::from_millisecond(next)
        .unwrap()
        .to_zoned(jiff::tz::TimeZone::get("Europe/Berlin").unwrap());
    assert_eq!((local.hour(), local.minute()), (9, 0));
    assert!(local.weekday().to_monday_one_offset() <= 5);

    let (code, _, err) = s.pincer(&[
        "schedule",
        "add",
        "--cron",
        "* * * * *",
        "--prompt",
        "x",
        "--id",
        "morning",
    ]);
    assert_eq!(code, 2);
    assert!(
        err.contains("--id: a schedule morning already exists"),
        "{err}"
    );
    s.add(&[
        "--at",
        "2099-01-01T00:00:00Z",
        "--prompt",
        "far",
        "--id",
        "later",
    ]);

    let (code, out, _) = s.pincer(&["schedule", "list"]);
    assert_eq!(code, 0);
    assert!(
        out.contains("morning  0 9 * * MON-FRI (Europe/Berlin)  next: ")
            && out.contains("last: none yet"),
        "{out}"
    );
    assert!(
        out.contains("later  once at 2099-01-01T00:00+00:00"),
        "{out}"
    );
    let (_, out, _) = s.pincer(&["schedule", "list", "--json"]);
    let ids: Vec<String> = out
        .lines()
        .map(|l| {
            serde_json::from_str::<Value>(l).unwrap()["schedule"]["id"]
                .as_str()
                .unwrap()
                .to_owned()
        })
        .collect();
    assert_eq!(ids, ["morning", "later"]);

    let (code, out, _) = s.pincer(&["schedule", "rm", "later"]);
    assert_eq!(code, 0, "{out}");
    let (code, _, err) = s.pincer(&["schedule", "rm", "later"]);
    assert_eq!(code, 2);
    assert!(err.contains("no schedule later"), "{err}");
    let (code, _, err) = s.pincer(&["schedule", "show", "later"]);
    assert_eq!(code, 2);
    assert!(err.contains("no schedule later"), "{err}");
}

#[test]
fn a_schedule_fires_at_its_minute_in_its_zone_and_its_reply_reaches_the_chat_once() {
    let fake = FakeTelegram::start();
    let s = setup(Some(&fake));
    s.set_clock("2026-11-30T07:59:30Z");
    s.add(&[
        "--cron",
        "0 9 * * MON-FRI",
        "--tz",
        "Europe/Berlin",
        "--prompt",
        "How did the night go?",
        "--deliver",
        "telegram:42",
        "--id",
        "morning",
    ]);
    let serve = s.serve(true);
    // 08:59:30 in Berlin: nothing yet.
    std::thread::sleep(Duration::from_millis(1500));
    assert!(s.fires("morning").is_empty(), "{}", s.dir.log());
    assert!(sent(&fake).is_empty());
    // 09:00:01 in Berlin.
    s.set_clock("2026-11-30T08:00:01Z");
    fake.wait_for("the scheduled reply", WAIT, |f| !sent(f).is_empty());
    wait_until(
        "the fire to settle",
        || settled(&s.fires("morning")),
        &s.dir,
    );
    let fires = s.fires("morning");
    assert_eq!(fires.len(), 1, "{fires:?}");
    let occurrence = millis(MONDAY_NINE_BERLIN);
    assert_eq!(fires[0]["occurrence"], occurrence);
    assert_eq!(fires[0]["state"], "done", "{fires:?}");
    assert_eq!(
        fires[0]["intent_id"],
        format!("message:schedule:morning:{occurrence}")
    );
    // An ordinary run on the tape, in a session of its own.
    let session = fires[0]["session_id"].as_str().unwrap();
    let shown = s.dir.show_session(session);
    assert_eq!(shown["session"]["origin"], "schedule", "{shown}");
    assert!(shown.to_string().contains("How did the night go?"));
    // Delivered once, as the reply's text.
    std::thread::sleep(Duration::from_millis(1500));
    assert_eq!(sent(&fake), [REPLY]);
    let (code, out, err) = s.pincer(&["verify"]);
    assert_eq!(code, 0, "{out}{err}");
    drop(serve);
}

#[test]
fn restarts_before_and_after_an_occurrence_fire_it_once_and_late_ones_are_skipped_with_the_reason()
{
    let fake = FakeTelegram::start();
    let s = setup(Some(&fake));
    s.set_clock("2026-11-30T07:59:30Z");
    s.add(&[
        "--cron",
        "0 9 * * MON-FRI",
        "--tz",
        "Europe/Berlin",
        "--prompt",
        "Report",
        "--deliver",
        "telegram:42",
        "--id",
        "morning",
    ]);
    // Killed before the occurrence.
    let serve = s.serve(true);
    std::thread::sleep(Duration::from_millis(800));
    serve.kill();
    // Started again 20 minutes after it: less than catch_up (1 h) late, so
    // it runs at once.
    s.set_clock("2026-11-30T08:20:00Z");
    let serve = s.serve(true);
    fake.wait_for("the late reply", WAIT, |f| !sent(f).is_empty());
    wait_until(
        "the fire to settle",
        || settled(&s.fires("morning")),
        &s.dir,
    );
    serve.kill();
    // Killed and started again after it: not fired twice.
    let serve = s.serve(true);
    std::thread::sleep(Duration::from_millis(1500));
    serve.kill();
    let fires = s.fires("morning");
    assert_eq!(fires.len(), 1, "{fires:?}");
    assert_eq!(fires[0]["state"], "done");
    assert_eq!(fires[0]["occurrence"], millis(MONDAY_NINE_BERLIN));
    assert_eq!(sent(&fake), [REPLY]);
    // Tuesday's 09:00 missed by two and a half hours: skipped, and why.
    s.set_clock("2026-12-01T10:30:00Z");
    let serve = s.serve(true);
    wait_until("the skipped fire", || s.fires("morning").len() == 2, &s.dir);
    std::thread::sleep(Duration::from_millis(800));
    drop(serve);
    let fires = s.fires("morning");
    assert_eq!(fires.len(), 2, "{fires:?}");
    assert_eq!(fires[0]["state"], "skipped");
    assert_eq!(fires[0]["occurrence"], millis("2026-12-01T08:00:00Z"));
    let note = fires[0]["note"].as_str().unwrap();
    assert!(
        note.starts_with("missed 1 occurrence at 2026-12-01T09:00+01:00[Europe/Berlin] while no `pincer serve` was running: 2h 30m late, more than catch_up (1h)"),
        "{note}"
    );
    assert_eq!(sent(&fake), [REPLY]);
    let (_, out, _) = s.pincer(&["schedule", "show", "morning"]);
    assert!(out.contains("skipped  missed 1 occurrence"), "{out}");
}

#[test]
fn two_serving_processes_fire_each_occurrence_once() {
    two_serving_processes(&setup(None));
}

#[test]
fn two_instances_on_postgres_fire_each_occurrence_once() {
    let s = Setup {
        store: Some(crate::support::postgres::shared().fresh_database()),
        ..setup(None)
    };
    two_serving_processes(&s);
}

/// Two `pincer serve` on one store, a minutely schedule, five minutes of
/// the test's clock: five fires, each run once.
fn two_serving_processes(s: &Setup) {
    s.set_clock("2026-12-01T10:00:30Z");
    let ws = s.dir.workspace();
    s.add(&[
        "--cron",
        "* * * * *",
        "--tz",
        "UTC",
        "--prompt",
        "tick",
        "--workspace",
        ws.to_str().unwrap(),
        "--id",
        "minutely",
    ]);
    let a = s.serve(false);
    let b = s.serve(false);
    for minute in 1..=5 {
        s.set_clock(&format!("2026-12-01T10:0{minute}:01Z"));
        wait_until(
            "the minute's fire",
            || {
                let fires = s.fires("minutely");
                fires.len() == minute && settled(&fires)
            },
            &s.dir,
        );
    }
    std::thread::sleep(Duration::from_millis(500));
    drop((a, b));
    let fires = s.fires("minutely");
    assert_eq!(fires.len(), 5, "{fires:?}");
    let mut runs = std::collections::HashSet::new();
    for (i, fire) in fires.iter().rev().enumerate() {
        assert_eq!(fire["state"], "done", "{fire}");
        assert_eq!(
            fire["occurrence"],
            millis(&format!("2026-12-01T10:0{}:00Z", i + 1))
        );
        assert!(runs.insert(fire["run_id"].as_str().unwrap().to_owned()));
    }
    // One run per occurrence on the tape, no more.
    let (_, out, _) = s.pincer(&["sessions", "list", "--json"]);
    assert_eq!(out.matches("\"origin\":\"schedule\"").count(), 5, "{out}");
}

#[test]
fn run_now_fires_here_and_the_serving_process_delivers_the_reply() {
    let fake = FakeTelegram::start();
    let s = setup(Some(&fake));
    s.set_clock("2026-12-01T10:00:00Z");
    s.add(&[
        "--cron",
        "0 9 * * *",
        "--tz",
        "UTC",
        "--prompt",
        "Status?",
        "--deliver",
        "telegram:42",
        "--id",
        "status",
    ]);
    let _serve = s.serve(true);
    let script = s.script.to_str().unwrap().to_owned();
    let (code, out, err) = s.pincer(&[
        "schedule",
        "run-now",
        "status",
        "--provider",
        "scripted",
        "--script",
        &script,
    ]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        out.contains("done (run-now)") && out.contains("reply queued as message:schedule:status:"),
        "{out}"
    );
    fake.wait_for("the reply", WAIT, |f| !sent(f).is_empty());
    assert_eq!(sent(&fake), [REPLY]);
    // A manual fire does not stand for the next timed occurrence.
    let (_, out, _) = s.pincer(&["schedule", "list", "--json"]);
    let view: Value = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(view["last_fire"]["manual"], true);
    let (code, _, err) = s.pincer(&[
        "schedule",
        "run-now",
        "nope",
        "--provider",
        "scripted",
        "--script",
        &script,
    ]);
    assert_eq!(code, 2);
    assert!(err.contains("no schedule nope"), "{err}");
}

fn run_with_tool(s: &Setup, approve: &str, arguments: &Value) -> (i32, String, String) {
    let script = s.dir.script(
        "tool.jsonl",
        &[
            json!([{"tool_call": {"name": "schedule", "arguments": arguments}}]),
            json!([{"text": "Done."}]),
        ],
    );
    s.pincer(&[
        "run",
        "--provider",
        "scripted",
        "--script",
        script.to_str().unwrap(),
        "--approve",
        approve,
        "--output",
        "jsonl",
        "Remind me every weekday at nine",
    ])
}

#[test]
fn the_model_schedules_with_the_schedule_tool_once_a_person_agrees() {
    let s = setup(None);
    let add = json!({
        "action": "add",
        "cron": "0 9 * * MON-FRI",
        "tz": "Europe/Berlin",
        "prompt": "Check the overnight build",
        "id": "build-check",
    });
    // Nobody approves (`supervised` asks): nothing is added.
    let (_, out, _) = run_with_tool(&s, "never", &add);
    assert!(out.contains("\"type\":\"approval_requested\""), "{out}");
    let (_, listed, _) = s.pincer(&["schedule", "list", "--json"]);
    assert!(listed.trim().is_empty(), "{listed}");
    // Approved: added, continuing the conversation's session.
    let (code, out, err) = run_with_tool(&s, "all", &add);
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        out.contains("Added schedule build-check: 0 9 * * MON-FRI (Europe/Berlin)"),
        "{out}"
    );
    let (_, listed, _) = s.pincer(&["schedule", "list", "--json"]);
    let view: Value = serde_json::from_str(listed.trim()).unwrap();
    let schedule = &view["schedule"];
    assert_eq!(schedule["id"], "build-check");
    assert!(
        schedule["place"]["session"]
            .as_str()
            .unwrap()
            .starts_with("ses_"),
        "{schedule}"
    );
    assert!(
        schedule["origin"]
            .as_str()
            .unwrap()
            .starts_with("session ses_")
    );
    // A bad definition is refused naming the field.
    let (_, out, _) = run_with_tool(
        &s,
        "all",
        &json!({"action": "add", "cron": "every day", "prompt": "x"}),
    );
    assert!(
        out.contains("`cron`: cron expression \\\"every day\\\""),
        "{out}"
    );
    let (_, out, _) = run_with_tool(
        &s,
        "all",
        &json!({"action": "add", "cron": "0 9 * * *", "prompt": "x", "deliver": "team:1"}),
    );
    assert!(
        out.contains("`deliver`: no chat channel is configured"),
        "{out}"
    );
    // Removed by the model.
    let (_, out, _) = run_with_tool(&s, "all", &json!({"action": "remove", "id": "build-check"}));
    assert!(out.contains("Removed schedule build-check"), "{out}");
    let (_, listed, _) = s.pincer(&["schedule", "list", "--json"]);
    assert!(listed.trim().is_empty(), "{listed}");
}

#[test]
fn a_fire_whose_process_dies_mid_run_is_settled_by_the_next_start_and_the_chat_is_told() {
    let fake = FakeTelegram::start();
    let mut s = setup(Some(&fake));
    s.script = s.dir.script(
        "slow.jsonl",
        &[json!([{"text": "Working on it"}, {"delay_ms": 60000}, {"text": " done"}])],
    );
    s.set_clock("2026-11-30T07:59:30Z");
    s.add(&[
        "--cron",
        "0 9 * * MON-FRI",
        "--tz",
        "Europe/Berlin",
        "--prompt",
        "Report",
        "--deliver",
        "telegram:42",
        "--id",
        "morning",
    ]);
    let serve = s.serve(true);
    s.set_clock("2026-11-30T08:00:01Z");
    wait_until(
        "the run to start",
        || {
            s.fires("morning")
                .first()
                .is_some_and(|f| f["state"] == "running")
        },
        &s.dir,
    );
    std::thread::sleep(Duration::from_millis(300));
    serve.kill();
    // The next start ends the dead process's run as interrupted, settles
    // the fire as failed, and says so in the chat; the occurrence is not
    // run a second time.
    let serve = s.serve(true);
    fake.wait_for("the failure notice", WAIT, |f| !sent(f).is_empty());
    wait_until(
        "the fire to settle",
        || settled(&s.fires("morning")),
        &s.dir,
    );
    std::thread::sleep(Duration::from_millis(800));
    drop(serve);
    let fires = s.fires("morning");
    assert_eq!(fires.len(), 1, "{fires:?}");
    assert_eq!(fires[0]["state"], "failed", "{fires:?}");
    let note = fires[0]["note"].as_str().unwrap();
    assert!(note.starts_with("the run failed: "), "{note}");
    let texts = sent(&fake);
    assert_eq!(texts.len(), 1, "{texts:?}");
    assert!(
        texts[0].starts_with("Schedule <code>morning</code> (2026-11-30T09:00+01:00[Europe/Berlin]) did not finish: the run failed: "),
        "{texts:?}"
    );
    let (code, out, err) = s.pincer(&["verify"]);
    assert_eq!(code, 0, "{out}{err}");
}

/// `METHOD PATH` with an optional JSON body to the HTTP face: (status, JSON).
fn http(addr: &str, method: &str, path: &str, body: Option<&Value>, token: bool) -> (u16, Value) {
    use std::io::{Read as _, Write as _};
    let mut stream = std::net::TcpStream::connect(addr).unwrap();
    let body = body.map(Value::to_string).unwrap_or_default();
    let auth = if token {
        "authorization: Bearer http-token-0123456789abcdef\r\n"
    } else {
        ""
    };
    write!(
        stream,
        "{method} {path} HTTP/1.1\r\nhost: {addr}\r\n{auth}content-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    let status = response.split(' ').nth(1).unwrap().parse().unwrap();
    let body = response.split_once("\r\n\r\n").map_or("", |(_, b)| b);
    (status, serde_json::from_str(body).unwrap_or(Value::Null))
}

#[test]
fn schedules_are_managed_over_http() {
    let s = setup(None);
    s.set_clock("2026-12-01T10:00:00Z");
    let serve = s.serve(false);
    let addr = serve.addr.clone().unwrap();
    let ws = s.dir.workspace();
    let (status, _) = http(&addr, "GET", "/v1/schedules", None, false);
    assert_eq!(status, 401);
    let (status, body) = http(&addr, "GET", "/v1/schedules", None, true);
    assert_eq!((status, body), (200, json!({"schedules": []})));
    // Mistakes name the field.
    for (request, expected) in [
        (
            json!({"cron": "0 9 * *", "prompt": "x", "workspace": ws}),
            "cron: cron expression",
        ),
        (
            json!({"cron": "0 9 * * *", "tz": "Nowhere/City", "prompt": "x", "workspace": ws}),
            "tz: time zone",
        ),
        (
            json!({"at": "2026-11-30T09:00", "tz": "UTC", "prompt": "x", "workspace": ws}),
            "at: 2026-11-30T09:00+00:00[UTC] is in the past",
        ),
        (
            json!({"cron": "0 9 * * *", "prompt": "x"}),
            "workspace: give a workspace or a session_id",
        ),
        (
            json!({"cron": "0 9 * * *", "prompt": "x", "workspace": "/no/such/dir"}),
            "workspace: ",
        ),
        (
            json!({"cron": "0 9 * * *", "prompt": "x", "session_id": "ses_none"}),
            "session: no session ses_none",
        ),
        (
            json!({"cron": "0 9 * * *", "prompt": "x", "workspace": ws, "deliver": "tg:1"}),
            "deliver: no channel tg is configured",
        ),
    ] {
        let (status, body) = http(&addr, "POST", "/v1/schedules", Some(&request), true);
        assert_eq!(status, 422, "{request}: {body}");
        assert!(
            body["error"]["message"]
                .as_str()
                .unwrap()
                .starts_with(expected),
            "{request}: {body}"
        );
    }
    let (status, body) = http(
        &addr,
        "POST",
        "/v1/schedules",
        Some(&json!({"prompt": "x", "workspace": ws, "colour": "red"})),
        true,
    );
    assert_eq!(status, 400, "{body}");
    let (status, added) = http(
        &addr,
        "POST",
        "/v1/schedules",
        Some(
            &json!({"cron": "0 9 * * MON-FRI", "tz": "Europe/Berlin", "prompt": "Report", "workspace": ws, "id": "morning"}),
        ),
        true,
    );
    assert_eq!(status, 201, "{added}");
    assert_eq!(added["schedule"]["origin"], "http");
    // Wednesday 2 December, 09:00 in Berlin.
    assert_eq!(added["next"], millis("2026-12-02T08:00:00Z"));
    let (status, body) = http(
        &addr,
        "POST",
        "/v1/schedules",
        Some(&json!({"cron": "* * * * *", "prompt": "x", "workspace": ws, "id": "morning"})),
        true,
    );
    assert_eq!(status, 422);
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .starts_with("id: a schedule morning already exists"),
        "{body}"
    );
    // The CLI sees it; HTTP lists and shows it.
    let (_, out, _) = s.pincer(&["schedule", "list"]);
    assert!(
        out.starts_with("morning  0 9 * * MON-FRI (Europe/Berlin)"),
        "{out}"
    );
    let (status, body) = http(&addr, "GET", "/v1/schedules", None, true);
    assert_eq!(status, 200);
    assert_eq!(body["schedules"][0]["schedule"]["id"], "morning");
    assert_eq!(body["schedules"][0]["next"], millis("2026-12-02T08:00:00Z"));
    let (status, body) = http(&addr, "GET", "/v1/schedules/morning?limit=5", None, true);
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["fires"], json!([]));
    let (status, _) = http(&addr, "GET", "/v1/schedules/nope", None, true);
    assert_eq!(status, 404);
    let (status, body) = http(&addr, "DELETE", "/v1/schedules/morning", None, true);
    assert_eq!(
        (status, body),
        (200, json!({"schedule_id": "morning", "deleted": true}))
    );
    let (status, body) = http(&addr, "DELETE", "/v1/schedules/morning", None, true);
    assert_eq!(status, 404, "{body}");
    assert_eq!(body["error"]["message"], "no schedule morning");
}
