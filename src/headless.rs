//! The headless face: `pincer run` drives the core from a prompt or a script of
//! user input and reports the result on stdout (text or JSON lines) and in the
//! exit code.

use std::io::Read as _;
use std::path::Path;

use anyhow::{Context, anyhow};
use serde::Deserialize;

use crate::app::Flags;
use crate::app::{Failure, exit};
use crate::cli::{ApprovePolicy, OutputFormat, RunArgs};
use std::collections::{HashMap, VecDeque};

use crate::core::approval::ApprovalDecision;
use crate::core::event::{Event, RunState, StopReason};
use crate::core::ids::SessionId;
use crate::core::question::{QuestionAnswer, QuestionOutcome};
use crate::core::runtime::{NewSession, Runtime, RuntimeError, Subscription};
use crate::core::session::{
    ContentPart, Origin, PromptSettings, Session, check_image, sniff_image_type,
};
use crate::core::tool::ToolKind;
use crate::stdout::{LineSender, LineWriter};

/// One line of an `--input` script: a prompt, or the answer to the next
/// approval or question of the run started by the prompt above it.
#[derive(Debug, Deserialize)]
#[serde(untagged, deny_unknown_fields)]
enum InputLine {
    Prompt {
        prompt: String,
    },
    Approve {
        approve: String,
        /// When given, the approval must be for this tool.
        #[serde(default)]
        tool: Option<String>,
    },
    Answer {
        answer: String,
    },
}

/// A scripted answer to an approval.
#[derive(Debug, Clone)]
struct Answer {
    decision: ApprovalDecision,
    tool: Option<String>,
}

/// A prompt and the scripted answers to its run's approvals, in order.
#[derive(Debug, Default)]
struct Turn {
    prompt: String,
    /// Images sent with the prompt (`--image`).
    images: Vec<ContentPart>,
    answers: VecDeque<Answer>,
    /// Scripted answers to the run's questions (`ask_user`), in order.
    replies: VecDeque<String>,
}

impl Turn {
    fn new(prompt: String) -> Self {
        Self {
            prompt,
            images: Vec::new(),
            answers: VecDeque::new(),
            replies: VecDeque::new(),
        }
    }

    fn content(&self) -> Vec<ContentPart> {
        let mut content = vec![ContentPart::Text {
            text: self.prompt.clone(),
        }];
        content.extend(self.images.iter().cloned());
        content
    }
}

/// Reads the `--image` files: the type from their first bytes, checked as
/// any face checks images.
fn images(args: &RunArgs) -> Result<Vec<ContentPart>, Failure> {
    use base64::Engine as _;
    args.image
        .iter()
        .map(|path| {
            let bytes = std::fs::read(path)
                .with_context(|| format!("cannot read image {}", path.display()))
                .map_err(Failure::usage)?;
            let mime_type = sniff_image_type(&bytes).ok_or_else(|| {
                Failure::usage(anyhow!(
                    "image {} is not a PNG, JPEG, GIF or WebP image",
                    path.display()
                ))
            })?;
            let data = base64::engine::general_purpose::STANDARD.encode(&bytes);
            check_image(mime_type, &data)
                .map_err(|err| Failure::usage(anyhow!("image {}: {err}", path.display())))?;
            let uri = std::path::absolute(path)
                .ok()
                .map(|p| format!("file://{}", p.display()));
            Ok(ContentPart::Image {
                mime_type: mime_type.to_owned(),
                data,
                uri,
            })
        })
        .collect()
}

