//! Approvals and questions in the chat. A tool call that needs approval is
//! asked with **Allow once / Always / Reject** buttons, or `y`/`a`/`n`
//! where there are none; a question (`ask_user`) with a button per answer
//! and **Decline**, or a reply. Either can be answered from another face;
//! the first answer wins, and an approval's prompt is then edited to show it
//! (or not sent at all when it had not gone out yet).

use std::time::Duration;

use super::Hub;
use crate::core::approval::ApprovalDecision;
use crate::core::channel::{
    Button, ChannelMessage, ChannelWrite, ConversationKey, IntentKind, IntentStatus, IntentUpdate,
    SendIntent, Unit,
};
use crate::core::ids::SessionId;
use crate::core::journal::Write;
use crate::core::question::{Question, QuestionAnswer, QuestionOutcome};
use crate::core::session::now_millis;

/// How long showing an approval's answer waits for the prompt's send to
/// settle when the answer came (from another face) while it was in flight.
const SETTLE_WAIT: Duration = Duration::from_secs(10);

/// An approval prompt: its text, and its buttons where the channel has them
/// (else the text says how to answer in words, and with a reaction where
/// the channel takes reactions as answers).
fn approval_prompt(
    approval_id: &str,
    title: &str,
    reason: &str,
    caps: &super::super::Capabilities,
) -> (String, Option<Vec<Button>>) {
    if !caps.buttons {
        let react = if caps.reactions {
            ", or react 👍 (allow once) or 👎 (reject)"
        } else {
            ""
        };
        let text = format!(
            "Approval needed: {title}\n{reason}\nReply y (allow once), a (always) or n (reject){react}."
        );
        return (text, None);
    }
    let button = |label: &str, decision: &str| Button {
        label: label.into(),
        data: format!("ap:{approval_id}:{decision}"),
    };
    (
        format!("Approval needed: {title}\n{reason}"),
        Some(vec![
            button("Allow once", "allow_once"),
            button("Always", "allow_always"),
            button("Reject", "reject_once"),
        ]),
    )
}

/// A question: its text with the numbered answers, and a button per answer
/// plus **Decline** where the channel has buttons and answers are offered.
fn question_prompt(
    question_id: &str,
    question: &Question,
    buttons: bool,
) -> (String, Option<Vec<Button>>) {
    let mut text = format!("Question: {}", question.text);
    for (index, option) in question.options.iter().enumerate() {
        text.push_str(&format!("\n{}. {option}", index + 1));
    }
    text.push_str(if question.options.is_empty() {
        "\nReply to answer."
    } else {
        "\nReply with a number or your own answer."
    });
    let buttons = (buttons && !question.options.is_empty()).then(|| {
        let mut buttons: Vec<Button> = question
            .options
            .iter()
            .enumerate()
            .map(|(index, option)| Button {
                label: option.clone(),
                data: format!("qa:{question_id}:{}", index + 1),
            })
            .collect();
        buttons.push(Button {
            label: "Decline".into(),
            data: format!("qa:{question_id}:0"),
        });
        buttons
    });
    (text, buttons)
}

/// A button press, by its data.
#[derive(Debug, PartialEq, Eq)]
enum Press<'a> {
    /// `ap:APPROVAL:DECISION`: one of the decisions a person can give.
    Approval {
        id: &'a str,
        decision: ApprovalDecision,
    },
    /// `qa:QUESTION:N`: answer N (from 1), or 0 to decline.
    Question { id: &'a str, choice: &'a str },
}

impl<'a> Press<'a> {
    fn parse(data: &'a str) -> Option<Self> {
        if let Some(rest) = data.strip_prefix("qa:")
            && let Some((id, choice)) = rest.split_once(':')
        {
            return Some(Press::Question { id, choice });
        }
        let mut parts = data.splitn(3, ':');
        let (Some("ap"), Some(id), Some(decision)) = (parts.next(), parts.next(), parts.next())
        else {
            return None;
        };
        let decision =
            ApprovalDecision::parse(decision).filter(|d| ApprovalDecision::OPTIONS.contains(d))?;
        Some(Press::Approval { id, decision })
    }
}

