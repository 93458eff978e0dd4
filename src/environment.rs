//! The facts about the machine the system prompt states (`core::prompt`):
//! the operating system, the person's shell, today's date and time zone, for
//! a git workspace its branch and whether the tree is dirty, and the project's
//! instruction files. The facts are read once per run (`git` with a time
//! limit; its failure only leaves them out), the files before each model turn.
//! The git answers of a workspace are kept two seconds: runs starting
//! together (a thousand prompts at once over HTTP) share one set of `git`
//! processes instead of each spawning its own.
//!
//! Instruction files: the person's own (`$XDG_CONFIG_HOME/pincer/AGENTS.md`),
//! then `AGENTS.md` in each directory from the repository root down to the
//! workspace — or, in a directory without one, the first of the fallbacks
//! (`CLAUDE.md`, `.github/copilot-instructions.md`). Only files the session's
//! path boundary lets tools read are read; each is cut at
//! [`Probe::max_file_bytes`], and all together at [`Probe::max_total_bytes`].

use parking_lot::Mutex;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::core::boundary::PathBoundary;
use crate::core::prompt::{Environment, EnvironmentProbe, Git, InstructionFile};

/// Longest a `git` query may take before its answer is left out.
const GIT_LIMIT: Duration = Duration::from_secs(2);

/// How long a workspace's git answers are kept.
const GIT_FRESH: Duration = Duration::from_secs(2);

/// The probe of this machine.
#[derive(Debug, Clone)]
pub struct Probe {
    /// The person's own instruction file, read for every session.
    pub user_file: Option<PathBuf>,
    /// Read in a directory that has no `AGENTS.md`, the first that exists.
    pub fallbacks: Vec<String>,
    pub max_file_bytes: usize,
    pub max_total_bytes: usize,
    /// Recent answers per workspace: its repository root, its git state.
    roots: Recent<Option<PathBuf>>,
    states: Recent<Option<Git>>,
}

impl Default for Probe {
    fn default() -> Self {
        Self {
            user_file: None,
            fallbacks: DEFAULT_FALLBACKS.iter().map(|f| (*f).to_owned()).collect(),
            max_file_bytes: 32 * 1024,
            max_total_bytes: 64 * 1024,
            roots: Recent::default(),
            states: Recent::default(),
        }
    }
}

/// Answers about workspaces, each kept [`GIT_FRESH`]: whoever asks while
/// one is being found waits for it rather than finding it again.
#[derive(Debug)]
struct Recent<T> {
    slots: Arc<Mutex<HashMap<PathBuf, Slot<T>>>>,
}

type Slot<T> = Arc<Mutex<Option<(Instant, T)>>>;

impl<T> Clone for Recent<T> {
    fn clone(&self) -> Self {
        Self {
            slots: self.slots.clone(),
        }
    }
}

impl<T> Default for Recent<T> {
    fn default() -> Self {
        Self {
            slots: Arc::default(),
        }
    }
}

impl<T: Clone> Recent<T> {
    /// Bounds the map: past this many workspaces it starts afresh.
    const MOST: usize = 1024;

    fn get(&self, workspace: &Path, find: impl FnOnce() -> T) -> T {
        let slot = {
            let mut slots = self.slots.lock();
            if slots.len() >= Self::MOST && !slots.contains_key(workspace) {
                slots.clear();
            }
            slots.entry(workspace.to_path_buf()).or_default().clone()
        };
        let mut kept = slot.lock();
        if let Some((at, value)) = kept.as_ref()
            && at.elapsed() < GIT_FRESH
        {
            return value.clone();
        }
        let value = find();
        *kept = Some((Instant::now(), value.clone()));
        value
    }
}

/// Read where a directory has no `AGENTS.md`.
pub const DEFAULT_FALLBACKS: [&str; 2] = ["CLAUDE.md", ".github/copilot-instructions.md"];

impl EnvironmentProbe for Probe {
    fn repository_root(&self, workspace: &Path) -> Option<PathBuf> {
        self.roots.get(workspace, || repository_root(workspace))
    }

