//! The path of every tool call: plan → policy → approval → execute → safety
//! pass → receipt, with an event at each step.
//!
//! Read-only calls of one model turn run concurrently; every other call runs
//! alone, in the order the model asked. Every call the model asked for gets a
//! result in the history (so no tool call is ever left without its result), and
//! a receipt in the chain.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::future::join_all;

use super::approval::{ApprovalDecision, Grant};
use super::emitter::Emitter;
use super::event::{Event, RunState};
use super::hooks::{self, HookEvent, HookInput, HookOutcome, Hooks, NoHooks, Permission};
use super::pending::{PendingApprovals, PendingQuestions};
use super::policy::{Check, Gate, PolicyRules, grants_for};
use super::question::{Question, QuestionAnswer, QuestionOutcome};
use super::receipt::{ReceiptBody, Verdict, json_hash, sha256_hex};
use super::safety::Safety;
use super::session::{Message, Mode, ToolCall, now_millis};
use super::subagent::{ParentCall, Relay, Subagents};
use super::tool::{
    FileDiff, Plan, Progress, ProgressUpdate, Tool, ToolContext, ToolError, ToolKind, ToolOutput,
    Toolset,
};

/// What the model reads when the person rejected a call (faces show the
/// person something of their own instead).
pub const REJECTED_BY_THE_USER: &str =
    "rejected by the user: do not retry this call; ask the user what to do instead";

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
    /// `tools` less what this run may not use.
    pub fn restrict(&self, tools: Toolset) -> Toolset {
        match &self.only {
            Some(keep) => tools.only(|name| keep(name)),
            None => tools,
        }
    }

    /// Marks the run to end after the current calls (the first reason
    /// stays).
    pub fn end_run(&self, reason: String) {
        lock(&self.ended).get_or_insert(reason);
    }

    /// Why a hook ended the run, if one did.
    pub fn ended_by_hook(&self) -> Option<String> {
        lock(&self.ended).clone()
    }

    /// Whether a call of `tool` with a plan that touches no path would run
    /// without asking anyone (the mode, the rules and the session's grants
    /// allow it).
    pub fn runs_unasked(&self, tool: &dyn super::tool::Tool) -> bool {
        let grants = lock(&self.grants);
        let plan = super::tool::Plan::default();
        matches!(
            self.gate.rules.check(&Check {
                mode: self.mode,
                tool: &tool.spec().name,
                kind: tool.kind(),
                plan: &plan,
                grants: &grants,
                boundary: &self.ctx.boundary,
                cwd: &self.ctx.workspace,
            }),
            Gate::Allow { .. }
        )
    }
}

/// The loop guard: the same tool with the same arguments called `limit`
/// times in one run is answered with a note instead of running again; a call
/// past that marks the run to end (`LoopGuard::gave_up`).
#[derive(Debug, Default)]
pub struct LoopGuard {
    /// 0: off.
    limit: u32,
    seen: Mutex<std::collections::HashMap<String, u32>>,
    /// Calls of the current turn: repeats within one turn count once (a
    /// model asking for the same read twice at once is not looping).
    this_turn: Mutex<std::collections::HashSet<String>>,
    /// The call that went on past the note, as `tool` and how many times.
    gave_up: Mutex<Option<(String, u32)>>,
}

impl LoopGuard {
    pub fn new(limit: u32) -> Self {
        Self {
            limit,
            ..Self::default()
        }
    }

    /// A new model turn's calls begin.
    fn start_turn(&self) {
        lock(&self.this_turn).clear();
    }

    /// Counts `call`; `Some(note)` when it must not run.
    fn check(&self, call: &ToolCall) -> Option<String> {
        if self.limit == 0 {
            return None;
        }
        // `serde_json` objects keep their keys sorted: equal arguments, equal text.
        let key = format!("{}\u{0}{}", call.name, call.arguments);
        if !lock(&self.this_turn).insert(key.clone()) {
            return None;
        }
        let count = {
            let mut seen = lock(&self.seen);
            let count = seen.entry(key).or_insert(0);
            *count += 1;
            *count
        };
        if count < self.limit {
            return None;
        }
        if count > self.limit {
            *lock(&self.gave_up) = Some((call.name.clone(), count));
        }
        Some(format!(
            "not run: `{}` was called with these same arguments {count} times in this run, and \
             the answer will not change. Use what you already have, try another way, or tell the \
             person what is in the way; calling it again ends the run",
            call.name
        ))
    }