/// The answer a question's button gives: option N (from 1), or declined
/// (0, or not a number); `None` for a number past the options.
fn question_choice(question: &Question, choice: &str) -> Option<QuestionAnswer> {
    match choice.parse::<usize>() {
        Ok(0) | Err(_) => Some(QuestionAnswer::without(QuestionOutcome::Declined)),
        Ok(n) => question
            .options
            .get(n - 1)
            .map(|o| QuestionAnswer::answered(o)),
    }
}

/// An answered approval prompt: its first two lines (what was asked, and
/// why), then the answer.
fn answered_prompt(prompt: &str, decision: ApprovalDecision) -> String {
    let answer = match decision {
        ApprovalDecision::AllowOnce => "allowed once",
        ApprovalDecision::AllowAlways => "allowed always",
        ApprovalDecision::RejectOnce | ApprovalDecision::RejectAlways => "rejected",
        ApprovalDecision::TimedOut => "timed out (rejected)",
        ApprovalDecision::Cancelled => "cancelled",
        ApprovalDecision::Unattended => "rejected (nobody to ask)",
    };
    let asked = prompt.lines().take(2).collect::<Vec<_>>().join("\n");
    format!("{asked}\n→ {answer}")
}

impl Hub {
    /// Asks an approval in the chat, and remembers it for `y`/`a`/`n`.
    pub(super) async fn ask(
        self: &std::sync::Arc<Self>,
        key: &ConversationKey,
        session: &SessionId,
        approval_id: &str,
        title: &str,
        reason: &str,
    ) {
        self.conversations
            .lock()
            .entry(key.clone())
            .or_default()
            .approvals
            .push((session.clone(), approval_id.to_owned()));
        let (text, buttons) =
            approval_prompt(approval_id, title, reason, &self.adapter.capabilities());
        let intent = self.intent(
            format!("approval:{approval_id}"),
            key.target.clone(),
            IntentKind::Approval,
            &text,
            None,
            buttons,
        );
        if let Err(err) = self.send(intent, &text).await {
            tracing::error!(error = %err, "cannot record an approval prompt");
        }
    }

    /// Sends a question to the chat: with a button per answer where the
    /// channel has buttons; a reply answers it either way.
    pub(super) async fn ask_question(
        &self,
        key: &ConversationKey,
        session: &SessionId,
        question_id: &str,
        question: Question,
    ) {
        let buttons = self.adapter.capabilities().buttons;
        let (text, buttons) = question_prompt(question_id, &question, buttons);
        self.conversations
            .lock()
            .entry(key.clone())
            .or_default()
            .questions
            .push((session.clone(), question_id.to_owned(), question));
        let intent = self.intent(
            format!("question:{question_id}"),
            key.target.clone(),
            IntentKind::Approval,
            &text,
            None,
            buttons,
        );
        if let Err(err) = self.outbox.record(intent).await {
            tracing::error!(error = %err, "cannot record a question");
        }
    }

    /// An approval of this chat was answered (here or elsewhere): no longer
    /// waiting, and its prompt shows the answer.
    pub(super) async fn approval_decided(
        &self,
        key: &ConversationKey,
        approval_id: &str,
        decision: ApprovalDecision,
    ) {
        if let Some(c) = self.conversations.lock().get_mut(key) {
            c.approvals.retain(|(_, id)| id != approval_id);
        }
        self.show_decision(key, approval_id, decision).await;
    }

    /// A question of this chat was answered (here or elsewhere).
    pub(super) fn question_answered(&self, key: &ConversationKey, question_id: &str) {
        if let Some(c) = self.conversations.lock().get_mut(key) {
            c.questions.retain(|(_, id, _)| id != question_id);
        }
    }

