//! The one rule every setting is resolved by: a flag beats an environment
//! variable, which beats the config file, which beats the default; the value
//! keeps the layer that set it (its [`Origin`]), which `pincer config show`
//! prints and every error names.
//!
//! An environment variable set to the empty string counts as unset.

use std::path::{Path, PathBuf};

use super::{ConfigError, Env, Origin, SandboxSetting, Sourced, absolute};

/// A value an environment variable can hold, read from its text; the error
/// says what was expected.
pub(super) trait FromEnv: Sized {
    fn from_env(raw: &str) -> Result<Self, String>;
}

impl FromEnv for String {
    fn from_env(raw: &str) -> Result<Self, String> {
        Ok(raw.to_owned())
    }
}

/// A path from the environment is taken relative to the working directory.
impl FromEnv for PathBuf {
    fn from_env(raw: &str) -> Result<Self, String> {
        Ok(absolute(Path::new(raw)))
    }
}

impl FromEnv for u32 {
    fn from_env(raw: &str) -> Result<Self, String> {
        raw.trim()
            .parse()
            .map_err(|_| format!("expected a whole number, got {raw:?}"))
    }
}

impl FromEnv for u64 {
    fn from_env(raw: &str) -> Result<Self, String> {
        raw.trim()
            .parse()
            .map_err(|_| format!("expected a whole number, got {raw:?}"))
    }
}

impl FromEnv for usize {
    fn from_env(raw: &str) -> Result<Self, String> {
        raw.trim()
            .parse()
            .map_err(|_| format!("expected a whole number, got {raw:?}"))
    }
}

impl FromEnv for SandboxSetting {
    fn from_env(raw: &str) -> Result<Self, String> {
        match raw {
            "required" => Ok(SandboxSetting::Required),
            "best_effort" => Ok(SandboxSetting::BestEffort),
            _ => Err(format!("expected required or best_effort, got {raw:?}")),
        }
    }
}

/// Where one setting may be given: its flag, its variable and its file
/// value, each optional. [`Layers::resolve`] takes the highest one set.
#[must_use]
pub(super) struct Layers<T> {
    /// The setting's key, as errors name it.
    key: &'static str,
    flag: Option<Sourced<T>>,
    env: Option<&'static str>,
    file: Option<Sourced<T>>,
}

/// A setting only the file gives: the file's layer alone, no default.
pub(super) fn file_only<T>(origin: &Origin, value: Option<T>) -> Option<Sourced<T>> {
    value.map(|value| Sourced::new(value, origin.clone()))
}

impl<T: FromEnv> Layers<T> {
    pub(super) fn new(key: &'static str) -> Self {
        Self {
            key,
            flag: None,
            env: None,
            file: None,
        }
    }

    /// The value the flag `name` gave, if it was given.
    pub(super) fn flag(mut self, name: &'static str, value: Option<T>) -> Self {
        self.flag = value.map(|value| Sourced::new(value, Origin::Flag(name)));
        self
    }

    /// The variable that may hold the value.
    pub(super) fn env(mut self, name: &'static str) -> Self {
        self.env = Some(name);
        self
    }

    /// The value the config file (at `origin`) gave, if it gave one.
    pub(super) fn file(mut self, origin: &Origin, value: Option<T>) -> Self {
        self.file = file_only(origin, value);
        self
    }

    /// The value of the highest layer that sets it, with that layer; `None`
    /// when none does. A variable that does not read as a `T` is an error
    /// naming it and the key.
    pub(super) fn resolve(self, env: Env) -> Result<Option<Sourced<T>>, ConfigError> {
        if self.flag.is_some() {
            return Ok(self.flag);
        }
        if let Some(name) = self.env
            && let Some(raw) = env(name).filter(|raw| !raw.is_empty())
        {
            let value = T::from_env(&raw).map_err(|message| ConfigError::Invalid {
                origin: Origin::Env(name),
                key: self.key.to_owned(),
                message,
            })?;
            return Ok(Some(Sourced::new(value, Origin::Env(name))));
        }
        Ok(self.file)
    }

