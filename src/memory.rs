//! `pincer memory`: what the agent remembers, managed by the person (list,
//! search, add, edit, rm, export and import as JSON lines). Every change goes
//! through the runtime's memory keeper: checked, through the safety pass,
//! durable before the command returns.

use std::io::BufRead;
use std::path::{Path, PathBuf};

use anyhow::anyhow;

use crate::app::{App, Failure, Flags, exit};
use crate::cli::{MemoryCommand, MemoryReach};
use crate::core::memory::{
    Keeper, MemoryError, MemoryFilter, MemoryItem, MemorySource, NewItem, Patch, Scope, ScopeKeys,
};
use crate::core::quote::quote;
use crate::stdout::{table, timestamp as time};

fn print(text: &str) -> Result<(), Failure> {
    crate::stdout::write_all(text.as_bytes()).map_err(Failure::failed)
}

pub async fn run(flags: &Flags, command: &MemoryCommand) -> Result<u8, Failure> {
    let app = App::open(flags).await?;
    let keeper = app.runtime.memory().ok_or_else(|| {
        Failure::usage(anyhow!(
            "memory is turned off ([memory] enabled = false in the config file)"
        ))
    })?;
    match command {
        MemoryCommand::List {
            reach,
            scope,
            tag,
            pinned,
            limit,
            json,
        } => {
            let scope = scope.as_deref().map(parse_scope).transpose()?;
            let filter = MemoryFilter {
                within: visible(&app, reach).await?,
                scope,
                tag: tag.clone(),
                pinned_only: *pinned,
                limit: *limit,
            };
            list(&keeper, filter, *json).await
        }
        MemoryCommand::Search {
            query,
            reach,
            limit,
            json,
        } => search(&keeper, keys(&app, reach).await?, query, *limit, *json).await,
        MemoryCommand::Add {
            text,
            scope,
            cwd,
            tags,
            pin,
        } => {
            let item = NewItem {
                text: text.clone(),
                scope: parse_scope(scope)?,
                tags: tags.clone(),
                pinned: *pin,
                source: MemorySource {
                    by: "person".into(),
                    ..MemorySource::default()
                },
            };
            add(&app, &keeper, cwd.as_deref(), item).await
        }
        MemoryCommand::Edit {
            id,
            text,
            tags,
            no_tags,
            pin,
            unpin,
        } => edit(&keeper, id, patch(text, tags, *no_tags, *pin, *unpin)?).await,
        MemoryCommand::Rm { ids } => rm(&keeper, ids).await,
        MemoryCommand::Export { reach } => export(&keeper, visible(&app, reach).await?).await,
        MemoryCommand::Import { file } => {
            let code = import(&keeper, file).await?;
            if let Some(semantic) = &app.semantic {
                embed(semantic).await?;
            }
            Ok(code)
        }
        MemoryCommand::Embed => embed_all(app.semantic.as_deref()).await,
    }
}

/// `memory list`: the items the filter lets through.
async fn list(keeper: &Keeper, filter: MemoryFilter, json: bool) -> Result<u8, Failure> {
    let items = keeper.store.list(filter).await.map_err(Failure::failed)?;
    show(&items, json)?;
    Ok(exit::OK)
}

/// `memory search`: the items that match the query best, as recall ranks them.
async fn search(
    keeper: &Keeper,
    keys: Option<ScopeKeys>,
    query: &str,
    limit: usize,
    json: bool,
) -> Result<u8, Failure> {
    let items = keeper
        .find(keys.as_ref(), Some(query), limit)
        .await
        .map_err(failure)?;
    if let Some(why) = keeper.store.degraded() {
        eprintln!("pincer: {why}");
    }
    show(&items, json)?;
    Ok(exit::OK)
}

/// `memory add`: a user or workspace item; its id is the answer.
async fn add(app: &App, keeper: &Keeper, cwd: Option<&Path>, item: NewItem) -> Result<u8, Failure> {
    if item.scope == Scope::Conversation {
        return Err(Failure::usage(anyhow!(
            "conversation items are saved from their conversation (/remember in a chat, /memory add in an editor); use --scope user or workspace here"
        )));
    }
    let keys = app.runtime.workspace_keys(&workspace(cwd)?).await;
    let item = keeper.add(&keys, item).await.map_err(failure)?;
    print(&format!("{}\n", item.id))?;
    Ok(exit::OK)
}

