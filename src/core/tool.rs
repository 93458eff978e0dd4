//! The seam between the agent loop and the tools: a tool plans a call (what it
//! will touch, known before anything changes) and then executes it.
//!
//! Implementations live outside the core (`crate::tools`); the core only sees
//! this trait. Between `plan` and `execute` the core runs the policy gate and,
//! when the policy asks for it, an approval: whatever a person approved is what
//! `execute` does (an edit writes exactly the planned text — or, for edits
//! made by search and replace, the same edits on a file that changed since,
//! while they still apply — and a shell call runs exactly the planned line).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use futures::future::BoxFuture;
use serde::{Deserialize, Serialize};
use thiserror::Error;
use tokio_util::sync::CancellationToken;

use super::boundary::{PathBoundary, PathError};
use super::ids::SessionId;
pub use super::provider::ToolSpec;
use super::question::{Question, QuestionAnswer};
use super::session::Mode;

mod schema;
mod typed;

pub use typed::{ParsedArgs, TypedTool, parse_args};

/// What a tool call does; the policy branches on it and editors show it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ToolKind {
    Read,
    Edit,
    Delete,
    Move,
    Search,
    Execute,
    Fetch,
    Think,
    Other,
}

impl ToolKind {
    /// Calls of this kind change nothing and run nothing.
    pub fn is_read_only(self) -> bool {
        match self {
            ToolKind::Read | ToolKind::Search | ToolKind::Think => true,
            ToolKind::Edit
            | ToolKind::Delete
            | ToolKind::Move
            | ToolKind::Execute
            | ToolKind::Fetch
            | ToolKind::Other => false,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            ToolKind::Read => "read",
            ToolKind::Edit => "edit",
            ToolKind::Delete => "delete",
            ToolKind::Move => "move",
            ToolKind::Search => "search",
            ToolKind::Execute => "execute",
            ToolKind::Fetch => "fetch",
            ToolKind::Think => "think",
            ToolKind::Other => "other",
        }
    }
}

/// A change to one file, as planned before it is made.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileDiff {
    pub path: PathBuf,
    /// The text before the change; `None` when the file does not exist yet.
    pub old_text: Option<String>,
    pub new_text: String,
    /// The change as a unified diff, for the model and for logs.
    pub unified: String,
}

/// How a file read again just before a write compares with what an earlier
/// read (a plan's) saw.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Since {
    /// The same text, or a difference that is only how an editor shows a
    /// file: its final newline missing (a buffer's lines hide it) or `""`
    /// for a file that does not exist (an empty buffer), either way round.
    Same,
    /// The same but for a final newline the file has now and the earlier
    /// read did not show: the file's convention is to end in one.
    NewlineShown,
    /// Anything else changed.
    Changed,
}

impl Since {
    /// Compares what a plan read (`None`: no file) with what the file holds now.
    pub fn compare(planned: Option<&str>, current: Option<&str>) -> Self {
        match (planned, current) {
            (None, None) | (None, Some("")) | (Some(""), None) => Self::Same,
            (Some(planned), Some(current)) if planned == current => Self::Same,
            (Some(planned), Some(current)) if planned.strip_suffix('\n') == Some(current) => {
                Self::Same
            }
            (Some(planned), Some(current)) if current.strip_suffix('\n') == Some(planned) => {
                Self::NewlineShown
            }
            _ => Self::Changed,
        }
    }
}

