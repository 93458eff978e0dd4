//! The Telegram channel against a fake Bot API server on loopback: a
//! conversation end to end, a live draft edited then finalized, chunking, an
//! inline approval, dedupe of a redelivered update, `retry_after`, and crash
//! tests with a real `kill -9` at each delivery boundary.

use crate::support::telegram as fake;

use std::process::{Child, Stdio};
use std::time::Duration;

use crate::support::TestDir;
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
            "[channels.telegram]\napi_base = \"{}\"\nworkspace = \"{}\"\npoll_timeout_secs = 1\n{}{}{extra}",
            fake.url,
            workspace.display(),
            if extra.contains("coalesce_ms") { "" } else { "coalesce_ms = 50\n" },
            if extra.contains("allow") { String::new() } else { format!("allow = [\"{USER}\"]\n") }
        ),
    )
    .unwrap();
    dir
}

/// Waits until `check` holds, looking every 150 ms: for what only a
/// `pincer` command shows (the outbox, the sessions), each look a process
/// opening the database.
fn until(fake: &FakeTelegram, what: &str, check: impl Fn() -> bool) {
    fake.wait_for_every(what, WAIT, Duration::from_millis(150), |_| check());
}

/// The reply's intent once its receipt is committed (the platform shows the
/// message a moment before that).
fn sent_reply(fake: &FakeTelegram, dir: &TestDir) -> Value {
    until(fake, "the reply's receipt", || {
        dir.outbox()
            .iter()
            .any(|i| i["kind"] == "reply" && i["status"] == "sent")
    });
    dir.outbox()
        .into_iter()
        .find(|i| i["kind"] == "reply")
        .unwrap()
}

/// Waits until a failed attempt is recorded and the reply waits to retry.
fn retrying(fake: &FakeTelegram, dir: &TestDir) {
    until(fake, "a recorded failed attempt", || {
        dir.outbox()
            .iter()
            .any(|i| i["status"] == "pending" && i["attempt"].as_u64() >= Some(1))
    });
}

/// Whether some session has a run in state `running`.
fn running(dir: &TestDir) -> bool {
    runs_in(dir, &["running"])
}

/// Whether some session has a run in one of `states`.
fn runs_in(dir: &TestDir, states: &[&str]) -> bool {
    let out = dir
        .command()
        .args(["sessions", "list", "--json"])
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .any(|session| {
            let shown = dir.show_session(session["session_id"].as_str().unwrap());
            shown["runs"].as_array().is_some_and(|runs| {
                runs.iter()
                    .any(|r| states.iter().any(|state| r["state"] == *state))
            })
        })
}

/// Waits until the bridge has nothing left to do: no run queued, running
/// or waiting, and no outbound message held, pending or on its way. What a
/// test then says did not happen would have happened by now.
fn settled(fake: &FakeTelegram, dir: &TestDir) {
    until(
        fake,
        "the bridge to settle (no run working, no message on its way)",
        || {
            !runs_in(dir, &["queued", "running", "waiting"])
                && dir.outbox().iter().all(|i| {
                    !matches!(
                        i["status"].as_str(),
                        Some("held" | "pending" | "sending" | "committing")
                    )
                })
        },
    );
}

fn texts(fake: &FakeTelegram) -> Vec<String> {
    fake.chat(USER).into_iter().map(|(_, t)| t).collect()
}

/// Waits for a message sent to the chat that contains `needle`, and returns it.
fn reply_containing(fake: &FakeTelegram, what: &str, needle: &str) -> String {
    fake.wait_for(what, WAIT, |f| texts(f).iter().any(|t| t.contains(needle)));
    texts(fake)
        .into_iter()
        .find(|t| t.contains(needle))
        .unwrap()
}

#[test]
fn a_conversation_end_to_end_with_a_live_draft_finalized_in_place() {
    let fake = FakeTelegram::start();
    // An older server: the draft is a message edited in place.
    fake.refuse_drafts();
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
    // The draft shows the text before the reply's intent finalizes it.
    until(&fake, "both replies sent", || {
        let replies: Vec<Value> = dir
            .outbox()
            .into_iter()
            .filter(|i| i["kind"] == "reply")
            .collect();
        replies.len() == 2 && replies.iter().all(|i| i["status"] == "sent")
    });
    assert_eq!(fake.calls("sendMessage").len(), 2);
    drop(bridge);
    assert!(
        !dir.log().contains(TOKEN),
        "the bot token leaked into the logs"
    );
}

/// The reply's draft in a private chat: `sendMessageDraft` previews, all
/// of one `draft_id`, then the reply as the only message (issue 34).
#[test]
fn a_private_chat_streams_its_reply_as_drafts_and_ends_as_one_message() {
    let fake = FakeTelegram::start();
    let dir = setup(&fake, "");
    let script = dir.script(
        "s.jsonl",
        &[
            json!([{"text": "Hel"}, {"delay_ms": 1300}, {"text": "lo there"}, {"delay_ms": 1300}, {"text": ", friend"}]),
            json!([{"text": "Second"}, {"delay_ms": 1300}, {"text": " answer"}]),
        ],
    );
    let _bridge = Bridge::start(&dir, &script);
    fake.user_says(USER, "hi");
    fake.wait_for("the reply", WAIT, |f| !f.chat(USER).is_empty());
    let reply = sent_reply(&fake, &dir);
    assert_eq!(texts(&fake), vec!["Hello there, friend".to_owned()]);
    let drafts = fake.drafts(USER);
    let shown: Vec<&str> = drafts.iter().map(|(_, t)| t.as_str()).collect();
    assert_eq!(shown, ["Hel", "Hello there", "Hello there, friend"]);
    let first = drafts[0].0;
    assert!(drafts.iter().all(|(id, _)| *id == first), "{drafts:?}");
    // The reply is the only message: no draft sent, edited or deleted, none recorded.
    assert_eq!(fake.calls("sendMessage").len(), 1);
    assert!(fake.calls("editMessageText").is_empty());
    assert!(fake.calls("deleteMessage").is_empty());
    assert!(reply["edit_of"].is_null(), "{reply:#}");
    assert!(dir.outbox().iter().all(|i| i["kind"] != "draft"));

    // The next reply is a draft of its own.
    fake.user_says(USER, "again");
    fake.wait_for("the second reply", WAIT, |f| f.chat(USER).len() == 2);
    let second: Vec<(i64, String)> = fake.drafts(USER).into_iter().skip(drafts.len()).collect();
    assert!(
        !second.is_empty() && second.iter().all(|(id, _)| *id != first),
        "{second:?}"
    );
    assert_eq!(texts(&fake)[1], "Second answer");
    settled(&fake, &dir);
    assert!(fake.calls("editMessageText").is_empty());
}

/// Where `sendMessageDraft` is not offered (a group), the draft is a
/// message edited in place and finalized by the reply.
#[test]
fn a_group_keeps_its_draft_edited_in_place() {
    let fake = FakeTelegram::start();
    let dir = setup(&fake, "");
    let script = dir.script(
        "s.jsonl",
        &[json!([{"text": "Hel"}, {"delay_ms": 1300}, {"text": "lo group"}])],
    );
    let _bridge = Bridge::start(&dir, &script);
    const GROUP: i64 = -1001;
    fake.group_says(GROUP, USER, "hi all");
    fake.wait_for("the finalized reply", WAIT, |f| {
        f.chat(GROUP)
            .iter()
            .map(|(_, t)| t.as_str())
            .collect::<Vec<_>>()
            == ["Hello group"]
    });
    let sends = fake.calls("sendMessage");
    assert_eq!(sends.len(), 1, "{sends:#?}");
    assert_eq!(sends[0].body["text"], "Hel");
    assert!(!fake.calls("editMessageText").is_empty());
    assert!(fake.calls("sendMessageDraft").is_empty());
    let reply = sent_reply(&fake, &dir);
    assert!(reply["edit_of"].is_string(), "{reply:#}");
}

/// A server without `sendMessageDraft` (an older self-hosted one): the
/// first refusal turns drafts into messages edited in place for the
/// process's life, logged once, and every reply arrives once.
#[test]
fn a_server_without_message_drafts_falls_back_to_editing_in_place() {
    let fake = FakeTelegram::start();
    fake.refuse_drafts();
    let dir = setup(&fake, "");
    let script = dir.script(
        "s.jsonl",
        &[
            json!([{"text": "Hel"}, {"delay_ms": 1300}, {"text": "lo there"}]),
            json!([{"text": "Sec"}, {"delay_ms": 1300}, {"text": "ond"}]),
        ],
    );
    let bridge = Bridge::start(&dir, &script);
    fake.user_says(USER, "hi");
    fake.wait_for("the finalized reply", WAIT, |f| texts(f) == ["Hello there"]);
    fake.user_says(USER, "again");
    fake.wait_for("the second reply", WAIT, |f| {
        texts(f) == ["Hello there", "Second"]
    });
    settled(&fake, &dir);
    drop(bridge);
    // Asked once, then never again in this process.
    assert_eq!(fake.calls("sendMessageDraft").len(), 1);
    assert!(fake.drafts(USER).is_empty());
    // Each reply: a draft sent, edited, finalized in place.
    assert_eq!(fake.calls("sendMessage").len(), 2);
    assert!(!fake.calls("editMessageText").is_empty());
    let replies: Vec<Value> = dir
        .outbox()
        .into_iter()
        .filter(|i| i["kind"] == "reply")
        .collect();
    assert_eq!(replies.len(), 2);
    assert!(
        replies
            .iter()
            .all(|r| r["status"] == "sent" && r["edit_of"].is_string()),
        "{replies:#?}"
    );
    assert_eq!(dir.log().matches("has no sendMessageDraft").count(), 1);
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
    let receipt = sent_reply(&fake, &dir);
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
    // The prompt now shows the answer instead of its buttons.
    fake.wait_for("the prompt updated", WAIT, |f| {
        f.chat(USER)
            .iter()
            .any(|(id, t)| *id == message_id && t.ends_with("→ allowed once"))
    });
    // Pressing again does nothing more.
    fake.press(USER, message_id, &allow);
    fake.wait_for("the second press answered", WAIT, |f| {
        f.calls("answerCallbackQuery").len() == 2
    });
    assert_eq!(texts(&fake).iter().filter(|t| *t == "Written.").count(), 1);
}

