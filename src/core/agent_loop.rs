//! The agent loop: model turn → tool calls → next model turn, until the model stops.

use super::budget;
use super::compaction::{self, AutoCompact};
use super::event::{Event, StopReason};
use super::gate;
use super::hooks::{HookEvent, HookInput};
use super::provider::ModelStop;
use super::run::RunOutcome;
use super::session::{Message, ToolCall};
use super::turn::{LoopConfig, RunContext, TurnRequest, spent, stream_turn};

/// Runs model turns until the model stops, the cap is hit, or the run is cancelled.
pub async fn run(ctx: &mut RunContext<'_>, config: &LoopConfig) -> RunOutcome {
    let mut index: u32 = 0;
    // Times in a row a `Stop` hook kept the run going.
    let mut kept_going: u32 = 0;
    loop {
        if index >= ctx.max_turns.unwrap_or(config.max_turn_requests) {
            return RunOutcome::Completed(StopReason::MaxTurnRequests);
        }
        let budgets = ctx
            .budgets
            .clone()
            .unwrap_or_else(|| config.budgets.clone());
        if let Some(message) = budget::reached(&budgets, ctx.provider.name(), &spent(ctx, config)) {
            ctx.emitter.emit(Event::Notice { message });
            return RunOutcome::Completed(StopReason::Budget);
        }
        if let Some(steering) = ctx.steering.clone() {
            take_steering(ctx, steering.take());
        }
        let turn = match model_turn(ctx, config, index).await {
            Ok(turn) => turn,
            Err(outcome) => return outcome,
        };
        index += 1;
        let ended = matches!(turn.stop, ModelStop::EndTurn)
            || (matches!(turn.stop, ModelStop::ToolUse) && turn.tool_calls.is_empty());
        if ended && kept_going < MAX_KEPT_GOING {
            match stop_hooks(ctx, kept_going > 0).await {
                Ok(Some(())) => {
                    kept_going += 1;
                    continue;
                }
                Ok(None) => {}
                Err(outcome) => return outcome,
            }
        }
        // A message the person sent meanwhile keeps the run going: the
        // model answers it in another turn.
        if ended && let Some(steering) = ctx.steering.clone() {
            let came = steering.close_if_empty();
            if !came.is_empty() {
                take_steering(ctx, came);
                continue;
            }
        }
        match turn.stop {
            ModelStop::EndTurn => return RunOutcome::Completed(StopReason::EndTurn),
            ModelStop::MaxTokens => return RunOutcome::Completed(StopReason::MaxTokens),
            ModelStop::Refusal => return RunOutcome::Completed(StopReason::Refusal),
            ModelStop::ToolUse if turn.tool_calls.is_empty() => {
                return RunOutcome::Completed(StopReason::EndTurn);
            }
            ModelStop::ToolUse => {
                // A tool the turn's list lacks may be one a server added
                // while the turn ran: ask the session's tools afresh once.
                if turn
                    .tool_calls
                    .iter()
                    .any(|call| ctx.calls.tools.get(&call.name).is_none())
                {
                    relist_tools(ctx).await;
                }
                // A subagent started by these calls may spend at most what
                // is left of the run's budgets after this turn.
                let left = budget::left(&budgets, ctx.provider.name(), &spent(ctx, config))
                    .and_then(|left| {
                        [left.run, left.session, left.daily]
                            .into_iter()
                            .flatten()
                            .reduce(f64::min)
                    });
                *ctx.calls.budget_left.lock() = left;
                let calls =
                    gate::run_calls(&ctx.calls, ctx.emitter, &mut ctx.history, &turn.tool_calls)
                        .await;
                match calls {
                    Ok(()) => {}
                    Err(gate::Interrupted::Cancelled) => return RunOutcome::Cancelled,
                }
                if let Some(reason) = ctx.calls.guard.gave_up() {
                    return RunOutcome::Failed(reason);
                }
                if let Some(reason) = ctx.calls.ended_by_hook() {
                    ctx.emitter.emit(Event::Notice {
                        message: format!(
                            "A hook ended the run: {}",
                            ctx.calls.safety.redact(&reason).0
                        ),
                    });
                    return RunOutcome::Completed(StopReason::Blocked);
                }
            }
        }
    }
}

/// The `agent_type` of Pincer's subagents, as `SubagentStop` hooks see it.
pub const SUBAGENT_TYPE: &str = "delegate";

/// Messages sent while the run worked join the conversation before the next
/// model turn, and every face shows them.
fn take_steering(ctx: &mut RunContext<'_>, messages: Vec<Vec<super::session::ContentPart>>) {
    for content in messages {
        ctx.emitter.emit(Event::UserMessage {
            content: content.clone(),
        });
        let message = Message::User { content };
        ctx.emitter.append_message(message.clone());
        ctx.history.push(message);
    }
}

/// Most times in a row `Stop` hooks may keep a run going (as Claude Code
/// allows); then the run ends anyway.
const MAX_KEPT_GOING: u32 = 8;

