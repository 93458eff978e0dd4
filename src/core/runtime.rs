//! The runtime: live sessions, their run queues, and event subscriptions.
//!
//! Each live session has a worker task that takes its runs one at a time, so at
//! most one run per session is active and later prompts run in the order they
//! came. Every event is appended to the tape and published to subscribers; a
//! subscriber that falls behind re-reads the tape instead of slowing the run.

mod answers;
mod invoke;
mod ownership;
pub use ownership::LeaseHolding;
mod subagents;
mod trust;
mod turn;
mod worker;

pub use subagents::SubagentConfig;

use parking_lot::Mutex;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use thiserror::Error;
use tokio::sync::{broadcast, mpsc, oneshot};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::agent_loop;
use super::approval::{ApprovalDecision, Grant};
use super::clock::{Clock, SystemClock};
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
use super::journal::{Journal, JournalError, SessionCursor, SessionQuery, Write};
use super::lease::{Lease, LeaseError, LeaseKey, Leases};
use super::memory::{Keeper, Memories, MemoryAccess, ScopeKeys};
use super::models::{Cost, Window};
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
    /// Events buffered per session for subscribers before they are told they
    /// lagged (and re-read the tape). Every live session's buffer is
    /// allocated whole when it becomes live (tokio's broadcast), so this is
    /// resident memory per session; below 512 a flooded stream lags often
    /// enough to slow (`docs/benchmarks.md`, "Memory under hostile load").
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
            event_buffer: 512,
            default_mode: Mode::default(),
            paths: PathsConfig::default(),
            subagents: SubagentConfig::default(),
            leases: LeaseTiming::default(),
        }
    }
}

/// What the next model turn of a session would be sent (`Runtime::context`).
#[derive(Debug, Clone, serde::Serialize, schemars::JsonSchema)]
pub struct ContextView {
    pub provider: String,
    pub model: String,
    /// The model's context window, in tokens
    pub window: usize,
    /// Where the window comes from: `configured` (a `[models]` entry or
    /// `context_window`), `asked from SERVER (FIELD)` (the model's server
    /// stated it) or `assumed` (`models::WindowOrigin`)
    pub window_from: String,
    /// The system prompt
    pub system: String,
    pub system_tokens: usize,
    pub tools: Vec<super::provider::ToolSpec>,
    pub tool_tokens: usize,
    /// The conversation from its last compaction point on, fitted into the
    /// window, as the history keeps it
    #[schemars(schema_with = "message_schema")]
    pub messages: Vec<Message>,
    /// The estimate for each message, in order
    pub message_tokens: Vec<usize>,
    /// Tool outputs shortened to fit
    pub shortened: usize,
    /// Oldest messages dropped to fit
    pub dropped: usize,
    /// How tokens were counted: the model family's tokenizer, or four
    /// bytes per token; times `calibration`
    #[schemars(with = "CountedBy")]
    pub counted_by: &'static str,
    /// Reported input tokens divided by the estimate, for this provider and
    /// model so far (1 before a report); it scales every count
    /// (`core::tokens`)
    #[schemars(range(min = 0.5, max = 2.5))]
    pub calibration: f64,
    /// Skills the catalogue in the system prompt offers the model
    /// (docs/skills.md)
    pub skills: usize,
    /// Those of them listed by name only to keep the catalogue within its
    /// token budget, the least recently used first shortened
    pub skills_shortened: Vec<String>,
    /// Skills left out of the catalogue and of the skill tool because even
    /// their names would not fit its budget, the least recently used first
    /// (a person's /NAME still activates them)
    pub skills_omitted: Vec<String>,
}

/// The schema of a context's messages: objects with a `role`, as the
/// history keeps them.
fn message_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({
        "type": "array",
        "description": "The conversation from its last compaction point on, fitted into the window, as the history keeps it",
        "items": {"type": "object", "required": ["role"], "properties": {"role": {"type": "string"}}}
    })
}

