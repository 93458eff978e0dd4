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

use std::collections::HashMap;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{Context as _, anyhow};
use futures::FutureExt as _;
use tokio::signal::unix::{Signal, SignalKind, signal};

use crate::app::Flags;
use crate::app::{Failure, exit};
use crate::cli::ChatArgs;
use crate::core::approval::ApprovalDecision;
use crate::core::event::{Event, RunState, StopReason};
use crate::core::ids::{RunId, SessionId};
use crate::core::journal::SessionQuery;
use crate::core::question::{Question, QuestionAnswer, QuestionOutcome};
use crate::core::quote::quote;
use crate::core::receipt::Verdict;
use crate::core::run::RunInfo;
use crate::core::runtime::{NewSession, Runtime, SessionCommand, Subscription};
use crate::core::session::{ContentPart, Message, Origin, Session};
use crate::core::slash::{self, Answer, FaceCommand, SlashCommand};
use crate::core::tool::{FileDiff, PlanStatus, ToolKind};
use editor::{LineEditor, Read};
use markdown::{Dimmed, Markdown, sanitize};

/// How soon a second Ctrl-C during a run quits instead of cancelling again.
const QUIT_WINDOW: Duration = Duration::from_secs(2);

/// Lines of a diff shown with an approval; the rest are counted.
const DIFF_LINES: usize = 60;

/// Most events shown in one write.
const BURST: usize = 4096;

/// Earlier sessions offered by `--resume`.
const RESUME_CHOICES: usize = 20;

/// Messages of a resumed session shown before the prompt.
const HISTORY_SHOWN: usize = 6;

const RESET: &str = "\x1b[0m";
const BOLD: &str = "\x1b[1m";
const DIM: &str = "\x1b[2m";
const RED: &str = "\x1b[31m";
const GREEN: &str = "\x1b[32m";
const YELLOW: &str = "\x1b[33m";
const CYAN: &str = "\x1b[36m";

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

/// What a working run shows on the line below its output until it is
/// replaced: the working indicator while the model has said nothing, then
/// the reply's line in progress as it arrives (rendered once complete).
/// Erased before anything else is written, by moving back over the rows it
/// took (a long line wraps).
#[derive(Default)]
struct Provisional {
    /// Terminal rows the shown text takes (0: nothing shown).
    rows: usize,
}

impl Provisional {
    /// Erases what is shown.
    fn clear(&mut self, out: &mut String) {
        if self.rows == 0 {
            return;
        }
        out.push('\r');
        if self.rows > 1 {
            out.push_str(&format!("\x1b[{}A", self.rows - 1));
        }
        out.push_str("\x1b[J");
        self.rows = 0;
    }

    /// Shows `text` (one line, no newline), in place of what was shown.
    fn show(&mut self, text: &str, styled_text: &str, out: &mut String) {
        self.clear(out);
        if text.is_empty() {
            return;
        }
        let columns = terminal_size::terminal_size()
            .map_or(80, |(width, _)| usize::from(width.0))
            .max(1);
        let width = unicode_width::UnicodeWidthStr::width(text).max(1);
        out.push_str(styled_text);
        self.rows = width.div_ceil(columns);
    }
}

/// The working indicator's frames.
const SPINNER: [&str; 10] = ["⠋", "⠙", "⠹", "⠸", "⠼", "⠴", "⠦", "⠧", "⠇", "⠏"];

/// Lines of a running call's output shown as they come; the rest are
/// counted.
const PROGRESS_LINES: usize = 20;

/// The longest line in progress redrawn as it comes (each burst redraws
/// it whole): a longer one shows once complete.
const PROVISIONAL_MAX: usize = 2048;

/// How often the working indicator moves.
const TICK: Duration = Duration::from_millis(100);