/// What a call will do, worked out from its arguments before it runs.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Plan {
    /// A one-line human title ("Read src/main.rs", "Run `cargo test`").
    pub title: String,
    /// Every path the call reads, resolved and inside the boundaries.
    pub reads: Vec<PathBuf>,
    /// Every path the call writes, resolved and inside the boundaries.
    pub writes: Vec<PathBuf>,
    /// The shell line a shell call runs.
    pub command: Option<String>,
    /// For edits: the exact change `execute` will make.
    pub diffs: Vec<FileDiff>,
    /// The web hosts the call reaches (the policy checks each).
    pub hosts: Vec<String>,
    /// The question the call asks the person (`ask_user`): once the call
    /// passes the policy, the gate asks it and puts what came back in
    /// `answer` before the call runs.
    pub question: Option<Question>,
    pub answer: Option<QuestionAnswer>,
    /// The task the call hands to a subagent (`delegate`): once the call
    /// passes the policy, the gate runs the child and puts how it ended in
    /// `delegated` before the call runs.
    pub delegation: Option<DelegateTask>,
    pub delegated: Option<DelegateOutcome>,
    /// Why a person must approve this call in every mode: no rule, grant
    /// or hook waives it (a user-scope memory that every later session
    /// reads). Writes to protected paths are added by the policy.
    pub needs_person: Option<String>,
    /// The arguments the plan was made from, as a typed tool parsed them:
    /// what its `execute` runs with ([`TypedTool`]).
    pub parsed: ParsedArgs,
}

/// A task for a subagent: a child run in a child session of its own.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DelegateTask {
    /// What the child is asked to do (its prompt).
    pub task: String,
    /// A short label shown to the person (with the child's approvals).
    pub label: String,
    /// The built-in tools the child may use; `None`: all of the parent's
    /// (never `delegate`).
    pub tools: Option<Vec<String>>,
    /// The child's mode; never wider than the parent's.
    pub mode: Option<Mode>,
}

/// How a subagent's run ended.
#[derive(Debug, Clone, PartialEq)]
pub struct DelegateOutcome {
    pub session_id: SessionId,
    pub run_id: super::ids::RunId,
    /// `completed`, `failed` or `cancelled`.
    pub state: String,
    /// Why a completed run stopped (`end_turn`, `max_turn_requests`, `budget`, …).
    pub stop_reason: Option<String>,
    /// Why a failed run failed.
    pub error: Option<String>,
    /// The child's last message: its answer.
    pub answer: String,
    /// Model turns the child took.
    pub turns: u32,
    /// What the child's run cost, when priced: it counts in the parent's
    /// run budget.
    pub cost: Option<super::usage::Cost>,
}

impl Plan {
    /// The paths an editor should point at, reads and writes alike.
    pub fn locations(&self) -> Vec<PathBuf> {
        let mut all: Vec<PathBuf> = self.writes.clone();
        for path in &self.reads {
            if !all.contains(path) {
                all.push(path.clone());
            }
        }
        all
    }
}

/// What a finished call returns; the safety pass runs on `text` before anyone sees it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ToolOutput {
    pub text: String,
    /// The changes made, shown to editors as diffs.
    pub diffs: Vec<FileDiff>,
    /// The model's whole task list, when the call set it (the `todo` tool).
    pub plan: Option<Vec<PlanEntry>>,
    /// The client terminal the call ran in, when it ran in one.
    pub terminal_id: Option<String>,
    /// The skill whose instructions the call loaded (the `skill` tool):
    /// the gate records the activation (`core::skills`).
    pub skill: Option<String>,
}

impl ToolOutput {
    pub fn text(text: impl Into<String>) -> Self {
        Self {
            text: text.into(),
            ..Self::default()
        }
    }
}

/// One task of the model's task list (an editor shows it as the plan). The
/// `todo` tool's arguments are a list of these: the field comments are what
/// the model is told of each (this one is not).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[schemars(description = "")]
pub struct PlanEntry {
    /// What the task is, in a few words.
    pub content: String,
    pub status: PlanStatus,
    /// Default medium.
    #[serde(default)]
    pub priority: PlanPriority,
}

// No doc comments on the variants below: the schema would list each as a
// `oneOf` of its own instead of one `enum`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum PlanStatus {
    Pending,
    InProgress,
    Completed,
}

impl PlanStatus {
    /// The check box a text face shows before an entry: `[ ]`, `[~]`, `[x]`.
    pub fn mark(self) -> &'static str {
        match self {
            PlanStatus::Pending => "[ ]",
            PlanStatus::InProgress => "[~]",
            PlanStatus::Completed => "[x]",
        }
    }
}