/// The change `memory edit` asks for; refused when it asks for none.
fn patch(
    text: &Option<String>,
    tags: &[String],
    no_tags: bool,
    pin: bool,
    unpin: bool,
) -> Result<Patch, Failure> {
    let patch = Patch {
        text: text.clone(),
        tags: if no_tags {
            Some(Vec::new())
        } else if tags.is_empty() {
            None
        } else {
            Some(tags.to_vec())
        },
        pinned: if pin {
            Some(true)
        } else if unpin {
            Some(false)
        } else {
            None
        },
    };
    if patch.text.is_none() && patch.tags.is_none() && patch.pinned.is_none() {
        return Err(Failure::usage(anyhow!(
            "nothing to change: pass --text, --tag, --no-tags, --pin or --unpin"
        )));
    }
    Ok(patch)
}

/// `memory edit`: the item changed, shown as `list` shows it.
async fn edit(keeper: &Keeper, id: &str, patch: Patch) -> Result<u8, Failure> {
    let item = keeper.edit(id, None, patch).await.map_err(failure)?;
    show(std::slice::from_ref(&item), false)?;
    Ok(exit::OK)
}

/// `memory rm`: each item forgotten, or the first that cannot be.
async fn rm(keeper: &Keeper, ids: &[String]) -> Result<u8, Failure> {
    for id in ids {
        let item = keeper.forget(id, None).await.map_err(failure)?;
        print(&format!("forgot {}\n", item.id))?;
    }
    Ok(exit::OK)
}

/// `memory export`: the items as JSON lines, oldest first.
async fn export(keeper: &Keeper, within: Vec<(Scope, String)>) -> Result<u8, Failure> {
    let items = keeper
        .store
        .list(MemoryFilter {
            within,
            ..MemoryFilter::default()
        })
        .await
        .map_err(Failure::failed)?;
    let mut out = String::new();
    for item in items.iter().rev() {
        out.push_str(&serde_json::to_string(item).map_err(Failure::failed)?);
        out.push('\n');
    }
    print(&out)?;
    Ok(exit::OK)
}

/// `memory embed`: fails (exit 2) while items are left without a vector.
async fn embed_all(semantic: Option<&crate::core::semantic::Semantic>) -> Result<u8, Failure> {
    let Some(semantic) = semantic else {
        return Err(Failure::usage(anyhow!(
            "memory search by meaning is not configured: set `embeddings = \"PROVIDER/MODEL\"` in [memory] (docs/memory.md)"
        )));
    };
    let done = embed(semantic).await?;
    Ok(if done.left > 0 {
        exit::RUN_FAILED
    } else {
        exit::OK
    })
}

fn failure(err: MemoryError) -> Failure {
    match err {
        MemoryError::Backend(err) => Failure::failed(anyhow!(err)),
        other @ (MemoryError::Invalid(_) | MemoryError::NotFound(_) | MemoryError::Conflict(_)) => {
            Failure::usage(other)
        }
    }
}

fn parse_scope(raw: &str) -> Result<Scope, Failure> {
    Scope::parse(raw).ok_or_else(|| {
        Failure::usage(anyhow!(
            "unknown scope {}; use user, workspace or conversation",
            quote(raw)
        ))
    })
}

/// The directory a command works for: `--cwd` or the current one.
fn workspace(cwd: Option<&Path>) -> Result<PathBuf, Failure> {
    let dir = match cwd {
        Some(dir) => dir.to_path_buf(),
        None => std::env::current_dir()
            .map_err(|err| Failure::failed(anyhow!("cannot read the current directory: {err}")))?,
    };
    dir.canonicalize()
        .map_err(|err| Failure::usage(anyhow!("{}: {err}", dir.display())))
}

/// The scope keys a listing sees: every key with `--all` (none given).
async fn visible(app: &App, reach: &MemoryReach) -> Result<Vec<(Scope, String)>, Failure> {
    Ok(match keys(app, reach).await? {
        Some(keys) => keys.visible(),
        None => Vec::new(),
    })
}

/// The keys a command sees: `None` with `--all`.
async fn keys(app: &App, reach: &MemoryReach) -> Result<Option<ScopeKeys>, Failure> {
    if reach.all {
        return Ok(None);
    }
    let dir = workspace(reach.cwd.as_deref())?;
    Ok(Some(app.runtime.workspace_keys(&dir).await))
}

