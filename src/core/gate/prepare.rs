//! A call through the gate up to the moment it would run: the loop guard,
//! the tool looked up, its plan, the `PreToolUse` hooks (whose new input is
//! planned again), the policy and the hooks combined (`decision`), an
//! approval when asked for, and the plan's question when it asks one. What
//! comes out is ready to run or settled without running.

use std::sync::Arc;

use super::approval::{self, Request};
use super::decision::{Decision, HookVerdict, PolicyVerdict, combine};
use super::tool_hooks::{HookNotes, pre_tool_use};
use super::{CallEnv, Prepared};
use crate::core::emitter::Emitter;
use crate::core::event::Event;
use crate::core::hooks::{HookEvent, HookOutcome};
use crate::core::policy::needs_person;
use crate::core::question::QuestionOutcome;
use crate::core::receipt::Verdict;
use crate::core::session::ToolCall;
use crate::core::tool::{Plan, Tool, ToolError};

/// Takes a call through the gate (`prepare_call`); a call that passes and
/// asks the person a question (`ask_user`) then asks it, and runs with the
/// answer. `None` when the run was cancelled while waiting.
pub(super) async fn prepare(
    env: &CallEnv,
    emitter: &mut Emitter,
    call: &ToolCall,
) -> Option<Prepared> {
    let mut prepared = prepare_call(env, emitter, call).await?;
    if let Prepared::Ready { plan, .. } = &mut prepared
        && let Some(question) = plan.question.clone()
    {
        let answer = approval::ask_question(env, emitter, call, &question).await;
        if answer.outcome == QuestionOutcome::Cancelled {
            return None;
        }
        plan.answer = Some(answer);
    }
    Some(prepared)
}

/// Plans a call, asks the `PreToolUse` hooks, and takes it through the
/// policy and, when asked for, an approval. `None` when the run was
/// cancelled while waiting.
async fn prepare_call(env: &CallEnv, emitter: &mut Emitter, call: &ToolCall) -> Option<Prepared> {
    if let Some(note) = env.guard.check(call) {
        return Some(Prepared::settled(Verdict::Denied, note));
    }
    let Some(tool) = env.tools.get(&call.name).cloned() else {
        return Some(unknown_tool(env, call));
    };
    let plan = match plan_call(env, &*tool, &call.arguments).await? {
        Ok(plan) => plan,
        Err((verdict, message)) => return Some(Prepared::settled(verdict, message)),
    };
    // The hooks see the planned call before the policy does.
    let pre = pre_tool_use(env, emitter, call).await?;
    let mut hooks = HookNotes::default();
    hooks.add(HookEvent::PreToolUse, &pre);
    let hook = HookVerdict::of(&pre);
    let (arguments, plan) = if hook.refuses() {
        (call.arguments.clone(), plan)
    } else {
        match with_hook_input(env, emitter, &*tool, &pre, call, plan).await? {
            Ok(planned) => planned,
            Err((verdict, message)) => {
                return Some(Prepared::Settled {
                    verdict,
                    message,
                    hooks,
                });
            }
        }
    };
    // The policy is checked even when a hook refused the call: `combine`
    // is the one place that says what wins (the check changes nothing).
    let policy = PolicyVerdict::of(env.check(&call.name, tool.kind(), &plan), || {
        needs_person(&plan, &env.ctx.boundary).is_some()
    });
    // An active skill whose `allowed-tools` cover the call pre-approves it
    // within what the policy allows.
    let skill = env
        .ctx
        .skills
        .as_ref()
        .and_then(|skills| skills.pre_approving(&call.name, plan.command.as_deref()));
    let ready = Ready {
        tool,
        plan,
        arguments,
        hooks,
    };
    let decision = combine(policy, hook, skill.as_deref());
    decide(env, emitter, call, decision, ready).await
}

/// A call that passed the hooks, before the policy and the person decide.
struct Ready {
    tool: Arc<dyn Tool>,
    plan: Plan,
    arguments: serde_json::Value,
    hooks: HookNotes,
}

