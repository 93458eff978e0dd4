//! The headless face: `pincer run` drives the core from a prompt or a script of
//! user input and reports the result on stdout (text or JSON lines) and in the
//! exit code.

mod output;
mod script;

use anyhow::{Context, anyhow};
use tokio::signal::unix::{Signal, SignalKind, signal};

use crate::app::Flags;
use crate::app::{Failure, exit};
use crate::cli::{ApprovePolicy, OutputFormat, RunArgs};
use crate::core::approval::ApprovalDecision;
use crate::core::event::{Event, EventRecord, RunState, StopReason};
use crate::core::ids::SessionId;
use crate::core::question::{QuestionAnswer, QuestionOutcome};
use crate::core::run::RunOutcome;
use crate::core::runtime::{NewSession, Runtime, RuntimeError, Subscription};
use crate::core::session::{Origin, PromptSettings, Session};
use crate::core::tool::ToolKind;
use crate::stdout::{LineSender, LineWriter};
use output::{Asked, Jsonl, Show, Text};
use script::Turn;

/// Runs the prompts; the exit code is that of the first run that did not complete.
pub async fn run(flags: &Flags, args: &RunArgs) -> Result<u8, Failure> {
    let mut prompts = script::prompts(args)?;
    if prompts.iter().any(|p| p.prompt.trim().is_empty()) {
        return Err(Failure::usage(anyhow!("the prompt is empty")));
    }
    let images = script::images(args)?;
    if let Some(turn) = prompts.first_mut() {
        turn.images = images;
    }
    let opened = crate::app::App::open(flags).await?;
    ready(&opened, args).await?;
    let runtime = opened.runtime.clone();
    let session = open_session(&runtime, args).await?;
    let subscription = runtime.subscribe(&session.id).map_err(Failure::failed)?;
    let (out, writer) = LineWriter::spawn();
    let result = drive(
        Driver {
            runtime: &runtime,
            session: &session,
            subscription,
            approve: args.approve,
        },
        &out,
        args.output,
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

/// Refuses to start when the set-up has problems, no provider is there for
/// a new session, or the model takes no `--image`.
async fn ready(opened: &crate::app::App, args: &RunArgs) -> Result<(), Failure> {
    let continuing = args.session.is_some();
    opened.refuse_problems(continuing)?;
    if opened.runtime.providers().is_empty() && !continuing {
        return Err(Failure::usage(anyhow!(crate::app::no_provider(
            &opened.config
        ))));
    }
    if !args.image.is_empty() {
        check_takes_images(&opened.runtime, args).await?;
    }
    Ok(())
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
    match &args.session {
        Some(id) => {
            continue_session(runtime, &SessionId::from_string(id.clone()), args.no_wait).await
        }
        None => new_session(runtime, args).await,
    }
}

/// Opens a stored session whose provider is still at hand; with `no_wait`,
/// claims it now or fails with `exit::BUSY`.
async fn continue_session(
    runtime: &Runtime,
    id: &SessionId,
    no_wait: bool,
) -> Result<Session, Failure> {
    let session = runtime.open_session(id).await.map_err(Failure::usage)?;
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
    if no_wait {
        match runtime.claim_now(&session.id).await {
            Ok(()) => {}
            Err(RuntimeError::Busy { holder }) => {
                return Err(Failure {
                    code: exit::BUSY,
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
    Ok(session)
}

/// Creates a session in `--cwd` (or the current directory).
async fn new_session(runtime: &Runtime, args: &RunArgs) -> Result<Session, Failure> {
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

/// What follows the session's runs, one prompt at a time.
struct Driver<'a> {
    runtime: &'a Runtime,
    session: &'a Session,
    subscription: Subscription,
    approve: ApprovePolicy,
}

/// Ctrl-C and SIGTERM, each of which cancels the run going on.
struct Signals {
    interrupt: Signal,
    terminate: Signal,
}

impl Signals {
    fn watch() -> Result<Self, Failure> {
        Ok(Self {
            interrupt: signal(SignalKind::interrupt())
                .context("cannot watch for Ctrl-C")
                .map_err(Failure::failed)?,
            terminate: signal(SignalKind::terminate())
                .context("cannot watch for SIGTERM")
                .map_err(Failure::failed)?,
        })
    }
}

/// Runs the prompts in order, shown as `format` asks, until one does not
/// complete; its exit code is the answer.
async fn drive(
    driver: Driver<'_>,
    out: &LineSender,
    format: OutputFormat,
    prompts: Vec<Turn>,
) -> Result<u8, Failure> {
    match format {
        OutputFormat::Text => driver.all(Text::new(out), prompts).await,
        OutputFormat::Jsonl => driver.all(Jsonl::new(out), prompts).await,
    }
}

impl Driver<'_> {
    async fn all(mut self, mut show: impl Show, prompts: Vec<Turn>) -> Result<u8, Failure> {
        show.session(self.session).await;
        // Registered once, before any run starts: a signal that arrives while an
        // event is being printed is kept until the loop looks again.
        let mut signals = Signals::watch()?;
        let mut code = exit::OK;
        for turn in prompts {
            code = self.turn(&mut show, &mut signals, turn).await?;
            if code != exit::OK {
                break;
            }
        }
        Ok(code)
    }

    /// Runs one prompt, answering its approvals and questions from the
    /// script or `--approve`, and shows it to its end.
    async fn turn(
        &mut self,
        show: &mut impl Show,
        signals: &mut Signals,
        mut turn: Turn,
    ) -> Result<u8, Failure> {
        let ticket = self
            .runtime
            .prompt(&self.session.id, turn.content())
            .await
            .map_err(Failure::failed)?;
        let mut interrupted = false;
        // Calls refused because nobody could approve them.
        let mut unattended = 0usize;
        let end = loop {
            let Some(record) = self.next(signals, &mut interrupted).await? else {
                continue;
            };
            if record.run_id != ticket.run_id {
                continue;
            }
            if self.approval(show, &record.event, &mut turn).await
                == Some(ApprovalDecision::Unattended)
            {
                unattended += 1;
            }
            self.question(&record.event, &mut turn);
            show.event(&record).await;
            if let Some(end) = RunOutcome::from_event(&record.event) {
                break end;
            }
        };
        show.end(&ticket.run_id, &end).await;
        Ok(match exit_code(end.state(), end.stop_reason()) {
            exit::OK if unattended > 0 => exit::CANCELLED,
            code => code,
        })
    }

    /// The session's next event; `None` when the first signal of the run
    /// came instead (the run is cancelled and its end still comes).
    async fn next(
        &mut self,
        signals: &mut Signals,
        interrupted: &mut bool,
    ) -> Result<Option<std::sync::Arc<EventRecord>>, Failure> {
        let signalled = tokio::select! {
            record = self.subscription.next() => Ok(record),
            _ = signals.interrupt.recv(), if !*interrupted => Err(()),
            _ = signals.terminate.recv(), if !*interrupted => Err(()),
        };
        let Ok(record) = signalled else {
            *interrupted = true;
            eprintln!("\npincer: cancelling");
            let _ = self.runtime.cancel(&self.session.id);
            return Ok(None);
        };
        match record {
            Some(record) => Ok(Some(record)),
            None => Err(Failure::failed(anyhow!(
                "the session closed during the run"
            ))),
        }
    }

    /// Answers the approval `event` asks for, if it asks for one.
    async fn approval(
        &self,
        show: &mut impl Show,
        event: &Event,
        turn: &mut Turn,
    ) -> Option<ApprovalDecision> {
        let Event::ApprovalRequested {
            approval_id,
            tool,
            kind,
            title,
            reason,
            ..
        } = event
        else {
            return None;
        };
        let decision = decide(turn.answers.pop_front(), tool, *kind, self.approve);
        let asked = Asked {
            tool,
            kind: *kind,
            title,
            reason,
        };
        show.approval(&asked, decision, self.approve).await;
        self.runtime
            .answer_approval(&self.session.id, approval_id, decision);
        Some(decision)
    }

    /// Answers the question `event` asks, if it asks one: the script's next
    /// reply, or unattended.
    fn question(&self, event: &Event, turn: &mut Turn) {
        let Some((question_id, asked)) = event.question() else {
            return;
        };
        let answer = match turn.replies.pop_front() {
            Some(reply) => QuestionAnswer::from_reply(&asked, &reply),
            None => QuestionAnswer::without(QuestionOutcome::Unattended),
        };
        self.runtime
            .answer_question(&self.session.id, question_id, answer);
    }
}

/// The answer to an approval of `tool`: the script's next one when it is
/// for this tool (another tool's is a rejection, said on stderr), else
/// `--approve`'s.
fn decide(
    scripted: Option<script::Answer>,
    tool: &str,
    kind: ToolKind,
    approve: ApprovePolicy,
) -> ApprovalDecision {
    match scripted {
        Some(answer) if answer.tool.as_deref().is_none_or(|t| t == tool) => answer.decision,
        Some(answer) => {
            eprintln!(
                "pincer: the input script answers an approval for {:?}, but {tool:?} asked; rejecting",
                answer.tool.unwrap_or_default()
            );
            ApprovalDecision::RejectOnce
        }
        None => approve.decide(kind),
    }
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

#[cfg(test)]
mod tests {
    use super::*;
    use script::Answer;

    fn scripted(decision: ApprovalDecision, tool: Option<&str>) -> Option<Answer> {
        Some(Answer {
            decision,
            tool: tool.map(str::to_owned),
        })
    }

    #[test]
    fn the_script_answers_first_and_only_for_its_tool() {
        let allow = ApprovalDecision::AllowAlways;
        for (answer, tool, approve, decided) in [
            (scripted(allow, None), "shell", ApprovePolicy::Never, allow),
            (
                scripted(allow, Some("shell")),
                "shell",
                ApprovePolicy::Never,
                allow,
            ),
            (
                scripted(allow, Some("write_file")),
                "shell",
                ApprovePolicy::All,
                ApprovalDecision::RejectOnce,
            ),
            (
                None,
                "shell",
                ApprovePolicy::All,
                ApprovalDecision::AllowOnce,
            ),
            (
                None,
                "shell",
                ApprovePolicy::Never,
                ApprovalDecision::Unattended,
            ),
        ] {
            assert_eq!(
                decide(answer, tool, ToolKind::Execute, approve),
                decided,
                "{tool} {approve:?}"
            );
        }
    }

    #[test]
    fn approve_reads_allows_only_read_only_kinds() {
        let cases = [
            (
                ApprovePolicy::Reads,
                ToolKind::Read,
                ApprovalDecision::AllowOnce,
            ),
            (
                ApprovePolicy::Reads,
                ToolKind::Search,
                ApprovalDecision::AllowOnce,
            ),
            (
                ApprovePolicy::Reads,
                ToolKind::Edit,
                ApprovalDecision::Unattended,
            ),
            (
                ApprovePolicy::Never,
                ToolKind::Read,
                ApprovalDecision::Unattended,
            ),
            (
                ApprovePolicy::All,
                ToolKind::Execute,
                ApprovalDecision::AllowOnce,
            ),
        ];
        for (policy, kind, decided) in cases {
            assert_eq!(policy.decide(kind), decided, "{policy:?} {kind:?}");
        }
    }

    #[test]
    fn exit_codes_follow_the_runs_end() {
        let cases = [
            (RunState::Completed, None, exit::OK),
            (RunState::Completed, Some(StopReason::EndTurn), exit::OK),
            (
                RunState::Completed,
                Some(StopReason::Refusal),
                exit::CANCELLED,
            ),
            (
                RunState::Completed,
                Some(StopReason::Blocked),
                exit::CANCELLED,
            ),
            (RunState::Completed, Some(StopReason::Budget), exit::BUDGET),
            (RunState::Cancelled, None, exit::CANCELLED),
            (RunState::Failed, None, exit::RUN_FAILED),
            (RunState::Running, None, exit::RUN_FAILED),
        ];
        for (state, reason, code) in cases {
            assert_eq!(exit_code(state, reason), code, "{state:?} {reason:?}");
        }
    }
}
