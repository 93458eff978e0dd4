//! What a chat's attached files become in a prompt: images sent to a model
//! that takes images (the editors' check), text files embedded as
//! resources, anything else named with its size and why it was not sent.
//! Bytes come through the adapter's download API (`Adapter::fetch`).

use super::Hub;
use crate::channels::FetchError;
use crate::core::channel::{Attachment, ChannelMessage};
use crate::core::ids::SessionId;
use crate::core::session::{ContentPart, MAX_IMAGE_BYTES, human_bytes, image_part};

/// The largest text file embedded in a prompt; a bigger one is named.
pub(super) const MAX_TEXT_BYTES: u64 = 256 * 1024;

/// Extensions of files read as text when the platform gives no text type.
const TEXT_EXTENSIONS: &[&str] = &[
    "txt",
    "md",
    "markdown",
    "rst",
    "csv",
    "tsv",
    "json",
    "jsonl",
    "yaml",
    "yml",
    "toml",
    "xml",
    "html",
    "css",
    "js",
    "ts",
    "tsx",
    "jsx",
    "py",
    "rs",
    "go",
    "java",
    "kt",
    "c",
    "h",
    "cc",
    "cpp",
    "hpp",
    "cs",
    "rb",
    "php",
    "sh",
    "bash",
    "zsh",
    "sql",
    "lua",
    "swift",
    "diff",
    "patch",
    "log",
    "ini",
    "cfg",
    "conf",
    "env",
    "tf",
    "proto",
    "graphql",
    "vue",
    "svelte",
    "ex",
    "exs",
    "hs",
    "ml",
    "scala",
    "r",
    "jl",
    "dart",
    "zig",
    "nix",
    "dockerfile",
    "makefile",
];

/// How a file is treated, judged by what the platform says of it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Kind {
    Image,
    Text,
    Other,
}

pub(super) fn kind_of(attachment: &Attachment) -> Kind {
    let mime = attachment
        .mime_type
        .as_deref()
        .unwrap_or_default()
        .to_ascii_lowercase();
    if attachment.kind == "photo" || mime.starts_with("image/") {
        return Kind::Image;
    }
    let textual_type = mime.starts_with("text/")
        || matches!(
            mime.as_str(),
            "application/json"
                | "application/xml"
                | "application/toml"
                | "application/x-yaml"
                | "application/yaml"
                | "application/x-sh"
                | "application/javascript"
                | "application/sql"
        );
    let extension = attachment
        .name
        .as_deref()
        .and_then(|name| name.rsplit_once('.').map(|(_, ext)| ext).or(Some(name)))
        .map(str::to_ascii_lowercase);
    let textual_name = extension.is_some_and(|ext| TEXT_EXTENSIONS.contains(&ext.as_str()));
    if textual_type || (mime.is_empty() || mime == "application/octet-stream") && textual_name {
        Kind::Text
    } else {
        Kind::Other
    }
}

/// The name a prompt gives a file: its own, else its kind.
fn label(attachment: &Attachment) -> String {
    match &attachment.name {
        Some(name) => name.chars().take(120).collect(),
        None => attachment.kind.clone(),
    }
}

/// `document notes.pdf`, or `voice` for a file without a name.
fn describe(attachment: &Attachment) -> String {
    match &attachment.name {
        Some(_) => format!("{} {}", attachment.kind, label(attachment)),
        None => attachment.kind.clone(),
    }
}

/// `[attached document notes.pdf, 1.2 MiB: not sent (…)]`.
fn named(attachment: &Attachment, why: &str) -> String {
    let mut line = format!("[attached {}", describe(attachment));
    if let Some(size) = attachment.size {
        line.push_str(&format!(
            ", {}",
            human_bytes(usize::try_from(size).unwrap_or(usize::MAX))
        ));
    }
    line.push_str(&format!(": {why}]"));
    line
}

fn fetch_failure(err: &FetchError) -> String {
    format!("not sent ({err})")
}

/// What became of one attached file: a part of the prompt, or why not.
pub(super) type Taken = Result<ContentPart, String>;

/// The prompt of coalesced messages, given what became of each one's files
/// (`taken[m][a]` for attachment `a` of message `m`): each message's text
/// with its files noted, the messages a paragraph apart, then the files
/// that are parts.
pub(super) fn compose(messages: &[ChannelMessage], taken: Vec<Vec<Taken>>) -> Vec<ContentPart> {
    let mut text: Vec<String> = Vec::new();
    let mut parts: Vec<ContentPart> = Vec::new();
    for (message, taken) in messages.iter().zip(taken) {
        let mut paragraph = super::dispatch::without_bot_name(&message.body);
        for (attachment, outcome) in message.attachments.iter().zip(taken) {
            let note = match outcome {
                Ok(part) => {
                    parts.push(part);
                    format!("[attached {}: below]", describe(attachment))
                }
                Err(why) => named(attachment, &why),
            };
            if !paragraph.is_empty() {
                paragraph.push('\n');
            }
            paragraph.push_str(&note);
        }
        if !paragraph.is_empty() {
            text.push(paragraph);
        }
    }
    let mut content = vec![ContentPart::Text {
        text: text.join("\n\n"),
    }];
    content.extend(parts);
    content
}

