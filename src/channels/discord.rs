//! Discord: a bot on the Gateway (`gateway`) and the HTTP API (`rest`).
//!
//! Messages arrive as `MESSAGE_CREATE` dispatches: every one in a direct
//! message, in the configured `channels`, or anywhere the bot is mentioned
//! (the mention taken out), limited to the configured `guilds` when there
//! are any. Replies are created with a `nonce` and `enforce_nonce`, so a
//! create repeated with the same nonce gives one message; live drafts are
//! edited in place; approval prompts carry buttons (message components),
//! whose presses arrive as `INTERACTION_CREATE` and are answered with an
//! interaction response (a deferred update) before the hub takes them.
//! A reply's file (its changes, a long reply whole) is uploaded with its
//! create, a `multipart/form-data` body carrying the same nonce.
//!
//! Discord's message ids are unique across channels, so an inbound message's
//! id is its own (a replayed dispatch is a duplicate in the inbox).

mod gateway;
mod rest;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::future::BoxFuture;
use serde_json::{Value, json};
use sha2::Digest as _;
use tokio_util::sync::CancellationToken;

use super::{
    Adapter, Capabilities, DeliveryError, FetchError, Hub, Idempotence, Inbound, LengthUnit,
};
use crate::core::channel::{
    Actor, Attachment, ChannelMessage, FailureKind, MessageOrigin, Relation, Target, TargetKind,
    Unit,
};

pub use gateway::INTENTS;

/// Discord's longest message content, in characters.
pub const MAX_LEN: usize = 2000;
/// Milliseconds from the Unix epoch to Discord's (2015-01-01), for the
/// time a snowflake carries.
const DISCORD_EPOCH: i64 = 1_420_070_400_000;

/// How long a create's nonce is taken as remembered by Discord (its
/// documents say "the past few minutes"; the shortest reading).
const NONCE_LIFETIME: Duration = Duration::from_secs(120);

/// A Discord channel as configured.
pub struct DiscordSettings {
    pub token: String,
    /// `https://discord.com/api/v10`, or a test server's.
    pub api_base: String,
    /// `wss://gateway.discord.gg`, or a test server's.
    pub gateway_url: String,
    /// Guild ids whose messages are taken (none: every guild).
    pub guilds: Vec<String>,
    /// Channel ids where every message is taken, not only mentions.
    pub channels: Vec<String>,
    pub tls: Arc<rustls::ClientConfig>,
}

pub struct Discord {
    name: String,
    /// The bot's user id, read from the token's first part.
    account: String,
    rest: rest::Rest,
    settings: DiscordSettings,
    /// The bot's user id as READY said it (the token's otherwise): its own
    /// messages are not taken in, and mentions of it address it.
    bot: Mutex<String>,
}

impl Discord {
    pub fn new(name: &str, settings: DiscordSettings) -> Result<Self, String> {
        let account = account_of(&settings.token).ok_or_else(|| {
            "the Discord bot token does not look like one (three parts joined by dots, from the Developer Portal)"
                .to_owned()
        })?;
        let rest = rest::Rest::new(&settings.api_base, &settings.token)?;
        Ok(Self {
            name: name.to_owned(),
            bot: Mutex::new(account.clone()),
            account,
            rest,
            settings,
        })
    }

