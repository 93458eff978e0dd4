//! Slash commands a person types at a prompt (`/help`, `/mode full`): which
//! ones exist, how a prompt's text names one, and what a command the face
//! answers comes to ([`Answer`], computed by `Runtime::answer`) and its words
//! in Markdown. Shared by the faces that take typed prompts (ACP, the
//! terminal); each shows the answer its own way (its run lines, its line
//! ends, its own commands in `/help`). Anything else starting with `/` (a
//! path, say) is not a command.

use super::commands::SessionCommand;
use super::quote::quote;
use super::run::RunInfo;
use super::session::{ContentPart, Mode, Session};
use super::skills::{Invocable, InvocableKind};

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
    /// `/trust`: trust the workspace (its hooks, skills and custom commands).
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
        "Trust this workspace: its hooks, skills and custom commands",
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
    super::skills::split_slash(text)
}

/// The `/help` text, in Markdown: the built-in commands, then the skills
/// and custom commands the session can run by name (`invocable`).
pub fn help(invocable: &[Invocable]) -> String {
    let mut text = "Commands:\n".to_owned();
    for (name, description, hint) in COMMANDS {
        text.push_str(&help_line(name, description, hint));
    }
    text.push_str(&invocable_help(invocable));
    text
}

/// The lines of `/help` naming the skills and custom commands, with `/skill`
/// when there is a skill; empty without any.
pub fn invocable_help(invocable: &[Invocable]) -> String {
    if invocable.is_empty() {
        return String::new();
    }
    let mut text = "\nSkills and custom commands:\n".to_owned();
    for (usage, description) in invocable_usage(invocable) {
        text.push_str(&format!("- `{usage}`: {description}\n"));
    }
    text
}

/// Each skill and custom command as `/help` names it, `(usage,
/// description)`: `/NAME [hint]` and the description's first line, then
/// `/skill` while there is a skill. For a face that words `/help` in plain
/// text (the chat).
pub fn invocable_usage(invocable: &[Invocable]) -> Vec<(String, String)> {
    let mut lines: Vec<(String, String)> = invocable
        .iter()
        .map(|item| {
            (
                usage(&item.name, item.hint.as_deref()),
                item.description
                    .lines()
                    .next()
                    .unwrap_or_default()
                    .to_owned(),
            )
        })
        .collect();
    if let Some((name, description, hint)) = skill_command(invocable) {
        lines.push((usage(name, Some(hint)), description.to_owned()));
    }
    lines
}

/// `/skill NAME`, offered while the session has a skill.
pub fn skill_command(
    invocable: &[Invocable],
) -> Option<(&'static str, &'static str, &'static str)> {
    invocable
        .iter()
        .any(|item| item.kind == InvocableKind::Skill)
        .then_some((
            "skill",
            "Run a prompt with a skill active",
            "NAME [request]",
        ))
}

fn help_line(name: &str, description: &str, hint: Option<&str>) -> String {
    format!("- `{}`: {description}\n", usage(name, hint))
}

/// `/NAME [hint]`, or `/NAME` without a hint.
fn usage(name: &str, hint: Option<&str>) -> String {
    match hint {
        Some(hint) => format!("/{name} [{hint}]"),
        None => format!("/{name}"),
    }
}

/// Most runs `/runs` lists.
pub const RUNS_SHOWN: usize = 10;

/// What a command the face answers comes to, as data.
#[derive(Debug, Clone, PartialEq)]
pub enum Answer {
    /// `/help`: the commands of [`COMMANDS`] and the session's skills and
    /// custom commands.
    Help(Vec<Invocable>),
    /// `/mode`: the session's mode.
    Mode(Mode),
    /// `/mode NAME`: the session, switched to it.
    ModeSet(Session),
    /// `/mode NAME` for a name that is no mode.
    NotAMode(String),
    /// `/model`: the session's `provider/model` and the configured choices.
    Model {
        current: String,
        choices: Vec<String>,
    },
    /// `/model NAME`: the session, switched to it.
    ModelSet(Session),
    /// `/model NAME` for no configured model, and what is available.
    NotAModel { model: String, available: String },
    /// `/runs`: the newest runs (at most [`RUNS_SHOWN`]), newest first,
    /// and how many the session has.
    Runs { newest: Vec<RunInfo>, total: usize },
    /// `/memory` and `/trust`: worded where they were done.
    Text(String),
}

