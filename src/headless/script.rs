//! What `pincer run` is asked to run: the prompt (an argument, a file or
//! stdin) with its `--image` files, or an `--input` script of prompts and
//! the answers to their runs' approvals and questions.

use std::collections::VecDeque;
use std::io::Read as _;
use std::path::Path;

use anyhow::{Context, anyhow};
use serde::Deserialize;

use crate::app::Failure;
use crate::cli::RunArgs;
use crate::core::approval::ApprovalDecision;
use crate::core::session::{ContentPart, ImageError, image_part};

/// One line of an `--input` script: a prompt, or the answer to the next
/// approval or question of the run started by the prompt above it.
#[derive(Debug, Deserialize)]
#[serde(untagged, deny_unknown_fields)]
enum InputLine {
    Prompt {
        prompt: String,
    },
    Approve {
        approve: String,
        /// When given, the approval must be for this tool.
        #[serde(default)]
        tool: Option<String>,
    },
    Answer {
        answer: String,
    },
}

/// A scripted answer to an approval.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Answer {
    pub decision: ApprovalDecision,
    pub tool: Option<String>,
}

/// A prompt and the scripted answers to its run's approvals, in order.
#[derive(Debug, Default)]
pub(super) struct Turn {
    pub prompt: String,
    /// Images sent with the prompt (`--image`).
    pub images: Vec<ContentPart>,
    pub answers: VecDeque<Answer>,
    /// Scripted answers to the run's questions (`ask_user`), in order.
    pub replies: VecDeque<String>,
}

impl Turn {
    fn new(prompt: String) -> Self {
        Self {
            prompt,
            images: Vec::new(),
            answers: VecDeque::new(),
            replies: VecDeque::new(),
        }
    }

    pub fn content(&self) -> Vec<ContentPart> {
        let mut content = vec![ContentPart::Text {
            text: self.prompt.clone(),
        }];
        content.extend(self.images.iter().cloned());
        content
    }
}

/// Reads the `--image` files: the type from their first bytes, checked as
/// any face checks images.
pub(super) fn images(args: &RunArgs) -> Result<Vec<ContentPart>, Failure> {
    args.image.iter().map(|path| image(path)).collect()
}

fn image(path: &Path) -> Result<ContentPart, Failure> {
    let bytes = std::fs::read(path)
        .with_context(|| format!("cannot read image {}", path.display()))
        .map_err(Failure::usage)?;
    let uri = std::path::absolute(path)
        .ok()
        .map(|p| format!("file://{}", p.display()));
    image_part(&bytes, uri).map_err(|err| match err {
        ImageError::Unrecognized => Failure::usage(anyhow!(
            "image {} is not a PNG, JPEG, GIF or WebP image",
            path.display()
        )),
        err @ (ImageError::UnsupportedType(_)
        | ImageError::NotBase64(_)
        | ImageError::TooLarge { .. }
        | ImageError::WrongType(_)) => Failure::usage(anyhow!("image {}: {err}", path.display())),
    })
}

/// Reads the prompts to run, in order.
pub(super) fn prompts(args: &RunArgs) -> Result<Vec<Turn>, Failure> {
    if let Some(prompt) = &args.prompt {
        let text = if prompt == "-" {
            read_stdin()?
        } else {
            prompt.clone()
        };
        return Ok(vec![Turn::new(text)]);
    }
    if let Some(path) = &args.prompt_file {
        let text = if path == Path::new("-") {
            read_stdin()?
        } else {
            std::fs::read_to_string(path)
                .with_context(|| format!("cannot read prompt file {}", path.display()))
                .map_err(Failure::usage)?
        };
        return Ok(vec![Turn::new(text)]);
    }
    if let Some(path) = &args.input {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("cannot read input script {}", path.display()))
            .map_err(Failure::usage)?;
        return script(&text, path).map_err(Failure::usage);
    }
    Err(Failure::usage(anyhow!(
        "nothing to run: pass a PROMPT, --prompt-file FILE or --input FILE.jsonl"
    )))
}

fn read_stdin() -> Result<String, Failure> {
    let mut text = String::new();
    std::io::stdin()
        .read_to_string(&mut text)
        .context("cannot read the prompt from stdin")
        .map_err(Failure::usage)?;
    Ok(text)
}

