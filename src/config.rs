//! Configuration: a TOML file, overridden by environment variables, overridden by flags.
//!
//! Every value says where it came from, so `pincer config show` can tell the user
//! which layer set it, and every error names the key and the file or variable.

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use thiserror::Error;

pub use crate::core::hooks::{HookImport, OnFailure};
use crate::core::models::{ModelCatalog, ModelInfo, Price};
use crate::core::policy::Rule;
use crate::core::policy::shell::CommandRule;
use crate::core::quote::{Quoted, clip_message};
use crate::core::session::Mode;
pub use crate::providers::ProviderKind;

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
            other @ (Self::Read { .. } | Self::NoHome | Self::Credentials(_)) => other,
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

/// The config file's shape. Unknown keys are errors.
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct FileConfig {
    /// Name of the provider new sessions use.
    pub provider: Option<String>,
    /// Model new sessions use (a model of the chosen provider).
    pub model: Option<String>,
    /// Most model requests in one run.
    pub max_turn_requests: Option<u32>,
    /// Replaces the built-in system prompt (`docs/prompt.md`).
    pub system_prompt: Option<String>,
    /// Appended to the system prompt, built-in or replaced.
    pub instructions: Option<String>,
    /// Identical tool calls one run may make: the one that reaches it is
    /// answered with a note instead, one more ends the run (default 3; 0 off).
    pub loop_guard: Option<u32>,
    /// Instruction files read in a directory without `AGENTS.md`, the first
    /// that exists (default `CLAUDE.md`, `.github/copilot-instructions.md`).
    pub instruction_fallbacks: Option<Vec<String>>,
    /// The share of the context window a request may take before the
    /// conversation is compacted automatically (default 0.8; 0 never).
    pub compact_at: Option<f64>,
    /// The context window in tokens of models without a `[models]` entry;
    /// unset, what the model's server states when asked, else 128000. Older
    /// tool outputs are shortened, then the oldest exchanges dropped, to fit.
    pub context_window: Option<usize>,
    /// Where the database lives.
    pub data_dir: Option<PathBuf>,
    #[serde(default)]
    pub providers: BTreeMap<String, ProviderConfig>,
    /// The autonomy mode new sessions start in.
    pub mode: Option<String>,
    /// `required` refuses to run shell commands unconfined; `best_effort` runs them anyway.
    pub sandbox: Option<SandboxSetting>,
    /// Seconds an approval may wait before it counts as a rejection; unset waits until answered.
    pub approval_timeout_secs: Option<u64>,
    /// Seconds a question to the person (`ask_user`) may wait before the
    /// model hears that no answer came; 0 waits until answered. Default 600.
    pub question_timeout_secs: Option<u64>,
    /// Per-tool rules: `allow`, `ask` or `deny`.
    #[serde(default)]
    pub tools: BTreeMap<String, Rule>,
    #[serde(default)]
    pub shell: ShellConfig,
    #[serde(default)]
    pub paths: PathsConfig,
    #[serde(default)]
    pub safety: SafetyFileConfig,
    /// The `[memory]` table: the memory tools and recall.
    #[serde(default)]
    pub memory: MemoryConfig,
    /// The `[budget]` table: spending limits in the price table's currency.
    #[serde(default)]
    pub budget: BudgetConfig,
    /// The `[[hooks.EVENT]]` tables: lifecycle hooks (`docs/hooks.md`).
    #[serde(default)]
    pub hooks: HooksConfig,
    /// The `[web]` table: the `web_fetch` tool and the hosts it may reach
    /// (`docs/tools.md`).
    #[serde(default)]
    pub web: WebConfig,
    /// The `[subagents]` table: the `delegate` tool (`docs/tools.md`).
    #[serde(default)]
    pub subagents: SubagentsConfig,
    /// Context windows and prices by model name or `*` pattern.
    #[serde(default)]
    pub models: BTreeMap<String, ModelFileConfig>,
    /// The unit of every price in `[models]`: an ISO 4217 code or e.g. "credits"; "USD" if unset.
    pub currency: Option<String>,
    /// Chat channels `pincer serve --channel NAME` / `pincer acp --channel NAME` start.
    #[serde(default)]
    pub channels: BTreeMap<String, ChannelConfig>,
    /// The HTTP face of `pincer serve` (`docs/http.md`).
    #[serde(default)]
    pub http: HttpConfig,
    /// MCP servers every session gets, in the shape Zed and other agents use
    /// (`docs/mcp.md`).
    #[serde(default, rename = "mcpServers")]
    pub mcp_servers: BTreeMap<String, McpServerConfig>,
    /// Seconds an MCP tool call may take (default 600).
    pub mcp_call_timeout_secs: Option<u64>,
    /// Seconds a process's hold on a session it runs (its lease) lasts unless
    /// renewed (default 15): a process stopped without giving a session up
    /// keeps other processes waiting this long before one takes it over.
    pub session_lease_secs: Option<u64>,
    /// Seconds an MCP server may take to start and answer `initialize` (default 30).
    pub mcp_start_timeout_secs: Option<u64>,
}

/// One `[mcpServers.NAME]` table: `command` (with `args`, `env`) for a server
/// Pincer starts, or `url` (with `headers`) for a streamable HTTP server.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct McpServerConfig {
    /// `stdio` or `http`; implied by `command` or `url` when unset (`sse` is not supported).
    #[serde(rename = "type", skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub command: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub args: Vec<String>,
    /// Variables set for the server besides `PATH`, `HOME` and the locale; values are secrets.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub env: BTreeMap<String, String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// Sent with every request; values are secrets.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub headers: BTreeMap<String, String>,
}

impl McpServerConfig {
    /// The table with every env and header value replaced, for display.
    pub fn redacted(&self) -> Self {
        let hide = |map: &BTreeMap<String, String>| {
            map.keys()
                .map(|k| (k.clone(), "[redacted]".to_owned()))
                .collect()
        };
        Self {
            env: hide(&self.env),
            headers: hide(&self.headers),
            ..self.clone()
        }
    }
}

/// The platform a `[channels.NAME]` table speaks to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ChannelKind {
    Telegram,
    Webhook,
}

impl ChannelKind {
    pub fn as_str(self) -> &'static str {
        match self {
            ChannelKind::Telegram => "telegram",
            ChannelKind::Webhook => "webhook",
        }
    }
}

/// One `[channels.NAME]` table.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct ChannelConfig {
    /// `telegram` or `webhook`; defaults to the table's name when that is one of them.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kind: Option<ChannelKind>,
    /// Telegram: the variable holding the bot token (default `TELEGRAM_BOT_TOKEN`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub token_env: Option<String>,
    /// Telegram: the Bot API root (default `https://api.telegram.org`; a
    /// self-hosted Bot API server or a test server otherwise).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub api_base: Option<String>,
    /// Sender ids allowed without pairing.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub allow: Vec<String>,
    /// The variable holding the pairing code senders send as `/pair CODE`
    /// (default `PINCER_PAIRING_CODE`); with none set and no `allow` list, a
    /// code is generated at start and logged.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pairing_code_env: Option<String>,
    /// The workspace of the sessions this channel starts (default: the
    /// directory Pincer was started in).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub workspace: Option<PathBuf>,
    /// Messages from one sender within this many milliseconds become one prompt (default 1500).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub coalesce_ms: Option<u64>,
    /// Outbound messages not delivered within this many seconds expire (default 900).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub expire_after_secs: Option<u64>,
    /// Attempts of one outbound message before it fails (default 8).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_attempts: Option<u32>,
    /// Show a reply as it is written, in a message edited in place (default
    /// true where the platform can edit).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub live_drafts: Option<bool>,
    /// Telegram: seconds one `getUpdates` long poll waits (default 30).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub poll_timeout_secs: Option<u64>,
    /// Webhook: the variable holding the HMAC-SHA256 secret shared with the peer.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub secret_env: Option<String>,
    /// Webhook: where outbound messages are POSTed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub callback_url: Option<String>,
    /// Webhook: the address inbound POSTs arrive at (default `127.0.0.1:8788`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub listen: Option<String>,
}

impl ChannelConfig {
    /// The platform of a table named `name`.
    pub fn kind_for(&self, name: &str) -> Option<ChannelKind> {
        self.kind.or(match name {
            "telegram" => Some(ChannelKind::Telegram),
            "webhook" => Some(ChannelKind::Webhook),
            _ => None,
        })
    }
}

/// The `[http]` table: the HTTP face of `pincer serve`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct HttpConfig {
    /// Address to listen on when `--http` is given without one (and, when set,
    /// `pincer serve` serves HTTP without `--http`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bind: Option<String>,
    /// Whether a non-loopback address may be bound (default false).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub allow_remote: Option<bool>,
    /// The environment variable holding the bearer token (default `PINCER_HTTP_TOKEN`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub token_env: Option<String>,
    /// A file holding the bearer token; relative to this file. Default: the
    /// variable, else `http-token` in the data directory, generated on first start.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub token_file: Option<PathBuf>,
    /// Largest request body accepted, in bytes (default 1 MiB).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub body_limit_bytes: Option<usize>,
    /// Requests per minute per token (default 600; 0 turns the limit off).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rate_limit_per_minute: Option<u32>,
    /// Requests a token may make at once above the steady rate (default 100).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rate_limit_burst: Option<u32>,
    /// Origins allowed by CORS (`https://app.example`, or `*`); empty: CORS off.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cors_origins: Vec<String>,
}

/// One `[models."NAME"]` table: what Pincer should know about a model.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct ModelFileConfig {
    /// The model's context window in tokens.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub context_window: Option<usize>,
    /// Price per million input tokens.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub input_price: Option<f64>,
    /// Price per million output tokens.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub output_price: Option<f64>,
    /// Price per million input tokens read from the provider's prompt cache.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cached_input_price: Option<f64>,
    /// Whether the model takes images in prompts (beats the provider's
    /// `images` and the built-in defaults by model family).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub images: Option<bool>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, Serialize, clap::ValueEnum)]
#[serde(rename_all = "snake_case")]
#[value(rename_all = "snake_case")]
pub enum SandboxSetting {
    Required,
    #[default]
    BestEffort,
}

