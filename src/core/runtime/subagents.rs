//! The runtime's side of subagents (`core::subagent`): a `delegate` call's
//! child session and run, watched to its end.

use futures::future::BoxFuture;
use tokio_util::sync::CancellationToken;

use super::Runtime;
use crate::core::event::{Event, RunState, StopReason};
use crate::core::ids::{RunId, SessionId};
use crate::core::journal::Write;
use crate::core::session::{ContentPart, Message, Origin, Session, SessionParent, now_millis};
use crate::core::subagent::{ParentCall, Relay, Subagents};
use crate::core::tool::{DelegateOutcome, DelegateTask, Progress, ProgressUpdate, ToolError};

/// Limits on subagents, from the configuration.
#[derive(Debug, Clone)]
pub struct SubagentConfig {
    /// Children running at once across the process; more wait their turn.
    pub max_parallel: usize,
    /// Model turns a child may take.
    pub max_turns: u32,
}

impl Default for SubagentConfig {
    fn default() -> Self {
        Self {
            max_parallel: 4,
            max_turns: 20,
        }
    }
}

/// What a subagent's live session is held to beyond its mode.
#[derive(Debug, Clone)]
pub(super) struct ChildLimits {
    pub parent: SessionParent,
    /// The tools it may use (`None`: all but `delegate`).
    pub tools: Option<Vec<String>>,
    pub max_turns: u32,
    /// The task's label, for the person and `SubagentStop` hooks.
    pub label: String,
    /// The most it may spend: what its parent had left.
    pub budget_left: Option<f64>,
}

/// Runs subagents for one parent run.
pub(super) struct RuntimeSubagents {
    pub runtime: Runtime,
}

impl Subagents for RuntimeSubagents {
    fn run<'a>(
        &'a self,
        parent: ParentCall,
        task: DelegateTask,
        relay: Relay,
        progress: Progress,
        cancel: CancellationToken,
    ) -> BoxFuture<'a, Result<DelegateOutcome, ToolError>> {
        Box::pin(
            self.runtime
                .run_subagent(parent, task, relay, progress, cancel),
        )
    }
}

impl Runtime {
    async fn run_subagent(
        &self,
        parent: ParentCall,
        task: DelegateTask,
        relay: Relay,
        progress: Progress,
        cancel: CancellationToken,
    ) -> Result<DelegateOutcome, ToolError> {
        if let Some(tools) = &task.tools
            && let Some(unknown) = tools.iter().find(|t| !parent.tools.contains(t))
        {
            return Err(ToolError::InvalidArguments(format!(
                "`tools`: {unknown} is not one of your tools"
            )));
        }
        // A slot among the children running at once.
        let slots = self.inner.subagent_slots.clone();
        let _slot = tokio::select! {
            biased;
            _ = cancel.cancelled() => return Err(ToolError::Cancelled),
            slot = slots.acquire_owned() => slot.map_err(|_| ToolError::Failed("the runtime is stopping".into()))?,
        };
        let owner = self
            .session(&parent.session)
            .await
            .map_err(|err| ToolError::Failed(format!("cannot read the session: {err}")))?;
        let link = SessionParent {
            session: parent.session.clone(),
            run: parent.run.clone(),
            call: parent.call_id.clone(),
        };
        let child = self
            .create_child(&owner, &task, link.clone(), parent.budget_left)
            .await
            .map_err(|err| ToolError::Failed(format!("cannot start the subagent: {err}")))?;
        let mut events = self
            .subscribe(&child.id)
            .map_err(|err| ToolError::Failed(format!("cannot watch the subagent: {err}")))?;
        let run_id = RunId::generate();
        let ticket = self
            .prompt_as(
                &child.id,
                run_id.clone(),
                vec![ContentPart::Text {
                    text: task.task.clone(),
                }],
            )
            .await
            .map_err(|err| ToolError::Failed(format!("cannot start the subagent: {err}")))?;
        let _ = relay.send(Event::SubagentStarted {
            call_id: parent.call_id.clone(),
            session_id: child.id.clone(),
            run_id: run_id.clone(),
            task: task.label.clone(),
        });
        let mut watched = Watched::new(&parent.call_id, &task.label);
        let mut cancelled = false;
        let (state, stop_reason, error) = loop {
            let next = tokio::select! {
                biased;
                _ = cancel.cancelled(), if !cancelled => {
                    cancelled = true;
                    self.cancel_run(&child.id, &run_id);
                    continue;
                }
                next = events.next() => next,
            };
            let Some(record) = next else {
                break (
                    RunState::Failed,
                    None,
                    Some("the subagent's session closed".into()),
                );
            };
            if record.run_id != ticket.run_id {
                continue;
            }
            if let Some(end) = watched.take(&record.event, &progress, &relay) {
                break end;
            }
        };
        watched.finish(&progress);
        let _ = relay.send(Event::SubagentEnded {
            call_id: parent.call_id.clone(),
            session_id: child.id.clone(),
            run_id: run_id.clone(),
            state,
            stop_reason,
        });
        let answer = self.last_answer(&child.id).await;
        let cost = match self.run(&run_id).await {
            Ok(info) => info.cost,
            Err(err) => {
                tracing::warn!(run = %run_id, error = %err, "cannot read a subagent's cost");
                None
            }
        };
        if let Err(err) = self.close_session(&child.id).await {
            tracing::warn!(session = %child.id, error = %err, "cannot close a subagent's session");
        }
        if cancelled {
            return Err(ToolError::Cancelled);
        }
        Ok(DelegateOutcome {
            session_id: child.id,
            run_id,
            state: state.as_str().to_owned(),
            stop_reason: stop_reason.map(|r| r.as_str().to_owned()),
            error,
            answer,
            turns: watched.turns,
            cost,
        })
    }

