//! The IRC channel on a network with accounts (`docs/channels.md`, IRC):
//! `pincer serve --channel irc` against a real InspIRCd with Anope's
//! NickServ (`support::inspircd`, one network shared by this module's
//! tests, each with nicks, accounts and channels of its own). The bot logs
//! in with SASL PLAIN; with `account-tag`, `allow` holds accounts, so a
//! logged-in account is served whatever its nick and a nick alone is a
//! stranger.

use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::support::TestDir;
use crate::support::inspircd::IrcNetwork;
use crate::support::irc::{IrcMessage, IrcUser};

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

/// A bot `nick` in `channel`, logging in with `IRC_PASSWORD`, allowing
/// `allow`, pairing with `open-sesame`.
fn serve(
    network: &IrcNetwork,
    nick: &str,
    channel: &str,
    allow: &str,
    password: &str,
) -> (TestDir, Bridge) {
    let dir = TestDir::new();
    let config = dir.path().join("config").join("pincer");
    std::fs::create_dir_all(&config).unwrap();
    std::fs::write(
        config.join("config.toml"),
        format!(
            "[channels.irc]\nserver = \"{}\"\nnick = \"{nick}\"\nchannels = [\"{channel}\"]\n\
             password_env = \"IRC_PASSWORD\"\nallow = [\"{allow}\"]\nworkspace = \"{}\"\ncoalesce_ms = 50\n",
            network.addr(),
            dir.workspace().display(),
        ),
    )
    .unwrap();
    let script = dir.script(
        "s.jsonl",
        &[
            json!([{"text": "Hello, account."}]),
            json!([{"text": "Second."}]),
        ],
    );
    let child = dir
        .command()
        .env("IRC_PASSWORD", password)
        .env("PINCER_PAIRING_CODE", "open-sesame")
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
    (dir, Bridge { child })
}

/// Waits until `bot` has joined `channel` (which `user` is in).
fn wait_bot(user: &mut IrcUser, bot: &str, channel: &str, dir: &TestDir) {
    let deadline = Instant::now() + WAIT;
    while Instant::now() < deadline {
        if user
            .try_expect(
                |m| m.is("JOIN") && m.nick() == Some(bot),
                Duration::from_millis(500),
            )
            .is_some()
        {
            return;
        }
        user.send_raw(&format!("NAMES {channel}"));
        let names = user.expect(|m| m.is("353") || m.is("366"), WAIT);
        if names.is("353")
            && names
                .text()
                .split(' ')
                .any(|n| n.trim_start_matches(['@', '+']) == bot)
        {
            return;
        }
    }
    panic!("{bot} never joined {channel}: {}", dir.log());
}

fn from_bot(user: &mut IrcUser, bot: &str, target: &str, dir: &TestDir) -> IrcMessage {
    user.try_expect(
        |m| m.is("PRIVMSG") && m.nick() == Some(bot) && m.arg(0) == Some(target),
        WAIT,
    )
    .unwrap_or_else(|| panic!("no message from {bot} to {target}: {}", dir.log()))
}

fn status(dir: &TestDir) -> Value {
    let out = dir
        .command()
        .args(["channels", "status", "--json"])
        .output()
        .unwrap();
    serde_json::from_str(String::from_utf8_lossy(&out.stdout).trim()).unwrap_or(Value::Null)
}

