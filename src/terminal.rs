//! The terminal face: `pincer chat`, and `pincer` alone on a terminal — a
//! conversation at a prompt in the current directory's workspace.
//!
//! The reply streams to stdout as rendered Markdown, line by line; tool
//! calls show as they happen, approvals are asked at the prompt with the
//! diff or command they are about, and slash commands are those of the ACP
//! face (`core::slash`) plus `/new` and `/quit`. Ctrl-C cancels a run; a
//! second one within two seconds, or Ctrl-C / Ctrl-D at an empty prompt,
//! leaves with the store flushed. Logs stay on stderr (warnings only unless
//! `-v`) or in `--log-file`. The line editor (`editor`) draws the prompt on
//! the terminal itself; everything else shown goes through `crate::stdout`.
//!
//! This face knows the runtime and no other face.

mod editor;
mod markdown;
mod running;
mod view;

use std::path::PathBuf;

use anyhow::{Context as _, anyhow};
use tokio::signal::unix::{Signal, SignalKind, signal};

use crate::app::Flags;
use crate::app::{Failure, exit};
use crate::cli::ChatArgs;
use crate::core::approval::ApprovalDecision;
use crate::core::ids::SessionId;
use crate::core::journal::SessionQuery;
use crate::core::question::{Question, QuestionAnswer, QuestionOutcome};
use crate::core::quote::quote;
use crate::core::run::RunInfo;
use crate::core::runtime::{NewSession, Runtime, SessionCommand, Subscription};
use crate::core::session::{ContentPart, Message, Origin, Session};
use crate::core::skills::Invocable;
use crate::core::slash::{self, Answer, FaceCommand, SlashCommand};
use editor::{LineEditor, Read};
use markdown::{Markdown, sanitize};
use view::{DIM, styled};

/// Earlier sessions offered by `--resume`.
const RESUME_CHOICES: usize = 20;

/// Messages of a resumed session shown before the prompt.
const HISTORY_SHOWN: usize = 6;

/// Whether to color: not when `NO_COLOR` is set (and not empty) or `TERM=dumb`.
fn color_wanted() -> bool {
    let no_color = std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty());
    let dumb = std::env::var("TERM").is_ok_and(|t| t == "dumb");
    !no_color && !dumb
}

/// Whether output may move the cursor to redraw a line in progress: a
/// terminal that is not `TERM=dumb`.
fn live_wanted() -> bool {
    crate::stdout::is_terminal() && !std::env::var("TERM").is_ok_and(|t| t == "dumb")
}

/// Runs a conversation until the person leaves.
pub async fn run(flags: &Flags, args: &ChatArgs) -> Result<u8, Failure> {
    let opened = crate::app::App::open(flags).await?;
    opened.refuse_problems(args.session.is_some() || args.resume.is_some())?;
    if opened.runtime.providers().is_empty() {
        return Err(Failure::usage(anyhow!(crate::app::no_provider(
            &opened.config
        ))));
    }
    let workspace = std::env::current_dir()
        .context("cannot resolve the workspace directory")
        .map_err(Failure::usage)?;
    let editor = LineEditor::open(opened.config.data_dir.value.join("chat-history"))
        .map_err(Failure::failed)?;
    // Registered for the whole conversation: from here on Ctrl-C during a run
    // reaches us instead of ending the process.
    let interrupt = signal(SignalKind::interrupt())
        .context("cannot watch for Ctrl-C")
        .map_err(Failure::failed)?;
    let mut chat = Chat {
        runtime: opened.runtime.clone(),
        color: color_wanted(),
        live: live_wanted(),
        workspace,
        editor,
        interrupt,
        session: None,
        subscription: None,
        queued: Default::default(),
    };
    let result = match chat.start(args).await {
        Ok(Flow::Continue) => chat.converse().await,
        Ok(Flow::Quit) => Ok(()),
        Err(err) => Err(err),
    };
    chat.runtime.shutdown().await;
    opened.store.shutdown();
    result.map_err(Failure::failed)?;
    Ok(exit::OK)
}

/// Whether the conversation goes on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Flow {
    Continue,
    Quit,
}

/// What a run is started with.
enum Start {
    Prompt(String),
    Command(SessionCommand),
}

