//! The person's toolchains under home: which trees the shell's sandbox lets a
//! command read and execute by default, which paths inside them stay denied,
//! and which environment variables the tools need (`docs/tools.md`, "What a
//! command may reach").
//!
//! Everything here is read and execute only: a command writes inside the
//! workspace, the extra roots and its private temporary directory, never into
//! a toolchain (a changed `~/.cargo/bin/cargo` would run outside the sandbox
//! the next time the person builds).

use std::path::{Path, PathBuf};

/// Variables passed to commands besides [`crate::sandbox::DEFAULT_ENV_ALLOW`]:
/// the real `HOME` and where each toolchain lives. Secret-looking names are
/// dropped anyway ([`crate::sandbox::scrubbed_env`]).
pub const TOOLCHAIN_ENV: &[&str] = &[
    "HOME",
    "XDG_CONFIG_HOME",
    "CARGO_HOME",
    "RUSTUP_HOME",
    "RUSTUP_TOOLCHAIN",
    "NVM_DIR",
    "NVM_BIN",
    "NVM_INC",
    "GOPATH",
    "GOROOT",
    "PYENV_ROOT",
    "PYENV_VERSION",
    "VIRTUAL_ENV",
    "CONDA_PREFIX",
    "JAVA_HOME",
    "VOLTA_HOME",
    "ASDF_DIR",
    "ASDF_DATA_DIR",
    "MISE_DATA_DIR",
    "BUN_INSTALL",
    "DENO_DIR",
    "DENO_INSTALL",
    "PNPM_HOME",
    "COLORTERM",
];

/// Trees under home granted read and execute when they exist, relative to
/// home. `~/.local/share` is not granted whole (it holds shell history,
/// keyrings and other programs' data), only the parts toolchains install to.
const HOME_TREES: &[&str] = &[
    ".npm",
    ".npm-global",
    ".cache/go-build",
    ".local/bin",
    ".local/lib",
    ".local/share/pipx",
    ".local/share/uv",
    ".local/share/mise",
    ".local/share/pnpm",
    ".local/share/fnm",
    ".local/share/virtualenvs",
    ".local/share/pypoetry",
    ".volta",
    ".asdf",
    ".bun",
    ".deno",
    ".gitconfig",
    ".config/git",
];

/// Trees named by a variable, or at a default place under home when unset.
const ENV_TREES: &[(&str, &str)] = &[
    ("CARGO_HOME", ".cargo"),
    ("RUSTUP_HOME", ".rustup"),
    ("NVM_DIR", ".nvm"),
    ("GOPATH", "go"),
    ("PYENV_ROOT", ".pyenv"),
];

/// Trees named by a variable only (no default place).
const ENV_ONLY_TREES: &[&str] = &[
    "GOROOT",
    "JAVA_HOME",
    "VIRTUAL_ENV",
    "CONDA_PREFIX",
    "VOLTA_HOME",
    "ASDF_DIR",
    "ASDF_DATA_DIR",
    "MISE_DATA_DIR",
    "BUN_INSTALL",
    "DENO_DIR",
    "DENO_INSTALL",
    "PNPM_HOME",
];

/// Credentials inside granted trees, denied on top of `[paths] forbidden`.
const TREE_SECRETS: &[(&str, &str)] = &[
    ("CARGO_HOME", "credentials.toml"),
    ("CARGO_HOME", "credentials"),
    ("XDG_CONFIG_HOME", "git/credentials"),
];

/// What the sandbox grants for the person's toolchains.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HomeToolchains {
    /// Read and execute beneath each (missing ones are skipped when the rules
    /// are built).
    pub read_execute: Vec<PathBuf>,
    /// Denied even inside those trees.
    pub deny: Vec<PathBuf>,
}

/// The toolchain trees for the environment `env` describes (the server's).
pub fn home_toolchains(env: &dyn Fn(&str) -> Option<String>) -> HomeToolchains {
    let var = |name: &str| {
        env(name)
            .filter(|value| !value.is_empty())
            .map(PathBuf::from)
            .filter(|path| path.is_absolute())
    };
    let home = var("HOME");
    let mut read_execute = Vec::new();
    // A variable naming `/` or home itself (or a parent of it) would grant
    // the whole of it: such a value is not a toolchain and is left out.
    let too_wide = |path: &Path| {
        path.parent().is_none() || home.as_deref().is_some_and(|home| home.starts_with(path))
    };
    let mut push = |path: PathBuf| {
        if !too_wide(&path) && !read_execute.contains(&path) {
            read_execute.push(path);
        }
    };
    for (name, default) in ENV_TREES {
        if let Some(path) = var(name).or_else(|| home.as_ref().map(|h| h.join(default))) {
            push(path);
        }
    }
    for name in ENV_ONLY_TREES {
        if let Some(path) = var(name) {
            push(path);
        }
    }
    if let Some(home) = &home {
        for tree in HOME_TREES {
            push(home.join(tree));
        }
    }
    if let Some(config) = var("XDG_CONFIG_HOME") {
        push(config.join("git"));
    }

    let mut deny = Vec::new();
    for (name, file) in TREE_SECRETS {
        let base = var(name).or_else(|| {
            let default = match *name {
                "CARGO_HOME" => ".cargo",
                _ => ".config",
            };
            home.as_ref().map(|h| h.join(default))
        });
        if let Some(base) = base {
            deny.push(base.join(file));
        }
    }
    if let Some(home) = &home {
        deny.push(home.join(".config/git/credentials"));
    }
    deny.dedup();
    HomeToolchains { read_execute, deny }
}

