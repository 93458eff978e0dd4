#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is a failed test
//! The Telegram channel against a fake Bot API server on loopback: a
//! conversation end to end, a live draft edited then finalized, chunking, an
//! inline approval, dedupe of a redelivered update, `retry_after`, and crash
//! tests with a real `kill -9` at each delivery boundary.

mod common;
#[path = "common/telegram.rs"]
mod fake;

use std::process::{Child, Stdio};
use std::time::Duration;

use common::TestDir;
use fake::{FakeTelegram, TOKEN};
use serde_json::{Value, json};

const USER: i64 = 42;
const WAIT: Duration = Duration::from_secs(20);

/// `pincer acp --channel telegram` with its stdin held open; killed on drop.
struct Bridge {
    child: Child,
}

impl Bridge {
    fn start(dir: &TestDir, script: &std::path::Path) -> Self {
        let stderr = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(dir.path().join("stderr.log"))
            .unwrap();
        let child = dir
            .command()
            .env("TELEGRAM_BOT_TOKEN", TOKEN)
            .args([
                "acp",
                "--provider",
                "scripted",
                "--script",
                script.to_str().unwrap(),
                "--channel",
                "telegram",
            ])
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(stderr)
            .spawn()
            .unwrap();
        Self { child }
    }

    /// `kill -9`: no shutdown, no flush.
    fn crash(mut self) {
        self.child.kill().unwrap();
        self.child.wait().unwrap();
    }
}

