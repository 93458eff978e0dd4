//! The commands a person gives in the chat (`docs/channels.md`, "In the
//! chat"): the session commands (`/compact`, `/undo`), which are runs of
//! their own, and those the hub answers itself with a notice.

use std::sync::Arc;

use super::Hub;
use super::dispatch::Start;
use crate::core::channel::{ChannelMessage, ConversationKey};
use crate::core::memory::Scope;
use crate::core::runtime::SessionCommand;
use crate::core::slash::FaceCommand;

const HELP: &str = "Pincer commands:\n\
/new — start a new session for this chat\n\
/stop — stop the running request\n\
/status — the session, its model and mode\n\
/model — list the models (/model NAME switches this chat's session to it)\n\
/mode — list the modes (/mode NAME switches: read_only, supervised or full)\n\
/sessions — this chat's sessions, newest first\n\
/resume N — go back to session N of /sessions; the next message continues it\n\
/usage — the tokens and cost of this chat's session\n\
/compact — summarize the conversation so far; the model continues from the summary\n\
/undo — revert the file edits of the last request that made any\n\
/remember TEXT — remember it in this chat (start with user or workspace to remember it more widely)\n\
/forget ID — forget a remembered item\n\
/memory — what is remembered here (/memory search WORDS)\n\
/trust — trust the workspace: its hooks, skills and custom commands\n\
/pair CODE — allow yourself with the operator's pairing code\n\
/help — this list\n\
Anything else is a prompt. When a tool needs approval, answer with the buttons, or y (allow once), a (always), n (reject).";

/// The session command a chat message gives (`/undo`, `/compact@bot`), if any.
pub(super) fn session_command(body: &str) -> Option<SessionCommand> {
    let name = body.split_whitespace().next()?;
    SessionCommand::parse(name.split('@').next().unwrap_or(name))
}

/// A command the hub answers itself.
#[derive(Debug, PartialEq, Eq)]
enum ChatCommand<'a> {
    Help,
    /// `/pair` from a sender already allowed.
    Pair,
    New,
    Stop,
    Status,
    /// `/model`, `/mode`: answered as the editors' are (`Runtime::answer`).
    Face(FaceCommand),
    Sessions,
    /// `/resume N`, as typed.
    Resume(&'a str),
    Usage,
    /// `/remember`, `/forget` and `/memory`, as the memory command's argument.
    Memory(String),
    Trust,
    Unknown(&'a str),
}

/// The command a `/` message gives: its first word without a `@botname`
/// (groups), the rest its argument.
fn parse(body: &str) -> ChatCommand<'_> {
    let body = body.trim();
    let (name, rest) = body.split_once(char::is_whitespace).unwrap_or((body, ""));
    // `/cmd@botname` in groups.
    let name = name.split('@').next().unwrap_or(name);
    match name {
        "/help" | "/start" => ChatCommand::Help,
        "/pair" => ChatCommand::Pair,
        "/new" => ChatCommand::New,
        "/stop" => ChatCommand::Stop,
        "/status" => ChatCommand::Status,
        "/model" => ChatCommand::Face(FaceCommand::Model(argument(rest))),
        "/mode" => ChatCommand::Face(FaceCommand::Mode(argument(rest))),
        "/sessions" => ChatCommand::Sessions,
        "/resume" => ChatCommand::Resume(rest.trim()),
        "/usage" => ChatCommand::Usage,
        "/remember" => ChatCommand::Memory(format!("add {rest}")),
        "/forget" => ChatCommand::Memory(format!("forget {rest}")),
        "/memory" => ChatCommand::Memory(rest.to_owned()),
        "/trust" => ChatCommand::Trust,
        other => ChatCommand::Unknown(other),
    }
}

/// A command's argument: none when nothing follows the command.
fn argument(rest: &str) -> Option<String> {
    let rest = rest.trim();
    (!rest.is_empty()).then(|| rest.to_owned())
}

