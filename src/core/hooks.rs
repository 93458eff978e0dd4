//! Lifecycle hooks: programs (or HTTP endpoints) a person configured to run
//! at points of a session's life, in the wire format Claude Code made
//! common (one JSON object in, exit code and optional JSON out). The core
//! says when a hook fires and what its answer does; [`Hooks`] is the port
//! the runner behind it (`crate::hooks`) implements. `docs/hooks.md`.
//!
//! What an answer can do, by event:
//! - `PreToolUse` (after the call is planned, before the policy): block it,
//!   decide `allow` / `ask` / `deny` (an `allow` skips an approval the policy
//!   would ask for, never a policy deny), replace its input (planned and
//!   checked again), add context to its result;
//! - `PostToolUse`: add feedback and context to the result the model reads;
//! - `UserPromptSubmit`: block the prompt, or add context after it;
//! - `Stop`: keep the run going with a reason the model reads;
//! - `PreCompact`: block a compaction;
//! - `MessageReceived`: block an inbound chat message;
//! - `MessageSending`: withhold an outbound chat message, or rewrite it;
//! - any event: `continue: false` ends the run, `systemMessage` is shown to
//!   the person.

use std::path::PathBuf;

use futures::future::BoxFuture;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

/// An agent whose hook files Pincer can import from a workspace
/// (`[hooks] import`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Deserialize, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum HookImport {
    Claude,
    Codex,
}

impl HookImport {
    pub fn as_str(self) -> &'static str {
        match self {
            HookImport::Claude => "claude",
            HookImport::Codex => "codex",
        }
    }
}

/// What a hook that fails (times out, exits with a code other than 0 or 2,
/// answers something unreadable) does: go on as if it had answered nothing,
/// or block what it was asked about.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum OnFailure {
    #[default]
    Continue,
    Block,
}

/// The points a hook can run at.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum HookEvent {
    SessionStart,
    SessionEnd,
    UserPromptSubmit,
    PreToolUse,
    PostToolUse,
    PreCompact,
    Stop,
    SubagentStop,
    Notification,
    MessageReceived,
    MessageSending,
}

impl HookEvent {
    pub const ALL: [HookEvent; 11] = [
        HookEvent::SessionStart,
        HookEvent::SessionEnd,
        HookEvent::UserPromptSubmit,
        HookEvent::PreToolUse,
        HookEvent::PostToolUse,
        HookEvent::PreCompact,
        HookEvent::Stop,
        HookEvent::SubagentStop,
        HookEvent::Notification,
        HookEvent::MessageReceived,
        HookEvent::MessageSending,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            HookEvent::SessionStart => "SessionStart",
            HookEvent::SessionEnd => "SessionEnd",
            HookEvent::UserPromptSubmit => "UserPromptSubmit",
            HookEvent::PreToolUse => "PreToolUse",
            HookEvent::PostToolUse => "PostToolUse",
            HookEvent::PreCompact => "PreCompact",
            HookEvent::Stop => "Stop",
            HookEvent::SubagentStop => "SubagentStop",
            HookEvent::Notification => "Notification",
            HookEvent::MessageReceived => "MessageReceived",
            HookEvent::MessageSending => "MessageSending",
        }
    }

    pub fn parse(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|event| event.as_str() == name)
    }

    /// Whether plain text a hook prints (exit 0, not JSON) is context for
    /// the model, as for Claude Code's `UserPromptSubmit` and
    /// `SessionStart`; elsewhere it is only logged.
    pub fn takes_plain_context(self) -> bool {
        matches!(self, HookEvent::UserPromptSubmit | HookEvent::SessionStart)
    }
}

/// What a hook's `matcher` accepts (Claude Code's rules): everything for
/// `*`, empty or unset; for names of letters, digits, `_`, `-` and spaces
/// joined by `|` or `,`, exactly those names; otherwise a regular
/// expression found anywhere in the subject (anchor it with `^…$`).
#[derive(Debug, Clone)]
pub enum Matcher {
    All,
    Names(Vec<String>),
    Pattern(regex::Regex),
}

impl Matcher {
    pub fn parse(spec: Option<&str>) -> Result<Self, String> {
        let spec = spec.unwrap_or("").trim();
        if spec.is_empty() || spec == "*" {
            return Ok(Matcher::All);
        }
        if spec
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | ' ' | '|' | ','))
        {
            return Ok(Matcher::Names(
                spec.split(['|', ','])
                    .map(str::trim)
                    .filter(|name| !name.is_empty())
                    .map(str::to_owned)
                    .collect(),
            ));
        }
        regex::Regex::new(spec)
            .map(Matcher::Pattern)
            .map_err(|err| format!("not a regular expression: {err}"))
    }

    /// Whether the hook runs for `subject` (an event without one runs
    /// every hook).
    pub fn accepts(&self, subject: Option<&str>) -> bool {
        let Some(subject) = subject else {
            return true;
        };
        match self {
            Matcher::All => true,
            Matcher::Names(names) => names.iter().any(|name| name == subject),
            Matcher::Pattern(pattern) => pattern.is_match(subject),
        }
    }
}