impl Answer {
    /// The answer in Markdown, each run in the line `run_line` words it. A
    /// sentence has no line end; a list ends each item with one.
    pub fn markdown(&self, run_line: impl Fn(&RunInfo) -> String) -> String {
        match self {
            Answer::Help(invocable) => help(invocable),
            Answer::Mode(mode) => {
                let modes: Vec<String> = Mode::ALL
                    .iter()
                    .map(|m| {
                        let current = if m == mode { "current: " } else { "" };
                        format!("`{}` ({current}{})", m.as_str(), m.description())
                    })
                    .collect();
                format!(
                    "Mode: {} (`{}`). Modes: {}.",
                    mode.title(),
                    mode.as_str(),
                    modes.join("; ")
                )
            }
            Answer::ModeSet(session) => format!("Mode set to {}.", session.mode.title()),
            Answer::NotAMode(value) => format!(
                "`{}` is not a mode; use read_only, supervised or full.",
                quote(value)
            ),
            Answer::Model { current, choices } => format!(
                "Model: `{current}`. Available: {}.",
                if choices.is_empty() {
                    "none configured".to_owned()
                } else {
                    let quoted: Vec<String> = choices
                        .iter()
                        .map(|c| {
                            let current = if *c == *current { " (current)" } else { "" };
                            format!("`{c}`{current}")
                        })
                        .collect();
                    quoted.join(", ")
                }
            ),
            Answer::ModelSet(session) => {
                format!("Model set to `{}/{}`.", session.provider, session.model)
            }
            Answer::NotAModel { model, available } => format!(
                "`{}` is not a configured model; available: {available}.",
                quote(model)
            ),
            Answer::Runs { newest, .. } if newest.is_empty() => {
                "No runs in this session yet.".to_owned()
            }
            Answer::Runs { newest, total } => {
                let mut text = format!("Last {} of {total} run(s), newest first:\n", newest.len());
                for run in newest {
                    text.push_str(&format!("- {}\n", run_line(run)));
                }
                text
            }
            Answer::Text(text) => text.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(t: &str) -> Vec<ContentPart> {
        vec![ContentPart::Text { text: t.into() }]
    }

    #[test]
    fn every_command_is_a_built_in_name_no_skill_takes() {
        let names: Vec<&str> = COMMANDS.iter().map(|(name, _, _)| *name).collect();
        assert_eq!(
            names,
            super::super::skills::BUILT_IN_COMMANDS[..COMMANDS.len()]
        );
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

    fn runs(count: usize) -> Vec<RunInfo> {
        (0..count)
            .map(|n| RunInfo {
                id: crate::core::ids::RunId::from_string(format!("run_{n}")),
                session_id: crate::core::ids::SessionId::from_string("ses_1".into()),
                state: crate::core::event::RunState::Completed,
                stop_reason: None,
                error: None,
                usage: Default::default(),
                cost: None,
                created_at: 0,
                started_at: None,
                ended_at: None,
            })
            .collect()
    }

    #[test]
    fn answers_are_worded_once_for_every_face() {
        let line = |run: &RunInfo| format!("`{}`", run.id);
        assert_eq!(
            Answer::Mode(Mode::Full).markdown(line),
            format!(
                "Mode: Full autonomy (`full`). Modes: `read_only` ({}); `supervised` ({}); `full` (current: {}).",
                Mode::ReadOnly.description(),
                Mode::Supervised.description(),
                Mode::Full.description()
            )
        );
        assert_eq!(
            Answer::NotAMode("reckless".into()).markdown(line),
            "`reckless` is not a mode; use read_only, supervised or full."
        );
        assert_eq!(
            Answer::Model {
                current: "local/small".into(),
                choices: vec!["local/small".into(), "local/large".into()],
            }
            .markdown(line),
            "Model: `local/small`. Available: `local/small` (current), `local/large`."
        );
        assert_eq!(
            Answer::Model {
                current: "x/y".into(),
                choices: Vec::new(),
            }
            .markdown(line),
            "Model: `x/y`. Available: none configured."
        );
        assert_eq!(
            Answer::NotAModel {
                model: "huge".into(),
                available: "local/small".into(),
            }
            .markdown(line),
            "`huge` is not a configured model; available: local/small."
        );
        assert_eq!(
            Answer::Text("Forgot `m1`.".into()).markdown(line),
            "Forgot `m1`."
        );
        assert_eq!(Answer::Help(Vec::new()).markdown(line), help(&[]));
    }

    #[test]
    fn runs_are_listed_in_the_faces_own_lines() {
        let line = |run: &RunInfo| format!("`{}` done", run.id);
        assert_eq!(
            Answer::Runs {
                newest: Vec::new(),
                total: 0
            }
            .markdown(line),
            "No runs in this session yet."
        );
        assert_eq!(
            Answer::Runs {
                newest: runs(2),
                total: 12
            }
            .markdown(line),
            "Last 2 of 12 run(s), newest first:\n- `run_0` done\n- `run_1` done\n"
        );
    }
}
