//! The Matrix channel (`kind = "matrix"`, `docs/channels.md`) against a
//! real Synapse (`support::matrix`): `pincer serve --channel matrix` as a
//! user of the homeserver, people talking with it through the
//! Client-Server API.

use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::support::TestDir;
use crate::support::matrix::{Event, MatrixUser, Synapse};

const WAIT: Duration = Duration::from_secs(60);
const PASSWORD: &str = "bot-password-1";

/// `pincer serve --channel matrix`, killed on drop.
struct Bridge {
    child: Child,
}

impl Drop for Bridge {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The bot, alice (allowed) and bob (not), fresh on the shared server.
struct People {
    bot: MatrixUser,
    alice: MatrixUser,
    bob: MatrixUser,
}

fn people(server: &Synapse) -> People {
    let register = |prefix: &str| server.register(&server.fresh_localpart(prefix), PASSWORD, false);
    People {
        bot: register("pincer"),
        alice: register("alice"),
        bob: register("bob"),
    }
}

/// The config: the bot's token (or, with `password`, its password) from
/// the environment, alice allowed.
fn setup(server: &Synapse, people: &People, password: bool) -> TestDir {
    let dir = TestDir::new();
    let config = dir.path().join("config").join("pincer");
    std::fs::create_dir_all(&config).unwrap();
    let secret = if password {
        "password_env = \"MATRIX_PASSWORD\""
    } else {
        "access_token_env = \"MATRIX_TOKEN\""
    };
    std::fs::write(
        config.join("config.toml"),
        format!(
            "[channels.matrix]\nkind = \"matrix\"\nhomeserver = \"{}\"\nuser_id = \"{}\"\n{secret}\nallow = [\"{}\"]\nworkspace = \"{}\"\ncoalesce_ms = 50\n",
            server.base_url(),
            people.bot.user_id,
            people.alice.user_id,
            dir.workspace().display(),
        ),
    )
    .unwrap();
    dir
}

fn start(dir: &TestDir, people: &People, script: &[Value], name: &str) -> Bridge {
    start_with_env(dir, people, script, name, &[])
}

/// [`start`] with more environment variables.
fn start_with_env(
    dir: &TestDir,
    people: &People,
    script: &[Value],
    name: &str,
    env: &[(&str, &str)],
) -> Bridge {
    let script = dir.script(name, script);
    let mut command = dir.command();
    command.envs(env.iter().copied());
    command
        .env("MATRIX_TOKEN", &people.bot.access_token)
        .env("MATRIX_PASSWORD", PASSWORD)
        .env("PINCER_PAIRING_CODE", "open-sesame");
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(dir.path().join("stderr.log"))
        .unwrap();
    let child = command
        .args([
            "serve",
            "--channel",
            "matrix",
            "--provider",
            "scripted",
            "--script",
        ])
        .arg(&script)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .unwrap();
    Bridge { child }
}

/// Waits until `user` is in `room`.
fn wait_joined(user: &MatrixUser, room: &str, dir: &TestDir) {
    let deadline = Instant::now() + WAIT;
    while Instant::now() < deadline {
        if user.joined_rooms().iter().any(|r| r == room) {
            return;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    panic!("{} never joined {room}: {}", user.user_id, dir.log());
}

/// A direct room of `person` and the bot, the bot joined.
fn direct_room(person: &MatrixUser, bot: &MatrixUser, dir: &TestDir) -> String {
    let room = person.create_room("dm", &[&bot.user_id], false);
    wait_joined(bot, &room, dir);
    room
}

/// The bot's messages in the room (not edits), oldest first.
fn bot_messages(person: &MatrixUser, room: &str, bot: &str) -> Vec<Event> {
    person
        .messages(room)
        .into_iter()
        .filter(|e| {
            e.kind == "m.room.message"
                && e.sender == bot
                && e.relation().is_none()
                && e.body().is_some()
        })
        .collect()
}

/// Waits for a message of the bot whose body satisfies `predicate`.
fn from_bot(person: &MatrixUser, room: &str, bot: &str, predicate: impl Fn(&str) -> bool) -> Event {
    person.wait_for(
        room,
        |e| {
            e.kind == "m.room.message"
                && e.sender == bot
                && e.relation().is_none()
                && e.body().is_some_and(&predicate)
        },
        WAIT,
    )
}

/// Waits until what the bot's newest message shows is `text`.
fn wait_latest(person: &MatrixUser, room: &str, bot: &str, text: &str, dir: &TestDir) {
    let deadline = Instant::now() + WAIT;
    while Instant::now() < deadline {
        if person.latest_text(room, bot).as_deref() == Some(text) {
            return;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    panic!(
        "the room never showed {text:?} (it shows {:?}): {}",
        person.latest_text(room, bot),
        dir.log()
    );
}

#[test]
fn a_conversation_in_a_direct_room_with_a_live_draft_and_a_long_reply() {
    let server = Synapse::shared();
    let people = people(server);
    let dir = setup(server, &people, false);
    // About 24 KB of text, as much again of HTML: two or three messages
    // (a reply longer than three comes as a file, tested below).
    let words: Vec<String> = (0..2500).map(|i| format!("wörd{i}")).collect();
    let long = words.join(" ");
    let _bridge = start(
        &dir,
        &people,
        &[
            json!([{"text": "Hel"}, {"delay_ms": 1500}, {"text": "lo **there**"}]),
            json!([{"text": long}]),
        ],
        "s.jsonl",
    );
    let (alice, bot) = (&people.alice, &people.bot.user_id);
    let room = direct_room(alice, &people.bot, &dir);
    alice.send_text(&room, "hi");
    wait_latest(alice, &room, bot, "Hello **there**", &dir);
    let events = alice.messages(&room);
    let edits: Vec<&Event> = events
        .iter()
        .filter(|e| e.sender == *bot && matches!(e.relation(), Some(("m.replace", _))))
        .collect();
    assert!(!edits.is_empty(), "the draft was never edited");
    let last = edits.last().unwrap();
    assert_eq!(
        last.content["m.new_content"]["format"],
        "org.matrix.custom.html"
    );
    assert!(
        last.content["m.new_content"]["formatted_body"]
            .as_str()
            .unwrap()
            .contains("<strong>there</strong>"),
        "{}",
        last.content
    );
    assert_eq!(
        bot_messages(alice, &room, bot).len(),
        1,
        "one message, edited"
    );

    // A reply past one event: several messages, each well under 64 KiB.
    alice.send_text(&room, "talk a lot");
    let deadline = Instant::now() + WAIT;
    let shown = loop {
        let events = alice.messages(&room);
        let mut texts: Vec<String> = Vec::new();
        let messages: Vec<&Event> = events
            .iter()
            .filter(|e| {
                e.kind == "m.room.message"
                    && e.sender == *bot
                    && e.relation().is_none()
                    && e.body().is_some()
            })
            .skip(1)
            .collect();
        for message in &messages {
            let edited = crate::support::matrix::latest_text(
                &events
                    .iter()
                    .filter(|e| {
                        e.event_id == message.event_id
                            || e.relation().is_some_and(|(_, to)| to == message.event_id)
                    })
                    .cloned()
                    .collect::<Vec<_>>(),
                bot,
            )
            .unwrap();
            let size = edited.len();
            assert!(size < 30_000, "{size} bytes in one message");
            texts.push(edited);
        }
        let joined: Vec<String> = texts
            .iter()
            .flat_map(|t| t.split_whitespace().map(str::to_owned))
            .collect();
        if joined.len() >= words.len() {
            assert!(
                (2..=3).contains(&messages.len()),
                "{} messages",
                messages.len()
            );
            break joined;
        }
        assert!(
            Instant::now() < deadline,
            "the long reply never arrived whole ({} words): {}",
            joined.len(),
            dir.log()
        );
        std::thread::sleep(Duration::from_millis(300));
    };
    assert_eq!(shown, words);
    let verify = dir.command().arg("verify").output().unwrap();
    assert!(
        verify.status.success(),
        "{}",
        String::from_utf8_lossy(&verify.stdout)
    );
}

#[test]
fn approvals_are_answered_with_y_and_with_a_reaction() {
    let server = Synapse::shared();
    let people = people(server);
    let dir = setup(server, &people, false);
    let _bridge = start(
        &dir,
        &people,
        &[
            json!([{"tool_call": {"id": "w1", "name": "write_file", "arguments": {"path": "a.txt", "content": "one\n"}}}]),
            json!([{"text": "First."}]),
            json!([{"tool_call": {"id": "w2", "name": "write_file", "arguments": {"path": "b.txt", "content": "two\n"}}}]),
            json!([{"text": "Second."}]),
        ],
        "s.jsonl",
    );
    let (alice, bot) = (&people.alice, &people.bot.user_id);
    let room = direct_room(alice, &people.bot, &dir);
    alice.send_text(&room, "write a");
    let prompt = from_bot(alice, &room, bot, |b| {
        b.starts_with("Approval needed") && b.contains("a.txt")
    });
    assert!(
        prompt.body().unwrap().contains("Reply y"),
        "{:?}",
        prompt.body()
    );
    alice.send_text(&room, "y");
    from_bot(alice, &room, bot, |b| b == "First.");
    assert_eq!(
        std::fs::read_to_string(dir.workspace().join("a.txt")).unwrap(),
        "one\n"
    );
    alice.send_text(&room, "write b");
    let prompt = from_bot(alice, &room, bot, |b| {
        b.starts_with("Approval needed") && b.contains("b.txt")
    });
    alice.react(&room, &prompt.event_id, "👍");
    from_bot(alice, &room, bot, |b| b == "Second.");
    assert_eq!(
        std::fs::read_to_string(dir.workspace().join("b.txt")).unwrap(),
        "two\n"
    );
    // The prompt shows the answer, edited in place.
    wait_latest_of(alice, &room, &prompt.event_id, "→ allowed once", &dir);
}

/// Waits until the newest edit of `event_id` shows text ending in `end`.
fn wait_latest_of(person: &MatrixUser, room: &str, event_id: &str, end: &str, dir: &TestDir) {
    let deadline = Instant::now() + WAIT;
    while Instant::now() < deadline {
        let shown = person.messages(room).into_iter().rev().find_map(|e| {
            (e.relation() == Some(("m.replace", event_id)))
                .then(|| {
                    e.content["m.new_content"]["body"]
                        .as_str()
                        .map(str::to_owned)
                })
                .flatten()
        });
        if shown.as_deref().is_some_and(|s| s.ends_with(end)) {
            return;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    panic!("{event_id} never showed {end:?}: {}", dir.log());
}

/// The scripted model answers a session's turns in order, across restarts.
fn two_turns() -> [Value; 2] {
    [json!([{"text": "First."}]), json!([{"text": "Second."}])]
}

#[test]
fn a_restart_resumes_from_the_stored_token_and_answers_nothing_twice() {
    let server = Synapse::shared();
    let people = people(server);
    let dir = setup(server, &people, false);
    let (alice, bot) = (&people.alice, &people.bot.user_id);
    let bridge = start(&dir, &people, &two_turns(), "s.jsonl");
    let room = direct_room(alice, &people.bot, &dir);
    alice.send_text(&room, "one");
    from_bot(alice, &room, bot, |b| b == "First.");
    drop(bridge);
    // Written while nobody serves the account: taken after the restart.
    alice.send_text(&room, "two");
    let _bridge = start(&dir, &people, &two_turns(), "s.jsonl");
    from_bot(alice, &room, bot, |b| b == "Second.");
    std::thread::sleep(Duration::from_secs(3));
    let texts: Vec<String> = bot_messages(alice, &room, bot)
        .iter()
        .map(|e| e.body().unwrap().to_owned())
        .collect();
    assert_eq!(texts, ["First.", "Second."], "{}", dir.log());
}

#[test]
fn a_password_login_keeps_its_device_across_a_restart() {
    let server = Synapse::shared();
    let people = people(server);
    let dir = setup(server, &people, true);
    let (alice, bot) = (&people.alice, &people.bot.user_id);
    let bridge = start(&dir, &people, &two_turns(), "s.jsonl");
    let room = direct_room(alice, &people.bot, &dir);
    alice.send_text(&room, "one");
    from_bot(alice, &room, bot, |b| b == "First.");
    drop(bridge);
    let _bridge = start(&dir, &people, &two_turns(), "s.jsonl");
    alice.send_text(&room, "two");
    from_bot(alice, &room, bot, |b| b == "Second.");
    // One device of Pincer's (besides the one registration made).
    let devices = people.bot.ok("GET", "/_matrix/client/v3/devices", None);
    let pincer: Vec<&Value> = devices["devices"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|d| d["device_id"] != people.bot.device_id.as_str())
        .collect();
    assert_eq!(pincer.len(), 1, "{devices}");
    // A send repeated on that device, after the restart, under a txn id
    // already used is the same event.
    let device = pincer[0]["device_id"].as_str().unwrap();
    let again = server.login_as(bot, PASSWORD, Some(device));
    let txn = crate::support::matrix::fresh_txn_id();
    let content = json!({"msgtype": "m.text", "body": "once"});
    let first = again.send_raw(&room, "m.room.message", &content, &txn);
    let repeat = again.send_raw(&room, "m.room.message", &content, &txn);
    assert_eq!(first, repeat);
}

#[test]
fn invites_strangers_pairing_and_encrypted_rooms() {
    let server = Synapse::shared();
    let people = people(server);
    let dir = setup(server, &people, false);
    let (alice, bob, bot) = (&people.alice, &people.bob, &people.bot.user_id);
    let _bridge = start(&dir, &people, &[json!([{"text": "Hello."}])], "s.jsonl");
    // A stranger's invite is declined; an allowed user's taken.
    let strange = bob.create_room("strange", &[bot], false);
    let room = alice.create_room("team", &[bot, &bob.user_id], false);
    bob.join(&room);
    wait_joined(&people.bot, &room, &dir);
    let deadline = Instant::now() + WAIT;
    loop {
        let member = bob
            .state(&strange)
            .into_iter()
            .find(|e| e.kind == "m.room.member" && e.state_key.as_deref() == Some(bot.as_str()));
        if member.is_some_and(|m| m.content["membership"] == "leave") {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the stranger's invite was not declined"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    assert!(!people.bot.joined_rooms().contains(&strange));
    // In a group, only what is addressed is for Pincer; bob must pair.
    let localpart = bot.trim_start_matches('@').split(':').next().unwrap();
    bob.send_text(&room, "hello all");
    bob.send_text(&room, &format!("{localpart}: hello?"));
    let told = from_bot(bob, &room, bot, |b| b.contains("/pair"));
    assert!(
        told.body().unwrap().contains("pairing code"),
        "{:?}",
        told.body()
    );
    bob.send_text(&room, &format!("{localpart}: /pair open-sesame"));
    from_bot(bob, &room, bot, |b| b.starts_with("Paired"));
    bob.send_text(&room, &format!("{localpart}: now?"));
    from_bot(bob, &room, bot, |b| b == "Hello.");
    // An encrypted room gets the notice, once, and nothing is answered.
    let secret = alice.create_room("secret", &[bot], true);
    wait_joined(&people.bot, &secret, &dir);
    from_bot(alice, &secret, bot, |b| b.contains("encrypted"));
    std::thread::sleep(Duration::from_secs(2));
    assert_eq!(bot_messages(alice, &secret, bot).len(), 1);
}

// `kill -9` at each boundary of a send, with the homeserver behind a proxy
// that holds a request (before Synapse sees it, or after Synapse took it
// and before its answer goes back).

use crate::support::matrix::{Hold, MatrixProxy, shown_messages};

/// The config of [`setup`], the homeserver reached through `proxy`.
fn setup_behind(proxy: &MatrixProxy, people: &People, extra: &str) -> TestDir {
    setup_at(&proxy.url, people, extra)
}

/// The config of [`setup`] with the bot's token, the homeserver at
/// `homeserver`, and `extra` lines in the channel's table.
fn setup_at(homeserver: &str, people: &People, extra: &str) -> TestDir {
    let dir = TestDir::new();
    let config = dir.path().join("config").join("pincer");
    std::fs::create_dir_all(&config).unwrap();
    std::fs::write(
        config.join("config.toml"),
        format!(
            "[channels.matrix]\nkind = \"matrix\"\nhomeserver = \"{}\"\nuser_id = \"{}\"\naccess_token_env = \"MATRIX_TOKEN\"\nallow = [\"{}\"]\nworkspace = \"{}\"\ncoalesce_ms = 50\n{extra}",
            homeserver,
            people.bot.user_id,
            people.alice.user_id,
            dir.workspace().display(),
        ),
    )
    .unwrap();
    dir
}

/// Waits until the intent of `kind` has `status`: the intent.
fn wait_intent(dir: &TestDir, kind: &str, status: &str) -> Value {
    let deadline = Instant::now() + WAIT;
    loop {
        let intents = dir.outbox();
        if let Some(intent) = intents
            .iter()
            .find(|i| i["kind"] == kind && i["status"] == status)
        {
            return intent.clone();
        }
        assert!(
            Instant::now() < deadline,
            "no {kind} intent {status}: {intents:#?}\n{}",
            dir.log()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// `kill -9`.
fn crash(mut bridge: Bridge) {
    bridge.child.kill().unwrap();
    bridge.child.wait().unwrap();
}

/// Whether a request the proxy sees is the bot's message send (`edit`:
/// an `m.replace` edit; else a message of its own).
fn message_send(request: &crate::support::http::Request, edit: bool) -> bool {
    request.method == "PUT"
        && request.path.contains("/send/m.room.message/")
        && request.body["m.relates_to"]["rel_type"].is_string() == edit
}

fn verify(dir: &TestDir) {
    let out = dir.command().arg("verify").output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
}

#[test]
fn a_kill_after_synapse_took_a_reply_before_its_id_was_stored_sends_it_again_as_the_same_event() {
    let server = Synapse::shared();
    let proxy = MatrixProxy::start(&server.base_url());
    let people = people(server);
    let dir = setup_behind(&proxy, &people, "live_drafts = false\n");
    let (alice, bot) = (&people.alice, &people.bot.user_id);
    let script = [json!([{"text": "Once only."}])];
    let bridge = start(&dir, &people, &script, "s.jsonl");
    let room = direct_room(alice, &people.bot, &dir);
    // Synapse takes the reply; its answer (the event id) never reaches
    // the process, which is killed waiting for it.
    proxy.hold(Hold::Answer, |r| message_send(r, false));
    alice.send_text(&room, "hi");
    proxy.wait_caught(1, WAIT);
    let first = from_bot(alice, &room, bot, |b| b == "Once only.");
    let reply = wait_intent(&dir, "reply", "sending");
    assert!(reply["receipt"]["parts"].as_array().unwrap().is_empty());
    crash(bridge);
    proxy.stop_holding();
    proxy.release();
    // Recovery sends it again under the same transaction id: Synapse names
    // the event it has, and the room holds it once.
    let _bridge = start(&dir, &people, &script, "s.jsonl");
    let reply = wait_intent(&dir, "reply", "sent");
    assert_eq!(
        reply["receipt"]["parts"][0]["platform_id"], first.event_id,
        "{reply:#}"
    );
    std::thread::sleep(Duration::from_secs(2));
    let texts: Vec<String> = bot_messages(alice, &room, bot)
        .iter()
        .map(|e| e.body().unwrap().to_owned())
        .collect();
    assert_eq!(texts, ["Once only."], "{}", dir.log());
    assert!(dir.outbox().iter().all(|i| i["status"] == "sent"));
    verify(&dir);
}

#[test]
fn a_kill_after_synapse_took_a_draft_before_its_id_was_stored_names_it_again_and_deletes_it() {
    let server = Synapse::shared();
    let proxy = MatrixProxy::start(&server.base_url());
    let people = people(server);
    let dir = setup_behind(&proxy, &people, "");
    let (alice, bot) = (&people.alice, &people.bot.user_id);
    let script = [json!([{"text": "Partial"}, {"delay_ms": 3000}, {"text": " and the rest."}])];
    let bridge = start(&dir, &people, &script, "s.jsonl");
    let room = direct_room(alice, &people.bot, &dir);
    // The live draft's first send: Synapse shows it, the process never
    // learns its id.
    proxy.hold(Hold::Answer, |r| message_send(r, false));
    alice.send_text(&room, "hi");
    proxy.wait_caught(1, WAIT);
    let draft = from_bot(alice, &room, bot, |b| b == "Partial");
    wait_intent(&dir, "draft", "sending");
    crash(bridge);
    proxy.stop_holding();
    proxy.release();
    // Recovery sends the draft again with its key, which names the same
    // event, deletes it, and sends the reply afresh.
    let _bridge = start(&dir, &people, &script, "s.jsonl");
    let reply = wait_intent(&dir, "reply", "sent");
    let retracted = wait_intent(&dir, "draft", "cancelled");
    assert_eq!(
        retracted["receipt"]["parts"][0]["platform_id"], draft.event_id,
        "{retracted:#}"
    );
    let events = alice.messages(&room);
    let shown = shown_messages(&events, bot);
    assert_eq!(shown.len(), 2, "the draft once, and the reply: {shown:?}");
    assert_eq!(
        shown[0],
        (draft.event_id.clone(), None),
        "the draft is redacted"
    );
    let text = shown[1].1.clone().unwrap();
    assert_eq!(shown[1].0, reply["receipt"]["parts"][0]["platform_id"]);
    assert!(
        text.starts_with("Partial") && text.contains("interrupted"),
        "{text:?}"
    );
    verify(&dir);
}

#[test]
fn a_kill_during_a_live_draft_with_an_edit_in_flight_deletes_the_draft_and_the_late_edit_changes_nothing()
 {
    let server = Synapse::shared();
    let proxy = MatrixProxy::start(&server.base_url());
    let people = people(server);
    let dir = setup_behind(&proxy, &people, "");
    let (alice, bot) = (&people.alice, &people.bot.user_id);
    let script = [json!([
        {"text": "Partial"},
        {"delay_ms": 1500},
        {"text": " more"},
        {"delay_ms": 5000},
        {"text": " end."}
    ])];
    let bridge = start(&dir, &people, &script, "s.jsonl");
    let room = direct_room(alice, &people.bot, &dir);
    // The draft is shown, its id stored; its edit is on its way and reaches
    // Synapse only after the restarted process answered.
    proxy.hold(Hold::Request, |r| message_send(r, true));
    alice.send_text(&room, "hi");
    let draft = from_bot(alice, &room, bot, |b| b == "Partial");
    proxy.wait_caught(1, WAIT);
    wait_intent(&dir, "draft", "sent");
    crash(bridge);
    proxy.stop_holding();
    let _bridge = start(&dir, &people, &script, "s.jsonl");
    let reply = wait_intent(&dir, "reply", "sent");
    wait_intent(&dir, "draft", "cancelled");
    proxy.release();
    proxy.wait_settled(WAIT);
    // The draft is gone, the late edit with it; the reply shows whole.
    let events = alice.messages(&room);
    let shown = shown_messages(&events, bot);
    let reply_id = reply["receipt"]["parts"][0]["platform_id"]
        .as_str()
        .unwrap();
    assert_eq!(shown.len(), 2, "{shown:?}");
    assert_eq!(
        shown[0],
        (draft.event_id.clone(), None),
        "the draft is redacted"
    );
    assert_eq!(shown[1].0, reply_id);
    let text = shown[1].1.clone().unwrap();
    assert_eq!(text, reply["units"][0]["text"].as_str().unwrap());
    assert!(text.starts_with("Partial"), "{text:?}");
    verify(&dir);
}

#[test]
fn a_live_draft_whose_answer_is_lost_is_sent_again_with_its_key_and_finalized_in_place() {
    let server = Synapse::shared();
    let proxy = MatrixProxy::start(&server.base_url());
    let people = people(server);
    let dir = setup_behind(&proxy, &people, "");
    let (alice, bot) = (&people.alice, &people.bot.user_id);
    let script = [json!([{"text": "Partial"}, {"delay_ms": 1500}, {"text": " and the rest."}])];
    let _bridge = start(&dir, &people, &script, "s.jsonl");
    let room = direct_room(alice, &people.bot, &dir);
    // The draft's first send lands, its answer is lost: the process sends
    // it again with the same transaction id, Synapse names the same event.
    proxy.hold(Hold::Lose, |r| message_send(r, false));
    alice.send_text(&room, "hi");
    proxy.wait_caught(1, WAIT);
    proxy.stop_holding();
    let reply = wait_intent(&dir, "reply", "sent");
    let draft = wait_intent(&dir, "draft", "sent");
    let events = alice.messages(&room);
    let shown = shown_messages(&events, bot);
    // One message: the draft, finalized in place with the whole reply; no
    // "a stale draft may show" notice, nothing redacted.
    assert_eq!(shown.len(), 1, "{shown:?}");
    assert_eq!(
        shown[0],
        (
            draft["receipt"]["parts"][0]["platform_id"]
                .as_str()
                .unwrap()
                .to_owned(),
            Some("Partial and the rest.".to_owned())
        ),
        "{reply:#}"
    );
    verify(&dir);
}

/// A reply's files: a run that edited a file ends with `changes.diff` as an
/// `m.file` event of media uploaded to Synapse, captioned with the files it
/// changed; a reply longer than three messages comes as its first message
/// and the whole as `reply.md` (as on Telegram, `chat_attachments.rs`).
#[test]
fn a_runs_changes_and_a_long_reply_come_as_m_file_events() {
    let server = Synapse::shared();
    let people = people(server);
    let dir = setup_at(&server.base_url(), &people, "live_drafts = false\n");
    std::fs::write(dir.workspace().join("notes.md"), "old line\n").unwrap();
    let long: String = (0..2000)
        .map(|n| format!("Line {n} of a long answer.\n\n"))
        .collect();
    let _bridge = start_with_env(
        &dir,
        &people,
        &[
            json!([{"tool_call": {"id": "w1", "name": "write_file", "arguments": {"path": "notes.md", "content": "new line\n"}}}]),
            json!([{"text": "Updated the notes."}]),
            json!([{"text": long}]),
        ],
        "s.jsonl",
        &[("PINCER_MODE", "full")],
    );
    let (alice, bot) = (&people.alice, &people.bot.user_id);
    let room = direct_room(alice, &people.bot, &dir);
    let file_named = |name: &'static str| {
        move |e: &Event| {
            e.kind == "m.room.message"
                && e.sender == *bot
                && e.content["msgtype"] == "m.file"
                && e.content["filename"] == name
        }
    };

    alice.send_text(&room, "update the notes");
    let changes = alice.wait_for(&room, file_named("changes.diff"), WAIT);
    assert_eq!(
        changes.body(),
        Some("Changes to 1 file: notes.md"),
        "{}",
        changes.content
    );
    let url = changes.content["url"].as_str().unwrap();
    assert!(url.starts_with("mxc://"), "{url}");
    let diff = String::from_utf8(alice.download(url)).unwrap();
    assert!(
        diff.contains("--- a/notes.md\n+++ b/notes.md\n")
            && diff.contains("-old line\n+new line\n"),
        "{diff}"
    );
    assert_eq!(
        changes.content["info"],
        json!({"mimetype": "text/x-diff", "size": diff.len()})
    );
    // The reply, then the file, last in the room.
    let messages = bot_messages(alice, &room, bot);
    let bodies: Vec<&str> = messages.iter().map(|e| e.body().unwrap()).collect();
    assert_eq!(
        bodies,
        ["Updated the notes.", "Changes to 1 file: notes.md"],
        "{}",
        dir.log()
    );

    alice.send_text(&room, "tell me everything");
    let whole = alice.wait_for(&room, file_named("reply.md"), WAIT);
    let text = String::from_utf8(alice.download(whole.content["url"].as_str().unwrap())).unwrap();
    assert_eq!(text.trim_end(), long.trim_end(), "the whole reply");
    assert_eq!(whole.content["info"]["mimetype"], "text/markdown");
    assert_eq!(
        whole.body().unwrap(),
        format!(
            "The whole reply ({} characters) is attached.",
            text.chars().count()
        )
    );
    // One message of the reply's start (not four or more), then the file.
    let messages = bot_messages(alice, &room, bot);
    assert_eq!(messages.len(), 4, "{}", dir.log());
    let start = messages[2].body().unwrap();
    assert!(start.starts_with("Line 0 of a long answer."), "{start:.80}");
    assert!(!start.contains("Line 1999"));
    assert_eq!(messages[3].event_id, whole.event_id);
    verify(&dir);
}

#[test]
fn a_kill_after_synapse_took_a_file_message_sends_it_again_as_the_same_event_leaving_one_unused_upload()
 {
    let server = Synapse::shared();
    let proxy = MatrixProxy::start(&server.base_url());
    let people = people(server);
    let dir = setup_behind(&proxy, &people, "live_drafts = false\n");
    std::fs::write(dir.workspace().join("notes.md"), "old line\n").unwrap();
    let script = [
        json!([{"tool_call": {"id": "w1", "name": "write_file", "arguments": {"path": "notes.md", "content": "new line\n"}}}]),
        json!([{"text": "Updated the notes."}]),
    ];
    let full = [("PINCER_MODE", "full")];
    let bridge = start_with_env(&dir, &people, &script, "s.jsonl", &full);
    let (alice, bot) = (&people.alice, &people.bot.user_id);
    let room = direct_room(alice, &people.bot, &dir);
    // Synapse takes the `m.file` message; its answer never reaches the
    // process, which is killed waiting for it.
    proxy.hold(Hold::Answer, |r| {
        message_send(r, false) && r.body["msgtype"] == "m.file"
    });
    alice.send_text(&room, "update the notes");
    proxy.wait_caught(1, WAIT);
    let first = from_bot(alice, &room, bot, |b| b.starts_with("Changes to 1 file"));
    wait_intent(&dir, "reply", "sending");
    crash(bridge);
    proxy.stop_holding();
    proxy.release();
    // Recovery uploads the file again and sends the message under the same
    // transaction id: Synapse names the event it has.
    let _bridge = start_with_env(&dir, &people, &script, "s.jsonl", &full);
    let reply = wait_intent(&dir, "reply", "sent");
    assert_eq!(
        reply["receipt"]["parts"][1]["platform_id"], first.event_id,
        "{reply:#}"
    );
    std::thread::sleep(Duration::from_secs(2));
    let texts: Vec<String> = bot_messages(alice, &room, bot)
        .iter()
        .map(|e| e.body().unwrap().to_owned())
        .collect();
    assert_eq!(
        texts,
        ["Updated the notes.", "Changes to 1 file: notes.md"],
        "{}",
        dir.log()
    );
    // Two uploads of the diff: the one the message names, and one nothing
    // refers to.
    let admin = server.register(&server.fresh_localpart("admin"), PASSWORD, true);
    let media = admin.ok(
        "GET",
        &format!(
            "/_synapse/admin/v1/users/{}/media",
            crate::support::matrix::encode(bot)
        ),
        None,
    );
    let uploads: Vec<String> = media["media"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| format!("mxc://example.org/{}", m["media_id"].as_str().unwrap()))
        .collect();
    assert_eq!(uploads.len(), 2, "{media:#}");
    assert!(
        uploads.contains(&first.content["url"].as_str().unwrap().to_owned()),
        "{media:#}"
    );
    verify(&dir);
}