#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum PlanPriority {
    High,
    #[default]
    Medium,
    Low,
}

/// What a running call reports before it ends.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProgressUpdate {
    /// More output (whole lines); the gate passes it through the safety pass.
    Output(String),
    /// The call runs in this client terminal; the editor embeds it.
    Terminal(String),
}

/// Where a running call reports progress; the gate turns reports into events.
/// A context without a sink (`Progress::none`) drops them.
#[derive(Clone, Default)]
pub struct Progress {
    sink: Option<(
        String,
        tokio::sync::mpsc::UnboundedSender<(String, ProgressUpdate)>,
    )>,
}

impl Progress {
    pub fn none() -> Self {
        Self::default()
    }

    /// A sink reporting for the call `call_id` into `tx`.
    pub fn new(
        call_id: String,
        tx: tokio::sync::mpsc::UnboundedSender<(String, ProgressUpdate)>,
    ) -> Self {
        Self {
            sink: Some((call_id, tx)),
        }
    }

    pub fn report(&self, update: ProgressUpdate) {
        if let Some((call, tx)) = &self.sink {
            let _ = tx.send((call.clone(), update));
        }
    }

    /// Whether reports go anywhere (so a tool can skip the work of making them).
    pub fn is_active(&self) -> bool {
        self.sink.is_some()
    }
}

/// A command to run in the client's terminal.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TerminalCommand {
    pub command: String,
    pub args: Vec<String>,
    pub env: Vec<(String, String)>,
    pub cwd: PathBuf,
    /// Bytes of output the client keeps.
    pub output_limit: usize,
}

/// How a command in the client's terminal ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TerminalExit {
    pub terminal_id: String,
    pub output: String,
    pub truncated: bool,
    pub exit_code: Option<u32>,
    pub signal: Option<String>,
    pub timed_out: bool,
}

/// Terminals the client runs and shows (ACP `terminal/*`). Implemented by a
/// face; absent means the server runs commands itself.
pub trait ClientTerminal: Send + Sync {
    /// Creates the terminal, reports its id through `progress`, waits for the
    /// exit (killing it on `cancel` or after `timeout`), reads its output and
    /// releases it.
    fn run(
        &self,
        session: &SessionId,
        command: TerminalCommand,
        timeout: std::time::Duration,
        progress: Progress,
        cancel: CancellationToken,
    ) -> BoxFuture<'static, Result<TerminalExit, String>>;
}

/// Why a tool call failed; the message is what the model reads.
#[derive(Debug, Clone, Error, PartialEq, Eq)]
pub enum ToolError {
    #[error("invalid arguments: {0}")]
    InvalidArguments(String),
    #[error(transparent)]
    Path(#[from] PathError),
    #[error("{0}")]
    Failed(String),
    #[error("the call was cancelled")]
    Cancelled,
}

/// File access through the client (an editor that shows unsaved buffers and
/// wants edits to land in them). Implemented by a face; absent means local files.
pub trait ClientFiles: Send + Sync {
    fn can_read(&self) -> bool;
    fn can_write(&self) -> bool;
    fn read_text(
        &self,
        session: &SessionId,
        path: &Path,
    ) -> BoxFuture<'static, Result<String, String>>;
    fn write_text(
        &self,
        session: &SessionId,
        path: &Path,
        content: String,
    ) -> BoxFuture<'static, Result<(), String>>;
}

/// Reads and writes text files, through the client when it offers to.
#[derive(Clone)]
pub struct Files {
    session: SessionId,
    client: Option<Arc<dyn ClientFiles>>,
    /// The run's cancellation: a read or write waiting on the client is
    /// dropped (and so withdrawn) when it fires.
    cancel: CancellationToken,
}

impl Files {
    pub fn local(session: SessionId) -> Self {
        Self {
            session,
            client: None,
            cancel: CancellationToken::new(),
        }
    }

    pub fn new(session: SessionId, client: Option<Arc<dyn ClientFiles>>) -> Self {
        Self {
            session,
            client,
            cancel: CancellationToken::new(),
        }
    }

