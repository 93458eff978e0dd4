//! How one run's events are shown in the terminal: the reply as rendered
//! Markdown, the model's thinking dimmed, a line per tool call and its
//! outcome, approvals with their command or diff, questions with their
//! options, the plan, and how the run ended.

use std::collections::HashMap;

use super::markdown::{Dimmed, Markdown, sanitize};
use crate::core::approval::ApprovalDecision;
use crate::core::event::{Event, RunState, StopReason};
use crate::core::question::QuestionOutcome;
use crate::core::receipt::Verdict;
use crate::core::tool::{FileDiff, PlanEntry, ToolKind};

/// Lines of a diff shown with an approval; the rest are counted.
const DIFF_LINES: usize = 60;

/// Lines of a running call's output shown as they come; the rest are
/// counted.
const PROGRESS_LINES: usize = 20;

pub(super) const RESET: &str = "\x1b[0m";
pub(super) const BOLD: &str = "\x1b[1m";
pub(super) const DIM: &str = "\x1b[2m";
pub(super) const RED: &str = "\x1b[31m";
pub(super) const GREEN: &str = "\x1b[32m";
pub(super) const YELLOW: &str = "\x1b[33m";
pub(super) const CYAN: &str = "\x1b[36m";

/// `text` in a style when colors are on; a trailing newline stays outside it.
pub(super) fn styled(color: bool, style: &str, text: &str) -> String {
    if !color {
        return text.to_owned();
    }
    match text.strip_suffix('\n') {
        Some(body) => format!("{style}{body}{RESET}\n"),
        None => format!("{style}{text}{RESET}"),
    }
}

/// How one run's events are shown.
pub(super) struct View {
    color: bool,
    pub reply: Markdown,
    pub thoughts: Dimmed,
    /// Tool calls seen, by id: the tool's name and kind, and whether a line
    /// shows them yet.
    tools: HashMap<String, (String, ToolKind, bool)>,
    /// Lines of live output seen per running call.
    progress: HashMap<String, usize>,
}

impl View {
    pub fn new(color: bool) -> Self {
        Self {
            color,
            reply: Markdown::new(color),
            thoughts: Dimmed::new(color),
            tools: HashMap::new(),
            progress: HashMap::new(),
        }
    }

    /// Ends the lines in progress, before something else is shown.
    pub fn flush(&mut self, out: &mut String) {
        self.thoughts.finish(out);
        self.reply.finish(out);
    }

    /// Adds what `event` shows to `out`. Streamed text goes on the line in
    /// progress; anything else ends it first and shows lines of its own.
    pub fn show(&mut self, event: &Event, out: &mut String) {
        let color = self.color;
        match event {
            Event::TextDelta { text } => {
                self.thoughts.finish(out);
                self.reply.push(text, out);
            }
            Event::ThoughtDelta { text } => {
                if self.reply.has_pending() {
                    self.reply.finish(out);
                }
                self.thoughts.push(text, out);
            }
            Event::ToolCall { id, name, kind, .. } => {
                self.flush(out);
                self.tools.insert(id.clone(), (name.clone(), *kind, false));
            }
            Event::ToolPlanned { id, title, .. } => {
                self.flush(out);
                let kind = match self.tools.get_mut(id) {
                    Some((_, kind, shown)) => {
                        *shown = true;
                        *kind
                    }
                    None => ToolKind::Other,
                };
                out.push_str(&tool_line(color, title, kind));
            }
            Event::ApprovalRequested {
                tool,
                title,
                reason,
                command,
                diffs,
                ..
            } => {
                self.flush(out);
                let asked = Asked {
                    tool,
                    title,
                    reason,
                    command: command.as_deref(),
                };
                out.push_str(&approval(color, &asked, diffs));
            }
            Event::QuestionAsked {
                question, options, ..
            } => {
                self.flush(out);
                out.push_str(&question_text(color, question, options));
            }
            Event::SubagentStarted { task, .. } => {
                self.flush(out);
                let line = task.lines().next().unwrap_or("");
                let line = format!("  subagent started: {}\n", sanitize(line));
                out.push_str(&styled(color, DIM, &line));
            }
            Event::SubagentEnded {
                state, stop_reason, ..
            } => {
                self.flush(out);
                let line = format!("  subagent {}{}\n", state.as_str(), reason(*stop_reason));
                out.push_str(&styled(color, DIM, &line));
            }
            Event::QuestionAnswered { outcome, .. } => {
                if *outcome == QuestionOutcome::TimedOut {
                    out.push_str(&styled(color, DIM, "  no answer in time\n"));
                }
            }
            Event::ApprovalDecided { decision, .. } => {
                if *decision == ApprovalDecision::TimedOut {
                    out.push_str(&styled(color, DIM, "  approval timed out\n"));
                }
            }
            Event::ToolProgress {
                id,
                output: Some(lines),
                ..
            } => {
                self.flush(out);
                self.progress(id, lines, out);
            }
            Event::ToolResult {
                id,
                output,
                is_error,
                verdict,
                ..
            } => {
                self.flush(out);
                self.result(id, out);
                out.push_str(&outcome(color, *verdict, *is_error, output));
            }
            Event::Plan { entries } => {
                self.flush(out);
                out.push_str(&plan(entries));
            }
            Event::Notice { message } => {
                self.flush(out);
                out.push_str(&styled(color, YELLOW, &format!("{}\n", sanitize(message))));
            }
            Event::SkillActivated { .. } => {
                self.flush(out);
                let status = event.skill_status().unwrap_or_default();
                out.push_str(&styled(color, DIM, &format!("{}\n", sanitize(&status))));
            }
            Event::State {
                state,
                stop_reason,
                error,
                ..
            } if state.is_terminal() => {
                self.flush(out);
                out.push_str(&end(color, *state, *stop_reason, error.as_deref()));
                out.push('\n');
            }
            Event::State { .. }
            | Event::UserMessage { .. }
            | Event::ModelTurn { .. }
            | Event::ToolStarted { .. }
            | Event::ToolProgress { output: None, .. }
            | Event::Compaction { .. }
            | Event::SessionInfo { .. }
            // On the indicator's line, or a line of its own (`Chat::run`).
            | Event::Retrying { .. }
            | Event::Usage { .. } => {}
        }
    }

