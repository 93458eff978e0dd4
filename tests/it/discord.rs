//! The Discord channel through `pincer serve --channel discord` against a
//! fake Discord on loopback (`support::discord`): a conversation with a live
//! draft, an approval by button answered with an interaction response, a
//! replayed dispatch answered once, a dropped connection resumed without
//! losing or repeating a message, Reconnect, Invalid Session and a zombie
//! connection, and rate limits honoured.

use std::time::Duration;

use serde_json::{Value, json};

use crate::support::TestDir;
use crate::support::discord::{BOT, FakeDiscord, TOKEN};
use crate::support::serve::HttpServe;

const USER: &str = "4242";
/// The direct-message channel with USER.
const DM: &str = "9001";
const WAIT: Duration = Duration::from_secs(20);

fn serve(fake: &FakeDiscord, dir: &TestDir, script: &[Value], extra: &str) -> HttpServe {
    serve_with(fake, dir, script, extra, &[])
}

/// [`serve`] with more arguments for `pincer serve` (`--mode full`).
fn serve_with(
    fake: &FakeDiscord,
    dir: &TestDir,
    script: &[Value],
    extra: &str,
    args: &[&str],
) -> HttpServe {
    let script = dir.script("s.jsonl", script);
    let config = format!(
        "[channels.discord]\napi_base = \"{}\"\ngateway_url = \"{}\"\nworkspace = \"{}\"\n\
         coalesce_ms = 50\nallow = [\"{USER}\"]\n{extra}",
        fake.api,
        fake.gateway,
        dir.workspace().display()
    );
    HttpServe::start_with_env(
        dir,
        Some(&config),
        &[
            "--provider",
            "scripted",
            "--script",
            script.to_str().unwrap(),
            "--channel",
            "discord",
        ]
        .into_iter()
        .chain(args.iter().copied())
        .collect::<Vec<_>>(),
        &[("DISCORD_BOT_TOKEN", TOKEN)],
    )
}

/// Waits until the fake's Gateway has a session open.
fn identified(fake: &FakeDiscord) {
    fake.wait_for("an identified session", WAIT, |f| {
        f.connections().iter().any(|c| c.opening["op"] == 2)
    });
}

fn reply(fake: &FakeDiscord, what: &str, text: &str) {
    fake.wait_for(what, WAIT, |f| f.texts(DM).iter().any(|t| t == text));
}

#[test]
fn a_conversation_with_a_live_draft_created_then_edited() {
    let fake = FakeDiscord::start();
    let dir = TestDir::new();
    let _serve = serve(
        &fake,
        &dir,
        &[
            json!([{"text": "Hel"}, {"delay_ms": 1300}, {"text": "lo there"}]),
            json!([{"text": "Second answer"}]),
        ],
        "",
    );
    identified(&fake);
    let identify = &fake.connections()[0].opening;
    assert_eq!(identify["d"]["token"], TOKEN);
    assert_eq!(identify["d"]["intents"], 37377);
    fake.user_says(DM, USER, "hi");
    reply(&fake, "the finalized reply", "Hello there");
    assert_eq!(fake.texts(DM), ["Hello there"]);
    // One message: created as a draft with a nonce, edited as the text grew.
    let creates = fake.calls("POST", "/messages");
    assert_eq!(creates.len(), 1, "{creates:#?}");
    assert_eq!(creates[0].body["content"], "Hel");
    assert_eq!(creates[0].body["enforce_nonce"], true);
    assert!(creates[0].body["nonce"].as_str().unwrap().len() <= 25);
    assert!(!fake.calls("PATCH", "/messages").is_empty());
    fake.user_says(DM, USER, "and again");
    reply(&fake, "the second reply", "Second answer");
    assert_eq!(fake.texts(DM), ["Hello there", "Second answer"]);
    // Heartbeats carry the last sequence seen: READY was 1, the messages 2 and 3.
    fake.wait_for("a heartbeat with the last sequence", WAIT, |f| {
        f.heartbeats().iter().any(|(_, d)| d.as_u64() == Some(3))
    });
    assert!(fake.violations().is_empty(), "{:?}", fake.violations());
}

