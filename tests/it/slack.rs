//! The Slack channel through `pincer serve --channel slack`, against a fake
//! Slack (`support::slack`: the Web API and Socket Mode as Slack documents
//! them): a conversation with a live draft finalized in place, an approval
//! by a Block Kit button acknowledged within Slack's 3 seconds, a
//! redelivered event answered once, a dropped connection and a requested
//! refresh losing and repeating nothing, a 429's `Retry-After` honoured per
//! method, the chat commands in a channel thread, `kill -9` at each
//! boundary of a send, a reply's files shared in its thread (Slack's
//! external upload), and the Events API's signature checks (on the HTTP
//! face, `/channels/slack/events`).

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::support::TestDir;
use crate::support::serve::{HttpServe, TOKEN};
use crate::support::slack::{APP_TOKEN, BOT_TOKEN, FakeSlack};

const ALICE: &str = "UALICE";
const DM: &str = "DUALICE";
const WAIT: Duration = Duration::from_secs(20);

fn setup(fake: &FakeSlack, extra: &str) -> TestDir {
    let dir = TestDir::new();
    dir.write_config(&format!(
        "[channels.slack]\napi_base = \"{}\"\nworkspace = \"{}\"\ncoalesce_ms = 50\nallow = [\"{ALICE}\"]\n{extra}",
        fake.api_base(),
        dir.workspace().display()
    ));
    dir
}

/// `pincer serve --http 127.0.0.1:0 --channel slack` with the scripted model.
fn serve(dir: &TestDir, script: &std::path::Path) -> HttpServe {
    HttpServe::start_with_env(
        dir,
        None,
        &[
            "--channel",
            "slack",
            "--provider",
            "scripted",
            "--script",
            script.to_str().unwrap(),
        ],
        &[
            ("SLACK_BOT_TOKEN", BOT_TOKEN),
            ("SLACK_APP_TOKEN", APP_TOKEN),
        ],
    )
}

/// Waits until `check` holds, looking every 150 ms (each look may run a
/// `pincer` command).
fn until(fake: &FakeSlack, what: &str, check: impl Fn() -> bool) {
    let deadline = Instant::now() + WAIT;
    while Instant::now() < deadline {
        if check() {
            return;
        }
        std::thread::sleep(Duration::from_millis(150));
    }
    panic!(
        "timed out waiting for {what}; calls: {:#?}",
        fake.all_calls()
    );
}

fn intents(dir: &TestDir, kind: &str) -> Vec<Value> {
    dir.outbox()
        .into_iter()
        .filter(|i| i["kind"] == kind)
        .collect()
}

/// Every envelope Slack sent was acknowledged.
fn all_acked(fake: &FakeSlack) -> bool {
    fake.envelopes().iter().all(|e| e.acked_at.is_some())
}

#[test]
fn a_conversation_with_a_live_draft_finalized_in_place() {
    let fake = FakeSlack::start();
    let dir = setup(&fake, "");
    let script = dir.script(
        "s.jsonl",
        &[
            json!([{"text": "Hel"}, {"delay_ms": 1300}, {"text": "lo **there** & <you>"}]),
            json!([{"text": "Second answer"}]),
        ],
    );
    let server = serve(&dir, &script);
    fake.dm(ALICE, "hi");
    fake.wait_for("the finalized reply", WAIT, |f| {
        f.texts(DM) == ["Hello *there* &amp; &lt;you&gt;"]
    });
    // One message: posted as a draft, updated as the text grew, finalized in place.
    let posts = fake.calls("chat.postMessage");
    assert_eq!(posts.len(), 1, "{posts:#?}");
    assert_eq!(posts[0].body["text"], "Hel");
    assert_eq!(posts[0].body["channel"], DM);
    assert!(!fake.calls("chat.update").is_empty());
    until(&fake, "the reply recorded sent", || {
        intents(&dir, "reply").iter().any(|i| i["status"] == "sent")
    });
    // Every envelope acknowledged, the bot's own echoes too (and not answered).
    fake.wait_for("every envelope acknowledged", WAIT, all_acked);

    // The chat keeps its session: the script's second turn answers.
    fake.dm(ALICE, "and again");
    fake.wait_for("the second reply", WAIT, |f| {
        f.texts(DM).len() == 2 && f.texts(DM)[1] == "Second answer"
    });
    assert_eq!(fake.calls("chat.postMessage").len(), 2);

    // The declared capabilities, as `GET /v1/channels` shows them.
    let (status, listed) =
        crate::support::matrix::request("GET", &server.url("/v1/channels"), Some(TOKEN), None);
    assert_eq!(status, 200, "{listed}");
    let slack = listed["channels"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "slack")
        .cloned()
        .unwrap();
    assert_eq!(slack["kind"], "slack");
    assert_eq!(slack["connected"], true, "{slack}");
    assert_eq!(
        slack["capabilities"],
        json!({"max_len": 3000, "length_unit": "chars", "markup": "mrkdwn",
            "edit": true, "delete": true, "buttons": true, "reactions": false,
            "threads": true, "files": true, "edit_interval_ms": 1000, "working_after_ms": null,
            "idempotent": {"send": false, "edit": true, "delete": true}})
    );
    let logged = server.stderr();
    drop(server);
    assert!(!logged.contains(BOT_TOKEN) && !logged.contains(APP_TOKEN));
    dir.verify();
}

#[test]
fn an_approval_is_answered_by_a_button_acknowledged_within_three_seconds() {
    let fake = FakeSlack::start();
    let dir = setup(&fake, "live_drafts = false\n");
    let script = dir.script(
        "s.jsonl",
        &[
            json!([{"tool_call": {"id": "w1", "name": "write_file", "arguments": {"path": "note.txt", "content": "from slack\n"}}}]),
            json!([{"text": "Written."}]),
        ],
    );
    let _server = serve(&dir, &script);
    fake.dm(ALICE, "write a note");
    fake.wait_for("the approval prompt", WAIT, |f| {
        f.shown(DM).iter().any(|p| p.blocks.is_array())
    });
    let prompt = fake
        .shown(DM)
        .into_iter()
        .find(|p| p.blocks.is_array())
        .unwrap();
    assert!(prompt.text.contains("Approval needed"), "{}", prompt.text);
    assert_eq!(prompt.blocks[0]["type"], "section");
    let buttons = prompt.blocks[1]["elements"].as_array().unwrap().clone();
    let labels: Vec<&str> = buttons
        .iter()
        .map(|b| b["text"]["text"].as_str().unwrap())
        .collect();
    assert_eq!(labels, ["Allow once", "Always", "Reject"]);
    let allow = buttons[0]["value"].as_str().unwrap().to_owned();
    fake.press(ALICE, DM, &prompt.ts, &allow);
    fake.wait_for("the reply after the tool ran", WAIT, |f| {
        f.texts(DM).iter().any(|t| t == "Written.")
    });
    assert_eq!(
        std::fs::read_to_string(dir.workspace().join("note.txt")).unwrap(),
        "from slack\n"
    );
    // The press was acknowledged within Slack's 3 seconds.
    let press = fake
        .envelopes()
        .into_iter()
        .find(|e| e.kind == "interactive")
        .unwrap();
    let took = press.acked_at.unwrap() - press.sent_at.unwrap();
    assert!(took < Duration::from_secs(3), "acknowledged after {took:?}");
    // The prompt now shows the answer, without its buttons.
    fake.wait_for("the prompt updated", WAIT, |f| {
        f.shown(DM).iter().any(|p| {
            p.ts == prompt.ts && p.text.ends_with("→ allowed once") && p.blocks == json!([])
        })
    });
    dir.verify();
}

