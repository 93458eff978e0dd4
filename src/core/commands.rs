//! Session commands a person gives directly — `/compact` and `/undo` — each run
//! as a run of its own in the session's queue, like a prompt.
//!
//! **Compact** (`core::compaction`) asks the model, in one turn without
//! tools, for a summary of the conversation and stores it as a compaction
//! point (`Message::Summary`): from then on the model is sent the summary and
//! what came after it (`context::since_compaction`). The stored history keeps
//! every message.
//!
//! **Undo** reverts the file edits of the session's latest run that made any
//! and was not undone yet. It is not a model tool call and does not pass the
//! policy gate: a person asked for it, and it only puts back text Pincer itself
//! replaced, file by file, after checking the file still holds exactly what
//! Pincer wrote (a file changed since is left alone). It is recorded like tool
//! calls — a `tool_call` named `undo` per file, its plan, result and receipt —
//! so the tape shows it and `pincer verify` counts it. An edit counts as
//! handled once an undo tried it, reverted or left, so the next `/undo` goes
//! one run further back; a file the run created is deleted on the local disk
//! (the client protocol has no delete). The model learns what changed from a
//! `Message::Note` after the `/undo` prompt.

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use serde_json::json;

use super::emitter::Emitter;
use super::event::{Event, EventRecord, StopReason};
use super::ids::RunId;
use super::journal::Journal;
use super::receipt::{ReceiptBody, Verdict, json_hash, sha256_hex};
use super::run::RunOutcome;
use super::session::{ContentPart, Message, now_millis};
use super::tool::{FileDiff, Since, ToolContext, ToolKind};

/// A session command that runs in the session's queue like a prompt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SessionCommand {
    /// Summarize the conversation so far; the model then reads the summary
    /// instead of the messages before it.
    Compact,
    /// Revert the file edits of the latest run that made any.
    Undo,
}

impl SessionCommand {
    pub const ALL: [SessionCommand; 2] = [SessionCommand::Compact, SessionCommand::Undo];

    /// The command as a person types it, and as its run's prompt shows it.
    pub fn as_str(self) -> &'static str {
        match self {
            SessionCommand::Compact => "/compact",
            SessionCommand::Undo => "/undo",
        }
    }

    /// The command a prompt text is (surrounding whitespace ignored).
    pub fn parse(text: &str) -> Option<Self> {
        let text = text.trim();
        Self::ALL.into_iter().find(|c| c.as_str() == text)
    }

    /// One line on what the command does, for command lists.
    pub fn description(self) -> &'static str {
        match self {
            SessionCommand::Compact => {
                "Summarize the conversation so far; the model continues from the summary"
            }
            SessionCommand::Undo => "Revert the file edits of the last turn that made any",
        }
    }

    /// The prompt the command's run records.
    pub fn content(self) -> Vec<ContentPart> {
        vec![ContentPart::Text {
            text: self.as_str().to_owned(),
        }]
    }
}

/// The name undo calls carry on the tape and in receipts.
pub const UNDO_TOOL: &str = "undo";

/// One change a run made to a file, as its tool result recorded it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Edit {
    pub call_id: String,
    pub diff: FileDiff,
}

/// The run an `/undo` reverts, and the edits of it not yet undone, in the
/// order they were made.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UndoTarget {
    pub run_id: RunId,
    pub edits: Vec<Edit>,
}

/// Finds what an `/undo` reverts, fed the session's earlier runs' tapes newest
/// first: the newest run with a file edit that no undo has handled yet. An
/// edit is a diff of a successful tool result; an undo run (its prompt is
/// `/undo` and it called no model) handled the edits its `undo` calls name.
/// Undo runs are never targets themselves, so `/undo` twice goes back two runs.
#[derive(Debug, Default)]
pub struct UndoSearch {
    /// Edits undo runs seen so far handled: (run, call, path).
    handled: HashSet<(String, String, PathBuf)>,
}

