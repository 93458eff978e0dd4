//! The runtime: live sessions, their run queues, and event subscriptions.
//!
//! Each live session has a worker task that takes its runs one at a time, so at
//! most one run per session is active and later prompts run in the order they
//! came. Every event is appended to the tape and published to subscribers; a
//! subscriber that falls behind re-reads the tape instead of slowing the run.

mod subagents;

pub use subagents::SubagentConfig;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use thiserror::Error;
use tokio::sync::{broadcast, mpsc, oneshot};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::agent_loop;
use super::approval::{ApprovalDecision, Grant};
use super::commands;
pub use super::commands::SessionCommand;
use super::compaction;
use super::context;
use super::control::Control;
pub use super::emitter::{Emitter, InvalidTransition};
use super::event::{Event, EventRecord, RunState, StopReason, Usage};
use super::gate::{CallEnv, LoopGuard, ToolGate};
use super::hooks::{HookEvent, HookInput};
use super::ids::{RunId, SessionId};
use super::journal::{Journal, JournalError, SessionQuery, Write};
use super::lease::{Lease, LeaseError, LeaseKey, Leases};
use super::memory::{Keeper, Memories, MemoryAccess, ScopeKeys};
use super::models::Cost;
use super::notify::Notifier;
use super::pending::{PendingApprovals, PendingQuestions};
use super::policy::PathBoundary;
use super::prompt::{Environment, EnvironmentProbe, PromptSettings, Recall, RunPrompt};
use super::provider::{ModelChoice, Providers};
use super::question::{QuestionAnswer, QuestionOutcome};
use super::quote::quote;
use super::run::{RunInfo, RunOutcome};
use super::session::{
    ContentPart, HistoryEntry, Message, Mode, Origin, Session, check_image, now_millis,
    title_from_prompt,
};
use super::stats::Stats;
pub use super::subscription::Subscription;
use super::tool::{
    ClientFiles, ClientTerminal, Files, Progress, SessionTools, SessionToolsFactory, ToolContext,
};
use super::turn::{LoopConfig, RunContext};

#[derive(Debug, Error)]
pub enum RuntimeError {
    #[error("session {0} not found")]
    SessionNotFound(SessionId),
    #[error("run {0} not found")]
    RunNotFound(RunId),
    #[error("workspace {0} must be an absolute path")]
    RelativeWorkspace(PathBuf),
    /// A new session's workspace that is no directory (missing, a file, or
    /// unreadable on the way), with what is wrong.
    #[error("workspace {} {problem}", quote(&.path.to_string_lossy()))]
    NoWorkspace { path: PathBuf, problem: String },
    #[error("unknown model {0:?}; available: {1}")]
    UnknownModel(String, String),
    /// A thought level the session's provider does not take: the level and
    /// the ones it does.
    #[error("unknown thought level {0:?}; the provider of this session takes: {1}")]
    UnknownThoughtLevel(String, String),
    /// A fork asked for more of the conversation than there is.
    #[error("the session has {prompts} user messages; cannot fork after message {asked}")]
    ForkPastEnd { asked: usize, prompts: usize },
    #[error("the runtime is shutting down")]
    ShuttingDown,
    /// Another process runs the session's prompts now (its lease).
    #[error("the session is being run by another Pincer process ({holder})")]
    Busy { holder: String },
    /// The leases' backend failed.
    #[error("{0}")]
    Lease(String),
    /// A prompt part the runtime refuses (a bad image), by its index.
    #[error("content[{index}]: {message}")]
    InvalidContent { index: usize, message: String },
    /// A prompt with an image for a model that does not take images.
    #[error(
        "model {model} does not accept images; choose a model that does, or set `images = true` in [models.\"{model}\"] if it does"
    )]
    ImagesNotAccepted { model: String },
    #[error(transparent)]
    Journal(#[from] JournalError),
}

/// A new session's workspace as it is stored: the directory `path` names,
/// every symbolic link resolved, so trust, the path boundary and the hooks'
/// project directory are worked out from the directory itself whatever name
/// a face was given (`pincer trust` resolves its directory the same way).
pub async fn real_workspace(path: &Path) -> Result<PathBuf, RuntimeError> {
    if !path.is_absolute() {
        return Err(RuntimeError::RelativeWorkspace(path.to_path_buf()));
    }
    let problem = match tokio::fs::canonicalize(path).await {
        Ok(real) if real.is_dir() => return Ok(real),
        Ok(_) => "is not a directory".to_owned(),
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => "does not exist".to_owned(),
        Err(err) => format!("cannot be resolved: {err}"),
    };
    Err(RuntimeError::NoWorkspace {
        path: path.to_path_buf(),
        problem,
    })
}

/// Whether `given` names a stored session's workspace: the same path, or
/// the same directory once links are resolved (a session stored before
/// workspaces were resolved holds the name it was given, maybe a link).
pub async fn is_workspace(stored: &Path, given: &Path) -> bool {
    if stored == given {
        return true;
    }
    match (
        tokio::fs::canonicalize(stored).await,
        tokio::fs::canonicalize(given).await,
    ) {
        (Ok(stored), Ok(given)) => stored == given,
        _ => false,
    }
}

/// Settings of the runtime itself.
#[derive(Debug, Clone)]
pub struct RuntimeConfig {
    pub loop_config: LoopConfig,
    /// Events buffered per session for subscribers before they are told they lagged.
    pub event_buffer: usize,
    /// The mode new sessions start in.
    pub default_mode: Mode,
    /// Where tools may reach besides each session's workspace.
    pub paths: PathsConfig,
    /// Limits on subagents (`delegate`).
    pub subagents: SubagentConfig,
    /// How sessions' leases are held (`Runtime::set_leases`).
    pub leases: LeaseTiming,
}

/// The path boundary every session's tools get, around its workspace.
#[derive(Debug, Clone)]
pub struct PathsConfig {
    /// Directories outside the workspace tools may read and write.
    pub extra_roots: Vec<PathBuf>,
    /// Paths refused everywhere (`~` allowed).
    pub forbidden: Vec<String>,
    /// Paths written only with a person's approval (`core::boundary::Protected`).
    pub protected: Vec<String>,
    /// What `~` means.
    pub home: Option<PathBuf>,
}

impl Default for PathsConfig {
    fn default() -> Self {
        Self {
            extra_roots: Vec::new(),
            forbidden: Vec::new(),
            protected: crate::core::policy::DEFAULT_PROTECTED
                .iter()
                .map(|entry| (*entry).to_owned())
                .collect(),
            home: None,
        }
    }
}

impl PathsConfig {
    /// The boundary around `workspace` and `extra_roots`.
    pub fn boundary(&self, workspace: &Path, extra_roots: &[PathBuf]) -> PathBoundary {
        PathBoundary::new(workspace, extra_roots, &self.forbidden, self.home.clone())
            .with_protected(crate::core::policy::Protected::new(
                &self.protected,
                self.home.as_deref(),
            ))
    }
}

impl Default for RuntimeConfig {
    fn default() -> Self {
        Self {
            loop_config: LoopConfig::default(),
            event_buffer: 1024,
            default_mode: Mode::default(),
            paths: PathsConfig::default(),
            subagents: SubagentConfig::default(),
            leases: LeaseTiming::default(),
        }
    }
}

/// What the next model turn of a session would be sent (`Runtime::context`).
#[derive(Debug, Clone, serde::Serialize)]
pub struct ContextView {
    pub provider: String,
    pub model: String,
    /// The model's context window, in tokens.
    pub window: usize,
    pub system: String,
    pub system_tokens: usize,
    pub tools: Vec<super::provider::ToolSpec>,
    pub tool_tokens: usize,
    /// The conversation from its last compaction point on, fitted.
    pub messages: Vec<Message>,
    /// The estimate for each message, in order.
    pub message_tokens: Vec<usize>,
    /// Tool outputs shortened and oldest messages dropped to fit the window.
    pub shortened: usize,
    pub dropped: usize,
    /// How tokens were counted: the tokenizer (`o200k_base`,
    /// `cl100k_base`) or `bytes` (four per token), times `calibration`.
    pub counted_by: &'static str,
    /// Reported ÷ estimated for this provider and model so far (1 before
    /// a turn was reported; `core::tokens`).
    pub calibration: f64,
}

/// What a face needs to create a session.
#[derive(Debug, Clone)]
pub struct NewSession {
    pub workspace: PathBuf,
    pub origin: Origin,
    pub mcp_servers: serde_json::Value,
    /// The conversation the session belongs to beyond itself (a chat, whose
    /// `/new` sessions share its conversation memory).
    pub conversation: Option<String>,
    /// The session's own `system_prompt` and `instructions`, over the
    /// configured ones.
    pub prompt: PromptSettings,
}

/// A submitted prompt: its run, and how it ended once it has.
pub struct RunTicket {
    pub run_id: RunId,
    pub done: oneshot::Receiver<RunOutcome>,
}

/// What a queued run does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum RunKind {
    /// The agent loop on the run's prompt.
    Prompt,
    /// A person's command (its text is the run's prompt).
    Command(SessionCommand),
}

/// The core, shared by every face; cheap to clone.
/// The thought level that stands for "the provider's default".
pub const DEFAULT_THOUGHT_LEVEL: &str = "default";

#[derive(Clone)]
pub struct Runtime {
    inner: Arc<Inner>,
}

struct Inner {
    /// Where everything durable goes.
    journal: Arc<dyn Journal>,
    /// Swapped whole when the person logs in or out (`set_providers`).
    providers: std::sync::RwLock<Arc<Providers>>,
    /// The tools and the rules around them, shared by every run.
    gate: Arc<ToolGate>,
    /// Approvals waiting for an answer from any face; the first answer wins.
    approvals: Arc<PendingApprovals>,
    /// Questions to the person waiting for an answer from any face.
    questions: Arc<PendingQuestions>,
    /// Subagents running at once, at most `config.subagents.max_parallel`.
    subagent_slots: Arc<tokio::sync::Semaphore>,
    /// Counters every run updates, for faces that report on the runtime.
    stats: Arc<Stats>,
    config: RuntimeConfig,
    /// Sessions with a worker task, by id.
    live: Mutex<HashMap<SessionId, Arc<LiveSession>>>,
    /// Every session worker, so shutdown can wait for runs to record their end.
    tasks: TaskTracker,
    /// Cancelled on shutdown: stops workers and cancels their runs.
    shutdown: CancellationToken,
    /// Builds each live session's extra tools (the configured MCP servers);
    /// set once at start, before any session is live.
    session_tools: std::sync::OnceLock<Arc<dyn SessionToolsFactory>>,
    /// Finds the facts about the machine the system prompt states; set once
    /// at start (none: the prompt says only what the core knows).
    environment: std::sync::OnceLock<Arc<dyn EnvironmentProbe>>,
    /// Where memory items are kept; set once at start (none: no memory).
    memory: std::sync::OnceLock<Arc<dyn Memories>>,
    /// How far token estimates were from the providers' reports.
    calibration: Arc<super::tokens::Calibration>,
    /// The sessions' leases and this process's name as their holder; set
    /// once at start (none: one process, nobody else to keep out).
    leases: std::sync::OnceLock<(Arc<dyn Leases>, String)>,
    /// Wakes faces following another process's runs and this process's
    /// owner side for requests left in the journal (`Runtime::set_notifier`).
    notifier: std::sync::OnceLock<Arc<dyn Notifier>>,
    /// The task carrying out other processes' requests is started once.
    taking_controls: std::sync::Once,
    /// The task keeping this process's lease is started once, with its
    /// first run.
    keeping_process_lease: std::sync::Once,
}

/// How a process holds the leases of the sessions it runs.
#[derive(Debug, Clone, Copy)]
pub struct LeaseTiming {
    /// How long a lease lasts unless renewed: a process that stops without
    /// giving it up (and cannot be seen dead) holds the session up this long.
    pub ttl_ms: i64,
    /// How often a held lease is renewed while a run works.
    pub renew: std::time::Duration,
    /// How often a run waiting for another process's lease asks again.
    pub poll: std::time::Duration,
}

impl Default for LeaseTiming {
    fn default() -> Self {
        Self::lasting(std::time::Duration::from_secs(15))
    }
}

impl LeaseTiming {
    /// Leases lasting `ttl`, renewed three times as often, asked for again
    /// every 200 ms (or a tenth of `ttl`, when shorter).
    pub fn lasting(ttl: std::time::Duration) -> Self {
        Self {
            ttl_ms: i64::try_from(ttl.as_millis()).unwrap_or(i64::MAX),
            renew: ttl / 3,
            poll: (ttl / 10).min(std::time::Duration::from_millis(200)),
        }
    }
}

/// A lease held for a run: renewed in the background until the run ends.
struct Held {
    lease: Arc<Mutex<Lease>>,
    renewal: CancellationToken,
}

