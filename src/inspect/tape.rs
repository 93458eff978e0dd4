//! `pincer tape RUN`: a run's events, a line each (or as JSON lines).

use super::print;
use crate::app::{Failure, Flags, exit};
use crate::cli::TapeArgs;
use crate::core::event::{CompactionTrigger, ContextUse, Event, EventRecord, StopReason};
use crate::core::ids::RunId;
use crate::core::tool::PlanStatus;
use crate::core::usage::{Cost, Usage};
use crate::stdout::timestamp as time;

pub async fn tape(flags: &Flags, args: &TapeArgs) -> Result<u8, Failure> {
    let opened = crate::app::App::open(flags).await?;
    let runtime = opened.runtime;
    let events = runtime
        .tape(&RunId::from_string(args.run.clone()), 0)
        .await
        .map_err(Failure::usage)?;
    let mut out = String::new();
    for record in &events {
        if args.json {
            out.push_str(&serde_json::to_string(record).map_err(Failure::failed)?);
            out.push('\n');
        } else {
            out.push_str(&tape_line(record));
        }
    }
    print(&out)?;
    opened.store.shutdown();
    Ok(exit::OK)
}

/// One event as a line: its number, its time and what happened.
fn tape_line(record: &EventRecord) -> String {
    format!(
        "{:>5}  {}  {}\n",
        record.seq,
        time(record.at),
        what(&record.event)
    )
}

/// What an event says, in a line. Each event has its arm; a long one is
/// worded by a function of its own below.
fn what(event: &Event) -> String {
    match event {
        Event::State {
            state,
            stop_reason,
            error,
            usage,
            cost,
        } => state_line(
            state.as_str(),
            *stop_reason,
            error.as_deref(),
            usage.as_ref(),
            cost.as_ref(),
        ),
        Event::UserMessage { content } => {
            let text: Vec<String> = content.iter().map(|p| p.to_model_text()).collect();
            format!("user {:?}", text.join(" "))
        }
        Event::ModelTurn {
            index,
            provider,
            model,
        } => format!("model turn {index} ({provider}/{model})"),
        Event::TextDelta { text } => format!("text {text:?}"),
        Event::ThoughtDelta { text } => format!("thought {text:?}"),
        Event::Usage {
            usage,
            model,
            cost,
            context,
            ..
        } => usage_line(usage, model.as_deref(), cost.as_ref(), context.as_ref()),
        Event::ToolCall {
            id,
            name,
            arguments,
            kind,
        } => format!("tool call {id} {name} ({}) {arguments}", kind.as_str()),
        Event::ToolPlanned { id, title, .. } => format!("tool planned {id} {title:?}"),
        Event::ToolStarted { id } => format!("tool started {id}"),
        Event::ToolProgress {
            id,
            output,
            terminal_id,
        } => match (output, terminal_id) {
            (_, Some(terminal)) => format!("tool progress {id} in terminal {terminal}"),
            (Some(output), None) => format!("tool progress {id} {output:?}"),
            (None, None) => format!("tool progress {id}"),
        },
        Event::ToolResult {
            id,
            output,
            is_error,
            verdict,
            diffs: _,
            safety,
        } => result_line(id, output, *is_error, verdict.as_str(), safety),
        Event::SubagentStarted {
            call_id,
            session_id,
            run_id,
            task,
        } => format!("subagent started by {call_id}: session {session_id}, run {run_id}: {task:?}"),
        Event::SubagentEnded {
            session_id,
            run_id,
            state,
            stop_reason,
            ..
        } => format!(
            "subagent ended: session {session_id}, run {run_id} {}{}",
            state.as_str(),
            reason(*stop_reason)
        ),
        Event::ApprovalRequested {
            approval_id,
            call_id,
            reason,
            ..
        } => format!("approval requested {approval_id} for {call_id}: {reason}"),
        Event::ApprovalDecided {
            approval_id,
            decision,
            ..
        } => format!("approval decided {approval_id}: {}", decision.as_str()),
        Event::QuestionAsked {
            question_id,
            call_id,
            question,
            options,
        } if options.is_empty() => {
            format!("question asked {question_id} for {call_id}: {question:?}")
        }
        Event::QuestionAsked {
            question_id,
            call_id,
            question,
            options,
        } => format!("question asked {question_id} for {call_id}: {question:?} {options:?}"),
        Event::QuestionAnswered {
            question_id,
            outcome,
            answer,
            ..
        } => match answer {
            Some(answer) => format!("question answered {question_id}: {answer:?}"),
            None => format!("question answered {question_id}: {}", outcome.as_str()),
        },
        Event::Plan { entries } => {
            let done = entries
                .iter()
                .filter(|e| e.status == PlanStatus::Completed)
                .count();
            format!("plan {done}/{} done", entries.len())
        }
        Event::SessionInfo { title } => format!("session title {title:?}"),
        Event::Notice { message } => format!("notice {message:?}"),
        Event::Retrying { .. } => event.retry_status().unwrap_or_default(),
        Event::SkillActivated { location, .. } => format!(
            "{} at {}",
            event.skill_status().unwrap_or_default(),
            location.display()
        ),
        Event::Compaction {
            compaction_id,
            trigger,
            status,
            error,
            ..
        } => format!(
            "compaction {compaction_id} ({}) {}{}",
            match trigger {
                CompactionTrigger::Manual => "manual",
                CompactionTrigger::Auto => "auto",
            },
            status.as_str(),
            error
                .as_ref()
                .map(|e| format!(": {e:?}"))
                .unwrap_or_default()
        ),
    }
}

