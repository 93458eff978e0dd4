//! IRC's wire format (RFC 1459 / 2812, with IRCv3 message tags): one
//! message a line, at most 512 bytes with its CR LF (tags aside).

/// The longest line, CR LF included.
pub const MAX_LINE: usize = 512;

/// One message a server sent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Message {
    /// IRCv3 tags (`@time=…;account=alice`), their values unescaped; a tag
    /// without a value has an empty one.
    pub tags: Vec<(String, String)>,
    /// `nick!user@host` or a server name, without the `:`.
    pub prefix: Option<String>,
    /// The command, upper case (`PRIVMSG`, `001`).
    pub command: String,
    /// Every parameter, the trailing one last.
    pub params: Vec<String>,
}

impl Message {
    /// Parses one line (without CR LF); `None` for a line with no command.
    pub fn parse(line: &str) -> Option<Self> {
        let mut rest = line.trim_end_matches(['\r', '\n']);
        let mut tags = Vec::new();
        if let Some(tagged) = rest.strip_prefix('@') {
            let (text, r) = tagged.split_once(' ').unwrap_or((tagged, ""));
            rest = r;
            tags = text
                .split(';')
                .filter(|tag| !tag.is_empty())
                .map(|tag| {
                    let (key, value) = tag.split_once('=').unwrap_or((tag, ""));
                    (key.to_owned(), unescape_tag(value))
                })
                .collect();
        }
        rest = rest.trim_start_matches(' ');
        let prefix = match rest.strip_prefix(':') {
            Some(prefixed) => {
                let (prefix, r) = prefixed.split_once(' ').unwrap_or((prefixed, ""));
                rest = r;
                Some(prefix.to_owned())
            }
            None => None,
        };
        let mut params = Vec::new();
        let (command, mut rest) = match rest.trim_start_matches(' ').split_once(' ') {
            Some((command, r)) => (command, r),
            None => (rest.trim_start_matches(' '), ""),
        };
        if command.is_empty() {
            return None;
        }
        loop {
            rest = rest.trim_start_matches(' ');
            if rest.is_empty() {
                break;
            }
            if let Some(trailing) = rest.strip_prefix(':') {
                params.push(trailing.to_owned());
                break;
            }
            match rest.split_once(' ') {
                Some((param, r)) => {
                    params.push(param.to_owned());
                    rest = r;
                }
                None => {
                    params.push(rest.to_owned());
                    break;
                }
            }
        }
        Some(Self {
            tags,
            prefix,
            command: command.to_ascii_uppercase(),
            params,
        })
    }

    /// The nick of the prefix (`nick!user@host`), if it is a user's.
    pub fn nick(&self) -> Option<&str> {
        let prefix = self.prefix.as_deref()?;
        prefix
            .contains('!')
            .then(|| prefix.split('!').next().unwrap_or(prefix))
    }

    /// The value of tag `key` (the last, if it is there twice).
    pub fn tag(&self, key: &str) -> Option<&str> {
        self.tags
            .iter()
            .rev()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }

    /// The account the sender is logged in to, as IRCv3 `account-tag`
    /// reports it (`@account=NAME`); `None` when it is absent or `*` (not
    /// logged in). Meaningful only on a connection that negotiated
    /// `account-tag`: elsewhere no message carries it.
    pub fn account(&self) -> Option<&str> {
        self.tag("account")
            .filter(|account| !account.is_empty() && *account != "*")
    }

    pub fn param(&self, index: usize) -> Option<&str> {
        self.params.get(index).map(String::as_str)
    }

    /// The last parameter (a message's text).
    pub fn trailing(&self) -> Option<&str> {
        self.params.last().map(String::as_str)
    }
}

/// A tag's value as sent (`\:` `;`, `\s` space, `\\` `\`, `\r`, `\n`;
/// another escaped character stands for itself, a lone `\` at the end is
/// dropped).
fn unescape_tag(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    let mut chars = value.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some(':') => out.push(';'),
            Some('s') => out.push(' '),
            Some('r') => out.push('\r'),
            Some('n') => out.push('\n'),
            Some(other) => out.push(other),
            None => {}
        }
    }
    out
}