/// Runs the `Stop` hooks when the model has finished: `Some` when one asks
/// the run to go on (its reason joins the conversation as a note the model
/// reads), `Err` when one ended it.
async fn stop_hooks(ctx: &mut RunContext<'_>, active: bool) -> Result<Option<()>, RunOutcome> {
    let hooks = ctx.calls.gate.hooks.clone();
    // A subagent's run ends with `SubagentStop` (matched on the agent
    // type), as Claude Code's and Codex's do, in its parent's session.
    let (event, matcher) = match &ctx.subagent {
        Some(_) => (HookEvent::SubagentStop, Some(SUBAGENT_TYPE)),
        None => (HookEvent::Stop, None),
    };
    if !hooks.listens(event, matcher) {
        return Ok(None);
    }
    let last = ctx.history.iter().rev().find_map(|message| {
        if let Message::Assistant { text, .. } = message {
            Some(text.clone())
        } else {
            None
        }
    });
    let session = match &ctx.subagent {
        Some(of) => of.parent_session.clone(),
        None => ctx.emitter.session_id().clone(),
    };
    let mut input = HookInput::new(
        event,
        session.as_str(),
        ctx.calls.ctx.workspace.clone(),
        ctx.calls.mode.as_str(),
    )
    .in_run(Some(ctx.emitter.run_id().as_str()))
    .with("stop_hook_active", active)
    .with("last_assistant_message", last.unwrap_or_default());
    if let Some(of) = &ctx.subagent {
        input = input
            .about("agent_type", SUBAGENT_TYPE)
            .with("agent_id", ctx.emitter.session_id().as_str().to_owned())
            .with("task", of.label.clone());
    }
    let outcome = tokio::select! {
        biased;
        _ = ctx.cancel.cancelled() => return Err(RunOutcome::Cancelled),
        outcome = hooks.fire(input) => outcome,
    };
    let safety = ctx.calls.safety.clone();
    for message in outcome.messages() {
        ctx.emitter.emit(Event::Notice {
            message: safety.redact(&message).0,
        });
    }
    if let Some(reason) = outcome.stopped() {
        ctx.emitter.emit(Event::Notice {
            message: format!("A hook ended the run: {}", safety.redact(&reason).0),
        });
        return Err(RunOutcome::Completed(StopReason::Blocked));
    }
    let Some(reason) = outcome.blocked() else {
        return Ok(None);
    };
    let note = Message::Note {
        text: format!(
            "a {} hook asks you to go on before finishing: {}",
            event.as_str(),
            safety.check(&reason).text
        ),
    };
    ctx.emitter.append_message(note.clone());
    ctx.history.push(note);
    Ok(Some(()))
}

struct Turn {
    stop: ModelStop,
    tool_calls: Vec<ToolCall>,
}

/// Plays one model turn, streaming its output as events. On cancel or failure the
/// partial reply is kept in the history (marked interrupted) and tool calls of the
/// unfinished turn are dropped, never executed.
async fn model_turn(
    ctx: &mut RunContext<'_>,
    config: &LoopConfig,
    index: u32,
) -> Result<Turn, RunOutcome> {
    refresh_tools(ctx).await;
    let tools = ctx.calls.tools.specs();
    let mut system = ctx.prompt.render(&ctx.history).await;
    // Near the window: compact before the turn rather than drop messages.
    let fixed = ctx.tokens.text(&system) + ctx.tokens.tools(&tools);
    let estimated = fixed + ctx.tokens.messages(&ctx.history);
    let window = ctx.window;
    if config.compact_at > 0.0
        && estimated as f64 > config.compact_at * window as f64
        && compaction::worth_compacting(&ctx.history)
    {
        let why = AutoCompact::Threshold { estimated, window };
        if compaction::compact_automatically(ctx, config, why).await {
            system = ctx.prompt.render(&ctx.history).await;
        }
        if ctx.cancel.is_cancelled() {
            return Err(RunOutcome::Cancelled);
        }
    }
    let (mut ended, mut said) = stream_turn(
        ctx,
        config,
        TurnRequest {
            index,
            messages: ctx.history.clone(),
            tools: tools.clone(),
            system: Some(system),
            shown: true,
        },
    )
    .await;
    // The provider says the request is too long: compact, and try once more.
    if said.overflowed()
        && compaction::worth_compacting(&ctx.history)
        && compaction::compact_automatically(
            ctx,
            config,
            AutoCompact::Overflow { estimated, fixed },
        )
        .await
    {
        (ended, said) = stream_turn(
            ctx,
            config,
            TurnRequest {
                index,
                messages: ctx.history.clone(),
                tools,
                system: None,
                shown: true,
            },
        )
        .await;
    }
    match ended {
        Ok(stop) => {
            let message = Message::Assistant {
                text: said.text,
                thought: said.thought,
                tool_calls: said.tool_calls.clone(),
                interrupted: false,
            };
            ctx.emitter.append_message(message.clone());
            ctx.history.push(message);
            Ok(Turn {
                stop,
                tool_calls: said.tool_calls,
            })
        }
        Err(outcome) => {
            if !said.text.is_empty() || !said.thought.is_empty() {
                ctx.emitter.append_message(Message::Assistant {
                    text: said.text,
                    thought: said.thought,
                    tool_calls: Vec::new(),
                    interrupted: true,
                });
            }
            Err(outcome)
        }
    }
}

/// Makes the turn's toolset the built-in tools plus the session's current
/// extra tools, and tells the user about extra tools that failed.
async fn refresh_tools(ctx: &mut RunContext<'_>) {
    update_tools(ctx, false).await;
}

async fn relist_tools(ctx: &mut RunContext<'_>) {
    update_tools(ctx, true).await;
}

/// The turn's tools: the built-in ones and the session's (asked afresh when
/// `relist`), with the session tools' problems reported.
async fn update_tools(ctx: &mut RunContext<'_>, relist: bool) {
    let Some(extra) = ctx.session_tools.clone() else {
        return;
    };
    let asked = async {
        if relist {
            extra.relist().await
        } else {
            extra.tools().await
        }
    };
    let list = tokio::select! {
        biased;
        _ = ctx.cancel.cancelled() => return,
        list = asked => list,
    };
    for problem in list.problems {
        // A server's own words may echo a credential it was given.
        let message = ctx.calls.safety.redact(&problem).0;
        ctx.emitter.emit(Event::Notice { message });
    }
    ctx.calls.tools = ctx.calls.restrict(ctx.calls.gate.tools.with(&list.tools));
}
