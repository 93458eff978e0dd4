//! The email channel's IMAP and SMTP sides against a real Dovecot and SMTP
//! server (`support::mail`), in every TLS mode; the lifecycle through the
//! binary is `tests/it/conformance.rs`'s.

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
            "It is **green**.",
            Some("<p>It is <strong>green</strong>.</p>"),
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