/// The tokenizers a context's tokens are counted with.
#[derive(schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
#[allow(dead_code, reason = "only its schema is used")]
enum CountedBy {
    O200kBase,
    Cl100kBase,
    Bytes,
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

/// What a runtime is made of, handed in whole by the composition root
/// (`app::App::open`): the journal, providers, tool gate and settings, and
/// the parts a process may go without (each `None` by default: one
/// process, no memory, no extra tools, no environment probe).
pub struct Parts {
    pub journal: Arc<dyn Journal>,
    pub providers: Providers,
    pub gate: Arc<ToolGate>,
    pub config: RuntimeConfig,
    /// The sessions' leases and this process's unique name as their
    /// holder: prompts run only under a session's lease.
    pub leases: Option<(Arc<dyn Leases>, String)>,
    /// Wakes faces following other processes' runs, and this process for
    /// requests left for its runs.
    pub notifier: Option<Arc<dyn Notifier>>,
    /// Where memory items are kept.
    pub memories: Option<Arc<dyn Memories>>,
    /// Builds each live session's extra tools (MCP servers).
    pub session_tools: Option<Arc<dyn SessionToolsFactory>>,
    /// Finds the facts about the machine the system prompt states.
    pub environment: Option<Arc<dyn EnvironmentProbe>>,
    /// What time it is.
    pub clock: Arc<dyn Clock>,
    /// Finds each workspace's Agent Skills (`core::skills`).
    pub skills: Arc<dyn crate::core::skills::Skills>,
}

impl Parts {
    /// The four parts every runtime has; the others none, the system clock.
    pub fn new(
        journal: Arc<dyn Journal>,
        providers: Providers,
        gate: Arc<ToolGate>,
        config: RuntimeConfig,
    ) -> Self {
        Self {
            journal,
            providers,
            gate,
            config,
            leases: None,
            notifier: None,
            memories: None,
            session_tools: None,
            environment: None,
            clock: Arc::new(SystemClock),
            skills: Arc::new(crate::core::skills::NoSkills),
        }
    }
}

struct Inner {
    /// Where everything durable goes.
    journal: Arc<dyn Journal>,
    /// Swapped whole when the person logs in or out (`set_providers`).
    providers: parking_lot::RwLock<Arc<Providers>>,
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
    /// Builds each live session's extra tools (the configured MCP servers).
    session_tools: Option<Arc<dyn SessionToolsFactory>>,
    /// Finds the facts about the machine the system prompt states (none: the
    /// prompt says only what the core knows).
    environment: Option<Arc<dyn EnvironmentProbe>>,
    /// Finds each workspace's skills (cached by the port: cheap per run).
    skills: Arc<dyn crate::core::skills::Skills>,
    /// Where memory items are kept (none: no memory).
    memory: Option<Arc<dyn Memories>>,
    /// How far token estimates were from the providers' reports.
    calibration: Arc<super::tokens::Calibration>,
    /// The sessions' leases and this process's name as their holder (none:
    /// one process, nobody else to keep out).
    leases: Option<(Arc<dyn Leases>, String)>,
    /// Wakes faces following another process's runs and this process's
    /// owner side for requests left in the journal (none: one process).
    notifier: Option<Arc<dyn Notifier>>,
    /// What time it is (`core::clock`): lease expiry, the daily budget's
    /// midnight, memory recency.
    clock: Arc<dyn Clock>,
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
    /// A runtime of these four parts alone: one process, no memory, no
    /// extra tools, the system clock (tests, and faces that need no more).
    pub fn new(
        journal: Arc<dyn Journal>,
        providers: Providers,
        gate: Arc<ToolGate>,
        config: RuntimeConfig,
    ) -> Self {
        Self::from_parts(Parts::new(journal, providers, gate, config))
    }

    /// What time it is, by the runtime's clock.
    fn now(&self) -> super::session::Millis {
        self.inner.clock.now_millis()
    }

