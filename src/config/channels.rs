//! `[channels.NAME]` tables: the one place that knows the chat platforms.
//!
//! A table is the keys every channel has ([`CommonChannelConfig`]) and the
//! keys of its platform ([`Platform`], tagged by `kind`). `kind` may be left
//! out when the table is named after a platform (`[channels.telegram]`). A
//! key that is neither common nor its platform's is refused naming the
//! platform and the keys it takes.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::{Deserialize, Deserializer, Serialize};

/// The platforms, by their `kind`.
pub const KINDS: &[&str] = &[
    "telegram", "webhook", "irc", "matrix", "email", "slack", "discord",
];

/// The keys every `[channels.NAME]` table takes.
const COMMON_KEYS: &[&str] = &[
    "allow",
    "pairing_code_env",
    "pairing_lockout_secs",
    "workspace",
    "coalesce_ms",
    "expire_after_secs",
    "max_attempts",
    "live_drafts",
];

/// One `[channels.NAME]` table.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ChannelConfig {
    #[serde(flatten)]
    pub platform: Platform,
    #[serde(flatten)]
    pub common: CommonChannelConfig,
}

/// The platform of a channel and its own keys.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Platform {
    Telegram(TelegramConfig),
    Webhook(WebhookConfig),
    Irc(IrcConfig),
    Matrix(MatrixConfig),
    Email(EmailConfig),
    Discord(DiscordConfig),
    Slack(SlackConfig),
}

impl Platform {
    /// The `kind` naming it.
    pub fn kind(&self) -> &'static str {
        match self {
            Platform::Telegram(_) => "telegram",
            Platform::Webhook(_) => "webhook",
            Platform::Irc(_) => "irc",
            Platform::Matrix(_) => "matrix",
            Platform::Email(_) => "email",
            Platform::Discord(_) => "discord",
            Platform::Slack(_) => "slack",
        }
    }

    /// The platform named `kind` with its defaults, for a channel used
    /// without a table (`--channel telegram`).
    pub fn default_for(kind: &str) -> Option<Self> {
        match kind {
            "telegram" => Some(Platform::Telegram(TelegramConfig::default())),
            "webhook" => Some(Platform::Webhook(WebhookConfig::default())),
            "discord" => Some(Platform::Discord(DiscordConfig::default())),
            "slack" => Some(Platform::Slack(SlackConfig::default())),
            _ => None,
        }
    }

    /// The variables holding this platform's secrets (the safety pass
    /// redacts their values wherever they appear).
    pub fn secret_vars(&self) -> Vec<String> {
        match self {
            Platform::Telegram(t) => vec![t.token_env()],
            Platform::Webhook(w) => vec![w.secret_env()],
            Platform::Irc(irc) => irc.password_env.iter().cloned().collect(),
            Platform::Matrix(matrix) => matrix
                .access_token_env
                .iter()
                .chain(&matrix.password_env)
                .cloned()
                .collect(),
            Platform::Email(email) => vec![email.password_env.clone()],
            Platform::Discord(discord) => vec![discord.token_env()],
            Platform::Slack(slack) => slack.secret_vars(),
        }
    }
}

/// The keys every channel takes: who may talk, where its sessions work, how
/// its messages are delivered.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct CommonChannelConfig {
    /// Sender ids allowed without pairing.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub allow: Vec<String>,
    /// The variable holding the pairing code senders send as `/pair CODE`
    /// (default `PINCER_PAIRING_CODE`); with none set and no `allow` list, a
    /// code is generated at start and logged.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pairing_code_env: Option<String>,
    /// Seconds a sender is refused `/pair` after three wrong codes within
    /// 15 minutes; each further lockout twice as long, up to an hour
    /// (default 60).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pairing_lockout_secs: Option<u64>,
    /// The workspace of the sessions this channel starts (default: the
    /// directory Pincer was started in).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub workspace: Option<PathBuf>,
    /// Messages from one sender within this many milliseconds become one prompt (default 1500).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub coalesce_ms: Option<u64>,
    /// Outbound messages not delivered within this many seconds expire (default 900).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub expire_after_secs: Option<u64>,
    /// Attempts of one outbound message before it fails (default 8).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_attempts: Option<u32>,
    /// Show a reply as it is written, in a message edited in place (default
    /// true where the platform can edit).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub live_drafts: Option<bool>,
}

