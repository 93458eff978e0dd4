//! The mail test harness (`support::mail`) against a real Dovecot and the
//! aiosmtpd server delivering into its Maildirs: a mail from alice read
//! back over IMAP with its headers and bytes, text and HTML parts kept,
//! IMAP IDLE told of new mail, every TLS mode of IMAP and SMTP with SMTP
//! AUTH, TLS required, unknown recipients, a restart keeping the ports, and
//! a final `250` held back after the delivery.

use std::time::Instant;

use crate::support::mail::{
    ImapClient, MailOptions, MailServer, SmtpClient, TIMEOUT, TlsMode, envelope_address,
};

#[test]
fn a_mail_from_alice_arrives_in_pincers_inbox_over_imap() {
    let started = Instant::now();
    let server = MailServer::start_default();
    eprintln!("Dovecot and smtpd ready after {:?}", started.elapsed());
    // Users added after the start: Dovecot re-reads its passwd-file.
    server.add_user("pincer", "pincer-pw");
    server.add_user("alice", "alice-pw");
    let sent = server.send(
        "Alice <alice@example.org>",
        "pincer@example.org",
        "Lunch? – on Friday",
        "Shall we have lunch?\n.\n.leading dot\nAlice\n",
        &[
            ("In-Reply-To", "<earlier@example.org>"),
            ("References", "<first@example.org> <earlier@example.org>"),
            ("X-Custom", "kept"),
        ],
    );
    assert!(sent.starts_with('<') && sent.ends_with("@person.test>"));
    let mail = server.wait_for(
        "pincer",
        |m| m.headers.message_id.as_deref() == Some(sent.as_str()),
        TIMEOUT,
    );
    eprintln!("sent and read back after {:?}", started.elapsed());
    assert_eq!(mail.headers.subject.as_deref(), Some("Lunch? – on Friday"));
    assert_eq!(
        mail.headers.from.as_deref(),
        Some("Alice <alice@example.org>")
    );
    assert_eq!(mail.headers.to.as_deref(), Some("pincer@example.org"));
    assert_eq!(
        mail.headers.in_reply_to.as_deref(),
        Some("<earlier@example.org>")
    );
    assert_eq!(
        mail.headers.references.as_deref(),
        Some("<first@example.org> <earlier@example.org>")
    );
    assert_eq!(mail.header("x-custom"), vec!["kept"]);
    assert_eq!(
        mail.text.as_deref(),
        Some("Shall we have lunch?\n.\n.leading dot\nAlice\n")
    );
    assert_eq!(mail.html, None);
    assert!(
        !mail.flags.iter().any(|f| f == "\\Seen"),
        "{:?}",
        mail.flags
    );
    // Reading it did not mark it seen.
    let again = server.fetch_all("pincer");
    assert_eq!(again.len(), 1);
    assert!(!again[0].flags.iter().any(|f| f == "\\Seen"));
    assert!(server.fetch_all("alice").is_empty());

    let log = server.smtp_log();
    assert_eq!(log.len(), 1);
    assert_eq!(log[0].mail_from, "alice@example.org");
    assert_eq!(log[0].rcpt_tos, vec!["pincer@example.org"]);
    assert_eq!(log[0].delivered_to, vec!["pincer"]);
    assert_eq!(log[0].message_id.as_deref(), Some(sent.as_str()));
    assert_eq!(log[0].listener, "mx");
    assert!(!log[0].tls);
    assert_eq!(log[0].auth_user, None);
}

