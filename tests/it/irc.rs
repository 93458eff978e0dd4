//! The IRC channel (`kind = "irc"`, `docs/channels.md`) against a real
//! ngIRCd (`support::irc`): `pincer serve --channel irc` talking with people
//! connected as ordinary IRC clients.

use std::process::{Child, Stdio};
use std::time::Duration;

use serde_json::{Value, json};

use crate::support::TestDir;
use crate::support::irc::{IrcMessage, IrcOptions, IrcServer, IrcUser};

const WAIT: Duration = Duration::from_secs(30);

/// `pincer serve --channel irc`, killed on drop.
struct Bridge {
    child: Child,
}

impl Drop for Bridge {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn setup(server: &IrcServer, extra: &str) -> TestDir {
    let dir = TestDir::new();
    let config = dir.path().join("config").join("pincer");
    std::fs::create_dir_all(&config).unwrap();
    std::fs::write(
        config.join("config.toml"),
        format!(
            "[channels.irc]\nserver = \"{}\"\nnick = \"pincer\"\nchannels = [\"#team\"]\nworkspace = \"{}\"\ncoalesce_ms = 50\n{}{extra}",
            server.addr(),
            dir.workspace().display(),
            // Written `Alice`, the nick `alice` connects: IRC folds case.
            if extra.contains("allow") { "" } else { "allow = [\"Alice\"]\n" },
        ),
    )
    .unwrap();
    dir
}

fn start(dir: &TestDir, script: &[Value], env: &[(&str, &str)]) -> Bridge {
    let script = dir.script("s.jsonl", script);
    let mut command = dir.command();
    for (key, value) in env {
        command.env(key, value);
    }
    let child = command
        .args([
            "serve",
            "--channel",
            "irc",
            "--provider",
            "scripted",
            "--script",
        ])
        .arg(&script)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(dir.path().join("stderr.log")).unwrap())
        .spawn()
        .unwrap();
    Bridge { child }
}

/// Alice, in `#team`.
fn alice(server: &IrcServer) -> IrcUser {
    let mut alice = IrcUser::connect(server, "alice");
    alice.join("#team");
    alice
}

/// Waits until `nick` is in `#team`: its `JOIN` seen, or `NAMES` lists it.
fn wait_bot(user: &mut IrcUser, nick: &str, dir: &TestDir) {
    let deadline = std::time::Instant::now() + WAIT;
    while std::time::Instant::now() < deadline {
        if user
            .try_expect(
                |m| m.is("JOIN") && m.nick() == Some(nick),
                Duration::from_millis(500),
            )
            .is_some()
        {
            return;
        }
        user.send_raw("NAMES #team");
        let names = user.expect(|m| m.is("353") || m.is("366"), WAIT);
        if names.is("353")
            && names
                .text()
                .split(' ')
                .any(|n| n.trim_start_matches(['@', '+']) == nick)
        {
            return;
        }
    }
    panic!("{nick} never joined #team: {}", dir.log());
}

fn from_bot(alice: &mut IrcUser, target: &str) -> IrcMessage {
    let target = target.to_owned();
    alice.expect(
        move |m| m.is("PRIVMSG") && m.nick() == Some("pincer") && m.arg(0) == Some(target.as_str()),
        WAIT,
    )
}

