//! Subagents: a `delegate` call hands a task to a child run in a child
//! session of its own. The gate runs the child through [`Subagents`] (the
//! runtime implements it) while the call executes, passes what the person
//! must see of the child — its approvals and questions, its start and end —
//! onto the parent's tape through a [`Relay`], and the call words the child's
//! answer for the model.

use futures::future::BoxFuture;
use tokio_util::sync::CancellationToken;

use super::event::Event;
use super::ids::{RunId, SessionId};
use super::session::Mode;
use super::tool::{DelegateOutcome, DelegateTask, Progress, ToolError};

/// The name of the tool that delegates: never offered to a subagent.
pub const TOOL: &str = "delegate";

/// The call that delegates, and the run and session it belongs to.
#[derive(Debug, Clone)]
pub struct ParentCall {
    pub session: SessionId,
    pub run: RunId,
    pub call_id: String,
    /// The parent's mode: the child's is never wider.
    pub mode: Mode,
    /// The built-in tools the parent's turn had: the child's are among them.
    pub tools: Vec<String>,
    /// What is left of the parent's budgets (the least of them) when the
    /// call starts: the most the child may spend.
    pub budget_left: Option<f64>,
}

/// Events for the parent's tape, emitted by the gate in order with the
/// parent's own.
pub type Relay = tokio::sync::mpsc::UnboundedSender<Event>;

/// Runs subagents; the runtime implements it.
pub trait Subagents: Send + Sync {
    /// Runs `task` as a child run to its end (or until `cancel`, which
    /// cancels the child): its activity as progress lines, what the person
    /// must see relayed to the parent's tape.
    fn run<'a>(
        &'a self,
        parent: ParentCall,
        task: DelegateTask,
        relay: Relay,
        progress: Progress,
        cancel: CancellationToken,
    ) -> BoxFuture<'a, Result<DelegateOutcome, ToolError>>;
}
