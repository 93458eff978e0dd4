//! Questions the model asks the person (the `ask_user` tool): what is asked
//! and what came back. The gate asks (`core::gate`), the faces show the
//! question and pass the answer on (`Runtime::answer_question`).

use serde::{Deserialize, Serialize};

/// Most answers a question may offer.
pub const MAX_OPTIONS: usize = 10;
/// Longest question, in characters.
pub const MAX_QUESTION_CHARS: usize = 2_000;
/// Longest offered answer, in characters.
pub const MAX_OPTION_CHARS: usize = 200;
/// Longest answer kept, in characters; a longer one is cut.
pub const MAX_ANSWER_CHARS: usize = 10_000;

/// What the model asks.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Question {
    pub text: String,
    /// The answers offered; empty for a free answer. A person may still
    /// answer in their own words where the face lets them type.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub options: Vec<String>,
}

/// How a question ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum QuestionOutcome {
    Answered,
    /// The person chose not to answer.
    Declined,
    /// Nobody answered within the question timeout.
    TimedOut,
    /// The run was cancelled while waiting.
    Cancelled,
    /// The face has nobody to ask (`pincer run` without a scripted answer).
    Unattended,
}

impl QuestionOutcome {
    pub fn as_str(self) -> &'static str {
        match self {
            QuestionOutcome::Answered => "answered",
            QuestionOutcome::Declined => "declined",
            QuestionOutcome::TimedOut => "timed_out",
            QuestionOutcome::Cancelled => "cancelled",
            QuestionOutcome::Unattended => "unattended",
        }
    }
}

/// What came back: an answer's text, or why there is none.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct QuestionAnswer {
    pub outcome: QuestionOutcome,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub answer: Option<String>,
}

impl QuestionAnswer {
    /// A person's answer (cut at [`MAX_ANSWER_CHARS`]); an empty one counts
    /// as declined.
    pub fn answered(text: &str) -> Self {
        let text = text.trim();
        if text.is_empty() {
            return Self::without(QuestionOutcome::Declined);
        }
        let text = match text.char_indices().nth(MAX_ANSWER_CHARS) {
            Some((at, _)) => &text[..at],
            None => text,
        };
        Self {
            outcome: QuestionOutcome::Answered,
            answer: Some(text.to_owned()),
        }
    }

    /// No answer, for this reason.
    pub fn without(outcome: QuestionOutcome) -> Self {
        Self {
            outcome,
            answer: None,
        }
    }

    /// The answer to a question with options, read from what a person typed:
    /// an option's number (`2`) or its text (any case) picks that option;
    /// anything else is their own words.
    pub fn from_reply(question: &Question, reply: &str) -> Self {
        let reply = reply.trim();
        if let Ok(number) = reply.parse::<usize>()
            && let Some(option) = number.checked_sub(1).and_then(|i| question.options.get(i))
        {
            return Self::answered(option);
        }
        if let Some(option) = question
            .options
            .iter()
            .find(|o| o.trim().eq_ignore_ascii_case(reply))
        {
            return Self::answered(option);
        }
        Self::answered(reply)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replies_pick_options_by_number_or_text() {
        let question = Question {
            text: "Which database?".into(),
            options: vec!["PostgreSQL".into(), "SQLite".into()],
        };
        let pick = |reply| QuestionAnswer::from_reply(&question, reply).answer;
        assert_eq!(pick("2").as_deref(), Some("SQLite"));
        assert_eq!(pick(" postgresql ").as_deref(), Some("PostgreSQL"));
        assert_eq!(pick("3").as_deref(), Some("3"));
        assert_eq!(pick("MySQL, please").as_deref(), Some("MySQL, please"));
        assert_eq!(
            QuestionAnswer::from_reply(&question, "  ").outcome,
            QuestionOutcome::Declined
        );
    }

    #[test]
    fn long_answers_are_cut() {
        let long = "é".repeat(MAX_ANSWER_CHARS + 5);
        let answer = QuestionAnswer::answered(&long);
        assert_eq!(
            answer.answer.map(|a| a.chars().count()),
            Some(MAX_ANSWER_CHARS)
        );
    }
}