#[test]
fn a_conversation_in_a_channel_when_addressed_and_in_private() {
    let server = IrcServer::start_default();
    let dir = setup(&server, "");
    let mut alice = alice(&server);
    // The scripted model answers each session from the script's start.
    let _bridge = start(
        &dir,
        &[
            json!([{"text": "Hello **in the channel**."}]),
            json!([{"text": "Second."}]),
            json!([{"delay_ms": 6500}, {"text": "Slow."}]),
        ],
        &[],
    );
    wait_bot(&mut alice, "pincer", &dir);
    alice.privmsg("#team", "pincer: hi");
    let reply = from_bot(&mut alice, "#team");
    assert_eq!(reply.text(), "Hello in the channel.");
    // Not addressed: not a prompt (else "Second." would answer it).
    alice.privmsg("#team", "anyone here?");
    alice.privmsg("#team", "PINCER, again");
    assert_eq!(from_bot(&mut alice, "#team").text(), "Second.");
    assert!(
        alice
            .try_expect(
                |m| m.is("PRIVMSG") && m.nick() == Some("pincer"),
                Duration::from_secs(1)
            )
            .is_none()
    );
    alice.privmsg("pincer", "and you?");
    let reply = from_bot(&mut alice, "alice");
    assert_eq!(reply.text(), "Hello in the channel.");
    // A run that works past 5 s says so once, then answers.
    alice.privmsg("#team", "pincer: take your time");
    assert_eq!(from_bot(&mut alice, "#team").text(), "working…");
    assert_eq!(from_bot(&mut alice, "#team").text(), "Slow.");
    // The sessions are the chat's: one for the channel, one for alice.
    let out = dir
        .command()
        .args(["sessions", "list", "--json"])
        .output()
        .unwrap();
    let sessions = String::from_utf8_lossy(&out.stdout);
    assert_eq!(sessions.lines().count(), 2, "{sessions}");
    let verify = dir.command().arg("verify").output().unwrap();
    assert!(
        verify.status.success(),
        "{}",
        String::from_utf8_lossy(&verify.stdout)
    );
}

#[test]
fn a_long_reply_is_split_into_lines_that_fit_and_text_never_becomes_a_command() {
    let server = IrcServer::start_default();
    let dir = setup(&server, "");
    let words: Vec<String> = (0..300).map(|i| format!("wörd{i}")).collect();
    let long = words.join(" ");
    let mut alice = alice(&server);
    let _bridge = start(
        &dir,
        &[
            json!([{"text": long}]),
            json!([{"text": "one\r\nQUIT :gone\r\nPRIVMSG #team :injected"}]),
        ],
        &[],
    );
    wait_bot(&mut alice, "pincer", &dir);
    alice.privmsg("pincer", "talk a lot");
    let mut received: Vec<IrcMessage> = Vec::new();
    while received
        .iter()
        .map(|m| m.text().split(' ').count())
        .sum::<usize>()
        < words.len()
    {
        received.push(from_bot(&mut alice, "alice"));
    }
    assert!(received.len() >= 4, "{} lines", received.len());
    for line in &received {
        // As the server relayed it, CR LF included.
        assert!(line.len + 2 <= 512, "{} bytes", line.len + 2);
    }
    let joined: Vec<&str> = received.iter().flat_map(|m| m.text().split(' ')).collect();
    assert_eq!(joined, words.iter().map(String::as_str).collect::<Vec<_>>());
    // Line breaks in a reply end its lines, each a message's text: nothing
    // in it becomes a command, and the bot stays connected.
    alice.privmsg("pincer", "now try this");
    let texts: Vec<String> = (0..3)
        .map(|_| from_bot(&mut alice, "alice").text().to_owned())
        .collect();
    assert_eq!(texts, ["one", "QUIT :gone", "PRIVMSG #team :injected"]);
    assert!(
        alice
            .try_expect(
                |m| m.is("QUIT") && m.nick() == Some("pincer"),
                Duration::from_millis(500)
            )
            .is_none()
    );
    alice.privmsg("#team", "pincer: still there?");
    assert!(
        alice
            .try_expect(|m| m.is("PRIVMSG") && m.nick() == Some("pincer"), WAIT)
            .is_some()
    );
}

