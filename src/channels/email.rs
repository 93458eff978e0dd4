//! Email (`kind = "email"`, `docs/channels.md`): a mailbox read over IMAP,
//! replies sent over SMTP.
//!
//! **Receiving.** Logs in over IMAP (`tls`: none, STARTTLS or implicit),
//! selects `folder` and reads every message whose UID is past the stored
//! watermark (`uid` cursor, `UIDVALIDITY:UID`, stored with each recorded
//! message); a changed `UIDVALIDITY` starts again from the mailbox's end.
//! Then IDLE until the server says something changed (or 25 minutes), or,
//! where IDLE is not offered, a poll every `poll_secs`. Each message: its
//! `Message-ID` is its id (deduplicated); its thread (the first of
//! `References`, else `In-Reply-To`, else itself) is one session; the body is
//! the text part (else the HTML part's text) with the quoted history cut;
//! attachments are listed by name and size. With `authserv_id`, a mail's
//! sender is its `From` address only when the receiving server's
//! `Authentication-Results` says DMARC (or DKIM for the `From` domain)
//! passed, `unverified:ADDRESS` otherwise.
//!
//! **Sending.** One message per reply, `text/plain` (the Markdown) and
//! `text/html` (rendered), threaded with `In-Reply-To` and `References`,
//! with a `Message-ID` derived from the intent's key: a resend after a crash
//! carries the same id, so a mail client shows it once; sends are therefore
//! treated as repeatable. The subject is `Re: ` and the thread's, kept in
//! memory from the mail read, or looked up over IMAP by `Message-ID` in a
//! process that never read it (after a restart). A unit with a file (a
//! run's `changes.diff`) is a mail of its own in the thread: the unit's
//! text as its body, the file attached (base64, its bytes kept), its
//! `Message-ID` derived from its own key.

use std::sync::Arc;

use crate::core::channel::{OutFile, Target, Unit};

/// How the connections to the servers are protected.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Security {
    /// Plain TCP (a server on this machine only).
    None,
    /// Plain TCP upgraded with STARTTLS before logging in.
    StartTls,
    /// TLS from the first byte (IMAPS 993, SMTPS 465).
    Implicit,
}

/// What the configuration gives an email channel.
#[derive(Debug, Clone)]
pub struct EmailSettings {
    /// `HOST:PORT` of the IMAP server.
    pub imap: String,
    /// `HOST:PORT` of the SMTP server.
    pub smtp: String,
    pub security: Security,
    /// The TLS configuration (its roots) when `security` is not `None`.
    pub tls: Option<Arc<rustls::ClientConfig>>,
    /// Certificates (PEM) to check the servers' against instead of the
    /// system's (SMTP reads them itself).
    pub tls_ca: Option<std::path::PathBuf>,
    pub username: String,
    pub password: String,
    /// The address Pincer writes from (and is written to).
    pub address: String,
    pub folder: String,
    /// Seconds between polls where the server offers no IDLE.
    pub poll_secs: u64,
    /// With it, a mail counts as from its `From` address only when the
    /// receiving server, by this authserv-id, says in
    /// `Authentication-Results` that it passed DMARC (or DKIM for the
    /// `From` domain); otherwise its sender is `unverified:ADDRESS`.
    pub authserv_id: Option<String>,
}

/// The first line of quoted history in a reply (`On … wrote:`, `> …`), or
/// a signature separator: what follows is not the person's new text.
pub fn strip_quoted(body: &str) -> String {
    let mut kept: Vec<&str> = Vec::new();
    let lines: Vec<&str> = body.lines().collect();
    for (i, line) in lines.iter().enumerate() {
        let trimmed = line.trim();
        if trimmed.starts_with('>') || trimmed == "-- " || *line == "-- " {
            break;
        }
        // `On Mon, 1 Jan 2026 at 09:00, Alice <a@x> wrote:` (perhaps wrapped
        // onto the next line), then the quote.
        let next_quoted = lines
            .get(i + 1)
            .is_some_and(|n| n.trim_start().starts_with('>'));
        let wrote = trimmed.ends_with("wrote:") || trimmed.ends_with("schrieb:");
        if wrote && (next_quoted || i + 1 == lines.len()) {
            break;
        }
        kept.push(line);
    }
    kept.join("\n").trim().to_owned()
}

/// The thread a message belongs to: the first `References` id, else
/// `In-Reply-To`, else its own `Message-ID`.
pub fn thread_of(message_id: &str, in_reply_to: Option<&str>, references: &[String]) -> String {
    references
        .first()
        .map(String::as_str)
        .or(in_reply_to)
        .unwrap_or(message_id)
        .to_owned()
}

/// The `Message-ID` of a send: derived from its idempotency key, so a
/// resend is the same message.
pub fn message_id_for(key: &str, address: &str) -> String {
    use ring::digest::{SHA256, digest};
    let hash = hex::encode(&digest(&SHA256, key.as_bytes()).as_ref()[..16]);
    let domain = address
        .rsplit_once('@')
        .map_or("pincer.invalid", |(_, d)| d);
    format!("<pincer.{hash}@{domain}>")
}

