//! Quoting outside input in error text, logs and replies.
//!
//! A value that came from outside (a method name, a path, a session id, a
//! serde message that quotes the offending value) is shown as a short prefix
//! with its length, never whole: an error must not echo a megabyte back, nor
//! carry it into the logs. Every face quotes through here.

use std::fmt;

/// How many characters of an outside value an error shows.
pub const QUOTE_CHARS: usize = 120;

/// The longest error message a face sends, in bytes, once every quoted value
/// in it is clipped: a backstop for text that quotes outside input in a way
/// [`clip_message`] cannot see.
pub const MESSAGE_BYTES: usize = 1024;

/// An outside value as an error shows it: whole when short, otherwise its
/// first [`QUOTE_CHARS`] characters, an ellipsis and its length in bytes.
#[derive(Debug, Clone, Copy)]
pub struct Quoted<'a>(pub &'a str);

/// Shorthand for [`Quoted`].
pub fn quote(value: &str) -> Quoted<'_> {
    Quoted(value)
}

impl fmt::Display for Quoted<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match prefix_end(self.0, QUOTE_CHARS) {
            None => f.write_str(self.0),
            Some(end) => write!(f, "{}… ({} bytes)", &self.0[..end], self.0.len()),
        }
    }
}

/// The byte index where the first `chars` characters of `text` end, or
/// `None` when the text is no longer than that.
fn prefix_end(text: &str, chars: usize) -> Option<usize> {
    text.char_indices().nth(chars).map(|(i, _)| i)
}

/// Clips every quoted span (`"…"` or `` `…` ``) in a message longer than
/// [`QUOTE_CHARS`] to its prefix and length, then cuts the whole message to
/// [`MESSAGE_BYTES`]. For messages built by others (serde, a parser, a
/// provider) that quote the input they refused.
pub fn clip_message(message: &str) -> String {
    let mut out = String::with_capacity(message.len().min(MESSAGE_BYTES + 32));
    let mut rest = message;
    while let Some(open) = rest.find(['"', '`']) {
        let delim = rest[open..].chars().next().unwrap_or('"');
        out.push_str(&rest[..=open]);
        let body = &rest[open + 1..];
        match body.find(delim) {
            Some(close) => {
                out.push_str(&quote(&body[..close]).to_string());
                out.push(delim);
                rest = &body[close + 1..];
            }
            None => {
                // An unterminated quote runs to the end of the message.
                out.push_str(&quote(body).to_string());
                rest = "";
            }
        }
        if out.len() > MESSAGE_BYTES {
            break;
        }
    }
    out.push_str(rest);
    if out.len() > MESSAGE_BYTES {
        let mut end = MESSAGE_BYTES;
        while !out.is_char_boundary(end) {
            end -= 1;
        }
        let total = message.len();
        out.truncate(end);
        out.push_str(&format!("… ({total} bytes)"));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn short_values_are_shown_whole() {
        assert_eq!(quote("session/prompt").to_string(), "session/prompt");
        assert_eq!(quote("").to_string(), "");
        let exactly = "é".repeat(QUOTE_CHARS);
        assert_eq!(quote(&exactly).to_string(), exactly);
    }

    #[test]
    fn long_values_show_a_prefix_and_their_length() {
        let long = "v".repeat(1_000_000);
        let shown = quote(&long).to_string();
        assert_eq!(
            shown,
            format!("{}… (1000000 bytes)", "v".repeat(QUOTE_CHARS))
        );
    }

    #[test]
    fn the_prefix_never_splits_a_character() {
        let long = "ß".repeat(500);
        let shown = quote(&long).to_string();
        assert_eq!(shown, format!("{}… (1000 bytes)", "ß".repeat(QUOTE_CHARS)));
    }

    #[test]
    fn serde_messages_have_their_quoted_values_clipped() {
        let value = "v".repeat(10_000);
        let message =
            format!("invalid type: string \"{value}\", expected u32 at line 1 column 10012");
        assert_eq!(
            clip_message(&message),
            format!(
                "invalid type: string \"{}… (10000 bytes)\", expected u32 at line 1 column 10012",
                "v".repeat(QUOTE_CHARS)
            )
        );
        let variant = "x".repeat(5_000);
        let message = format!("unknown variant `{variant}`, expected `a` or `b`");
        assert_eq!(
            clip_message(&message),
            format!(
                "unknown variant `{}… (5000 bytes)`, expected `a` or `b`",
                "x".repeat(QUOTE_CHARS)
            )
        );
    }

    #[test]
    fn an_unterminated_quote_is_clipped_to_the_end() {
        let message = format!("bad \"{}", "y".repeat(300));
        assert_eq!(
            clip_message(&message),
            format!("bad \"{}… (300 bytes)", "y".repeat(QUOTE_CHARS))
        );
    }

    #[test]
    fn unquoted_floods_are_cut_to_the_message_bound() {
        let message = "z".repeat(100_000);
        let clipped = clip_message(&message);
        assert!(clipped.len() <= MESSAGE_BYTES + 32, "{}", clipped.len());
        assert!(clipped.ends_with("… (100000 bytes)"), "{clipped}");
    }

    #[test]
    fn many_quoted_spans_stay_bounded() {
        let message = format!("a \"{}\" ", "q".repeat(200)).repeat(1_000);
        assert!(clip_message(&message).len() <= MESSAGE_BYTES + 200);
    }

    #[test]
    fn ordinary_messages_pass_unchanged() {
        let message = "missing field `sessionId` at line 1 column 2";
        assert_eq!(clip_message(message), message);
    }
}