#[test]
fn an_approval_by_button_is_answered_with_an_interaction_response() {
    let fake = FakeDiscord::start();
    let dir = TestDir::new();
    let _serve = serve(
        &fake,
        &dir,
        &[
            json!([{"tool_call": {"id": "w1", "name": "write_file", "arguments": {"path": "note.txt", "content": "from discord\n"}}}]),
            json!([{"text": "Written."}]),
        ],
        "live_drafts = false\n",
    );
    identified(&fake);
    fake.user_says(DM, USER, "write a note");
    fake.wait_for("the approval prompt", WAIT, |f| {
        f.channel(DM)
            .iter()
            .any(|(_, _, c)| c[0]["components"].is_array())
    });
    let (message, text, components) = fake
        .channel(DM)
        .into_iter()
        .find(|(_, _, c)| c[0]["components"].is_array())
        .unwrap();
    assert!(text.contains("Approval needed"), "{text}");
    let buttons = components[0]["components"].as_array().unwrap().clone();
    let labels: Vec<&str> = buttons
        .iter()
        .map(|b| b["label"].as_str().unwrap())
        .collect();
    assert_eq!(labels, ["Allow once", "Always", "Reject"]);
    assert!(buttons.iter().all(|b| b["type"] == 2));
    let allow = buttons[0]["custom_id"].as_str().unwrap().to_owned();
    let press = fake.press(DM, USER, &message, &allow);
    reply(&fake, "the reply after the tool ran", "Written.");
    let written = std::fs::read_to_string(dir.workspace().join("note.txt")).unwrap();
    assert_eq!(written, "from discord\n");
    // The press was answered with an interaction response: a deferred update.
    let callbacks = fake.calls("POST", "/callback");
    assert_eq!(callbacks.len(), 1);
    assert!(
        callbacks[0]
            .path
            .contains(&format!("/interactions/{press}/tok-{press}/"))
    );
    assert_eq!(callbacks[0].body, json!({"type": 6}));
    // The prompt now shows the answer instead of its buttons.
    fake.wait_for("the prompt updated", WAIT, |f| {
        f.channel(DM)
            .iter()
            .any(|(id, t, c)| *id == message && t.ends_with("→ allowed once") && c == &json!([]))
    });
}

#[test]
fn a_replayed_dispatch_is_answered_once() {
    let fake = FakeDiscord::start();
    let dir = TestDir::new();
    let _serve = serve(
        &fake,
        &dir,
        &[json!([{"text": "Once."}]), json!([{"text": "Twice?"}])],
        "live_drafts = false\n",
    );
    identified(&fake);
    fake.user_says(DM, USER, "hello");
    reply(&fake, "the reply", "Once.");
    fake.replay_last();
    fake.user_says(DM, USER, "ping");
    reply(&fake, "the reply to the next message", "Twice?");
    assert_eq!(fake.texts(DM), ["Once.", "Twice?"]);
}

#[test]
fn a_dropped_connection_resumes_where_it_left_off() {
    let fake = FakeDiscord::start();
    let dir = TestDir::new();
    let _serve = serve(
        &fake,
        &dir,
        &[
            json!([{"text": "First."}]),
            json!([{"text": "Missed, then replayed."}]),
        ],
        "live_drafts = false\n",
    );
    identified(&fake);
    fake.user_says(DM, USER, "one");
    reply(&fake, "the first reply", "First.");
    // The message is written while the bot is away: only the resume brings it.
    fake.drop_then_say(DM, USER, "two");
    reply(
        &fake,
        "the replayed message's reply",
        "Missed, then replayed.",
    );
    let connections = fake.connections();
    assert_eq!(connections.len(), 2, "{connections:#?}");
    let resume = &connections[1];
    assert_eq!(resume.opening["op"], 6);
    assert!(resume.path.starts_with("/resume"), "{}", resume.path);
    let session = connections[0].opening.clone();
    assert_eq!(session["op"], 2);
    assert!(
        resume.opening["d"]["session_id"]
            .as_str()
            .unwrap()
            .starts_with("session-")
    );
    assert_eq!(resume.opening["d"]["token"], TOKEN);
    // READY was 1 and "one" 2: the resume asks for what came after.
    assert_eq!(resume.opening["d"]["seq"], 2);
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(fake.texts(DM), ["First.", "Missed, then replayed."]);
}