impl SandboxSetting {
    pub fn as_str(self) -> &'static str {
        match self {
            SandboxSetting::Required => "required",
            SandboxSetting::BestEffort => "best_effort",
        }
    }
}

/// The `[shell]` table.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct ShellConfig {
    /// Commands that run without asking under `supervised` (added to the defaults).
    #[serde(default)]
    pub allow: Vec<String>,
    /// Commands that always need approval, even under `full`.
    #[serde(default)]
    pub ask: Vec<String>,
    /// Commands that never run (added to the defaults).
    #[serde(default)]
    pub deny: Vec<String>,
    /// Whether the built-in allow and deny lists apply (default true).
    pub default_rules: Option<bool>,
    /// Default timeout of a command, in seconds.
    pub timeout_secs: Option<u64>,
    /// Whether commands may open TCP connections (default false).
    pub network: Option<bool>,
    /// Extra environment variables passed to commands (secret-looking names never are).
    #[serde(default)]
    pub env: Vec<String>,
    /// Directories outside the workspace commands may read and execute (toolchains).
    #[serde(default)]
    pub read_only: Vec<PathBuf>,
    /// Directories outside the workspace commands may also write (caches).
    #[serde(default)]
    pub read_write: Vec<PathBuf>,
    /// Whether commands may read and run the toolchains under home and get
    /// the variables they need, with the real `HOME` (default true).
    pub toolchains: Option<bool>,
}

/// The `[budget]` table (`docs/providers.md`): the most a run, a session
/// and a provider per day may cost, in the `[models]` price table's currency.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct BudgetConfig {
    pub run: Option<f64>,
    pub session: Option<f64>,
    /// By provider name.
    #[serde(default)]
    pub daily: BTreeMap<String, f64>,
}

/// The `[memory]` table (`docs/memory.md`).
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct MemoryConfig {
    /// Whether the memory tools are offered and items recalled (default true).
    pub enabled: Option<bool>,
    /// Whether relevant items are recalled before each model turn (default true).
    pub recall: Option<bool>,
    /// Most items recalled for one prompt (default 8).
    pub recall_items: Option<usize>,
    /// Most tokens the recalled block takes (default 600).
    pub recall_tokens: Option<usize>,
    /// Least score an item needs to be recalled, 0 to 1 (default 0.3).
    pub recall_floor: Option<f64>,
    /// Days after which an unused item counts half as recent (default 30).
    pub half_life_days: Option<f64>,
    /// Most tokens the pinned items take in the system prompt (default 1000).
    pub pinned_tokens: Option<usize>,
    /// Before an automatic compaction, the model gets one turn to save what
    /// should outlast it (default true).
    pub save_before_compact: Option<bool>,
    /// `PROVIDER/MODEL`: search memory by meaning too, with embeddings from
    /// that OpenAI-compatible provider's `/embeddings` endpoint.
    pub embeddings: Option<String>,
    /// Least cosine similarity for a match by meaning, 0 to 1 (default 0.35).
    pub min_similarity: Option<f64>,
    /// Whether the model may save a user-scope item (recalled in every
    /// workspace) without a person's approval where the mode would not ask
    /// (default false: it always asks).
    pub user_scope_unasked: Option<bool>,
}

/// The `[subagents]` table (`docs/tools.md`, "Subagents").
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct SubagentsConfig {
    /// Whether the `delegate` tool is offered (default true).
    pub enabled: Option<bool>,
    /// Subagents running at once in the process (default 4, 1 to 64).
    pub max_parallel: Option<usize>,
    /// Model turns a subagent may take (default 20, 1 to 1000).
    pub max_turns: Option<u32>,
}

/// The `[web]` table (`docs/tools.md`, "Web").
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct WebConfig {
    /// Whether the `web_fetch` tool is offered (default true).
    pub enabled: Option<bool>,
    /// Hosts fetched without asking: `example.com` is it and every host
    /// under it; `*` is every host.
    #[serde(default)]
    pub allow: Vec<String>,
    /// Hosts never fetched, whatever else says.
    #[serde(default)]
    pub deny: Vec<String>,
    /// Addresses that are not globally routable (loopback, private,
    /// link-local and cloud metadata, and IPv6 forms carrying one) are
    /// refused unless listed here: an address (`127.0.0.1`), a network
    /// (`10.0.0.0/8`) or a host name (`localhost`). An entry covering the
    /// IPv4 address inside such an IPv6 form covers the form too.
    #[serde(default)]
    pub allow_private: Vec<String>,
    /// Most bytes of a response read (default 5 MiB).
    pub max_bytes: Option<u64>,
    /// Seconds a fetch may take in all, redirects included (default 30).
    pub timeout_secs: Option<u64>,
    /// Redirects followed (default 5).
    pub max_redirects: Option<u32>,
    /// `[web.search]`: the `web_search` tool, through a search backend.
    pub search: Option<WebSearchConfig>,
}

/// The `[web.search]` table: which backend `web_search` asks.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct WebSearchConfig {
    pub backend: SearchBackend,
    /// The backend's address: required for SearXNG (its base URL); Brave
    /// and Tavily default to their public APIs.
    pub url: Option<String>,
    /// The environment variable holding the API key (Brave, Tavily).
    pub api_key_env: Option<String>,
    /// Results asked for (default 8, at most 20).
    pub max_results: Option<u32>,
}

/// A search backend `web_search` speaks to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum SearchBackend {
    /// A SearXNG instance's JSON API (`GET /search?format=json`).
    Searxng,
    /// Brave Search's web search API.
    Brave,
    /// Tavily's search API.
    Tavily,
}

/// The `[hooks]` table: for each event, the hooks that run at it
/// (`docs/hooks.md`). Event names are those of Claude Code's hooks.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct HooksConfig {
    /// Also run the hooks a workspace brings for other agents (`claude`:
    /// `.claude/settings.json` and `settings.local.json`; `codex`:
    /// `.codex/hooks.json`), once the person trusts its project directory.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub import: Vec<HookImport>,
    #[serde(
        default,
        rename = "SessionStart",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub session_start: Vec<HookConfig>,
    #[serde(default, rename = "SessionEnd", skip_serializing_if = "Vec::is_empty")]
    pub session_end: Vec<HookConfig>,
    #[serde(
        default,
        rename = "UserPromptSubmit",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub user_prompt_submit: Vec<HookConfig>,
    #[serde(default, rename = "PreToolUse", skip_serializing_if = "Vec::is_empty")]
    pub pre_tool_use: Vec<HookConfig>,
    #[serde(default, rename = "PostToolUse", skip_serializing_if = "Vec::is_empty")]
    pub post_tool_use: Vec<HookConfig>,
    #[serde(default, rename = "PreCompact", skip_serializing_if = "Vec::is_empty")]
    pub pre_compact: Vec<HookConfig>,
    #[serde(default, rename = "Stop", skip_serializing_if = "Vec::is_empty")]
    pub stop: Vec<HookConfig>,
    #[serde(
        default,
        rename = "SubagentStop",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub subagent_stop: Vec<HookConfig>,
    #[serde(
        default,
        rename = "Notification",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub notification: Vec<HookConfig>,
    #[serde(
        default,
        rename = "MessageReceived",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub message_received: Vec<HookConfig>,
    #[serde(
        default,
        rename = "MessageSending",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub message_sending: Vec<HookConfig>,
}

impl HooksConfig {
    /// Every hook with its event, in the order written.
    pub fn all(&self) -> Vec<(crate::core::hooks::HookEvent, &HookConfig)> {
        use crate::core::hooks::HookEvent as E;
        [
            (E::SessionStart, &self.session_start),
            (E::SessionEnd, &self.session_end),
            (E::UserPromptSubmit, &self.user_prompt_submit),
            (E::PreToolUse, &self.pre_tool_use),
            (E::PostToolUse, &self.post_tool_use),
            (E::PreCompact, &self.pre_compact),
            (E::Stop, &self.stop),
            (E::SubagentStop, &self.subagent_stop),
            (E::Notification, &self.notification),
            (E::MessageReceived, &self.message_received),
            (E::MessageSending, &self.message_sending),
        ]
        .into_iter()
        .flat_map(|(event, hooks)| hooks.iter().map(move |hook| (event, hook)))
        .collect()
    }
}

/// One hook: a `command` run by `sh -c` in the session's workspace, or a
/// `url` the input is POSTed to.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct HookConfig {
    /// What the hook runs for: the tool's name for tool events (`source`,
    /// `reason`, `trigger`, `notification_type` for others); `*` or unset:
    /// all; names of letters, digits, `_` and `-` joined by `|` or `,`: those
    /// names exactly; anything else: a regular expression.
    pub matcher: Option<String>,
    pub command: Option<String>,
    pub url: Option<String>,
    /// The secret `url` requests are signed with (HMAC-SHA256), or
    /// `secret_env`, the environment variable holding it.
    pub secret: Option<String>,
    pub secret_env: Option<String>,
    /// Seconds the hook may take (default 60).
    pub timeout_secs: Option<u64>,
    /// What a hook that fails (times out, exits with a code other than 0
    /// or 2, answers something unreadable) does: `continue` (default) or
    /// `block`.
    pub on_failure: Option<OnFailure>,
}

/// The `[paths]` table.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct PathsConfig {
    /// Directories outside the workspace that tools may read and write.
    #[serde(default)]
    pub extra_roots: Vec<PathBuf>,
    /// Paths refused everywhere, added to the built-in list (`~` allowed).
    #[serde(default)]
    pub forbidden: Vec<String>,
    /// Paths a tool writes only with a person's approval and commands
    /// never write, added to the built-in list (`docs/tools.md`,
    /// "Protected paths"): relative ones match at any depth.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub protected: Vec<String>,
    /// Built-in protected paths taken off the list, each named exactly.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unprotected: Vec<String>,
}

impl PathsConfig {
    /// The protected paths in force: the built-in ones less `unprotected`,
    /// then `protected`.
    pub fn protected_entries(&self) -> Vec<String> {
        let mut entries: Vec<String> = crate::core::policy::DEFAULT_PROTECTED
            .iter()
            .filter(|entry| {
                !self
                    .unprotected
                    .iter()
                    .any(|u| u.trim_end_matches('/') == **entry)
            })
            .map(|entry| (*entry).to_owned())
            .collect();
        for entry in &self.protected {
            if !entries.contains(entry) {
                entries.push(entry.clone());
            }
        }
        entries
    }
}

