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

/// What the configuration (or a session) says about the system prompt
/// (`core::prompt`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PromptSettings {
    /// Replaces the built-in prompt.
    pub system_prompt: Option<String>,
    /// Appended to the prompt, built-in or replaced.
    pub instructions: Option<String>,
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
    /// How hard the model thinks (its reasoning effort), when the session
    /// chose one of its provider's levels; `None`: the provider's default.
    pub thought_level: Option<String>,
    pub mode: Mode,
    /// A short title taken from the first prompt.
    pub title: Option<String>,
    /// MCP server declarations the client passed, kept verbatim for the tools layer.
    pub mcp_servers: serde_json::Value,
    pub created_at: Millis,
    pub updated_at: Millis,
    /// Closed sessions are kept on disk but refuse new prompts until loaded again.
    pub closed: bool,
    /// The conversation the session belongs to beyond itself (a chat across
    /// its `/new` sessions): the key of its conversation memory; `None`: the
    /// session is its own conversation.
    pub conversation: Option<String>,
    /// The session's own `system_prompt` and `instructions`, over the
    /// configured ones (`core::prompt`).
    pub prompt: PromptSettings,
    /// For a subagent's session: the call that delegated its task. Such
    /// sessions are left out of listings.
    pub parent: Option<SessionParent>,
}

/// The run and tool call (`delegate`) a subagent's session works for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SessionParent {
    pub session: SessionId,
    pub run: RunId,
    pub call: String,
}

/// Where a session came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Origin {
    Editor,
    Headless,
    Http,
    Channel,
    /// `pincer chat`, a person at a terminal.
    Terminal,
    /// A subagent: another run delegated a task to it (`delegate`).
    Subagent,
    /// A schedule's run (`core::schedule`): nobody is watching.
    Schedule,
}

impl Origin {
    /// Every origin, in the order of their declaration.
    pub const ALL: [Origin; 7] = [
        Origin::Editor,
        Origin::Headless,
        Origin::Http,
        Origin::Channel,
        Origin::Terminal,
        Origin::Subagent,
        Origin::Schedule,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Origin::Editor => "editor",
            Origin::Headless => "headless",
            Origin::Http => "http",
            Origin::Channel => "channel",
            Origin::Terminal => "terminal",
            Origin::Subagent => "subagent",
            Origin::Schedule => "schedule",
        }
    }

    pub fn parse(value: &str) -> Option<Self> {
        Origin::ALL
            .into_iter()
            .find(|origin| origin.as_str() == value)
    }
}

/// The autonomy mode of a session: how much the agent may do without asking.
/// (`delegate` takes one: the schema the model sees lists the names only.)
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, schemars::JsonSchema,
)]
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

    /// The narrower of two modes (`read_only` < `supervised` < `full`).
    pub fn narrower(self, other: Mode) -> Mode {
        let rank = |mode: Mode| match mode {
            Mode::ReadOnly => 0,
            Mode::Supervised => 1,
            Mode::Full => 2,
        };
        if rank(other) < rank(self) {
            other
        } else {
            self
        }
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
    /// An image: one of [`IMAGE_TYPES`], at most [`MAX_IMAGE_BYTES`] decoded.
    /// Stored as given, so a prompt's image is on the tape (and in the
    /// session's history) as base64, a third larger than the image.
    Image {
        mime_type: String,
        /// The image bytes, base64 (standard alphabet, padded).
        data: String,
        /// Where the image came from, when the client said.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        uri: Option<String>,
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
            ContentPart::Image { .. } => format!("[{}]", self.image_summary().unwrap_or_default()),
        }
    }

    pub fn is_image(&self) -> bool {
        matches!(self, ContentPart::Image { .. })
    }

    /// `image/png, 12.3 KB, file:///a.png` for an image part: what a text-only
    /// view shows in its place.
    pub fn image_summary(&self) -> Option<String> {
        let ContentPart::Image {
            mime_type,
            data,
            uri,
        } = self
        else {
            return None;
        };
        let mut summary = format!("image {mime_type}, {}", human_bytes(decoded_len(data)));
        if let Some(uri) = uri {
            summary.push_str(&format!(", {uri}"));
        }
        Some(summary)
    }
}

/// The image types a prompt may carry: the ones both OpenAI-compatible and
/// Anthropic APIs take.
pub const IMAGE_TYPES: [&str; 4] = ["image/png", "image/jpeg", "image/gif", "image/webp"];

/// The largest image a prompt may carry, decoded. An ACP line (16 MiB) holds
/// about 12 MiB of image as base64; Anthropic takes at most 5 MB per image and
/// OpenAI 20 MB, so a bigger image would fail at the provider anyway on one of
/// them, after costing a tape write of its base64 twice over.
pub const MAX_IMAGE_BYTES: usize = 10 * 1024 * 1024;

