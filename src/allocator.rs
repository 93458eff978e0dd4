//! The allocator's behaviour, chosen on measurement (`docs/benchmarks.md`,
//! "Memory under hostile load"): glibc's malloc with two settings changed,
//! made before any thread starts.
//!
//! - A fixed mmap threshold of 256 KiB. By default glibc raises the
//!   threshold to the size of each mmap'd block freed (up to 32 MiB), so
//!   after the first large prompt every later one of 1 to 6 MB came from the
//!   arenas and stayed there as fragments when freed: 402 MiB peak for the
//!   hostile soak, 187 MiB with the threshold fixed.
//! - At most four arenas instead of eight per core: fewer half-empty heaps
//!   kept by threads that allocated once (163–167 MiB with both).
//!
//! A person who sets `GLIBC_TUNABLES` with a `glibc.malloc.` tunable, or one
//! of glibc's `MALLOC_*_` variables, keeps their own choice: nothing is
//! changed then. jemalloc (313 MiB) and mimalloc (572 MiB) were measured
//! under the same load and kept more.

/// Bytes from which an allocation gets its own mapping, returned whole when
/// freed.
const MMAP_THRESHOLD: i32 = 256 * 1024;

/// Arenas malloc may create for the process's threads.
const ARENA_MAX: i32 = 4;

/// A setting of glibc's malloc.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Setting {
    MmapThreshold(i32),
    ArenaMax(i32),
}

/// The settings to make, given the environment's variable `get`: none when
/// the person tuned malloc themselves.
fn settings(get: impl Fn(&str) -> Option<String>) -> Vec<Setting> {
    let tuned = get("GLIBC_TUNABLES").is_some_and(|value| value.contains("glibc.malloc."))
        || [
            "MALLOC_ARENA_MAX",
            "MALLOC_MMAP_THRESHOLD_",
            "MALLOC_TRIM_THRESHOLD_",
            "MALLOC_TOP_PAD_",
        ]
        .iter()
        .any(|name| get(name).is_some());
    if tuned {
        return Vec::new();
    }
    vec![
        Setting::MmapThreshold(MMAP_THRESHOLD),
        Setting::ArenaMax(ARENA_MAX),
    ]
}

/// Makes the settings; call first thing in `main`, before threads start.
pub fn tune() {
    for setting in settings(|name| std::env::var(name).ok()) {
        apply(setting);
    }
}

#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn apply(setting: Setting) {
    let (param, value) = match setting {
        Setting::MmapThreshold(bytes) => (libc::M_MMAP_THRESHOLD, bytes),
        Setting::ArenaMax(arenas) => (libc::M_ARENA_MAX, arenas),
    };
    // SAFETY: mallopt takes two integers and only changes malloc's
    // parameters; it is called before any other thread exists.
    let ok = unsafe { libc::mallopt(param, value) };
    if ok != 1 {
        tracing::debug!(?setting, "malloc refused a setting");
    }
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn apply(_setting: Setting) {}

#[cfg(test)]
mod tests {
    use super::*;

    fn env<'a>(vars: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<String> + 'a {
        move |name| {
            vars.iter()
                .find(|(key, _)| *key == name)
                .map(|(_, value)| value.to_string())
        }
    }

    #[test]
    fn without_a_choice_of_the_persons_both_settings_are_made() {
        assert_eq!(
            settings(env(&[("HOME", "/root")])),
            vec![Setting::MmapThreshold(262_144), Setting::ArenaMax(4)]
        );
        // Tunables of something else than malloc are no choice about it.
        assert_eq!(
            settings(env(&[("GLIBC_TUNABLES", "glibc.pthread.rseq=0")])).len(),
            2
        );
    }

    #[test]
    fn a_person_who_tuned_malloc_keeps_their_choice() {
        for vars in [
            [("GLIBC_TUNABLES", "glibc.malloc.arena_max=1")],
            [(
                "GLIBC_TUNABLES",
                "glibc.pthread.rseq=0:glibc.malloc.tcache_count=0",
            )],
            [("MALLOC_ARENA_MAX", "2")],
            [("MALLOC_MMAP_THRESHOLD_", "131072")],
            [("MALLOC_TRIM_THRESHOLD_", "0")],
            [("MALLOC_TOP_PAD_", "0")],
        ] {
            assert_eq!(settings(env(&vars)), Vec::new(), "{vars:?}");
        }
    }
}