/// The capabilities of a `CAP` list (`sasl=PLAIN,EXTERNAL account-tag`):
/// each name, without its value.
pub fn cap_names(list: &str) -> impl Iterator<Item = &str> {
    list.split(' ')
        .filter(|cap| !cap.is_empty())
        .map(|cap| cap.split_once('=').map_or(cap, |(name, _)| name))
}

/// Text made safe for one line: no CR, LF or NUL (which would end the line
/// and start a command of the text's choosing).
pub fn clean(text: &str) -> String {
    text.chars()
        .map(|c| {
            if matches!(c, '\r' | '\n' | '\0') {
                ' '
            } else {
                c
            }
        })
        .collect()
}

/// Whether two nicks are the same (IRC compares case-insensitively, with
/// `[]\~` the upper case of `{}|^`).
pub fn same_nick(a: &str, b: &str) -> bool {
    let fold = |c: char| match c {
        '[' => '{',
        ']' => '}',
        '\\' => '|',
        '~' => '^',
        c => c.to_ascii_lowercase(),
    };
    a.chars().map(fold).eq(b.chars().map(fold))
}

/// A channel message addressed to `nick` (`nick: text`, `nick, text`):
/// the text after the address.
pub fn addressed<'a>(text: &'a str, nick: &str) -> Option<&'a str> {
    let head = text.get(..nick.len())?;
    if !same_nick(head, nick) {
        return None;
    }
    let rest = &text[nick.len()..];
    let rest = rest.strip_prefix(':').or_else(|| rest.strip_prefix(','))?;
    Some(rest.trim_start())
}

/// Whether `target` is a channel (`#team`, `&local`, `+x`, `!x`).
pub fn is_channel(target: &str) -> bool {
    target.starts_with(['#', '&', '+', '!'])
}

/// The bytes of text a `PRIVMSG target :…` from `mask` may carry so the
/// line the server relays (`:mask PRIVMSG target :text` CR LF) fits 512.
pub fn text_budget(mask_len: usize, target_len: usize) -> usize {
    // ':' mask ' ' "PRIVMSG " target " :" … "\r\n"
    MAX_LINE.saturating_sub(1 + mask_len + 1 + 8 + target_len + 2 + 2)
}