    /// A running call's output, a line at a time up to [`PROGRESS_LINES`].
    fn progress(&mut self, id: &str, lines: &str, out: &mut String) {
        let shown = self.progress.entry(id.to_owned()).or_insert(0);
        for line in lines.lines() {
            if *shown < PROGRESS_LINES {
                out.push_str(&styled(
                    self.color,
                    DIM,
                    &format!("  | {}\n", sanitize(line)),
                ));
            } else if *shown == PROGRESS_LINES {
                out.push_str(&styled(self.color, DIM, "  | ...\n"));
            }
            *shown += 1;
        }
    }

    /// Before a call's outcome: how much output it had when it was cut,
    /// and its line when no plan showed one.
    fn result(&mut self, id: &str, out: &mut String) {
        if let Some(lines) = self.progress.remove(id)
            && lines > PROGRESS_LINES
        {
            let line = format!("  | ({lines} lines of output in all)\n");
            out.push_str(&styled(self.color, DIM, &line));
        }
        if let Some((name, kind, false)) = self.tools.get(id) {
            out.push_str(&tool_line(self.color, name, *kind));
        }
    }
}

/// A tool call's line: its title (or name) and its kind.
fn tool_line(color: bool, title: &str, kind: ToolKind) -> String {
    let mut line = styled(color, BOLD, &format!("* {}", sanitize(title)));
    line.push_str(&styled(color, DIM, &format!(" [{}]\n", kind.as_str())));
    line
}

/// ` (REASON)`, or nothing.
fn reason(stop_reason: Option<StopReason>) -> String {
    stop_reason
        .map(|r| format!(" ({})", r.as_str()))
        .unwrap_or_default()
}

/// An approval as the person is asked it.
struct Asked<'a> {
    tool: &'a str,
    title: &'a str,
    reason: &'a str,
    command: Option<&'a str>,
}

/// The approval asked: what, why, and the command or the changes.
fn approval(color: bool, asked: &Asked<'_>, diffs: &[FileDiff]) -> String {
    let mut out = styled(
        color,
        YELLOW,
        &format!(
            "Approval needed: {} ({}, {})\n",
            sanitize(asked.title),
            sanitize(asked.tool),
            sanitize(asked.reason)
        ),
    );
    if let Some(command) = asked.command {
        out.push_str(&format!("    $ {}\n", sanitize(command)));
    }
    for diff in diffs {
        show_diff(color, diff, &mut out);
    }
    out
}

