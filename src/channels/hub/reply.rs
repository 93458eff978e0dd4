//! Outbound messages: a run's reply, and the notices, prompts and questions
//! the hub sends, each recorded as a send intent (its id derived from what
//! it is for, so deciding it twice records it once) and delivered by the
//! outbox. With `MessageSending` hooks for the channel the intent is held
//! until they decide (`hooks`).

use std::borrow::Cow;
use std::sync::Arc;

use super::Hub;
use super::drafts::{DRAFT_LOST, DraftRef};
use crate::core::channel::{
    Button, ChannelMessage, ChannelWrite, ConversationKey, InboxState, IntentKind, IntentStatus,
    OutFile, SendIntent, Target, Unit,
};
use crate::core::event::Event;
use crate::core::ids::RunId;
use crate::core::journal::{JournalError, Write};
use crate::core::run::RunOutcome;
use crate::core::session::now_millis;

/// What a run's reply answers: the chat, the run, the message it replies
/// to (the last of its prompt's) and the inbox entries it settles.
pub(super) struct Answer {
    pub(super) key: ConversationKey,
    pub(super) run_id: RunId,
    pub(super) reply_to: Option<String>,
    pub(super) ids: Vec<String>,
}

impl Answer {
    /// The answer of `run_id` to `messages` (in order, of one chat); none
    /// without a message.
    pub(super) fn of(run_id: RunId, messages: &[ChannelMessage]) -> Option<Self> {
        let first = messages.first()?;
        Some(Self {
            key: ConversationKey::of(first),
            run_id,
            reply_to: messages.last().map(|m| m.id.clone()),
            ids: messages.iter().map(|m| m.id.clone()).collect(),
        })
    }
}

/// What an event adds to a run's reply in the chat: the model's text, and
/// notices for the person (an MCP server that failed to start), marked as
/// Pincer's own as the editor shows them.
fn reply_part(event: &Event) -> Option<Cow<'_, str>> {
    if let Event::TextDelta { text } = event {
        Some(Cow::Borrowed(text.as_str()))
    } else if let Event::Notice { message } = event {
        Some(Cow::Owned(format!("[pincer] {message}\n\n")))
    } else {
        None
    }
}

/// A reply longer than this many messages is sent as its first message
/// and the whole as a file, where the platform takes files.
pub(super) const LONG_REPLY_UNITS: usize = 3;

/// The largest file a reply sends: within every platform's limit (Discord
/// takes 10 MiB a message, with the form around it). A larger diff is named
/// in its caption instead; a larger reply comes as its messages.
const MAX_FILE_BYTES: usize = 8 * 1024 * 1024;

/// What a run has for its reply so far: the text it wrote (with notices),
/// and the changes its tool calls made to files.
#[derive(Debug, Default)]
pub(super) struct Said {
    pub(super) text: String,
    /// (path, unified diff) of each change, in order.
    pub(super) changes: Vec<(String, String)>,
}

impl Said {
    /// Takes in one event; whether it added to the text.
    pub(super) fn take(&mut self, event: &Event) -> bool {
        if let Some(part) = reply_part(event) {
            self.text.push_str(&part);
            return true;
        }
        if let Event::ToolResult {
            is_error: false,
            diffs,
            ..
        } = event
        {
            for diff in diffs {
                // The path as the diff shows it (relative to the workspace).
                let shown = diff
                    .unified
                    .lines()
                    .find_map(|line| line.strip_prefix("+++ b/"))
                    .map_or_else(|| diff.path.display().to_string(), str::to_owned);
                self.changes.push((shown, diff.unified.clone()));
            }
        }
        false
    }

    /// From a run's whole tape.
    pub(super) fn of<'a>(events: impl IntoIterator<Item = &'a Event>) -> Self {
        let mut said = Self::default();
        for event in events {
            said.take(event);
        }
        said
    }
}

