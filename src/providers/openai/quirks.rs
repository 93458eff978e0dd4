//! Quirks of local models: a leading `<think>` block in the content is thinking, and tool calls written as `<tool_call>` text are parsed into calls (only for tools the turn offered).

use super::*;

pub(super) const THINK_OPEN: &str = "<think>";
pub(super) const THINK_CLOSE: &str = "</think>";

/// The length of the longest tail of `text` that could begin `tag`: held back
/// until the next delta shows whether the tag follows.
pub(super) fn partial_tag_len(text: &str, tag: &str) -> usize {
    (1..tag.len())
        .rev()
        .find(|&n| text.ends_with(&tag[..n]))
        .unwrap_or(0)
}

/// Splits a leading `<think>…</think>` block out of the content: reasoning
/// models served without a reasoning parser (vLLM, LM Studio) write their
/// thinking there instead of in `reasoning_content`. Only a block at the very
/// start counts, so a model writing about the tag later is shown as written.
#[derive(Default)]
pub(super) enum ThinkTags {
    /// Not yet known whether the content opens with `<think>`.
    #[default]
    Undecided,
    Thinking,
    Text,
}

/// The state and the text held back with it.
#[derive(Default)]
pub(super) struct ThinkSplit {
    pub(super) state: ThinkTags,
    pub(super) held: String,
}

impl ThinkSplit {
    /// Takes a content delta; returns the thought and the text to show now.
    pub(super) fn push(&mut self, text: &str) -> (String, String) {
        self.held.push_str(text);
        let mut thought = String::new();
        let mut shown = String::new();
        if let ThinkTags::Undecided = self.state {
            let start = self.held.trim_start();
            if let Some(rest) = start.strip_prefix(THINK_OPEN) {
                self.held = rest.to_owned();
                self.state = ThinkTags::Thinking;
            } else if THINK_OPEN.starts_with(start) {
                return (thought, shown);
            } else {
                self.state = ThinkTags::Text;
            }
        }
        match self.state {
            ThinkTags::Thinking => {
                if let Some(end) = self.held.find(THINK_CLOSE) {
                    thought.push_str(&self.held[..end]);
                    shown.push_str(self.held[end + THINK_CLOSE.len()..].trim_start());
                    self.held.clear();
                    self.state = ThinkTags::Text;
                } else {
                    let cut = self.held.len() - partial_tag_len(&self.held, THINK_CLOSE);
                    thought.push_str(&self.held[..cut]);
                    self.held.drain(..cut);
                }
            }
            ThinkTags::Text | ThinkTags::Undecided => {
                shown.push_str(&std::mem::take(&mut self.held))
            }
        }
        (thought, shown)
    }

    /// The content ended: whatever is held, as thought or text.
    pub(super) fn finish(&mut self) -> (String, String) {
        let held = std::mem::take(&mut self.held);
        match self.state {
            ThinkTags::Thinking => (held, String::new()),
            ThinkTags::Undecided | ThinkTags::Text => (String::new(), held),
        }
    }
}

pub(super) const OPEN_TAG: &str = "<tool_call>";
pub(super) const CLOSE_TAG: &str = "</tool_call>";

/// Picks `<tool_call>{"name": ..., "arguments": ...}</tool_call>` blocks out of
/// streamed text, as small local models write tool calls. Text that might be
/// the start of a block is held back until it is clear it is not, so the block
/// never reaches the user as text. Only active when tools were offered, and a
/// block naming no offered tool is shown as the text it was.
pub(super) struct TextCalls {
    pub(super) tool_names: Vec<String>,
    /// Text not yet shown: a possible tag start, or a block's body.
    pub(super) held: String,
    pub(super) in_block: bool,
    pub(super) calls: Vec<(String, Value)>,
}

impl TextCalls {
    pub(super) fn new(tool_names: Vec<String>) -> Self {
        Self {
            tool_names,
            held: String::new(),
            in_block: false,
            calls: Vec::new(),
        }
    }

    /// Takes a text delta; returns the part that can be shown now.
    pub(super) fn push(&mut self, text: &str) -> String {
        if self.tool_names.is_empty() {
            return text.to_owned();
        }
        self.held.push_str(text);
        let mut shown = String::new();
        loop {
            if self.in_block {
                let Some(end) = self.held.find(CLOSE_TAG) else {
                    break;
                };
                let body = self.held[..end].to_owned();
                self.held.drain(..end + CLOSE_TAG.len());
                self.in_block = false;
                match self.parse_block(&body) {
                    Some(call) => self.calls.push(call),
                    None => {
                        shown.push_str(OPEN_TAG);
                        shown.push_str(&body);
                        shown.push_str(CLOSE_TAG);
                    }
                }
            } else if let Some(start) = self.held.find(OPEN_TAG) {
                shown.push_str(&self.held[..start]);
                self.held.drain(..start + OPEN_TAG.len());
                self.in_block = true;
            } else {
                let cut = self.held.len() - partial_tag_len(&self.held, OPEN_TAG);
                shown.push_str(&self.held[..cut]);
                self.held.drain(..cut);
                break;
            }
        }
        shown
    }

    /// The turn ended: the held text and the calls found.
    pub(super) fn finish(&mut self) -> (String, Vec<(String, Value)>) {
        let mut rest = String::new();
        if self.in_block {
            // An unclosed block is shown as written rather than guessed at.
            rest.push_str(OPEN_TAG);
            self.in_block = false;
        }
        rest.push_str(&std::mem::take(&mut self.held));
        (rest, std::mem::take(&mut self.calls))
    }

    pub(super) fn parse_block(&self, body: &str) -> Option<(String, Value)> {
        let value: Value = serde_json::from_str(body.trim()).ok()?;
        let name = value["name"].as_str()?;
        if !self.tool_names.iter().any(|known| known == name) {
            return None;
        }
        let arguments = match value.get("arguments").or_else(|| value.get("parameters")) {
            None | Some(Value::Null) => json!({}),
            // Some models write the arguments as a JSON string.
            Some(Value::String(text)) => serde_json::from_str(text).ok()?,
            Some(other) => other.clone(),
        };
        Some((name.to_owned(), arguments))
    }
}