/// The turns of an input script (`path` names it in errors): blank lines
/// and `#` comments skipped, each answer added to the prompt above it.
fn script(text: &str, path: &Path) -> anyhow::Result<Vec<Turn>> {
    let mut prompts: Vec<Turn> = Vec::new();
    for (index, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let at = format!("input script {}, line {}", path.display(), index + 1);
        let parsed: InputLine = serde_json::from_str(line).map_err(|_| {
            anyhow!(
                "{at}: expected {{\"prompt\": \"...\"}}, {{\"approve\": \"allow_once|allow_always|reject_once|reject_always\"}} or {{\"answer\": \"...\"}}"
            )
        })?;
        add_line(&mut prompts, parsed, &at)?;
    }
    if prompts.is_empty() {
        return Err(anyhow!("input script {} has no prompts", path.display()));
    }
    Ok(prompts)
}

/// Adds one script line to the turns read so far; `at` names the line.
fn add_line(prompts: &mut Vec<Turn>, line: InputLine, at: &str) -> anyhow::Result<()> {
    match line {
        InputLine::Prompt { prompt } => prompts.push(Turn::new(prompt)),
        InputLine::Approve { approve, tool } => {
            let decision = ApprovalDecision::parse(&approve)
                .filter(|d| ApprovalDecision::OPTIONS.contains(d))
                .ok_or_else(|| {
                    anyhow!(
                        "{at}: `approve` must be allow_once, allow_always, reject_once or reject_always, got {approve:?}"
                    )
                })?;
            let turn = prompts.last_mut().ok_or_else(|| {
                anyhow!("{at}: an approval answer must follow the prompt whose run it answers")
            })?;
            turn.answers.push_back(Answer { decision, tool });
        }
        InputLine::Answer { answer } => {
            let turn = prompts.last_mut().ok_or_else(|| {
                anyhow!("{at}: an answer must follow the prompt whose run asks the question")
            })?;
            turn.replies.push_back(answer);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> anyhow::Result<Vec<Turn>> {
        script(text, Path::new("in.jsonl"))
    }

    #[test]
    fn answers_belong_to_the_prompt_above_them() {
        let turns = parse(
            "# a comment\n\n{\"prompt\": \"one\"}\n\
             {\"approve\": \"allow_once\", \"tool\": \"shell\"}\n\
             {\"answer\": \"blue\"}\n\
             {\"prompt\": \"two\"}\n{\"approve\": \"reject_always\"}\n",
        )
        .unwrap();
        assert_eq!(turns.len(), 2);
        assert_eq!(turns[0].prompt, "one");
        assert_eq!(
            Vec::from(turns[0].answers.clone()),
            vec![Answer {
                decision: ApprovalDecision::AllowOnce,
                tool: Some("shell".into())
            }]
        );
        assert_eq!(Vec::from(turns[0].replies.clone()), vec!["blue".to_owned()]);
        assert_eq!(turns[1].prompt, "two");
        assert_eq!(
            turns[1].answers.front().map(|a| a.decision),
            Some(ApprovalDecision::RejectAlways)
        );
        assert!(turns[1].replies.is_empty());
    }

    #[test]
    fn a_bad_line_is_named_by_its_number() {
        let err = parse("{\"prompt\": \"one\"}\n\n{\"prompt\": 3}\n").unwrap_err();
        assert!(
            err.to_string()
                .starts_with("input script in.jsonl, line 3: expected {\"prompt\""),
            "{err}"
        );
        let err = parse("{\"prompt\": \"one\", \"extra\": 1}\n").unwrap_err();
        assert!(err.to_string().contains("line 1: expected"), "{err}");
    }

    #[test]
    fn an_answer_before_any_prompt_or_a_made_up_decision_is_refused() {
        let err = parse("{\"approve\": \"allow_once\"}\n").unwrap_err();
        assert_eq!(
            err.to_string(),
            "input script in.jsonl, line 1: an approval answer must follow the prompt whose run it answers"
        );
        let err = parse("{\"answer\": \"x\"}\n").unwrap_err();
        assert!(err.to_string().contains("an answer must follow"), "{err}");
        let err = parse("{\"prompt\": \"p\"}\n{\"approve\": \"cancelled\"}\n").unwrap_err();
        assert!(
            err.to_string()
                .contains("`approve` must be allow_once, allow_always, reject_once or reject_always, got \"cancelled\""),
            "{err}"
        );
    }

    #[test]
    fn a_script_without_prompts_is_refused() {
        let err = parse("# nothing\n\n").unwrap_err();
        assert_eq!(err.to_string(), "input script in.jsonl has no prompts");
    }

    #[test]
    fn the_content_is_the_prompt_then_its_images() {
        let mut turn = Turn::new("look".into());
        turn.images.push(ContentPart::Image {
            mime_type: "image/png".into(),
            data: "AAAA".into(),
            uri: None,
        });
        let content = turn.content();
        assert_eq!(content.len(), 2);
        assert!(matches!(&content[0], ContentPart::Text { text } if text == "look"));
        assert!(matches!(&content[1], ContentPart::Image { .. }));
    }
}
