//! The scripted provider: replays a model script, one model turn per line.
//!
//! The format is documented in `docs/scripted-provider.md`. The turn to play is
//! chosen from the conversation itself (the number of assistant messages so far),
//! so a session continued after a restart picks up where it left off.

use std::path::{Path, PathBuf};
use std::time::Duration;

use futures::StreamExt;
use serde::Deserialize;
use thiserror::Error;

use crate::core::event::Usage;
use crate::core::provider::{
    ModelRequest, ModelStop, Provider, ProviderError, ProviderErrorKind, ProviderEvent,
    ProviderStream,
};
use crate::core::session::{ContentPart, Message, ToolCall, model_turns};

#[derive(Debug, Error)]
pub enum ScriptError {
    #[error("cannot read model script {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("model script {path}, line {line}: {message}")]
    Parse {
        path: PathBuf,
        line: usize,
        message: String,
    },
    #[error("model script {path} has no turns")]
    Empty { path: PathBuf },
}

/// One step of a scripted model turn.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
enum Step {
    Text(String),
    Thought(String),
    ToolCall(ScriptedToolCall),
    Usage(Usage),
    DelayMs(u64),
    Error(ScriptedError),
    Stop(ScriptedStop),
    Repeat(Repeat),
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
struct ScriptedToolCall {
    #[serde(default)]
    id: Option<String>,
    name: String,
    #[serde(default)]
    arguments: serde_json::Value,
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
struct ScriptedError {
    kind: ScriptedErrorKind,
    #[serde(default)]
    message: Option<String>,
    #[serde(default)]
    retry_after_ms: Option<u64>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
enum ScriptedErrorKind {
    Auth,
    UnknownModel,
    ContextLength,
    RateLimited,
    Transport,
    Timeout,
    Server,
    Protocol,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
enum ScriptedStop {
    EndTurn,
    ToolUse,
    MaxTokens,
    Refusal,
}

/// Emits `count` identical chunks: how benchmarks and tests make long streams.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
struct Repeat {
    count: u64,
    #[serde(default)]
    text: Option<String>,
    #[serde(default)]
    thought: Option<String>,
    /// Each chunk comes on its own (after a yield to the scheduler) instead
    /// of all waiting at once, so the chunks stay one event each.
    #[serde(default)]
    apart: bool,
}

#[derive(Debug, Clone, PartialEq)]
struct Turn {
    steps: Vec<Step>,
}

/// A provider that plays a model script.
pub struct ScriptedProvider {
    name: String,
    path: PathBuf,
    /// The lines before the first section: every other conversation's.
    turns: Vec<Turn>,
    /// `{"section": TEXT}` and the lines after it: the turns of a
    /// conversation whose first prompt contains TEXT (a subagent's task).
    sections: Vec<(String, Vec<Turn>)>,
}

/// A line that starts a section.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Section {
    section: String,
}

impl ScriptedProvider {
    pub fn load(name: &str, path: &Path) -> Result<Self, ScriptError> {
        let text = std::fs::read_to_string(path).map_err(|source| ScriptError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        Self::parse(name, path, &text)
    }

    fn parse(name: &str, path: &Path, text: &str) -> Result<Self, ScriptError> {
        let mut turns = Vec::new();
        let mut sections: Vec<(String, Vec<Turn>)> = Vec::new();
        for (index, line) in text.lines().enumerate() {
            let trimmed = line.trim();
            if trimmed.is_empty() || trimmed.starts_with('#') {
                continue;
            }
            let parse_error = |message: String| ScriptError::Parse {
                path: path.to_path_buf(),
                line: index + 1,
                message,
            };
            if trimmed.starts_with('{') {
                let section: Section = serde_json::from_str(trimmed).map_err(|err| {
                    parse_error(format!(
                        "expected a section such as {{\"section\": \"text of a first prompt\"}}: {err}"
                    ))
                })?;
                if section.section.is_empty() {
                    return Err(parse_error("the section's text is empty".into()));
                }
                sections.push((section.section, Vec::new()));
                continue;
            }
            let steps: Vec<Step> = serde_json::from_str(trimmed).map_err(|err| {
                parse_error(format!(
                    "expected a JSON array of steps such as [{{\"text\":\"Hello\"}}]: {err}"
                ))
            })?;
            match sections.last_mut() {
                Some((_, lines)) => lines.push(Turn { steps }),
                None => turns.push(Turn { steps }),
            }
        }
        if turns.is_empty() && sections.iter().all(|(_, lines)| lines.is_empty()) {
            return Err(ScriptError::Empty {
                path: path.to_path_buf(),
            });
        }
        Ok(Self {
            name: name.to_owned(),
            path: path.to_path_buf(),
            turns,
            sections,
        })
    }
}

impl Provider for ScriptedProvider {
    fn name(&self) -> &str {
        &self.name
    }