/// Why an image part is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ImageError {
    #[error(
        "image type {0:?} is not supported; send image/png, image/jpeg, image/gif or image/webp"
    )]
    UnsupportedType(String),
    #[error("image data is not valid base64: {0}")]
    NotBase64(String),
    #[error("image of {bytes} bytes exceeds the limit of {limit} bytes (10 MiB) per image", limit = MAX_IMAGE_BYTES)]
    TooLarge { bytes: usize },
    #[error("image data does not look like {0} (its first bytes say otherwise)")]
    WrongType(String),
    #[error("not a PNG, JPEG, GIF or WebP image")]
    Unrecognized,
}

/// An image file's bytes as a prompt part: the type from its first bytes,
/// checked as every face checks images (`pincer run --image`, a chat's
/// attached photo).
pub fn image_part(bytes: &[u8], uri: Option<String>) -> Result<ContentPart, ImageError> {
    use base64::Engine as _;
    let mime_type = sniff_image_type(bytes).ok_or(ImageError::Unrecognized)?;
    if bytes.len() > MAX_IMAGE_BYTES {
        return Err(ImageError::TooLarge { bytes: bytes.len() });
    }
    let data = base64::engine::general_purpose::STANDARD.encode(bytes);
    check_image(mime_type, &data)?;
    Ok(ContentPart::Image {
        mime_type: mime_type.to_owned(),
        data,
        uri,
    })
}

/// Checks an image the way a provider would: a supported type, base64 that
/// decodes, within the size limit, and bytes that start like the type says.
pub fn check_image(mime_type: &str, data: &str) -> Result<(), ImageError> {
    use base64::Engine as _;
    let mime = mime_type.trim().to_ascii_lowercase();
    if !IMAGE_TYPES.contains(&mime.as_str()) || mime != mime_type {
        return Err(ImageError::UnsupportedType(mime_type.to_owned()));
    }
    // Refused before decoding: no allocation for a payload that is too big.
    let estimated = decoded_len(data);
    if estimated > MAX_IMAGE_BYTES {
        return Err(ImageError::TooLarge { bytes: estimated });
    }
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(data)
        .map_err(|err| ImageError::NotBase64(err.to_string()))?;
    if bytes.len() > MAX_IMAGE_BYTES {
        return Err(ImageError::TooLarge { bytes: bytes.len() });
    }
    let signature_ok = match mime.as_str() {
        "image/png" => bytes.starts_with(b"\x89PNG\r\n\x1a\n"),
        "image/jpeg" => bytes.starts_with(&[0xFF, 0xD8, 0xFF]),
        "image/gif" => bytes.starts_with(b"GIF87a") || bytes.starts_with(b"GIF89a"),
        "image/webp" => bytes.len() >= 12 && &bytes[..4] == b"RIFF" && &bytes[8..12] == b"WEBP",
        _ => false,
    };
    if !signature_ok {
        return Err(ImageError::WrongType(mime));
    }
    Ok(())
}

/// The type of an image judged by its first bytes, for faces that read image
/// files (`pincer run --image`).
pub fn sniff_image_type(bytes: &[u8]) -> Option<&'static str> {
    if bytes.starts_with(b"\x89PNG\r\n\x1a\n") {
        Some("image/png")
    } else if bytes.starts_with(&[0xFF, 0xD8, 0xFF]) {
        Some("image/jpeg")
    } else if bytes.starts_with(b"GIF87a") || bytes.starts_with(b"GIF89a") {
        Some("image/gif")
    } else if bytes.len() >= 12 && &bytes[..4] == b"RIFF" && &bytes[8..12] == b"WEBP" {
        Some("image/webp")
    } else {
        None
    }
}

/// The decoded size of base64 text, from its length (exact for padded base64).
pub fn decoded_len(data: &str) -> usize {
    let padding = data.bytes().rev().take_while(|b| *b == b'=').count().min(2);
    (data.len() / 4 * 3 + (data.len() % 4 * 3 / 4)).saturating_sub(padding)
}