#[test]
fn reconnect_invalid_session_and_a_zombie_connection_are_survived() {
    let fake = FakeDiscord::with_heartbeat(Duration::from_millis(300));
    let dir = TestDir::new();
    let _serve = serve(
        &fake,
        &dir,
        &[
            json!([{"text": "a"}]),
            json!([{"text": "b"}]),
            json!([{"text": "c"}]),
            json!([{"text": "d"}]),
        ],
        "live_drafts = false\n",
    );
    identified(&fake);
    let opened = |n: usize| {
        fake.wait_for(&format!("connection {n}"), WAIT, |f| {
            f.connections().len() >= n
        });
        fake.connections()[n - 1].opening.clone()
    };
    // Op 7: reconnect and resume.
    fake.ask_reconnect();
    assert_eq!(opened(2)["op"], 6);
    fake.user_says(DM, USER, "1");
    reply(&fake, "a", "a");
    // Op 9, resumable: resume again.
    fake.invalidate(true);
    assert_eq!(opened(3)["op"], 6);
    fake.user_says(DM, USER, "2");
    reply(&fake, "b", "b");
    // Op 9, not resumable: identify afresh (after one to five seconds).
    fake.invalidate(false);
    assert_eq!(opened(4)["op"], 2);
    fake.user_says(DM, USER, "3");
    reply(&fake, "c", "c");
    // Heartbeats no longer acknowledged: the connection is a zombie,
    // closed and resumed.
    fake.zombie(true);
    fake.wait_for("a resume after the zombie", WAIT, |f| {
        f.connections().len() >= 5
    });
    fake.zombie(false);
    assert_eq!(fake.connections()[4].opening["op"], 6);
    fake.user_says(DM, USER, "4");
    reply(&fake, "d", "d");
    assert_eq!(fake.texts(DM), ["a", "b", "c", "d"]);
    let _ = BOT;
}

#[test]
fn rate_limits_are_waited_out_per_bucket() {
    let fake = FakeDiscord::start();
    let dir = TestDir::new();
    let _serve = serve(
        &fake,
        &dir,
        &[json!([{"text": "Patience."}])],
        "live_drafts = false\n",
    );
    identified(&fake);
    fake.limit_next("POST messages", 1.5);
    fake.user_says(DM, USER, "hurry");
    reply(&fake, "the reply after the limit", "Patience.");
    let creates = fake.calls("POST", "/messages");
    assert_eq!(creates.len(), 2, "{creates:#?}");
    assert_eq!(creates[0].status, 429);
    assert_eq!(creates[1].status, 200);
    let waited = creates[1].at - creates[0].at;
    assert!(waited >= Duration::from_millis(1500), "{waited:?}");
    // The same nonce both times: the repeat is the same message.
    assert_eq!(creates[0].body["nonce"], creates[1].body["nonce"]);
    assert!(fake.violations().is_empty(), "{:?}", fake.violations());
}

/// A global 429 (`X-RateLimit-Global: true`) on one route holds every
/// route: a reply in another channel (another route and bucket) waits out
/// the `retry_after` too, and nothing reaches Discord before it has passed.
#[test]
fn a_global_rate_limit_holds_every_route_until_it_passes() {
    const OTHER: &str = "9002";
    let fake = FakeDiscord::start();
    let dir = TestDir::new();
    let _serve = serve(
        &fake,
        &dir,
        &[json!([{"text": "Held."}])],
        "live_drafts = false\n",
    );
    identified(&fake);
    fake.limit_global_next("POST messages", 2.0);
    fake.user_says(DM, USER, "first");
    fake.wait_for("the global 429", WAIT, |f| {
        f.all_calls().iter().any(|c| c.status == 429)
    });
    let limited = fake
        .all_calls()
        .into_iter()
        .find(|c| c.status == 429)
        .unwrap();
    // Written well inside the limit's two seconds: answered at once, its
    // reply would come before they passed.
    fake.user_says(OTHER, USER, "second");
    let said = std::time::Instant::now();
    assert!(said - limited.at < Duration::from_millis(1000));
    reply(&fake, "the held reply", "Held.");
    fake.wait_for("the other channel's reply", WAIT, |f| {
        f.texts(OTHER) == ["Held."]
    });
    let calls = fake.all_calls();
    let after: Vec<_> = calls.iter().filter(|c| c.at > limited.at).collect();
    assert!(
        after
            .iter()
            .all(|c| c.at - limited.at >= Duration::from_secs(2)),
        "{after:#?}"
    );
    assert!(
        after
            .iter()
            .any(|c| c.path.contains(&format!("/channels/{OTHER}/")) && c.status == 200),
        "{after:#?}"
    );
    assert!(fake.violations().is_empty(), "{:?}", fake.violations());
}

