//! The path of every tool call: plan → `PreToolUse` hooks → policy →
//! approval → the plan's question, when it asks one → its subagent, when it
//! delegates → execute → `PostToolUse` hooks → safety pass → receipt, with
//! an event at each step.
//!
//! Read-only calls of one model turn run concurrently; every other call runs
//! alone, in the order the model asked. Every call the model asked for gets a
//! result in the history (so no tool call is ever left without its result), and
//! a receipt in the chain.
//!
//! This file holds what a run's calls share ([`ToolGate`], [`CallEnv`]) and
//! the turn's calls in groups ([`run_calls`]); the steps live beside it, one
//! concern each:
//! - `guard`: the loop guard (the same call again and again);
//! - `prepare`: a call planned, shown to the `PreToolUse` hooks, judged,
//!   maybe approved, its question asked: ready to run or settled;
//! - `decision`: how the policy's verdict and the hooks' answer combine (a
//!   hook narrows, never widens past a deny), as a pure function;
//! - `approval`: asking a person (an approval, a question) and waiting;
//! - `tool_hooks`: the hooks the gate fires (`PreToolUse`, `PostToolUse`,
//!   `Notification`) and what it keeps of their answers;
//! - `execute`: a group's ready calls run, a delegating call's subagent first;
//! - `progress`: live output as `tool_progress` events, redacted whole;
//! - `record`: each call's safety pass, receipt, result and history message.

mod approval;
mod decision;
mod execute;
mod guard;
mod prepare;
mod progress;
mod record;
mod tool_hooks;

#[cfg(test)]
mod tests;

use parking_lot::Mutex;
use std::sync::Arc;
use std::time::Duration;

use super::approval::Grant;
use super::emitter::Emitter;
use super::event::Event;
use super::hooks::{Hooks, NoHooks};
use super::pending::{PendingApprovals, PendingQuestions};
use super::policy::{Check, Gate, PolicyRules};
use super::receipt::Verdict;
use super::safety::Safety;
use super::session::{Message, Mode, ToolCall};
use super::skills::{RunSkills, SKILL_TOOL};
use super::subagent::Subagents;
use super::tool::{Plan, Tool, ToolContext, ToolKind, ToolOutput, Toolset};

pub use approval::REJECTED_BY_THE_USER;
pub use decision::{Decision, HookVerdict, PolicyVerdict, combine};
pub use guard::LoopGuard;
pub use record::redact_json;
use tool_hooks::HookNotes;

/// What every run's tool calls share: the tools and the rules around them.
pub struct ToolGate {
    pub tools: Toolset,
    pub rules: PolicyRules,
    pub safety: Arc<Safety>,
    /// How long an approval may wait; `None` waits until answered or cancelled.
    pub approval_timeout: Option<Duration>,
    /// How long a question to the person (`ask_user`) may wait; `None`
    /// waits until answered or cancelled.
    pub question_timeout: Option<Duration>,
    /// The lifecycle hooks (`core::hooks`): `PreToolUse` and `PostToolUse`
    /// run here, the others where their events happen.
    pub hooks: Arc<dyn Hooks>,
}

impl ToolGate {
    /// No tools, default rules: every tool call is answered "unknown tool".
    pub fn without_tools() -> Self {
        Self {
            tools: Toolset::default(),
            rules: PolicyRules::default(),
            safety: Arc::new(Safety::new(
                super::safety::SafetyConfig::default(),
                Vec::new(),
            )),
            approval_timeout: None,
            question_timeout: None,
            hooks: Arc::new(NoHooks),
        }
    }
}

/// Says which tools (by name) a run may use.
pub type ToolFilter = Arc<dyn Fn(&str) -> bool + Send + Sync>;

