//! The sandbox: runs the commands tools start (the shell tool) in a child
//! process confined with Landlock, with a timeout, an output cap and a
//! scrubbed environment.
//!
//! # Threat model
//!
//! The model writes the command lines; a command may be wrong, careless or
//! steered by text the model read (prompt injection). The sandbox limits what
//! such a command can reach outside the workspace. The rules are built in the
//! server and applied only in the child, between `fork` and `exec`: the server
//! itself is never restricted.
//!
//! A confined command, and everything it starts, may:
//! - read, write, create and run files under the workspace and the extra
//!   read-write roots;
//! - read and run files under the system directories (`/usr`, `/bin`, `/sbin`,
//!   `/lib*`, `/opt`, `/nix/store`, ...) and the extra read-only roots (the
//!   shell tool adds the person's toolchains under home there:
//!   [`crate::tools::toolchains`]);
//! - read `/proc` and `/sys`, and `/etc` minus its secrets ([`ETC_SECRETS`]:
//!   password hashes, sudoers, SSH host keys, TLS private keys, VPN and Wi-Fi
//!   credentials, cluster credentials);
//! - read and write `/dev/null`, `/dev/zero`, `/dev/full`, `/dev/random`,
//!   `/dev/urandom` and `/dev/tty`, and list `/dev`;
//! - use a private temporary directory, created for the call and removed after
//!   it; `TMPDIR` and `XDG_CACHE_HOME` point at it, and `HOME` too unless the
//!   environment passes the real one (which the shell tool does).
//!
//! Everything else on the file system is denied: the rest of the home (`~/.ssh`,
//! `~/.aws`, ...), `/tmp`, `/root`, `/var`, `/run`, `/home`, `/mnt`, other
//! mounts, `/dev/shm` and `/dev/pts`. Paths on the forbidden list
//! ([`Confinement::deny`]) are carved out even when they lie inside a granted
//! tree: the directories on the way to them may only be listed (nothing new can
//! be created directly in them) and each of their other entries is granted on
//! its own.
//!
//! Without `network`, TCP `bind` and `connect` are denied (Landlock ABI 4 and
//! later). The command cannot signal processes outside its Landlock domain nor
//! connect to abstract Unix sockets created outside it (ABI 6). Landlock also
//! confines ptrace: a confined process cannot attach to, nor open
//! `/proc/<pid>/environ`, `maps` or `mem` of, the server or any process outside
//! its domain, so the server's environment (API keys) is out of reach. (Recent
//! kernels let `CAP_PERFMON` or `CAP_SYS_ADMIN` through those `/proc` reads
//! regardless, as seen on 6.18; hence the capabilities below.) The command's own environment
//! holds only allowlisted variables whose names do not look like secrets
//! ([`scrubbed_env`]). The tests check all of this on the machine they run on.
//!
//! Whether confined or not, the command gets no stdin, never the server's
//! stdout (the ACP protocol pipe), runs in a session of its own (so no
//! controlling terminal to read keystrokes from, and one process group to kill)
//! with `no_new_privs` (setuid programs such as `sudo` gain nothing), and every
//! inherited descriptor above stderr is closed at `exec`: Landlock checks
//! access when a file is opened, so a descriptor opened by the server would
//! otherwise bypass it. When the server runs as root, the command keeps only
//! harmless capabilities ([`KEPT_CAPABILITIES`]): no `CAP_SYS_ADMIN`,
//! `CAP_SYS_MODULE`, `CAP_SYS_PTRACE`, `CAP_NET_RAW`, `CAP_MKNOD`, ..., and no
//! rule lets it create device nodes.
//!
//! Not protected:
//! - what the command does inside the workspace (it may change or delete any
//!   file there; that is what the policy gate and approvals are for);
//! - UDP and other non-TCP sockets, and before ABI 9 connecting to pathname
//!   Unix sockets (a reachable `/var/run/docker.sock` is a way out);
//! - TCP on kernels before ABI 4 (the result says so);
//! - other processes' command lines and system information under `/proc` and
//!   `/sys`;
//! - resource exhaustion: only the timeout bounds a call, and disk use inside
//!   the workspace and the temporary directory is not limited;
//! - a process that starts a session of its own (`setsid`) escapes the group
//!   kill: it stays confined, loses its output and may outlive the call.

use std::collections::VecDeque;
use std::ffi::OsStr;
use std::io::{self, PipeReader, PipeWriter, Read};
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use landlock::{
    ABI, Access, AccessFs, AccessNet, BitFlags, PathBeneath, PathFd, Ruleset, RulesetAttr,
    RulesetCreatedAttr, Scope,
};
use serde::{Deserialize, Serialize};
use thiserror::Error;
use tokio::sync::oneshot;
use tokio_util::sync::CancellationToken;

use crate::core::safety::is_secret_name;

pub mod readonly;

/// The newest Landlock ABI whose rights these rules ask for. The crate drops,
/// on older kernels, whatever the kernel does not know (best-effort
/// compatibility), so asking for more never fails; every right asked for is
/// granted where writes are granted, so a newer right only ever denies more
/// outside the workspace (ABI 9: connecting to pathname Unix sockets).
const TARGET_ABI: ABI = ABI::V9;

/// Whether a command that cannot be confined may run anyway.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SandboxMode {
    /// Refuse to run a command when Landlock is not enforced.
    Required,
    /// Run unconfined (and say so) when Landlock is not available.
    #[default]
    BestEffort,
}

impl SandboxMode {
    pub fn as_str(self) -> &'static str {
        match self {
            SandboxMode::Required => "required",
            SandboxMode::BestEffort => "best_effort",
        }
    }
}

/// What this machine's kernel offers.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SandboxStatus {
    /// The Landlock ABI version, when Landlock is usable.
    pub abi: Option<i64>,
    /// Whether commands would run confined.
    pub enforced: bool,
    /// Whether TCP can be denied (ABI 4 and later).
    pub network_rules: bool,
    /// One line for people: what is enforced, or why nothing is.
    pub detail: String,
}

/// Probes the kernel (one syscall, no side effect).
pub fn status() -> SandboxStatus {
    match probe_abi() {
        Ok(abi) => {
            let network_rules = abi >= 4;
            let detail = if network_rules {
                format!("Landlock ABI {abi}: file system and TCP rules enforced")
            } else {
                format!(
                    "Landlock ABI {abi}: file system rules enforced; TCP is not confined (needs ABI 4, Linux 6.7)"
                )
            };
            SandboxStatus {
                abi: Some(abi),
                enforced: true,
                network_rules,
                detail,
            }
        }
        Err(err) => {
            let detail = match err.raw_os_error() {
                Some(libc::ENOSYS) => "the kernel has no Landlock support (needs Linux 5.13)".to_owned(),
                Some(libc::EOPNOTSUPP) => {
                    "Landlock is built into the kernel but disabled (not in the `lsm=` boot parameter)"
                        .to_owned()
                }
                _ => format!("the Landlock probe failed: {err}"),
            };
            SandboxStatus {
                abi: None,
                enforced: false,
                network_rules: false,
                detail,
            }
        }
    }
}

/// The Landlock ABI version the running kernel supports, if any.
pub fn landlock_abi() -> Option<i64> {
    probe_abi().ok()
}

fn probe_abi() -> io::Result<i64> {
    const LANDLOCK_CREATE_RULESET_VERSION: libc::c_uint = 1;
    // SAFETY: with a null attribute pointer, size 0 and the VERSION flag, the
    // syscall only returns the ABI version (or an error); it touches no memory.
    let abi = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<libc::c_void>(),
            0usize,
            LANDLOCK_CREATE_RULESET_VERSION,
        )
    };
    if abi > 0 {
        Ok(abi)
    } else {
        Err(io::Error::last_os_error())
    }
}

/// What a confined child may reach (see the module documentation).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Confinement {
    /// Read, write, create and execute beneath it.
    pub workspace: PathBuf,
    /// More trees with the workspace's rights (extra roots of the boundary).
    pub extra_read_write: Vec<PathBuf>,
    /// More trees to read and execute (toolchains outside the system directories).
    pub extra_read_only: Vec<PathBuf>,
    /// Paths denied even inside a granted tree (the boundary's forbidden list).
    pub deny: Vec<PathBuf>,
    /// Paths inside the writable trees that stay read-only (the protected
    /// paths, [`readonly`]): bound read-only in a mount namespace of the
    /// command's own where they exist.
    #[serde(default)]
    pub read_only: Vec<PathBuf>,
    /// Whether TCP `bind` and `connect` are allowed.
    pub network: bool,
    pub mode: SandboxMode,
}

impl Confinement {
    /// The workspace only: no network, best effort.
    pub fn new(workspace: impl Into<PathBuf>) -> Self {
        Self {
            workspace: workspace.into(),
            extra_read_write: Vec::new(),
            extra_read_only: Vec::new(),
            deny: Vec::new(),
            read_only: Vec::new(),
            network: false,
            mode: SandboxMode::BestEffort,
        }
    }
}