impl UndoSearch {
    /// Takes the next older run's tape; the target once it is found.
    pub fn next(&mut self, tape: &[EventRecord]) -> Option<UndoTarget> {
        let run_id = tape.first()?.run_id.clone();
        if is_undo_run(tape) {
            for record in tape {
                if let Event::ToolCall {
                    name, arguments, ..
                } = &record.event
                    && name == UNDO_TOOL
                {
                    self.handled.extend(handled_by(arguments));
                }
            }
            return None;
        }
        let mut edits = Vec::new();
        for record in tape {
            if let Event::ToolResult {
                id,
                is_error: false,
                verdict,
                diffs,
                ..
            } = &record.event
                && verdict.ran()
            {
                for diff in diffs {
                    let key = (run_id.as_str().to_owned(), id.clone(), diff.path.clone());
                    if !self.handled.contains(&key) {
                        edits.push(Edit {
                            call_id: id.clone(),
                            diff: diff.clone(),
                        });
                    }
                }
            }
        }
        (!edits.is_empty()).then_some(UndoTarget { run_id, edits })
    }
}

/// Whether a run is an `/undo`: its prompt is the command and no model turn ran.
fn is_undo_run(tape: &[EventRecord]) -> bool {
    let mut prompt = None;
    for record in tape {
        if let Event::UserMessage { content } = &record.event {
            prompt = Some(content);
        } else if matches!(record.event, Event::ModelTurn { .. }) {
            return false;
        }
    }
    prompt.is_some_and(|content| *content == SessionCommand::Undo.content())
}

/// The (run, call, path) edits an undo call's arguments name.
fn handled_by(arguments: &serde_json::Value) -> Vec<(String, String, PathBuf)> {
    let run = arguments["run_id"].as_str().unwrap_or_default();
    let path = PathBuf::from(arguments["path"].as_str().unwrap_or_default());
    arguments["calls"]
        .as_array()
        .map(|calls| {
            calls
                .iter()
                .filter_map(|call| call.as_str())
                .map(|call| (run.to_owned(), call.to_owned(), path.clone()))
                .collect()
        })
        .unwrap_or_default()
}

/// The edits of a target grouped by file, files in reverse order of their
/// last edit, each file's edits newest first: the order to revert them in.
pub fn undo_order(edits: &[Edit]) -> Vec<(PathBuf, Vec<Edit>)> {
    let mut files: Vec<(PathBuf, Vec<Edit>)> = Vec::new();
    for edit in edits.iter().rev() {
        match files.iter_mut().find(|(path, _)| *path == edit.diff.path) {
            Some((_, steps)) => steps.push(edit.clone()),
            None => files.push((edit.diff.path.clone(), vec![edit.clone()])),
        }
    }
    files
}

/// What reverting one file came to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reverted {
    /// The file holds its text from before the run again.
    Restored,
    /// The run created the file; it is gone again.
    Deleted,
    /// The file was left as it is, for this reason.
    Left(String),
}

/// Reverts one file's edits (newest first): each step puts back the old text
/// if the file holds the step's new text (but for a final newline an editor's
/// buffer hides), or deletes the file when
/// the step created it. Returns what happened and the reverse changes made
/// (a file changed since is left alone; what was reverted before a step that
/// could not be stays reverted).
pub async fn revert_file(ctx: &ToolContext, steps: &[Edit]) -> (Reverted, Vec<FileDiff>) {
    let mut done: Vec<FileDiff> = Vec::new();
    let mut deleted = false;
    for step in steps {
        let diff = &step.diff;
        if let Err(err) = ctx.boundary.check(&diff.path) {
            return (
                Reverted::Left(format!("it is outside the session's boundary now ({err})")),
                done,
            );
        }
        let current = match ctx.files.read_text(&diff.path).await {
            Ok(current) => current,
            Err(err) => return (Reverted::Left(format!("it cannot be read: {err}")), done),
        };
        // What an editor's buffer shows differently (a hidden final newline)
        // is no change.
        if current.is_none()
            || Since::compare(Some(diff.new_text.as_str()), current.as_deref()) == Since::Changed
        {
            let why = match current {
                None => "it was deleted since".to_owned(),
                Some(_) => "it changed since".to_owned(),
            };
            return (Reverted::Left(why), done);
        }
        let written = match &diff.old_text {
            Some(old) => ctx.files.write_text(&diff.path, old.clone()).await,
            None => ctx.files.remove(&diff.path).await,
        };
        if let Err(err) = written {
            return (Reverted::Left(err.to_string()), done);
        }
        deleted = diff.old_text.is_none();
        done.push(reverse_diff(ctx, diff));
    }
    (
        if deleted {
            Reverted::Deleted
        } else {
            Reverted::Restored
        },
        done,
    )
}