struct Chat {
    runtime: Runtime,
    /// Whether output may carry ANSI styles.
    color: bool,
    /// Whether a line in progress and the working indicator are shown
    /// (redrawn in place): on a terminal that can move the cursor.
    live: bool,
    /// The directory new sessions work in (the current directory).
    workspace: PathBuf,
    editor: LineEditor,
    /// Ctrl-C while a run goes on (at the prompt the editor reads it as a key).
    interrupt: Signal,
    /// The session of the conversation; made at the first prompt or command,
    /// so leaving at once leaves no empty session behind.
    session: Option<Session>,
    /// Events of `session`, subscribed when it was opened.
    subscription: Option<Subscription>,
    /// Lines typed during a run that wait to be the next prompts.
    queued: std::collections::VecDeque<String>,
}

impl Chat {
    /// Opens the session asked for, or offers earlier ones (`--resume`).
    async fn start(&mut self, args: &ChatArgs) -> anyhow::Result<Flow> {
        let given = args
            .session
            .clone()
            .or_else(|| args.resume.clone().flatten());
        if let Some(id) = given {
            self.open(&SessionId::from_string(id)).await?;
        } else if args.resume.is_some() {
            match self.pick().await? {
                Some(Some(id)) => self.open(&id).await?,
                Some(None) => {}
                None => return Ok(Flow::Quit),
            }
        }
        let mut text = format!(
            "Pincer in {}. /help lists the commands; Ctrl-D leaves.\n",
            sanitize(&self.workspace.display().to_string())
        );
        if self.session.is_none()
            && let Some(choice) = self.runtime.providers().default_choice()
        {
            text = format!(
                "Pincer in {} with {}. /help lists the commands; Ctrl-D leaves.\n",
                sanitize(&self.workspace.display().to_string()),
                sanitize(&choice.id())
            );
        }
        self.write(&self.dim(&text));
        Ok(Flow::Continue)
    }

    /// Lists this workspace's sessions, newest first, and asks which to
    /// continue: `Some(Some(id))` one of them, `Some(None)` a new one, `None`
    /// the person left.
    async fn pick(&mut self) -> anyhow::Result<Option<Option<SessionId>>> {
        let sessions = self
            .runtime
            .list_sessions(SessionQuery {
                workspace: Some(self.workspace.clone()),
                after: None,
                limit: RESUME_CHOICES,
                ..SessionQuery::default()
            })
            .await
            .context("cannot list the sessions")?;
        if sessions.is_empty() {
            self.write("No earlier session in this workspace; starting a new one.\n");
            return Ok(Some(None));
        }
        let mut text = String::from("Earlier sessions here, newest first:\n");
        for (index, session) in sessions.iter().enumerate() {
            text.push_str(&format!(
                "{:>3}. {}  {}  {}\n",
                index + 1,
                sanitize(session.title.as_deref().unwrap_or("(no prompt yet)")),
                self.dim(&time(session.updated_at)),
                self.dim(session.id.as_str()),
            ));
        }
        self.write(&text);
        loop {
            let question = format!(
                "Resume which? [1-{}, Enter for 1, n for a new session] ",
                sessions.len()
            );
            let answer = match self.editor.read(&question).await? {
                Read::Line(line) => line,
                Read::Interrupted | Read::Eof => return Ok(None),
            };
            let answer = answer.trim();
            if answer.eq_ignore_ascii_case("n") {
                return Ok(Some(None));
            }
            let index = if answer.is_empty() {
                Some(0)
            } else {
                answer.parse::<usize>().ok().and_then(|n| n.checked_sub(1))
            };
            if let Some(session) = index.and_then(|i| sessions.get(i)) {
                return Ok(Some(Some(session.id.clone())));
            }
            self.write(&format!(
                "Type a number from 1 to {}, or n.\n",
                sessions.len()
            ));
        }
    }

    /// Continues a stored session and shows where it left off.
    async fn open(&mut self, id: &SessionId) -> anyhow::Result<()> {
        let session = self
            .runtime
            .open_session(id)
            .await
            .with_context(|| format!("cannot open session {}", quote(id.as_str())))?;
        self.subscription = Some(self.runtime.subscribe(&session.id)?);
        let history = self.runtime.history(&session.id).await?;
        let mut text = format!(
            "Resumed session {} ({}, {} message(s)).\n",
            sanitize(session.title.as_deref().unwrap_or("(no prompt yet)")),
            session.id,
            history.len()
        );
        if session.workspace != self.workspace {
            text.push_str(&format!(
                "Its workspace is {}.\n",
                sanitize(&session.workspace.display().to_string())
            ));
        }
        let shown: Vec<String> = history
            .iter()
            .filter_map(|entry| summary_line(&entry.message))
            .collect();
        for line in &shown[shown.len().saturating_sub(HISTORY_SHOWN)..] {
            text.push_str(&format!("  {line}\n"));
        }
        self.write(&self.dim(&text));
        self.session = Some(session);
        Ok(())
    }