    /// The reason to end the run, once a call went on past the note.
    pub fn gave_up(&self) -> Option<String> {
        lock(&self.gave_up).as_ref().map(|(tool, count)| {
            format!(
                "stopped by the loop guard: the model called `{tool}` with the same arguments {count} times in one run, and again after it was told the answer would not change (`loop_guard = {}` in the config)",
                self.limit
            )
        })
    }
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

/// What the hooks of a call said, for its result, its receipt and the
/// person.
#[derive(Debug, Default)]
struct HookNotes {
    /// `hook: decision`, for the receipt.
    record: Vec<String>,
    /// Added to the result the model reads: hooks' context and feedback.
    context: Vec<String>,
    /// Shown to the person.
    messages: Vec<String>,
}

impl HookNotes {
    fn add(&mut self, event: HookEvent, outcome: &HookOutcome) {
        self.record.extend(
            outcome
                .record()
                .into_iter()
                .map(|r| format!("{} {r}", event.as_str())),
        );
        self.messages.extend(outcome.messages());
        if let Some(context) = outcome.context() {
            self.context.push(context);
        }
    }
}

/// The result of one call, before the safety pass.
struct Finished {
    verdict: Verdict,
    result: Result<ToolOutput, String>,
    hooks: HookNotes,
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
            settle_cancelled(env, emitter, history, &calls[index..]);
            return Err(Interrupted::Cancelled);
        }
        // Consecutive read-only calls form one group that runs concurrently.
        let mut end = index + 1;
        if kind_of(env, &calls[index]).is_read_only() {
            while end < calls.len() && kind_of(env, &calls[end]).is_read_only() {
                end += 1;
            }
        }
        let group = &calls[index..end];
        let mut prepared = Vec::with_capacity(group.len());
        for (offset, call) in group.iter().enumerate() {
            match prepare(env, emitter, call).await {
                Some(p) => prepared.push(p),
                None => {
                    // Cancelled while waiting for an approval: what was ready does not run.
                    let done: Vec<&ToolCall> = group[..offset].iter().collect();
                    for call in done {
                        settle(
                            env,
                            emitter,
                            history,
                            call,
                            Finished {
                                verdict: Verdict::Cancelled,
                                result: Err("the run was cancelled before this call ran".into()),
                                hooks: HookNotes::default(),
                            },
                        );
                    }
                    settle_cancelled(env, emitter, history, &calls[index + offset..]);
                    return Err(Interrupted::Cancelled);
                }
            }
        }
        for (call, p) in group.iter().zip(&prepared) {
            if matches!(p, Prepared::Ready { .. }) {
                emitter.emit(Event::ToolStarted {
                    id: call.id.clone(),
                });
            }
        }
        let (progress_tx, progress_rx) = tokio::sync::mpsc::unbounded_channel();
        let (relay_tx, relay_rx) = tokio::sync::mpsc::unbounded_channel();
        let runs = group.iter().zip(prepared).map(|(call, p)| {
            let progress = Progress::new(call.id.clone(), progress_tx.clone());
            let relay = relay_tx.clone();
            async move {
                match p {
                    Prepared::Ready {
                        tool,
                        mut plan,
                        arguments,
                        verdict,
                        mut hooks,
                    } => {
                        let mut ctx = env.ctx.clone();
                        ctx.progress = progress;
                        ctx.call_id = Some(call.id.clone());
                        let result = match delegate(env, call, &mut plan, &ctx, relay).await {
                            Ok(()) => tool
                                .execute(&arguments, &plan, &ctx)
                                .await
                                .map_err(|err| err.to_string()),
                            Err(err) => Err(err.to_string()),
                        };
                        after_call(env, call, &arguments, &result, &mut hooks).await;
                        Finished {
                            verdict,
                            result,
                            hooks,
                        }
                    }
                    Prepared::Settled {
                        verdict,
                        message,
                        hooks,
                    } => Finished {
                        verdict,
                        result: Err(message),
                        hooks,
                    },
                }
            }
        });
        let runs: Vec<_> = runs.collect();
        drop(progress_tx);
        drop(relay_tx);
        let finished = with_progress(env, emitter, join_all(runs), progress_rx, relay_rx).await;
        for (call, done) in group.iter().zip(finished) {
            settle(env, emitter, history, call, done);
        }
        index = end;
    }
    if env.ctx.cancel.is_cancelled() {
        return Err(Interrupted::Cancelled);
    }
    Ok(())
}