/// A session that can take prompts now.
struct LiveSession {
    /// Current settings; the store has the same, this copy saves a read per prompt.
    session: Mutex<Session>,
    /// Publishes every event of the session's runs.
    events: broadcast::Sender<Arc<EventRecord>>,
    /// The worker's queue of runs.
    queue: mpsc::UnboundedSender<QueuedRun>,
    /// Cancellation of each run not yet ended (the active one and those queued).
    pending: Mutex<Vec<(RunId, CancellationToken)>>,
    /// Cancelled when the session is closed; ends the worker.
    closed: CancellationToken,
    /// The worker task, awaited when the session is closed.
    worker: Mutex<Option<tokio::task::JoinHandle<()>>>,
    /// Answers remembered for the session (`allow_always` / `reject_always`).
    grants: Arc<Mutex<Vec<Grant>>>,
    /// File access through the client that opened the session, if it offers it.
    client_files: Mutex<Option<Arc<dyn ClientFiles>>>,
    /// The terminal of the client that opened the session, if it offers one.
    client_terminal: Mutex<Option<Arc<dyn ClientTerminal>>>,
    /// Tools beyond the built-in ones (MCP servers); stopped when the session closes.
    session_tools: Mutex<Option<Arc<dyn SessionTools>>>,
    /// What the person was last told about the workspace's own hooks
    /// waiting for their trust: told again only when it changes.
    told_trust: Mutex<Option<String>>,
    /// A subagent's limits (its tools, its turn cap), set when it is made.
    child: Mutex<Option<subagents::ChildLimits>>,
    /// Directories the client added to this session's boundary
    /// (`additionalDirectories`), beside the configured extra roots.
    extra_roots: Mutex<Vec<PathBuf>>,
    /// Messages sent while a prompt's run works (`Runtime::steer`).
    steering: Arc<super::steering::SteerBox>,
}

struct QueuedRun {
    id: RunId,
    /// The sequence number the run's next event takes (queued events came first).
    next_seq: u64,
    /// What the run does: answer a prompt or carry out a command.
    kind: RunKind,
    content: Vec<ContentPart>,
    cancel: CancellationToken,
    done: oneshot::Sender<RunOutcome>,
}

/// How long `SessionEnd` hooks may hold up a process's exit.
const SESSION_END_WAIT: std::time::Duration = std::time::Duration::from_secs(5);

impl Runtime {
    pub fn new(
        journal: Arc<dyn Journal>,
        providers: Providers,
        gate: Arc<ToolGate>,
        config: RuntimeConfig,
    ) -> Self {
        Self {
            inner: Arc::new(Inner {
                journal,
                providers: std::sync::RwLock::new(Arc::new(providers)),
                gate,
                approvals: Arc::new(PendingApprovals::default()),
                questions: Arc::new(PendingQuestions::default()),
                subagent_slots: Arc::new(tokio::sync::Semaphore::new(
                    config.subagents.max_parallel.max(1),
                )),
                stats: Arc::new(Stats::default()),
                config,
                live: Mutex::new(HashMap::new()),
                tasks: TaskTracker::new(),
                shutdown: CancellationToken::new(),
                session_tools: std::sync::OnceLock::new(),
                environment: std::sync::OnceLock::new(),
                memory: std::sync::OnceLock::new(),
                calibration: Arc::default(),
                leases: std::sync::OnceLock::new(),
                keeping_process_lease: std::sync::Once::new(),
                notifier: std::sync::OnceLock::new(),
                taking_controls: std::sync::Once::new(),
            }),
        }
    }

    /// Runs prompts only while holding their session's lease in `leases`,
    /// as `holder` (this process's unique name); only the first call counts.
    pub fn set_leases(&self, leases: Arc<dyn Leases>, holder: String) {
        let _ = self.inner.leases.set((leases, holder));
    }

    /// Follows the journal's changes through `notifier`: faces see the runs
    /// another process works on a session (read from the tape when woken),
    /// and requests other processes left for this one's runs (a cancel, an
    /// answer) are carried out. Only the first call counts.
    pub fn set_notifier(&self, notifier: Arc<dyn Notifier>) {
        let _ = self.inner.notifier.set(notifier);
    }

    /// Starts carrying out requests other processes leave for this one's
    /// runs, once a session is live here (not at start-up: a process that
    /// only answers `initialize` watches nothing).
    fn start_taking_controls(&self) {
        let Some(notifier) = self.inner.notifier.get().cloned() else {
            return;
        };
        self.inner.taking_controls.call_once(|| {
            let runtime = self.clone();
            let mut wake = notifier.watch();
            let shutdown = self.inner.shutdown.clone();
            self.inner.tasks.spawn(async move {
                loop {
                    tokio::select! {
                        _ = shutdown.cancelled() => return,
                        changed = wake.changed() => if changed.is_err() { return },
                    }
                    runtime.take_controls().await;
                }
            });
        });
    }

    /// The leases this process holds sessions by, its name as their holder
    /// and how it keeps them: a part of the process that must be the only
    /// one of its kind (a chat channel account's delivery) holds its own
    /// lease the same way. `None` when no leases were set.
    pub fn leases(&self) -> Option<(Arc<dyn Leases>, String, LeaseTiming)> {
        self.inner
            .leases
            .get()
            .map(|(leases, holder)| (leases.clone(), holder.clone(), self.inner.config.leases))
    }

    /// Holds this process's own lease (`LeaseKey::process`) from its first
    /// run until shutdown, renewed as a session's is: while it lives, the
    /// runs it queued behind another process's are its own; once it lapses
    /// (the process killed or stopped past it), whoever opens the journal
    /// next ends them (`store::writer::recover_interrupted`).
    fn keep_process_lease(&self) {
        let Some((leases, holder)) = self.inner.leases.get().cloned() else {
            return;
        };
        self.inner.keeping_process_lease.call_once(|| {
            let shutdown = self.inner.shutdown.clone();
            let timing = self.inner.config.leases;
            self.inner.tasks.spawn(async move {
                let key = LeaseKey::process(&holder);
                let mut held: Option<Lease> = None;
                loop {
                    let kept = match &held {
                        Some(lease) => leases.renew(lease, now_millis(), timing.ttl_ms).await,
                        None => Err(LeaseError::Lost),
                    };
                    held = match kept {
                        Ok(lease) => Some(lease),
                        Err(_) => match leases
                            .claim(&key, &holder, now_millis(), timing.ttl_ms)
                            .await
                        {
                            Ok(lease) => Some(lease),
                            Err(err) => {
                                tracing::warn!(error = %err, "cannot keep this process's lease");
                                None
                            }
                        },
                    };
                    tokio::select! {
                        _ = shutdown.cancelled() => break,
                        _ = tokio::time::sleep(timing.renew) => {}
                    }
                }
                if let Some(lease) = held
                    && let Err(err) = leases.release(&lease).await
                {
                    tracing::debug!(error = %err, "cannot release this process's lease");
                }
            });
        });
    }

    /// Carries out the requests left in the journal that are about this
    /// process's runs: each taken first (so once), then done as this
    /// process's own face would.
    async fn take_controls(&self) {
        let working: Vec<Arc<LiveSession>> = lock(&self.inner.live)
            .values()
            .filter(|live| !lock(&live.pending).is_empty())
            .cloned()
            .collect();
        for live in working {
            let id = lock(&live.session).id.clone();
            let controls = match self.inner.journal.controls(&id).await {
                Ok(controls) => controls,
                Err(err) => {
                    tracing::warn!(session = %id, error = %err, "cannot read requests for the session");
                    continue;
                }
            };
            for (number, control) in controls {
                if !self.is_mine(&live, &id, &control) {
                    continue;
                }
                match self
                    .inner
                    .journal
                    .commit(Write::TakeControl { id: number })
                    .await
                {
                    Ok(()) => self.carry_out(&id, control),
                    Err(JournalError::Conflict(_)) => {}
                    Err(err) => {
                        tracing::warn!(session = %id, error = %err, "cannot take a request for the session");
                    }
                }
            }
        }
    }

    /// Whether a request is about a run, an approval or a question of this process.
    fn is_mine(&self, live: &LiveSession, session: &SessionId, control: &Control) -> bool {
        match control {
            Control::Cancel { runs } => lock(&live.pending)
                .iter()
                .any(|(run, _)| runs.contains(run)),
            Control::Approval { approval_id, .. } => {
                self.inner.approvals.waiting(session).contains(approval_id)
            }
            Control::Question { question_id, .. } => {
                self.inner.questions.waiting(session).contains(question_id)
            }
        }
    }

    fn carry_out(&self, session: &SessionId, control: Control) {
        match control {
            Control::Cancel { runs } => {
                for run in runs {
                    self.cancel_run(session, &run);
                }
            }
            Control::Approval {
                approval_id,
                decision,
            } => {
                self.answer_approval(session, &approval_id, decision);
            }
            Control::Question {
                question_id,
                answer,
            } => {
                self.answer_question(session, &question_id, answer);
            }
        }
    }

    /// Answers an approval that `run` of the session asks, wherever the run
    /// works: here, or in another process whose run this one follows from
    /// the tape, through the journal (the first answer wins there). False
    /// when it is not waiting here and no other process can be told.
    pub fn answer_approval_of(
        &self,
        session: &SessionId,
        run: &RunId,
        approval_id: &str,
        decision: ApprovalDecision,
    ) -> bool {
        if self.works_here(session, run) || self.inner.notifier.get().is_none() {
            return self.answer_approval(session, approval_id, decision);
        }
        self.pass_on(
            session,
            Control::Approval {
                approval_id: approval_id.to_owned(),
                decision,
            },
        );
        true
    }

    /// Answers a question that `run` of the session asks, wherever the run
    /// works (see [`Runtime::answer_approval_of`]).
    pub fn answer_question_of(
        &self,
        session: &SessionId,
        run: &RunId,
        question_id: &str,
        answer: QuestionAnswer,
    ) -> bool {
        if self.works_here(session, run) || self.inner.notifier.get().is_none() {
            return self.answer_question(session, question_id, answer);
        }
        self.pass_on(
            session,
            Control::Question {
                question_id: question_id.to_owned(),
                answer,
            },
        );
        true
    }

    /// Whether this process works (or has queued) `run` of the session.
    fn works_here(&self, session: &SessionId, run: &RunId) -> bool {
        self.live(session)
            .is_some_and(|live| lock(&live.pending).iter().any(|(id, _)| id == run))
    }

    /// Leaves `control` in the journal for the process running the
    /// session's runs, when another holds its lease.
    fn pass_on(&self, session: &SessionId, control: Control) {
        self.inner.journal.submit(Write::Control {
            session: session.clone(),
            control,
            at: now_millis(),
        });
    }

    /// Takes the session's lease now, for a prompt about to be sent, or
    /// says who holds it (`RuntimeError::Busy`): a face that must not wait
    /// (`pincer run --no-wait`) asks this first.
    pub async fn claim_now(&self, id: &SessionId) -> Result<(), RuntimeError> {
        let Some((leases, holder)) = self.inner.leases.get() else {
            return Ok(());
        };
        let timing = self.inner.config.leases;
        match leases
            .claim(&LeaseKey::session(id), holder, now_millis(), timing.ttl_ms)
            .await
        {
            Ok(_) => Ok(()),
            Err(LeaseError::Held { holder, .. }) => Err(RuntimeError::Busy { holder }),
            Err(err) => Err(RuntimeError::Lease(err.to_string())),
        }
    }

    /// Waits until this process holds the session's lease (telling the
    /// person once that another process runs it), then keeps it renewed
    /// until [`Runtime::let_go`]. `Err` with how the run ends when it is
    /// cancelled meanwhile or the lease cannot be had.
    async fn hold(
        &self,
        id: &SessionId,
        cancel: &CancellationToken,
        emitter: &mut Emitter,
    ) -> Result<Option<Held>, RunOutcome> {
        let Some((leases, holder)) = self.inner.leases.get() else {
            return Ok(None);
        };
        let timing = self.inner.config.leases;
        let mut told = false;
        let lease = loop {
            match leases
                .claim(&LeaseKey::session(id), holder, now_millis(), timing.ttl_ms)
                .await
            {
                Ok(lease) => break lease,
                Err(LeaseError::Held { holder: other, .. }) => {
                    if !told {
                        told = true;
                        emitter.emit(Event::Notice {
                            message: format!(
                                "Another Pincer process ({other}) is running this session; this prompt runs once it is done."
                            ),
                        });
                    }
                    tokio::select! {
                        _ = cancel.cancelled() => return Err(RunOutcome::Cancelled),
                        _ = tokio::time::sleep(timing.poll) => {}
                    }
                }
                Err(err) => {
                    return Err(RunOutcome::Failed(format!(
                        "cannot take the session's lease: {err}"
                    )));
                }
            }
        };
        emitter.fence_with(Some(lease.fence()));
        // Holding the lease, no other process may have a run of this session
        // working: one left `running` or `waiting` belongs to a process that
        // lost the lease (killed, or stopped past its expiry). Ended here,
        // under this lease, so exactly once.
        let interrupted = self
            .inner
            .journal
            .commit(emitter.fenced(Write::InterruptRuns {
                session: id.clone(),
                error: "interrupted: the process running it stopped holding the session (it was killed or stopped past its lease)".to_owned(),
                at: now_millis(),
            }))
            .await;
        if let Err(err) = interrupted {
            return Err(RunOutcome::Failed(format!(
                "cannot take over the session: {err}"
            )));
        }
        let lease = Arc::new(Mutex::new(lease));
        let renewal = CancellationToken::new();
        let (leases, kept, stop, run, shutdown) = (
            leases.clone(),
            lease.clone(),
            renewal.clone(),
            cancel.clone(),
            self.inner.shutdown.clone(),
        );
        self.inner.tasks.spawn(async move {
            loop {
                tokio::select! {
                    _ = stop.cancelled() => return,
                    _ = shutdown.cancelled() => return,
                    _ = tokio::time::sleep(timing.renew) => {}
                }
                let current = lock(&kept).clone();
                match leases.renew(&current, now_millis(), timing.ttl_ms).await {
                    Ok(renewed) => *lock(&kept) = renewed,
                    Err(err) => {
                        // Another process may run the session now: this
                        // run must stop rather than write beside it.
                        tracing::warn!(session = %current.key, error = %err, "lost the session's lease; cancelling its run");
                        run.cancel();
                        return;
                    }
                }
            }
        });
        Ok(Some(Held { lease, renewal }))
    }