    /// Replaces an approval prompt's buttons with the answer, wherever it came
    /// from (this chat, the editor, HTTP). Cosmetic: a failure is only logged.
    async fn show_decision(
        &self,
        key: &ConversationKey,
        approval_id: &str,
        decision: ApprovalDecision,
    ) {
        let Some(intent) = self
            .settled_prompt(&format!("approval:{approval_id}"))
            .await
        else {
            return;
        };
        if matches!(intent.status, IntentStatus::Pending | IntentStatus::Held)
            && intent.receipt.parts.is_empty()
        {
            // Answered before the prompt went out: it need not go out at all.
            let update = IntentUpdate::new(
                &intent.id,
                &[IntentStatus::Pending, IntentStatus::Held],
                IntentStatus::Cancelled,
                now_millis(),
            );
            let _ = self
                .store
                .commit(Write::Channel(ChannelWrite::UpdateIntent(update)))
                .await;
            return;
        }
        let Some(platform_id) = intent.receipt.primary() else {
            return;
        };
        if !self.adapter.capabilities().edit {
            return;
        }
        let first = intent.units.first().map_or("", |u| u.text.as_str());
        let unit = Unit {
            text: answered_prompt(first, decision),
            ..Unit::default()
        };
        if let Err(err) = self.adapter.edit(&key.target, platform_id, &unit).await {
            tracing::debug!(error = %err, "approval prompt not updated");
        }
    }

    /// A prompt's intent once its send settled. Answered elsewhere while
    /// the prompt is on its way to the chat, the platform has it (or is
    /// about to) but its id is not on disk yet: this waits (up to
    /// [`SETTLE_WAIT`]) for the id. `None` when it cannot be read, or the
    /// hub stops.
    async fn settled_prompt(&self, id: &str) -> Option<SendIntent> {
        let mut intent = self.store.intent(id).await.ok().flatten()?;
        let deadline = tokio::time::Instant::now() + SETTLE_WAIT;
        while intent.status == IntentStatus::Sending
            && intent.receipt.primary().is_none()
            && tokio::time::Instant::now() < deadline
        {
            tokio::select! {
                _ = self.cancel.cancelled() => return None,
                _ = tokio::time::sleep(Duration::from_millis(25)) => {}
            }
            intent = self.store.intent(id).await.ok().flatten()?;
        }
        Some(intent)
    }

    /// The button data a reaction stands for: `decision` on the approval,
    /// still waiting in the chat `target`, whose prompt is the platform
    /// message `platform_id` (a part of its intent's receipt); `None` when
    /// that message is no waiting approval's prompt. For platforms without
    /// buttons whose people react to a message instead (Matrix).
    pub async fn approval_press(
        &self,
        target: &crate::core::channel::Target,
        platform_id: &str,
        decision: ApprovalDecision,
    ) -> Option<String> {
        let waiting: Vec<String> = self
            .conversations
            .lock()
            .iter()
            .filter(|(key, _)| key.target.id == target.id && key.target.thread == target.thread)
            .flat_map(|(_, c)| c.approvals.iter().map(|(_, id)| id.clone()))
            .collect();
        for approval in waiting {
            let Ok(Some(intent)) = self.store.intent(&format!("approval:{approval}")).await else {
                continue;
            };
            if intent
                .receipt
                .parts
                .iter()
                .any(|part| part.platform_id == platform_id)
            {
                return Some(format!("ap:{approval}:{}", decision.as_str()));
            }
        }
        None
    }

    /// A button press: an approval's decision, or a question's answer.
    pub(super) async fn button(&self, message: &ChannelMessage) {
        match Press::parse(&message.body) {
            Some(Press::Question { id, choice }) => self.question_button(message, id, choice),
            Some(Press::Approval { id, decision }) => {
                self.approval_button(message, id, decision).await;
            }
            None => tracing::debug!(data = %message.body, "unknown button"),
        }
    }