/// One command to run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExecRequest {
    /// Given to `bash -c` (`/bin/sh -c` when there is no bash on `PATH`).
    pub line: String,
    pub cwd: PathBuf,
    pub timeout: Duration,
    /// At most this many bytes of output are kept (head and tail).
    pub output_limit: usize,
    /// The child's whole environment, besides `TMPDIR` (the private temporary
    /// directory; `HOME` and `XDG_CACHE_HOME` too when not given here). Secret-looking names are dropped
    /// here too; build it with [`scrubbed_env`].
    pub env: Vec<(String, String)>,
}

/// How a command ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExecResult {
    pub exit_code: Option<i32>,
    /// The signal that ended the command (SIGKILL after a timeout or cancel).
    pub signal: Option<i32>,
    /// Stdout and stderr interleaved in the order written, lossy UTF-8; when
    /// longer than the limit, its head and tail around an omission marker.
    pub output: String,
    /// Bytes of output left out.
    pub omitted_bytes: usize,
    pub timed_out: bool,
    pub cancelled: bool,
    /// Whether Landlock confined the command.
    pub confined: bool,
    /// Whether TCP was denied (false when the network is allowed, or the
    /// kernel has no network rules, or the command was not confined).
    pub network_confined: bool,
    /// Why the command ran unconfined, or what part of the confinement the
    /// kernel could not enforce.
    pub sandbox_note: Option<String>,
    /// A process that left the process group still held the output pipe open
    /// when the command ended; what it wrote afterwards is lost.
    pub output_detached: bool,
    pub duration: Duration,
}

#[derive(Debug, Error)]
pub enum SandboxError {
    #[error(
        "the sandbox is not enforced: {0}; sandbox = \"required\" refuses to run commands unconfined"
    )]
    NotEnforced(String),
    #[error("cannot grant access to {path}: {source}")]
    Grant { path: PathBuf, source: io::Error },
    #[error("the working directory {0} is not a directory")]
    Cwd(PathBuf),
    #[error("cannot create the private temporary directory: {0}")]
    TempDir(io::Error),
    #[error("cannot create the output pipe: {0}")]
    Pipe(io::Error),
    #[error("cannot start the command: {0}")]
    Spawn(io::Error),
    #[error("cannot wait for the command: {0}")]
    Wait(io::Error),
}

/// The variables a tool process may get by default (an entry ending in `*`
/// allows every name with that prefix). Where the person's toolchains live
/// (`CARGO_HOME`, ...) is added by the shell tool's settings.
pub const DEFAULT_ENV_ALLOW: &[&str] = &[
    "PATH", "LANG", "LANGUAGE", "LC_*", "TERM", "TZ", "USER", "LOGNAME", "SHELL", "NO_COLOR",
];

/// The environment a tool process gets: only allowlisted names from `source`,
/// never one that looks like it holds a secret (even when allowlisted).
pub fn scrubbed_env(
    source: impl IntoIterator<Item = (String, String)>,
    allow: &[String],
) -> Vec<(String, String)> {
    source
        .into_iter()
        .filter(|(name, _)| name_allowed(name, allow) && !is_secret_name(name))
        .collect()
}

/// Whether `name` is on `allow`, where an entry ending in `*` allows every
/// name with that prefix (`LC_*`).
pub fn name_allowed(name: &str, allow: &[String]) -> bool {
    allow.iter().any(|entry| match entry.strip_suffix('*') {
        Some(prefix) => name.starts_with(prefix),
        None => entry == name,
    })
}

/// Secrets under `/etc`, denied even though `/etc` is readable.
pub const ETC_SECRETS: &[&str] = &[
    "/etc/shadow",
    "/etc/shadow-",
    "/etc/gshadow",
    "/etc/gshadow-",
    "/etc/master.passwd",
    "/etc/security/opasswd",
    "/etc/sudoers",
    "/etc/sudoers.d",
    "/etc/ssh/ssh_host_rsa_key",
    "/etc/ssh/ssh_host_dsa_key",
    "/etc/ssh/ssh_host_ecdsa_key",
    "/etc/ssh/ssh_host_ed25519_key",
    "/etc/ssl/private",
    "/etc/pki/tls/private",
    "/etc/pki/CA/private",
    "/etc/krb5.keytab",
    "/etc/NetworkManager/system-connections",
    "/etc/wpa_supplicant",
    "/etc/ppp/chap-secrets",
    "/etc/ppp/pap-secrets",
    "/etc/ipsec.secrets",
    "/etc/ipsec.d/private",
    "/etc/swanctl/private",
    "/etc/wireguard",
    "/etc/openvpn",
    "/etc/letsencrypt",
    "/etc/kubernetes",
    "/etc/rancher",
    "/etc/credstore",
    "/etc/credstore.encrypted",
    "/etc/libvirt/secrets",
    "/etc/cups/ssl",
    "/etc/docker/key.json",
];

/// System trees a command may read and execute.
const SYSTEM_READ_EXECUTE: &[&str] = &[
    "/usr",
    "/bin",
    "/sbin",
    "/lib",
    "/lib32",
    "/lib64",
    "/libx32",
    "/opt",
    "/nix/store",
    "/run/current-system",
    "/snap",
];

/// System trees a command may read.
const SYSTEM_READ: &[&str] = &["/proc", "/sys"];

/// Devices a command may read and write.
const DEVICES: &[&str] = &[
    "/dev/null",
    "/dev/zero",
    "/dev/full",
    "/dev/random",
    "/dev/urandom",
    "/dev/tty",
];

/// The rights of one rule.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GrantAccess {
    /// Every file system right the kernel knows but creating device nodes.
    ReadWrite,
    /// Read files, list directories, execute.
    ReadExecute,
    /// Read files, list directories.
    Read,
    /// List the directory (and those beneath) only.
    List,
    /// Read, write and ioctl on a device file.
    Device,
}

impl GrantAccess {
    fn rights(self) -> BitFlags<AccessFs> {
        match self {
            // No device nodes: one made in the workspace would open the raw
            // disk or memory for a command run by root.
            GrantAccess::ReadWrite => {
                AccessFs::from_all(TARGET_ABI) & !(AccessFs::MakeChar | AccessFs::MakeBlock)
            }
            GrantAccess::ReadExecute => AccessFs::from_read(TARGET_ABI),
            GrantAccess::Read => AccessFs::ReadFile | AccessFs::ReadDir,
            GrantAccess::List => AccessFs::ReadDir.into(),
            GrantAccess::Device => {
                AccessFs::ReadFile | AccessFs::WriteFile | AccessFs::Truncate | AccessFs::IoctlDev
            }
        }
    }
}

/// One Landlock rule: `access` beneath `path`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Grant {
    pub path: PathBuf,
    pub access: GrantAccess,
    /// The call cannot run without it (the workspace, the temporary directory).
    pub must_exist: bool,
}

/// The rules a confined command gets, in the order they are added.
pub fn grants(confinement: &Confinement, private_tmp: &Path) -> Vec<Grant> {
    let mut deny: Vec<PathBuf> = ETC_SECRETS
        .iter()
        .map(PathBuf::from)
        .chain(confinement.deny.iter().cloned())
        .map(|path| resolve_lexically(&path))
        .collect();
    deny.sort();
    deny.dedup();

    let mut out = Vec::new();
    let tree = |out: &mut Vec<Grant>,
                path: &Path,
                access: GrantAccess,
                must_exist: bool,
                follow_links: bool| {
        let root = resolve_lexically(path);
        // `/bin` is often `/usr/bin`: a tree already granted alike needs no rule.
        let covered = out
            .iter()
            .any(|grant: &Grant| grant.access == access && root.starts_with(&grant.path));
        if covered && !must_exist {
            return;
        }
        if root.exists() {
            carve(out, &root, access, must_exist, &deny, follow_links);
        } else if must_exist {
            // Kept so that opening it fails and says which path is missing.
            out.push(Grant {
                path: root,
                access,
                must_exist,
            });
        }
    };
    tree(
        &mut out,
        &confinement.workspace,
        GrantAccess::ReadWrite,
        true,
        false,
    );
    for path in &confinement.extra_read_write {
        tree(&mut out, path, GrantAccess::ReadWrite, false, false);
    }
    tree(&mut out, private_tmp, GrantAccess::ReadWrite, true, false);
    for path in SYSTEM_READ_EXECUTE {
        tree(
            &mut out,
            Path::new(path),
            GrantAccess::ReadExecute,
            false,
            false,
        );
    }
    for path in &confinement.extra_read_only {
        tree(&mut out, path, GrantAccess::ReadExecute, false, false);
    }
    for path in SYSTEM_READ {
        tree(&mut out, Path::new(path), GrantAccess::Read, false, false);
    }
    // `/etc` entries are often links to the live file elsewhere
    // (`resolv.conf` into `/run`, `localtime` into the zone database): the
    // entry's target is what gets granted.
    tree(
        &mut out,
        Path::new("/etc"),
        GrantAccess::ReadExecute,
        false,
        true,
    );
    tree(&mut out, Path::new("/dev"), GrantAccess::List, false, false);
    for path in DEVICES {
        tree(&mut out, Path::new(path), GrantAccess::Device, false, false);
    }
    out
}

