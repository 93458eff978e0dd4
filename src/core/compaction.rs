//! Compacting a conversation: `/compact` when the person asks, and
//! automatically when a turn would near the model's window or the provider
//! refuses one as too long (with, first, a turn to save to memory what
//! should outlast it). A summary the model writes becomes the session's
//! compaction point (`context::since_compaction`).

use super::commands::SessionCommand;
use super::emitter::Emitter;
use super::event::{CompactionStatus, CompactionTrigger, Event, StopReason};
use super::hooks::{HookEvent, HookInput};
use super::provider::ModelStop;
use super::receipt::{ReceiptBody, Verdict, json_hash, sha256_hex};
use super::run::RunOutcome;
use super::session::{ContentPart, Message, model_turns, now_millis};
use super::skills::SKILL_TOOL;
use super::turn::{self, LoopConfig, RunContext, TurnRequest};

/// What the model is asked to write when a conversation is compacted.
pub const COMPACT_INSTRUCTION: &str = "\
The conversation so far is about to be replaced by a summary that you write now: \
after this, you will see only your summary and the messages that follow it, so it \
must let you continue the work without the earlier messages. Write it for yourself, \
under these headings:
1. Goals — what the user asked for, with every constraint and preference they stated.
2. Decisions — what was decided and why, and approaches tried and abandoned.
3. Files — every file read, created or changed: its exact path and what was done to it.
4. State — what is done, what was checked (commands run and their results), what still fails.
5. Open tasks — what is left to do, in order, and any question waiting for the user.
Keep identifiers exactly as they appeared: paths, function and type names, commands, \
error messages, ids, numbers and versions. Be specific and brief; leave out pleasantries \
and anything no longer relevant. Do not call tools. Answer with the summary only.";

/// Whether a conversation (as sent to the model) has anything a compaction
/// would replace: some message besides a summary already made.
pub fn has_anything_to_compact(messages: &[Message]) -> bool {
    messages
        .iter()
        .any(|m| !matches!(m, Message::Summary { .. }))
}

/// Ends a `/compact` that has nothing to summarize, without calling the model.
pub fn nothing_to_compact(emitter: &mut Emitter, history: &[Message]) -> RunOutcome {
    let text = if history.is_empty() {
        "Nothing to compact: the conversation is empty."
    } else {
        "Nothing to compact: nothing was said since the last summary."
    };
    emitter.emit(Event::TextDelta { text: text.into() });
    RunOutcome::Completed(StopReason::EndTurn)
}

/// Runs `/compact` on `ctx.history` (the conversation as the model is sent it,
/// which must have something to compact): one model turn without tools writes
/// the summary, streamed as text; on success the command and the summary join
/// the history as the new compaction point.
pub async fn compact(ctx: &mut RunContext<'_>, config: &LoopConfig) -> RunOutcome {
    match pre_compact(ctx, "manual").await {
        Ok(()) => {}
        Err(None) => return RunOutcome::Cancelled,
        Err(Some(reason)) => {
            ctx.emitter.emit(Event::TextDelta {
                text: format!("The conversation was not compacted: a hook blocked it: {reason}."),
            });
            return RunOutcome::Completed(StopReason::Blocked);
        }
    }
    let messages = ctx.history.clone();
    let record = Record::start(ctx, CompactionTrigger::Manual);
    let (ended, said) = summary_turn(ctx, config, messages, COMPACT_INSTRUCTION, true).await;
    let stop = match ended {
        Ok(stop) => stop,
        // Nothing is recorded in the history: the conversation stays as it was.
        Err(outcome) => {
            record.unfinished(ctx, &outcome);
            return outcome;
        }
    };
    if let Some(why) = no_summary(stop, &said.text) {
        record.end(ctx, CompactionStatus::Failed, None, Some(why.to_owned()));
        ctx.emitter.emit(Event::TextDelta {
            text: format!("\n\nThe conversation was not compacted: {why}."),
        });
        return RunOutcome::Completed(match stop {
            ModelStop::MaxTokens => StopReason::MaxTokens,
            ModelStop::Refusal => StopReason::Refusal,
            ModelStop::EndTurn | ModelStop::ToolUse => StopReason::EndTurn,
        });
    }
    let replaced = ctx.history.len();
    ctx.emitter.emit(Event::TextDelta {
        text: format!(
            "\n\n[Compacted {replaced} earlier message{} into this summary; the model continues from it.]",
            if replaced == 1 { "" } else { "s" }
        ),
    });
    ctx.emitter.append_message(Message::User {
        content: SessionCommand::Compact.content(),
    });
    record.end(
        ctx,
        CompactionStatus::Completed,
        Some(said.text.clone()),
        None,
    );
    ctx.emitter.append_message(Message::Summary {
        text: said.text,
        // The summary turn counts too, as any model turn does.
        turns: model_turns(&ctx.history) + 1,
    });
    for note in keep_skills(ctx).await {
        ctx.emitter.append_message(note);
    }
    RunOutcome::Completed(StopReason::EndTurn)
}