    /// Stops renewing a run's lease and gives it up, unless more runs of
    /// the session wait in this process (they take it on at once).
    async fn let_go(&self, held: Option<Held>, more: bool) {
        let (Some(held), Some((leases, _))) = (held, self.inner.leases.get()) else {
            return;
        };
        held.renewal.cancel();
        if more {
            return;
        }
        let lease = lock(&held.lease).clone();
        if let Err(err) = leases.release(&lease).await {
            tracing::warn!(session = %lease.key, error = %err, "cannot release the session's lease");
        }
    }

    /// Gives every run from now on the memory kept in `store` (recall, and
    /// what the memory tools work with); only the first call counts.
    pub fn set_memories(&self, store: Arc<dyn Memories>) {
        let _ = self.inner.memory.set(store);
    }

    /// Counts tokens for `provider`'s `model`, calibrated by what this
    /// runtime's runs were told.
    fn counter(&self, provider: &str, model: &str) -> super::tokens::Counter {
        super::tokens::Counter::new(provider, model, self.inner.calibration.clone())
    }

    /// Memory as the faces manage it for a person (checked, through the
    /// safety pass), when a store was set.
    pub fn memory(&self) -> Option<Keeper> {
        self.inner
            .memory
            .get()
            .map(|store| Keeper::new(store.clone(), self.inner.gate.safety.clone()))
    }

    /// What `provider` has cost today (UTC), when a daily budget is set for
    /// it: the sum in the budgets' currency.
    async fn spent_today(&self, provider: &str) -> Option<Cost> {
        let budgets = &self.inner.config.loop_config.budgets;
        if !budgets.daily.contains_key(provider) {
            return None;
        }
        let midnight = jiff::Timestamp::now()
            .to_zoned(jiff::tz::TimeZone::UTC)
            .start_of_day()
            .map(|start| start.timestamp().as_millisecond())
            .unwrap_or(0);
        match self.inner.journal.spent(provider, midnight).await {
            Ok(sums) => sums.into_iter().find(|c| c.currency == budgets.currency),
            Err(err) => {
                tracing::warn!(provider, error = %err, "cannot read today's spending");
                None
            }
        }
    }

    /// The answer to `/memory ARGUMENT` in a session (`core::memory::command`).
    pub async fn memory_command(
        &self,
        id: &SessionId,
        argument: Option<&str>,
        default_scope: super::memory::Scope,
    ) -> Result<String, RuntimeError> {
        let Some(keeper) = self.memory() else {
            return Ok("Memory is turned off ([memory] enabled = false).".to_owned());
        };
        let keys = self.memory_keys(id).await?;
        Ok(super::memory::command(&keeper, &keys, id, argument, default_scope).await)
    }

    /// Where a session's memory items go and which it sees.
    pub async fn memory_keys(&self, id: &SessionId) -> Result<ScopeKeys, RuntimeError> {
        let session = self.session(id).await?;
        let root = self.repository_root(&session.workspace).await;
        Ok(scope_keys(&session, Some(&root)))
    }

    /// Where items of a workspace go outside any session (the conversation
    /// key is empty: no conversation's items are seen).
    pub async fn workspace_keys(&self, workspace: &std::path::Path) -> ScopeKeys {
        ScopeKeys {
            workspace: self
                .repository_root(workspace)
                .await
                .to_string_lossy()
                .into_owned(),
            conversation: String::new(),
        }
    }

    /// The repository holding `workspace`, or `workspace` itself.
    async fn repository_root(&self, workspace: &std::path::Path) -> PathBuf {
        let Some(probe) = self.inner.environment.get().cloned() else {
            return workspace.to_path_buf();
        };
        let dir = workspace.to_path_buf();
        tokio::task::spawn_blocking(move || probe.repository_root(&dir).unwrap_or(dir))
            .await
            .unwrap_or_else(|_| workspace.to_path_buf())
    }

    /// Gives every session that becomes live from now on the extra tools
    /// `factory` builds; only the first call counts.
    pub fn set_session_tools_factory(&self, factory: Arc<dyn SessionToolsFactory>) {
        if self.inner.session_tools.set(factory).is_err() {
            tracing::warn!("the session tools factory was already set");
        }
    }

    /// Gives the system prompt its facts about the machine; only the first
    /// call counts.
    pub fn set_environment_probe(&self, probe: Arc<dyn EnvironmentProbe>) {
        if self.inner.environment.set(probe).is_err() {
            tracing::warn!("the environment probe was already set");
        }
    }

    /// Replaces a live session's extra tools (a face that knows more servers
    /// than the configured ones); the previous ones are stopped.
    pub async fn set_session_tools(&self, id: &SessionId, tools: Option<Arc<dyn SessionTools>>) {
        let Some(live) = self.live(id) else {
            if let Some(tools) = tools {
                tools.shutdown().await;
            }
            return;
        };
        let previous = std::mem::replace(&mut *lock(&live.session_tools), tools);
        if let Some(previous) = previous {
            previous.shutdown().await;
        }
    }