/// A reply of three messages of at most 2,000 characters goes to one
/// bucket of two a second: the third waits for the bucket's reset, as its
/// headers announced, instead of drawing a 429. (A longer reply comes as a
/// file: `a_runs_changes_and_a_long_reply_come_as_attachments`.)
#[test]
fn long_replies_are_cut_within_2000_characters_and_paced_by_the_bucket() {
    let fake = FakeDiscord::start();
    fake.limit_per_window(2);
    let dir = TestDir::new();
    let paragraph = "All work and no play makes Jack a dull boy. ".repeat(40);
    let paragraph = paragraph.trim_end();
    let text = [paragraph; 3].join("\n\n");
    let _serve = serve(
        &fake,
        &dir,
        &[json!([{"text": text}])],
        "live_drafts = false\n",
    );
    identified(&fake);
    fake.user_says(DM, USER, "write a lot");
    fake.wait_for("every part", WAIT, |f| {
        f.texts(DM).join("\n\n").len() >= text.len()
    });
    let parts = fake.texts(DM);
    assert_eq!(parts.len(), 3);
    assert!(parts.iter().all(|p| p.chars().count() <= 2000));
    assert_eq!(parts.join("\n\n"), text);
    assert!(fake.uploads(DM).is_empty());
    let creates = fake.calls("POST", "/messages");
    assert!(creates.iter().all(|c| c.status == 200), "{creates:#?}");
    assert!(creates[2].at - creates[0].at >= Duration::from_millis(900));
    assert!(fake.violations().is_empty(), "{:?}", fake.violations());
}

/// A reply's files, uploaded with the create (a `multipart/form-data` body
/// of `payload_json` and `files[0]`): a run that edited a file gets its
/// changes as `changes.diff` after its reply, and a reply longer than three
/// messages comes as its first message and the whole as `reply.md`.
#[test]
fn a_runs_changes_and_a_long_reply_come_as_attachments() {
    let fake = FakeDiscord::start();
    let dir = TestDir::new();
    std::fs::write(dir.workspace().join("notes.md"), "old line\n").unwrap();
    let long: String = (0..700)
        .map(|n| format!("Line {n} of a long answer.\n\n"))
        .collect();
    let _serve = serve_with(
        &fake,
        &dir,
        &[
            json!([{"tool_call": {"id": "w1", "name": "write_file", "arguments": {"path": "notes.md", "content": "new line\n"}}}]),
            json!([{"text": "Updated the notes."}]),
            json!([{"text": long}]),
        ],
        "live_drafts = false\n",
        &["--mode", "full"],
    );
    identified(&fake);

    fake.user_says(DM, USER, "update the notes");
    fake.wait_for("the changes", WAIT, |f| !f.uploads(DM).is_empty());
    let uploads = fake.uploads(DM);
    assert_eq!(uploads.len(), 1, "{uploads:?}");
    assert_eq!(uploads[0].filename, "changes.diff");
    let diff = String::from_utf8(uploads[0].bytes.clone()).unwrap();
    assert_eq!(
        diff,
        "--- a/notes.md\n+++ b/notes.md\n@@ -1 +1 @@\n-old line\n+new line\n"
    );
    // The reply, then the file with its caption, in the same channel.
    let channel = fake.channel(DM);
    assert_eq!(
        fake.texts(DM),
        ["Updated the notes.", "Changes to 1 file: notes.md"]
    );
    assert_eq!(uploads[0].message, channel[1].0);
    // The upload's create: its payload as a plain create's, with the nonce
    // kept and the file named as attachment 0.
    let create = fake
        .calls("POST", "/messages")
        .into_iter()
        .find(|c| !c.files.is_empty())
        .unwrap();
    assert_eq!(create.status, 200);
    assert_eq!(create.body["content"], "Changes to 1 file: notes.md");
    assert_eq!(create.body["enforce_nonce"], true);
    assert!(create.body["nonce"].as_str().unwrap().len() <= 25);
    assert_eq!(
        create.body["attachments"],
        json!([{"id": 0, "filename": "changes.diff"}])
    );
    assert_eq!(
        create.files,
        [("changes.diff".to_owned(), diff.into_bytes())]
    );

    fake.user_says(DM, USER, "tell me everything");
    fake.wait_for("the long reply", WAIT, |f| f.uploads(DM).len() == 2);
    let whole = fake.uploads(DM)[1].clone();
    assert_eq!(whole.filename, "reply.md");
    let whole = String::from_utf8(whole.bytes).unwrap();
    assert_eq!(whole.trim_end(), long.trim_end(), "the whole reply");
    // One message of the reply's start (not four or more), then the file.
    fake.wait_for("both messages", WAIT, |f| f.texts(DM).len() == 4);
    let texts = fake.texts(DM);
    assert!(texts[2].starts_with("Line 0 of a long answer."));
    assert!(!texts[2].contains("Line 699"));
    assert_eq!(
        texts[3],
        format!(
            "The whole reply ({} characters) is attached.",
            whole.chars().count()
        )
    );
    assert!(fake.violations().is_empty(), "{:?}", fake.violations());
}