    /// A button press on an approval: answered for the session that asked
    /// it here, else for the chat's session.
    async fn approval_button(
        &self,
        message: &ChannelMessage,
        approval: &str,
        decision: ApprovalDecision,
    ) {
        let key = ConversationKey::of(message);
        let asked = self.conversations.lock().get(&key).and_then(|c| {
            c.approvals
                .iter()
                .find(|(_, id)| id == approval)
                .map(|(s, _)| s.clone())
        });
        let session = match asked {
            Some(session) => Some(session),
            None => self.store.conversation(&key).await.ok().flatten(),
        };
        if let Some(session) = session
            && !self.runtime.answer_approval(&session, approval, decision)
        {
            tracing::info!(approval, "approval already answered or gone");
        }
    }

    /// A button press on a question: `qa:QUESTION:N` picks option N (from
    /// 1); `qa:QUESTION:0` declines.
    fn question_button(&self, message: &ChannelMessage, question_id: &str, choice: &str) {
        let key = ConversationKey::of(message);
        let pending = self.conversations.lock().get(&key).and_then(|c| {
            c.questions
                .iter()
                .find(|(_, id, _)| id == question_id)
                .cloned()
        });
        let Some((session, _, question)) = pending else {
            tracing::info!(question = question_id, "question already answered or gone");
            return;
        };
        let Some(answer) = question_choice(&question, choice) else {
            return;
        };
        if !self.runtime.answer_question(&session, question_id, answer) {
            tracing::info!(question = question_id, "question already answered or gone");
        }
    }

    /// `y` / `n` / `a` answers the newest approval asked in this chat.
    pub(super) fn answer_in_chat(
        &self,
        message: &ChannelMessage,
        decision: ApprovalDecision,
    ) -> bool {
        let key = ConversationKey::of(message);
        let pending = self
            .conversations
            .lock()
            .get(&key)
            .and_then(|c| c.approvals.last().cloned());
        match pending {
            Some((session, approval)) => {
                self.runtime.answer_approval(&session, &approval, decision)
            }
            None => false,
        }
    }

