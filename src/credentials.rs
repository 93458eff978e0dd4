//! What `pincer login` stores: one provider per entry (its kind, base URL,
//! key and model) in `$XDG_CONFIG_HOME/pincer/credentials.toml`, mode 0600,
//! never in `config.toml`. The configuration reads it last: flags, the
//! environment and the config file all win over a login.

use std::collections::BTreeMap;
use std::io::Write as _;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use thiserror::Error;

use crate::providers::ProviderKind;

/// The file's name beside `config.toml`.
pub const FILE_NAME: &str = "credentials.toml";

#[derive(Debug, Error)]
pub enum CredentialsError {
    #[error("cannot read {path}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path} is not a credentials file written by `pincer login`: {message}")]
    Parse { path: PathBuf, message: String },
    #[error("cannot write {path}")]
    Write {
        path: PathBuf,
        source: std::io::Error,
    },
}

/// One provider a person logged in to.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Login {
    pub kind: ProviderKind,
    /// Unset: the vendor's URL.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base_url: Option<String>,
    /// Unset for a local server that needs none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_key: Option<String>,
    /// The model new sessions use with this provider.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
}

// By hand, so that no log or panic message can print the key.
impl std::fmt::Debug for Login {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Login")
            .field("kind", &self.kind)
            .field("base_url", &self.base_url)
            .field("api_key", &self.api_key.as_ref().map(|_| "[redacted]"))
            .field("model", &self.model)
            .finish()
    }
}

/// The whole file.
// No `deny_unknown_fields`: serde cannot have it with `flatten`; an entry
// that is not a login is refused by `Login`'s own.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Credentials {
    /// The provider of the last login: new sessions use it when nothing else
    /// names one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default: Option<String>,
    #[serde(default, flatten)]
    pub providers: BTreeMap<String, Login>,
}

/// `$XDG_CONFIG_HOME/pincer/credentials.toml` (or under `~/.config`).
pub fn path(env: &dyn Fn(&str) -> Option<String>) -> Option<PathBuf> {
    let base = env("XDG_CONFIG_HOME")
        .filter(|d| !d.is_empty())
        .map(PathBuf::from)
        .or_else(|| {
            env("HOME")
                .filter(|h| !h.is_empty())
                .map(|h| PathBuf::from(h).join(".config"))
        })?;
    Some(base.join("pincer").join(FILE_NAME))
}

/// Removes every stored login (the file); the names of those removed.
pub fn forget_all(path: &Path) -> Result<Vec<String>, CredentialsError> {
    let names: Vec<String> = Credentials::load(path)?.providers.into_keys().collect();
    match std::fs::remove_file(path) {
        Err(err) if err.kind() != std::io::ErrorKind::NotFound => Err(CredentialsError::Write {
            path: path.to_owned(),
            source: err,
        }),
        _ => Ok(names),
    }
}

impl Credentials {
    /// The stored logins; none when the file does not exist.
    pub fn load(path: &Path) -> Result<Self, CredentialsError> {
        let text = match std::fs::read_to_string(path) {
            Ok(text) => text,
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => return Ok(Self::default()),
            Err(source) => {
                return Err(CredentialsError::Read {
                    path: path.to_owned(),
                    source,
                });
            }
        };
        // The message only: a TOML error quotes the line, which may hold a key.
        toml::from_str(&text).map_err(|err| CredentialsError::Parse {
            path: path.to_owned(),
            message: err.message().to_owned(),
        })
    }

    /// Writes the file atomically, created with mode 0600 (never readable by
    /// others, not even for a moment); the directory is created if missing.
    pub fn save(&self, path: &Path) -> Result<(), CredentialsError> {
        let write_error = |source| CredentialsError::Write {
            path: path.to_owned(),
            source,
        };
        let dir = path.parent().unwrap_or(Path::new("."));
        std::fs::create_dir_all(dir).map_err(write_error)?;
        let text = toml::to_string(self)
            .map_err(|err| write_error(std::io::Error::other(err.to_string())))?;
        // tempfile creates the file 0600 in the same directory.
        let mut file = tempfile::NamedTempFile::new_in(dir).map_err(write_error)?;
        file.write_all(
            format!(
                "# Written by `pincer login`; remove with `pincer logout`. Keep it private.\n{text}"
            )
            .as_bytes(),
        )
        .map_err(write_error)?;
        file.as_file().sync_all().map_err(write_error)?;
        file.persist(path).map_err(|err| write_error(err.error))?;
        Ok(())
    }

    /// The provider new sessions default to, with its login.
    pub fn default_login(&self) -> Option<(&str, &Login)> {
        let name = self.default.as_deref()?;
        self.providers
            .get_key_value(name)
            .map(|(n, l)| (n.as_str(), l))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt as _;

    #[test]
    fn saved_private_and_read_back() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("pincer").join(FILE_NAME);
        let mut credentials = Credentials::default();
        credentials.providers.insert(
            "openai".into(),
            Login {
                kind: ProviderKind::Openai,
                base_url: None,
                api_key: Some("sk-test-1234567890".into()),
                model: Some("gpt-4.1-mini".into()),
            },
        );
        credentials.default = Some("openai".into());
        credentials.save(&path).unwrap();
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        assert_eq!(Credentials::load(&path).unwrap(), credentials);
        let (name, login) = credentials.default_login().unwrap();
        assert_eq!(name, "openai");
        assert!(!format!("{login:?}").contains("sk-test"));
    }

    #[test]
    fn a_missing_file_is_no_login_and_a_broken_one_does_not_echo_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(FILE_NAME);
        assert_eq!(Credentials::load(&path).unwrap(), Credentials::default());
        std::fs::write(&path, "[openai]\napi_key = \"sk-secret-value\"\nkind = 3\n").unwrap();
        let err = Credentials::load(&path).unwrap_err().to_string();
        assert!(!err.contains("sk-secret"), "{err}");
    }
}