    /// The same files, with client requests given up when `cancel` fires.
    pub fn cancelled_by(self, cancel: CancellationToken) -> Self {
        Self { cancel, ..self }
    }

    /// Whether reads go through the client.
    pub fn client_reads(&self) -> bool {
        self.client.as_ref().is_some_and(|c| c.can_read())
    }

    /// Whether writes go through the client.
    pub fn client_writes(&self) -> bool {
        self.client.as_ref().is_some_and(|c| c.can_write())
    }

    /// The file's text; `Ok(None)` when it does not exist.
    pub async fn read_text(&self, path: &Path) -> Result<Option<String>, ToolError> {
        if let Some(client) = self.client.as_ref().filter(|c| c.can_read()) {
            // The client may hold an unsaved buffer for a file not on disk yet;
            // a missing file is only missing if the client says so too.
            // The request goes out before a cancel is looked at, so a client
            // that answers at once is never cut short.
            let read = tokio::select! {
                biased;
                read = client.read_text(&self.session, path) => read,
                _ = self.cancel.cancelled() => return Err(ToolError::Cancelled),
            };
            return match read {
                Ok(text) => Ok(Some(text)),
                Err(_) if !path.exists() => Ok(None),
                Err(message) => Err(ToolError::Failed(format!(
                    "the editor could not read {}: {message}",
                    path.display()
                ))),
            };
        }
        match tokio::fs::read(path).await {
            Ok(bytes) => String::from_utf8(bytes)
                .map(Some)
                .map_err(|_| ToolError::Failed(format!("{} is not UTF-8 text", path.display()))),
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(err) => Err(ToolError::Failed(format!(
                "cannot read {}: {err}",
                path.display()
            ))),
        }
    }

    /// Deletes a file. Always on the local filesystem: the client protocol has
    /// no delete, and an editor notices a file gone from disk.
    pub async fn remove(&self, path: &Path) -> Result<(), ToolError> {
        tokio::fs::remove_file(path)
            .await
            .map_err(|err| ToolError::Failed(format!("cannot delete {}: {err}", path.display())))
    }

    pub async fn write_text(&self, path: &Path, content: String) -> Result<(), ToolError> {
        if let Some(client) = self.client.as_ref().filter(|c| c.can_write()) {
            let written = tokio::select! {
                biased;
                written = client.write_text(&self.session, path, content) => written,
                _ = self.cancel.cancelled() => return Err(ToolError::Cancelled),
            };
            return written.map_err(|message| {
                ToolError::Failed(format!(
                    "the editor could not write {}: {message}",
                    path.display()
                ))
            });
        }
        if let Some(parent) = path.parent() {
            tokio::fs::create_dir_all(parent).await.map_err(|err| {
                ToolError::Failed(format!("cannot create {}: {err}", parent.display()))
            })?;
        }
        tokio::fs::write(path, content)
            .await
            .map_err(|err| ToolError::Failed(format!("cannot write {}: {err}", path.display())))
    }
}

/// Everything a call works with.
#[derive(Clone)]
pub struct ToolContext {
    pub session_id: SessionId,
    /// The session's workspace; relative paths are resolved against it.
    pub workspace: PathBuf,
    /// Where the call may read and write.
    pub boundary: Arc<PathBoundary>,
    pub files: Files,
    /// Fired when the run is cancelled; a tool stops what it is doing.
    pub cancel: CancellationToken,
    /// Where the call reports output as it comes (set per call by the gate).
    pub progress: Progress,
    /// The client's terminal, when it offers one.
    pub terminal: Option<Arc<dyn ClientTerminal>>,
    /// The memory the session sees (`core::memory`), when there is one.
    pub memory: Option<super::memory::MemoryAccess>,
    /// The call being executed (set per call by the gate).
    pub call_id: Option<String>,
    /// The run the call belongs to, when it is one's.
    pub run_id: Option<super::ids::RunId>,
    /// The session's skills and which are active (`core::skills`), when it
    /// has any.
    pub skills: Option<Arc<super::skills::RunSkills>>,
}

impl ToolContext {
    /// Resolves a path argument against the workspace, inside the boundary
    /// (see [`PathBoundary::resolve`]); reads and writes share one boundary.
    pub fn path(&self, raw: &str) -> Result<PathBuf, PathError> {
        self.boundary.resolve(&self.workspace, raw)
    }

