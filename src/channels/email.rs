//! Email (`kind = "email"`): a mailbox read over IMAP, replies sent over
//! SMTP. WORK IN PROGRESS on the `email` branch: not wired, not tested yet.
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
//! attachments are listed by name and size.
//!
//! **Sending.** One message per reply, `text/plain` (the Markdown) and
//! `text/html` (rendered), threaded with `In-Reply-To` and `References`,
//! with a `Message-ID` derived from the intent's key: a resend after a crash
//! carries the same id, so a mail client shows it once; sends are therefore
//! treated as repeatable.

use std::sync::Arc;

use crate::core::channel::Target;

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
    pub username: String,
    pub password: String,
    /// The address Pincer writes from (and is written to).
    pub address: String,
    pub folder: String,
    /// Seconds between polls where the server offers no IDLE.
    pub poll_secs: u64,
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
    let domain = address.rsplit_once('@').map_or("pincer.invalid", |(_, d)| d);
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
    fn a_resend_has_the_same_message_id() {
        let a = message_id_for("reply:run_1:0", "pincer@example.org");
        assert_eq!(a, message_id_for("reply:run_1:0", "pincer@example.org"));
        assert_ne!(a, message_id_for("reply:run_2:0", "pincer@example.org"));
        assert!(a.starts_with("<pincer.") && a.ends_with("@example.org>"), "{a}");
    }
}