/// The active skills' instructions, read again through the `skill` tool
/// as notes to follow a summary: a summary replaces the conversation that
/// held them, and a skill's instructions must outlast it (`core::skills`).
/// Each stays active; one that cannot be read any more is dropped with a
/// notice.
async fn keep_skills(ctx: &mut RunContext<'_>) -> Vec<Message> {
    let Some(skills) = ctx.calls.ctx.skills.clone() else {
        return Vec::new();
    };
    let active = skills.take_active();
    let Some(tool) = ctx.calls.gate.tools.get(SKILL_TOOL).cloned() else {
        return Vec::new();
    };
    let mut notes = Vec::new();
    for name in active {
        let arguments = serde_json::json!({ "name": name });
        let loaded = match tool.plan(&arguments, &ctx.calls.ctx).await {
            Ok(plan) => tool.execute(&arguments, &plan, &ctx.calls.ctx).await,
            Err(err) => Err(err),
        };
        match loaded {
            Ok(output) if output.skill.is_some() => {
                skills.activate(&name);
                notes.push(Message::Note {
                    text: format!(
                        "The skill `{name}` was active before the summary above; its \
                         instructions, read again:\n\n{}",
                        ctx.calls.safety.check(&output.text).text
                    ),
                });
            }
            Ok(_) => {}
            Err(err) => {
                ctx.emitter.emit(Event::Notice {
                    message: format!(
                        "The skill `{name}` is no longer active after the summary: {}",
                        ctx.calls.safety.redact(&err.to_string()).0
                    ),
                });
            }
        }
    }
    notes
}

/// The `compaction` events of one compaction: `in_progress` when it starts,
/// then exactly one end.
struct Record {
    id: String,
    trigger: CompactionTrigger,
}

impl Record {
    fn start(ctx: &mut RunContext<'_>, trigger: CompactionTrigger) -> Self {
        let record = Record {
            id: format!("compaction_{}", uuid::Uuid::now_v7().simple()),
            trigger,
        };
        ctx.emitter.emit(Event::Compaction {
            compaction_id: record.id.clone(),
            trigger,
            status: CompactionStatus::InProgress,
            summary: None,
            error: None,
        });
        record
    }

    fn end(
        self,
        ctx: &mut RunContext<'_>,
        status: CompactionStatus,
        summary: Option<String>,
        error: Option<String>,
    ) {
        ctx.emitter.emit(Event::Compaction {
            compaction_id: self.id,
            trigger: self.trigger,
            status,
            summary,
            error,
        });
    }

    /// Ends it as the summary turn's early `outcome` says.
    fn unfinished(self, ctx: &mut RunContext<'_>, outcome: &RunOutcome) {
        match outcome {
            RunOutcome::Cancelled => self.end(ctx, CompactionStatus::Cancelled, None, None),
            RunOutcome::Failed(reason) => {
                self.end(ctx, CompactionStatus::Failed, None, Some(reason.clone()))
            }
            RunOutcome::Completed(_) => self.end(
                ctx,
                CompactionStatus::Failed,
                None,
                Some("the summary turn ended early".to_owned()),
            ),
        }
    }
}

