//! The chat's hooks (`docs/hooks.md`): `MessageReceived` reads an
//! authorized sender's message before anything else is done with it, and
//! may block it; `MessageSending` reads every outbound message before it
//! goes out, and may rewrite or withhold it.

use std::sync::Arc;

use super::Hub;
use crate::core::channel::{ChannelMessage, ConversationKey, SendIntent, Unit};
use crate::core::hooks::{HookEvent, HookInput, HookOutcome};
use crate::core::journal::JournalError;

/// The text hooks read of an intent: as it was written, else its units'.
fn intent_text(intent: &SendIntent) -> String {
    intent.text.clone().unwrap_or_else(|| {
        intent
            .units
            .iter()
            .map(|u| u.text.as_str())
            .collect::<Vec<_>>()
            .join("\n")
    })
}

impl Hub {
    /// A chat hook's input: the chat's session (empty before its first),
    /// then its channel, account and conversation.
    async fn chat_hook_input(&self, event: HookEvent, key: &ConversationKey) -> HookInput {
        let session = match self.store.conversation(key).await {
            Ok(Some(id)) => self.runtime.session(&id).await.ok(),
            _ => None,
        };
        HookInput::new(
            event,
            session.as_ref().map_or("", |s| s.id.as_str()),
            self.settings.workspace.clone(),
            session
                .as_ref()
                .map_or(self.runtime.default_mode(), |s| s.mode)
                .as_str(),
        )
        .about("channel", &key.channel)
        .with("account", key.account.clone())
        .with("conversation", key.target.id.clone())
    }

    /// Runs the `MessageReceived` hooks of an authorized sender's message:
    /// the reason, through the safety pass, when one blocked it.
    pub(super) async fn message_hooks(&self, message: &ChannelMessage) -> Option<String> {
        let hooks = self.runtime.gate().hooks.clone();
        if !hooks.listens(HookEvent::MessageReceived, Some(&message.channel)) {
            return None;
        }
        let key = ConversationKey::of(message);
        let sender = message
            .sender
            .as_ref()
            .map_or(String::new(), |s| s.id.clone());
        let input = self
            .chat_hook_input(HookEvent::MessageReceived, &key)
            .await
            .with("sender", sender)
            .with("message", message.body.clone());
        let outcome = hooks.fire(input).await;
        let safety = &self.runtime.gate().safety;
        for note in outcome.messages() {
            tracing::info!(channel = %message.channel, "{}", safety.redact(&note).0);
        }
        outcome
            .blocked()
            .or_else(|| outcome.stopped())
            .map(|reason| safety.redact(&reason).0)
    }

    /// Whether `MessageSending` hooks read this channel's outbound messages.
    pub(super) fn screens(&self) -> bool {
        self.runtime
            .gate()
            .hooks
            .listens(HookEvent::MessageSending, Some(self.adapter.channel()))
    }

    /// Runs the `MessageSending` hooks of a held intent and commits what
    /// they decided: the message goes out (rewritten, if one rewrote it), or
    /// it is withheld. The decision is on disk before any platform call, so a
    /// crash after it never asks the hooks again; a crash before it leaves
    /// the intent held, and the next start asks them again.
    pub(super) async fn screen(self: Arc<Self>, intent: SendIntent) {
        if !self.screening.lock().insert(intent.id.clone()) {
            return;
        }
        self.screen_once(&intent).await;
        self.screening.lock().remove(&intent.id);
    }

    async fn screen_once(self: &Arc<Self>, intent: &SendIntent) {
        let key = ConversationKey {
            channel: intent.channel.clone(),
            account: intent.account.clone(),
            target: intent.target.clone(),
        };
        let input = self
            .chat_hook_input(HookEvent::MessageSending, &key)
            .await
            .with("message", intent_text(intent));
        let hooks = self.runtime.gate().hooks.clone();
        let outcome = tokio::select! {
            // Stopping: the intent stays held for the next start.
            _ = self.cancel.cancelled() => return,
            outcome = hooks.fire(input) => outcome,
        };
        let safety = &self.runtime.gate().safety;
        for note in outcome.messages() {
            tracing::info!(channel = %intent.channel, intent = %intent.id, "{}", safety.redact(&note).0);
        }
        match self.settle_held(intent, &outcome).await {
            Ok(()) => {}
            // Settled elsewhere (an approval answered before its prompt went out).
            Err(JournalError::Conflict(reason)) => {
                tracing::debug!(intent = %intent.id, %reason, "held message settled elsewhere");
            }
            Err(err) => {
                tracing::error!(intent = %intent.id, error = %err, "cannot record what the MessageSending hooks decided; the message stays held");
            }
        }
    }

    /// Commits what the hooks decided of a held intent: withheld, or let
    /// go (with the units of the text one rewrote it to).
    async fn settle_held(
        &self,
        intent: &SendIntent,
        outcome: &HookOutcome,
    ) -> Result<(), JournalError> {
        let safety = &self.runtime.gate().safety;
        if let Some(reason) = outcome.blocked().or_else(|| outcome.stopped()) {
            let reason = safety.redact(&reason).0;
            tracing::warn!(
                channel = %intent.channel,
                intent = %intent.id,
                %reason,
                "a MessageSending hook withheld a message; it is not sent"
            );
            return self.outbox.withhold(&intent.id, &reason).await;
        }
        let units: Option<Vec<Unit>> = outcome.updated_message().map(|rewritten| {
            // What a hook gives the person passes the safety pass.
            let rewritten = safety.redact(rewritten).0;
            let buttons = intent.units.last().map(|u| u.buttons.clone());
            tracing::info!(channel = %intent.channel, intent = %intent.id, "a MessageSending hook rewrote a message");
            self.units(&rewritten, buttons)
        });
        // A message sent first is rendered by the adapter delivering it.
        let units = units.or_else(|| {
            intent
                .units
                .is_empty()
                .then(|| self.units(&safety.redact(&intent_text(intent)).0, None))
        });
        self.outbox.release(&intent.id, units).await
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::direct_chat;
    use super::*;
    use crate::core::channel::{IntentKind, IntentStatus};

    #[test]
    fn hooks_read_the_text_as_written_else_the_units_joined() {
        let unit = |text: &str| Unit {
            text: text.into(),
            markup: Some(format!("<b>{text}</b>")),
            buttons: Vec::new(),
            file: None,
        };
        let mut intent = SendIntent {
            status: IntentStatus::Held,
            ..SendIntent::new(
                "reply:run_1".into(),
                ("telegram", "bot"),
                direct_chat(),
                IntentKind::Reply,
                vec![unit("one"), unit("two")],
                0,
            )
        };
        assert_eq!(intent_text(&intent), "one\ntwo");
        intent.text = Some("one\n\ntwo".into());
        assert_eq!(intent_text(&intent), "one\n\ntwo");
    }
}