#[test]
fn the_bytes_are_kept_exactly_and_a_mail_reaches_every_user_it_names() {
    let server = MailServer::start_default();
    server.add_user("pincer", "pw1");
    server.add_user("bob", "pw2");
    let message = b"From: alice@example.org\r\nTo: pincer@example.org, bob@example.org\r\n\
        Subject: =?utf-8?q?caf=C3=A9?=\r\nMessage-ID: <exact@example.org>\r\n\
        Content-Type: text/plain; charset=utf-8\r\nContent-Transfer-Encoding: 8bit\r\n\r\n\
        caf\xc3\xa9 \xe2\x98\x95\r\n..two dots\r\n"
        .to_vec();
    server.send_raw(
        "alice@example.org",
        &[
            "pincer@example.org",
            "bob@elsewhere.test",
            "carol@example.org",
        ],
        &message,
    );
    let mail = server.wait_for("pincer", |_| true, TIMEOUT);
    assert_eq!(mail.bytes(), message);
    assert_eq!(mail.headers.subject.as_deref(), Some("café"));
    assert_eq!(mail.text.as_deref(), Some("café ☕\n..two dots\n"));
    let bob = server.wait_for("bob", |_| true, TIMEOUT);
    assert_eq!(bob.bytes(), message);
    let log = server.wait_for_smtp(
        |e| e.message_id.as_deref() == Some("<exact@example.org>"),
        TIMEOUT,
    );
    // carol is no user: accepted, logged, delivered nowhere.
    assert_eq!(log.delivered_to, vec!["pincer", "bob"]);
    assert_eq!(log.rcpt_tos.len(), 3);
    assert_eq!(
        envelope_address("Alice <alice@example.org>"),
        "alice@example.org"
    );
}

#[test]
fn a_multipart_mail_keeps_its_text_and_html_parts() {
    // The server this binary shares, with users of this test's own.
    let server = MailServer::shared();
    server.add_user("multi-pincer", "pw");
    let sent = server.send_alternative(
        "alice@example.org",
        "multi-pincer@example.org",
        "Both",
        "Plain *text*\n",
        "<p>Plain <b>text</b></p>\n",
        &[],
    );
    let mail = server.wait_for(
        "multi-pincer",
        |m| m.headers.message_id.as_deref() == Some(sent.as_str()),
        TIMEOUT,
    );
    assert_eq!(mail.text.as_deref(), Some("Plain *text*\n"));
    assert_eq!(mail.html.as_deref(), Some("<p>Plain <b>text</b></p>\n"));
    assert!(mail.attachments.is_empty());
    assert!(
        mail.header("Content-Type")[0].starts_with("multipart/alternative"),
        "{:?}",
        mail.header("Content-Type")
    );
}

#[test]
fn imap_idle_is_told_of_new_mail() {
    let server = MailServer::start_default();
    server.add_user("pincer", "pw");
    let mut imap = ImapClient::connect(&server, TlsMode::None);
    assert!(
        imap.capabilities.iter().any(|c| c == "IDLE"),
        "{:?}",
        imap.capabilities
    );
    imap.login("pincer@example.org", "pw").unwrap();
    assert_eq!(imap.select("INBOX"), 0);
    imap.idle();
    let sent = Instant::now();
    server.send("alice@example.org", "pincer@example.org", "ping", "hi", &[]);
    let delivered = sent.elapsed();
    assert_eq!(imap.wait_exists(TIMEOUT), Some(1), "{}", server.logs());
    eprintln!(
        "IDLE told of a new mail {:?} after it was sent ({delivered:?} to deliver)",
        sent.elapsed()
    );
    imap.done();
    imap.logout();
    let mut wrong = ImapClient::connect(&server, TlsMode::None);
    assert!(wrong.login("pincer", "nope").is_err());
}