/// What a hook is told: the common fields, and the event's own.
#[derive(Debug, Clone, PartialEq)]
pub struct HookInput {
    pub event: HookEvent,
    pub session_id: String,
    /// The session's workspace.
    pub cwd: PathBuf,
    /// The session's mode (`read_only`, `supervised`, `full`).
    pub mode: &'static str,
    /// What a hook's `matcher` is tested against: the tool's name for tool
    /// events, `source` for `SessionStart`, `reason` for `SessionEnd`,
    /// `notification_type` for `Notification`, `trigger` for `PreCompact`,
    /// `channel` for `MessageReceived` and `MessageSending`.
    pub subject: Option<String>,
    /// The event's fields (`prompt`, `tool_name`, `tool_input`, …).
    pub fields: Map<String, Value>,
    /// The run it happens in, if any: a workspace hook file that changed
    /// during a run never runs in that run. Not shown to the hook.
    pub run_id: Option<String>,
}

impl HookInput {
    pub fn new(event: HookEvent, session_id: &str, cwd: PathBuf, mode: &'static str) -> Self {
        HookInput {
            event,
            session_id: session_id.to_owned(),
            cwd,
            mode,
            subject: None,
            fields: Map::new(),
            run_id: None,
        }
    }

    /// Says which run the event happens in.
    pub fn in_run(mut self, run_id: Option<&str>) -> Self {
        self.run_id = run_id.map(str::to_owned);
        self
    }

    /// Adds a field.
    pub fn with(mut self, name: &str, value: impl Into<Value>) -> Self {
        self.fields.insert(name.to_owned(), value.into());
        self
    }

    /// Sets what the matcher is tested against (and the field it is).
    pub fn about(mut self, field: &str, subject: &str) -> Self {
        self.subject = Some(subject.to_owned());
        self.fields.insert(field.to_owned(), json!(subject));
        self
    }

    /// The JSON object the hook reads on its standard input (or as the body
    /// of its POST).
    pub fn to_json(&self) -> Value {
        let mut object = Map::new();
        object.insert("session_id".into(), json!(self.session_id));
        object.insert("cwd".into(), json!(self.cwd.to_string_lossy()));
        object.insert("hook_event_name".into(), json!(self.event.as_str()));
        object.insert("permission_mode".into(), json!(self.mode));
        for (name, value) in &self.fields {
            object.insert(name.clone(), value.clone());
        }
        Value::Object(object)
    }
}

/// A hook's permission decision for a tool call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Permission {
    Allow,
    Ask,
    Deny,
}

impl Permission {
    pub fn parse(value: &str) -> Option<Self> {
        match value {
            "allow" => Some(Permission::Allow),
            "ask" => Some(Permission::Ask),
            "deny" => Some(Permission::Deny),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Permission::Allow => "allow",
            Permission::Ask => "ask",
            Permission::Deny => "deny",
        }
    }
}

/// One hook's answer.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct HookAnswer {
    /// The hook, as the person knows it (its command or URL, shortened).
    pub hook: String,
    /// Blocked (exit 2, `decision: "block"`, `permissionDecision: "deny"`),
    /// with the reason.
    pub block: Option<String>,
    pub permission: Option<Permission>,
    /// `permissionDecisionReason` of an `allow` or `ask`.
    pub reason: Option<String>,
    /// `updatedInput`: the tool call's new input.
    pub updated_input: Option<Value>,
    /// `updatedMessage` (`MessageSending`, Pincer's own): the text to send
    /// instead.
    pub updated_message: Option<String>,
    /// `additionalContext`, or plain output where the event takes it.
    pub context: Option<String>,
    /// `systemMessage`: shown to the person.
    pub message: Option<String>,
    /// `continue: false`: the run ends, with `stopReason`.
    pub stop: Option<String>,
    /// The hook failed to run or answer (timeout, exit code, bad JSON); it
    /// decided nothing unless its `on_failure` made the failure a block.
    pub failed: Option<String>,
}

/// The answers of every hook that ran for one event.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct HookOutcome {
    pub answers: Vec<HookAnswer>,
}

