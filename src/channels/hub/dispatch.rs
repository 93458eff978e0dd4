//! From messages to a run and back: a sender's messages coalesced into
//! one prompt, the chat's session found or created, the run started (or
//! the working one steered), and the run followed to its reply: its text
//! drafted live, its approvals and questions asked in the chat.

use std::sync::Arc;

use super::drafts::LiveDraft;
use super::reply::{Answer, Said};
use super::{Hub, HubError};
use crate::core::channel::{ChannelMessage, ChannelWrite, ConversationKey, InboxState};
use crate::core::event::{Event, Exchange};
use crate::core::ids::{RunId, SessionId};
use crate::core::journal::Write;
use crate::core::run::RunOutcome;
use crate::core::runtime::{NewSession, SessionCommand, Subscription};
use crate::core::session::{Origin, now_millis};

/// What a dispatched run starts with.
#[derive(Debug, Clone, Copy)]
pub(super) enum Start {
    /// The messages, as one prompt.
    Prompt,
    /// A session command given in the chat.
    Command(SessionCommand),
}

/// A message invoking a skill or custom command in a group
/// (`/review@pincer_bot the diff`) without the bot's name, so the runtime
/// finds the name it expands; any other text as it is.
pub(super) fn without_bot_name(body: &str) -> String {
    let trimmed = body.trim_start();
    let Some(rest) = trimmed.strip_prefix('/') else {
        return body.to_owned();
    };
    let word_end = rest.find(char::is_whitespace).unwrap_or(rest.len());
    match rest[..word_end].split_once('@') {
        Some((name, _)) if !name.is_empty() && !name.contains('/') => {
            format!("/{name}{}", &rest[word_end..])
        }
        _ => body.to_owned(),
    }
}

/// A run the hub follows: its answer, and the session it runs in.
struct Followed {
    answer: Answer,
    session: SessionId,
}

/// What a followed run has written so far, and its live draft.
struct Written {
    said: Said,
    draft: LiveDraft,
    /// Whether the reply is shown as it is written.
    drafting: bool,
}

impl Hub {
    /// Buffers a prompt; a sender's first message of a window schedules the
    /// dispatch of everything that sender writes within it.
    pub(super) fn coalesce(self: &Arc<Self>, message: ChannelMessage) {
        let key = ConversationKey::of(&message);
        let sender = message
            .sender
            .as_ref()
            .map(|s| s.id.clone())
            .unwrap_or_default();
        let first = {
            let mut conversations = self.conversations.lock();
            let buffer = conversations
                .entry(key.clone())
                .or_default()
                .buffers
                .entry(sender.clone())
                .or_default();
            buffer.push(message);
            buffer.len() == 1
        };
        if first {
            let hub = self.clone();
            let window = self.settings.coalesce;
            self.tasks.spawn(async move {
                tokio::select! {
                    _ = hub.cancel.cancelled() => return,
                    _ = tokio::time::sleep(window) => {}
                }
                hub.flush(&key, &sender).await;
            });
        }
    }

    /// Dispatches what a sender wrote within their coalescing window.
    async fn flush(self: &Arc<Self>, key: &ConversationKey, sender: &str) {
        let messages = {
            let mut conversations = self.conversations.lock();
            conversations
                .get_mut(key)
                .and_then(|c| c.buffers.remove(sender))
                .unwrap_or_default()
        };
        if messages.is_empty() {
            return;
        }
        if let Err(err) = self.dispatch(key, &messages, Start::Prompt).await {
            tracing::error!(channel = %key.channel, error = %err, "cannot start a run for a chat message");
            if let Some(last) = messages.last() {
                self.notice(last, &format!("Pincer could not start on this: {err}"))
                    .await;
            }
            let ids: Vec<String> = messages.iter().map(|m| m.id.clone()).collect();
            self.set_inbox(&ids, InboxState::Handled, None).await;
        }
    }

    /// Starts a run of the conversation's session: the messages as its prompt,
    /// or the command one of them gave.
    pub(super) async fn dispatch(
        self: &Arc<Self>,
        key: &ConversationKey,
        messages: &[ChannelMessage],
        start: Start,
    ) -> Result<(), HubError> {
        let session = self.session_of(key, false).await?;
        let content = match start {
            Start::Prompt => self.prompt_content(&session, messages).await,
            Start::Command(_) => Vec::new(),
        };
        let ids: Vec<String> = messages.iter().map(|m| m.id.clone()).collect();
        // A message while the chat's prompt works steers that run: its
        // reply answers both.
        if matches!(start, Start::Prompt)
            && let Some(working) = self.runtime.steer(&session, content.clone())?
        {
            self.set_inbox(&ids, InboxState::Dispatched, Some(working))
                .await;
            return Ok(());
        }
        let run_id = RunId::generate();
        let subscription = self.runtime.subscribe(&session)?;
        match start {
            Start::Prompt => {
                self.runtime
                    .prompt_as(&session, run_id.clone(), content)
                    .await?
            }
            Start::Command(command) => {
                self.runtime
                    .command_as(&session, run_id.clone(), command)
                    .await?
            }
        };
        self.set_inbox(&ids, InboxState::Dispatched, Some(run_id.clone()))
            .await;
        let run = Followed {
            answer: Answer {
                key: key.clone(),
                run_id,
                reply_to: messages.last().map(|m| m.id.clone()),
                ids,
            },
            session,
        };
        self.tasks.spawn(self.clone().watch(run, subscription));
        Ok(())
    }

