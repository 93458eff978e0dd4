//! `todo`: the model's task list. Each call replaces the whole list; the gate
//! turns it into a `plan` event, which editors show as the agent's plan. It
//! touches nothing, so every mode allows it.

use schemars::JsonSchema;
use serde::Deserialize;

use crate::core::tool::{
    Plan, PlanEntry, PlanPriority, PlanStatus, ToolContext, ToolError, ToolKind, ToolOutput,
    TypedTool,
};

/// More tasks than this is not a plan anyone reads.
const MAX_TASKS: usize = 50;
/// The longest task text kept.
const MAX_TASK_CHARS: usize = 500;

pub struct TodoTool;

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Args {
    /// The whole task list, in order.
    #[schemars(length(max = MAX_TASKS))]
    todos: Vec<PlanEntry>,
}

/// The list, checked: not too long, no task empty or too long, at most one
/// in progress.
fn check(args: &Args) -> Result<&[PlanEntry], ToolError> {
    if args.todos.len() > MAX_TASKS {
        return Err(ToolError::InvalidArguments(format!(
            "`todos` has {} tasks; at most {MAX_TASKS} are allowed",
            args.todos.len()
        )));
    }
    let mut in_progress = 0;
    for (index, task) in args.todos.iter().enumerate() {
        if task.content.trim().is_empty() {
            return Err(ToolError::InvalidArguments(format!(
                "`todos[{index}].content` is empty"
            )));
        }
        if task.content.chars().count() > MAX_TASK_CHARS {
            return Err(ToolError::InvalidArguments(format!(
                "`todos[{index}].content` is longer than {MAX_TASK_CHARS} characters"
            )));
        }
        if task.status == PlanStatus::InProgress {
            in_progress += 1;
        }
    }
    if in_progress > 1 {
        return Err(ToolError::InvalidArguments(format!(
            "{in_progress} tasks are in_progress; keep at most one in progress at a time"
        )));
    }
    Ok(&args.todos)
}

fn done_count(tasks: &[PlanEntry]) -> usize {
    tasks
        .iter()
        .filter(|t| t.status == PlanStatus::Completed)
        .count()
}

/// The list as the model reads it back.
fn render(tasks: &[PlanEntry]) -> String {
    if tasks.is_empty() {
        return "The task list is now empty.".to_owned();
    }
    let mut text = format!(
        "Task list updated ({}/{} done):\n",
        done_count(tasks),
        tasks.len()
    );
    for task in tasks {
        let mark = task.status.mark();
        let priority = match task.priority {
            PlanPriority::High => " (high)",
            PlanPriority::Medium => "",
            PlanPriority::Low => " (low)",
        };
        text.push_str(&format!("{mark} {}{priority}\n", task.content.trim()));
    }
    text
}

impl TypedTool for TodoTool {
    type Args = Args;
    const NAME: &'static str = "todo";
    const KIND: ToolKind = ToolKind::Think;

    fn description(&self) -> String {
        "Keeps your task list for the current request, shown to the user as \
         your plan. Use it for work with three or more steps: write the whole \
         list at the start, then call it again with the whole list each time a \
         task starts or finishes (exactly one task in_progress while working). \
         Each call replaces the previous list."
            .to_owned()
    }

    async fn plan(&self, args: &Args, _ctx: &ToolContext) -> Result<Plan, ToolError> {
        let tasks = check(args)?;
        Ok(Plan {
            title: format!(
                "Update the task list ({}/{} done)",
                done_count(tasks),
                tasks.len()
            ),
            ..Plan::default()
        })
    }

    async fn execute(
        &self,
        args: &Args,
        _plan: &Plan,
        _ctx: &ToolContext,
    ) -> Result<ToolOutput, ToolError> {
        let tasks = check(args)?;
        Ok(ToolOutput {
            text: render(tasks),
            plan: Some(tasks.to_vec()),
            ..ToolOutput::default()
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::tool::parse_args;
    use serde_json::json;

    fn parse(arguments: &serde_json::Value) -> Result<Vec<PlanEntry>, ToolError> {
        check(&parse_args(arguments)?).map(<[PlanEntry]>::to_vec)
    }

    #[test]
    fn a_list_is_parsed_with_default_priority_and_rendered() {
        let tasks = parse(&json!({"todos": [
            {"content": "Read the code", "status": "completed"},
            {"content": "Fix the bug", "status": "in_progress", "priority": "high"},
            {"content": "Add a test", "status": "pending", "priority": "low"}
        ]}))
        .unwrap();
        assert_eq!(tasks[0].priority, PlanPriority::Medium);
        assert_eq!(
            render(&tasks),
            "Task list updated (1/3 done):\n[x] Read the code\n[~] Fix the bug (high)\n[ ] Add a test (low)\n"
        );
    }

    #[test]
    fn bad_lists_are_refused_naming_the_problem() {
        let err = |v| parse(&v).unwrap_err().to_string();
        assert!(err(json!({})).contains("todos"));
        assert!(
            err(json!({"todos": [{"content": "x", "status": "doing"}]}))
                .contains("todos[0].status")
        );
        assert!(err(json!({"todos": [{"content": " ", "status": "pending"}]})).contains("empty"));
        assert!(
            err(json!({"todos": [
                {"content": "a", "status": "in_progress"},
                {"content": "b", "status": "in_progress"}
            ]}))
            .contains("at most one")
        );
        let many: Vec<_> = (0..51)
            .map(|i| json!({"content": format!("t{i}"), "status": "pending"}))
            .collect();
        assert!(err(json!({ "todos": many })).contains("at most 50"));
    }
}