    fn bot(&self) -> String {
        self.bot
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    /// A `MESSAGE_CREATE` or `INTERACTION_CREATE` as a channel event;
    /// `None` for what Pincer does not take (its own messages, a guild or
    /// channel not configured, a guild message not addressed to it).
    /// Public for the fuzzing entry point.
    pub fn normalize(&self, name: &str, data: &Value) -> Option<Inbound> {
        match name {
            "MESSAGE_CREATE" => self.message(data),
            "INTERACTION_CREATE" => interaction(data),
            _ => None,
        }
    }

    fn message(&self, data: &Value) -> Option<Inbound> {
        let bot = self.bot();
        let author = &data["author"];
        let author_id = author["id"].as_str()?;
        if author_id == bot {
            return None;
        }
        let channel = data["channel_id"].as_str()?;
        let guild = data["guild_id"].as_str();
        let mut body = data["content"].as_str().unwrap_or_default().to_owned();
        if let Some(guild) = guild {
            if !self.settings.guilds.is_empty() && !self.settings.guilds.iter().any(|g| g == guild)
            {
                return None;
            }
            let mentioned = data["mentions"]
                .as_array()
                .is_some_and(|m| m.iter().any(|u| u["id"].as_str() == Some(bot.as_str())));
            let listening = self.settings.channels.iter().any(|c| c == channel);
            if !mentioned && !listening {
                return None;
            }
            for mention in [format!("<@{bot}>"), format!("<@!{bot}>")] {
                body = body.replace(&mention, "");
            }
            body = body.trim().to_owned();
        }
        let attachments: Vec<Attachment> = data["attachments"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|a| Attachment {
                kind: a["content_type"]
                    .as_str()
                    .and_then(|t| t.split('/').next())
                    .unwrap_or("document")
                    .to_owned(),
                name: a["filename"].as_str().map(str::to_owned),
                reference: a["url"].as_str().unwrap_or_default().to_owned(),
                size: a["size"].as_u64(),
                mime_type: a["content_type"].as_str().map(str::to_owned),
            })
            .collect();
        if body.is_empty() && attachments.is_empty() {
            return None;
        }
        let id = data["id"].as_str()?;
        let is_bot = author["bot"].as_bool() == Some(true);
        Some(Inbound::Message(ChannelMessage {
            id: id.to_owned(),
            channel: self.name.clone(),
            account: self.account.clone(),
            target: target_of(channel, guild),
            sender: Some(Actor {
                id: author_id.to_owned(),
                name: author["global_name"]
                    .as_str()
                    .or_else(|| author["username"].as_str())
                    .map(str::to_owned),
                is_bot,
            }),
            body,
            attachments,
            relation: data["message_reference"]["message_id"]
                .as_str()
                .map(|to| Relation::Reply { to: to.to_owned() }),
            origin: if is_bot {
                MessageOrigin::ExternalBot
            } else {
                MessageOrigin::User
            },
            at: snowflake_millis(id),
        }))
    }

    /// The message's body for a create or an edit: its content, and its
    /// buttons as one or more action rows (none: the rows removed).
    fn message_body(unit: &Unit) -> Value {
        json!({
            "content": unit.text,
            "components": components(unit),
            // Replies quote what people wrote; they ping nobody.
            "allowed_mentions": {"parse": []},
        })
    }

    /// Answers a button press: a deferred update (type 6), which tells
    /// Discord the press was taken without changing the message (the hub
    /// edits it when the decision is recorded).
    async fn acknowledge(&self, data: &Value) {
        let (Some(id), Some(token)) = (data["id"].as_str(), data["token"].as_str()) else {
            return;
        };
        let path = format!("/interactions/{id}/{token}/callback");
        let route = format!("POST /interactions/{id}");
        if let Err(err) = self
            .rest
            .call(
                reqwest::Method::POST,
                &path,
                &route,
                Some(&json!({"type": 6})),
            )
            .await
        {
            tracing::warn!(error = %err, "cannot answer a Discord interaction");
        }
    }

    /// One Gateway event: READY names the bot; messages and presses go to
    /// the hub. `false`: not recorded (the Gateway replays it).
    async fn event(&self, hub: &Arc<Hub>, event: gateway::Event) -> bool {
        let (name, data) = match event {
            gateway::Event::Up => {
                hub.up();
                return true;
            }
            gateway::Event::Down(reason) => {
                hub.down(&reason);
                return true;
            }
            gateway::Event::Dispatch(name, data) => (name, data),
        };
        if name == "READY" {
            if let Some(id) = data["user"]["id"].as_str() {
                *self
                    .bot
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner) = id.to_owned();
            }
            return true;
        }
        let Some(inbound) = self.normalize(&name, &data) else {
            return true;
        };
        if matches!(inbound, Inbound::Button { .. }) {
            self.acknowledge(&data).await;
        }
        match hub.receive(inbound, None).await {
            super::Received::Failed(reason) => {
                tracing::warn!(%reason, "a Discord event was not recorded; it will be replayed");
                false
            }
            super::Received::Accepted
            | super::Received::Duplicate
            | super::Received::Echo
            | super::Received::Unauthorized => true,
        }
    }
}

