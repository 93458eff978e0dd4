//! `memory_save`, `memory_search` and `memory_forget`: the model's hands on
//! the memory (`core::memory`). They pass the gate like every tool: saving
//! changes what later sessions are told (kind `other`: asked in supervised
//! mode, refused in read only), searching reads, forgetting deletes. A text
//! the safety pass would redact is refused before it is planned, so it is
//! never stored nor shown for approval.

use schemars::JsonSchema;
use serde::Deserialize;

use crate::core::memory::{
    MemoryAccess, MemoryError, MemoryItem, MemorySearch, MemorySource, MemoryWrite, NewItem, Scope,
};
use crate::core::quote::quote;
use crate::core::session::now_millis;
use crate::core::tool::{Plan, Tool, ToolContext, ToolError, ToolKind, ToolOutput, TypedTool};

/// The memory tools; `user_scope_unasked` lets the model save user-scope
/// items without a person's approval in modes that would not ask
/// (`[memory] user_scope_unasked`).
pub fn tools(user_scope_unasked: bool) -> Vec<std::sync::Arc<dyn Tool>> {
    vec![
        std::sync::Arc::new(MemorySave { user_scope_unasked }),
        std::sync::Arc::new(MemorySearchTool),
        std::sync::Arc::new(MemoryForget),
    ]
}

fn access(ctx: &ToolContext) -> Result<&MemoryAccess, ToolError> {
    ctx.memory
        .as_ref()
        .ok_or_else(|| ToolError::Failed("memory is not available in this session".to_owned()))
}

/// What the model is told of a `scope` argument.
const SCOPE: &str = "workspace: this repository or directory (the default); user: every session of this person; conversation: this conversation only.";

/// An item as a search result line.
fn line(item: &MemoryItem) -> String {
    let mut text = format!(
        "- {} ({}{}) {}",
        item.id,
        item.scope.as_str(),
        if item.pinned { ", pinned" } else { "" },
        item.text.trim().replace('\n', " ")
    );
    if !item.tags.is_empty() {
        text.push_str(&format!(" [{}]", item.tags.join(", ")));
    }
    let date = jiff::Timestamp::from_millisecond(item.updated_at)
        .map(|t| t.strftime("%Y-%m-%d").to_string())
        .unwrap_or_default();
    text.push_str(&format!(" (saved {date})"));
    text
}

pub struct MemorySave {
    /// `[memory] user_scope_unasked`: a user-scope save is judged like
    /// any other instead of always asking.
    pub user_scope_unasked: bool,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SaveArgs {
    /// The fact, in a sentence or two.
    text: String,
    #[serde(default)]
    #[schemars(description = SCOPE)]
    scope: Option<Scope>,
    /// A few words to group and find it by.
    #[serde(default)]
    tags: Vec<String>,
    /// Keep it in view in every session of its scope (rarely needed).
    #[serde(default)]
    pinned: bool,
}

struct Save {
    text: String,
    scope: Scope,
    tags: Vec<String>,
    pinned: bool,
}

/// What `args` saves, checked by the keeper (no secret, not too long).
fn checked_save(args: &SaveArgs, access: &MemoryAccess) -> Result<Save, ToolError> {
    let scope = args.scope.unwrap_or(Scope::Workspace);
    let (text, tags) = access
        .keeper
        .check(&args.text, &args.tags)
        .map_err(|err| ToolError::InvalidArguments(err.to_string()))?;
    Ok(Save {
        text,
        scope,
        tags,
        pinned: args.pinned,
    })
}

/// A keeper's failure as the model reads it.
fn failed(err: MemoryError) -> ToolError {
    match err {
        MemoryError::Invalid(err) => ToolError::InvalidArguments(err.to_string()),
        MemoryError::NotFound(id) => {
            ToolError::InvalidArguments(format!("no memory item {id} in this session's scopes"))
        }
        MemoryError::Conflict(reason) => ToolError::Failed(reason),
        MemoryError::Backend(err) => ToolError::Failed(format!("the memory store failed: {err}")),
    }
}

impl TypedTool for MemorySave {
    type Args = SaveArgs;
    const NAME: &'static str = "memory_save";
    const KIND: ToolKind = ToolKind::Other;

    fn description(&self) -> String {
        "Remembers a fact for later sessions: the person's preferences, how this \
         project builds, tests and deploys, decisions and their reasons. One \
         short, self-contained statement per item. Never a secret. Items are \
         recalled into later conversations when relevant; pinned items are \
         always in view."
            .to_owned()
    }

    async fn plan(&self, args: &SaveArgs, ctx: &ToolContext) -> Result<Plan, ToolError> {
        let save = checked_save(args, access(ctx)?)?;
        // A user-scope item is recalled into every later session in
        // every workspace: text that steered the model once would
        // steer it everywhere from then on.
        let needs_person = (save.scope == Scope::User && !self.user_scope_unasked).then(|| {
            "a user-scope memory is recalled in every later session of every workspace".to_owned()
        });
        Ok(Plan {
            title: format!(
                "Remember ({}{}): {}",
                save.scope.as_str(),
                if save.pinned { ", pinned" } else { "" },
                quote(&save.text)
            ),
            needs_person,
            ..Plan::default()
        })
    }

