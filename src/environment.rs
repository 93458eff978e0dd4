//! The facts about the machine the system prompt states (`core::prompt`):
//! the operating system, the person's shell, today's date and time zone, and
//! for a git workspace its branch and whether the tree is dirty. Read once per
//! run; `git` runs with a time limit and its failure only leaves the facts out.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::core::prompt::{Environment, EnvironmentProbe, Git};

/// Longest a `git` query may take before its answer is left out.
const GIT_LIMIT: Duration = Duration::from_secs(2);

/// The probe of this machine.
#[derive(Debug, Default)]
pub struct Probe;

impl EnvironmentProbe for Probe {
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
            git: git(workspace),
        }
    }
}

/// The branch and state of the repository holding `workspace`, if any.
fn git(workspace: &Path) -> Option<Git> {
    let top = run_git(workspace, &["rev-parse", "--show-toplevel"])?;
    if top.trim().is_empty() {
        return None;
    }
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
        branch,
        dirty: !status.trim().is_empty(),
    })
}

/// `git -C workspace ARGS`'s standard output when it succeeds in time.
fn run_git(workspace: &Path, args: &[&str]) -> Option<String> {
    let mut child = Command::new("git")
        .arg("-C")
        .arg(workspace)
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
        let found = Probe.environment(dir.path());
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
        let found = Probe.environment(dir.path());
        assert_eq!(
            found.git,
            Some(Git {
                branch: Some("trunk".into()),
                dirty: false
            })
        );
        std::fs::write(dir.path().join("new.txt"), "x").unwrap();
        assert!(Probe.environment(dir.path()).git.unwrap().dirty);
    }
}