/// The `[safety]` table.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct SafetyFileConfig {
    /// Longest tool output the model sees, in bytes (head and tail kept).
    pub max_output_bytes: Option<usize>,
    /// Names of environment variables whose values are secrets to redact, besides
    /// every variable whose name looks like a key, token or password.
    #[serde(default)]
    pub secret_env: Vec<String>,
}

/// One `[providers.NAME]` table.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct ProviderConfig {
    pub kind: ProviderKind,
    /// The model script, for `kind = "scripted"`; relative to the config file.
    pub script: Option<PathBuf>,
    /// Models this provider offers; the first is its default.
    #[serde(default)]
    pub models: Vec<String>,
    /// The API's base URL (`https://api.openai.com/v1`, `http://localhost:11434/v1`,
    /// `https://api.anthropic.com`); default from `OPENAI_BASE_URL` /
    /// `ANTHROPIC_BASE_URL`, then the vendor's.
    pub base_url: Option<String>,
    /// The environment variable holding the API key (default `OPENAI_API_KEY` /
    /// `ANTHROPIC_API_KEY`). Keys are read from the environment, never from this file.
    pub api_key_env: Option<String>,
    /// Extra HTTP headers sent with every request.
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
    /// Seconds to wait for a connection or for the next piece of a stream.
    pub timeout_secs: Option<u64>,
    /// `max_tokens` of each Anthropic request.
    pub max_tokens: Option<u32>,
    /// For `kind = "failover"`: `provider` or `provider/model` entries, in order.
    #[serde(default)]
    pub members: Vec<String>,
    /// Attempts of a model turn that fails before any output (429, 5xx, a
    /// connection failure), the first included (default 3); for a failover,
    /// per member before moving on (a member's own `attempts` wins).
    pub attempts: Option<u32>,
    /// The first wait before a retry, in milliseconds, doubling on each one
    /// (default 500); a `Retry-After` from the provider wins.
    pub backoff_ms: Option<u64>,
    /// Whether this provider's models take images, unless `[models]` says for
    /// a model; unset: by model family (`gpt-4o*`, `claude-*`, ...), and never
    /// for a scripted provider.
    pub images: Option<bool>,
    /// The reasoning efforts the API takes (`reasoning_effort` of an
    /// OpenAI-compatible request), offered to editors as the session's
    /// thought level; empty: none is offered or sent.
    #[serde(default)]
    pub reasoning_efforts: Vec<String>,
    /// The effort sent when the session chose none; unset: none is sent
    /// (the API's default).
    pub reasoning_effort: Option<String>,
    /// The key stored by `pincer login`; never read from or written to a
    /// config file.
    #[serde(skip)]
    pub api_key: Option<String>,
    /// From `pincer login`: its stored key (or none, for a local server) is
    /// used, not the environment's.
    #[serde(skip)]
    pub from_login: bool,
}

impl ProviderConfig {
    pub fn of_kind(kind: ProviderKind) -> Self {
        Self {
            kind,
            script: None,
            models: Vec::new(),
            base_url: None,
            api_key_env: None,
            headers: BTreeMap::new(),
            timeout_secs: None,
            max_tokens: None,
            members: Vec::new(),
            attempts: None,
            backoff_ms: None,
            images: None,
            reasoning_efforts: Vec::new(),
            reasoning_effort: None,
            api_key: None,
            from_login: false,
        }
    }
}

/// Values given on the command line.
#[derive(Debug, Clone, Default)]
pub struct Flags {
    pub config: Option<PathBuf>,
    pub data_dir: Option<PathBuf>,
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
    "ask_user",
    "delegate",
    "memory_save",
    "memory_search",
    "memory_forget",
    "web_fetch",
    "web_search",
];

/// A `[tools]` key names a built-in tool or an MCP tool (`SERVER__TOOL`; the
/// servers an editor passes are known only per session, so any such name
/// stands). A misspelled rule would silently do nothing, so it is an error.
fn validate_tool_name(name: &str, origin: &Origin) -> Result<(), ConfigError> {
    if BUILTIN_TOOLS.contains(&name) || name.contains("__") {
        return Ok(());
    }
    let closest = BUILTIN_TOOLS
        .iter()
        .map(|known| (strsim::damerau_levenshtein(name, known), *known))
        .min()
        .filter(|(distance, _)| *distance <= 3)
        .map(|(_, known)| format!("did you mean `{known}`? "))
        .unwrap_or_default();
    Err(ConfigError::Invalid {
        origin: origin.clone(),
        key: format!("tools.{}", crate::core::quote::quote(name)),
        message: format!(
            "no such tool; {closest}the built-in tools are {}, and MCP tools are named SERVER__TOOL",
            BUILTIN_TOOLS.join(", ")
        ),
    })
}

/// The effective configuration.
#[derive(Debug, Clone)]
pub struct Config {
    /// Where the price table's currency came from (`currency`, default USD).
    pub currency_origin: Origin,
    /// The config file read, if one exists.
    pub file: Option<PathBuf>,
    pub data_dir: Sourced<PathBuf>,
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