/// A question to the person, with its numbered options.
fn question_text(color: bool, question: &str, options: &[String]) -> String {
    let mut out = styled(
        color,
        YELLOW,
        &format!("Question: {}\n", sanitize(question)),
    );
    for (index, option) in options.iter().enumerate() {
        out.push_str(&format!("  {}. {}\n", index + 1, sanitize(option)));
    }
    out
}

/// How a call ended, for the person.
fn outcome(color: bool, verdict: Verdict, is_error: bool, output: &str) -> String {
    let first = sanitize(output.lines().next().unwrap_or(""));
    match verdict {
        // The sentence the model reads ("do not retry…") is not for the
        // person who said no.
        Verdict::Rejected if output.starts_with(crate::core::gate::REJECTED_BY_THE_USER) => {
            styled(color, RED, "  rejected: you said no\n")
        }
        Verdict::Cancelled => styled(color, RED, "  cancelled\n"),
        Verdict::Denied | Verdict::Rejected | Verdict::Invalid => {
            styled(color, RED, &format!("  refused: {first}\n"))
        }
        Verdict::Allowed | Verdict::Approved if is_error => {
            styled(color, RED, &format!("  failed: {first}\n"))
        }
        Verdict::Allowed | Verdict::Approved => styled(color, GREEN, "  done\n"),
    }
}

/// The plan, an entry a line with its mark.
fn plan(entries: &[PlanEntry]) -> String {
    let mut out = String::new();
    for entry in entries {
        out.push_str(&format!(
            "  {} {}\n",
            entry.status.mark(),
            sanitize(&entry.content)
        ));
    }
    out
}

/// How the run ended, when that is worth a line (not a plain end of turn).
fn end(
    color: bool,
    state: RunState,
    stop_reason: Option<StopReason>,
    error: Option<&str>,
) -> String {
    match (state, stop_reason, error) {
        (RunState::Failed, _, Some(error)) => {
            styled(color, RED, &format!("error: {}\n", sanitize(error)))
        }
        (RunState::Failed, _, None) => styled(color, RED, "error: the run failed\n"),
        (RunState::Cancelled, _, _) => styled(color, DIM, "(cancelled)\n"),
        (_, Some(StopReason::EndTurn) | None, _) => String::new(),
        (_, Some(reason), _) => styled(color, DIM, &format!("(stopped: {})\n", reason.as_str())),
    }
}

/// Whether an event shows the model at work (so the indicator goes).
pub(super) fn shows_output(event: &Event) -> bool {
    !matches!(
        event,
        Event::State { .. }
            | Event::UserMessage { .. }
            | Event::SessionInfo { .. }
            | Event::ModelTurn { .. }
            | Event::Retrying { .. }
            | Event::Usage { .. }
    )
}

/// Whether an event only adds to the output (the run loop does nothing else
/// with it), so the events after it may be shown in the same write.
pub(super) fn is_plain_output(event: &Event) -> bool {
    matches!(
        event,
        Event::TextDelta { .. } | Event::ThoughtDelta { .. } | Event::Usage { .. }
    )
}

