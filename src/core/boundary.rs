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
        }
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
        if !self.roots.iter().any(|root| resolved.starts_with(root)) {
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

    /// Whether a path (resolved) falls inside a root.
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
