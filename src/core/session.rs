//! Sessions and the conversation history they hold.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use super::ids::{RunId, SessionId};

/// Milliseconds since the Unix epoch; the core's one notion of wall time.
pub type Millis = i64;

/// The current wall time in milliseconds.
pub fn now_millis() -> Millis {
    jiff::Timestamp::now().as_millisecond()
}

/// A long-lived conversation bound to a workspace directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Session {
    pub id: SessionId,
    /// The directory the agent works in; always absolute.
    pub workspace: PathBuf,
    /// Which face created the session; shown in listings, never branched on by the core.
    pub origin: Origin,
    /// The provider that serves this session's model turns.
    pub provider: String,
    /// The model name passed to the provider.
    pub model: String,
    pub mode: Mode,
    /// A short title taken from the first prompt.
    pub title: Option<String>,
    /// MCP server declarations the client passed, kept verbatim for the tools layer.
    pub mcp_servers: serde_json::Value,
    pub created_at: Millis,
    pub updated_at: Millis,
    /// Closed sessions are kept on disk but refuse new prompts until loaded again.
    pub closed: bool,
}

/// Where a session came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Origin {
    Editor,
    Headless,
    Http,
    Channel,
}

impl Origin {
    pub fn as_str(self) -> &'static str {
        match self {
            Origin::Editor => "editor",
            Origin::Headless => "headless",
            Origin::Http => "http",
            Origin::Channel => "channel",
        }
    }

    pub fn parse(value: &str) -> Option<Self> {
        match value {
            "editor" => Some(Origin::Editor),
            "headless" => Some(Origin::Headless),
            "http" => Some(Origin::Http),
            "channel" => Some(Origin::Channel),
            _ => None,
        }
    }
}

/// The autonomy mode of a session: how much the agent may do without asking.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Mode {
    /// Reads only; every mutation is refused.
    ReadOnly,
    /// Mutations and commands need a person's approval.
    #[default]
    Supervised,
    /// Everything the policy allows runs without asking.
    Full,
}

impl Mode {
    pub const ALL: [Mode; 3] = [Mode::ReadOnly, Mode::Supervised, Mode::Full];

    pub fn as_str(self) -> &'static str {
        match self {
            Mode::ReadOnly => "read_only",
            Mode::Supervised => "supervised",
            Mode::Full => "full",
        }
    }

    pub fn parse(value: &str) -> Option<Self> {
        Mode::ALL.into_iter().find(|mode| mode.as_str() == value)
    }

    pub fn title(self) -> &'static str {
        match self {
            Mode::ReadOnly => "Read only",
            Mode::Supervised => "Supervised",
            Mode::Full => "Full autonomy",
        }
    }

    pub fn description(self) -> &'static str {
        match self {
            Mode::ReadOnly => "The agent may read and search; it may not change anything",
            Mode::Supervised => "Edits and commands wait for your approval",
            Mode::Full => "Edits and commands allowed by policy run without asking",
        }
    }
}

/// One part of a user prompt.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ContentPart {
    Text {
        text: String,
    },
    /// A reference to a resource the agent may read itself.
    ResourceLink {
        uri: String,
        name: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        mime_type: Option<String>,
    },
    /// A resource whose text the client embedded in the prompt.
    Resource {
        uri: String,
        text: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        mime_type: Option<String>,
    },
}

impl ContentPart {
    /// The part as plain text for a model that only reads text.
    pub fn to_model_text(&self) -> String {
        match self {
            ContentPart::Text { text } => text.clone(),
            ContentPart::ResourceLink { uri, name, .. } => format!("[{name}]({uri})"),
            ContentPart::Resource { uri, text, .. } => {
                format!("<resource uri=\"{uri}\">\n{text}\n</resource>")
            }
        }
    }
}

/// A tool call the model asked for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolCall {
    pub id: String,
    pub name: String,
    pub arguments: serde_json::Value,
}

/// One entry of a session's conversation history.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "role", rename_all = "snake_case")]
pub enum Message {
    User {
        content: Vec<ContentPart>,
    },
    Assistant {
        #[serde(default, skip_serializing_if = "String::is_empty")]
        text: String,
        #[serde(default, skip_serializing_if = "String::is_empty")]
        thought: String,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        tool_calls: Vec<ToolCall>,
        /// Set when the turn was cut short (cancel, failure, crash) and the text is partial.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        interrupted: bool,
    },
    Tool {
        call_id: String,
        content: String,
        is_error: bool,
    },
    /// A compaction point: the summary of everything before it, which the
    /// model reads instead of those messages (see `context::since_compaction`).
    Summary {
        text: String,
        /// Model turns the summary stands for: the turns of the messages it
        /// replaced plus the turn that wrote it. [`model_turns`] counts it, so a
        /// conversation keeps its count of turns across a compaction.
        turns: usize,
    },
    /// Something Pincer itself tells the model about the conversation, neither
    /// said by the person nor by the model (what an `/undo` reverted).
    Note {
        text: String,
    },
}

impl Message {
    /// A message the model reads on the user's side.
    pub fn is_user_side(&self) -> bool {
        match self {
            Message::User { .. } | Message::Summary { .. } | Message::Note { .. } => true,
            Message::Assistant { .. } | Message::Tool { .. } => false,
        }
    }
}

/// The text a model reads for a summary: marked as a summary so the model does
/// not take it for something the person just said.
pub fn summary_for_model(text: &str) -> String {
    format!(
        "[Summary of the earlier conversation. The messages before this point were \
         compacted into this summary; continue from it.]\n\n{text}"
    )
}

/// The text a model reads for a note from Pincer.
pub fn note_for_model(text: &str) -> String {
    format!("[Note from Pincer, not from the user: {text}]")
}

/// Model turns in a conversation: its assistant messages, plus the turns each
/// summary stands for.
pub fn model_turns(messages: &[Message]) -> usize {
    messages
        .iter()
        .map(|message| match message {
            Message::Assistant { .. } => 1,
            Message::Summary { turns, .. } => *turns,
            Message::User { .. } | Message::Tool { .. } | Message::Note { .. } => 0,
        })
        .sum()
}

/// A message as stored: which run produced it and when.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HistoryEntry {
    pub run_id: Option<RunId>,
    pub message: Message,
    pub at: Millis,
}

/// A title for a session made from the first prompt's text.
pub fn title_from_prompt(content: &[ContentPart]) -> Option<String> {
    const MAX_CHARS: usize = 60;
    let text = content.iter().find_map(|part| match part {
        ContentPart::Text { text } => Some(text.as_str()),
        ContentPart::ResourceLink { .. } | ContentPart::Resource { .. } => None,
    })?;
    let line = text.lines().map(str::trim).find(|line| !line.is_empty())?;
    let mut title: String = line.chars().take(MAX_CHARS).collect();
    if line.chars().count() > MAX_CHARS {
        title.push('…');
    }
    Some(title)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modes_round_trip_through_their_names() {
        for mode in Mode::ALL {
            assert_eq!(Mode::parse(mode.as_str()), Some(mode));
        }
        assert_eq!(Mode::parse("yolo"), None);
    }

    #[test]
    fn title_takes_the_first_non_empty_line_and_truncates() {
        let content = vec![ContentPart::Text {
            text: "\n  Fix the flaky test in store.rs  \nmore".into(),
        }];
        assert_eq!(
            title_from_prompt(&content).as_deref(),
            Some("Fix the flaky test in store.rs")
        );
        let long = vec![ContentPart::Text {
            text: "x".repeat(100),
        }];
        let title = title_from_prompt(&long).unwrap_or_default();
        assert_eq!(title.chars().count(), 61);
    }
}
