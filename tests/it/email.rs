//! The email channel's IMAP and SMTP sides against a real Dovecot and SMTP
//! server (`support::mail`), in every TLS mode; and through the binary
//! what only email has (the common lifecycle is `tests/it/conformance.rs`'s):
//! a restart from the stored watermark answering nothing twice (a mail
//! delivered again recognised, one written meanwhile answered once), a
//! `kill -9` after the SMTP server took a reply but before its `250` (the
//! same mail sent again, its subject looked up over IMAP, the intent
//! `sent`), and `authserv_id` trusting `From` only when authenticated.

use std::sync::Arc;

use pincer::channels::email::{
    EmailSettings, Security, imap_login, parse_mail, reply_message, smtp_transport,
};

use crate::support::mail::{MailOptions, MailServer};

fn settings(server: &MailServer, security: Security, port: u16) -> EmailSettings {
    let tls = (security != Security::None)
        .then(|| Arc::new(pincer::net::tls_config(Some(&server.ca_path())).unwrap()));
    EmailSettings {
        imap: format!("127.0.0.1:{port}"),
        smtp: String::new(),
        security,
        tls,
        tls_ca: (security != Security::None).then(|| server.ca_path()),
        username: "pincer".into(),
        password: "pincer-password".into(),
        address: "pincer@example.org".into(),
        folder: "INBOX".into(),
        poll_secs: 30,
        authserv_id: None,
    }
}

#[test]
fn imap_logs_in_in_every_tls_mode_and_reads_a_mail() {
    let server = MailServer::start(MailOptions {
        tls: true,
        ..MailOptions::default()
    });
    server.add_user("pincer", "pincer-password");
    server.add_user("alice", "alice-password");
    server.send(
        "alice@example.org",
        "pincer@example.org",
        "the build",
        "Is it green?",
        &[],
    );
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    for (security, port) in [
        (Security::None, server.imap_port()),
        (Security::StartTls, server.imap_port()),
        (Security::Implicit, server.imaps_port()),
    ] {
        let settings = settings(&server, security, port);
        runtime.block_on(async {
            let mut session = imap_login(&settings)
                .await
                .unwrap_or_else(|e| panic!("{security:?}: {e}"));
            let mailbox = session.select("INBOX").await.unwrap();
            assert!(mailbox.uid_validity.is_some());
            use futures::TryStreamExt as _;
            let fetched: Vec<_> = session
                .uid_fetch("1:*", "(UID BODY.PEEK[])")
                .await
                .unwrap()
                .try_collect()
                .await
                .unwrap();
            let mail = parse_mail(fetched[0].uid.unwrap(), fetched[0].body().unwrap()).unwrap();
            assert_eq!(mail.from, "alice@example.org");
            assert_eq!(mail.subject, "the build");
            assert_eq!(mail.body, "Is it green?");
            session.logout().await.unwrap();
        });
    }
    // A wrong password is named.
    let mut wrong = settings(&server, Security::None, server.imap_port());
    wrong.password = "nope".into();
    let err = runtime.block_on(imap_login(&wrong)).err().unwrap();
    assert!(err.contains("logging in to 127.0.0.1"), "{err}");
}

#[test]
fn smtp_sends_a_threaded_reply_in_every_tls_mode() {
    use lettre::AsyncTransport as _;

    let server = MailServer::start(MailOptions {
        tls: true,
        smtp_auth: true,
        ..MailOptions::default()
    });
    server.add_user("pincer", "pincer-password");
    server.add_user("alice", "alice-password");
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let modes = [
        (Security::StartTls, server.smtp_port()),
        (Security::Implicit, server.smtps_port()),
    ];
    for (i, (security, port)) in modes.into_iter().enumerate() {
        let mut settings = settings(&server, security, server.imap_port());
        settings.smtp = format!("127.0.0.1:{port}");
        let target = pincer::core::channel::Target {
            kind: pincer::core::channel::TargetKind::Thread,
            id: "alice@example.org".into(),
            thread: Some("<root@example.org>".into()),
        };
        let key = format!("reply:run_{i}:0");
        let message = reply_message(
            &settings,
            &target,
            "Re: the build",
            &pincer::core::channel::Unit {
                text: "It is **green**.".into(),
                markup: Some("<p>It is <strong>green</strong>.</p>".into()),
                ..Default::default()
            },
            Some("<q1@example.org>"),
            &key,
        )
        .unwrap();
        let transport = smtp_transport(&settings).unwrap();
        runtime
            .block_on(transport.send(message))
            .unwrap_or_else(|e| panic!("{security:?}: {e}"));
        let expected = pincer::channels::email::message_id_for(&key, "pincer@example.org");
        let mail = server.wait_for(
            "alice",
            |m| {
                m.header("Message-ID")
                    .first()
                    .is_some_and(|id| id.trim() == expected)
            },
            std::time::Duration::from_secs(20),
        );
        assert_eq!(mail.header("In-Reply-To"), ["<q1@example.org>"]);
        assert_eq!(
            mail.header("References"),
            ["<root@example.org> <q1@example.org>"]
        );
        assert!(
            mail.text
                .as_deref()
                .unwrap_or_default()
                .contains("It is **green**.")
        );
        assert!(
            mail.html
                .as_deref()
                .unwrap_or_default()
                .contains("<strong>green</strong>")
        );
    }
}