/// How often a running call's output becomes an event, at most.
const PROGRESS_INTERVAL: Duration = Duration::from_millis(100);

/// Awaits `calls` while turning their progress reports into `tool_progress`
/// events: output batched per call at most every [`PROGRESS_INTERVAL`] and
/// passed through the safety pass; a terminal at once.
async fn with_progress<T>(
    env: &CallEnv,
    emitter: &mut Emitter,
    calls: impl std::future::Future<Output = T>,
    mut reports: tokio::sync::mpsc::UnboundedReceiver<(String, ProgressUpdate)>,
    mut relayed: tokio::sync::mpsc::UnboundedReceiver<Event>,
) -> T {
    // Only what `shown_now` lets go is redacted and shown; the rest waits
    // for more output, or for the calls' end (`done`).
    fn flush(
        env: &CallEnv,
        emitter: &mut Emitter,
        pending: &mut Vec<(String, String)>,
        done: bool,
    ) {
        for (id, output) in pending.iter_mut() {
            let cut = if done {
                output.len()
            } else {
                shown_now(output)
            };
            if cut == 0 {
                continue;
            }
            let rest = output.split_off(cut);
            let ready = std::mem::replace(output, rest);
            emitter.emit(Event::ToolProgress {
                id: id.clone(),
                output: Some(env.safety.redact(&ready).0),
                terminal_id: None,
            });
        }
        pending.retain(|(_, output)| !output.is_empty());
    }
    let mut pending: Vec<(String, String)> = Vec::new();
    let mut tick = tokio::time::interval(PROGRESS_INTERVAL);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    tokio::pin!(calls);
    let done = loop {
        tokio::select! {
            done = &mut calls => break done,
            Some((id, update)) = reports.recv() => match update {
                ProgressUpdate::Output(text) => {
                    match pending.iter_mut().find(|(call, _)| *call == id) {
                        Some((_, buffered)) => buffered.push_str(&text),
                        None => pending.push((id, text)),
                    }
                }
                ProgressUpdate::Terminal(terminal_id) => {
                    flush(env, emitter, &mut pending, false);
                    emitter.emit(Event::ToolProgress {
                        id,
                        output: None,
                        terminal_id: Some(terminal_id),
                    });
                }
            },
            Some(event) = relayed.recv() => {
                flush(env, emitter, &mut pending, false);
                emitter.emit(event);
            }
            _ = tick.tick() => flush(env, emitter, &mut pending, false),
        }
    };
    // Reports sent just before the calls ended.
    while let Ok((id, update)) = reports.try_recv() {
        match update {
            ProgressUpdate::Output(text) => {
                match pending.iter_mut().find(|(call, _)| *call == id) {
                    Some((_, buffered)) => buffered.push_str(&text),
                    None => pending.push((id, text)),
                }
            }
            ProgressUpdate::Terminal(terminal_id) => {
                flush(env, emitter, &mut pending, true);
                emitter.emit(Event::ToolProgress {
                    id,
                    output: None,
                    terminal_id: Some(terminal_id),
                });
            }
        }
    }
    flush(env, emitter, &mut pending, true);
    while let Ok(event) = relayed.try_recv() {
        emitter.emit(event);
    }
    done
}

/// How much of a call's buffered live output may be redacted and shown now:
/// whole lines only, and nothing from a private key block's BEGIN line on
/// until its END line came. The safety pass finds a secret only whole: a
/// key cut between two batches would leave its second half unredacted.
fn shown_now(buffered: &str) -> usize {
    let mut cut = buffered.rfind('\n').map_or(0, |i| i + 1);
    if let Some(begin) = buffered[..cut].rfind("-----BEGIN")
        && buffered[begin..cut].contains("PRIVATE KEY")
        && !buffered[begin..].contains("-----END")
    {
        cut = buffered[..begin].rfind('\n').map_or(0, |i| i + 1);
    }
    cut
}