/// The chat of a thread with a person: their address, the thread's root.
pub fn target_of(from: &str, thread: &str) -> Target {
    Target {
        kind: crate::core::channel::TargetKind::Thread,
        id: from.to_owned(),
        thread: Some(thread.to_owned()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quoted_history_and_signatures_are_cut() {
        let body = "Yes, do it.\n\nOn Mon, 1 Jan 2026 at 09:00, Pincer <p@x> wrote:\n> Approval needed\n> Reply y";
        assert_eq!(strip_quoted(body), "Yes, do it.");
        assert_eq!(strip_quoted("y\n> quoted"), "y");
        assert_eq!(strip_quoted("thanks\n-- \nAlice"), "thanks");
        assert_eq!(
            strip_quoted("Someone wrote: this is not a quote header\nsecond line"),
            "Someone wrote: this is not a quote header\nsecond line"
        );
    }

    #[test]
    fn a_thread_is_its_first_reference() {
        let refs = vec!["<root@x>".to_owned(), "<mid@x>".to_owned()];
        assert_eq!(thread_of("<new@x>", Some("<mid@x>"), &refs), "<root@x>");
        assert_eq!(thread_of("<new@x>", Some("<mid@x>"), &[]), "<mid@x>");
        assert_eq!(thread_of("<new@x>", None, &[]), "<new@x>");
    }

    #[test]
    fn a_reply_mail_is_read_with_its_thread_and_without_the_quote() {
        let raw = b"From: Alice <Alice@Example.org>\r\nTo: pincer@example.org\r\n\
Subject: Re: the build\r\nMessage-ID: <r2@example.org>\r\n\
In-Reply-To: <p1@example.org>\r\nReferences: <root@example.org> <p1@example.org>\r\n\
Content-Type: text/plain; charset=utf-8\r\n\r\ny\r\n\r\nOn Mon, Pincer wrote:\r\n> Approval needed\r\n";
        let mail = parse_mail(7, raw).unwrap();
        assert_eq!(mail.uid, 7);
        assert_eq!(mail.from, "alice@example.org");
        assert_eq!(mail.message_id, "<r2@example.org>");
        assert_eq!(mail.thread, "<root@example.org>");
        assert_eq!(mail.subject, "Re: the build");
        assert_eq!(mail.body, "y");
        assert!(parse_mail(8, b"Subject: no sender\r\n\r\nhi").is_none());
    }

    #[test]
    fn authentication_results_are_read_with_comments_and_quotes() {
        let (id, results) = authentication_results(
            "MX.example.org 1; dkim=pass (2048-bit key; unprotected) header.d=Example.org \
             header.i=@example.org header.s=\"s1\"; spf=softfail smtp.mailfrom=x@y.test; \
             dmarc/1 = pass (p=reject) header.from=example.org; arc=none",
        )
        .unwrap();
        assert_eq!(id, "mx.example.org");
        let methods: Vec<(&str, &str)> = results
            .iter()
            .map(|r| (r.method.as_str(), r.result.as_str()))
            .collect();
        assert_eq!(
            methods,
            [
                ("dkim", "pass"),
                ("spf", "softfail"),
                ("dmarc", "pass"),
                ("arc", "none")
            ]
        );
        assert_eq!(results[0].property("header.d"), Some("Example.org"));
        assert_eq!(results[0].property("header.s"), Some("s1"));
        assert_eq!(results[2].property("header.from"), Some("example.org"));
        let (id, results) = authentication_results("mx.example.org; none").unwrap();
        assert_eq!((id.as_str(), results.len()), ("mx.example.org", 0));
        assert_eq!(authentication_results("  "), None);
        // A `;` in a quoted reason does not end the result.
        let (_, results) = authentication_results(
            "mx.example.org; dkim=fail reason=\"bad; very\" header.d=example.org",
        )
        .unwrap();
        assert_eq!(results.len(), 1);
        assert_eq!(results[0].property("reason"), Some("bad; very"));
    }

    #[test]
    fn a_sender_is_verified_by_its_servers_dmarc_or_aligned_dkim_only() {
        let from = "alice@example.org";
        let ok = |headers: &[&str]| {
            let headers: Vec<String> = headers.iter().map(|h| (*h).to_owned()).collect();
            sender_verified(&headers, "mx.example.org", from)
        };
        assert!(ok(&["mx.example.org; dmarc=pass header.from=example.org"]));
        assert!(ok(&["mx.example.org; dmarc=pass"]));
        assert!(ok(&[
            "MX.Example.Org; spf=fail; dkim=pass header.d=EXAMPLE.org"
        ]));
        // Another server's word, a failure, a signature of another domain,
        // SPF alone: not enough.
        assert!(!ok(&["evil.test; dmarc=pass header.from=example.org"]));
        assert!(!ok(&["mx.example.org; dmarc=fail header.from=example.org"]));
        assert!(!ok(&["mx.example.org; dmarc=pass header.from=other.test"]));
        assert!(!ok(&["mx.example.org; dkim=pass header.d=other.test"]));
        assert!(!ok(&["mx.example.org; dkim=pass header.d=sub.example.org"]));
        assert!(!ok(&["mx.example.org; dkim=pass"]));
        assert!(!ok(&["mx.example.org; spf=pass smtp.mailfrom=example.org"]));
        assert!(!ok(&[]));
        // The topmost header of the server counts: one below it (a
        // sender's forgery the server failed to remove) does not.
        assert!(!ok(&[
            "mx.example.org; dmarc=fail header.from=example.org",
            "mx.example.org; dmarc=pass header.from=example.org",
        ]));
        assert!(!sender_verified(
            &["mx.example.org; dmarc=pass".to_owned()],
            "mx.example.org",
            "no-domain"
        ));
    }

    #[test]
    fn a_mails_authentication_results_are_kept_topmost_first() {
        let raw =
            b"Authentication-Results: mx.example.org;\r\n\tdkim=pass header.d=example.org\r\n\
Authentication-Results: evil.test; dmarc=pass\r\n\
From: alice@example.org\r\nSubject: hi\r\n\r\nhello\r\n";
        let mail = parse_mail(1, raw).unwrap();
        assert_eq!(
            mail.authentication,
            [
                "mx.example.org; dkim=pass header.d=example.org",
                "evil.test; dmarc=pass"
            ]
        );
        assert!(sender_verified(
            &mail.authentication,
            "mx.example.org",
            &mail.from
        ));
    }

    #[test]
    fn a_reply_subject_says_re_once() {
        assert_eq!(reply_subject("the build").as_deref(), Some("Re: the build"));
        assert_eq!(
            reply_subject("RE: the build").as_deref(),
            Some("RE: the build")
        );
        assert_eq!(
            reply_subject(" re:the build ").as_deref(),
            Some("re:the build")
        );
        assert_eq!(reply_subject("Ré: x").as_deref(), Some("Re: Ré: x"));
        assert_eq!(reply_subject("  "), None);
        assert_eq!(
            imap_quoted("<a.b@example.org>").as_deref(),
            Some("\"<a.b@example.org>\"")
        );
        assert_eq!(imap_quoted("<a\"b@x>"), None);
        assert_eq!(imap_quoted("<é@x>"), None);
    }

    #[test]
    fn a_file_unit_is_a_mail_with_its_text_and_the_file_attached() {
        use mail_parser::MimeHeaders as _;

        let settings = EmailSettings {
            imap: "127.0.0.1:143".into(),
            smtp: "127.0.0.1:25".into(),
            security: Security::None,
            tls: None,
            tls_ca: None,
            username: "pincer".into(),
            password: "p".into(),
            address: "pincer@example.org".into(),
            folder: "INBOX".into(),
            poll_secs: 30,
            authserv_id: None,
        };
        let target = target_of("alice@example.org", "<root@example.org>");
        let diff = "--- a/notes.md\n+++ b/notes.md\n-old\n+néw\n";
        let unit = Unit {
            text: "Changes to 1 file: notes.md".into(),
            file: Some(OutFile {
                name: "changes.diff".into(),
                mime_type: "text/x-diff".into(),
                text: diff.into(),
            }),
            ..Unit::default()
        };
        let key = "reply:run_1:1";
        let raw = reply_message(&settings, &target, "Re: notes", &unit, None, key)
            .unwrap()
            .formatted();
        let mail = mail_parser::MessageParser::default().parse(&raw).unwrap();
        assert_eq!(
            mail.message_id().map(|id| format!("<{id}>")),
            Some(message_id_for(key, "pincer@example.org"))
        );
        assert_eq!(
            mail.body_text(0).as_deref().map(str::trim_end),
            Some("Changes to 1 file: notes.md")
        );
        let attached: Vec<_> = mail.attachments().collect();
        assert_eq!(attached.len(), 1);
        assert_eq!(attached[0].attachment_name(), Some("changes.diff"));
        assert_eq!(attached[0].contents(), diff.as_bytes());
        let kind = attached[0].content_type().unwrap();
        assert_eq!((kind.ctype(), kind.subtype()), ("text", Some("x-diff")));
        assert!(
            attached[0]
                .content_disposition()
                .is_some_and(|d| d.is_attachment()),
            "{}",
            String::from_utf8_lossy(&raw)
        );
    }

    #[test]
    fn a_resend_has_the_same_message_id() {
        let a = message_id_for("reply:run_1:0", "pincer@example.org");
        assert_eq!(a, message_id_for("reply:run_1:0", "pincer@example.org"));
        assert_ne!(a, message_id_for("reply:run_2:0", "pincer@example.org"));
        assert!(
            a.starts_with("<pincer.") && a.ends_with("@example.org>"),
            "{a}"
        );
    }
}

/// A connection to a mail server: plain TCP, or TLS over it.
#[derive(Debug)]
pub enum Stream {
    Plain(tokio::net::TcpStream),
    Tls(Box<tokio_rustls::client::TlsStream<tokio::net::TcpStream>>),
}

impl tokio::io::AsyncRead for Stream {
    fn poll_read(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(s) => std::pin::Pin::new(s).poll_read(cx, buf),
            Stream::Tls(s) => std::pin::Pin::new(s.as_mut()).poll_read(cx, buf),
        }
    }
}

impl tokio::io::AsyncWrite for Stream {
    fn poll_write(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &[u8],
    ) -> std::task::Poll<std::io::Result<usize>> {
        match self.get_mut() {
            Stream::Plain(s) => std::pin::Pin::new(s).poll_write(cx, buf),
            Stream::Tls(s) => std::pin::Pin::new(s.as_mut()).poll_write(cx, buf),
        }
    }

    fn poll_flush(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(s) => std::pin::Pin::new(s).poll_flush(cx),
            Stream::Tls(s) => std::pin::Pin::new(s.as_mut()).poll_flush(cx),
        }
    }

    fn poll_shutdown(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(s) => std::pin::Pin::new(s).poll_shutdown(cx),
            Stream::Tls(s) => std::pin::Pin::new(s.as_mut()).poll_shutdown(cx),
        }
    }
}