/// One run's view of the gate.
pub struct CallEnv {
    pub gate: Arc<ToolGate>,
    /// The tools of the current model turn: the gate's built-in ones plus the
    /// session's extra tools as they stood when the turn began.
    pub tools: Toolset,
    pub mode: Mode,
    /// The gate's safety pass, with the session's own secrets added.
    pub safety: Arc<Safety>,
    pub ctx: ToolContext,
    /// The session's remembered answers; shared with the runtime, which persists them.
    pub grants: Arc<Mutex<Vec<Grant>>>,
    pub approvals: Arc<PendingApprovals>,
    pub questions: Arc<PendingQuestions>,
    /// Sessions besides the run's own whose faces see and answer its
    /// approvals and questions: for a subagent's run, the session it works
    /// for.
    pub answerers: Vec<super::ids::SessionId>,
    /// What the run's subagents cost so far: part of the run's spend.
    pub delegated: Arc<Mutex<Option<super::usage::Cost>>>,
    /// The least of the run's budgets left before this turn's calls (set
    /// by the agent loop): the most a subagent started now may spend.
    pub budget_left: Arc<Mutex<Option<f64>>>,
    /// Keeps only the tools a subagent may use (its task's list, never
    /// `delegate`); `None`: every tool.
    pub only: Option<ToolFilter>,
    /// Runs `delegate` calls; `None` in a subagent's own runs (no nesting).
    pub subagents: Option<Arc<dyn Subagents>>,
    /// Counts the run's identical calls (`LoopGuard`).
    pub guard: Arc<LoopGuard>,
    /// Set when a hook answered `continue: false`: the run ends after the
    /// current calls, with this reason.
    pub ended: Arc<Mutex<Option<String>>>,
}

impl CallEnv {
    /// `tools` less what this run may not use; the `skill` tool only when
    /// the session has skills to offer, its `name` one of theirs.
    pub fn restrict(&self, tools: Toolset) -> Toolset {
        let tools = match &self.only {
            Some(keep) => tools.only(|name| keep(name)),
            None => tools,
        };
        match self
            .ctx
            .skills
            .as_ref()
            .filter(|skills| skills.any_offered())
        {
            Some(skills) => tools.respec(SKILL_TOOL, |spec| skill_spec(spec, skills)),
            None => tools.only(|name| name != SKILL_TOOL),
        }
    }

    /// Marks the run to end after the current calls (the first reason
    /// stays).
    pub fn end_run(&self, reason: String) {
        self.ended.lock().get_or_insert(reason);
    }

    /// Why a hook ended the run, if one did.
    pub fn ended_by_hook(&self) -> Option<String> {
        self.ended.lock().clone()
    }

    /// Whether a call of `tool` with a plan that touches no path would run
    /// without asking anyone (the mode, the rules and the session's grants
    /// allow it).
    pub fn runs_unasked(&self, tool: &dyn Tool) -> bool {
        let plan = Plan::default();
        matches!(
            self.check(&tool.spec().name, tool.kind(), &plan),
            Gate::Allow { .. }
        )
    }

    /// The policy's verdict on a planned call of `tool` (a shell line runs
    /// in the first directory it reads, else the workspace).
    fn check(&self, tool: &str, kind: ToolKind, plan: &Plan) -> Gate {
        let grants = self.grants.lock();
        self.gate.rules.check(&Check {
            mode: self.mode,
            tool,
            kind,
            plan,
            grants: &grants,
            boundary: &self.ctx.boundary,
            cwd: plan.reads.first().unwrap_or(&self.ctx.workspace),
        })
    }
}

/// The `skill` tool's spec for a session: its `name` argument one of the
/// skills the model may activate (an enum, so no other name is offered).
pub fn skill_spec(spec: &super::tool::ToolSpec, skills: &RunSkills) -> super::tool::ToolSpec {
    let names: Vec<serde_json::Value> = skills
        .offered()
        .map(|skill| serde_json::Value::String(skill.name.clone()))
        .collect();
    let mut spec = spec.clone();
    if let Some(name) = spec
        .parameters
        .get_mut("properties")
        .and_then(|properties| properties.get_mut("name"))
        .and_then(serde_json::Value::as_object_mut)
    {
        name.insert("enum".to_owned(), serde_json::Value::Array(names));
    }
    spec
}