    /// The providers now: a snapshot; a login or logout swaps in new ones.
    pub fn providers(&self) -> Arc<Providers> {
        self.inner
            .providers
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    /// Replaces the providers (after a login or logout): sessions and runs
    /// from now on use the new ones.
    pub fn set_providers(&self, providers: Providers) {
        *self
            .inner
            .providers
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Arc::new(providers);
    }

    pub fn gate(&self) -> &ToolGate {
        &self.inner.gate
    }

    /// Puts a message into the session's working prompt run, taken in at
    /// its next turn boundary: that run; `None` when no prompt's run works
    /// now (then the face sends it as a prompt of its own, or says so).
    pub fn steer(
        &self,
        id: &SessionId,
        content: Vec<ContentPart>,
    ) -> Result<Option<RunId>, RuntimeError> {
        let live = self
            .live(id)
            .ok_or_else(|| RuntimeError::SessionNotFound(id.clone()))?;
        let (provider, model) = {
            let session = lock(&live.session);
            (session.provider.clone(), session.model.clone())
        };
        self.check_content(&provider, &model, &content)?;
        Ok(live.steering.put(content))
    }

    /// Answers a waiting approval of a session; false if it is not waiting
    /// (already answered elsewhere, timed out, or its run ended).
    pub fn answer_approval(
        &self,
        session: &SessionId,
        approval_id: &str,
        decision: ApprovalDecision,
    ) -> bool {
        match decision {
            ApprovalDecision::AllowOnce
            | ApprovalDecision::AllowAlways
            | ApprovalDecision::RejectOnce
            | ApprovalDecision::RejectAlways
            | ApprovalDecision::Unattended => {
                self.inner.approvals.answer(session, approval_id, decision)
            }
            // Only the runtime itself decides these.
            ApprovalDecision::TimedOut | ApprovalDecision::Cancelled => false,
        }
    }

    /// Ids of a session's approvals waiting for an answer.
    pub fn waiting_approvals(&self, session: &SessionId) -> Vec<String> {
        self.inner.approvals.waiting(session)
    }

    /// The `approval_requested` events of approvals waiting for an answer, of
    /// one session or of every session, oldest first.
    pub fn pending_approvals(&self, session: Option<&SessionId>) -> Vec<Arc<EventRecord>> {
        self.inner.approvals.requests(session)
    }

    /// The approvals waiting for an answer wherever their runs work: this
    /// process's, and those of runs other processes sharing the journal
    /// work (read from the tapes of runs `waiting`), of one session or of
    /// every session, oldest first. Answer one with
    /// [`Runtime::answer_approval_of`].
    pub async fn approvals_everywhere(&self, session: Option<&SessionId>) -> Vec<Arc<EventRecord>> {
        let mut found = self.pending_approvals(session);
        found.extend(self.asked_elsewhere(session, true).await);
        found.sort_by_key(|record| record.at);
        found
    }

    /// The questions waiting for an answer wherever their runs work (see
    /// [`Runtime::approvals_everywhere`]).
    pub async fn questions_everywhere(&self, session: Option<&SessionId>) -> Vec<Arc<EventRecord>> {
        let mut found = self.pending_questions(session);
        found.extend(self.asked_elsewhere(session, false).await);
        found.sort_by_key(|record| record.at);
        found
    }

    /// The approvals (or questions) asked on the tapes of waiting runs that
    /// work in other processes and not answered there yet.
    async fn asked_elsewhere(
        &self,
        session: Option<&SessionId>,
        approvals: bool,
    ) -> Vec<Arc<EventRecord>> {
        if self.inner.notifier.get().is_none() {
            return Vec::new();
        }
        let runs = match self.inner.journal.waiting_runs().await {
            Ok(runs) => runs,
            Err(err) => {
                tracing::warn!(error = %err, "cannot read the runs waiting for an answer");
                return Vec::new();
            }
        };
        let mut found = Vec::new();
        for run in runs {
            if session.is_some_and(|s| s != &run.session_id)
                || self.works_here(&run.session_id, &run.id)
            {
                continue;
            }
            let tape = match self.inner.journal.tape(&run.id, 0, None).await {
                Ok(tape) => tape,
                Err(err) => {
                    tracing::warn!(run = %run.id, error = %err, "cannot read a waiting run's tape");
                    continue;
                }
            };
            let mut open: Vec<(String, EventRecord)> = Vec::new();
            for record in tape {
                match (&record.event, approvals) {
                    (
                        Event::ApprovalRequested {
                            approval_id: id, ..
                        },
                        true,
                    )
                    | (
                        Event::QuestionAsked {
                            question_id: id, ..
                        },
                        false,
                    ) => {
                        open.push((id.clone(), record.clone()));
                    }
                    (
                        Event::ApprovalDecided {
                            approval_id: id, ..
                        },
                        true,
                    )
                    | (
                        Event::QuestionAnswered {
                            question_id: id, ..
                        },
                        false,
                    ) => {
                        open.retain(|(asked, _)| asked != id);
                    }
                    _ => {}
                }
            }
            found.extend(open.into_iter().map(|(_, record)| Arc::new(record)));
        }
        found
    }

    /// Answers a waiting question of a session (`ask_user`); false if it is
    /// not waiting (already answered elsewhere, timed out, or its run ended).
    pub fn answer_question(
        &self,
        session: &SessionId,
        question_id: &str,
        answer: QuestionAnswer,
    ) -> bool {
        match answer.outcome {
            QuestionOutcome::Answered | QuestionOutcome::Declined | QuestionOutcome::Unattended => {
                self.inner.questions.answer(session, question_id, answer)
            }
            // Only the runtime itself decides these.
            QuestionOutcome::TimedOut | QuestionOutcome::Cancelled => false,
        }
    }

    /// The `question_asked` events of questions waiting for an answer, of
    /// one session or of every session, oldest first.
    pub fn pending_questions(&self, session: Option<&SessionId>) -> Vec<Arc<EventRecord>> {
        self.inner.questions.requests(session)
    }

    /// Answers the session's oldest waiting question with what the person
    /// wrote (a number or an option's text picks that option); false when
    /// no question waits.
    pub fn answer_with_reply(&self, session: &SessionId, reply: &str) -> bool {
        self.pending_questions(Some(session))
            .into_iter()
            .any(|record| match record.event.question() {
                Some((question_id, question)) => self.answer_question(
                    session,
                    question_id,
                    QuestionAnswer::from_reply(&question, reply),
                ),
                None => false,
            })
    }

    /// How many sessions have a worker in this process.
    pub fn live_sessions(&self) -> usize {
        lock(&self.inner.live).len()
    }

    /// The runtime's counters (tool calls, provider latency).
    pub fn stats(&self) -> &Stats {
        &self.inner.stats
    }

    /// The answers a session remembers.
    pub async fn grants(&self, id: &SessionId) -> Result<Vec<Grant>, RuntimeError> {
        if let Some(live) = self.live(id) {
            return Ok(lock(&live.grants).clone());
        }
        self.session(id).await?;
        Ok(self.inner.journal.grants(id).await?)
    }

    /// Routes a live session's file reads and writes through a client (or back
    /// to the local filesystem with `None`).
    pub fn set_client_files(&self, id: &SessionId, files: Option<Arc<dyn ClientFiles>>) {
        if let Some(live) = self.live(id) {
            *lock(&live.client_files) = files;
        }
    }

    /// Runs the session's shell calls in the client's terminal (`None`: in the
    /// server's own sandboxed runner).
    pub fn set_client_terminal(&self, id: &SessionId, terminal: Option<Arc<dyn ClientTerminal>>) {
        if let Some(live) = self.live(id) {
            *lock(&live.client_terminal) = terminal;
        }
    }

    /// Creates a session with the default model and mode and makes it live.
    pub async fn create_session(&self, new: NewSession) -> Result<Session, RuntimeError> {
        self.create_session_with(new, |_| Vec::new()).await
    }

    /// Creates a session and commits `with(&id)` in the same transaction as
    /// its row, all or nothing (a face that maps something of its own to the
    /// new session, so a crash between the two cannot leave either alone).
    pub async fn create_session_with(
        &self,
        new: NewSession,
        with: impl FnOnce(&SessionId) -> Vec<Write>,
    ) -> Result<Session, RuntimeError> {
        let workspace = real_workspace(&new.workspace).await?;
        let choice = self.providers().default_choice();
        let now = now_millis();
        let session = Session {
            id: SessionId::generate(),
            workspace,
            origin: new.origin,
            provider: choice
                .as_ref()
                .map(|c| c.provider.clone())
                .unwrap_or_default(),
            model: choice.map(|c| c.model).unwrap_or_default(),
            mode: self.inner.config.default_mode,
            title: None,
            mcp_servers: new.mcp_servers,
            created_at: now,
            updated_at: now,
            closed: false,
            conversation: new.conversation,
            prompt: new.prompt,
            parent: None,
            thought_level: None,
        };
        let extra = with(&session.id);
        self.start_session(session, extra).await
    }

    /// Stores a new session with `extra` in one transaction, makes it live
    /// and runs the `SessionStart` hooks.
    async fn start_session(
        &self,
        session: Session,
        extra: Vec<Write>,
    ) -> Result<Session, RuntimeError> {
        let insert = Write::InsertSession(session.clone());
        let write = if extra.is_empty() {
            insert
        } else {
            Write::Together(std::iter::once(insert).chain(extra).collect())
        };
        self.inner.journal.commit(write).await?;
        self.make_live(session.clone(), Vec::new())?;
        self.session_hooks(HookEvent::SessionStart, &session, "source", "startup")
            .await;
        Ok(session)
    }

    /// Forks `source` into a new session in `new.workspace`: the source's
    /// model, thought level, mode, prompt settings and conversation memory,
    /// and its conversation — whole, or, with `up_to_prompt = Some(n)`, up to
    /// the source's `n`th user message (the first `n` and all that answered
    /// them). The source is left as it was; the fork's messages belong to no
    /// run of its own (the runs and their tapes stay the source's).
    pub async fn fork_session(
        &self,
        source: &SessionId,
        new: NewSession,
        up_to_prompt: Option<usize>,
    ) -> Result<Session, RuntimeError> {
        let workspace = real_workspace(&new.workspace).await?;
        let from = self.session(source).await?;
        let history = self.history(source).await?;
        let prompts = history
            .iter()
            .filter(|e| matches!(e.message, Message::User { .. }))
            .count();
        let keep = match up_to_prompt {
            None => history.len(),
            Some(n) if n > prompts => {
                return Err(RuntimeError::ForkPastEnd { asked: n, prompts });
            }
            Some(n) => {
                // Just before the user message after the first `n`.
                history
                    .iter()
                    .enumerate()
                    .filter(|(_, e)| matches!(e.message, Message::User { .. }))
                    .nth(n)
                    .map_or(history.len(), |(index, _)| index)
            }
        };
        let now = now_millis();
        let mut prompt = from.prompt.clone();
        if new.prompt.system_prompt.is_some() {
            prompt.system_prompt = new.prompt.system_prompt;
        }
        if new.prompt.instructions.is_some() {
            prompt.instructions = new.prompt.instructions;
        }
        let session = Session {
            id: SessionId::generate(),
            workspace,
            origin: new.origin,
            provider: from.provider.clone(),
            model: from.model.clone(),
            thought_level: from.thought_level.clone(),
            mode: from.mode,
            title: from.title.as_ref().map(|t| format!("{t} (fork)")),
            mcp_servers: new.mcp_servers,
            created_at: now,
            updated_at: now,
            closed: false,
            conversation: Some(
                from.conversation
                    .clone()
                    .unwrap_or_else(|| from.id.as_str().to_owned()),
            ),
            prompt,
            parent: None,
        };
        let messages = history
            .into_iter()
            .take(keep)
            .map(|entry| Write::AppendMessage {
                session_id: session.id.clone(),
                run_id: None,
                message: entry.message,
                at: entry.at,
            })
            .collect();
        self.start_session(session, messages).await
    }

    /// Makes a stored session live (reopening it if it was closed) and returns it.
    pub async fn open_session(&self, id: &SessionId) -> Result<Session, RuntimeError> {
        if let Some(live) = self.live(id) {
            return Ok(lock(&live.session).clone());
        }
        let mut session = self
            .inner
            .journal
            .session(id)
            .await?
            .ok_or_else(|| RuntimeError::SessionNotFound(id.clone()))?;
        if session.closed {
            session.closed = false;
            session.updated_at = now_millis();
            self.inner
                .journal
                .commit(Write::SetClosed {
                    id: id.clone(),
                    closed: false,
                    at: session.updated_at,
                })
                .await?;
        }
        let grants = self.inner.journal.grants(id).await?;
        self.make_live(session.clone(), grants)?;
        self.session_hooks(HookEvent::SessionStart, &session, "source", "resume")
            .await;
        Ok(session)
    }

    /// Runs the `SessionStart` or `SessionEnd` hooks of a session (the
    /// subject, `source` or `reason`, is what their matchers test). A
    /// `SessionStart` hook's context joins the conversation as a note the
    /// model reads; neither can block.
    async fn session_hooks(&self, event: HookEvent, session: &Session, field: &str, subject: &str) {
        let hooks = &self.inner.gate.hooks;
        // A subagent's session is part of its parent's.
        if session.parent.is_some() || !hooks.listens(event, Some(subject)) {
            return;
        }
        let input = HookInput::new(
            event,
            session.id.as_str(),
            session.workspace.clone(),
            session.mode.as_str(),
        )
        .about(field, subject);
        let outcome = hooks.fire(input).await;
        for message in outcome.messages() {
            tracing::info!(session = %session.id, event = event.as_str(), "{}", self.inner.gate.safety.redact(&message).0);
        }
        if event == HookEvent::SessionStart
            && let Some(context) = outcome.context()
        {
            self.inner.journal.submit(Write::AppendMessage {
                session_id: session.id.clone(),
                run_id: None,
                message: Message::Note {
                    text: format!(
                        "context a SessionStart hook added: {}",
                        self.inner.gate.safety.check(&context).text
                    ),
                },
                at: now_millis(),
            });
        }
    }

    /// The session's current state, live or stored.
    pub async fn session(&self, id: &SessionId) -> Result<Session, RuntimeError> {
        if let Some(live) = self.live(id) {
            return Ok(lock(&live.session).clone());
        }
        self.inner
            .journal
            .session(id)
            .await?
            .ok_or_else(|| RuntimeError::SessionNotFound(id.clone()))
    }

    /// Sessions newest first; in a workspace, those stored under the
    /// directory it names, and (as sessions made before workspaces were
    /// stored resolved hold the name they were given) under that name too.
    pub async fn list_sessions(&self, query: SessionQuery) -> Result<Vec<Session>, RuntimeError> {
        let real = match &query.workspace {
            Some(given) => tokio::fs::canonicalize(given)
                .await
                .ok()
                .filter(|real| real != given),
            None => None,
        };
        let Some(real) = real else {
            return Ok(self.inner.journal.sessions(query).await?);
        };
        let mut sessions = self
            .inner
            .journal
            .sessions(SessionQuery {
                workspace: Some(real),
                ..query.clone()
            })
            .await?;
        sessions.extend(self.inner.journal.sessions(query.clone()).await?);
        // The store's order: newest first, then by id, both descending.
        sessions.sort_by(|a, b| (b.updated_at, b.id.as_str()).cmp(&(a.updated_at, a.id.as_str())));
        if query.limit > 0 {
            sessions.truncate(query.limit);
        }
        Ok(sessions)
    }

    pub async fn history(&self, id: &SessionId) -> Result<Vec<HistoryEntry>, RuntimeError> {
        self.inner.journal.flush().await?;
        Ok(self.inner.journal.history(id).await?)
    }

    pub async fn runs(&self, id: &SessionId) -> Result<Vec<RunInfo>, RuntimeError> {
        self.session(id).await?;
        self.inner.journal.flush().await?;
        Ok(self.inner.journal.runs(id).await?)
    }

    /// The task list the model last kept in this session (its newest `plan`
    /// event among the last 20 runs), for a client that opens the session.
    pub async fn last_plan(&self, id: &SessionId) -> Result<Option<Event>, RuntimeError> {
        const RUNS: usize = 20;
        let runs = self.runs(id).await?;
        for run in runs.iter().rev().take(RUNS) {
            let tape = self.tape(&run.id, 0).await?;
            let plan = tape
                .into_iter()
                .rev()
                .find(|record| matches!(record.event, Event::Plan { .. }));
            if let Some(record) = plan {
                return Ok(Some(record.event));
            }
        }
        Ok(None)
    }

    /// The session's latest `usage` event, with `session_cost` made the sum
    /// over all its runs: what a client reopening the session should show.
    pub async fn last_usage(&self, id: &SessionId) -> Result<Option<Event>, RuntimeError> {
        let runs = self.runs(id).await?;
        let total = runs
            .iter()
            .fold(None, |total, run| Cost::sum(total, run.cost.as_ref()));
        let Some(run) = runs.iter().rev().find(|run| run.usage != Usage::default()) else {
            return Ok(None);
        };
        let tape = self.tape(&run.id, 0).await?;
        let last = tape
            .into_iter()
            .rev()
            .find_map(|record| match record.event {
                Event::Usage {
                    usage,
                    model,
                    cost,
                    context,
                    budget,
                    ..
                } => Some(Event::Usage {
                    usage,
                    model,
                    cost,
                    context,
                    session_cost: total.clone(),
                    budget,
                }),
                _ => None,
            });
        Ok(last)
    }

    pub async fn run(&self, id: &RunId) -> Result<RunInfo, RuntimeError> {
        self.inner.journal.flush().await?;
        self.inner
            .journal
            .run(id)
            .await?
            .ok_or_else(|| RuntimeError::RunNotFound(id.clone()))
    }

    /// A run's events from `from_seq` on, including those not yet committed.
    pub async fn tape(&self, id: &RunId, from_seq: u64) -> Result<Vec<EventRecord>, RuntimeError> {
        self.run(id).await?;
        Ok(self.inner.journal.tape(id, from_seq, None).await?)
    }

    /// At most `limit` of a run's events from `from_seq` on, of those that
    /// are durable: what a resumable stream may hand out, since an event id
    /// a client has seen must name that event forever.
    pub async fn committed_tape(
        &self,
        run: &RunId,
        from_seq: u64,
        limit: usize,
    ) -> Result<Vec<EventRecord>, RuntimeError> {
        self.inner.journal.flush().await?;
        Ok(self.inner.journal.tape(run, from_seq, Some(limit)).await?)
    }

    /// Waits until everything recorded so far is durable: whether the journal
    /// can take writes now.
    pub async fn flush(&self) -> Result<(), RuntimeError> {
        Ok(self.inner.journal.flush().await?)
    }

    /// Subscribes to every event of a live session from now on.
    pub fn subscribe(&self, id: &SessionId) -> Result<Subscription, RuntimeError> {
        let live = self
            .live(id)
            .ok_or_else(|| RuntimeError::SessionNotFound(id.clone()))?;
        Ok(
            Subscription::new(id, live.events.subscribe(), self.inner.journal.clone())
                .following(self.inner.notifier.get().map(|n| n.watch())),
        )
    }

    /// Queues a prompt as a new run of a live session.
    pub async fn prompt(
        &self,
        id: &SessionId,
        content: Vec<ContentPart>,
    ) -> Result<RunTicket, RuntimeError> {
        self.prompt_as(id, RunId::generate(), content).await
    }

    /// Like [`Runtime::prompt`] with the run id chosen by the caller, so a face
    /// can expect the run's events before the call returns.
    pub async fn prompt_as(
        &self,
        id: &SessionId,
        run_id: RunId,
        content: Vec<ContentPart>,
    ) -> Result<RunTicket, RuntimeError> {
        // A session made before any provider was configured takes the
        // default once there is one (after a login).
        let unset = self
            .live(id)
            .is_some_and(|live| lock(&live.session).provider.is_empty());
        if unset && let Some(choice) = self.providers().default_choice() {
            self.update_settings(id, move |session| {
                session.provider = choice.provider;
                session.model = choice.model;
                Ok(())
            })
            .await?;
        }
        self.enqueue(id, run_id, content, RunKind::Prompt)
    }

    /// Queues a command as a run of its own (after the runs before it), like
    /// [`Runtime::prompt_as`]. Its `user_message` event is the command text
    /// (`/compact`, `/undo`); see `core::commands` for what each does.
    pub async fn command_as(
        &self,
        id: &SessionId,
        run_id: RunId,
        command: SessionCommand,
    ) -> Result<RunTicket, RuntimeError> {
        self.enqueue(id, run_id, command.content(), RunKind::Command(command))
    }

    fn enqueue(
        &self,
        id: &SessionId,
        run_id: RunId,
        content: Vec<ContentPart>,
        kind: RunKind,
    ) -> Result<RunTicket, RuntimeError> {
        let live = self
            .live(id)
            .ok_or_else(|| RuntimeError::SessionNotFound(id.clone()))?;
        if self.inner.shutdown.is_cancelled() {
            return Err(RuntimeError::ShuttingDown);
        }
        let (provider, model) = {
            let session = lock(&live.session);
            (session.provider.clone(), session.model.clone())
        };
        self.check_content(&provider, &model, &content)?;
        let now = now_millis();
        self.inner.journal.submit(Write::InsertRun {
            id: run_id.clone(),
            session_id: id.clone(),
            at: now,
        });
        self.keep_process_lease();
        // A prompt `UserPromptSubmit` hooks may still block gets its title
        // once they let it through (`run_loop`).
        let hooked = self
            .inner
            .gate
            .hooks
            .listens(HookEvent::UserPromptSubmit, None);
        let set_title = match kind {
            RunKind::Prompt if !hooked => self.title_from(live.as_ref(), &content, now),
            // A command is no title for a conversation.
            RunKind::Prompt | RunKind::Command(_) => {
                lock(&live.session).updated_at = now;
                None
            }
        };
        let mut emitter = Emitter::new(&self.inner.journal, &live.events, id, &run_id)
            .with_stats(&self.inner.stats);
        emitter.emit(Event::state(RunState::Queued));
        emitter.emit(Event::UserMessage {
            content: content.clone(),
        });
        if let Some(title) = set_title {
            emitter.emit(Event::SessionInfo { title });
        }
        let cancel = CancellationToken::new();
        lock(&live.pending).push((run_id.clone(), cancel.clone()));
        let (done_tx, done_rx) = oneshot::channel();
        let queued = QueuedRun {
            id: run_id.clone(),
            next_seq: emitter.next_seq(),
            kind,
            content,
            cancel,
            done: done_tx,
        };
        if live.queue.send(queued).is_err() {
            return Err(RuntimeError::SessionNotFound(id.clone()));
        }
        Ok(RunTicket {
            run_id,
            done: done_rx,
        })
    }

    /// Whether `model` served by `provider` takes images (`[models]`, then the
    /// provider's setting, then the model's family).
    pub fn accepts_images(&self, provider: &str, model: &str) -> bool {
        self.providers()
            .accepts_images(&self.inner.config.loop_config.models, provider, model)
    }

    /// Whether the model new sessions get takes images.
    /// The mode new sessions start in.
    pub fn default_mode(&self) -> Mode {
        self.inner.config.default_mode
    }

    pub fn default_model_accepts_images(&self) -> bool {
        self.providers()
            .default_choice()
            .is_some_and(|choice| self.accepts_images(&choice.provider, &choice.model))
    }

    /// Refuses a prompt the session's model could not be sent: images that are
    /// not valid, or any image for a model that does not take them. Faces check
    /// images at their edge too, in their own words; this is the last word.
    fn check_content(
        &self,
        provider: &str,
        model: &str,
        content: &[ContentPart],
    ) -> Result<(), RuntimeError> {
        let mut images = false;
        for (index, part) in content.iter().enumerate() {
            if let ContentPart::Image {
                mime_type, data, ..
            } = part
            {
                check_image(mime_type, data).map_err(|err| RuntimeError::InvalidContent {
                    index,
                    message: err.to_string(),
                })?;
                images = true;
            }
        }
        if images && !self.accepts_images(provider, model) {
            return Err(RuntimeError::ImagesNotAccepted {
                model: model.to_owned(),
            });
        }
        Ok(())
    }

    /// Cancels the active run of a session and every run queued behind it.
    pub fn cancel(&self, id: &SessionId) -> Result<usize, RuntimeError> {
        let live = self
            .live(id)
            .ok_or_else(|| RuntimeError::SessionNotFound(id.clone()))?;
        let pending = lock(&live.pending);
        for (_, token) in pending.iter() {
            token.cancel();
        }
        let local: Vec<RunId> = pending.iter().map(|(run, _)| run.clone()).collect();
        let count = local.len();
        drop(pending);
        // Runs another process works on the session are asked to stop
        // through the journal.
        if self.inner.notifier.get().is_some() {
            let runtime = self.clone();
            let id = id.clone();
            self.inner.tasks.spawn(async move {
                let Ok(runs) = runtime.inner.journal.runs(&id).await else {
                    return;
                };
                let theirs: Vec<RunId> = runs
                    .into_iter()
                    .filter(|run| !run.state.is_terminal() && !local.contains(&run.id))
                    .map(|run| run.id)
                    .collect();
                if !theirs.is_empty() {
                    runtime.pass_on(&id, Control::Cancel { runs: theirs });
                }
            });
        }
        Ok(count)
    }

    /// Cancels one run, active or queued; false if it is not pending.
    pub fn cancel_run(&self, session: &SessionId, run: &RunId) -> bool {
        let Some(live) = self.live(session) else {
            return false;
        };
        let pending = lock(&live.pending);
        match pending.iter().find(|(id, _)| id == run) {
            Some((_, token)) => {
                token.cancel();
                true
            }
            None => false,
        }
    }

    /// Cancels a run wherever it works: here, or, when other processes
    /// share the journal, in the process whose run it is (through the
    /// journal: it ends there, and its end reaches the tape). False when it
    /// works nowhere this process can reach.
    pub fn cancel_run_anywhere(&self, session: &SessionId, run: &RunId) -> bool {
        if self.cancel_run(session, run) {
            return true;
        }
        if self.inner.notifier.get().is_none() {
            return false;
        }
        self.pass_on(
            session,
            Control::Cancel {
                runs: vec![run.clone()],
            },
        );
        true
    }

    pub async fn set_mode(&self, id: &SessionId, mode: Mode) -> Result<Session, RuntimeError> {
        self.update_settings(id, |session| {
            session.mode = mode;
            Ok(())
        })
        .await
    }

    /// Switches the session's model; `model` is `provider/model` or a bare model name.
    pub async fn set_model(&self, id: &SessionId, model: &str) -> Result<Session, RuntimeError> {
        let choice = self.providers().find(model).ok_or_else(|| {
            let available: Vec<String> = self
                .providers()
                .choices()
                .iter()
                .map(ModelChoice::id)
                .collect();
            RuntimeError::UnknownModel(
                model.to_owned(),
                if available.is_empty() {
                    "none (no provider is configured)".into()
                } else {
                    available.join(", ")
                },
            )
        })?;
        self.update_settings(id, move |session| {
            session.provider = choice.provider;
            session.model = choice.model;
            Ok(())
        })
        .await
    }

    /// Sets the session's thought level: one of its provider's reasoning
    /// efforts, or `default` for the provider's own default.
    pub async fn set_thought_level(
        &self,
        id: &SessionId,
        level: &str,
    ) -> Result<Session, RuntimeError> {
        let providers = self.providers();
        self.update_settings(id, move |session| {
            let thought = providers.thought(&session.provider);
            if level == DEFAULT_THOUGHT_LEVEL {
                session.thought_level = None;
                return Ok(());
            }
            if !thought.levels.iter().any(|l| l == level) {
                let mut takes: Vec<&str> = thought.levels.iter().map(String::as_str).collect();
                if takes.is_empty() {
                    takes.push("none (its configuration lists no reasoning_efforts)");
                } else {
                    takes.push(DEFAULT_THOUGHT_LEVEL);
                }
                return Err(RuntimeError::UnknownThoughtLevel(
                    level.to_owned(),
                    takes.join(", "),
                ));
            }
            session.thought_level = Some(level.to_owned());
            Ok(())
        })
        .await
    }

    async fn update_settings(
        &self,
        id: &SessionId,
        change: impl FnOnce(&mut Session) -> Result<(), RuntimeError>,
    ) -> Result<Session, RuntimeError> {
        let live = self
            .live(id)
            .ok_or_else(|| RuntimeError::SessionNotFound(id.clone()))?;
        let session = {
            let mut session = lock(&live.session);
            change(&mut session)?;
            session.updated_at = now_millis();
            session.clone()
        };
        self.inner
            .journal
            .commit(Write::UpdateSettings {
                id: id.clone(),
                provider: session.provider.clone(),
                model: session.model.clone(),
                thought_level: session.thought_level.clone(),
                mode: session.mode,
                at: session.updated_at,
            })
            .await?;
        Ok(session)
    }

    /// Deletes a session: cancels its runs (waiting for them to record
    /// their end), then removes its conversation, grants, chat mapping and
    /// tapes, and its subagents' sessions; its runs' summaries and receipts
    /// stay (`Write::DeleteSession`). Unknown to every read afterwards.
    pub async fn delete_session(&self, id: &SessionId) -> Result<(), RuntimeError> {
        self.session(id).await?;
        if self.live(id).is_some() {
            self.close_session(id).await?;
        }
        self.inner
            .journal
            .commit(Write::DeleteSession {
                id: id.clone(),
                at: now_millis(),
            })
            .await?;
        Ok(())
    }

    /// Cancels a session's runs, waits for them to record their end, and marks it closed.
    pub async fn close_session(&self, id: &SessionId) -> Result<(), RuntimeError> {
        let live = {
            let mut map = lock(&self.inner.live);
            map.remove(id)
        };
        let Some(live) = live else {
            // Closing a stored but not live session only marks it.
            self.inner
                .journal
                .session(id)
                .await?
                .ok_or_else(|| RuntimeError::SessionNotFound(id.clone()))?;
            self.inner
                .journal
                .commit(Write::SetClosed {
                    id: id.clone(),
                    closed: true,
                    at: now_millis(),
                })
                .await?;
            return Ok(());
        };
        for (_, token) in lock(&live.pending).iter() {
            token.cancel();
        }
        live.closed.cancel();
        // The worker drains its queue (recording queued runs as cancelled) and exits.
        let worker = lock(&live.worker).take();
        if let Some(worker) = worker
            && let Err(err) = worker.await
        {
            tracing::error!(session = %id, error = %err, "session worker failed");
        }
        let tools = lock(&live.session_tools).take();
        if let Some(tools) = tools {
            tools.shutdown().await;
        }
        let session = lock(&live.session).clone();
        self.session_hooks(HookEvent::SessionEnd, &session, "reason", "other")
            .await;
        self.inner
            .journal
            .commit(Write::SetClosed {
                id: id.clone(),
                closed: true,
                at: now_millis(),
            })
            .await?;
        Ok(())
    }

    /// Cancels every run, waits for each to record its end, and flushes the store.
    pub async fn shutdown(&self) {
        self.inner.shutdown.cancel();
        let sessions: Vec<Arc<LiveSession>> = lock(&self.inner.live).values().cloned().collect();
        for live in sessions {
            for (_, token) in lock(&live.pending).iter() {
                token.cancel();
            }
            live.closed.cancel();
        }
        self.inner.tasks.close();
        self.inner.tasks.wait().await;
        let extra: Vec<Arc<dyn SessionTools>> = lock(&self.inner.live)
            .values()
            .filter_map(|live| lock(&live.session_tools).take())
            .collect();
        futures::future::join_all(extra.iter().map(|tools| tools.shutdown())).await;
        // `SessionEnd` hooks of the sessions still open, given a few seconds
        // at most: the process is on its way out.
        let open: Vec<Session> = lock(&self.inner.live)
            .values()
            .map(|live| lock(&live.session).clone())
            .collect();
        let ends = open.iter().map(|session| {
            self.session_hooks(
                HookEvent::SessionEnd,
                session,
                "reason",
                "prompt_input_exit",
            )
        });
        if tokio::time::timeout(SESSION_END_WAIT, futures::future::join_all(ends))
            .await
            .is_err()
        {
            tracing::warn!("SessionEnd hooks still running at exit were left");
        }
        // Dropping the live sessions closes their event channels, so subscribers
        // drain what is left and then end.
        lock(&self.inner.live).clear();
        if let Err(err) = self.inner.journal.flush().await {
            tracing::error!(error = %err, "final flush failed");
        }
    }

    fn live(&self, id: &SessionId) -> Option<Arc<LiveSession>> {
        lock(&self.inner.live).get(id).cloned()
    }

    fn make_live(&self, session: Session, grants: Vec<Grant>) -> Result<(), RuntimeError> {
        if self.inner.shutdown.is_cancelled() {
            return Err(RuntimeError::ShuttingDown);
        }
        self.start_taking_controls();
        let id = session.id.clone();
        let session_tools = self
            .inner
            .session_tools
            .get()
            .and_then(|factory| factory.for_session(&id, &session.workspace));
        let (events, _) = broadcast::channel(self.inner.config.event_buffer.max(16));
        let (queue, rx) = mpsc::unbounded_channel();
        let live = Arc::new(LiveSession {
            session: Mutex::new(session),
            events,
            queue,
            pending: Mutex::new(Vec::new()),
            closed: self.inner.shutdown.child_token(),
            worker: Mutex::new(None),
            grants: Arc::new(Mutex::new(grants)),
            client_files: Mutex::new(None),
            client_terminal: Mutex::new(None),
            session_tools: Mutex::new(session_tools),
            told_trust: Mutex::new(None),
            child: Mutex::new(None),
            extra_roots: Mutex::new(Vec::new()),
            steering: Arc::default(),
        });
        {
            let mut map = lock(&self.inner.live);
            if map.contains_key(&id) {
                return Ok(());
            }
            map.insert(id, live.clone());
        }
        let runtime = self.clone();
        let worker_live = live.clone();
        let worker = self
            .inner
            .tasks
            .spawn(async move { runtime.session_worker(worker_live, rx).await });
        *lock(&live.worker) = Some(worker);
        Ok(())
    }

    async fn session_worker(
        self,
        live: Arc<LiveSession>,
        mut rx: mpsc::UnboundedReceiver<QueuedRun>,
    ) {
        loop {
            let queued = tokio::select! {
                biased;
                queued = rx.recv() => queued,
                _ = live.closed.cancelled() => {
                    rx.close();
                    rx.recv().await
                }
            };
            let Some(queued) = queued else { break };
            let id = queued.id.clone();
            self.execute(&live, queued).await;
            lock(&live.pending).retain(|(run, _)| run != &id);
        }
    }

    async fn execute(&self, live: &LiveSession, queued: QueuedRun) {
        let id = lock(&live.session).id.clone();
        let mut emitter = Emitter::resume(
            &self.inner.journal,
            &live.events,
            &id,
            &queued.id,
            queued.next_seq,
        )
        .with_stats(&self.inner.stats);
        let mut held = None;
        let outcome = if queued.cancel.is_cancelled() {
            RunOutcome::Cancelled
        } else {
            match self.hold(&id, &queued.cancel, &mut emitter).await {
                Err(outcome) => outcome,
                Ok(lease) => {
                    held = lease;
                    if held.is_some() {
                        self.refresh(live, &id).await;
                    }
                    let session = lock(&live.session).clone();
                    self.run_loop(live, &session, &queued, &mut emitter).await
                }
            }
        };
        // A failure's text may come from an outside party (a provider or a proxy
        // echoing a key, an MCP server): it passes the safety pass before it is
        // stored, logged or shown.
        let outcome = match outcome {
            RunOutcome::Failed(message) => {
                RunOutcome::Failed(self.inner.gate.safety.redact(&message).0)
            }
            kept @ (RunOutcome::Completed(_) | RunOutcome::Cancelled) => kept,
        };
        let outcome = self.finish(&mut emitter, &outcome).await;
        let more = lock(&live.pending).iter().any(|(run, _)| run != &queued.id);
        self.let_go(held, more).await;
        let _ = queued.done.send(outcome);
    }

    /// Reads the session's settings again from the journal once its lease
    /// is held: another process may have changed them (a mode, a model)
    /// since this one last ran the session. Only the settings are taken:
    /// this process commits its own setting changes before it answers them
    /// (so the stored ones are current), while other fields (the title, the
    /// time of the last change) may have writes of its own still queued.
    async fn refresh(&self, live: &LiveSession, id: &SessionId) {
        match self.inner.journal.session(id).await {
            Ok(Some(fresh)) => {
                let mut session = lock(&live.session);
                session.provider = fresh.provider;
                session.model = fresh.model;
                session.thought_level = fresh.thought_level;
                session.mode = fresh.mode;
            }
            Ok(None) => {}
            Err(err) => tracing::warn!(error = %err, "cannot read the session again"),
        }
    }

    async fn run_loop(
        &self,
        live: &LiveSession,
        session: &Session,
        queued: &QueuedRun,
        emitter: &mut Emitter,
    ) -> RunOutcome {
        let store = &self.inner.journal;
        let now = now_millis();
        if let Err(err) = emitter.enter(RunState::Running) {
            return RunOutcome::Failed(err.to_string());
        }
        emitter.emit(Event::state(RunState::Running));
        emitter.submit(Write::SetRunState {
            id: queued.id.clone(),
            state: RunState::Running,
            stop_reason: None,
            error: None,
            usage: Usage::default(),
            cost: None,
            at: now,
        });
        match queued.kind {
            RunKind::Prompt => {
                self.tell_untrusted(live, session, emitter).await;
                // `UserPromptSubmit` hooks may block the prompt (it is then
                // not kept) or add context after it.
                let submitted = self.prompt_hooks(session, queued, emitter).await;
                let context = match submitted {
                    Ok(context) => context,
                    Err(outcome) => return outcome,
                };
                if self
                    .inner
                    .gate
                    .hooks
                    .listens(HookEvent::UserPromptSubmit, None)
                    && let Some(title) = self.title_from(live, &queued.content, now)
                {
                    emitter.emit(Event::SessionInfo { title });
                }
                emitter.submit(Write::AppendMessage {
                    session_id: session.id.clone(),
                    run_id: Some(queued.id.clone()),
                    message: Message::User {
                        content: queued.content.clone(),
                    },
                    at: now,
                });
                if let Some(text) = context {
                    emitter.submit(Write::AppendMessage {
                        session_id: session.id.clone(),
                        run_id: Some(queued.id.clone()),
                        message: Message::Note { text },
                        at: now,
                    });
                }
                let history = match self.model_history(&session.id).await {
                    Ok(history) => history,
                    Err(outcome) => return outcome,
                };
                match self
                    .run_context(live, session, queued, emitter, history)
                    .await
                {
                    Ok(mut context) => {
                        live.steering.open(queued.id.clone());
                        context.steering = Some(live.steering.clone());
                        let outcome =
                            agent_loop::run(&mut context, &self.inner.config.loop_config).await;
                        // Messages that came as the run stopped otherwise
                        // (cancel, cap, failure) join the conversation: the
                        // next prompt carries them.
                        for content in live.steering.close() {
                            context.emitter.append_message(Message::User { content });
                        }
                        outcome
                    }
                    Err(outcome) => outcome,
                }
            }
            RunKind::Command(SessionCommand::Compact) => {
                let history = match self.model_history(&session.id).await {
                    Ok(history) => history,
                    Err(outcome) => return outcome,
                };
                if !compaction::has_anything_to_compact(&history) {
                    return compaction::nothing_to_compact(emitter, &history);
                }
                match self
                    .run_context(live, session, queued, emitter, history)
                    .await
                {
                    Ok(mut context) => {
                        compaction::compact(&mut context, &self.inner.config.loop_config).await
                    }
                    Err(outcome) => outcome,
                }
            }
            RunKind::Command(SessionCommand::Undo) => {
                let tools = self.tool_context(live, session, queued);
                commands::undo(&tools, emitter, store.as_ref()).await
            }
        }
    }

    /// Tells the person, once a session, that the workspace brings hooks
    /// which wait for their trust.
    async fn tell_untrusted(&self, live: &LiveSession, session: &Session, emitter: &mut Emitter) {
        let Some(found) = self
            .inner
            .gate
            .hooks
            .workspace_hooks(&session.workspace)
            .await
        else {
            return;
        };
        let message = trust_notice(&found);
        let mut told = lock(&live.told_trust);
        if *told == message {
            return;
        }
        told.clone_from(&message);
        drop(told);
        if let Some(message) = message {
            emitter.emit(Event::Notice { message });
        }
    }

    /// Trusts the hooks the session's workspace brings (`/trust`): from now
    /// on they run in every session under its project directory. The answer
    /// lists them.
    pub async fn trust_hooks(&self, id: &SessionId) -> Result<String, RuntimeError> {
        let session = self.session(id).await?;
        let Some(found) = self
            .inner
            .gate
            .hooks
            .workspace_hooks(&session.workspace)
            .await
        else {
            return Ok(
                "This workspace brings no hooks Pincer reads (see `[hooks] import` in docs/hooks.md)."
                    .to_owned(),
            );
        };
        if !found.trusted {
            // The files as they are now, which is what the answer lists.
            self.inner
                .journal
                .commit(Write::SetTrust {
                    root: found.root.clone(),
                    trusted: true,
                    at: now_millis(),
                    files: found.files.clone(),
                })
                .await?;
        }
        let mut text = format!(
            "{} {}: its hooks run from now on, as long as their files stay as they are now.",
            if found.trusted {
                "Already trusted:"
            } else {
                "Trusted"
            },
            found.root.display()
        );
        for change in &found.changed {
            text.push_str(&format!("\n- since last trusted: {change}"));
        }
        for hook in &found.hooks {
            text.push_str(&format!("\n- {hook}"));
        }
        for left in &found.left_out {
            text.push_str(&format!("\n- left out: {left}"));
        }
        text.push_str(&format!(
            "\n`pincer trust --revoke {}` takes it back.",
            found.root.display()
        ));
        Ok(text)
    }

    /// Makes the session's first prompt its title, if it has none: the
    /// title, stored, to announce.
    fn title_from(
        &self,
        live: &LiveSession,
        content: &[ContentPart],
        now: super::session::Millis,
    ) -> Option<String> {
        let title = {
            let mut session = lock(&live.session);
            session.updated_at = now;
            if session.title.is_some() {
                return None;
            }
            // A prompt is kept as typed, but the title shown in every list
            // is Pincer's own text: a secret in it is redacted.
            session.title =
                title_from_prompt(content, |line| self.inner.gate.safety.redact(line).0);
            session.title.clone()?
        };
        self.inner.journal.submit(Write::SetTitle {
            id: lock(&live.session).id.clone(),
            title: title.clone(),
        });
        Some(title)
    }

    /// Runs the `UserPromptSubmit` hooks: the note to keep after the prompt
    /// (their context, through the safety pass), or how the run ends when a
    /// hook blocked the prompt.
    async fn prompt_hooks(
        &self,
        session: &Session,
        queued: &QueuedRun,
        emitter: &mut Emitter,
    ) -> Result<Option<String>, RunOutcome> {
        let hooks = &self.inner.gate.hooks;
        if !hooks.listens(HookEvent::UserPromptSubmit, None) {
            return Ok(None);
        }
        let prompt: Vec<&str> = queued
            .content
            .iter()
            .filter_map(|part| match part {
                ContentPart::Text { text } => Some(text.as_str()),
                _ => None,
            })
            .collect();
        let input = HookInput::new(
            HookEvent::UserPromptSubmit,
            session.id.as_str(),
            session.workspace.clone(),
            session.mode.as_str(),
        )
        .with("prompt", prompt.join("\n"));
        let outcome = tokio::select! {
            biased;
            _ = queued.cancel.cancelled() => return Err(RunOutcome::Cancelled),
            outcome = hooks.fire(input) => outcome,
        };
        let safety = &self.inner.gate.safety;
        for message in outcome.messages() {
            emitter.emit(Event::Notice {
                message: safety.redact(&message).0,
            });
        }
        if let Some(reason) = outcome.blocked().or_else(|| outcome.stopped()) {
            emitter.emit(Event::Notice {
                message: format!("A hook blocked the prompt: {}", safety.redact(&reason).0),
            });
            return Err(RunOutcome::Completed(StopReason::Blocked));
        }
        Ok(outcome.context().map(|context| {
            format!(
                "context a UserPromptSubmit hook added: {}",
                safety.check(&context).text
            )
        }))
    }

    /// What the next model turn of a session would be sent, with the tokens
    /// each part is estimated at: the system prompt, the tool definitions,
    /// and the conversation from its last compaction point on, fitted into
    /// the model's window (the messages as the history keeps them, which is
    /// after the safety pass).
    pub async fn context(&self, id: &SessionId) -> Result<ContextView, RuntimeError> {
        let session = self.session(id).await?;
        let messages = context::since_compaction(
            self.history(id)
                .await?
                .into_iter()
                .map(|entry| entry.message)
                .collect(),
        );
        let mut tools = self.inner.gate.tools.specs().to_vec();
        if let Some(extra) = self
            .live(id)
            .and_then(|live| lock(&live.session_tools).clone())
        {
            tools.extend(extra.tools().await.tools.iter().map(|tool| tool.spec()));
        }
        let prompt = self.run_prompt(&session).await;
        let system = prompt.render(&messages).await;
        let recalled = match &prompt.memory {
            Some(memory) => memory.block(&messages, false).await,
            None => None,
        };
        let config = &self.inner.config.loop_config;
        let window = config.context_window(&session.model);
        let counter = self.counter(&session.provider, &session.model);
        counter.ready().await;
        let system_tokens = counter.text(&system);
        let tool_tokens = counter.tools(&tools);
        let budget = window
            .saturating_sub(config.output_reserve)
            .saturating_sub(system_tokens)
            .saturating_sub(tool_tokens)
            .saturating_sub(recalled.as_ref().map_or(0, |block| counter.text(block)));
        let mut messages = messages;
        let fitted = context::fit(&mut messages, budget, &counter);
        if let Some(block) = recalled {
            super::prompt::insert_recall(&mut messages, block);
        }
        let message_tokens: Vec<usize> = messages.iter().map(|m| counter.message(m)).collect();
        Ok(ContextView {
            provider: session.provider,
            model: session.model,
            window,
            system,
            system_tokens,
            tools,
            tool_tokens,
            message_tokens,
            messages,
            shortened: fitted.shortened,
            dropped: fitted.dropped,
            counted_by: counter.encoding().map_or("bytes", |e| e.as_str()),
            calibration: counter.ratio(),
        })
    }

    /// The session's conversation as the model is sent it: from its last
    /// compaction point on.
    async fn model_history(&self, id: &SessionId) -> Result<Vec<Message>, RunOutcome> {
        match self.history(id).await {
            Ok(history) => Ok(context::since_compaction(
                history.into_iter().map(|entry| entry.message).collect(),
            )),
            Err(err) => Err(RunOutcome::Failed(format!(
                "cannot read the session history: {err}"
            ))),
        }
    }

    /// What a run's tools work with: the session's workspace and boundary, its
    /// files (through the client when it offers), the run's cancellation.
    fn tool_context(
        &self,
        live: &LiveSession,
        session: &Session,
        queued: &QueuedRun,
    ) -> ToolContext {
        let boundary = self
            .inner
            .config
            .paths
            .boundary(&session.workspace, &self.extra_roots(session));
        ToolContext {
            session_id: session.id.clone(),
            workspace: boundary.workspace().to_path_buf(),
            boundary: Arc::new(boundary),
            files: Files::new(session.id.clone(), lock(&live.client_files).clone())
                .cancelled_by(queued.cancel.clone()),
            cancel: queued.cancel.clone(),
            progress: Progress::none(),
            terminal: lock(&live.client_terminal).clone(),
            memory: None,
            call_id: None,
            run_id: Some(queued.id.clone()),
        }
    }

    /// A session's extra roots: the configured ones, then those its client
    /// added (`additionalDirectories`), each once.
    fn extra_roots(&self, session: &Session) -> Vec<PathBuf> {
        let mut roots = self.inner.config.paths.extra_roots.clone();
        if let Some(live) = self.live(&session.id) {
            for root in lock(&live.extra_roots).iter() {
                if !roots.contains(root) {
                    roots.push(root.clone());
                }
            }
        }
        roots
    }

    /// Sets the directories a client adds to a live session's boundary
    /// (`additionalDirectories` on new, load or resume: the complete list,
    /// replacing an earlier one); each must be an absolute directory.
    pub fn set_additional_roots(
        &self,
        id: &SessionId,
        roots: Vec<PathBuf>,
    ) -> Result<(), RuntimeError> {
        let live = self
            .live(id)
            .ok_or_else(|| RuntimeError::SessionNotFound(id.clone()))?;
        *lock(&live.extra_roots) = roots;
        Ok(())
    }

    /// The system prompt of a run of `session`: the environment as the probe
    /// finds it now (off the async threads: it may run `git`).
    async fn run_prompt(&self, session: &Session) -> RunPrompt {
        let extra_roots = self.extra_roots(session);
        let boundary = Arc::new(
            self.inner
                .config
                .paths
                .boundary(&session.workspace, &extra_roots),
        );
        let probe = self.inner.environment.get().cloned();
        let environment = match probe.clone() {
            Some(probe) => {
                let workspace = session.workspace.clone();
                tokio::task::spawn_blocking(move || probe.environment(&workspace))
                    .await
                    .unwrap_or_else(|err| {
                        tracing::warn!(error = %err, "cannot read the environment");
                        Environment::default()
                    })
            }
            None => Environment::default(),
        };
        let keys = scope_keys(
            session,
            environment.git.as_ref().map(|git| git.root.as_path()),
        );
        let memory = self.inner.memory.get().map(|store| {
            Recall::new(
                store.clone(),
                keys,
                self.inner.config.loop_config.memory.clone(),
            )
        });
        RunPrompt {
            settings: prompt_settings(&self.inner.config.loop_config.prompt, &session.prompt),
            workspace: session.workspace.clone(),
            extra_roots,
            environment,
            origin: session.origin,
            mode: session.mode,
            probe,
            boundary,
            memory,
        }
    }

    /// Everything a run that calls the model needs; fails the run when the
    /// session's provider is missing.
    async fn run_context<'a>(
        &self,
        live: &LiveSession,
        session: &Session,
        queued: &QueuedRun,
        emitter: &'a mut Emitter,
        history: Vec<Message>,
    ) -> Result<RunContext<'a>, RunOutcome> {
        let session_cost = match self.runs(&session.id).await {
            Ok(runs) => runs
                .iter()
                .filter(|run| run.id != queued.id)
                .fold(None, |total, run| Cost::sum(total, run.cost.as_ref())),
            Err(err) => {
                tracing::warn!(session = %session.id, error = %err, "cannot read the session's earlier costs");
                None
            }
        };
        let provider = if session.provider.is_empty() {
            None
        } else {
            self.providers().get(&session.provider)
        };
        let Some(provider) = provider else {
            return Err(RunOutcome::Failed(no_provider_message(&session.provider)));
        };
        let spent_today = self.spent_today(&session.provider).await;
        let tokens = self.counter(&session.provider, &session.model);
        tokens.ready().await;
        let session_tools = lock(&live.session_tools).clone();
        let secrets = session_tools
            .as_ref()
            .map(|tools| tools.secrets())
            .unwrap_or_default();
        let prompt = self.run_prompt(session).await;
        let safety = self.inner.gate.safety.with_secrets(&secrets, "session");
        let mut ctx = self.tool_context(live, session, queued);
        ctx.memory = prompt.memory.as_ref().map(|recall| MemoryAccess {
            keeper: Keeper::new(recall.store.clone(), safety.clone()),
            keys: recall.keys.clone(),
            session: session.id.clone(),
            run: Some(queued.id.clone()),
        });
        let child = lock(&live.child).clone();
        let only = child.as_ref().map(|child| {
            let list = child.tools.clone();
            Arc::new(move |name: &str| {
                name != crate::core::subagent::TOOL
                    && list.as_ref().is_none_or(|l| l.iter().any(|n| n == name))
            }) as crate::core::gate::ToolFilter
        });
        let calls = CallEnv {
            gate: self.inner.gate.clone(),
            tools: match &only {
                Some(keep) => self.inner.gate.tools.only(|name| keep(name)),
                None => self.inner.gate.tools.clone(),
            },
            only,
            delegated: Arc::default(),
            budget_left: Arc::default(),
            answerers: child
                .as_ref()
                .map(|c| vec![c.parent.session.clone()])
                .unwrap_or_default(),
            subagents: child.is_none().then(|| {
                Arc::new(subagents::RuntimeSubagents {
                    runtime: self.clone(),
                }) as Arc<dyn crate::core::subagent::Subagents>
            }),
            mode: session.mode,
            safety,
            ctx,
            grants: live.grants.clone(),
            approvals: self.inner.approvals.clone(),
            questions: self.inner.questions.clone(),
            guard: Arc::new(LoopGuard::new(self.inner.config.loop_config.loop_guard)),
            ended: Arc::default(),
        };
        Ok(RunContext {
            provider,
            model: session.model.clone(),
            thought_level: self
                .providers()
                .thought(&session.provider)
                .effective(session.thought_level.as_deref()),
            history,
            cancel: queued.cancel.clone(),
            emitter,
            calls,
            session_cost,
            spent_today,
            prompt,
            session_tools,
            tokens,
            steering: None,
            max_turns: child.as_ref().map(|c| c.max_turns),
            // A subagent's run may spend what its parent had left; its
            // session is new, so only the run's and the day's limits hold.
            budgets: child.as_ref().map(|c| {
                let configured = &self.inner.config.loop_config.budgets;
                crate::core::budget::Budgets {
                    run: match (configured.run, c.budget_left) {
                        (Some(run), Some(left)) => Some(run.min(left)),
                        (run, left) => run.or(left),
                    },
                    session: None,
                    ..configured.clone()
                }
            }),
            subagent: child.map(|c| crate::core::turn::SubagentOf {
                parent_session: c.parent.session,
                label: c.label,
            }),
        })
    }

    async fn finish(&self, emitter: &mut Emitter, outcome: &RunOutcome) -> RunOutcome {
        emitter.finish(outcome).await
    }
}