/// The change that undoes `diff`: its texts swapped (a created file's reverse
/// has no new text; `new_text` is then empty).
pub fn reverse_diff(ctx: &ToolContext, diff: &FileDiff) -> FileDiff {
    let shown = ctx.display_path(&diff.path);
    let after = diff.old_text.as_deref().unwrap_or("");
    let unified = similar::TextDiff::from_lines(diff.new_text.as_str(), after)
        .unified_diff()
        .context_radius(3)
        .header(
            &format!("a/{shown}"),
            &if diff.old_text.is_some() {
                format!("b/{shown}")
            } else {
                "/dev/null".to_owned()
            },
        )
        .to_string();
    FileDiff {
        path: diff.path.clone(),
        old_text: Some(diff.new_text.clone()),
        new_text: after.to_owned(),
        unified,
    }
}

/// Runs `/undo`: finds the target run in the session's tapes, reverts its
/// files one by one (each recorded as an `undo` call with its receipt), says
/// what it did, and tells the model in the history. Stops between files when
/// the run is cancelled.
pub async fn undo(ctx: &ToolContext, emitter: &mut Emitter, store: &dyn Journal) -> RunOutcome {
    let target = match find_target(store, emitter).await {
        Ok(target) => target,
        Err(message) => return RunOutcome::Failed(message),
    };
    let Some(target) = target else {
        emitter.emit(Event::TextDelta {
            text: "Nothing to undo: no earlier run of this session changed a file, or every change was undone already."
                .into(),
        });
        return RunOutcome::Completed(StopReason::EndTurn);
    };
    let mut reverted: Vec<String> = Vec::new();
    let mut left: Vec<(String, String)> = Vec::new();
    let mut cancelled = false;
    for (index, (path, steps)) in undo_order(&target.edits).into_iter().enumerate() {
        if ctx.cancel.is_cancelled() {
            cancelled = true;
            break;
        }
        let shown = ctx.display_path(&path);
        let (outcome, done) = undo_call(ctx, emitter, &target.run_id, index, &path, &steps).await;
        match outcome {
            Reverted::Restored | Reverted::Deleted => reverted.push(shown),
            Reverted::Left(why) if !done.is_empty() => {
                reverted.push(shown.clone());
                left.push((shown, format!("partly: {why}")));
            }
            Reverted::Left(why) => left.push((shown, why)),
        }
    }
    let mut report = undo_report(&target.run_id, &reverted, &left);
    if cancelled {
        report.push_str(" Stopped early: the run was cancelled.");
    }
    emitter.emit(Event::TextDelta {
        text: report.clone(),
    });
    if !reverted.is_empty() || !left.is_empty() {
        emitter.append_message(Message::User {
            content: SessionCommand::Undo.content(),
        });
        // The model reads the report after the `/undo` prompt; a person
        // replaying the session sees it as it was shown.
        emitter.append_message(Message::Note { text: report });
    }
    if cancelled {
        RunOutcome::Cancelled
    } else {
        RunOutcome::Completed(StopReason::EndTurn)
    }
}

async fn find_target(store: &dyn Journal, emitter: &Emitter) -> Result<Option<UndoTarget>, String> {
    store
        .flush()
        .await
        .map_err(|err| format!("cannot read the session's runs: {err}"))?;
    let runs = store
        .runs(emitter.session_id())
        .await
        .map_err(|err| format!("cannot read the session's runs: {err}"))?;
    // Read tapes newest first and stop at the target: undo runs come before
    // the runs they reverted, so what they handled is known in time.
    let mut search = UndoSearch::default();
    for run in runs.iter().rev().filter(|run| &run.id != emitter.run_id()) {
        let tape = store
            .tape(&run.id, 0, None)
            .await
            .map_err(|err| format!("cannot read the tape of run {}: {err}", run.id))?;
        if let Some(target) = search.next(&tape) {
            return Ok(Some(target));
        }
    }
    Ok(None)
}