/// One model turn that answers `instruction` after `messages`, offering
/// `tools`; records nothing. `shown`: its text streams as the reply.
async fn instruction_turn(
    ctx: &mut RunContext<'_>,
    config: &LoopConfig,
    mut messages: Vec<Message>,
    instruction: &str,
    tools: Vec<std::sync::Arc<super::provider::ToolSpec>>,
    shown: bool,
) -> (Result<ModelStop, RunOutcome>, turn::Said) {
    messages.push(Message::User {
        content: vec![ContentPart::Text {
            text: instruction.to_owned(),
        }],
    });
    turn::stream_turn(
        ctx,
        config,
        TurnRequest {
            index: 0,
            messages,
            tools: tools.into(),
            system: None,
            shown,
        },
    )
    .await
}

/// One model turn without tools that answers `instruction` after
/// `messages` (a summary); tool calls it makes anyway are refused, each
/// with its receipt. `shown`: its text streams as the reply.
async fn summary_turn(
    ctx: &mut RunContext<'_>,
    config: &LoopConfig,
    messages: Vec<Message>,
    instruction: &str,
    shown: bool,
) -> (Result<ModelStop, RunOutcome>, turn::Said) {
    let (ended, said) =
        instruction_turn(ctx, config, messages, instruction, Vec::new(), shown).await;
    if !said.tool_calls.is_empty() {
        refuse_tool_calls(ctx, &said.tool_calls);
    }
    (ended, said)
}

/// Why a summary turn that ended with `stop` left no usable summary, if it did.
fn no_summary(stop: ModelStop, text: &str) -> Option<&'static str> {
    match stop {
        ModelStop::EndTurn | ModelStop::ToolUse if text.trim().is_empty() => {
            Some("the model wrote no summary")
        }
        ModelStop::EndTurn | ModelStop::ToolUse => None,
        ModelStop::MaxTokens => Some("the summary was cut short by the output token limit"),
        ModelStop::Refusal => Some("the model refused to summarize"),
    }
}

/// What the model is asked when the conversation is compacted without the
/// person asking: the `/compact` summary, plus the request being worked on,
/// since the summary replaces it too.
pub const AUTO_COMPACT_INSTRUCTION: &str = "\
The conversation is near the limit of what you can be sent, so it is being replaced now, \
in the middle of the work, by a summary that you write. After this you will see only your \
summary and what follows it, and you will go on with the work from it. Write it for yourself, \
under these headings:
1. Latest request — the user's most recent message, word for word, and how far you are in \
answering it.
2. Goals — what the user asked for, with every constraint and preference they stated.
3. Decisions — what was decided and why, and approaches tried and abandoned.
4. Files — every file read, created or changed: its exact path and what was done to it.
5. State — what is done, what was checked (commands run and their results), what still fails.
6. Next steps — what you were about to do, in order.
Keep identifiers exactly as they appeared: paths, function and type names, commands, \
error messages, ids, numbers and versions. Be specific and brief. Do not call tools. \
Answer with the summary only.";

/// Why a conversation is compacted without the person asking.
#[derive(Debug, Clone, Copy)]
pub enum AutoCompact {
    /// The request about to be sent was estimated over the threshold.
    Threshold { estimated: usize, window: usize },
    /// The provider refused a request estimated at `estimated` tokens as
    /// too long: the summary is asked for within half of that.
    Overflow {
        estimated: usize,
        /// Of it, what is not the conversation: the system prompt and the tools.
        fixed: usize,
    },
}