    fn load_unclipped(
        flags: &Flags,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Self, ConfigError> {
        let (path, explicit) = match (&flags.config, env("PINCER_CONFIG")) {
            (Some(path), _) => (Some(absolute(path)), true),
            (None, Some(path)) if !path.is_empty() => (Some(absolute(Path::new(&path))), true),
            _ => (default_config_path(env), false),
        };
        let (file, file_config) = match &path {
            Some(path) if explicit || path.exists() => (Some(path.clone()), read_file(path)?),
            _ => (None, FileConfig::default()),
        };
        let file_path = file.clone().unwrap_or_default();
        let file_origin = || Origin::File(file_path.clone());
        let base = file
            .as_ref()
            .and_then(|p| p.parent())
            .map(Path::to_path_buf)
            .unwrap_or_default();

        let mut providers: BTreeMap<String, Sourced<ProviderConfig>> = BTreeMap::new();
        let file_config_providers_empty =
            file_config.providers.is_empty() && flags.script.is_none();
        for (name, mut provider) in file_config.providers {
            if let Some(script) = &provider.script {
                provider.script = Some(base.join(script));
            }
            validate_provider(&name, &provider, &file_origin())?;
            providers.insert(name, Sourced::new(provider, file_origin()));
        }

        let data_dir = if let Some(dir) = &flags.data_dir {
            Sourced::new(absolute(dir), Origin::Flag("--data-dir"))
        } else if let Some(dir) = env("PINCER_DATA_DIR").filter(|d| !d.is_empty()) {
            Sourced::new(absolute(Path::new(&dir)), Origin::Env("PINCER_DATA_DIR"))
        } else if let Some(dir) = file_config.data_dir {
            Sourced::new(base.join(dir), file_origin())
        } else {
            Sourced::new(default_data_dir(env)?, Origin::Default)
        };

        let mut provider = pick(
            flags.provider.clone(),
            "--provider",
            env("PINCER_PROVIDER"),
            "PINCER_PROVIDER",
            file_config.provider,
            &file_origin(),
        );
        // Whether `--script` set aside a provider from the environment or
        // the file: their model went with it.
        let mut displaced = false;
        if let Some(script) = &flags.script {
            // A flag beats the environment and the file: `--script` alone
            // chooses the scripted model whatever `PINCER_PROVIDER` or
            // `provider` name, unless they name a scripted provider table.
            // Only an explicit `--provider` of another kind is refused.
            let explicit = provider
                .as_ref()
                .is_some_and(|p| p.origin == Origin::Flag("--provider"));
            let scripted_table = |name: &str| {
                providers
                    .get(name)
                    .is_some_and(|p| p.value.kind == ProviderKind::Scripted)
            };
            if !explicit
                && provider
                    .as_ref()
                    .is_some_and(|p| p.value != SCRIPTED && !scripted_table(&p.value))
            {
                provider = None;
                displaced = true;
            }
            let name = provider
                .as_ref()
                .map_or(SCRIPTED.to_owned(), |p| p.value.clone());
            if name != SCRIPTED
                && providers
                    .get(&name)
                    .is_none_or(|p| p.value.kind != ProviderKind::Scripted)
            {
                return Err(ConfigError::Invalid {
                    origin: Origin::Flag("--script"),
                    key: "script".into(),
                    message: format!("--script needs --provider {SCRIPTED}, not {name:?}"),
                });
            }
            let models = providers
                .get(&name)
                .map(|p| p.value.models.clone())
                .unwrap_or_default();
            let images = providers.get(&name).and_then(|p| p.value.images);
            providers.insert(
                name.clone(),
                Sourced::new(
                    ProviderConfig {
                        script: Some(absolute(script)),
                        models,
                        images,
                        ..ProviderConfig::of_kind(ProviderKind::Scripted)
                    },
                    Origin::Flag("--script"),
                ),
            );
            if provider.is_none() {
                provider = Some(Sourced::new(name, Origin::Flag("--script")));
            }
        }
        // Providers stored by `pincer login`, unless a table of the same name
        // exists: the config file wins.
        let credentials_path = crate::credentials::path(env);
        let credentials = match &credentials_path {
            Some(path) => crate::credentials::Credentials::load(path)?,
            None => crate::credentials::Credentials::default(),
        };
        let login_origin = || Origin::Login(credentials_path.clone().unwrap_or_default());
        for (name, login) in &credentials.providers {
            if providers.contains_key(name) {
                continue;
            }
            providers.insert(
                name.clone(),
                Sourced::new(
                    ProviderConfig {
                        base_url: login.base_url.clone(),
                        models: login.model.iter().cloned().collect(),
                        api_key: login.api_key.clone(),
                        from_login: true,
                        ..ProviderConfig::of_kind(login.kind.clone())
                    },
                    login_origin(),
                ),
            );
        }
        // `openai` and `anthropic` work without a table, as their users expect:
        // named by --provider / PINCER_PROVIDER / config, or found through their
        // API key or base URL variable when nothing else is configured (a
        // local server needs no key).
        for kind in [ProviderKind::Openai, ProviderKind::Anthropic] {
            let name = kind.as_str();
            let named = provider.as_ref().is_some_and(|p| p.value == name);
            let set = |var: &str| env(var).is_some_and(|v| !v.trim().is_empty());
            let key_set = kind
                .default_env()
                .is_some_and(|(key, url)| set(key) || set(url));
            if !providers.contains_key(name) && (named || (key_set && file_config_providers_empty))
            {
                let origin = match (&provider, named) {
                    (Some(chosen), true) => chosen.origin.clone(),
                    _ => Origin::Env(kind.default_env().map_or("", |(key, _)| key)),
                };
                providers.insert(
                    name.to_owned(),
                    Sourced::new(ProviderConfig::of_kind(kind), origin),
                );
            }
        }
        if let Some(chosen) = &provider
            && !providers.contains_key(&chosen.value)
        {
            let message = if chosen.value == SCRIPTED {
                "the scripted provider needs a model script: pass --script FILE".to_owned()
            } else if providers.is_empty() {
                format!(
                    "no provider named {:?} is configured (no [providers.*] tables)",
                    chosen.value
                )
            } else {
                format!(
                    "no provider named {:?} is configured; configured: {}",
                    chosen.value,
                    providers.keys().cloned().collect::<Vec<_>>().join(", ")
                )
            };
            return Err(ConfigError::Invalid {
                origin: chosen.origin.clone(),
                key: "provider".into(),
                message,
            });
        }
        let model = pick(
            flags.model.clone(),
            "--model",
            env("PINCER_MODEL"),
            "PINCER_MODEL",
            file_config.model,
            &file_origin(),
        )
        .filter(|model| !displaced || model.origin == Origin::Flag("--model"));
        if provider.is_none()
            && let Some(model) = &model
        {
            let name = provider_for_model(&model.value, &providers).map_err(|message| {
                ConfigError::Invalid {
                    origin: model.origin.clone(),
                    key: "model".into(),
                    message,
                }
            })?;
            provider = name.map(|name| Sourced::new(name, model.origin.clone()));
        }
        // Nothing names a provider: the last login's, if it is still there.
        if provider.is_none()
            && let Some((name, _)) = credentials.default_login()
            && providers.get(name).is_some_and(|p| p.value.from_login)
        {
            provider = Some(Sourced::new(name.to_owned(), login_origin()));
        }
        let max_turn_requests = match (flags.max_turn_requests, env("PINCER_MAX_TURN_REQUESTS")) {
            (Some(n), _) => Sourced::new(n, Origin::Flag("--max-turn-requests")),
            (None, Some(raw)) => Sourced::new(
                raw.trim().parse().map_err(|_| ConfigError::Invalid {
                    origin: Origin::Env("PINCER_MAX_TURN_REQUESTS"),
                    key: "max_turn_requests".into(),
                    message: format!("expected a whole number, got {raw:?}"),
                })?,
                Origin::Env("PINCER_MAX_TURN_REQUESTS"),
            ),
            (None, None) => match file_config.max_turn_requests {
                Some(n) => Sourced::new(n, file_origin()),
                None => Sourced::new(DEFAULT_MAX_TURN_REQUESTS, Origin::Default),
            },
        };
        if max_turn_requests.value == 0 {
            return Err(ConfigError::Invalid {
                origin: max_turn_requests.origin,
                key: "max_turn_requests".into(),
                message: "must be at least 1".into(),
            });
        }
        let mode_raw = pick(
            flags.mode.clone(),
            "--mode",
            env("PINCER_MODE"),
            "PINCER_MODE",
            file_config.mode.clone(),
            &file_origin(),
        );
        let mode = match mode_raw {
            None => Sourced::new(Mode::default(), Origin::Default),
            Some(raw) => Sourced::new(
                Mode::parse(&raw.value).ok_or_else(|| ConfigError::Invalid {
                    origin: raw.origin.clone(),
                    key: "mode".into(),
                    message: format!(
                        "expected read_only, supervised or full, got {:?}",
                        raw.value
                    ),
                })?,
                raw.origin,
            ),
        };
        let sandbox = match (flags.sandbox, env("PINCER_SANDBOX")) {
            (Some(value), _) => Sourced::new(value, Origin::Flag("--sandbox")),
            (None, Some(raw)) if !raw.is_empty() => Sourced::new(
                match raw.as_str() {
                    "required" => SandboxSetting::Required,
                    "best_effort" => SandboxSetting::BestEffort,
                    _ => {
                        return Err(ConfigError::Invalid {
                            origin: Origin::Env("PINCER_SANDBOX"),
                            key: "sandbox".into(),
                            message: format!("expected required or best_effort, got {raw:?}"),
                        });
                    }
                },
                Origin::Env("PINCER_SANDBOX"),
            ),
            _ => match file_config.sandbox {
                Some(value) => Sourced::new(value, file_origin()),
                None => Sourced::new(SandboxSetting::default(), Origin::Default),
            },
        };
        for (key, rules) in [
            ("shell.allow", &file_config.shell.allow),
            ("shell.ask", &file_config.shell.ask),
            ("shell.deny", &file_config.shell.deny),
        ] {
            for rule in rules {
                CommandRule::parse(rule).map_err(|err| ConfigError::Invalid {
                    origin: file_origin(),
                    key: key.into(),
                    message: err.0,
                })?;
            }
        }
        if file_config.safety.max_output_bytes == Some(0) {
            return Err(ConfigError::Invalid {
                origin: file_origin(),
                key: "safety.max_output_bytes".into(),
                message: "must be at least 1".into(),
            });
        }
        if file_config.shell.timeout_secs == Some(0) {
            return Err(ConfigError::Invalid {
                origin: file_origin(),
                key: "shell.timeout_secs".into(),
                message: "must be at least 1".into(),
            });
        }
        let mut paths = file_config.paths.clone();
        validate_protected(&paths, &file_origin())?;
        paths.extra_roots = paths
            .extra_roots
            .iter()
            .map(|root| base.join(root))
            .collect();
        let catalog = catalog(
            file_config.currency.as_deref(),
            &file_config.models,
            &file_origin(),
        )?;
        for (name, channel) in &file_config.channels {
            if channel.kind_for(name).is_none() {
                return Err(ConfigError::Invalid {
                    origin: file_origin(),
                    key: format!("channels.{name}.kind"),
                    message: "set kind = \"telegram\" or \"webhook\"".into(),
                });
            }
        }
        let channels = file_config.channels.clone();
        for (name, server) in &file_config.mcp_servers {
            validate_mcp_server(name, server, &file_origin())?;
        }
        for name in file_config.tools.keys() {
            validate_tool_name(name, &file_origin())?;
        }
        let budget = &file_config.budget;
        let limits = [
            ("budget.run".to_owned(), budget.run),
            ("budget.session".to_owned(), budget.session),
        ]
        .into_iter()
        .chain(
            budget
                .daily
                .iter()
                .map(|(name, limit)| (format!("budget.daily.{name}"), Some(*limit))),
        );
        for (key, limit) in limits {
            if let Some(limit) = limit
                && !(limit > 0.0 && limit.is_finite())
            {
                return Err(ConfigError::Invalid {
                    origin: file_origin(),
                    key,
                    message: format!("must be a positive amount, got {limit}"),
                });
            }
        }
        let memory = &file_config.memory;
        for (key, value, ok, rule) in [
            (
                "compact_at",
                file_config.compact_at,
                file_config
                    .compact_at
                    .is_none_or(|f| (0.0..=1.0).contains(&f)),
                "must be between 0 and 1",
            ),
            (
                "memory.recall_floor",
                memory.recall_floor,
                memory.recall_floor.is_none_or(|f| (0.0..=1.0).contains(&f)),
                "must be between 0 and 1",
            ),
            (
                "memory.min_similarity",
                memory.min_similarity,
                memory
                    .min_similarity
                    .is_none_or(|f| (0.0..=1.0).contains(&f)),
                "must be between 0 and 1",
            ),
            (
                "memory.half_life_days",
                memory.half_life_days,
                memory
                    .half_life_days
                    .is_none_or(|d| d > 0.0 && d.is_finite()),
                "must be more than 0",
            ),
        ] {
            if !ok {
                return Err(ConfigError::Invalid {
                    origin: file_origin(),
                    key: key.into(),
                    message: format!("{rule}, got {}", value.unwrap_or_default()),
                });
            }
        }
        for (key, value) in [
            ("mcp_call_timeout_secs", file_config.mcp_call_timeout_secs),
            ("mcp_start_timeout_secs", file_config.mcp_start_timeout_secs),
            ("session_lease_secs", file_config.session_lease_secs),
        ] {
            if value == Some(0) {
                return Err(ConfigError::Invalid {
                    origin: file_origin(),
                    key: key.into(),
                    message: "must be at least 1".into(),
                });
            }
        }
        validate_hooks(&file_config.hooks, &file_origin())?;
        validate_web(&file_config.web, &file_origin())?;
        validate_subagents(&file_config.subagents, &file_origin())?;
        let mut http = file_config.http.clone();
        validate_http(&http, &file_origin())?;
        http.token_file = http.token_file.map(|path| base.join(path));
        Ok(Config {
            channels,
            http,
            mcp_servers: file_config.mcp_servers.clone(),
            mcp_call_timeout_secs: file_config
                .mcp_call_timeout_secs
                .map(|secs| Sourced::new(secs, file_origin())),
            mcp_start_timeout_secs: file_config
                .mcp_start_timeout_secs
                .map(|secs| Sourced::new(secs, file_origin())),
            session_lease_secs: file_config
                .session_lease_secs
                .map(|secs| Sourced::new(secs, file_origin())),
            models: file_config.models.clone(),
            currency_origin: if file_config.currency.is_some() {
                file_origin()
            } else {
                Origin::Default
            },
            catalog,
            mode,
            sandbox,
            approval_timeout_secs: file_config
                .approval_timeout_secs
                .map(|secs| Sourced::new(secs, file_origin())),
            question_timeout_secs: file_config
                .question_timeout_secs
                .map(|secs| Sourced::new(secs, file_origin())),
            tools: file_config.tools.clone(),
            shell: file_config.shell.clone(),
            memory: file_config.memory.clone(),
            budget: file_config.budget.clone(),
            hooks: file_config.hooks.clone(),
            web: file_config.web.clone(),
            subagents: file_config.subagents.clone(),
            paths,
            safety: file_config.safety.clone(),
            file,
            data_dir,
            provider,
            model,
            max_turn_requests,
            system_prompt: file_config
                .system_prompt
                .map(|prompt| Sourced::new(prompt, file_origin())),
            instructions: file_config
                .instructions
                .map(|text| Sourced::new(text, file_origin())),
            instruction_fallbacks: file_config.instruction_fallbacks,
            loop_guard: file_config.loop_guard,
            compact_at: file_config.compact_at,
            context_window: file_config
                .context_window
                .map(|tokens| Sourced::new(tokens, file_origin())),
            providers,
        })
    }

    pub fn database_path(&self) -> PathBuf {
        self.data_dir.value.join("pincer.db")
    }

    /// The effective configuration as TOML, each value annotated with its origin.
    pub fn render(&self) -> String {
        let mut out = String::new();
        let line = |out: &mut String, key: &str, value: String, origin: &Origin| {
            out.push_str(&format!("{key} = {value}  # {origin}\n"));
        };
        match &self.file {
            Some(path) => out.push_str(&format!("# config file: {}\n", path.display())),
            None => out.push_str("# config file: none (defaults, environment and flags only)\n"),
        }
        line(
            &mut out,
            "data_dir",
            quote(&self.data_dir.value.to_string_lossy()),
            &self.data_dir.origin,
        );
        match &self.provider {
            Some(p) => line(&mut out, "provider", quote(&p.value), &p.origin),
            None => out.push_str("# provider: none configured\n"),
        }
        if let Some(m) = &self.model {
            line(&mut out, "model", quote(&m.value), &m.origin);
        }
        line(
            &mut out,
            "max_turn_requests",
            self.max_turn_requests.value.to_string(),
            &self.max_turn_requests.origin,
        );
        if let Some(prompt) = &self.system_prompt {
            line(
                &mut out,
                "system_prompt",
                quote(&prompt.value),
                &prompt.origin,
            );
        }
        if let Some(text) = &self.instructions {
            line(&mut out, "instructions", quote(&text.value), &text.origin);
        }
        line(
            &mut out,
            "mode",
            quote(self.mode.value.as_str()),
            &self.mode.origin,
        );
        line(
            &mut out,
            "sandbox",
            quote(self.sandbox.value.as_str()),
            &self.sandbox.origin,
        );
        for (key, timeout) in [
            ("approval_timeout_secs", &self.approval_timeout_secs),
            ("question_timeout_secs", &self.question_timeout_secs),
        ] {
            if let Some(timeout) = timeout {
                line(&mut out, key, timeout.value.to_string(), &timeout.origin);
            }
        }
        for (key, timeout) in [
            ("mcp_call_timeout_secs", &self.mcp_call_timeout_secs),
            ("mcp_start_timeout_secs", &self.mcp_start_timeout_secs),
            ("session_lease_secs", &self.session_lease_secs),
        ] {
            if let Some(timeout) = timeout {
                line(&mut out, key, timeout.value.to_string(), &timeout.origin);
            }
        }
        // A top-level key: before the first table header.
        if !self.models.is_empty() {
            line(
                &mut out,
                "currency",
                quote(&self.catalog.currency),
                &self.currency_origin,
            );
        }
        let file_note = match &self.file {
            Some(path) => format!("config file {}", path.display()),
            None => "default".to_owned(),
        };
        if !self.tools.is_empty() {
            out.push_str(&format!("\n[tools]  # {file_note}\n"));
            for (name, rule) in &self.tools {
                let rule = match rule {
                    Rule::Allow => "allow",
                    Rule::Ask => "ask",
                    Rule::Deny => "deny",
                };
                out.push_str(&format!("{name} = {}\n", quote(rule)));
            }
        }
        if self.shell != ShellConfig::default()
            && let Ok(shell) = toml::to_string(&self.shell)
        {
            out.push_str(&format!("\n[shell]  # {file_note}\n{shell}"));
        }
        if self.paths != PathsConfig::default()
            && let Ok(paths) = toml::to_string(&self.paths)
        {
            out.push_str(&format!("\n[paths]  # {file_note}\n{paths}"));
        }
        if self.safety != SafetyFileConfig::default()
            && let Ok(safety) = toml::to_string(&self.safety)
        {
            out.push_str(&format!("\n[safety]  # {file_note}\n{safety}"));
        }
        if self.budget != BudgetConfig::default()
            && let Ok(budget) = toml::to_string(&self.budget)
        {
            out.push_str(&format!("\n[budget]  # {file_note}\n{budget}"));
        }
        if self.memory != MemoryConfig::default()
            && let Ok(memory) = toml::to_string(&self.memory)
        {
            out.push_str(&format!("\n[memory]  # {file_note}\n{memory}"));
        }
        for (name, channel) in &self.channels {
            out.push_str(&format!("\n[channels.{name}]  # {file_note}\n"));
            if let Ok(body) = toml::to_string(channel) {
                out.push_str(&body);
            }
        }
        if !self.mcp_servers.is_empty() {
            // Serialized whole, so `env` and `headers` land in
            // `[mcpServers.NAME.env]` rather than in top-level tables.
            let redacted: BTreeMap<&str, BTreeMap<&str, McpServerConfig>> = BTreeMap::from([(
                "mcpServers",
                self.mcp_servers
                    .iter()
                    .map(|(name, server)| (name.as_str(), server.redacted()))
                    .collect(),
            )]);
            if let Ok(body) = toml::to_string(&redacted) {
                out.push_str(&format!("\n# MCP servers  # {file_note}\n{body}"));
            }
        }
        if self.http != HttpConfig::default()
            && let Ok(http) = toml::to_string(&self.http)
        {
            out.push_str(&format!("\n[http]  # {file_note}\n{http}"));
        }
        for (name, model) in &self.models {
            out.push_str(&format!("\n[models.{}]  # {file_note}\n", quote(name)));
            if let Ok(body) = toml::to_string(model) {
                out.push_str(&body);
            }
        }
        for (name, provider) in &self.providers {
            out.push_str(&format!("\n[providers.{name}]  # {}\n", provider.origin));
            out.push_str(&format!("kind = {}\n", quote(provider.value.kind.as_str())));
            if let Some(url) = &provider.value.base_url {
                out.push_str(&format!("base_url = {}\n", quote(url)));
            }
            if let Some(key) = &provider.value.api_key_env {
                out.push_str(&format!("api_key_env = {}\n", quote(key)));
            }
            if !provider.value.members.is_empty() {
                let members: Vec<String> =
                    provider.value.members.iter().map(|m| quote(m)).collect();
                out.push_str(&format!("members = [{}]\n", members.join(", ")));
            }
            if let Some(script) = &provider.value.script {
                out.push_str(&format!("script = {}\n", quote(&script.to_string_lossy())));
            }
            if !provider.value.models.is_empty() {
                let models: Vec<String> = provider.value.models.iter().map(|m| quote(m)).collect();
                out.push_str(&format!("models = [{}]\n", models.join(", ")));
            }
            if let Some(images) = provider.value.images {
                out.push_str(&format!("images = {images}\n"));
            }
        }
        out
    }
}

fn quote(value: &str) -> String {
    serde_json::to_string(value).unwrap_or_else(|_| format!("{value:?}"))
}

fn pick(
    flag: Option<String>,
    flag_name: &'static str,
    env: Option<String>,
    env_name: &'static str,
    file: Option<String>,
    file_origin: &Origin,
) -> Option<Sourced<String>> {
    if let Some(value) = flag {
        return Some(Sourced::new(value, Origin::Flag(flag_name)));
    }
    if let Some(value) = env.filter(|v| !v.is_empty()) {
        return Some(Sourced::new(value, Origin::Env(env_name)));
    }
    file.map(|value| Sourced::new(value, file_origin.clone()))
}

fn validate_provider(
    name: &str,
    provider: &ProviderConfig,
    origin: &Origin,
) -> Result<(), ConfigError> {
    let invalid = |key: &str, message: &str| ConfigError::Invalid {
        origin: origin.clone(),
        key: format!("providers.{name}.{key}"),
        message: message.to_owned(),
    };
    if name.is_empty() || name.contains('/') {
        return Err(invalid(
            "",
            "a provider name must be non-empty and without '/'",
        ));
    }
    match provider.kind {
        ProviderKind::Scripted => {
            if provider.script.is_none() {
                return Err(invalid(
                    "script",
                    "a scripted provider needs `script = \"FILE\"`",
                ));
            }
        }
        ProviderKind::Openai | ProviderKind::Anthropic => {
            if provider.script.is_some() {
                return Err(invalid("script", "only a scripted provider takes a script"));
            }
            if let Some(url) = &provider.base_url
                && !(url.starts_with("http://") || url.starts_with("https://"))
            {
                return Err(invalid("base_url", "must start with http:// or https://"));
            }
        }
        ProviderKind::Failover => {
            if provider.members.is_empty() {
                return Err(invalid(
                    "members",
                    "a failover provider needs `members = [\"provider/model\", ...]`",
                ));
            }
        }
    }
    if provider.kind != ProviderKind::Failover && !provider.members.is_empty() {
        return Err(invalid("members", "only a failover provider has members"));
    }
    if provider.timeout_secs == Some(0)
        || provider.attempts == Some(0)
        || provider.max_tokens == Some(0)
    {
        return Err(invalid(
            "",
            "timeout_secs, attempts and max_tokens must be at least 1",
        ));
    }
    if provider.models.iter().any(|m| m.trim().is_empty()) {
        return Err(invalid("models", "model names must not be empty"));
    }
    validate_reasoning(provider, invalid)
}

fn validate_reasoning(
    provider: &ProviderConfig,
    invalid: impl Fn(&str, &str) -> ConfigError,
) -> Result<(), ConfigError> {
    let efforts = &provider.reasoning_efforts;
    if provider.kind != ProviderKind::Openai
        && (!efforts.is_empty() || provider.reasoning_effort.is_some())
    {
        return Err(invalid(
            "reasoning_efforts",
            "only an OpenAI-compatible provider (kind = \"openai\") takes a reasoning effort",
        ));
    }
    for (i, effort) in efforts.iter().enumerate() {
        if effort.is_empty()
            || effort.len() > 32
            || !effort
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' || c == '-')
        {
            return Err(invalid(
                "reasoning_efforts",
                "each effort is a short lower-case word such as \"low\", \"medium\" or \"high\"",
            ));
        }
        if efforts[..i].contains(effort) {
            return Err(invalid("reasoning_efforts", "an effort is listed twice"));
        }
    }
    if let Some(effort) = &provider.reasoning_effort
        && !efforts.contains(effort)
    {
        return Err(invalid(
            "reasoning_effort",
            "must be one of `reasoning_efforts` (list the efforts the API takes there)",
        ));
    }
    Ok(())
}

fn validate_subagents(subagents: &SubagentsConfig, origin: &Origin) -> Result<(), ConfigError> {
    let invalid = |key: &str, message: String| ConfigError::Invalid {
        origin: origin.clone(),
        key: format!("subagents.{key}"),
        message,
    };
    if let Some(n) = subagents.max_parallel
        && !(1..=64).contains(&n)
    {
        return Err(invalid(
            "max_parallel",
            format!("must be from 1 to 64, got {n}"),
        ));
    }
    if let Some(n) = subagents.max_turns
        && !(1..=1000).contains(&n)
    {
        return Err(invalid(
            "max_turns",
            format!("must be from 1 to 1000, got {n}"),
        ));
    }
    Ok(())
}

fn validate_web(web: &WebConfig, origin: &Origin) -> Result<(), ConfigError> {
    let invalid = |key: &str, message: String| ConfigError::Invalid {
        origin: origin.clone(),
        key: format!("web.{key}"),
        message,
    };
    for (key, rules) in [("allow", &web.allow), ("deny", &web.deny)] {
        for rule in rules {
            if crate::core::policy::HostRule::parse(rule).is_none() {
                return Err(invalid(
                    key,
                    format!(
                        "{rule:?} is not a host name (write `example.com`, `*.example.com` or `*`)"
                    ),
                ));
            }
        }
    }
    for entry in &web.allow_private {
        if crate::core::policy::PrivateAllow::parse(entry).is_none() {
            return Err(invalid(
                "allow_private",
                format!("{entry:?} is not an address, a network or a host name"),
            ));
        }
    }
    for (key, value) in [
        ("max_bytes", web.max_bytes),
        ("timeout_secs", web.timeout_secs),
    ] {
        if value == Some(0) {
            return Err(invalid(key, "must be at least 1".into()));
        }
    }
    if let Some(search) = &web.search {
        if let Some(url) = &search.url {
            match reqwest::Url::parse(url) {
                Ok(parsed) if matches!(parsed.scheme(), "http" | "https") => {}
                _ => {
                    return Err(invalid(
                        "search.url",
                        format!("{url:?} is not an http(s) URL"),
                    ));
                }
            }
        }
        match search.backend {
            SearchBackend::Searxng if search.url.is_none() => {
                return Err(invalid(
                    "search.url",
                    "a SearXNG backend needs the instance's URL".into(),
                ));
            }
            SearchBackend::Brave | SearchBackend::Tavily if search.api_key_env.is_none() => {
                return Err(invalid(
                    "search.api_key_env",
                    "Brave and Tavily need the environment variable holding the API key".into(),
                ));
            }
            _ => {}
        }
        if matches!(search.max_results, Some(0) | Some(21..)) {
            return Err(invalid("search.max_results", "must be 1 to 20".into()));
        }
    }
    Ok(())
}

fn validate_hooks(hooks: &HooksConfig, origin: &Origin) -> Result<(), ConfigError> {
    let mut index: BTreeMap<&str, usize> = BTreeMap::new();
    for (event, hook) in hooks.all() {
        let n = index.entry(event.as_str()).or_default();
        let key = format!("hooks.{}[{n}]", event.as_str());
        *n += 1;
        let invalid = |message: String| ConfigError::Invalid {
            origin: origin.clone(),
            key: key.clone(),
            message,
        };
        match (&hook.command, &hook.url) {
            (Some(command), None) if command.trim().is_empty() => {
                return Err(invalid("`command` is empty".into()));
            }
            (Some(_), None) => {}
            (None, Some(url)) => {
                let parsed = reqwest::Url::parse(url)
                    .map_err(|err| invalid(format!("`url` is not a URL: {err}")))?;
                if !matches!(parsed.scheme(), "http" | "https") {
                    return Err(invalid(format!(
                        "`url` must be http or https, got {}",
                        parsed.scheme()
                    )));
                }
            }
            (Some(_), Some(_)) => {
                return Err(invalid("give `command` or `url`, not both".into()));
            }
            (None, None) => return Err(invalid("give `command` or `url`".into())),
        }
        if hook.command.is_some() && (hook.secret.is_some() || hook.secret_env.is_some()) {
            return Err(invalid(
                "`secret` and `secret_env` sign `url` requests; a `command` hook takes neither"
                    .into(),
            ));
        }
        if hook.secret.is_some() && hook.secret_env.is_some() {
            return Err(invalid("give `secret` or `secret_env`, not both".into()));
        }
        if hook.timeout_secs == Some(0) {
            return Err(invalid("`timeout_secs` must be at least 1".into()));
        }
        crate::core::hooks::Matcher::parse(hook.matcher.as_deref())
            .map_err(|err| invalid(format!("`matcher`: {err}")))?;
    }
    Ok(())
}

fn validate_http(http: &HttpConfig, origin: &Origin) -> Result<(), ConfigError> {
    let invalid = |key: &str, message: String| ConfigError::Invalid {
        origin: origin.clone(),
        key: format!("http.{key}"),
        message,
    };
    if let Some(bind) = &http.bind
        && bind.parse::<std::net::SocketAddr>().is_err()
    {
        return Err(invalid(
            "bind",
            format!("expected an address such as \"127.0.0.1:8787\", got {bind:?}"),
        ));
    }
    if http.token_env.as_ref().is_some_and(|n| n.trim().is_empty()) {
        return Err(invalid("token_env", "must not be empty".into()));
    }
    if http.body_limit_bytes == Some(0) {
        return Err(invalid("body_limit_bytes", "must be at least 1".into()));
    }
    if http.rate_limit_burst == Some(0) {
        return Err(invalid("rate_limit_burst", "must be at least 1".into()));
    }
    for origin in &http.cors_origins {
        let ok = origin == "*"
            || ((origin.starts_with("http://") || origin.starts_with("https://"))
                && !origin.ends_with('/')
                && origin.is_ascii());
        if !ok {
            return Err(invalid(
                "cors_origins",
                format!(
                    "expected \"*\" or an origin such as \"https://app.example\" (scheme, host, optional port, no path), got {origin:?}"
                ),
            ));
        }
    }
    Ok(())
}

/// Refuses an `[mcpServers.NAME]` table Pincer cannot use, naming the key.
fn validate_mcp_server(
    name: &str,
    server: &McpServerConfig,
    origin: &Origin,
) -> Result<(), ConfigError> {
    let invalid = |key: &str, message: String| ConfigError::Invalid {
        origin: origin.clone(),
        key: if key.is_empty() {
            format!("mcpServers.{name}")
        } else {
            format!("mcpServers.{name}.{key}")
        },
        message,
    };
    let name_ok = !name.is_empty()
        && name.len() <= 64
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
    if !name_ok {
        return Err(invalid(
            "",
            "a server name must be 1 to 64 letters, digits, `_` or `-` (it prefixes the tool names)"
                .into(),
        ));
    }
    match server.kind.as_deref() {
        None | Some("stdio" | "http") => {}
        Some("sse") => {
            return Err(invalid(
                "type",
                "the SSE transport is not supported; use a streamable HTTP endpoint (type = \"http\")"
                    .into(),
            ));
        }
        Some(other) => {
            return Err(invalid(
                "type",
                format!("expected \"stdio\" or \"http\", got {other:?}"),
            ));
        }
    }
    match (&server.command, &server.url) {
        (Some(_), Some(_)) => Err(invalid(
            "",
            "set either `command` (a server Pincer starts) or `url` (a streamable HTTP server), not both"
                .into(),
        )),
        (None, None) => Err(invalid(
            "",
            "set `command` (a server Pincer starts) or `url` (a streamable HTTP server)".into(),
        )),
        (Some(command), None) => {
            if command.trim().is_empty() {
                return Err(invalid("command", "must not be empty".into()));
            }
            if server.kind.as_deref() == Some("http") {
                return Err(invalid("type", "type \"http\" needs `url`, not `command`".into()));
            }
            if !server.headers.is_empty() {
                return Err(invalid("headers", "only a `url` server takes headers".into()));
            }
            if let Some(key) = server.env.keys().find(|k| k.is_empty() || k.contains('=')) {
                return Err(invalid("env", format!("{key:?} is not a variable name")));
            }
            Ok(())
        }
        (None, Some(url)) => {
            if !(url.starts_with("http://") || url.starts_with("https://")) || url.contains(' ') {
                return Err(invalid(
                    "url",
                    format!("expected an http:// or https:// URL, got {url:?}"),
                ));
            }
            if server.kind.as_deref() == Some("stdio") {
                return Err(invalid("type", "type \"stdio\" needs `command`, not `url`".into()));
            }
            if !server.args.is_empty() || !server.env.is_empty() {
                return Err(invalid(
                    "url",
                    "a `url` server takes `headers`, not `args` or `env`".into(),
                ));
            }
            let bad_header = server.headers.keys().find(|k| {
                k.is_empty() || !k.bytes().all(|b| b.is_ascii_alphanumeric() || b"-_!#$%&'*+.^`|~".contains(&b))
            });
            if let Some(key) = bad_header {
                return Err(invalid("headers", format!("{key:?} is not a header name")));
            }
            Ok(())
        }
    }
}

fn read_file(path: &Path) -> Result<FileConfig, ConfigError> {
    let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
        path: path.to_path_buf(),
        source,
    })?;
    toml::from_str(&text).map_err(|err| ConfigError::Parse {
        path: path.to_path_buf(),
        message: err.to_string().trim_end().trim_end_matches('.').to_owned(),
    })
}