#[test]
fn commands_answer_in_the_chat() {
    let fake = FakeTelegram::start();
    let dir = setup(&fake, "live_drafts = false\n");
    let script = dir.script(
        "s.jsonl",
        &[
            json!([{"text": "first"}]),
            json!([{"text": "slow"}, {"delay_ms": 30000}, {"text": " never"}]),
        ],
    );
    let _bridge = Bridge::start(&dir, &script);
    fake.user_says(USER, "/help");
    fake.wait_for("help", WAIT, |f| {
        texts(f).iter().any(|t| t.contains("/new"))
    });
    fake.user_says(USER, "/status");
    fake.wait_for("status without a session", WAIT, |f| {
        texts(f).iter().any(|t| t.contains("No session yet"))
    });
    fake.user_says(USER, "hello");
    fake.wait_for("the reply", WAIT, |f| texts(f).iter().any(|t| t == "first"));
    fake.user_says(USER, "/status");
    fake.wait_for("status", WAIT, |f| {
        texts(f)
            .iter()
            .any(|t| t.starts_with("Session ses_") && t.contains("Model: scripted/script"))
    });
    let session = |texts: &[String]| {
        texts
            .iter()
            .rev()
            .find_map(|t| {
                t.strip_prefix("Session ")
                    .map(|r| r.split('\n').next().unwrap().to_owned())
            })
            .unwrap()
    };
    let first = session(&texts(&fake));
    // A long run, stopped from the chat.
    fake.user_says(USER, "take your time");
    until(&fake, "the run to start", || {
        let out = dir
            .command()
            .args(["sessions", "show", &first, "--json"])
            .output()
            .unwrap();
        let shown: Value = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
        shown["runs"]
            .as_array()
            .is_some_and(|runs| runs.iter().any(|r| r["state"] == "running"))
    });
    fake.user_says(USER, "/stop");
    // The reply is what the run said before it stopped, marked, or (when the
    // stop came before its first word) that it stopped.
    fake.wait_for("stopped", WAIT, |f| {
        let t = texts(f);
        t.iter().any(|t| t == "Stopping 1 request(s).")
            && t.iter().any(|t| t.contains("(stopped)") || t == "Stopped.")
    });
    fake.user_says(USER, "/new");
    fake.wait_for("a new session", WAIT, |f| {
        texts(f).iter().any(|t| t.starts_with("New session ses_"))
    });
    fake.user_says(USER, "/status");
    fake.wait_for("the new status", WAIT, |f| {
        texts(f)
            .iter()
            .filter(|t| t.starts_with("Session ses_"))
            .count()
            == 2
    });
    assert_ne!(session(&texts(&fake)), first);
    fake.user_says(USER, "/frobnicate");
    fake.wait_for("unknown command", WAIT, |f| {
        texts(f)
            .iter()
            .any(|t| t.contains("Unknown command /frobnicate"))
    });
}

/// A skill of the person's is listed by `/help` and run by its name, in a
/// group with the bot's name too: a prompt of the chat's session, not an
/// unknown command.
#[test]
fn a_skill_is_listed_by_help_and_run_by_its_name_in_the_chat() {
    let fake = FakeTelegram::start();
    let dir = setup(&fake, "live_drafts = false\n");
    let folder = dir.path().join("home/.agents/skills/pdf");
    std::fs::create_dir_all(&folder).unwrap();
    std::fs::write(
        folder.join("SKILL.md"),
        "---\nname: pdf\ndescription: Extract tables from PDF files.\n---\n\nUse pdftotext.\n",
    )
    .unwrap();
    let script = dir.script("s.jsonl", &[json!([{"text": "PDF-DONE"}])]);
    let _bridge = Bridge::start(&dir, &script);
    fake.user_says(USER, "/help");
    let help = reply_containing(&fake, "help", "Skills and custom commands:");
    assert!(
        help.contains("/pdf: Extract tables from PDF files."),
        "{help}"
    );
    fake.user_says(USER, "/pdf@pincer_bot the tables of report.pdf");
    fake.wait_for("the reply", WAIT, |f| {
        texts(f).iter().any(|t| t == "PDF-DONE")
    });
    assert!(
        !texts(&fake).iter().any(|t| t.contains("Unknown command")),
        "{:?}",
        texts(&fake)
    );
    let out = dir
        .command()
        .args(["sessions", "list", "--json"])
        .output()
        .unwrap();
    let listed: Value = serde_json::from_slice(
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .next()
            .unwrap()
            .as_bytes(),
    )
    .unwrap();
    let shown = dir.show_session(listed["session_id"].as_str().unwrap());
    let first = shown["history"]
        .as_array()
        .unwrap()
        .iter()
        .find(|entry| entry["message"]["role"] == "user")
        .unwrap();
    assert_eq!(
        first["message"]["content"][0]["text"],
        "/pdf the tables of report.pdf"
    );
}

#[test]
fn strangers_pair_with_the_code_before_they_are_served() {
    let fake = FakeTelegram::start();
    let dir = TestDir::new();
    let workspace = dir.workspace();
    let config = dir.path().join("config").join("pincer");
    std::fs::create_dir_all(&config).unwrap();
    std::fs::write(
        config.join("config.toml"),
        format!(
            "[channels.telegram]\napi_base = \"{}\"\nworkspace = \"{}\"\npoll_timeout_secs = 1\ncoalesce_ms = 50\nlive_drafts = false\npairing_code_env = \"MY_CODE\"\n",
            fake.url,
            workspace.display()
        ),
    )
    .unwrap();
    let script = dir.script("s.jsonl", &[json!([{"text": "Welcome."}])]);
    let stderr = std::fs::File::create(dir.path().join("stderr.log")).unwrap();
    let mut child = dir
        .command()
        .env("TELEGRAM_BOT_TOKEN", TOKEN)
        .env("MY_CODE", "s3cret-code")
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
    const STRANGER: i64 = 77;
    let said = |f: &FakeTelegram| -> Vec<String> {
        f.chat(STRANGER).into_iter().map(|(_, t)| t).collect()
    };
    fake.user_says(STRANGER, "hi");
    fake.wait_for("the refusal", WAIT, |f| {
        said(f).iter().any(|t| t.contains("not allowed"))
    });
    fake.user_says(STRANGER, "hi again");
    fake.user_says(STRANGER, "/pair wrong");
    fake.wait_for("wrong code", WAIT, |f| {
        said(f).iter().any(|t| t.contains("not right"))
    });
    // Told once, not for every message.
    assert_eq!(
        said(&fake)
            .iter()
            .filter(|t| t.contains("not allowed"))
            .count(),
        1
    );
    fake.user_says(STRANGER, "/pair s3cret-code");
    fake.wait_for("paired", WAIT, |f| {
        said(f).iter().any(|t| t.starts_with("Paired"))
    });
    fake.user_says(STRANGER, "hello");
    fake.wait_for("served", WAIT, |f| said(f).iter().any(|t| t == "Welcome."));
    let _ = child.kill();
    let _ = child.wait();
}