/// The file of a run's changes, and its caption: `Changes to 2 files:
/// src/lib.rs, notes.md`.
fn changes_file(changes: &[(String, String)]) -> Option<Unit> {
    if changes.is_empty() {
        return None;
    }
    let mut paths: Vec<&str> = Vec::new();
    for (path, _) in changes {
        if !paths.contains(&path.as_str()) {
            paths.push(path);
        }
    }
    let shown: Vec<&str> = paths.iter().take(5).copied().collect();
    let mut caption = format!(
        "Changes to {} file{}: {}",
        paths.len(),
        if paths.len() == 1 { "" } else { "s" },
        shown.join(", ")
    );
    if paths.len() > shown.len() {
        caption.push_str(&format!(" and {} more", paths.len() - shown.len()));
    }
    let mut text = String::new();
    for (_, unified) in changes {
        text.push_str(unified);
        if !unified.ends_with('\n') {
            text.push('\n');
        }
    }
    if text.len() > MAX_FILE_BYTES {
        return Some(Unit::plain(format!(
            "{caption} (the diff, {}, is too large to attach)",
            crate::core::session::human_bytes(text.len())
        )));
    }
    Some(Unit {
        text: caption,
        file: Some(OutFile {
            name: "changes.diff".to_owned(),
            mime_type: "text/x-diff".to_owned(),
            text,
        }),
        ..Unit::default()
    })
}

/// A reply's messages where the platform takes files: a reply longer than
/// [`LONG_REPLY_UNITS`] messages as its first and the whole as `reply.md`;
/// the run's changes as `changes.diff` after it.
fn with_files(mut units: Vec<Unit>, body: &str, changes: &[(String, String)]) -> Vec<Unit> {
    if units.len() > LONG_REPLY_UNITS && body.len() <= MAX_FILE_BYTES {
        units.truncate(1);
        units.push(Unit {
            text: format!(
                "The whole reply ({} characters) is attached.",
                body.chars().count()
            ),
            file: Some(OutFile {
                name: "reply.md".to_owned(),
                mime_type: "text/markdown".to_owned(),
                text: body.to_owned(),
            }),
            ..Unit::default()
        });
    }
    units.extend(changes_file(changes));
    units
}

/// A run's reply: what it wrote, and how it ended when it did not complete.
fn reply_body(outcome: &RunOutcome, text: &str) -> String {
    let empty = text.trim().is_empty();
    match outcome {
        RunOutcome::Completed(_) if empty => "Done.".to_owned(),
        RunOutcome::Completed(_) => text.to_owned(),
        RunOutcome::Cancelled if empty => "Stopped.".to_owned(),
        RunOutcome::Cancelled => format!("{text}\n\n(stopped)"),
        RunOutcome::Failed(error) if empty => format!("The run failed: {error}"),
        RunOutcome::Failed(error) => format!("{text}\n\n(the run failed: {error})"),
    }
}

/// What a reply sends, given its live draft: its text (which says first
/// that a stale draft may show when one may be in the chat unnamed), the
/// message it finalizes in place, and the message it deletes first.
fn with_draft(body: String, draft: DraftRef) -> (String, Option<String>, Option<String>) {
    match draft {
        DraftRef::None => (body, None, None),
        DraftRef::Known(id) => (body, Some(id), None),
        DraftRef::Stale(id) => (body, None, Some(id)),
        DraftRef::MaybeShown => (format!("[pincer] {DRAFT_LOST}\n\n{body}"), None, None),
    }
}

/// The adapter's units of `text` with `buttons` on the last; an empty text
/// is one unit that says so.
fn with_buttons(mut units: Vec<Unit>, buttons: Option<Vec<Button>>) -> Vec<Unit> {
    if units.is_empty() {
        units.push(Unit::plain("(no reply)".to_owned()));
    }
    if let (Some(buttons), Some(last)) = (buttons, units.last_mut()) {
        last.buttons = buttons;
    }
    units
}

impl Hub {
    /// Records the run's reply (finalizing the live draft in place when it
    /// fits one message) and marks its inbound messages done.
    pub(super) async fn finish(
        self: &Arc<Self>,
        answer: &Answer,
        outcome: &RunOutcome,
        said: &Said,
        draft: DraftRef,
    ) {
        let run_id = &answer.run_id;
        let (body, edit_of, retract) = with_draft(reply_body(outcome, &said.text), draft);
        let mut intent = self.intent(
            format!("reply:{run_id}"),
            answer.key.target.clone(),
            IntentKind::Reply,
            &body,
            answer.reply_to.clone(),
            None,
        );
        intent.run_id = Some(run_id.clone());
        if self.adapter.capabilities().files {
            intent.units = with_files(intent.units, &body, &said.changes);
        }
        intent.edit_of = edit_of;
        intent.retract = retract;
        if let Err(err) = self.send(intent, &body).await {
            tracing::error!(run = %run_id, error = %err, "cannot record a reply");
            return;
        }
        self.set_inbox(&answer.ids, InboxState::Done, None).await;
        self.store.submit(Write::Channel(ChannelWrite::DeleteDraft {
            run_id: run_id.clone(),
        }));
    }