#[test]
fn an_approval_is_answered_with_y_and_a_stranger_pairs_first() {
    let server = IrcServer::start_default();
    let dir = setup(&server, "");
    let mut alice = alice(&server);
    let _bridge = start(
        &dir,
        &[
            json!([{"tool_call": {"id": "w1", "name": "write_file", "arguments": {"path": "n.txt", "content": "from irc\n"}}}]),
            json!([{"text": "Written."}]),
        ],
        &[("PINCER_PAIRING_CODE", "open-sesame")],
    );
    wait_bot(&mut alice, "pincer", &dir);
    alice.privmsg("pincer", "write the note");
    let prompt = alice.expect(
        |m| {
            m.is("PRIVMSG") && m.nick() == Some("pincer") && m.text().starts_with("Approval needed")
        },
        WAIT,
    );
    assert!(prompt.text().contains("n.txt"), "{}", prompt.text());
    alice.privmsg("pincer", "y");
    let done = alice.expect(
        |m| m.is("PRIVMSG") && m.nick() == Some("pincer") && m.text() == "Written.",
        WAIT,
    );
    assert_eq!(done.arg(0), Some("alice"));
    assert_eq!(
        std::fs::read_to_string(dir.workspace().join("n.txt")).unwrap(),
        "from irc\n"
    );
    // Bob is not allowed: told how to pair, then served once paired.
    let mut bob = IrcUser::connect(&server, "bob");
    bob.privmsg("pincer", "hello?");
    let told = bob
        .try_expect(|m| m.is("PRIVMSG") && m.nick() == Some("pincer"), WAIT)
        .unwrap_or_else(|| panic!("bob was not told how to pair: {}", dir.log()));
    assert!(told.text().contains("/pair"), "{}", told.text());
    bob.privmsg("pincer", "/pair open-sesame");
    assert_eq!(
        from_bot(&mut bob, "bob").text(),
        "Paired. Send a message to start."
    );
    // Served now: his session (the script from its start) asks him too.
    bob.privmsg("pincer", "hello again");
    let asked = from_bot(&mut bob, "bob");
    assert!(
        asked.text().starts_with("Approval needed"),
        "{}",
        asked.text()
    );
}

#[test]
fn the_bot_comes_back_after_the_server_restarts_and_regains_its_nick() {
    let server = IrcServer::start(IrcOptions::default());
    let dir = setup(&server, "");
    // Someone holds the nick when the bot connects.
    let squatter = IrcUser::connect(&server, "pincer");
    let mut alice = alice(&server);
    let _bridge = start(
        &dir,
        &[json!([{"text": "Back."}]), json!([{"text": "Again."}])],
        &[],
    );
    wait_bot(&mut alice, "pincer_", &dir);
    squatter.quit("bye");
    // Regained within its 30 s period.
    alice.expect(
        |m| m.is("NICK") && m.nick() == Some("pincer_") && m.text() == "pincer",
        Duration::from_secs(45),
    );
    alice.privmsg("#team", "pincer: there?");
    assert_eq!(from_bot(&mut alice, "#team").text(), "Back.");
    // Acknowledged (its PING answered) before the server goes down; one
    // whose acknowledgement a restart cut off would be, rightly, unknown.
    let deadline = std::time::Instant::now() + WAIT;
    while !dir.outbox().iter().any(|i| i["status"] == "sent") {
        assert!(std::time::Instant::now() < deadline, "{:#?}", dir.outbox());
        std::thread::sleep(Duration::from_millis(50));
    }
    server.restart();
    let mut alice = self::alice(&server);
    wait_bot(&mut alice, "pincer", &dir);
    alice.privmsg("#team", "pincer: and now?");
    assert_eq!(from_bot(&mut alice, "#team").text(), "Again.");
    assert!(dir.log().contains("IRC connection lost"), "{}", dir.log());
    // The status says connected again, and what was lost.
    let out = dir
        .command()
        .args(["channels", "status", "--json"])
        .output()
        .unwrap();
    let status: Value = serde_json::from_str(String::from_utf8_lossy(&out.stdout).trim()).unwrap();
    assert_eq!(status["name"], "irc");
    assert_eq!(status["account"], format!("pincer@{}", server.addr()));
    assert_eq!(status["connected"], true);
    assert!(status["last_error"].as_str().is_some(), "{status}");
    assert_eq!(status["outbox"]["sent"], 2, "{status}");
}