/// Reads the prompts to run, in order.
fn prompts(args: &RunArgs) -> Result<Vec<Turn>, Failure> {
    if let Some(prompt) = &args.prompt {
        return Ok(vec![Turn::new(if prompt == "-" {
            read_stdin()?
        } else {
            prompt.clone()
        })]);
    }
    if let Some(path) = &args.prompt_file {
        let text = if path == Path::new("-") {
            read_stdin()?
        } else {
            std::fs::read_to_string(path)
                .with_context(|| format!("cannot read prompt file {}", path.display()))
                .map_err(Failure::usage)?
        };
        return Ok(vec![Turn::new(text)]);
    }
    if let Some(path) = &args.input {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("cannot read input script {}", path.display()))
            .map_err(Failure::usage)?;
        let mut prompts: Vec<Turn> = Vec::new();
        for (index, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let at = || format!("input script {}, line {}", path.display(), index + 1);
            let parsed: InputLine = serde_json::from_str(line)
                .map_err(|_| {
                    anyhow!(
                        "{}: expected {{\"prompt\": \"...\"}}, {{\"approve\": \"allow_once|allow_always|reject_once|reject_always\"}} or {{\"answer\": \"...\"}}",
                        at()
                    )
                })
                .map_err(Failure::usage)?;
            match parsed {
                InputLine::Prompt { prompt } => prompts.push(Turn::new(prompt)),
                InputLine::Approve { approve, tool } => {
                    let decision = ApprovalDecision::parse(&approve)
                        .filter(|d| ApprovalDecision::OPTIONS.contains(d))
                        .ok_or_else(|| {
                            anyhow!(
                                "{}: `approve` must be allow_once, allow_always, reject_once or reject_always, got {approve:?}",
                                at()
                            )
                        })
                        .map_err(Failure::usage)?;
                    let turn = prompts
                        .last_mut()
                        .ok_or_else(|| anyhow!("{}: an approval answer must follow the prompt whose run it answers", at()))
                        .map_err(Failure::usage)?;
                    turn.answers.push_back(Answer { decision, tool });
                }
                InputLine::Answer { answer } => {
                    let turn = prompts
                        .last_mut()
                        .ok_or_else(|| {
                            anyhow!(
                                "{}: an answer must follow the prompt whose run asks the question",
                                at()
                            )
                        })
                        .map_err(Failure::usage)?;
                    turn.replies.push_back(answer);
                }
            }
        }
        if prompts.is_empty() {
            return Err(Failure::usage(anyhow!(
                "input script {} has no prompts",
                path.display()
            )));
        }
        return Ok(prompts);
    }
    Err(Failure::usage(anyhow!(
        "nothing to run: pass a PROMPT, --prompt-file FILE or --input FILE.jsonl"
    )))
}

fn read_stdin() -> Result<String, Failure> {
    let mut text = String::new();
    std::io::stdin()
        .read_to_string(&mut text)
        .context("cannot read the prompt from stdin")
        .map_err(Failure::usage)?;
    Ok(text)
}

/// Runs the prompts; the exit code is that of the first run that did not complete.
pub async fn run(flags: &Flags, args: &RunArgs) -> Result<u8, Failure> {
    let mut prompts = prompts(args)?;
    if prompts.iter().any(|p| p.prompt.trim().is_empty()) {
        return Err(Failure::usage(anyhow!("the prompt is empty")));
    }
    let images = images(args)?;
    if let Some(turn) = prompts.first_mut() {
        turn.images = images;
    }
    let opened = crate::app::App::open(flags)?;
    // A session that goes on keeps its own model: only set-up failures count.
    let continuing = args.session.is_some();
    let problems: Vec<String> = opened
        .problems
        .iter()
        .filter(|p| !(continuing && p.new_sessions_only))
        .map(|p| p.message.clone())
        .collect();
    if !problems.is_empty() {
        return Err(Failure::usage(anyhow!(problems.join("; "))));
    }
    let runtime = opened.runtime.clone();
    if runtime.providers().is_empty() && args.session.is_none() {
        return Err(Failure::usage(anyhow!(crate::app::no_provider(
            &opened.config
        ))));
    }
    if !args.image.is_empty() {
        check_takes_images(&runtime, args).await?;
    }
    let session = open_session(&runtime, args).await?;
    let subscription = runtime.subscribe(&session.id).map_err(Failure::failed)?;
    let (out, writer) = LineWriter::spawn();
    let result = drive(
        &runtime,
        &session,
        subscription,
        &out,
        args.output,
        args.approve,
        prompts,
    )
    .await;
    runtime.shutdown().await;
    drop(out);
    if let Err(err) = writer.finish().await {
        tracing::warn!(error = %err, "cannot write to stdout");
    }
    opened.store.shutdown();
    result
}

/// Refuses `--image` for a model that takes no images before a session is
/// made for nothing.
async fn check_takes_images(runtime: &Runtime, args: &RunArgs) -> Result<(), Failure> {
    let (provider, model) = match &args.session {
        Some(id) => {
            let session = runtime
                .session(&SessionId::from_string(id.clone()))
                .await
                .map_err(Failure::usage)?;
            (session.provider, session.model)
        }
        None => runtime
            .providers()
            .default_choice()
            .map(|choice| (choice.provider, choice.model))
            .unwrap_or_default(),
    };
    if runtime.accepts_images(&provider, &model) {
        Ok(())
    } else {
        Err(Failure::usage(RuntimeError::ImagesNotAccepted { model }))
    }
}