/// Where a session's memory items go and which it sees: its repository's
/// (or its workspace's) and its conversation's (its chat's, or its own).
fn scope_keys(session: &Session, repository: Option<&std::path::Path>) -> ScopeKeys {
    let workspace = repository.unwrap_or(&session.workspace);
    ScopeKeys {
        workspace: workspace.to_string_lossy().into_owned(),
        conversation: session
            .conversation
            .clone()
            .unwrap_or_else(|| session.id.to_string()),
    }
}

/// The prompt settings of a session: its own `system_prompt` replaces the
/// configured one; its own `instructions` follow the configured ones.
fn prompt_settings(configured: &PromptSettings, own: &PromptSettings) -> PromptSettings {
    let instructions: Vec<&str> = [&configured.instructions, &own.instructions]
        .into_iter()
        .filter_map(|i| i.as_deref().map(str::trim).filter(|i| !i.is_empty()))
        .collect();
    PromptSettings {
        system_prompt: own
            .system_prompt
            .clone()
            .or_else(|| configured.system_prompt.clone()),
        instructions: (!instructions.is_empty()).then(|| instructions.join("\n\n")),
    }
}

fn no_provider_message(name: &str) -> String {
    if name.is_empty() {
        super::provider::NO_PROVIDER.to_owned()
    } else {
        format!("the session's provider {name:?} is not configured any more; choose another model")
    }
}

