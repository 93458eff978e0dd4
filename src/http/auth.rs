//! Bearer tokens: where the server's token comes from, and the check every
//! request but the health probes passes.

use std::io::Write as _;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use axum::http::{HeaderMap, header};
use sha2::{Digest, Sha256};
use thiserror::Error;

use super::error::ApiError;

/// The environment variable read for the token unless `[http] token_env` names another.
pub const TOKEN_ENV: &str = "PINCER_HTTP_TOKEN";
/// The generated token's file, in the data directory.
pub const TOKEN_FILE: &str = "http-token";
/// Shortest token accepted from the environment or a file.
const MIN_TOKEN_LEN: usize = 16;

#[derive(Debug, Error)]
pub enum TokenError {
    #[error("{source_name}: the HTTP token must be at least {MIN_TOKEN_LEN} characters")]
    TooShort { source_name: String },
    #[error("cannot read the HTTP token file {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("cannot write the HTTP token file {path}: {source}")]
    Write {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("cannot generate a random HTTP token")]
    Random,
}

/// The token requests must present. Only its digest is kept, and presented
/// tokens are compared by digest, so the comparison's timing says nothing
/// about the token.
#[derive(Clone)]
pub struct Token {
    digest: [u8; 32],
}

impl std::fmt::Debug for Token {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Token(..)")
    }
}

/// Where the token came from, to tell the user (never the token itself).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TokenSource {
    Env(String),
    File(PathBuf),
    /// The data directory's token file, created now.
    Generated(PathBuf),
    /// The data directory's token file, from an earlier start.
    Existing(PathBuf),
}

impl std::fmt::Display for TokenSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TokenSource::Env(name) => write!(f, "environment variable {name}"),
            TokenSource::File(path) => write!(f, "file {}", path.display()),
            TokenSource::Generated(path) => {
                write!(f, "file {} (generated now, mode 0600)", path.display())
            }
            TokenSource::Existing(path) => write!(f, "file {} (mode 0600)", path.display()),
        }
    }
}

impl Token {
    pub fn new(secret: &str) -> Self {
        Self {
            digest: Sha256::digest(secret.as_bytes()).into(),
        }
    }

    pub fn matches(&self, presented: &str) -> bool {
        let presented: [u8; 32] = Sha256::digest(presented.as_bytes()).into();
        presented
            .iter()
            .zip(self.digest.iter())
            .fold(0u8, |acc, (a, b)| acc | (a ^ b))
            == 0
    }

    /// A name for the token that reveals nothing (the rate limiter's key).
    pub fn key(&self) -> String {
        hex::encode(&self.digest[..8])
    }
}

/// Where the token comes from, as the `[http]` table says.
#[derive(Debug, Clone, Default)]
pub struct TokenPlace {
    /// The variable the token is read from [default: `PINCER_HTTP_TOKEN`].
    pub env: Option<String>,
    /// A file holding the token.
    pub file: Option<PathBuf>,
}

/// The token from `[http] token_env` (default `PINCER_HTTP_TOKEN`), else from
/// `[http] token_file`, else the data directory's `http-token`, generated with
/// mode 0600 on first start.
pub fn resolve(
    config: &TokenPlace,
    data_dir: &Path,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<(Token, TokenSource), TokenError> {
    let name = config.env.as_deref().unwrap_or(TOKEN_ENV);
    if let Some(value) = env(name).filter(|v| !v.trim().is_empty()) {
        let value = value.trim();
        check_length(value, &format!("environment variable {name}"))?;
        return Ok((Token::new(value), TokenSource::Env(name.to_owned())));
    }
    if let Some(path) = &config.file {
        let value = read(path)?;
        check_length(&value, &format!("file {}", path.display()))?;
        return Ok((Token::new(&value), TokenSource::File(path.clone())));
    }
    let path = data_dir.join(TOKEN_FILE);
    if path.exists() {
        let mode = std::fs::metadata(&path)
            .map_err(|source| TokenError::Read {
                path: path.clone(),
                source,
            })?
            .permissions()
            .mode();
        if mode & 0o077 != 0 {
            tracing::warn!(path = %path.display(), mode = format!("{:o}", mode & 0o777), "the HTTP token file is readable by others; setting mode 0600");
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).map_err(
                |source| TokenError::Write {
                    path: path.clone(),
                    source,
                },
            )?;
        }
        let value = read(&path)?;
        check_length(&value, &format!("file {}", path.display()))?;
        return Ok((Token::new(&value), TokenSource::Existing(path)));
    }
    let value = generate()?;
    std::fs::create_dir_all(data_dir).map_err(|source| TokenError::Write {
        path: path.clone(),
        source,
    })?;
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&path)
        .map_err(|source| TokenError::Write {
            path: path.clone(),
            source,
        })?;
    writeln!(file, "{value}").map_err(|source| TokenError::Write {
        path: path.clone(),
        source,
    })?;
    Ok((Token::new(&value), TokenSource::Generated(path)))
}