/// Grants `path` unless a denied path lies beneath it: then the directory may
/// only be listed and each entry is granted on its own, recursively, so the
/// denied one is left out. Rules are additive (a rule can only allow), so this
/// is the only way to keep a hole inside a granted tree.
fn carve(
    out: &mut Vec<Grant>,
    path: &Path,
    access: GrantAccess,
    must_exist: bool,
    deny: &[PathBuf],
    follow_links: bool,
) {
    if deny.iter().any(|denied| path.starts_with(denied)) {
        return;
    }
    let inside = deny
        .iter()
        .any(|denied| denied.starts_with(path) && denied != path);
    if !inside || !path.is_dir() {
        out.push(Grant {
            path: path.to_path_buf(),
            access,
            must_exist,
        });
        return;
    }
    out.push(Grant {
        path: path.to_path_buf(),
        access: GrantAccess::List,
        must_exist,
    });
    let Ok(entries) = std::fs::read_dir(path) else {
        return;
    };
    let mut entries: Vec<_> = entries.filter_map(Result::ok).collect();
    entries.sort_by_key(|entry| entry.file_name());
    for entry in entries {
        let child = entry.path();
        let is_link = entry.file_type().is_ok_and(|kind| kind.is_symlink());
        if !is_link {
            carve(out, &child, access, false, deny, follow_links);
            continue;
        }
        // A rule on a link grants its target: only where asked (`/etc`), and
        // never a target inside a denied path.
        if !follow_links {
            continue;
        }
        let Ok(target) = std::fs::canonicalize(&child) else {
            continue;
        };
        if deny.iter().any(|denied| target.starts_with(denied)) {
            continue;
        }
        out.push(Grant {
            path: child,
            access,
            must_exist: false,
        });
    }
}

/// Follows every link of the part of `path` that exists; the rest is kept as
/// written (a denied path that does not exist yet must still not be created).
fn resolve_lexically(path: &Path) -> PathBuf {
    if let Ok(canonical) = std::fs::canonicalize(path) {
        return canonical;
    }
    match (path.parent(), path.file_name()) {
        (Some(parent), Some(name)) if parent != path => resolve_lexically(parent).join(name),
        _ => path.to_path_buf(),
    }
}

/// A created ruleset, ready to be applied in a child.
struct Prepared {
    ruleset: Option<OwnedFd>,
    network_confined: bool,
    note: Option<String>,
}

static WARNED_UNCONFINED: AtomicBool = AtomicBool::new(false);

fn prepare(
    confinement: &Confinement,
    private_tmp: &Path,
    status: &SandboxStatus,
) -> Result<Prepared, SandboxError> {
    let unavailable = |reason: String| -> Result<Prepared, SandboxError> {
        match confinement.mode {
            SandboxMode::Required => Err(SandboxError::NotEnforced(reason)),
            SandboxMode::BestEffort => {
                if !WARNED_UNCONFINED.swap(true, Ordering::Relaxed) {
                    tracing::warn!(%reason, "shell commands run without the sandbox (sandbox = \"best_effort\")");
                }
                Ok(Prepared {
                    ruleset: None,
                    network_confined: false,
                    note: Some(reason),
                })
            }
        }
    };
    let Some(abi) = status.abi.filter(|_| status.enforced) else {
        return unavailable(status.detail.clone());
    };
    let rules = grants(confinement, private_tmp);
    match build_ruleset(&rules, confinement.network) {
        Ok(Some(ruleset)) => {
            let network_confined = !confinement.network && abi >= 4;
            let note = (!confinement.network && abi < 4).then(|| {
                format!(
                    "TCP is not confined: Landlock ABI {abi} has no network rules (needs ABI 4)"
                )
            });
            Ok(Prepared {
                ruleset: Some(ruleset),
                network_confined,
                note,
            })
        }
        Ok(None) => unavailable("Landlock refused to create a ruleset".to_owned()),
        Err(BuildError::Grant { path, source }) => Err(SandboxError::Grant { path, source }),
        Err(BuildError::Landlock(err)) => {
            unavailable(format!("cannot build the Landlock ruleset: {err}"))
        }
    }
}

enum BuildError {
    Grant { path: PathBuf, source: io::Error },
    Landlock(landlock::RulesetError),
}

impl From<landlock::RulesetError> for BuildError {
    fn from(err: landlock::RulesetError) -> Self {
        BuildError::Landlock(err)
    }
}

/// Creates the ruleset in the server (without applying it); `None` when the
/// kernel turned out not to support Landlock after all.
fn build_ruleset(rules: &[Grant], network: bool) -> Result<Option<OwnedFd>, BuildError> {
    let mut ruleset = Ruleset::default().handle_access(AccessFs::from_all(TARGET_ABI))?;
    if !network {
        // Handled with no port rule: every TCP bind and connect is denied.
        ruleset = ruleset.handle_access(AccessNet::from_all(TARGET_ABI))?;
    }
    ruleset = ruleset.scope(Scope::from_all(TARGET_ABI))?;
    let mut created = ruleset.create()?;
    let file_rights = AccessFs::from_file(TARGET_ABI);
    for rule in rules {
        let fd = match PathFd::new(&rule.path) {
            Ok(fd) => fd,
            Err(err) if rule.must_exist => {
                return Err(BuildError::Grant {
                    path: rule.path.clone(),
                    source: io::Error::other(err.to_string()),
                });
            }
            Err(_) => continue,
        };
        let mut rights = rule.access.rights();
        if !rule.path.is_dir() {
            // Directory rights on a file are an error for the kernel.
            rights &= file_rights;
        }
        if rights.is_empty() {
            continue;
        }
        created = created.add_rule(PathBeneath::new(fd, rights))?;
    }
    Ok(created.into())
}

/// Runs `request` confined as `confinement` says, on this kernel.
pub async fn run(
    request: ExecRequest,
    confinement: &Confinement,
    cancel: &CancellationToken,
) -> Result<ExecResult, SandboxError> {
    run_with_status(request, confinement, cancel, &status()).await
}

/// [`run`] with the kernel's status given (probed once, or simulated in tests).
pub async fn run_with_status(
    request: ExecRequest,
    confinement: &Confinement,
    cancel: &CancellationToken,
    status: &SandboxStatus,
) -> Result<ExecResult, SandboxError> {
    run_streaming(request, confinement, cancel, status, None).await
}

/// Sees the command's output as it is read, before the head-and-tail cut
/// (on the reader thread, so it must not block).
pub type LiveOutput = Box<dyn FnMut(&[u8]) + Send>;

/// [`run_with_status`], also handing each piece of output to `live` as it comes.
pub async fn run_streaming(
    request: ExecRequest,
    confinement: &Confinement,
    cancel: &CancellationToken,
    status: &SandboxStatus,
    live: Option<LiveOutput>,
) -> Result<ExecResult, SandboxError> {
    let started = Instant::now();
    if !request.cwd.is_dir() {
        return Err(SandboxError::Cwd(request.cwd));
    }
    // Dropped last (declared first): the group is dead before it is removed.
    let private_tmp = tempfile::Builder::new()
        .prefix("pincer-shell-")
        .tempdir()
        .map_err(SandboxError::TempDir)?;
    let tmp_path = std::fs::canonicalize(private_tmp.path()).map_err(SandboxError::TempDir)?;
    let prepared = prepare(confinement, &tmp_path, status)?;

    let (reader, writer) = io::pipe().map_err(SandboxError::Pipe)?;
    let (stop_reader, stop_writer) = io::pipe().map_err(SandboxError::Pipe)?;
    let stderr = writer.try_clone().map_err(SandboxError::Pipe)?;

    let mut command = shell_command(&request, &tmp_path);
    command
        .stdout(Stdio::from(writer))
        .stderr(Stdio::from(stderr));
    let ruleset_fd: Option<RawFd> = prepared.ruleset.as_ref().map(AsRawFd::as_raw_fd);
    let binds = readonly::Binds::new(&confinement.read_only);
    // SAFETY: the closure runs in the forked child before `exec`, where only
    // async-signal-safe work is allowed: it makes raw syscalls (unshare and
    // mount for the read-only binds, setsid, prctl for no_new_privs and the
    // capability sets, landlock_restrict_self, close_range) on values
    // prepared before the fork, reads a constant slice and allocates nothing
    // (`io::Error::last_os_error` stores the errno inline). The ruleset
    // descriptor it uses stays open in the server until `spawn` has returned.
    unsafe {
        command.pre_exec(move || {
            if let Some(binds) = &binds {
                binds.apply();
            }
            confine_child(ruleset_fd)
        });
    }
    let spawned = command.spawn();
    // The command holds the server's copies of the pipe's write end: closed
    // now, so the pipe reaches end-of-file once the command's group is gone.
    drop(command);
    drop(prepared.ruleset);
    let child = spawned.map_err(SandboxError::Spawn)?;
    let pid = child.id();
    let guard = GroupGuard { child: Some(child) };

    let output = OutputReader::start(reader, stop_reader, stop_writer, request.output_limit, live)
        .map_err(SandboxError::Pipe)?;

    let (status, timed_out, cancelled) = end_group(guard, pid, cancel, request.timeout).await?;
    // Everything in the group is dead; only a process that left the group
    // can still hold the pipe, so the last read is bounded.
    let (capture, output_detached) = output.finish(Duration::from_secs(2)).await;
    let (text, omitted_bytes) = capture.render();
    if let Err(err) = private_tmp.close() {
        tracing::debug!(%err, "cannot remove a shell call's temporary directory");
    }

    let confined = ruleset_fd.is_some();
    Ok(ExecResult {
        exit_code: status.code(),
        signal: status.signal(),
        output: text,
        omitted_bytes,
        timed_out,
        cancelled,
        confined,
        network_confined: prepared.network_confined,
        sandbox_note: prepared.note,
        output_detached,
        duration: started.elapsed(),
    })
}