    /// Creates a subagent's session: the parent's workspace, model and
    /// prompt settings, its conversation's memory, a mode no wider than the
    /// parent's; held to the task's tools and the turn cap.
    async fn create_child(
        &self,
        owner: &Session,
        task: &DelegateTask,
        link: SessionParent,
        budget_left: Option<f64>,
    ) -> Result<Session, crate::core::runtime::RuntimeError> {
        let now = now_millis();
        let mode = task
            .mode
            .map_or(owner.mode, |asked| owner.mode.narrower(asked));
        let session = Session {
            id: SessionId::generate(),
            workspace: owner.workspace.clone(),
            origin: Origin::Subagent,
            provider: owner.provider.clone(),
            model: owner.model.clone(),
            mode,
            title: Some(task.label.clone()),
            mcp_servers: serde_json::json!([]),
            created_at: now,
            updated_at: now,
            closed: false,
            conversation: Some(
                owner
                    .conversation
                    .clone()
                    .unwrap_or_else(|| owner.id.as_str().to_owned()),
            ),
            prompt: owner.prompt.clone(),
            parent: Some(link.clone()),
            thought_level: owner.thought_level.clone(),
        };
        self.inner
            .journal
            .commit(Write::InsertSession(session.clone()))
            .await?;
        self.make_live(session.clone(), Vec::new())?;
        if let Some(live) = self.live(&session.id) {
            // The parent's added directories are the child's too.
            if let Some(parent) = self.live(&owner.id) {
                *live.extra_roots.lock() = parent.extra_roots.lock().clone();
            }
            *live.child.lock() = Some(ChildLimits {
                parent: link,
                tools: task.tools.clone(),
                max_turns: self.inner.config.subagents.max_turns,
                label: task.label.clone(),
                budget_left,
            });
        }
        Ok(session)
    }

    /// The text of a session's last assistant message.
    async fn last_answer(&self, id: &SessionId) -> String {
        match self.history(id).await {
            Ok(history) => history
                .iter()
                .rev()
                .find_map(|entry| {
                    let Message::Assistant { text, .. } = &entry.message else {
                        return None;
                    };
                    (!text.trim().is_empty()).then(|| text.clone())
                })
                .unwrap_or_default(),
            Err(err) => {
                tracing::warn!(session = %id, error = %err, "cannot read a subagent's answer");
                String::new()
            }
        }
    }
}

/// How a child's run ended: its state, stop reason and error.
type ChildEnd = (RunState, Option<StopReason>, Option<String>);

/// What the parent's call shows of a child's run while it runs: the
/// child's text as progress, a line at a time, the tools it plans; its
/// approvals and questions relayed, labelled with its task.
struct Watched<'a> {
    call_id: &'a str,
    label: &'a str,
    /// Text of the line not yet shown.
    line: String,
    turns: u32,
}

impl<'a> Watched<'a> {
    fn new(call_id: &'a str, label: &'a str) -> Self {
        Self {
            call_id,
            label,
            line: String::new(),
            turns: 0,
        }
    }

    /// Takes in one event of the child's run: how it ended, when it did.
    fn take(&mut self, event: &Event, progress: &Progress, relay: &Relay) -> Option<ChildEnd> {
        // Approvals and questions go up to whoever answers for the parent;
        // the rest stay in the child's own session but for its progress
        // (turns, text lines, planned tools) and its end.
        if event.exchange().is_some() {
            let _ = relay.send(labelled(event, self.call_id, self.label));
        } else if let Event::ModelTurn { .. } = event {
            self.turns += 1;
        } else if let Event::TextDelta { text } = event {
            self.line.push_str(text);
            if let Some(end) = self.line.rfind('\n') {
                let whole: String = self.line.drain(..=end).collect();
                progress.report(ProgressUpdate::Output(whole));
            }
        } else if let Event::ToolPlanned { title, .. } = event {
            if !self.line.is_empty() {
                progress.report(ProgressUpdate::Output(format!(
                    "{}\n",
                    std::mem::take(&mut self.line)
                )));
            }
            progress.report(ProgressUpdate::Output(format!("▸ {title}\n")));
        } else if let Event::State {
            state,
            stop_reason,
            error,
            ..
        } = event
            && state.is_terminal()
        {
            return Some((*state, *stop_reason, error.clone()));
        }
        None
    }

    /// Shows the last line, when it has text.
    fn finish(&self, progress: &Progress) {
        if !self.line.trim().is_empty() {
            progress.report(ProgressUpdate::Output(format!("{}\n", self.line)));
        }
    }
}

/// A child's approval or question as the parent's tape shows it: on the
/// `delegate` call, labelled with the child's task.
fn labelled(event: &Event, call_id: &str, label: &str) -> Event {
    let mut event = event.clone();
    if let Event::ApprovalRequested {
        call_id: call,
        title,
        ..
    } = &mut event
    {
        *call = call_id.to_owned();
        *title = format!("Subagent «{label}»: {title}");
    } else if let Event::QuestionAsked {
        call_id: call,
        question,
        ..
    } = &mut event
    {
        *call = call_id.to_owned();
        *question = format!("(subagent «{label}») {question}");
    } else if let Event::ApprovalDecided { call_id: call, .. }
    | Event::QuestionAnswered { call_id: call, .. } = &mut event
    {
        *call = call_id.to_owned();
    }
    event
}
