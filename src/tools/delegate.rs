//! `delegate`: the model hands a task to a subagent, a child run in a child
//! session of its own (same workspace and model, its own context, a tool set
//! and mode no wider than the parent's, its own turn cap). The tool plans
//! the task; once the call passes the gate, the gate runs the child
//! (`core::subagent`) and the call words how it ended for the model. It
//! changes nothing itself (the child's own calls pass the gate), so every
//! mode allows it, and several in one turn run at once.

use futures::future::BoxFuture;
use serde::Deserialize;
use serde_json::json;

use crate::core::session::Mode;
use crate::core::subagent::TOOL;
use crate::core::tool::{
    DelegateTask, Plan, Tool, ToolContext, ToolError, ToolKind, ToolOutput, ToolSpec, parse_args,
};

/// Longest task, in characters.
const MAX_TASK_CHARS: usize = 20_000;
/// Longest label, in characters.
const MAX_LABEL_CHARS: usize = 80;

pub struct DelegateTool;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Args {
    task: String,
    #[serde(default)]
    label: Option<String>,
    #[serde(default)]
    tools: Option<Vec<String>>,
    #[serde(default)]
    mode: Option<String>,
}

fn parse(arguments: &serde_json::Value) -> Result<DelegateTask, ToolError> {
    let args: Args = parse_args(arguments)?;
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
    let mode = match args.mode.as_deref() {
        None => None,
        Some(value) => match Mode::parse(value) {
            Some(mode) => Some(mode),
            None => {
                return invalid(format!(
                    "`mode` must be read_only, supervised or full, got {:?}",
                    value.chars().take(40).collect::<String>()
                ));
            }
        },
    };
    Ok(DelegateTask {
        task: task.to_owned(),
        label,
        tools: args.tools,
        mode,
    })
}

impl Tool for DelegateTool {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: TOOL.to_owned(),
            description: "Hands a self-contained task to a subagent: a helper with its own fresh \
                          context that works in the same workspace with your tools (or fewer) \
                          and returns its final answer as this call's result. Use it for work \
                          that can be done apart and whose details you do not need in your own \
                          context (research across many files, a separate change, a review); \
                          call it several times in one turn to run tasks in parallel. The \
                          subagent sees nothing of this conversation: put everything it needs \
                          in `task`, including what its answer should contain."
                .to_owned(),
            parameters: json!({
                "type": "object",
                "properties": {
                    "task": {"type": "string", "description": "The whole task, complete on its own."},
                    "label": {"type": "string", "description": "A few words naming the task, shown to the user."},
                    "tools": {
                        "type": "array",
                        "items": {"type": "string"},
                        "description": "The tools the subagent may use (names of your tools); default: all of yours."
                    },
                    "mode": {
                        "type": "string",
                        "enum": ["read_only", "supervised", "full"],
                        "description": "Narrow the subagent's autonomy below yours (read_only for research); never wider than yours."
                    }
                },
                "required": ["task"],
                "additionalProperties": false
            }),
        }
    }

    fn kind(&self) -> ToolKind {
        ToolKind::Think
    }

    fn plan<'a>(
        &'a self,
        arguments: &'a serde_json::Value,
        _ctx: &'a ToolContext,
    ) -> BoxFuture<'a, Result<Plan, ToolError>> {
        Box::pin(async move {
            let task = parse(arguments)?;
            Ok(Plan {
                title: format!("Subagent: {}", task.label),
                delegation: Some(task),
                ..Plan::default()
            })
        })
    }

    fn execute<'a>(
        &'a self,
        _arguments: &'a serde_json::Value,
        plan: &'a Plan,
        _ctx: &'a ToolContext,
    ) -> BoxFuture<'a, Result<ToolOutput, ToolError>> {
        Box::pin(async move {
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
        })
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

    #[test]
    fn tasks_are_checked_naming_the_problem() {
        let err = |v| parse(&v).unwrap_err().to_string();
        assert!(err(json!({})).contains("task"));
        assert!(err(json!({"task": " "})).contains("empty"));
        assert!(err(json!({"task": "x", "tools": ["delegate"]})).contains("cannot delegate"));
        assert!(
            err(json!({"task": "x", "mode": "root"})).contains("read_only, supervised or full")
        );
        assert!(err(json!({"task": "x", "label": ""})).contains("`label` is empty"));
        let task =
            parse(&json!({"task": "Find the tests\nand list them", "mode": "read_only"})).unwrap();
        assert_eq!(task.label, "Find the tests");
        assert_eq!(task.mode, Some(Mode::ReadOnly));
    }
}