    /// A path as the model should see it: relative to the workspace when inside it.
    pub fn display_path(&self, path: &Path) -> String {
        match path.strip_prefix(&self.workspace) {
            Ok(rel) if rel.as_os_str().is_empty() => ".".to_owned(),
            Ok(rel) => rel.display().to_string(),
            Err(_) => path.display().to_string(),
        }
    }
}

/// A built-in or external tool. The built-in ones are [`TypedTool`]s (their
/// arguments a struct, their schema derived from it); an MCP server's tools,
/// whose schemas come from the server, implement this directly.
pub trait Tool: Send + Sync {
    fn spec(&self) -> ToolSpec;

    /// The kind of every call of this tool.
    fn kind(&self) -> ToolKind;

    /// Parses the arguments and works out what the call will touch and change,
    /// checking every path against the boundaries before reading anything.
    fn plan<'a>(
        &'a self,
        arguments: &'a serde_json::Value,
        ctx: &'a ToolContext,
    ) -> BoxFuture<'a, Result<Plan, ToolError>>;

    /// Does what the plan says.
    fn execute<'a>(
        &'a self,
        arguments: &'a serde_json::Value,
        plan: &'a Plan,
        ctx: &'a ToolContext,
    ) -> BoxFuture<'a, Result<ToolOutput, ToolError>>;
}

/// The tools a session has beyond the built-in ones (an MCP client's servers,
/// say), as they stand now. The list may change between model turns.
#[derive(Clone, Default)]
pub struct SessionToolList {
    pub tools: Vec<Arc<dyn Tool>>,
    /// Failures to tell the user (a server that failed to start), each reported
    /// once per failure by the implementation.
    pub problems: Vec<String>,
}

/// A session's extra tools. Implemented outside the core (`crate::mcp`); the
/// agent loop asks for the current list before each model turn, so the
/// implementation may start things lazily and change the list as it goes.
pub trait SessionTools: Send + Sync {
    /// The tools as they stand now.
    fn tools(&self) -> BoxFuture<'_, SessionToolList>;

    /// The tools asked for afresh, whatever the implementation remembers:
    /// used when the model names a tool the turn's list lacks (a change the
    /// implementation may not have heard of yet).
    fn relist(&self) -> BoxFuture<'_, SessionToolList> {
        self.tools()
    }

    /// Stops whatever the tools run (server processes); called when the
    /// session closes or the runtime shuts down.
    fn shutdown(&self) -> BoxFuture<'_, ()>;

    /// Values the tools were given that must never reach the model, the tape
    /// or the logs (an MCP server's env and header values): the session's
    /// runs redact them like the configured secrets.
    fn secrets(&self) -> Vec<String> {
        Vec::new()
    }
}

/// Builds the extra tools of each session that becomes live, so every face
/// gets them (the ones configured for every session).
pub trait SessionToolsFactory: Send + Sync {
    fn for_session(&self, session: &SessionId, workspace: &Path) -> Option<Arc<dyn SessionTools>>;
}

/// The tools offered to the model, by name.
///
/// What the model is told of each tool (`Tool::spec`, which builds its JSON
/// schema) is made once, when the set is: every turn of every run shares
/// it, and so does a set made from this one (`only`, `with`); cloning a set
/// copies no tool, name or schema.
#[derive(Clone)]
pub struct Toolset {
    tools: Arc<[Arc<dyn Tool>]>,
    by_name: Arc<HashMap<String, usize>>,
    specs: Arc<[Arc<ToolSpec>]>,
}

impl Default for Toolset {
    fn default() -> Self {
        Self::new(Vec::new())
    }
}