/// Runs the subagent of a call whose plan delegates a task (`delegate`),
/// and puts how it ended in the plan for the call to word.
async fn delegate(
    env: &CallEnv,
    call: &ToolCall,
    plan: &mut Plan,
    ctx: &ToolContext,
    relay: Relay,
) -> Result<(), ToolError> {
    let Some(task) = plan.delegation.clone() else {
        return Ok(());
    };
    let Some(subagents) = &env.subagents else {
        return Err(ToolError::Failed(
            "a subagent cannot delegate further; do the task yourself".into(),
        ));
    };
    let Some(run) = ctx.run_id.clone() else {
        return Err(ToolError::Failed("only a run can delegate".into()));
    };
    let parent = ParentCall {
        session: ctx.session_id.clone(),
        run,
        call_id: call.id.clone(),
        mode: env.mode,
        tools: env
            .gate
            .tools
            .specs()
            .iter()
            .map(|s| s.name.clone())
            .collect(),
        budget_left: *lock(&env.budget_left),
    };
    let outcome = subagents
        .run(
            parent,
            task,
            relay,
            ctx.progress.clone(),
            ctx.cancel.clone(),
        )
        .await?;
    if let Some(cost) = &outcome.cost {
        let mut delegated = lock(&env.delegated);
        *delegated = super::usage::Cost::sum(delegated.take(), Some(cost));
    }
    plan.delegated = Some(outcome);
    Ok(())
}

/// The kind a call will have; unknown tools count as read-only (they run nothing).
pub fn kind_of(env: &CallEnv, call: &ToolCall) -> ToolKind {
    env.tools
        .get(&call.name)
        .map_or(ToolKind::Other, |tool| tool.kind())
}

/// Takes a call through the gate (`prepare_call`); a call that passes and
/// asks the person a question (`ask_user`) then asks it, and runs with the
/// answer. `None` when the run was cancelled while waiting.
async fn prepare(env: &CallEnv, emitter: &mut Emitter, call: &ToolCall) -> Option<Prepared> {
    match prepare_call(env, emitter, call).await? {
        Prepared::Ready {
            tool,
            mut plan,
            arguments,
            verdict,
            hooks,
        } => {
            if let Some(question) = plan.question.clone() {
                let answer = ask_question(env, emitter, call, &question).await;
                if answer.outcome == QuestionOutcome::Cancelled {
                    return None;
                }
                plan.answer = Some(answer);
            }
            Some(Prepared::Ready {
                tool,
                plan,
                arguments,
                verdict,
                hooks,
            })
        }
        settled => Some(settled),
    }
}