/// `kind = "telegram"`: a bot, by long polling.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct TelegramConfig {
    /// The variable holding the bot token (default `TELEGRAM_BOT_TOKEN`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub token_env: Option<String>,
    /// The Bot API root (default `https://api.telegram.org`; a self-hosted
    /// Bot API server or a test server otherwise).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub api_base: Option<String>,
    /// Seconds one `getUpdates` long poll waits (default 30).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub poll_timeout_secs: Option<u64>,
}

impl TelegramConfig {
    pub fn token_env(&self) -> String {
        self.token_env
            .clone()
            .unwrap_or_else(|| "TELEGRAM_BOT_TOKEN".to_owned())
    }
}

/// `kind = "webhook"`: signed JSON both ways; inbound POSTs arrive on
/// `pincer serve --http` at `/channels/NAME/webhook`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct WebhookConfig {
    /// The variable holding the HMAC-SHA256 secret shared with the peer
    /// (default `PINCER_WEBHOOK_SECRET`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub secret_env: Option<String>,
    /// Where outbound messages are POSTed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub callback_url: Option<String>,
}

impl WebhookConfig {
    pub fn secret_env(&self) -> String {
        self.secret_env
            .clone()
            .unwrap_or_else(|| "PINCER_WEBHOOK_SECRET".to_owned())
    }
}

/// `kind = "irc"`: one connection to an IRC server, answering in its
/// channels when addressed (`NICK: …`) and in private messages.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct IrcConfig {
    /// `HOST:PORT` (6667 plain, 6697 with TLS by custom).
    pub server: String,
    /// TLS from the first byte (default false).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub tls: bool,
    /// Certificates (PEM) to check the server's against instead of the
    /// system's: a server with a certificate of its own making.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tls_ca: Option<PathBuf>,
    /// The nickname (regained when it was taken at connection time).
    pub nick: String,
    /// The user name (default: the nick).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub username: Option<String>,
    /// The variable holding the password: the server password (`PASS`), and
    /// SASL PLAIN's where the server offers it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub password_env: Option<String>,
    /// Channels to join (`#team`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub channels: Vec<String>,
}

/// `kind = "matrix"`: a user on a Matrix homeserver (Client-Server API
/// v3), answering in direct rooms and, when addressed, in group rooms.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct MatrixConfig {
    /// The homeserver's URL (`https://matrix.example.org`).
    pub homeserver: String,
    /// The account (`@pincer:example.org`).
    pub user_id: String,
    /// The variable holding an access token (this or `password_env`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub access_token_env: Option<String>,
    /// The variable holding the password: Pincer logs in and keeps the
    /// device and its token in the store (this or `access_token_env`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub password_env: Option<String>,
    /// Rooms (ids or aliases) joined at start; their invites are taken
    /// from anyone. Otherwise it joins rooms an allowed sender invites it to.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rooms: Vec<String>,
}

/// `kind = "discord"`: a bot on Discord's Gateway and HTTP API.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct DiscordConfig {
    /// The variable holding the bot token (default `DISCORD_BOT_TOKEN`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub token_env: Option<String>,
    /// The HTTP API root (default `https://discord.com/api/v10`; a test
    /// server otherwise).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub api_base: Option<String>,
    /// The Gateway's URL (default `wss://gateway.discord.gg`; a test server
    /// otherwise).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gateway_url: Option<String>,
    /// Guild ids whose messages are taken (default: every guild the bot is in).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub guilds: Vec<String>,
    /// Channel ids where every message is taken; elsewhere in a guild only
    /// messages that mention the bot. Direct messages always.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub channels: Vec<String>,
}

impl DiscordConfig {
    pub fn token_env(&self) -> String {
        self.token_env
            .clone()
            .unwrap_or_else(|| "DISCORD_BOT_TOKEN".to_owned())
    }
}

/// How an email channel's connections are protected.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum EmailTls {
    /// Plain TCP: a server on this machine only.
    None,
    /// Plain TCP upgraded with STARTTLS (IMAP 143, SMTP submission 587).
    #[default]
    Starttls,
    /// TLS from the first byte (IMAPS 993, SMTPS 465).
    Implicit,
}