fn absolute(path: &Path) -> PathBuf {
    std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf())
}

fn home(env: &dyn Fn(&str) -> Option<String>) -> Option<PathBuf> {
    env("HOME").filter(|h| !h.is_empty()).map(PathBuf::from)
}

/// `[paths] protected` entries must name a path below a root, not climb
/// out of one; `[paths] unprotected` may only name built-in entries.
fn validate_protected(paths: &PathsConfig, origin: &Origin) -> Result<(), ConfigError> {
    for entry in &paths.protected {
        let trimmed = entry.trim().trim_end_matches('/');
        if trimmed.is_empty()
            || Path::new(trimmed)
                .components()
                .any(|c| c == std::path::Component::ParentDir)
        {
            return Err(ConfigError::Invalid {
                origin: origin.clone(),
                key: "paths.protected".into(),
                message: format!(
                    "{} is not a path to protect (empty, or with `..`)",
                    quote(entry)
                ),
            });
        }
    }
    for entry in &paths.unprotected {
        if !crate::core::policy::DEFAULT_PROTECTED.contains(&entry.trim_end_matches('/')) {
            return Err(ConfigError::Invalid {
                origin: origin.clone(),
                key: "paths.unprotected".into(),
                message: format!(
                    "{} is not a built-in protected path; those are {}",
                    quote(entry),
                    crate::core::policy::DEFAULT_PROTECTED.join(", ")
                ),
            });
        }
    }
    Ok(())
}