/// Plans a call, asks the `PreToolUse` hooks, and takes it through the
/// policy and, when asked for, an approval. `None` when the run was
/// cancelled while waiting.
async fn prepare_call(env: &CallEnv, emitter: &mut Emitter, call: &ToolCall) -> Option<Prepared> {
    if let Some(note) = env.guard.check(call) {
        return Some(Prepared::settled(Verdict::Denied, note));
    }
    let Some(tool) = env.tools.get(&call.name).cloned() else {
        let names: Vec<String> = env.tools.specs().iter().map(|s| s.name.clone()).collect();
        return Some(Prepared::settled(
            Verdict::Invalid,
            format!(
                "unknown tool `{}`; available tools: {}",
                call.name,
                names.join(", ")
            ),
        ));
    };
    let mut arguments = call.arguments.clone();
    let mut plan = match plan_call(env, &*tool, &arguments).await? {
        Ok(plan) => plan,
        Err(settled) => return Some(settled),
    };
    // The hooks see the planned call before the policy does.
    let mut hooks = HookNotes::default();
    let input = HookInput::new(
        HookEvent::PreToolUse,
        emitter.session_id().as_str(),
        env.ctx.workspace.clone(),
        env.mode.as_str(),
    )
    .in_run(Some(emitter.run_id().as_str()))
    .about("tool_name", &call.name)
    .with("tool_input", arguments.clone())
    .with("tool_use_id", call.id.clone());
    let pre = tokio::select! {
        biased;
        _ = env.ctx.cancel.cancelled() => return None,
        pre = hooks::fire(&*env.gate.hooks, input) => pre,
    };
    hooks.add(HookEvent::PreToolUse, &pre);
    if let Some(reason) = pre.stopped() {
        env.end_run(reason.clone());
        return Some(Prepared::Settled {
            verdict: Verdict::Denied,
            message: format!("not run: a hook ended the run: {reason}"),
            hooks,
        });
    }
    if let Some(reason) = pre.blocked() {
        return Some(Prepared::Settled {
            verdict: Verdict::Denied,
            message: format!("denied by a hook: {reason}"),
            hooks,
        });
    }
    if let Some(updated) = pre.updated_input() {
        // A new input is planned and checked as the model's was.
        arguments = updated.clone();
        plan = match plan_call(env, &*tool, &arguments).await? {
            Ok(plan) => plan,
            Err(Prepared::Settled {
                verdict, message, ..
            }) => {
                return Some(Prepared::Settled {
                    verdict,
                    message: format!("the input a hook gave is refused: {message}"),
                    hooks,
                });
            }
            Err(ready) => return Some(ready),
        };
    }
    let redacted_title = env.safety.redact(&plan.title).0;
    emitter.emit(Event::ToolPlanned {
        id: call.id.clone(),
        title: redacted_title.clone(),
        locations: plan.locations(),
        command: plan.command.as_ref().map(|c| env.safety.redact(c).0),
        diffs: plan.diffs.clone(),
    });
    let gate = {
        let grants = lock(&env.grants);
        env.gate.rules.check(&Check {
            mode: env.mode,
            tool: &call.name,
            kind: tool.kind(),
            plan: &plan,
            grants: &grants,
            boundary: &env.ctx.boundary,
            cwd: plan.reads.first().unwrap_or(&env.ctx.workspace),
        })
    };
    // A hook's `ask` asks where the policy would allow; its `allow` skips
    // an approval the policy would ask for, but not one only a person may
    // give (a protected path); neither overrides a deny.
    let gate = match (gate, pre.permission()) {
        (Gate::Allow { .. }, Some((Permission::Ask, reason))) => Gate::Ask {
            reason: format!(
                "a hook asks for approval{}",
                reason.map(|r| format!(": {r}")).unwrap_or_default()
            ),
        },
        (Gate::Ask { .. }, Some((Permission::Allow, _)))
            if crate::core::policy::needs_person(&plan, &env.ctx.boundary).is_none() =>
        {
            Gate::Allow {
                remembered: false,
                reason: "allowed by a hook".into(),
            }
        }
        (gate, _) => gate,
    };
    match gate {
        Gate::Allow { remembered, .. } => Some(Prepared::Ready {
            tool,
            plan: Box::new(plan),
            arguments,
            verdict: if remembered {
                Verdict::Approved
            } else {
                Verdict::Allowed
            },
            hooks,
        }),
        Gate::Deny { reason, remembered } => Some(Prepared::Settled {
            verdict: if remembered {
                Verdict::Rejected
            } else {
                Verdict::Denied
            },
            message: if remembered {
                format!("rejected: {reason}")
            } else {
                format!("denied by policy: {reason}")
            },
            hooks,
        }),
        Gate::Ask { reason } => {
            let decision = ask(
                env,
                emitter,
                call,
                &arguments,
                &*tool,
                &plan,
                redacted_title,
                reason,
            )
            .await;
            let refused = |message: String| {
                Some(Prepared::Settled {
                    verdict: Verdict::Rejected,
                    message,
                    hooks: HookNotes::default(),
                })
            };
            let refusal = match decision {
                ApprovalDecision::Cancelled => return None,
                ApprovalDecision::AllowOnce | ApprovalDecision::AllowAlways => {
                    return Some(Prepared::Ready {
                        tool,
                        plan: Box::new(plan),
                        arguments,
                        verdict: Verdict::Approved,
                        hooks,
                    });
                }
                ApprovalDecision::RejectOnce | ApprovalDecision::RejectAlways => {
                    refused(REJECTED_BY_THE_USER.to_owned())
                }
                ApprovalDecision::Unattended => refused(
                    "refused: this call needs a person's approval and nobody is present \
                     to give it (a non-interactive run); do not retry it; tell the user \
                     which call needs approval"
                        .to_owned(),
                ),
                ApprovalDecision::TimedOut => refused(format!(
                    "rejected: nobody approved the call within {} s",
                    env.gate.approval_timeout.map_or(0, |t| t.as_secs())
                )),
            };
            refusal.map(|settled| match settled {
                Prepared::Settled {
                    verdict, message, ..
                } => Prepared::Settled {
                    verdict,
                    message,
                    hooks,
                },
                ready => ready,
            })
        }
    }
}

/// Plans a call: the plan, or how the call is settled without running;
/// `None` when the run was cancelled.
async fn plan_call(
    env: &CallEnv,
    tool: &dyn Tool,
    arguments: &serde_json::Value,
) -> Option<Result<Plan, Prepared>> {
    match tool.plan(arguments, &env.ctx).await {
        Ok(plan) => Some(Ok(plan)),
        Err(ToolError::Path(err)) => Some(Err(Prepared::settled(
            Verdict::Denied,
            format!("denied by policy: {err}"),
        ))),
        Err(ToolError::Cancelled) => None,
        Err(err) => Some(Err(Prepared::settled(Verdict::Invalid, err.to_string()))),
    }
}

