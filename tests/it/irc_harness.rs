//! The IRC test harness (`support::irc`) against a real ngIRCd: people
//! talking privately and in a channel, the 512-byte line limit and how the
//! server relays (and cuts) lines, flood penalties on and off, a restart on
//! the same port, the server password, TLS, and the line parser.

use std::time::{Duration, Instant};

use crate::support::irc::{Connect, IrcMessage, IrcOptions, IrcServer, IrcUser, TIMEOUT};

/// A nickname no other test on the shared server uses.
fn nick(base: &str) -> String {
    format!("{base}{}", std::process::id() % 10_000)
}

#[test]
fn two_people_talk_privately_and_in_a_channel() {
    let started = Instant::now();
    let server = IrcServer::shared();
    eprintln!("shared ngIRCd ready after {:?}", started.elapsed());
    let (a, b) = (nick("alice"), nick("bob"));
    let mut alice = IrcUser::connect(server, &a);
    let mut bob = IrcUser::connect(server, &b);
    assert_eq!(alice.mask(), format!("{a}!~{a}@127.0.0.1"));

    alice.privmsg(&b, "hello bob");
    let got = bob.expect_privmsg(&a, &b);
    assert_eq!(got.text(), "hello bob");
    assert_eq!(got.prefix.as_deref(), Some(alice.mask()));
    assert_eq!(got.user(), Some(format!("~{a}").as_str()));
    assert_eq!(got.host(), Some("127.0.0.1"));

    bob.notice(&a, "a notice");
    let got = alice.expect(|m| m.is("NOTICE") && m.nick() == Some(b.as_str()), TIMEOUT);
    assert_eq!(got.args(), vec![a.as_str(), "a notice"]);

    let channel = format!("#team{}", std::process::id() % 10_000);
    let joined = alice.join(&channel);
    assert_eq!(joined.prefix.as_deref(), Some(alice.mask()));
    bob.join(&channel);
    alice.wait_for_join(&b, &channel);
    bob.privmsg(&channel, "hi team: a line with spaces, : and ünïcödé");
    let got = alice.expect_privmsg(&b, &channel);
    assert_eq!(got.text(), "hi team: a line with spaces, : and ünïcödé");
    // The sender does not get its own channel message back.
    assert!(
        bob.try_expect(|m| m.is("PRIVMSG"), Duration::from_millis(300))
            .is_none()
    );
    alice.part(&channel);
    alice.quit("bye");
    bob.quit("bye");
}

#[test]
fn a_line_may_have_512_bytes_with_crlf_and_relayed_lines_are_cut_at_512() {
    let server = IrcServer::start_default();
    let mut alice = IrcUser::connect(&server, "alice");
    let mut bob = IrcUser::connect(&server, "bob");
    let head = "PRIVMSG bob :";
    // The longest text relayed whole: the relayed line, with the prefix
    // the server puts before it, is 512 bytes with CR LF.
    let relayed_head = format!(":{} {head}", alice.mask());
    assert_eq!(relayed_head, ":alice!~alice@127.0.0.1 PRIVMSG bob :");
    let whole = "w".repeat(512 - 2 - relayed_head.len());
    alice.privmsg("bob", &whole);
    let got = bob.expect_privmsg("alice", "bob");
    assert_eq!(got.text(), whole);
    assert_eq!(got.len, 510);

    // 512 bytes from alice with CR LF: accepted, relayed cut to 512 with
    // "[CUT]" at the end.
    let text = "x".repeat(512 - 2 - head.len());
    let line = format!("{head}{text}\r\n");
    assert_eq!(line.len(), 512);
    alice.send_bytes(line.as_bytes());
    let got = bob.expect_privmsg("alice", "bob");
    assert_eq!(got.len, 510, "{}", got.raw);
    assert!(got.raw.ends_with("x[CUT]"), "{}", got.raw);
    let kept = 510 - relayed_head.len() - "[CUT]".len();
    assert_eq!(got.text(), format!("{}[CUT]", &text[..kept]));

    // One byte more: the connection is closed, nothing relayed.
    let line = format!("{head}{text}y\r\n");
    assert_eq!(line.len(), 513);
    alice.send_bytes(line.as_bytes());
    let error = alice.expect_closed(TIMEOUT).expect("an ERROR line");
    assert_eq!(error.text(), "Request too long");
    assert!(
        bob.try_expect(|m| m.is("PRIVMSG"), Duration::from_millis(500))
            .is_none()
    );
}

/// Sends `count` short lines from `alice` to `bob` in one write; how long
/// until `bob` has them all.
fn burst(alice: &mut IrcUser, bob: &mut IrcUser, count: usize) -> Duration {
    let lines: String = (0..count)
        .map(|i| format!("PRIVMSG {} :line {i}\r\n", bob.nick()))
        .collect();
    let started = Instant::now();
    alice.send_bytes(lines.as_bytes());
    for i in 0..count {
        let text = format!("line {i}");
        bob.expect(|m| m.is("PRIVMSG") && m.text() == text, TIMEOUT);
    }
    started.elapsed()
}