    /// The session of a conversation: mapped, or created and mapped now.
    pub(super) async fn session_of(
        &self,
        key: &ConversationKey,
        fresh: bool,
    ) -> Result<SessionId, HubError> {
        let _creating = self.sessions.lock().await;
        if !fresh && let Some(id) = self.store.conversation(key).await? {
            match self.runtime.open_session(&id).await {
                Ok(session) => return Ok(session.id),
                Err(err) => {
                    tracing::warn!(session = %id, error = %err, "the chat's session cannot be opened; starting a new one");
                }
            }
        }
        // The session and the chat's mapping to it in one transaction: a crash
        // cannot leave a session no chat leads to.
        let session = self
            .runtime
            .create_session_with(
                NewSession {
                    workspace: self.settings.workspace.clone(),
                    origin: Origin::Channel,
                    mcp_servers: serde_json::json!([]),
                    conversation: Some(key.as_scope_key()),
                    prompt: Default::default(),
                },
                |id| {
                    vec![Write::Channel(ChannelWrite::MapConversation {
                        key: key.clone(),
                        session_id: id.clone(),
                        at: now_millis(),
                    })]
                },
            )
            .await?;
        Ok(session.id)
    }

    /// Follows a run: live draft, approval prompts, and the final reply.
    async fn watch(self: Arc<Self>, run: Followed, mut events: Subscription) {
        let caps = self.adapter.capabilities();
        // With `MessageSending` hooks nothing is shown before they read it:
        // no live draft, the reply comes whole once they let it go.
        let mut written = Written {
            said: Said::default(),
            draft: LiveDraft::NotYet,
            drafting: caps.edit && self.settings.live_drafts && !self.screens(),
        };
        // Where a platform shows no draft, a run still working after a while
        // says so once (IRC: a short line, then the reply).
        let working_after = caps.working_after.filter(|_| !written.drafting);
        let working = tokio::time::sleep(working_after.unwrap_or(std::time::Duration::ZERO));
        tokio::pin!(working);
        let mut said_working = working_after.is_none();
        let outcome = loop {
            let next = tokio::select! {
                // Stopping: the run is recorded as it ends, and the next start
                // answers it from the inbox.
                _ = self.cancel.cancelled() => return,
                () = &mut working, if !said_working => {
                    said_working = true;
                    self.working(&run.answer).await;
                    continue;
                }
                next = events.next() => next,
            };
            let Some(record) = next else {
                break RunOutcome::Failed("the session closed".to_owned());
            };
            if record.run_id != run.answer.run_id {
                continue;
            }
            if let Some(outcome) = self.follow(&run, &record.event, &mut written).await {
                break outcome;
            }
        };
        let draft = written.draft.reference();
        self.finish(&run.answer, &outcome, &written.said, draft)
            .await;
    }

    /// Takes in one event of a followed run: its outcome when it ended it.
    async fn follow(
        self: &Arc<Self>,
        run: &Followed,
        event: &Event,
        written: &mut Written,
    ) -> Option<RunOutcome> {
        let key = &run.answer.key;
        if let Some(exchange) = event.exchange() {
            match exchange {
                Exchange::ApprovalAsked {
                    approval_id,
                    title,
                    reason,
                    ..
                } => {
                    self.ask(key, &run.session, approval_id, title, reason)
                        .await
                }
                Exchange::ApprovalDecided {
                    approval_id,
                    decision,
                    ..
                } => self.approval_decided(key, approval_id, decision).await,
                Exchange::QuestionAsked { .. } => {
                    if let Some((question_id, question)) = event.question() {
                        self.ask_question(key, &run.session, question_id, question)
                            .await;
                    }
                }
                Exchange::QuestionAnswered { question_id, .. } => {
                    self.question_answered(key, question_id);
                }
            }
            return None;
        }
        if written.said.take(event) {
            if written.drafting {
                let run_id = &run.answer.run_id;
                self.live(key, run_id, &written.said.text, &mut written.draft)
                    .await;
            }
            return None;
        }
        RunOutcome::from_event(event)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn a_skill_named_in_a_group_loses_the_bot_name_and_other_text_stays() {
        assert_eq!(
            without_bot_name("/review@pincer_bot the diff"),
            "/review the diff"
        );
        assert_eq!(without_bot_name("/review@bot"), "/review");
        assert_eq!(without_bot_name("/review now"), "/review now");
        assert_eq!(without_bot_name("/etc/x@y z"), "/etc/x@y z");
        assert_eq!(without_bot_name("mail me@x"), "mail me@x");
        assert_eq!(without_bot_name("/@x"), "/@x");
    }
}