    /// Pincer's answer to one inbound message (a command, a refusal); its id
    /// follows from the message, so a redelivery cannot send it twice.
    pub(super) async fn notice(self: &Arc<Self>, message: &ChannelMessage, text: &str) {
        let intent = self.intent(
            format!(
                "notice:{}:{}:{}",
                message.channel, message.account, message.id
            ),
            message.target.clone(),
            IntentKind::Notice,
            text,
            Some(message.id.clone()),
            None,
        );
        if let Err(err) = self.send(intent, text).await {
            tracing::error!(error = %err, "cannot record a notice");
        }
    }

    /// Says once that a run is still working (`Capabilities::working_after`).
    pub(super) async fn working(self: &Arc<Self>, answer: &Answer) {
        let text = "working…";
        let intent = self.intent(
            format!("working:{}", answer.run_id),
            answer.key.target.clone(),
            IntentKind::Notice,
            text,
            answer.reply_to.clone(),
            None,
        );
        if let Err(err) = self.send(intent, text).await {
            tracing::error!(error = %err, "cannot record a working notice");
        }
    }

    /// Records an outbound message (`text`, cut into the intent's units).
    /// With `MessageSending` hooks it is recorded `held` and they are asked
    /// in a task of its own, so a slow hook holds back only this chat.
    pub(super) async fn send(
        self: &Arc<Self>,
        mut intent: SendIntent,
        text: &str,
    ) -> Result<(), JournalError> {
        if !self.screens() {
            return self.outbox.record(intent).await;
        }
        // Decided before (a reply recovery decides again): recorded once,
        // and its hooks asked once.
        if self.store.intent(&intent.id).await?.is_some() {
            return Ok(());
        }
        intent.status = IntentStatus::Held;
        intent.text = Some(text.to_owned());
        self.outbox.record(intent.clone()).await?;
        self.tasks.spawn(self.clone().screen(intent));
        Ok(())
    }

    /// `text` cut into units the platform takes, `buttons` on the last.
    pub(super) fn units(&self, text: &str, buttons: Option<Vec<Button>>) -> Vec<Unit> {
        with_buttons(self.adapter.render(text), buttons)
    }