impl Hub {
    /// Whether a `/` message names a skill or custom command of the chat's
    /// workspace (or is `/skill`): a prompt the runtime expands, or refuses
    /// saying why, not a command the hub answers.
    pub(super) async fn invokes(&self, body: &str) -> bool {
        let text = super::dispatch::without_bot_name(body);
        self.runtime.invokes(&self.settings.workspace, &text).await
    }

    /// A session command given in the chat: a run of the chat's session.
    pub(super) async fn session_command(
        self: &Arc<Self>,
        message: &ChannelMessage,
        command: SessionCommand,
    ) {
        let key = ConversationKey::of(message);
        let messages = std::slice::from_ref(message);
        if let Err(err) = self.dispatch(&key, messages, Start::Command(command)).await {
            tracing::error!(channel = %key.channel, error = %err, "cannot start a command");
            self.notice(
                message,
                &format!("Pincer could not start {}: {err}", command.as_str()),
            )
            .await;
            self.handled(message).await;
        }
    }

    /// Answers a command the hub carries out itself.
    pub(super) async fn command(self: &Arc<Self>, message: &ChannelMessage) {
        let key = ConversationKey::of(message);
        let answer = match parse(&message.body) {
            ChatCommand::Help => {
                let invocable = self.runtime.invocable_in(&self.settings.workspace).await;
                let mut help = HELP.to_owned();
                // Plain lines: a chat shows no Markdown list.
                let usage = crate::core::slash::invocable_usage(&invocable);
                if !usage.is_empty() {
                    help.push_str("\n\nSkills and custom commands:");
                }
                for (usage, description) in usage {
                    help.push_str(&format!("\n{usage}: {description}"));
                }
                help
            }
            ChatCommand::Pair => "You are already allowed here.".to_owned(),
            ChatCommand::New => match self.session_of(&key, true).await {
                Ok(id) => format!(
                    "New session {id}. The previous one is kept: /sessions lists them, /resume N goes back."
                ),
                Err(err) => format!("Cannot start a new session: {err}"),
            },
            ChatCommand::Stop => self.stop(&key).await,
            ChatCommand::Status => self.status(&key).await,
            ChatCommand::Face(command) => self.face(&key, command).await,
            ChatCommand::Sessions => self.list_sessions(&key).await,
            ChatCommand::Resume(which) => self.resume(&key, which).await,
            ChatCommand::Usage => self.usage(&key).await,
            ChatCommand::Memory(argument) => self.memory(&key, &argument).await,
            ChatCommand::Trust => match self.session_of(&key, false).await {
                Ok(id) => match self.runtime.trust_hooks(&id).await {
                    Ok(answer) => answer,
                    Err(err) => format!("Cannot trust the workspace: {err}"),
                },
                Err(err) => format!("Cannot open the session: {err}"),
            },
            ChatCommand::Unknown(other) => {
                format!("Unknown command {other}. /help lists the commands.")
            }
        };
        self.notice(message, &answer).await;
    }

    /// `/stop`: cancels the running and queued requests of the chat's session.
    async fn stop(&self, key: &ConversationKey) -> String {
        match self.store.conversation(key).await {
            Ok(Some(id)) => match self.runtime.cancel(&id) {
                Ok(0) | Err(_) => "Nothing is running.".to_owned(),
                Ok(n) => format!("Stopping {n} request(s)."),
            },
            _ => "Nothing is running.".to_owned(),
        }
    }

    /// `/model` and `/mode`, listing or switching: the same answer, through
    /// the same core path (`Runtime::answer`: `set_model`, `set_mode`), as
    /// an editor's, in the same words.
    async fn face(&self, key: &ConversationKey, command: FaceCommand) -> String {
        let session = match self.session_of(key, false).await {
            Ok(id) => id,
            Err(err) => return format!("Cannot open the session: {err}"),
        };
        match self.runtime.answer(&session, command).await {
            // No face command answered here lists runs.
            Ok(answer) => answer.markdown(|_| String::new()),
            Err(err) => format!("Cannot change the session: {err}"),
        }
    }

