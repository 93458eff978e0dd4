//! Chat chaos: `pincer serve --channel telegram` killed with `kill -9` at
//! random moments, over and over, against a fake Bot API that honours
//! `offset`, `limit` and the long-poll `timeout` and takes its time before
//! and after acting on a send or an edit (so kills land between the platform
//! accepting a message and Pincer knowing its id). Then one last process
//! drains everything, and the chat and the database are checked:
//!
//! - every message a person sent is recorded once and answered, or its
//!   answer is reported (`unknown_after_send`, listed by `pincer channels
//!   outbox`);
//! - no message was sent twice blindly: no text shows in the chat more often
//!   than Pincer decided to send it;
//! - no orphaned draft: every message in the chat is one Pincer knows (a
//!   reply or notice showing its final text, a draft finalized in place) or
//!   one it reports (the text of an `unknown_after_send` intent; for a draft,
//!   the run's reply says a stale draft may show above it);
//! - what the records call sent is what the chat shows, once every request
//!   in flight at a kill has landed (the fake acts on a request 40 to 250 ms
//!   after it arrives, half the draft previews and edits up to 2 s, even
//!   when the process that sent it is dead): every
//!   part of every `sent` intent shows exactly the text that intent carried,
//!   and a draft deleted to be replaced is gone;
//! - no stale draft in a private chat (issue 34): a private chat's live
//!   draft is a `sendMessageDraft` preview, never a message, so no draft
//!   intent is recorded there, no draft shows in the chat, and no reply says
//!   a stale draft may show above it — while drafts were shown; a quarter
//!   of the messages go to a group, whose drafts are messages edited in
//!   place and held to the rules above;
//! - every session a chat created is mapped to it;
//! - `pincer verify` passes.
//!
//! `PINCER_CHAOS_KILLS` sets the number of kills (50 by default; the soak,
//! `scripts/chaos_telegram.sh`, runs 200) and `PINCER_CHAOS_SEED` replays one
//! run's choices.

use crate::support::telegram as fake;

use std::collections::HashMap;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use crate::support::TestDir;
use fake::{FakeTelegram, TOKEN};
use serde_json::{Value, json};

const USERS: [i64; 2] = [42, 43];
/// A group both users write in: its drafts are messages edited in place.
const GROUP: i64 = -1001;
/// What a reply says first when its draft may be in the chat unnamed.
const DRAFT_LOST: &str = "[pincer] If a partial draft of this reply shows above, it is stale";
/// What a reply says first when its stale draft could not be deleted.
const DRAFT_STALE: &str = "The partial draft of this reply above is stale";

fn env_number(name: &str) -> Option<u64> {
    std::env::var(name).ok().and_then(|v| v.trim().parse().ok())
}

/// `pincer serve --channel telegram`; killed with SIGKILL on drop.
struct Serve {
    child: Child,
}

impl Serve {
    fn start(dir: &TestDir, script: &std::path::Path) -> Self {
        let stderr = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(dir.path().join("stderr.log"))
            .unwrap();
        let child = dir
            .command()
            .env("TELEGRAM_BOT_TOKEN", TOKEN)
            .args(["serve", "--channel", "telegram", "--provider", "scripted"])
            .arg("--script")
            .arg(script)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(stderr)
            .spawn()
            .unwrap();
        Self { child }
    }

    /// `kill -9`: no shutdown, no flush.
    fn kill(mut self) {
        self.child.kill().unwrap();
        self.child.wait().unwrap();
    }

    /// SIGTERM, and the exit it leads to.
    fn stop(mut self) {
        unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) };
        let status = self.child.wait().unwrap();
        assert!(status.success(), "serve stopped with {status}");
    }
}

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn database(dir: &TestDir) -> rusqlite::Connection {
    let db = rusqlite::Connection::open_with_flags(
        dir.data_dir().join("pincer.db"),
        rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY,
    )
    .unwrap();
    db.busy_timeout(Duration::from_secs(10)).unwrap();
    db
}

fn count(db: &rusqlite::Connection, sql: &str) -> i64 {
    db.query_row(sql, [], |row| row.get(0)).unwrap()
}