#[test]
fn every_tls_mode_of_imap_and_smtp_connects_with_smtp_auth() {
    let started = Instant::now();
    let server = MailServer::start(MailOptions {
        tls: true,
        smtp_auth: true,
        ..MailOptions::default()
    });
    eprintln!(
        "Dovecot and smtpd with TLS ready after {:?}",
        started.elapsed()
    );
    server.add_user("pincer", "secret");
    for tls in [TlsMode::None, TlsMode::StartTls, TlsMode::Implicit] {
        let mut imap = ImapClient::connect(&server, tls);
        assert_eq!(imap.is_tls(), tls != TlsMode::None);
        imap.login("pincer", "secret")
            .unwrap_or_else(|e| panic!("{tls:?}: {e}"));
        imap.select("INBOX");
        imap.logout();
    }

    let sends = [
        (server.smtp_port(), TlsMode::None, "submission"),
        (server.smtp_port(), TlsMode::StartTls, "submission"),
        (server.smtps_port(), TlsMode::Implicit, "submissions"),
    ];
    for (i, (port, tls, listener)) in sends.into_iter().enumerate() {
        let mut smtp = SmtpClient::connect(&server, port, tls);
        assert_eq!(smtp.is_tls(), tls != TlsMode::None);
        assert_eq!(
            smtp.extensions.iter().any(|e| e == "STARTTLS"),
            tls == TlsMode::None,
            "{tls:?}: {:?}",
            smtp.extensions
        );
        assert!(
            smtp.extensions.iter().any(|e| e.starts_with("AUTH ")),
            "{:?}",
            smtp.extensions
        );
        let message = format!(
            "From: pincer@example.org\r\nTo: pincer@example.org\r\n\
             Message-ID: <tls-{i}@example.org>\r\nSubject: {tls:?}\r\n\r\nbody\r\n"
        );
        // Without AUTH: refused.
        let refused = smtp.send_mail("pincer@example.org", &["pincer@example.org"], b"x");
        assert!(refused.unwrap_err().starts_with("530"));
        assert!(
            smtp.auth_plain("pincer", "wrong")
                .unwrap_err()
                .starts_with("535")
        );
        if tls == TlsMode::StartTls {
            smtp.auth_login("pincer", "secret").unwrap();
        } else {
            smtp.auth_plain("pincer", "secret").unwrap();
        }
        smtp.send_mail(
            "pincer@example.org",
            &["pincer@example.org"],
            message.as_bytes(),
        )
        .unwrap();
        smtp.quit();
        let id = format!("<tls-{i}@example.org>");
        let envelope = server.wait_for_smtp(|e| e.message_id.as_deref() == Some(&id), TIMEOUT);
        assert_eq!(envelope.listener, listener);
        assert_eq!(envelope.tls, tls != TlsMode::None);
        assert_eq!(envelope.auth_user.as_deref(), Some("pincer"));
    }
    assert_eq!(
        server
            .wait_for(
                "pincer",
                |m| m.headers.subject.as_deref() == Some("Implicit"),
                TIMEOUT
            )
            .text
            .as_deref(),
        Some("body\n")
    );
}

#[test]
fn tls_can_be_required() {
    let server = MailServer::start(MailOptions {
        tls: true,
        require_tls: true,
        reject_unknown_recipients: true,
        ..MailOptions::default()
    });
    server.add_user("pincer", "secret");
    // Dovecot counts a loopback client as secured: a plain-text LOGIN is
    // taken even with `ssl = required`.
    let mut imap = ImapClient::connect(&server, TlsMode::None);
    assert!(
        !imap.capabilities.iter().any(|c| c == "LOGINDISABLED"),
        "{:?}",
        imap.capabilities
    );
    imap.login("pincer", "secret").unwrap();
    let mut imap = ImapClient::connect(&server, TlsMode::StartTls);
    imap.login("pincer", "secret").unwrap();

    let mut smtp = SmtpClient::connect(&server, server.smtp_port(), TlsMode::None);
    let refused = smtp.send_mail("a@example.org", &["pincer@example.org"], b"x\r\n");
    assert!(refused.unwrap_err().starts_with("530"));
    let mut smtp = SmtpClient::connect(&server, server.smtp_port(), TlsMode::StartTls);
    // An unknown recipient is refused; a user is not.
    let refused = smtp.send_mail("a@example.org", &["nobody-here@example.org"], b"x\r\n");
    assert!(refused.unwrap_err().starts_with("550"));
    smtp.command("RSET");
    smtp.send_mail(
        "a@example.org",
        &["pincer@example.org"],
        b"Subject: over STARTTLS\r\n\r\nhi\r\n",
    )
    .unwrap();
    server.wait_for(
        "pincer",
        |m| m.headers.subject.as_deref() == Some("over STARTTLS"),
        TIMEOUT,
    );
}

