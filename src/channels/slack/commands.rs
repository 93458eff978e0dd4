//! Slash commands: Slack's client keeps a message starting with `/` for
//! its slash commands, so the chat commands come as those. The app
//! declares `/pincer` (its text the chat command: `/pincer model gpt-4o` is
//! `/model gpt-4o`, `/pincer` alone `/help`), or a command under a chat
//! command's own name (`/usage`), taken as is. Slack sends one as a
//! `slash_commands` envelope (Socket Mode) or a form-encoded POST to the
//! command's Request URL (the Events API endpoint, signed as events are),
//! with the fields `command`, `text`, `user_id`, `channel_id` and
//! `trigger_id` among others. It becomes a message of `user_id` in
//! `channel_id`: a direct message's conversation, or a channel's top
//! level (Slack offers no slash command in a thread). Its id is the
//! `trigger_id`, so a command sent again is answered once. The answer goes
//! out as any reply does (`chat.postMessage`), not to `response_url`.

use serde_json::{Map, Value};

use super::Slack;
use crate::channels::Inbound;
use crate::core::channel::{Actor, ChannelMessage, MessageOrigin, Target, TargetKind};

/// The app's own command: its text is the chat command.
pub const APP_COMMAND: &str = "/pincer";

/// The chat command a slash command gives: `/pincer TEXT` is `/TEXT`
/// (`/pincer` alone `/help`), any other command itself with its text.
/// `None` for what is not a command.
pub fn chat_command(command: &str, text: &str) -> Option<String> {
    let command = command.trim();
    let text = text.trim();
    if !command.starts_with('/') || command.len() < 2 {
        return None;
    }
    if command == APP_COMMAND {
        if text.is_empty() {
            return Some("/help".to_owned());
        }
        // `/pincer /usage` as well as `/pincer usage`.
        return Some(format!("/{}", text.trim_start_matches('/')));
    }
    if text.is_empty() {
        Some(command.to_owned())
    } else {
        Some(format!("{command} {text}"))
    }
}

/// A form body's fields as a JSON object of strings, as a Socket Mode
/// envelope carries them.
pub fn form_fields(body: &[u8]) -> Value {
    let fields: Map<String, Value> = form_urlencoded::parse(body)
        .map(|(name, value)| (name.into_owned(), Value::String(value.into_owned())))
        .collect();
    Value::Object(fields)
}

impl Slack {
    /// A slash command's payload as a message; `None` when it lacks a
    /// field Pincer needs, or comes from a channel not in `channels`.
    pub fn normalize_command(&self, payload: &Value) -> Option<Inbound> {
        let field = |name: &str| payload[name].as_str().filter(|v| !v.is_empty());
        let body = chat_command(field("command")?, field("text").unwrap_or_default())?;
        let user = field("user_id")?;
        let channel = field("channel_id")?;
        let trigger = field("trigger_id")?;
        let target = if channel.starts_with('D') {
            Target {
                kind: TargetKind::Direct,
                id: channel.to_owned(),
                thread: None,
            }
        } else {
            let listed = self.settings.channels.is_empty()
                || self.settings.channels.iter().any(|c| c == channel);
            if !listed {
                return None;
            }
            Target {
                kind: TargetKind::Group,
                id: channel.to_owned(),
                thread: None,
            }
        };
        Some(Inbound::Message(ChannelMessage {
            id: trigger.to_owned(),
            channel: self.name.clone(),
            account: self.account.clone(),
            target,
            sender: Some(Actor {
                id: user.to_owned(),
                name: field("user_name").map(str::to_owned),
                is_bot: false,
            }),
            body,
            attachments: Vec::new(),
            relation: None,
            origin: MessageOrigin::User,
            at: crate::core::session::now_millis(),
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_app_command_and_a_chat_commands_own_name_map_to_the_chat_command() {
        for (command, text, expected) in [
            ("/pincer", "model gpt-4o", Some("/model gpt-4o")),
            ("/pincer", "  usage ", Some("/usage")),
            ("/pincer", "/resume 2", Some("/resume 2")),
            ("/pincer", "", Some("/help")),
            ("/pincer", "   ", Some("/help")),
            ("/usage", "", Some("/usage")),
            ("/model", "gpt-4o", Some("/model gpt-4o")),
            ("/resume", " 3 ", Some("/resume 3")),
            ("", "usage", None),
            ("/", "usage", None),
            ("pincer", "usage", None),
        ] {
            assert_eq!(
                chat_command(command, text).as_deref(),
                expected,
                "{command:?} {text:?}"
            );
        }
    }

    #[test]
    fn a_form_body_reads_as_the_envelope_payload() {
        let body =
            b"command=%2Fpincer&text=model+gpt-4o&user_id=U1&channel_id=D1&trigger_id=1.2.abc";
        assert_eq!(
            form_fields(body),
            json!({"command": "/pincer", "text": "model gpt-4o", "user_id": "U1",
                "channel_id": "D1", "trigger_id": "1.2.abc"})
        );
    }

    #[test]
    fn a_slash_command_is_a_message_in_its_dm_or_at_the_channels_top_level() {
        let s = super::super::tests::slack();
        let payload = |channel: &str| {
            json!({"token": "t", "team_id": "T1", "team_domain": "fake", "channel_id": channel,
                "channel_name": "directmessage", "user_id": "U1", "user_name": "alice",
                "command": "/pincer", "text": "usage", "api_app_id": "A1",
                "is_enterprise_install": "false", "response_url": "https://hooks.slack.invalid/commands/1",
                "trigger_id": "13345224609.738474920.8088930838d88f008e0"})
        };
        let Some(Inbound::Message(m)) = s.normalize_command(&payload("D1")) else {
            panic!("not a message")
        };
        assert_eq!(m.id, "13345224609.738474920.8088930838d88f008e0");
        assert_eq!(m.body, "/usage");
        assert_eq!(
            m.target,
            Target {
                kind: TargetKind::Direct,
                id: "D1".into(),
                thread: None
            }
        );
        let sender = m.sender.unwrap();
        assert_eq!((sender.id.as_str(), sender.is_bot), ("U1", false));
        assert_eq!(m.origin, MessageOrigin::User);
        // In a listed channel: its top level, no thread.
        let Some(Inbound::Message(m)) = s.normalize_command(&payload("C1")) else {
            panic!("not a message")
        };
        assert_eq!(
            m.target,
            Target {
                kind: TargetKind::Group,
                id: "C1".into(),
                thread: None
            }
        );
        // Not a listed channel; no trigger id; no user.
        assert!(s.normalize_command(&payload("C9")).is_none());
        let mut partial = payload("D1");
        partial["trigger_id"] = json!("");
        assert!(s.normalize_command(&partial).is_none());
        let mut partial = payload("D1");
        partial.as_object_mut().unwrap().remove("user_id");
        assert!(s.normalize_command(&partial).is_none());
    }
}