    /// A new intent of this account, `pending`, with `text` as its units.
    pub(super) fn intent(
        &self,
        id: String,
        target: Target,
        kind: IntentKind,
        text: &str,
        reply_to: Option<String>,
        buttons: Option<Vec<Button>>,
    ) -> SendIntent {
        let units = self.units(text, buttons);
        let account = (self.adapter.channel(), self.adapter.account());
        SendIntent {
            reply_to,
            ..SendIntent::new(id, account, target, kind, units, now_millis())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing;
    use super::*;
    use crate::core::event::StopReason;

    fn message(id: &str) -> ChannelMessage {
        testing::message(id, "hi")
    }

    #[test]
    fn a_long_reply_is_its_first_message_and_a_file_and_changes_follow() {
        let units = |n: usize| {
            (0..n)
                .map(|i| Unit::plain(format!("part {i}")))
                .collect::<Vec<_>>()
        };
        // Three messages or fewer, and no changes: as they are.
        assert_eq!(with_files(units(3), "body", &[]), units(3));
        let long = with_files(units(4), "a long body", &[]);
        assert_eq!(long.len(), 2);
        assert_eq!(long[0], Unit::plain("part 0".into()));
        assert_eq!(long[1].text, "The whole reply (11 characters) is attached.");
        let file = long[1].file.as_ref().unwrap();
        assert_eq!(
            (file.name.as_str(), file.text.as_str()),
            ("reply.md", "a long body")
        );
        let changes = [
            (
                "a.rs".to_owned(),
                "--- a/a.rs\n+++ b/a.rs\n-x\n+y".to_owned(),
            ),
            (
                "a.rs".to_owned(),
                "--- a/a.rs\n+++ b/a.rs\n-y\n+z\n".to_owned(),
            ),
            ("b.md".to_owned(), "+++ b/b.md\n+new\n".to_owned()),
        ];
        let with_changes = with_files(units(1), "body", &changes);
        assert_eq!(with_changes[1].text, "Changes to 2 files: a.rs, b.md");
        assert_eq!(
            with_changes[1].file.as_ref().unwrap().text,
            "--- a/a.rs\n+++ b/a.rs\n-x\n+y\n--- a/a.rs\n+++ b/a.rs\n-y\n+z\n+++ b/b.md\n+new\n"
        );
        let many: Vec<(String, String)> =
            (0..7).map(|i| (format!("f{i}"), String::new())).collect();
        assert_eq!(
            with_files(units(1), "body", &many)[1].text,
            "Changes to 7 files: f0, f1, f2, f3, f4 and 2 more"
        );
        // Past the size a chat takes: the diff named, the reply as messages.
        let huge = [("big.txt".to_owned(), "+x\n".repeat(MAX_FILE_BYTES / 3 + 1))];
        let named = with_files(units(1), "body", &huge);
        assert!(named[1].file.is_none());
        assert_eq!(
            named[1].text,
            "Changes to 1 file: big.txt (the diff, 8.0 MiB, is too large to attach)"
        );
        let body = "y".repeat(MAX_FILE_BYTES + 1);
        assert_eq!(with_files(units(5), &body, &[]), units(5));
    }

    #[test]
    fn a_reply_says_how_its_run_ended_unless_it_completed() {
        let done = RunOutcome::Completed(StopReason::EndTurn);
        let failed = RunOutcome::Failed("no provider".into());
        let cases = [
            (&done, "", "Done."),
            (&done, "Hello.", "Hello."),
            (&RunOutcome::Cancelled, " ", "Stopped."),
            (&RunOutcome::Cancelled, "Half", "Half\n\n(stopped)"),
            (&failed, "", "The run failed: no provider"),
            (&failed, "Half", "Half\n\n(the run failed: no provider)"),
        ];
        for (outcome, text, body) in cases {
            assert_eq!(reply_body(outcome, text), body, "{outcome:?} {text:?}");
        }
    }

    #[test]
    fn a_reply_finalizes_a_known_draft_deletes_a_stale_one_and_warns_of_a_lost_one() {
        let body = || "Hello.".to_owned();
        assert_eq!(with_draft(body(), DraftRef::None), (body(), None, None));
        assert_eq!(
            with_draft(body(), DraftRef::Known("7".into())),
            (body(), Some("7".into()), None)
        );
        assert_eq!(
            with_draft(body(), DraftRef::Stale("7".into())),
            (body(), None, Some("7".into()))
        );
        let (text, edit_of, retract) = with_draft(body(), DraftRef::MaybeShown);
        assert_eq!(text, format!("[pincer] {DRAFT_LOST}\n\nHello."));
        assert_eq!((edit_of, retract), (None, None));
    }

    #[test]
    fn the_buttons_go_on_the_last_unit_and_an_empty_reply_says_so() {
        let buttons = vec![Button {
            label: "Allow once".into(),
            data: "ap:1:allow_once".into(),
        }];
        let units = with_buttons(
            vec![Unit::plain("a".into()), Unit::plain("b".into())],
            Some(buttons.clone()),
        );
        assert!(units[0].buttons.is_empty());
        assert_eq!(units[1].buttons, buttons);
        let empty = with_buttons(Vec::new(), Some(buttons.clone()));
        assert_eq!(empty.len(), 1);
        assert_eq!(empty[0].text, "(no reply)");
        assert_eq!(empty[0].buttons, buttons);
    }

    #[test]
    fn a_reply_is_the_model_s_text_and_pincer_s_notices() {
        let text = Event::TextDelta { text: "Hi".into() };
        assert_eq!(reply_part(&text).as_deref(), Some("Hi"));
        let notice = Event::Notice {
            message: "MCP server x failed".into(),
        };
        assert_eq!(
            reply_part(&notice).as_deref(),
            Some("[pincer] MCP server x failed\n\n")
        );
    }

    #[test]
    fn an_answer_replies_to_the_last_message_and_settles_them_all() {
        let run = RunId::from_string("run_1".into());
        assert!(Answer::of(run.clone(), &[]).is_none());
        let answer = Answer::of(run.clone(), &[message("1"), message("2")]).unwrap();
        assert_eq!(answer.key, ConversationKey::of(&message("1")));
        assert_eq!(answer.run_id, run);
        assert_eq!(answer.reply_to.as_deref(), Some("2"));
        assert_eq!(answer.ids, ["1", "2"]);
    }
}
