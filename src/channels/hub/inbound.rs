//! Receiving: an inbound event recorded once (keyed by the platform's id,
//! in the same transaction as the platform's cursor, so a redelivery is
//! recognised and an event not recorded is not acknowledged), Pincer's own
//! tagged echoes dropped, then an authorized sender's message routed: a
//! command, an answer to an approval or a question, or a prompt.

use std::sync::Arc;

use super::super::{Inbound, Received};
use super::Hub;
use super::commands::session_command;
use crate::core::approval::ApprovalDecision;
use crate::core::channel::{
    Actor, ChannelMessage, ChannelWrite, InboxState, MessageOrigin, Target, is_own_echo,
};
use crate::core::ids::RunId;
use crate::core::journal::{JournalError, Write};
use crate::core::runtime::SessionCommand;
use crate::core::session::now_millis;

/// What an authorized sender's message is, by its text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// A session command (`/compact`, `/undo`): a run of its own.
    Session(SessionCommand),
    /// Any other `/command`: the hub answers it.
    Command,
    /// Anything else: the answer to a waiting approval (when it is `y`,
    /// `a` or `n`: `decision`) or question, else a prompt.
    Text { decision: Option<ApprovalDecision> },
}

fn kind(body: &str) -> Kind {
    let body = body.trim();
    if let Some(command) = session_command(body) {
        Kind::Session(command)
    } else if body.starts_with('/') {
        Kind::Command
    } else {
        Kind::Text {
            decision: text_decision(body),
        }
    }
}

/// `y`/`yes` allow once, `a`/`always` allow always, `n`/`no` reject.
fn text_decision(body: &str) -> Option<ApprovalDecision> {
    match body.to_ascii_lowercase().as_str() {
        "y" | "yes" => Some(ApprovalDecision::AllowOnce),
        "a" | "always" => Some(ApprovalDecision::AllowAlways),
        "n" | "no" => Some(ApprovalDecision::RejectOnce),
        _ => None,
    }
}

/// The dedupe decision on recording an inbound event: taken in, seen
/// before (its id is recorded already), or not recorded (to be redelivered).
fn recorded(result: Result<(), JournalError>) -> Result<(), Received> {
    match result {
        Ok(()) => Ok(()),
        Err(JournalError::Conflict(_)) => Err(Received::Duplicate),
        Err(err) => Err(Received::Failed(err.to_string())),
    }
}

impl Hub {
    /// Takes one inbound event. `cursor` (name, value) is the platform's
    /// acknowledgement watermark, stored in the same transaction as the message.
    pub async fn receive(
        self: &Arc<Self>,
        inbound: Inbound,
        cursor: Option<(String, String)>,
    ) -> Received {
        if let Some(status) = self.health.event() {
            self.write_status(&status);
        }
        match inbound {
            Inbound::Message(message) => self.receive_message(message, cursor).await,
            Inbound::Button {
                id,
                target,
                sender,
                data,
            } => {
                let message = self.press(&id, target, sender, data);
                self.receive_press(message, cursor).await
            }
        }
    }

    /// A button press as a message of its own: deduplicated by the press's
    /// id, its data the body.
    fn press(&self, id: &str, target: Target, sender: String, data: String) -> ChannelMessage {
        ChannelMessage {
            id: format!("button:{id}"),
            channel: self.adapter.channel().to_owned(),
            account: self.adapter.account().to_owned(),
            target,
            sender: Some(Actor {
                id: sender,
                name: None,
                is_bot: false,
            }),
            body: data,
            attachments: Vec::new(),
            relation: None,
            origin: MessageOrigin::User,
            at: now_millis(),
        }
    }

    async fn receive_press(
        self: &Arc<Self>,
        message: ChannelMessage,
        cursor: Option<(String, String)>,
    ) -> Received {
        if let Err(outcome) = self.record(&message, cursor).await {
            return outcome;
        }
        if !self.authorized(&message).await {
            self.handled(&message).await;
            return Received::Unauthorized;
        }
        self.button(&message).await;
        self.handled(&message).await;
        Received::Accepted
    }

    async fn receive_message(
        self: &Arc<Self>,
        message: ChannelMessage,
        cursor: Option<(String, String)>,
    ) -> Received {
        if is_own_echo(&message) {
            if let Some((name, value)) = cursor {
                self.store.submit(Write::Channel(ChannelWrite::PutCursor {
                    channel: message.channel.clone(),
                    account: message.account.clone(),
                    name,
                    value,
                }));
            }
            return Received::Echo;
        }
        if let Err(outcome) = self.record(&message, cursor).await {
            return outcome;
        }
        if !self.authorized(&message).await {
            return self.unauthorized(&message).await;
        }
        if let Some(reason) = self.message_hooks(&message).await {
            self.notice(&message, &format!("A hook blocked this message: {reason}"))
                .await;
            self.handled(&message).await;
            return Received::Accepted;
        }
        self.route(message).await;
        Received::Accepted
    }