    fn environment(&self, workspace: &Path) -> Environment {
        let now = jiff::Zoned::now();
        let zone = now.time_zone();
        let time_zone = zone
            .iana_name()
            .map(str::to_owned)
            .unwrap_or_else(|| now.offset().to_string());
        Environment {
            os: std::env::consts::OS.to_owned(),
            shell: std::env::var("SHELL").ok().filter(|s| !s.is_empty()),
            date: now.date().to_string(),
            time_zone,
            git: self.states.get(workspace, || git(workspace)),
            instructions: Vec::new(),
        }
    }

    fn instructions(&self, workspace: &Path, boundary: &PathBoundary) -> Vec<InstructionFile> {
        self.chain(workspace, boundary)
    }

    fn instructions_below(
        &self,
        workspace: &Path,
        dir: &Path,
        boundary: &PathBoundary,
    ) -> Vec<InstructionFile> {
        let Ok(relative) = dir.strip_prefix(workspace) else {
            return Vec::new();
        };
        let mut found = Vec::new();
        let mut budget = self.max_total_bytes;
        let mut current = workspace.to_path_buf();
        for part in relative.components() {
            current.push(part);
            if let Some(resolved) = self.file_of(&current, workspace, boundary) {
                let under = current
                    .strip_prefix(workspace)
                    .map(|p| p.display().to_string())
                    .unwrap_or_default();
                let name = resolved
                    .file_name()
                    .map(|n| n.to_string_lossy().into_owned())
                    .unwrap_or_default();
                let shown = format!(
                    "{under}/{name} (applies to files under {under}/: this run's tools reached them)"
                );
                self.read(&resolved, shown, &mut budget, &mut found);
            }
        }
        found
    }
}

impl Probe {
    /// One instruction file of `dir`: `AGENTS.md`, else the first fallback,
    /// if the boundary lets it be read.
    fn file_of(&self, dir: &Path, workspace: &Path, boundary: &PathBoundary) -> Option<PathBuf> {
        let names = std::iter::once("AGENTS.md").chain(self.fallbacks.iter().map(String::as_str));
        for name in names {
            let path = dir.join(name);
            if !path.is_file() {
                continue;
            }
            return match boundary.resolve(workspace, &path.to_string_lossy()) {
                Ok(resolved) => Some(resolved),
                Err(_) => {
                    tracing::debug!(path = %path.display(), "instruction file outside the path boundary, not read");
                    None
                }
            };
        }
        None
    }

    /// The instruction files down to the workspace, in the order the prompt
    /// shows them.
    fn chain(&self, workspace: &Path, boundary: &PathBoundary) -> Vec<InstructionFile> {
        let mut found = Vec::new();
        let mut budget = self.max_total_bytes;
        if let Some(user) = &self.user_file {
            self.read(user, user.display().to_string(), &mut budget, &mut found);
        }
        // The repository root (the nearest directory holding `.git`), else the
        // workspace alone.
        let chain: Vec<&Path> = workspace.ancestors().collect();
        let top = chain
            .iter()
            .position(|dir| dir.join(".git").exists())
            .unwrap_or(0);
        for dir in chain[..=top].iter().rev() {
            let names =
                std::iter::once("AGENTS.md").chain(self.fallbacks.iter().map(String::as_str));
            for name in names {
                let path = dir.join(name);
                if !path.is_file() {
                    continue;
                }
                // Read only what the session's tools could read.
                let Ok(resolved) = boundary.resolve(workspace, &path.to_string_lossy()) else {
                    tracing::debug!(path = %path.display(), "instruction file outside the path boundary, not read");
                    break;
                };
                let shown = resolved
                    .strip_prefix(workspace)
                    .map(|p| p.display().to_string())
                    .unwrap_or_else(|_| resolved.display().to_string());
                self.read(&resolved, shown, &mut budget, &mut found);
                break;
            }
        }
        found
    }

