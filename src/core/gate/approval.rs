//! Asking a person: an approval for a call the policy (or a hook) asks
//! about, or a question a call asks (`ask_user`). The run waits in state
//! `waiting` for the first answer from any face that may give it, the
//! timeout, or a cancel; `Notification` hooks are told a person is needed.

use std::time::Duration;

use tokio::sync::oneshot;
use tokio_util::sync::CancellationToken;

use super::tool_hooks::notify;
use super::{CallEnv, redact_json};
use crate::core::approval::ApprovalDecision;
use crate::core::emitter::Emitter;
use crate::core::event::{Event, RunState};
use crate::core::ids::SessionId;
use crate::core::policy::grants_for;
use crate::core::question::{Question, QuestionAnswer, QuestionOutcome};
use crate::core::session::ToolCall;
use crate::core::tool::{Plan, ToolKind};

/// What the model reads when the person rejected a call (faces show the
/// person something of their own instead).
pub const REJECTED_BY_THE_USER: &str =
    "rejected by the user: do not retry this call; ask the user what to do instead";

/// A call a person is asked to approve, as they are shown it.
pub(super) struct Request<'a> {
    pub call: &'a ToolCall,
    /// The input it runs with (the model's, or a hook's).
    pub arguments: &'a serde_json::Value,
    pub kind: ToolKind,
    pub plan: &'a Plan,
    /// The plan's title, redacted.
    pub title: String,
    /// Why it needs approval.
    pub reason: String,
}

/// Asks for an approval and waits in state `waiting` for the first answer, the
/// timeout, or a cancel. Remembers `*_always` answers.
pub(super) async fn ask(
    env: &CallEnv,
    emitter: &mut Emitter,
    request: Request<'_>,
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
            env.safety.redact(&request.title).0
        ),
        "Approval needed",
    );
    let call = request.call;
    let asked = emitter.emit(Event::ApprovalRequested {
        approval_id: approval_id.clone(),
        call_id: call.id.clone(),
        tool: call.name.clone(),
        kind: request.kind,
        title: request.title,
        reason: request.reason,
        arguments: redact_json(&env.safety, request.arguments),
        locations: request.plan.locations(),
        command: request
            .plan
            .command
            .as_ref()
            .map(|c| env.safety.redact(c).0),
        diffs: request.plan.diffs.clone(),
    });
    env.approvals.describe(&approval_id, asked);
    let decision = first_answer(
        &env.ctx.cancel,
        answer,
        env.gate.approval_timeout,
        || ApprovalDecision::Cancelled,
        ApprovalDecision::TimedOut,
    )
    .await;
    env.approvals.close(&approval_id);
    emitter.emit(Event::ApprovalDecided {
        approval_id,
        call_id: call.id.clone(),
        decision,
    });
    stop_waiting(emitter, decision == ApprovalDecision::Cancelled);
    remember(env, emitter, call, request.plan, decision);
    decision
}

/// What an approval's answer makes of the call: `Ok` runs it (approved),
/// `Err` refuses it with what the model reads; `None`: the run was
/// cancelled while it waited.
pub(super) fn answered(
    decision: ApprovalDecision,
    timeout: Option<Duration>,
) -> Option<Result<(), String>> {
    match decision {
        ApprovalDecision::Cancelled => None,
        ApprovalDecision::AllowOnce | ApprovalDecision::AllowAlways => Some(Ok(())),
        ApprovalDecision::RejectOnce | ApprovalDecision::RejectAlways => {
            Some(Err(REJECTED_BY_THE_USER.to_owned()))
        }
        ApprovalDecision::Unattended => Some(Err(
            "refused: this call needs a person's approval and nobody is present \
             to give it (a non-interactive run); do not retry it; tell the user \
             which call needs approval"
                .to_owned(),
        )),
        ApprovalDecision::TimedOut => Some(Err(format!(
            "rejected: nobody approved the call within {} s",
            timeout.map_or(0, |t| t.as_secs())
        ))),
    }
}

