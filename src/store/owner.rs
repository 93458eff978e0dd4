//! Which process owns a run, so that recovery only touches runs of dead processes.
//!
//! Several pincer processes may share one database (an editor launches one per
//! window, `pincer run` runs beside it), and several machines may share one
//! PostgreSQL database. A run records its owner as `pid:start-time@host`;
//! the start time (from `/proc`) guards against a reused pid, the host
//! against another machine's (or container's) process of the same pid.
//! Only a tag of this host is ever looked up in `/proc`; a tag without a
//! host (written before hosts were) counts as this host's.

use std::sync::OnceLock;

/// This process's owner tag.
pub fn this_process() -> &'static str {
    static TAG: OnceLock<String> = OnceLock::new();
    TAG.get_or_init(|| {
        let pid = std::process::id();
        let host = crate::store::postgres::host();
        match start_time(pid) {
            Some(start) => format!("{pid}:{start}@{host}"),
            None => format!("{pid}:?@{host}"),
        }
    })
}

/// Whether the process a tag names is still running (never true for this process's
/// own earlier incarnations, whose start time differs).
pub fn is_alive(tag: &str) -> bool {
    let Some(local) = here(tag) else {
        return false;
    };
    let Some((pid, start)) = local.split_once(':') else {
        return false;
    };
    let Ok(pid) = pid.parse::<u32>() else {
        return false;
    };
    if tag == this_process() {
        // Recovery runs at open, before this process has created any run.
        return false;
    }
    match start_time(pid) {
        Some(actual) => start == "?" || actual.to_string() == start,
        None => false,
    }
}

/// Whether `tag` names a process of this machine (`pid:start`) that is no
/// longer running: a lease it held may be taken at once instead of after
/// it lapses. A tag of another form is never taken for dead.
pub fn is_dead_here(tag: &str) -> bool {
    let Some(local) = here(tag) else {
        return false;
    };
    let well_formed = local.split_once(':').is_some_and(|(pid, start)| {
        pid.parse::<u32>().is_ok() && (start == "?" || start.parse::<u64>().is_ok())
    });
    well_formed && tag != this_process() && !is_alive(tag)
}

/// The `pid:start` of a tag of this host; `None` for another host's.
fn here(tag: &str) -> Option<&str> {
    match tag.rsplit_once('@') {
        Some((local, host)) => (host == crate::store::postgres::host()).then_some(local),
        None => Some(tag),
    }
}

/// The process start time in clock ticks since boot (field 22 of `/proc/PID/stat`).
fn start_time(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) may contain spaces and parentheses; skip past its end.
    let rest = &stat[stat.rfind(')')? + 2..];
    rest.split_whitespace().nth(19)?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_process_is_tagged_and_dead_pids_are_not_alive() {
        let tag = this_process();
        assert!(tag.starts_with(&format!("{}:", std::process::id())));
        assert!(
            !tag.contains(":?@"),
            "start time should be readable on Linux: {tag}"
        );
        assert!(!is_alive("999999999:1"));
        assert!(!is_alive("garbage"));
        // pid 1 is alive, but not with start time 0 unless it started at boot tick 0.
        let init = format!("1:{}", start_time(1).unwrap_or(0));
        assert!(is_alive(&init));
        assert!(!is_alive("1:123456789123"));
        // Another machine's process is never looked up here: not alive by
        // `/proc`, and not dead here either (its lease decides).
        let elsewhere = format!(
            "1:{}@another-host-{}",
            start_time(1).unwrap_or(0),
            std::process::id()
        );
        assert!(!is_alive(&elsewhere));
        assert!(!is_dead_here(&elsewhere));
        assert!(!is_dead_here("999999999:1@another-host"));
        assert!(is_dead_here(&format!(
            "999999999:1@{}",
            crate::store::postgres::host()
        )));
        assert!(
            tag.ends_with(&format!("@{}", crate::store::postgres::host())),
            "{tag}"
        );
    }
}
