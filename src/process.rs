//! Child processes run in a group of their own (hooks, MCP servers, shell
//! calls): one way to end such a group, helpers it started included.

use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;

/// Kills with SIGKILL the process group led by `leader` (a child started
/// with its own group, whose id is the leader's pid). A group already gone
/// is no error; a pid that names no group of a child (0, or past `pid_t`)
/// sends nothing.
pub fn kill_group(leader: u32) {
    if let Some(group) = group_of(leader) {
        // ESRCH: the group ended on its own; nothing else can fail here.
        let _ = killpg(group, Signal::SIGKILL);
    }
}

/// The group a child's pid leads; `None` for 0 (which would be the caller's
/// own group) and for a number no pid can be.
fn group_of(leader: u32) -> Option<Pid> {
    i32::try_from(leader)
        .ok()
        .filter(|pid| *pid > 0)
        .map(Pid::from_raw)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{BufRead, BufReader};
    use std::os::unix::process::{CommandExt, ExitStatusExt};
    use std::process::{Command, Stdio};

    #[test]
    fn only_a_child_s_pid_names_a_group() {
        assert_eq!(group_of(0), None, "0 is the caller's own group");
        assert_eq!(group_of(u32::MAX), None);
        assert_eq!(group_of(1 << 31), None);
        assert_eq!(group_of(4242), Some(Pid::from_raw(4242)));
    }

    #[test]
    fn the_leader_and_what_it_started_are_killed() {
        let mut child = Command::new("/bin/sh")
            .args(["-c", "sleep 60 & echo $!; wait"])
            .stdout(Stdio::piped())
            .process_group(0)
            .spawn()
            .unwrap();
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let helper: u32 = line.trim().parse().unwrap();

        kill_group(child.id());

        let status = child.wait().unwrap();
        assert_eq!(status.signal(), Some(libc::SIGKILL));
        // The helper is gone, or a zombie left for init to reap.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        loop {
            let stat = std::fs::read_to_string(format!("/proc/{helper}/stat")).unwrap_or_default();
            let state = stat.rsplit(')').next().unwrap_or("").trim_start();
            if stat.is_empty() || state.starts_with('Z') {
                break;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "the helper {helper} outlived its group: {stat}"
            );
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    }
}
