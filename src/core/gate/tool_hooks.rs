//! The hooks the gate fires (`docs/hooks.md`): `PreToolUse` before the
//! policy sees a planned call, `PostToolUse` after it ran, `Notification`
//! when a person is needed; and what the gate keeps of their answers for
//! the call's result, its receipt and the person ([`HookNotes`]).

use super::CallEnv;
use crate::core::emitter::Emitter;
use crate::core::hooks::{self, HookEvent, HookInput, HookOutcome};
use crate::core::ids::SessionId;
use crate::core::session::ToolCall;
use crate::core::tool::ToolOutput;

/// What the hooks of a call said, for its result, its receipt and the
/// person.
#[derive(Debug, Default)]
pub(super) struct HookNotes {
    /// `hook: decision`, for the receipt.
    pub record: Vec<String>,
    /// Added to the result the model reads: hooks' context and feedback.
    pub context: Vec<String>,
    /// Shown to the person.
    pub messages: Vec<String>,
}

impl HookNotes {
    pub fn add(&mut self, event: HookEvent, outcome: &HookOutcome) {
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

/// Shows a planned call (with the model's input) to the `PreToolUse`
/// hooks; `None` when the run was cancelled while they ran.
pub(super) async fn pre_tool_use(
    env: &CallEnv,
    emitter: &Emitter,
    call: &ToolCall,
) -> Option<HookOutcome> {
    let input = HookInput::new(
        HookEvent::PreToolUse,
        emitter.session_id().as_str(),
        env.ctx.workspace.clone(),
        env.mode.as_str(),
    )
    .in_run(Some(emitter.run_id().as_str()))
    .about("tool_name", &call.name)
    .with("tool_input", call.arguments.clone())
    .with("tool_use_id", call.id.clone());
    tokio::select! {
        biased;
        _ = env.ctx.cancel.cancelled() => None,
        pre = hooks::fire(&*env.gate.hooks, input) => Some(pre),
    }
}

/// Runs the `PostToolUse` hooks of a call that ran: their feedback and
/// context join what the model reads of the result.
pub(super) async fn post_tool_use(
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

/// Tells the `Notification` hooks that a person is needed; nothing waits
/// for them.
pub(super) fn notify(env: &CallEnv, session: &SessionId, kind: &str, message: String, title: &str) {
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