async fn open_session(runtime: &Runtime, args: &RunArgs) -> Result<Session, Failure> {
    if let Some(id) = &args.session {
        let session = runtime
            .open_session(&SessionId::from_string(id.clone()))
            .await
            .map_err(Failure::usage)?;
        // The session keeps its provider and model; the provider itself
        // (its key, URL or script) must still be at hand.
        if runtime.providers().get(&session.provider).is_none() {
            let how = if session.provider == crate::providers::ProviderKind::Scripted.as_str() {
                "it was played from a model script: pass --script FILE to continue it".to_owned()
            } else {
                format!(
                    "that provider is not configured now: set its key or URL as before, \
                     run `pincer login`, or add a [providers.{}] table",
                    session.provider
                )
            };
            return Err(Failure::usage(anyhow!(
                "session {} uses provider {} (model {}); {how}",
                session.id,
                session.provider,
                session.model
            )));
        }
        if args.no_wait {
            match runtime.claim_now(&session.id).await {
                Ok(()) => {}
                Err(crate::core::runtime::RuntimeError::Busy { holder }) => {
                    return Err(Failure {
                        code: crate::app::exit::BUSY,
                        error: anyhow!(
                            "session {} is being run by another Pincer process ({holder}); \
                             without --no-wait this prompt waits for it",
                            session.id
                        ),
                    });
                }
                Err(err) => return Err(Failure::failed(err)),
            }
        }
        return Ok(session);
    }
    let cwd = match &args.cwd {
        Some(dir) => std::path::absolute(dir),
        None => std::env::current_dir(),
    }
    .context("cannot resolve the workspace directory")
    .map_err(Failure::usage)?;
    if !cwd.is_dir() {
        return Err(Failure::usage(anyhow!(
            "workspace {} is not a directory",
            cwd.display()
        )));
    }
    runtime
        .create_session(NewSession {
            workspace: cwd,
            origin: Origin::Headless,
            mcp_servers: serde_json::Value::Array(Vec::new()),
            conversation: None,
            prompt: PromptSettings {
                system_prompt: args.system_prompt.clone(),
                instructions: args.instructions.clone(),
            },
        })
        .await
        .map_err(Failure::failed)
}