/// How a call got through (or not) before running.
enum Prepared {
    /// Passed the gate: run it, with these arguments (the model's, or a
    /// `PreToolUse` hook's `updatedInput`).
    Ready {
        tool: Arc<dyn Tool>,
        plan: Box<Plan>,
        arguments: serde_json::Value,
        verdict: Verdict,
        hooks: HookNotes,
    },
    /// Settled without running (refused, rejected, invalid).
    Settled {
        verdict: Verdict,
        message: String,
        hooks: HookNotes,
    },
}

impl Prepared {
    fn settled(verdict: Verdict, message: impl Into<String>) -> Self {
        Prepared::Settled {
            verdict,
            message: message.into(),
            hooks: HookNotes::default(),
        }
    }
}

/// The result of one call, before the safety pass.
struct Finished {
    verdict: Verdict,
    result: Result<ToolOutput, String>,
    hooks: HookNotes,
}

impl Finished {
    /// A call that did not run because the run was cancelled first.
    fn cancelled() -> Self {
        Finished {
            verdict: Verdict::Cancelled,
            result: Err("the run was cancelled before this call ran".into()),
            hooks: HookNotes::default(),
        }
    }
}

/// Why the calls stopped early.
pub enum Interrupted {
    Cancelled,
}

/// Runs a model turn's tool calls. On cancel, calls that did not run are
/// recorded as cancelled (result and receipt) before returning.
pub async fn run_calls(
    env: &CallEnv,
    emitter: &mut Emitter,
    history: &mut Vec<Message>,
    calls: &[ToolCall],
) -> Result<(), Interrupted> {
    env.guard.start_turn();
    let mut index = 0;
    while index < calls.len() {
        if env.ctx.cancel.is_cancelled() {
            record::settle_cancelled(env, emitter, history, &calls[index..]);
            return Err(Interrupted::Cancelled);
        }
        let end = group_end(env, calls, index);
        let Some(prepared) = prepare_group(env, emitter, &calls[index..end]).await else {
            // Cancelled while waiting for an approval: what was ready does not run.
            record::settle_cancelled(env, emitter, history, &calls[index..]);
            return Err(Interrupted::Cancelled);
        };
        let group = &calls[index..end];
        let finished = execute::run_group(env, emitter, group, prepared).await;
        for (call, done) in group.iter().zip(finished) {
            record::settle(env, emitter, history, call, done);
        }
        index = end;
    }
    if env.ctx.cancel.is_cancelled() {
        return Err(Interrupted::Cancelled);
    }
    Ok(())
}

/// Where the group of calls beginning at `start` ends: consecutive
/// read-only calls form one group that runs concurrently; any other call
/// is a group of its own.
fn group_end(env: &CallEnv, calls: &[ToolCall], start: usize) -> usize {
    let mut end = start + 1;
    if kind_of(env, &calls[start]).is_read_only() {
        while end < calls.len() && kind_of(env, &calls[end]).is_read_only() {
            end += 1;
        }
    }
    end
}

/// Takes a group's calls through the gate one by one, in order, and says
/// which of them start; `None` when the run was cancelled while one waited.
async fn prepare_group(
    env: &CallEnv,
    emitter: &mut Emitter,
    group: &[ToolCall],
) -> Option<Vec<Prepared>> {
    let mut prepared = Vec::with_capacity(group.len());
    for call in group {
        prepared.push(prepare::prepare(env, emitter, call).await?);
    }
    for (call, p) in group.iter().zip(&prepared) {
        if matches!(p, Prepared::Ready { .. }) {
            emitter.emit(Event::ToolStarted {
                id: call.id.clone(),
            });
        }
    }
    Some(prepared)
}

/// The kind a call will have; an unknown tool's is `Other` (its call is
/// answered "unknown tool" in a group of its own).
pub fn kind_of(env: &CallEnv, call: &ToolCall) -> ToolKind {
    env.tools
        .get(&call.name)
        .map_or(ToolKind::Other, |tool| tool.kind())
}