/// What `pincer sandbox-exec` runs: written by the shell tool to a private
/// file, read (and removed) by the process the client starts in its terminal.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AttachedSpec {
    pub request: ExecRequest,
    pub confinement: Confinement,
}

/// `pincer sandbox-exec --spec-file FILE`: runs the spec's command confined,
/// in this process's terminal, and returns the exit code to exit with
/// (128 + the signal when a signal ended it). SIGTERM, SIGINT and SIGHUP
/// (a client's `terminal/kill`) kill the command's group.
pub async fn exec_spec_file(path: &Path) -> Result<u8, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|err| format!("cannot read {}: {err}", path.display()))?;
    if let Err(err) = std::fs::remove_file(path) {
        tracing::debug!(%err, "cannot remove the sandbox-exec spec file");
    }
    let spec: AttachedSpec = serde_json::from_str(&text)
        .map_err(|err| format!("{} is not a sandbox-exec spec: {err}", path.display()))?;
    let cancel = CancellationToken::new();
    let on_signal = cancel.clone();
    tokio::spawn(async move {
        use tokio::signal::unix::{SignalKind, signal};
        let (Ok(mut term), Ok(mut int), Ok(mut hup)) = (
            signal(SignalKind::terminate()),
            signal(SignalKind::interrupt()),
            signal(SignalKind::hangup()),
        ) else {
            return;
        };
        tokio::select! {
            _ = term.recv() => {}
            _ = int.recv() => {}
            _ = hup.recv() => {}
        }
        on_signal.cancel();
    });
    let timeout = spec.request.timeout;
    let exit = run_attached(spec.request, &spec.confinement, &cancel, &status())
        .await
        .map_err(|err| err.to_string())?;
    if exit.timed_out {
        eprintln!(
            "[pincer: timed out after {} s; process group killed]",
            timeout.as_secs()
        );
    }
    Ok(match (exit.exit_code, exit.signal) {
        (Some(code), _) => u8::try_from(code).unwrap_or(1),
        (None, Some(signal)) => u8::try_from(128 + signal).unwrap_or(255),
        (None, None) => 1,
    })
}

/// Waits for a command's exit, the timeout or a cancel, then kills its whole
/// process group and reaps the leader. Returns the exit status, whether the
/// timeout hit and whether it was cancelled.
async fn end_group(
    mut guard: GroupGuard,
    pid: u32,
    cancel: &CancellationToken,
    timeout: Duration,
) -> Result<(ExitStatus, bool, bool), SandboxError> {
    let mut exited = tokio::task::spawn_blocking(move || wait_for_exit(pid));
    let (timed_out, cancelled) = tokio::select! {
        biased;
        _ = cancel.cancelled() => (false, true),
        _ = &mut exited => (false, false),
        _ = tokio::time::sleep(timeout) => (true, false),
    };
    // The leader is not reaped yet, so its pid (the group id) cannot have been
    // reused: this reaches exactly the command's group, including background
    // jobs that outlived the leader and would keep a pipe open.
    crate::process::kill_group(pid);
    if timed_out || cancelled {
        // Returns once SIGKILL has ended the leader.
        let _ = exited.await;
    }
    Ok((guard.reap().await?, timed_out, cancelled))
}

/// `bash -c LINE` in the request's directory with its environment (secret
/// names dropped), `TMPDIR` at the private temporary directory, and `HOME`
/// there too unless the environment names one (the person's real home, whose
/// toolchains are granted read-only). `XDG_CACHE_HOME` points at the private
/// directory unless given: build caches (Go's, pip's) that must be written
/// land there instead of failing. Stdin closed. The caller sets the output and
/// the confinement.
fn shell_command(request: &ExecRequest, tmp_path: &Path) -> Command {
    let mut command = Command::new(shell_program(&request.env));
    let given = |name: &str| request.env.iter().any(|(n, v)| n == name && !v.is_empty());
    command
        .arg("-c")
        .arg(&request.line)
        .current_dir(&request.cwd)
        .env_clear()
        .envs(
            request
                .env
                .iter()
                .filter(|(name, value)| {
                    !is_secret_name(name) && name != "TMPDIR" && !value.is_empty()
                })
                .map(|(name, value)| (name.as_str(), value.as_str())),
        )
        .env("TMPDIR", tmp_path)
        .stdin(Stdio::null());
    if !given("HOME") {
        command.env("HOME", tmp_path);
    }
    if !given("XDG_CACHE_HOME") {
        command.env("XDG_CACHE_HOME", tmp_path);
    }
    command
}

/// How a command run with [`run_attached`] ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AttachedExit {
    pub exit_code: Option<i32>,
    pub signal: Option<i32>,
    pub timed_out: bool,
    pub cancelled: bool,
    pub confined: bool,
    pub sandbox_note: Option<String>,
}