    /// `/status`: the chat's session, its model, mode and workspace.
    async fn status(&self, key: &ConversationKey) -> String {
        match self.store.conversation(key).await {
            Ok(Some(id)) => match self.runtime.session(&id).await {
                Ok(session) => format!(
                    "Session {}\nModel: {}/{}\nMode: {}\nWorkspace: {}",
                    session.id,
                    session.provider,
                    session.model,
                    session.mode.as_str(),
                    session.workspace.display()
                ),
                Err(err) => format!("Session {id}: {err}"),
            },
            Ok(None) => "No session yet: send a message to start one.".to_owned(),
            Err(err) => format!("Cannot read the session: {err}"),
        }
    }

    /// `/remember`, `/forget`, `/memory`: the memory command, remembering
    /// for this chat unless it says more widely.
    async fn memory(&self, key: &ConversationKey, argument: &str) -> String {
        let session = match self.session_of(key, false).await {
            Ok(id) => id,
            Err(err) => return format!("Cannot open the session: {err}"),
        };
        self.runtime
            .memory_command(&session, Some(argument), Scope::Conversation)
            .await
            .unwrap_or_else(|err| format!("Cannot reach the memory: {err}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commands_parse_with_their_argument_and_without_a_bot_name() {
        let cases = [
            ("/help", ChatCommand::Help),
            ("/start@pincer_bot", ChatCommand::Help),
            ("/pair 1234", ChatCommand::Pair),
            ("/new", ChatCommand::New),
            (" /stop ", ChatCommand::Stop),
            ("/status@bot", ChatCommand::Status),
            (
                "/remember the tests use nextest",
                ChatCommand::Memory("add the tests use nextest".into()),
            ),
            ("/forget 12", ChatCommand::Memory("forget 12".into())),
            (
                "/memory search tests",
                ChatCommand::Memory("search tests".into()),
            ),
            ("/memory", ChatCommand::Memory(String::new())),
            ("/trust", ChatCommand::Trust),
            ("/model", ChatCommand::Face(FaceCommand::Model(None))),
            (
                "/model@bot  local/large ",
                ChatCommand::Face(FaceCommand::Model(Some("local/large".into()))),
            ),
            (
                "/mode full",
                ChatCommand::Face(FaceCommand::Mode(Some("full".into()))),
            ),
            ("/mode", ChatCommand::Face(FaceCommand::Mode(None))),
            ("/sessions@bot", ChatCommand::Sessions),
            ("/resume 2", ChatCommand::Resume("2")),
            ("/resume", ChatCommand::Resume("")),
            ("/usage", ChatCommand::Usage),
            ("/modes", ChatCommand::Unknown("/modes")),
            ("/frobnicate@bot now", ChatCommand::Unknown("/frobnicate")),
        ];
        for (body, expected) in cases {
            assert_eq!(parse(body), expected, "{body:?}");
        }
    }

    #[test]
    fn session_commands_are_the_first_word_without_a_bot_name() {
        assert_eq!(session_command("/undo"), Some(SessionCommand::Undo));
        assert_eq!(
            session_command("/compact@bot please"),
            Some(SessionCommand::Compact)
        );
        assert_eq!(session_command("undo"), None);
        assert_eq!(session_command("/undo2"), None);
        assert_eq!(session_command(""), None);
    }

    #[test]
    fn the_help_names_every_command_the_hub_takes() {
        for name in [
            "/new",
            "/stop",
            "/status",
            "/model",
            "/mode",
            "/sessions",
            "/resume",
            "/usage",
            "/compact",
            "/undo",
            "/remember",
            "/forget",
            "/memory",
            "/trust",
            "/pair",
            "/help",
        ] {
            assert!(
                HELP.contains(&format!("\n{name} ")),
                "{name} missing from the help"
            );
        }
    }
}