/// `kill -9` after Discord took a reply's file and before Pincer had its
/// answer: after the restart the upload is made again with the same nonce
/// and Discord answers with the message it made: one attachment.
#[test]
fn a_crash_after_discord_took_an_upload_leaves_one_attachment() {
    let fake = FakeDiscord::start();
    let dir = TestDir::new();
    std::fs::write(dir.workspace().join("notes.md"), "old line\n").unwrap();
    let script = [
        json!([{"tool_call": {"id": "w1", "name": "write_file", "arguments": {"path": "notes.md", "content": "new line\n"}}}]),
        json!([{"text": "Updated the notes."}]),
    ];
    let extra = "live_drafts = false\n";
    let first = serve_with(&fake, &dir, &script, extra, &["--mode", "full"]);
    identified(&fake);
    fake.hold_acted_next("POST messages upload");
    fake.user_says(DM, USER, "update the notes");
    fake.wait_for("the upload taken", WAIT, |f| f.uploads(DM).len() == 1);
    fake.wait_for("the intent on its way", WAIT, |_| {
        dir.outbox()
            .iter()
            .any(|i| i["kind"] == "reply" && i["status"] == "sending")
    });
    first.crash();
    let _second = serve_with(&fake, &dir, &script, extra, &["--mode", "full"]);
    fake.wait_for("the reply's receipt", WAIT, |_| {
        dir.outbox()
            .iter()
            .any(|i| i["kind"] == "reply" && i["status"] == "sent")
    });
    let uploads: Vec<_> = fake
        .calls("POST", "/messages")
        .into_iter()
        .filter(|c| !c.files.is_empty())
        .collect();
    assert_eq!(uploads.len(), 2, "{uploads:#?}");
    assert_eq!(uploads[0].body["nonce"], uploads[1].body["nonce"]);
    assert_eq!(uploads[1].body["enforce_nonce"], true);
    assert_eq!(fake.uploads(DM).len(), 1);
    assert_eq!(
        fake.texts(DM),
        ["Updated the notes.", "Changes to 1 file: notes.md"]
    );
    let verify = dir.command().arg("verify").output().unwrap();
    assert!(
        verify.status.success(),
        "{}{}",
        String::from_utf8_lossy(&verify.stdout),
        String::from_utf8_lossy(&verify.stderr)
    );
}

