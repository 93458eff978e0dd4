//! Tools whose arguments are a struct ([`TypedTool`]): the model's JSON is
//! parsed into it once, when the call is planned, and the schema the model
//! is shown is derived from the same struct ([`super::schema`]), so what
//! the model is told and what is parsed cannot drift apart. Every built-in
//! tool is one; the blanket impl makes each a [`Tool`], the trait the gate,
//! the runtime and the tool sets use.

use std::any::Any;
use std::future::Future;
use std::sync::Arc;

use futures::future::BoxFuture;
use schemars::JsonSchema;
use serde::de::DeserializeOwned;

use crate::core::quote::clip_message;

use super::{Plan, Tool, ToolContext, ToolError, ToolKind, ToolOutput, ToolSpec, schema};

/// A tool whose arguments are `Args`.
pub trait TypedTool: Send + Sync + 'static {
    /// The arguments. Their JSON schema, derived, is the tool's parameters:
    /// each field's doc comment is its description, `#[schemars(range)]`
    /// its bounds, `deny_unknown_fields` refuses other names.
    type Args: DeserializeOwned + JsonSchema + Send + Sync + 'static;

    /// The name the model calls the tool by.
    const NAME: &'static str;

    /// The kind of every call of this tool.
    const KIND: ToolKind;

    /// What the model is told the tool does.
    fn description(&self) -> String;

    /// What the tool's settings decide about some arguments (a default or
    /// a bound), as keywords laid over the derived schema of each:
    /// `(argument, {"maximum": 600})`.
    fn configured(&self) -> Vec<(&'static str, serde_json::Value)> {
        Vec::new()
    }

    /// Works out what the call will touch and change, checking every path
    /// against the boundaries before reading anything.
    fn plan(
        &self,
        args: &Self::Args,
        ctx: &ToolContext,
    ) -> impl Future<Output = Result<Plan, ToolError>> + Send;

    /// Does what the plan (made from the same `args`) says.
    fn execute(
        &self,
        args: &Self::Args,
        plan: &Plan,
        ctx: &ToolContext,
    ) -> impl Future<Output = Result<ToolOutput, ToolError>> + Send;
}

impl<T: TypedTool> Tool for T {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: T::NAME.to_owned(),
            description: self.description(),
            parameters: schema::parameters::<T::Args>(self.configured()),
        }
    }

    fn kind(&self) -> ToolKind {
        T::KIND
    }

    fn plan<'a>(
        &'a self,
        arguments: &'a serde_json::Value,
        ctx: &'a ToolContext,
    ) -> BoxFuture<'a, Result<Plan, ToolError>> {
        Box::pin(async move {
            let args: Arc<T::Args> = Arc::new(parse_args(arguments)?);
            let mut plan = TypedTool::plan(self, &args, ctx).await?;
            plan.parsed = ParsedArgs(Some(args));
            Ok(plan)
        })
    }

    /// Runs with the arguments the plan was made from, not `arguments`
    /// parsed again: the gate plans the arguments it runs (a hook's
    /// rewritten input is planned afresh).
    fn execute<'a>(
        &'a self,
        _arguments: &'a serde_json::Value,
        plan: &'a Plan,
        ctx: &'a ToolContext,
    ) -> BoxFuture<'a, Result<ToolOutput, ToolError>> {
        Box::pin(async move {
            let args = plan
                .parsed
                .get::<T::Args>()
                .ok_or_else(|| ToolError::Failed(format!("`{}` ran without its plan", T::NAME)))?;
            TypedTool::execute(self, args, plan, ctx).await
        })
    }
}

/// The arguments a plan was made from, as its tool parsed them. Not part of
/// what the plan says: plans compare and print without them.
#[derive(Clone, Default)]
pub struct ParsedArgs(Option<Arc<dyn Any + Send + Sync>>);

impl ParsedArgs {
    fn get<A: 'static>(&self) -> Option<&A> {
        self.0.as_deref()?.downcast_ref()
    }
}

impl std::fmt::Debug for ParsedArgs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.0.is_some() { "parsed" } else { "none" })
    }
}