/// Compacts `ctx.history` in the middle of a run: one model turn without
/// tools writes a summary (not shown as the reply), which becomes the new
/// compaction point of the session and the whole of the run's history from
/// here on. A notice tells the person either way. `false` when it could not
/// (the run goes on with the conversation fitted as before).
pub async fn compact_automatically(
    ctx: &mut RunContext<'_>,
    config: &LoopConfig,
    why: AutoCompact,
) -> bool {
    match pre_compact(ctx, "auto").await {
        Ok(()) => {}
        Err(None) => return false,
        Err(Some(reason)) => {
            ctx.emitter.emit(Event::Notice {
                message: format!(
                    "The conversation was not compacted: a hook blocked it ({reason}); older messages are left out to fit instead."
                ),
            });
            return false;
        }
    }
    if config.save_before_compact && matches!(why, AutoCompact::Threshold { .. }) {
        save_before_compacting(ctx, config).await;
        if ctx.cancel.is_cancelled() {
            return false;
        }
    }
    let mut messages = ctx.history.clone();
    if let AutoCompact::Overflow { estimated, fixed } = why {
        // The window the configuration states was wrong for this provider:
        // what it refused is the measure, and half of it the budget of the
        // whole request, so the conversation gets that less the system
        // prompt and the tools (the latest prompt and what followed it are
        // always kept).
        let budget = (estimated / 2).saturating_sub(fixed);
        super::context::fit(&mut messages, budget, &ctx.tokens);
    }
    let record = Record::start(ctx, CompactionTrigger::Auto);
    let (ended, said) = summary_turn(ctx, config, messages, AUTO_COMPACT_INSTRUCTION, false).await;
    let failed = match ended {
        Ok(stop) => no_summary(stop, &said.text).map(str::to_owned),
        Err(RunOutcome::Cancelled) => {
            record.end(ctx, CompactionStatus::Cancelled, None, None);
            return false;
        }
        Err(RunOutcome::Failed(reason)) => Some(reason),
        Err(RunOutcome::Completed(_)) => Some("the summary turn ended early".to_owned()),
    };
    let cause = match why {
        AutoCompact::Threshold { estimated, window } => format!(
            "The conversation neared the model's context window (about {estimated} of {window} tokens)"
        ),
        AutoCompact::Overflow { .. } => "The provider refused the request as too long".to_owned(),
    };
    if let Some(reason) = failed {
        record.end(ctx, CompactionStatus::Failed, None, Some(reason.clone()));
        ctx.emitter.emit(Event::Notice {
            message: format!(
                "{cause}, and it could not be compacted ({reason}); older messages are left out to fit instead."
            ),
        });
        return false;
    }
    let replaced = ctx.history.len();
    record.end(
        ctx,
        CompactionStatus::Completed,
        Some(said.text.clone()),
        None,
    );
    let summary = Message::Summary {
        text: said.text,
        turns: model_turns(&ctx.history) + 1,
    };
    ctx.emitter.append_message(summary.clone());
    ctx.history = vec![summary];
    for note in keep_skills(ctx).await {
        ctx.emitter.append_message(note.clone());
        ctx.history.push(note);
    }
    ctx.emitter.emit(Event::Notice {
        message: format!(
            "{cause}: {replaced} earlier {} compacted into a summary, and the work goes on from it{}.",
            if replaced == 1 { "message was" } else { "messages were" },
            match why {
                AutoCompact::Overflow { .. } => " (the request is sent again)",
                AutoCompact::Threshold { .. } => "",
            }
        ),
    });
    true
}

/// Runs the `PreCompact` hooks (`trigger`: `manual` or `auto`): `Err` with
/// the reason (through the safety pass) when one blocked the compaction,
/// `Err(None)` when the run was cancelled meanwhile.
async fn pre_compact(ctx: &mut RunContext<'_>, trigger: &str) -> Result<(), Option<String>> {
    let hooks = ctx.calls.gate.hooks.clone();
    if !hooks.listens(HookEvent::PreCompact, Some(trigger)) {
        return Ok(());
    }
    let input = HookInput::new(
        HookEvent::PreCompact,
        ctx.emitter.session_id().as_str(),
        ctx.calls.ctx.workspace.clone(),
        ctx.calls.mode.as_str(),
    )
    .in_run(Some(ctx.emitter.run_id().as_str()))
    .about("trigger", trigger)
    .with("custom_instructions", "");
    let outcome = tokio::select! {
        biased;
        _ = ctx.cancel.cancelled() => return Err(None),
        outcome = hooks.fire(input) => outcome,
    };
    let safety = ctx.calls.safety.clone();
    for message in outcome.messages() {
        ctx.emitter.emit(Event::Notice {
            message: safety.redact(&message).0,
        });
    }
    match outcome.blocked().or_else(|| outcome.stopped()) {
        Some(reason) => Err(Some(safety.redact(&reason).0)),
        None => Ok(()),
    }
}

