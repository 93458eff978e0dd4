//! `ask_user`: the model asks the person a question and waits for the
//! answer. The tool only plans the question; once the call passes the gate,
//! the gate asks it in every face (`core::gate`) and the call runs with what
//! came back, which it words for the model. It changes nothing, so every
//! mode allows it (a `[tools] ask_user = "deny"` rule turns it off).

use schemars::JsonSchema;
use serde::Deserialize;

use crate::core::question::{
    MAX_OPTION_CHARS, MAX_OPTIONS, MAX_QUESTION_CHARS, Question, QuestionOutcome,
};
use crate::core::tool::{Plan, ToolContext, ToolError, ToolKind, ToolOutput, TypedTool};

pub struct AskUserTool;

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Args {
    /// The question, complete on its own.
    question: String,
    /// The answers to choose from (two or more); leave out for a free answer.
    #[serde(default)]
    #[schemars(length(max = MAX_OPTIONS))]
    options: Vec<String>,
}

/// The question `args` asks, checked and trimmed.
fn question(args: &Args) -> Result<Question, ToolError> {
    let invalid = |message: String| Err(ToolError::InvalidArguments(message));
    let text = args.question.trim();
    if text.is_empty() {
        return invalid("`question` is empty".into());
    }
    if text.chars().count() > MAX_QUESTION_CHARS {
        return invalid(format!(
            "`question` is longer than {MAX_QUESTION_CHARS} characters"
        ));
    }
    if args.options.len() > MAX_OPTIONS {
        return invalid(format!(
            "`options` has {} answers; at most {MAX_OPTIONS} are allowed",
            args.options.len()
        ));
    }
    if args.options.len() == 1 {
        return invalid("`options` has one answer; offer two or more, or none".into());
    }
    let mut options: Vec<String> = Vec::with_capacity(args.options.len());
    for (index, option) in args.options.iter().enumerate() {
        let option = option.trim();
        if option.is_empty() {
            return invalid(format!("`options[{index}]` is empty"));
        }
        if option.chars().count() > MAX_OPTION_CHARS {
            return invalid(format!(
                "`options[{index}]` is longer than {MAX_OPTION_CHARS} characters"
            ));
        }
        if options.iter().any(|o| o.eq_ignore_ascii_case(option)) {
            return invalid(format!("`options[{index}]` repeats an earlier answer"));
        }
        options.push(option.to_owned());
    }
    Ok(Question {
        text: text.to_owned(),
        options,
    })
}

impl TypedTool for AskUserTool {
    type Args = Args;
    const NAME: &'static str = "ask_user";
    const KIND: ToolKind = ToolKind::Think;

    fn description(&self) -> String {
        "Asks the user a question and waits for the answer. Use it when you \
         cannot go on well without a decision or a fact only the user has \
         (which of two approaches, a name, a missing requirement); do not use \
         it for things you can find out yourself. Offer `options` when the \
         answer is one of a few choices; the user may still answer in their \
         own words. The user may decline, or not answer in time: then go on \
         with your best judgement and say what you assumed."
            .to_owned()
    }

    async fn plan(&self, args: &Args, _ctx: &ToolContext) -> Result<Plan, ToolError> {
        let question = question(args)?;
        Ok(Plan {
            title: format!("Ask: {}", first_line(&question.text)),
            question: Some(question),
            ..Plan::default()
        })
    }

    async fn execute(
        &self,
        _args: &Args,
        plan: &Plan,
        _ctx: &ToolContext,
    ) -> Result<ToolOutput, ToolError> {
        let Some(answer) = &plan.answer else {
            return Err(ToolError::Failed(
                "the question was not asked (no face took it)".into(),
            ));
        };
        let text = match (answer.outcome, &answer.answer) {
            (QuestionOutcome::Answered, Some(text)) => format!("The user answered: {text}"),
            (QuestionOutcome::Answered | QuestionOutcome::Declined, _) => {
                "The user declined to answer. Go on without it if you can, and say what \
                 you assumed; or stop and say what you need."
                    .to_owned()
            }
            (QuestionOutcome::TimedOut, _) => "No answer came in time. Go on with your best \
                 judgement and say what you assumed."
                .to_owned(),
            (QuestionOutcome::Unattended, _) => "Nobody is present to answer questions in \
                 this run. Go on with your best judgement and say what you assumed; do not \
                 ask again."
                .to_owned(),
            (QuestionOutcome::Cancelled, _) => return Err(ToolError::Cancelled),
        };
        Ok(ToolOutput::text(text))
    }
}

fn first_line(text: &str) -> String {
    let line = text.lines().next().unwrap_or("");
    match line.char_indices().nth(120) {
        Some((at, _)) => format!("{}…", &line[..at]),
        None => line.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::tool::parse_args;
    use serde_json::json;

    fn parse(arguments: &serde_json::Value) -> Result<Question, ToolError> {
        question(&parse_args(arguments)?)
    }

    #[test]
    fn questions_are_checked_naming_the_problem() {
        let err = |v| parse(&v).unwrap_err().to_string();
        assert!(err(json!({})).contains("question"));
        assert!(err(json!({"question": "  "})).contains("empty"));
        assert!(err(json!({"question": "a?", "options": ["only"]})).contains("two or more"));
        assert!(err(json!({"question": "a?", "options": ["x", " "]})).contains("options[1]"));
        assert!(err(json!({"question": "a?", "options": ["Yes", "yes"]})).contains("repeats"));
        assert!(err(json!({"question": "a?", "extra": 1})).contains("extra"));
        let many: Vec<String> = (0..11).map(|i| i.to_string()).collect();
        assert!(err(json!({"question": "a?", "options": many})).contains("at most 10"));
        let question =
            parse(&json!({"question": " Which one? ", "options": [" A ", "B"]})).unwrap();
        assert_eq!(question.text, "Which one?");
        assert_eq!(question.options, vec!["A", "B"]);
    }
}