impl PartialEq for ParsedArgs {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

/// Parses arguments into a typed struct. The error names the field, in
/// serde's words (`` `edits[0]`: missing field `old_text` ``), with what it
/// quotes of the model's input clipped ([`clip_message`]).
pub fn parse_args<T: DeserializeOwned>(arguments: &serde_json::Value) -> Result<T, ToolError> {
    serde_path_to_error::deserialize(arguments).map_err(|err| {
        let path = err.path().to_string();
        let inner = err.into_inner().to_string();
        let message = if path == "." || path.is_empty() {
            inner
        } else {
            format!("`{path}`: {inner}")
        };
        ToolError::InvalidArguments(clip_message(&message))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::ids::SessionId;
    use crate::core::policy::PathBoundary;
    use crate::core::tool::{Files, Progress};
    use serde::Deserialize;
    use serde_json::json;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use tokio_util::sync::CancellationToken;

    #[derive(Deserialize, JsonSchema)]
    #[serde(deny_unknown_fields)]
    struct EchoArgs {
        /// What to say.
        text: String,
        #[serde(default)]
        times: Option<u32>,
    }

    /// Says `text` `times` times; counts its plans.
    #[derive(Default)]
    struct Echo {
        plans: AtomicUsize,
    }

    impl TypedTool for Echo {
        type Args = EchoArgs;
        const NAME: &'static str = "echo";
        const KIND: ToolKind = ToolKind::Think;

        fn description(&self) -> String {
            "Says it again.".to_owned()
        }

        fn configured(&self) -> Vec<(&'static str, serde_json::Value)> {
            vec![("times", json!({"description": "How often (default 1)."}))]
        }

        async fn plan(&self, args: &EchoArgs, _ctx: &ToolContext) -> Result<Plan, ToolError> {
            self.plans.fetch_add(1, Ordering::Relaxed);
            Ok(Plan {
                title: format!("Echo {}", args.text),
                ..Plan::default()
            })
        }

        async fn execute(
            &self,
            args: &EchoArgs,
            _plan: &Plan,
            _ctx: &ToolContext,
        ) -> Result<ToolOutput, ToolError> {
            let times = args.times.unwrap_or(1) as usize;
            Ok(ToolOutput::text(args.text.repeat(times)))
        }
    }

    fn ctx() -> ToolContext {
        let ws = std::env::temp_dir();
        ToolContext {
            session_id: SessionId::from_string("ses_t".into()),
            workspace: ws.clone(),
            boundary: Arc::new(PathBoundary::new(&ws, &[], &[], None)),
            files: Files::local(SessionId::from_string("ses_t".into())),
            cancel: CancellationToken::new(),
            progress: Progress::none(),
            terminal: None,
            memory: None,
            call_id: None,
            run_id: None,
            skills: None,
        }
    }

    #[tokio::test]
    async fn a_call_runs_with_the_arguments_its_plan_parsed() {
        let echo = Echo::default();
        let tool: &dyn Tool = &echo;
        let ctx = ctx();
        let plan = tool
            .plan(&json!({"text": "hi", "times": 2}), &ctx)
            .await
            .unwrap();
        assert_eq!(plan.title, "Echo hi");
        // Other arguments at run time are not parsed: the planned ones run.
        let out = tool
            .execute(&json!({"text": "bye"}), &plan, &ctx)
            .await
            .unwrap();
        assert_eq!(out.text, "hihi");
        assert_eq!(echo.plans.load(Ordering::Relaxed), 1);
        // A plan this tool did not make runs nothing.
        let err = tool
            .execute(&json!({"text": "hi"}), &Plan::default(), &ctx)
            .await
            .unwrap_err();
        assert_eq!(err.to_string(), "`echo` ran without its plan");
    }

    #[tokio::test]
    async fn bad_arguments_are_refused_naming_the_field_before_any_plan() {
        let echo = Echo::default();
        let tool: &dyn Tool = &echo;
        let ctx = ctx();
        for (arguments, expected) in [
            (json!({}), "invalid arguments: missing field `text`"),
            (
                json!({"text": 3}),
                "invalid arguments: `text`: invalid type: integer `3`, expected a string",
            ),
            (
                json!({"text": "a", "times": -1}),
                "invalid arguments: `times`: invalid value: integer `-1`, expected u32",
            ),
            (
                json!({"text": "a", "loud": true}),
                "invalid arguments: `loud`: unknown field `loud`, expected `text` or `times`",
            ),
            (
                json!("a"),
                "invalid arguments: invalid type: string \"a\", expected struct EchoArgs",
            ),
        ] {
            let err = tool.plan(&arguments, &ctx).await.unwrap_err();
            assert_eq!(err.to_string(), expected, "{arguments}");
        }
        // What the error quotes of the model's input is clipped.
        let long = "x".repeat(5000);
        let err = tool
            .plan(&json!({ "text": "a", long.clone(): 1 }), &ctx)
            .await
            .unwrap_err()
            .to_string();
        assert!(err.contains("… (5000 bytes)`") && err.len() < 600, "{err}");
        assert_eq!(echo.plans.load(Ordering::Relaxed), 0);
    }

    #[test]
    fn the_spec_is_the_name_the_description_and_the_derived_schema() {
        let spec = Echo::default().spec();
        assert_eq!(spec.name, "echo");
        assert_eq!(spec.description, "Says it again.");
        assert_eq!(
            spec.parameters,
            json!({
                "type": "object",
                "properties": {
                    "text": {"type": "string", "description": "What to say."},
                    "times": {"type": "integer", "minimum": 0, "description": "How often (default 1)."}
                },
                "required": ["text"],
                "additionalProperties": false
            })
        );
        assert_eq!(Echo::default().kind(), ToolKind::Think);
    }
}