impl Toolset {
    pub fn new(tools: Vec<Arc<dyn Tool>>) -> Self {
        let specs = tools.iter().map(|tool| Arc::new(tool.spec())).collect();
        Self::from_parts(tools, specs)
    }

    /// `tools` with their specs, in the same order.
    fn from_parts(tools: Vec<Arc<dyn Tool>>, specs: Vec<Arc<ToolSpec>>) -> Self {
        let by_name = specs
            .iter()
            .enumerate()
            .map(|(index, spec)| (spec.name.clone(), index))
            .collect();
        Self {
            tools: tools.into(),
            by_name: Arc::new(by_name),
            specs: specs.into(),
        }
    }

    pub fn get(&self, name: &str) -> Option<&Arc<dyn Tool>> {
        self.by_name.get(name).map(|index| &self.tools[*index])
    }

    pub fn specs(&self) -> Arc<[Arc<ToolSpec>]> {
        self.specs.clone()
    }

    pub fn is_empty(&self) -> bool {
        self.tools.is_empty()
    }

    /// The tools of this set `keep` says yes to, in order.
    pub fn only(&self, keep: impl Fn(&str) -> bool) -> Self {
        let (tools, specs) = self
            .tools
            .iter()
            .zip(self.specs.iter())
            .filter(|(_, spec)| keep(&spec.name))
            .map(|(tool, spec)| (tool.clone(), spec.clone()))
            .unzip();
        Self::from_parts(tools, specs)
    }

    /// This set with the spec of the tool `name` (if there is one) replaced
    /// by what `respec` makes of it; the tool is the same.
    pub fn respec(&self, name: &str, respec: impl FnOnce(&ToolSpec) -> ToolSpec) -> Self {
        let Some(index) = self.by_name.get(name).copied() else {
            return self.clone();
        };
        let mut specs = self.specs.to_vec();
        specs[index] = Arc::new(respec(&specs[index]));
        Self {
            tools: self.tools.clone(),
            by_name: self.by_name.clone(),
            specs: specs.into(),
        }
    }

    /// This set plus `extra`; a name already taken keeps its first tool.
    pub fn with(&self, extra: &[Arc<dyn Tool>]) -> Self {
        if extra.is_empty() {
            return self.clone();
        }
        let mut tools = self.tools.to_vec();
        let mut specs = self.specs.to_vec();
        let mut by_name = HashMap::clone(&self.by_name);
        for tool in extra {
            let spec = tool.spec();
            if let std::collections::hash_map::Entry::Vacant(slot) =
                by_name.entry(spec.name.clone())
            {
                slot.insert(tools.len());
                tools.push(tool.clone());
                specs.push(Arc::new(spec));
            }
        }
        Self {
            tools: tools.into(),
            by_name: Arc::new(by_name),
            specs: specs.into(),
        }
    }
}

/// A client that answers reads as a Neovim buffer shows a file (avante.nvim
/// does): the text without its final newline, `""` for a file that does not
/// exist; it writes to disk.
#[cfg(test)]
pub(crate) struct BufferView;

#[cfg(test)]
impl BufferView {
    pub(crate) fn files(session: SessionId) -> Files {
        Files::new(session, Some(Arc::new(BufferView)))
    }
}

#[cfg(test)]
impl ClientFiles for BufferView {
    fn can_read(&self) -> bool {
        true
    }

    fn can_write(&self) -> bool {
        true
    }

