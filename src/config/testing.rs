//! What the configuration's unit tests share: a configuration loaded from
//! files written to a fresh directory, with an environment of the test's own.

use std::collections::HashMap;

use super::{Config, Flags};

/// Loads with `files` written to a temporary directory (`$DIR` in `vars`
/// names it, `HOME` is below it) and only `vars` in the environment; the
/// error as its message.
pub(super) fn load(
    files: &[(&str, &str)],
    vars: &[(&str, &str)],
    flags: Flags,
) -> Result<Config, String> {
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    for (name, text) in files {
        std::fs::write(dir.path().join(name), text).map_err(|e| e.to_string())?;
    }
    let root = dir.path().to_path_buf();
    let mut env: HashMap<String, String> = vars
        .iter()
        .map(|(k, v)| (k.to_string(), v.replace("$DIR", &root.to_string_lossy())))
        .collect();
    env.insert(
        "HOME".into(),
        root.join("home").to_string_lossy().into_owned(),
    );
    Config::load_with(&flags, &|name| env.get(name).cloned()).map_err(|e| e.to_string())
}

/// Loads `file` as the config file (`$DIR/c.toml`), nothing else set.
pub(super) fn load_file(file: &str) -> Result<Config, String> {
    load(
        &[("c.toml", file)],
        &[("PINCER_CONFIG", "$DIR/c.toml")],
        Flags::default(),
    )
}

/// The message `load_file(file)` fails with; empty when it loads.
pub(super) fn file_error(file: &str) -> String {
    load_file(file).err().unwrap_or_default()
}

/// The message loading with no files and `vars` fails with; empty when it
/// loads.
pub(super) fn load_error(vars: &[(&str, &str)], flags: Flags) -> String {
    load(&[], vars, flags).err().unwrap_or_default()
}

/// What `config show` printed, each line's `  # origin` comment cut, read
/// back as TOML.
pub(super) fn reparse(shown: &str) -> toml::Table {
    let bare: Vec<&str> = shown
        .lines()
        .map(|l| l.split("  #").next().unwrap_or_default())
        .collect();
    toml::from_str(&bare.join("\n")).unwrap_or_else(|e| panic!("{e}\n{shown}"))
}