impl Hub {
    /// The prompt a sender's coalesced messages make ([`compose`]), their
    /// files fetched one after another.
    pub(super) async fn prompt_content(
        &self,
        session: &SessionId,
        messages: &[ChannelMessage],
    ) -> Vec<ContentPart> {
        let takes_images = match self.runtime.session(session).await {
            Ok(session) => self
                .runtime
                .accepts_images(&session.provider, &session.model),
            Err(_) => false,
        };
        let mut taken = Vec::with_capacity(messages.len());
        for message in messages {
            let mut outcomes = Vec::with_capacity(message.attachments.len());
            for attachment in &message.attachments {
                outcomes.push(self.take(attachment, takes_images).await);
            }
            taken.push(outcomes);
        }
        compose(messages, taken)
    }

    /// A file's bytes through the adapter, at most `limit`: one the
    /// platform says is larger is not downloaded at all.
    async fn fetch(&self, attachment: &Attachment, limit: u64) -> Result<Vec<u8>, String> {
        let fetched = if attachment.size.is_some_and(|size| size > limit) {
            Err(FetchError::TooLarge { limit })
        } else {
            self.adapter.fetch(attachment, limit).await
        };
        fetched.map_err(|err| fetch_failure(&err))
    }

    /// One file as a prompt part, or why it stays a name.
    async fn take(&self, attachment: &Attachment, takes_images: bool) -> Taken {
        let uri = format!("attachment:{}", label(attachment));
        match kind_of(attachment) {
            Kind::Image if !takes_images => {
                Err("not sent (the session's model does not take images)".to_owned())
            }
            Kind::Image => {
                let bytes = self.fetch(attachment, MAX_IMAGE_BYTES as u64).await?;
                image_part(&bytes, Some(uri)).map_err(|err| format!("not sent ({err})"))
            }
            Kind::Text => {
                let bytes = self.fetch(attachment, MAX_TEXT_BYTES).await?;
                let text =
                    String::from_utf8(bytes).map_err(|_| "not sent (not UTF-8 text)".to_owned())?;
                Ok(ContentPart::Resource {
                    uri,
                    text,
                    mime_type: attachment.mime_type.clone(),
                })
            }
            Kind::Other => Err("not sent (only images and text files reach the model)".to_owned()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(kind: &str, name: Option<&str>, mime: Option<&str>) -> Attachment {
        Attachment {
            kind: kind.into(),
            name: name.map(Into::into),
            reference: "f".into(),
            size: Some(2048),
            mime_type: mime.map(Into::into),
        }
    }

    #[test]
    fn files_are_judged_by_type_then_by_name() {
        assert_eq!(kind_of(&file("photo", None, None)), Kind::Image);
        assert_eq!(
            kind_of(&file("document", Some("a.png"), Some("image/png"))),
            Kind::Image
        );
        assert_eq!(
            kind_of(&file("document", Some("a.txt"), Some("text/plain"))),
            Kind::Text
        );
        assert_eq!(
            kind_of(&file("document", Some("main.rs"), None)),
            Kind::Text
        );
        assert_eq!(
            kind_of(&file(
                "document",
                Some("x.json"),
                Some("application/octet-stream")
            )),
            Kind::Text
        );
        assert_eq!(
            kind_of(&file("document", Some("Makefile"), None)),
            Kind::Text
        );
        assert_eq!(
            kind_of(&file("document", Some("a.pdf"), Some("application/pdf"))),
            Kind::Other
        );
        // A binary type wins over a textual name.
        assert_eq!(
            kind_of(&file("document", Some("a.txt"), Some("application/zip"))),
            Kind::Other
        );
        assert_eq!(
            kind_of(&file("voice", None, Some("audio/ogg"))),
            Kind::Other
        );
    }

    #[test]
    fn a_file_left_out_is_named_with_its_size_and_why() {
        assert_eq!(
            named(&file("document", Some("a.pdf"), None), "not sent (x)"),
            "[attached document a.pdf, 2.0 KiB: not sent (x)]"
        );
        assert_eq!(
            named(
                &Attachment {
                    kind: "voice".into(),
                    ..Default::default()
                },
                "why"
            ),
            "[attached voice: why]"
        );
    }

    #[test]
    fn coalesced_messages_are_one_prompt_with_their_files_noted_then_attached() {
        let message = |body: &str, attachments: Vec<Attachment>| ChannelMessage {
            attachments,
            ..super::super::testing::message(body, body)
        };
        let photo = Attachment {
            kind: "photo".into(),
            ..Default::default()
        };
        let notes = file("document", Some("notes.md"), Some("text/markdown"));
        let pdf = file("document", Some("a.pdf"), Some("application/pdf"));
        let messages = [
            message("look at this", vec![photo, notes]),
            message("/review@bot and fix it", vec![pdf]),
            message("", Vec::new()),
        ];
        let resource = ContentPart::Resource {
            uri: "attachment:notes.md".into(),
            text: "# notes".into(),
            mime_type: Some("text/markdown".into()),
        };
        let content = compose(
            &messages,
            vec![
                vec![
                    Err("not sent (the session's model does not take images)".into()),
                    Ok(resource.clone()),
                ],
                vec![Err(
                    "not sent (only images and text files reach the model)".into()
                )],
                Vec::new(),
            ],
        );
        assert_eq!(
            content,
            vec![
                ContentPart::Text {
                    text: "look at this\n[attached photo: not sent (the session's model does not take images)]\n[attached document notes.md: below]\n\n/review and fix it\n[attached document a.pdf, 2.0 KiB: not sent (only images and text files reach the model)]".into()
                },
                resource,
            ]
        );
    }
}
