//! The path boundary: where tools may reach (the workspace and extra roots,
//! minus the forbidden list), and how a path argument is resolved against it,
//! symlinks followed, before any tool touches it.

use std::path::{Component, Path, PathBuf};

use thiserror::Error;

/// Why a path argument was refused.
#[derive(Debug, Clone, Error, PartialEq, Eq)]
pub enum PathError {
    #[error("path {path} is forbidden ({rule})")]
    Forbidden { path: PathBuf, rule: PathBuf },
    #[error("path {path} is outside the workspace {workspace}")]
    Outside { path: PathBuf, workspace: PathBuf },
    #[error("path {0:?} is empty or not valid")]
    Invalid(String),
}

/// Where tools may reach: the workspace and extra roots, minus the forbidden list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PathBoundary {
    /// Canonical roots a path must fall under (the workspace first).
    roots: Vec<PathBuf>,
    /// Paths that are refused even inside a root; compared after resolution.
    forbidden: Vec<PathBuf>,
    /// `~` in arguments expands to this.
    home: Option<PathBuf>,
    /// Paths a tool writes only with a person's approval.
    protected: Protected,
    /// Canonical trees tools may read but never write (the session's
    /// skills' folders, `core::skills`).
    readable: Vec<PathBuf>,
}

/// The forbidden list every boundary starts with (`~` is the user's home).
pub const DEFAULT_FORBIDDEN: &[&str] = &[
    "~/.ssh",
    "~/.aws",
    "~/.gnupg",
    "~/.config/gcloud",
    "~/.azure",
    "~/.kube",
    "~/.docker/config.json",
    "~/.netrc",
    "~/.git-credentials",
    "~/.npmrc",
    "~/.pypirc",
    "~/.cargo/credentials.toml",
    "~/.cargo/credentials",
    "~/.password-store",
    "/etc/shadow",
    "/etc/gshadow",
    "/etc/sudoers",
    "/etc/sudoers.d",
    "/root/.ssh",
];

impl PathBoundary {
    /// A boundary around `workspace` plus `extra_roots`, refusing `forbidden`
    /// (entries may start with `~`).
    pub fn new(
        workspace: &Path,
        extra_roots: &[PathBuf],
        forbidden: &[String],
        home: Option<PathBuf>,
    ) -> Self {
        let mut roots = vec![canonical_or_lexical(workspace)];
        for root in extra_roots {
            let root = canonical_or_lexical(&expand_home(root, home.as_deref()));
            if !roots.contains(&root) {
                roots.push(root);
            }
        }
        let mut forbidden_paths = Vec::new();
        for entry in forbidden {
            let path = expand_home(Path::new(entry), home.as_deref());
            if !path.is_absolute() {
                continue;
            }
            let lexical = normalize(&path);
            let canonical = canonical_or_lexical(&path);
            for path in [lexical, canonical] {
                if !forbidden_paths.contains(&path) {
                    forbidden_paths.push(path);
                }
            }
        }
        Self {
            roots,
            forbidden: forbidden_paths,
            home,
            protected: Protected::default(),
            readable: Vec::new(),
        }
    }

    /// The same boundary where `trees` may also be read (never written):
    /// a path under one resolves, and the policy refuses a write to it.
    pub fn with_readable(mut self, trees: &[PathBuf]) -> Self {
        for tree in trees {
            let tree = canonical_or_lexical(&expand_home(tree, self.home.as_deref()));
            if !self.roots.iter().any(|root| tree.starts_with(root))
                && !self.readable.contains(&tree)
            {
                self.readable.push(tree);
            }
        }
        self
    }

    /// The trees tools may read but not write.
    pub fn readable(&self) -> &[PathBuf] {
        &self.readable
    }

    /// The same boundary with `protected` as its protected paths (the
    /// built-in ones unless given).
    pub fn with_protected(mut self, protected: Protected) -> Self {
        self.protected = protected;
        self
    }

    pub fn protected(&self) -> &Protected {
        &self.protected
    }

    /// The workspace root.
    pub fn workspace(&self) -> &Path {
        &self.roots[0]
    }

    pub fn roots(&self) -> &[PathBuf] {
        &self.roots
    }

    pub fn forbidden(&self) -> &[PathBuf] {
        &self.forbidden
    }