/// Keeps an `allow_always` / `reject_always` answer as the session's
/// grants (replacing any of the same tool and scope) and records them.
fn remember(
    env: &CallEnv,
    emitter: &Emitter,
    call: &ToolCall,
    plan: &Plan,
    decision: ApprovalDecision,
) {
    let allow = match decision {
        ApprovalDecision::AllowAlways => true,
        ApprovalDecision::RejectAlways => false,
        ApprovalDecision::AllowOnce
        | ApprovalDecision::RejectOnce
        | ApprovalDecision::TimedOut
        | ApprovalDecision::Cancelled
        | ApprovalDecision::Unattended => return,
    };
    let new = grants_for(&call.name, plan, allow);
    let mut grants = env.grants.lock();
    for grant in new {
        grants.retain(|g| !(g.tool == grant.tool && g.scope == grant.scope));
        emitter.remember(grant.clone());
        grants.push(grant);
    }
}

/// Asks the person a question and waits in state `waiting` for the first
/// answer, the timeout, or a cancel.
pub(super) async fn ask_question(
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
    let asked = emitter.emit(Event::QuestionAsked {
        question_id: question_id.clone(),
        call_id: call.id.clone(),
        question: text,
        options,
    });
    env.questions.describe(&question_id, asked);
    let answer = first_answer(
        &env.ctx.cancel,
        answer,
        env.gate.question_timeout,
        || QuestionAnswer::without(QuestionOutcome::Cancelled),
        QuestionAnswer::without(QuestionOutcome::TimedOut),
    )
    .await;
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
    stop_waiting(emitter, answer.outcome == QuestionOutcome::Cancelled);
    answer
}

/// The first of: a cancel, the answer (a request closed unanswered counts
/// as cancelled), the end of `limit` (`None`: no limit).
async fn first_answer<T>(
    cancel: &CancellationToken,
    answer: oneshot::Receiver<T>,
    limit: Option<Duration>,
    cancelled: impl Fn() -> T,
    timed_out: T,
) -> T {
    let timeout = async {
        match limit {
            Some(limit) => tokio::time::sleep(limit).await,
            None => std::future::pending().await,
        }
    };
    tokio::select! {
        biased;
        _ = cancel.cancelled() => cancelled(),
        answer = answer => answer.unwrap_or_else(|_| cancelled()),
        _ = timeout => timed_out,
    }
}

/// The run works again once answered; a cancelled run stays `waiting`
/// until it ends.
fn stop_waiting(emitter: &mut Emitter, cancelled: bool) {
    if !cancelled {
        emitter.set_state(RunState::Running);
    }
}

/// The sessions whose faces may answer the run's approvals and questions.
fn answerers(env: &CallEnv, emitter: &Emitter) -> Vec<SessionId> {
    std::iter::once(emitter.session_id().clone())
        .chain(env.answerers.iter().cloned())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_approval_runs_the_call_rejects_it_or_leaves_it_to_the_cancel() {
        let limit = Some(Duration::from_secs(90));
        assert_eq!(answered(ApprovalDecision::Cancelled, limit), None);
        for allowed in [ApprovalDecision::AllowOnce, ApprovalDecision::AllowAlways] {
            assert_eq!(answered(allowed, limit), Some(Ok(())), "{allowed:?}");
        }
        for rejected in [ApprovalDecision::RejectOnce, ApprovalDecision::RejectAlways] {
            assert_eq!(
                answered(rejected, limit),
                Some(Err(REJECTED_BY_THE_USER.to_owned())),
                "{rejected:?}"
            );
        }
        assert_eq!(
            answered(ApprovalDecision::TimedOut, limit),
            Some(Err(
                "rejected: nobody approved the call within 90 s".to_owned()
            ))
        );
        let unattended = answered(ApprovalDecision::Unattended, limit);
        assert!(
            matches!(&unattended, Some(Err(m)) if m.starts_with("refused: this call needs a person's approval and nobody is present")),
            "{unattended:?}"
        );
    }
}