async fn drive(
    runtime: &Runtime,
    session: &Session,
    mut subscription: Subscription,
    out: &LineSender,
    format: OutputFormat,
    approve: ApprovePolicy,
    prompts: Vec<Turn>,
) -> Result<u8, Failure> {
    match format {
        OutputFormat::Text => eprintln!(
            "pincer: session {} ({})",
            session.id,
            session.workspace.display()
        ),
        OutputFormat::Jsonl => {
            let line = serde_json::json!({
                "type": "session",
                "session_id": session.id.as_str(),
                "workspace": session.workspace,
                "provider": session.provider,
                "model": session.model,
            });
            out.send(json_line(&line)).await;
        }
    }
    // Registered once, before any run starts: a signal that arrives while an
    // event is being printed is kept until the loop looks again.
    use tokio::signal::unix::{SignalKind, signal};
    let mut interrupt = signal(SignalKind::interrupt())
        .context("cannot watch for Ctrl-C")
        .map_err(Failure::failed)?;
    let mut terminate = signal(SignalKind::terminate())
        .context("cannot watch for SIGTERM")
        .map_err(Failure::failed)?;
    let mut code = exit::OK;
    for mut turn in prompts {
        let ticket = runtime
            .prompt(&session.id, turn.content())
            .await
            .map_err(Failure::failed)?;
        let mut ended_with_newline = true;
        let mut interrupted = false;
        // Calls refused because nobody could approve them.
        let mut unattended = 0usize;
        // The text of each question asked and not answered yet, by id.
        let mut asking: HashMap<String, String> = HashMap::new();
        let end = loop {
            let signalled = tokio::select! {
                record = subscription.next() => Ok(record),
                _ = interrupt.recv(), if !interrupted => Err(()),
                _ = terminate.recv(), if !interrupted => Err(()),
            };
            let Ok(record) = signalled else {
                interrupted = true;
                eprintln!("\npincer: cancelling");
                let _ = runtime.cancel(&session.id);
                continue;
            };
            let Some(record) = record else {
                return Err(Failure::failed(anyhow!(
                    "the session closed during the run"
                )));
            };
            if record.run_id != ticket.run_id {
                continue;
            }
            if let Event::ApprovalRequested {
                approval_id,
                tool,
                kind,
                title,
                reason,
                ..
            } = &record.event
            {
                let decision = match turn.answers.pop_front() {
                    Some(answer) if answer.tool.as_ref().is_none_or(|t| t == tool) => {
                        answer.decision
                    }
                    Some(answer) => {
                        eprintln!(
                            "pincer: the input script answers an approval for {:?}, but {tool:?} asked; rejecting",
                            answer.tool.unwrap_or_default()
                        );
                        ApprovalDecision::RejectOnce
                    }
                    None => approve.decide(*kind),
                };
                if format == OutputFormat::Text {
                    settle(out, &mut ended_with_newline).await;
                }
                if decision == ApprovalDecision::Unattended {
                    unattended += 1;
                    // On stderr in both formats: the person reading the log
                    // needs to know what would have let the call run.
                    eprintln!(
                        "pincer: refused {tool} ({title}): it needs approval ({reason}) and nobody \
                         can give it in this run; pass {} to approve such calls (or --mode full to \
                         run them unasked, but for writes to protected paths and user-scope memories)",
                        if kind.is_read_only() || approve == ApprovePolicy::Reads {
                            "--approve all"
                        } else {
                            "--approve all (--approve reads for reads and searches only)"
                        }
                    );
                } else if format == OutputFormat::Text {
                    eprintln!(
                        "pincer: approval needed: {title} ({reason}) -> {}",
                        decision.as_str()
                    );
                }
                runtime.answer_approval(&session.id, approval_id, decision);
            }
            if let Some((question_id, asked)) = record.event.question() {
                let answer = match turn.replies.pop_front() {
                    Some(reply) => QuestionAnswer::from_reply(&asked, &reply),
                    None => QuestionAnswer::without(QuestionOutcome::Unattended),
                };
                if format == OutputFormat::Text {
                    asking.insert(question_id.to_owned(), asked.text);
                }
                runtime.answer_question(&session.id, question_id, answer);
            }
            match format {
                OutputFormat::Jsonl => {
                    // A notice is for the person reading the log as well (a
                    // prompt waiting for another process, an untrusted
                    // workspace's hooks).
                    if let Event::Notice { message } = &record.event {
                        eprintln!("pincer: {message}");
                    }
                    out.send(json_line(&record)).await;
                }
                OutputFormat::Text => match &record.event {
                    Event::TextDelta { text } => {
                        if !text.is_empty() {
                            ended_with_newline = text.ends_with('\n');
                        }
                        out.send(text.as_bytes().to_vec()).await;
                    }
                    Event::ToolCall {
                        name, arguments, ..
                    } => {
                        settle(out, &mut ended_with_newline).await;
                        eprintln!("pincer: tool call {name} {arguments}");
                    }
                    Event::ToolResult {
                        output, is_error, ..
                    } => {
                        settle(out, &mut ended_with_newline).await;
                        let status = if *is_error { "failed" } else { "done" };
                        eprintln!("pincer: tool {status}: {}", first_line(output));
                    }
                    Event::ApprovalDecided { decision, .. } => {
                        settle(out, &mut ended_with_newline).await;
                        eprintln!("pincer: approval {}", decision.as_str());
                    }
                    Event::Notice { message } => {
                        settle(out, &mut ended_with_newline).await;
                        eprintln!("pincer: {message}");
                    }
                    Event::Retrying { .. } => {
                        if let Some(status) = record.event.retry_status() {
                            settle(out, &mut ended_with_newline).await;
                            eprintln!("pincer: {status}");
                        }
                    }
                    // Shown as the tape has it: the answer redacted like
                    // tool output, never as the script typed it.
                    Event::QuestionAnswered {
                        question_id,
                        outcome,
                        answer,
                        ..
                    } => {
                        settle(out, &mut ended_with_newline).await;
                        eprintln!(
                            "pincer: question: {} -> {}",
                            asking.remove(question_id).unwrap_or_default(),
                            answer.as_deref().unwrap_or(outcome.as_str())
                        );
                    }
                    Event::SubagentStarted {
                        session_id, task, ..
                    } => {
                        settle(out, &mut ended_with_newline).await;
                        eprintln!(
                            "pincer: subagent {session_id} started: {}",
                            first_line(task)
                        );
                    }
                    Event::SubagentEnded {
                        session_id,
                        state,
                        stop_reason,
                        ..
                    } => {
                        settle(out, &mut ended_with_newline).await;
                        eprintln!(
                            "pincer: subagent {session_id} {}{}",
                            state.as_str(),
                            stop_reason
                                .map(|r| format!(" ({})", r.as_str()))
                                .unwrap_or_default()
                        );
                    }
                    Event::State { .. }
                    | Event::UserMessage { .. }
                    | Event::ModelTurn { .. }
                    | Event::ThoughtDelta { .. }
                    | Event::ToolPlanned { .. }
                    | Event::ApprovalRequested { .. }
                    | Event::QuestionAsked { .. }
                    | Event::ToolStarted { .. }
                    | Event::ToolProgress { .. }
                    | Event::Compaction { .. }
                    | Event::SessionInfo { .. }
                    | Event::Usage { .. } => {}
                    Event::Plan { entries } => {
                        settle(out, &mut ended_with_newline).await;
                        for entry in entries {
                            let mark = match entry.status {
                                crate::core::tool::PlanStatus::Pending => "[ ]",
                                crate::core::tool::PlanStatus::InProgress => "[~]",
                                crate::core::tool::PlanStatus::Completed => "[x]",
                            };
                            eprintln!("pincer: plan {mark} {}", entry.content);
                        }
                    }
                },
            }
            if let Event::State {
                state,
                stop_reason,
                error,
                ..
            } = &record.event
                && state.is_terminal()
            {
                break (*state, *stop_reason, error.clone());
            }
        };
        if format == OutputFormat::Text {
            settle(out, &mut ended_with_newline).await;
        }
        let (state, stop_reason, error) = end;
        code = exit_code(state, stop_reason);
        if code == exit::OK && unattended > 0 {
            code = exit::CANCELLED;
        }
        if format == OutputFormat::Text {
            match (&error, stop_reason) {
                (Some(error), _) => eprintln!("pincer: run {} failed: {error}", ticket.run_id),
                (None, Some(reason)) => eprintln!(
                    "pincer: run {} {} ({})",
                    ticket.run_id,
                    state.as_str(),
                    reason.as_str()
                ),
                (None, None) => eprintln!("pincer: run {} {}", ticket.run_id, state.as_str()),
            }
        }
        if code != exit::OK {
            break;
        }
    }
    Ok(code)
}

