//! What is kept of each call: its result passed through the safety pass
//! (with what hooks added), the hooks' messages as notices, its receipt in
//! the hash chain, its `tool_result` event, the task list it set, and its
//! message in the history. The receipt goes first: a crash between the two
//! leaves a receipt without a result, never a result without a receipt.

use super::{CallEnv, Finished};
use crate::core::emitter::Emitter;
use crate::core::event::Event;
use crate::core::receipt::{ReceiptBody, json_hash, sha256_hex};
use crate::core::safety::{Checked, Safety};
use crate::core::session::{Message, ToolCall, now_millis};
use crate::core::skills::ActivatedBy;
use crate::core::tool::{FileDiff, PlanEntry};

/// Passes a finished call's output through the safety pass, records its
/// receipt, its result event and its history message.
pub(super) fn settle(
    env: &CallEnv,
    emitter: &mut Emitter,
    history: &mut Vec<Message>,
    call: &ToolCall,
    done: Finished,
) {
    let (raw, is_error, diffs, plan, loaded) = match done.result {
        Ok(output) => (output.text, false, output.diffs, output.plan, output.skill),
        Err(message) => (message, true, Vec::<FileDiff>::new(), None, None),
    };
    let activated = if is_error {
        None
    } else {
        activation(env, call, loaded)
    };
    let skills = env
        .ctx
        .skills
        .as_ref()
        .map(|skills| skills.active())
        .unwrap_or_default();
    let checked = checked(&env.safety, &raw, &done.hooks.context);
    for message in &done.hooks.messages {
        emitter.emit(Event::Notice {
            message: env.safety.redact(message).0,
        });
    }
    let notes = safety_notes(call, &checked);
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
        skills,
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
        emit_plan(env, emitter, entries);
    }
    if let Some(event) = activated {
        emitter.emit(event);
    }
    let message = Message::Tool {
        call_id: call.id.clone(),
        content: checked.text,
        is_error,
    };
    emitter.append_message(message.clone());
    history.push(message);
}

/// The activation a call that ran well made, marked in the run's skills:
/// the skill the `skill` tool loaded (`loaded`), or the one whose
/// `SKILL.md` a `read_file` call read; `None` when it activated none, or
/// one already active.
fn activation(env: &CallEnv, call: &ToolCall, loaded: Option<String>) -> Option<Event> {
    let skills = env.ctx.skills.as_ref()?;
    let (skill, by) = match loaded {
        Some(name) => (skills.set.get(&name)?, ActivatedBy::Tool),
        None if call.name == READ_FILE => {
            let raw = call.arguments.get("path")?.as_str()?;
            let path = env.ctx.boundary.resolve_unchecked(&env.ctx.workspace, raw);
            (skills.at(&path)?, ActivatedBy::ReadFile)
        }
        None => return None,
    };
    skills.activate(&skill.name).then(|| Event::SkillActivated {
        name: skill.name.clone(),
        location: skill.location.clone(),
        by,
    })
}

/// The file tool whose read of a catalogued `SKILL.md` activates it.
const READ_FILE: &str = "read_file";

/// Records each of `calls` as not run because the run was cancelled.
pub(super) fn settle_cancelled(
    env: &CallEnv,
    emitter: &mut Emitter,
    history: &mut Vec<Message>,
    calls: &[ToolCall],
) {
    for call in calls {
        settle(env, emitter, history, call, Finished::cancelled());
    }
}

/// The result the model reads: the call's output, then what hooks added
/// (in a `<hook_context>` block), each through the safety pass.
fn checked(safety: &Safety, raw: &str, hook_context: &[String]) -> Checked {
    let mut checked = safety.check(raw);
    if !hook_context.is_empty() {
        let added = safety.check(&hook_context.join("\n"));
        checked.text = format!(
            "{}\n\n<hook_context>\n{}\n</hook_context>",
            checked.text, added.text
        );
        checked.redactions.extend(added.redactions);
        checked.injections.extend(added.injections);
    }
    checked
}

/// What the safety pass did to a result, for its `tool_result` event
/// (a possible prompt injection is logged too).
fn safety_notes(call: &ToolCall, checked: &Checked) -> Vec<String> {
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
    notes
}

/// The task list a call set (`todo`), redacted, as a `plan` event.
fn emit_plan(env: &CallEnv, emitter: &mut Emitter, entries: Vec<PlanEntry>) {
    let entries = entries
        .into_iter()
        .map(|mut entry| {
            entry.content = env.safety.redact(&entry.content).0;
            entry
        })
        .collect();
    emitter.emit(Event::Plan { entries });
}

/// Tool arguments with secrets redacted, for the tape and the approval prompt.
#[allow(
    clippy::wildcard_enum_match_arm,
    reason = "serde_json's Value: scalars other than strings hold no secret"
)]
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