/// Reverts one file as one recorded `undo` call: call, plan, start, result,
/// with its receipt submitted before the result.
async fn undo_call(
    ctx: &ToolContext,
    emitter: &mut Emitter,
    run: &RunId,
    index: usize,
    path: &Path,
    steps: &[Edit],
) -> (Reverted, Vec<FileDiff>) {
    let id = format!("undo_{}", index + 1);
    let shown = ctx.display_path(path);
    let mut calls: Vec<&str> = steps.iter().map(|s| s.call_id.as_str()).collect();
    calls.dedup();
    let arguments = json!({"run_id": run.as_str(), "path": path, "calls": calls});
    emitter.emit(Event::ToolCall {
        id: id.clone(),
        name: UNDO_TOOL.to_owned(),
        arguments: arguments.clone(),
        kind: ToolKind::Edit,
    });
    let creates = steps.last().is_some_and(|s| s.diff.old_text.is_none());
    emitter.emit(Event::ToolPlanned {
        id: id.clone(),
        title: if creates {
            format!("Undo: delete {shown}, which run {run} created")
        } else {
            format!("Undo: restore {shown} as it was before run {run}")
        },
        locations: vec![path.to_path_buf()],
        command: None,
        diffs: steps.iter().map(|s| reverse_diff(ctx, &s.diff)).collect(),
    });
    emitter.emit(Event::ToolStarted { id: id.clone() });
    let (outcome, done) = revert_file(ctx, steps).await;
    let (output, is_error) = match &outcome {
        Reverted::Restored => (
            format!("Restored {shown} as it was before run {run}"),
            false,
        ),
        Reverted::Deleted => (format!("Deleted {shown}, which run {run} created"), false),
        Reverted::Left(why) => (format!("Left {shown} as it is: {why}"), true),
    };
    emitter.receipt(ReceiptBody {
        session_id: emitter.session_id().clone(),
        run_id: emitter.run_id().clone(),
        call_id: id.clone(),
        tool: UNDO_TOOL.to_owned(),
        input_hash: json_hash(&arguments),
        output_hash: sha256_hex(output.as_bytes()),
        verdict: Verdict::Allowed,
        is_error,
        at: now_millis(),
        hooks: Vec::new(),
        skills: Vec::new(),
    });
    emitter.emit(Event::ToolResult {
        id,
        output,
        is_error,
        verdict: Verdict::Allowed,
        diffs: done.clone(),
        safety: Vec::new(),
    });
    (outcome, done)
}

