//! How `pincer run` shows its runs, chosen once from `--output`: `Text`
//! puts the reply on stdout and a line of progress per step on stderr;
//! `Jsonl` puts every event on stdout as a JSON line.

use std::collections::HashMap;

use crate::cli::ApprovePolicy;
use crate::core::approval::ApprovalDecision;
use crate::core::event::{Event, EventRecord};
use crate::core::ids::RunId;
use crate::core::run::RunOutcome;
use crate::core::session::Session;
use crate::core::tool::ToolKind;
use crate::stdout::LineSender;

/// An approval a run asked for, as the output names it.
pub(super) struct Asked<'a> {
    pub tool: &'a str,
    pub kind: ToolKind,
    pub title: &'a str,
    pub reason: &'a str,
}

/// What `pincer run` shows, one method a moment of the run.
pub(super) trait Show {
    /// Before the first prompt: the session the prompts run in.
    async fn session(&mut self, session: &Session);
    /// An approval answered by the script or by `--approve`.
    async fn approval(
        &mut self,
        asked: &Asked<'_>,
        decision: ApprovalDecision,
        approve: ApprovePolicy,
    );
    /// An event of the run, after any approval or question in it was answered.
    async fn event(&mut self, record: &EventRecord);
    /// The run ended.
    async fn end(&mut self, run: &RunId, end: &RunOutcome);
}

/// `--output text`: the reply on stdout, progress on stderr.
pub(super) struct Text<'a> {
    out: &'a LineSender,
    /// Whether the reply so far ends a line (so progress may follow it).
    ended_with_newline: bool,
    /// The text of each question asked and not answered yet, by id.
    asking: HashMap<String, String>,
}

impl<'a> Text<'a> {
    pub fn new(out: &'a LineSender) -> Self {
        Self {
            out,
            ended_with_newline: true,
            asking: HashMap::new(),
        }
    }

    /// Ends the reply's line and waits until stdout has it, so that a
    /// progress line on stderr never runs into the reply on a terminal.
    async fn settle(&mut self) {
        if !self.ended_with_newline {
            self.out.send(b"\n".to_vec()).await;
            self.ended_with_newline = true;
        }
        self.out.written().await;
    }
}

impl Show for Text<'_> {
    async fn session(&mut self, session: &Session) {
        eprintln!(
            "pincer: session {} ({})",
            session.id,
            session.workspace.display()
        );
    }

    async fn approval(
        &mut self,
        asked: &Asked<'_>,
        decision: ApprovalDecision,
        approve: ApprovePolicy,
    ) {
        self.settle().await;
        if decision == ApprovalDecision::Unattended {
            eprintln!("{}", refused(asked, approve));
        } else {
            eprintln!(
                "pincer: approval needed: {} ({}) -> {}",
                asked.title,
                asked.reason,
                decision.as_str()
            );
        }
    }

    async fn event(&mut self, record: &EventRecord) {
        if let Event::TextDelta { text } = &record.event {
            if !text.is_empty() {
                self.ended_with_newline = text.ends_with('\n');
            }
            self.out.send(text.as_bytes().to_vec()).await;
            return;
        }
        if let Some(lines) = progress(&record.event, &mut self.asking) {
            self.settle().await;
            for line in lines {
                eprintln!("pincer: {line}");
            }
        }
    }

    async fn end(&mut self, run: &RunId, end: &RunOutcome) {
        self.settle().await;
        eprintln!("pincer: {}", end_line(run, end));
    }
}

/// `--output jsonl`: every event on stdout as a JSON line.
pub(super) struct Jsonl<'a> {
    out: &'a LineSender,
}

impl<'a> Jsonl<'a> {
    pub fn new(out: &'a LineSender) -> Self {
        Self { out }
    }
}

impl Show for Jsonl<'_> {
    async fn session(&mut self, session: &Session) {
        let line = serde_json::json!({
            "type": "session",
            "session_id": session.id.as_str(),
            "workspace": session.workspace,
            "provider": session.provider,
            "model": session.model,
        });
        self.out.send(json_line(&line)).await;
    }

    async fn approval(
        &mut self,
        asked: &Asked<'_>,
        decision: ApprovalDecision,
        approve: ApprovePolicy,
    ) {
        // On stderr in both formats: the person reading the log needs to
        // know what would have let the call run.
        if decision == ApprovalDecision::Unattended {
            eprintln!("{}", refused(asked, approve));
        }
    }

    async fn event(&mut self, record: &EventRecord) {
        // A notice is for the person reading the log as well (a prompt
        // waiting for another process, an untrusted workspace's hooks).
        if let Event::Notice { message } = &record.event {
            eprintln!("pincer: {message}");
        }
        self.out.send(json_line(record)).await;
    }

    async fn end(&mut self, _run: &RunId, _end: &RunOutcome) {}
}