/// Runs the `PostToolUse` hooks of a call that ran: their feedback and
/// context join what the model reads of the result.
async fn after_call(
    env: &CallEnv,
    call: &ToolCall,
    arguments: &serde_json::Value,
    result: &Result<ToolOutput, String>,
    notes: &mut HookNotes,
) {
    if !env
        .gate
        .hooks
        .listens(HookEvent::PostToolUse, Some(&call.name))
    {
        return;
    }
    let response = match result {
        Ok(output) => serde_json::json!({"output": output.text, "is_error": false}),
        Err(message) => serde_json::json!({"output": message, "is_error": true}),
    };
    let input = HookInput::new(
        HookEvent::PostToolUse,
        env.ctx.session_id.as_str(),
        env.ctx.workspace.clone(),
        env.mode.as_str(),
    )
    .in_run(env.ctx.run_id.as_ref().map(|run| run.as_str()))
    .about("tool_name", &call.name)
    .with("tool_input", arguments.clone())
    .with("tool_response", response)
    .with("tool_use_id", call.id.clone());
    let post = tokio::select! {
        biased;
        _ = env.ctx.cancel.cancelled() => return,
        post = env.gate.hooks.fire(input) => post,
    };
    notes.add(HookEvent::PostToolUse, &post);
    if let Some(reason) = post.blocked() {
        notes
            .context
            .push(format!("A hook says about this result: {reason}"));
    }
    if let Some(reason) = post.stopped() {
        env.end_run(reason);
    }
}

/// Asks the person a question and waits in state `waiting` for the first
/// answer, the timeout, or a cancel.
async fn ask_question(
    env: &CallEnv,
    emitter: &mut Emitter,
    call: &ToolCall,
    question: &Question,
) -> QuestionAnswer {
    let question_id = format!("qst_{}", uuid::Uuid::now_v7().simple());
    let answer = env
        .questions
        .open_for(answerers(env, emitter), &question_id);
    emitter.set_state(RunState::Waiting);
    let text = env.safety.redact(&question.text).0;
    let options: Vec<String> = question
        .options
        .iter()
        .map(|o| env.safety.redact(o).0)
        .collect();
    notify(
        env,
        emitter.session_id(),
        "elicitation_dialog",
        format!("Pincer has a question: {text}"),
        "Question",
    );
    let request = emitter.emit(Event::QuestionAsked {
        question_id: question_id.clone(),
        call_id: call.id.clone(),
        question: text,
        options,
    });
    env.questions.describe(&question_id, request);
    let timeout = async {
        match env.gate.question_timeout {
            Some(limit) => tokio::time::sleep(limit).await,
            None => std::future::pending().await,
        }
    };
    let answer = tokio::select! {
        biased;
        _ = env.ctx.cancel.cancelled() => QuestionAnswer::without(QuestionOutcome::Cancelled),
        answer = answer => answer.unwrap_or(QuestionAnswer::without(QuestionOutcome::Cancelled)),
        _ = timeout => QuestionAnswer::without(QuestionOutcome::TimedOut),
    };
    env.questions.close(&question_id);
    // What a person typed may hold a secret: the tape (and every face and
    // log that reads it) gets it redacted, as the model does its result.
    emitter.emit(Event::QuestionAnswered {
        question_id,
        call_id: call.id.clone(),
        outcome: answer.outcome,
        answer: answer
            .answer
            .as_deref()
            .map(|text| env.safety.redact(text).0),
    });
    if answer.outcome != QuestionOutcome::Cancelled {
        emitter.set_state(RunState::Running);
    }
    answer
}

/// The sessions whose faces may answer the run's approvals and questions.
fn answerers(env: &CallEnv, emitter: &Emitter) -> Vec<super::ids::SessionId> {
    std::iter::once(emitter.session_id().clone())
        .chain(env.answerers.iter().cloned())
        .collect()
}

/// Tells the `Notification` hooks that a person is needed; nothing waits
/// for them.
fn notify(
    env: &CallEnv,
    session: &super::ids::SessionId,
    kind: &str,
    message: String,
    title: &str,
) {
    let hooks = env.gate.hooks.clone();
    if !hooks.listens(HookEvent::Notification, Some(kind)) {
        return;
    }
    let input = HookInput::new(
        HookEvent::Notification,
        session.as_str(),
        env.ctx.workspace.clone(),
        env.mode.as_str(),
    )
    .about("notification_type", kind)
    .with("message", message)
    .with("title", title);
    tokio::spawn(async move {
        hooks.fire(input).await;
    });
}

