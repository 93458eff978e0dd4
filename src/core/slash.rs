//! Slash commands a person types at a prompt (`/help`, `/mode full`): which
//! ones exist and how a prompt's text names one. Shared by the faces that take
//! typed prompts (ACP, the terminal); each face answers them in its own way.
//! Anything else starting with `/` (a path, say) is not a command.

use super::commands::SessionCommand;
use super::session::ContentPart;

/// A slash command a prompt asked for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SlashCommand {
    /// Answered by the face, without a run.
    Answered(FaceCommand),
    /// A run of its own in the session's queue (`/compact`, `/undo`).
    Queued(SessionCommand),
}

/// A command the face answers itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FaceCommand {
    Help,
    /// `/mode` alone shows the mode; with an argument, switches to it.
    Mode(Option<String>),
    /// `/model` alone lists the models; with an argument, switches to it.
    Model(Option<String>),
    Runs,
    /// `/memory` with what follows it (`core::memory::command`).
    Memory(Option<String>),
    /// `/trust`: run the hooks the workspace brings (`core::hooks`).
    Trust,
}

/// Name, description and input hint of each command, in the order shown.
pub const COMMANDS: [(&str, &str, Option<&str>); 8] = [
    (
        "compact",
        "Summarize the conversation so far to free the context window",
        None,
    ),
    (
        "undo",
        "Revert the file edits of the last turn that made any",
        None,
    ),
    (
        "mode",
        "Show or switch the autonomy mode",
        Some("read_only | supervised | full"),
    ),
    ("model", "Show or switch the model", Some("model name")),
    ("runs", "List this session's recent runs", None),
    (
        "memory",
        "List, search, add, forget or pin what is remembered",
        Some("search WORDS | add [user|workspace|conversation] TEXT | forget ID | pin ID"),
    ),
    (
        "trust",
        "Trust the hooks this workspace brings for other agents",
        None,
    ),
    ("help", "List the commands", None),
];

/// The command a prompt asks for, if it is one: a single text block.
pub fn parse(content: &[ContentPart]) -> Option<SlashCommand> {
    let [ContentPart::Text { text }] = content else {
        return None;
    };
    parse_text(text)
}

/// The command a prompt's text asks for, if it is one.
pub fn parse_text(text: &str) -> Option<SlashCommand> {
    let (name, argument) = split(text)?;
    let argument = argument.map(str::to_owned);
    match name {
        "help" => Some(SlashCommand::Answered(FaceCommand::Help)),
        "mode" => Some(SlashCommand::Answered(FaceCommand::Mode(argument))),
        "model" => Some(SlashCommand::Answered(FaceCommand::Model(argument))),
        "runs" => Some(SlashCommand::Answered(FaceCommand::Runs)),
        "memory" => Some(SlashCommand::Answered(FaceCommand::Memory(argument))),
        "trust" => Some(SlashCommand::Answered(FaceCommand::Trust)),
        "compact" => Some(SlashCommand::Queued(SessionCommand::Compact)),
        "undo" => Some(SlashCommand::Queued(SessionCommand::Undo)),
        _ => None,
    }
}

/// A text's command name (without the slash) and its argument, trimmed and
/// `None` when empty; `None` unless the text starts with `/`.
pub fn split(text: &str) -> Option<(&str, Option<&str>)> {
    let rest = text.trim().strip_prefix('/')?;
    let (name, argument) = match rest.split_once(char::is_whitespace) {
        Some((name, argument)) => (name, Some(argument.trim())),
        None => (rest, None),
    };
    Some((name, argument.filter(|a| !a.is_empty())))
}

/// The `/help` text, in Markdown.
pub fn help() -> String {
    let mut text = "Commands:\n".to_owned();
    for (name, description, hint) in COMMANDS {
        match hint {
            Some(hint) => text.push_str(&format!("- `/{name} [{hint}]`: {description}\n")),
            None => text.push_str(&format!("- `/{name}`: {description}\n")),
        }
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(t: &str) -> Vec<ContentPart> {
        vec![ContentPart::Text { text: t.into() }]
    }

    #[test]
    fn known_commands_are_recognized_with_their_argument() {
        assert_eq!(
            parse(&text("/help")),
            Some(SlashCommand::Answered(FaceCommand::Help))
        );
        assert_eq!(
            parse(&text("  /compact \n")),
            Some(SlashCommand::Queued(SessionCommand::Compact))
        );
        assert_eq!(
            parse(&text("/mode  full ")),
            Some(SlashCommand::Answered(FaceCommand::Mode(Some(
                "full".into()
            ))))
        );
        assert_eq!(
            parse(&text("/model")),
            Some(SlashCommand::Answered(FaceCommand::Model(None)))
        );
        assert_eq!(
            parse(&text("/undo")),
            Some(SlashCommand::Queued(SessionCommand::Undo))
        );
    }

    #[test]
    fn other_slashes_are_no_command() {
        assert_eq!(parse(&text("/etc/hosts looks wrong")), None);
        assert_eq!(parse(&text("/unknown")), None);
        assert_eq!(parse(&text("please /help")), None);
        let two = vec![
            ContentPart::Text {
                text: "/help".into(),
            },
            ContentPart::Text { text: "x".into() },
        ];
        assert_eq!(parse(&two), None);
    }

    #[test]
    fn split_names_the_command_and_its_argument() {
        assert_eq!(split("/new"), Some(("new", None)));
        assert_eq!(split(" /mode  full \n"), Some(("mode", Some("full"))));
        assert_eq!(split("/x   "), Some(("x", None)));
        assert_eq!(split("hello"), None);
    }
}
