//! A group's calls run: those ready run at once (a delegating call's
//! subagent first, then the tool, then its `PostToolUse` hooks), their
//! progress and the subagents' relayed events turned into events as they
//! come; those settled only pass their message on.

use futures::future::join_all;

use super::tool_hooks::post_tool_use;
use super::{CallEnv, Finished, Prepared, progress};
use crate::core::emitter::Emitter;
use crate::core::session::ToolCall;
use crate::core::subagent::{ParentCall, Relay};
use crate::core::tool::{Plan, Progress, ToolContext, ToolError};

/// Runs a group's prepared calls at once; what each came to, in order.
pub(super) async fn run_group(
    env: &CallEnv,
    emitter: &mut Emitter,
    group: &[ToolCall],
    prepared: Vec<Prepared>,
) -> Vec<Finished> {
    let (progress_tx, progress_rx) = tokio::sync::mpsc::unbounded_channel();
    let (relay_tx, relay_rx) = tokio::sync::mpsc::unbounded_channel();
    let runs: Vec<_> = group
        .iter()
        .zip(prepared)
        .map(|(call, p)| {
            let progress = Progress::new(call.id.clone(), progress_tx.clone());
            run_one(env, call, p, progress, relay_tx.clone())
        })
        .collect();
    drop(progress_tx);
    drop(relay_tx);
    progress::with_progress(env, emitter, join_all(runs), progress_rx, relay_rx).await
}

/// Runs one prepared call (a settled one's message is its result).
async fn run_one(
    env: &CallEnv,
    call: &ToolCall,
    prepared: Prepared,
    progress: Progress,
    relay: Relay,
) -> Finished {
    match prepared {
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
            post_tool_use(env, call, &arguments, &result, &mut hooks).await;
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
        budget_left: *env.budget_left.lock(),
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
        let mut delegated = env.delegated.lock();
        *delegated = crate::core::usage::Cost::sum(delegated.take(), Some(cost));
    }
    plan.delegated = Some(outcome);
    Ok(())
}