#[test]
fn a_redelivered_event_is_answered_once() {
    let fake = FakeSlack::start();
    let dir = setup(&fake, "live_drafts = false\n");
    let script = dir.script(
        "s.jsonl",
        &[json!([{"text": "Only once."}]), json!([{"text": "Twice!"}])],
    );
    let _server = serve(&dir, &script);
    let ts = fake.dm(ALICE, "hello");
    fake.wait_for("the reply", WAIT, |f| f.texts(DM) == ["Only once."]);
    fake.wait_for("every envelope acknowledged", WAIT, all_acked);
    // Slack sends the event again (a retry with a new envelope id).
    fake.replay(&ts);
    fake.wait_for("the replay acknowledged", WAIT, |f| {
        all_acked(f) && f.envelopes().iter().any(|e| e.retry_attempt == 1)
    });
    until(&fake, "the reply recorded sent", || {
        intents(&dir, "reply").iter().any(|i| i["status"] == "sent")
    });
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(fake.texts(DM), ["Only once."]);
    assert_eq!(intents(&dir, "reply").len(), 1);
}

#[test]
fn a_dropped_connection_and_a_refresh_lose_nothing_and_repeat_nothing() {
    let fake = FakeSlack::start();
    let dir = setup(&fake, "live_drafts = false\n");
    let script = dir.script(
        "s.jsonl",
        &[
            json!([{"text": "One."}]),
            json!([{"text": "Two."}]),
            json!([{"text": "Three."}]),
        ],
    );
    let _server = serve(&dir, &script);
    fake.dm(ALICE, "one");
    fake.wait_for("the first reply", WAIT, |f| f.texts(DM) == ["One."]);
    fake.wait_for("every envelope acknowledged", WAIT, all_acked);

    // The connection drops; a message written meanwhile waits for the next one.
    fake.drop_connection();
    fake.dm(ALICE, "two");
    fake.wait_for("a second connection", WAIT, |f| f.connections() == 2);
    fake.wait_for("the second reply", WAIT, |f| {
        f.texts(DM) == ["One.", "Two."]
    });

    // Slack asks for a refresh: the new connection is up before the old closes.
    fake.ask_reconnect();
    fake.wait_for("the old connection closed by the app", WAIT, |f| {
        f.connections() == 3 && f.closed_by_app(2)
    });
    let times = fake.connection_times();
    assert!(
        times[2].0 < times[1].1.unwrap(),
        "the new connection opened after the old one closed: {times:?}"
    );
    fake.dm(ALICE, "three");
    fake.wait_for("the third reply", WAIT, |f| {
        f.texts(DM) == ["One.", "Two.", "Three."]
    });
    fake.wait_for("every envelope acknowledged", WAIT, all_acked);
    until(&fake, "three replies sent", || {
        let replies = intents(&dir, "reply");
        replies.len() == 3 && replies.iter().all(|i| i["status"] == "sent")
    });
    assert_eq!(fake.open_connections(), 1);
    dir.verify();
}

#[test]
fn a_rate_limited_method_is_not_called_before_its_retry_after() {
    let fake = FakeSlack::start();
    let dir = setup(&fake, "live_drafts = false\n");
    let script = dir.script("s.jsonl", &[json!([{"text": "Patiently."}])]);
    let _server = serve(&dir, &script);
    fake.rate_limit("chat.postMessage", 2);
    fake.dm(ALICE, "hello");
    fake.wait_for("the reply", WAIT, |f| f.texts(DM) == ["Patiently."]);
    let posts = fake.calls("chat.postMessage");
    assert_eq!(posts.len(), 2, "{posts:#?}");
    let waited = posts[1].at - posts[0].at;
    assert!(
        waited >= Duration::from_secs(2),
        "posted again after {waited:?}"
    );
    until(&fake, "the reply recorded sent", || {
        intents(&dir, "reply").iter().any(|i| i["status"] == "sent")
    });
}