/// What the model is told in the turn before an automatic compaction.
pub const SAVE_INSTRUCTION: &str = "\
The conversation is about to be compacted into a summary. Before that, save with \
memory_save anything from it that should outlast this conversation: the person's \
preferences, facts about this project, decisions and their reasons. Save nothing that \
the files already say, nothing secret, and nothing only this task needs. If there is \
nothing to save, answer only: nothing to save.";

/// The turn before an automatic compaction: the model may call
/// `memory_save` (through the gate, shown like any call) to keep what should
/// outlast the summary. Only where saves run without asking (full mode,
/// `[tools] memory_save = "allow"`, an "always" answer): work in progress is
/// not held up for an approval nobody asked for. Its failure does not stop
/// the compaction.
async fn save_before_compacting(ctx: &mut RunContext<'_>, config: &LoopConfig) {
    let Some(save) = ctx.calls.tools.get("memory_save").cloned() else {
        return;
    };
    if !ctx.calls.runs_unasked(save.as_ref()) {
        return;
    }
    let messages = ctx.history.clone();
    let tools = vec![std::sync::Arc::new(save.spec())];
    let (ended, said) =
        instruction_turn(ctx, config, messages, SAVE_INSTRUCTION, tools, true).await;
    if ended.is_err() {
        return;
    }
    // Recorded in the history before the summary that replaces it: what the
    // model was told (a note), what it said and the calls it made.
    let note = Message::Note {
        text: SAVE_INSTRUCTION.to_owned(),
    };
    ctx.emitter.append_message(note.clone());
    let answer = Message::Assistant {
        text: said.text,
        thought: said.thought,
        tool_calls: said.tool_calls.clone(),
        interrupted: false,
    };
    ctx.emitter.append_message(answer.clone());
    let mut history = ctx.history.clone();
    history.push(note);
    history.push(answer);
    if !said.tool_calls.is_empty() {
        // Only memory_save is offered: another tool is answered as unknown.
        let all = std::mem::replace(&mut ctx.calls.tools, super::tool::Toolset::new(vec![save]));
        let _ =
            super::gate::run_calls(&ctx.calls, ctx.emitter, &mut history, &said.tool_calls).await;
        ctx.calls.tools = all;
    }
    ctx.history = history;
}

/// Answers tool calls a model made while summarizing (no tools were offered):
/// each gets its result and receipt, as every call does, and none runs.
fn refuse_tool_calls(ctx: &mut RunContext<'_>, calls: &[super::session::ToolCall]) {
    let message = "invalid: no tools are available while summarizing the conversation";
    for call in calls {
        ctx.emitter.receipt(ReceiptBody {
            session_id: ctx.emitter.session_id().clone(),
            run_id: ctx.emitter.run_id().clone(),
            call_id: call.id.clone(),
            tool: call.name.clone(),
            input_hash: json_hash(&call.arguments),
            output_hash: sha256_hex(message.as_bytes()),
            verdict: Verdict::Invalid,
            is_error: true,
            at: now_millis(),
            hooks: Vec::new(),
            skills: Vec::new(),
        });
        ctx.emitter.emit(Event::ToolResult {
            id: call.id.clone(),
            output: message.to_owned(),
            is_error: true,
            verdict: Verdict::Invalid,
            diffs: Vec::new(),
            safety: Vec::new(),
        });
    }
}

/// Whether compacting would replace more than the latest prompt: a summary
/// of a lone prompt loses its words and saves little.
pub fn worth_compacting(history: &[Message]) -> bool {
    history
        .iter()
        .filter(|m| !matches!(m, Message::Summary { .. }))
        .count()
        >= 2
}