/// Runs a command confined like [`run_with_status`], but writing straight to
/// this process's stdout and stderr (a terminal's, when the client runs
/// `pincer sandbox-exec` in one) instead of a captured pipe. Stdin is closed.
/// The command's process group is killed on `cancel`, after the timeout, and
/// when this process dies (the leader gets SIGKILL then).
pub async fn run_attached(
    request: ExecRequest,
    confinement: &Confinement,
    cancel: &CancellationToken,
    status: &SandboxStatus,
) -> Result<AttachedExit, SandboxError> {
    if !request.cwd.is_dir() {
        return Err(SandboxError::Cwd(request.cwd));
    }
    let private_tmp = tempfile::Builder::new()
        .prefix("pincer-shell-")
        .tempdir()
        .map_err(SandboxError::TempDir)?;
    let tmp_path = std::fs::canonicalize(private_tmp.path()).map_err(SandboxError::TempDir)?;
    let prepared = prepare(confinement, &tmp_path, status)?;
    let mut command = shell_command(&request, &tmp_path);
    let ruleset_fd: Option<RawFd> = prepared.ruleset.as_ref().map(AsRawFd::as_raw_fd);
    let binds = readonly::Binds::new(&confinement.read_only);
    // SAFETY: as in `run_with_status`: raw syscalls on values prepared
    // before the fork, no allocation. PR_SET_PDEATHSIG is one more prctl.
    unsafe {
        command.pre_exec(move || {
            if let Some(binds) = &binds {
                binds.apply();
            }
            confine_child(ruleset_fd)?;
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0) != 0 {
                return Err(io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let spawned = command.spawn();
    drop(command);
    drop(prepared.ruleset);
    let child = spawned.map_err(SandboxError::Spawn)?;
    let pid = child.id();
    let guard = GroupGuard { child: Some(child) };
    let (status, timed_out, cancelled) = end_group(guard, pid, cancel, request.timeout).await?;
    if let Err(err) = private_tmp.close() {
        tracing::debug!(%err, "cannot remove a shell call's temporary directory");
    }
    Ok(AttachedExit {
        exit_code: status.code(),
        signal: status.signal(),
        timed_out,
        cancelled,
        confined: ruleset_fd.is_some(),
        sandbox_note: prepared.note,
    })
}

/// Capabilities a command run by root keeps: Docker's default set without
/// `CAP_MKNOD` (a device node in the workspace would open the raw disk) and
/// `CAP_NET_RAW` (raw sockets get around the TCP rules). Everything else goes:
/// `CAP_SYS_ADMIN` and `CAP_PERFMON` in particular would let the command read
/// the server's memory maps and environment (`/proc/<pid>/environ`) despite
/// Landlock's ptrace restriction, and `CAP_SYS_MODULE`, `CAP_SYS_RAWIO` or
/// `CAP_BPF` would reach past the sandbox altogether.
pub const KEPT_CAPABILITIES: &[u32] = &[
    0,  // CAP_CHOWN
    1,  // CAP_DAC_OVERRIDE
    3,  // CAP_FOWNER
    4,  // CAP_FSETID
    5,  // CAP_KILL
    6,  // CAP_SETGID
    7,  // CAP_SETUID
    8,  // CAP_SETPCAP
    10, // CAP_NET_BIND_SERVICE
    18, // CAP_SYS_CHROOT
    29, // CAP_AUDIT_WRITE
    31, // CAP_SETFCAP
];

/// In the child, between `fork` and `exec`: a session of its own, no way to
/// gain privileges, the Landlock domain, and no descriptor beyond stdio
/// surviving `exec`.
fn confine_child(ruleset_fd: Option<RawFd>) -> io::Result<()> {
    // SAFETY: plain syscalls on integers; none touches memory we own.
    unsafe {
        // A new session: one process group to kill, and no controlling
        // terminal to read from or write to.
        if libc::setsid() == -1 {
            return Err(io::Error::last_os_error());
        }
        // Set even when unconfined: a tool command has no business gaining
        // privileges through setuid programs or file capabilities.
        if libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 {
            return Err(io::Error::last_os_error());
        }
        // Root gets the bounding set back at `exec`, so that is where the
        // capabilities go. Without CAP_SETPCAP (not root) this fails, and
        // then there is nothing to drop: no_new_privs keeps setuid programs
        // and file capabilities from granting any. Past the kernel's last
        // capability it fails with EINVAL.
        for capability in 0..64u32 {
            if !KEPT_CAPABILITIES.contains(&capability) {
                libc::prctl(
                    libc::PR_CAPBSET_DROP,
                    libc::c_ulong::from(capability),
                    0,
                    0,
                    0,
                );
            }
        }
        libc::prctl(
            libc::PR_CAP_AMBIENT,
            libc::PR_CAP_AMBIENT_CLEAR_ALL as libc::c_ulong,
            0,
            0,
            0,
        );
        if let Some(fd) = ruleset_fd
            && libc::syscall(libc::SYS_landlock_restrict_self, fd, 0u32) != 0
        {
            return Err(io::Error::last_os_error());
        }
        // Landlock checks access when a file is opened: a descriptor the
        // server inherited without close-on-exec would get through. Marking
        // (not closing) keeps std's own exec-error pipe working; kernels
        // before 5.11 lack the flag, and then only std's descriptors
        // (all close-on-exec) remain anyway.
        libc::syscall(
            libc::SYS_close_range,
            3u32,
            u32::MAX,
            libc::CLOSE_RANGE_CLOEXEC,
        );
    }
    Ok(())
}

/// `bash` from the command's `PATH`, else `/bin/sh`.
fn shell_program(env: &[(String, String)]) -> PathBuf {
    let path = env
        .iter()
        .find(|(name, _)| name == "PATH")
        .map(|(_, value)| value.as_str())
        .unwrap_or("/usr/bin:/bin");
    std::env::split_paths(OsStr::new(path))
        .filter(|dir| dir.is_absolute())
        .map(|dir| dir.join("bash"))
        .find(|candidate| {
            std::fs::metadata(candidate)
                .is_ok_and(|meta| meta.is_file() && meta.permissions().mode() & 0o111 != 0)
        })
        .unwrap_or_else(|| PathBuf::from("/bin/sh"))
}

/// Blocks until the child has exited, without reaping it (so its pid, which
/// is also the group id, stays reserved until we have killed the group).
fn wait_for_exit(pid: u32) {
    loop {
        // SAFETY: siginfo_t is plain data; waitid only writes into it.
        let rc = unsafe {
            let mut info: libc::siginfo_t = std::mem::zeroed();
            libc::waitid(libc::P_PID, pid, &mut info, libc::WEXITED | libc::WNOWAIT)
        };
        if rc == 0 || io::Error::last_os_error().kind() != io::ErrorKind::Interrupted {
            return;
        }
    }
}

/// Owns the child until it is reaped; when the call is dropped half-way (its
/// future cancelled), the whole group is killed and reaped in the background.
struct GroupGuard {
    child: Option<Child>,
}

impl GroupGuard {
    /// Waits for the (dead or dying) child and reaps it.
    async fn reap(&mut self) -> Result<ExitStatus, SandboxError> {
        let Some(mut child) = self.child.take() else {
            return Err(SandboxError::Wait(io::Error::other(
                "the child was reaped already",
            )));
        };
        if let Ok(Some(status)) = child.try_wait() {
            return Ok(status);
        }
        let pid = child.id();
        let waited = tokio::task::spawn_blocking(move || child.wait()).await;
        match waited {
            Ok(result) => result.map_err(SandboxError::Wait),
            Err(err) => {
                crate::process::kill_group(pid);
                Err(SandboxError::Wait(io::Error::other(err.to_string())))
            }
        }
    }
}

impl Drop for GroupGuard {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            crate::process::kill_group(child.id());
            // Reaped off the async runtime: SIGKILL is quick but not instant.
            let reaper = std::thread::Builder::new()
                .name("pincer-shell-reaper".to_owned())
                .spawn(move || child.wait());
            if let Err(err) = reaper {
                tracing::warn!(%err, "cannot start a thread to reap a killed command");
            }
        }
    }
}

/// Reads the pipe on a thread of its own (the runtime has no pipe support
/// without more tokio features), keeping a bounded head and tail.
struct OutputReader {
    /// Closing it tells the thread to stop reading.
    stop: Option<PipeWriter>,
    done: oneshot::Receiver<Capture>,
}

impl OutputReader {
    fn start(
        reader: PipeReader,
        stop_reader: PipeReader,
        stop: PipeWriter,
        limit: usize,
        live: Option<LiveOutput>,
    ) -> io::Result<Self> {
        let (sender, done) = oneshot::channel();
        std::thread::Builder::new()
            .name("pincer-shell-output".to_owned())
            .spawn(move || {
                let capture = read_output(reader, &stop_reader, limit, live);
                let _ = sender.send(capture);
            })?;
        Ok(Self {
            stop: Some(stop),
            done,
        })
    }

    /// The output read until end-of-file, or until `grace` has passed (then
    /// `true`: something outside the group still holds the pipe).
    async fn finish(mut self, grace: Duration) -> (Capture, bool) {
        if let Ok(Ok(capture)) = tokio::time::timeout(grace, &mut self.done).await {
            return (capture, false);
        }
        self.stop = None;
        match (&mut self.done).await {
            Ok(capture) => (capture, true),
            Err(_) => (Capture::new(0), true),
        }
    }
}

fn read_output(
    mut reader: PipeReader,
    stop: &PipeReader,
    limit: usize,
    mut live: Option<LiveOutput>,
) -> Capture {
    let mut capture = Capture::new(limit);
    let mut buffer = vec![0u8; 64 * 1024];
    loop {
        let mut fds = [
            libc::pollfd {
                fd: reader.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            },
            libc::pollfd {
                fd: stop.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            },
        ];
        // SAFETY: `fds` is a valid array of two pollfd for the whole call.
        let ready = unsafe { libc::poll(fds.as_mut_ptr(), 2, -1) };
        if ready < 0 {
            if io::Error::last_os_error().kind() == io::ErrorKind::Interrupted {
                continue;
            }
            break;
        }
        if fds[1].revents != 0 {
            // The write end of the stop pipe was closed.
            break;
        }
        if fds[0].revents == 0 {
            continue;
        }
        match reader.read(&mut buffer) {
            Ok(0) => break,
            Ok(read) => {
                if let Some(live) = live.as_mut() {
                    live(&buffer[..read]);
                }
                capture.push(&buffer[..read]);
            }
            Err(err) if err.kind() == io::ErrorKind::Interrupted => {}
            Err(_) => break,
        }
    }
    capture
}

/// The first and last bytes of a stream, at most `limit` in all.
struct Capture {
    head: Vec<u8>,
    tail: VecDeque<u8>,
    head_limit: usize,
    tail_limit: usize,
    total: usize,
}

impl Capture {
    fn new(limit: usize) -> Self {
        let head_limit = limit / 2;
        Self {
            head: Vec::new(),
            tail: VecDeque::new(),
            head_limit,
            tail_limit: limit - head_limit,
            total: 0,
        }
    }

    fn push(&mut self, mut bytes: &[u8]) {
        self.total += bytes.len();
        if self.head.len() < self.head_limit {
            let take = (self.head_limit - self.head.len()).min(bytes.len());
            self.head.extend_from_slice(&bytes[..take]);
            bytes = &bytes[take..];
        }
        if bytes.len() >= self.tail_limit {
            self.tail.clear();
            self.tail.extend(&bytes[bytes.len() - self.tail_limit..]);
            return;
        }
        let overflow = (self.tail.len() + bytes.len()).saturating_sub(self.tail_limit);
        self.tail.drain(..overflow);
        self.tail.extend(bytes);
    }

    /// The text and how many bytes were left out of it.
    fn render(self) -> (String, usize) {
        let Capture {
            mut head,
            tail,
            total,
            ..
        } = self;
        let mut tail: Vec<u8> = tail.into();
        let mut omitted = total - head.len() - tail.len();
        if omitted == 0 {
            head.extend_from_slice(&tail);
            return (String::from_utf8_lossy(&head).into_owned(), 0);
        }
        // Cut at character boundaries, so the cut does not show as garbage.
        if let Err(err) = std::str::from_utf8(&head)
            && err.error_len().is_none()
        {
            omitted += head.len() - err.valid_up_to();
            head.truncate(err.valid_up_to());
        }
        let partial = tail
            .iter()
            .take(3)
            .take_while(|byte| (**byte & 0b1100_0000) == 0b1000_0000)
            .count();
        tail.drain(..partial);
        omitted += partial;
        let mut text = String::from_utf8_lossy(&head).into_owned();
        if !text.is_empty() && !text.ends_with('\n') {
            text.push('\n');
        }
        text.push_str(&format!("[... {omitted} bytes omitted ...]\n"));
        text.push_str(&String::from_utf8_lossy(&tail));
        (text, omitted)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Whether Landlock is usable here; tests that need it say why they skip,
    /// or fail with `PINCER_TEST_REQUIRE_LANDLOCK=1` (`.ci/run`).
    fn landlock_or_skip(test: &str) -> bool {
        let status = status();
        if !status.enforced {
            assert!(
                std::env::var_os("PINCER_TEST_REQUIRE_LANDLOCK").is_none_or(|v| v != "1"),
                "{test}: PINCER_TEST_REQUIRE_LANDLOCK=1 but Landlock is not available: {}",
                status.detail
            );
            eprintln!("skipping {test}: {}", status.detail);
        }
        status.enforced
    }

    fn workspace() -> (tempfile::TempDir, PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let path = std::fs::canonicalize(dir.path()).unwrap();
        (dir, path)
    }

    fn base_env() -> Vec<(String, String)> {
        vec![("PATH".to_owned(), "/usr/local/bin:/usr/bin:/bin".to_owned())]
    }

    fn request(line: &str, cwd: &Path) -> ExecRequest {
        ExecRequest {
            line: line.to_owned(),
            cwd: cwd.to_path_buf(),
            timeout: Duration::from_secs(60),
            output_limit: 1 << 20,
            env: base_env(),
        }
    }

    fn unavailable() -> SandboxStatus {
        SandboxStatus {
            abi: None,
            enforced: false,
            network_rules: false,
            detail: "simulated: no Landlock here".to_owned(),
        }
    }

    async fn run_in(line: &str, ws: &Path) -> ExecResult {
        run(
            request(line, ws),
            &Confinement::new(ws),
            &CancellationToken::new(),
        )
        .await
        .unwrap()
    }

    /// Whether the process is gone (or a zombie nobody reaped yet), waiting a
    /// little for the kernel to finish the kill.
    fn is_dead(pid: i32) -> bool {
        for _ in 0..100 {
            match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
                Err(_) => return true,
                Ok(stat) => {
                    let state = stat.rsplit(')').next().unwrap_or("").trim_start();
                    if state.starts_with('Z') || state.starts_with('X') {
                        return true;
                    }
                }
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        false
    }

    fn read_pid(path: &Path) -> i32 {
        std::fs::read_to_string(path)
            .unwrap()
            .trim()
            .parse()
            .unwrap()
    }

    fn unique(prefix: &str) -> PathBuf {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos();
        PathBuf::from(format!("/tmp/{prefix}-{}-{nanos}", std::process::id()))
    }

    #[tokio::test]
    async fn output_interleaves_stdout_and_stderr_in_order() {
        let (_dir, ws) = workspace();
        let result = run_in("echo one; echo two >&2; echo three; echo four >&2", &ws).await;
        assert_eq!(result.output, "one\ntwo\nthree\nfour\n");
        assert_eq!(result.exit_code, Some(0));
        assert_eq!(result.signal, None);
        assert!(!result.timed_out && !result.cancelled);
        assert_eq!(result.confined, status().enforced);
    }

    #[tokio::test]
    async fn exit_codes_and_stdio_are_reported() {
        let (_dir, ws) = workspace();
        // stdin is /dev/null (cat ends at once), stdout and stderr the pipe.
        let result = run_in(
            "cat; readlink /proc/self/fd/0; [ -p /proc/self/fd/1 ] && echo pipe; exit 3",
            &ws,
        )
        .await;
        assert_eq!(result.output, "/dev/null\npipe\n");
        assert_eq!(result.exit_code, Some(3));
    }

    #[tokio::test]
    async fn common_devices_work_and_device_nodes_cannot_be_made() {
        if !landlock_or_skip("common_devices_work") {
            return;
        }
        let (_dir, ws) = workspace();
        let result = run_in(
            "echo a > /dev/stdout; echo b > /dev/stderr; echo c > /dev/null; \
             head -c 3 /dev/urandom | wc -c; cat <(echo d); \
             (exec 3< /dev/tty) 2>/dev/null || echo no-tty; \
             mknod node c 1 3 2>/dev/null || echo no-mknod; ls /dev > /dev/null && echo listed; \
             grep NoNewPrivs /proc/self/status",
            &ws,
        )
        .await;
        assert!(result.confined);
        assert_eq!(
            result.output,
            "a\nb\n3\nd\nno-tty\nno-mknod\nlisted\nNoNewPrivs:\t1\n"
        );
        assert!(!ws.join("node").exists());
    }

    #[tokio::test]
    async fn a_command_run_by_root_loses_dangerous_capabilities() {
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } != 0 {
            eprintln!("skipping a_command_run_by_root_loses_dangerous_capabilities: not root");
            return;
        }
        let (_dir, ws) = workspace();
        let result = run_in("grep -E '^Cap(Eff|Bnd)' /proc/self/status", &ws).await;
        let kept: u64 = KEPT_CAPABILITIES.iter().map(|cap| 1u64 << cap).sum();
        let expected = format!("CapEff:\t{kept:016x}\nCapBnd:\t{kept:016x}\n");
        assert_eq!(result.output, expected);
    }

    #[tokio::test]
    async fn writes_outside_the_workspace_are_denied_and_the_server_is_not_restricted() {
        if !landlock_or_skip("writes_outside_the_workspace_are_denied") {
            return;
        }
        let (_dir, ws) = workspace();
        let outside = unique("pincer-outside");
        let result = run_in(&format!("echo x > {}", outside.display()), &ws).await;
        assert!(result.confined);
        assert_ne!(result.exit_code, Some(0));
        assert!(
            result.output.contains("Permission denied"),
            "{}",
            result.output
        );
        assert!(!outside.exists());
        // The server (this test process) was never restricted.
        std::fs::write(&outside, "x").unwrap();
        std::fs::remove_file(&outside).unwrap();
    }

    #[tokio::test]
    async fn writes_inside_the_workspace_and_the_private_tmp_work() {
        if !landlock_or_skip("writes_inside_the_workspace_work") {
            return;
        }
        let (_dir, ws) = workspace();
        let result = run_in(
            "mkdir -p sub && echo hello > sub/file && cat sub/file && mv sub/file sub/moved \
             && echo tmp > \"$TMPDIR/t\" && cat \"$HOME/t\" && [ \"$HOME\" = \"$TMPDIR\" ] && echo \"$HOME\"",
            &ws,
        )
        .await;
        assert!(result.confined);
        assert_eq!(result.exit_code, Some(0), "{}", result.output);
        let mut lines = result.output.lines();
        assert_eq!(lines.next(), Some("hello"));
        assert_eq!(lines.next(), Some("tmp"));
        let tmp = PathBuf::from(lines.next().unwrap());
        assert_eq!(
            std::fs::read_to_string(ws.join("sub/moved")).unwrap(),
            "hello\n"
        );
        // The private temporary directory is gone after the call.
        assert!(!tmp.exists(), "{}", tmp.display());
        assert!(!tmp.starts_with(&ws));
    }

    #[tokio::test]
    async fn reading_a_secret_directory_outside_the_workspace_is_denied() {
        if !landlock_or_skip("reading_a_secret_directory_is_denied") {
            return;
        }
        let (_dir, ws) = workspace();
        let secrets = tempfile::tempdir().unwrap();
        std::fs::write(secrets.path().join("id_rsa"), "PRIVATE KEY MATERIAL").unwrap();
        let line = format!(
            "cat {dir}/id_rsa; ls {dir}; cat /etc/shadow; head -c 4 /etc/passwd; echo",
            dir = secrets.path().display()
        );
        let result = run_in(&line, &ws).await;
        assert!(result.confined);
        assert!(
            !result.output.contains("PRIVATE KEY MATERIAL"),
            "{}",
            result.output
        );
        assert!(!result.output.contains("id_rsa\n"), "{}", result.output);
        assert_eq!(
            result.output.matches("Permission denied").count(),
            3,
            "{}",
            result.output
        );
        // System files stay readable.
        assert!(result.output.ends_with("root\n"), "{}", result.output);
    }

    #[tokio::test]
    async fn forbidden_paths_inside_the_workspace_are_carved_out() {
        if !landlock_or_skip("forbidden_paths_inside_the_workspace_are_carved_out") {
            return;
        }
        let (_dir, ws) = workspace();
        std::fs::create_dir_all(ws.join(".ssh")).unwrap();
        std::fs::write(ws.join(".ssh/id_ed25519"), "KEY").unwrap();
        std::fs::create_dir_all(ws.join("src")).unwrap();
        let mut confinement = Confinement::new(&ws);
        confinement.deny = vec![ws.join(".ssh"), ws.join(".aws")];
        let result = run(
            request(
                "cat .ssh/id_ed25519; mkdir .aws; echo ok > src/new && cat src/new",
                &ws,
            ),
            &confinement,
            &CancellationToken::new(),
        )
        .await
        .unwrap();
        assert!(!result.output.contains("KEY"), "{}", result.output);
        assert_eq!(
            result.output.matches("Permission denied").count(),
            2,
            "{}",
            result.output
        );
        assert!(result.output.ends_with("ok\n"), "{}", result.output);
        assert!(!ws.join(".aws").exists());
    }

    #[tokio::test]
    async fn tcp_is_denied_unless_the_network_is_allowed() {
        let status = status();
        if !landlock_or_skip("tcp_is_denied_unless_the_network_is_allowed") {
            return;
        }
        if !status.network_rules {
            eprintln!("skipping tcp_is_denied: {}", status.detail);
            return;
        }
        let (_dir, ws) = workspace();
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let port = listener.local_addr().unwrap().port();
        let line = format!("exec 3<>/dev/tcp/127.0.0.1/{port} && echo connected");

        let result = run_in(&line, &ws).await;
        assert!(result.network_confined);
        assert!(!result.output.contains("connected"), "{}", result.output);
        assert!(
            result.output.contains("Permission denied"),
            "{}",
            result.output
        );
        assert_eq!(
            listener.accept().unwrap_err().kind(),
            io::ErrorKind::WouldBlock
        );

        let mut confinement = Confinement::new(&ws);
        confinement.network = true;
        let result = run(request(&line, &ws), &confinement, &CancellationToken::new())
            .await
            .unwrap();
        assert!(result.confined && !result.network_confined);
        assert_eq!(result.output, "connected\n");
        assert!(listener.accept().is_ok());
    }

    #[tokio::test]
    async fn a_timeout_kills_the_whole_process_group() {
        let (_dir, ws) = workspace();
        let mut req = request("sleep 30 & echo $! > bg.pid; sleep 30; echo never", &ws);
        req.timeout = Duration::from_secs(3);
        let result = run(req, &Confinement::new(&ws), &CancellationToken::new())
            .await
            .unwrap();
        assert!(result.timed_out);
        assert!(!result.cancelled);
        assert_eq!(result.signal, Some(libc::SIGKILL));
        assert_eq!(result.exit_code, None);
        assert!(!result.output.contains("never"));
        assert!(!result.output_detached);
        // Well under the 30 s the commands would take.
        assert!(
            result.duration < Duration::from_secs(15),
            "{:?}",
            result.duration
        );
        assert!(is_dead(read_pid(&ws.join("bg.pid"))));
    }

    #[tokio::test]
    async fn cancelling_kills_the_whole_process_group() {
        let (_dir, ws) = workspace();
        let cancel = CancellationToken::new();
        let trigger = cancel.clone();
        let pid_file = ws.join("bg.pid");
        let watched = pid_file.clone();
        tokio::spawn(async move {
            // Cancel once the background job is known to run.
            for _ in 0..300 {
                if std::fs::read_to_string(&watched).is_ok_and(|s| s.ends_with('\n')) {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            trigger.cancel();
        });
        let result = run(
            request("sleep 30 & echo $! > bg.pid; wait", &ws),
            &Confinement::new(&ws),
            &cancel,
        )
        .await
        .unwrap();
        assert!(result.cancelled);
        assert!(!result.timed_out);
        assert!(
            result.duration < Duration::from_secs(25),
            "{:?}",
            result.duration
        );
        assert!(is_dead(read_pid(&pid_file)));
    }

    #[tokio::test]
    async fn dropping_the_call_kills_the_whole_process_group() {
        let (_dir, ws) = workspace();
        let pid_file = ws.join("bg.pid");
        let confinement = Confinement::new(&ws);
        let cancel = CancellationToken::new();
        let call = run(
            request("sleep 30 & echo $! > bg.pid; wait", &ws),
            &confinement,
            &cancel,
        );
        tokio::select! {
            _ = call => panic!("the call should still be running"),
            _ = async {
                for _ in 0..300 {
                    if std::fs::read_to_string(&pid_file).is_ok_and(|s| s.ends_with('\n')) {
                        break;
                    }
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            } => {}
        }
        assert!(is_dead(read_pid(&pid_file)));
    }

    #[tokio::test]
    async fn background_jobs_are_killed_when_the_command_ends() {
        let (_dir, ws) = workspace();
        let result = run_in("sleep 30 & echo $! > bg.pid; echo done", &ws).await;
        assert_eq!(result.output, "done\n");
        assert_eq!(result.exit_code, Some(0));
        assert!(
            result.duration < Duration::from_secs(15),
            "{:?}",
            result.duration
        );
        assert!(is_dead(read_pid(&ws.join("bg.pid"))));
    }

    #[tokio::test]
    async fn the_output_cap_keeps_head_and_tail() {
        let (_dir, ws) = workspace();
        let mut req = request("yes | head -c 5000000; echo; echo end", &ws);
        req.output_limit = 10_000;
        let result = run(req, &Confinement::new(&ws), &CancellationToken::new())
            .await
            .unwrap();
        assert_eq!(result.exit_code, Some(0));
        let total = 5_000_000 + 1 + 4;
        assert_eq!(result.omitted_bytes, total - 10_000);
        assert!(result.output.starts_with("y\ny\ny\n"));
        assert!(
            result.output.ends_with("y\ny\n\nend\n"),
            "{}",
            &result.output[result.output.len() - 20..]
        );
        assert!(
            result
                .output
                .contains(&format!("[... {} bytes omitted ...]", total - 10_000))
        );
        assert!(result.output.len() < 10_100);
    }

    #[test]
    fn the_capture_cuts_at_character_boundaries() {
        let mut capture = Capture::new(8);
        capture.push("ééééé".as_bytes()); // 10 bytes
        capture.push("ààà".as_bytes()); // 6 bytes
        let (text, omitted) = capture.render();
        assert_eq!(text, "éé\n[... 8 bytes omitted ...]\nàà");
        assert_eq!(omitted, 8);

        let mut capture = Capture::new(8);
        capture.push(b"abc");
        capture.push(b"defgh");
        assert_eq!(capture.render(), ("abcdefgh".to_owned(), 0));

        let mut capture = Capture::new(0);
        capture.push(b"abc");
        assert_eq!(
            capture.render(),
            ("[... 3 bytes omitted ...]\n".to_owned(), 3)
        );
    }

    #[tokio::test]
    async fn the_environment_is_scrubbed() {
        let (_dir, ws) = workspace();
        let source = vec![
            ("PATH".to_owned(), "/usr/bin:/bin".to_owned()),
            ("LANG".to_owned(), "C.UTF-8".to_owned()),
            ("LC_PAPER".to_owned(), "C".to_owned()),
            ("OPENAI_API_KEY".to_owned(), "sk-must-not-pass".to_owned()),
            ("GITHUB_TOKEN".to_owned(), "ghp-must-not-pass".to_owned()),
            ("UNLISTED".to_owned(), "unlisted-value".to_owned()),
            ("HOME".to_owned(), "/root".to_owned()),
        ];
        let mut allow: Vec<String> = DEFAULT_ENV_ALLOW.iter().map(|s| (*s).to_owned()).collect();
        // Even allowlisted, a secret-looking name does not pass.
        allow.push("OPENAI_API_KEY".to_owned());
        allow.push("HOME".to_owned());
        let env = scrubbed_env(source, &allow);
        assert_eq!(
            env.iter().map(|(k, _)| k.as_str()).collect::<Vec<_>>(),
            ["PATH", "LANG", "LC_PAPER", "HOME"]
        );
        let mut req = request("env", &ws);
        req.env = env;
        // A secret handed straight to `run` is dropped too.
        req.env.push((
            "AWS_SECRET_ACCESS_KEY".to_owned(),
            "aws-must-not-pass".to_owned(),
        ));
        let result = run(req, &Confinement::new(&ws), &CancellationToken::new())
            .await
            .unwrap();
        assert!(
            result.output.contains("PATH=/usr/bin:/bin\n"),
            "{}",
            result.output
        );
        assert!(result.output.contains("LANG=C.UTF-8\n"));
        assert!(
            !result.output.contains("must-not-pass"),
            "{}",
            result.output
        );
        assert!(!result.output.contains("UNLISTED"));
        // HOME passes when allowed; TMPDIR and XDG_CACHE_HOME are private.
        assert!(result.output.contains("HOME=/root\n"), "{}", result.output);
        assert!(result.output.contains("TMPDIR=/"), "{}", result.output);
        assert!(
            result.output.contains("XDG_CACHE_HOME=/"),
            "{}",
            result.output
        );
    }

    #[tokio::test]
    async fn the_server_environment_is_not_readable_from_the_child() {
        if !landlock_or_skip("the_server_environment_is_not_readable") {
            return;
        }
        let (_dir, ws) = workspace();
        let line = format!(
            "cat /proc/{}/environ > /dev/null && echo readable; cat /proc/self/environ > /dev/null && echo own",
            std::process::id()
        );
        let result = run_in(&line, &ws).await;
        assert!(result.confined);
        assert!(!result.output.contains("readable"), "{}", result.output);
        assert!(
            result.output.contains("Permission denied"),
            "{}",
            result.output
        );
        assert!(result.output.ends_with("own\n"));

        // Without Landlock, a server run by root is still out of reach: the
        // child lacks the capabilities the server has (CAP_SYS_PTRACE,
        // CAP_SYS_ADMIN, CAP_PERFMON). Run by anyone else, Landlock is what
        // stops the read.
        let result = run_with_status(
            request(&line, &ws),
            &Confinement::new(&ws),
            &CancellationToken::new(),
            &unavailable(),
        )
        .await
        .unwrap();
        assert!(!result.confined);
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } == 0 {
            assert!(
                result.output.contains("Permission denied"),
                "{}",
                result.output
            );
            assert!(result.output.ends_with("own\n"), "{}", result.output);
        } else {
            assert_eq!(result.output, "readable\nown\n");
        }
    }

    #[tokio::test]
    async fn required_mode_refuses_without_landlock_and_best_effort_runs_unconfined() {
        let (_dir, ws) = workspace();
        let mut confinement = Confinement::new(&ws);
        confinement.mode = SandboxMode::Required;
        let err = run_with_status(
            request("touch ran", &ws),
            &confinement,
            &CancellationToken::new(),
            &unavailable(),
        )
        .await
        .unwrap_err();
        assert!(matches!(err, SandboxError::NotEnforced(_)));
        let message = err.to_string();
        assert!(message.contains("simulated: no Landlock here"), "{message}");
        assert!(message.contains("sandbox = \"required\""), "{message}");
        assert!(!ws.join("ran").exists());

        confinement.mode = SandboxMode::BestEffort;
        let result = run_with_status(
            request("touch ran", &ws),
            &confinement,
            &CancellationToken::new(),
            &unavailable(),
        )
        .await
        .unwrap();
        assert!(!result.confined);
        assert!(!result.network_confined);
        assert_eq!(
            result.sandbox_note.as_deref(),
            Some("simulated: no Landlock here")
        );
        assert!(ws.join("ran").exists());
    }

    #[tokio::test]
    async fn required_mode_runs_confined_when_landlock_is_available() {
        if !landlock_or_skip("required_mode_runs_confined") {
            return;
        }
        let (_dir, ws) = workspace();
        let mut confinement = Confinement::new(&ws);
        confinement.mode = SandboxMode::Required;
        let result = run(
            request("echo hi", &ws),
            &confinement,
            &CancellationToken::new(),
        )
        .await
        .unwrap();
        assert!(result.confined);
        assert_eq!(result.sandbox_note, None);
    }

    #[tokio::test]
    async fn descriptors_the_server_leaks_are_not_inherited() {
        let (_dir, ws) = workspace();
        let file = std::fs::File::open("/dev/null").unwrap();
        let fd = file.as_raw_fd();
        // SAFETY: clears close-on-exec on a descriptor this test owns.
        unsafe {
            libc::fcntl(fd, libc::F_SETFD, 0);
        }
        let result = run_in(
            &format!("[ -e /proc/self/fd/{fd} ] && echo leaked || echo closed"),
            &ws,
        )
        .await;
        assert_eq!(result.output, "closed\n");
        drop(file);
    }

    #[tokio::test]
    async fn sh_is_used_when_bash_is_absent() {
        let (_dir, ws) = workspace();
        let mut req = request("echo $0", &ws);
        req.env = vec![("PATH".to_owned(), "/nonexistent".to_owned())];
        let result = run(req, &Confinement::new(&ws), &CancellationToken::new())
            .await
            .unwrap();
        assert_eq!(result.output, "/bin/sh\n");
    }

    #[tokio::test]
    async fn a_missing_working_directory_is_an_error() {
        let (_dir, ws) = workspace();
        let err = run(
            request("true", &ws.join("missing")),
            &Confinement::new(&ws),
            &CancellationToken::new(),
        )
        .await
        .unwrap_err();
        assert!(matches!(err, SandboxError::Cwd(_)), "{err}");
    }

    #[test]
    fn grants_leave_out_secrets_home_and_tmp() {
        let (_dir, ws) = workspace();
        let tmp = tempfile::tempdir().unwrap();
        let mut confinement = Confinement::new(&ws);
        confinement.deny = vec![PathBuf::from("/root/.ssh")];
        let rules = grants(&confinement, tmp.path());
        let granted = |path: &str| {
            rules
                .iter()
                .any(|g| Path::new(path).starts_with(&g.path) && g.access != GrantAccess::List)
        };
        assert!(granted("/usr/bin/bash"));
        assert!(granted("/etc/passwd"));
        assert!(!granted("/etc/shadow"));
        assert!(!granted("/etc/gshadow"));
        assert!(!granted("/etc/sudoers"));
        assert!(!granted("/tmp/other"));
        assert!(!granted("/root/.bashrc"));
        assert!(!granted("/home"));
        assert!(!granted("/var/run/docker.sock"));
        assert!(!granted("/dev/shm"));
        assert!(
            rules
                .iter()
                .any(|g| g.path == ws && g.access == GrantAccess::ReadWrite && g.must_exist)
        );
        assert_eq!(
            rules.iter().filter(|g| g.path == Path::new("/etc")).count(),
            1
        );
    }

    #[tokio::test]
    async fn a_forbidden_path_inside_a_granted_toolchain_stays_unreadable() {
        let (_dir, ws) = workspace();
        let home = tempfile::tempdir().unwrap();
        let cargo = std::fs::canonicalize(home.path()).unwrap().join(".cargo");
        std::fs::create_dir_all(cargo.join("bin")).unwrap();
        std::fs::write(cargo.join("bin/tool"), "#!/bin/sh\necho tool ran\n").unwrap();
        std::fs::set_permissions(
            cargo.join("bin/tool"),
            std::fs::Permissions::from_mode(0o755),
        )
        .unwrap();
        std::fs::write(cargo.join("credentials.toml"), "CARGO-TOKEN-VALUE").unwrap();
        let mut confinement = Confinement::new(&ws);
        confinement.extra_read_only = vec![cargo.clone()];
        confinement.deny = vec![cargo.join("credentials.toml")];

        let tmp = tempfile::tempdir().unwrap();
        let rules = grants(&confinement, tmp.path());
        let granted = |path: &Path| {
            rules
                .iter()
                .any(|g| path.starts_with(&g.path) && g.access != GrantAccess::List)
        };
        assert!(granted(&cargo.join("bin/tool")));
        assert!(!granted(&cargo.join("credentials.toml")));
        assert!(!granted(&cargo.join("new-file")));

        if !landlock_or_skip("a_forbidden_path_inside_a_granted_toolchain") {
            return;
        }
        let line = format!(
            "{cargo}/bin/tool; cat {cargo}/credentials.toml; echo x >> {cargo}/bin/tool; touch {cargo}/new; echo end",
            cargo = cargo.display()
        );
        let result = run(request(&line, &ws), &confinement, &CancellationToken::new())
            .await
            .unwrap();
        assert!(result.output.starts_with("tool ran\n"), "{}", result.output);
        assert!(
            !result.output.contains("CARGO-TOKEN-VALUE"),
            "{}",
            result.output
        );
        assert_eq!(
            result.output.matches("Permission denied").count(),
            3,
            "{}",
            result.output
        );
        assert!(!cargo.join("new").exists());
    }

    #[test]
    fn status_matches_the_probe() {
        let status = status();
        assert_eq!(status.abi, landlock_abi());
        assert_eq!(status.enforced, status.abi.is_some());
        assert!(!status.detail.is_empty());
    }
}