/// TLS over `stream` to `server` (`HOST:PORT`), checked with `tls`.
async fn wrap(
    stream: tokio::net::TcpStream,
    server: &str,
    tls: &Arc<rustls::ClientConfig>,
) -> Result<Stream, String> {
    let host = server.rsplit_once(':').map_or(server, |(h, _)| h);
    let name = rustls::pki_types::ServerName::try_from(host.trim_matches(['[', ']']).to_owned())
        .map_err(|err| format!("{host}: not a name for TLS: {err}"))?;
    let stream = tokio_rustls::TlsConnector::from(tls.clone())
        .connect(name, stream)
        .await
        .map_err(|err| format!("TLS with {server}: {err}"))?;
    Ok(Stream::Tls(Box::new(stream)))
}

/// Logs in to the IMAP server (STARTTLS first where asked).
pub async fn imap_login(settings: &EmailSettings) -> Result<async_imap::Session<Stream>, String> {
    let server = &settings.imap;
    let tcp = tokio::time::timeout(
        std::time::Duration::from_secs(15),
        tokio::net::TcpStream::connect(server),
    )
    .await
    .map_err(|_| format!("connecting to {server} timed out"))?
    .map_err(|err| format!("cannot connect to {server}: {err}"))?;
    let tls = || {
        settings
            .tls
            .clone()
            .ok_or_else(|| "TLS is asked for but not configured".to_owned())
    };
    let stream = match settings.security {
        Security::Implicit => wrap(tcp, server, &tls()?).await?,
        Security::None | Security::StartTls => Stream::Plain(tcp),
    };
    let mut client = async_imap::Client::new(stream);
    client
        .read_response()
        .await
        .map_err(|err| format!("reading {server}'s greeting: {err}"))?
        .ok_or_else(|| format!("{server} closed the connection before its greeting"))?;
    if settings.security == Security::StartTls {
        client
            .run_command_and_check_ok("STARTTLS", None)
            .await
            .map_err(|err| format!("STARTTLS with {server}: {err}"))?;
        let Stream::Plain(tcp) = client.into_inner() else {
            return Err("STARTTLS over a connection already in TLS".to_owned());
        };
        client = async_imap::Client::new(wrap(tcp, server, &tls()?).await?);
    }
    client
        .login(&settings.username, &settings.password)
        .await
        .map_err(|(err, _)| format!("logging in to {server} as {}: {err}", settings.username))
}

