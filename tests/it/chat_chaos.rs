//! Chat chaos across Matrix and IRC: one `pincer serve --channel matrix
//! --channel irc` killed with `kill -9` at random moments, over and over,
//! while people write to it in Matrix rooms (two direct rooms and a group,
//! addressed) and on IRC (privately and addressed in a channel), against a
//! real Synapse (behind a proxy that forwards every request whole, even
//! one a killed process sent, and pauses before and after the homeserver
//! acts on a send, an edit or a redaction, so kills land between Synapse
//! taking a message and Pincer knowing its id) and a real ngIRCd. Then one
//! last process drains everything, and the rooms, what the IRC users saw
//! and the database are checked:
//!
//! - every Matrix message a person sent is recorded once (by event id) and
//!   answered by a reply recorded `sent`: Matrix sends are repeated with
//!   their transaction ids, so nothing is left `unknown_after_send`;
//! - every IRC message Pincer recorded is recorded once and answered, or
//!   its answer is reported (`unknown_after_send`, listed by `pincer
//!   channels outbox`); one is lost only at a kill (IRC never sends a
//!   message again): of one person's messages, in order, none is missing
//!   between two that the same connection recorded, and those written to
//!   the last process are all recorded;
//! - nothing shows more often than Pincer decided to send it: in a room, no
//!   message Pincer did not name (a duplicate would be one); on IRC, no line
//!   more often than the intents for that chat carry it, and every line of
//!   every intent recorded `sent` shows;
//! - no orphaned draft: every message of the bot's in a room shows the final
//!   text of the intent that names it (an `m.replace` chain ends in the
//!   reply), and every draft deleted to be replaced is redacted;
//! - every session a chat created is mapped to it;
//! - `pincer verify` passes.
//!
//! `PINCER_CHAOS_KILLS` sets the number of kills (30 by default; the soak,
//! `scripts/chaos_chat.sh`, runs more) and `PINCER_CHAOS_SEED` replays one
//! run's choices.

use std::collections::{HashMap, HashSet};
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::support::TestDir;
use crate::support::irc::{IrcServer, IrcUser};
use crate::support::matrix::{MatrixProxy, MatrixUser, Synapse, shown_messages};

const PASSWORD: &str = "chaos-password-1";
const IRC_USERS: [&str; 2] = ["alice", "bob"];
const WAIT: Duration = Duration::from_secs(60);
/// What a reply says first when its draft may be in the chat unnamed.
const DRAFT_LOST: &str = "[pincer] If a partial draft of this reply shows above, it is stale";

fn env_number(name: &str) -> Option<u64> {
    std::env::var(name).ok().and_then(|v| v.trim().parse().ok())
}

/// `pincer serve --channel matrix --channel irc`; killed with SIGKILL on drop.
struct Serve {
    child: Child,
}