/// A change an approval is about, as a colored unified diff.
fn show_diff(color: bool, diff: &FileDiff, out: &mut String) {
    out.push_str(&styled(
        color,
        BOLD,
        &format!("    {}\n", sanitize(&diff.path.display().to_string())),
    ));
    let lines: Vec<&str> = diff.unified.lines().collect();
    for line in lines.iter().take(DIFF_LINES) {
        let style = if line.starts_with("+++") || line.starts_with("---") {
            BOLD
        } else if line.starts_with('+') {
            GREEN
        } else if line.starts_with('-') {
            RED
        } else if line.starts_with("@@") {
            CYAN
        } else {
            ""
        };
        let text = format!("    {}\n", sanitize(line));
        if style.is_empty() {
            out.push_str(&text);
        } else {
            out.push_str(&styled(color, style, &text));
        }
    }
    if lines.len() > DIFF_LINES {
        out.push_str(&format!(
            "    … {} more line(s)\n",
            lines.len() - DIFF_LINES
        ));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn shown(events: &[serde_json::Value]) -> String {
        let mut view = View::new(false);
        let mut out = String::new();
        for event in events {
            view.show(&serde_json::from_value(event.clone()).unwrap(), &mut out);
        }
        view.flush(&mut out);
        out
    }

    #[test]
    fn a_calls_outcome_is_told_by_its_verdict() {
        let rejected = format!(
            "{} (more for the model)",
            crate::core::gate::REJECTED_BY_THE_USER
        );
        assert_eq!(
            outcome(false, Verdict::Rejected, true, &rejected),
            "  rejected: you said no\n"
        );
        assert_eq!(
            outcome(false, Verdict::Rejected, true, "not allowed\nmore"),
            "  refused: not allowed\n"
        );
        assert_eq!(
            outcome(false, Verdict::Denied, true, "denied by rule"),
            "  refused: denied by rule\n"
        );
        assert_eq!(
            outcome(false, Verdict::Cancelled, true, "x"),
            "  cancelled\n"
        );
        assert_eq!(
            outcome(false, Verdict::Allowed, true, "exit 1\nmore"),
            "  failed: exit 1\n"
        );
        assert_eq!(outcome(false, Verdict::Approved, false, "ok"), "  done\n");
        assert_eq!(
            outcome(true, Verdict::Allowed, false, "ok"),
            format!("{GREEN}  done{RESET}\n")
        );
    }

    #[test]
    fn only_an_unusual_end_has_a_line() {
        assert_eq!(
            end(false, RunState::Completed, Some(StopReason::EndTurn), None),
            ""
        );
        assert_eq!(end(false, RunState::Completed, None, None), "");
        assert_eq!(
            end(
                false,
                RunState::Completed,
                Some(StopReason::MaxTokens),
                None
            ),
            "(stopped: max_tokens)\n"
        );
        assert_eq!(end(false, RunState::Cancelled, None, None), "(cancelled)\n");
        assert_eq!(
            end(false, RunState::Failed, None, Some("boom")),
            "error: boom\n"
        );
        assert_eq!(
            end(false, RunState::Failed, None, None),
            "error: the run failed\n"
        );
    }

    #[test]
    fn a_call_shows_its_title_once_then_its_outcome() {
        let out = shown(&[
            json!({"type": "tool_call", "id": "c1", "name": "shell", "arguments": {}, "kind": "execute"}),
            json!({"type": "tool_planned", "id": "c1", "title": "ls -la"}),
            json!({"type": "tool_result", "id": "c1", "output": "a\nb", "is_error": false}),
            // A call no plan showed gets its line with its outcome.
            json!({"type": "tool_call", "id": "c2", "name": "read_file", "arguments": {}, "kind": "read"}),
            json!({"type": "tool_result", "id": "c2", "output": "", "is_error": false}),
        ]);
        assert_eq!(
            out,
            "* ls -la [execute]\n  done\n* read_file [read]\n  done\n"
        );
    }

    #[test]
    fn long_live_output_is_cut_and_counted() {
        let lines: Vec<String> = (0..25).map(|n| format!("line {n}")).collect();
        let out = shown(&[
            json!({"type": "tool_progress", "id": "c1", "output": lines.join("\n")}),
            json!({"type": "tool_result", "id": "c1", "output": "", "is_error": false, "verdict": "allowed"}),
        ]);
        assert!(out.starts_with("  | line 0\n"), "{out}");
        assert!(
            out.contains("  | line 19\n  | ...\n  | (25 lines of output in all)\n"),
            "{out}"
        );
        assert!(!out.contains("line 20"), "{out}");
    }

    #[test]
    fn an_approval_shows_its_command_and_a_question_its_options() {
        let out = shown(&[
            json!({"type": "approval_requested", "approval_id": "a1", "call_id": "c1",
                "tool": "shell", "kind": "execute", "title": "rm x", "reason": "runs a command",
                "arguments": {"command": "rm x"}, "command": "rm x"}),
            json!({"type": "question_asked", "question_id": "q1", "call_id": "c2",
                "question": "Which?", "options": ["red", "blue"]}),
            json!({"type": "plan", "entries": [{"content": "a", "status": "in_progress"}]}),
        ]);
        assert_eq!(
            out,
            "Approval needed: rm x (shell, runs a command)\n    $ rm x\n\
             Question: Which?\n  1. red\n  2. blue\n  [~] a\n"
        );
    }

    #[test]
    fn a_diff_is_cut_after_its_first_lines() {
        let unified: String = (0..65).map(|n| format!("+{n}\n")).collect();
        let diff = FileDiff {
            path: "a.txt".into(),
            old_text: None,
            new_text: String::new(),
            unified,
        };
        let mut out = String::new();
        show_diff(false, &diff, &mut out);
        assert!(out.starts_with("    a.txt\n    +0\n"), "{out}");
        assert!(out.ends_with("    +59\n    … 5 more line(s)\n"), "{out}");
    }
}