#[test]
fn a_restart_keeps_the_ports_the_users_and_the_mail() {
    let server = MailServer::start(MailOptions {
        tls: true,
        ..MailOptions::default()
    });
    server.add_user("pincer", "pw");
    server.send(
        "alice@example.org",
        "pincer@example.org",
        "before",
        "1",
        &[],
    );
    server.wait_for("pincer", |_| true, TIMEOUT);
    let ports = (
        server.imap_port(),
        server.imaps_port(),
        server.smtp_port(),
        server.smtps_port(),
        server.mx_port(),
    );
    let mut idle = ImapClient::connect(&server, TlsMode::None);
    idle.login("pincer", "pw").unwrap();
    idle.select("INBOX");
    idle.idle();

    let started = Instant::now();
    server.restart();
    eprintln!("Dovecot and smtpd restarted after {:?}", started.elapsed());
    assert!(server.is_running());
    // The IMAP session ended with the server.
    assert!(idle.closed_within(TIMEOUT));
    eprintln!("the idle session closed after {:?}", started.elapsed());
    assert_eq!(
        ports,
        (
            server.imap_port(),
            server.imaps_port(),
            server.smtp_port(),
            server.smtps_port(),
            server.mx_port()
        )
    );
    server.add_user("late", "pw");
    server.send("alice@example.org", "pincer@example.org", "after", "2", &[]);
    server.send("alice@example.org", "late@example.org", "after", "3", &[]);
    server.wait_for(
        "pincer",
        |m| m.headers.subject.as_deref() == Some("after"),
        TIMEOUT,
    );
    assert_eq!(server.fetch_all("pincer").len(), 2);
    assert_eq!(
        server.wait_for("late", |_| true, TIMEOUT).text.as_deref(),
        Some("3\n")
    );
    let mut imap = ImapClient::connect(&server, TlsMode::Implicit);
    imap.login("pincer", "pw").unwrap();
    assert_eq!(imap.select("INBOX"), 2);

    eprintln!("mail after the restart read after {:?}", started.elapsed());
    server.stop();
    eprintln!("stopped after {:?}", started.elapsed());
    assert!(!server.is_running());
    assert!(std::net::TcpStream::connect(MailServer::addr(ports.0)).is_err());
    server.restart();
    assert_eq!(server.fetch_all("pincer").len(), 2);
}

#[test]
fn a_held_reply_comes_after_the_mail_is_delivered() {
    let server = MailServer::shared();
    server.add_user("hold-rcpt", "pw");
    let sender = "hold-sender@example.org";
    server.hold_replies(sender, TIMEOUT * 3);
    let (done, finished) = std::sync::mpsc::channel();
    let port = server.mx_port();
    std::thread::scope(|scope| {
        scope.spawn(move || {
            let mut smtp = SmtpClient::connect(server, port, TlsMode::None);
            let sent = smtp.send_mail(
                sender,
                &["hold-rcpt@example.org"],
                b"Message-ID: <held@example.org>\r\nSubject: held\r\n\r\nx\r\n",
            );
            done.send(sent).unwrap();
        });
        // Delivered and logged while the client still waits for its 250.
        let envelope = server.wait_for_smtp(
            |e| e.message_id.as_deref() == Some("<held@example.org>"),
            TIMEOUT,
        );
        assert!(envelope.held);
        server.wait_for("hold-rcpt", |_| true, TIMEOUT);
        assert!(finished.try_recv().is_err());
        server.release_replies(sender);
        assert_eq!(finished.recv_timeout(TIMEOUT).unwrap(), Ok(()));
    });
    // Others' replies are never held.
    let other = server.send("x@example.org", "hold-rcpt@example.org", "free", "y", &[]);
    let envelope = server.wait_for_smtp(|e| e.message_id.as_deref() == Some(&other), TIMEOUT);
    assert!(!envelope.held);
}