impl Serve {
    fn start(dir: &TestDir, script: &std::path::Path, token: &str) -> Self {
        let stderr = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(dir.path().join("stderr.log"))
            .unwrap();
        let child = dir
            .command()
            .env("MATRIX_TOKEN", token)
            .args(["serve", "--channel", "matrix", "--channel", "irc"])
            .args(["--provider", "scripted", "--script"])
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

/// One number from the database, `None` while it is not there yet.
fn number(dir: &TestDir, sql: &str) -> Option<i64> {
    if !dir.data_dir().join("pincer.db").exists() {
        return None;
    }
    database(dir).query_row(sql, [], |row| row.get(0)).ok()
}

fn stderr_path(dir: &TestDir) -> String {
    dir.path().join("stderr.log").display().to_string()
}

/// The bodies of the IRC messages recorded so far.
fn irc_recorded(dir: &TestDir) -> Vec<(String, String)> {
    if !dir.data_dir().join("pincer.db").exists() {
        return Vec::new();
    }
    let db = database(dir);
    let mut statement = db
        .prepare("SELECT message_id, message FROM channel_inbox WHERE channel = 'irc'")
        .unwrap();
    statement
        .query_map([], |row| Ok((row.get(0)?, row.get::<_, String>(1)?)))
        .unwrap()
        .map(Result::unwrap)
        .map(|(id, message): (String, String)| {
            let message: Value = serde_json::from_str(&message).unwrap();
            (id, message["body"].as_str().unwrap().to_owned())
        })
        .collect()
}

/// Whether everything is answered and nothing is left to send: every
/// Matrix message and `irc_final` recorded, none open.
fn quiet(dir: &TestDir, matrix: usize, irc_final: &[String]) -> bool {
    let recorded: HashSet<String> = irc_recorded(dir).into_iter().map(|(_, b)| b).collect();
    number(
        dir,
        "SELECT COUNT(*) FROM channel_inbox WHERE channel = 'matrix'",
    ) == Some(matrix as i64)
        && irc_final.iter().all(|text| recorded.contains(text))
        && number(
            dir,
            "SELECT COUNT(*) FROM channel_inbox WHERE state IN ('recorded', 'dispatched')",
        ) == Some(0)
        && number(
            dir,
            "SELECT COUNT(*) FROM channel_outbox WHERE status IN ('held', 'pending', 'sending', 'committing')",
        ) == Some(0)
        && number(
            dir,
            "SELECT COUNT(*) FROM runs WHERE state IN ('queued', 'running', 'waiting')",
        ) == Some(0)
}

/// Whether `nick` is in `#team`, as `user` is told by `NAMES`.
fn in_channel(user: &mut IrcUser, nick: &str) -> bool {
    user.send_raw("NAMES #team");
    let mut found = false;
    loop {
        let line = user.expect(|m| m.is("353") || m.is("366"), WAIT);
        if line.is("366") {
            return found;
        }
        found |= line
            .text()
            .split(' ')
            .any(|n| n.trim_start_matches(['@', '+']) == nick);
    }
}

/// Reads everything the server sent `user` so far: a `PING` answered
/// comes after every line queued for it before.
fn read_all(user: &mut IrcUser) {
    let token = format!("drained-{}", fastrand::u64(..));
    user.send_raw(&format!("PING :{token}"));
    user.expect(|m| m.is("PONG") && m.text() == token, WAIT);
}

/// A message a person sent.
#[derive(Debug, Clone)]
enum Said {
    /// In a Matrix room: its event id.
    Matrix { room: String, event_id: String },
    /// On IRC, by the person at `IRC_USERS[user]`, to `to` (`pincer` or
    /// `#team`); `body` is what Pincer records.
    Irc { user: usize, body: String },
}

/// The people, the rooms and the users, and what they said.
struct Chats {
    bot: String,
    /// Matrix people writing: (person, room, addressed in a group).
    writers: Vec<(MatrixUser, String, bool)>,
    irc: Vec<IrcUser>,
    said: Vec<Said>,
}

impl Chats {
    /// One person writes something, somewhere.
    fn say(&mut self, rng: &mut fastrand::Rng) {
        let n = self.said.len() + 1;
        let text = format!("message {n}");
        let choice = rng.usize(..self.writers.len() + 2 * self.irc.len());
        if choice < self.writers.len() {
            let (person, room, group) = &self.writers[choice];
            let localpart = self.bot.trim_start_matches('@').split(':').next().unwrap();
            let sent = if *group {
                format!("{localpart}: {text}")
            } else {
                text
            };
            let event_id = person.send_text(room, &sent);
            self.said.push(Said::Matrix {
                room: room.clone(),
                event_id,
            });
            return;
        }
        let choice = choice - self.writers.len();
        let user = choice / 2;
        if choice.is_multiple_of(2) {
            self.irc[user].privmsg("pincer", &text);
        } else {
            self.irc[user].privmsg("#team", &format!("pincer: {text}"));
        }
        self.said.push(Said::Irc { user, body: text });
        // Keep reading, so the server never gives up on a slow reader.
        self.irc[user].drain(Duration::from_millis(1));
    }
}

/// What each IRC chat showed from the bot: lines by chat (`alice`, `bob`,
/// `#team`).
fn irc_shown(irc: &mut [IrcUser]) -> HashMap<String, Vec<String>> {
    let mut shown: HashMap<String, Vec<String>> = HashMap::new();
    for (i, user) in irc.iter_mut().enumerate() {
        read_all(user);
        for line in &user.log {
            let from_bot = line.nick().is_some_and(|n| n.starts_with("pincer"));
            if !line.is("PRIVMSG") || !from_bot {
                continue;
            }
            let to = line.arg(0).unwrap_or_default();
            // The channel as the first person saw it.
            if to == "#team" && i != 0 {
                continue;
            }
            shown
                .entry(to.to_owned())
                .or_default()
                .push(line.text().to_owned());
        }
    }
    shown
}

#[test]
#[allow(clippy::too_many_lines, reason = "one scenario, read top to bottom")]
fn random_kills_of_a_matrix_and_irc_bridge_lose_nothing_and_orphan_nothing() {
    let kills = env_number("PINCER_CHAOS_KILLS").unwrap_or(30) as usize;
    let seed = env_number("PINCER_CHAOS_SEED").unwrap_or_else(|| fastrand::u64(..));
    eprintln!("chaos: {kills} kills, seed {seed} (PINCER_CHAOS_SEED={seed} replays the choices)");
    let mut rng = fastrand::Rng::with_seed(seed);

    let synapse = Synapse::shared();
    let proxy = MatrixProxy::start(&synapse.base_url());
    proxy.jitter(150, 250);
    let register =
        |prefix: &str| synapse.register(&synapse.fresh_localpart(prefix), PASSWORD, false);
    let (bot, alice, carol) = (register("pincer"), register("alice"), register("carol"));
    let alice_dm = alice.create_room("dm", &[&bot.user_id], false);
    let carol_dm = carol.create_room("dm", &[&bot.user_id], false);
    let group = alice.create_room("team", &[&bot.user_id, &carol.user_id], false);
    for room in [&alice_dm, &carol_dm, &group] {
        bot.join(room);
    }
    carol.join(&group);
    let irc_server = IrcServer::start_default();
    let irc: Vec<IrcUser> = IRC_USERS
        .iter()
        .map(|nick| {
            let mut user = IrcUser::connect(&irc_server, nick);
            user.join("#team");
            user
        })
        .collect();
    let rooms = [
        (alice_dm.clone(), alice.clone()),
        (carol_dm.clone(), carol.clone()),
        (group.clone(), alice.clone()),
    ];
    let mut chats = Chats {
        bot: bot.user_id.clone(),
        writers: vec![
            (alice.clone(), alice_dm.clone(), false),
            (carol.clone(), carol_dm.clone(), false),
            (alice.clone(), group.clone(), true),
            (carol.clone(), group.clone(), true),
        ],
        irc,
        said: Vec::new(),
    };

    // `PINCER_CHAOS_KEEP=1` keeps the data directory (and its stderr.log)
    // for a post-mortem.
    let dir: &TestDir = if std::env::var_os("PINCER_CHAOS_KEEP").is_some() {
        Box::leak(Box::new(TestDir::new()))
    } else {
        &TestDir::new()
    };
    eprintln!("chaos: data in {}", dir.path().display());
    let workspace = dir.workspace();
    let config = dir.path().join("config").join("pincer");
    std::fs::create_dir_all(&config).unwrap();
    std::fs::write(
        config.join("config.toml"),
        format!(
            "[channels.matrix]\nkind = \"matrix\"\nhomeserver = \"{}\"\nuser_id = \"{}\"\naccess_token_env = \"MATRIX_TOKEN\"\nallow = [\"{}\", \"{}\"]\nworkspace = \"{}\"\ncoalesce_ms = 50\n\n\
             [channels.irc]\nkind = \"irc\"\nserver = \"{}\"\nnick = \"pincer\"\nchannels = [\"#team\"]\nallow = [\"alice\", \"bob\"]\nworkspace = \"{}\"\ncoalesce_ms = 50\n",
            proxy.url,
            bot.user_id,
            alice.user_id,
            carol.user_id,
            workspace.display(),
            irc_server.addr(),
            workspace.display(),
        ),
    )
    .unwrap();
    // Each turn streams a reply in three pieces over 0.2 to 1.6 s: a draft
    // first, edits when the pauses are long, the reply at the end.
    let turns: Vec<Value> = (1..=2 * kills + 40)
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
    let token = bot.access_token.clone();

    // The first start skips the rooms' history: until its first sync is
    // stored, what people write in Matrix would be history.
    let first = Serve::start(dir, &script, &token);
    let deadline = Instant::now() + WAIT;
    while number(
        dir,
        "SELECT COUNT(*) FROM channel_cursors WHERE channel = 'matrix' AND name = 'since'",
    ) != Some(1)
    {
        assert!(
            Instant::now() < deadline,
            "no first sync; see {}",
            stderr_path(dir)
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    first.kill();

    let started = Instant::now();
    for _ in 0..kills {
        // A message while no process runs, some while it runs, or none.
        if rng.u8(..3) == 0 {
            chats.say(&mut rng);
        }
        let serve = Serve::start(dir, &script, &token);
        let life = Duration::from_millis(rng.u64(100..2000));
        let mut moments: Vec<Duration> = (0..rng.usize(..3))
            .map(|_| life.mul_f64(rng.f64()))
            .collect();
        moments.sort();
        let born = Instant::now();
        for moment in moments {
            std::thread::sleep(moment.saturating_sub(born.elapsed()));
            chats.say(&mut rng);
        }
        std::thread::sleep(life.saturating_sub(born.elapsed()));
        serve.kill();
        for user in &mut chats.irc {
            user.drain(Duration::from_millis(1));
        }
    }

    // One last process answers whatever is left; once it is on IRC, each
    // IRC person writes to it privately and in the channel: those are all
    // recorded and answered.
    let serve = Serve::start(dir, &script, &token);
    let deadline = Instant::now() + WAIT;
    while !in_channel(&mut chats.irc[0], "pincer") {
        assert!(
            Instant::now() < deadline,
            "the last process never joined #team; see {}",
            stderr_path(dir)
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    let mut irc_final = Vec::new();
    for (user, nick) in IRC_USERS.iter().enumerate() {
        for to in ["pincer", "#team"] {
            let body = format!("final {nick} {to}");
            let text = if to == "pincer" {
                body.clone()
            } else {
                format!("pincer: {body}")
            };
            chats.irc[user].privmsg(to, &text);
            chats.said.push(Said::Irc {
                user,
                body: body.clone(),
            });
            irc_final.push(body);
        }
    }
    let matrix_said: Vec<(String, String)> = chats
        .said
        .iter()
        .filter_map(|s| match s {
            Said::Matrix { room, event_id } => Some((room.clone(), event_id.clone())),
            Said::Irc { .. } => None,
        })
        .collect();
    let deadline = Instant::now() + Duration::from_secs(120);
    while !quiet(dir, matrix_said.len(), &irc_final) {
        assert!(
            Instant::now() < deadline,
            "not quiet after 120 s; see {}",
            stderr_path(dir)
        );
        for user in &mut chats.irc {
            user.drain(Duration::from_millis(1));
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    serve.stop();
    let elapsed = started.elapsed();
    // Requests the killed processes sent may still be on their way in.
    proxy.wait_settled(WAIT);

    let db = database(dir);
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
    let inbox: Vec<(String, String, String, Option<String>)> = db
        .prepare("SELECT channel, message_id, state, run_id FROM channel_inbox")
        .unwrap()
        .query_map([], |row| {
            Ok((row.get(0)?, row.get(1)?, row.get(2)?, row.get(3)?))
        })
        .unwrap()
        .map(Result::unwrap)
        .collect();

    // Every intent sent, or reported (IRC), or a draft deleted to be
    // replaced, never sent (its first send failed before it went out: the
    // run went on without one), or — sent by a live process whose answer was
    // lost — reported, its reply saying a stale draft may show. On Matrix
    // nothing else is left unknown: its sends are repeated.
    for intent in &intents {
        let status = intent["status"].as_str().unwrap();
        let matrix = intent["channel"] == "matrix";
        let draft = intent["kind"] == "draft";
        let unsent = draft
            && status == "failed"
            && intent["failure"]["kind"] != "unknown"
            && intent["receipt"]["parts"].as_array().unwrap().is_empty();
        let reported_draft = draft && status == "unknown_after_send" && {
            let run = intent["run_id"].as_str().unwrap();
            let reply = by_id[format!("reply:{run}").as_str()];
            reply["units"][0]["text"]
                .as_str()
                .unwrap()
                .starts_with(DRAFT_LOST)
        };
        assert!(
            status == "sent"
                || (draft && status == "cancelled")
                || unsent
                || reported_draft
                || (!matrix && status == "unknown_after_send"),
            "an intent neither sent nor reported: {intent:#}"
        );
    }
    for (channel, message, state, run) in &inbox {
        assert_eq!(
            state, "done",
            "{channel} message {message} was not answered"
        );
        let run = run.as_deref().unwrap();
        let reply = by_id
            .get(format!("reply:{run}").as_str())
            .unwrap_or_else(|| panic!("no reply for {channel} message {message} (run {run})"));
        assert_eq!(reply["channel"], channel.as_str());
    }

    // Matrix: every message recorded, once.
    let recorded: HashSet<&str> = inbox
        .iter()
        .filter(|i| i.0 == "matrix")
        .map(|i| i.1.as_str())
        .collect();
    let sent: HashSet<&str> = matrix_said.iter().map(|(_, e)| e.as_str()).collect();
    assert_eq!(
        recorded, sent,
        "the Matrix messages recorded are not those sent"
    );

    // Matrix: every message of the bot's in a room is one an intent names,
    // showing that intent's final text; a draft deleted to be replaced is
    // redacted; nothing else (a duplicate, an orphaned draft) shows.
    let mut named: HashMap<(String, String), (&Value, usize)> = HashMap::new();
    for intent in intents.iter().filter(|i| i["channel"] == "matrix") {
        let room = intent["target"]["id"].as_str().unwrap().to_owned();
        for part in intent["receipt"]["parts"].as_array().unwrap() {
            let id = part["platform_id"].as_str().unwrap().to_owned();
            let index = part["index"].as_u64().unwrap() as usize;
            // A finalized draft is named by its draft intent and its reply:
            // the reply's text is the one it must show.
            let entry = named.entry((room.clone(), id)).or_insert((intent, index));
            if entry.0["kind"] == "draft" {
                *entry = (intent, index);
            }
        }
    }
    let (mut finalized, mut deleted, mut bot_messages) = (0, 0, 0);
    // Each reported draft explains at most one message.
    let mut explained: HashSet<&str> = HashSet::new();
    for (room, person) in &rooms {
        let events = person.messages(room);
        for (event_id, text) in shown_messages(&events, &bot.user_id) {
            bot_messages += 1;
            let Some((intent, index)) = named.get(&(room.clone(), event_id.clone())) else {
                // Unnamed: a draft Synapse took whose id Pincer never
                // learnt, and reports.
                let reported = intents.iter().find(|i| {
                    i["channel"] == "matrix"
                        && i["kind"] == "draft"
                        && i["status"] == "unknown_after_send"
                        && i["target"]["id"] == room.as_str()
                        && i["units"][0]["text"].as_str() == text.as_deref()
                        && !explained.contains(i["id"].as_str().unwrap())
                });
                let Some(reported) = reported else {
                    panic!(
                        "a message no intent names (a duplicate?) in {room}: {event_id} {text:?}"
                    );
                };
                explained.insert(reported["id"].as_str().unwrap());
                continue;
            };
            let Some(text) = text else {
                assert!(
                    intent["kind"] == "draft" && intent["status"] == "cancelled",
                    "a message redacted that was not a stale draft: {intent:#}"
                );
                deleted += 1;
                continue;
            };
            assert_ne!(
                intent["kind"], "draft",
                "an orphaned draft (never finalized nor deleted): {text:?} {intent:#}"
            );
            assert_eq!(
                text,
                intent["units"][*index]["text"].as_str().unwrap(),
                "{event_id} in {room} does not show its intent's final text: {intent:#}"
            );
            if intent["edit_of"].is_string() {
                finalized += 1;
            }
        }
        // And every part the records call sent is there.
        let shown: HashMap<String, Option<String>> =
            shown_messages(&events, &bot.user_id).into_iter().collect();
        for intent in intents
            .iter()
            .filter(|i| i["channel"] == "matrix" && i["target"]["id"] == room.as_str())
        {
            for part in intent["receipt"]["parts"].as_array().unwrap() {
                let id = part["platform_id"].as_str().unwrap();
                let retracted = intent["kind"] == "draft" && intent["status"] == "cancelled";
                match shown.get(id) {
                    None => panic!("{id}, recorded as sent, is not in {room}: {intent:#}"),
                    Some(None) => assert!(retracted, "{id} is redacted: {intent:#}"),
                    Some(Some(_)) => assert!(
                        !retracted,
                        "a draft recorded as deleted shows: {id} {intent:#}"
                    ),
                }
            }
        }
    }

    // IRC: each message recorded once, and lost only at a kill.
    let recorded = irc_recorded(dir);
    let mut by_body: HashMap<&str, &str> = HashMap::new();
    for (id, body) in &recorded {
        assert!(
            by_body.insert(body.as_str(), id.as_str()).is_none(),
            "an IRC message recorded twice: {body:?}"
        );
    }
    let (mut irc_sent, mut irc_lost) = (0, 0);
    for (user, nick) in IRC_USERS.iter().enumerate() {
        // Each recorded message's connection (`START:N`): in the order the
        // person wrote, never back, and none missing within one connection.
        let mut last: Option<(i64, u64)> = None;
        let mut missing_since: Option<String> = None;
        for said in &chats.said {
            let Said::Irc { user: by, body } = said else {
                continue;
            };
            if *by != user {
                continue;
            }
            irc_sent += 1;
            let Some(id) = by_body.get(body.as_str()) else {
                irc_lost += 1;
                missing_since.get_or_insert_with(|| body.clone());
                continue;
            };
            let (start, n) = id.split_once(':').unwrap();
            let at: (i64, u64) = (start.parse().unwrap(), n.parse().unwrap());
            if let Some(before) = last {
                assert!(
                    at > before,
                    "{nick}'s messages recorded out of order: {body:?}"
                );
                if let Some(missing) = &missing_since {
                    assert_ne!(
                        at.0, before.0,
                        "{nick}'s {missing:?} was lost on a connection that recorded the messages around it"
                    );
                }
            }
            last = Some(at);
            missing_since = None;
        }
    }

    // IRC: no line more often than decided; every line of a sent intent shows.
    let shown = irc_shown(&mut chats.irc);
    let mut chats_checked = 0;
    for (chat, lines) in &shown {
        chats_checked += 1;
        let mut decided: HashMap<&str, usize> = HashMap::new();
        let mut promised: HashMap<&str, usize> = HashMap::new();
        for intent in intents
            .iter()
            .filter(|i| i["channel"] == "irc" && i["target"]["id"] == chat.as_str())
        {
            for unit in intent["units"].as_array().unwrap() {
                for line in unit["text"].as_str().unwrap().split('\n') {
                    *decided.entry(line).or_default() += 1;
                    if intent["status"] == "sent" {
                        *promised.entry(line).or_default() += 1;
                    }
                }
            }
        }
        let mut seen: HashMap<&str, usize> = HashMap::new();
        for line in lines {
            *seen.entry(line.as_str()).or_default() += 1;
        }
        for (line, times) in &seen {
            let allowed = decided.get(line).copied().unwrap_or(0);
            assert!(
                *times <= allowed,
                "{chat}: shown {times} times, decided {allowed}: {line:?} (a blind duplicate)"
            );
        }
        for (line, times) in &promised {
            let got = seen.get(line).copied().unwrap_or(0);
            assert!(
                got >= *times,
                "{chat}: {line:?} recorded as sent {times} times, shown {got}"
            );
        }
    }
    // Every IRC chat answered has lines (the final messages' replies).
    for chat in ["alice", "bob", "#team"] {
        assert!(shown.contains_key(chat), "nothing shown in {chat}");
    }

    // Every session a chat created leads back to it.
    let orphans: i64 = db
        .query_row(
            "SELECT COUNT(*) FROM sessions s WHERE NOT EXISTS
                (SELECT 1 FROM channel_sessions c WHERE c.session_id = s.id)",
            [],
            |row| row.get(0),
        )
        .unwrap();
    assert_eq!(orphans, 0, "sessions no chat maps to");
    drop(db);

    // What is reported is what `pincer channels outbox` lists.
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
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let listed: HashSet<String> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| {
            serde_json::from_str::<Value>(l).unwrap()["id"]
                .as_str()
                .unwrap()
                .to_owned()
        })
        .collect();
    let unknown: HashSet<String> = intents
        .iter()
        .filter(|i| i["status"] == "unknown_after_send")
        .map(|i| i["id"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(
        listed, unknown,
        "`pincer channels outbox` lists other intents"
    );

    let verify = dir.command().arg("verify").output().unwrap();
    assert!(
        verify.status.success(),
        "pincer verify: {}{}",
        String::from_utf8_lossy(&verify.stdout),
        String::from_utf8_lossy(&verify.stderr)
    );
    let matrix_intents = intents.iter().filter(|i| i["channel"] == "matrix").count();
    let count = |channel: &str, status: &str| {
        intents
            .iter()
            .filter(|i| i["channel"] == channel && i["status"] == status)
            .count()
    };
    eprintln!(
        "chaos: {kills} kills, seed {seed}, {} Matrix messages (all recorded and answered), {irc_sent} IRC messages ({irc_lost} lost at a kill, {} recorded), {} intents ({matrix_intents} Matrix; unknown_after_send: {} IRC, {} Matrix drafts reported; {} Matrix drafts never sent), {bot_messages} bot messages in {} rooms ({finalized} drafts finalized in place, {deleted} stale drafts redacted and replaced), {chats_checked} IRC chats checked, {:.1} s",
        matrix_said.len(),
        recorded.len(),
        intents.len(),
        count("irc", "unknown_after_send"),
        count("matrix", "unknown_after_send"),
        count("matrix", "failed"),
        rooms.len(),
        elapsed.as_secs_f64()
    );
}