/// Asks for an approval and waits in state `waiting` for the first answer, the
/// timeout, or a cancel. Remembers `*_always` answers.
#[allow(clippy::too_many_arguments)]
async fn ask(
    env: &CallEnv,
    emitter: &mut Emitter,
    call: &ToolCall,
    arguments: &serde_json::Value,
    tool: &dyn Tool,
    plan: &Plan,
    title: String,
    reason: String,
) -> ApprovalDecision {
    let approval_id = format!("apr_{}", uuid::Uuid::now_v7().simple());
    let answer = env
        .approvals
        .open_for(answerers(env, emitter), &approval_id);
    emitter.set_state(RunState::Waiting);
    notify(
        env,
        emitter.session_id(),
        "permission_prompt",
        format!(
            "Pincer needs your approval: {}",
            env.safety.redact(&title).0
        ),
        "Approval needed",
    );
    let request = emitter.emit(Event::ApprovalRequested {
        approval_id: approval_id.clone(),
        call_id: call.id.clone(),
        tool: call.name.clone(),
        kind: tool.kind(),
        title,
        reason,
        arguments: redact_json(&env.safety, arguments),
        locations: plan.locations(),
        command: plan.command.as_ref().map(|c| env.safety.redact(c).0),
        diffs: plan.diffs.clone(),
    });
    env.approvals.describe(&approval_id, request);
    let timeout = async {
        match env.gate.approval_timeout {
            Some(limit) => tokio::time::sleep(limit).await,
            None => std::future::pending().await,
        }
    };
    let decision = tokio::select! {
        biased;
        _ = env.ctx.cancel.cancelled() => ApprovalDecision::Cancelled,
        answer = answer => answer.unwrap_or(ApprovalDecision::Cancelled),
        _ = timeout => ApprovalDecision::TimedOut,
    };
    env.approvals.close(&approval_id);
    emitter.emit(Event::ApprovalDecided {
        approval_id,
        call_id: call.id.clone(),
        decision,
    });
    if decision != ApprovalDecision::Cancelled {
        emitter.set_state(RunState::Running);
    }
    let remember = match decision {
        ApprovalDecision::AllowAlways => Some(true),
        ApprovalDecision::RejectAlways => Some(false),
        _ => None,
    };
    if let Some(allow) = remember {
        let new = grants_for(&call.name, plan, allow);
        let mut grants = lock(&env.grants);
        for grant in new {
            grants.retain(|g| !(g.tool == grant.tool && g.scope == grant.scope));
            emitter.remember(grant.clone());
            grants.push(grant);
        }
    }
    decision
}

/// Passes a finished call's output through the safety pass, records its
/// receipt, its result event and its history message.
fn settle(
    env: &CallEnv,
    emitter: &mut Emitter,
    history: &mut Vec<Message>,
    call: &ToolCall,
    done: Finished,
) {
    let (raw, is_error, diffs, plan) = match done.result {
        Ok(output) => (output.text, false, output.diffs, output.plan),
        Err(message) => (message, true, Vec::<FileDiff>::new(), None),
    };
    let mut checked = env.safety.check(&raw);
    // What hooks add passes the same pass.
    if !done.hooks.context.is_empty() {
        let added = env.safety.check(&done.hooks.context.join("\n"));
        checked.text = format!(
            "{}\n\n<hook_context>\n{}\n</hook_context>",
            checked.text, added.text
        );
        checked.redactions.extend(added.redactions);
        checked.injections.extend(added.injections);
    }
    for message in &done.hooks.messages {
        emitter.emit(Event::Notice {
            message: env.safety.redact(message).0,
        });
    }
    let mut notes: Vec<String> = checked
        .redactions
        .iter()
        .map(|r| format!("redacted {} secret(s) of kind {}", r.count, r.kind))
        .collect();
    if checked.truncated_bytes > 0 {
        notes.push(format!("truncated {} bytes", checked.truncated_bytes));
    }
    if !checked.injections.is_empty() {
        notes.push(format!(
            "possible prompt injection: {}",
            checked.injections.join(", ")
        ));
        tracing::warn!(call = %call.id, tool = %call.name, patterns = ?checked.injections, "tool output looks like a prompt injection");
    }
    // The receipt goes to the writer before the result: a crash between the
    // two leaves a receipt without a result, never a result without a receipt.
    emitter.receipt(ReceiptBody {
        session_id: emitter.session_id().clone(),
        run_id: emitter.run_id().clone(),
        call_id: call.id.clone(),
        tool: call.name.clone(),
        input_hash: json_hash(&call.arguments),
        output_hash: sha256_hex(checked.text.as_bytes()),
        verdict: done.verdict,
        is_error,
        at: now_millis(),
        hooks: done.hooks.record,
    });
    emitter.emit(Event::ToolResult {
        id: call.id.clone(),
        output: checked.text.clone(),
        is_error,
        verdict: done.verdict,
        diffs,
        safety: notes,
    });
    if let Some(entries) = plan {
        let entries = entries
            .into_iter()
            .map(|mut entry| {
                entry.content = env.safety.redact(&entry.content).0;
                entry
            })
            .collect();
        emitter.emit(Event::Plan { entries });
    }
    let message = Message::Tool {
        call_id: call.id.clone(),
        content: checked.text,
        is_error,
    };
    emitter.append_message(message.clone());
    history.push(message);
}