/// One mail as Pincer reads it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mail {
    pub uid: u32,
    pub message_id: String,
    pub from: String,
    pub subject: String,
    pub thread: String,
    /// The new text, quoted history cut.
    pub body: String,
    /// Attachments: name and size in bytes.
    pub attachments: Vec<(String, usize)>,
    /// The `Authentication-Results` headers, topmost (the last added) first,
    /// unfolded.
    pub authentication: Vec<String>,
}

/// Parses a raw message; `None` without a sender.
pub fn parse_mail(uid: u32, raw: &[u8]) -> Option<Mail> {
    use mail_parser::MimeHeaders as _;
    let message = mail_parser::MessageParser::default().parse(raw)?;
    let from = message.from()?.first()?.address()?.to_ascii_lowercase();
    let message_id = message
        .message_id()
        .map_or_else(|| format!("uid-{uid}"), |id| format!("<{id}>"));
    let in_reply_to = message.in_reply_to().as_text().map(|id| format!("<{id}>"));
    let references: Vec<String> = if let Some(ids) = message.references().as_text_list() {
        ids.iter().map(|id| format!("<{id}>")).collect()
    } else if let Some(id) = message.references().as_text() {
        vec![format!("<{id}>")]
    } else {
        Vec::new()
    };
    let thread = thread_of(&message_id, in_reply_to.as_deref(), &references);
    let body = strip_quoted(&message.body_text(0).unwrap_or_default());
    let attachments = message
        .attachments()
        .map(|part| {
            (
                part.attachment_name().unwrap_or("unnamed").to_owned(),
                part.len(),
            )
        })
        .collect();
    let authentication = message
        .headers()
        .iter()
        .filter(|h| {
            h.name
                .as_str()
                .eq_ignore_ascii_case("Authentication-Results")
        })
        .filter_map(|h| raw.get(h.offset_start as usize..h.offset_end as usize))
        .map(|value| {
            String::from_utf8_lossy(value)
                .split_whitespace()
                .collect::<Vec<_>>()
                .join(" ")
        })
        .collect();
    Some(Mail {
        uid,
        message_id,
        from,
        subject: message.subject().unwrap_or_default().to_owned(),
        thread,
        body,
        attachments,
        authentication,
    })
}

/// One method's result in an `Authentication-Results` header (RFC 8601):
/// `dkim=pass header.d=example.org` is method `dkim`, result `pass`, and
/// the property `header.d`; names lowercased, comments dropped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuthResult {
    pub method: String,
    pub result: String,
    pub properties: Vec<(String, String)>,
}

impl AuthResult {
    fn property(&self, name: &str) -> Option<&str> {
        self.properties
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }
}

/// An `Authentication-Results` value: its authserv-id (lowercased) and its
/// results; `None` without an id.
pub fn authentication_results(value: &str) -> Option<(String, Vec<AuthResult>)> {
    // Segments (split at `;`) of tokens (split at white space), outside
    // quoted strings and comments; `a = b` read as `a=b`.
    let mut segments: Vec<Vec<String>> = vec![Vec::new()];
    let mut token = String::new();
    let (mut quoted, mut escaped, mut depth) = (false, false, 0_u32);
    let end_token = |token: &mut String, segments: &mut Vec<Vec<String>>| {
        let Some(last) = segments.last_mut() else {
            return;
        };
        if token.is_empty() {
            return;
        }
        let joins = token.starts_with('=') || last.last().is_some_and(|t| t.ends_with('='));
        match last.last_mut() {
            Some(previous) if joins => previous.push_str(token),
            _ => last.push(token.clone()),
        }
        token.clear();
    };
    for c in value.chars() {
        if escaped {
            escaped = false;
            if depth == 0 {
                token.push(c);
            }
            continue;
        }
        match c {
            '\\' if quoted || depth > 0 => escaped = true,
            '"' if depth == 0 => quoted = !quoted,
            _ if quoted => token.push(c),
            '(' => depth += 1,
            ')' if depth > 0 => depth -= 1,
            _ if depth > 0 => {}
            ';' => {
                end_token(&mut token, &mut segments);
                segments.push(Vec::new());
            }
            c if c.is_whitespace() => end_token(&mut token, &mut segments),
            c => token.push(c),
        }
    }
    end_token(&mut token, &mut segments);
    let mut segments = segments.into_iter();
    let id = segments.next()?.into_iter().next()?.to_ascii_lowercase();
    let results = segments
        .filter_map(|tokens| {
            let mut tokens = tokens.into_iter();
            let (method, result) = tokens.next()?.split_once('=').map(|(m, r)| {
                let method = m.split_once('/').map_or(m, |(m, _)| m);
                (method.to_ascii_lowercase(), r.to_ascii_lowercase())
            })?;
            let properties = tokens
                .filter_map(|t| {
                    let (name, value) = t.split_once('=')?;
                    Some((name.to_ascii_lowercase(), value.to_owned()))
                })
                .collect();
            Some(AuthResult {
                method,
                result,
                properties,
            })
        })
        .collect();
    Some((id, results))
}