    fn read_text(&self, _: &SessionId, path: &Path) -> BoxFuture<'static, Result<String, String>> {
        let text = std::fs::read_to_string(path).unwrap_or_default();
        let shown = text.strip_suffix('\n').unwrap_or(&text).to_owned();
        Box::pin(async move { Ok(shown) })
    }

    fn write_text(
        &self,
        _: &SessionId,
        path: &Path,
        content: String,
    ) -> BoxFuture<'static, Result<(), String>> {
        let written = std::fs::write(path, content).map_err(|err| err.to_string());
        Box::pin(async move { written })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_hidden_final_newline_or_an_empty_buffer_for_no_file_is_no_change() {
        use Since::*;
        let cases: [(Option<&str>, Option<&str>, Since); 12] = [
            (None, None, Same),
            (Some("a\n"), Some("a\n"), Same),
            // A buffer's lines hide the final newline, either way round.
            (Some("a\nb\n"), Some("a\nb"), Same),
            (Some("a\nb"), Some("a\nb\n"), NewlineShown),
            // An empty buffer for a file that does not exist, either way round.
            (None, Some(""), Same),
            (Some(""), None, Same),
            // Not one newline: a change.
            (Some("a\n\n"), Some("a"), Changed),
            (None, Some("\n"), Changed),
            (Some("a\n"), None, Changed),
            (None, Some("a"), Changed),
            (Some("a\n"), Some("b\n"), Changed),
            (Some("a\r\n"), Some("a"), Changed),
        ];
        for (planned, current, want) in cases {
            assert_eq!(
                Since::compare(planned, current),
                want,
                "{planned:?} then {current:?}"
            );
        }
    }

    /// A client that never answers a read or a write.
    struct Silent;

    impl ClientFiles for Silent {
        fn can_read(&self) -> bool {
            true
        }

        fn can_write(&self) -> bool {
            true
        }

        fn read_text(&self, _: &SessionId, _: &Path) -> BoxFuture<'static, Result<String, String>> {
            Box::pin(std::future::pending())
        }

        fn write_text(
            &self,
            _: &SessionId,
            _: &Path,
            _: String,
        ) -> BoxFuture<'static, Result<(), String>> {
            Box::pin(std::future::pending())
        }
    }

    #[tokio::test]
    async fn a_cancelled_run_stops_waiting_on_the_client() {
        let cancel = CancellationToken::new();
        let files = Files::new(
            SessionId::from_string("ses_t".into()),
            Some(Arc::new(Silent)),
        )
        .cancelled_by(cancel.clone());
        let path = Path::new("/nowhere/a.txt");
        let (read, write, ()) = tokio::join!(
            files.read_text(path),
            files.write_text(path, "x".into()),
            async { cancel.cancel() }
        );
        assert_eq!(read.unwrap_err(), ToolError::Cancelled);
        assert_eq!(write.unwrap_err(), ToolError::Cancelled);
    }

    struct Named(&'static str, ToolKind);

    impl Tool for Named {
        fn spec(&self) -> ToolSpec {
            ToolSpec {
                name: self.0.to_owned(),
                description: String::new(),
                parameters: serde_json::json!({"type": "object"}),
            }
        }

        fn kind(&self) -> ToolKind {
            self.1
        }

        fn plan<'a>(
            &'a self,
            _arguments: &'a serde_json::Value,
            _ctx: &'a ToolContext,
        ) -> BoxFuture<'a, Result<Plan, ToolError>> {
            Box::pin(async { Ok(Plan::default()) })
        }

        fn execute<'a>(
            &'a self,
            _arguments: &'a serde_json::Value,
            _plan: &'a Plan,
            _ctx: &'a ToolContext,
        ) -> BoxFuture<'a, Result<ToolOutput, ToolError>> {
            Box::pin(async { Ok(ToolOutput::text("")) })
        }
    }

    #[test]
    fn extra_tools_join_the_set_without_shadowing_it() {
        let base = Toolset::new(vec![Arc::new(Named("read_file", ToolKind::Read))]);
        let extra: Vec<Arc<dyn Tool>> = vec![
            Arc::new(Named("srv__a", ToolKind::Other)),
            Arc::new(Named("read_file", ToolKind::Delete)),
        ];
        let merged = base.with(&extra);
        let names: Vec<String> = merged.specs().iter().map(|s| s.name.clone()).collect();
        assert_eq!(names, vec!["read_file", "srv__a"]);
        assert_eq!(
            merged.get("read_file").map(|t| t.kind()),
            Some(ToolKind::Read)
        );
        assert_eq!(
            merged.get("srv__a").map(|t| t.kind()),
            Some(ToolKind::Other)
        );
        // The base set is unchanged.
        assert!(base.get("srv__a").is_none());
    }
}