#[test]
fn flood_penalties_are_off_unless_asked_for() {
    let server = IrcServer::start_default();
    let mut alice = IrcUser::connect(&server, "alice");
    let mut bob = IrcUser::connect(&server, "bob");
    // Three a second would take ten.
    let took = burst(&mut alice, &mut bob, 30);
    assert!(took < Duration::from_secs(5), "30 lines took {took:?}");

    // As ngIRCd ships: three lines a second once more than three wait.
    let server = IrcServer::start(IrcOptions {
        flood_protection: true,
        ..IrcOptions::default()
    });
    let mut alice = IrcUser::connect(&server, "alice");
    let mut bob = IrcUser::connect(&server, "bob");
    let took = burst(&mut alice, &mut bob, 10);
    assert!(
        took >= Duration::from_secs(2),
        "10 lines at once were not delayed by the penalties: {took:?}"
    );
}

#[test]
fn a_restart_keeps_the_port_and_people_reconnect() {
    let started = Instant::now();
    let server = IrcServer::start_default();
    eprintln!("ngIRCd ready after {:?}", started.elapsed());
    let port = server.port();
    let mut alice = IrcUser::connect(&server, "alice");
    let started = Instant::now();
    server.restart();
    eprintln!("ngIRCd restarted after {:?}", started.elapsed());
    assert_eq!(server.port(), port);
    assert!(server.is_running());
    // The old connection ends (ngIRCd says ERROR as it goes down).
    alice.expect_closed(TIMEOUT);

    let mut alice = IrcUser::connect(&server, "alice");
    let mut bob = IrcUser::connect(&server, "bob");
    alice.privmsg("bob", "back again");
    assert_eq!(bob.expect_privmsg("alice", "bob").text(), "back again");

    server.stop();
    assert!(!server.is_running());
    assert!(std::net::TcpStream::connect(server.addr()).is_err());
    server.restart();
    IrcUser::connect(&server, "carol");
}

#[test]
fn the_server_password_is_required() {
    let server = IrcServer::start(IrcOptions {
        password: Some("s3cret".into()),
        ..IrcOptions::default()
    });
    let wrong = IrcUser::connect_with(
        &server,
        "mallory",
        &Connect {
            password: Some("guess".into()),
            ..Connect::default()
        },
    );
    let refusal = wrong.err().expect("a wrong password is refused");
    assert!(refusal.contains("ERROR"), "{refusal}");
    assert!(refusal.contains("password"), "{refusal}");
    eprintln!("a wrong password: {refusal}");
    // No password at all: refused too.
    let none = IrcUser::connect_with(
        &server,
        "mallory",
        &Connect {
            no_password: true,
            ..Connect::default()
        },
    );
    let refusal = none.err().expect("no password is refused");
    assert!(refusal.contains("password"), "{refusal}");
    let mut alice = IrcUser::connect(&server, "alice");
    alice.privmsg("alice", "to myself");
    assert_eq!(alice.expect_privmsg("alice", "alice").text(), "to myself");
}

#[test]
fn tls_connects_and_talks_with_plain_clients() {
    let started = Instant::now();
    let server = IrcServer::start(IrcOptions {
        tls: true,
        ..IrcOptions::default()
    });
    eprintln!("ngIRCd with TLS ready after {:?}", started.elapsed());
    assert_ne!(server.tls_port(), Some(server.port()));
    let mut alice = IrcUser::connect_tls(&server, "alice");
    let mut bob = IrcUser::connect(&server, "bob");
    alice.privmsg("bob", "over TLS");
    assert_eq!(bob.expect_privmsg("alice", "bob").text(), "over TLS");
    bob.privmsg("alice", "back in the clear");
    assert_eq!(
        alice.expect_privmsg("bob", "alice").text(),
        "back in the clear"
    );
    alice.quit("done");
}

#[test]
fn lines_parse_per_rfc_2812_with_and_without_tags() {
    let m = IrcMessage::parse(":nick!~user@127.0.0.1 PRIVMSG #team :hello: there\r\n").unwrap();
    assert!(m.tags.is_empty());
    assert_eq!(m.nick(), Some("nick"));
    assert_eq!(m.user(), Some("~user"));
    assert_eq!(m.host(), Some("127.0.0.1"));
    assert_eq!(m.command, "PRIVMSG");
    assert_eq!(m.params, vec!["#team"]);
    assert_eq!(m.trailing.as_deref(), Some("hello: there"));
    assert_eq!(m.text(), "hello: there");

    let m = IrcMessage::parse("PING irc.pincer.test").unwrap();
    assert_eq!(m.prefix, None);
    assert_eq!(m.args(), vec!["irc.pincer.test"]);
    assert_eq!(m.text(), "irc.pincer.test");

    let m = IrcMessage::parse(":irc.pincer.test 005 me A=1 B :are supported").unwrap();
    assert_eq!(m.nick(), Some("irc.pincer.test"));
    assert_eq!(m.user(), None);
    assert_eq!(m.args(), vec!["me", "A=1", "B", "are supported"]);

    let m = IrcMessage::parse("@time=2024-01-01T00:00:00Z;msgid=a\\sb;flag :n!u@h privmsg x :")
        .unwrap();
    assert_eq!(
        m.tags,
        vec![
            ("time".into(), "2024-01-01T00:00:00Z".into()),
            ("msgid".into(), "a b".into()),
            ("flag".into(), String::new()),
        ]
    );
    assert_eq!(m.command, "PRIVMSG");
    assert_eq!(m.trailing.as_deref(), Some(""));
    assert!(IrcMessage::parse("").is_none());
    assert!(IrcMessage::parse(":prefix-only").is_none());
}