    /// Records an inbound event with the cursor: `Err` with the answer for
    /// the adapter when it was seen before or could not be recorded.
    async fn record(
        &self,
        message: &ChannelMessage,
        cursor: Option<(String, String)>,
    ) -> Result<(), Received> {
        let write = ChannelWrite::RecordInbound {
            message: message.clone(),
            cursor,
            at: now_millis(),
        };
        let outcome = recorded(self.store.commit(Write::Channel(write)).await);
        if let Err(Received::Failed(err)) = &outcome {
            tracing::error!(channel = self.adapter.channel(), error = %err, "cannot record an inbound message");
        }
        outcome
    }

    /// An authorized sender's message, recorded: a session command starts
    /// its run, another command is answered, `y`/`a`/`n` answers the newest
    /// approval waiting here and any other text the newest question; else it
    /// is a prompt, coalesced with what its sender writes next.
    async fn route(self: &Arc<Self>, message: ChannelMessage) {
        match kind(&message.body) {
            Kind::Session(command) => self.session_command(&message, command).await,
            // A skill or custom command is a prompt the runtime expands.
            Kind::Command if self.invokes(&message.body).await => self.coalesce(message),
            Kind::Command => {
                self.command(&message).await;
                self.handled(&message).await;
            }
            Kind::Text { decision } => {
                let answered = decision.is_some_and(|d| self.answer_in_chat(&message, d))
                    || self.reply_in_chat(&message);
                if answered {
                    self.handled(&message).await;
                } else {
                    self.coalesce(message);
                }
            }
        }
    }

    /// Marks an inbound message handled: nothing more comes of it.
    pub(super) async fn handled(&self, message: &ChannelMessage) {
        self.set_inbox(std::slice::from_ref(&message.id), InboxState::Handled, None)
            .await;
    }

    pub(super) async fn set_inbox(&self, ids: &[String], state: InboxState, run_id: Option<RunId>) {
        let write = ChannelWrite::SetInboxState {
            channel: self.adapter.channel().to_owned(),
            account: self.adapter.account().to_owned(),
            ids: ids.to_vec(),
            state,
            run_id,
            at: now_millis(),
        };
        if let Err(err) = self.store.commit(Write::Channel(write)).await {
            tracing::error!(error = %err, "cannot update the inbox");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_message_is_a_session_command_a_command_or_text() {
        let cases = [
            ("/undo", Kind::Session(SessionCommand::Undo)),
            (
                "  /compact@pincer_bot now",
                Kind::Session(SessionCommand::Compact),
            ),
            ("/undone", Kind::Command),
            ("/status", Kind::Command),
            ("/", Kind::Command),
            (
                " Y ",
                Kind::Text {
                    decision: Some(ApprovalDecision::AllowOnce),
                },
            ),
            (
                "always",
                Kind::Text {
                    decision: Some(ApprovalDecision::AllowAlways),
                },
            ),
            (
                "No",
                Kind::Text {
                    decision: Some(ApprovalDecision::RejectOnce),
                },
            ),
            ("yes please", Kind::Text { decision: None }),
            ("undo", Kind::Text { decision: None }),
            ("", Kind::Text { decision: None }),
        ];
        for (body, expected) in cases {
            assert_eq!(kind(body), expected, "{body:?}");
        }
    }

    #[test]
    fn approval_words() {
        assert_eq!(text_decision("Y"), Some(ApprovalDecision::AllowOnce));
        assert_eq!(text_decision("always"), Some(ApprovalDecision::AllowAlways));
        assert_eq!(text_decision("no"), Some(ApprovalDecision::RejectOnce));
        assert_eq!(text_decision("yes please"), None);
    }

    #[test]
    fn a_redelivery_is_a_duplicate_and_a_failed_record_asks_for_redelivery() {
        assert_eq!(recorded(Ok(())), Ok(()));
        assert_eq!(
            recorded(Err(JournalError::Conflict("seen".into()))),
            Err(Received::Duplicate)
        );
        assert_eq!(
            recorded(Err(JournalError::Stopped)),
            Err(Received::Failed(
                "the store's writer thread has stopped".into()
            ))
        );
    }
}