#[test]
fn quick_messages_coalesce_and_a_later_one_steers_the_run() {
    let fake = FakeTelegram::start();
    let dir = setup(&fake, "live_drafts = false\ncoalesce_ms = 700\n");
    let script = dir.script(
        "s.jsonl",
        &[
            json!([{"delay_ms": 4000}, {"text": "one reply for both. "}]),
            json!([{"text": "And the steered one."}]),
        ],
    );
    let _bridge = Bridge::start(&dir, &script);
    fake.user_says(USER, "part one");
    fake.user_says(USER, "part two");
    // While the first run works, a third message arrives: the run takes it
    // in at its next turn boundary, and its one reply answers it too.
    until(&fake, "the first run working", || running(&dir));
    fake.user_says(USER, "part three");
    fake.wait_for("the reply", WAIT, |f| !texts(f).is_empty());
    settled(&fake, &dir);
    assert_eq!(
        texts(&fake),
        vec!["one reply for both. And the steered one.".to_owned()]
    );
    let sessions = dir
        .command()
        .args(["sessions", "list", "--json"])
        .output()
        .unwrap();
    let sessions: Vec<Value> = String::from_utf8_lossy(&sessions.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(sessions.len(), 1);
    assert_eq!(sessions[0]["origin"], "channel");
    let shown = dir.show_session(sessions[0]["session_id"].as_str().unwrap());
    let prompts: Vec<String> = shown["history"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["message"]["role"] == "user")
        .map(|m| m["message"].to_string())
        .collect();
    assert_eq!(prompts.len(), 2, "{prompts:#?}");
    assert!(
        prompts[0].contains("part one") && prompts[0].contains("part two"),
        "{prompts:#?}"
    );
    assert!(prompts[1].contains("part three"));
}

#[test]
fn intents_too_old_at_start_expire_instead_of_arriving_late() {
    let fake = FakeTelegram::start();
    let dir = setup(&fake, "live_drafts = false\nexpire_after_secs = 1\n");
    let script = dir.script("s.jsonl", &[json!([{"text": "Too late."}])]);
    fake.fail(
        "sendMessage",
        1000,
        502,
        json!({"ok": false, "error_code": 502, "description": "Bad Gateway"}),
    );
    let bridge = Bridge::start(&dir, &script);
    fake.user_says(USER, "hi");
    retrying(&fake, &dir);
    bridge.crash();
    // Deliberately: the intent grows older than `expire_after_secs` while
    // no process runs.
    std::thread::sleep(Duration::from_millis(1500));
    fake.release("sendMessage");
    let _bridge = Bridge::start(&dir, &script);
    fake.wait_for("the restart polling", WAIT, |f| f.offsets().len() >= 3);
    until(&fake, "the intent expired", || {
        dir.outbox().iter().all(|i| i["status"] == "expired")
    });
    assert!(texts(&fake).is_empty(), "{:?}", texts(&fake));
    let intent = &dir.outbox()[0];
    assert_eq!(intent["status"], "expired");
    assert!(dir.log().contains("expired"));
}

#[test]
fn a_redelivered_update_is_answered_once() {
    let fake = FakeTelegram::start();
    let dir = setup(&fake, "live_drafts = false\n");
    let script = dir.script(
        "s.jsonl",
        &[
            json!([{"text": "Only once."}]),
            json!([{"text": "Pong one."}]),
            json!([{"text": "Pong two."}]),
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
    // A message after the redelivery, answered in order after whatever the
    // redelivery started: once its reply is in and the bridge settled, a
    // second answer to "hello" would show.
    let last = answered_after(&fake, &dir, "ping one", 2);
    drop(bridge);

    // After a restart the persisted offset is where polling resumes, and the
    // old update, handed out again, is still not answered twice.
    let polls = fake.offsets().len();
    fake.redeliver(update);
    let _bridge = Bridge::start(&dir, &script);
    fake.wait_for("polling after the restart", WAIT, |f| {
        f.offsets().len() >= polls + 2
    });
    assert_eq!(fake.offsets()[polls], last + 1);
    answered_after(&fake, &dir, "ping two", 3);
    assert_eq!(texts(&fake), ["Only once.", "Pong one.", "Pong two."]);
    let sessions = dir
        .command()
        .args(["sessions", "list", "--json"])
        .output()
        .unwrap();
    let session: Value = serde_json::from_slice(&sessions.stdout).unwrap();
    let shown = dir.show_session(session["session_id"].as_str().unwrap());
    let prompts: Vec<String> = shown["history"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["message"]["role"] == "user")
        .map(|m| {
            m["message"]["content"][0]["text"]
                .as_str()
                .unwrap()
                .to_owned()
        })
        .collect();
    assert_eq!(prompts, ["hello", "ping one", "ping two"]);
}

/// Says `text` and waits until the chat holds `replies` messages and the
/// bridge settled; the update's id.
fn answered_after(fake: &FakeTelegram, dir: &TestDir, text: &str, replies: usize) -> i64 {
    let update = fake.user_says(USER, text);
    fake.wait_for("the reply to a later message", WAIT, |f| {
        texts(f).len() >= replies
    });
    settled(fake, dir);
    update
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
    let intent = sent_reply(&fake, &dir);
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
    retrying(&fake, &dir);
    bridge.crash();
    let pending = dir.outbox();
    assert_eq!(pending.len(), 1);
    assert_eq!(pending[0]["status"], "pending");
    fake.release("sendMessage");
    let _bridge = Bridge::start(&dir, &script);
    fake.wait_for("the reply after the restart", WAIT, |f| {
        texts(f) == vec!["Survived.".to_owned()]
    });
    sent_reply(&fake, &dir);
    settled(&fake, &dir);
    assert_eq!(texts(&fake).len(), 1);
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
    until(&fake, "the intent found unknown after send", || {
        dir.outbox()
            .iter()
            .any(|i| i["status"] == "unknown_after_send")
    });
    settled(&fake, &dir);
    assert_eq!(fake.calls("sendMessage").len(), 1, "resent blindly");
    let intents = dir.outbox();
    assert_eq!(intents.len(), 1);
    assert_eq!(intents[0]["status"], "unknown_after_send");
    assert_eq!(intents[0]["failure"]["kind"], "unknown");
    assert!(dir.log().contains("unknown after send"));
}

/// The timeline of a lost reply: a process sends a live draft edit and dies
/// with it in flight; the next process answers the run; then Telegram acts on
/// the dead process's edit. Finalized in place, the reply would be
/// overwritten by the stale draft while its intent says `sent`. The stale
/// draft is deleted instead and the reply sent as a fresh message, so the late
/// edit finds nothing to edit.
#[test]
fn a_dead_processs_late_draft_edit_cannot_overwrite_the_reply() {
    let fake = FakeTelegram::start();
    // An older server: the draft is a message edited in place.
    fake.refuse_drafts();
    let dir = setup(&fake, "");
    let script = dir.script(
        "s.jsonl",
        &[json!([
            {"text": "Working on it"},
            {"delay_ms": 1200},
            {"text": " and more"},
            {"delay_ms": 60000},
            {"text": " never"}
        ])],
    );
    fake.park_next("editMessageText");
    let bridge = Bridge::start(&dir, &script);
    fake.user_says(USER, "long job");
    fake.wait_for("the draft's edit taken and parked", WAIT, |f| {
        f.parked() == 1
    });
    assert_eq!(texts(&fake), vec!["Working on it".to_owned()]);
    bridge.crash();
    let _bridge = Bridge::start(&dir, &script);
    let reply = sent_reply(&fake, &dir);
    assert!(reply["edit_of"].is_null(), "{reply:#}");
    assert!(reply["retract"].is_null(), "{reply:#}");
    let final_text = reply["units"][0]["markup"]
        .as_str()
        .or(reply["units"][0]["text"].as_str())
        .unwrap()
        .to_owned();
    assert!(
        final_text.starts_with("Working on it and more") && final_text.contains("interrupted"),
        "{final_text}"
    );
    // Only now does Telegram act on the edit the dead process sent.
    fake.apply_parked();
    fake.wait_for("the late edit acted on", WAIT, |f| {
        f.late_answers().len() == 1
    });
    let (method, answer) = fake.late_answers().remove(0);
    assert_eq!(method, "editMessageText");
    assert_eq!(answer["ok"], false, "the late edit landed: {answer}");
    assert_eq!(
        fake.chat(USER),
        vec![(
            reply["receipt"]["parts"][0]["platform_id"]
                .as_str()
                .unwrap()
                .parse()
                .unwrap(),
            final_text
        )],
        "the person sees the whole reply and nothing else"
    );
    assert_eq!(fake.calls("deleteMessage").len(), 1);
    assert_eq!(fake.calls("sendMessage").len(), 2);
    let draft = dir
        .outbox()
        .into_iter()
        .find(|i| i["kind"] == "draft")
        .unwrap();
    assert_eq!(draft["status"], "cancelled", "{draft:#}");
    assert!(
        draft["failure"]["message"]
            .as_str()
            .unwrap()
            .starts_with("deleted, and reply:run_"),
        "{draft:#}"
    );
}

/// Within one process too: a draft edit whose outcome is unknown (a 502 from
/// a proxy, a timeout) may be applied after the reply's own edit, so that
/// draft is deleted and the reply sent afresh.
#[test]
fn a_draft_edit_with_an_unknown_outcome_makes_the_reply_a_fresh_message() {
    let fake = FakeTelegram::start();
    // An older server: the draft is a message edited in place.
    fake.refuse_drafts();
    let dir = setup(&fake, "");
    let script = dir.script(
        "s.jsonl",
        &[json!([{"text": "Draft"}, {"delay_ms": 1200}, {"text": " grows"}, {"delay_ms": 300}, {"text": "."}])],
    );
    fake.fail(
        "editMessageText",
        1,
        502,
        json!({"ok": false, "error_code": 502, "description": "Bad Gateway"}),
    );
    let _bridge = Bridge::start(&dir, &script);
    fake.user_says(USER, "hi");
    let reply = sent_reply(&fake, &dir);
    assert!(reply["edit_of"].is_null(), "{reply:#}");
    fake.wait_for("only the reply in the chat", WAIT, |f| {
        texts(f) == vec!["Draft grows.".to_owned()]
    });
    assert_eq!(fake.calls("deleteMessage").len(), 1);
    // The draft never edited after its 502: the reply is the only edit-free
    // way to a whole message.
    assert_eq!(fake.calls("editMessageText").len(), 1);
}

/// A stale draft Telegram refuses to delete (older than 48 hours) stays; the
/// reply says so in a part of its own, then follows whole.
#[test]
fn a_stale_draft_that_cannot_be_deleted_is_named_before_the_reply() {
    let fake = FakeTelegram::start();
    // An older server: the draft is a message edited in place.
    fake.refuse_drafts();
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
    // Telegram shows the draft a moment before Pincer has committed its id.
    until(&fake, "the draft's id committed", || {
        dir.outbox().iter().any(|i| {
            i["kind"] == "draft"
                && i["receipt"]["parts"]
                    .as_array()
                    .is_some_and(|parts| !parts.is_empty())
        })
    });
    bridge.crash();
    fake.fail(
        "deleteMessage",
        1,
        400,
        json!({"ok": false, "error_code": 400, "description": "Bad Request: message can't be deleted for everyone"}),
    );
    let _bridge = Bridge::start(&dir, &script);
    fake.wait_for("the note and the reply", WAIT, |f| texts(f).len() == 3);
    let shown = texts(&fake);
    assert_eq!(shown[0], "Working on it");
    assert!(
        shown[1].starts_with("[pincer] The partial draft of this reply above is stale"),
        "{shown:?}"
    );
    assert!(
        shown[2].starts_with("Working on it") && shown[2].contains("interrupted"),
        "{shown:?}"
    );
    let reply = sent_reply(&fake, &dir);
    assert_eq!(reply["units"].as_array().unwrap().len(), 2, "{reply:#}");
    assert_eq!(reply["receipt"]["parts"].as_array().unwrap().len(), 2);
    let draft = dir
        .outbox()
        .into_iter()
        .find(|i| i["kind"] == "draft")
        .unwrap();
    assert_eq!(draft["status"], "sent", "{draft:#}");
}

#[test]
fn a_crash_before_the_drafts_id_is_known_is_reported_in_the_reply() {
    let fake = FakeTelegram::start();
    // An older server: the draft is a message edited in place.
    fake.refuse_drafts();
    let dir = setup(&fake, "");
    let script = dir.script(
        "s.jsonl",
        &[json!([{"text": "Working on it"}, {"delay_ms": 60000}, {"text": " never"}])],
    );
    // Telegram takes the draft (it shows in the chat) and the process dies
    // before the answer that carries its message id.
    fake.hold_acted("sendMessage");
    let bridge = Bridge::start(&dir, &script);
    fake.user_says(USER, "long job");
    fake.wait_for("the draft in the chat", WAIT, |f| {
        texts(f) == vec!["Working on it".to_owned()]
    });
    bridge.crash();
    fake.release("sendMessage");
    let _bridge = Bridge::start(&dir, &script);
    fake.wait_for("the reply", WAIT, |f| texts(f).len() == 2);
    let shown = texts(&fake);
    // The draft Pincer cannot name stays, and the reply says it is stale.
    assert_eq!(shown[0], "Working on it");
    assert!(
        shown[1].starts_with("[pincer] If a partial draft of this reply shows above, it is stale"),
        "{shown:?}"
    );
    assert!(
        shown[1].contains("Working on it") && shown[1].contains("interrupted"),
        "{shown:?}"
    );
    sent_reply(&fake, &dir);
    let draft = dir
        .outbox()
        .into_iter()
        .find(|i| i["kind"] == "draft")
        .unwrap();
    assert_eq!(draft["status"], "unknown_after_send");
    assert_eq!(draft["units"][0]["text"], "Working on it");
    // Nothing was sent twice.
    settled(&fake, &dir);
    assert_eq!(fake.calls("sendMessage").len(), 2);
}

#[test]
fn a_finalizing_edit_cut_off_by_a_crash_is_made_after_the_restart() {
    let fake = FakeTelegram::start();
    // An older server: the draft is a message edited in place.
    fake.refuse_drafts();
    let dir = setup(&fake, "");
    let script = dir.script(
        "s.jsonl",
        &[json!([{"text": "Draft"}, {"delay_ms": 300}, {"text": " and the rest."}])],
    );
    // The edit that finalizes the draft never reaches Telegram.
    fake.hold("editMessageText");
    let bridge = Bridge::start(&dir, &script);
    fake.user_says(USER, "hi");
    fake.wait_for("the finalizing edit in flight", WAIT, |f| {
        f.calls("editMessageText")
            .iter()
            .any(|c| c.body["text"] == "Draft and the rest.")
    });
    bridge.crash();
    assert_eq!(texts(&fake), vec!["Draft".to_owned()]);
    fake.release("editMessageText");
    let _bridge = Bridge::start(&dir, &script);
    // An edit is harmless to repeat: it is made again, not given up.
    fake.wait_for("the draft finalized", WAIT, |f| {
        texts(f) == vec!["Draft and the rest.".to_owned()]
    });
    let reply = sent_reply(&fake, &dir);
    assert_eq!(reply["attempt"], 2);
    assert_eq!(fake.calls("sendMessage").len(), 1);
}

#[test]
fn a_finalizing_edit_whose_markup_is_refused_is_made_in_plain_text() {
    let fake = FakeTelegram::start();
    // An older server: the draft is a message edited in place.
    fake.refuse_drafts();
    let dir = setup(&fake, "");
    let script = dir.script(
        "s.jsonl",
        &[json!([{"text": "Draft"}, {"delay_ms": 300}, {"text": " with `code`."}])],
    );
    fake.fail(
        "editMessageText",
        1,
        400,
        json!({"ok": false, "error_code": 400, "description": "Bad Request: can't parse entities: unsupported start tag"}),
    );
    let _bridge = Bridge::start(&dir, &script);
    fake.user_says(USER, "hi");
    // The draft is not left showing its partial text.
    fake.wait_for("the draft finalized in plain text", WAIT, |f| {
        texts(f) == vec!["Draft with `code`.".to_owned()]
    });
    let edits = fake.calls("editMessageText");
    assert_eq!(edits[0].body["parse_mode"], "HTML");
    assert!(edits[1].body.get("parse_mode").is_none(), "{edits:#?}");
    sent_reply(&fake, &dir);
}

/// Every session's id and whether a chat maps to it, from the database.
fn sessions_and_chats(dir: &TestDir) -> Vec<(String, bool)> {
    let db = rusqlite::Connection::open_with_flags(
        dir.data_dir().join("pincer.db"),
        rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY,
    )
    .unwrap();
    let mut stmt = db
        .prepare(
            "SELECT id, EXISTS (SELECT 1 FROM channel_sessions c WHERE c.session_id = s.id)
             FROM sessions s ORDER BY created_at",
        )
        .unwrap();
    stmt.query_map([], |row| Ok((row.get(0)?, row.get(1)?)))
        .unwrap()
        .map(Result::unwrap)
        .collect()
}

#[test]
fn a_chats_session_and_its_mapping_are_committed_together() {
    let fake = FakeTelegram::start();
    let dir = setup(&fake, "live_drafts = false\n");
    let script = dir.script("s.jsonl", &[json!([{"text": "Mapped."}])]);
    let _bridge = Bridge::start(&dir, &script);
    fake.wait_for("polling", WAIT, |f| !f.offsets().is_empty());
    // The mapping's write fails, as a crash between two commits would cut it
    // off: the session must not be left behind without it.
    let db = rusqlite::Connection::open(dir.data_dir().join("pincer.db")).unwrap();
    db.busy_timeout(Duration::from_secs(10)).unwrap();
    db.execute_batch(
        "CREATE TRIGGER no_mapping BEFORE INSERT ON channel_sessions
         BEGIN SELECT RAISE(ABORT, 'the disk is full'); END",
    )
    .unwrap();
    fake.user_says(USER, "hi");
    fake.wait_for("the failure told", WAIT, |f| {
        texts(f)
            .iter()
            .any(|t| t.starts_with("Pincer could not start on this"))
    });
    assert_eq!(sessions_and_chats(&dir), vec![], "an orphaned session");
    db.execute_batch("DROP TRIGGER no_mapping").unwrap();
    fake.user_says(USER, "hi again");
    fake.wait_for("the reply", WAIT, |f| {
        texts(f).iter().any(|t| t == "Mapped.")
    });
    let sessions = sessions_and_chats(&dir);
    assert_eq!(sessions.len(), 1, "{sessions:?}");
    assert!(sessions[0].1, "{sessions:?}");
}

/// One HTTP/1.1 request to the serve face; (status, body).
fn http(addr: &str, method: &str, path: &str, body: Option<&Value>) -> (u16, String) {
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect(addr).unwrap();
    let body = body.map(Value::to_string).unwrap_or_default();
    write!(
        stream,
        "{method} {path} HTTP/1.1\r\nhost: {addr}\r\nauthorization: Bearer {HTTP_TOKEN}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    let status = response.split(' ').nth(1).unwrap().parse().unwrap();
    let body = response.split_once("\r\n\r\n").map_or("", |(_, b)| b);
    (status, body.to_owned())
}

const HTTP_TOKEN: &str = "http-token-0123456789abcdef";

#[test]
fn serve_bridges_the_chat_and_http_answers_its_approval_first() {
    let fake = FakeTelegram::start();
    let dir = setup(&fake, "live_drafts = false\n");
    let script = dir.script(
        "s.jsonl",
        &[
            json!([{"tool_call": {"id": "w1", "name": "write_file", "arguments": {"path": "n.txt", "content": "via http\n"}}}]),
            json!([{"text": "Written."}]),
        ],
    );
    let ready = dir.path().join("ready");
    let mut child = dir
        .command()
        .env("TELEGRAM_BOT_TOKEN", TOKEN)
        .env("PINCER_HTTP_TOKEN", HTTP_TOKEN)
        .args([
            "serve",
            "--http",
            "127.0.0.1:0",
            "--channel",
            "telegram",
            "--ready-file",
        ])
        .arg(&ready)
        .args([
            "--provider",
            "scripted",
            "--script",
            script.to_str().unwrap(),
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(dir.path().join("stderr.log")).unwrap())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + WAIT;
    let addr = loop {
        if let Ok(text) = std::fs::read_to_string(&ready) {
            break text.trim().to_owned();
        }
        assert!(std::time::Instant::now() < deadline, "{}", dir.log());
        std::thread::sleep(Duration::from_millis(20));
    };
    // Telegram answers sends late: the HTTP answer comes while the prompt
    // is still on its way, and the prompt must still show it.
    fake.delay(Duration::ZERO, Duration::from_millis(1500));
    fake.user_says(USER, "write it");
    fake.wait_for("the approval prompt", WAIT, |f| {
        texts(f).iter().any(|t| t.contains("Approval needed"))
    });
    let (status, body) = http(&addr, "GET", "/v1/approvals", None);
    assert_eq!(status, 200, "{body}");
    let approvals: Value = serde_json::from_str(&body).unwrap();
    let id = approvals["approvals"][0]["approval_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let (status, body) = http(
        &addr,
        "POST",
        &format!("/v1/approvals/{id}"),
        Some(&json!({"decision": "allow_once"})),
    );
    assert_eq!(status, 200, "{body}");
    fake.wait_for("the reply and the prompt showing the answer", WAIT, |f| {
        let t = texts(f);
        t.iter().any(|t| t == "Written.") && t.iter().any(|t| t.ends_with("→ allowed once"))
    });
    assert_eq!(
        std::fs::read_to_string(dir.workspace().join("n.txt")).unwrap(),
        "via http\n"
    );
    // The chat's buttons lost: the answer from HTTP came first.
    let (message_id, _) = fake
        .chat(USER)
        .into_iter()
        .find(|(_, t)| t.contains("Approval needed"))
        .unwrap();
    fake.press(USER, message_id, &format!("ap:{id}:reject_once"));
    fake.wait_for("the press answered", WAIT, |f| {
        !f.calls("answerCallbackQuery").is_empty()
    });
    sent_reply(&fake, &dir);
    let (status, metrics) = http(&addr, "GET", "/metrics", None);
    assert_eq!(status, 200);
    assert!(
        metrics.contains("pincer_outbox_depth{channel=\"telegram\"} 0"),
        "{metrics}"
    );
    assert!(
        metrics.contains("pincer_delivery_failures{channel=\"telegram\"} 0"),
        "{metrics}"
    );
    assert!(
        metrics.contains("pincer_outbox_intents{channel=\"telegram\",status=\"sent\"} 2"),
        "{metrics}"
    );
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let status = child.wait().unwrap();
    assert!(status.success(), "{}", dir.log());
}

#[test]
fn in_a_group_each_senders_messages_coalesce_apart() {
    let fake = FakeTelegram::start();
    let dir = setup(
        &fake,
        "live_drafts = false\ncoalesce_ms = 600\nallow = [\"42\", \"43\"]\n",
    );
    let script = dir.script(
        "s.jsonl",
        &[
            json!([{"text": "first run"}]),
            json!([{"text": "second run"}]),
        ],
    );
    let _bridge = Bridge::start(&dir, &script);
    const GROUP: i64 = -1001;
    fake.group_says(GROUP, 42, "from Ada");
    fake.group_says(GROUP, 43, "from Bob");
    fake.group_says(GROUP, 42, "Ada again");
    fake.wait_for("two replies", WAIT, |f| f.chat(GROUP).len() == 2);
    let sessions = dir
        .command()
        .args(["sessions", "list", "--json"])
        .output()
        .unwrap();
    let sessions: Vec<Value> = String::from_utf8_lossy(&sessions.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    // One chat, one session; two senders, two prompts.
    assert_eq!(sessions.len(), 1);
    let shown = dir.show_session(sessions[0]["session_id"].as_str().unwrap());
    let prompts: Vec<String> = shown["history"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["message"]["role"] == "user")
        .map(|m| m["message"].to_string())
        .collect();
    assert_eq!(prompts.len(), 2, "{prompts:#?}");
    let ada = prompts.iter().find(|p| p.contains("from Ada")).unwrap();
    assert!(
        ada.contains("Ada again") && !ada.contains("from Bob"),
        "{prompts:#?}"
    );
}

#[test]
fn undo_from_the_chat_reverts_the_last_edit_and_replies_what_it_did() {
    let fake = FakeTelegram::start();
    let dir = setup(&fake, "live_drafts = false\n");
    let notes = dir.workspace().join("notes.txt");
    std::fs::write(&notes, "before\n").unwrap();
    let script = dir.script(
        "s.jsonl",
        &[
            json!([{"tool_call": {"name": "write_file", "arguments": {"path": "notes.txt", "content": "after\n"}}}]),
            json!([{"text": "written"}]),
        ],
    );
    let stderr = std::fs::File::create(dir.path().join("stderr.log")).unwrap();
    let child = dir
        .command()
        .env("TELEGRAM_BOT_TOKEN", TOKEN)
        .env("PINCER_MODE", "full")
        .args(["acp", "--provider", "scripted", "--script"])
        .arg(&script)
        .args(["--channel", "telegram"])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(stderr)
        .spawn()
        .unwrap();
    let _bridge = Bridge { child };
    fake.user_says(USER, "write it");
    fake.wait_for("the reply", WAIT, |f| {
        texts(f).iter().any(|t| t == "written")
    });
    assert_eq!(std::fs::read_to_string(&notes).unwrap(), "after\n");
    fake.user_says(USER, "/undo");
    fake.wait_for("the undo's reply", WAIT, |f| {
        texts(f)
            .iter()
            .any(|t| t.starts_with("Reverted 1 file from run run_") && t.ends_with(": notes.txt."))
    });
    assert_eq!(std::fs::read_to_string(&notes).unwrap(), "before\n");
    fake.user_says(USER, "/undo");
    fake.wait_for("nothing left to undo", WAIT, |f| {
        texts(f).iter().any(|t| t.starts_with("Nothing to undo"))
    });
}

#[test]
fn a_server_that_fails_to_start_is_reported_in_the_chat_and_the_reply_follows() {
    let fake = FakeTelegram::start();
    let dir = setup(
        &fake,
        "\n[mcpServers.broken]\ncommand = \"/nonexistent/mcp-server\"\n",
    );
    let script = dir.script("s.jsonl", &[json!([{"text": "Answered anyway"}])]);
    let _bridge = Bridge::start(&dir, &script);
    fake.user_says(USER, "hi");
    fake.wait_for("the reply", WAIT, |f| {
        texts(f)
            .last()
            .is_some_and(|t| t.ends_with("Answered anyway"))
    });
    let reply = texts(&fake).last().unwrap().clone();
    assert!(
        reply.starts_with("[pincer] ") && reply.contains("broken"),
        "{reply}"
    );
}

/// Found by fuzzing review: an update id of `i64::MAX` has no next offset;
/// adding one overflowed in the poll loop, which then stopped for good.
#[test]
fn an_update_id_at_the_end_of_its_range_does_not_stop_polling() {
    let fake = FakeTelegram::start();
    let dir = setup(&fake, "live_drafts = false\n");
    let script = dir.script("s.jsonl", &[json!([{"text": "Still polling."}])]);
    fake.force_update(json!({
        "update_id": i64::MAX,
        "message": {
            "message_id": 900,
            "date": 1_700_000_000,
            "from": {"id": USER, "is_bot": false, "first_name": "Ada"},
            "chat": {"id": USER, "type": "private"},
            "text": "the last id there is",
        }
    }));
    let _bridge = Bridge::start(&dir, &script);
    fake.wait_for("a poll", WAIT, |f| f.polls().len() >= 2);
    fake.user_says(USER, "hi");
    fake.wait_for("the reply", WAIT, |f| {
        texts(f) == vec!["Still polling.".to_owned()]
    });
}

#[test]
fn polling_keeps_a_floor_when_the_server_ignores_the_long_poll_timeout() {
    let fake = FakeTelegram::start();
    // A server or proxy that answers an empty getUpdates at once.
    fake.ignore_timeout();
    let dir = setup(&fake, "live_drafts = false\n");
    let script = dir.script("s.jsonl", &[json!([{"text": "Still answered."}])]);
    let _bridge = Bridge::start(&dir, &script);
    fake.wait_for("polling", WAIT, |f| !f.polls().is_empty());
    let from = std::time::Instant::now();
    // Deliberately: the polls of two seconds are counted.
    std::thread::sleep(Duration::from_secs(2));
    let to = std::time::Instant::now();
    let polls = fake
        .polls()
        .into_iter()
        .filter(|at| *at >= from && *at < to)
        .count();
    // A correctness bound with a wide margin: about one poll a second, not
    // thousands.
    assert!(polls <= 6, "{polls} polls in 2 s");
    // Messages are still taken in promptly.
    fake.user_says(USER, "hi");
    fake.wait_for("the reply", WAIT, |f| {
        texts(f) == vec!["Still answered.".to_owned()]
    });
}

#[test]
fn a_platform_error_that_echoes_the_token_is_stored_and_logged_redacted() {
    let fake = FakeTelegram::start();
    let dir = setup(&fake, "live_drafts = false\n");
    let script = dir.script("s.jsonl", &[json!([{"text": "Still here."}])]);
    fake.fail(
        "sendMessage",
        1,
        500,
        json!({"ok": false, "error_code": 500, "description": format!("Internal Server Error: bot{TOKEN} is unwell")}),
    );
    let _bridge = Bridge::start(&dir, &script);
    fake.user_says(USER, "hi");
    retrying(&fake, &dir);
    let failed = dir
        .outbox()
        .into_iter()
        .find(|i| i["status"] == "pending")
        .unwrap()
        .to_string();
    assert!(!failed.contains(TOKEN), "{failed}");
    assert!(
        failed.contains("Internal Server Error: bot[REDACTED:"),
        "{failed}"
    );
    fake.wait_for("the reply", WAIT, |f| {
        texts(f) == vec!["Still here.".to_owned()]
    });
    assert!(!dir.log().contains(TOKEN), "{}", dir.log());
}

/// The latest session of the chat (from `/status`).
fn chat_session(fake: &FakeTelegram) -> String {
    texts(fake)
        .iter()
        .rev()
        .find_map(|t| {
            t.strip_prefix("Session ")
                .map(|r| r.split('\n').next().unwrap().to_owned())
        })
        .unwrap()
}

#[test]
fn remember_and_forget_in_a_chat_outlive_new_and_stay_in_the_chat() {
    let fake = FakeTelegram::start();
    let dir = setup(&fake, "live_drafts = false\n");
    let script = dir.script("s.jsonl", &[json!([{"text": "sure"}])]);
    let _bridge = Bridge::start(&dir, &script);
    fake.user_says(USER, "/remember The standup moves to 9:30 on Fridays");
    fake.wait_for("remembered", WAIT, |f| {
        texts(f)
            .iter()
            .any(|t| t.starts_with("Remembered") && t.contains("(conversation)"))
    });
    let pattern = regex::Regex::new("mem_[0-9a-f]+").unwrap();
    let id = texts(&fake)
        .iter()
        .find_map(|t| pattern.find(t).map(|m| m.as_str().to_owned()))
        .unwrap();
    // A new session of the same chat still sees the chat's memory.
    fake.user_says(USER, "/new");
    fake.wait_for("a new session", WAIT, |f| {
        texts(f).iter().any(|t| t.starts_with("New session ses_"))
    });
    fake.user_says(USER, "/memory");
    fake.wait_for("the listing", WAIT, |f| {
        texts(f)
            .iter()
            .any(|t| t.contains(&id) && t.contains("standup"))
    });
    fake.user_says(USER, "when is the standup on Friday?");
    fake.wait_for("the reply", WAIT, |f| texts(f).iter().any(|t| t == "sure"));
    fake.user_says(USER, "/status");
    fake.wait_for("status", WAIT, |f| {
        texts(f).iter().any(|t| t.starts_with("Session ses_"))
    });
    let session = chat_session(&fake);
    let out = dir
        .command()
        .args(["context", "show", "--session", &session, "--json"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let context = String::from_utf8_lossy(&out.stdout);
    assert!(context.contains("<memory>"), "{context}");
    assert!(
        context.contains("The standup moves to 9:30 on Fridays"),
        "{context}"
    );
    // Another workspace session (not this chat) does not see it.
    let other = dir
        .command()
        .args(["memory", "list", "--json"])
        .current_dir(dir.workspace())
        .output()
        .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&other.stdout),
        "",
        "conversation items stay in their chat"
    );
    fake.user_says(USER, &format!("/forget {id}"));
    fake.wait_for("forgotten", WAIT, |f| {
        texts(f).iter().any(|t| t.starts_with("Forgot"))
    });
    let all = dir
        .command()
        .args(["memory", "list", "--all", "--json"])
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&all.stdout), "");
}

#[test]
fn a_budget_stop_is_told_in_the_chat() {
    let fake = FakeTelegram::start();
    let dir = setup(
        &fake,
        "live_drafts = false\n\n[models.\"script\"]\ninput_price = 2.0\noutput_price = 10.0\n[budget]\nrun = 0.005\n",
    );
    let turn = |n: usize| {
        json!([
            {"text": format!("Step {n}. ")},
            {"tool_call": {"id": format!("c{n}"), "name": "todo", "arguments": {"todos": [{"content": "x", "status": "in_progress"}]}}},
            {"usage": {"input_tokens": 2000, "output_tokens": 200}}
        ])
    };
    let script = dir.script("s.jsonl", &[turn(0), turn(1), turn(2)]);
    let _bridge = Bridge::start(&dir, &script);
    fake.user_says(USER, "work");
    let reply = reply_containing(&fake, "the reply", "reached its budget");
    // The notice follows what the run said before it stopped.
    assert!(
        reply.starts_with("Step 0. [pincer] This request reached its budget"),
        "{reply}"
    );
    assert!(
        !reply.contains("Step 1."),
        "the second turn was not asked for: {reply}"
    );
}

#[test]
fn a_conversation_near_the_window_is_compacted_with_a_notice_in_the_chat() {
    let fake = FakeTelegram::start();
    let dir = setup(&fake, "live_drafts = false\n");
    // The window settings are top-level keys: before the channel's table.
    let config = dir.path().join("config/pincer/config.toml");
    let text = std::fs::read_to_string(&config).unwrap();
    std::fs::write(
        &config,
        format!("context_window = 6000\ncompact_at = 0.5\n\n{text}"),
    )
    .unwrap();
    let script = dir.script(
        "s.jsonl",
        &[
            json!([{"text": "Noted."}]),
            json!([{"text": "never played"}]),
            json!([{"text": "Done."}]),
        ],
    );
    let _bridge = Bridge::start(&dir, &script);
    let log = |tag: &str| format!("{tag}: ") + &"line of a long build log\n".repeat(140);
    fake.user_says(USER, &log("FIRST LOG"));
    fake.wait_for("the first reply", WAIT, |f| {
        texts(f).iter().any(|t| t.contains("Noted."))
    });
    fake.user_says(USER, &log("SECOND LOG"));
    let reply = reply_containing(&fake, "the second reply", "Done.");
    assert!(
        reply.starts_with("[pincer] The conversation neared the model's context window"),
        "{reply}"
    );
    // The summary (the script's first turn again) is not part of the reply.
    assert!(reply.ends_with("Done."), "{reply}");
    assert!(!reply.contains("Noted."), "{reply}");
}

#[test]
fn overflow_recovery_and_the_loop_guard_in_the_chat() {
    let fake = FakeTelegram::start();
    let dir = setup(&fake, "live_drafts = false\n");
    let script = crate::support::overflow_then_loop_script(&dir);
    let _bridge = Bridge::start(&dir, &script);
    fake.user_says(USER, &crate::support::long_log());
    fake.wait_for("the first reply", WAIT, |f| {
        texts(f).iter().any(|t| t.contains("Noted."))
    });
    fake.user_says(USER, "second");
    let reply = reply_containing(&fake, "the second reply", "Done.");
    assert!(
        reply.starts_with("[pincer] The provider refused the request as too long"),
        "{reply}"
    );
    fake.user_says(USER, "read a.txt until it changes");
    let reply = reply_containing(&fake, "the loop guard's reason", "loop guard");
    assert!(
        reply.contains("the model called <code>read_file</code> with the same arguments 4 times"),
        "{reply}"
    );
    assert!(!texts(&fake).iter().any(|t| t.contains("never reached")));
}

#[test]
fn slash_trust_lets_the_workspaces_hooks_run() {
    let fake = FakeTelegram::start();
    let dir = setup(&fake, "\n[hooks]\nimport = [\"claude\"]\n");
    let workspace = dir.workspace();
    std::fs::create_dir_all(workspace.join(".git")).unwrap();
    std::fs::create_dir_all(workspace.join(".claude")).unwrap();
    let log = dir.path().join("prompts.jsonl");
    std::fs::write(
        workspace.join(".claude/settings.json"),
        json!({"hooks": {"UserPromptSubmit": [{"hooks": [{"type": "command", "command": format!("cat >> '{}'; echo >> '{}'", log.display(), log.display())}]}]}}).to_string(),
    )
    .unwrap();
    let script = dir.script(
        "s.jsonl",
        &[json!([{"text": "first"}]), json!([{"text": "second"}])],
    );
    let _bridge = Bridge::start(&dir, &script);
    fake.user_says(USER, "hello");
    fake.wait_for("the notice", WAIT, |f| {
        texts(f)
            .iter()
            .any(|t| t.contains("they run only once you trust"))
    });
    // The notice and the reply share a message.
    fake.wait_for("the reply", WAIT, |f| {
        texts(f).iter().any(|t| t.ends_with("first"))
    });
    assert!(!log.exists());
    fake.user_says(USER, "/trust");
    fake.wait_for("trusted", WAIT, |f| {
        texts(f)
            .iter()
            .any(|t| t.starts_with(&format!("Trusted {}", workspace.display())))
    });
    fake.user_says(USER, "again");
    fake.wait_for("the second reply", WAIT, |f| {
        texts(f).iter().any(|t| t.ends_with("second"))
    });
    let seen = std::fs::read_to_string(&log).unwrap();
    assert!(seen.contains("\"prompt\":\"again\""), "{seen}");
}

#[test]
fn a_message_received_hook_sees_each_message_and_may_block_it() {
    let fake = FakeTelegram::start();
    let log = tempfile::NamedTempFile::new().unwrap();
    let hook = format!(
        "input=$(cat); printf '%s\\n' \"$input\" >> '{}'; printf '%s' \"$input\" | grep -q 'password' && {{ echo 'no passwords in this chat' >&2; exit 2; }}; exit 0",
        log.path().display()
    );
    let dir = setup(
        &fake,
        &format!(
            "\n[[hooks.MessageReceived]]\nmatcher = \"telegram\"\ncommand = {}\n",
            serde_json::to_string(&hook).unwrap()
        ),
    );
    let script = dir.script("s.jsonl", &[json!([{"text": "first"}])]);
    let _bridge = Bridge::start(&dir, &script);
    fake.user_says(USER, "my password is hunter2");
    fake.wait_for("the block", WAIT, |f| {
        texts(f)
            .iter()
            .any(|t| t.contains("A hook blocked this message: no passwords in this chat"))
    });
    fake.user_says(USER, "hello");
    fake.wait_for("the reply", WAIT, |f| texts(f).iter().any(|t| t == "first"));
    let seen: Vec<Value> = std::fs::read_to_string(log.path())
        .unwrap()
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(seen.len(), 2, "{seen:#?}");
    assert_eq!(seen[0]["hook_event_name"], "MessageReceived");
    assert_eq!(seen[0]["channel"], "telegram");
    assert_eq!(seen[0]["sender"], USER.to_string());
    assert_eq!(seen[0]["message"], "my password is hunter2");
    assert_eq!(seen[1]["message"], "hello");
    // The blocked message never reached the model: one reply, to "hello".
    assert_eq!(texts(&fake).iter().filter(|t| *t == "first").count(), 1);
}

/// A `[[hooks.MessageSending]]` table running the shell script `body`
/// (written to the test directory), with `extra` lines.
fn sending_hook(dir_name: &std::path::Path, name: &str, body: &str, extra: &str) -> String {
    let script = dir_name.join(name);
    std::fs::write(&script, body).unwrap();
    format!(
        "\n[[hooks.MessageSending]]\ncommand = \"sh {}\"\n{extra}",
        script.display()
    )
}

/// The JSON lines a hook appended to `log`.
fn hook_inputs(log: &std::path::Path) -> Vec<Value> {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[test]
fn a_message_sending_hook_rewrites_the_reply_and_no_draft_shows_before_it() {
    let fake = FakeTelegram::start();
    let hooks = tempfile::tempdir().unwrap();
    let log = hooks.path().join("seen.jsonl");
    // The rewrite carries a credential: it passes the safety pass too.
    let hook = sending_hook(
        hooks.path(),
        "rewrite.sh",
        &format!(
            "input=$(cat)\nprintf '%s\\n' \"$input\" >> '{}'\nprintf '%s' '{{\"hookSpecificOutput\":{{\"hookEventName\":\"MessageSending\",\"updatedMessage\":\"Reviewed reply (key AKIAIOSFODNN7EXAMPLE)\"}}}}'\n",
            log.display()
        ),
        "matcher = \"telegram\"\n",
    );
    let dir = setup(&fake, &hook);
    // Written slowly: without the hook a live draft would show "Orig" first.
    let script = dir.script(
        "s.jsonl",
        &[json!([{"text": "Orig"}, {"delay_ms": 1300}, {"text": "inal answer"}])],
    );
    let _bridge = Bridge::start(&dir, &script);
    fake.user_says(USER, "hi");
    let sent = reply_containing(&fake, "the rewritten reply", "Reviewed reply");
    assert!(sent.starts_with("Reviewed reply (key "), "{sent}");
    assert!(!sent.contains("AKIAIOSFODNN7EXAMPLE"), "{sent}");
    let reply = sent_reply(&fake, &dir);
    assert_eq!(reply["text"], "Original answer");
    assert!(
        reply["units"][0]["text"]
            .as_str()
            .unwrap()
            .starts_with("Reviewed reply")
    );
    // Nothing but the rewritten reply reached the chat: no draft, no edit.
    let sends = fake.calls("sendMessage");
    assert_eq!(sends.len(), 1, "{sends:#?}");
    assert!(fake.calls("editMessageText").is_empty());
    let seen = hook_inputs(&log);
    assert_eq!(seen.len(), 1, "{seen:#?}");
    assert_eq!(seen[0]["hook_event_name"], "MessageSending");
    assert_eq!(seen[0]["channel"], "telegram");
    assert_eq!(seen[0]["conversation"], USER.to_string());
    assert_eq!(seen[0]["message"], "Original answer");
    assert!(seen[0]["account"].as_str().is_some_and(|a| !a.is_empty()));
    // The chat's session.
    let sessions = dir
        .command()
        .args(["sessions", "list", "--json"])
        .output()
        .unwrap();
    let session: Value = serde_json::from_str(
        String::from_utf8_lossy(&sessions.stdout)
            .lines()
            .next()
            .unwrap(),
    )
    .unwrap();
    assert_eq!(seen[0]["session_id"], session["session_id"]);
    assert!(seen[0].get("sender").is_none(), "{:#?}", seen[0]);
}

#[test]
fn a_message_sending_hook_that_blocks_withholds_the_reply_once() {
    let fake = FakeTelegram::start();
    let hooks = tempfile::tempdir().unwrap();
    let hook = sending_hook(
        hooks.path(),
        "block.sh",
        "case \"$(cat)\" in *classified*) echo 'not for this chat' >&2; exit 2;; esac\n",
        "",
    );
    let dir = setup(&fake, &hook);
    let script = dir.script(
        "s.jsonl",
        &[
            json!([{"text": "The classified answer"}]),
            json!([{"text": "A public answer"}]),
        ],
    );
    let _bridge = Bridge::start(&dir, &script);
    fake.user_says(USER, "hi");
    until(&fake, "the reply withheld", || {
        dir.outbox()
            .iter()
            .any(|i| i["kind"] == "reply" && i["status"] == "withheld")
    });
    // Not sent, and not tried again.
    settled(&fake, &dir);
    assert!(fake.calls("sendMessage").is_empty());
    let withheld = dir.outbox();
    assert_eq!(withheld.len(), 1, "{withheld:#?}");
    assert_eq!(withheld[0]["status"], "withheld");
    assert_eq!(withheld[0]["attempt"], 0);
    assert!(
        withheld[0]["failure"]["message"]
            .as_str()
            .unwrap()
            .contains("not for this chat"),
        "{withheld:#?}"
    );
    assert!(dir.log().contains("withheld"), "{}", dir.log());
    // The run ended normally: the chat goes on, and the next reply is sent.
    assert!(!running(&dir));
    fake.user_says(USER, "and now?");
    fake.wait_for("the next reply", WAIT, |f| {
        texts(f) == vec!["A public answer".to_owned()]
    });
    sent_reply_count(&fake, &dir, 1);
    assert_eq!(fake.calls("sendMessage").len(), 1);
}

/// Waits until `n` replies are `sent`.
fn sent_reply_count(fake: &FakeTelegram, dir: &TestDir, n: usize) {
    until(fake, "the replies' receipts", || {
        dir.outbox()
            .iter()
            .filter(|i| i["kind"] == "reply" && i["status"] == "sent")
            .count()
            == n
    });
}

#[test]
fn a_failing_message_sending_hook_lets_the_original_go_by_default() {
    let fake = FakeTelegram::start();
    let hooks = tempfile::tempdir().unwrap();
    // A hook for another channel does not run for Telegram's messages.
    let other = sending_hook(
        hooks.path(),
        "other.sh",
        "echo 'webhook only' >&2; exit 2\n",
        "matcher = \"webhook\"\n",
    );
    let failing = sending_hook(hooks.path(), "fail.sh", "echo boom >&2; exit 1\n", "");
    let dir = setup(&fake, &format!("{other}{failing}"));
    let script = dir.script("s.jsonl", &[json!([{"text": "The plain answer"}])]);
    let _bridge = Bridge::start(&dir, &script);
    fake.user_says(USER, "hi");
    fake.wait_for("the original reply", WAIT, |f| {
        texts(f) == vec!["The plain answer".to_owned()]
    });
    sent_reply(&fake, &dir);
    let log = dir.log();
    assert!(log.contains("hook failed") && log.contains("boom"), "{log}");
}

#[test]
fn a_failing_message_sending_hook_withholds_with_on_failure_block() {
    let fake = FakeTelegram::start();
    let hooks = tempfile::tempdir().unwrap();
    let hook = sending_hook(
        hooks.path(),
        "fail.sh",
        "exit 1\n",
        "on_failure = \"block\"\n",
    );
    let dir = setup(&fake, &hook);
    let script = dir.script("s.jsonl", &[json!([{"text": "Never shown"}])]);
    let _bridge = Bridge::start(&dir, &script);
    fake.user_says(USER, "hi");
    until(&fake, "the reply withheld", || {
        dir.outbox()
            .iter()
            .any(|i| i["kind"] == "reply" && i["status"] == "withheld")
    });
    settled(&fake, &dir);
    assert!(fake.calls("sendMessage").is_empty());
}

#[test]
fn a_crash_while_a_message_sending_hook_runs_asks_it_again_and_sends_once() {
    let fake = FakeTelegram::start();
    let hooks = tempfile::tempdir().unwrap();
    let mark = hooks.path().join("asked");
    // The first time it hangs (the process is killed meanwhile); then it
    // rewrites.
    let hook = sending_hook(
        hooks.path(),
        "slow.sh",
        &format!(
            "cat >/dev/null\nif [ -e '{0}' ]; then printf '%s' '{{\"hookSpecificOutput\":{{\"updatedMessage\":\"Checked after the restart\"}}}}'; else touch '{0}'; sleep 10; fi\n",
            mark.display()
        ),
        "",
    );
    let dir = setup(&fake, &hook);
    let script = dir.script("s.jsonl", &[json!([{"text": "Unchecked"}])]);
    let bridge = Bridge::start(&dir, &script);
    fake.user_says(USER, "hi");
    fake.wait_for("the hook asked", WAIT, |_| mark.exists());
    let held = dir.outbox();
    assert_eq!(held.len(), 1, "{held:#?}");
    assert_eq!(held[0]["status"], "held");
    bridge.crash();
    let _bridge = Bridge::start(&dir, &script);
    fake.wait_for("the reply after the restart", WAIT, |f| {
        texts(f) == vec!["Checked after the restart".to_owned()]
    });
    sent_reply(&fake, &dir);
    settled(&fake, &dir);
    assert_eq!(fake.calls("sendMessage").len(), 1);
}

#[test]
fn a_message_sending_hook_reads_prompts_and_notices_and_a_rewritten_prompt_keeps_its_buttons() {
    let fake = FakeTelegram::start();
    let hooks = tempfile::tempdir().unwrap();
    let log = hooks.path().join("seen.jsonl");
    let hook = sending_hook(
        hooks.path(),
        "prompts.sh",
        &format!(
            "input=$(cat)\nprintf '%s\\n' \"$input\" >> '{}'\ncase \"$input\" in *'Approval needed'*) printf '%s' '{{\"hookSpecificOutput\":{{\"updatedMessage\":\"Please approve the note\"}}}}';; esac\n",
            log.display()
        ),
        "",
    );
    let dir = setup(&fake, &hook);
    let script = dir.script(
        "s.jsonl",
        &[
            json!([{"tool_call": {"id": "w1", "name": "write_file", "arguments": {"path": "note.txt", "content": "hooked\n"}}}]),
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
    assert_eq!(prompt.body["text"], "Please approve the note");
    let allow = prompt.body["reply_markup"]["inline_keyboard"][0][0]["callback_data"]
        .as_str()
        .unwrap()
        .to_owned();
    let (message_id, _) = fake
        .chat(USER)
        .into_iter()
        .find(|(_, t)| t == "Please approve the note")
        .unwrap();
    fake.press(USER, message_id, &allow);
    fake.wait_for("the reply after the tool ran", WAIT, |f| {
        texts(f).iter().any(|t| t == "Written.")
    });
    assert_eq!(
        std::fs::read_to_string(dir.workspace().join("note.txt")).unwrap(),
        "hooked\n"
    );
    fake.user_says(USER, "/help");
    reply_containing(&fake, "the help", "Pincer commands");
    let seen: Vec<String> = hook_inputs(&log)
        .iter()
        .map(|i| i["message"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(seen.len(), 3, "{seen:#?}");
    assert!(seen[0].starts_with("Approval needed"), "{seen:#?}");
    assert_eq!(seen[1], "Written.");
    assert!(seen[2].starts_with("Pincer commands"), "{seen:#?}");
}

/// Waits until the bridges' shared stderr says `needle`.
fn logged(fake: &FakeTelegram, dir: &TestDir, what: &str, needle: &str) {
    fake.wait_for(what, WAIT, |_| dir.log().contains(needle));
}

/// Bridge A (script `first`) answers "one" with `reply`, committed; then
/// bridge B (script `second`) starts on the same data directory and stands
/// by.
fn one_answers_then_another_stands_by(
    fake: &FakeTelegram,
    dir: &TestDir,
    first: &std::path::Path,
    second: &std::path::Path,
    reply: &str,
) -> (Bridge, Bridge) {
    let a = Bridge::start(dir, first);
    fake.user_says(USER, "one");
    reply_containing(fake, "the first bridge's reply", reply);
    sent_reply(fake, dir);
    let b = Bridge::start(dir, second);
    logged(
        fake,
        dir,
        "the second bridge standing by",
        "standing by to take over",
    );
    (a, b)
}

/// One process serves a channel account at a time (its lease): a second
/// bridge on the same data directory stands by, answers nothing twice, and
/// takes the account over once the first is gone.
#[test]
fn a_second_bridge_stands_by_and_takes_over_when_the_first_dies() {
    let fake = FakeTelegram::start();
    let dir = setup(&fake, "live_drafts = false\n");
    let first = dir.script(
        "a.jsonl",
        &[json!([{"text": "First."}]), json!([{"text": "Second."}])],
    );
    // The scripted model answers by the turn's place in the conversation.
    let second = dir.script(
        "b.jsonl",
        &[
            json!([{"text": "-"}]),
            json!([{"text": "-"}]),
            json!([{"text": "Third."}]),
        ],
    );
    let (a, _b) = one_answers_then_another_stands_by(&fake, &dir, &first, &second, "First.");
    fake.user_says(USER, "two");
    reply_containing(&fake, "the reply while both run", "Second.");
    settled(&fake, &dir);
    assert_eq!(texts(&fake), ["First.", "Second."]);
    a.crash();
    logged(
        &fake,
        &dir,
        "the take-over",
        "took over the channel account",
    );
    fake.user_says(USER, "three");
    reply_containing(&fake, "the second bridge's reply", "Third.");
    settled(&fake, &dir);
    assert_eq!(texts(&fake), ["First.", "Second.", "Third."]);
}

/// A bridge stopped (`SIGSTOP`) past its lease loses the account to the one
/// standing by; resumed, it finds its lease gone and sends nothing more:
/// every message is answered once, by whoever holds the account.
#[test]
fn a_stopped_bridge_resumed_after_its_lease_lapsed_sends_nothing_more() {
    let fake = FakeTelegram::start();
    let dir = setup(&fake, "live_drafts = false\n");
    let config = dir.path().join("config/pincer/config.toml");
    let text = std::fs::read_to_string(&config).unwrap();
    std::fs::write(&config, format!("session_lease_secs = 1\n{text}")).unwrap();
    // The scripted model answers by the turn's place in the conversation
    // (its assistant messages so far) and each line names the message it
    // answers: a model turn sent one message too many or too few shows.
    let first = dir.script(
        "a.jsonl",
        &[
            json!([{"text": "A one."}]),
            json!([{"text": "A two."}]),
            json!([{"text": "A three."}]),
        ],
    );
    let second = dir.script(
        "b.jsonl",
        &[
            json!([{"text": "-"}]),
            json!([{"text": "B two."}]),
            json!([{"text": "B three."}]),
        ],
    );
    let (a, _b) = one_answers_then_another_stands_by(&fake, &dir, &first, &second, "A one.");
    let pid = a.child.id() as i32;
    // Stopped while it holds SQLite's write lock, it would stop everyone.
    crate::support::stop_outside_a_write(&dir, pid);
    logged(
        &fake,
        &dir,
        "the take-over",
        "took over the channel account",
    );
    fake.user_says(USER, "two");
    fake.wait_for("the reply after the take-over", WAIT, |f| {
        texts(f).len() == 2
    });
    assert_eq!(texts(&fake), ["A one.", "B two."]);
    assert_eq!(unsafe { libc::kill(pid, libc::SIGCONT) }, 0);
    logged(
        &fake,
        &dir,
        "the stopped bridge noticing",
        "lost the channel account's lease",
    );
    fake.user_says(USER, "three");
    fake.wait_for("the next reply", WAIT, |f| texts(f).len() == 3);
    settled(&fake, &dir);
    assert_eq!(texts(&fake), ["A one.", "B two.", "B three."]);
}

/// The same chat account served by instances sharing a PostgreSQL store
/// (`docs/scale-out.md`): the store named in the config file, so every
/// `pincer` command of the test (the outbox, the runs) reads it too.
fn on_postgres(dir: &TestDir) {
    let config = dir.path().join("config/pincer/config.toml");
    let text = std::fs::read_to_string(&config).unwrap();
    let url = crate::support::postgres::shared().fresh_database();
    std::fs::write(&config, format!("{text}\n[store]\nurl = \"{url}\"\n")).unwrap();
}

/// On PostgreSQL, a second instance configured for the same Telegram
/// account does not poll until the first dies, then takes it over from the
/// stored offset, answering nothing twice.
#[test]
fn on_postgres_a_second_instance_stands_by_until_the_first_dies() {
    let fake = FakeTelegram::start();
    let dir = setup(&fake, "live_drafts = false\n");
    on_postgres(&dir);
    let first = dir.script(
        "a.jsonl",
        &[json!([{"text": "First."}]), json!([{"text": "Second."}])],
    );
    let second = dir.script(
        "b.jsonl",
        &[
            json!([{"text": "-"}]),
            json!([{"text": "-"}]),
            json!([{"text": "Third."}]),
        ],
    );
    let (a, _b) = one_answers_then_another_stands_by(&fake, &dir, &first, &second, "First.");
    let polls = fake.offsets().len();
    fake.user_says(USER, "two");
    reply_containing(&fake, "the reply while both run", "Second.");
    settled(&fake, &dir);
    assert!(fake.offsets().len() > polls, "the leader went on polling");
    a.crash();
    logged(
        &fake,
        &dir,
        "the take-over",
        "took over the channel account",
    );
    fake.user_says(USER, "three");
    reply_containing(&fake, "the second instance's reply", "Third.");
    settled(&fake, &dir);
    assert_eq!(texts(&fake), ["First.", "Second.", "Third."]);
    assert!(
        !dir.data_dir().join("pincer.db").exists(),
        "SQLite was used"
    );
}

/// On PostgreSQL, an instance killed with a reply waiting to be sent
/// (Telegram down): the instance standing by takes the account over and
/// delivers it, once.
#[test]
fn on_postgres_a_survivor_delivers_what_a_killed_instance_left_to_send() {
    let fake = FakeTelegram::start();
    let dir = setup(&fake, "live_drafts = false\n");
    on_postgres(&dir);
    let first = dir.script(
        "a.jsonl",
        &[
            json!([{"text": "Warm-up."}]),
            json!([{"text": "Survived."}]),
        ],
    );
    let second = dir.script("b.jsonl", &[json!([{"text": "-"}]), json!([{"text": "-"}])]);
    let (a, _b) = one_answers_then_another_stands_by(&fake, &dir, &first, &second, "Warm-up.");
    fake.fail(
        "sendMessage",
        1000,
        502,
        json!({"ok": false, "error_code": 502, "description": "Bad Gateway"}),
    );
    fake.user_says(USER, "hi");
    retrying(&fake, &dir);
    a.crash();
    fake.release("sendMessage");
    fake.wait_for("the reply delivered by the survivor", WAIT, |f| {
        texts(f) == ["Warm-up.", "Survived."]
    });
    settled(&fake, &dir);
    assert_eq!(texts(&fake), ["Warm-up.", "Survived."]);
}

/// On PostgreSQL, an instance killed with a send in flight: the survivor
/// marks the intent `unknown_after_send` and never resends it blindly.
#[test]
fn on_postgres_a_send_in_flight_at_a_kill_is_never_resent_blindly() {
    let fake = FakeTelegram::start();
    let dir = setup(&fake, "live_drafts = false\n");
    on_postgres(&dir);
    let first = dir.script(
        "a.jsonl",
        &[
            json!([{"text": "Warm-up."}]),
            json!([{"text": "Maybe delivered."}]),
        ],
    );
    let second = dir.script("b.jsonl", &[json!([{"text": "-"}]), json!([{"text": "-"}])]);
    let (a, _b) = one_answers_then_another_stands_by(&fake, &dir, &first, &second, "Warm-up.");
    fake.hold("sendMessage");
    fake.user_says(USER, "hi");
    fake.wait_for("the send in flight", WAIT, |f| {
        f.calls("sendMessage").len() == 2
    });
    a.crash();
    fake.release("sendMessage");
    until(&fake, "the intent found unknown after send", || {
        dir.outbox()
            .iter()
            .any(|i| i["status"] == "unknown_after_send")
    });
    settled(&fake, &dir);
    assert_eq!(fake.calls("sendMessage").len(), 2, "resent blindly");
}
