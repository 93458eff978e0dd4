//! `delegate`: the model hands a task to a subagent, a child run in a child
//! session of its own (same workspace and model, its own context, a tool set
//! and mode no wider than the parent's, its own turn cap). The tool plans
//! the task; once the call passes the gate, the gate runs the child
//! (`core::subagent`) and the call words how it ended for the model. It
//! changes nothing itself (the child's own calls pass the gate), so every
//! mode allows it, and several in one turn run at once.

use schemars::JsonSchema;
use serde::Deserialize;

use crate::core::session::Mode;
use crate::core::subagent::TOOL;
use crate::core::tool::{
    DelegateTask, Plan, ToolContext, ToolError, ToolKind, ToolOutput, TypedTool,
};

/// Longest task, in characters.
const MAX_TASK_CHARS: usize = 20_000;
/// Longest label, in characters.
const MAX_LABEL_CHARS: usize = 80;

pub struct DelegateTool;

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Args {
    /// The whole task, complete on its own.
    task: String,
    /// A few words naming the task, shown to the user.
    #[serde(default)]
    label: Option<String>,
    /// The tools the subagent may use (names of your tools); default: all of
    /// yours.
    #[serde(default)]
    tools: Option<Vec<String>>,
    /// Narrow the subagent's autonomy below yours (read_only for research);
    /// never wider than yours.
    #[serde(default)]
    mode: Option<Mode>,
}

/// The task `args` hands over, checked: its label made, its tools not
/// `delegate`.
fn task(args: &Args) -> Result<DelegateTask, ToolError> {
    let invalid = |message: String| Err(ToolError::InvalidArguments(message));
    let task = args.task.trim();
    if task.is_empty() {
        return invalid("`task` is empty".into());
    }
    if task.chars().count() > MAX_TASK_CHARS {
        return invalid(format!("`task` is longer than {MAX_TASK_CHARS} characters"));
    }
    let label = match args.label.as_deref().map(str::trim) {
        Some("") => return invalid("`label` is empty".into()),
        Some(label) => label.to_owned(),
        None => task.lines().next().unwrap_or(task).to_owned(),
    };
    let label = match label.char_indices().nth(MAX_LABEL_CHARS) {
        Some((at, _)) => format!("{}…", &label[..at]),
        None => label,
    };
    if let Some(tools) = &args.tools {
        if tools.iter().any(|t| t == TOOL) {
            return invalid("`tools`: a subagent cannot delegate further".into());
        }
        if let Some(empty) = tools.iter().position(|t| t.trim().is_empty()) {
            return invalid(format!("`tools[{empty}]` is empty"));
        }
    }
    Ok(DelegateTask {
        task: task.to_owned(),
        label,
        tools: args.tools.clone(),
        mode: args.mode,
    })
}

impl TypedTool for DelegateTool {
    type Args = Args;
    const NAME: &'static str = TOOL;
    const KIND: ToolKind = ToolKind::Think;

    fn description(&self) -> String {
        "Hands a self-contained task to a subagent: a helper with its own fresh \
         context that works in the same workspace with your tools (or fewer) \
         and returns its final answer as this call's result. Use it for work \
         that can be done apart and whose details you do not need in your own \
         context (research across many files, a separate change, a review); \
         call it several times in one turn to run tasks in parallel. The \
         subagent sees nothing of this conversation: put everything it needs \
         in `task`, including what its answer should contain."
            .to_owned()
    }

    async fn plan(&self, args: &Args, _ctx: &ToolContext) -> Result<Plan, ToolError> {
        let task = task(args)?;
        Ok(Plan {
            title: format!("Subagent: {}", task.label),
            delegation: Some(task),
            ..Plan::default()
        })
    }

    async fn execute(
        &self,
        _args: &Args,
        plan: &Plan,
        _ctx: &ToolContext,
    ) -> Result<ToolOutput, ToolError> {
        let Some(done) = &plan.delegated else {
            return Err(ToolError::Failed(
                "the subagent did not run (nothing ran it)".into(),
            ));
        };
        let answer = if done.answer.trim().is_empty() {
            "(no answer)".to_owned()
        } else {
            done.answer.clone()
        };
        let head = match (done.state.as_str(), done.stop_reason.as_deref()) {
            ("completed", Some("end_turn") | None) => {
                format!("The subagent finished ({}).", turns(done.turns))
            }
            ("completed", Some("max_turn_requests")) => format!(
                "The subagent stopped at its turn cap ({}) before finishing; its last \
                 message follows.",
                turns(done.turns)
            ),
            ("completed", Some("budget")) => {
                "The subagent stopped at a budget limit before finishing; its last message \
                 follows."
                    .to_owned()
            }
            ("completed", Some(reason)) => format!("The subagent stopped ({reason})."),
            ("failed", _) => {
                return Err(ToolError::Failed(format!(
                    "the subagent failed: {}",
                    done.error.as_deref().unwrap_or("no reason given")
                )));
            }
            (state, _) => format!("The subagent ended ({state})."),
        };
        Ok(ToolOutput::text(format!(
            "{head} Session {}.\n\n{answer}",
            done.session_id
        )))
    }
}

fn turns(n: u32) -> String {
    if n == 1 {
        "1 turn".to_owned()
    } else {
        format!("{n} turns")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::tool::parse_args;
    use serde_json::json;

    fn parse(arguments: &serde_json::Value) -> Result<DelegateTask, ToolError> {
        task(&parse_args(arguments)?)
    }

    #[test]
    fn tasks_are_checked_naming_the_problem() {
        let err = |v| parse(&v).unwrap_err().to_string();
        assert!(err(json!({})).contains("task"));
        assert!(err(json!({"task": " "})).contains("empty"));
        assert!(err(json!({"task": "x", "tools": ["delegate"]})).contains("cannot delegate"));
        assert_eq!(
            err(json!({"task": "x", "mode": "root"})),
            "invalid arguments: `mode`: unknown variant `root`, expected one of `read_only`, `supervised`, `full`"
        );
        assert!(err(json!({"task": "x", "label": ""})).contains("`label` is empty"));
        let task =
            parse(&json!({"task": "Find the tests\nand list them", "mode": "read_only"})).unwrap();
        assert_eq!(task.label, "Find the tests");
        assert_eq!(task.mode, Some(Mode::ReadOnly));
    }
}