/// ` (REASON)`, or nothing.
fn reason(stop_reason: Option<StopReason>) -> String {
    stop_reason
        .map(|r| format!(" ({})", r.as_str()))
        .unwrap_or_default()
}

/// A run's move to a state, with how it ended and what it used.
fn state_line(
    state: &str,
    stop_reason: Option<StopReason>,
    error: Option<&str>,
    usage: Option<&Usage>,
    cost: Option<&Cost>,
) -> String {
    let mut line = format!("state {state}{}", reason(stop_reason));
    if let Some(error) = error {
        line.push_str(&format!(": {error}"));
    }
    if let Some(usage) = usage {
        line.push_str(&format!(
            "; run tokens in {} out {}",
            usage.input_tokens, usage.output_tokens
        ));
    }
    if let Some(cost) = cost {
        line.push_str(&format!(", cost {cost}"));
    }
    line
}

/// A model turn's tokens, model, cost and context.
fn usage_line(
    usage: &Usage,
    model: Option<&str>,
    cost: Option<&Cost>,
    context: Option<&ContextUse>,
) -> String {
    let mut line = format!(
        "usage in {} out {}",
        usage.input_tokens, usage.output_tokens
    );
    if usage.cached_input_tokens > 0 {
        line.push_str(&format!(" (cached {})", usage.cached_input_tokens));
    }
    if let Some(model) = model {
        line.push_str(&format!(" on {model}"));
    }
    if let Some(cost) = cost {
        line.push_str(&format!(", cost {cost}"));
    }
    if let Some(context) = context {
        line.push_str(&format!(", context {}/{}", context.used, context.size));
    }
    line
}

/// A tool call's result, with the gate's verdict and the safety pass's notes.
fn result_line(id: &str, output: &str, is_error: bool, verdict: &str, safety: &[String]) -> String {
    let mut line = format!(
        "tool {} {id} [{verdict}] {output:?}",
        if is_error { "error" } else { "result" },
    );
    if !safety.is_empty() {
        line.push_str(&format!(" ({})", safety.join("; ")));
    }
    line
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn line(value: serde_json::Value) -> String {
        what(&serde_json::from_value(value).unwrap())
    }

    #[test]
    fn each_event_group_has_its_words() {
        assert_eq!(
            line(
                json!({"type": "state", "state": "completed", "stop_reason": "end_turn",
                "usage": {"input_tokens": 5, "output_tokens": 2}})
            ),
            "state completed (end_turn); run tokens in 5 out 2"
        );
        assert_eq!(
            line(json!({"type": "state", "state": "failed", "error": "boom"})),
            "state failed: boom"
        );
        assert_eq!(
            line(
                json!({"type": "usage", "usage": {"input_tokens": 5, "output_tokens": 2,
                "cached_input_tokens": 3}, "model": "m", "context": {"used": 7, "size": 100}})
            ),
            "usage in 5 out 2 (cached 3) on m, context 7/100"
        );
        assert_eq!(
            line(
                json!({"type": "tool_result", "id": "c1", "output": "ok", "is_error": false,
                "verdict": "allowed", "safety": ["redacted 1 secret"]})
            ),
            "tool result c1 [allowed] \"ok\" (redacted 1 secret)"
        );
        assert_eq!(
            line(json!({"type": "tool_progress", "id": "c1", "terminal_id": "t1"})),
            "tool progress c1 in terminal t1"
        );
        assert_eq!(
            line(
                json!({"type": "question_asked", "question_id": "q1", "call_id": "c1",
                "question": "Which?", "options": ["a", "b"]})
            ),
            "question asked q1 for c1: \"Which?\" [\"a\", \"b\"]"
        );
        assert_eq!(
            line(
                json!({"type": "question_answered", "question_id": "q1", "call_id": "c1",
                "outcome": "declined"})
            ),
            "question answered q1: declined"
        );
        assert_eq!(
            line(
                json!({"type": "plan", "entries": [{"content": "a", "status": "completed"},
                {"content": "b", "status": "pending"}]})
            ),
            "plan 1/2 done"
        );
    }

    #[test]
    fn a_line_is_numbered_and_timed() {
        let record: EventRecord = serde_json::from_value(json!({
            "session_id": "ses_1", "run_id": "run_1", "seq": 7, "at": 0,
            "type": "notice", "message": "hi"
        }))
        .unwrap();
        let line = tape_line(&record);
        assert!(line.starts_with("    7  "), "{line}");
        assert!(line.ends_with("  notice \"hi\"\n"), "{line}");
    }
}