// Through the binary (`pincer serve --channel mail`), against one mail
// server these tests share, each with users of its own.

use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::support::TestDir;
use crate::support::mail::ReceivedMail;

const WAIT: Duration = Duration::from_secs(30);

/// The server these tests share: plain, SMTP AUTH required.
fn server() -> &'static MailServer {
    static SERVER: std::sync::OnceLock<MailServer> = std::sync::OnceLock::new();
    SERVER.get_or_init(|| {
        MailServer::start(MailOptions {
            smtp_auth: true,
            ..MailOptions::default()
        })
    })
}

/// A test's users: `PREFIX-pincer` (the channel's mailbox), `PREFIX-alice`
/// (allowed) and `PREFIX-bob`.
struct People {
    pincer: String,
    alice: String,
    bob: String,
}

impl People {
    fn new(prefix: &str) -> Self {
        let people = Self {
            pincer: format!("{prefix}-pincer"),
            alice: format!("{prefix}-alice"),
            bob: format!("{prefix}-bob"),
        };
        for user in [&people.pincer, &people.alice, &people.bob] {
            server().add_user(user, &format!("{user}-password"));
        }
        people
    }

    fn address(&self, user: &str) -> String {
        server().address(user)
    }

    /// `user` writes to Pincer; the mail's `Message-ID`.
    fn says(&self, user: &str, subject: &str, text: &str, headers: &[(&str, &str)]) -> String {
        server().send(
            &self.address(user),
            &self.address(&self.pincer),
            subject,
            text,
            headers,
        )
    }

    /// `user` answers Pincer's latest mail to them, in its thread.
    fn answers(&self, user: &str, text: &str) -> String {
        let last = self
            .mails_from_pincer(user)
            .pop()
            .expect("a mail from Pincer to answer");
        let id = last.headers.message_id.clone().unwrap_or_default();
        let references = format!(
            "{} {id}",
            last.headers.references.clone().unwrap_or_default()
        );
        let subject = last.headers.subject.clone().unwrap_or_default();
        self.says(
            user,
            &subject,
            text,
            &[("In-Reply-To", &id), ("References", references.trim())],
        )
    }

    /// Pincer's mails in `user`'s INBOX, oldest first.
    fn mails_from_pincer(&self, user: &str) -> Vec<ReceivedMail> {
        let pincer = self.address(&self.pincer);
        server()
            .fetch_all(user)
            .into_iter()
            .filter(|m| {
                m.headers
                    .from
                    .as_deref()
                    .is_some_and(|f| f.contains(&pincer))
            })
            .collect()
    }