/// `kind = "email"`: a mailbox read over IMAP, replies sent over SMTP.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct EmailConfig {
    /// `HOST:PORT` of the IMAP server.
    pub imap: String,
    /// `HOST:PORT` of the SMTP server.
    pub smtp: String,
    /// `none`, `starttls` (the default) or `implicit`, for both.
    #[serde(default)]
    pub tls: EmailTls,
    /// Certificates (PEM) to check the servers' against instead of the system's.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tls_ca: Option<PathBuf>,
    /// The login name on both servers.
    pub username: String,
    /// The variable holding the password.
    pub password_env: String,
    /// The address Pincer writes from, and is written to.
    pub address: String,
    /// The mailbox read (default `INBOX`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub folder: Option<String>,
    /// Seconds between polls where the server offers no IDLE (default 30).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub poll_secs: Option<u64>,
    /// The receiving server's authserv-id: a mail counts as from its `From`
    /// address only when that server's `Authentication-Results` says it
    /// passed DMARC (or DKIM for the `From` domain).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub authserv_id: Option<String>,
}

/// `kind = "slack"`: a Slack app's bot, receiving over Socket Mode (an
/// app-level token) or the HTTP Events API (a signing secret; requests on
/// `pincer serve --http` at `/channels/NAME/events`), sending with the Web
/// API.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct SlackConfig {
    /// The variable holding the bot token, `xoxb-…` (default `SLACK_BOT_TOKEN`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bot_token_env: Option<String>,
    /// The variable holding the app-level token, `xapp-…`, for Socket Mode
    /// (default `SLACK_APP_TOKEN` unless `signing_secret_env` is set).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub app_token_env: Option<String>,
    /// The variable holding the signing secret, for the HTTP Events API.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub signing_secret_env: Option<String>,
    /// Where the Events API's requests are received, a listener of the
    /// channel's own on `pincer serve` (any path; with `signing_secret_env`).
    /// Without it they are received on `pincer serve --http`, at
    /// `/channels/NAME/events`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub listen: Option<std::net::SocketAddr>,
    /// The Web API root (default `https://slack.com/api`; a test server otherwise).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub api_base: Option<String>,
    /// Channel ids (`C…`) where it answers when mentioned; empty: every
    /// channel it is a member of.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub channels: Vec<String>,
}

impl SlackConfig {
    pub fn bot_token_env(&self) -> String {
        self.bot_token_env
            .clone()
            .unwrap_or_else(|| "SLACK_BOT_TOKEN".to_owned())
    }

    /// The app-level token's variable, in Socket Mode (no signing secret).
    pub fn app_token_env(&self) -> Option<String> {
        match (&self.app_token_env, &self.signing_secret_env) {
            (Some(var), _) => Some(var.clone()),
            (None, Some(_)) => None,
            (None, None) => Some("SLACK_APP_TOKEN".to_owned()),
        }
    }

    fn secret_vars(&self) -> Vec<String> {
        std::iter::once(self.bot_token_env())
            .chain(self.app_token_env())
            .chain(self.signing_secret_env.clone())
            .collect()
    }
}

impl ChannelConfig {
    /// The channel used without a table: `name` is a platform, with its defaults.
    pub fn default_for(name: &str) -> Option<Self> {
        Some(Self {
            platform: Platform::default_for(name)?,
            common: CommonChannelConfig::default(),
        })
    }

    /// Reads one table named `name`: `kind` (or the name), the common keys,
    /// the platform's keys; anything else refused naming the platform.
    fn from_table(name: &str, mut table: toml::Table) -> Result<Self, String> {
        let kind = match table.get("kind") {
            Some(toml::Value::String(kind)) => kind.clone(),
            Some(other) => {
                return Err(format!(
                    "channels.{name}.kind: expected a string (one of {}), got {other}",
                    KINDS.join(", ")
                ));
            }
            None if KINDS.contains(&name) => {
                table.insert("kind".into(), toml::Value::String(name.to_owned()));
                name.to_owned()
            }
            None => {
                return Err(format!(
                    "channels.{name}: set kind = one of {}",
                    quoted(KINDS)
                ));
            }
        };
        if !KINDS.contains(&kind.as_str()) {
            return Err(format!(
                "channels.{name}.kind: unknown platform {:?}; expected one of {}",
                prefix(&kind),
                quoted(KINDS)
            ));
        }
        if kind == "slack"
            && table.contains_key("listen")
            && !table.contains_key("signing_secret_env")
        {
            return Err(format!(
                "channels.{name}.listen: a listener is for the Events API: set signing_secret_env too (Socket Mode needs none)"
            ));
        }
        if kind == "webhook" && table.contains_key("listen") {
            return Err(format!(
                "channels.{name}.listen: the webhook channel now receives on `pincer serve --http`, at /channels/{name}/webhook; remove listen"
            ));
        }
        let mut common = toml::Table::new();
        for key in COMMON_KEYS {
            if let Some(value) = table.remove(*key) {
                common.insert((*key).to_owned(), value);
            }
        }
        let common = CommonChannelConfig::deserialize(toml::Value::Table(common))
            .map_err(|err| format!("channels.{name}: {}", message(&err)))?;
        let platform = Platform::deserialize(toml::Value::Table(table)).map_err(|err| {
            let err = message(&err);
            if err.starts_with("unknown field") {
                format!(
                    "channels.{name} (kind = \"{kind}\"): {err}; or one every channel takes: {}",
                    COMMON_KEYS.join(", ")
                )
            } else {
                format!("channels.{name} (kind = \"{kind}\"): {err}")
            }
        })?;
        Ok(Self { platform, common })
    }
}