    /// The conversation's session, made now if there is none yet.
    async fn session(&mut self) -> anyhow::Result<SessionId> {
        if let Some(session) = &self.session {
            return Ok(session.id.clone());
        }
        let session = self
            .runtime
            .create_session(NewSession {
                workspace: self.workspace.clone(),
                origin: Origin::Terminal,
                mcp_servers: serde_json::Value::Array(Vec::new()),
                conversation: None,
                prompt: Default::default(),
            })
            .await
            .context("cannot create a session")?;
        self.subscription = Some(self.runtime.subscribe(&session.id)?);
        let id = session.id.clone();
        self.session = Some(session);
        Ok(id)
    }

    async fn converse(&mut self) -> anyhow::Result<()> {
        loop {
            // A line typed during the last run goes first, shown as if typed now.
            if let Some(line) = self.queued.pop_front() {
                self.write(&format!("> {}\n", sanitize(&line)));
                if self.handle(line).await? == Flow::Quit {
                    return Ok(());
                }
                continue;
            }
            let workspace = self
                .session
                .as_ref()
                .map_or(&self.workspace, |s| &s.workspace);
            self.editor
                .offer(self.runtime.invocable_in(workspace).await);
            let line = match self.editor.read("> ").await? {
                Read::Line(line) => editor::joined(&line),
                Read::Interrupted | Read::Eof => return Ok(()),
            };
            if line.trim().is_empty() {
                continue;
            }
            self.editor.remember(&line);
            if self.handle(line).await? == Flow::Quit {
                return Ok(());
            }
        }
    }

    async fn handle(&mut self, line: String) -> anyhow::Result<Flow> {
        let Some((name, _)) = slash::split(&line).filter(|(name, _)| !name.contains('/')) else {
            return self.run(Start::Prompt(line)).await;
        };
        match name {
            "quit" | "exit" => return Ok(Flow::Quit),
            "new" => {
                self.session = None;
                self.subscription = None;
                self.write(&self.dim("A new session starts with the next prompt.\n"));
                return Ok(Flow::Continue);
            }
            _ => {}
        }
        match slash::parse_text(&line) {
            Some(SlashCommand::Queued(command)) => self.run(Start::Command(command)).await,
            Some(SlashCommand::Answered(command)) => {
                let text = self.answer(command).await?;
                self.markdown(&text);
                Ok(Flow::Continue)
            }
            // A skill or custom command: a prompt the runtime expands.
            None if self.invokes(&line).await => self.run(Start::Prompt(line)).await,
            None => {
                self.write(&format!(
                    "Unknown command /{}; /help lists the commands.\n",
                    quote(name)
                ));
                Ok(Flow::Continue)
            }
        }
    }

    /// Whether `line` names a skill or custom command of the workspace (or
    /// is `/skill`): a prompt the runtime expands, or refuses saying why.
    async fn invokes(&self, line: &str) -> bool {
        let workspace = self
            .session
            .as_ref()
            .map_or(&self.workspace, |s| &s.workspace);
        self.runtime.invokes(workspace, line).await
    }

    /// Writes Markdown text, rendered.
    fn markdown(&self, text: &str) {
        let mut renderer = Markdown::new(self.color);
        let mut out = String::new();
        renderer.push(text, &mut out);
        renderer.finish(&mut out);
        self.write(&out);
    }

    /// The text answering a command that needs no run: the runtime's
    /// answer (`Runtime::answer`) in this face's run lines, a line end after
    /// a sentence; `/help` with this face's own commands and keys, without
    /// making a session.
    async fn answer(&mut self, command: FaceCommand) -> anyhow::Result<String> {
        if command == FaceCommand::Help {
            let workspace = self
                .session
                .as_ref()
                .map_or(&self.workspace, |s| &s.workspace);
            return Ok(help(&self.runtime.invocable_in(workspace).await));
        }
        let id = self.session().await?;
        let answer = self.runtime.answer(&id, command).await?;
        if let Answer::ModeSet(updated) | Answer::ModelSet(updated) = &answer {
            self.session = Some(updated.clone());
        }
        let text = answer.markdown(run_line);
        // A list of runs ends its own lines.
        if let Answer::Runs { newest, .. } = &answer
            && !newest.is_empty()
        {
            return Ok(text);
        }
        Ok(format!("{text}\n"))
    }