/// Whether a mail from `from` is authenticated by the server named
/// `authserv_id`: its topmost `Authentication-Results` of that id (the one
/// the server added; a sender's forgery would be below it, or removed by
/// the server) says `dmarc=pass` for the `From` domain, or `dkim=pass` with
/// `header.d` the `From` domain. `headers`: those headers' values, topmost
/// first.
pub fn sender_verified(headers: &[String], authserv_id: &str, from: &str) -> bool {
    let Some((_, domain)) = from.rsplit_once('@') else {
        return false;
    };
    let Some(results) = headers.iter().find_map(|value| {
        authentication_results(value)
            .filter(|(id, _)| id.eq_ignore_ascii_case(authserv_id))
            .map(|(_, results)| results)
    }) else {
        return false;
    };
    results.iter().any(|r| {
        r.result == "pass"
            && match r.method.as_str() {
                "dmarc" => r
                    .property("header.from")
                    .is_none_or(|d| d.eq_ignore_ascii_case(domain)),
                "dkim" => r
                    .property("header.d")
                    .is_some_and(|d| d.eq_ignore_ascii_case(domain)),
                _ => false,
            }
    })
}

/// The SMTP transport of `settings`: TLS as asked, logging in when a user
/// name is set.
pub fn smtp_transport(
    settings: &EmailSettings,
) -> Result<lettre::AsyncSmtpTransport<lettre::Tokio1Executor>, String> {
    use lettre::transport::smtp::authentication::Credentials;
    use lettre::transport::smtp::client::{Certificate, Tls, TlsParameters};

    let server = &settings.smtp;
    let (host, port) = server
        .rsplit_once(':')
        .and_then(|(h, p)| Some((h, p.parse::<u16>().ok()?)))
        .ok_or_else(|| format!("smtp {server:?}: expected HOST:PORT"))?;
    let parameters = || -> Result<TlsParameters, String> {
        let mut builder = TlsParameters::builder(host.to_owned());
        if let Some(ca) = &settings.tls_ca {
            let pem = std::fs::read(ca).map_err(|err| format!("{}: {err}", ca.display()))?;
            let certificate =
                Certificate::from_pem(&pem).map_err(|err| format!("{}: {err}", ca.display()))?;
            builder = builder.add_root_certificate(certificate);
        }
        builder
            .build_rustls()
            .map_err(|err| format!("TLS for {server}: {err}"))
    };
    let tls = match settings.security {
        Security::None => Tls::None,
        Security::StartTls => Tls::Required(parameters()?),
        Security::Implicit => Tls::Wrapper(parameters()?),
    };
    let mut builder = lettre::AsyncSmtpTransport::<lettre::Tokio1Executor>::builder_dangerous(host)
        .port(port)
        .tls(tls)
        .timeout(Some(std::time::Duration::from_secs(30)));
    if !settings.username.is_empty() {
        builder = builder.credentials(Credentials::new(
            settings.username.clone(),
            settings.password.clone(),
        ));
    }
    Ok(builder.build())
}

/// A mail in a thread: from the channel's address to `target.id`, the
/// unit's text and (when it has markup) HTML, its file (when it has one)
/// attached, threaded under `reply_to` in the thread's root, its
/// `Message-ID` derived from `key`.
pub fn reply_message(
    settings: &EmailSettings,
    target: &Target,
    subject: &str,
    unit: &Unit,
    reply_to: Option<&str>,
    key: &str,
) -> Result<lettre::Message, String> {
    use lettre::message::{Mailbox, MultiPart, SinglePart};

    let from: Mailbox = settings
        .address
        .parse()
        .map_err(|err| format!("address {:?}: {err}", settings.address))?;
    let to: Mailbox = target.id.parse().map_err(|err| {
        format!(
            "to {:?}: {err}",
            target.id.chars().take(80).collect::<String>()
        )
    })?;
    let mut builder = lettre::Message::builder()
        .from(from)
        .to(to)
        .subject(subject)
        .message_id(Some(message_id_for(key, &settings.address)));
    let mut references: Vec<&str> = Vec::new();
    if let Some(thread) = target.thread.as_deref() {
        references.push(thread);
    }
    if let Some(reply_to) = reply_to {
        builder = builder.in_reply_to(reply_to.to_owned());
        if !references.contains(&reply_to) {
            references.push(reply_to);
        }
    }
    if !references.is_empty() {
        builder = builder.references(references.join(" "));
    }
    let text = unit.text.clone();
    let message = match (unit.markup.as_deref(), &unit.file) {
        (Some(html), None) => {
            builder.multipart(MultiPart::alternative_plain_html(text, html.to_owned()))
        }
        (None, None) => builder.singlepart(SinglePart::plain(text)),
        (html, Some(file)) => {
            let attachment = attachment(file)?;
            let mixed = MultiPart::mixed();
            let mixed = match html {
                Some(html) => {
                    mixed.multipart(MultiPart::alternative_plain_html(text, html.to_owned()))
                }
                None => mixed.singlepart(SinglePart::plain(text)),
            };
            builder.multipart(mixed.singlepart(attachment))
        }
    };
    message.map_err(|err| format!("cannot build the mail: {err}"))
}