    /// Waits until `user` has `count` mails from Pincer; their texts.
    fn wait_texts(&self, user: &str, count: usize, dir: &TestDir) -> Vec<String> {
        let deadline = Instant::now() + WAIT;
        loop {
            let mails = self.mails_from_pincer(user);
            if mails.len() >= count {
                return mails
                    .iter()
                    .map(|m| m.text.clone().unwrap_or_default().trim().to_owned())
                    .collect();
            }
            assert!(
                Instant::now() < deadline,
                "{user} has {} mails from Pincer, not {count}\n{}\n{}",
                mails.len(),
                dir.log(),
                server().logs()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

fn setup(people: &People, extra: &str) -> TestDir {
    let dir = TestDir::new();
    let config = dir.path().join("config").join("pincer");
    std::fs::create_dir_all(&config).unwrap();
    std::fs::write(
        config.join("config.toml"),
        format!(
            "[channels.mail]\nkind = \"email\"\nimap = \"127.0.0.1:{}\"\nsmtp = \"127.0.0.1:{}\"\n\
             tls = \"none\"\nusername = \"{}\"\npassword_env = \"MAIL_PASSWORD\"\naddress = \"{}\"\n\
             poll_secs = 1\nallow = [\"{}\"]\nworkspace = \"{}\"\ncoalesce_ms = 50\n{extra}",
            server().imap_port(),
            server().smtp_port(),
            people.pincer,
            people.address(&people.pincer),
            people.address(&people.alice),
            dir.workspace().display()
        ),
    )
    .unwrap();
    dir
}

/// `pincer serve --channel mail`, its stderr appended to `stderr.log`.
struct Bridge {
    child: Child,
}

impl Bridge {
    fn start(dir: &TestDir, people: &People, script: &[Value]) -> Self {
        let name = format!(
            "s{}.jsonl",
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos()
        );
        let script = dir.script(&name, script);
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(dir.path().join("stderr.log"))
            .unwrap();
        let child = dir
            .command()
            .env("MAIL_PASSWORD", format!("{}-password", people.pincer))
            .env("PINCER_PAIRING_CODE", "mail-code")
            .args([
                "serve",
                "--channel",
                "mail",
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
        let bridge = Self { child };
        connected(dir);
        bridge
    }

    /// `kill -9`.
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

/// Waits until the channel says it is connected (its mailbox selected).
fn connected(dir: &TestDir) {
    let deadline = Instant::now() + WAIT;
    loop {
        let out = dir
            .command()
            .args(["channels", "status", "--json"])
            .output()
            .unwrap();
        if String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .any(|s| s["connected"] == true)
        {
            return;
        }
        assert!(Instant::now() < deadline, "never connected: {}", dir.log());
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn replies(dir: &TestDir) -> Vec<Value> {
    dir.outbox()
        .into_iter()
        .filter(|i| i["kind"] == "reply")
        .collect()
}

fn verify(dir: &TestDir) {
    let out = dir.command().arg("verify").output().unwrap();
    assert!(
        out.status.success(),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Every session's history, as `pincer sessions show --json` gives it.
fn histories(dir: &TestDir) -> String {
    let out = dir
        .command()
        .args(["sessions", "list", "--json"])
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| {
            let session: Value = serde_json::from_str(l).unwrap();
            let id = session["session_id"].as_str().unwrap().to_owned();
            let shown = dir
                .command()
                .args(["sessions", "show", &id, "--json"])
                .output()
                .unwrap();
            let shown: Value = serde_json::from_slice(&shown.stdout).unwrap();
            shown["history"].to_string()
        })
        .collect()
}

/// The scripted model answers a session's turns in order, across restarts.
fn three_turns() -> [Value; 3] {
    [
        json!([{"text": "First."}]),
        json!([{"text": "Second."}]),
        json!([{"text": "Third."}]),
    ]
}

#[test]
fn a_restart_from_the_watermark_answers_nothing_twice() {
    let people = People::new("mark");
    let dir = setup(&people, "");
    let bridge = Bridge::start(&dir, &people, &three_turns());
    let first = people.says(&people.alice, "the plan", "alpha-word", &[]);
    assert_eq!(people.wait_texts(&people.alice, 1, &dir), ["First."]);
    // The same mail delivered again (a sender's retry after a lost `250`):
    // a new UID, the same Message-ID, recognised. The next mail in the
    // thread, read after it, is answered.
    people.says(
        &people.alice,
        "the plan",
        "alpha-word",
        &[("Message-ID", &first)],
    );
    people.answers(&people.alice, "bravo-word");
    assert_eq!(
        people.wait_texts(&people.alice, 2, &dir),
        ["First.", "Second."]
    );
    bridge.crash();
    // While nobody serves the mailbox: the first mail once more, and a new
    // one in the thread.
    people.says(
        &people.alice,
        "the plan",
        "alpha-word",
        &[("Message-ID", &first)],
    );
    people.answers(&people.alice, "charlie-word");
    let _bridge = Bridge::start(&dir, &people, &three_turns());
    let texts = people.wait_texts(&people.alice, 3, &dir);
    assert_eq!(texts, ["First.", "Second.", "Third."], "{}", dir.log());
    // Every mail before the restart's last one was read past: each prompt
    // is in the conversation once, and answered once.
    let history = histories(&dir);
    for word in ["alpha-word", "bravo-word", "charlie-word"] {
        assert_eq!(history.matches(word).count(), 1, "{word}: {history}");
    }
    assert_eq!(replies(&dir).len(), 3, "{:#?}", dir.outbox());
    let subjects: Vec<Option<String>> = people
        .mails_from_pincer(&people.alice)
        .into_iter()
        .map(|m| m.headers.subject)
        .collect();
    assert_eq!(subjects, vec![Some("Re: the plan".to_owned()); 3]);
    // A mail that answers none has a subject of its own.
    let bob = people.address(&people.bob);
    let sent = dir
        .command()
        .env("MAIL_PASSWORD", format!("{}-password", people.pincer))
        .args(["send", "--channel", "mail", "--to", &bob, "Hi Bob."])
        .output()
        .unwrap();
    assert!(
        sent.status.success(),
        "{}",
        String::from_utf8_lossy(&sent.stderr)
    );
    assert_eq!(people.wait_texts(&people.bob, 1, &dir), ["Hi Bob."]);
    assert_eq!(
        people.mails_from_pincer(&people.bob)[0]
            .headers
            .subject
            .as_deref(),
        Some("A message from Pincer")
    );
    verify(&dir);
}

#[test]
fn a_kill_after_the_smtp_server_took_a_reply_sends_the_same_mail_again() {
    let people = People::new("held");
    let dir = setup(&people, "");
    let pincer = people.address(&people.pincer);
    let bridge = Bridge::start(&dir, &people, &[json!([{"text": "Held reply."}])]);
    server().hold_replies(&pincer, WAIT * 2);
    people.says(&people.alice, "the held one", "hold this", &[]);
    // The server has the reply in alice's Maildir; Pincer waits for its 250.
    server().wait_for_smtp(|e| e.mail_from == pincer && e.held, WAIT);
    bridge.crash();
    server().release_replies(&pincer);
    let left = replies(&dir);
    assert_eq!(left.len(), 1, "{left:#?}");
    assert_eq!(left[0]["status"], "sending", "{left:#?}");

    // After the restart (a process that never read the mail): sent again,
    // the same message.
    let _bridge = Bridge::start(&dir, &people, &[]);
    let deadline = Instant::now() + WAIT;
    while replies(&dir)[0]["status"] != "sent" {
        assert!(
            Instant::now() < deadline,
            "{:#?}\n{}",
            dir.outbox(),
            dir.log()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let texts = people.wait_texts(&people.alice, 2, &dir);
    assert_eq!(texts, ["Held reply.", "Held reply."]);
    let mails = people.mails_from_pincer(&people.alice);
    let expected = pincer::channels::email::message_id_for(
        &format!("{}:0", left[0]["id"].as_str().unwrap_or_default()),
        &pincer,
    );
    for mail in &mails {
        assert_eq!(mail.headers.message_id.as_deref(), Some(expected.as_str()));
        // The thread's subject, looked up over IMAP by the new process.
        assert_eq!(
            mail.headers.subject.as_deref(),
            Some("Re: the held one"),
            "{:?}\n{}",
            mails.iter().map(|m| &m.headers.subject).collect::<Vec<_>>(),
            dir.log()
        );
    }
    assert_eq!(
        server()
            .smtp_log()
            .iter()
            .filter(|e| e.mail_from == pincer)
            .count(),
        2
    );
    assert!(
        dir.outbox()
            .iter()
            .all(|i| i["status"] != "unknown_after_send"),
        "{:#?}",
        dir.outbox()
    );
    assert!(!dir.log().contains("unknown after send"), "{}", dir.log());
    verify(&dir);
}

#[test]
fn with_an_authserv_id_only_a_from_the_server_authenticated_is_allowed() {
    let people = People::new("auth");
    let dir = setup(&people, "authserv_id = \"mx.pincer.test\"\n");
    let _bridge = Bridge::start(&dir, &people, &[json!([{"text": "Hello."}])]);
    let alice = &people.alice;
    // No word from the receiving server: a stranger, told how to pair.
    people.says(alice, "is it me?", "alpha-word", &[]);
    let told = people.wait_texts(alice, 1, &dir);
    assert!(told[0].contains("/pair"), "{told:?}");
    // The server says DMARC passed: alice, allowed.
    let pass = "mx.pincer.test; spf=pass smtp.mailfrom=example.org;\r\n \
                dkim=pass (good signature) header.d=example.org;\r\n \
                dmarc=pass header.from=example.org";
    people.says(
        alice,
        "it is me",
        "bravo-word",
        &[("Authentication-Results", pass)],
    );
    assert_eq!(people.wait_texts(alice, 2, &dir)[1], "Hello.");
    // Another server's word, or a DKIM signature of another domain: not.
    people.says(
        alice,
        "me too",
        "charlie-word",
        &[(
            "Authentication-Results",
            "mx.evil.test; dmarc=pass header.from=example.org",
        )],
    );
    people.says(
        alice,
        "me three",
        "delta-word",
        &[(
            "Authentication-Results",
            "mx.pincer.test; dkim=pass header.d=evil.test",
        )],
    );
    // Pairing still works, for the unverified address.
    people.says(alice, "pairing", "/pair mail-code", &[]);
    assert!(people.wait_texts(alice, 3, &dir)[2].starts_with("Paired"));
    people.says(alice, "paired", "echo-word", &[]);
    let texts = people.wait_texts(alice, 4, &dir);
    assert_eq!(texts[3], "Hello.", "{texts:?}");
    let history = histories(&dir);
    for (word, times) in [
        ("alpha-word", 0),
        ("bravo-word", 1),
        ("charlie-word", 0),
        ("delta-word", 0),
        ("echo-word", 1),
    ] {
        assert_eq!(history.matches(word).count(), times, "{word}: {history}");
    }
    assert_eq!(people.mails_from_pincer(alice).len(), 4, "{texts:?}");
    verify(&dir);
}

/// A run's changes: the reply mail, then `changes.diff` attached to a mail
/// of its own in the thread, its text the caption, its `Message-ID` the
/// intent's second part's.
#[test]
fn a_runs_changes_come_attached_to_a_mail_in_the_thread() {
    let people = People::new("files");
    let dir = setup(&people, "");
    let path = dir.path().join("config/pincer/config.toml");
    let config = std::fs::read_to_string(&path).unwrap();
    std::fs::write(&path, format!("mode = \"full\"\n{config}")).unwrap();
    std::fs::write(dir.workspace().join("notes.md"), "old line\n").unwrap();
    let _bridge = Bridge::start(
        &dir,
        &people,
        &[
            json!([{"tool_call": {"id": "w1", "name": "write_file", "arguments": {"path": "notes.md", "content": "new line\n"}}}]),
            json!([{"text": "Updated the notes."}]),
        ],
    );
    let asked = people.says(&people.alice, "the notes", "update the notes", &[]);
    let texts = people.wait_texts(&people.alice, 2, &dir);
    assert_eq!(texts, ["Updated the notes.", "Changes to 1 file: notes.md"]);
    let mails = people.mails_from_pincer(&people.alice);
    assert!(
        mails[0].attachments.is_empty(),
        "{:?}",
        mails[0].attachments
    );
    let changes = &mails[1];
    assert_eq!(changes.attachments, [Some("changes.diff".to_owned())]);
    assert_eq!(changes.headers.subject.as_deref(), Some("Re: the notes"));
    assert_eq!(changes.header("References"), [asked.as_str()]);
    let raw = changes.bytes();
    let parsed = mail_parser::MessageParser::default().parse(&raw).unwrap();
    let attached: Vec<_> = parsed.attachments().collect();
    assert_eq!(attached.len(), 1);
    let diff = String::from_utf8(attached[0].contents().to_vec()).unwrap();
    assert!(
        diff.contains("--- a/notes.md\n+++ b/notes.md\n")
            && diff.contains("-old line\n+new line\n"),
        "{diff}"
    );
    let reply = replies(&dir).pop().unwrap();
    assert_eq!(reply["status"], "sent", "{reply:#}");
    assert_eq!(
        changes.headers.message_id.as_deref(),
        reply["receipt"]["parts"][1]["platform_id"].as_str(),
        "{reply:#}"
    );
    verify(&dir);
}
