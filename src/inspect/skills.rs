//! `pincer skills list|show NAME|validate [DIR]`: the skills a workspace's
//! sessions find (a project's marked until it is trusted), one skill's
//! frontmatter and body, and a folder checked as the reference validator
//! checks it.

use std::path::Path;
use std::sync::Arc;

use anyhow::anyhow;

use super::{directory, print};
use crate::app::{Failure, Flags, exit};
use crate::cli::SkillsCommand;
use crate::core::journal::Journal;
use crate::skills::Listing;

pub async fn skills(flags: &Flags, command: &SkillsCommand) -> Result<u8, Failure> {
    match command {
        SkillsCommand::Validate { dir } => validate(dir.as_deref()),
        SkillsCommand::List { cwd, json } => {
            let listing = listing(flags, cwd.as_deref()).await?;
            let out = if *json {
                format!("{}\n", crate::views::json(&listing.view()))
            } else {
                listing.to_text()
            };
            print(&out)?;
            Ok(exit::OK)
        }
        SkillsCommand::Show { name, cwd, json } => {
            let listing = listing(flags, cwd.as_deref()).await?;
            let Some(entry) = listing.get(name) else {
                return Err(Failure::usage(anyhow!(
                    "no skill `{}` in {} (see `pincer skills list`)",
                    crate::core::quote::quote(name),
                    listing.workspace.display()
                )));
            };
            let out = if *json {
                entry
                    .details()
                    .map(|details| format!("{}\n", crate::views::json(&details)))
                    .map_err(|err| Failure::failed(anyhow!(err)))?
            } else {
                entry
                    .details_text()
                    .map_err(|err| Failure::failed(anyhow!(err)))?
            };
            print(&out)?;
            Ok(exit::OK)
        }
    }
}

/// The skills of the workspace `cwd` (default: the current directory).
async fn listing(flags: &Flags, cwd: Option<&Path>) -> Result<Listing, Failure> {
    let workspace = directory(cwd)?;
    let (config, store) = crate::app::open_config_and_store(flags).await?;
    let journal: Arc<dyn Journal> = store.clone();
    let trusted = crate::core::journal::project_trusted(journal.as_ref(), &workspace).await;
    store.shutdown();
    let skills = crate::app::wiring::skills(&config, &|name| std::env::var(name).ok());
    Ok(Listing::of(skills.as_ref(), &workspace, trusted))
}

/// `validate`: 0 and `Valid skill: DIR` on stdout, or 1 with each problem
/// on stderr, as `agentskills validate` answers.
fn validate(dir: Option<&Path>) -> Result<u8, Failure> {
    let dir = dir.unwrap_or(Path::new("."));
    let problems = crate::skills::validate::validate_path(dir);
    if problems.is_empty() {
        print(&format!("Valid skill: {}\n", dir.display()))?;
        return Ok(exit::OK);
    }
    let mut out = format!("Validation failed for {}:\n", dir.display());
    for problem in &problems {
        out.push_str(&format!("  - {problem}\n"));
    }
    eprint!("{out}");
    Ok(exit::RUN_FAILED)
}