/// `file` as an attachment (`Content-Disposition: attachment;
/// filename=…`), a text type's charset UTF-8. Base64, so its bytes arrive
/// as they are: a text part in 7bit or quoted-printable has its line ends
/// made CR LF on the way.
fn attachment(file: &OutFile) -> Result<lettre::message::SinglePart, String> {
    use lettre::message::Body;
    use lettre::message::header::{ContentTransferEncoding, ContentType};

    let kind = if file.mime_type.starts_with("text/") && !file.mime_type.contains("charset") {
        format!("{}; charset=utf-8", file.mime_type)
    } else {
        file.mime_type.clone()
    };
    let kind = ContentType::parse(&kind)
        .map_err(|err| format!("the file's type {:?}: {err}", file.mime_type))?;
    let body = Body::new_with_encoding(
        file.text.clone().into_bytes(),
        ContentTransferEncoding::Base64,
    )
    .map_err(|_| "the file cannot be encoded in base64".to_owned())?;
    Ok(lettre::message::Attachment::new(file.name.clone()).body(body, kind))
}

/// The cursor holding the watermark: `UIDVALIDITY:UID`.
const CURSOR: &str = "uid";
/// How long one IDLE waits before it is renewed (servers drop them at 30 min).
const IDLE_FOR: std::time::Duration = std::time::Duration::from_secs(25 * 60);

/// An email account as a channel.
pub struct Email {
    name: String,
    settings: EmailSettings,
    smtp: lettre::AsyncSmtpTransport<lettre::Tokio1Executor>,
    /// The subject of each thread seen, for the replies in it.
    subjects: parking_lot::Mutex<std::collections::HashMap<String, String>>,
}

impl Email {
    pub fn new(name: &str, settings: EmailSettings) -> Result<Self, String> {
        if !settings.address.contains('@') {
            return Err(format!(
                "address {:?}: expected an email address",
                settings.address.chars().take(80).collect::<String>()
            ));
        }
        let smtp = smtp_transport(&settings)?;
        Ok(Self {
            name: name.to_owned(),
            settings,
            smtp,
            subjects: parking_lot::Mutex::new(std::collections::HashMap::new()),
        })
    }

    /// The stored watermark, when it is of this `UIDVALIDITY`.
    fn watermark(stored: Option<&str>, validity: u32) -> Option<u32> {
        let (v, uid) = stored?.split_once(':')?;
        (v.parse::<u32>().ok()? == validity).then(|| uid.parse().ok())?
    }

    /// Reads what arrived past the watermark, records each, and returns the
    /// new watermark.
    async fn take_new(
        &self,
        session: &mut async_imap::Session<Stream>,
        hub: &std::sync::Arc<super::Hub>,
        validity: u32,
        mut watermark: u32,
    ) -> Result<u32, String> {
        use futures::TryStreamExt as _;

        let fetched: Vec<async_imap::types::Fetch> = session
            .uid_fetch(format!("{}:*", watermark + 1), "(UID BODY.PEEK[])")
            .await
            .map_err(|err| format!("fetching new mail: {err}"))?
            .try_collect()
            .await
            .map_err(|err| format!("fetching new mail: {err}"))?;
        let mut mails: Vec<(u32, Option<Mail>)> = fetched
            .iter()
            .filter_map(|f| Some((f.uid?, f.body())))
            .filter(|(uid, _)| *uid > watermark)
            .map(|(uid, body)| (uid, body.and_then(|raw| parse_mail(uid, raw))))
            .collect();
        mails.sort_by_key(|(uid, _)| *uid);
        for (uid, mail) in mails {
            let cursor = format!("{validity}:{uid}");
            let Some(mail) = mail.filter(|m| {
                !m.from.eq_ignore_ascii_case(&self.settings.address) && !m.body.is_empty()
            }) else {
                hub.skip(CURSOR, cursor);
                watermark = uid;
                continue;
            };
            self.remember_subject(&mail.thread, &mail.subject);
            let mut body = mail.body.clone();
            for (name, size) in &mail.attachments {
                body.push_str(&format!("\n[attached: {name}, {size} bytes]"));
            }
            let message = crate::core::channel::ChannelMessage {
                id: mail.message_id.clone(),
                channel: self.name.clone(),
                account: self.settings.address.clone(),
                target: target_of(&mail.from, &mail.thread),
                sender: Some(crate::core::channel::Actor {
                    id: self.sender_of(&mail),
                    name: None,
                    is_bot: false,
                }),
                body,
                attachments: Vec::new(),
                relation: None,
                origin: crate::core::channel::MessageOrigin::User,
                at: crate::core::session::now_millis(),
            };
            match hub
                .receive(
                    super::Inbound::Message(message),
                    Some((CURSOR.to_owned(), cursor)),
                )
                .await
            {
                super::Received::Failed(reason) => {
                    // Not past the watermark: read again next time.
                    return Err(format!("a mail could not be recorded: {reason}"));
                }
                super::Received::Accepted
                | super::Received::Duplicate
                | super::Received::Echo
                | super::Received::Unauthorized => watermark = uid,
            }
        }
        Ok(watermark)
    }
}

/// How many threads' subjects are kept in memory; past that they are
/// forgotten and looked up again when needed.
const SUBJECTS_KEPT: usize = 4096;
/// How long looking a subject up over IMAP may take before the reply goes
/// with the generic one.
const LOOKUP_FOR: std::time::Duration = std::time::Duration::from_secs(20);
/// The subject of a mail that answers nothing Pincer knows.
const GENERIC_SUBJECT: &str = "A message from Pincer";

