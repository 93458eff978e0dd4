//! The runtime's side of subagents (`core::subagent`): a `delegate` call's
//! child session and run, watched to its end.

use futures::future::BoxFuture;
use tokio_util::sync::CancellationToken;

use super::Runtime;
use crate::core::event::{Event, RunState};
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
        let mut line = String::new();
        let mut turns: u32 = 0;
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
            match &record.event {
                Event::ModelTurn { .. } => turns += 1,
                Event::TextDelta { text } => {
                    line.push_str(text);
                    if let Some(end) = line.rfind('\n') {
                        let whole: String = line.drain(..=end).collect();
                        progress.report(ProgressUpdate::Output(whole));
                    }
                }
                Event::ToolPlanned { title, .. } => {
                    if !line.is_empty() {
                        progress.report(ProgressUpdate::Output(format!(
                            "{}\n",
                            std::mem::take(&mut line)
                        )));
                    }
                    progress.report(ProgressUpdate::Output(format!("▸ {title}\n")));
                }
                Event::ApprovalRequested { .. }
                | Event::ApprovalDecided { .. }
                | Event::QuestionAsked { .. }
                | Event::QuestionAnswered { .. } => {
                    let _ = relay.send(labelled(&record.event, &parent.call_id, &task.label));
                }
                Event::State {
                    state,
                    stop_reason,
                    error,
                    ..
                } if state.is_terminal() => break (*state, *stop_reason, error.clone()),
                _ => {}
            }
        };
        if !line.trim().is_empty() {
            progress.report(ProgressUpdate::Output(format!("{line}\n")));
        }
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
            turns,
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
                .find_map(|entry| match &entry.message {
                    Message::Assistant { text, .. } if !text.trim().is_empty() => {
                        Some(text.clone())
                    }
                    _ => None,
                })
                .unwrap_or_default(),
            Err(err) => {
                tracing::warn!(session = %id, error = %err, "cannot read a subagent's answer");
                String::new()
            }
        }
    }
}

/// A child's approval or question as the parent's tape shows it: on the
/// `delegate` call, labelled with the child's task.
fn labelled(event: &Event, call_id: &str, label: &str) -> Event {
    let mut event = event.clone();
    match &mut event {
        Event::ApprovalRequested {
            call_id: call,
            title,
            ..
        } => {
            *call = call_id.to_owned();
            *title = format!("Subagent «{label}»: {title}");
        }
        Event::QuestionAsked {
            call_id: call,
            question,
            ..
        } => {
            *call = call_id.to_owned();
            *question = format!("(subagent «{label}») {question}");
        }
        Event::ApprovalDecided { call_id: call, .. }
        | Event::QuestionAnswered { call_id: call, .. } => *call = call_id.to_owned(),
        _ => {}
    }
    event
}