#[test]
fn chat_commands_work_in_a_channel_thread() {
    let fake = FakeSlack::start();
    let dir = setup(&fake, "live_drafts = false\nchannels = [\"CTEAM\"]\n");
    let script = dir.script(
        "s.jsonl",
        &[
            json!([{"text": "Hello team."}]),
            json!([{"text": "slow"}, {"delay_ms": 30000}, {"text": " never"}]),
        ],
    );
    let _server = serve(&dir, &script);
    // Not mentioned, or in another channel: not for Pincer.
    fake.mention("COTHER", ALICE, "hello?", None);
    let root = fake.mention("CTEAM", ALICE, "hello", None);
    fake.wait_for("the reply in the thread", WAIT, |f| {
        f.shown("CTEAM")
            .iter()
            .any(|p| p.text == "Hello team." && p.thread_ts.as_deref() == Some(root.as_str()))
    });
    assert!(fake.shown("COTHER").is_empty());
    let in_thread = |needle: &str| {
        let needle = needle.to_owned();
        let root = root.clone();
        move |f: &FakeSlack| {
            f.shown("CTEAM")
                .iter()
                .any(|p| p.thread_ts.as_deref() == Some(root.as_str()) && p.text.contains(&needle))
        }
    };
    fake.mention("CTEAM", ALICE, "/model", Some(&root));
    fake.wait_for("the models", WAIT, in_thread("(current)"));
    fake.mention("CTEAM", ALICE, "/usage", Some(&root));
    fake.wait_for("the usage", WAIT, in_thread("tokens"));
    fake.mention("CTEAM", ALICE, "/new", Some(&root));
    fake.wait_for("a new session", WAIT, in_thread("New session"));
    fake.mention("CTEAM", ALICE, "/sessions", Some(&root));
    fake.wait_for(
        "the sessions",
        WAIT,
        in_thread("most recently active first"),
    );
    let listed = fake
        .texts("CTEAM")
        .into_iter()
        .find(|t| t.contains("most recently active first"))
        .unwrap();
    assert!(listed.contains("1.") && listed.contains("2."), "{listed}");
    fake.mention("CTEAM", ALICE, "/resume 2", Some(&root));
    fake.wait_for(
        "the first session resumed",
        WAIT,
        in_thread("Resumed session"),
    );
    fake.mention("CTEAM", ALICE, "take your time", Some(&root));
    let running = |dir: &TestDir| {
        let out = dir
            .command()
            .args(["sessions", "list", "--json"])
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .any(|s| {
                dir.show_session(s["session_id"].as_str().unwrap())["runs"]
                    .as_array()
                    .is_some_and(|runs| runs.iter().any(|r| r["state"] == "running"))
            })
    };
    until(&fake, "the slow run working", || running(&dir));
    fake.mention("CTEAM", ALICE, "/stop", Some(&root));
    until(&fake, "the run cancelled", || !running(&dir));
    // Every answer went to the thread, none to the channel itself.
    assert!(
        fake.shown("CTEAM")
            .iter()
            .all(|p| p.thread_ts.as_deref() == Some(root.as_str())),
        "{:#?}",
        fake.shown("CTEAM")
    );
    assert!(!fake.texts("CTEAM").iter().any(|t| t.contains("never")));
    // In a direct message, after a space (Slack keeps `/…` for its own
    // slash commands), a command is a command too.
    fake.dm(ALICE, " /help");
    fake.wait_for("the help in the direct message", WAIT, |f| {
        f.texts(DM).iter().any(|t| t.contains("/resume"))
    });
}

/// Waits until nothing is left to send (held, pending, on its way).
fn settled(fake: &FakeSlack, dir: &TestDir) {
    until(fake, "the outbox to settle", || {
        dir.outbox().iter().all(|i| {
            !matches!(
                i["status"].as_str(),
                Some("held" | "pending" | "sending" | "committing")
            )
        })
    });
}

#[test]
fn a_crash_with_the_reply_recorded_and_slack_down_delivers_it_once_after_the_restart() {
    let fake = FakeSlack::start();
    let dir = setup(&fake, "live_drafts = false\n");
    let script = dir.script("s.jsonl", &[json!([{"text": "Survived."}])]);
    fake.fail("chat.postMessage", 1000, 503, "service_unavailable", None);
    let server = serve(&dir, &script);
    fake.dm(ALICE, "hi");
    until(&fake, "a failed attempt recorded", || {
        dir.outbox()
            .iter()
            .any(|i| i["status"] == "pending" && i["attempt"].as_u64() >= Some(1))
    });
    server.crash();
    fake.release("chat.postMessage");
    let _server = serve(&dir, &script);
    fake.wait_for("the reply after the restart", WAIT, |f| {
        f.texts(DM) == ["Survived."]
    });
    settled(&fake, &dir);
    assert_eq!(intents(&dir, "reply")[0]["status"], "sent");
    assert_eq!(fake.texts(DM), ["Survived."]);
    dir.verify();
}

#[test]
fn a_crash_after_slack_took_a_post_leaves_it_unknown_and_never_resent() {
    let fake = FakeSlack::start();
    let dir = setup(&fake, "live_drafts = false\n");
    let script = dir.script("s.jsonl", &[json!([{"text": "Maybe delivered."}])]);
    // Slack posts it and the process dies before the answer with its ts.
    fake.hold_acted("chat.postMessage");
    let server = serve(&dir, &script);
    fake.dm(ALICE, "hi");
    fake.wait_for("the post shown", WAIT, |f| {
        f.texts(DM) == ["Maybe delivered."]
    });
    server.crash();
    fake.release("chat.postMessage");
    let _server = serve(&dir, &script);
    until(&fake, "the reply found unknown after send", || {
        intents(&dir, "reply")
            .iter()
            .any(|i| i["status"] == "unknown_after_send")
    });
    settled(&fake, &dir);
    assert_eq!(fake.calls("chat.postMessage").len(), 1, "resent blindly");
    assert_eq!(fake.texts(DM), ["Maybe delivered."]);
    let out = dir
        .command()
        .args([
            "channels",
            "outbox",
            "--status",
            "unknown_after_send",
            "--json",
        ])
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&out.stdout).lines().count(), 1);
    dir.verify();
}

#[test]
fn a_crash_during_a_live_draft_deletes_it_and_sends_the_reply_afresh() {
    let fake = FakeSlack::start();
    let dir = setup(&fake, "");
    let script = dir.script(
        "s.jsonl",
        &[json!([{"text": "Working on it"}, {"delay_ms": 60000}, {"text": " never"}])],
    );
    let server = serve(&dir, &script);
    fake.dm(ALICE, "long job");
    until(&fake, "the draft shown and its ts recorded", || {
        fake.texts(DM) == ["Working on it"]
            && intents(&dir, "draft").iter().any(|i| i["status"] == "sent")
    });
    server.crash();
    let _server = serve(&dir, &script);
    fake.wait_for("the draft deleted and the reply sent", WAIT, |f| {
        !f.calls("chat.delete").is_empty()
            && f.texts(DM).len() == 1
            && f.texts(DM)[0] != "Working on it"
    });
    let shown = fake.texts(DM);
    assert!(
        shown[0].starts_with("Working on it") && shown[0].contains("interrupted"),
        "{shown:?}"
    );
    settled(&fake, &dir);
    assert_eq!(intents(&dir, "draft")[0]["status"], "cancelled");
    assert_eq!(intents(&dir, "reply")[0]["status"], "sent");
    dir.verify();
}

