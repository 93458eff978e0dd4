//! Configuration: a TOML file, overridden by environment variables, overridden by flags.
//!
//! Every value says where it came from, so `pincer config show` can tell the user
//! which layer set it, and every error names the key and the file or variable.
//!
//! `file` is the file's shape (serde types, one per table); `validate` what
//! each table's values must be; `layers` the one precedence rule (flag,
//! environment, file, default) every setting is resolved by; `providers`
//! the provider map and the choice of provider and model; `load` puts them
//! together into [`Config`]; `render` is `pincer config show`.

pub mod channels;
mod file;
mod layers;
mod load;
mod providers;
mod render;
#[cfg(test)]
mod testing;
mod validate;

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};

use thiserror::Error;

pub use self::channels::{ChannelConfig, CommonChannelConfig, Platform};
pub use self::file::{
    BudgetConfig, FileConfig, HooksConfig, HttpConfig, McpServerConfig, MemoryConfig,
    ModelFileConfig, PathsConfig, ProviderConfig, SafetyFileConfig, SandboxSetting, SearchBackend,
    ShellConfig, SkillsConfig, SubagentsConfig, WebConfig, WebSearchConfig,
};
pub use crate::core::hooks::{HookImport, OnFailure};
use crate::core::models::ModelCatalog;
use crate::core::policy::Rule;
use crate::core::quote::{Quoted, clip_message};
use crate::core::session::Mode;
pub use crate::providers::ProviderKind;

/// How the loader reads the environment (the process's, or a test's).
type Env<'a> = &'a dyn Fn(&str) -> Option<String>;

#[derive(Debug, Error)]
pub enum ConfigError {
    #[error("cannot read config file {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("config file {path}: {message}")]
    Parse { path: PathBuf, message: String },
    #[error("{origin}: {key}: {message}")]
    Invalid {
        origin: Origin,
        key: String,
        message: String,
    },
    #[error("cannot find a home directory: set XDG_DATA_HOME or PINCER_DATA_DIR")]
    NoHome,
    /// `pincer config show` could not write a section as TOML.
    #[error("cannot show {section}: {message}")]
    Render { section: String, message: String },
    #[error(transparent)]
    Credentials(#[from] crate::credentials::CredentialsError),
}

impl ConfigError {
    /// The error with the values it quotes from the file or the environment
    /// clipped (`core::quote`): a long value must not come back whole.
    fn clipped(self) -> Self {
        match self {
            Self::Parse { path, message } => Self::Parse {
                path,
                message: clip_message(&message),
            },
            Self::Invalid {
                origin,
                key,
                message,
            } => Self::Invalid {
                origin,
                key: Quoted(&key).to_string(),
                message: clip_message(&message),
            },
            other @ (Self::Read { .. }
            | Self::NoHome
            | Self::Render { .. }
            | Self::Credentials(_)) => other,
        }
    }
}

/// Which layer set a value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Origin {
    Default,
    File(PathBuf),
    Env(&'static str),
    Flag(&'static str),
    /// Stored by `pincer login` in this credentials file.
    Login(PathBuf),
}

impl fmt::Display for Origin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Origin::Default => f.write_str("default"),
            Origin::File(path) => write!(f, "config file {}", path.display()),
            Origin::Env(name) => write!(f, "environment variable {name}"),
            Origin::Flag(name) => write!(f, "flag {name}"),
            Origin::Login(path) => write!(f, "`pincer login` ({})", path.display()),
        }
    }
}

/// A value and the layer that set it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sourced<T> {
    pub value: T,
    pub origin: Origin,
}

impl<T> Sourced<T> {
    fn new(value: T, origin: Origin) -> Self {
        Self { value, origin }
    }
}

/// Values given on the command line.
#[derive(Debug, Clone, Default)]
pub struct Flags {
    pub config: Option<PathBuf>,
    pub data_dir: Option<PathBuf>,
    /// `--store URL`: the store on a PostgreSQL server.
    pub store: Option<String>,
    pub provider: Option<String>,
    pub model: Option<String>,
    pub script: Option<PathBuf>,
    pub max_turn_requests: Option<u32>,
    pub mode: Option<String>,
    pub sandbox: Option<SandboxSetting>,
}

/// The names of the built-in tools, for the `[tools]` table's keys
/// (`tools::gate` checks that its tools are exactly these).
pub const BUILTIN_TOOLS: &[&str] = &[
    "read_file",
    "write_file",
    "edit_file",
    "list_dir",
    "glob",
    "grep",
    "shell",
    "todo",
    "skill",
    "ask_user",
    "delegate",
    "memory_save",
    "memory_search",
    "memory_forget",
    "web_fetch",
    "web_search",
    "send_message",
    "schedule",
];