/// The subject of a reply to a mail whose subject is `original`: `Re: ` and
/// it (once), or `None` for an empty one.
pub fn reply_subject(original: &str) -> Option<String> {
    let original = original.trim();
    if original.is_empty() {
        return None;
    }
    let prefixed = original
        .get(..3)
        .is_some_and(|p| p.eq_ignore_ascii_case("re:"));
    Some(if prefixed {
        original.to_owned()
    } else {
        format!("Re: {original}")
    })
}

/// `id` as an IMAP quoted string, when it can be one (printable ASCII).
fn imap_quoted(id: &str) -> Option<String> {
    id.bytes()
        .all(|b| (0x20..0x7f).contains(&b) && b != b'"' && b != b'\\')
        .then(|| format!("\"{id}\""))
}

impl Email {
    /// Who a mail is from: its `From` address, or, with `authserv_id` and
    /// no authentication by that server, `unverified:ADDRESS` (not in
    /// `allow`; it may pair).
    fn sender_of(&self, mail: &Mail) -> String {
        match &self.settings.authserv_id {
            Some(id) if !sender_verified(&mail.authentication, id, &mail.from) => {
                format!("unverified:{}", mail.from)
            }
            Some(_) | None => mail.from.clone(),
        }
    }

    fn remember_subject(&self, thread: &str, subject: &str) {
        let mut subjects = self.subjects.lock();
        if subjects.len() >= SUBJECTS_KEPT && !subjects.contains_key(thread) {
            subjects.clear();
        }
        subjects.insert(thread.to_owned(), subject.to_owned());
    }

    /// The subject of a mail in `target`: `Re: ` and the subject of the
    /// thread's latest mail read, remembered, or, after a restart, looked up
    /// over IMAP (the mail answered, else the thread's root); the generic
    /// one for a mail that starts a conversation or when the lookup fails.
    async fn subject(&self, target: &Target, reply_to: Option<&str>) -> String {
        let Some(thread) = target.thread.as_deref() else {
            return GENERIC_SUBJECT.to_owned();
        };
        let known = self.subjects.lock().get(thread).cloned();
        let original = match known {
            Some(subject) => Some(subject),
            None => {
                let ids: Vec<&str> = reply_to
                    .into_iter()
                    .chain([thread])
                    .filter(|id| id.starts_with('<'))
                    .collect();
                match tokio::time::timeout(LOOKUP_FOR, self.look_up_subject(&ids)).await {
                    Ok(Ok(Some(subject))) => {
                        self.remember_subject(thread, &subject);
                        Some(subject)
                    }
                    Ok(Ok(None)) => None,
                    Ok(Err(err)) => {
                        tracing::warn!(channel = %self.name, error = %err, "cannot look the thread's subject up; the reply goes with a generic one");
                        None
                    }
                    Err(_) => {
                        tracing::warn!(channel = %self.name, "looking the thread's subject up timed out; the reply goes with a generic one");
                        None
                    }
                }
            }
        };
        original
            .as_deref()
            .and_then(reply_subject)
            .unwrap_or_else(|| GENERIC_SUBJECT.to_owned())
    }

    /// The `Subject` of the first of `ids` (`Message-ID`s) found in the
    /// folder, read on a session of its own.
    async fn look_up_subject(&self, ids: &[&str]) -> Result<Option<String>, String> {
        use futures::TryStreamExt as _;

        if ids.is_empty() {
            return Ok(None);
        }
        let mut session = imap_login(&self.settings).await?;
        let folder = &self.settings.folder;
        session
            .examine(folder)
            .await
            .map_err(|err| format!("examining {folder}: {err}"))?;
        let mut found = None;
        for id in ids {
            let Some(quoted) = imap_quoted(id) else {
                continue;
            };
            let uids = session
                .uid_search(format!("HEADER Message-ID {quoted}"))
                .await
                .map_err(|err| format!("searching {folder} for {id}: {err}"))?;
            let Some(uid) = uids.into_iter().max() else {
                continue;
            };
            let fetched: Vec<async_imap::types::Fetch> = session
                .uid_fetch(uid.to_string(), "(UID BODY.PEEK[HEADER])")
                .await
                .map_err(|err| format!("fetching {id}'s header: {err}"))?
                .try_collect()
                .await
                .map_err(|err| format!("fetching {id}'s header: {err}"))?;
            found = fetched
                .iter()
                .filter_map(async_imap::types::Fetch::header)
                .find_map(|header| {
                    let parsed = mail_parser::MessageParser::default().parse_headers(header)?;
                    Some(parsed.subject()?.to_owned())
                });
            if found.is_some() {
                break;
            }
        }
        let _ = session.logout().await;
        Ok(found)
    }
}