    async fn execute(
        &self,
        args: &SaveArgs,
        _plan: &Plan,
        ctx: &ToolContext,
    ) -> Result<ToolOutput, ToolError> {
        let access = access(ctx)?;
        let save = checked_save(args, access)?;
        let item = access
            .keeper
            .add(
                &access.keys,
                NewItem {
                    text: save.text,
                    scope: save.scope,
                    tags: save.tags,
                    pinned: save.pinned,
                    source: MemorySource {
                        session: Some(access.session.clone()),
                        run: access.run.clone(),
                        call: ctx.call_id.clone(),
                        by: "model".to_owned(),
                    },
                },
            )
            .await
            .map_err(failed)?;
        Ok(ToolOutput::text(format!(
            "Saved {} ({}).",
            item.id,
            item.scope.as_str()
        )))
    }
}

pub struct MemorySearchTool;

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SearchArgs {
    /// Words to look for.
    query: String,
    #[serde(default)]
    #[schemars(description = SCOPE)]
    scope: Option<Scope>,
    /// At most this many (default 8).
    #[serde(default)]
    #[schemars(range(min = 1, max = MAX_RESULTS))]
    limit: Option<usize>,
}

const MAX_RESULTS: usize = 20;

impl TypedTool for MemorySearchTool {
    type Args = SearchArgs;
    const NAME: &'static str = "memory_search";
    const KIND: ToolKind = ToolKind::Search;

    fn description(&self) -> String {
        "Searches what was remembered in earlier sessions (any of the words, \
         best matches first), in the scopes this session sees."
            .to_owned()
    }

    async fn plan(&self, args: &SearchArgs, ctx: &ToolContext) -> Result<Plan, ToolError> {
        access(ctx)?;
        Ok(Plan {
            title: format!("Search memory for {}", quote(&args.query)),
            ..Plan::default()
        })
    }

    async fn execute(
        &self,
        args: &SearchArgs,
        _plan: &Plan,
        ctx: &ToolContext,
    ) -> Result<ToolOutput, ToolError> {
        let access = access(ctx)?;
        let within = match args.scope {
            Some(scope) => vec![(scope, access.keys.key(scope).to_owned())],
            None => access.keys.visible(),
        };
        let limit = args.limit.unwrap_or(8).clamp(1, MAX_RESULTS);
        let hits = access
            .keeper
            .store
            .search(MemorySearch {
                text: args.query.clone(),
                within,
                limit,
                vector: None,
            })
            .await
            .map_err(|err| ToolError::Failed(format!("cannot search the memory: {err}")))?;
        // Searched by words alone although meaning was configured: say so,
        // so a miss is not taken for an absence.
        let note = access
            .keeper
            .store
            .degraded()
            .map(|why| format!("\n(Note: {why}.)"))
            .unwrap_or_default();
        if hits.is_empty() {
            return Ok(ToolOutput::text(format!(
                "Nothing remembered matches {}.{note}",
                quote(&args.query)
            )));
        }
        access.keeper.store.note(MemoryWrite::Used {
            ids: hits.iter().map(|hit| hit.item.id.clone()).collect(),
            at: now_millis(),
        });
        let lines: Vec<String> = hits.iter().map(|hit| line(&hit.item)).collect();
        Ok(ToolOutput::text(format!(
            "{} item(s), best first:\n{}{note}",
            hits.len(),
            lines.join("\n")
        )))
    }
}

pub struct MemoryForget;

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ForgetArgs {
    /// The item's id.
    id: String,
}

/// The item `id` names, when the session sees it.
async fn visible_item(access: &MemoryAccess, id: &str) -> Result<MemoryItem, ToolError> {
    access
        .keeper
        .get(id, Some(&access.keys))
        .await
        .map_err(failed)
}

impl TypedTool for MemoryForget {
    type Args = ForgetArgs;
    const NAME: &'static str = "memory_forget";
    const KIND: ToolKind = ToolKind::Delete;

    fn description(&self) -> String {
        "Forgets a remembered item that is wrong or no longer true, by its id \
         (`mem_…`, as memory_search and recalled blocks show it)."
            .to_owned()
    }

    async fn plan(&self, args: &ForgetArgs, ctx: &ToolContext) -> Result<Plan, ToolError> {
        let item = visible_item(access(ctx)?, &args.id).await?;
        Ok(Plan {
            title: format!("Forget {}: {}", item.id, quote(&item.text)),
            ..Plan::default()
        })
    }

    async fn execute(
        &self,
        args: &ForgetArgs,
        _plan: &Plan,
        ctx: &ToolContext,
    ) -> Result<ToolOutput, ToolError> {
        let access = access(ctx)?;
        let item = access
            .keeper
            .forget(&args.id, Some(&access.keys))
            .await
            .map_err(failed)?;
        Ok(ToolOutput::text(format!("Forgot {}.", item.id)))
    }
}