fn default_config_path(env: &dyn Fn(&str) -> Option<String>) -> Option<PathBuf> {
    let base = env("XDG_CONFIG_HOME")
        .filter(|d| !d.is_empty())
        .map(PathBuf::from)
        .or_else(|| home(env).map(|h| h.join(".config")))?;
    Some(base.join("pincer").join("config.toml"))
}

fn default_data_dir(env: &dyn Fn(&str) -> Option<String>) -> Result<PathBuf, ConfigError> {
    let base = env("XDG_DATA_HOME")
        .filter(|d| !d.is_empty())
        .map(PathBuf::from)
        .or_else(|| home(env).map(|h| h.join(".local").join("share")))
        .ok_or(ConfigError::NoHome)?;
    Ok(base.join("pincer"))
}

/// Builds the model catalogue from the `[models]` tables, refusing prices that
/// cannot be right.
fn catalog(
    currency: Option<&str>,
    models: &BTreeMap<String, ModelFileConfig>,
    origin: &Origin,
) -> Result<ModelCatalog, ConfigError> {
    let invalid = |key: String, message: String| ConfigError::Invalid {
        origin: origin.clone(),
        key,
        message,
    };
    let currency = currency.unwrap_or("USD").trim();
    if currency.is_empty() {
        return Err(invalid(
            "currency".into(),
            "must not be empty (an ISO 4217 code such as \"USD\", or a unit such as \"credits\")"
                .into(),
        ));
    }
    let mut entries = Vec::new();
    for (name, model) in models {
        let key = |field: &str| format!("models.{}.{field}", quote(name));
        if name.trim().is_empty() {
            return Err(invalid(
                "models".into(),
                "a model name must not be empty".into(),
            ));
        }
        if model.context_window == Some(0) {
            return Err(invalid(key("context_window"), "must be at least 1".into()));
        }
        for (field, value) in [
            ("input_price", model.input_price),
            ("output_price", model.output_price),
            ("cached_input_price", model.cached_input_price),
        ] {
            if let Some(value) = value
                && !(value.is_finite() && value >= 0.0)
            {
                return Err(invalid(
                    key(field),
                    format!("a price must be a number of zero or more, got {value}"),
                ));
            }
        }
        let price = match (model.input_price, model.output_price) {
            (Some(input), Some(output)) => Some(Price {
                input,
                output,
                cached_input: model.cached_input_price,
            }),
            (None, None) if model.cached_input_price.is_none() => None,
            _ => {
                return Err(invalid(
                    key("input_price"),
                    "a priced model needs both input_price and output_price (per million tokens)"
                        .into(),
                ));
            }
        };
        entries.push((
            name.clone(),
            ModelInfo {
                context_window: model.context_window,
                price,
                images: model.images,
            },
        ));
    }
    ModelCatalog::new(currency, entries)
        .map_err(|err| invalid(format!("models.{}", quote(&err.name)), err.message))
}