/// Ends the reply's line and waits until stdout has it, so that a progress
/// line on stderr never runs into the reply on a terminal.
async fn settle(out: &LineSender, ended_with_newline: &mut bool) {
    if !*ended_with_newline {
        out.send(b"\n".to_vec()).await;
        *ended_with_newline = true;
    }
    out.written().await;
}

impl ApprovePolicy {
    /// The answer to an approval the input script does not answer.
    fn decide(self, kind: ToolKind) -> ApprovalDecision {
        match self {
            ApprovePolicy::All => ApprovalDecision::AllowOnce,
            ApprovePolicy::Reads if kind.is_read_only() => ApprovalDecision::AllowOnce,
            ApprovePolicy::Reads | ApprovePolicy::Never => ApprovalDecision::Unattended,
        }
    }
}

fn exit_code(state: RunState, stop_reason: Option<StopReason>) -> u8 {
    match (state, stop_reason) {
        (RunState::Completed, Some(StopReason::Refusal | StopReason::Blocked)) => exit::CANCELLED,
        (RunState::Completed, Some(StopReason::Budget)) => exit::BUDGET,
        (RunState::Completed, _) => exit::OK,
        (RunState::Cancelled, _) => exit::CANCELLED,
        (RunState::Failed, _) => exit::RUN_FAILED,
        (RunState::Queued | RunState::Running | RunState::Waiting, _) => exit::RUN_FAILED,
    }
}

fn first_line(text: &str) -> &str {
    text.lines().next().unwrap_or("")
}

fn json_line<T: serde::Serialize>(value: &T) -> Vec<u8> {
    let mut line = serde_json::to_vec(value).unwrap_or_default();
    line.push(b'\n');
    line
}