/// The bot's user id: a token's first part is it, in base64.
fn account_of(token: &str) -> Option<String> {
    use base64::Engine as _;
    let first = token.split('.').next()?;
    let decoded = base64::engine::general_purpose::STANDARD_NO_PAD
        .decode(first.trim_end_matches('='))
        .ok()?;
    let id = String::from_utf8(decoded).ok()?;
    (!id.is_empty() && id.chars().all(|c| c.is_ascii_digit()) && token.split('.').count() == 3)
        .then_some(id)
}

/// The time a snowflake id carries, in Unix milliseconds.
fn snowflake_millis(id: &str) -> i64 {
    id.parse::<u64>()
        .map_or(0, |n| i64::try_from(n >> 22).unwrap_or(0) + DISCORD_EPOCH)
}

fn target_of(channel: &str, guild: Option<&str>) -> Target {
    Target {
        kind: if guild.is_some() {
            TargetKind::Group
        } else {
            TargetKind::Direct
        },
        id: channel.to_owned(),
        thread: None,
    }
}

/// A button press (`INTERACTION_CREATE` of type 3, a message component).
fn interaction(data: &Value) -> Option<Inbound> {
    if data["type"].as_u64() != Some(3) {
        return None;
    }
    let user = data["member"]["user"]["id"]
        .as_str()
        .or_else(|| data["user"]["id"].as_str())?;
    Some(Inbound::Button {
        id: data["id"].as_str()?.to_owned(),
        target: target_of(data["channel_id"].as_str()?, data["guild_id"].as_str()),
        sender: user.to_owned(),
        data: data["data"]["custom_id"].as_str()?.to_owned(),
    })
}

/// A unit's buttons as action rows of at most five buttons each (at most
/// five rows); labels cut to 80 characters and ids to 100, Discord's limits.
fn components(unit: &Unit) -> Value {
    let rows: Vec<Value> = unit
        .buttons
        .chunks(5)
        .take(5)
        .map(|row| {
            let buttons: Vec<Value> = row
                .iter()
                .map(|b| {
                    let lower = b.data.to_ascii_lowercase();
                    let style = if lower.contains("deny") || lower.contains("reject") {
                        4
                    } else if lower.contains("allow") || lower.contains("approve") {
                        1
                    } else {
                        2
                    };
                    json!({"type": 2, "style": style,
                        "label": b.label.chars().take(80).collect::<String>(),
                        "custom_id": b.data.chars().take(100).collect::<String>()})
                })
                .collect();
            json!({"type": 1, "components": buttons})
        })
        .collect();
    Value::Array(rows)
}

/// A nonce Discord accepts (at most 25 characters) from the outbox's
/// idempotency key: the same key, the same nonce.
pub fn nonce(idempotency_key: &str) -> String {
    let digest = sha2::Sha256::digest(idempotency_key.as_bytes());
    hex::encode(digest).chars().take(25).collect()
}

fn snowflake(id: &str, what: &str) -> Result<u64, DeliveryError> {
    id.parse::<u64>().map_err(|_| {
        DeliveryError::new(
            FailureKind::InvalidPayload,
            format!(
                "discord: not a {what} id: {}",
                id.chars().take(40).collect::<String>()
            ),
        )
    })
}

impl Adapter for Discord {
    fn channel(&self) -> &str {
        &self.name
    }

    fn account(&self) -> &str {
        &self.account
    }