/// `kill -9` after Discord created the reply and before Pincer had its
/// answer: the intent is `sending` on disk; after the restart the create is
/// made again with the same nonce and `enforce_nonce`, and Discord answers
/// with the message it already made: one message in the channel.
#[test]
fn a_crash_after_discord_created_the_reply_leaves_one_message() {
    let fake = FakeDiscord::start();
    let dir = TestDir::new();
    let script = [json!([{"text": "Exactly once."}])];
    let first = serve(&fake, &dir, &script, "live_drafts = false\n");
    identified(&fake);
    fake.hold_acted_next("POST messages");
    fake.user_says(DM, USER, "once please");
    reply(&fake, "the reply created", "Exactly once.");
    fake.wait_for("the intent on its way", WAIT, |_| {
        dir.outbox()
            .iter()
            .any(|i| i["kind"] == "reply" && i["status"] == "sending")
    });
    first.crash();
    let _second = serve(&fake, &dir, &script, "live_drafts = false\n");
    fake.wait_for("the reply's receipt", WAIT, |_| {
        dir.outbox()
            .iter()
            .any(|i| i["kind"] == "reply" && i["status"] == "sent")
    });
    let creates = fake.calls("POST", "/messages");
    assert_eq!(creates.len(), 2, "{creates:#?}");
    assert_eq!(creates[0].body["nonce"], creates[1].body["nonce"]);
    assert_eq!(creates[1].body["enforce_nonce"], true);
    assert_eq!(fake.texts(DM), ["Exactly once."]);
    let verify = dir.command().arg("verify").output().unwrap();
    assert!(
        verify.status.success(),
        "{}{}",
        String::from_utf8_lossy(&verify.stdout),
        String::from_utf8_lossy(&verify.stderr)
    );
}

/// Sends `text` and returns the next message the bot writes in the DM.
fn ask(fake: &FakeDiscord, text: &str) -> String {
    let before = fake.texts(DM).len();
    fake.user_says(DM, USER, text);
    fake.wait_for(&format!("the answer to {text}"), WAIT, |f| {
        f.texts(DM).len() > before
    });
    fake.texts(DM)[before].clone()
}

/// The chat commands every channel has, on Discord; the channel's
/// capabilities as `pincer channels status` shows them.
#[test]
fn chat_commands_answer_on_discord_and_the_status_shows_the_capabilities() {
    let fake = FakeDiscord::start();
    let dir = TestDir::new();
    let serve = serve(
        &fake,
        &dir,
        &[json!([{"text": "Hi."}])],
        "live_drafts = false\n",
    );
    identified(&fake);
    assert_eq!(ask(&fake, "hello"), "Hi.");
    let usage = ask(&fake, "/usage");
    assert!(
        usage.starts_with("Session ") && usage.contains("1 run"),
        "{usage}"
    );
    let listed = ask(&fake, "/sessions");
    assert!(
        listed.contains("1. hello — ") && listed.contains(" (current)"),
        "{listed}"
    );
    let resumed = ask(&fake, "/resume 1");
    assert!(
        resumed.ends_with("is this chat's session already."),
        "{resumed}"
    );
    let model = ask(&fake, "/model");
    assert!(model.contains("scripted"), "{model}");
    assert_eq!(ask(&fake, "/stop"), "Nothing is running.");
    let out = dir
        .command()
        .args(["channels", "status", "--json"])
        .output()
        .unwrap();
    let status: Vec<Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    let discord = status
        .iter()
        .find(|s| s["name"] == "discord")
        .unwrap_or_else(|| panic!("{status:#?}"));
    assert_eq!(discord["account"], BOT);
    assert_eq!(discord["connected"], true, "{discord:#?}");
    // What the adapter declares, from the process running it.
    let channels = get(&serve.addr, "/v1/channels");
    let discord = channels["channels"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "discord")
        .unwrap_or_else(|| panic!("{channels:#?}"));
    assert_eq!(discord["kind"], "discord");
    let caps = &discord["capabilities"];
    assert_eq!(caps["max_len"], 2000);
    assert_eq!(caps["length_unit"], "chars");
    assert_eq!(caps["buttons"], true);
    assert_eq!(caps["files"], true);
    assert_eq!(
        caps["idempotent"],
        json!({"send": true, "edit": true, "delete": true})
    );
}