#[test]
fn a_crash_before_the_drafts_ts_is_known_is_reported_in_the_reply() {
    let fake = FakeSlack::start();
    let dir = setup(&fake, "");
    let script = dir.script(
        "s.jsonl",
        &[json!([{"text": "Working on it"}, {"delay_ms": 60000}, {"text": " never"}])],
    );
    // Slack shows the draft; the process dies before learning its ts.
    fake.hold_acted("chat.postMessage");
    let server = serve(&dir, &script);
    fake.dm(ALICE, "long job");
    fake.wait_for("the draft shown", WAIT, |f| {
        f.texts(DM) == ["Working on it"]
    });
    server.crash();
    fake.release("chat.postMessage");
    let _server = serve(&dir, &script);
    fake.wait_for("the reply", WAIT, |f| f.texts(DM).len() == 2);
    let shown = fake.texts(DM);
    assert_eq!(shown[0], "Working on it");
    assert!(
        shown[1].starts_with("[pincer] If a partial draft of this reply shows above, it is stale"),
        "{shown:?}"
    );
    settled(&fake, &dir);
    assert_eq!(intents(&dir, "draft")[0]["status"], "unknown_after_send");
    assert_eq!(fake.calls("chat.postMessage").len(), 2);
    dir.verify();
}

#[test]
fn a_finalizing_edit_cut_off_by_a_crash_is_made_after_the_restart() {
    let fake = FakeSlack::start();
    let dir = setup(&fake, "");
    let script = dir.script(
        "s.jsonl",
        &[json!([{"text": "Draft"}, {"delay_ms": 300}, {"text": " and the rest."}])],
    );
    // The update that finalizes the draft reaches Slack but is never acted on.
    fake.hold("chat.update");
    let server = serve(&dir, &script);
    fake.dm(ALICE, "hi");
    fake.wait_for("the finalizing update in flight", WAIT, |f| {
        f.calls("chat.update")
            .iter()
            .any(|c| c.body["text"] == "Draft and the rest.")
    });
    server.crash();
    assert_eq!(fake.texts(DM), ["Draft"]);
    fake.release("chat.update");
    let _server = serve(&dir, &script);
    // An update is harmless to repeat: it is made again.
    fake.wait_for("the draft finalized", WAIT, |f| {
        f.texts(DM) == ["Draft and the rest."]
    });
    settled(&fake, &dir);
    assert_eq!(fake.calls("chat.postMessage").len(), 1);
    dir.verify();
}

/// One signed POST to the Events API listener: the status and the body.
fn post_event(addr: &str, secret: &str, at: i64, body: &str) -> (u16, String) {
    post_event_to(addr, "/channels/slack/events", secret, at, body)
}

/// [`post_event`] at `path`.
fn post_event_to(addr: &str, path: &str, secret: &str, at: i64, body: &str) -> (u16, String) {
    post_signed(addr, path, "application/json", secret, at, body)
}

/// One POST of `body` as `content_type`, signed as Slack signs its
/// requests (`v0:TIMESTAMP:BODY`, HMAC-SHA256 with the signing secret):
/// the status and the body answered.
fn post_signed(
    addr: &str,
    path: &str,
    content_type: &str,
    secret: &str,
    at: i64,
    body: &str,
) -> (u16, String) {
    use std::io::{Read as _, Write as _};
    let key = ring::hmac::Key::new(ring::hmac::HMAC_SHA256, secret.as_bytes());
    let tag = ring::hmac::sign(&key, format!("v0:{at}:{body}").as_bytes());
    let signature = format!("v0={}", hex::encode(tag.as_ref()));
    let mut stream = std::net::TcpStream::connect(addr).unwrap();
    write!(
        stream,
        "POST {path} HTTP/1.1\r\nhost: {addr}\r\ncontent-type: {content_type}\r\n\
         x-slack-request-timestamp: {at}\r\nx-slack-signature: {signature}\r\n\
         content-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut answer = String::new();
    stream.read_to_string(&mut answer).unwrap();
    let status = answer
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let body = answer
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_owned())
        .unwrap_or_default();
    (status, body)
}

/// The signing secret the Events API tests give Pincer.
const SIGNING_SECRET: &str = "8f742231b10e8888abcd99yyyzzz85a5";

/// `pincer serve --http --channel slack` receiving the Events API (signed
/// with [`SIGNING_SECRET`]) with the scripted model answering `turns`;
/// and now, in seconds since the epoch.
fn serve_events(fake: &FakeSlack, turns: &[Value]) -> (TestDir, HttpServe, i64) {
    let dir = setup(
        fake,
        "live_drafts = false\nsigning_secret_env = \"SLACK_SIGNING_SECRET\"\n",
    );
    let script = dir.script("s.jsonl", turns);
    let server = HttpServe::start_with_env(
        &dir,
        None,
        &[
            "--channel",
            "slack",
            "--provider",
            "scripted",
            "--script",
            script.to_str().unwrap(),
        ],
        &[
            ("SLACK_BOT_TOKEN", BOT_TOKEN),
            ("SLACK_SIGNING_SECRET", SIGNING_SECRET),
        ],
    );
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64;
    (dir, server, now)
}

#[test]
fn the_events_api_takes_only_fresh_requests_signed_with_the_secret() {
    let fake = FakeSlack::start();
    let (dir, server, now) = serve_events(&fake, &[json!([{"text": "Heard you."}])]);
    let (addr, secret) = (server.addr.clone(), SIGNING_SECRET);
    let verification = r#"{"token":"t","challenge":"3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P","type":"url_verification"}"#;
    assert_eq!(
        post_event(&addr, secret, now, verification),
        (
            200,
            r#"{"challenge":"3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P"}"#.to_owned()
        )
    );
    let event =
        json!({"token": "t", "team_id": "T100", "api_app_id": "A100", "type": "event_callback",
        "event_id": "Ev1", "event_time": now,
        "event": {"type": "message", "channel": DM, "channel_type": "im", "user": ALICE,
            "text": "hello over HTTP", "ts": "1700000000.000200"}})
        .to_string();
    // A wrong secret, and a right one five minutes and more ago: refused, not read.
    assert_eq!(post_event(&addr, "not-the-secret", now, &event).0, 401);
    assert_eq!(post_event(&addr, secret, now - 301, &event).0, 401);
    std::thread::sleep(Duration::from_millis(300));
    assert!(fake.calls("chat.postMessage").is_empty());
    // Signed and fresh: recorded and answered; a retry of it answered once.
    assert_eq!(post_event(&addr, secret, now, &event).0, 200);
    fake.wait_for("the reply", WAIT, |f| f.texts(DM) == ["Heard you."]);
    assert_eq!(post_event(&addr, secret, now, &event).0, 200);
    settled(&fake, &dir);
    assert_eq!(fake.texts(DM), ["Heard you."]);
    assert_eq!(fake.calls("apps.connections.open").len(), 0);
}