/// What the person is told about a workspace's own hooks: that they wait
/// for trust, or which files changed since trusted; `None` when they run.
fn trust_notice(found: &super::hooks::WorkspaceHooks) -> Option<String> {
    let root = found.root.display();
    if !found.changed.is_empty() {
        return Some(format!(
            "Hook files in {root} changed since you trusted them, so their hooks do not run: {}. Check them, then type /trust or run `pincer trust {root}`.",
            found.changed.join("; ")
        ));
    }
    if found.trusted || found.hooks.is_empty() {
        return None;
    }
    Some(format!(
        "This workspace brings {} hook{} for other agents ({}); they run only once you trust {root}: type /trust, or run `pincer trust {root}`.",
        found.hooks.len(),
        if found.hooks.len() == 1 { "" } else { "s" },
        found
            .hooks
            .iter()
            .map(|h| h.split(':').next().unwrap_or_default().to_owned())
            .collect::<std::collections::BTreeSet<_>>()
            .into_iter()
            .collect::<Vec<_>>()
            .join(", "),
    ))
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::time::{Duration, Instant};

    use futures::StreamExt;

    use super::*;
    use crate::core::event::StopReason;
    use crate::core::journal::memory::MemoryJournal;
    use crate::core::provider::{
        ModelRequest, ModelStop, Provider, ProviderEntry, ProviderEvent, ProviderStream,
    };

    /// Streams `chunks` text deltas, then (if `hang`) never finishes; records when
    /// its stream is dropped.
    struct TestProvider {
        chunks: usize,
        hang: bool,
        dropped: Arc<Mutex<Option<Instant>>>,
    }

    struct DropFlag(Arc<Mutex<Option<Instant>>>, Arc<AtomicBool>);

    impl Drop for DropFlag {
        fn drop(&mut self) {
            *lock(&self.0) = Some(Instant::now());
            self.1.store(true, Ordering::SeqCst);
        }
    }

    impl Provider for TestProvider {
        fn name(&self) -> &str {
            "test"
        }

        fn stream(&self, _request: ModelRequest) -> ProviderStream {
            let flag = DropFlag(self.dropped.clone(), Arc::new(AtomicBool::new(false)));
            // Each chunk after a yield: they arrive one by one, as over a
            // network, rather than all waiting (which would be one delta).
            let chunks = futures::stream::iter(
                (0..self.chunks).map(|i| Ok(ProviderEvent::Text(format!("{i} ")))),
            )
            .then(|item| async {
                tokio::task::yield_now().await;
                item
            });
            let tail = if self.hang {
                futures::stream::pending().boxed()
            } else {
                futures::stream::iter([Ok(ProviderEvent::Done(ModelStop::EndTurn))]).boxed()
            };
            chunks
                .chain(tail)
                .map(move |item| {
                    let _keep = &flag;
                    item
                })
                .boxed()
        }
    }

    async fn runtime(provider: TestProvider, event_buffer: usize) -> Runtime {
        let store: Arc<dyn Journal> = Arc::new(MemoryJournal::new());
        let providers = Providers::new(
            vec![ProviderEntry {
                name: "test".into(),
                models: vec!["m".into()],
                provider: Arc::new(provider),
                images: None,
                thought: Default::default(),
            }],
            None,
        );
        Runtime::new(
            store,
            providers,
            Arc::new(ToolGate::without_tools()),
            RuntimeConfig {
                event_buffer,
                ..RuntimeConfig::default()
            },
        )
    }

    fn new_session(dir: &std::path::Path) -> NewSession {
        NewSession {
            workspace: dir.to_path_buf(),
            origin: Origin::Headless,
            mcp_servers: serde_json::json!([]),
            conversation: None,
            prompt: Default::default(),
        }
    }

    fn text(content: &str) -> Vec<ContentPart> {
        vec![ContentPart::Text {
            text: content.into(),
        }]
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_run_keeps_its_lease_renewed_and_stops_when_it_is_lost() {
        use crate::core::lease::{LeaseError, Leases};
        let dir = tempfile::tempdir().unwrap();
        let provider = TestProvider {
            chunks: 1,
            hang: true,
            dropped: Arc::new(Mutex::new(None)),
        };
        let journal = Arc::new(MemoryJournal::new());
        let store: Arc<dyn Journal> = journal.clone();
        let providers = Providers::new(
            vec![ProviderEntry {
                name: "test".into(),
                models: vec!["m".into()],
                provider: Arc::new(provider),
                images: None,
                thought: Default::default(),
            }],
            None,
        );
        let rt = Runtime::new(
            store,
            providers,
            Arc::new(ToolGate::without_tools()),
            RuntimeConfig {
                leases: LeaseTiming {
                    ttl_ms: 300,
                    renew: Duration::from_millis(50),
                    poll: Duration::from_millis(20),
                },
                ..RuntimeConfig::default()
            },
        );
        let leases = journal.clone();
        rt.set_leases(leases.clone(), "me".into());
        let session = rt.create_session(new_session(dir.path())).await.unwrap();
        let mut events = rt.subscribe(&session.id).unwrap();
        let ticket = rt.prompt(&session.id, text("go")).await.unwrap();
        loop {
            let record = events.next().await.unwrap();
            if matches!(record.event, Event::TextDelta { .. }) {
                break;
            }
        }
        // Past several of its times to live, the run still holds it.
        tokio::time::sleep(Duration::from_millis(900)).await;
        assert!(matches!(
            leases
                .claim(
                    &LeaseKey::session(&session.id),
                    "other",
                    now_millis(),
                    1_000
                )
                .await,
            Err(LeaseError::Held { .. })
        ));
        // So does the process its own lease, kept from its first run on.
        let process = leases
            .current(&LeaseKey::process("me"))
            .await
            .unwrap()
            .unwrap();
        assert!(process.expires_at > now_millis(), "{process:?}");
        // Lost (given up behind its back, then taken): the run stops.
        let held = leases
            .current(&LeaseKey::session(&session.id))
            .await
            .unwrap()
            .unwrap();
        leases.release(&held).await.unwrap();
        leases
            .claim(
                &LeaseKey::session(&session.id),
                "other",
                now_millis(),
                60_000,
            )
            .await
            .unwrap();
        let outcome = tokio::time::timeout(Duration::from_secs(5), ticket.done)
            .await
            .expect("the run stopped")
            .unwrap();
        // Cancelled, and even that end is not written under a lost lease.
        assert!(
            matches!(&outcome, RunOutcome::Failed(m) if m.contains("no longer current")),
            "{outcome:?}"
        );
        rt.shutdown().await;
        // Given up at shutdown.
        let process = leases
            .current(&LeaseKey::process("me"))
            .await
            .unwrap()
            .unwrap();
        assert!(process.expires_at <= now_millis(), "{process:?}");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn cancel_drops_the_provider_stream_within_100ms() {
        let dir = tempfile::tempdir().unwrap();
        let dropped = Arc::new(Mutex::new(None));
        let provider = TestProvider {
            chunks: 1,
            hang: true,
            dropped: dropped.clone(),
        };
        let rt = runtime(provider, 64).await;
        let session = rt.create_session(new_session(dir.path())).await.unwrap();
        let mut events = rt.subscribe(&session.id).unwrap();
        let ticket = rt.prompt(&session.id, text("go")).await.unwrap();
        // Wait for the first delta: the stream is live.
        loop {
            let record = events.next().await.unwrap();
            if matches!(record.event, Event::TextDelta { .. }) {
                break;
            }
        }
        let cancelled_at = Instant::now();
        assert_eq!(rt.cancel(&session.id).unwrap(), 1);
        let outcome = ticket.done.await.unwrap();
        assert_eq!(outcome, RunOutcome::Cancelled);
        let dropped_at = lock(&dropped).expect("the provider stream was dropped");
        let latency = dropped_at.duration_since(cancelled_at);
        assert!(
            latency < Duration::from_millis(100),
            "cancel took {latency:?}"
        );
        let run = rt.run(&ticket.run_id).await.unwrap();
        assert_eq!(run.state, RunState::Cancelled);
        rt.shutdown().await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_lagging_subscriber_never_blocks_the_run_and_misses_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let provider = TestProvider {
            chunks: 5000,
            hang: false,
            dropped: Arc::new(Mutex::new(None)),
        };
        let rt = runtime(provider, 16).await;
        let session = rt.create_session(new_session(dir.path())).await.unwrap();
        let mut slow = rt.subscribe(&session.id).unwrap();
        let ticket = rt.prompt(&session.id, text("go")).await.unwrap();
        // The run finishes although the subscriber has read nothing.
        let outcome = tokio::time::timeout(Duration::from_secs(10), ticket.done)
            .await
            .expect("the run must not wait for a slow subscriber")
            .unwrap();
        assert_eq!(outcome, RunOutcome::Completed(StopReason::EndTurn));
        // The subscriber then gets every event, in order, without gaps.
        let mut seqs = Vec::new();
        let mut deltas = 0;
        loop {
            let record = slow.next().await.unwrap();
            seqs.push(record.seq);
            if matches!(record.event, Event::TextDelta { .. }) {
                deltas += 1;
            }
            if record.event.terminal_state().is_some() {
                break;
            }
        }
        assert_eq!(deltas, 5000);
        assert_eq!(seqs, (0..seqs.len() as u64).collect::<Vec<_>>());
        rt.shutdown().await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn one_run_at_a_time_and_cancel_reaches_queued_runs() {
        let dir = tempfile::tempdir().unwrap();
        let provider = TestProvider {
            chunks: 1,
            hang: true,
            dropped: Arc::new(Mutex::new(None)),
        };
        let rt = runtime(provider, 64).await;
        let session = rt.create_session(new_session(dir.path())).await.unwrap();
        let first = rt.prompt(&session.id, text("1")).await.unwrap();
        let second = rt.prompt(&session.id, text("2")).await.unwrap();
        tokio::time::sleep(Duration::from_millis(50)).await;
        let runs = rt.runs(&session.id).await.unwrap();
        let states: Vec<RunState> = runs.iter().map(|r| r.state).collect();
        assert_eq!(states, vec![RunState::Running, RunState::Queued]);
        assert_eq!(rt.cancel(&session.id).unwrap(), 2);
        assert_eq!(first.done.await.unwrap(), RunOutcome::Cancelled);
        assert_eq!(second.done.await.unwrap(), RunOutcome::Cancelled);
        let runs = rt.runs(&session.id).await.unwrap();
        let second_run = &runs[1];
        assert_eq!(second_run.state, RunState::Cancelled);
        assert_eq!(
            second_run.started_at, None,
            "a cancelled queued run never started"
        );
        rt.shutdown().await;
    }

    /// Asks for `calls` copies of one tool in its first turn, then ends.
    struct CallingProvider {
        tool: &'static str,
        calls: usize,
    }

    impl Provider for CallingProvider {
        fn name(&self) -> &str {
            "test"
        }

        fn stream(&self, request: ModelRequest) -> ProviderStream {
            let answered = matches!(request.messages.last(), Some(Message::Tool { .. }));
            let events: Vec<Result<ProviderEvent, crate::core::provider::ProviderError>> =
                if answered {
                    vec![Ok(ProviderEvent::Done(ModelStop::EndTurn))]
                } else {
                    (0..self.calls)
                        .map(|i| {
                            Ok(ProviderEvent::ToolCall(crate::core::session::ToolCall {
                                id: format!("c{i}"),
                                name: self.tool.to_owned(),
                                arguments: serde_json::json!({}),
                            }))
                        })
                        .chain([Ok(ProviderEvent::Done(ModelStop::ToolUse))])
                        .collect()
                };
            futures::stream::iter(events).boxed()
        }
    }

    /// A tool that records how many of its calls run at once.
    struct Counting {
        name: &'static str,
        kind: crate::core::tool::ToolKind,
        running: Arc<std::sync::atomic::AtomicUsize>,
        most: Arc<std::sync::atomic::AtomicUsize>,
    }

    impl crate::core::tool::Tool for Counting {
        fn spec(&self) -> crate::core::tool::ToolSpec {
            crate::core::tool::ToolSpec {
                name: self.name.into(),
                description: String::new(),
                parameters: serde_json::json!({"type": "object"}),
            }
        }

        fn kind(&self) -> crate::core::tool::ToolKind {
            self.kind
        }

        fn plan<'a>(
            &'a self,
            _arguments: &'a serde_json::Value,
            _ctx: &'a ToolContext,
        ) -> futures::future::BoxFuture<
            'a,
            Result<crate::core::tool::Plan, crate::core::tool::ToolError>,
        > {
            Box::pin(async { Ok(crate::core::tool::Plan::default()) })
        }

        fn execute<'a>(
            &'a self,
            _arguments: &'a serde_json::Value,
            _plan: &'a crate::core::tool::Plan,
            _ctx: &'a ToolContext,
        ) -> futures::future::BoxFuture<
            'a,
            Result<crate::core::tool::ToolOutput, crate::core::tool::ToolError>,
        > {
            Box::pin(async move {
                let now = self.running.fetch_add(1, Ordering::SeqCst) + 1;
                self.most.fetch_max(now, Ordering::SeqCst);
                tokio::time::sleep(Duration::from_millis(50)).await;
                self.running.fetch_sub(1, Ordering::SeqCst);
                Ok(crate::core::tool::ToolOutput::text("ok"))
            })
        }
    }

    async fn most_at_once(kind: crate::core::tool::ToolKind) -> (usize, Vec<HistoryEntry>) {
        let dir = tempfile::tempdir().unwrap();
        let store: Arc<dyn Journal> = Arc::new(MemoryJournal::new());
        let most = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let tool = Counting {
            name: "probe",
            kind,
            running: Arc::new(std::sync::atomic::AtomicUsize::new(0)),
            most: most.clone(),
        };
        let mut gate = ToolGate::without_tools();
        gate.tools = crate::core::tool::Toolset::new(vec![Arc::new(tool)]);
        let providers = Providers::new(
            vec![ProviderEntry {
                name: "test".into(),
                models: vec!["m".into()],
                provider: Arc::new(CallingProvider {
                    tool: "probe",
                    calls: 3,
                }),
                images: None,
                thought: Default::default(),
            }],
            None,
        );
        let rt = Runtime::new(
            store,
            providers,
            Arc::new(gate),
            RuntimeConfig {
                default_mode: Mode::Full,
                ..RuntimeConfig::default()
            },
        );
        let session = rt.create_session(new_session(dir.path())).await.unwrap();
        let ticket = rt.prompt(&session.id, text("go")).await.unwrap();
        assert_eq!(
            ticket.done.await.unwrap(),
            RunOutcome::Completed(StopReason::EndTurn)
        );
        let history = rt.history(&session.id).await.unwrap();
        rt.shutdown().await;
        (most.load(Ordering::SeqCst), history)
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn read_only_calls_of_a_turn_run_together_and_mutating_ones_alone() {
        let (together, history) = most_at_once(crate::core::tool::ToolKind::Read).await;
        assert_eq!(together, 3);
        // Results still follow their calls in the order the model asked.
        let results: Vec<String> = history
            .iter()
            .filter_map(|e| match &e.message {
                Message::Tool { call_id, .. } => Some(call_id.clone()),
                _ => None,
            })
            .collect();
        assert_eq!(results, vec!["c0", "c1", "c2"]);
        let (alone, _) = most_at_once(crate::core::tool::ToolKind::Edit).await;
        assert_eq!(alone, 1);
    }

    /// Extra tools as a face would give them: one tool, a problem reported on
    /// the first listing only; records how often it was asked and stopped.
    struct Extra {
        listed: std::sync::atomic::AtomicUsize,
        stopped: AtomicBool,
    }

    impl SessionTools for Extra {
        fn tools(&self) -> futures::future::BoxFuture<'_, crate::core::tool::SessionToolList> {
            Box::pin(async move {
                let first = self.listed.fetch_add(1, Ordering::SeqCst) == 0;
                crate::core::tool::SessionToolList {
                    tools: vec![Arc::new(Counting {
                        name: "extra__probe",
                        kind: crate::core::tool::ToolKind::Read,
                        running: Arc::default(),
                        most: Arc::default(),
                    })],
                    problems: if first {
                        vec!["server `down` failed to start".to_owned()]
                    } else {
                        Vec::new()
                    },
                }
            })
        }

        fn shutdown(&self) -> futures::future::BoxFuture<'_, ()> {
            Box::pin(async move { self.stopped.store(true, Ordering::SeqCst) })
        }
    }

    struct ExtraFactory(Arc<Extra>);

    impl SessionToolsFactory for ExtraFactory {
        fn for_session(
            &self,
            _session: &SessionId,
            _workspace: &std::path::Path,
        ) -> Option<Arc<dyn SessionTools>> {
            Some(self.0.clone())
        }
    }

    #[tokio::test]
    async fn session_tools_are_asked_each_turn_reported_and_stopped_with_the_session() {
        let dir = tempfile::tempdir().unwrap();
        let store: Arc<dyn Journal> = Arc::new(MemoryJournal::new());
        let providers = Providers::new(
            vec![ProviderEntry {
                name: "test".into(),
                models: vec!["m".into()],
                provider: Arc::new(CallingProvider {
                    tool: "extra__probe",
                    calls: 1,
                }),
                images: None,
                thought: Default::default(),
            }],
            None,
        );
        let rt = Runtime::new(
            store,
            providers,
            Arc::new(ToolGate::without_tools()),
            RuntimeConfig::default(),
        );
        let extra = Arc::new(Extra {
            listed: Default::default(),
            stopped: AtomicBool::new(false),
        });
        rt.set_session_tools_factory(Arc::new(ExtraFactory(extra.clone())));
        let session = rt.create_session(new_session(dir.path())).await.unwrap();
        let ticket = rt.prompt(&session.id, text("go")).await.unwrap();
        let run = ticket.run_id.clone();
        assert_eq!(
            ticket.done.await.unwrap(),
            RunOutcome::Completed(StopReason::EndTurn)
        );
        // Asked before each of the two model turns.
        assert_eq!(extra.listed.load(Ordering::SeqCst), 2);
        let tape = rt.tape(&run, 0).await.unwrap();
        let notices: Vec<&Event> = tape
            .iter()
            .map(|r| &r.event)
            .filter(|e| matches!(e, Event::Notice { .. }))
            .collect();
        assert_eq!(
            notices,
            vec![&Event::Notice {
                message: "server `down` failed to start".into()
            }]
        );
        // The extra tool was found by name, and has its kind.
        let call = tape
            .iter()
            .find_map(|r| match &r.event {
                Event::ToolCall { kind, .. } => Some(*kind),
                _ => None,
            })
            .unwrap();
        assert_eq!(call, crate::core::tool::ToolKind::Read);
        let result = tape
            .iter()
            .find_map(|r| match &r.event {
                Event::ToolResult {
                    output, is_error, ..
                } => Some((output.clone(), *is_error)),
                _ => None,
            })
            .unwrap();
        assert_eq!(result, ("ok".to_owned(), false));
        assert!(!extra.stopped.load(Ordering::SeqCst));
        rt.close_session(&session.id).await.unwrap();
        assert!(extra.stopped.load(Ordering::SeqCst));
        rt.shutdown().await;
    }
}