    /// Resolves a path argument against `base`: `~` expanded, `.` and `..`
    /// applied, every symlink of the part that exists followed. The result must
    /// be under a root and under no forbidden path.
    pub fn resolve(&self, base: &Path, raw: &str) -> Result<PathBuf, PathError> {
        if raw.is_empty() || raw.contains('\0') {
            return Err(PathError::Invalid(raw.to_owned()));
        }
        let path = expand_home(Path::new(raw), self.home.as_deref());
        let joined = if path.is_absolute() {
            path
        } else {
            base.join(path)
        };
        let resolved = resolve_existing(&joined);
        self.check(&resolved)?;
        Ok(resolved)
    }

    /// Checks an already resolved path.
    pub fn check(&self, resolved: &Path) -> Result<(), PathError> {
        if let Some(rule) = self.forbidden_rule(resolved) {
            return Err(PathError::Forbidden {
                path: resolved.to_path_buf(),
                rule: rule.to_path_buf(),
            });
        }
        if !self
            .roots
            .iter()
            .chain(&self.readable)
            .any(|root| resolved.starts_with(root))
        {
            return Err(PathError::Outside {
                path: resolved.to_path_buf(),
                workspace: self.roots[0].clone(),
            });
        }
        Ok(())
    }

    /// The forbidden entry covering `resolved`, if any.
    pub fn forbidden_rule(&self, resolved: &Path) -> Option<&Path> {
        self.forbidden
            .iter()
            .find(|rule| resolved.starts_with(rule))
            .map(PathBuf::as_path)
    }

    /// Whether a path (resolved) falls inside a root (where tools may
    /// write; a readable-only tree is not one).
    pub fn contains(&self, resolved: &Path) -> bool {
        self.roots.iter().any(|root| resolved.starts_with(root))
    }

    /// Expands `~` and resolves like [`PathBoundary::resolve`] without checking.
    pub fn resolve_unchecked(&self, base: &Path, raw: &str) -> PathBuf {
        let path = expand_home(Path::new(raw), self.home.as_deref());
        let joined = if path.is_absolute() {
            path
        } else {
            base.join(path)
        };
        resolve_existing(&joined)
    }
}

/// The paths protected unless configured otherwise: where other agents and
/// Pincer read configuration or code they run (hooks, settings, skills, MCP
/// servers, git's hooks and configuration). Matched at any depth.
pub const DEFAULT_PROTECTED: &[&str] = &[
    ".claude",
    ".codex",
    ".pincer",
    ".agents",
    ".mcp.json",
    ".git/hooks",
    ".git/config",
];

/// Paths that other agents, git or Pincer read as configuration or as code
/// to run: a tool writes them only with a person's approval, in every mode,
/// and the sandbox keeps them read-only for commands. A relative entry
/// (`.git/hooks`) is a run of path components matched at any depth; an
/// absolute one (`~` allowed) is that path and everything beneath.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Protected {
    /// Relative entries, as written and as components.
    names: Vec<(String, Vec<std::ffi::OsString>)>,
    /// Absolute entries, as written and resolved (lexically and canonically).
    paths: Vec<(String, Vec<PathBuf>)>,
}

impl Default for Protected {
    fn default() -> Self {
        let defaults: Vec<String> = DEFAULT_PROTECTED.iter().map(|e| (*e).to_owned()).collect();
        Self::new(&defaults, None)
    }
}

impl Protected {
    /// Protects `entries` (relative ones at any depth, absolute ones with
    /// what is beneath); an empty or `..` entry is skipped (configuration
    /// validates them).
    pub fn new(entries: &[String], home: Option<&Path>) -> Self {
        let mut names = Vec::new();
        let mut paths = Vec::new();
        for entry in entries {
            let raw = entry.trim().trim_end_matches('/');
            if raw.is_empty() {
                continue;
            }
            let path = expand_home(Path::new(raw), home);
            if path.is_absolute() {
                let lexical = normalize(&path);
                let canonical = canonical_or_lexical(&path);
                let mut resolved = vec![lexical];
                if !resolved.contains(&canonical) {
                    resolved.push(canonical);
                }
                paths.push((raw.to_owned(), resolved));
                continue;
            }
            let parts: Option<Vec<std::ffi::OsString>> = path
                .components()
                .map(|component| {
                    if let Component::Normal(name) = component {
                        Some(name.to_os_string())
                    } else {
                        None
                    }
                })
                .collect();
            match parts {
                Some(parts) if !parts.is_empty() => names.push((raw.to_owned(), parts)),
                _ => {}
            }
        }
        Self { names, paths }
    }