/// `name` case-folded as IRC compares nicks (`rfc1459`, less `~`): ASCII
/// letters lowered, and `[`, `]`, `\` as `{`, `}`, `|`. `~` stays: no nick
/// has one, and it marks a sender who is not logged in (`~NICK`), which
/// must never fold into a nick or account with `^`.
pub fn fold(name: &str) -> String {
    name.chars()
        .map(|c| match c {
            '[' => '{',
            ']' => '}',
            '\\' => '|',
            other => other.to_ascii_lowercase(),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_parse_with_prefix_params_and_trailing() {
        let m =
            Message::parse(":alice!~a@127.0.0.1 PRIVMSG #team :pincer: hello there\r\n").unwrap();
        assert_eq!(m.prefix.as_deref(), Some("alice!~a@127.0.0.1"));
        assert_eq!(m.nick(), Some("alice"));
        assert_eq!(m.command, "PRIVMSG");
        assert_eq!(m.params, ["#team", "pincer: hello there"]);
        let ping = Message::parse("PING :irc.example").unwrap();
        assert_eq!(
            (ping.prefix.as_deref(), ping.command.as_str()),
            (None, "PING")
        );
        assert_eq!(ping.trailing(), Some("irc.example"));
        let tagged =
            Message::parse("@time=x;account=a :srv 001 pincer :Welcome pincer!~p@h").unwrap();
        assert_eq!(tagged.command, "001");
        assert_eq!(tagged.nick(), None);
        assert_eq!(tagged.params, ["pincer", "Welcome pincer!~p@h"]);
        let spaced = Message::parse(":srv  CAP  *  LS :multi-prefix sasl").unwrap();
        assert_eq!(spaced.params, ["*", "LS", "multi-prefix sasl"]);
        assert!(Message::parse("").is_none());
        assert!(Message::parse(":only-prefix").is_none());
    }

    #[test]
    fn tags_are_read_and_the_account_is_the_account_tag() {
        let m = Message::parse(
            "@time=2026-01-01T00:00:00Z;account=alice :ally!~a@h PRIVMSG pincer :hi\r\n",
        )
        .unwrap();
        assert_eq!(m.account(), Some("alice"));
        assert_eq!(m.nick(), Some("ally"));
        assert_eq!(m.tag("time"), Some("2026-01-01T00:00:00Z"));
        assert_eq!(m.params, ["pincer", "hi"]);
        // Not logged in: `*`, or no tag at all.
        let star = Message::parse("@account=* :alice!~a@h PRIVMSG pincer :hi").unwrap();
        assert_eq!((star.nick(), star.account()), (Some("alice"), None));
        let none = Message::parse(":alice!~a@h PRIVMSG pincer :hi").unwrap();
        assert_eq!(none.account(), None);
        assert!(none.tags.is_empty());
        let empty = Message::parse("@account= :alice!~a@h PRIVMSG pincer :hi").unwrap();
        assert_eq!(empty.account(), None);
        // Values unescaped; a flag tag has an empty value; the last wins.
        let escaped = Message::parse(
            "@+draft/x=a\\sb\\:c\\\\d;flag;account=bob;account=carol :s NOTICE x :y",
        )
        .unwrap();
        assert_eq!(escaped.tag("+draft/x"), Some("a b;c\\d"));
        assert_eq!(escaped.tag("flag"), Some(""));
        assert_eq!(escaped.account(), Some("carol"));
        assert_eq!(escaped.command, "NOTICE");
        // Tags alone, with no command, are no message.
        assert!(Message::parse("@account=alice").is_none());
        assert!(Message::parse("@account=alice ").is_none());
    }

    #[test]
    fn capability_lists_name_each_capability_without_its_value() {
        let names: Vec<&str> =
            cap_names("account-notify  account-tag sasl=EXTERNAL,PLAIN ").collect();
        assert_eq!(names, ["account-notify", "account-tag", "sasl"]);
    }

    #[test]
    fn text_never_starts_another_command() {
        assert_eq!(clean("hi\r\nQUIT :bye\0"), "hi  QUIT :bye ");
    }

    #[test]
    fn addressing_is_by_nick_case_insensitively() {
        assert_eq!(addressed("pincer: do it", "pincer"), Some("do it"));
        assert_eq!(addressed("Pincer,do it", "pincer"), Some("do it"));
        assert_eq!(addressed("pincer[m]: x", "PINCER{M}"), Some("x"));
        assert_eq!(addressed("pincers: no", "pincer"), None);
        assert_eq!(addressed("hey pincer: no", "pincer"), None);
        assert_eq!(addressed("pi", "pincer"), None);
        assert!(is_channel("#team") && !is_channel("alice"));
    }

    #[test]
    fn the_budget_keeps_the_relayed_line_within_512_bytes() {
        let mask = "pincer!~pincer@127.0.0.1";
        let budget = text_budget(mask.len(), "#team".len());
        let text = "x".repeat(budget);
        let relayed = format!(":{mask} PRIVMSG #team :{text}\r\n");
        assert_eq!(relayed.len(), MAX_LINE);
    }

    #[test]
    fn names_fold_as_irc_compares_them_but_the_not_logged_in_mark_stays() {
        assert_eq!(fold("Alice[m]\\X"), "alice{m}|x");
        assert_eq!(fold("~alice"), "~alice");
        assert_ne!(fold("~alice"), fold("^alice"));
    }
}