/// A GET of the HTTP face with the test token, its JSON body.
fn get(addr: &str, path: &str) -> Value {
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect(addr).unwrap();
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {}\r\nConnection: close\r\n\r\n",
        crate::support::serve::TOKEN
    )
    .unwrap();
    let mut answer = String::new();
    stream.read_to_string(&mut answer).unwrap();
    let (_, body) = answer.split_once("\r\n\r\n").unwrap();
    serde_json::from_str(body).unwrap_or_else(|e| panic!("{e}: {answer}"))
}

/// A token Discord refuses (close code 4004) stops the channel; the status
/// says so.
#[test]
fn a_refused_token_stops_the_channel_and_the_status_says_why() {
    let fake = FakeDiscord::start();
    let dir = TestDir::new();
    let script = dir.script("s.jsonl", &[json!([{"text": "never"}])]);
    let config = format!(
        "[channels.discord]\napi_base = \"{}\"\ngateway_url = \"{}\"\nworkspace = \"{}\"\nallow = [\"{USER}\"]\n",
        fake.api,
        fake.gateway,
        dir.workspace().display()
    );
    let serve = HttpServe::start_with_env(
        &dir,
        Some(&config),
        &[
            "--provider",
            "scripted",
            "--script",
            script.to_str().unwrap(),
            "--channel",
            "discord",
        ],
        &[("DISCORD_BOT_TOKEN", "OTk5.GhIjKl.a-wrong-secret")],
    );
    fake.wait_for("the refused identify", WAIT, |f| {
        !f.connections().is_empty()
    });
    fake.wait_for("the status", WAIT, |_| {
        let out = dir
            .command()
            .args(["channels", "status", "--json"])
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .any(|s| {
                s["connected"] == false
                    && s["last_error"].as_str().is_some_and(|e| e.contains("4004"))
            })
    });
    // It does not try again.
    std::thread::sleep(Duration::from_secs(2));
    assert_eq!(fake.connections().len(), 1);
    let log = serve.stderr();
    assert!(log.contains("4004"), "{log}");
    assert!(!log.contains("a-wrong-secret"), "{log}");
}

/// `kill -9` while a live draft shows part of a reply: after the restart the
/// draft is deleted and the reply, with what was written and the note that
/// the run was interrupted, is created afresh; the channel shows only it.
#[test]
fn a_crash_mid_draft_deletes_the_draft_and_sends_the_reply_afresh() {
    let fake = FakeDiscord::start();
    let dir = TestDir::new();
    let script = [json!([
        {"text": "Working on it"},
        {"delay_ms": 1200},
        {"text": " and more"},
        {"delay_ms": 60000},
        {"text": " never"}
    ])];
    let first = serve(&fake, &dir, &script, "");
    identified(&fake);
    fake.user_says(DM, USER, "long job");
    reply(&fake, "the draft edited", "Working on it and more");
    first.crash();
    let _second = serve(&fake, &dir, &script, "");
    fake.wait_for("the reply's receipt", WAIT, |_| {
        dir.outbox()
            .iter()
            .any(|i| i["kind"] == "reply" && i["status"] == "sent")
    });
    let texts = fake.texts(DM);
    assert_eq!(texts.len(), 1, "{texts:?}");
    assert!(
        texts[0].starts_with("Working on it and more") && texts[0].contains("interrupted"),
        "{texts:?}"
    );
    assert_eq!(fake.calls("DELETE", "/messages").len(), 1);
    let draft = dir
        .outbox()
        .into_iter()
        .find(|i| i["kind"] == "draft")
        .unwrap();
    assert_eq!(draft["status"], "cancelled", "{draft:#}");
    let verify = dir.command().arg("verify").output().unwrap();
    assert!(verify.status.success());
}