/// What stderr says of a call refused because nobody could approve it.
fn refused(asked: &Asked<'_>, approve: ApprovePolicy) -> String {
    format!(
        "pincer: refused {} ({}): it needs approval ({}) and nobody \
         can give it in this run; pass {} to approve such calls (or --mode full to \
         run them unasked, but for writes to protected paths and user-scope memories)",
        asked.tool,
        asked.title,
        asked.reason,
        if asked.kind.is_read_only() || approve == ApprovePolicy::Reads {
            "--approve all"
        } else {
            "--approve all (--approve reads for reads and searches only)"
        }
    )
}

/// The lines (after `pincer: `) an event shows on stderr in text output;
/// `None` for an event that shows none. Remembers each question asked, to
/// name it with its answer.
fn progress(event: &Event, asking: &mut HashMap<String, String>) -> Option<Vec<String>> {
    let line = match event {
        Event::ToolCall {
            name, arguments, ..
        } => format!("tool call {name} {arguments}"),
        Event::ToolResult {
            output, is_error, ..
        } => {
            let status = if *is_error { "failed" } else { "done" };
            format!("tool {status}: {}", first_line(output))
        }
        Event::ApprovalDecided { decision, .. } => format!("approval {}", decision.as_str()),
        Event::Notice { message } => message.clone(),
        Event::Retrying { .. } => event.retry_status()?,
        Event::SkillActivated { .. } => event.skill_status()?,
        Event::QuestionAsked {
            question_id,
            question,
            ..
        } => {
            asking.insert(question_id.clone(), question.clone());
            return None;
        }
        // Shown as the tape has it: the answer redacted like tool output,
        // never as the script typed it.
        Event::QuestionAnswered {
            question_id,
            outcome,
            answer,
            ..
        } => format!(
            "question: {} -> {}",
            asking.remove(question_id).unwrap_or_default(),
            answer.as_deref().unwrap_or(outcome.as_str())
        ),
        Event::SubagentStarted {
            session_id, task, ..
        } => format!("subagent {session_id} started: {}", first_line(task)),
        Event::SubagentEnded {
            session_id,
            state,
            stop_reason,
            ..
        } => format!(
            "subagent {session_id} {}{}",
            state.as_str(),
            stop_reason
                .map(|r| format!(" ({})", r.as_str()))
                .unwrap_or_default()
        ),
        Event::Plan { entries } => {
            return Some(
                entries
                    .iter()
                    .map(|entry| format!("plan {} {}", entry.status.mark(), entry.content))
                    .collect(),
            );
        }
        Event::State { .. }
        | Event::UserMessage { .. }
        | Event::ModelTurn { .. }
        | Event::TextDelta { .. }
        | Event::ThoughtDelta { .. }
        | Event::ToolPlanned { .. }
        | Event::ApprovalRequested { .. }
        | Event::ToolStarted { .. }
        | Event::ToolProgress { .. }
        | Event::Compaction { .. }
        | Event::SessionInfo { .. }
        | Event::Usage { .. } => return None,
    };
    Some(vec![line])
}

/// The line (after `pincer: `) that says how a run ended.
fn end_line(run: &RunId, end: &RunOutcome) -> String {
    match (end.error(), end.stop_reason()) {
        (Some(error), _) => format!("run {run} failed: {error}"),
        (None, Some(reason)) => format!("run {run} {} ({})", end.state().as_str(), reason.as_str()),
        (None, None) => format!("run {run} {}", end.state().as_str()),
    }
}

fn first_line(text: &str) -> &str {
    text.lines().next().unwrap_or("")
}