/// Runs a conversation until the person leaves.
pub async fn run(flags: &Flags, args: &ChatArgs) -> Result<u8, Failure> {
    let opened = crate::app::App::open(flags)?;
    // A session that goes on keeps its own model: only set-up failures count.
    let continuing = args.session.is_some() || args.resume.is_some();
    let problems: Vec<String> = opened
        .problems
        .iter()
        .filter(|p| !(continuing && p.new_sessions_only))
        .map(|p| p.message.clone())
        .collect();
    if !problems.is_empty() {
        return Err(Failure::usage(anyhow!(problems.join("; "))));
    }
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
            None => {
                self.write(&format!(
                    "Unknown command /{}; /help lists the commands.\n",
                    quote(name)
                ));
                Ok(Flow::Continue)
            }
        }
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
            return Ok(help());
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

    /// Runs a prompt or command, showing its events until it ends.
    async fn run(&mut self, start: Start) -> anyhow::Result<Flow> {
        let session = self.session().await?;
        let mut subscription = self
            .subscription
            .take()
            .context("the session has no event subscription")?;
        // A Ctrl-C from before this run is no request to cancel it.
        while let Some(Some(())) = self.interrupt.recv().now_or_never() {}
        let run_id = RunId::generate();
        let started = match start {
            Start::Prompt(text) => {
                self.runtime
                    .prompt_as(&session, run_id.clone(), vec![ContentPart::Text { text }])
                    .await
            }
            Start::Command(command) => {
                self.runtime
                    .command_as(&session, run_id.clone(), command)
                    .await
            }
        };
        if let Err(err) = started {
            self.subscription = Some(subscription);
            self.write(&format!("error: {err}\n"));
            return Ok(Flow::Continue);
        }
        let mut view = View::new(self.color);
        let mut interrupted: Option<Instant> = None;
        // Until the model says something: a working indicator with the time
        // (or the retry being waited for), drawn at once and on every tick.
        let asked = Instant::now();
        let mut provisional = Provisional::default();
        let mut said = false;
        let mut frame = 0usize;
        let mut retry: Option<(Instant, Event)> = None;
        let mut type_ahead = editor::TypeAhead::start();
        if self.live {
            let mut out = String::new();
            self.draw_indicator(&mut provisional, frame, asked, retry.as_ref(), &mut out);
            self.write(&out);
        }
        loop {
            let tick = tokio::time::sleep(TICK);
            let ticking = (self.live && !said) || type_ahead.is_active();
            let next = tokio::select! {
                record = subscription.next() => Some(Some(record)),
                _ = self.interrupt.recv() => None,
                _ = tick, if ticking => Some(None),
            };
            let next = match next {
                Some(Some(record)) => Some(record),
                Some(None) => {
                    let mut out = String::new();
                    let typed = type_ahead.lines();
                    if !typed.is_empty() {
                        // Above the line in progress, which stays pending.
                        provisional.clear(&mut out);
                        self.take_typed(&session, typed, &mut out);
                    }
                    if self.live && !said {
                        frame += 1;
                        self.draw_indicator(
                            &mut provisional,
                            frame,
                            asked,
                            retry.as_ref(),
                            &mut out,
                        );
                    } else if self.live && !out.is_empty() {
                        // The reply's line in progress, back under what was said.
                        self.draw_pending(&view, &mut provisional, &mut out);
                    }
                    self.write(&out);
                    continue;
                }
                None => None,
            };
            let Some(record) = next else {
                let mut out = String::new();
                provisional.clear(&mut out);
                view.flush(&mut out);
                if interrupted.is_some_and(|at| at.elapsed() < QUIT_WINDOW) {
                    self.runtime.cancel_run(&session, &run_id);
                    self.write(&out);
                    self.write(&self.dim("\nLeaving.\n"));
                    return Ok(Flow::Quit);
                }
                interrupted = Some(Instant::now());
                self.runtime.cancel_run(&session, &run_id);
                out.push_str(&self.dim("\nCancelling (Ctrl-C again to leave)\n"));
                self.write(&out);
                continue;
            };
            let mut record = record.ok_or_else(|| anyhow!("the session closed during the run"))?;
            // Events already waiting are shown in the same write: a fast
            // stream costs one write per burst, not one per chunk.
            let mut out = String::new();
            provisional.clear(&mut out);
            let mut taken = 0;
            loop {
                if record.run_id == run_id {
                    view.show(&record.event, &mut out);
                }
                if record.run_id != run_id || !is_plain_output(&record.event) || taken >= BURST {
                    break;
                }
                match subscription.next().now_or_never() {
                    Some(Some(next)) => {
                        record = next;
                        taken += 1;
                    }
                    Some(None) | None => break,
                }
            }
            if record.run_id == run_id && shows_output(&record.event) {
                said = true;
            }
            if record.run_id == run_id && record.event.retry_status().is_some() {
                let wait = match &record.event {
                    Event::Retrying { wait_ms, .. } => Duration::from_millis(*wait_ms),
                    _ => Duration::ZERO,
                };
                if self.live && !said {
                    retry = Some((Instant::now() + wait, record.event.clone()));
                    self.draw_indicator(&mut provisional, frame, asked, retry.as_ref(), &mut out);
                } else if let Some(status) = record.event.retry_status() {
                    out.push_str(&self.dim(&format!("{status}\n")));
                }
            }
            // The reply's line in progress, shown as it comes; rendered
            // (Markdown) once complete. Not before a question to the person.
            if self.live
                && said
                && !matches!(
                    record.event,
                    Event::ApprovalRequested { .. } | Event::QuestionAsked { .. }
                )
                && record.event.terminal_state().is_none()
            {
                self.draw_pending(&view, &mut provisional, &mut out);
            }
            self.write(&out);
            if record.run_id != run_id {
                continue;
            }
            if matches!(
                record.event,
                Event::ApprovalRequested { .. } | Event::QuestionAsked { .. }
            ) {
                // Lines typed before the question are not its answer.
                let typed = type_ahead.lines();
                if !typed.is_empty() {
                    let mut out = String::new();
                    self.take_typed(&session, typed, &mut out);
                    self.write(&out);
                }
            }
            if let Event::ApprovalRequested { approval_id, .. } = &record.event {
                match self.ask_approval().await? {
                    Some(decision) => {
                        if !self
                            .runtime
                            .answer_approval(&session, approval_id, decision)
                        {
                            self.write(&self.dim("The approval was already decided.\n"));
                        }
                    }
                    None => {
                        self.runtime.cancel_run(&session, &run_id);
                        self.write(&self.dim("Cancelling\n"));
                    }
                }
            }
            if let Some((question_id, asked)) = record.event.question() {
                match self.ask_question(&asked).await? {
                    Some(answer) => {
                        if !self.runtime.answer_question(&session, question_id, answer) {
                            self.write(&self.dim("The question was already answered.\n"));
                        }
                    }
                    None => {
                        self.runtime.cancel_run(&session, &run_id);
                        self.write(&self.dim("Cancelling\n"));
                    }
                }
            }
            if let Event::State { state, .. } = &record.event
                && state.is_terminal()
            {
                break;
            }
        }
        // Lines entered as the run ended wait for the next prompt; what is
        // half typed shows at the prompt once echo is back.
        for line in type_ahead.lines() {
            if !line.trim().is_empty() {
                self.queued.push_back(line);
            }
        }
        drop(type_ahead);
        // What the subscription still holds of this run (events it already
        // delivered from the tape after a lag) is read now, not at the next run.
        while let Some(Some(_)) = subscription.next().now_or_never() {}
        self.subscription = Some(subscription);
        // A second Ctrl-C that came as the cancelled run ended still leaves.
        if interrupted.is_some_and(|at| at.elapsed() < QUIT_WINDOW)
            && let Some(Some(())) = self.interrupt.recv().now_or_never()
        {
            self.write(&self.dim("Leaving.\n"));
            return Ok(Flow::Quit);
        }
        Ok(Flow::Continue)
    }

    /// The working indicator: the time since Enter, or the retry waited for
    /// (its wait counting down).
    fn draw_indicator(
        &self,
        provisional: &mut Provisional,
        frame: usize,
        asked: Instant,
        retry: Option<&(Instant, Event)>,
        out: &mut String,
    ) {
        let spinner = SPINNER[frame % SPINNER.len()];
        let status = retry.and_then(|(at, event)| {
            let left = at.saturating_duration_since(Instant::now());
            match event {
                Event::Retrying {
                    attempt,
                    attempts,
                    reason,
                    ..
                } if !left.is_zero() => Event::Retrying {
                    attempt: *attempt,
                    attempts: *attempts,
                    wait_ms: u64::try_from(left.as_millis()).unwrap_or(u64::MAX),
                    reason: reason.clone(),
                }
                .retry_status(),
                Event::Retrying {
                    attempt, attempts, ..
                } => Some(format!(
                    "working {}s, attempt {attempt} of {attempts}",
                    asked.elapsed().as_secs()
                )),
                _ => None,
            }
        });
        let text = format!(
            "{spinner} {}",
            status.unwrap_or_else(|| format!("working {}s", asked.elapsed().as_secs()))
        );
        provisional.show(&text, &self.dim(&text), out);
    }

    /// The line in progress (the reply's, or the model's thinking), drawn
    /// provisionally until it completes.
    fn draw_pending(&self, view: &View, provisional: &mut Provisional, out: &mut String) {
        if view.reply.has_pending() && view.reply.pending().len() <= PROVISIONAL_MAX {
            let text = sanitize(view.reply.pending());
            provisional.show(&text, &text, out);
        } else if !view.thoughts.pending().is_empty()
            && view.thoughts.pending().len() <= PROVISIONAL_MAX
        {
            let text = format!("  ~ {}", sanitize(view.thoughts.pending()));
            provisional.show(&text, &self.dim(&text), out);
        }
    }

    /// Lines typed while the run works: each is steering, taken in at the
    /// model's next turn; a slash command, or a line the run can no longer
    /// take, waits to be the next prompt.
    fn take_typed(&mut self, session: &SessionId, typed: Vec<String>, out: &mut String) {
        for line in typed {
            let line = editor::joined(&line);
            if line.trim().is_empty() {
                continue;
            }
            self.editor.remember(&line);
            let shown = sanitize(&line);
            if slash::split(&line).is_some() {
                out.push_str(&self.dim(&format!("> {shown}  (queued: runs after this run)\n")));
                self.queued.push_back(line);
                continue;
            }
            match self
                .runtime
                .steer(session, vec![ContentPart::Text { text: line.clone() }])
            {
                Ok(Some(_)) => out.push_str(&self.dim(&format!(
                    "> {shown}  (steering: the model reads it at its next turn)\n"
                ))),
                Ok(None) => {
                    out.push_str(&self.dim(&format!("> {shown}  (queued as the next prompt)\n")));
                    self.queued.push_back(line);
                }
                Err(err) => out.push_str(&format!("error: {err}\n")),
            }
        }
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
fn help() -> String {
    let mut text = slash::help();
    // `/exit` is `/quit`'s other name, told in its line.
    for (name, description) in editor::TERMINAL_COMMANDS
        .iter()
        .filter(|(name, _)| *name != "exit")
    {
        text.push_str(&format!("- `/{name}`: {description}\n"));
    }
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

/// `text` in a style when colors are on; a trailing newline stays outside it.
fn styled(color: bool, style: &str, text: &str) -> String {
    if !color {
        return text.to_owned();
    }
    match text.strip_suffix('\n') {
        Some(body) => format!("{style}{body}{RESET}\n"),
        None => format!("{style}{text}{RESET}"),
    }
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

/// How one run's events are shown.
struct View {
    color: bool,
    reply: Markdown,
    thoughts: Dimmed,
    /// Tool calls seen, by id: the tool's name and kind, and whether a line
    /// shows them yet.
    tools: HashMap<String, (String, ToolKind, bool)>,
    /// Lines of live output seen per running call.
    progress: HashMap<String, usize>,
}

impl View {
    fn new(color: bool) -> Self {
        Self {
            color,
            reply: Markdown::new(color),
            thoughts: Dimmed::new(color),
            tools: HashMap::new(),
            progress: HashMap::new(),
        }
    }

    /// Ends the lines in progress, before something else is shown.
    fn flush(&mut self, out: &mut String) {
        self.thoughts.finish(out);
        self.reply.finish(out);
    }

    fn show(&mut self, event: &Event, out: &mut String) {
        let color = self.color;
        match event {
            Event::TextDelta { text } => {
                self.thoughts.finish(out);
                self.reply.push(text, out);
            }
            Event::ThoughtDelta { text } => {
                if self.reply.has_pending() {
                    self.reply.finish(out);
                }
                self.thoughts.push(text, out);
            }
            Event::ToolCall { id, name, kind, .. } => {
                self.flush(out);
                self.tools.insert(id.clone(), (name.clone(), *kind, false));
            }
            Event::ToolPlanned { id, title, .. } => {
                self.flush(out);
                let kind = match self.tools.get_mut(id) {
                    Some((_, kind, shown)) => {
                        *shown = true;
                        kind.as_str()
                    }
                    None => ToolKind::Other.as_str(),
                };
                out.push_str(&styled(color, BOLD, &format!("* {}", sanitize(title))));
                out.push_str(&styled(color, DIM, &format!(" [{kind}]\n")));
            }
            Event::ApprovalRequested {
                tool,
                title,
                reason,
                command,
                diffs,
                ..
            } => {
                self.flush(out);
                out.push_str(&styled(
                    color,
                    YELLOW,
                    &format!(
                        "Approval needed: {} ({}, {})\n",
                        sanitize(title),
                        sanitize(tool),
                        sanitize(reason)
                    ),
                ));
                if let Some(command) = command {
                    out.push_str(&format!("    $ {}\n", sanitize(command)));
                }
                for diff in diffs {
                    show_diff(color, diff, out);
                }
            }
            Event::QuestionAsked {
                question, options, ..
            } => {
                self.flush(out);
                out.push_str(&styled(
                    color,
                    YELLOW,
                    &format!("Question: {}\n", sanitize(question)),
                ));
                for (index, option) in options.iter().enumerate() {
                    out.push_str(&format!("  {}. {}\n", index + 1, sanitize(option)));
                }
            }
            Event::SubagentStarted { task, .. } => {
                self.flush(out);
                let line = task.lines().next().unwrap_or("");
                out.push_str(&styled(
                    color,
                    DIM,
                    &format!("  subagent started: {}\n", sanitize(line)),
                ));
            }
            Event::SubagentEnded {
                state, stop_reason, ..
            } => {
                self.flush(out);
                out.push_str(&styled(
                    color,
                    DIM,
                    &format!(
                        "  subagent {}{}\n",
                        state.as_str(),
                        stop_reason
                            .map(|r| format!(" ({})", r.as_str()))
                            .unwrap_or_default()
                    ),
                ));
            }
            Event::QuestionAnswered { outcome, .. } => {
                if *outcome == QuestionOutcome::TimedOut {
                    out.push_str(&styled(color, DIM, "  no answer in time\n"));
                }
            }
            Event::ApprovalDecided { decision, .. } => match decision {
                ApprovalDecision::TimedOut => {
                    out.push_str(&styled(color, DIM, "  approval timed out\n"));
                }
                ApprovalDecision::AllowOnce
                | ApprovalDecision::AllowAlways
                | ApprovalDecision::RejectOnce
                | ApprovalDecision::RejectAlways
                | ApprovalDecision::Cancelled
                | ApprovalDecision::Unattended => {}
            },
            Event::ToolProgress {
                id,
                output: Some(lines),
                ..
            } => {
                self.flush(out);
                let shown = self.progress.entry(id.clone()).or_insert(0);
                for line in lines.lines() {
                    if *shown < PROGRESS_LINES {
                        out.push_str(&styled(color, DIM, &format!("  | {}\n", sanitize(line))));
                    } else if *shown == PROGRESS_LINES {
                        out.push_str(&styled(color, DIM, "  | ...\n"));
                    }
                    *shown += 1;
                }
            }
            Event::ToolResult {
                id,
                output,
                is_error,
                verdict,
                ..
            } => {
                self.flush(out);
                if let Some(lines) = self.progress.remove(id)
                    && lines > PROGRESS_LINES
                {
                    out.push_str(&styled(
                        color,
                        DIM,
                        &format!("  | ({} lines of output in all)\n", lines),
                    ));
                }
                if let Some((name, kind, false)) = self.tools.get(id) {
                    out.push_str(&styled(color, BOLD, &format!("* {}", sanitize(name))));
                    out.push_str(&styled(color, DIM, &format!(" [{}]\n", kind.as_str())));
                }
                let first = sanitize(output.lines().next().unwrap_or(""));
                let line = match verdict {
                    // The sentence the model reads ("do not retry…") is
                    // not for the person who said no.
                    Verdict::Rejected
                        if output.starts_with(crate::core::gate::REJECTED_BY_THE_USER) =>
                    {
                        styled(color, RED, "  rejected: you said no\n")
                    }
                    Verdict::Cancelled => styled(color, RED, "  cancelled\n"),
                    Verdict::Denied | Verdict::Rejected | Verdict::Invalid => {
                        styled(color, RED, &format!("  refused: {first}\n"))
                    }
                    Verdict::Allowed | Verdict::Approved if *is_error => {
                        styled(color, RED, &format!("  failed: {first}\n"))
                    }
                    Verdict::Allowed | Verdict::Approved => styled(color, GREEN, "  done\n"),
                };
                out.push_str(&line);
            }
            Event::Plan { entries } => {
                self.flush(out);
                for entry in entries {
                    let mark = match entry.status {
                        PlanStatus::Pending => "[ ]",
                        PlanStatus::InProgress => "[~]",
                        PlanStatus::Completed => "[x]",
                    };
                    out.push_str(&format!("  {mark} {}\n", sanitize(&entry.content)));
                }
            }
            Event::Notice { message } => {
                self.flush(out);
                out.push_str(&styled(color, YELLOW, &format!("{}\n", sanitize(message))));
            }
            Event::State {
                state,
                stop_reason,
                error,
                ..
            } if state.is_terminal() => {
                self.flush(out);
                let end = match (state, stop_reason, error) {
                    (RunState::Failed, _, Some(error)) => {
                        styled(color, RED, &format!("error: {}\n", sanitize(error)))
                    }
                    (RunState::Failed, _, None) => styled(color, RED, "error: the run failed\n"),
                    (RunState::Cancelled, _, _) => styled(color, DIM, "(cancelled)\n"),
                    (_, Some(StopReason::EndTurn) | None, _) => String::new(),
                    (_, Some(reason), _) => {
                        styled(color, DIM, &format!("(stopped: {})\n", reason.as_str()))
                    }
                };
                out.push_str(&end);
                out.push('\n');
            }
            Event::State { .. }
            | Event::UserMessage { .. }
            | Event::ModelTurn { .. }
            | Event::ToolStarted { .. }
            | Event::ToolProgress { output: None, .. }
            | Event::Compaction { .. }
            | Event::SessionInfo { .. }
            // On the indicator's line, or a line of its own (`Chat::run`).
            | Event::Retrying { .. }
            | Event::Usage { .. } => {}
        }
    }
}

/// Whether an event shows the model at work (so the indicator goes).
fn shows_output(event: &Event) -> bool {
    !matches!(
        event,
        Event::State { .. }
            | Event::UserMessage { .. }
            | Event::SessionInfo { .. }
            | Event::ModelTurn { .. }
            | Event::Retrying { .. }
            | Event::Usage { .. }
    )
}

/// Whether an event only adds to the output (the run loop does nothing else
/// with it), so the events after it may be shown in the same write.
fn is_plain_output(event: &Event) -> bool {
    matches!(
        event,
        Event::TextDelta { .. } | Event::ThoughtDelta { .. } | Event::Usage { .. }
    )
}

/// A change an approval is about, as a colored unified diff.
fn show_diff(color: bool, diff: &FileDiff, out: &mut String) {
    out.push_str(&styled(
        color,
        BOLD,
        &format!("    {}\n", sanitize(&diff.path.display().to_string())),
    ));
    let lines: Vec<&str> = diff.unified.lines().collect();
    for line in lines.iter().take(DIFF_LINES) {
        let style = if line.starts_with("+++") || line.starts_with("---") {
            BOLD
        } else if line.starts_with('+') {
            GREEN
        } else if line.starts_with('-') {
            RED
        } else if line.starts_with("@@") {
            CYAN
        } else {
            ""
        };
        let text = format!("    {}\n", sanitize(line));
        if style.is_empty() {
            out.push_str(&text);
        } else {
            out.push_str(&styled(color, style, &text));
        }
    }
    if lines.len() > DIFF_LINES {
        out.push_str(&format!(
            "    … {} more line(s)\n",
            lines.len() - DIFF_LINES
        ));
    }
}