impl Ready {
    fn run(self, verdict: Verdict) -> Prepared {
        Prepared::Ready {
            tool: self.tool,
            plan: Box::new(self.plan),
            arguments: self.arguments,
            verdict,
            hooks: self.hooks,
        }
    }

    fn refuse(self, verdict: Verdict, message: String) -> Prepared {
        Prepared::Settled {
            verdict,
            message,
            hooks: self.hooks,
        }
    }
}

/// Carries out the decision on a call: runs it, refuses it, ends the run,
/// or asks a person first. `None` when the run was cancelled while waiting.
async fn decide(
    env: &CallEnv,
    emitter: &mut Emitter,
    call: &ToolCall,
    decision: Decision,
    ready: Ready,
) -> Option<Prepared> {
    match decision {
        Decision::Run(verdict) => Some(ready.run(verdict)),
        Decision::Refuse(verdict, message) => Some(ready.refuse(verdict, message)),
        Decision::EndRun(reason) => {
            env.end_run(reason.clone());
            let message = format!("not run: a hook ended the run: {reason}");
            Some(ready.refuse(Verdict::Denied, message))
        }
        Decision::Ask(reason) => {
            let request = Request {
                call,
                arguments: &ready.arguments,
                kind: ready.tool.kind(),
                plan: &ready.plan,
                title: env.safety.redact(&ready.plan.title).0,
                reason,
            };
            let decision = approval::ask(env, emitter, request).await;
            Some(
                match approval::answered(decision, env.gate.approval_timeout)? {
                    Ok(()) => ready.run(Verdict::Approved),
                    Err(message) => ready.refuse(Verdict::Rejected, message),
                },
            )
        }
    }
}

/// The answer to a call of a tool the turn does not have.
fn unknown_tool(env: &CallEnv, call: &ToolCall) -> Prepared {
    let names: Vec<String> = env.tools.specs().iter().map(|s| s.name.clone()).collect();
    Prepared::settled(
        Verdict::Invalid,
        format!(
            "unknown tool `{}`; available tools: {}",
            call.name,
            names.join(", ")
        ),
    )
}

/// The input the call runs with and its plan: a `PreToolUse` hook's
/// `updatedInput`, planned and checked as the model's was, else the
/// model's; either way shown as planned (`tool_planned`). `Err`: the
/// hook's input is refused (verdict and message); `None`: cancelled.
async fn with_hook_input(
    env: &CallEnv,
    emitter: &mut Emitter,
    tool: &dyn Tool,
    pre: &HookOutcome,
    call: &ToolCall,
    plan: Plan,
) -> Option<Result<(serde_json::Value, Plan), (Verdict, String)>> {
    let (arguments, plan) = match pre.updated_input() {
        Some(updated) => match plan_call(env, tool, updated).await? {
            Ok(plan) => (updated.clone(), plan),
            Err((verdict, message)) => {
                let message = format!("the input a hook gave is refused: {message}");
                return Some(Err((verdict, message)));
            }
        },
        None => (call.arguments.clone(), plan),
    };
    emitter.emit(Event::ToolPlanned {
        id: call.id.clone(),
        title: env.safety.redact(&plan.title).0,
        locations: plan.locations(),
        command: plan.command.as_ref().map(|c| env.safety.redact(c).0),
        diffs: plan.diffs.clone(),
    });
    Some(Ok((arguments, plan)))
}

/// Plans a call: the plan, or the verdict and message it is settled with
/// without running; `None` when the run was cancelled.
async fn plan_call(
    env: &CallEnv,
    tool: &dyn Tool,
    arguments: &serde_json::Value,
) -> Option<Result<Plan, (Verdict, String)>> {
    match tool.plan(arguments, &env.ctx).await {
        Ok(plan) => Some(Ok(plan)),
        Err(ToolError::Path(err)) => {
            Some(Err((Verdict::Denied, format!("denied by policy: {err}"))))
        }
        Err(ToolError::Cancelled) => None,
        Err(err) => Some(Err((Verdict::Invalid, err.to_string()))),
    }
}