    /// Like [`Layers::resolve`], with `default` below the other layers.
    pub(super) fn or(self, env: Env, default: T) -> Result<Sourced<T>, ConfigError> {
        Ok(self
            .resolve(env)?
            .unwrap_or_else(|| Sourced::new(default, Origin::Default)))
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;

    fn file() -> Origin {
        Origin::File(PathBuf::from("/etc/c.toml"))
    }

    fn resolve(flag: Option<u32>, var: Option<&str>, file_value: Option<u32>) -> Sourced<u32> {
        let vars: HashMap<&str, String> = var
            .map(|v| ("PINCER_N", v.to_owned()))
            .into_iter()
            .collect();
        Layers::new("n")
            .flag("--n", flag)
            .env("PINCER_N")
            .file(&file(), file_value)
            .or(&|name| vars.get(name).cloned(), 7)
            .unwrap_or_else(|err| panic!("{err}"))
    }

    /// Every combination of layers set: the highest wins and is named.
    #[test]
    fn the_highest_layer_set_wins_and_is_recorded() {
        let flag = Sourced::new(1, Origin::Flag("--n"));
        let env = Sourced::new(2, Origin::Env("PINCER_N"));
        let in_file = Sourced::new(3, file());
        let default = Sourced::new(7, Origin::Default);
        for (flag_set, env_set, file_set, expected) in [
            (true, true, true, &flag),
            (true, false, false, &flag),
            (true, false, true, &flag),
            (false, true, true, &env),
            (false, true, false, &env),
            (false, false, true, &in_file),
            (false, false, false, &default),
        ] {
            let got = resolve(
                flag_set.then_some(1),
                env_set.then_some("2"),
                file_set.then_some(3),
            );
            assert_eq!(
                &got, expected,
                "flag {flag_set}, env {env_set}, file {file_set}"
            );
        }
    }

    #[test]
    fn an_empty_variable_counts_as_unset() {
        assert_eq!(resolve(None, Some(""), Some(3)), Sourced::new(3, file()));
        assert_eq!(resolve(None, Some(""), None).origin, Origin::Default);
    }

    #[test]
    fn a_variable_that_does_not_read_names_itself_and_the_key() {
        let vars = |name: &str| (name == "PINCER_N").then(|| "many".to_owned());
        let err = Layers::<u32>::new("n")
            .env("PINCER_N")
            .file(&file(), Some(3))
            .resolve(&vars)
            .err()
            .map(|e| e.to_string());
        assert_eq!(
            err.as_deref(),
            Some("environment variable PINCER_N: n: expected a whole number, got \"many\"")
        );
        // A flag above it means the variable is never read.
        let flagged = Layers::new("n")
            .flag("--n", Some(1u32))
            .env("PINCER_N")
            .resolve(&vars);
        assert_eq!(
            flagged.ok().flatten(),
            Some(Sourced::new(1, Origin::Flag("--n")))
        );
    }

    #[test]
    fn nothing_set_and_no_default_is_none() {
        let unset = Layers::<String>::new("s")
            .env("PINCER_S")
            .resolve(&|_| None);
        assert_eq!(unset.ok(), Some(None));
    }

    #[test]
    fn variables_read_as_their_type() {
        assert_eq!(u32::from_env(" 12 "), Ok(12));
        assert!(u64::from_env("-1").is_err());
        assert_eq!(usize::from_env("3"), Ok(3));
        assert_eq!(
            SandboxSetting::from_env("required"),
            Ok(SandboxSetting::Required)
        );
        assert_eq!(
            SandboxSetting::from_env("sometimes"),
            Err("expected required or best_effort, got \"sometimes\"".to_owned())
        );
        assert!(PathBuf::from_env("rel").is_ok_and(|p| p.is_absolute() && p.ends_with("rel")));
    }
}