/// A deserialization error's message, one line, without a trailing period.
fn message(err: &toml::de::Error) -> String {
    err.message()
        .lines()
        .next()
        .unwrap_or_default()
        .trim_end_matches('.')
        .to_owned()
}

fn quoted(kinds: &[&str]) -> String {
    kinds
        .iter()
        .map(|k| format!("\"{k}\""))
        .collect::<Vec<_>>()
        .join(", ")
}

/// At most 40 characters of what someone wrote.
fn prefix(text: &str) -> String {
    text.chars().take(40).collect()
}

/// `[channels]`: each table read with its name (`deserialize_with`).
pub(super) fn deserialize_channels<'de, D>(
    deserializer: D,
) -> Result<BTreeMap<String, ChannelConfig>, D::Error>
where
    D: Deserializer<'de>,
{
    let tables = BTreeMap::<String, toml::Table>::deserialize(deserializer)?;
    tables
        .into_iter()
        .map(|(name, table)| {
            let channel =
                ChannelConfig::from_table(&name, table).map_err(serde::de::Error::custom)?;
            Ok((name, channel))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(text: &str) -> Result<BTreeMap<String, ChannelConfig>, String> {
        #[derive(Deserialize)]
        struct File {
            #[serde(deserialize_with = "deserialize_channels")]
            channels: BTreeMap<String, ChannelConfig>,
        }
        toml::from_str::<File>(text)
            .map(|f| f.channels)
            .map_err(|e| e.message().to_owned())
    }

    #[test]
    fn a_table_named_after_a_platform_needs_no_kind() {
        let channels = read(
            "[channels.telegram]\nallow = [\"42\"]\napi_base = \"http://x\"\n\
                             [channels.team]\nkind = \"webhook\"\ncallback_url = \"http://y\"\n",
        )
        .unwrap();
        let telegram = &channels["telegram"];
        assert_eq!(telegram.common.allow, ["42"]);
        assert_eq!(
            telegram.platform,
            Platform::Telegram(TelegramConfig {
                api_base: Some("http://x".into()),
                ..TelegramConfig::default()
            })
        );
        assert_eq!(channels["team"].platform.kind(), "webhook");
    }

    #[test]
    fn a_key_of_another_platform_is_refused_naming_the_platform() {
        let err = read("[channels.team]\nkind = \"webhook\"\ntoken_env = \"T\"\n").unwrap_err();
        assert!(err.contains("channels.team (kind = \"webhook\")"), "{err}");
        assert!(err.contains("unknown field `token_env`"), "{err}");
        assert!(err.contains("callback_url"), "{err}");
        assert!(err.contains("allow"), "{err}");
    }

    #[test]
    fn a_missing_or_unknown_kind_is_refused_with_the_kinds() {
        let err = read("[channels.team]\nallow = []\n").unwrap_err();
        assert!(
            err.contains("channels.team: set kind = one of \"telegram\""),
            "{err}"
        );
        let err = read("[channels.team]\nkind = \"carrier-pigeon\"\n").unwrap_err();
        assert!(err.contains("unknown platform \"carrier-pigeon\""), "{err}");
        let err = read("[channels.team]\nkind = 3\n").unwrap_err();
        assert!(
            err.contains("channels.team.kind: expected a string"),
            "{err}"
        );
    }

    #[test]
    fn a_common_key_of_the_wrong_type_is_named() {
        let err = read("[channels.telegram]\ncoalesce_ms = \"soon\"\n").unwrap_err();
        assert!(err.starts_with("channels.telegram: "), "{err}");
        assert!(err.contains("soon") || err.contains("integer"), "{err}");
    }

    #[test]
    fn a_matrix_table_takes_its_keys() {
        let channels = read(
            "[channels.chat]\nkind = \"matrix\"\nhomeserver = \"http://127.0.0.1:8008\"\n\
             user_id = \"@pincer:example.org\"\npassword_env = \"P\"\nrooms = [\"!a:example.org\"]\n\
             allow = [\"@alice:example.org\"]\n",
        )
        .unwrap();
        let Platform::Matrix(matrix) = &channels["chat"].platform else {
            panic!("not matrix")
        };
        assert_eq!(matrix.user_id, "@pincer:example.org");
        assert_eq!(matrix.rooms, ["!a:example.org"]);
        assert_eq!(channels["chat"].platform.secret_vars(), ["P"]);
        let err = read("[channels.matrix]\nhomeserver = \"h\"\nuser_id = \"@p:x\"\nnick = \"p\"\n")
            .unwrap_err();
        assert!(err.contains("unknown field `nick`"), "{err}");
    }

    #[test]
    fn a_discord_table_takes_its_keys() {
        let channels = read(
            "[channels.discord]\nallow = [\"42\"]\napi_base = \"http://127.0.0.1:1/api/v10\"\n\
             gateway_url = \"ws://127.0.0.1:2\"\nguilds = [\"7\"]\nchannels = [\"8\"]\n",
        )
        .unwrap();
        let Platform::Discord(discord) = &channels["discord"].platform else {
            panic!("not discord")
        };
        assert_eq!(discord.guilds, ["7"]);
        assert_eq!(discord.channels, ["8"]);
        assert_eq!(
            channels["discord"].platform.secret_vars(),
            ["DISCORD_BOT_TOKEN"]
        );
        let err = read("[channels.discord]\npoll_timeout_secs = 1\n").unwrap_err();
        assert!(err.contains("unknown field `poll_timeout_secs`"), "{err}");
        assert!(err.contains("gateway_url"), "{err}");
    }

    #[test]
    fn a_slack_table_takes_its_keys_and_a_listener_only_for_the_events_api() {
        let channels = read(
            "[channels.slack]\nbot_token_env = \"B\"\napp_token_env = \"A\"\n\
             channels = [\"C1\"]\nallow = [\"U1\"]\n",
        )
        .unwrap();
        let Platform::Slack(slack) = &channels["slack"].platform else {
            panic!("not slack")
        };
        assert_eq!(slack.channels, ["C1"]);
        assert_eq!(channels["slack"].platform.secret_vars(), ["B", "A"]);
        let events =
            read("[channels.team]\nkind = \"slack\"\nsigning_secret_env = \"S\"\n").unwrap();
        assert_eq!(
            events["team"].platform.secret_vars(),
            ["SLACK_BOT_TOKEN", "S"]
        );
        let listening =
            read("[channels.slack]\nsigning_secret_env = \"S\"\nlisten = \"127.0.0.1:3000\"\n")
                .unwrap();
        let Platform::Slack(slack) = &listening["slack"].platform else {
            panic!("not slack")
        };
        assert_eq!(slack.listen, Some("127.0.0.1:3000".parse().unwrap()));
        let err = read("[channels.slack]\nlisten = \"127.0.0.1:3000\"\n").unwrap_err();
        assert!(err.contains("channels.slack.listen"), "{err}");
        assert!(err.contains("signing_secret_env"), "{err}");
        let err = read("[channels.slack]\nsigning_secret_env = \"S\"\nlisten = \"localhost\"\n")
            .unwrap_err();
        assert!(err.contains("channels.slack"), "{err}");
    }

    #[test]
    fn a_table_serializes_back_with_its_kind() {
        let channels = read("[channels.telegram]\nallow = [\"1\"]\n").unwrap();
        let shown = toml::to_string(&channels["telegram"]).unwrap();
        assert!(shown.contains("kind = \"telegram\""), "{shown}");
        let again = read(&format!("[channels.telegram]\n{shown}")).unwrap();
        assert_eq!(again, channels);
    }
}