#[test]
fn pincer_send_reaches_a_channel_and_bad_settings_are_named() {
    let server = IrcServer::start_default();
    let dir = setup(&server, "");
    let mut alice = alice(&server);
    let _bridge = start(&dir, &[], &[]);
    wait_bot(&mut alice, "pincer", &dir);
    let out = dir
        .command()
        .args([
            "send",
            "--channel",
            "irc",
            "--to",
            "#team",
            "--wait",
            "20",
            "The **build** is green",
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(from_bot(&mut alice, "#team").text(), "The build is green");
    let out = dir
        .command()
        .args(["send", "--channel", "irc", "--to", "two words", "x"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--to: expected #channel or a nick"));
    // A table with a Telegram key, and a bad nick, are refused at start.
    let bad = setup(&server, "token_env = \"X\"\n");
    let out = bad
        .command()
        .args(["serve", "--channel", "irc"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("channels.irc (kind = \"irc\"): unknown field `token_env`"),
        "{err}"
    );
    let config = bad.path().join("config").join("pincer").join("config.toml");
    let text = std::fs::read_to_string(&config).unwrap();
    std::fs::write(
        &config,
        text.replace("token_env = \"X\"\n", "")
            .replace("nick = \"pincer\"", "nick = \"9 lives\""),
    )
    .unwrap();
    let out = bad
        .command()
        .args(["serve", "--channel", "irc"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("channel irc: nick"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Kills the bridge outright (`kill -9`).
fn crash(mut bridge: Bridge) {
    bridge.child.kill().unwrap();
    bridge.child.wait().unwrap();
}

#[test]
fn a_reply_decided_while_the_server_is_down_survives_a_kill_and_arrives_once() {
    let server = IrcServer::start_default();
    let dir = setup(&server, "");
    let mut alice = alice(&server);
    let bridge = start(
        &dir,
        &[json!([{"delay_ms": 1500}, {"text": "Made it."}])],
        &[],
    );
    wait_bot(&mut alice, "pincer", &dir);
    alice.privmsg("pincer", "answer later");
    // Taken in (its chat's session made) before the server goes away.
    let deadline = std::time::Instant::now() + WAIT;
    while dir
        .command()
        .args(["sessions", "list", "--json"])
        .output()
        .unwrap()
        .stdout
        .is_empty()
    {
        assert!(std::time::Instant::now() < deadline, "{}", dir.log());
        std::thread::sleep(Duration::from_millis(50));
    }
    // The server goes away while the run works: its reply is recorded and
    // waits, retried, for a connection.
    server.stop();
    let deadline = std::time::Instant::now() + WAIT;
    while !dir.outbox().iter().any(|i| {
        i["kind"] == "reply" && i["status"] == "pending" && i["attempt"].as_u64() > Some(0)
    }) {
        assert!(std::time::Instant::now() < deadline, "{:#?}", dir.outbox());
        std::thread::sleep(Duration::from_millis(100));
    }
    crash(bridge);
    server.restart();
    let mut alice = self::alice(&server);
    let _bridge = start(&dir, &[], &[]);
    wait_bot(&mut alice, "pincer", &dir);
    assert_eq!(from_bot(&mut alice, "alice").text(), "Made it.");
    assert!(
        alice
            .try_expect(
                |m| m.is("PRIVMSG") && m.nick() == Some("pincer"),
                Duration::from_secs(2)
            )
            .is_none(),
        "sent once"
    );
    let reply = dir
        .outbox()
        .into_iter()
        .find(|i| i["kind"] == "reply")
        .unwrap();
    assert_eq!(reply["status"], "sent");
}

#[test]
fn a_kill_while_lines_go_out_leaves_the_reply_unknown_and_never_resent() {
    let server = IrcServer::start_default();
    let dir = setup(&server, "");
    let mut alice = alice(&server);
    // 24 lines: three units of eight, paced at a line a second after three.
    let lines: Vec<String> = (1..=24).map(|i| format!("line {i}")).collect();
    let bridge = start(&dir, &[json!([{"text": lines.join("\n\n")}])], &[]);
    wait_bot(&mut alice, "pincer", &dir);
    alice.privmsg("pincer", "count");
    // The fifth line is out: the first unit's acknowledgement (after its
    // eighth) has not come.
    for i in 1..=5 {
        assert_eq!(from_bot(&mut alice, "alice").text(), format!("line {i}"));
    }
    crash(bridge);
    let unsent = alice.drain(Duration::from_millis(300));
    let _bridge = start(&dir, &[], &[]);
    wait_bot(&mut alice, "pincer", &dir);
    // Recovery: the unit in flight may have been shown, so nothing of the
    // reply is sent again; it is reported.
    let deadline = std::time::Instant::now() + WAIT;
    let reply = loop {
        let reply = dir
            .outbox()
            .into_iter()
            .find(|i| i["kind"] == "reply")
            .unwrap();
        if reply["status"] == "unknown_after_send" || std::time::Instant::now() > deadline {
            break reply;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    assert_eq!(reply["status"], "unknown_after_send", "{reply:#}");
    let late = alice.drain(Duration::from_secs(3));
    let resent: Vec<&str> = unsent
        .iter()
        .chain(&late)
        .filter(|m| m.is("PRIVMSG") && m.nick() == Some("pincer"))
        .map(|m| m.text())
        .filter(|t| t.starts_with("line 1") && t.len() == "line 1".len())
        .collect();
    assert!(resent.is_empty(), "line 1 came again: {resent:?}");
    let out = dir.command().arg("verify").output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
}

#[test]
fn tls_with_a_server_password_checks_the_certificate() {
    let server = IrcServer::start(IrcOptions {
        tls: true,
        password: Some("server-secret".into()),
        ..IrcOptions::default()
    });
    let extra = format!(
        "tls = true\ntls_ca = \"{}\"\npassword_env = \"IRC_PASSWORD\"\n",
        server.ca_path().display()
    );
    let dir = setup(&server, &extra);
    // The bot speaks TLS on the server's TLS port.
    let config = dir.path().join("config").join("pincer").join("config.toml");
    let text = std::fs::read_to_string(&config).unwrap();
    std::fs::write(
        &config,
        text.replace(&server.addr().to_string(), &server.tls_addr().to_string()),
    )
    .unwrap();
    // Alice on the plain port (the harness sends the server's password).
    let mut alice = alice(&server);
    let bridge = start(
        &dir,
        &[json!([{"text": "Over TLS."}])],
        &[("IRC_PASSWORD", "server-secret")],
    );
    wait_bot(&mut alice, "pincer", &dir);
    alice.privmsg("pincer", "secure?");
    assert_eq!(from_bot(&mut alice, "alice").text(), "Over TLS.");
    drop(bridge);
    // Without the server's CA the system's certificates refuse it: the
    // status says why, and nothing connects.
    std::fs::write(
        &config,
        std::fs::read_to_string(&config)
            .unwrap()
            .lines()
            .filter(|l| !l.starts_with("tls_ca"))
            .collect::<Vec<_>>()
            .join("\n"),
    )
    .unwrap();
    let _bridge = start(&dir, &[], &[("IRC_PASSWORD", "server-secret")]);
    let deadline = std::time::Instant::now() + WAIT;
    let status = loop {
        let out = dir
            .command()
            .args(["channels", "status", "--json"])
            .output()
            .unwrap();
        let status: Value = serde_json::from_str(String::from_utf8_lossy(&out.stdout).trim())
            .unwrap_or(Value::Null);
        if status["connected"] == false || std::time::Instant::now() > deadline {
            break status;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    assert_eq!(status["connected"], false, "{status}");
    assert!(
        status["last_error"]
            .as_str()
            .unwrap_or_default()
            .contains("TLS"),
        "{status}"
    );
}