#[test]
fn the_bot_logs_in_with_sasl_and_senders_are_their_accounts_not_their_nicks() {
    let network = IrcNetwork::shared();
    network.register("acbot1", "bot-secret-1");
    network.register("acalice1", "alice-secret-1");
    let (dir, _bridge) = serve(network, "acbot1", "#acc1", "acalice1", "bot-secret-1");
    // Alice, logged in to her account under another nick.
    let mut alice = network.login("ally1", "acalice1", "alice-secret-1");
    alice.join("#acc1");
    wait_bot(&mut alice, "acbot1", "#acc1", &dir);
    // The server says the bot is logged in to its account.
    assert_eq!(
        IrcNetwork::account_of(&mut alice, "acbot1"),
        Some(Some("acbot1".to_owned())),
        "{}",
        dir.log()
    );
    // Served in private and in the channel, as her account, whatever her nick.
    alice.privmsg("acbot1", "hi");
    assert_eq!(
        from_bot(&mut alice, "acbot1", "ally1", &dir).text(),
        "Hello, account."
    );
    alice.privmsg("#acc1", "acbot1: and here?");
    assert_eq!(
        from_bot(&mut alice, "acbot1", "#acc1", &dir).text(),
        "Hello, account."
    );
    // Someone using the nick `acalice1`, logged in to nothing, is a
    // stranger: told how to pair, not answered in the channel either.
    let mut impostor = network.guest("acalice1");
    impostor.join("#acc1");
    impostor.privmsg("acbot1", "hi, it's me");
    let told = from_bot(&mut impostor, "acbot1", "acalice1", &dir);
    assert!(told.text().contains("/pair"), "{}", told.text());
    impostor.privmsg("#acc1", "acbot1: do something");
    assert!(
        impostor
            .try_expect(
                |m| m.is("PRIVMSG") && m.nick() == Some("acbot1"),
                Duration::from_secs(1)
            )
            .is_none()
    );
    // Alice sees no reply to the impostor in the channel either (her next
    // line from the bot is her own answer).
    alice.privmsg("#acc1", "acbot1: once more");
    assert_eq!(
        from_bot(&mut alice, "acbot1", "#acc1", &dir).text(),
        "Second."
    );
    // Pairing while not logged in pairs the nick as such (`~acalice1`).
    impostor.privmsg("acbot1", "/pair open-sesame");
    assert_eq!(
        from_bot(&mut impostor, "acbot1", "acalice1", &dir).text(),
        "Paired. Send a message to start."
    );
    impostor.privmsg("acbot1", "now?");
    assert_eq!(
        from_bot(&mut impostor, "acbot1", "acalice1", &dir).text(),
        "Hello, account."
    );
    // Alice's private chat is hers: a session of its own, apart from the
    // one of whoever writes from the nick `acalice1` unidentified.
    let out = dir
        .command()
        .args(["sessions", "list", "--json"])
        .output()
        .unwrap();
    let sessions = String::from_utf8_lossy(&out.stdout);
    assert_eq!(sessions.lines().count(), 3, "{sessions}");
}

#[test]
fn a_refused_sasl_login_connects_without_the_account_and_the_status_says_why() {
    let network = IrcNetwork::shared();
    network.register("acbot2", "right-secret-2");
    network.register("acbob2", "bob-secret-2");
    let (dir, _bridge) = serve(network, "acbot2", "#acc2", "acbob2", "wrong-secret-2");
    let mut bob = network.login("acbob2", "acbob2", "bob-secret-2");
    bob.join("#acc2");
    wait_bot(&mut bob, "acbot2", "#acc2", &dir);
    // Connected, logged in to nothing.
    assert_eq!(
        IrcNetwork::account_of(&mut bob, "acbot2"),
        Some(None),
        "{}",
        dir.log()
    );
    // It still serves: accounts are the server's to tell, not the bot's.
    bob.privmsg("acbot2", "still there?");
    assert_eq!(
        from_bot(&mut bob, "acbot2", "acbob2", &dir).text(),
        "Hello, account."
    );
    let status = status(&dir);
    assert_eq!(status["connected"], true, "{status}");
    let error = status["last_error"].as_str().unwrap_or_default();
    assert!(
        error.contains("SASL PLAIN login to account acbot2") && error.contains("904"),
        "{status}"
    );
    assert!(dir.log().contains("IRC login refused"), "{}", dir.log());
    assert!(!dir.log().contains("wrong-secret-2"), "{}", dir.log());
}