/// Where `pincer serve --http` would take the token from, without creating
/// it, for `pincer doctor`: whether that is fine, and in words.
pub fn describe(
    config: &TokenPlace,
    data_dir: &Path,
    env: &dyn Fn(&str) -> Option<String>,
) -> (bool, String) {
    let name = config.env.as_deref().unwrap_or(TOKEN_ENV);
    if env(name).is_some_and(|v| !v.trim().is_empty()) {
        return (true, format!("from environment variable {name}"));
    }
    if let Some(path) = &config.file {
        return match read(path) {
            Ok(value) if value.chars().count() >= MIN_TOKEN_LEN => {
                (true, format!("from file {}", path.display()))
            }
            Ok(_) => (
                false,
                format!(
                    "file {} holds a token shorter than {MIN_TOKEN_LEN} characters",
                    path.display()
                ),
            ),
            Err(err) => (false, err.to_string()),
        };
    }
    let path = data_dir.join(TOKEN_FILE);
    match std::fs::metadata(&path) {
        Ok(meta) if meta.permissions().mode() & 0o077 == 0 => {
            (true, format!("from file {} (mode 0600)", path.display()))
        }
        Ok(meta) => (
            false,
            format!(
                "file {} has mode {:o}; it should be 0600 (serve fixes it)",
                path.display(),
                meta.permissions().mode() & 0o777
            ),
        ),
        Err(_) => (
            true,
            format!(
                "{} will be generated on the first `pincer serve --http`",
                path.display()
            ),
        ),
    }
}

fn read(path: &Path) -> Result<String, TokenError> {
    std::fs::read_to_string(path)
        .map(|text| text.trim().to_owned())
        .map_err(|source| TokenError::Read {
            path: path.to_path_buf(),
            source,
        })
}

fn check_length(value: &str, source_name: &str) -> Result<(), TokenError> {
    if value.chars().count() < MIN_TOKEN_LEN {
        return Err(TokenError::TooShort {
            source_name: source_name.to_owned(),
        });
    }
    Ok(())
}

/// 32 random bytes from the operating system, hex-encoded.
fn generate() -> Result<String, TokenError> {
    use ring::rand::SecureRandom;
    let mut bytes = [0u8; 32];
    ring::rand::SystemRandom::new()
        .fill(&mut bytes)
        .map_err(|_| TokenError::Random)?;
    Ok(format!("pct_{}", hex::encode(bytes)))
}

/// Checks a request's `Authorization: Bearer` header against the token.
pub fn check(headers: &HeaderMap, token: &Token) -> Result<(), ApiError> {
    let Some(value) = headers.get(header::AUTHORIZATION) else {
        return Err(ApiError::unauthorized(
            "missing bearer token: send `Authorization: Bearer TOKEN`",
        ));
    };
    let presented = value
        .to_str()
        .ok()
        .and_then(|v| {
            let (scheme, rest) = v.trim().split_once(' ')?;
            scheme.eq_ignore_ascii_case("bearer").then(|| rest.trim())
        })
        .ok_or_else(|| {
            ApiError::unauthorized("malformed Authorization header: expected `Bearer TOKEN`")
        })?;
    if token.matches(presented) {
        Ok(())
    } else {
        Err(ApiError::unauthorized("invalid bearer token"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_token_comes_from_env_then_file_then_is_generated_once_with_mode_0600() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let config = TokenPlace::default();
        let env = |name: &str| (name == TOKEN_ENV).then(|| "an-env-token-of-length".to_owned());
        let (token, source) = resolve(&config, dir.path(), &env).unwrap_or_else(|e| panic!("{e}"));
        assert!(token.matches("an-env-token-of-length"));
        assert_eq!(source, TokenSource::Env(TOKEN_ENV.into()));
        let short = |_: &str| Some("short".to_owned());
        let err = resolve(&config, dir.path(), &short)
            .err()
            .map(|e| e.to_string());
        assert_eq!(
            err.as_deref(),
            Some(
                "environment variable PINCER_HTTP_TOKEN: the HTTP token must be at least 16 characters"
            )
        );
        let none = |_: &str| None;
        let (first, source) = resolve(&config, dir.path(), &none).unwrap_or_else(|e| panic!("{e}"));
        let path = dir.path().join(TOKEN_FILE);
        assert_eq!(source, TokenSource::Generated(path.clone()));
        let mode = std::fs::metadata(&path)
            .map(|m| m.permissions().mode() & 0o777)
            .unwrap_or(0);
        assert_eq!(mode, 0o600);
        let written = std::fs::read_to_string(&path).unwrap_or_default();
        assert!(first.matches(written.trim()) && written.trim().len() == 68);
        let (again, source) = resolve(&config, dir.path(), &none).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(source, TokenSource::Existing(path));
        assert!(again.matches(written.trim()));
        assert!(!again.matches("something else"));
    }

    #[test]
    fn only_a_bearer_header_with_the_token_passes() {
        let token = Token::new("the-right-token-123");
        let mut headers = HeaderMap::new();
        assert!(check(&headers, &token).is_err());
        for (value, ok) in [
            ("Bearer the-right-token-123", true),
            ("bearer  the-right-token-123", true),
            ("Bearer the-wrong-token-123", false),
            ("Basic the-right-token-123", false),
            ("the-right-token-123", false),
        ] {
            headers.insert(
                header::AUTHORIZATION,
                value.parse().unwrap_or_else(|e| panic!("{e}")),
            );
            assert_eq!(check(&headers, &token).is_ok(), ok, "{value}");
        }
    }
}
