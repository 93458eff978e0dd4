//! Protected paths inside the trees a command may write (`.git/hooks`,
//! `.claude`, …: `core::boundary::Protected`) stay read-only for it.
//!
//! Landlock only grants: it cannot take writing away from `.git/hooks`
//! while leaving `.git` writable (git creates `index.lock` there). So the
//! child enters a mount namespace of its own (with a user namespace of its
//! own when not root, mapping only its own ids), makes every mount private
//! (nothing it does reaches the server's view), and binds each protected
//! path that exists read-only onto itself: writing, creating, renaming or
//! removing beneath it fails with "read-only file system", and the path
//! itself cannot be removed or renamed away (it is a mount point).
//!
//! What the binds cannot cover — a protected path that does not exist yet,
//! or a kernel without unprivileged user namespaces — the [`Snapshot`]
//! taken before the command and compared after it does: what the command
//! created at a protected path is removed, what it changed is put back when
//! it was small enough to keep, and the call's result says which.

use std::collections::BTreeMap;
use std::ffi::CString;
use std::io;
use std::os::unix::ffi::OsStrExt as _;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// The binds a child makes, worked out before the fork (the child may not
/// allocate).
#[derive(Debug)]
pub(super) struct Binds {
    /// Each existing protected path (resolved) with the flags its mount
    /// already has (a remount inside a user namespace must keep them).
    paths: Vec<(CString, libc::c_ulong)>,
    /// For a server not running as root: the id maps of the user namespace.
    user: Option<UserMaps>,
}

#[derive(Debug)]
struct UserMaps {
    uid_map: CString,
    gid_map: CString,
}

impl Binds {
    /// The binds for `paths`: those that exist, resolved; `None` when there
    /// are none or this kernel cannot make them ([`available`]).
    pub(super) fn new(paths: &[PathBuf]) -> Option<Binds> {
        let mut resolved: Vec<PathBuf> = Vec::new();
        for path in paths {
            if let Ok(real) = std::fs::canonicalize(path)
                && !resolved.contains(&real)
            {
                resolved.push(real);
            }
        }
        if resolved.is_empty() || available().is_err() {
            return None;
        }
        let paths = resolved
            .iter()
            .filter_map(|path| {
                let flags = mount_flags(path)?;
                Some((CString::new(path.as_os_str().as_bytes()).ok()?, flags))
            })
            .collect::<Vec<_>>();
        (!paths.is_empty()).then(|| Binds {
            paths,
            user: user_maps(),
        })
    }

    /// In the child, before Landlock (which forbids mounting): a private
    /// mount namespace with the paths bound read-only. A path that cannot
    /// be bound is left to the snapshot; nothing here stops the command.
    ///
    /// # Safety
    /// Only between `fork` and `exec`: raw syscalls on memory prepared
    /// before the fork, no allocation.
    pub(super) unsafe fn apply(&self) {
        // SAFETY: raw syscalls with pointers into `self`, which outlives them.
        unsafe {
            if !enter_namespace(self.user.as_ref()) {
                return;
            }
            for (path, flags) in &self.paths {
                bind_read_only(path, *flags);
            }
        }
    }
}

/// Enters a private mount namespace (and a user namespace mapping only our
/// own ids when `user` is given); whether it worked.
unsafe fn enter_namespace(user: Option<&UserMaps>) -> bool {
    // SAFETY: plain syscalls; the strings are NUL-terminated and live on.
    unsafe {
        let flags = match user {
            Some(_) => libc::CLONE_NEWUSER | libc::CLONE_NEWNS,
            None => libc::CLONE_NEWNS,
        };
        if libc::unshare(flags) != 0 {
            return false;
        }
        if let Some(maps) = user
            && !(write_file(c"/proc/self/setgroups", c"deny")
                && write_file(c"/proc/self/uid_map", &maps.uid_map)
                && write_file(c"/proc/self/gid_map", &maps.gid_map))
        {
            return false;
        }
        // Nothing done here may propagate back to the server's mounts.
        libc::mount(
            std::ptr::null(),
            c"/".as_ptr(),
            std::ptr::null(),
            libc::MS_REC | libc::MS_PRIVATE,
            std::ptr::null(),
        ) == 0
    }
}

unsafe fn bind_read_only(path: &CString, flags: libc::c_ulong) -> bool {
    // SAFETY: plain syscalls on a NUL-terminated path.
    unsafe {
        libc::mount(
            path.as_ptr(),
            path.as_ptr(),
            std::ptr::null(),
            libc::MS_BIND | libc::MS_REC,
            std::ptr::null(),
        ) == 0
            && libc::mount(
                std::ptr::null(),
                path.as_ptr(),
                std::ptr::null(),
                libc::MS_BIND | libc::MS_REMOUNT | libc::MS_RDONLY | flags,
                std::ptr::null(),
            ) == 0
    }
}