/// In a guild the bot answers when mentioned (the mention taken out), or
/// everything in a listened channel. A thread is a channel of its own on
/// Discord: each is answered in itself, with a session of its own.
#[test]
fn guild_messages_are_answered_when_addressed_and_each_thread_is_a_session() {
    let fake = FakeDiscord::start();
    let dir = TestDir::new();
    // The scripted model answers each session's turns in order: a first
    // turn says so.
    let _serve = serve(
        &fake,
        &dir,
        &[
            json!([{"text": "First turn."}]),
            json!([{"text": "Second turn."}]),
        ],
        "live_drafts = false\nchannels = [\"7100\"]\n",
    );
    identified(&fake);
    fake.guild_says("66", "7001", USER, "not for the bot", false);
    fake.guild_says("66", "7001", USER, "first", true);
    fake.wait_for("the first thread's reply", WAIT, |f| {
        f.texts("7001") == ["First turn."]
    });
    fake.guild_says("66", "7002", USER, "second", true);
    fake.wait_for("the second thread's reply", WAIT, |f| {
        f.texts("7002") == ["First turn."]
    });
    fake.guild_says("66", "7001", USER, "first again", true);
    fake.wait_for("the first thread's session going on", WAIT, |f| {
        f.texts("7001") == ["First turn.", "Second turn."]
    });
    fake.guild_says("66", "7100", USER, "no mention needed here", false);
    fake.wait_for("the listened channel's reply", WAIT, |f| {
        f.texts("7100") == ["First turn."]
    });
    let out = dir
        .command()
        .args(["sessions", "list", "--json"])
        .output()
        .unwrap();
    let sessions: Vec<Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    assert_eq!(sessions.len(), 3, "{sessions:#?}");
    // The prompt is what was written, without the mention.
    let prompts: Vec<String> = sessions
        .iter()
        .flat_map(|s| {
            dir.show_session(s["session_id"].as_str().unwrap())["history"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|e| e["message"]["role"] == "user")
                .map(|e| {
                    e["message"]["content"][0]["text"]
                        .as_str()
                        .unwrap()
                        .to_owned()
                })
                .collect::<Vec<_>>()
        })
        .collect();
    assert!(prompts.contains(&"first".to_owned()), "{prompts:?}");
    assert!(
        !prompts.iter().any(|p| p.contains("not for the bot")),
        "{prompts:?}"
    );
    assert_eq!(fake.texts("7001"), ["First turn.", "Second turn."]);
}

/// Files sent on Discord reach the prompt as on Telegram and Slack: an
/// image for a model that takes images and a text file, fetched from their
/// CDN URLs without the bot token; anything else named with its size and why.
#[test]
fn attachments_reach_the_model_from_their_cdn_urls() {
    use crate::support::http::{Loopback, Reply};
    use base64::Engine as _;
    const PNG: &str = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==";
    let fake = FakeDiscord::start();
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
    let config = format!(
        "provider = \"local\"\n[providers.local]\nkind = \"openai\"\nbase_url = \"{}/v1\"\nmodels = [\"gpt-4o\"]\n\
         [channels.discord]\napi_base = \"{}\"\ngateway_url = \"{}\"\nworkspace = \"{}\"\ncoalesce_ms = 50\nallow = [\"{USER}\"]\n",
        model.url,
        fake.api,
        fake.gateway,
        dir.workspace().display()
    );
    let _server = HttpServe::start_with_env(
        &dir,
        Some(&config),
        &["--channel", "discord"],
        &[("DISCORD_BOT_TOKEN", TOKEN)],
    );
    let png = base64::engine::general_purpose::STANDARD
        .decode(PNG)
        .unwrap();
    fake.user_sends_files(
        DM,
        USER,
        "look",
        &[
            ("shot.png", "image/png", &png),
            ("notes.txt", "text/plain; charset=utf-8", b"ship it\n"),
            ("song.mp3", "audio/mpeg", b"ID3...."),
        ],
    );
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
            {"type": "text", "text": "look\n[attached image shot.png: below]\n[attached text notes.txt: below]\n[attached audio song.mp3, 7 B: not sent (only images and text files reach the model)]"},
            {"type": "image_url", "image_url": {"url": format!("data:image/png;base64,{PNG}")}},
            {"type": "text", "text": "<resource uri=\"attachment:notes.txt\">\nship it\n\n</resource>"},
        ])
    );
    let fetched = fake.fetched();
    assert_eq!(fetched.len(), 2, "{fetched:?}");
    assert!(
        fetched
            .iter()
            .all(|(path, authorized)| !authorized && !path.ends_with(".mp3"))
    );
}