    fn kind(&self) -> &'static str {
        "discord"
    }

    /// Discord checks a create's `nonce` "in the past few minutes": a create
    /// whose attempt began longer ago is not repeated after a restart, it is
    /// left `unknown_after_send`.
    fn send_key_lifetime(&self) -> Option<Duration> {
        Some(NONCE_LIFETIME)
    }

    fn fetch<'a>(
        &'a self,
        attachment: &'a Attachment,
        limit: u64,
    ) -> BoxFuture<'a, Result<Vec<u8>, FetchError>> {
        Box::pin(self.rest.download(&attachment.reference, limit))
    }

    /// A channel id (a guild's text channel, or a direct message's).
    fn target(&self, to: &str) -> Result<Target, String> {
        let target = super::default_target(to, TargetKind::Group)?;
        if target.id.parse::<u64>().is_err() {
            return Err("a Discord channel is its id (a number)".to_owned());
        }
        Ok(target)
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities {
            max_len: MAX_LEN,
            length_unit: LengthUnit::Chars,
            edit: true,
            delete: true,
            buttons: true,
            reactions: false,
            threads: false,
            // Uploaded with the create (`files[0]`, multipart).
            files: true,
            edit_interval: Duration::from_secs(1),
            // Discord renders the Markdown as written.
            markup: None,
            working_after: None,
            // A create carries a nonce with `enforce_nonce`: Discord answers
            // a repeat within minutes with the message already created. An
            // edit sets the whole message; a deleted message stays deleted
            // (a repeat is `Unknown Message`).
            idempotent: Idempotence {
                send: true,
                edit: true,
                delete: true,
            },
        }
    }

    fn send<'a>(
        &'a self,
        target: &'a Target,
        unit: &'a Unit,
        reply_to: Option<&'a str>,
        idempotency_key: &'a str,
    ) -> BoxFuture<'a, Result<String, DeliveryError>> {
        Box::pin(async move {
            let channel = snowflake(&target.id, "channel")?;
            let mut body = Self::message_body(unit);
            body["nonce"] = json!(nonce(idempotency_key));
            body["enforce_nonce"] = json!(true);
            if let Some(to) = reply_to.filter(|r| r.parse::<u64>().is_ok()) {
                body["message_reference"] = json!({"message_id": to, "fail_if_not_exists": false});
            }
            let path = format!("/channels/{channel}/messages");
            let route = format!("POST /channels/{channel}/messages");
            // A file goes in the same create (a multipart body), its
            // caption the content, the nonce kept.
            let sent = match &unit.file {
                None => {
                    self.rest
                        .call(reqwest::Method::POST, &path, &route, Some(&body))
                        .await?
                }
                Some(file) => {
                    self.rest
                        .call_with_file(reqwest::Method::POST, &path, &route, &body, file)
                        .await?
                }
            };
            sent["id"].as_str().map(str::to_owned).ok_or_else(|| {
                DeliveryError::new(
                    FailureKind::Unknown,
                    "discord POST /channels: the answer has no message id",
                )
            })
        })
    }

    fn edit<'a>(
        &'a self,
        target: &'a Target,
        platform_id: &'a str,
        unit: &'a Unit,
    ) -> BoxFuture<'a, Result<(), DeliveryError>> {
        Box::pin(async move {
            let channel = snowflake(&target.id, "channel")?;
            let message = snowflake(platform_id, "message")?;
            let path = format!("/channels/{channel}/messages/{message}");
            let route = format!("PATCH /channels/{channel}/messages");
            self.rest
                .call(
                    reqwest::Method::PATCH,
                    &path,
                    &route,
                    Some(&Self::message_body(unit)),
                )
                .await
                .map(|_| ())
        })
    }

    fn delete<'a>(
        &'a self,
        target: &'a Target,
        platform_id: &'a str,
    ) -> BoxFuture<'a, Result<(), DeliveryError>> {
        Box::pin(async move {
            let channel = snowflake(&target.id, "channel")?;
            let message = snowflake(platform_id, "message")?;
            let path = format!("/channels/{channel}/messages/{message}");
            let route = format!("DELETE /channels/{channel}/messages");
            self.rest
                .call(reqwest::Method::DELETE, &path, &route, None)
                .await
                .map(|_| ())
        })
    }

    fn receive(
        self: Arc<Self>,
        hub: Arc<Hub>,
        cancel: CancellationToken,
    ) -> BoxFuture<'static, ()> {
        Box::pin(async move {
            let settings = gateway::GatewaySettings {
                url: self.settings.gateway_url.clone(),
                token: self.settings.token.clone(),
                tls: self.settings.tls.clone(),
            };
            let this = &self;
            let hub = &hub;
            let handler = move |event: gateway::Event| -> BoxFuture<'_, bool> {
                Box::pin(async move { this.event(hub, event).await })
            };
            gateway::run(&settings, &handler, &cancel).await;
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `MTIz` is `123` in base64.
    pub(crate) const TOKEN: &str = "MTIz.GhIjKl.secret-part";

    fn discord(channels: &[&str]) -> Discord {
        Discord::new(
            "discord",
            DiscordSettings {
                token: TOKEN.into(),
                api_base: "http://127.0.0.1:9".into(),
                gateway_url: "ws://127.0.0.1:9".into(),
                guilds: vec!["7".into()],
                channels: channels.iter().map(|c| (*c).to_owned()).collect(),
                tls: Arc::new(crate::net::tls_config(None).unwrap()),
            },
        )
        .unwrap()
    }

    #[test]
    fn the_account_is_the_bots_id_from_the_token() {
        assert_eq!(discord(&[]).account(), "123");
        assert!(account_of("nonsense").is_none());
    }

    #[test]
    fn messages_normalize_with_mentions_guilds_and_channels() {
        let d = discord(&["55"]);
        let dm = json!({"id": "175928847299117063", "channel_id": "9", "content": "hi",
            "author": {"id": "42", "username": "ada"}});
        let Some(Inbound::Message(m)) = d.normalize("MESSAGE_CREATE", &dm) else {
            panic!("not a message")
        };
        assert_eq!(m.target.kind, TargetKind::Direct);
        assert_eq!(m.id, "175928847299117063");
        assert_eq!(m.at, 1_462_015_105_796);
        // A guild channel not listened to: only when mentioned.
        let quiet = json!({"id": "2", "channel_id": "10", "guild_id": "7", "content": "hi",
            "author": {"id": "42"}, "mentions": []});
        assert!(d.normalize("MESSAGE_CREATE", &quiet).is_none());
        let addressed = json!({"id": "3", "channel_id": "10", "guild_id": "7",
            "content": "<@123> hello", "author": {"id": "42"}, "mentions": [{"id": "123"}]});
        let Some(Inbound::Message(m)) = d.normalize("MESSAGE_CREATE", &addressed) else {
            panic!("not a message")
        };
        assert_eq!(m.body, "hello");
        assert_eq!(m.target.kind, TargetKind::Group);
        let listened = json!({"id": "4", "channel_id": "55", "guild_id": "7", "content": "all",
            "author": {"id": "42"}});
        assert!(d.normalize("MESSAGE_CREATE", &listened).is_some());
        let other_guild = json!({"id": "5", "channel_id": "55", "guild_id": "8", "content": "x",
            "author": {"id": "42"}});
        assert!(d.normalize("MESSAGE_CREATE", &other_guild).is_none());
        let own = json!({"id": "6", "channel_id": "9", "content": "me", "author": {"id": "123"}});
        assert!(d.normalize("MESSAGE_CREATE", &own).is_none());
        let press = json!({"id": "77", "type": 3, "token": "t", "channel_id": "9",
            "user": {"id": "42"}, "data": {"custom_id": "ap:x:allow_once", "component_type": 2}});
        let Some(Inbound::Button { id, data, .. }) = d.normalize("INTERACTION_CREATE", &press)
        else {
            panic!("not a press")
        };
        assert_eq!((id.as_str(), data.as_str()), ("77", "ap:x:allow_once"));
    }

    #[test]
    fn discord_declares_what_it_does() {
        let d = discord(&[]);
        let caps = d.capabilities();
        assert_eq!(caps.max_len, 2000);
        assert!(caps.files);
        assert_eq!(
            caps.idempotent,
            Idempotence {
                send: true,
                edit: true,
                delete: true
            }
        );
        let units = d.render(&"word ".repeat(1000));
        assert!(units.len() > 1);
        assert!(units.iter().all(|u| u.text.chars().count() <= MAX_LEN));
        assert_eq!(nonce("intent-1:0"), nonce("intent-1:0"));
        assert_eq!(nonce("intent-1:0").len(), 25);
        assert_ne!(nonce("intent-1:0"), nonce("intent-1:1"));
        let unit = Unit {
            text: "allow?".into(),
            markup: None,
            buttons: vec![crate::core::channel::Button {
                label: "Allow".into(),
                data: "ap:x:allow_once".into(),
            }],
            file: None,
        };
        let body = Discord::message_body(&unit);
        assert_eq!(body["components"][0]["type"], 1);
        assert_eq!(
            body["components"][0]["components"][0]["custom_id"],
            "ap:x:allow_once"
        );
        assert_eq!(
            Discord::message_body(&Unit::plain("x".into()))["components"],
            json!([])
        );
    }
}