    /// Reads one file into `found`, cut at the per-file cap and the budget left.
    fn read(
        &self,
        path: &Path,
        shown: String,
        budget: &mut usize,
        found: &mut Vec<InstructionFile>,
    ) {
        let Ok(bytes) = std::fs::read(path) else {
            return;
        };
        let cap = self.max_file_bytes.min(*budget);
        let mut text = String::from_utf8_lossy(&bytes).into_owned();
        let truncated_from = (text.len() > cap).then_some(bytes.len());
        if text.len() > cap {
            let mut cut = cap;
            while !text.is_char_boundary(cut) {
                cut -= 1;
            }
            text.truncate(cut);
        }
        *budget -= text.len();
        if text.trim().is_empty() && truncated_from.is_none() {
            return;
        }
        found.push(InstructionFile {
            shown,
            text,
            truncated_from,
        });
    }
}

/// The top directory of the repository holding `workspace`, if any.
pub fn repository_root(workspace: &Path) -> Option<PathBuf> {
    let top = run_git(workspace, &["rev-parse", "--show-toplevel"])?;
    let top = top.trim_end_matches(['\n', '\r']);
    (!top.is_empty()).then(|| PathBuf::from(top))
}

/// The branch and state of the repository holding `workspace`, if any.
fn git(workspace: &Path) -> Option<Git> {
    let root = repository_root(workspace)?;
    let branch = run_git(workspace, &["symbolic-ref", "--quiet", "--short", "HEAD"])
        .map(|b| b.trim().to_owned())
        .filter(|b| !b.is_empty());
    let status = run_git(
        workspace,
        &[
            "--no-optional-locks",
            "status",
            "--porcelain",
            "--untracked-files=normal",
        ],
    )?;
    Some(Git {
        root,
        branch,
        dirty: !status.trim().is_empty(),
    })
}

/// `git -C workspace ARGS`'s standard output when it succeeds in time.
fn run_git(workspace: &Path, args: &[&str]) -> Option<String> {
    // A repository's own configuration can name a program for `git status`
    // to start (`core.fsmonitor`): it runs here, outside the sandbox, so
    // the flag that wins over every configuration file turns it off.
    let mut child = Command::new("git")
        .arg("-C")
        .arg(workspace)
        .args(["-c", "core.fsmonitor=false"])
        .args(args)
        .env("GIT_OPTIONAL_LOCKS", "0")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .ok()?;
    let started = Instant::now();
    loop {
        match child.try_wait() {
            Ok(Some(status)) => {
                if !status.success() {
                    return None;
                }
                let mut out = String::new();
                std::io::Read::read_to_string(&mut child.stdout.take()?, &mut out).ok()?;
                return Some(out);
            }
            Ok(None) if started.elapsed() < GIT_LIMIT => {
                std::thread::sleep(Duration::from_millis(5));
            }
            _ => {
                let _ = child.kill();
                let _ = child.wait();
                tracing::debug!(workspace = %workspace.display(), ?args, "git did not answer in time");
                return None;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn git_in(dir: &Path, args: &[&str]) {
        let status = Command::new("git")
            .arg("-C")
            .arg(dir)
            .args(args)
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .unwrap();
        assert!(status.success(), "git {args:?}");
    }

    #[test]
    fn a_workspace_outside_git_has_no_git_facts() {
        let dir = tempfile::tempdir().unwrap();
        let found = Probe::default().environment(dir.path());
        assert_eq!(found.git, None);
        assert_eq!(found.os, std::env::consts::OS);
        assert_eq!(found.date.len(), 10, "{}", found.date);
    }

    #[test]
    fn a_repository_shows_its_branch_and_whether_it_is_dirty() {
        let dir = tempfile::tempdir().unwrap();
        if Command::new("git").arg("--version").output().is_err() {
            eprintln!("skipped: no git on this machine");
            return;
        }
        git_in(dir.path(), &["init", "-q", "-b", "trunk"]);
        let found = Probe::default().environment(dir.path());
        assert_eq!(
            found.git,
            Some(Git {
                root: dir.path().canonicalize().unwrap(),
                branch: Some("trunk".into()),
                dirty: false
            })
        );
        std::fs::write(dir.path().join("new.txt"), "x").unwrap();
        assert!(Probe::default().environment(dir.path()).git.unwrap().dirty);
    }
}