/// `512 B`, `1.5 KiB`, `2.0 MiB`.
pub fn human_bytes(bytes: usize) -> String {
    if bytes < 1024 {
        format!("{bytes} B")
    } else if bytes < 1024 * 1024 {
        format!("{:.1} KiB", bytes as f64 / 1024.0)
    } else {
        format!("{:.1} MiB", bytes as f64 / (1024.0 * 1024.0))
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

/// A title for a session made from the first prompt's text, its first line
/// passed through `redact` before it is cut (so a cut never leaves part of a
/// secret that the whole line would have had redacted). A tag around the whole
/// text is the client's wrapping, not the person's words, and is left out
/// (avante.nvim sends each prompt as `<previous_user_message>…</previous_user_message>`).
pub fn title_from_prompt(
    content: &[ContentPart],
    redact: impl FnOnce(&str) -> String,
) -> Option<String> {
    const MAX_CHARS: usize = 60;
    let text = content.iter().find_map(|part| match part {
        ContentPart::Text { text } => Some(text.as_str()),
        ContentPart::ResourceLink { .. }
        | ContentPart::Resource { .. }
        | ContentPart::Image { .. } => None,
    })?;
    let line = redact(
        unwrapped(text)
            .lines()
            .map(str::trim)
            .find(|line| !line.is_empty())?,
    );
    let line = line.as_str();
    let mut title: String = line.chars().take(MAX_CHARS).collect();
    if line.chars().count() > MAX_CHARS {
        title.push('…');
    }
    Some(title)
}

/// The text inside the tags that wrap all of it (`<name>…</name>`, nested
/// too), or the text when no tag does.
fn unwrapped(text: &str) -> &str {
    let mut text = text.trim();
    loop {
        let Some((name, rest)) = text
            .strip_prefix('<')
            .and_then(|tagged| tagged.split_once('>'))
        else {
            return text;
        };
        let is_name = name.starts_with(|c: char| c.is_ascii_alphabetic())
            && name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.' | ':'));
        let inner = rest
            .strip_suffix('>')
            .and_then(|rest| rest.strip_suffix(name))
            .and_then(|rest| rest.strip_suffix("</"));
        match inner {
            Some(inner) if is_name => text = inner.trim(),
            _ => return text,
        }
    }
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
            title_from_prompt(&content, str::to_owned).as_deref(),
            Some("Fix the flaky test in store.rs")
        );
        let long = vec![ContentPart::Text {
            text: "x".repeat(100),
        }];
        let title = title_from_prompt(&long, str::to_owned).unwrap_or_default();
        assert_eq!(title.chars().count(), 61);
    }

    #[test]
    fn a_tag_around_the_whole_prompt_is_not_part_of_the_title() {
        let title = |text: &str| {
            title_from_prompt(
                &[
                    ContentPart::Text { text: text.into() },
                    ContentPart::Text {
                        text: "<system_context>Continuing from previous session with 1 recent user messages</system_context>".into(),
                    },
                ],
                str::to_owned,
            )
        };
        // What avante.nvim sends as a session's first prompt.
        assert_eq!(
            title("<previous_user_message>Say hello</previous_user_message>").as_deref(),
            Some("Say hello")
        );
        assert_eq!(
            title("<previous_user_message>\n  Fix the test\nin store.rs\n</previous_user_message>")
                .as_deref(),
            Some("Fix the test")
        );
        assert_eq!(title("<a><b-c>nested</b-c></a>").as_deref(), Some("nested"));
        // Tags that do not wrap the whole text, or are not tags, stay.
        for kept in [
            "<b>bold</b> and more",
            "<b>not closed",
            "<b>mismatched</i>",
            "x <b>inside</b>",
            "<3 is not a tag </3>",
            "<a b>attributes</a b>",
        ] {
            assert_eq!(title(kept).as_deref(), Some(kept));
        }
        assert_eq!(title("<empty></empty>"), None);
    }

    fn b64(bytes: &[u8]) -> String {
        use base64::Engine as _;
        base64::engine::general_purpose::STANDARD.encode(bytes)
    }

    const PNG: &[u8] = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR";

    #[test]
    fn images_are_checked_for_type_encoding_size_and_signature() {
        assert_eq!(check_image("image/png", &b64(PNG)), Ok(()));
        assert_eq!(
            check_image("image/bmp", &b64(PNG)),
            Err(ImageError::UnsupportedType("image/bmp".into()))
        );
        assert!(matches!(
            check_image("image/png", "not base64!"),
            Err(ImageError::NotBase64(_))
        ));
        assert_eq!(
            check_image("image/jpeg", &b64(PNG)),
            Err(ImageError::WrongType("image/jpeg".into()))
        );
        let huge = "A".repeat((MAX_IMAGE_BYTES / 3 + 1) * 4);
        let err = check_image("image/png", &huge).unwrap_err();
        assert!(matches!(err, ImageError::TooLarge { .. }), "{err}");
        assert!(err.to_string().contains("10485760 bytes"), "{err}");
    }

    #[test]
    fn decoded_length_is_exact_for_padded_base64() {
        for n in 0..40 {
            let data = vec![7u8; n];
            assert_eq!(decoded_len(&b64(&data)), n, "length {n}");
        }
    }

    #[test]
    fn images_serialize_in_a_plain_tagged_form_and_summarize_as_text() {
        let part = ContentPart::Image {
            mime_type: "image/png".into(),
            data: b64(PNG),
            uri: None,
        };
        let json = serde_json::to_value(&part).unwrap();
        assert_eq!(
            json,
            serde_json::json!({"type": "image", "mime_type": "image/png", "data": b64(PNG)})
        );
        assert_eq!(serde_json::from_value::<ContentPart>(json).unwrap(), part);
        assert_eq!(part.to_model_text(), "[image image/png, 16 B]");
        assert_eq!(sniff_image_type(PNG), Some("image/png"));
        assert_eq!(sniff_image_type(b"hello"), None);
    }
}