unsafe fn write_file(path: &std::ffi::CStr, text: &std::ffi::CStr) -> bool {
    // SAFETY: plain syscalls on NUL-terminated strings and our own descriptor.
    unsafe {
        let fd = libc::open(path.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC);
        if fd < 0 {
            return false;
        }
        let bytes = text.to_bytes();
        let written = libc::write(fd, bytes.as_ptr().cast(), bytes.len());
        libc::close(fd);
        written == bytes.len() as isize
    }
}

/// The flags of the mount holding `path` that a remount must keep (those
/// a user namespace may not clear).
fn mount_flags(path: &Path) -> Option<libc::c_ulong> {
    let c_path = CString::new(path.as_os_str().as_bytes()).ok()?;
    // SAFETY: `statvfs` is plain old data; all zeroes is a valid value.
    let mut stat: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: a NUL-terminated path and a buffer of the right type.
    if unsafe { libc::statvfs(c_path.as_ptr(), &mut stat) } != 0 {
        return None;
    }
    let mut flags: libc::c_ulong = 0;
    for (st, ms) in [
        (libc::ST_NOSUID, libc::MS_NOSUID),
        (libc::ST_NODEV, libc::MS_NODEV),
        (libc::ST_NOEXEC, libc::MS_NOEXEC),
        (libc::ST_NOATIME, libc::MS_NOATIME),
        (libc::ST_NODIRATIME, libc::MS_NODIRATIME),
        (libc::ST_RELATIME, libc::MS_RELATIME),
    ] {
        if stat.f_flag & st != 0 {
            flags |= ms;
        }
    }
    Some(flags)
}

/// The id maps for a server not running as root; `None` for root, which
/// needs no user namespace.
fn user_maps() -> Option<UserMaps> {
    // SAFETY: plain getters.
    let (uid, gid) = unsafe { (libc::geteuid(), libc::getegid()) };
    if uid == 0 {
        return None;
    }
    Some(UserMaps {
        uid_map: CString::new(format!("{uid} {uid} 1")).ok()?,
        gid_map: CString::new(format!("{gid} {gid} 1")).ok()?,
    })
}

/// Whether this kernel lets a command's process bind paths read-only in a
/// namespace of its own; why not, otherwise. Probed once per process by
/// running `true` that way.
pub fn available() -> Result<(), String> {
    static PROBE: OnceLock<Result<(), String>> = OnceLock::new();
    PROBE.get_or_init(probe).clone()
}

fn probe() -> Result<(), String> {
    use std::os::unix::process::CommandExt as _;
    let dir = tempfile::tempdir().map_err(|err| format!("cannot probe: {err}"))?;
    let path = CString::new(dir.path().as_os_str().as_bytes())
        .map_err(|err| format!("cannot probe: {err}"))?;
    let flags = mount_flags(dir.path()).unwrap_or(0);
    let user = user_maps();
    let mut command = std::process::Command::new("/bin/sh");
    command
        // `true`, not `:`: a failed redirection of a special built-in ends
        // the shell.
        .args([
            "-c",
            "if true > \"$1/probe\" 2>/dev/null; then exit 1; fi",
            "probe",
        ])
        .arg(dir.path())
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
    // SAFETY: raw syscalls on memory prepared before the fork, as in `apply`.
    unsafe {
        command.pre_exec(move || {
            if !enter_namespace(user.as_ref()) {
                return Err(io::Error::last_os_error());
            }
            if !bind_read_only(&path, flags) {
                return Err(io::Error::last_os_error());
            }
            Ok(())
        });
    }
    match command.status() {
        Ok(status) if status.success() => Ok(()),
        Ok(_) => Err("a read-only bind did not hold".to_owned()),
        Err(err) => Err(format!(
            "no mount namespace for commands ({err}; unprivileged user namespaces may be disabled)"
        )),
    }
}

/// Most bytes of one file a snapshot keeps to put back.
const KEEP_FILE: u64 = 1024 * 1024;
/// Most bytes a snapshot keeps in all, and most entries it walks.
const KEEP_TOTAL: u64 = 8 * 1024 * 1024;
const MAX_ENTRIES: usize = 4096;