/// `listen`: the Events API on a listener of the channel's own, served by
/// `pincer serve` without `--http`, at whatever path the app's Request URL
/// names; a channel that needs HTTP and has neither is refused at start,
/// naming what to do.
#[test]
fn the_events_api_is_received_on_a_listener_of_its_own() {
    use std::io::{Read as _, Write as _};
    let fake = FakeSlack::start();
    let secret = SIGNING_SECRET;
    let env = [
        ("SLACK_BOT_TOKEN", BOT_TOKEN),
        ("SLACK_SIGNING_SECRET", secret),
    ];
    let refused = |dir: &TestDir, args: &[&str]| {
        let out = dir
            .command()
            .envs(env)
            .args(args)
            .stdin(std::process::Stdio::null())
            .output()
            .unwrap();
        assert!(!out.status.success());
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    // Without `listen` and without `--http` nothing would receive: refused.
    let dir = setup(
        &fake,
        "live_drafts = false\nsigning_secret_env = \"SLACK_SIGNING_SECRET\"\n",
    );
    let said = refused(&dir, &["serve", "--channel", "slack"]);
    assert!(
        said.contains(
            "channel slack receives over HTTP: serve it with `pincer serve --http --channel slack`"
        ),
        "{said}"
    );

    let dir = setup(
        &fake,
        "live_drafts = false\nsigning_secret_env = \"SLACK_SIGNING_SECRET\"\nlisten = \"127.0.0.1:0\"\n",
    );
    // `pincer acp` serves no HTTP at all: refused, naming `pincer serve`.
    let said = refused(&dir, &["acp", "--channel", "slack"]);
    assert!(
        said.contains(
            "receives over HTTP on its listen address: serve it with `pincer serve --channel slack`"
        ),
        "{said}"
    );

    let script = dir.script("s.jsonl", &[json!([{"text": "Heard you."}])]);
    let log = dir.path().join("serve.log");
    let mut child = dir
        .command()
        .envs(env)
        .args([
            "serve",
            "--channel",
            "slack",
            "--provider",
            "scripted",
            "--script",
        ])
        .arg(&script)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + WAIT;
    let addr = loop {
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        if let Some(addr) = text
            .lines()
            .find_map(|l| l.strip_prefix("pincer: channel slack listening on http://"))
        {
            break addr.trim().to_owned();
        }
        assert!(Instant::now() < deadline, "no listener: {text}");
        std::thread::sleep(Duration::from_millis(50));
    };
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64;
    let verification = r#"{"token":"t","challenge":"c4llenge","type":"url_verification"}"#;
    assert_eq!(
        post_event_to(&addr, "/slack/events", secret, now, verification),
        (200, r#"{"challenge":"c4llenge"}"#.to_owned())
    );
    let event =
        json!({"token": "t", "team_id": "T100", "api_app_id": "A100", "type": "event_callback",
        "event_id": "Ev7", "event_time": now,
        "event": {"type": "message", "channel": DM, "channel_type": "im", "user": ALICE,
            "text": "hello on my own listener", "ts": "1700000000.000700"}})
        .to_string();
    // Signed as on the HTTP face: a wrong secret is refused, not read.
    assert_eq!(
        post_event_to(&addr, "/", "not-the-secret", now, &event).0,
        401
    );
    assert_eq!(post_event_to(&addr, "/", secret, now, &event).0, 200);
    fake.wait_for("the reply", WAIT, |f| f.texts(DM) == ["Heard you."]);
    // Only POST is taken there.
    let mut stream = std::net::TcpStream::connect(&addr).unwrap();
    write!(
        stream,
        "GET / HTTP/1.1\r\nhost: {addr}\r\nconnection: close\r\n\r\n"
    )
    .unwrap();
    let mut answer = String::new();
    stream.read_to_string(&mut answer).unwrap();
    assert!(answer.starts_with("HTTP/1.1 405"), "{answer}");
    settled(&fake, &dir);
    assert_eq!(fake.texts(DM), ["Heard you."]);
    assert_eq!(fake.calls("apps.connections.open").len(), 0);
    // SIGTERM ends it cleanly, listener and all.
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
    assert!(child.wait().unwrap().success());
}

/// Slack limits each method apart: a 429 on `chat.update` holds back
/// updates until its `Retry-After`, not posts.
#[test]
fn a_rate_limit_holds_back_its_own_method_only() {
    let fake = FakeSlack::start();
    let dir = setup(&fake, "channels = [\"CTEAM\"]\n");
    let script = dir.script(
        "s.jsonl",
        &[json!([{"text": "Hel"}, {"delay_ms": 1300}, {"text": "lo there"}])],
    );
    let _server = serve(&dir, &script);
    fake.rate_limit("chat.update", 3);
    fake.dm(ALICE, "hi");
    fake.wait_for("the draft's update refused", WAIT, |f| {
        !f.calls("chat.update").is_empty()
    });
    let limited = fake.calls("chat.update")[0].at;
    // Another conversation posts meanwhile: posts are not held back.
    let root = fake.mention("CTEAM", ALICE, "hi", None);
    fake.wait_for("the channel's draft posted", WAIT, |f| {
        f.calls("chat.postMessage")
            .iter()
            .any(|c| c.body["channel"] == "CTEAM")
    });
    let posted = fake
        .calls("chat.postMessage")
        .into_iter()
        .find(|c| c.body["channel"] == "CTEAM")
        .unwrap()
        .at;
    assert!(
        posted - limited < Duration::from_secs(3),
        "a post waited for chat.update's Retry-After"
    );
    fake.wait_for("both replies finalized", WAIT, |f| {
        f.texts(DM) == ["Hello there"]
            && f.shown("CTEAM")
                .iter()
                .any(|p| p.text == "Hello there" && p.thread_ts.as_deref() == Some(root.as_str()))
    });
    let updates = fake.calls("chat.update");
    assert!(updates.len() >= 2, "{updates:#?}");
    for update in &updates[1..] {
        assert!(
            update.at - limited >= Duration::from_secs(3),
            "chat.update called {:?} after its 429",
            update.at - limited
        );
    }
    // `pincer channels status` tells the account's health from the store.
    let out = dir
        .command()
        .args(["channels", "status", "--json"])
        .output()
        .unwrap();
    let status: Value = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .find(|s: &Value| s["name"] == "slack")
        .unwrap();
    assert_eq!(status["connected"], true, "{status}");
    assert!(status["account"].as_str().unwrap().starts_with("bot-"));
}

#[test]
fn pincer_send_posts_first_in_a_channel_thread() {
    let fake = FakeSlack::start();
    let dir = setup(&fake, "live_drafts = false\n");
    let script = dir.script("s.jsonl", &[json!([{"text": "unused"}])]);
    let _server = serve(&dir, &script);
    let out = dir
        .command()
        .env("SLACK_BOT_TOKEN", BOT_TOKEN)
        .env("SLACK_APP_TOKEN", APP_TOKEN)
        .args([
            "send",
            "--channel",
            "slack",
            "--to",
            "CTEAM/1700000000.000200",
            "--wait",
            "15",
            "The **nightly build** finished",
        ])
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let shown = fake.shown("CTEAM");
    assert_eq!(shown.len(), 1, "{shown:#?}");
    assert_eq!(shown[0].text, "The *nightly build* finished");
    assert_eq!(shown[0].thread_ts.as_deref(), Some("1700000000.000200"));
    // A channel's name is not its id.
    let out = dir
        .command()
        .env("SLACK_BOT_TOKEN", BOT_TOKEN)
        .env("SLACK_APP_TOKEN", APP_TOKEN)
        .args(["send", "--channel", "slack", "--to", "#general", "hi"])
        .output()
        .unwrap();
    assert_ne!(out.status.code(), Some(0));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("not its name"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Files shared in Slack reach the prompt as on Telegram: an image for a
/// model that takes images, fetched from its private URL with the bot token;
/// a text file embedded; anything else named with its size and why.
#[test]
fn shared_files_reach_the_model_through_their_private_urls() {
    use crate::support::http::{Loopback, Reply};
    use base64::Engine as _;
    const PNG: &str = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==";
    let fake = FakeSlack::start();
    let seen: std::sync::Arc<std::sync::Mutex<Vec<Value>>> = Default::default();
    let record = seen.clone();
    let stream = format!(
        "data: {}\n\ndata: {}\n\ndata: [DONE]\n\n",
        json!({"id": "c1", "object": "chat.completion.chunk", "choices": [{"index": 0, "delta": {"content": "seen it"}, "finish_reason": null}]}),
        json!({"id": "c1", "object": "chat.completion.chunk", "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}),
    );
    let model = Loopback::model(move |request, _| {
        record.lock().unwrap().push(request.body.clone());
        Reply::event_stream(stream.clone())
    });
    let dir = TestDir::new();
    dir.write_config(&format!(
        "provider = \"local\"\n[providers.local]\nkind = \"openai\"\nbase_url = \"{}/v1\"\nmodels = [\"gpt-4o\"]\n\
         [channels.slack]\napi_base = \"{}\"\nworkspace = \"{}\"\ncoalesce_ms = 50\nallow = [\"{ALICE}\"]\n",
        model.url,
        fake.api_base(),
        dir.workspace().display()
    ));
    let _server = HttpServe::start_with_env(
        &dir,
        None,
        &["--channel", "slack"],
        &[
            ("SLACK_BOT_TOKEN", BOT_TOKEN),
            ("SLACK_APP_TOKEN", APP_TOKEN),
        ],
    );
    let png = base64::engine::general_purpose::STANDARD
        .decode(PNG)
        .unwrap();
    let files = vec![
        fake.add_file("shot.png", "image/png", &png),
        fake.add_file("notes.md", "text/markdown", b"- ship it\n"),
        fake.add_file("report.pdf", "application/pdf", b"%PDF-1.7"),
    ];
    fake.dm_files(ALICE, "what do you make of these?", files);
    fake.wait_for("the reply", WAIT, |f| f.texts(DM) == ["seen it"]);
    let user = seen.lock().unwrap().last().unwrap()["messages"]
        .as_array()
        .unwrap()
        .iter()
        .rfind(|m| m["role"] == "user")
        .cloned()
        .unwrap();
    assert_eq!(
        user["content"],
        json!([
            {"type": "text", "text": "what do you make of these?\n[attached file shot.png: below]\n[attached file notes.md: below]\n[attached file report.pdf, 8 B: not sent (only images and text files reach the model)]"},
            {"type": "image_url", "image_url": {"url": format!("data:image/png;base64,{PNG}")}},
            {"type": "text", "text": "<resource uri=\"attachment:notes.md\">\n- ship it\n\n</resource>"},
        ])
    );
    // Two fetched, each with the bot token; the PDF never.
    let downloads = fake.downloads();
    assert_eq!(downloads.len(), 2, "{downloads:?}");
    assert!(
        downloads
            .iter()
            .all(|(path, authed)| *authed && !path.ends_with(".pdf"))
    );
}

/// A reply's files, as on Telegram: a run that edited a file in a channel
/// thread is followed in that thread by `changes.diff` (shared through
/// `files.getUploadURLExternal`, the bytes POSTed to its pre-signed URL
/// without the bot token, and `files.completeUploadExternal`) with its
/// caption as the comment; a reply longer than three messages comes as its
/// first message and the whole as `reply.md`.
#[test]
fn a_runs_changes_and_a_long_reply_are_shared_as_files_in_the_thread() {
    let fake = FakeSlack::start();
    let dir = TestDir::new();
    std::fs::write(dir.workspace().join("notes.md"), "old line\n").unwrap();
    let long: String = (0..700)
        .map(|n| format!("Line {n} of a long answer.\n\n"))
        .collect();
    let script = dir.script(
        "s.jsonl",
        &[
            json!([{"tool_call": {"id": "w1", "name": "write_file", "arguments": {"path": "notes.md", "content": "new line\n"}}}]),
            json!([{"text": "Updated the notes."}]),
            json!([{"text": long}]),
        ],
    );
    dir.write_config(&format!(
        "mode = \"full\"\n[channels.slack]\napi_base = \"{}\"\nworkspace = \"{}\"\ncoalesce_ms = 50\n\
         live_drafts = false\nallow = [\"{ALICE}\"]\nchannels = [\"CTEAM\"]\n",
        fake.api_base(),
        dir.workspace().display()
    ));
    let server = serve(&dir, &script);
    let root = fake.mention("CTEAM", ALICE, "update the notes", None);
    fake.wait_for("the changes shared", WAIT, |f| {
        f.uploads().iter().any(|u| u.shared)
    });
    let uploads = fake.uploads();
    assert_eq!(uploads.len(), 1, "{uploads:#?}");
    let diff = &uploads[0];
    assert_eq!(diff.filename, "changes.diff");
    assert_eq!(diff.title.as_deref(), Some("changes.diff"));
    let bytes = String::from_utf8(diff.bytes.clone().unwrap()).unwrap();
    assert_eq!(diff.length, bytes.len() as u64, "the declared length");
    assert!(
        bytes.contains("--- a/notes.md\n+++ b/notes.md\n")
            && bytes.contains("-old line\n+new line\n"),
        "{bytes}"
    );
    assert_eq!(diff.content_type.as_deref(), Some("text/x-diff"));
    assert_eq!(
        diff.authorization, None,
        "the bot token went to the upload URL"
    );
    assert_eq!(diff.channel.as_deref(), Some("CTEAM"));
    assert_eq!(diff.thread_ts.as_deref(), Some(root.as_str()));
    assert_eq!(
        diff.initial_comment.as_deref(),
        Some("Changes to 1 file: notes.md")
    );
    // The reply, then the file with its caption, last in the thread.
    let shown = fake.shown("CTEAM");
    let n = shown.len();
    assert_eq!(shown[n - 2].text, "Updated the notes.");
    assert_eq!(shown[n - 1].text, "Changes to 1 file: notes.md");
    assert_eq!(shown[n - 1].files, vec![diff.file_id.clone()]);
    assert!(
        shown
            .iter()
            .all(|p| p.thread_ts.as_deref() == Some(root.as_str()))
    );
    // The upload's calls: the reservation form-encoded, as Slack takes it.
    let reserved = fake.calls("files.getUploadURLExternal");
    assert_eq!(
        reserved[0].body,
        json!({"filename": "changes.diff", "length": bytes.len().to_string()})
    );
    // Recorded sent, the file's id the last part's platform id.
    until(&fake, "the reply recorded sent", || {
        intents(&dir, "reply").iter().any(|i| i["status"] == "sent")
    });
    let reply = intents(&dir, "reply").remove(0);
    assert_eq!(reply["receipt"]["parts"][1]["platform_id"], diff.file_id);

    fake.mention("CTEAM", ALICE, "tell me everything", Some(&root));
    fake.wait_for("the long reply", WAIT, |f| {
        f.uploads().iter().filter(|u| u.shared).count() == 2
    });
    let whole = fake.uploads()[1].clone();
    assert_eq!(whole.filename, "reply.md");
    let text = String::from_utf8(whole.bytes.clone().unwrap()).unwrap();
    assert_eq!(text.trim_end(), long.trim_end(), "the whole reply");
    assert_eq!(whole.content_type.as_deref(), Some("text/markdown"));
    assert_eq!(whole.thread_ts.as_deref(), Some(root.as_str()));
    let shown = fake.shown("CTEAM");
    let n = shown.len();
    // One message of the reply's start (not four or more), then the file.
    assert!(shown[n - 2].text.starts_with("Line 0 of a long answer."));
    assert!(!shown[n - 2].text.contains("Line 699"));
    assert_eq!(
        shown[n - 1].text,
        format!(
            "The whole reply ({} characters) is attached.",
            text.chars().count()
        )
    );
    assert_eq!(shown[n - 1].files, vec![whole.file_id.clone()]);
    let logged = server.stderr();
    drop(server);
    assert!(!logged.contains(BOT_TOKEN));
    dir.verify();
}

/// Direct messages answered by one reply long enough to come as its first
/// message and `reply.md`: the directory, the script, and the reply.
fn long_reply_setup(fake: &FakeSlack) -> (TestDir, std::path::PathBuf, String) {
    let dir = setup(fake, "live_drafts = false\n");
    let long: String = (0..400)
        .map(|n| format!("Line {n} of a long answer.\n\n"))
        .collect();
    let script = dir.script("s.jsonl", &[json!([{"text": long}])]);
    (dir, script, long)
}

/// A 429 on the upload's reservation is waited out, and the file is
/// shared once; no upload is left behind unshared.
#[test]
fn a_rate_limited_upload_is_shared_once_after_its_retry_after() {
    let fake = FakeSlack::start();
    let (dir, script, long) = long_reply_setup(&fake);
    let _server = serve(&dir, &script);
    fake.rate_limit("files.getUploadURLExternal", 2);
    fake.dm(ALICE, "tell me everything");
    fake.wait_for("the file shared", WAIT, |f| {
        f.uploads().iter().any(|u| u.shared)
    });
    let calls = fake.calls("files.getUploadURLExternal");
    assert_eq!(calls.len(), 2, "{calls:#?}");
    let waited = calls[1].at - calls[0].at;
    assert!(
        waited >= Duration::from_secs(2),
        "asked again after {waited:?}"
    );
    let uploads = fake.uploads();
    assert_eq!(uploads.len(), 1, "{uploads:#?}");
    let text = String::from_utf8(uploads[0].bytes.clone().unwrap()).unwrap();
    assert_eq!(text.trim_end(), long.trim_end());
    until(&fake, "the reply recorded sent", || {
        intents(&dir, "reply").iter().any(|i| i["status"] == "sent")
    });
    // In a direct message Slack tells the app of its own file share: not read.
    fake.wait_for("every envelope acknowledged", WAIT, all_acked);
    assert_eq!(fake.calls("files.completeUploadExternal").len(), 1);
    assert_eq!(fake.shown(DM).len(), 2, "{:#?}", fake.shown(DM));
}

/// `kill -9` while Slack shares a file but before its answer: the reply is
/// `unknown_after_send` after the restart, and neither uploaded nor shared
/// again.
#[test]
fn a_crash_while_a_file_is_shared_leaves_it_unknown_and_never_reuploaded() {
    let fake = FakeSlack::start();
    let (dir, script, _) = long_reply_setup(&fake);
    fake.hold_acted("files.completeUploadExternal");
    let server = serve(&dir, &script);
    fake.dm(ALICE, "tell me everything");
    fake.wait_for("the file shared", WAIT, |f| {
        f.uploads().iter().any(|u| u.shared)
    });
    server.crash();
    fake.release("files.completeUploadExternal");
    let _server = serve(&dir, &script);
    until(&fake, "the reply found unknown after send", || {
        intents(&dir, "reply")
            .iter()
            .any(|i| i["status"] == "unknown_after_send")
    });
    settled(&fake, &dir);
    assert_eq!(
        fake.calls("files.getUploadURLExternal").len(),
        1,
        "uploaded again"
    );
    assert_eq!(
        fake.calls("files.completeUploadExternal").len(),
        1,
        "shared again"
    );
    assert_eq!(fake.uploads().len(), 1);
    // The reply's first message, and the file once.
    assert_eq!(fake.shown(DM).len(), 2, "{:#?}", fake.shown(DM));
    dir.verify();
}

/// A Slack slash command (a `slash_commands` envelope) is the chat command:
/// `/pincer usage` in a direct message answers the usage of the session
/// typed messages there use; `/model`, registered as a command of its own,
/// lists the models; `/pincer` alone is `/help`; an envelope sent again is
/// answered once; in a channel, at its top level (Slack offers no slash
/// command in a thread), and in a channel not listed, not at all.
#[test]
fn slash_commands_are_the_chat_commands() {
    let fake = FakeSlack::start();
    let dir = setup(&fake, "live_drafts = false\nchannels = [\"CTEAM\"]\n");
    let script = dir.script("s.jsonl", &[json!([{"text": "Hello."}])]);
    let _server = serve(&dir, &script);
    fake.dm(ALICE, "hi");
    fake.wait_for("the reply", WAIT, |f| f.texts(DM) == ["Hello."]);
    let usage = |t: &String| t.contains("1 run,") && t.contains("tokens in");
    let trigger = fake.slash(ALICE, DM, "/pincer", "usage");
    fake.wait_for("the usage", WAIT, |f| f.texts(DM).iter().any(usage));
    fake.wait_for("every envelope acknowledged", WAIT, all_acked);
    let acks = fake.envelopes();
    let slash = acks.iter().find(|e| e.kind == "slash_commands").unwrap();
    assert_eq!(slash.payload["trigger_id"], trigger.as_str());
    // Slack sends it again: acknowledged, not answered again.
    fake.replay(&trigger);
    fake.wait_for("the replay acknowledged", WAIT, |f| {
        all_acked(f)
            && f.envelopes()
                .iter()
                .any(|e| e.kind == "slash_commands" && e.retry_attempt == 1)
    });
    fake.slash(ALICE, DM, "/model", "");
    fake.wait_for("the models", WAIT, |f| {
        f.texts(DM).iter().any(|t| t.contains("(current)"))
    });
    fake.slash(ALICE, DM, "/pincer", "");
    fake.wait_for("the help", WAIT, |f| {
        f.texts(DM).iter().any(|t| t.contains("/resume"))
    });
    settled(&fake, &dir);
    assert_eq!(fake.texts(DM).iter().filter(|t| usage(t)).count(), 1);
    assert!(fake.shown(DM).iter().all(|p| p.thread_ts.is_none()));

    // In a channel: its top level, a conversation of its own.
    fake.slash(ALICE, "COTHER", "/pincer", "usage");
    fake.slash(ALICE, "CTEAM", "/pincer", "usage");
    fake.wait_for("the usage in the channel", WAIT, |f| {
        f.shown("CTEAM")
            .iter()
            .any(|p| p.text.starts_with("No session yet") && p.thread_ts.is_none())
    });
    settled(&fake, &dir);
    assert!(fake.shown("COTHER").is_empty());
    fake.wait_for("every envelope acknowledged", WAIT, all_acked);
}

/// A slash command of a sender not allowed is a message of theirs: told
/// how to pair, not answered; `/pincer pair CODE` pairs them, and their
/// next command is answered.
#[test]
fn a_strangers_slash_command_is_refused_as_their_message_would_be() {
    let fake = FakeSlack::start();
    let dir = setup(
        &fake,
        "live_drafts = false\npairing_code_env = \"MY_CODE\"\n",
    );
    let script = dir.script("s.jsonl", &[json!([{"text": "unused"}])]);
    let _server = HttpServe::start_with_env(
        &dir,
        None,
        &[
            "--channel",
            "slack",
            "--provider",
            "scripted",
            "--script",
            script.to_str().unwrap(),
        ],
        &[
            ("SLACK_BOT_TOKEN", BOT_TOKEN),
            ("SLACK_APP_TOKEN", APP_TOKEN),
            ("MY_CODE", "s3cret-code"),
        ],
    );
    let (bob, bob_dm) = ("UBOB", "DUBOB");
    fake.slash(bob, bob_dm, "/pincer", "usage");
    fake.wait_for("the refusal", WAIT, |f| {
        f.texts(bob_dm)
            .iter()
            .any(|t| t.contains("You are not allowed"))
    });
    fake.wait_for("every envelope acknowledged", WAIT, all_acked);
    assert!(!fake.texts(bob_dm).iter().any(|t| t.contains("session")));
    fake.slash(bob, bob_dm, "/pincer", "pair s3cret-code");
    fake.wait_for("paired", WAIT, |f| {
        f.texts(bob_dm).iter().any(|t| t.starts_with("Paired."))
    });
    fake.slash(bob, bob_dm, "/usage", "");
    fake.wait_for("the usage", WAIT, |f| {
        f.texts(bob_dm)
            .iter()
            .any(|t| t.starts_with("No session yet"))
    });
}

/// [`post_signed`] with a form body, as Slack POSTs a slash command to
/// its Request URL.
fn post_form(addr: &str, secret: &str, at: i64, body: &str) -> (u16, String) {
    post_signed(
        addr,
        "/channels/slack/events",
        "application/x-www-form-urlencoded",
        secret,
        at,
        body,
    )
}

/// Over the Events API a slash command is a signed form POST to the same
/// endpoint: a bad signature refused `401`, a signed one answered `200`
/// with an empty body (Slack would show any body) and the answer posted;
/// sent again, answered once.
#[test]
fn a_signed_slash_command_over_the_events_api_is_answered() {
    let fake = FakeSlack::start();
    let (dir, server, now) = serve_events(&fake, &[json!([{"text": "unused"}])]);
    let (addr, secret) = (server.addr.clone(), SIGNING_SECRET);
    let (form, _trigger) = fake.slash_form(ALICE, DM, "/pincer", "model");
    assert_eq!(post_form(&addr, "not-the-secret", now, &form).0, 401);
    std::thread::sleep(Duration::from_millis(300));
    assert!(fake.calls("chat.postMessage").is_empty());
    // The hub may still be starting (503, which Slack would not retry for a
    // command, but the test may).
    let deadline = Instant::now() + WAIT;
    let answer = loop {
        let answer = post_form(&addr, secret, now, &form);
        if answer.0 != 503 || Instant::now() > deadline {
            break answer;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    assert_eq!(answer, (200, String::new()));
    fake.wait_for("the models", WAIT, |f| {
        f.texts(DM).iter().any(|t| t.contains("(current)"))
    });
    assert_eq!(post_form(&addr, secret, now, &form), (200, String::new()));
    settled(&fake, &dir);
    assert_eq!(fake.texts(DM).len(), 1, "{:?}", fake.texts(DM));
    // Neither an interaction nor a command nor JSON: refused.
    assert_eq!(post_form(&addr, secret, now, "text=hello").0, 400);
}