fn json_line<T: serde::Serialize>(value: &T) -> Vec<u8> {
    let mut line = serde_json::to_vec(value).unwrap_or_default();
    line.push(b'\n');
    line
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn event(value: serde_json::Value) -> Event {
        serde_json::from_value(value).unwrap()
    }

    fn lines(
        value: serde_json::Value,
        asking: &mut HashMap<String, String>,
    ) -> Option<Vec<String>> {
        progress(&event(value), asking)
    }

    #[test]
    fn tool_steps_show_a_line_each() {
        let asking = &mut HashMap::new();
        assert_eq!(
            lines(
                json!({"type": "tool_call", "id": "c1", "name": "shell", "arguments": {"command": "ls"}}),
                asking
            ),
            Some(vec![r#"tool call shell {"command":"ls"}"#.to_owned()])
        );
        assert_eq!(
            lines(
                json!({"type": "tool_result", "id": "c1", "output": "no such file\nmore", "is_error": true}),
                asking
            ),
            Some(vec!["tool failed: no such file".to_owned()])
        );
        assert_eq!(
            lines(
                json!({"type": "plan", "entries": [
                    {"content": "read", "status": "completed"},
                    {"content": "write", "status": "in_progress"},
                    {"content": "test", "status": "pending"}
                ]}),
                asking
            ),
            Some(vec![
                "plan [x] read".to_owned(),
                "plan [~] write".to_owned(),
                "plan [ ] test".to_owned()
            ])
        );
        assert_eq!(
            lines(json!({"type": "tool_started", "id": "c1"}), asking),
            None
        );
        assert_eq!(
            lines(json!({"type": "text_delta", "text": "hi"}), asking),
            None
        );
    }

    #[test]
    fn an_answer_is_shown_with_its_question() {
        let asking = &mut HashMap::new();
        let asked = json!({"type": "question_asked", "question_id": "q1", "call_id": "c1",
            "question": "Which colour?", "options": ["red", "blue"]});
        assert_eq!(lines(asked, asking), None);
        let answered = json!({"type": "question_answered", "question_id": "q1", "call_id": "c1",
            "outcome": "answered", "answer": "blue"});
        assert_eq!(
            lines(answered.clone(), asking),
            Some(vec!["question: Which colour? -> blue".to_owned()])
        );
        assert!(asking.is_empty());
        let unattended = json!({"type": "question_answered", "question_id": "q2", "call_id": "c2",
            "outcome": "unattended"});
        assert_eq!(
            lines(unattended, asking),
            Some(vec!["question:  -> unattended".to_owned()])
        );
    }

    #[test]
    fn a_subagent_shows_its_start_and_end() {
        let asking = &mut HashMap::new();
        assert_eq!(
            lines(
                json!({"type": "subagent_started", "call_id": "c", "session_id": "ses_1",
                    "run_id": "run_1", "task": "look around\nand report"}),
                asking
            ),
            Some(vec!["subagent ses_1 started: look around".to_owned()])
        );
        assert_eq!(
            lines(
                json!({"type": "subagent_ended", "call_id": "c", "session_id": "ses_1",
                    "run_id": "run_1", "state": "completed", "stop_reason": "end_turn"}),
                asking
            ),
            Some(vec!["subagent ses_1 completed (end_turn)".to_owned()])
        );
    }

    #[test]
    fn the_end_line_names_the_error_or_the_reason() {
        let run = RunId::from_string("run_1".into());
        assert_eq!(
            end_line(&run, &RunOutcome::Failed("boom".into())),
            "run run_1 failed: boom"
        );
        assert_eq!(
            end_line(
                &run,
                &RunOutcome::Completed(crate::core::event::StopReason::MaxTurnRequests)
            ),
            "run run_1 completed (max_turn_requests)"
        );
        assert_eq!(
            end_line(&run, &RunOutcome::Cancelled),
            "run run_1 cancelled (cancelled)"
        );
    }

    #[test]
    fn a_refusal_says_which_flag_would_allow_it() {
        let asked = |kind| Asked {
            tool: "shell",
            kind,
            title: "ls",
            reason: "runs a command",
        };
        let refusal = refused(&asked(ToolKind::Execute), ApprovePolicy::Never);
        assert!(
            refusal.starts_with("pincer: refused shell (ls): it needs approval (runs a command)"),
            "{refusal}"
        );
        assert!(refusal.contains("(--approve reads for reads and searches only)"));
        let refusal = refused(&asked(ToolKind::Read), ApprovePolicy::Never);
        assert!(
            refusal.contains("pass --approve all to approve"),
            "{refusal}"
        );
    }
}