    /// A runtime made of `parts`, as the composition root assembled them.
    pub fn from_parts(parts: Parts) -> Self {
        let Parts {
            journal,
            providers,
            gate,
            config,
            leases,
            notifier,
            memories,
            session_tools,
            environment,
            clock,
            skills,
        } = parts;
        Self {
            inner: Arc::new(Inner {
                journal,
                providers: parking_lot::RwLock::new(Arc::new(providers)),
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
                session_tools,
                environment,
                memory: memories,
                calibration: Arc::default(),
                leases,
                keeping_process_lease: std::sync::Once::new(),
                notifier,
                clock,
                taking_controls: std::sync::Once::new(),
                skills,
            }),
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
        let previous = std::mem::replace(&mut *live.session_tools.lock(), tools);
        if let Some(previous) = previous {
            previous.shutdown().await;
        }
    }

    /// The providers now: a snapshot; a login or logout swaps in new ones.
    pub fn providers(&self) -> Arc<Providers> {
        self.inner.providers.read().clone()
    }

    /// Replaces the providers (after a login or logout): sessions and runs
    /// from now on use the new ones.
    pub fn set_providers(&self, providers: Providers) {
        *self.inner.providers.write() = Arc::new(providers);
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
            let session = live.session.lock();
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
        self.inner.live.lock().len()
    }

    /// The runtime's counters (tool calls, provider latency).
    pub fn stats(&self) -> &Stats {
        &self.inner.stats
    }

    /// The answers a session remembers.
    pub async fn grants(&self, id: &SessionId) -> Result<Vec<Grant>, RuntimeError> {
        if let Some(live) = self.live(id) {
            return Ok(live.grants.lock().clone());
        }
        self.session(id).await?;
        Ok(self.inner.journal.grants(id).await?)
    }

    /// Routes a live session's file reads and writes through a client (or back
    /// to the local filesystem with `None`).
    pub fn set_client_files(&self, id: &SessionId, files: Option<Arc<dyn ClientFiles>>) {
        if let Some(live) = self.live(id) {
            *live.client_files.lock() = files;
        }
    }

    /// Runs the session's shell calls in the client's terminal (`None`: in the
    /// server's own sandboxed runner).
    pub fn set_client_terminal(&self, id: &SessionId, terminal: Option<Arc<dyn ClientTerminal>>) {
        if let Some(live) = self.live(id) {
            *live.client_terminal.lock() = terminal;
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
            return Ok(live.session.lock().clone());
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

    /// The session's current state, live or stored.
    pub async fn session(&self, id: &SessionId) -> Result<Session, RuntimeError> {
        if let Some(live) = self.live(id) {
            return Ok(live.session.lock().clone());
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

    /// A page of [`Runtime::list_sessions`]: at most `query.limit` sessions
    /// after `query.after` that pass `query.filter`, with the cursor of the
    /// next page when there is one.
    pub async fn sessions_page(
        &self,
        query: SessionQuery,
    ) -> Result<(Vec<Session>, Option<SessionCursor>), RuntimeError> {
        let limit = query.limit;
        let mut sessions = self
            .list_sessions(SessionQuery {
                limit: limit + 1,
                ..query
            })
            .await?;
        let next = if sessions.len() > limit {
            sessions.truncate(limit);
            sessions.last().map(SessionCursor::after)
        } else {
            None
        };
        Ok((sessions, next))
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
        let last = tape.into_iter().rev().find_map(|record| {
            let Event::Usage {
                usage,
                model,
                cost,
                context,
                budget,
                ..
            } = record.event
            else {
                return None;
            };
            Some(Event::Usage {
                usage,
                model,
                cost,
                context,
                session_cost: total.clone(),
                budget,
            })
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

    /// Moves on whenever the journal may have changed (a commit of any
    /// process sharing it): how a face follows a run another process works
    /// on a session not live here, reading the tape when woken. `None`
    /// when nothing but this process writes the journal.
    pub fn journal_changes(&self) -> Option<tokio::sync::watch::Receiver<u64>> {
        self.inner.notifier.as_ref().map(|n| n.watch())
    }

    /// Subscribes to every event of a live session from now on.
    pub fn subscribe(&self, id: &SessionId) -> Result<Subscription, RuntimeError> {
        let live = self
            .live(id)
            .ok_or_else(|| RuntimeError::SessionNotFound(id.clone()))?;
        Ok(Subscription::new(
            id,
            live.events.subscribe(),
            self.event_buffer(),
            self.inner.journal.clone(),
        )
        .following(self.inner.notifier.as_ref().map(|n| n.watch())))
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
            .is_some_and(|live| live.session.lock().provider.is_empty());
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
        let pending = live.pending.lock();
        for (_, token) in pending.iter() {
            token.cancel();
        }
        let local: Vec<RunId> = pending.iter().map(|(run, _)| run.clone()).collect();
        let count = local.len();
        drop(pending);
        // Runs another process works on the session are asked to stop
        // through the journal.
        if self.inner.notifier.is_some() {
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
        let pending = live.pending.lock();
        match pending.iter().find(|(id, _)| id == run) {
            Some((_, token)) => {
                token.cancel();
                true
            }
            None => false,
        }
    }

    pub async fn set_mode(&self, id: &SessionId, mode: Mode) -> Result<Session, RuntimeError> {
        self.update_settings(id, |session| {
            session.mode = mode;
            Ok(())
        })
        .await
    }

    /// The configured models as a person reads them: `a/x, b/y`, or that
    /// none is.
    pub(super) fn model_choices(&self) -> String {
        let available: Vec<String> = self
            .providers()
            .choices()
            .iter()
            .map(ModelChoice::id)
            .collect();
        if available.is_empty() {
            "none (no provider is configured)".into()
        } else {
            available.join(", ")
        }
    }

    /// Switches the session's model; `model` is `provider/model` or a bare model name.
    pub async fn set_model(&self, id: &SessionId, model: &str) -> Result<Session, RuntimeError> {
        let choice = self
            .providers()
            .find(model)
            .ok_or_else(|| RuntimeError::UnknownModel(model.to_owned(), self.model_choices()))?;
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
            let mut session = live.session.lock();
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
            let mut map = self.inner.live.lock();
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
        for (_, token) in live.pending.lock().iter() {
            token.cancel();
        }
        live.closed.cancel();
        // The worker drains its queue (recording queued runs as cancelled) and exits.
        let worker = live.worker.lock().take();
        if let Some(worker) = worker
            && let Err(err) = worker.await
        {
            tracing::error!(session = %id, error = %err, "session worker failed");
        }
        let tools = live.session_tools.lock().take();
        if let Some(tools) = tools {
            tools.shutdown().await;
        }
        let session = live.session.lock().clone();
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
        let sessions: Vec<Arc<LiveSession>> = self.inner.live.lock().values().cloned().collect();
        for live in sessions {
            for (_, token) in live.pending.lock().iter() {
                token.cancel();
            }
            live.closed.cancel();
        }
        self.inner.tasks.close();
        self.inner.tasks.wait().await;
        let extra: Vec<Arc<dyn SessionTools>> = self
            .inner
            .live
            .lock()
            .values()
            .filter_map(|live| live.session_tools.lock().take())
            .collect();
        futures::future::join_all(extra.iter().map(|tools| tools.shutdown())).await;
        // `SessionEnd` hooks of the sessions still open, given a few seconds
        // at most: the process is on its way out.
        let open: Vec<Session> = self
            .inner
            .live
            .lock()
            .values()
            .map(|live| live.session.lock().clone())
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
        self.inner.live.lock().clear();
        if let Err(err) = self.inner.journal.flush().await {
            tracing::error!(error = %err, "final flush failed");
        }
    }

    /// Events each live session's broadcast holds.
    fn event_buffer(&self) -> usize {
        self.inner.config.event_buffer.max(16)
    }

    fn live(&self, id: &SessionId) -> Option<Arc<LiveSession>> {
        self.inner.live.lock().get(id).cloned()
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
            .as_ref()
            .and_then(|factory| factory.for_session(&id, &session.workspace));
        let (events, _) = broadcast::channel(self.event_buffer());
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
            let mut map = self.inner.live.lock();
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
        *live.worker.lock() = Some(worker);
        Ok(())
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
        *live.extra_roots.lock() = roots;
        Ok(())
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

#[cfg(test)]
mod growth_tests;
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

    impl TestProvider {
        /// Streams `chunks` text deltas, then ends the turn.
        fn streaming(chunks: usize) -> Self {
            Self {
                chunks,
                hang: false,
                dropped: Arc::default(),
            }
        }

        /// Streams one delta, then waits until the stream is dropped.
        fn hanging() -> Self {
            Self {
                hang: true,
                ..Self::streaming(1)
            }
        }
    }

    struct DropFlag(Arc<Mutex<Option<Instant>>>, Arc<AtomicBool>);

    impl Drop for DropFlag {
        fn drop(&mut self) {
            *self.0.lock() = Some(Instant::now());
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

    /// One provider, `test`, serving model `m` with `provider`.
    fn test_providers(provider: impl Provider + 'static) -> Providers {
        Providers::new(
            vec![ProviderEntry {
                name: "test".into(),
                models: vec!["m".into()],
                provider: Arc::new(provider),
                images: None,
                thought: Default::default(),
                window: None,
            }],
            None,
        )
    }

    async fn runtime(provider: TestProvider, event_buffer: usize) -> Runtime {
        let store: Arc<dyn Journal> = Arc::new(MemoryJournal::new());
        let providers = test_providers(provider);
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
        let provider = TestProvider::hanging();
        let journal = Arc::new(MemoryJournal::new());
        let store: Arc<dyn Journal> = journal.clone();
        let providers = test_providers(provider);
        let leases = journal.clone();
        let rt = Runtime::from_parts(Parts {
            leases: Some((leases.clone(), "me".into())),
            ..Parts::new(
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
            )
        });
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

    /// A steering message for a run no process takes up (its process gone
    /// without a trace yet) is taken back after the wait and refused, not
    /// left in the journal to arrive in some later run.
    #[tokio::test]
    async fn a_steer_nobody_takes_is_taken_back_and_refused() {
        let dir = tempfile::tempdir().unwrap();
        let journal = Arc::new(MemoryJournal::new());
        let providers = test_providers(TestProvider::streaming(1));
        let rt = Runtime::from_parts(Parts {
            notifier: Some(journal.clone()),
            ..Parts::new(
                journal.clone(),
                providers,
                Arc::new(ToolGate::without_tools()),
                RuntimeConfig::default(),
            )
        });
        let session = rt.create_session(new_session(dir.path())).await.unwrap();
        // A run another process marked running and then left.
        let orphan = RunId::generate();
        journal
            .commit(Write::InsertRun {
                id: orphan.clone(),
                session_id: session.id.clone(),
                at: 1,
            })
            .await
            .unwrap();
        journal
            .commit(Write::SetRunState {
                id: orphan,
                state: RunState::Running,
                stop_reason: None,
                error: None,
                usage: Usage::default(),
                cost: None,
                at: 2,
            })
            .await
            .unwrap();
        let started = Instant::now();
        assert_eq!(
            rt.steer_elsewhere(&session.id, text("anyone?"))
                .await
                .unwrap(),
            None
        );
        assert!(started.elapsed() >= Duration::from_secs(2));
        assert!(journal.controls(&session.id).await.unwrap().is_empty());
        rt.shutdown().await;
    }

    /// Two faces answer, at the same moment, an approval that a run another
    /// process works waits on: that process takes one answer (the first it
    /// sees) and settles the approval; exactly that answer is told it won,
    /// the other is taken back and refused. An answer nobody takes is taken
    /// back after the wait and refused, not left to be carried out later.
    #[tokio::test]
    async fn of_two_answers_passed_on_at_once_only_the_one_taken_is_told_it_won() {
        use crate::core::tool::ToolKind;
        let dir = tempfile::tempdir().unwrap();
        let journal = Arc::new(MemoryJournal::new());
        let rt = Runtime::from_parts(Parts {
            notifier: Some(journal.clone()),
            ..Parts::new(
                journal.clone(),
                test_providers(TestProvider::streaming(1)),
                Arc::new(ToolGate::without_tools()),
                RuntimeConfig::default(),
            )
        });
        let session = rt.create_session(new_session(dir.path())).await.unwrap();
        // A run another process works, waiting on two approvals in turn.
        let run = RunId::generate();
        journal
            .commit(Write::InsertRun {
                id: run.clone(),
                session_id: session.id.clone(),
                at: 1,
            })
            .await
            .unwrap();
        let (of_session, of_run) = (session.id.clone(), run.clone());
        let record = move |seq: u64, event: Event| {
            Write::AppendEvent(EventRecord {
                session_id: of_session.clone(),
                run_id: of_run.clone(),
                seq,
                at: 2,
                event,
            })
        };
        let asked = |id: &str| Event::ApprovalRequested {
            approval_id: id.into(),
            call_id: format!("call-{id}"),
            tool: "write_file".into(),
            kind: ToolKind::Edit,
            title: "Create a.txt".into(),
            reason: "supervised".into(),
            arguments: serde_json::json!({}),
            locations: Vec::new(),
            command: None,
            diffs: Vec::new(),
        };
        journal.commit(record(0, asked("apr_1"))).await.unwrap();

        // The owner: takes the first answer it finds, and settles with it.
        let owner = {
            let (journal, session, record) = (journal.clone(), session.id.clone(), record.clone());
            tokio::spawn(async move {
                loop {
                    let controls = journal.controls(&session).await.unwrap();
                    if let Some((number, Control::Approval { decision, .. })) =
                        controls.into_iter().next()
                    {
                        journal
                            .commit(Write::TakeControl { id: number })
                            .await
                            .unwrap();
                        journal
                            .commit(record(
                                1,
                                Event::ApprovalDecided {
                                    approval_id: "apr_1".into(),
                                    call_id: "call-apr_1".into(),
                                    decision,
                                },
                            ))
                            .await
                            .unwrap();
                        return decision;
                    }
                    tokio::time::sleep(Duration::from_millis(5)).await;
                }
            })
        };
        let (allow, reject) = tokio::join!(
            rt.answer_approval_of(&session.id, &run, "apr_1", ApprovalDecision::AllowOnce),
            rt.answer_approval_of(&session.id, &run, "apr_1", ApprovalDecision::RejectOnce),
        );
        let taken = owner.await.unwrap();
        let (allow, reject) = (allow.unwrap(), reject.unwrap());
        assert!(allow != reject, "allow: {allow}, reject: {reject}");
        assert_eq!(allow, taken == ApprovalDecision::AllowOnce);
        assert!(journal.controls(&session.id).await.unwrap().is_empty());

        // Asked again, and nobody takes the answer.
        journal.commit(record(2, asked("apr_2"))).await.unwrap();
        let started = Instant::now();
        let answered = rt
            .answer_approval_of(&session.id, &run, "apr_2", ApprovalDecision::AllowOnce)
            .await
            .unwrap();
        assert!(!answered);
        assert!(started.elapsed() >= Duration::from_secs(2));
        assert!(journal.controls(&session.id).await.unwrap().is_empty());
        rt.shutdown().await;
    }

    /// The daily budget counts what the provider cost since midnight (UTC)
    /// by the runtime's clock: spent up at 23:59, a prompt is stopped; at
    /// 00:00:30 the next day it runs. No sleeping: the clock is set.
    #[tokio::test]
    async fn the_daily_budget_starts_again_at_midnight_by_the_runtimes_clock() {
        use crate::core::clock::ManualClock;
        let dir = tempfile::tempdir().unwrap();
        let journal = Arc::new(MemoryJournal::new());
        let providers = test_providers(TestProvider::streaming(1));
        // 2026-11-27T23:59:00Z.
        let day_end: i64 = 1_795_823_940_000;
        let clock = Arc::new(ManualClock::at(day_end));
        let mut config = RuntimeConfig::default();
        config.loop_config.budgets.daily.insert("test".into(), 1.0);
        config.loop_config.budgets.currency = "USD".into();
        let rt = Runtime::from_parts(Parts {
            clock: clock.clone(),
            ..Parts::new(
                journal.clone(),
                providers,
                Arc::new(ToolGate::without_tools()),
                config,
            )
        });
        let session = rt.create_session(new_session(dir.path())).await.unwrap();
        // Earlier that day the provider cost 2 USD.
        let spent = RunId::generate();
        journal
            .commit(Write::InsertRun {
                id: spent.clone(),
                session_id: session.id.clone(),
                at: day_end - 3_600_000,
            })
            .await
            .unwrap();
        journal
            .commit(Write::SetRunState {
                id: spent,
                state: RunState::Completed,
                stop_reason: Some(StopReason::EndTurn),
                error: None,
                usage: Usage::default(),
                cost: Some(Cost {
                    amount: 2.0,
                    currency: "USD".into(),
                }),
                at: day_end - 3_500_000,
            })
            .await
            .unwrap();
        let stopped = rt.prompt(&session.id, text("one")).await.unwrap();
        assert_eq!(
            stopped.done.await.unwrap(),
            RunOutcome::Completed(StopReason::Budget)
        );
        clock.advance(90_000);
        let ran = rt.prompt(&session.id, text("two")).await.unwrap();
        assert_eq!(
            ran.done.await.unwrap(),
            RunOutcome::Completed(StopReason::EndTurn)
        );
        rt.shutdown().await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn cancel_drops_the_provider_stream_within_100ms() {
        let dir = tempfile::tempdir().unwrap();
        let dropped = Arc::new(Mutex::new(None));
        let provider = TestProvider {
            dropped: dropped.clone(),
            ..TestProvider::hanging()
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
        let dropped_at = dropped.lock().expect("the provider stream was dropped");
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
        let provider = TestProvider::streaming(5000);
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
    async fn a_subscription_through_thousands_of_runs_forgets_the_finished_ones() {
        // A buffer of 16 events and a reader that stops now and then: it
        // lags again and again, and re-reads from the tape.
        const RUNS: usize = 2000;
        let dir = tempfile::tempdir().unwrap();
        let provider = TestProvider::streaming(3);
        let rt = runtime(provider, 16).await;
        let session = rt.create_session(new_session(dir.path())).await.unwrap();
        let mut sub = rt.subscribe(&session.id).unwrap();
        let mut runs = Vec::new();
        for n in 0..RUNS {
            runs.push(
                rt.prompt(&session.id, text(&n.to_string()))
                    .await
                    .unwrap()
                    .run_id,
            );
        }
        let mut ended = Vec::new();
        let mut next_seq: HashMap<RunId, u64> = HashMap::new();
        let mut most_held = 0;
        let mut read = 0;
        while ended.len() < RUNS {
            let Ok(record) = tokio::time::timeout(Duration::from_secs(30), sub.next()).await else {
                panic!(
                    "stuck after {} runs ended, {read} events, {} lags; next: {:?}",
                    ended.len(),
                    sub.lags(),
                    next_seq.get(&runs[ended.len()])
                );
            };
            let record = record.unwrap();
            read += 1;
            if read % 1000 == 0 {
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            let seq = next_seq.entry(record.run_id.clone()).or_insert(0);
            assert_eq!(record.seq, *seq, "run {} in order, once", record.run_id);
            *seq += 1;
            if record.event.terminal_state().is_some() {
                ended.push(record.run_id.clone());
            }
            most_held = most_held.max(sub.finished_held());
        }
        // Every run ended once, in the order they were queued.
        assert_eq!(ended, runs);
        assert!(sub.lags() > 1, "lagged {} times", sub.lags());
        assert!(
            most_held <= 64,
            "held up to {most_held} finished runs of {RUNS}"
        );
        rt.shutdown().await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn one_run_at_a_time_and_cancel_reaches_queued_runs() {
        let dir = tempfile::tempdir().unwrap();
        let provider = TestProvider::hanging();
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
        let providers = test_providers(CallingProvider {
            tool: "probe",
            calls: 3,
        });
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
            .filter_map(|e| {
                let Message::Tool { call_id, .. } = &e.message else {
                    return None;
                };
                Some(call_id.clone())
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

    /// A runtime on a memory journal whose sessions get [`Extra`]'s tools,
    /// and the `Extra`.
    fn with_extra(
        providers: Providers,
        gate: ToolGate,
        config: RuntimeConfig,
    ) -> (Runtime, Arc<Extra>) {
        let extra = Arc::new(Extra {
            listed: Default::default(),
            stopped: AtomicBool::new(false),
        });
        let rt = Runtime::from_parts(Parts {
            session_tools: Some(Arc::new(ExtraFactory(extra.clone()))),
            ..Parts::new(
                Arc::new(MemoryJournal::new()),
                providers,
                Arc::new(gate),
                config,
            )
        });
        (rt, extra)
    }

    #[tokio::test]
    async fn session_tools_are_asked_each_turn_reported_and_stopped_with_the_session() {
        let dir = tempfile::tempdir().unwrap();
        let providers = test_providers(CallingProvider {
            tool: "extra__probe",
            calls: 1,
        });
        let (rt, extra) = with_extra(
            providers,
            ToolGate::without_tools(),
            RuntimeConfig::default(),
        );
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
            .find_map(|r| {
                let Event::ToolCall { kind, .. } = &r.event else {
                    return None;
                };
                Some(*kind)
            })
            .unwrap();
        assert_eq!(call, crate::core::tool::ToolKind::Read);
        let result = tape
            .iter()
            .find_map(|r| {
                let Event::ToolResult {
                    output, is_error, ..
                } = &r.event
                else {
                    return None;
                };
                Some((output.clone(), *is_error))
            })
            .unwrap();
        assert_eq!(result, ("ok".to_owned(), false));
        assert!(!extra.stopped.load(Ordering::SeqCst));
        rt.close_session(&session.id).await.unwrap();
        assert!(extra.stopped.load(Ordering::SeqCst));
        rt.shutdown().await;
    }

    /// A built-in tool that counts how often its spec (its JSON schema) is
    /// made: the blanket `Tool` impl asks for the description each time.
    struct SpecMade(Arc<std::sync::atomic::AtomicUsize>);

    #[derive(serde::Deserialize, schemars::JsonSchema)]
    struct NoArgs {}

    impl crate::core::tool::TypedTool for SpecMade {
        type Args = NoArgs;
        const NAME: &'static str = "built_in";
        const KIND: crate::core::tool::ToolKind = crate::core::tool::ToolKind::Read;

        fn description(&self) -> String {
            self.0.fetch_add(1, Ordering::SeqCst);
            "a built-in tool".to_owned()
        }

        async fn plan(
            &self,
            _args: &NoArgs,
            _ctx: &ToolContext,
        ) -> Result<crate::core::tool::Plan, crate::core::tool::ToolError> {
            Ok(crate::core::tool::Plan::default())
        }

        async fn execute(
            &self,
            _args: &NoArgs,
            _plan: &crate::core::tool::Plan,
            _ctx: &ToolContext,
        ) -> Result<crate::core::tool::ToolOutput, crate::core::tool::ToolError> {
            Ok(crate::core::tool::ToolOutput::text("ok"))
        }
    }

    /// Calls the session's extra tool once, then ends; records where each
    /// request's spec of `built_in` lives.
    struct SpecWatcher {
        seen: Arc<Mutex<Vec<usize>>>,
    }

    impl Provider for SpecWatcher {
        fn name(&self) -> &str {
            "test"
        }

        fn stream(&self, request: ModelRequest) -> ProviderStream {
            if let Some(spec) = request.tools.iter().find(|spec| spec.name == "built_in") {
                self.seen.lock().push(Arc::as_ptr(spec) as usize);
            }
            CallingProvider {
                tool: "extra__probe",
                calls: 1,
            }
            .stream(request)
        }
    }

    #[tokio::test]
    async fn tool_schemas_are_made_once_and_shared_by_every_turn_of_every_run() {
        // With session tools (MCP servers) the turn's tool set is made again
        // before each turn: the built-in tools' specs are not.
        let dir = tempfile::tempdir().unwrap();
        let made = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let mut gate = ToolGate::without_tools();
        gate.tools = crate::core::tool::Toolset::new(vec![Arc::new(SpecMade(made.clone()))]);
        let seen = Arc::new(Mutex::new(Vec::new()));
        let (rt, _) = with_extra(
            test_providers(SpecWatcher { seen: seen.clone() }),
            gate,
            RuntimeConfig {
                default_mode: Mode::Full,
                ..RuntimeConfig::default()
            },
        );
        let session = rt.create_session(new_session(dir.path())).await.unwrap();
        for n in 0..3 {
            let ticket = rt.prompt(&session.id, text(&n.to_string())).await.unwrap();
            assert_eq!(
                ticket.done.await.unwrap(),
                RunOutcome::Completed(StopReason::EndTurn)
            );
        }
        // Two turns a run, three runs: one spec, made once.
        let seen = seen.lock().clone();
        assert_eq!(seen.len(), 6, "{seen:?}");
        assert!(seen.iter().all(|at| *at == seen[0]), "{seen:?}");
        assert_eq!(made.load(Ordering::SeqCst), 1);
        rt.shutdown().await;
    }
}