/// The provider for a model named without one (`pincer run --model gpt-4o`):
/// the one provider that lists it, else the one provider of the model's family
/// (`claude-*` is Anthropic's; `gpt-*`, `o1`…`o4`, `chatgpt-*` OpenAI's), else
/// the only provider there is. `Ok(None)` when nothing is configured; an error
/// naming the candidates when several could serve it.
fn provider_for_model(
    model: &str,
    providers: &BTreeMap<String, Sourced<ProviderConfig>>,
) -> Result<Option<String>, String> {
    let only = |names: Vec<&String>| match names.as_slice() {
        [one] => Some((*one).clone()),
        _ => None,
    };
    let listing: Vec<&String> = providers
        .iter()
        .filter(|(_, p)| p.value.models.iter().any(|m| m == model))
        .map(|(name, _)| name)
        .collect();
    if let Some(name) = only(listing.clone()) {
        return Ok(Some(name));
    }
    let family = model_family(model);
    let of_family: Vec<&String> = providers
        .iter()
        .filter(|(_, p)| Some(&p.value.kind) == family.as_ref())
        .map(|(name, _)| name)
        .collect();
    if listing.is_empty()
        && let Some(name) = only(of_family.clone())
    {
        return Ok(Some(name));
    }
    if providers.len() <= 1 {
        return Ok(providers.keys().next().cloned());
    }
    let candidates: Vec<&String> = if !listing.is_empty() {
        listing
    } else if !of_family.is_empty() {
        of_family
    } else {
        providers.keys().collect()
    };
    let names: Vec<&str> = candidates.iter().map(|n| n.as_str()).collect();
    Err(format!(
        "{model:?} could be served by more than one provider ({}); choose one with --provider or `provider` in config",
        names.join(", ")
    ))
}