/// Whether everything sent so far is answered and nothing is left to send
/// (false too while the database is not there yet).
fn quiet(dir: &TestDir, messages: usize) -> bool {
    if !dir.data_dir().join("pincer.db").exists() {
        return false;
    }
    let db = database(dir);
    let count = |sql: &str| db.query_row(sql, [], |row| row.get::<_, i64>(0)).ok();
    count("SELECT COUNT(*) FROM channel_inbox") == Some(messages as i64)
        && count("SELECT COUNT(*) FROM channel_inbox WHERE state IN ('recorded', 'dispatched')")
            == Some(0)
        && count(
            "SELECT COUNT(*) FROM channel_outbox WHERE status IN ('pending', 'sending', 'committing')",
        ) == Some(0)
        && count("SELECT COUNT(*) FROM runs WHERE state IN ('queued', 'running', 'waiting')")
            == Some(0)
}

/// What a unit shows in the chat: its markup where it has one (the fake
/// keeps the text it was sent).
fn shown(unit: &Value) -> String {
    unit["markup"]
        .as_str()
        .or_else(|| unit["text"].as_str())
        .unwrap()
        .to_owned()
}

#[test]
#[allow(clippy::too_many_lines, reason = "one scenario, read top to bottom")]
fn random_kills_of_a_telegram_bridge_lose_nothing_and_orphan_nothing() {
    let kills = env_number("PINCER_CHAOS_KILLS").unwrap_or(50) as usize;
    let seed = env_number("PINCER_CHAOS_SEED").unwrap_or_else(|| fastrand::u64(..));
    eprintln!("chaos: {kills} kills, seed {seed} (PINCER_CHAOS_SEED={seed} replays the choices)");
    let mut rng = fastrand::Rng::with_seed(seed);

    let fake = FakeTelegram::start();
    fake.delay_between(
        Duration::from_millis(40),
        Duration::from_millis(250),
        Duration::from_millis(120),
    );
    // Half the draft previews and edits straggle, up to 2 s: a killed
    // process's draft then often lands after its successor answered the run
    // (in a private chat a preview the platform drops on its own, never a
    // message; in the group an edit of a draft message).
    fake.straggle("sendMessageDraft", 0.5, Duration::from_millis(2000));
    fake.straggle("editMessageText", 0.5, Duration::from_millis(2000));
    let dir = TestDir::new();
    let workspace = dir.workspace();
    let config = dir.path().join("config").join("pincer");
    std::fs::create_dir_all(&config).unwrap();
    std::fs::write(
        config.join("config.toml"),
        format!(
            "[channels.telegram]\napi_base = \"{}\"\nworkspace = \"{}\"\npoll_timeout_secs = 1\ncoalesce_ms = 50\nallow = [\"42\", \"43\"]\n",
            fake.url,
            workspace.display()
        ),
    )
    .unwrap();
    // Each turn streams a reply in three pieces over 0.2 to 1.6 s: a draft
    // first, edits when the pauses are long, the reply at the end.
    let turns: Vec<Value> = (1..=kills + 40)
        .map(|n| {
            json!([
                {"text": format!("Answer {n} begins.")},
                {"delay_ms": rng.u64(100..800)},
                {"text": format!(" Middle {n}.")},
                {"delay_ms": rng.u64(100..800)},
                {"text": format!(" End {n}.")},
            ])
        })
        .collect();
    let script = dir.script("s.jsonl", &turns);

    let started = Instant::now();
    let mut messages = 0usize;
    let mut say = |rng: &mut fastrand::Rng| {
        messages += 1;
        let user = USERS[rng.usize(..USERS.len())];
        // A quarter in the group, the rest in the user's private chat.
        if rng.u8(..4) == 0 {
            fake.group_says(GROUP, user, &format!("message {messages}"));
        } else {
            fake.user_says(user, &format!("message {messages}"));
        }
    };
    for _ in 0..kills {
        // A message while no process runs, one while it runs, or none.
        if rng.u8(..3) == 0 {
            say(&mut rng);
        }
        let serve = Serve::start(&dir, &script);
        let life = Duration::from_millis(rng.u64(50..1500));
        if rng.u8(..2) == 0 {
            let before = life.mul_f64(rng.f64());
            std::thread::sleep(before);
            say(&mut rng);
            std::thread::sleep(life - before);
        } else {
            std::thread::sleep(life);
        }
        serve.kill();
    }
    let messages = messages;

    // One last process answers whatever is left. It is stopped with SIGTERM
    // once quiet, so wait until it polls (its signal handler is in place by
    // then) even if there is nothing left to do.
    let polls = fake.polls().len();
    let serve = Serve::start(&dir, &script);
    let deadline = Instant::now() + Duration::from_secs(90);
    fake.wait_for("the last process polling", Duration::from_secs(30), |f| {
        f.polls().len() > polls
    });
    while !quiet(&dir, messages) {
        assert!(
            Instant::now() < deadline,
            "not quiet after 90 s; see {}",
            dir.path().join("stderr.log").display()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    serve.stop();
    let elapsed = started.elapsed();
    // Requests the killed processes sent may still be on their way in.
    std::thread::sleep(Duration::from_millis(2400));

    let db = database(&dir);
    // Every message recorded once and answered by a run whose reply intent
    // was sent or is reported.
    let inbox: Vec<(String, String, Option<String>)> = db
        .prepare("SELECT message_id, state, run_id FROM channel_inbox")
        .unwrap()
        .query_map([], |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?)))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    assert_eq!(inbox.len(), messages);
    let intents: Vec<Value> = db
        .prepare("SELECT intent FROM channel_outbox")
        .unwrap()
        .query_map([], |row| row.get::<_, String>(0))
        .unwrap()
        .map(|text| serde_json::from_str(&text.unwrap()).unwrap())
        .collect();
    let by_id: HashMap<&str, &Value> = intents
        .iter()
        .map(|i| (i["id"].as_str().unwrap(), i))
        .collect();
    for intent in &intents {
        let status = intent["status"].as_str().unwrap();
        // A draft deleted to be replaced by its reply is `cancelled`.
        let retracted = intent["kind"] == "draft" && status == "cancelled";
        assert!(
            status == "sent" || status == "unknown_after_send" || retracted,
            "an intent neither sent nor reported: {intent:#}"
        );
    }

    // What the records call sent is what the chat shows.
    let mut retracted_drafts = 0;
    for intent in &intents {
        let chat: i64 = intent["target"]["id"].as_str().unwrap().parse().unwrap();
        let shown_now: HashMap<String, String> = fake
            .chat(chat)
            .into_iter()
            .map(|(id, text)| (id.to_string(), text))
            .collect();
        let parts = intent["receipt"]["parts"].as_array().unwrap();
        match (
            intent["kind"].as_str().unwrap(),
            intent["status"].as_str().unwrap(),
        ) {
            ("draft", "cancelled") => {
                retracted_drafts += 1;
                for part in parts {
                    let id = part["platform_id"].as_str().unwrap();
                    assert!(
                        !shown_now.contains_key(id),
                        "a draft recorded as deleted shows: {id} {:?} {intent:#}",
                        shown_now[id]
                    );
                }
            }
            ("draft", _) => {}
            (_, "sent") => {
                for part in parts {
                    let id = part["platform_id"].as_str().unwrap();
                    let index = part["index"].as_u64().unwrap() as usize;
                    let carried = shown(&intent["units"][index]);
                    assert_eq!(
                        shown_now.get(id),
                        Some(&carried),
                        "message {id} recorded as sent does not show what its intent carried: {intent:#}"
                    );
                }
            }
            _ => {}
        }
    }
    let mut unknown_replies = std::collections::HashSet::new();
    for (message, state, run) in &inbox {
        assert_eq!(state, "done", "message {message} was not answered");
        let run = run.as_deref().unwrap();
        let reply = by_id
            .get(format!("reply:{run}").as_str())
            .unwrap_or_else(|| panic!("no reply for message {message} (run {run})"));
        if reply["status"] == "unknown_after_send" {
            unknown_replies.insert(run);
        }
    }

    // Every message in the chats is known or reported; none shows more often
    // than Pincer decided to send it.
    let mut named: HashMap<(String, String), (&Value, usize)> = HashMap::new();
    for intent in &intents {
        let chat = intent["target"]["id"].as_str().unwrap().to_owned();
        for part in intent["receipt"]["parts"].as_array().unwrap() {
            let id = part["platform_id"].as_str().unwrap().to_owned();
            let index = part["index"].as_u64().unwrap() as usize;
            // A finalized draft is named by its draft intent and its reply:
            // the reply's text is the one it must show.
            let entry = named.entry((chat.clone(), id)).or_insert((intent, index));
            if entry.0["kind"] == "draft" {
                *entry = (intent, index);
            }
        }
    }
    let mut drafts_reported = 0;
    let mut private_reported = 0;
    let mut finalized = 0;
    // Each reported intent explains at most one message.
    let mut explained: std::collections::HashSet<&str> = std::collections::HashSet::new();
    for user in USERS.into_iter().chain([GROUP]) {
        let chat = user.to_string();
        let mut decided: HashMap<String, usize> = HashMap::new();
        for intent in intents.iter().filter(|i| i["target"]["id"] == chat) {
            for unit in intent["units"].as_array().unwrap() {
                *decided.entry(shown(unit)).or_default() += 1;
            }
        }
        let mut seen: HashMap<String, usize> = HashMap::new();
        for (id, text) in fake.chat(user) {
            *seen.entry(text.clone()).or_default() += 1;
            if let Some((intent, index)) = named.get(&(chat.clone(), id.to_string())) {
                assert_ne!(
                    intent["kind"], "draft",
                    "an orphaned draft (its id known, never finalized): {text:?} {intent:#}"
                );
                assert_eq!(
                    text,
                    shown(&intent["units"][*index]),
                    "message {id} does not show its final text"
                );
                if intent["edit_of"].is_string() {
                    finalized += 1;
                }
                continue;
            }
            // Unnamed: the platform took it and Pincer never learnt its id.
            // It must be the text of an intent Pincer reports.
            let reported = intents.iter().find(|i| {
                let inflight = i["inflight"].as_u64().unwrap_or(0) as usize;
                i["target"]["id"] == chat
                    && i["status"] == "unknown_after_send"
                    && i["units"][inflight].is_object()
                    && shown(&i["units"][inflight]) == text
                    && !explained.contains(i["id"].as_str().unwrap())
            });
            let Some(reported) = reported else {
                panic!("an orphaned message in chat {chat}: {id} {text:?}");
            };
            explained.insert(reported["id"].as_str().unwrap());
            if reported["kind"] == "draft" {
                drafts_reported += 1;
                if user != GROUP {
                    private_reported += 1;
                }
                let run = reported["run_id"].as_str().unwrap();
                let reply = by_id[format!("reply:{run}").as_str()];
                assert!(
                    shown(&reply["units"][0]).starts_with(DRAFT_LOST),
                    "a draft left unnamed and its reply does not say so: {text:?} {reply:#}"
                );
            }
        }
        for (text, times) in &seen {
            let allowed = decided.get(text).copied().unwrap_or(0);
            assert!(
                *times <= allowed,
                "sent {times} times, decided {allowed}: {text:?} (a blind duplicate)"
            );
        }
    }

    // No stale draft in a private chat: none recorded, none reported, no
    // reply naming one; and the chats did see drafts, as previews.
    let private = |i: &&Value| {
        i["target"]["id"]
            .as_str()
            .is_some_and(|chat| USERS.iter().any(|u| chat == u.to_string().as_str()))
    };
    let draft_intents = intents
        .iter()
        .filter(private)
        .filter(|i| i["kind"] == "draft")
        .count();
    let naming_stale = intents
        .iter()
        .filter(private)
        .filter(|i| {
            i["units"]
                .as_array()
                .unwrap()
                .iter()
                .any(|u| shown(u).contains(DRAFT_LOST) || shown(u).contains(DRAFT_STALE))
        })
        .count();
    let retracted_private = intents
        .iter()
        .filter(private)
        .filter(|i| i["kind"] == "draft" && i["status"] == "cancelled")
        .count();
    let stale_drafts = private_reported + retracted_private + naming_stale;
    assert_eq!(
        (stale_drafts, draft_intents),
        (0, 0),
        "stale drafts in private chats: {private_reported} shown unnamed, {retracted_private} deleted and replaced, {naming_stale} replies naming one; {draft_intents} draft messages recorded there"
    );
    let previews: usize = USERS.iter().map(|u| fake.drafts(*u).len()).sum();
    assert!(previews > 0, "no draft was shown in a private chat");

    // Every session a chat created leads back to it.
    let orphans = count(
        &db,
        "SELECT COUNT(*) FROM sessions s WHERE NOT EXISTS
            (SELECT 1 FROM channel_sessions c WHERE c.session_id = s.id)",
    );
    assert_eq!(orphans, 0, "sessions no chat maps to");
    drop(db);

    let verify = dir.command().arg("verify").output().unwrap();
    assert!(
        verify.status.success(),
        "pincer verify: {}{}",
        String::from_utf8_lossy(&verify.stdout),
        String::from_utf8_lossy(&verify.stderr)
    );
    let unknown = intents
        .iter()
        .filter(|i| i["status"] == "unknown_after_send")
        .count();
    eprintln!(
        "chaos: {kills} kills, {messages} messages, {} intents ({unknown} unknown_after_send: {} replies), {previews} draft previews shown in private chats, {stale_drafts} stale drafts there; {drafts_reported} drafts shown unnamed and reported, {finalized} finalized in place, {retracted_drafts} deleted and replaced (all in the group); 0 sent intents showing other text, {:.1} s",
        intents.len(),
        unknown_replies.len(),
        elapsed.as_secs_f64()
    );
}