impl Email {
    /// One IMAP session, from login to its end; `Ok` when cancelled.
    async fn session(
        &self,
        hub: &std::sync::Arc<super::Hub>,
        cancel: &tokio_util::sync::CancellationToken,
    ) -> Result<(), String> {
        let mut session = imap_login(&self.settings).await?;
        let folder = &self.settings.folder;
        let mailbox = session
            .select(folder)
            .await
            .map_err(|err| format!("selecting {folder}: {err}"))?;
        let validity = mailbox.uid_validity.unwrap_or(0);
        let stored = hub.cursor(CURSOR).await;
        let mut watermark = match Self::watermark(stored.as_deref(), validity) {
            Some(uid) => uid,
            None => {
                // A first start, or a mailbox renumbered: from its end.
                let end = mailbox.uid_next.unwrap_or(1).saturating_sub(1);
                if stored.is_some() {
                    tracing::warn!(channel = %self.name, %folder, "the mailbox's UIDVALIDITY changed; reading from its end");
                }
                hub.skip(CURSOR, format!("{validity}:{end}"));
                end
            }
        };
        hub.up();
        let idle = session
            .capabilities()
            .await
            .map(|caps| caps.has_str("IDLE"))
            .unwrap_or(false);
        loop {
            watermark = self
                .take_new(&mut session, hub, validity, watermark)
                .await?;
            if idle {
                let mut waiting = session.idle();
                waiting.init().await.map_err(|err| format!("IDLE: {err}"))?;
                let (wait, stop) = waiting.wait_with_timeout(IDLE_FOR);
                let ended = tokio::select! {
                    _ = cancel.cancelled() => None,
                    ended = wait => Some(ended),
                };
                drop(stop);
                let cancelled = ended.is_none();
                if let Some(Err(err)) = ended {
                    return Err(format!("IDLE: {err}"));
                }
                session = waiting
                    .done()
                    .await
                    .map_err(|err| format!("ending IDLE: {err}"))?;
                if cancelled {
                    let _ = session.logout().await;
                    return Ok(());
                }
            } else {
                tokio::select! {
                    _ = cancel.cancelled() => {
                        let _ = session.logout().await;
                        return Ok(());
                    }
                    _ = tokio::time::sleep(std::time::Duration::from_secs(self.settings.poll_secs.max(1))) => {}
                }
                session.noop().await.map_err(|err| format!("NOOP: {err}"))?;
            }
        }
    }
}

impl super::Adapter for Email {
    fn channel(&self) -> &str {
        &self.name
    }

    fn account(&self) -> &str {
        &self.settings.address
    }

    fn kind(&self) -> &'static str {
        "email"
    }

    fn capabilities(&self) -> super::Capabilities {
        super::Capabilities {
            max_len: 1_000_000,
            length_unit: super::LengthUnit::Bytes,
            edit: false,
            delete: false,
            buttons: false,
            reactions: false,
            // A reply goes into its thread (`In-Reply-To`, `References`).
            threads: true,
            // A file unit is a mail of its own in the thread, the file
            // attached and the unit's text its body.
            files: true,
            edit_interval: std::time::Duration::ZERO,
            markup: Some("html"),
            working_after: None,
            // A resend carries the same `Message-ID`.
            idempotent: super::Idempotence {
                send: true,
                edit: false,
                delete: false,
            },
        }
    }

    /// One mail a reply: the Markdown as its text part, HTML rendered.
    fn render(&self, markdown: &str) -> Vec<Unit> {
        if markdown.trim().is_empty() {
            return Vec::new();
        }
        vec![Unit {
            text: markdown.trim_end().to_owned(),
            markup: Some(super::render::html(
                markdown,
                super::render::Dialect::Common,
            )),
            ..Unit::default()
        }]
    }

    /// Addresses compare without case (as mail servers deliver them).
    fn sender_key(&self, id: &str) -> String {
        id.to_lowercase()
    }

    /// An address.
    fn target(&self, to: &str) -> Result<Target, String> {
        let to = to.trim();
        if to.parse::<lettre::message::Mailbox>().is_err() || to.contains(['<', '>', ' ']) {
            return Err("expected an email address".to_owned());
        }
        Ok(Target {
            kind: crate::core::channel::TargetKind::Direct,
            id: to.to_ascii_lowercase(),
            thread: None,
        })
    }

    fn send<'a>(
        &'a self,
        target: &'a Target,
        unit: &'a Unit,
        reply_to: Option<&'a str>,
        idempotency_key: &'a str,
    ) -> futures::future::BoxFuture<'a, Result<String, super::DeliveryError>> {
        use crate::core::channel::FailureKind;
        use lettre::AsyncTransport as _;
        Box::pin(async move {
            let subject = self.subject(target, reply_to).await;
            let message = reply_message(
                &self.settings,
                target,
                &subject,
                unit,
                reply_to.filter(|id| id.starts_with('<')),
                idempotency_key,
            )
            .map_err(|err| super::DeliveryError::new(FailureKind::InvalidPayload, err))?;
            match self.smtp.send(message).await {
                Ok(_) => Ok(message_id_for(idempotency_key, &self.settings.address)),
                Err(err) => {
                    let kind = if err.is_permanent() {
                        FailureKind::InvalidPayload
                    } else if err.is_transient() {
                        FailureKind::Transient
                    } else {
                        // Cut off on the way: the same Message-ID goes again.
                        FailureKind::Unknown
                    };
                    Err(super::DeliveryError::new(kind, format!("smtp: {err}")))
                }
            }
        })
    }

    fn edit<'a>(
        &'a self,
        _target: &'a Target,
        _platform_id: &'a str,
        _unit: &'a Unit,
    ) -> futures::future::BoxFuture<'a, Result<(), super::DeliveryError>> {
        Box::pin(async {
            Err(super::DeliveryError::new(
                crate::core::channel::FailureKind::Permission,
                "a sent mail cannot be edited",
            ))
        })
    }

    /// Reads the mailbox until `cancel`, logging in again after a lost
    /// connection: 1 s, doubling to 5 min.
    fn receive(
        self: std::sync::Arc<Self>,
        hub: std::sync::Arc<super::Hub>,
        cancel: tokio_util::sync::CancellationToken,
    ) -> futures::future::BoxFuture<'static, ()> {
        Box::pin(async move {
            let mut backoff = std::time::Duration::from_secs(1);
            loop {
                match self.session(&hub, &cancel).await {
                    Ok(()) => return,
                    Err(err) => {
                        tracing::warn!(channel = %self.name, error = %err, retry_in_secs = backoff.as_secs(), "the mailbox could not be read");
                        hub.down(&err);
                    }
                }
                tokio::select! {
                    _ = cancel.cancelled() => return,
                    _ = tokio::time::sleep(backoff) => {}
                }
                backoff = (backoff * 2).min(std::time::Duration::from_secs(300));
            }
        })
    }
}