/// The kind of provider a well-known model name belongs to.
fn model_family(model: &str) -> Option<ProviderKind> {
    let model = model.to_ascii_lowercase();
    if model.starts_with("claude") {
        return Some(ProviderKind::Anthropic);
    }
    let openai = ["gpt-", "chatgpt-", "o1", "o3", "o4", "codex-"];
    openai
        .iter()
        .any(|prefix| model.starts_with(prefix))
        .then_some(ProviderKind::Openai)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn load(files: &[(&str, &str)], vars: &[(&str, &str)], flags: Flags) -> Result<Config, String> {
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

    /// `config show` names where the currency came from, and prints it as a
    /// top-level key (after a table header it would belong to that table).
    #[test]
    fn config_show_names_the_currency_source_at_the_top_level() {
        let vars = [("PINCER_CONFIG", "$DIR/c.toml")];
        let prices = "[safety]\nmax_output_bytes = 100\n[models.\"m\"]\ninput_price = 1.0\noutput_price = 2.0\n";
        for (file, origin) in [
            (prices.to_owned(), "# default"),
            (format!("currency = \"EUR\"\n{prices}"), "# config file"),
        ] {
            let config = load(&[("c.toml", &file)], &vars, Flags::default())
                .unwrap_or_else(|e| panic!("{e}"));
            let shown = config.render();
            let line = shown
                .lines()
                .find(|l| l.starts_with("currency = "))
                .unwrap_or_else(|| panic!("{shown}"));
            assert!(line.contains(origin), "{shown}");
            let reparsed: toml::Table = toml::from_str(
                &shown
                    .lines()
                    .map(|l| l.split("  #").next().unwrap_or_default())
                    .collect::<Vec<_>>()
                    .join("\n"),
            )
            .unwrap_or_else(|e| panic!("{e}\n{shown}"));
            assert!(reparsed.get("currency").is_some(), "{shown}");
        }
    }

    /// Found by fuzzing (`config_load`): errors echoed long values whole.
    #[test]
    fn errors_quote_long_values_briefly() {
        let long = "local-".repeat(500);
        let vars = [("PINCER_CONFIG", "$DIR/c.toml")];
        let cases = [
            format!("provider = \"{long}\"\n"),
            format!("model = \"{long}\n"),
            format!(
                "[mcpServers.x]\nurl = \"http://127.0.0.1/mcp\"\nheaders = {{ \"{long}@\" = \"v\" }}\n"
            ),
        ];
        for file in cases {
            let err = load(&[("c.toml", &file)], &vars, Flags::default()).unwrap_err();
            assert!(err.len() < 2048, "{} bytes: {err}", err.len());
            assert!(err.contains("bytes)"), "{err}");
        }
    }

    #[test]
    fn mcp_servers_are_read_in_the_zed_shape() {
        let file = r#"
mcp_call_timeout_secs = 30
mcp_start_timeout_secs = 90
[mcpServers.fs]
command = "npx"
args = ["-y", "@modelcontextprotocol/server-filesystem", "/tmp"]
env = { FOO = "bar" }
[mcpServers.remote]
url = "http://127.0.0.1:3001/mcp"
headers = { Authorization = "Bearer abc" }
"#;
        let vars = [("PINCER_CONFIG", "$DIR/c.toml")];
        let config =
            load(&[("c.toml", file)], &vars, Flags::default()).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(config.mcp_servers.len(), 2);
        assert_eq!(config.mcp_servers["fs"].command.as_deref(), Some("npx"));
        assert_eq!(config.mcp_servers["fs"].env["FOO"], "bar");
        assert_eq!(
            config.mcp_servers["remote"].url.as_deref(),
            Some("http://127.0.0.1:3001/mcp")
        );
        assert_eq!(
            config.mcp_call_timeout_secs.as_ref().map(|t| t.value),
            Some(30)
        );
        let shown = config.render();
        assert!(shown.contains("[mcpServers.remote]"), "{shown}");
        assert!(shown.contains("[mcpServers.fs.env]"), "{shown}");
        // What is shown is valid TOML with the same servers, values hidden.
        let reparsed: toml::Table = toml::from_str(
            &shown
                .lines()
                .map(|l| l.split("  #").next().unwrap_or_default())
                .collect::<Vec<_>>()
                .join("\n"),
        )
        .unwrap_or_else(|e| panic!("{e}\n{shown}"));
        assert_eq!(
            reparsed["mcpServers"]["fs"]["env"]["FOO"].as_str(),
            Some("[redacted]")
        );
        assert!(
            !shown.contains("Bearer abc") && !shown.contains("\"bar\""),
            "{shown}"
        );
    }

    #[test]
    fn bad_mcp_servers_are_refused_naming_the_key() {
        let vars = [("PINCER_CONFIG", "$DIR/c.toml")];
        let cases = [
            (
                "[mcpServers.x]\nargs = [\"a\"]\n",
                "mcpServers.x: set `command`",
            ),
            (
                "[mcpServers.x]\ncommand = \"a\"\nurl = \"http://h\"\n",
                "mcpServers.x: set either",
            ),
            (
                "[mcpServers.\"a b\"]\ncommand = \"a\"\n",
                "mcpServers.a b: a server name",
            ),
            (
                "[mcpServers.x]\nurl = \"ftp://h\"\n",
                "mcpServers.x.url: expected an http",
            ),
            (
                "[mcpServers.x]\ntype = \"sse\"\nurl = \"http://h/sse\"\n",
                "mcpServers.x.type: the SSE transport is not supported",
            ),
            (
                "[mcpServers.x]\ncommand = \"a\"\nheaders = { A = \"b\" }\n",
                "mcpServers.x.headers: only a `url` server",
            ),
            (
                "[mcpServers.x]\nurl = \"http://h\"\nheaders = { \"A B\" = \"b\" }\n",
                "mcpServers.x.headers: \"A B\" is not a header name",
            ),
            (
                "[mcpServers.x]\ncommand = \"a\"\ncwd = \"/\"\n",
                "unknown field `cwd`",
            ),
            (
                "mcp_call_timeout_secs = 0\n",
                "mcp_call_timeout_secs: must be at least 1",
            ),
        ];
        for (file, expected) in cases {
            let err = load(&[("c.toml", file)], &vars, Flags::default())
                .err()
                .unwrap_or_default();
            assert!(
                err.contains(expected),
                "{file:?}: expected {expected:?} in {err:?}"
            );
            assert!(err.contains("c.toml"), "{err}");
        }
    }

    #[test]
    fn defaults_follow_xdg() {
        let config = load(&[], &[("XDG_DATA_HOME", "/data")], Flags::default())
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(config.data_dir.value, PathBuf::from("/data/pincer"));
        assert_eq!(config.data_dir.origin, Origin::Default);
        assert_eq!(config.max_turn_requests.value, DEFAULT_MAX_TURN_REQUESTS);
        assert!(config.provider.is_none());
    }

    #[test]
    fn flags_beat_environment_beats_file() {
        let file = "max_turn_requests = 7\ndata_dir = \"/from-file\"\n";
        let vars = [
            ("PINCER_CONFIG", "$DIR/c.toml"),
            ("PINCER_MAX_TURN_REQUESTS", "9"),
        ];
        let config =
            load(&[("c.toml", file)], &vars, Flags::default()).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(config.max_turn_requests.value, 9);
        assert_eq!(config.data_dir.value, PathBuf::from("/from-file"));
        let flags = Flags {
            max_turn_requests: Some(3),
            data_dir: Some("/from-flag".into()),
            ..Flags::default()
        };
        let config = load(&[("c.toml", file)], &vars, flags).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(config.max_turn_requests.value, 3);
        assert_eq!(config.data_dir.value, PathBuf::from("/from-flag"));
        assert_eq!(config.data_dir.origin, Origin::Flag("--data-dir"));
    }

    #[test]
    fn unknown_keys_and_bad_values_name_the_key_and_file() {
        let vars = [("PINCER_CONFIG", "$DIR/c.toml")];
        let err = load(&[("c.toml", "max_turns = 3\n")], &vars, Flags::default())
            .err()
            .unwrap_or_default();
        assert!(
            err.contains("c.toml") && err.contains("unknown field `max_turns`"),
            "{err}"
        );
        let err = load(
            &[("c.toml", "max_turn_requests = \"lots\"\n")],
            &vars,
            Flags::default(),
        )
        .err()
        .unwrap_or_default();
        assert!(
            err.contains("c.toml") && err.contains("max_turn_requests"),
            "{err}"
        );
        let err = load(
            &[("c.toml", "[providers.x]\nkind = \"scripted\"\n")],
            &vars,
            Flags::default(),
        )
        .err()
        .unwrap_or_default();
        assert!(err.contains("providers.x.script"), "{err}");
        let err = load(
            &[],
            &[("PINCER_MAX_TURN_REQUESTS", "many")],
            Flags::default(),
        )
        .err()
        .unwrap_or_default();
        assert_eq!(
            err,
            "environment variable PINCER_MAX_TURN_REQUESTS: max_turn_requests: expected a whole number, got \"many\""
        );
    }

    #[test]
    fn script_flag_makes_a_scripted_provider_and_paths_resolve_against_the_file() {
        let flags = Flags {
            script: Some("/abs/s.jsonl".into()),
            ..Flags::default()
        };
        let config = load(&[], &[], flags).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(config.provider.map(|p| p.value).as_deref(), Some(SCRIPTED));
        let file =
            "provider = \"demo\"\n[providers.demo]\nkind = \"scripted\"\nscript = \"s.jsonl\"\n";
        let config = load(
            &[("c.toml", file)],
            &[("PINCER_CONFIG", "$DIR/c.toml")],
            Flags::default(),
        )
        .unwrap_or_else(|e| panic!("{e}"));
        let script = config
            .providers
            .get("demo")
            .and_then(|p| p.value.script.clone())
            .unwrap_or_default();
        assert!(
            script.ends_with("s.jsonl") && script.is_absolute(),
            "{}",
            script.display()
        );
        let err = load(
            &[],
            &[],
            Flags {
                provider: Some("nope".into()),
                ..Flags::default()
            },
        )
        .err()
        .unwrap_or_default();
        assert!(err.contains("no provider named \"nope\""), "{err}");
    }

    #[test]
    fn tool_settings_are_read_and_bad_ones_name_the_key() {
        let vars = [("PINCER_CONFIG", "$DIR/c.toml")];
        let file = "mode = \"read_only\"\nsandbox = \"required\"\napproval_timeout_secs = 30\n\
                    [tools]\nwrite_file = \"deny\"\n[shell]\nallow = [\"cargo test\"]\n";
        let config =
            load(&[("c.toml", file)], &vars, Flags::default()).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(config.mode.value, Mode::ReadOnly);
        assert_eq!(config.sandbox.value, SandboxSetting::Required);
        assert_eq!(config.approval_timeout_secs.map(|t| t.value), Some(30));
        assert_eq!(config.tools.get("write_file"), Some(&Rule::Deny));
        assert_eq!(config.shell.allow, vec!["cargo test".to_owned()]);
        let flags = Flags {
            mode: Some("full".into()),
            ..Flags::default()
        };
        let config = load(&[("c.toml", file)], &vars, flags).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(config.mode.value, Mode::Full);
        assert_eq!(config.mode.origin, Origin::Flag("--mode"));
        for (text, fragment) in [
            (
                "mode = \"yolo\"\n",
                "mode: expected read_only, supervised or full, got \"yolo\"",
            ),
            ("sandbox = \"sometimes\"\n", "unknown variant `sometimes`"),
            ("[tools]\nshell = \"maybe\"\n", "unknown variant `maybe`"),
            (
                "[tools]\nwrite_fle = \"deny\"\n",
                "tools.write_fle: no such tool; did you mean `write_file`?",
            ),
            (
                "[tools]\nbrowse = \"deny\"\n",
                "MCP tools are named SERVER__TOOL",
            ),
            (
                "[shell]\ndeny = [\"rm | x\"]\n",
                "shell.deny: the command rule \"rm | x\" contains '|'",
            ),
            (
                "[shell]\ntimeout_secs = 0\n",
                "shell.timeout_secs: must be at least 1",
            ),
            ("[paths]\nextra = []\n", "unknown field `extra`"),
            (
                "[memory]\nrecall_floor = 1.5\n",
                "memory.recall_floor: must be between 0 and 1, got 1.5",
            ),
            (
                "[memory]\nhalf_life_days = 0\n",
                "memory.half_life_days: must be more than 0",
            ),
            ("[memory]\nrecal = false\n", "unknown field `recal`"),
            (
                "[budget]\nrun = -1\n",
                "budget.run: must be a positive amount, got -1",
            ),
            (
                "[budget.daily]\nopenai = 0\n",
                "budget.daily.openai: must be a positive amount, got 0",
            ),
        ] {
            let err = load(&[("c.toml", text)], &vars, Flags::default())
                .err()
                .unwrap_or_default();
            assert!(
                err.contains(fragment) && err.contains("c.toml"),
                "{text}: {err}"
            );
        }
    }

    #[test]
    fn the_http_table_is_read_shown_and_checked() {
        let vars = [("PINCER_CONFIG", "$DIR/c.toml")];
        let file = "[http]\nbind = \"127.0.0.1:9000\"\ntoken_file = \"tok\"\nrate_limit_per_minute = 0\ncors_origins = [\"https://app.example\"]\n";
        let config =
            load(&[("c.toml", file)], &vars, Flags::default()).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(config.http.bind.as_deref(), Some("127.0.0.1:9000"));
        assert!(
            config
                .http
                .token_file
                .as_ref()
                .is_some_and(|p| p.is_absolute() && p.ends_with("tok"))
        );
        let shown = config.render();
        assert!(shown.contains("\n[http]  # config file "), "{shown}");
        assert!(shown.contains("bind = \"127.0.0.1:9000\""), "{shown}");
        for (text, fragment) in [
            (
                "[http]\nbind = \"localhost\"\n",
                "http.bind: expected an address",
            ),
            (
                "[http]\nbody_limit_bytes = 0\n",
                "http.body_limit_bytes: must be at least 1",
            ),
            (
                "[http]\nrate_limit_burst = 0\n",
                "http.rate_limit_burst: must be at least 1",
            ),
            (
                "[http]\ncors_origins = [\"app.example\"]\n",
                "http.cors_origins: expected",
            ),
            ("[http]\ntoken = \"x\"\n", "unknown field `token`"),
        ] {
            let err = load(&[("c.toml", text)], &vars, Flags::default())
                .err()
                .unwrap_or_default();
            assert!(
                err.contains(fragment) && err.contains("c.toml"),
                "{text}: {err}"
            );
        }
    }
}