impl HookOutcome {
    /// The reasons of every hook that blocked, joined; `None` if none did.
    pub fn blocked(&self) -> Option<String> {
        let reasons: Vec<&str> = self
            .answers
            .iter()
            .filter_map(|a| a.block.as_deref())
            .collect();
        (!reasons.is_empty()).then(|| reasons.join("; "))
    }

    /// The strongest permission decision: `deny` over `ask` over `allow`.
    pub fn permission(&self) -> Option<(Permission, Option<&str>)> {
        self.answers
            .iter()
            .filter_map(|a| a.permission.map(|p| (p, a.reason.as_deref())))
            .max_by_key(|(p, _)| *p)
    }

    /// The new input of the last hook (in configuration order) that gave one.
    pub fn updated_input(&self) -> Option<&Value> {
        self.answers
            .iter()
            .rev()
            .find_map(|a| a.updated_input.as_ref())
    }

    /// The text of the last hook (in configuration order) that rewrote an
    /// outbound message.
    pub fn updated_message(&self) -> Option<&str> {
        self.answers
            .iter()
            .rev()
            .find_map(|a| a.updated_message.as_deref())
    }

    /// Every hook's context, in order.
    pub fn context(&self) -> Option<String> {
        let parts: Vec<&str> = self
            .answers
            .iter()
            .filter_map(|a| a.context.as_deref())
            .filter(|c| !c.trim().is_empty())
            .collect();
        (!parts.is_empty()).then(|| parts.join("\n"))
    }

    /// What hooks asked to show the person: their messages, and why they
    /// failed.
    pub fn messages(&self) -> Vec<String> {
        let mut messages = Vec::new();
        for answer in &self.answers {
            if let Some(message) = &answer.message {
                messages.push(message.clone());
            }
            if let Some(failed) = &answer.failed {
                messages.push(format!("hook `{}` failed: {failed}", answer.hook));
            }
        }
        messages
    }

    /// The reason of the first hook that asked the run to end.
    pub fn stopped(&self) -> Option<String> {
        self.answers.iter().find_map(|a| a.stop.clone())
    }

    /// What each hook decided, for the receipt: `hook: decision`.
    pub fn record(&self) -> Vec<String> {
        self.answers
            .iter()
            .filter_map(|a| {
                let decision = if a.block.is_some() {
                    "block"
                } else if let Some(p) = a.permission {
                    p.as_str()
                } else if a.updated_input.is_some() {
                    "updated input"
                } else if a.updated_message.is_some() {
                    "updated message"
                } else if a.failed.is_some() {
                    "failed"
                } else {
                    return None;
                };
                let updated = if a.updated_input.is_some() && a.permission.is_some() {
                    ", updated input"
                } else {
                    ""
                };
                Some(format!("{}: {decision}{updated}", a.hook))
            })
            .collect()
    }
}

/// The hooks of a process, by event.
pub trait Hooks: Send + Sync {
    /// Whether any hook would run for `event` with this matcher subject:
    /// callers skip building the input when none would.
    fn listens(&self, event: HookEvent, subject: Option<&str>) -> bool;

    /// Runs every hook of the event whose matcher takes the input's subject,
    /// all at once, and returns their answers in configuration order.
    fn fire(&self, input: HookInput) -> BoxFuture<'_, HookOutcome>;

    /// The hooks the workspace at `cwd` brings, when importing is on and it
    /// has some.
    fn workspace_hooks<'a>(
        &'a self,
        _cwd: &'a std::path::Path,
    ) -> BoxFuture<'a, Option<WorkspaceHooks>> {
        Box::pin(async { None })
    }
}

/// The hooks a workspace brings (imported from other agents' files), as
/// the person is told about them.
#[derive(Debug, Clone, PartialEq)]
pub struct WorkspaceHooks {
    /// The project directory trust is given to.
    pub root: PathBuf,
    pub trusted: bool,
    /// `FILE: EVENT [MATCHER] COMMAND`, one per hook that would run.
    pub hooks: Vec<String>,
    /// Hooks found but not run by Pincer (other events, handler types),
    /// and files it could not read.
    pub left_out: Vec<String>,
    /// Under a trusted directory: the hook files that changed since the
    /// person trusted them, each with what changed; their hooks do not run
    /// until trusted again.
    pub changed: Vec<String>,
    /// The files as they are now, for trusting them as they are.
    pub files: Vec<TrustedFile>,
}

/// A project directory a person trusted, with its hook files as they were
/// when the person saw them: a file that differs now does not run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Trust {
    pub root: PathBuf,
    pub files: Vec<TrustedFile>,
}

