//! The adapter conformance suite: the lifecycle promises of
//! `docs/channels.md` checked the same way for every adapter, against its
//! test server (`Platform`): a conversation, a redelivered event answered
//! once, a stranger refused then paired, an approval answered in the chat,
//! a reply decided while the platform is down surviving a `kill -9` and
//! arriving once, `pincer verify` after.
//! Runs for Telegram, IRC, Matrix, email and the webhook. Each platform's
//! own file tests what only it has (drafts, lines, keys).
//! Slack runs it too, against the fake Slack (`support::slack`).

use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::support::TestDir;
use crate::support::irc::{IrcServer, IrcUser};
use crate::support::mail::{MailOptions, MailServer};
use crate::support::matrix::{MatrixUser, Synapse};
use crate::support::telegram::{FakeTelegram, TOKEN};
use crate::support::webhook::{Peer, SECRET, deliver};

const WAIT: Duration = Duration::from_secs(30);
const PAIRING_CODE: &str = "conformance-code";

/// A platform under test: its server, and people on it.
trait Platform {
    /// The channel's name.
    fn channel(&self) -> &'static str;
    /// The `[channels.NAME]` table's platform keys (`kind` and the rest).
    fn keys(&self) -> String;
    /// The allowed person's sender id.
    fn person(&self) -> String;
    /// Variables the bridge needs (tokens).
    fn env(&self) -> Vec<(&'static str, String)>;
    /// Forgets what Pincer sent so far: a check sees only its own.
    fn mark(&mut self);
    /// Waits until a (re)started bridge receives.
    fn ready(&mut self, dir: &TestDir);
    /// More arguments for `pincer serve` (the HTTP face, for a platform
    /// that delivers over HTTP).
    fn serve_args(&self, _dir: &TestDir) -> Vec<String> {
        Vec::new()
    }
    /// The allowed person writes privately.
    fn person_says(&mut self, text: &str);
    /// Someone not allowed writes privately.
    fn stranger_says(&mut self, text: &str);
    /// The next message Pincer sent the person, or the stranger.
    fn next_for_person(&mut self, within: Duration) -> Option<String>;
    fn next_for_stranger(&mut self, within: Duration) -> Option<String>;
    /// The person answers Pincer's last message (by mail: a reply in its
    /// thread); elsewhere the same as `person_says`.
    fn person_answers(&mut self, text: &str) {
        self.person_says(text);
    }
    /// Delivers the person's last message again, as the platform does
    /// after a lost acknowledgement; `false` where it never does.
    fn redeliver(&mut self) -> bool;
    /// Sending fails from now on, as with the platform down; `up` ends it.
    fn down(&mut self);
    fn up(&mut self);
}

struct Bridge {
    child: Child,
}

impl Bridge {
    fn start(dir: &TestDir, platform: &dyn Platform, script: &[Value]) -> Self {
        let script = dir.script(&format!("s{}.jsonl", crate::support::unique()), script);
        let mut command = dir.command();
        for (key, value) in platform.env() {
            command.env(key, value);
        }
        let child = command
            .env("PINCER_PAIRING_CODE", PAIRING_CODE)
            .args(["serve", "--channel", platform.channel()])
            .args(platform.serve_args(dir))
            .args(["--provider", "scripted", "--script"])
            .arg(&script)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(dir.path().join("stderr.log")).unwrap())
            .spawn()
            .unwrap();
        Self { child }
    }

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

fn setup(platform: &dyn Platform) -> TestDir {
    let dir = TestDir::new();
    let config = dir.path().join("config").join("pincer");
    std::fs::create_dir_all(&config).unwrap();
    std::fs::write(
        config.join("config.toml"),
        format!(
            "[channels.{}]\n{}allow = [\"{}\"]\nworkspace = \"{}\"\ncoalesce_ms = 50\nlive_drafts = false\n",
            platform.channel(),
            platform.keys(),
            platform.person(),
            dir.workspace().display()
        ),
    )
    .unwrap();
    dir
}

fn verify(dir: &TestDir) {
    let out = dir.command().arg("verify").output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
}

/// Every check, each with a bridge of its own.
fn conforms(platform: &mut dyn Platform) {
    a_conversation(platform);
    a_redelivery_is_answered_once(platform);
    a_stranger_is_refused_then_paired(platform);
    an_approval_is_answered_in_the_chat(platform);
    a_reply_waiting_for_the_platform_survives_a_kill(platform);
}

fn a_conversation(platform: &mut dyn Platform) {
    let dir = setup(platform);
    platform.mark();
    let _bridge = Bridge::start(&dir, platform, &[json!([{"text": "Hello **there**."}])]);
    platform.ready(&dir);
    platform.person_says("hi");
    let reply = platform.next_for_person(WAIT);
    assert!(
        reply
            .as_deref()
            .is_some_and(|r| r.contains("Hello") && r.contains("there")),
        "{}: {reply:?}\n{}",
        platform.channel(),
        dir.log()
    );
    verify(&dir);
}

fn a_redelivery_is_answered_once(platform: &mut dyn Platform) {
    let dir = setup(platform);
    platform.mark();
    let _bridge = Bridge::start(
        &dir,
        platform,
        &[json!([{"text": "Once."}]), json!([{"text": "Twice!"}])],
    );
    platform.ready(&dir);
    platform.person_says("once please");
    assert_eq!(platform.next_for_person(WAIT).as_deref(), Some("Once."));
    if !platform.redeliver() {
        return;
    }
    assert_eq!(
        platform.next_for_person(Duration::from_secs(2)),
        None,
        "{}: a redelivered message was answered again",
        platform.channel()
    );
    let replies = dir
        .outbox()
        .into_iter()
        .filter(|i| i["kind"] == "reply")
        .count();
    assert_eq!(replies, 1);
}

fn a_stranger_is_refused_then_paired(platform: &mut dyn Platform) {
    let dir = setup(platform);
    platform.mark();
    let _bridge = Bridge::start(&dir, platform, &[json!([{"text": "Welcome."}])]);
    platform.ready(&dir);
    platform.stranger_says("let me in");
    let told = platform.next_for_stranger(WAIT).unwrap_or_default();
    assert!(told.contains("/pair"), "{}: {told}", platform.channel());
    platform.stranger_says("/pair wrong");
    let refused = platform.next_for_stranger(WAIT).unwrap_or_default();
    assert!(
        refused.contains("not right"),
        "{}: {refused}",
        platform.channel()
    );
    platform.stranger_says(&format!("/pair {PAIRING_CODE}"));
    let paired = platform.next_for_stranger(WAIT).unwrap_or_default();
    assert!(
        paired.starts_with("Paired"),
        "{}: {paired}",
        platform.channel()
    );
    platform.stranger_says("now?");
    assert_eq!(
        platform.next_for_stranger(WAIT).as_deref(),
        Some("Welcome.")
    );
}

/// A file write asks first (`supervised`); the person's `y` in the chat
/// lets it run, and the reply follows.
fn an_approval_is_answered_in_the_chat(platform: &mut dyn Platform) {
    let dir = setup(platform);
    platform.mark();
    let _bridge = Bridge::start(
        &dir,
        platform,
        &[
            json!([{"tool_call": {"name": "write_file", "arguments": {"path": "note.txt", "content": "approved\n"}}}]),
            json!([{"text": "Written."}]),
        ],
    );
    platform.ready(&dir);
    platform.person_says("write the note");
    let asked = platform.next_for_person(WAIT).unwrap_or_default();
    assert!(
        asked.contains("note.txt"),
        "{}: no approval prompt: {asked:?}\n{}",
        platform.channel(),
        dir.log()
    );
    assert!(!dir.workspace().join("note.txt").exists());
    platform.person_answers("y");
    let deadline = Instant::now() + WAIT;
    loop {
        let next = platform
            .next_for_person(deadline.saturating_duration_since(Instant::now()))
            .unwrap_or_else(|| {
                panic!(
                    "{}: no reply after the approval\n{}",
                    platform.channel(),
                    dir.log()
                )
            });
        if next.contains("Written.") {
            break;
        }
    }
    assert_eq!(
        std::fs::read_to_string(dir.workspace().join("note.txt")).unwrap(),
        "approved\n"
    );
    verify(&dir);
}

fn a_reply_waiting_for_the_platform_survives_a_kill(platform: &mut dyn Platform) {
    let dir = setup(platform);
    platform.mark();
    let bridge = Bridge::start(
        &dir,
        platform,
        &[json!([{"delay_ms": 1000}, {"text": "Made it."}])],
    );
    platform.ready(&dir);
    platform.person_says("answer later");
    // Taken in (its chat's session made) before the platform goes away.
    let deadline = Instant::now() + WAIT;
    loop {
        let out = dir
            .command()
            .args(["sessions", "list", "--json"])
            .output()
            .unwrap();
        if !out.stdout.is_empty() {
            break;
        }
        assert!(Instant::now() < deadline, "{}", dir.log());
        std::thread::sleep(Duration::from_millis(50));
    }
    platform.down();
    let deadline = Instant::now() + WAIT;
    while !dir.outbox().iter().any(|i| {
        i["kind"] == "reply" && i["status"] == "pending" && i["attempt"].as_u64() > Some(0)
    }) {
        assert!(
            Instant::now() < deadline,
            "{}: no retried reply: {:#?}",
            platform.channel(),
            dir.outbox()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    bridge.crash();
    platform.up();
    let _bridge = Bridge::start(&dir, platform, &[]);
    platform.ready(&dir);
    let reply = platform.next_for_person(WAIT);
    assert_eq!(
        reply.as_deref(),
        Some("Made it."),
        "{}: {:#?} {}\n{}",
        platform.channel(),
        dir.outbox(),
        String::from_utf8_lossy(
            &dir.command()
                .args(["channels", "outbox"])
                .output()
                .unwrap()
                .stderr
        ),
        dir.log()
    );
    assert_eq!(platform.next_for_person(Duration::from_secs(2)), None);
    let reply = dir
        .outbox()
        .into_iter()
        .find(|i| i["kind"] == "reply")
        .unwrap();
    assert_eq!(reply["status"], "sent");
    verify(&dir);
}

/// Telegram, against the fake Bot API.
struct Telegram {
    fake: FakeTelegram,
    seen: Vec<usize>,
    last_update: i64,
}

const PERSON: i64 = 42;
const STRANGER: i64 = 77;

impl Telegram {
    fn next(&mut self, chat: i64, slot: usize, within: Duration) -> Option<String> {
        let deadline = Instant::now() + within;
        loop {
            let messages = self.fake.chat(chat);
            if messages.len() > self.seen[slot] {
                self.seen[slot] += 1;
                return Some(messages[self.seen[slot] - 1].1.clone());
            }
            if Instant::now() > deadline {
                return None;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Platform for Telegram {
    fn channel(&self) -> &'static str {
        "telegram"
    }
    fn keys(&self) -> String {
        format!("api_base = \"{}\"\npoll_timeout_secs = 1\n", self.fake.url)
    }
    fn person(&self) -> String {
        PERSON.to_string()
    }
    fn env(&self) -> Vec<(&'static str, String)> {
        vec![("TELEGRAM_BOT_TOKEN", TOKEN.to_owned())]
    }
    fn mark(&mut self) {
        // A new bridge (a new store) would fetch what the last one did not
        // confirm: as with a bot new to its chats, there is none.
        self.fake.forget_updates();
        self.seen = vec![self.fake.chat(PERSON).len(), self.fake.chat(STRANGER).len()];
    }
    fn ready(&mut self, dir: &TestDir) {
        connected(dir);
    }
    fn person_says(&mut self, text: &str) {
        self.last_update = self.fake.user_says(PERSON, text);
    }
    fn stranger_says(&mut self, text: &str) {
        self.fake.user_says(STRANGER, text);
    }
    fn next_for_person(&mut self, within: Duration) -> Option<String> {
        self.next(PERSON, 0, within)
    }
    fn next_for_stranger(&mut self, within: Duration) -> Option<String> {
        self.next(STRANGER, 1, within)
    }
    fn redeliver(&mut self) -> bool {
        self.fake.redeliver(self.last_update);
        true
    }
    fn down(&mut self) {
        self.fake.fail(
            "sendMessage",
            10_000,
            502,
            json!({"ok": false, "error_code": 502, "description": "Bad Gateway"}),
        );
    }
    fn up(&mut self) {
        self.fake.release("sendMessage");
    }
}

/// Discord, against the fake Discord: a person and a stranger, each in a
/// direct-message channel of their own.
struct Discord {
    fake: crate::support::discord::FakeDiscord,
    /// Messages in the person's and the stranger's channels seen so far.
    seen: [usize; 2],
    /// Identifies the fake had seen when the last bridge was ready.
    identified: usize,
}

const DISCORD_PERSON: (&str, &str) = ("8001", "4242");
const DISCORD_STRANGER: (&str, &str) = ("8002", "7777");

impl Discord {
    fn next(&mut self, slot: usize, within: Duration) -> Option<String> {
        let channel = [DISCORD_PERSON.0, DISCORD_STRANGER.0][slot];
        let deadline = Instant::now() + within;
        loop {
            let texts = self.fake.texts(channel);
            if texts.len() > self.seen[slot] {
                self.seen[slot] += 1;
                return Some(texts[self.seen[slot] - 1].clone());
            }
            if Instant::now() > deadline {
                return None;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Platform for Discord {
    fn channel(&self) -> &'static str {
        "discord"
    }
    fn keys(&self) -> String {
        format!(
            "api_base = \"{}\"\ngateway_url = \"{}\"\n",
            self.fake.api, self.fake.gateway
        )
    }
    fn person(&self) -> String {
        DISCORD_PERSON.1.to_owned()
    }
    fn env(&self) -> Vec<(&'static str, String)> {
        vec![(
            "DISCORD_BOT_TOKEN",
            crate::support::discord::TOKEN.to_owned(),
        )]
    }
    fn mark(&mut self) {
        self.seen = [
            self.fake.texts(DISCORD_PERSON.0).len(),
            self.fake.texts(DISCORD_STRANGER.0).len(),
        ];
    }
    fn ready(&mut self, _dir: &TestDir) {
        // A (re)started bridge identifies afresh: its session is open.
        let before = self.identified;
        self.fake.wait_for("a bridge identified", WAIT, |f| {
            f.connections()
                .iter()
                .filter(|c| c.opening["op"] == 2)
                .count()
                > before
        });
        self.identified = before + 1;
    }
    fn person_says(&mut self, text: &str) {
        self.fake
            .user_says(DISCORD_PERSON.0, DISCORD_PERSON.1, text);
    }
    fn stranger_says(&mut self, text: &str) {
        self.fake
            .user_says(DISCORD_STRANGER.0, DISCORD_STRANGER.1, text);
    }
    fn next_for_person(&mut self, within: Duration) -> Option<String> {
        self.next(0, within)
    }
    fn next_for_stranger(&mut self, within: Duration) -> Option<String> {
        self.next(1, within)
    }
    fn redeliver(&mut self) -> bool {
        self.fake.replay_last();
        true
    }
    fn down(&mut self) {
        self.fake.down(true);
    }
    fn up(&mut self) {
        self.fake.down(false);
    }
}

#[test]
fn discord_conforms() {
    let mut platform = Discord {
        fake: crate::support::discord::FakeDiscord::start(),
        seen: [0, 0],
        identified: 0,
    };
    conforms(&mut platform);
}

#[test]
fn telegram_conforms() {
    let fake = FakeTelegram::start();
    let mut platform = Telegram {
        fake,
        seen: vec![0, 0],
        last_update: 0,
    };
    conforms(&mut platform);
}

/// IRC, against a real ngIRCd: alice allowed, bob not.
struct Irc {
    server: IrcServer,
    alice: Option<IrcUser>,
    bob: Option<IrcUser>,
}

impl Irc {
    fn connect(&mut self) {
        self.alice = Some(IrcUser::connect(&self.server, "alice"));
        self.bob = Some(IrcUser::connect(&self.server, "bob"));
    }

    fn next(user: &mut IrcUser, within: Duration) -> Option<String> {
        user.try_expect(|m| m.is("PRIVMSG") && m.nick() == Some("pincer"), within)
            .map(|m| m.text().to_owned())
    }
}

impl Platform for Irc {
    fn channel(&self) -> &'static str {
        "irc"
    }
    fn keys(&self) -> String {
        format!(
            "server = \"{}\"\nnick = \"pincer\"\nchannels = [\"#team\"]\n",
            self.server.addr()
        )
    }
    fn person(&self) -> String {
        "alice".to_owned()
    }
    fn env(&self) -> Vec<(&'static str, String)> {
        Vec::new()
    }
    fn ready(&mut self, dir: &TestDir) {
        if self.alice.is_none() {
            self.connect();
        }
        let alice = self.alice.as_mut().unwrap();
        // The bot is on the server once its nick answers.
        let deadline = Instant::now() + WAIT;
        loop {
            alice.send_raw("ISON pincer");
            let ison = alice.expect(|m| m.is("303"), WAIT);
            if ison.text().split(' ').any(|n| n == "pincer") {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "the bot never came: {}",
                dir.log()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }
    fn mark(&mut self) {
        for user in [self.alice.as_mut(), self.bob.as_mut()]
            .into_iter()
            .flatten()
        {
            user.drain(Duration::from_millis(100));
        }
    }
    fn person_says(&mut self, text: &str) {
        self.alice.as_mut().unwrap().privmsg("pincer", text);
    }
    fn stranger_says(&mut self, text: &str) {
        self.bob.as_mut().unwrap().privmsg("pincer", text);
    }
    fn next_for_person(&mut self, within: Duration) -> Option<String> {
        Self::next(self.alice.as_mut().unwrap(), within)
    }
    fn next_for_stranger(&mut self, within: Duration) -> Option<String> {
        Self::next(self.bob.as_mut().unwrap(), within)
    }
    /// IRC never delivers a message twice.
    fn redeliver(&mut self) -> bool {
        false
    }
    fn down(&mut self) {
        self.server.stop();
        self.alice = None;
        self.bob = None;
    }
    fn up(&mut self) {
        self.server.restart();
        self.connect();
    }
}

#[test]
fn irc_conforms() {
    let mut platform = Irc {
        server: IrcServer::start_default(),
        alice: None,
        bob: None,
    };
    conforms(&mut platform);
}

/// Waits until the bridge says its platform answers (`pincer channels
/// status`): its first sync or poll is done.
fn connected(dir: &TestDir) {
    let deadline = Instant::now() + WAIT;
    loop {
        let out = dir
            .command()
            .args(["channels", "status", "--json"])
            .output()
            .unwrap();
        let up = String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .any(|s| s["connected"] == true);
        if up {
            return;
        }
        assert!(Instant::now() < deadline, "never connected: {}", dir.log());
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Matrix, against a real Synapse of its own (stopped for `down`): alice
/// allowed, in a direct room with the bot; bob not, in a room of the
/// three, addressing the bot there.
struct Matrix {
    server: Synapse,
    bot: MatrixUser,
    alice: MatrixUser,
    bob: MatrixUser,
    direct: Option<String>,
    group: Option<String>,
    seen: [usize; 2],
    /// Marked before the rooms were made: marked again once they are.
    marked_early: bool,
}

const MATRIX_PASSWORD: &str = "conformance-password";

impl Matrix {
    /// The bot's messages in `room` (edits aside).
    fn bot_messages(&self, room: &str) -> Vec<String> {
        self.alice
            .messages(room)
            .into_iter()
            .filter(|e| e.kind == "m.room.message" && e.sender == self.bot.user_id)
            .filter(|e| e.relation().is_none())
            .filter_map(|e| e.body().map(str::to_owned))
            .collect()
    }

    fn next(&mut self, slot: usize, within: Duration) -> Option<String> {
        let room = if slot == 0 {
            self.direct.clone()
        } else {
            self.group.clone()
        }?;
        let deadline = Instant::now() + within;
        loop {
            let messages = self.bot_messages(&room);
            if messages.len() > self.seen[slot] {
                self.seen[slot] += 1;
                return Some(messages[self.seen[slot] - 1].clone());
            }
            if Instant::now() > deadline {
                return None;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    fn joined(&self, room: &str, dir: &TestDir) {
        let deadline = Instant::now() + WAIT;
        while !self.bot.joined_rooms().iter().any(|r| r == room) {
            assert!(
                Instant::now() < deadline,
                "the bot never joined: {}",
                dir.log()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

impl Platform for Matrix {
    fn channel(&self) -> &'static str {
        "matrix"
    }
    fn keys(&self) -> String {
        format!(
            "kind = \"matrix\"\nhomeserver = \"{}\"\nuser_id = \"{}\"\npassword_env = \"MATRIX_PASSWORD\"\n",
            self.server.base_url(),
            self.bot.user_id
        )
    }
    fn person(&self) -> String {
        self.alice.user_id.clone()
    }
    fn env(&self) -> Vec<(&'static str, String)> {
        vec![("MATRIX_PASSWORD", MATRIX_PASSWORD.to_owned())]
    }
    fn ready(&mut self, dir: &TestDir) {
        connected(dir);
        if self.direct.is_none() {
            let direct = self.alice.create_room("dm", &[&self.bot.user_id], false);
            self.joined(&direct, dir);
            let group =
                self.alice
                    .create_room("team", &[&self.bot.user_id, &self.bob.user_id], false);
            self.joined(&group, dir);
            self.bob.join(&group);
            self.direct = Some(direct);
            self.group = Some(group);
        }
        if self.marked_early {
            self.marked_early = false;
            self.mark();
        }
    }
    fn mark(&mut self) {
        // Before the rooms exist (the first check): again once they do.
        if self.direct.is_none() {
            self.marked_early = true;
        }
        for (slot, room) in [self.direct.clone(), self.group.clone()]
            .into_iter()
            .enumerate()
        {
            self.seen[slot] = room.map_or(0, |r| self.bot_messages(&r).len());
        }
    }
    fn person_says(&mut self, text: &str) {
        let room = self.direct.clone().unwrap();
        self.alice.send_text(&room, text);
    }
    fn stranger_says(&mut self, text: &str) {
        let room = self.group.clone().unwrap();
        let localpart = self
            .bot
            .user_id
            .trim_start_matches('@')
            .split(':')
            .next()
            .unwrap()
            .to_owned();
        self.bob.send_text(&room, &format!("{localpart}: {text}"));
    }
    fn next_for_person(&mut self, within: Duration) -> Option<String> {
        self.next(0, within)
    }
    fn next_for_stranger(&mut self, within: Duration) -> Option<String> {
        self.next(1, within)
    }
    /// Synapse sends an event once per `since`; the bridge's restart from
    /// its stored `since` is `tests/it/matrix.rs`'s.
    fn redeliver(&mut self) -> bool {
        false
    }
    fn down(&mut self) {
        self.server.stop();
    }
    fn up(&mut self) {
        self.server.restart();
    }
}

#[test]
fn matrix_conforms() {
    let server = Synapse::start();
    let register =
        |prefix: &str| server.register(&server.fresh_localpart(prefix), MATRIX_PASSWORD, false);
    let (bot, alice, bob) = (register("pincer"), register("alice"), register("bob"));
    let mut platform = Matrix {
        server,
        bot,
        alice,
        bob,
        direct: None,
        group: None,
        seen: [0, 0],
        marked_early: false,
    };
    conforms(&mut platform);
}

/// Email, against a real Dovecot and SMTP server (stopped for `down`):
/// alice allowed, bob not, each mail a thread of its own.
struct Email {
    server: MailServer,
    seen: [usize; 2],
    /// The person's last mail: its text and `Message-ID`.
    last: Option<(String, String)>,
}

impl Email {
    fn pincer_mails(&self, user: &str) -> Vec<String> {
        self.server
            .fetch_all(user)
            .into_iter()
            .filter(|m| {
                m.headers
                    .from
                    .as_deref()
                    .is_some_and(|f| f.contains("pincer@example.org"))
            })
            .map(|m| m.text.unwrap_or_default().trim().to_owned())
            .collect()
    }

    fn next(&mut self, slot: usize, within: Duration) -> Option<String> {
        let user = if slot == 0 { "alice" } else { "bob" };
        let deadline = Instant::now() + within;
        loop {
            let mails = self.pincer_mails(user);
            if mails.len() > self.seen[slot] {
                self.seen[slot] += 1;
                return Some(mails[self.seen[slot] - 1].clone());
            }
            if Instant::now() > deadline {
                return None;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

impl Platform for Email {
    fn channel(&self) -> &'static str {
        "email"
    }
    fn keys(&self) -> String {
        format!(
            "kind = \"email\"\nimap = \"127.0.0.1:{}\"\nsmtp = \"127.0.0.1:{}\"\ntls = \"starttls\"\ntls_ca = \"{}\"\nusername = \"pincer\"\npassword_env = \"MAIL_PASSWORD\"\naddress = \"pincer@example.org\"\npoll_secs = 1\n",
            self.server.imap_port(),
            self.server.smtp_port(),
            self.server.ca_path().display()
        )
    }
    fn person(&self) -> String {
        "alice@example.org".to_owned()
    }
    fn env(&self) -> Vec<(&'static str, String)> {
        vec![("MAIL_PASSWORD", "pincer-password".to_owned())]
    }
    fn mark(&mut self) {
        self.seen = [
            self.pincer_mails("alice").len(),
            self.pincer_mails("bob").len(),
        ];
    }
    fn ready(&mut self, dir: &TestDir) {
        connected(dir);
    }
    fn person_says(&mut self, text: &str) {
        let id = self.server.send(
            "alice@example.org",
            "pincer@example.org",
            "a question",
            text,
            &[],
        );
        self.last = Some((text.to_owned(), id));
    }
    fn stranger_says(&mut self, text: &str) {
        self.server
            .send("bob@example.org", "pincer@example.org", "hello", text, &[]);
    }
    /// A reply to Pincer's latest mail, in its thread.
    fn person_answers(&mut self, text: &str) {
        let last = self
            .server
            .fetch_all("alice")
            .into_iter()
            .rev()
            .find(|m| {
                m.headers
                    .from
                    .as_deref()
                    .is_some_and(|f| f.contains("pincer@example.org"))
            })
            .expect("a mail from Pincer to answer");
        let id = last.headers.message_id.clone().unwrap_or_default();
        let references = format!(
            "{} {id}",
            last.headers.references.clone().unwrap_or_default()
        );
        let subject = last.headers.subject.clone().unwrap_or_default();
        self.server.send(
            "alice@example.org",
            "pincer@example.org",
            &subject,
            text,
            &[("In-Reply-To", &id), ("References", references.trim())],
        );
    }
    fn next_for_person(&mut self, within: Duration) -> Option<String> {
        self.next(0, within)
    }
    fn next_for_stranger(&mut self, within: Duration) -> Option<String> {
        self.next(1, within)
    }
    /// The same mail again (a new UID, the same `Message-ID`), as a
    /// mail server delivers a message twice.
    fn redeliver(&mut self) -> bool {
        let (text, id) = self.last.clone().expect("a mail to deliver again");
        self.server.send(
            "alice@example.org",
            "pincer@example.org",
            "a question",
            &text,
            &[("Message-ID", &id)],
        );
        true
    }
    fn down(&mut self) {
        self.server.stop();
    }
    fn up(&mut self) {
        self.server.restart();
    }
}

/// The signed webhook, against a peer of the tests' (failing every POST
/// for `down`): u1 allowed in `room-1`, u2 not, in `room-2`.
struct Webhook {
    peer: Peer,
    url: String,
    seen: [usize; 2],
    last: Option<(String, Value)>,
    deliveries: u64,
}

impl Webhook {
    fn texts(&self, chat: &str) -> Vec<String> {
        // What the peer took: not the POSTs it failed while down.
        self.peer
            .accepted()
            .into_iter()
            .filter(|body| body["chat"] == chat)
            .map(|body| body["text"].as_str().unwrap_or_default().to_owned())
            .collect()
    }

    fn next(&mut self, chat: &str, slot: usize, within: Duration) -> Option<String> {
        let deadline = Instant::now() + within;
        loop {
            let texts = self.texts(chat);
            if texts.len() > self.seen[slot] {
                self.seen[slot] += 1;
                return Some(texts[self.seen[slot] - 1].clone());
            }
            if Instant::now() > deadline {
                return None;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn says(&mut self, chat: &str, sender: &str, text: &str) {
        self.deliveries += 1;
        let id = format!("d{}-{}", self.deliveries, crate::support::unique());
        let body = json!({"message": {"chat": chat, "sender": {"id": sender, "name": sender}, "text": text}});
        let (status, answer) = deliver(&self.url, Some(&id), &body, SECRET, 0);
        assert_eq!(status, 200, "{answer}");
        self.last = Some((id, body));
    }
}

impl Platform for Webhook {
    fn channel(&self) -> &'static str {
        "webhook"
    }
    fn keys(&self) -> String {
        format!("callback_url = \"{}\"\n", self.peer.url)
    }
    fn person(&self) -> String {
        "u1".to_owned()
    }
    fn env(&self) -> Vec<(&'static str, String)> {
        vec![("PINCER_WEBHOOK_SECRET", SECRET.to_owned())]
    }
    fn serve_args(&self, dir: &TestDir) -> Vec<String> {
        let ready = dir.path().join("ready-webhook");
        let _ = std::fs::remove_file(&ready);
        vec![
            "--http".to_owned(),
            "127.0.0.1:0".to_owned(),
            "--ready-file".to_owned(),
            ready.to_string_lossy().into_owned(),
        ]
    }
    fn mark(&mut self) {
        self.seen = [self.texts("room-1").len(), self.texts("room-2").len()];
    }
    fn ready(&mut self, dir: &TestDir) {
        let ready = dir.path().join("ready-webhook");
        let deadline = Instant::now() + WAIT;
        loop {
            let addr = std::fs::read_to_string(&ready).unwrap_or_default();
            if !addr.trim().is_empty() && dir.log().contains("webhook receiving") {
                self.url = format!("http://{}/channels/webhook/webhook", addr.trim());
                return;
            }
            assert!(Instant::now() < deadline, "{}", dir.log());
            std::thread::sleep(Duration::from_millis(20));
        }
    }
    fn person_says(&mut self, text: &str) {
        self.says("room-1", "u1", text);
    }
    fn stranger_says(&mut self, text: &str) {
        self.says("room-2", "u2", text);
    }
    fn next_for_person(&mut self, within: Duration) -> Option<String> {
        self.next("room-1", 0, within)
    }
    fn next_for_stranger(&mut self, within: Duration) -> Option<String> {
        self.next("room-2", 1, within)
    }
    fn redeliver(&mut self) -> bool {
        let (id, body) = self.last.clone().expect("a delivery to repeat");
        let (status, answer) = deliver(&self.url, Some(&id), &body, SECRET, 0);
        assert_eq!(status, 200, "{answer}");
        true
    }
    fn down(&mut self) {
        self.peer.down();
    }
    fn up(&mut self) {
        self.peer.up();
    }
}

#[test]
fn webhook_conforms() {
    let mut platform = Webhook {
        peer: Peer::start(),
        url: String::new(),
        seen: [0, 0],
        last: None,
        deliveries: 0,
    };
    conforms(&mut platform);
}

#[test]
fn email_conforms() {
    let server = MailServer::start(MailOptions {
        tls: true,
        smtp_auth: true,
        ..MailOptions::default()
    });
    for (user, password) in [
        ("pincer", "pincer-password"),
        ("alice", "alice-password"),
        ("bob", "bob-password"),
    ] {
        server.add_user(user, password);
    }
    let mut platform = Email {
        server,
        seen: [0, 0],
        last: None,
    };
    conforms(&mut platform);
}

/// Slack, against the fake Slack (Socket Mode and the Web API): the
/// person and a stranger each in a direct message with the bot.
struct Slack {
    fake: crate::support::slack::FakeSlack,
    seen: [usize; 2],
    last: Option<String>,
}

const SLACK_PERSON: &str = "UPERSON";
const SLACK_STRANGER: &str = "USTRANGER";

impl Slack {
    fn next(&mut self, user: &str, slot: usize, within: Duration) -> Option<String> {
        let deadline = Instant::now() + within;
        loop {
            let texts = self.fake.texts(&format!("D{user}"));
            if texts.len() > self.seen[slot] {
                self.seen[slot] += 1;
                return Some(texts[self.seen[slot] - 1].clone());
            }
            if Instant::now() > deadline {
                return None;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Platform for Slack {
    fn channel(&self) -> &'static str {
        "slack"
    }
    fn keys(&self) -> String {
        format!("api_base = \"{}\"\n", self.fake.api_base())
    }
    fn person(&self) -> String {
        SLACK_PERSON.to_owned()
    }
    fn env(&self) -> Vec<(&'static str, String)> {
        vec![
            (
                "SLACK_BOT_TOKEN",
                crate::support::slack::BOT_TOKEN.to_owned(),
            ),
            (
                "SLACK_APP_TOKEN",
                crate::support::slack::APP_TOKEN.to_owned(),
            ),
        ]
    }
    fn mark(&mut self) {
        self.fake.forget_envelopes();
        self.seen = [
            self.fake.texts(&format!("D{SLACK_PERSON}")).len(),
            self.fake.texts(&format!("D{SLACK_STRANGER}")).len(),
        ];
    }
    fn ready(&mut self, dir: &TestDir) {
        connected(dir);
    }
    fn person_says(&mut self, text: &str) {
        self.last = Some(self.fake.dm(SLACK_PERSON, text));
    }
    fn stranger_says(&mut self, text: &str) {
        self.fake.dm(SLACK_STRANGER, text);
    }
    fn next_for_person(&mut self, within: Duration) -> Option<String> {
        self.next(SLACK_PERSON, 0, within)
    }
    fn next_for_stranger(&mut self, within: Duration) -> Option<String> {
        self.next(SLACK_STRANGER, 1, within)
    }
    fn redeliver(&mut self) -> bool {
        if let Some(ts) = &self.last {
            self.fake.replay(ts);
        }
        true
    }
    fn down(&mut self) {
        self.fake
            .fail("chat.postMessage", 10_000, 503, "service_unavailable", None);
    }
    fn up(&mut self) {
        self.fake.release("chat.postMessage");
    }
}

#[test]
fn slack_conforms() {
    let mut platform = Slack {
        fake: crate::support::slack::FakeSlack::start(),
        seen: [0, 0],
        last: None,
    };
    conforms(&mut platform);
}