    fn stream(&self, request: ModelRequest) -> ProviderStream {
        // A summary counts the turns it stands for: the count goes on across
        // a compaction as if the summary turn were an assistant message.
        let index = model_turns(&request.messages);
        let first_prompt = request.messages.iter().find_map(|m| {
            let Message::User { content } = m else {
                return None;
            };
            let text = content.iter().filter_map(|part| {
                if let ContentPart::Text { text } = part {
                    Some(text.as_str())
                } else {
                    None
                }
            });
            Some(text.collect::<String>())
        });
        let (turns, which) = match first_prompt.as_deref().and_then(|prompt| {
            self.sections
                .iter()
                .find(|(text, _)| prompt.contains(text.as_str()))
        }) {
            Some((text, lines)) => (lines, format!(" (section {text:?})")),
            None => (&self.turns, String::new()),
        };
        // Which line plays follows from the conversation alone: what it was
        // is what a test that got an unexpected line needs to see.
        let conversation = roles(&request.messages);
        tracing::debug!(
            script = %self.path.display(),
            turn = index + 1,
            %conversation,
            "playing a scripted model turn"
        );
        let Some(turn) = turns.get(index).cloned() else {
            let error = ProviderError::new(
                ProviderErrorKind::Config,
                format!(
                    "model script {}{which} has {} turn(s) and turn {} was asked for (the conversation sent: {conversation})",
                    self.path.display(),
                    turns.len(),
                    index + 1
                ),
            );
            return futures::stream::once(async move { Err(error) }).boxed();
        };
        play(turn, index).boxed()
    }
}

/// The roles of a conversation's messages in order (a summary with the
/// turns it stands for), which decide the line a script plays.
fn roles(messages: &[Message]) -> String {
    if messages.is_empty() {
        return "no messages".to_owned();
    }
    messages
        .iter()
        .map(|message| match message {
            Message::User { .. } => "user".to_owned(),
            Message::Assistant { .. } => "assistant".to_owned(),
            Message::Tool { .. } => "tool".to_owned(),
            Message::Note { .. } => "note".to_owned(),
            Message::Summary { turns, .. } => format!("summary of {turns} turn(s)"),
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// Plays a turn as a stream: an unfold over the steps, with `Repeat` expanded
/// lazily so a 100,000-chunk turn costs no memory up front.
fn play(
    turn: Turn,
    turn_index: usize,
) -> impl futures::Stream<Item = Result<ProviderEvent, ProviderError>> + Send + 'static {
    struct Cursor {
        steps: std::vec::IntoIter<Step>,
        /// The repeated chunk, how many are left, and whether they come apart.
        repeating: Option<(ProviderEvent, u64, bool)>,
        saw_tool_call: bool,
        calls: usize,
        finished: bool,
        turn_index: usize,
    }
    let cursor = Cursor {
        steps: turn.steps.into_iter(),
        repeating: None,
        saw_tool_call: false,
        calls: 0,
        finished: false,
        turn_index,
    };
    futures::stream::unfold(cursor, |mut cursor| async move {
        if cursor.finished {
            return None;
        }
        loop {
            if let Some((event, left, apart)) = cursor.repeating.take()
                && left > 0
            {
                if apart {
                    tokio::task::yield_now().await;
                }
                cursor.repeating = Some((event.clone(), left - 1, apart));
                return Some((Ok(event), cursor));
            }
            let Some(step) = cursor.steps.next() else {
                cursor.finished = true;
                let stop = if cursor.saw_tool_call {
                    ModelStop::ToolUse
                } else {
                    ModelStop::EndTurn
                };
                return Some((Ok(ProviderEvent::Done(stop)), cursor));
            };
            match step {
                Step::Text(text) => return Some((Ok(ProviderEvent::Text(text)), cursor)),
                Step::Thought(text) => return Some((Ok(ProviderEvent::Thinking(text)), cursor)),
                Step::Usage(usage) => return Some((Ok(ProviderEvent::Usage(usage)), cursor)),
                Step::ToolCall(call) => {
                    cursor.saw_tool_call = true;
                    cursor.calls += 1;
                    let id = call.id.unwrap_or_else(|| {
                        format!("call_{}_{}", cursor.turn_index + 1, cursor.calls)
                    });
                    let event = ProviderEvent::ToolCall(ToolCall {
                        id,
                        name: call.name,
                        arguments: call.arguments,
                    });
                    return Some((Ok(event), cursor));
                }
                Step::DelayMs(ms) => tokio::time::sleep(Duration::from_millis(ms)).await,
                Step::Error(error) => {
                    cursor.finished = true;
                    return Some((Err(scripted_error(&error)), cursor));
                }
                Step::Stop(stop) => {
                    cursor.finished = true;
                    let stop = match stop {
                        ScriptedStop::EndTurn => ModelStop::EndTurn,
                        ScriptedStop::ToolUse => ModelStop::ToolUse,
                        ScriptedStop::MaxTokens => ModelStop::MaxTokens,
                        ScriptedStop::Refusal => ModelStop::Refusal,
                    };
                    return Some((Ok(ProviderEvent::Done(stop)), cursor));
                }
                Step::Repeat(repeat) => {
                    let event = match (repeat.text, repeat.thought) {
                        (Some(text), _) => ProviderEvent::Text(text),
                        (None, Some(thought)) => ProviderEvent::Thinking(thought),
                        (None, None) => ProviderEvent::Text("x".into()),
                    };
                    cursor.repeating = Some((event, repeat.count, repeat.apart));
                }
            }
        }
    })
}

fn scripted_error(error: &ScriptedError) -> ProviderError {
    let kind = match error.kind {
        ScriptedErrorKind::Auth => ProviderErrorKind::Auth,
        ScriptedErrorKind::UnknownModel => ProviderErrorKind::UnknownModel,
        ScriptedErrorKind::ContextLength => ProviderErrorKind::ContextLength,
        ScriptedErrorKind::RateLimited => ProviderErrorKind::RateLimited,
        ScriptedErrorKind::Transport => ProviderErrorKind::Transport,
        ScriptedErrorKind::Timeout => ProviderErrorKind::Timeout,
        ScriptedErrorKind::Server => ProviderErrorKind::Server,
        ScriptedErrorKind::Protocol => ProviderErrorKind::Protocol,
    };
    let message = error
        .message
        .clone()
        .unwrap_or_else(|| format!("scripted {kind:?} error"));
    ProviderError {
        kind,
        message,
        retry_after: error.retry_after_ms.map(Duration::from_millis),
        status: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::session::{ContentPart, Message};

    fn provider(script: &str) -> ScriptedProvider {
        match ScriptedProvider::parse("test", Path::new("test.jsonl"), script) {
            Ok(provider) => provider,
            Err(err) => panic!("{err}"),
        }
    }

    fn request(assistant_turns: usize) -> ModelRequest {
        let mut messages = vec![Message::User {
            content: vec![ContentPart::Text { text: "hi".into() }],
        }];
        for _ in 0..assistant_turns {
            messages.push(Message::Assistant {
                text: "x".into(),
                thought: String::new(),
                tool_calls: vec![],
                interrupted: false,
            });
        }
        ModelRequest {
            model: "m".into(),
            system: None,
            messages,
            tools: Vec::new().into(),
            reasoning_effort: None,
        }
    }

    async fn collect(
        provider: &ScriptedProvider,
        turns: usize,
    ) -> Vec<Result<ProviderEvent, String>> {
        provider
            .stream(request(turns))
            .map(|item| item.map_err(|err| err.message))
            .collect()
            .await
    }

    #[tokio::test]
    async fn plays_the_turn_matching_the_history() {
        let p = provider(
            "# comment\n[{\"text\":\"a\"},{\"thought\":\"t\"}]\n\n[{\"text\":\"b\"},{\"stop\":\"max_tokens\"},{\"text\":\"never\"}]\n",
        );
        assert_eq!(
            collect(&p, 0).await,
            vec![
                Ok(ProviderEvent::Text("a".into())),
                Ok(ProviderEvent::Thinking("t".into())),
                Ok(ProviderEvent::Done(ModelStop::EndTurn)),
            ]
        );
        assert_eq!(
            collect(&p, 1).await,
            vec![
                Ok(ProviderEvent::Text("b".into())),
                Ok(ProviderEvent::Done(ModelStop::MaxTokens)),
            ]
        );
        let exhausted = collect(&p, 2).await;
        assert_eq!(
            exhausted,
            vec![Err(
                "model script test.jsonl has 2 turn(s) and turn 3 was asked for (the conversation sent: user, assistant, assistant)".into()
            )]
        );
    }

    #[tokio::test]
    async fn a_summary_counts_the_turns_it_stands_for() {
        let p = provider(
            "[{\"text\":\"1\"}]\n[{\"text\":\"2\"}]\n[{\"text\":\"3\"}]\n[{\"text\":\"4\"}]\n",
        );
        // Compacted after two turns (the summary turn being the second), then
        // one more turn: the next line is the fourth.
        let mut compacted = request(0);
        compacted.messages = vec![
            Message::Summary {
                text: "so far".into(),
                turns: 2,
            },
            Message::User {
                content: vec![ContentPart::Text { text: "go".into() }],
            },
            Message::Assistant {
                text: "3".into(),
                thought: String::new(),
                tool_calls: vec![],
                interrupted: false,
            },
        ];
        let events: Vec<_> = p.stream(compacted).collect().await;
        assert!(
            matches!(&events[0], Ok(ProviderEvent::Text(text)) if text == "4"),
            "{events:?}"
        );
    }

    #[tokio::test]
    async fn an_exhausted_script_names_the_conversation_that_chose_the_line() {
        let p = provider("[{\"text\":\"1\"}]\n[{\"text\":\"2\"}]\n");
        let mut asked = request(0);
        asked.messages = vec![
            Message::Summary {
                text: "so far".into(),
                turns: 1,
            },
            Message::Note {
                text: "context".into(),
            },
            Message::Assistant {
                text: "x".into(),
                thought: String::new(),
                tool_calls: vec![],
                interrupted: true,
            },
            Message::Tool {
                call_id: "c".into(),
                content: "out".into(),
                is_error: false,
            },
            Message::User {
                content: vec![ContentPart::Text { text: "go".into() }],
            },
        ];
        let events: Vec<_> = p
            .stream(asked)
            .map(|item| item.map_err(|err| err.message))
            .collect()
            .await;
        assert_eq!(
            events,
            vec![Err(
                "model script test.jsonl has 2 turn(s) and turn 3 was asked for \
                 (the conversation sent: summary of 1 turn(s), note, assistant, tool, user)"
                    .into()
            )]
        );
        assert_eq!(roles(&[]), "no messages");
    }

    #[tokio::test]
    async fn tool_calls_get_ids_and_end_with_tool_use() {
        let p =
            provider("[{\"tool_call\":{\"name\":\"read_file\",\"arguments\":{\"path\":\"a\"}}}]");
        let events = collect(&p, 0).await;
        assert_eq!(
            events,
            vec![
                Ok(ProviderEvent::ToolCall(ToolCall {
                    id: "call_1_1".into(),
                    name: "read_file".into(),
                    arguments: serde_json::json!({"path":"a"}),
                })),
                Ok(ProviderEvent::Done(ModelStop::ToolUse)),
            ]
        );
    }

    #[tokio::test]
    async fn repeat_expands_lazily_and_errors_end_the_turn() {
        let p = provider(
            "[{\"repeat\":{\"count\":3,\"text\":\"x\"}},{\"error\":{\"kind\":\"server\",\"message\":\"boom\"}},{\"text\":\"never\"}]",
        );
        let events = collect(&p, 0).await;
        assert_eq!(
            events,
            vec![
                Ok(ProviderEvent::Text("x".into())),
                Ok(ProviderEvent::Text("x".into())),
                Ok(ProviderEvent::Text("x".into())),
                Err("boom".into()),
            ]
        );
    }

    #[tokio::test]
    async fn a_section_plays_for_the_conversation_whose_first_prompt_names_it() {
        let p = provider(
            "[{\"text\": \"main\"}]\n{\"section\": \"HELPER\"}\n[{\"text\": \"helper 1\"}]\n[{\"text\": \"helper 2\"}]\n",
        );
        let play = |prompt: &str, turns: usize| {
            let mut request = request(turns);
            request.messages[0] = Message::User {
                content: vec![ContentPart::Text {
                    text: prompt.to_owned(),
                }],
            };
            p.stream(request)
                .map(|item| match item {
                    Ok(ProviderEvent::Text(text)) => text,
                    Ok(_) => String::new(),
                    Err(err) => format!("error: {}", err.message),
                })
                .collect::<String>()
        };
        assert_eq!(play("hello", 0).await, "main");
        assert_eq!(play("HELPER: go", 0).await, "helper 1");
        assert_eq!(play("HELPER: go", 1).await, "helper 2");
        let past = play("HELPER: go", 2).await;
        assert!(
            past.contains("(section \"HELPER\") has 2 turn(s)"),
            "{past}"
        );
        assert!(ScriptedProvider::parse("s", Path::new("s"), "{\"section\": \"\"}\n").is_err());
    }

    #[test]
    fn bad_lines_are_reported_with_their_number() {
        let err = ScriptedProvider::parse(
            "t",
            Path::new("s.jsonl"),
            "[{\"text\":\"a\"}]\n[{\"txet\":1}]",
        )
        .err()
        .map(|err| err.to_string())
        .unwrap_or_default();
        assert!(
            err.starts_with("model script s.jsonl, line 2: expected a JSON array"),
            "{err}"
        );
        let empty = ScriptedProvider::parse("t", Path::new("s.jsonl"), "\n# nothing\n")
            .err()
            .map(|err| err.to_string());
        assert_eq!(empty.as_deref(), Some("model script s.jsonl has no turns"));
    }
}