/// The effective configuration.
#[derive(Debug, Clone)]
pub struct Config {
    /// Where the price table's currency came from (`currency`, default USD).
    pub currency_origin: Origin,
    /// The config file read, if one exists.
    pub file: Option<PathBuf>,
    pub data_dir: Sourced<PathBuf>,
    /// The PostgreSQL server the store is on (`--store`, `PINCER_STORE_URL`,
    /// `[store] url`); unset, SQLite in the data directory.
    pub store_url: Option<Sourced<String>>,
    pub provider: Option<Sourced<String>>,
    pub model: Option<Sourced<String>>,
    pub max_turn_requests: Sourced<u32>,
    pub system_prompt: Option<Sourced<String>>,
    pub instructions: Option<Sourced<String>>,
    pub instruction_fallbacks: Option<Vec<String>>,
    pub loop_guard: Option<u32>,
    pub compact_at: Option<f64>,
    pub context_window: Option<Sourced<usize>>,
    pub providers: BTreeMap<String, Sourced<ProviderConfig>>,
    pub mode: Sourced<Mode>,
    pub sandbox: Sourced<SandboxSetting>,
    pub approval_timeout_secs: Option<Sourced<u64>>,
    pub question_timeout_secs: Option<Sourced<u64>>,
    /// The tool and shell rules, paths and safety settings, from the file.
    pub tools: BTreeMap<String, Rule>,
    pub shell: ShellConfig,
    pub paths: PathsConfig,
    pub safety: SafetyFileConfig,
    pub memory: MemoryConfig,
    pub budget: BudgetConfig,
    /// The `[[hooks.EVENT]]` tables, validated.
    pub hooks: HooksConfig,
    /// The `[web]` table, validated.
    pub web: WebConfig,
    /// The `[skills]` table, validated.
    pub skills: SkillsConfig,
    /// The directory of the config file in use, else where it would be
    /// (`$XDG_CONFIG_HOME/pincer`): user-scope skills live in its `skills/`,
    /// installed plugins in its `plugins/`.
    pub config_dir: Option<PathBuf>,
    /// The `[subagents]` table, validated.
    pub subagents: SubagentsConfig,
    /// The `[models]` tables as written, and the catalogue built from them.
    pub models: BTreeMap<String, ModelFileConfig>,
    pub catalog: ModelCatalog,
    /// The `[channels.NAME]` tables.
    pub channels: BTreeMap<String, ChannelConfig>,
    /// The `[http]` table, paths resolved against the file.
    pub http: HttpConfig,
    /// The `[mcpServers.NAME]` tables, validated.
    pub mcp_servers: BTreeMap<String, McpServerConfig>,
    pub mcp_call_timeout_secs: Option<Sourced<u64>>,
    pub mcp_start_timeout_secs: Option<Sourced<u64>>,
    pub session_lease_secs: Option<Sourced<u64>>,
}

pub const DEFAULT_MAX_TURN_REQUESTS: u32 = 50;

/// The name a provider given only by `--script` gets.
pub const SCRIPTED: &str = "scripted";

impl Config {
    /// Loads the configuration from the file, the process environment and `flags`.
    pub fn load(flags: &Flags) -> Result<Self, ConfigError> {
        Self::load_with(flags, &|name| std::env::var(name).ok())
    }

    /// Like [`Config::load`], reading the environment through `env`.
    pub fn load_with(
        flags: &Flags,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Self, ConfigError> {
        Self::load_unclipped(flags, env).map_err(ConfigError::clipped)
    }

    pub fn database_path(&self) -> PathBuf {
        self.data_dir.value.join("pincer.db")
    }

    /// Where the store is: the PostgreSQL server the configuration names,
    /// else the SQLite database in the data directory.
    pub fn store_target(&self) -> crate::store::Target {
        match &self.store_url {
            Some(url) => crate::store::Target::Postgres(url.value.clone()),
            None => crate::store::Target::Sqlite(self.database_path()),
        }
    }
}

/// A string as a TOML basic string, as `config show` prints values and
/// errors name keys: JSON's escapes are TOML's, and TOML also escapes DEL.
fn toml_quote(value: &str) -> String {
    serde_json::to_string(value)
        .unwrap_or_else(|_| format!("{value:?}"))
        .replace('\u{7f}', "\\u007f")
}

fn absolute(path: &Path) -> PathBuf {
    std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf())
}