    /// The entry protecting `resolved`, as written, if any.
    pub fn rule(&self, resolved: &Path) -> Option<&str> {
        let components: Vec<&std::ffi::OsStr> = resolved
            .components()
            .filter_map(|component| {
                if let Component::Normal(name) = component {
                    Some(name)
                } else {
                    None
                }
            })
            .collect();
        for (raw, parts) in &self.names {
            if components
                .windows(parts.len())
                .any(|window| window.iter().zip(parts).all(|(a, b)| *a == b.as_os_str()))
            {
                return Some(raw);
            }
        }
        self.paths
            .iter()
            .find(|(_, resolved_paths)| resolved_paths.iter().any(|p| resolved.starts_with(p)))
            .map(|(raw, _)| raw.as_str())
    }

    /// The relative entries (`.git/hooks`), for the places they are looked
    /// for directly beneath a root.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.names.iter().map(|(raw, _)| raw.as_str())
    }

    /// The absolute entries, resolved.
    pub fn paths(&self) -> impl Iterator<Item = &Path> {
        self.paths
            .iter()
            .filter_map(|(_, resolved)| resolved.last().map(PathBuf::as_path))
    }

    /// Where the entries lie beneath `root`: each relative entry directly
    /// under it, and each absolute entry inside it.
    pub fn under(&self, root: &Path) -> Vec<PathBuf> {
        let mut out: Vec<PathBuf> = self.names().map(|name| root.join(name)).collect();
        for path in self.paths() {
            if path.starts_with(root) && !out.iter().any(|p| p == path) {
                out.push(path.to_path_buf());
            }
        }
        out
    }
}

fn expand_home(path: &Path, home: Option<&Path>) -> PathBuf {
    let Some(home) = home else {
        return path.to_path_buf();
    };
    match path.strip_prefix("~") {
        Ok(rest) => home.join(rest),
        Err(_) => path.to_path_buf(),
    }
}

fn canonical_or_lexical(path: &Path) -> PathBuf {
    std::fs::canonicalize(path).unwrap_or_else(|_| normalize(path))
}

/// Removes `.` and applies `..` lexically.
#[allow(
    clippy::wildcard_enum_match_arm,
    reason = "std's path Component: every other component is kept as it is"
)]
fn normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for component in path.components() {
        match component {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            other => out.push(other.as_os_str()),
        }
    }
    out
}

/// Resolves an absolute path component by component, following every symlink
/// of the part that exists; what does not exist yet is applied lexically.
fn resolve_existing(path: &Path) -> PathBuf {
    use std::ffi::OsString;
    // A stack of what is left to walk: the next component is on top.
    let mut pending: Vec<OsString> = Vec::new();
    push_components(&mut pending, path);
    let mut resolved = PathBuf::from("/");
    let mut hops = 0;
    while let Some(name) = pending.pop() {
        if name == ".." {
            resolved.pop();
            continue;
        }
        if name == "/" {
            resolved = PathBuf::from("/");
            continue;
        }
        let next = resolved.join(&name);
        let link = match std::fs::symlink_metadata(&next) {
            Ok(meta) if meta.file_type().is_symlink() && hops < 40 => {
                std::fs::read_link(&next).ok()
            }
            _ => None,
        };
        match link {
            Some(target) => {
                hops += 1;
                push_components(&mut pending, &target);
            }
            None => resolved = next,
        }
    }
    resolved
}

/// Pushes a path's components so the first is popped first; `/` marks a restart at the root.
fn push_components(stack: &mut Vec<std::ffi::OsString>, path: &Path) {
    let parts: Vec<std::ffi::OsString> = path
        .components()
        .filter_map(|component| match component {
            Component::RootDir => Some("/".into()),
            Component::ParentDir => Some("..".into()),
            Component::Normal(name) => Some(name.to_os_string()),
            Component::CurDir | Component::Prefix(_) => None,
        })
        .collect();
    stack.extend(parts.into_iter().rev());
}
