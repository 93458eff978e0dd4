//! `pincer trust [PATH] [--revoke] [--list]`: the project directories whose
//! own hooks run and whose skills and custom commands are offered, given or taken
//! back as their hook files are now.

use std::path::Path;
use std::sync::Arc;

use super::{directory, print};
use crate::app::{Failure, Flags, exit};
use crate::core::hooks::{Hooks as _, Trust, TrustWrite, WorkspaceHooks};
use crate::core::journal::{Journal, Write};
use crate::core::skills::HeldBack;

pub async fn trust(
    flags: &Flags,
    path: Option<&Path>,
    revoke: bool,
    list: bool,
) -> Result<u8, Failure> {
    let (config, store) = crate::app::open_config_and_store(flags).await?;
    let journal: Arc<dyn Journal> = store.clone();
    if list {
        let roots = journal.trusted_roots().await.map_err(Failure::failed)?;
        store.shutdown();
        print(&list_text(&roots))?;
        return Ok(exit::OK);
    }
    let dir = directory(path)?;
    let root = crate::core::hooks::project_dir(&dir);
    let settings = crate::app::wiring::hook_settings(&config);
    let hooks = crate::hooks::HookSet::new(&settings, &|name| std::env::var(name).ok())
        .map_err(Failure::usage)?
        .with_trust(journal.clone());
    // Trust is given to the hook files as they are now, which is what the
    // answer lists.
    let found = hooks.workspace_hooks(&root).await;
    let skills = crate::app::wiring::skills(&config, &|name| std::env::var(name).ok());
    let brings = HeldBack::of(&skills.for_workspace(&dir, true));
    journal
        .commit(Write::Trust(TrustWrite::Set {
            root: root.clone(),
            trusted: !revoke,
            at: crate::core::session::now_millis(),
            files: if revoke {
                Vec::new()
            } else {
                found.as_ref().map(|f| f.files.clone()).unwrap_or_default()
            },
        }))
        .await
        .map_err(Failure::failed)?;
    let out = if revoke {
        format!(
            "{} is no longer trusted: its hooks do not run and its skills are not offered to the model.\n",
            root.display()
        )
    } else {
        trusted_text(&root, found.as_ref(), config.hooks.import.is_empty()) + &skills_text(&brings)
    };
    store.shutdown();
    print(&out)?;
    Ok(exit::OK)
}

/// `--list`: each trusted directory with its hook files and their hooks.
fn list_text(roots: &[Trust]) -> String {
    let mut out = String::new();
    if roots.is_empty() {
        out.push_str("No project directory is trusted.\n");
    }
    for trust in roots {
        out.push_str(&format!("{}\n", trust.root.display()));
        for file in trust.files.iter().filter(|f| f.digest.is_some()) {
            out.push_str(&format!("  {}\n", file.path));
            for hook in &file.hooks {
                out.push_str(&format!("    {hook}\n"));
            }
        }
    }
    out
}

/// The answer to trusting `root`: what its hook files bring.
fn trusted_text(root: &Path, found: Option<&WorkspaceHooks>, no_import: bool) -> String {
    let mut out = format!(
        "Trusted {}: its hooks run from now on, as long as their files stay as they are now.\n",
        root.display()
    );
    match found {
        Some(found) => {
            for change in &found.changed {
                out.push_str(&format!("- since last trusted: {change}\n"));
            }
            for hook in &found.hooks {
                out.push_str(&format!("- {hook}\n"));
            }
            for left in &found.left_out {
                out.push_str(&format!("- left out: {left}\n"));
            }
        }
        None if no_import => out.push_str(
            "No workspace hooks are read while `[hooks] import` is not set (docs/hooks.md).\n",
        ),
        None => out.push_str("It brings no hooks Pincer reads.\n"),
    }
    out
}

/// What trusting adds for the model: the project's skills.
fn skills_text(brings: &HeldBack) -> String {
    match brings.describe() {
        Some(skills) => {
            format!("Its skills and custom commands are offered from now on: {skills}.\n")
        }
        None => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    #[test]
    fn trusting_names_the_skills_the_model_is_offered() {
        assert_eq!(skills_text(&HeldBack::default()), "");
        assert_eq!(
            skills_text(&HeldBack {
                skills: vec!["pdf".into(), "review".into()],
                commands: Vec::new(),
            }),
            "Its skills and custom commands are offered from now on: 2 skills (pdf, review).\n"
        );
    }

    #[test]
    fn trusting_lists_what_the_hook_files_bring() {
        let found = WorkspaceHooks {
            root: PathBuf::from("/p"),
            trusted: false,
            hooks: vec!["a.json: PreToolUse echo".into()],
            left_out: vec!["b.json: unreadable".into()],
            changed: vec!["a.json: edited".into()],
            files: Vec::new(),
        };
        assert_eq!(
            trusted_text(Path::new("/p"), Some(&found), false),
            "Trusted /p: its hooks run from now on, as long as their files stay as they are now.\n\
             - since last trusted: a.json: edited\n\
             - a.json: PreToolUse echo\n\
             - left out: b.json: unreadable\n"
        );
        assert!(
            trusted_text(Path::new("/p"), None, true)
                .ends_with("while `[hooks] import` is not set (docs/hooks.md).\n")
        );
        assert!(
            trusted_text(Path::new("/p"), None, false)
                .ends_with("It brings no hooks Pincer reads.\n")
        );
    }

    #[test]
    fn the_list_names_each_file_that_exists_with_its_hooks() {
        assert_eq!(list_text(&[]), "No project directory is trusted.\n");
        let file = |path: &str, digest: Option<&str>| crate::core::hooks::TrustedFile {
            path: path.into(),
            digest: digest.map(str::to_owned),
            hooks: vec![format!("{path} hook")],
        };
        let trust = Trust {
            root: PathBuf::from("/p"),
            files: vec![file("a.json", Some("00")), file("gone.json", None)],
        };
        assert_eq!(list_text(&[trust]), "/p\n  a.json\n    a.json hook\n");
    }
}