    /// Asks how to answer an approval: `None` when the person pressed Ctrl-C
    /// (the run is cancelled).
    async fn ask_approval(&mut self) -> anyhow::Result<Option<ApprovalDecision>> {
        loop {
            let answer = match self
                .editor
                .read("Allow? [y] once, [a] always, [n] reject: ")
                .await?
            {
                Read::Line(line) => line,
                Read::Interrupted => return Ok(None),
                Read::Eof => return Ok(Some(ApprovalDecision::RejectOnce)),
            };
            match answer.trim().to_ascii_lowercase().as_str() {
                "y" | "yes" | "once" => return Ok(Some(ApprovalDecision::AllowOnce)),
                "a" | "always" => return Ok(Some(ApprovalDecision::AllowAlways)),
                "n" | "no" | "reject" => return Ok(Some(ApprovalDecision::RejectOnce)),
                _ => self.write("Answer y, a or n.\n"),
            }
        }
    }

    /// Reads the answer to a question: `None` when the person pressed
    /// Ctrl-C (the run is cancelled); an empty line or end of input declines.
    async fn ask_question(
        &mut self,
        question: &Question,
    ) -> anyhow::Result<Option<QuestionAnswer>> {
        let prompt = if question.options.is_empty() {
            "Answer (empty to decline): "
        } else {
            "Answer (a number or your own words; empty to decline): "
        };
        Ok(match self.editor.read(prompt).await? {
            Read::Line(line) => Some(QuestionAnswer::from_reply(question, &line)),
            Read::Interrupted => None,
            Read::Eof => Some(QuestionAnswer::without(QuestionOutcome::Declined)),
        })
    }

    fn dim(&self, text: &str) -> String {
        styled(self.color, DIM, text)
    }

    fn write(&self, text: &str) {
        if text.is_empty() {
            return;
        }
        if let Err(err) = crate::stdout::write_all(text.as_bytes()) {
            tracing::warn!(error = %err, "cannot write to the terminal");
        }
    }
}

/// `/help`: the shared commands, this face's own, and its keys.
fn help(invocable: &[Invocable]) -> String {
    let mut text = slash::help(&[]);
    // `/exit` is `/quit`'s other name, told in its line.
    for (name, description) in editor::TERMINAL_COMMANDS
        .iter()
        .filter(|(name, _)| *name != "exit")
    {
        text.push_str(&format!("- `/{name}`: {description}\n"));
    }
    text.push_str(&slash::invocable_help(invocable));
    text.push_str(
        "\nKeys: Enter sends; Alt-Enter or a line ending in `\\` starts another line; \
         Tab completes a command; Ctrl-C cancels a run (twice within 2 s leaves); \
         Ctrl-C or Ctrl-D at an empty prompt leaves.\n",
    );
    text
}

/// A run in `/runs`: id, local time, state, how it ended and its tokens.
fn run_line(run: &RunInfo) -> String {
    let mut line = format!(
        "`{}` {} {}",
        run.id,
        time(run.created_at),
        run.state.as_str()
    );
    if let Some(reason) = run.stop_reason {
        line.push_str(&format!(" ({})", reason.as_str()));
    }
    if let Some(error) = &run.error {
        line.push_str(&format!(": {}", quote(error)));
    }
    line.push_str(&format!(
        "; {} tokens in, {} out",
        run.usage.input_tokens, run.usage.output_tokens
    ));
    line
}

/// A message of a resumed session, in a line.
fn summary_line(message: &Message) -> Option<String> {
    const WIDTH: usize = 100;
    let (who, text) = match message {
        Message::User { content } => (
            "you",
            content
                .iter()
                .find_map(|part| match part {
                    ContentPart::Text { text } => Some(text.as_str()),
                    ContentPart::Image { .. }
                    | ContentPart::Resource { .. }
                    | ContentPart::ResourceLink { .. } => None,
                })
                .unwrap_or("(image)"),
        ),
        Message::Assistant { text, .. } if !text.trim().is_empty() => ("pincer", text.as_str()),
        Message::Summary { .. } => ("pincer", "(summary of the conversation before)"),
        Message::Assistant { .. } | Message::Tool { .. } | Message::Note { .. } => return None,
    };
    let first = text.trim().lines().next().unwrap_or("");
    let mut shown: String = first.chars().take(WIDTH).collect();
    if first.chars().count() > WIDTH || text.trim().lines().nth(1).is_some() {
        shown.push('…');
    }
    Some(format!("{who}: {}", sanitize(&shown)))
}

fn time(millis: i64) -> String {
    jiff::Timestamp::from_millisecond(millis)
        .map(|t| {
            t.to_zoned(jiff::tz::TimeZone::system())
                .strftime("%Y-%m-%d %H:%M")
                .to_string()
        })
        .unwrap_or_default()
}