/// The trust port's writes, queued with the journal's others
/// (`Write::Trust`).
#[derive(Debug, Clone)]
pub enum TrustWrite {
    /// Trusts (or stops trusting) the hooks of the workspaces under a
    /// project directory.
    Set {
        root: std::path::PathBuf,
        trusted: bool,
        at: super::session::Millis,
        /// The hook files as the person saw them (empty when revoking).
        files: Vec<TrustedFile>,
    },
}

/// One hook file as trusted.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct TrustedFile {
    /// Relative to the project directory (`.claude/settings.json`).
    pub path: String,
    /// SHA-256 (hex) of its content and of the scripts inside the project
    /// its hooks name; `None` when the file did not exist.
    pub digest: Option<String>,
    /// Its hooks as shown to the person (`EVENT [MATCHER] COMMAND`).
    #[serde(default)]
    pub hooks: Vec<String>,
}

/// The project directory of a workspace, which trust is given to: the
/// nearest ancestor (itself included) holding `.git`, else the workspace.
pub fn project_dir(workspace: &std::path::Path) -> PathBuf {
    workspace
        .ancestors()
        .find(|dir| dir.join(".git").exists())
        .unwrap_or(workspace)
        .to_path_buf()
}

/// No hooks at all.
pub struct NoHooks;

impl Hooks for NoHooks {
    fn listens(&self, _: HookEvent, _: Option<&str>) -> bool {
        false
    }

    fn fire(&self, _: HookInput) -> BoxFuture<'_, HookOutcome> {
        Box::pin(async { HookOutcome::default() })
    }
}

/// Fires `input` if any hook listens, else answers nothing at once.
pub async fn fire(hooks: &dyn Hooks, input: HookInput) -> HookOutcome {
    if hooks.listens(input.event, input.subject.as_deref()) {
        hooks.fire(input).await
    } else {
        HookOutcome::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answer(hook: &str) -> HookAnswer {
        HookAnswer {
            hook: hook.into(),
            ..HookAnswer::default()
        }
    }

    #[test]
    fn deny_wins_then_ask_then_allow_and_the_last_input_counts() {
        let outcome = HookOutcome {
            answers: vec![
                HookAnswer {
                    permission: Some(Permission::Allow),
                    updated_input: Some(json!({"a": 1})),
                    ..answer("one")
                },
                HookAnswer {
                    permission: Some(Permission::Ask),
                    reason: Some("look first".into()),
                    ..answer("two")
                },
                HookAnswer {
                    updated_input: Some(json!({"a": 2})),
                    ..answer("three")
                },
            ],
        };
        assert_eq!(
            outcome.permission(),
            Some((Permission::Ask, Some("look first")))
        );
        assert_eq!(outcome.updated_input(), Some(&json!({"a": 2})));
        assert_eq!(
            outcome.record(),
            [
                "one: allow, updated input",
                "two: ask",
                "three: updated input"
            ]
        );
        let mut denied = outcome.clone();
        denied.answers.push(HookAnswer {
            permission: Some(Permission::Deny),
            block: Some("no".into()),
            ..answer("four")
        });
        assert_eq!(denied.permission().map(|p| p.0), Some(Permission::Deny));
        assert_eq!(denied.blocked().as_deref(), Some("no"));
    }

    #[test]
    fn matchers_take_names_exactly_and_patterns_anywhere() {
        let all = Matcher::parse(Some("*")).unwrap();
        assert!(all.accepts(Some("shell")) && all.accepts(None));
        let names = Matcher::parse(Some("write_file|edit_file, shell")).unwrap();
        assert!(names.accepts(Some("shell")) && names.accepts(Some("edit_file")));
        assert!(!names.accepts(Some("read_file")) && !names.accepts(Some("shell2")));
        let pattern = Matcher::parse(Some("^mcp__.*")).unwrap();
        assert!(pattern.accepts(Some("mcp__git__log")) && !pattern.accepts(Some("shell")));
        let anywhere = Matcher::parse(Some("file$")).unwrap();
        assert!(anywhere.accepts(Some("read_file")));
        assert!(Matcher::parse(Some("(unclosed")).is_err());
    }

    #[test]
    fn the_input_has_the_common_fields_and_the_events_own() {
        let input = HookInput::new(HookEvent::PreToolUse, "ses_1", "/w".into(), "supervised")
            .about("tool_name", "shell")
            .with("tool_input", json!({"command": "ls"}));
        assert_eq!(
            input.to_json(),
            json!({
                "session_id": "ses_1",
                "cwd": "/w",
                "hook_event_name": "PreToolUse",
                "permission_mode": "supervised",
                "tool_name": "shell",
                "tool_input": {"command": "ls"},
            })
        );
        assert_eq!(input.subject.as_deref(), Some("shell"));
    }
}