/// What a protected path held before a command, to compare after it.
#[derive(Debug, Default)]
pub struct Snapshot {
    /// Each path, whether its parent existed, and what it held.
    paths: Vec<(PathBuf, bool, Option<Tree>)>,
}

/// One protected path's entries, relative to it ("" for itself).
#[derive(Debug, PartialEq, Eq)]
struct Tree {
    entries: BTreeMap<PathBuf, Entry>,
    /// Whether everything was kept (else changes are found, not undone).
    complete: bool,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Entry {
    Dir,
    /// The content, or its digest when too large to keep.
    File {
        content: Option<Vec<u8>>,
        digest: [u8; 32],
        mode: u32,
    },
    Link(PathBuf),
}

impl Snapshot {
    /// Records what each of `paths` holds now (absent ones too).
    pub fn take(paths: &[PathBuf]) -> Snapshot {
        let mut budget = KEEP_TOTAL;
        Snapshot {
            paths: paths
                .iter()
                .map(|path| {
                    let parent_existed = path.parent().is_some_and(Path::exists);
                    (path.clone(), parent_existed, read_tree(path, &mut budget))
                })
                .collect(),
        }
    }

    /// Compares with what the paths hold now and undoes what changed: a
    /// protected path the command created (where its parent already
    /// existed: `git init` making `.git/hooks` is no attack) is removed,
    /// one it changed is put back from the snapshot. One line per path, for
    /// the call's result; empty when nothing changed.
    pub fn restore(&self) -> Vec<String> {
        let mut notes = Vec::new();
        for (path, parent_existed, before) in &self.paths {
            let mut budget = KEEP_TOTAL;
            let now = read_tree(path, &mut budget);
            if now.as_ref().map(|t| &t.entries) == before.as_ref().map(|t| &t.entries) {
                continue;
            }
            let shown = path.display();
            match before {
                None => {
                    if !parent_existed {
                        continue;
                    }
                    match remove(path) {
                        Ok(()) => notes.push(format!(
                            "{shown} is a protected path: what the command created there was removed"
                        )),
                        Err(err) => notes.push(format!(
                            "{shown} is a protected path: the command created it and it could not be removed: {err}"
                        )),
                    }
                }
                Some(tree) if tree.complete => match put_back(path, tree) {
                    Ok(()) => notes.push(format!(
                        "{shown} is a protected path: the command's changes there were undone"
                    )),
                    Err(err) => notes.push(format!(
                        "{shown} is a protected path: the command changed it and it could not be put back: {err}"
                    )),
                },
                Some(_) => notes.push(format!(
                    "{shown} is a protected path: the command changed it (too large to put back; check it before trusting it)"
                )),
            }
        }
        notes
    }
}

fn read_tree(root: &Path, budget: &mut u64) -> Option<Tree> {
    std::fs::symlink_metadata(root).ok()?;
    let mut tree = Tree {
        entries: BTreeMap::new(),
        complete: true,
    };
    let mut pending = vec![PathBuf::new()];
    while let Some(relative) = pending.pop() {
        if tree.entries.len() >= MAX_ENTRIES {
            tree.complete = false;
            break;
        }
        let full = if relative.as_os_str().is_empty() {
            root.to_path_buf()
        } else {
            root.join(&relative)
        };
        let Ok(meta) = std::fs::symlink_metadata(&full) else {
            continue;
        };
        let entry = if meta.file_type().is_symlink() {
            Entry::Link(std::fs::read_link(&full).unwrap_or_default())
        } else if meta.is_dir() {
            if let Ok(children) = std::fs::read_dir(&full) {
                for child in children.flatten() {
                    pending.push(relative.join(child.file_name()));
                }
            }
            Entry::Dir
        } else {
            use sha2::Digest as _;
            use std::os::unix::fs::PermissionsExt as _;
            let bytes = std::fs::read(&full).unwrap_or_default();
            let digest: [u8; 32] = sha2::Sha256::digest(&bytes).into();
            let keep = meta.len() <= KEEP_FILE && meta.len() <= *budget;
            if keep {
                *budget -= meta.len();
            } else {
                tree.complete = false;
            }
            Entry::File {
                content: keep.then_some(bytes),
                digest,
                mode: meta.permissions().mode() & 0o7777,
            }
        };
        tree.entries.insert(relative, entry);
    }
    Some(tree)
}

fn remove(path: &Path) -> io::Result<()> {
    let meta = std::fs::symlink_metadata(path)?;
    if meta.is_dir() {
        std::fs::remove_dir_all(path)
    } else {
        std::fs::remove_file(path)
    }
}

/// Makes `root` hold exactly `tree` again.
fn put_back(root: &Path, tree: &Tree) -> io::Result<()> {
    // Whatever is there now and was not before (or is of another kind) goes.
    let mut budget = u64::MAX;
    if let Some(now) = read_tree(root, &mut budget) {
        for (relative, entry) in now.entries.iter().rev() {
            let same_kind = match (tree.entries.get(relative), entry) {
                (Some(Entry::Dir), Entry::Dir) => true,
                (Some(Entry::File { .. }), Entry::File { .. }) => true,
                (Some(Entry::Link(a)), Entry::Link(b)) => a == b,
                _ => false,
            };
            if !same_kind {
                let full = join(root, relative);
                if std::fs::symlink_metadata(&full).is_ok() {
                    remove(&full)?;
                }
            }
        }
    }
    for (relative, entry) in &tree.entries {
        let full = join(root, relative);
        match entry {
            Entry::Dir => {
                if !full.is_dir() {
                    std::fs::create_dir_all(&full)?;
                }
            }
            Entry::Link(target) => {
                if std::fs::symlink_metadata(&full).is_err() {
                    std::os::unix::fs::symlink(target, &full)?;
                }
            }
            Entry::File { content, mode, .. } => {
                use std::os::unix::fs::PermissionsExt as _;
                let Some(content) = content else {
                    return Err(io::Error::other("a file was too large to keep"));
                };
                if std::fs::read(&full).ok().as_ref() != Some(content) {
                    std::fs::write(&full, content)?;
                }
                std::fs::set_permissions(&full, std::fs::Permissions::from_mode(*mode))?;
            }
        }
    }
    Ok(())
}

fn join(root: &Path, relative: &Path) -> PathBuf {
    if relative.as_os_str().is_empty() {
        root.to_path_buf()
    } else {
        root.join(relative)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_snapshot_removes_what_was_created_and_puts_back_what_changed() {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path();
        std::fs::create_dir_all(ws.join(".git/hooks")).unwrap();
        std::fs::write(ws.join(".git/config"), "[core]\n").unwrap();
        std::fs::write(ws.join(".git/hooks/pre-commit.sample"), "#!/bin/sh\n").unwrap();
        let paths: Vec<PathBuf> = [".git/hooks", ".git/config", ".claude", ".git/new/x"]
            .iter()
            .map(|p| ws.join(p))
            .collect();
        let snapshot = Snapshot::take(&paths);
        assert!(snapshot.restore().is_empty(), "nothing changed yet");

        std::fs::write(ws.join(".git/config"), "[core]\nfsmonitor = evil\n").unwrap();
        std::fs::write(ws.join(".git/hooks/pre-commit"), "evil").unwrap();
        std::fs::remove_file(ws.join(".git/hooks/pre-commit.sample")).unwrap();
        std::fs::create_dir_all(ws.join(".claude")).unwrap();
        std::fs::write(ws.join(".claude/settings.local.json"), "{}").unwrap();
        // The parent of `.git/new/x` did not exist: created with it, kept.
        std::fs::create_dir_all(ws.join(".git/new/x")).unwrap();

        let notes = snapshot.restore();
        assert_eq!(notes.len(), 3, "{notes:?}");
        assert_eq!(
            std::fs::read_to_string(ws.join(".git/config")).unwrap(),
            "[core]\n"
        );
        assert!(!ws.join(".git/hooks/pre-commit").exists());
        assert!(ws.join(".git/hooks/pre-commit.sample").exists());
        assert!(!ws.join(".claude").exists());
        assert!(ws.join(".git/new/x").exists());
        assert!(snapshot.restore().is_empty(), "all put back");
    }

    #[test]
    fn binds_are_read_only_for_the_child_only() {
        if let Err(why) = available() {
            eprintln!("skipped: {why}");
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        let hooks = dir.path().join("hooks");
        std::fs::create_dir(&hooks).unwrap();
        let binds = Binds::new(std::slice::from_ref(&hooks)).unwrap();
        let mut command = std::process::Command::new("/bin/sh");
        command
            .args(["-c", "true > \"$1/pre-commit\" || exit 7", "sh"])
            .arg(&hooks);
        // SAFETY: as in the sandbox's own use.
        unsafe {
            use std::os::unix::process::CommandExt as _;
            command.pre_exec(move || {
                binds.apply();
                Ok(())
            });
        }
        let status = command.status().unwrap();
        assert_eq!(status.code(), Some(7), "the write must fail");
        assert!(!hooks.join("pre-commit").exists());
        // The server's own view is unchanged.
        std::fs::write(hooks.join("x"), "y").unwrap();
    }
}
