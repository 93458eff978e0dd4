//! The config file's shape: the TOML tables as serde types, read as written.
//! Unknown keys are errors; what the values must be is in `validate`, where
//! they come from and what wins in `load`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::{ChannelConfig, ConfigError, HookImport, ProviderKind};
use crate::core::policy::Rule;
use crate::hooks::HookSpec;

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
    /// The `[store]` table: the store on a PostgreSQL server.
    #[serde(default)]
    pub store: StoreConfig,
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
    /// The `[skills]` table: Agent Skills (`docs/skills.md`).
    #[serde(default)]
    pub skills: SkillsConfig,
    /// The `[subagents]` table: the `delegate` tool (`docs/tools.md`).
    #[serde(default)]
    pub subagents: SubagentsConfig,
    /// Context windows and prices by model name or `*` pattern.
    #[serde(default)]
    pub models: BTreeMap<String, ModelFileConfig>,
    /// The unit of every price in `[models]`: an ISO 4217 code or e.g. "credits"; "USD" if unset.
    pub currency: Option<String>,
    /// Chat channels `pincer serve --channel NAME` / `pincer acp --channel NAME` start.
    #[serde(default, deserialize_with = "super::channels::deserialize_channels")]
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
    /// Whether `pincer serve --http` serves the web console at `/ui` (default true).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub console: Option<bool>,
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

/// The `[store]` table (`docs/scale-out.md`): unset, the store is SQLite in
/// the data directory.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct StoreConfig {
    /// `postgres://USER@HOST:PORT/DB` (with `?sslmode=require` or
    /// `verify-full`): the PostgreSQL server the store is on.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
}

/// The `[skills]` table (`docs/skills.md`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct SkillsConfig {
    /// Whether skills are looked for and offered (default true).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub enabled: Option<bool>,
    /// More folders of user-scope skills, each holding skill folders (or
    /// being one): `~/` is the home, a relative path is taken against the
    /// config file's directory.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub paths: Vec<String>,
    /// Skill names left out wherever they are found.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub disabled: Vec<String>,
    /// Tokens the system prompt's skill catalogue may take (default 2000,
    /// 100 to 100000): past them the least recently used skills are listed
    /// by name only.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub catalogue_tokens: Option<usize>,
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
    pub session_start: Vec<HookSpec>,
    #[serde(default, rename = "SessionEnd", skip_serializing_if = "Vec::is_empty")]
    pub session_end: Vec<HookSpec>,
    #[serde(
        default,
        rename = "UserPromptSubmit",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub user_prompt_submit: Vec<HookSpec>,
    #[serde(default, rename = "PreToolUse", skip_serializing_if = "Vec::is_empty")]
    pub pre_tool_use: Vec<HookSpec>,
    #[serde(default, rename = "PostToolUse", skip_serializing_if = "Vec::is_empty")]
    pub post_tool_use: Vec<HookSpec>,
    #[serde(default, rename = "PreCompact", skip_serializing_if = "Vec::is_empty")]
    pub pre_compact: Vec<HookSpec>,
    #[serde(default, rename = "Stop", skip_serializing_if = "Vec::is_empty")]
    pub stop: Vec<HookSpec>,
    #[serde(
        default,
        rename = "SubagentStop",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub subagent_stop: Vec<HookSpec>,
    #[serde(
        default,
        rename = "Notification",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub notification: Vec<HookSpec>,
    #[serde(
        default,
        rename = "MessageReceived",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub message_received: Vec<HookSpec>,
    #[serde(
        default,
        rename = "MessageSending",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub message_sending: Vec<HookSpec>,
}

impl HooksConfig {
    /// Every hook with its event, in the order written.
    pub fn all(&self) -> Vec<(crate::core::hooks::HookEvent, &HookSpec)> {
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

impl HooksConfig {
    /// The tables with every hook's `secret` hidden (`config show`).
    pub fn redacted(&self) -> Self {
        let hide = |hooks: &[HookSpec]| {
            hooks
                .iter()
                .map(|hook| HookSpec {
                    secret: hook.secret.as_ref().map(|_| "[redacted]".to_owned()),
                    ..hook.clone()
                })
                .collect()
        };
        Self {
            import: self.import.clone(),
            session_start: hide(&self.session_start),
            session_end: hide(&self.session_end),
            user_prompt_submit: hide(&self.user_prompt_submit),
            pre_tool_use: hide(&self.pre_tool_use),
            post_tool_use: hide(&self.post_tool_use),
            pre_compact: hide(&self.pre_compact),
            stop: hide(&self.stop),
            subagent_stop: hide(&self.subagent_stop),
            notification: hide(&self.notification),
            message_received: hide(&self.message_received),
            message_sending: hide(&self.message_sending),
        }
    }
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

impl FileConfig {
    /// Reads and parses the file at `path`; a parse error names the line.
    pub(super) fn read(path: &Path) -> Result<Self, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        toml::from_str(&text).map_err(|err| ConfigError::Parse {
            path: path.to_path_buf(),
            message: err.to_string().trim_end().trim_end_matches('.').to_owned(),
        })
    }
}