/// `path` with a leading `~` replaced by `home`.
pub fn expand_home(path: &Path, home: Option<&Path>) -> PathBuf {
    match (path.strip_prefix("~"), home) {
        (Ok(rest), Some(home)) => home.join(rest),
        _ => path.to_path_buf(),
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;

    fn from(vars: &[(&str, &str)]) -> HomeToolchains {
        let vars: HashMap<String, String> = vars
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        home_toolchains(&|name| vars.get(name).cloned())
    }

    #[test]
    fn defaults_lie_under_home() {
        let found = from(&[("HOME", "/home/ann")]);
        for path in [
            "/home/ann/.cargo",
            "/home/ann/.rustup",
            "/home/ann/.nvm",
            "/home/ann/go",
            "/home/ann/.pyenv",
            "/home/ann/.npm",
            "/home/ann/.local/bin",
            "/home/ann/.gitconfig",
            "/home/ann/.config/git",
        ] {
            assert!(
                found.read_execute.contains(&PathBuf::from(path)),
                "{path} missing from {:?}",
                found.read_execute
            );
        }
        // Never home itself, nor the parts of it that hold other data.
        for path in [
            "/home/ann",
            "/home/ann/.local",
            "/home/ann/.local/share",
            "/home/ann/.config",
            "/home/ann/.ssh",
        ] {
            assert!(!found.read_execute.contains(&PathBuf::from(path)), "{path}");
        }
        assert!(
            found
                .deny
                .contains(&PathBuf::from("/home/ann/.cargo/credentials.toml"))
        );
        assert!(
            found
                .deny
                .contains(&PathBuf::from("/home/ann/.config/git/credentials"))
        );
    }

    #[test]
    fn variables_move_the_trees() {
        let found = from(&[
            ("HOME", "/home/ann"),
            ("CARGO_HOME", "/opt/cargo"),
            ("RUSTUP_HOME", "/opt/rustup"),
            ("JAVA_HOME", "/usr/lib/jvm/21"),
            ("VIRTUAL_ENV", "relative/venv"),
            ("NVM_DIR", ""),
        ]);
        let has = |p: &str| found.read_execute.contains(&PathBuf::from(p));
        assert!(has("/opt/cargo") && has("/opt/rustup") && has("/usr/lib/jvm/21"));
        assert!(!has("/home/ann/.cargo") && !has("/home/ann/.rustup"));
        // Empty falls back to the default; a relative path is ignored.
        assert!(has("/home/ann/.nvm"));
        assert!(!found.read_execute.iter().any(|p| p.is_relative()));
        assert!(
            found
                .deny
                .contains(&PathBuf::from("/opt/cargo/credentials.toml"))
        );
    }

    #[test]
    fn a_variable_naming_home_or_the_root_grants_nothing() {
        let found = from(&[
            ("HOME", "/home/ann"),
            ("VIRTUAL_ENV", "/"),
            ("JAVA_HOME", "/home/ann"),
            ("GOROOT", "/home"),
        ]);
        for path in ["/", "/home/ann", "/home"] {
            assert!(!found.read_execute.contains(&PathBuf::from(path)), "{path}");
        }
    }

    #[test]
    fn without_home_only_variables_count() {
        let found = from(&[("CARGO_HOME", "/opt/cargo")]);
        assert_eq!(found.read_execute, vec![PathBuf::from("/opt/cargo")]);
        assert!(from(&[]).read_execute.is_empty());
    }

    #[test]
    fn tilde_expands_to_home() {
        let home = Path::new("/home/ann");
        assert_eq!(
            expand_home(Path::new("~/.cache/x"), Some(home)),
            PathBuf::from("/home/ann/.cache/x")
        );
        assert_eq!(
            expand_home(Path::new("/abs"), Some(home)),
            PathBuf::from("/abs")
        );
        assert_eq!(expand_home(Path::new("~/x"), None), PathBuf::from("~/x"));
    }
}