fn show(items: &[MemoryItem], json: bool) -> Result<(), Failure> {
    if json {
        let mut out = String::new();
        for item in items {
            out.push_str(&serde_json::to_string(item).map_err(Failure::failed)?);
            out.push('\n');
        }
        return print(&out);
    }
    if items.is_empty() {
        return print("no memory items\n");
    }
    let mut rows = vec![[
        "ID".to_owned(),
        "SCOPE".to_owned(),
        "UPDATED".to_owned(),
        "TEXT".to_owned(),
    ]];
    for item in items {
        let mut text = item.text.replace('\n', " ");
        if !item.tags.is_empty() {
            text.push_str(&format!(" [{}]", item.tags.join(", ")));
        }
        let scope = match item.scope {
            Scope::User => "user".to_owned(),
            Scope::Workspace | Scope::Conversation => {
                format!("{} {}", item.scope.as_str(), item.scope_key)
            }
        };
        rows.push([
            item.id.clone(),
            if item.pinned {
                format!("{scope} (pinned)")
            } else {
                scope
            },
            time(item.updated_at),
            text,
        ]);
    }
    print(&table(&rows))
}

/// Embeds the items without a vector and says how many.
async fn embed(
    semantic: &crate::core::semantic::Semantic,
) -> Result<crate::core::semantic::Backfill, Failure> {
    let done = semantic.backfill().await.map_err(failure)?;
    print(&format!(
        "embedded {} with {}{}\n",
        done.embedded,
        semantic.label(),
        if done.left > 0 {
            format!(", {} left without a vector", done.left)
        } else {
            String::new()
        }
    ))?;
    if done.left > 0
        && let Some(why) = crate::core::memory::Memories::degraded(semantic)
    {
        eprintln!("pincer: {why}");
    }
    Ok(done)
}

/// Adds the items of a JSON-lines file; each refused line is named, and the
/// command fails (exit 2) when any was.
async fn import(keeper: &Keeper, file: &Path) -> Result<u8, Failure> {
    let reader: Box<dyn BufRead> = if file == Path::new("-") {
        Box::new(std::io::BufReader::new(std::io::stdin()))
    } else {
        Box::new(std::io::BufReader::new(std::fs::File::open(file).map_err(
            |err| Failure::usage(anyhow!("{}: {err}", file.display())),
        )?))
    };
    let (mut added, mut present, mut refused) = (0, 0, 0);
    for (index, line) in reader.lines().enumerate() {
        let line = line.map_err(|err| Failure::failed(anyhow!("{}: {err}", file.display())))?;
        if line.trim().is_empty() {
            continue;
        }
        let number = index + 1;
        let item: MemoryItem = match serde_json::from_str(&line) {
            Ok(item) => item,
            Err(err) => {
                refused += 1;
                eprintln!("pincer: line {number}: not a memory item: {err}");
                continue;
            }
        };
        match keeper.import(item).await {
            Ok(true) => added += 1,
            Ok(false) => present += 1,
            Err(MemoryError::Backend(err)) => return Err(Failure::failed(anyhow!(err))),
            Err(err) => {
                refused += 1;
                eprintln!("pincer: line {number}: {err}");
            }
        }
    }
    print(&format!(
        "imported {added}, already there {present}, refused {refused}\n"
    ))?;
    Ok(if refused > 0 { exit::USAGE } else { exit::OK })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_edit_changes_only_what_is_asked() {
        let tags = vec!["a".to_owned()];
        let p = patch(&Some("new".into()), &[], false, false, false).unwrap();
        assert_eq!(
            (p.text.as_deref(), p.tags, p.pinned),
            (Some("new"), None, None)
        );
        let p = patch(&None, &tags, false, true, false).unwrap();
        assert_eq!(
            (p.text, p.tags, p.pinned),
            (None, Some(tags.clone()), Some(true))
        );
        let p = patch(&None, &[], true, false, true).unwrap();
        assert_eq!(
            (p.text, p.tags, p.pinned),
            (None, Some(Vec::new()), Some(false))
        );
    }

    #[test]
    fn an_edit_of_nothing_is_refused() {
        let err = patch(&None, &[], false, false, false).unwrap_err();
        assert_eq!(err.code, exit::USAGE);
        assert!(err.error.to_string().starts_with("nothing to change"));
    }

    #[test]
    fn a_scope_is_one_of_three() {
        assert_eq!(parse_scope("user").unwrap(), Scope::User);
        assert_eq!(parse_scope("workspace").unwrap(), Scope::Workspace);
        let err = parse_scope("team").unwrap_err();
        assert!(
            err.error.to_string().starts_with("unknown scope"),
            "{}",
            err.error
        );
    }
}