impl Drop for Bridge {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn setup(fake: &FakeTelegram, extra: &str) -> TestDir {
    let dir = TestDir::new();
    let workspace = dir.workspace();
    let config = dir.path().join("config").join("pincer");
    std::fs::create_dir_all(&config).unwrap();
    std::fs::write(
        config.join("config.toml"),
        format!(
            "[channels.telegram]\napi_base = \"{}\"\nallow = [\"{USER}\"]\nworkspace = \"{}\"\npoll_timeout_secs = 1\ncoalesce_ms = 50\n{extra}",
            fake.url,
            workspace.display()
        ),
    )
    .unwrap();
    dir
}

fn stderr(dir: &TestDir) -> String {
    std::fs::read_to_string(dir.path().join("stderr.log")).unwrap_or_default()
}

fn outbox(dir: &TestDir) -> Vec<Value> {
    let out = dir
        .command()
        .args(["channels", "outbox", "--json"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn texts(fake: &FakeTelegram) -> Vec<String> {
    fake.chat(USER).into_iter().map(|(_, t)| t).collect()
}

#[test]
fn a_conversation_end_to_end_with_a_live_draft_finalized_in_place() {
    let fake = FakeTelegram::start();
    let dir = setup(&fake, "");
    let script = dir.script(
        "s.jsonl",
        &[
            json!([{"text": "Hel"}, {"delay_ms": 1300}, {"text": "lo there"}]),
            json!([{"text": "Second answer"}]),
        ],
    );
    let bridge = Bridge::start(&dir, &script);
    let update = fake.user_says(USER, "hi");
    fake.wait_for("the finalized reply", WAIT, |f| {
        texts(f) == vec!["Hello there".to_owned()]
    });
    // One message: sent as a draft, edited as the text grew, finalized in place.
    let sends = fake.calls("sendMessage");
    assert_eq!(sends.len(), 1, "{sends:#?}");
    assert_eq!(sends[0].body["text"], "Hel");
    assert!(!fake.calls("editMessageText").is_empty());
    // The watermark moved past the update.
    fake.wait_for("the next offset", WAIT, |f| {
        f.offsets().contains(&(update + 1))
    });

    // The chat keeps its session: the script's second turn answers.
    fake.user_says(USER, "and again");
    fake.wait_for("the second reply", WAIT, |f| {
        texts(f).len() == 2 && texts(f)[1] == "Second answer"
    });
    let final_reply = outbox(&dir)
        .into_iter()
        .filter(|i| i["kind"] == "reply")
        .collect::<Vec<_>>();
    assert_eq!(final_reply.len(), 2);
    assert!(
        final_reply.iter().all(|i| i["status"] == "sent"),
        "{final_reply:#?}"
    );
    drop(bridge);
    assert!(
        !stderr(&dir).contains(TOKEN),
        "the bot token leaked into the logs"
    );
}

#[test]
fn long_replies_are_chunked_at_paragraphs_within_4096() {
    let fake = FakeTelegram::start();
    let dir = setup(&fake, "live_drafts = false\n");
    let paragraph = "All work and no play makes Jack a dull boy. ".repeat(20);
    let paragraph = paragraph.trim_end();
    let reply = [paragraph; 12].join("\n\n"); // ~10,500 characters
    let script = dir.script("s.jsonl", &[json!([{"text": reply}])]);
    let _bridge = Bridge::start(&dir, &script);
    fake.user_says(USER, "write a lot");
    fake.wait_for("every part", WAIT, |f| {
        texts(f).join("\n\n").len() >= reply.len()
    });
    let parts = texts(&fake);
    assert_eq!(
        parts.len(),
        3,
        "{:?}",
        parts.iter().map(|p| p.len()).collect::<Vec<_>>()
    );
    assert!(parts.iter().all(|p| p.chars().count() <= 4096));
    // Cut between paragraphs only: rejoined, the reply is whole.
    assert_eq!(parts.join("\n\n"), reply);
    let receipt = outbox(&dir)
        .into_iter()
        .find(|i| i["kind"] == "reply")
        .unwrap();
    assert_eq!(receipt["receipt"]["parts"].as_array().unwrap().len(), 3);
}

#[test]
fn an_inline_approval_is_answered_with_a_button() {
    let fake = FakeTelegram::start();
    let dir = setup(&fake, "live_drafts = false\n");
    let script = dir.script(
        "s.jsonl",
        &[
            json!([{"tool_call": {"id": "w1", "name": "write_file", "arguments": {"path": "note.txt", "content": "from telegram\n"}}}]),
            json!([{"text": "Written."}]),
        ],
    );
    let _bridge = Bridge::start(&dir, &script);
    fake.user_says(USER, "write a note");
    fake.wait_for("the approval prompt", WAIT, |f| {
        f.calls("sendMessage")
            .iter()
            .any(|c| c.body["reply_markup"]["inline_keyboard"].is_array())
    });
    let prompt = fake
        .calls("sendMessage")
        .into_iter()
        .find(|c| c.body["reply_markup"]["inline_keyboard"].is_array())
        .unwrap();
    assert!(
        prompt.body["text"]
            .as_str()
            .unwrap()
            .contains("Approval needed")
    );
    let buttons = prompt.body["reply_markup"]["inline_keyboard"][0]
        .as_array()
        .unwrap()
        .clone();
    let labels: Vec<&str> = buttons
        .iter()
        .map(|b| b["text"].as_str().unwrap())
        .collect();
    assert_eq!(labels, ["Allow once", "Always", "Reject"]);
    let allow = buttons[0]["callback_data"].as_str().unwrap().to_owned();
    let (message_id, _) = fake
        .chat(USER)
        .into_iter()
        .find(|(_, t)| t.contains("Approval needed"))
        .unwrap();
    fake.press(USER, message_id, &allow);
    fake.wait_for("the reply after the tool ran", WAIT, |f| {
        texts(f).iter().any(|t| t == "Written.")
    });
    let written = std::fs::read_to_string(dir.workspace().join("note.txt")).unwrap();
    assert_eq!(written, "from telegram\n");
    assert_eq!(fake.calls("answerCallbackQuery").len(), 1);
}

#[test]
fn a_redelivered_update_is_answered_once() {
    let fake = FakeTelegram::start();
    let dir = setup(&fake, "live_drafts = false\n");
    let script = dir.script(
        "s.jsonl",
        &[
            json!([{"text": "Only once."}]),
            json!([{"text": "A second run!"}]),
        ],
    );
    let bridge = Bridge::start(&dir, &script);
    let update = fake.user_says(USER, "hello");
    fake.wait_for("the reply", WAIT, |f| {
        texts(f) == vec!["Only once.".to_owned()]
    });
    fake.redeliver(update);
    let polls = fake.offsets().len();
    fake.wait_for("two more polls", WAIT, |f| f.offsets().len() >= polls + 2);
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(texts(&fake), vec!["Only once.".to_owned()]);
    drop(bridge);

    // After a restart the persisted offset is where polling resumes, and the
    // old update, handed out again, is still not answered twice.
    let polls = fake.offsets().len();
    fake.redeliver(update);
    let _bridge = Bridge::start(&dir, &script);
    fake.wait_for("polling after the restart", WAIT, |f| {
        f.offsets().len() >= polls + 2
    });
    assert_eq!(fake.offsets()[polls], update + 1);
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(texts(&fake), vec!["Only once.".to_owned()]);
}

#[test]
fn rate_limits_are_waited_out_as_telegram_asks() {
    let fake = FakeTelegram::start();
    let dir = setup(&fake, "live_drafts = false\n");
    let script = dir.script("s.jsonl", &[json!([{"text": "Patience."}])]);
    fake.fail(
        "sendMessage",
        1,
        429,
        json!({"ok": false, "error_code": 429, "description": "Too Many Requests: retry after 1", "parameters": {"retry_after": 1}}),
    );
    let _bridge = Bridge::start(&dir, &script);
    fake.user_says(USER, "hi");
    fake.wait_for("the reply", WAIT, |f| {
        texts(f) == vec!["Patience.".to_owned()]
    });
    let calls = fake.calls("sendMessage");
    assert_eq!(calls.len(), 2);
    assert!(calls[1].at - calls[0].at >= Duration::from_millis(950));
    let intent = outbox(&dir)
        .into_iter()
        .find(|i| i["kind"] == "reply")
        .unwrap();
    assert_eq!(intent["status"], "sent");
    assert_eq!(intent["attempt"], 2);
}

#[test]
fn a_crash_with_the_intent_recorded_loses_nothing() {
    let fake = FakeTelegram::start();
    let dir = setup(&fake, "live_drafts = false\n");
    let script = dir.script("s.jsonl", &[json!([{"text": "Survived."}])]);
    // Telegram is down: the reply's intent is on disk, waiting to retry.
    fake.fail(
        "sendMessage",
        1000,
        502,
        json!({"ok": false, "error_code": 502, "description": "Bad Gateway"}),
    );
    let bridge = Bridge::start(&dir, &script);
    fake.user_says(USER, "hi");
    fake.wait_for("a failed attempt", WAIT, |f| {
        !f.calls("sendMessage").is_empty()
    });
    bridge.crash();
    let pending = outbox(&dir);
    assert_eq!(pending.len(), 1);
    assert_eq!(pending[0]["status"], "pending");
    fake.release("sendMessage");
    let _bridge = Bridge::start(&dir, &script);
    fake.wait_for("the reply after the restart", WAIT, |f| {
        texts(f) == vec!["Survived.".to_owned()]
    });
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(texts(&fake).len(), 1);
    assert_eq!(outbox(&dir)[0]["status"], "sent");
}

#[test]
fn a_crash_after_the_platform_accepted_is_never_resent_blindly() {
    let fake = FakeTelegram::start();
    let dir = setup(&fake, "live_drafts = false\n");
    let script = dir.script("s.jsonl", &[json!([{"text": "Maybe delivered."}])]);
    // Telegram takes the message and the process dies before the answer.
    fake.hold("sendMessage");
    let bridge = Bridge::start(&dir, &script);
    fake.user_says(USER, "hi");
    fake.wait_for("the send in flight", WAIT, |f| {
        f.calls("sendMessage").len() == 1
    });
    bridge.crash();
    fake.release("sendMessage");
    let _bridge = Bridge::start(&dir, &script);
    fake.wait_for("the restart polling", WAIT, |f| f.offsets().len() >= 3);
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(fake.calls("sendMessage").len(), 1, "resent blindly");
    let intents = outbox(&dir);
    assert_eq!(intents.len(), 1);
    assert_eq!(intents[0]["status"], "unknown_after_send");
    assert_eq!(intents[0]["failure"]["kind"], "unknown");
    assert!(stderr(&dir).contains("unknown after send"));
}

#[test]
fn a_crash_during_a_live_draft_finalizes_the_draft_on_restart() {
    let fake = FakeTelegram::start();
    let dir = setup(&fake, "");
    let script = dir.script(
        "s.jsonl",
        &[json!([{"text": "Working on it"}, {"delay_ms": 60000}, {"text": " never"}])],
    );
    let bridge = Bridge::start(&dir, &script);
    fake.user_says(USER, "long job");
    fake.wait_for("the draft", WAIT, |f| {
        texts(f) == vec!["Working on it".to_owned()]
    });
    bridge.crash();
    let _bridge = Bridge::start(&dir, &script);
    fake.wait_for("the draft finalized", WAIT, |f| {
        texts(f).first().is_some_and(|t| t.contains("interrupted"))
    });
    let shown = texts(&fake);
    assert_eq!(
        shown.len(),
        1,
        "a fresh message instead of the draft: {shown:?}"
    );
    assert!(shown[0].starts_with("Working on it"), "{shown:?}");
    assert_eq!(fake.calls("sendMessage").len(), 1);
}