fn settle_cancelled(
    env: &CallEnv,
    emitter: &mut Emitter,
    history: &mut Vec<Message>,
    calls: &[ToolCall],
) {
    for call in calls {
        settle(
            env,
            emitter,
            history,
            call,
            Finished {
                verdict: Verdict::Cancelled,
                result: Err("the run was cancelled before this call ran".into()),
                hooks: HookNotes::default(),
            },
        );
    }
}

/// Tool arguments with secrets redacted, for the tape and the approval prompt.
pub fn redact_json(safety: &Safety, value: &serde_json::Value) -> serde_json::Value {
    match value {
        serde_json::Value::String(text) => serde_json::Value::String(safety.redact(text).0),
        serde_json::Value::Array(items) => {
            serde_json::Value::Array(items.iter().map(|v| redact_json(safety, v)).collect())
        }
        serde_json::Value::Object(map) => serde_json::Value::Object(
            map.iter()
                .map(|(k, v)| (k.clone(), redact_json(safety, v)))
                .collect(),
        ),
        other => other.clone(),
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

#[cfg(test)]
mod tests {
    use super::shown_now;
    use crate::core::safety::{Safety, SafetyConfig};

    #[test]
    fn live_output_is_shown_by_whole_lines_and_whole_key_blocks() {
        for (buffered, shown) in [
            ("", ""),
            ("partial", ""),
            ("one\ntwo\nthr", "one\ntwo\n"),
            ("a\n-----BEGIN RSA PRIVATE KEY-----\nMIIE\n", "a\n"),
            (
                "a\n-----BEGIN RSA PRIVATE KEY-----\nMIIE\n-----END RSA PRIVATE KEY-----\nb",
                "a\n-----BEGIN RSA PRIVATE KEY-----\nMIIE\n-----END RSA PRIVATE KEY-----\n",
            ),
            (
                "-----BEGIN CERTIFICATE-----\nMIIB\n",
                "-----BEGIN CERTIFICATE-----\nMIIB\n",
            ),
        ] {
            assert_eq!(&buffered[..shown_now(buffered)], shown, "{buffered:?}");
        }
    }

    #[test]
    fn a_key_streamed_in_pieces_is_never_shown() {
        let safety = Safety::new(SafetyConfig::default(), Vec::new());
        let body = "MIIEowIBAAKCAQEAu1SU1LfVLPHCozMxH2Mo4lgOEePzNm0tRgeLezV6ffAt0gun\n\
                    VTLw7onLRnrq0/IzW7yWR7QkrmBL7jTKEn5u+qKhbwKfBstIs+bMY2Zkp18gnTxK\n";
        let key = format!("-----BEGIN RSA PRIVATE KEY-----\n{body}-----END RSA PRIVATE KEY-----\n");
        let text = format!("before\n{key}after\n");
        // Output arriving a few bytes at a time, flushed after each piece.
        let mut buffered = String::new();
        let mut shown = String::new();
        for piece in text.as_bytes().chunks(7) {
            buffered.push_str(std::str::from_utf8(piece).unwrap());
            let cut = shown_now(&buffered);
            let rest = buffered.split_off(cut);
            shown.push_str(&safety.redact(&buffered).0);
            buffered = rest;
        }
        shown.push_str(&safety.redact(&buffered).0);
        assert!(!shown.contains("MIIEowIBAAKCAQEA"), "{shown}");
        assert!(!shown.contains("VTLw7onLRnrq0"), "{shown}");
        assert!(
            shown.starts_with("before\n") && shown.ends_with("after\n"),
            "{shown}"
        );
    }
}