/// "Reverted 2 files from run run_…: a.txt, b.txt; left c.txt, which changed since."
pub fn undo_report(run: &RunId, reverted: &[String], left: &[(String, String)]) -> String {
    let mut parts = Vec::new();
    if !reverted.is_empty() {
        parts.push(format!(
            "Reverted {} file{} from run {run}: {}",
            reverted.len(),
            if reverted.len() == 1 { "" } else { "s" },
            reverted.join(", ")
        ));
    }
    for (file, why) in left {
        let lead = if parts.is_empty() {
            format!("Nothing reverted from run {run}: left")
        } else {
            "left".to_owned()
        };
        parts.push(format!("{lead} {file} as it is ({why})"));
    }
    if parts.is_empty() {
        return format!("Nothing reverted from run {run}.");
    }
    format!("{}.", parts.join("; "))
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use tokio_util::sync::CancellationToken;

    use super::*;
    use crate::core::event::RunState;
    use crate::core::ids::SessionId;
    use crate::core::policy::PathBoundary;
    use crate::core::tool::Files;

    fn record(run: &str, seq: u64, event: Event) -> EventRecord {
        EventRecord {
            session_id: SessionId::from_string("ses_1".into()),
            run_id: RunId::from_string(run.into()),
            seq,
            at: 0,
            event,
        }
    }

    fn diff(path: &str, old: Option<&str>, new: &str) -> FileDiff {
        FileDiff {
            path: PathBuf::from(path),
            old_text: old.map(str::to_owned),
            new_text: new.to_owned(),
            unified: String::new(),
        }
    }

    fn prompt(text: &str) -> Event {
        Event::UserMessage {
            content: vec![ContentPart::Text { text: text.into() }],
        }
    }

    fn result(id: &str, is_error: bool, diffs: Vec<FileDiff>) -> Event {
        Event::ToolResult {
            id: id.into(),
            output: String::new(),
            is_error,
            verdict: Verdict::Allowed,
            diffs,
            safety: Vec::new(),
        }
    }

    /// A model run: prompt, model turn, then the given tool results.
    fn edit_run(run: &str, results: Vec<Event>) -> Vec<EventRecord> {
        let mut events = vec![
            Event::state(RunState::Queued),
            prompt("change things"),
            Event::ModelTurn {
                index: 0,
                provider: "p".into(),
                model: "m".into(),
            },
        ];
        events.extend(results);
        events
            .into_iter()
            .enumerate()
            .map(|(seq, event)| record(run, seq as u64, event))
            .collect()
    }

    /// An undo run that handled `calls` of `target`'s edits of `path`.
    fn undo_run(run: &str, target: &str, path: &str, calls: &[&str]) -> Vec<EventRecord> {
        vec![
            record(run, 0, Event::state(RunState::Queued)),
            record(run, 1, prompt("/undo")),
            record(
                run,
                2,
                Event::ToolCall {
                    id: "undo_1".into(),
                    name: UNDO_TOOL.into(),
                    arguments: json!({"run_id": target, "path": path, "calls": calls}),
                    kind: ToolKind::Edit,
                },
            ),
        ]
    }

    fn search(newest_first: &[Vec<EventRecord>]) -> Option<UndoTarget> {
        let mut search = UndoSearch::default();
        newest_first.iter().find_map(|tape| search.next(tape))
    }

    #[test]
    fn the_target_is_the_newest_run_with_successful_edits() {
        let older = edit_run(
            "run_1",
            vec![result("c1", false, vec![diff("/w/a", None, "a")])],
        );
        let newer = edit_run(
            "run_2",
            vec![
                result("c1", false, vec![diff("/w/b", Some("b0"), "b1")]),
                // Failed results and runs without diffs change nothing.
                result("c2", true, vec![diff("/w/x", None, "x")]),
            ],
        );
        let reads_only = edit_run("run_3", vec![result("c1", false, Vec::new())]);
        let target = search(&[reads_only, newer, older]);
        assert_eq!(
            target,
            Some(UndoTarget {
                run_id: RunId::from_string("run_2".into()),
                edits: vec![Edit {
                    call_id: "c1".into(),
                    diff: diff("/w/b", Some("b0"), "b1"),
                }],
            })
        );
    }

    #[test]
    fn runs_already_undone_are_skipped_and_undo_runs_are_never_targets() {
        let first = edit_run(
            "run_1",
            vec![result("c1", false, vec![diff("/w/a", None, "a")])],
        );
        let second = edit_run(
            "run_2",
            vec![
                result("c1", false, vec![diff("/w/b", Some("0"), "1")]),
                result("c2", false, vec![diff("/w/c", Some("0"), "1")]),
            ],
        );
        // The undo reverted b and c of run_2: the next undo goes to run_1.
        let undo_b = undo_run("run_3", "run_2", "/w/b", &["c1"]);
        let undo_c = undo_run("run_4", "run_2", "/w/c", &["c2"]);
        let target = search(&[undo_c.clone(), undo_b, second.clone(), first.clone()]);
        assert_eq!(
            target.map(|t| t.run_id.as_str().to_owned()),
            Some("run_1".into())
        );
        // An undo cut short (c handled, b not) leaves the rest of run_2 to undo.
        let target = search(&[undo_c, second, first]).unwrap();
        assert_eq!(target.run_id.as_str(), "run_2");
        assert_eq!(target.edits.len(), 1);
        assert_eq!(target.edits[0].diff.path, PathBuf::from("/w/b"));
    }

    #[test]
    fn a_prompt_that_says_undo_is_not_an_undo_run() {
        // A model run whose prompt happens to be "/undo" (sent as a plain
        // prompt) may not mark anything as undone.
        let mut spoof = edit_run("run_2", Vec::new());
        spoof[1] = record("run_2", 1, prompt("/undo"));
        spoof.push(record(
            "run_2",
            3,
            Event::ToolCall {
                id: "c1".into(),
                name: UNDO_TOOL.into(),
                arguments: json!({"run_id": "run_1", "path": "/w/a", "calls": ["c1"]}),
                kind: ToolKind::Other,
            },
        ));
        let first = edit_run(
            "run_1",
            vec![result("c1", false, vec![diff("/w/a", None, "a")])],
        );
        let target = search(&[spoof, first]).unwrap();
        assert_eq!(target.run_id.as_str(), "run_1");
    }

    #[test]
    fn files_are_reverted_newest_edit_first() {
        let edits = vec![
            Edit {
                call_id: "c1".into(),
                diff: diff("/w/a", None, "a1"),
            },
            Edit {
                call_id: "c2".into(),
                diff: diff("/w/b", Some("b0"), "b1"),
            },
            Edit {
                call_id: "c3".into(),
                diff: diff("/w/a", Some("a1"), "a2"),
            },
        ];
        let order = undo_order(&edits);
        let shape: Vec<(PathBuf, Vec<&str>)> = order
            .iter()
            .map(|(path, steps)| {
                (
                    path.clone(),
                    steps.iter().map(|s| s.call_id.as_str()).collect(),
                )
            })
            .collect();
        assert_eq!(
            shape,
            vec![
                (PathBuf::from("/w/a"), vec!["c3", "c1"]),
                (PathBuf::from("/w/b"), vec!["c2"]),
            ]
        );
    }

    fn tool_context(workspace: &Path) -> ToolContext {
        let boundary = PathBoundary::new(workspace, &[], &[], None);
        ToolContext {
            session_id: SessionId::from_string("ses_1".into()),
            workspace: boundary.workspace().to_path_buf(),
            boundary: Arc::new(boundary),
            files: Files::local(SessionId::from_string("ses_1".into())),
            cancel: CancellationToken::new(),
            progress: crate::core::tool::Progress::none(),
            terminal: None,
            memory: None,
            call_id: None,
            run_id: None,
            skills: None,
        }
    }

    #[tokio::test]
    async fn a_file_holding_what_pincer_wrote_gets_its_old_text_back() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        let ctx = tool_context(&root);
        let path = root.join("a.txt");
        std::fs::write(&path, "two\n").unwrap();
        let steps = undo_order(&[
            Edit {
                call_id: "c1".into(),
                diff: diff(path.to_str().unwrap(), Some("zero\n"), "one\n"),
            },
            Edit {
                call_id: "c2".into(),
                diff: diff(path.to_str().unwrap(), Some("one\n"), "two\n"),
            },
        ]);
        let (outcome, done) = revert_file(&ctx, &steps[0].1).await;
        assert_eq!(outcome, Reverted::Restored);
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "zero\n");
        assert_eq!(done.len(), 2);
        assert_eq!(done[0].old_text.as_deref(), Some("two\n"));
        assert_eq!(done[0].new_text, "one\n");
        assert!(
            done[1].unified.contains("-one\n+zero\n"),
            "{}",
            done[1].unified
        );
    }

    #[tokio::test]
    async fn an_editor_buffer_hiding_the_final_newline_is_no_change() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        let mut ctx = tool_context(&root);
        ctx.files = crate::core::tool::BufferView::files(ctx.session_id.clone());
        let edited = root.join("a.txt");
        std::fs::write(&edited, "one\n").unwrap();
        let created = root.join("new.txt");
        std::fs::write(&created, "fresh\n").unwrap();
        let (outcome, _) = revert_file(
            &ctx,
            &[Edit {
                call_id: "c1".into(),
                diff: diff(edited.to_str().unwrap(), Some("zero\n"), "one\n"),
            }],
        )
        .await;
        assert_eq!(outcome, Reverted::Restored);
        assert_eq!(std::fs::read_to_string(&edited).unwrap(), "zero\n");
        let (outcome, _) = revert_file(
            &ctx,
            &[Edit {
                call_id: "c1".into(),
                diff: diff(created.to_str().unwrap(), None, "fresh\n"),
            }],
        )
        .await;
        assert_eq!(outcome, Reverted::Deleted);
        assert!(!created.exists());
    }

    #[tokio::test]
    async fn a_file_pincer_created_is_deleted() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        let ctx = tool_context(&root);
        let path = root.join("new.txt");
        std::fs::write(&path, "fresh\n").unwrap();
        let steps = vec![Edit {
            call_id: "c1".into(),
            diff: diff(path.to_str().unwrap(), None, "fresh\n"),
        }];
        let (outcome, done) = revert_file(&ctx, &steps).await;
        assert_eq!(outcome, Reverted::Deleted);
        assert!(!path.exists());
        assert!(
            done[0].unified.contains("+++ /dev/null"),
            "{}",
            done[0].unified
        );
    }

    #[tokio::test]
    async fn a_file_changed_since_is_left_alone() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        let ctx = tool_context(&root);
        let changed = root.join("changed.txt");
        std::fs::write(&changed, "edited by hand\n").unwrap();
        let steps = vec![Edit {
            call_id: "c1".into(),
            diff: diff(changed.to_str().unwrap(), Some("old\n"), "pincer\n"),
        }];
        let (outcome, done) = revert_file(&ctx, &steps).await;
        assert_eq!(outcome, Reverted::Left("it changed since".into()));
        assert!(done.is_empty());
        assert_eq!(
            std::fs::read_to_string(&changed).unwrap(),
            "edited by hand\n"
        );
        // A created file deleted since is not recreated either.
        let gone = root.join("gone.txt");
        let steps = vec![Edit {
            call_id: "c1".into(),
            diff: diff(gone.to_str().unwrap(), None, "x"),
        }];
        let (outcome, _) = revert_file(&ctx, &steps).await;
        assert_eq!(outcome, Reverted::Left("it was deleted since".into()));
        assert!(!gone.exists());
        // Nor is a file outside the session's boundary touched.
        let outside = tempfile::tempdir().unwrap();
        let elsewhere = outside.path().canonicalize().unwrap().join("e.txt");
        std::fs::write(&elsewhere, "pincer\n").unwrap();
        let steps = vec![Edit {
            call_id: "c1".into(),
            diff: diff(elsewhere.to_str().unwrap(), Some("old\n"), "pincer\n"),
        }];
        let (outcome, _) = revert_file(&ctx, &steps).await;
        assert!(matches!(outcome, Reverted::Left(why) if why.starts_with("it is outside")));
        assert_eq!(std::fs::read_to_string(&elsewhere).unwrap(), "pincer\n");
    }

    #[test]
    fn the_report_names_what_was_reverted_and_what_was_left() {
        let run = RunId::from_string("run_1".into());
        assert_eq!(
            undo_report(
                &run,
                &["a.txt".into(), "b.txt".into()],
                &[("c.txt".into(), "it changed since".into())]
            ),
            "Reverted 2 files from run run_1: a.txt, b.txt; left c.txt as it is (it changed since)."
        );
        assert_eq!(
            undo_report(&run, &[], &[("c.txt".into(), "it changed since".into())]),
            "Nothing reverted from run run_1: left c.txt as it is (it changed since)."
        );
    }

    #[test]
    fn commands_parse_from_their_text() {
        for command in SessionCommand::ALL {
            assert_eq!(SessionCommand::parse(command.as_str()), Some(command));
        }
        assert_eq!(
            SessionCommand::parse(" /undo\n"),
            Some(SessionCommand::Undo)
        );
        assert_eq!(SessionCommand::parse("/undo please"), None);
    }
}