    /// A message while a question of this chat waits answers the newest.
    pub(super) fn reply_in_chat(&self, message: &ChannelMessage) -> bool {
        let key = ConversationKey::of(message);
        let pending = self
            .conversations
            .lock()
            .get(&key)
            .and_then(|c| c.questions.last().cloned());
        match pending {
            Some((session, question_id, question)) => self.runtime.answer_question(
                &session,
                &question_id,
                QuestionAnswer::from_reply(&question, &message.body),
            ),
            None => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn question(options: &[&str]) -> Question {
        Question {
            text: "Which branch?".into(),
            options: options.iter().map(|o| (*o).to_owned()).collect(),
        }
    }

    fn caps(buttons: bool, reactions: bool) -> crate::channels::Capabilities {
        crate::channels::Capabilities {
            max_len: 100,
            length_unit: crate::channels::LengthUnit::Chars,
            edit: true,
            delete: true,
            buttons,
            reactions,
            threads: false,
            files: false,
            edit_interval: Duration::ZERO,
            markup: None,
            working_after: None,
            idempotent: crate::channels::Idempotence::default(),
        }
    }

    #[test]
    fn an_approval_prompt_has_buttons_or_says_how_to_answer() {
        let (text, buttons) =
            approval_prompt("a1", "shell: rm x", "outside the rules", &caps(true, false));
        assert_eq!(text, "Approval needed: shell: rm x\noutside the rules");
        let buttons = buttons.unwrap();
        let data: Vec<&str> = buttons.iter().map(|b| b.data.as_str()).collect();
        assert_eq!(
            data,
            [
                "ap:a1:allow_once",
                "ap:a1:allow_always",
                "ap:a1:reject_once"
            ]
        );
        for button in &buttons {
            let press = Press::parse(&button.data).unwrap();
            assert!(
                matches!(press, Press::Approval { id: "a1", .. }),
                "{press:?}"
            );
        }
        let (text, buttons) = approval_prompt(
            "a1",
            "shell: rm x",
            "outside the rules",
            &caps(false, false),
        );
        assert!(text.ends_with("Reply y (allow once), a (always) or n (reject)."));
        assert_eq!(buttons, None);
        // Where a reaction answers (Matrix), the prompt says so.
        let (text, _) =
            approval_prompt("a1", "shell: rm x", "outside the rules", &caps(false, true));
        assert!(
            text.ends_with(
                "Reply y (allow once), a (always) or n (reject), or react 👍 (allow once) or 👎 (reject)."
            ),
            "{text}"
        );
    }

    #[test]
    fn a_question_numbers_its_answers_with_a_button_each_and_decline() {
        let (text, buttons) = question_prompt("q1", &question(&["main", "dev"]), true);
        assert_eq!(
            text,
            "Question: Which branch?\n1. main\n2. dev\nReply with a number or your own answer."
        );
        let buttons = buttons.unwrap();
        let shown: Vec<(&str, &str)> = buttons
            .iter()
            .map(|b| (b.label.as_str(), b.data.as_str()))
            .collect();
        assert_eq!(
            shown,
            [
                ("main", "qa:q1:1"),
                ("dev", "qa:q1:2"),
                ("Decline", "qa:q1:0")
            ]
        );
        let (_, buttons) = question_prompt("q1", &question(&["main"]), false);
        assert_eq!(buttons, None, "no buttons where the channel has none");
        let (text, buttons) = question_prompt("q1", &question(&[]), true);
        assert_eq!(text, "Question: Which branch?\nReply to answer.");
        assert_eq!(buttons, None, "a free answer has no buttons");
    }

    #[test]
    fn presses_parse_to_a_decision_a_person_can_give_or_a_question_s_answer() {
        assert_eq!(
            Press::parse("ap:a1:allow_always"),
            Some(Press::Approval {
                id: "a1",
                decision: ApprovalDecision::AllowAlways
            })
        );
        assert_eq!(
            Press::parse("qa:q1:2"),
            Some(Press::Question {
                id: "q1",
                choice: "2"
            })
        );
        // Decisions no person gives, and anything else, are no press.
        assert_eq!(Press::parse("ap:a1:timed_out"), None);
        assert_eq!(Press::parse("ap:a1:maybe"), None);
        assert_eq!(Press::parse("ap:a1"), None);
        assert_eq!(Press::parse("qa:q1"), None);
        assert_eq!(Press::parse("other:a1:allow_once"), None);
    }

    #[test]
    fn a_question_button_picks_an_answer_or_declines() {
        let q = question(&["main", "dev"]);
        assert_eq!(
            question_choice(&q, "2"),
            Some(QuestionAnswer::answered("dev"))
        );
        let declined = Some(QuestionAnswer::without(QuestionOutcome::Declined));
        assert_eq!(question_choice(&q, "0"), declined);
        assert_eq!(question_choice(&q, "x"), declined);
        assert_eq!(question_choice(&q, "3"), None, "past the options");
    }

    #[test]
    fn an_answered_prompt_keeps_what_was_asked_and_shows_the_answer() {
        let prompt = "Approval needed: shell: rm x\noutside the rules\nReply y (allow once), a (always) or n (reject).";
        assert_eq!(
            answered_prompt(prompt, ApprovalDecision::AllowOnce),
            "Approval needed: shell: rm x\noutside the rules\n→ allowed once"
        );
        assert!(answered_prompt(prompt, ApprovalDecision::RejectAlways).ends_with("→ rejected"));
        assert!(
            answered_prompt(prompt, ApprovalDecision::Unattended)
                .ends_with("→ rejected (nobody to ask)")
        );
    }
}
