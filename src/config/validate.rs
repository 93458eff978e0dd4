//! What the config file's values must be: each section checks itself with
//! `validate(&self, origin)`, its rules together, each error naming the key
//! and the file. [`FileConfig::validate`] checks every section, in the order
//! the file's documentation lists them.

use std::collections::BTreeMap;
use std::path::{Component, Path};

use super::{
    BUILTIN_TOOLS, BudgetConfig, ConfigError, FileConfig, HooksConfig, HttpConfig, McpServerConfig,
    MemoryConfig, ModelFileConfig, Origin, PathsConfig, ProviderConfig, ProviderKind,
    SafetyFileConfig, SearchBackend, ShellConfig, SkillsConfig, SubagentsConfig, WebConfig,
    WebSearchConfig, toml_quote,
};
use crate::core::policy::shell::CommandRule;
use crate::core::policy::{DEFAULT_PROTECTED, HostRule, PrivateAllow, Rule};
use crate::hooks::HookSpec;

fn invalid(origin: &Origin, key: impl Into<String>, message: impl Into<String>) -> ConfigError {
    ConfigError::Invalid {
        origin: origin.clone(),
        key: key.into(),
        message: message.into(),
    }
}

/// `Some(0)` where at least 1 is needed is an error naming `key`.
fn at_least_one(origin: &Origin, key: &str, value: Option<u64>) -> Result<(), ConfigError> {
    if value == Some(0) {
        return Err(invalid(origin, key, "must be at least 1"));
    }
    Ok(())
}

impl FileConfig {
    /// Checks every section of the file read at `origin`.
    pub(super) fn validate(&self, origin: &Origin) -> Result<(), ConfigError> {
        for (name, provider) in &self.providers {
            provider.validate(name, origin)?;
        }
        self.shell.validate(origin)?;
        self.safety.validate(origin)?;
        self.paths.validate(origin)?;
        self.validate_top_level(origin)?;
        for (name, model) in &self.models {
            model.validate(name, origin)?;
        }
        for (name, server) in &self.mcp_servers {
            server.validate(name, origin)?;
        }
        validate_tools(&self.tools, origin)?;
        self.budget.validate(origin)?;
        self.memory.validate(origin)?;
        self.hooks.validate(origin)?;
        self.web.validate(origin)?;
        self.skills.validate(origin)?;
        self.subagents.validate(origin)?;
        self.http.validate(origin)
    }

    /// The keys outside any table.
    fn validate_top_level(&self, origin: &Origin) -> Result<(), ConfigError> {
        if self
            .currency
            .as_deref()
            .is_some_and(|c| c.trim().is_empty())
        {
            return Err(invalid(
                origin,
                "currency",
                "must not be empty (an ISO 4217 code such as \"USD\", or a unit such as \"credits\")",
            ));
        }
        if let Some(f) = self.compact_at
            && !(0.0..=1.0).contains(&f)
        {
            return Err(invalid(
                origin,
                "compact_at",
                format!("must be between 0 and 1, got {f}"),
            ));
        }
        for (key, value) in [
            ("mcp_call_timeout_secs", self.mcp_call_timeout_secs),
            ("mcp_start_timeout_secs", self.mcp_start_timeout_secs),
            ("session_lease_secs", self.session_lease_secs),
        ] {
            at_least_one(origin, key, value)?;
        }
        Ok(())
    }
}

impl ProviderConfig {
    /// One `[providers.NAME]` table: what its kind needs and refuses.
    pub(super) fn validate(&self, name: &str, origin: &Origin) -> Result<(), ConfigError> {
        let invalid = |key: &str, message: &str| {
            invalid(
                origin,
                format!("providers.{name}.{key}"),
                message.to_owned(),
            )
        };
        if name.is_empty() || name.contains('/') {
            return Err(invalid(
                "",
                "a provider name must be non-empty and without '/'",
            ));
        }
        self.validate_kind(&invalid)?;
        if self.timeout_secs == Some(0) || self.attempts == Some(0) || self.max_tokens == Some(0) {
            return Err(invalid(
                "",
                "timeout_secs, attempts and max_tokens must be at least 1",
            ));
        }
        if self.models.iter().any(|m| m.trim().is_empty()) {
            return Err(invalid("models", "model names must not be empty"));
        }
        self.validate_reasoning(&invalid)
    }

    /// The keys only some kinds take: `script`, `base_url`, `members`.
    fn validate_kind(
        &self,
        invalid: &impl Fn(&str, &str) -> ConfigError,
    ) -> Result<(), ConfigError> {
        match self.kind {
            ProviderKind::Scripted if self.script.is_none() => {
                return Err(invalid(
                    "script",
                    "a scripted provider needs `script = \"FILE\"`",
                ));
            }
            ProviderKind::Openai | ProviderKind::Anthropic if self.script.is_some() => {
                return Err(invalid("script", "only a scripted provider takes a script"));
            }
            ProviderKind::Openai | ProviderKind::Anthropic
                if self.base_url.as_ref().is_some_and(|url| {
                    !(url.starts_with("http://") || url.starts_with("https://"))
                }) =>
            {
                return Err(invalid("base_url", "must start with http:// or https://"));
            }
            ProviderKind::Failover if self.members.is_empty() => {
                return Err(invalid(
                    "members",
                    "a failover provider needs `members = [\"provider/model\", ...]`",
                ));
            }
            ProviderKind::Scripted
            | ProviderKind::Openai
            | ProviderKind::Anthropic
            | ProviderKind::Failover => {}
        }
        if self.kind != ProviderKind::Failover && !self.members.is_empty() {
            return Err(invalid("members", "only a failover provider has members"));
        }
        Ok(())
    }

    fn validate_reasoning(
        &self,
        invalid: &impl Fn(&str, &str) -> ConfigError,
    ) -> Result<(), ConfigError> {
        let efforts = &self.reasoning_efforts;
        if self.kind != ProviderKind::Openai
            && (!efforts.is_empty() || self.reasoning_effort.is_some())
        {
            return Err(invalid(
                "reasoning_efforts",
                "only an OpenAI-compatible provider (kind = \"openai\") takes a reasoning effort",
            ));
        }
        for (i, effort) in efforts.iter().enumerate() {
            let word =
                |c: char| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' || c == '-';
            if effort.is_empty() || effort.len() > 32 || !effort.chars().all(word) {
                return Err(invalid(
                    "reasoning_efforts",
                    "each effort is a short lower-case word such as \"low\", \"medium\" or \"high\"",
                ));
            }
            if efforts[..i].contains(effort) {
                return Err(invalid("reasoning_efforts", "an effort is listed twice"));
            }
        }
        if let Some(effort) = &self.reasoning_effort
            && !efforts.contains(effort)
        {
            return Err(invalid(
                "reasoning_effort",
                "must be one of `reasoning_efforts` (list the efforts the API takes there)",
            ));
        }
        Ok(())
    }
}

impl ShellConfig {
    /// The `[shell]` table: every command rule parses; a timeout is at least 1.
    pub(super) fn validate(&self, origin: &Origin) -> Result<(), ConfigError> {
        for (key, rules) in [
            ("shell.allow", &self.allow),
            ("shell.ask", &self.ask),
            ("shell.deny", &self.deny),
        ] {
            for rule in rules {
                CommandRule::parse(rule).map_err(|err| invalid(origin, key, err.0))?;
            }
        }
        at_least_one(origin, "shell.timeout_secs", self.timeout_secs)
    }
}

impl SafetyFileConfig {
    pub(super) fn validate(&self, origin: &Origin) -> Result<(), ConfigError> {
        if self.max_output_bytes == Some(0) {
            return Err(invalid(
                origin,
                "safety.max_output_bytes",
                "must be at least 1",
            ));
        }
        Ok(())
    }
}

impl PathsConfig {
    /// `protected` entries must name a path below a root, not climb out of
    /// one; `unprotected` may only name built-in entries.
    pub(super) fn validate(&self, origin: &Origin) -> Result<(), ConfigError> {
        for entry in &self.protected {
            let trimmed = entry.trim().trim_end_matches('/');
            if trimmed.is_empty()
                || Path::new(trimmed)
                    .components()
                    .any(|c| c == Component::ParentDir)
            {
                return Err(invalid(
                    origin,
                    "paths.protected",
                    format!(
                        "{} is not a path to protect (empty, or with `..`)",
                        toml_quote(entry)
                    ),
                ));
            }
        }
        for entry in &self.unprotected {
            if !DEFAULT_PROTECTED.contains(&entry.trim_end_matches('/')) {
                return Err(invalid(
                    origin,
                    "paths.unprotected",
                    format!(
                        "{} is not a built-in protected path; those are {}",
                        toml_quote(entry),
                        DEFAULT_PROTECTED.join(", ")
                    ),
                ));
            }
        }
        Ok(())
    }
}

impl ModelFileConfig {
    /// One `[models."NAME"]` table: a window of at least 1 token, prices of
    /// zero or more, input and output priced together.
    pub(super) fn validate(&self, name: &str, origin: &Origin) -> Result<(), ConfigError> {
        let key = |field: &str| format!("models.{}.{field}", toml_quote(name));
        if name.trim().is_empty() {
            return Err(invalid(origin, "models", "a model name must not be empty"));
        }
        if self.context_window == Some(0) {
            return Err(invalid(origin, key("context_window"), "must be at least 1"));
        }
        for (field, value) in [
            ("input_price", self.input_price),
            ("output_price", self.output_price),
            ("cached_input_price", self.cached_input_price),
        ] {
            if let Some(value) = value
                && !(value.is_finite() && value >= 0.0)
            {
                return Err(invalid(
                    origin,
                    key(field),
                    format!("a price must be a number of zero or more, got {value}"),
                ));
            }
        }
        let priced = self.input_price.is_some() && self.output_price.is_some();
        let unpriced = self.input_price.is_none()
            && self.output_price.is_none()
            && self.cached_input_price.is_none();
        if !(priced || unpriced) {
            return Err(invalid(
                origin,
                key("input_price"),
                "a priced model needs both input_price and output_price (per million tokens)",
            ));
        }
        Ok(())
    }
}

impl McpServerConfig {
    /// Refuses an `[mcpServers.NAME]` table Pincer cannot use, naming the key.
    pub(super) fn validate(&self, name: &str, origin: &Origin) -> Result<(), ConfigError> {
        let invalid = |key: &str, message: String| {
            let key = if key.is_empty() {
                format!("mcpServers.{name}")
            } else {
                format!("mcpServers.{name}.{key}")
            };
            invalid(origin, key, message)
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
        self.validate_type(&invalid)?;
        match (&self.command, &self.url) {
            (Some(_), Some(_)) => Err(invalid(
                "",
                "set either `command` (a server Pincer starts) or `url` (a streamable HTTP server), not both"
                    .into(),
            )),
            (None, None) => Err(invalid(
                "",
                "set `command` (a server Pincer starts) or `url` (a streamable HTTP server)".into(),
            )),
            (Some(command), None) => self.validate_command(command, &invalid),
            (None, Some(url)) => self.validate_url(url, &invalid),
        }
    }

    fn validate_type(
        &self,
        invalid: &impl Fn(&str, String) -> ConfigError,
    ) -> Result<(), ConfigError> {
        match self.kind.as_deref() {
            None | Some("stdio" | "http") => Ok(()),
            Some("sse") => Err(invalid(
                "type",
                "the SSE transport is not supported; use a streamable HTTP endpoint (type = \"http\")"
                    .into(),
            )),
            Some(other) => Err(invalid(
                "type",
                format!("expected \"stdio\" or \"http\", got {other:?}"),
            )),
        }
    }

    /// A server Pincer starts: a command, and no `url` server's keys.
    fn validate_command(
        &self,
        command: &str,
        invalid: &impl Fn(&str, String) -> ConfigError,
    ) -> Result<(), ConfigError> {
        if command.trim().is_empty() {
            return Err(invalid("command", "must not be empty".into()));
        }
        if self.kind.as_deref() == Some("http") {
            return Err(invalid(
                "type",
                "type \"http\" needs `url`, not `command`".into(),
            ));
        }
        if !self.headers.is_empty() {
            return Err(invalid(
                "headers",
                "only a `url` server takes headers".into(),
            ));
        }
        if let Some(key) = self.env.keys().find(|k| k.is_empty() || k.contains('=')) {
            return Err(invalid("env", format!("{key:?} is not a variable name")));
        }
        Ok(())
    }

    /// A streamable HTTP server: an http(s) URL, header names that are names.
    fn validate_url(
        &self,
        url: &str,
        invalid: &impl Fn(&str, String) -> ConfigError,
    ) -> Result<(), ConfigError> {
        if !(url.starts_with("http://") || url.starts_with("https://")) || url.contains(' ') {
            return Err(invalid(
                "url",
                format!("expected an http:// or https:// URL, got {url:?}"),
            ));
        }
        if self.kind.as_deref() == Some("stdio") {
            return Err(invalid(
                "type",
                "type \"stdio\" needs `command`, not `url`".into(),
            ));
        }
        if !self.args.is_empty() || !self.env.is_empty() {
            return Err(invalid(
                "url",
                "a `url` server takes `headers`, not `args` or `env`".into(),
            ));
        }
        let token = |b: u8| b.is_ascii_alphanumeric() || b"-_!#$%&'*+.^`|~".contains(&b);
        if let Some(key) = self
            .headers
            .keys()
            .find(|k| k.is_empty() || !k.bytes().all(token))
        {
            return Err(invalid("headers", format!("{key:?} is not a header name")));
        }
        Ok(())
    }
}

/// A `[tools]` key names a built-in tool or an MCP tool (`SERVER__TOOL`; the
/// servers an editor passes are known only per session, so any such name
/// stands). A misspelled rule would silently do nothing, so it is an error.
fn validate_tools(tools: &BTreeMap<String, Rule>, origin: &Origin) -> Result<(), ConfigError> {
    for name in tools.keys() {
        validate_tool_name(name, origin)?;
    }
    Ok(())
}

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
    Err(invalid(
        origin,
        format!("tools.{}", crate::core::quote::quote(name)),
        format!(
            "no such tool; {closest}the built-in tools are {}, and MCP tools are named SERVER__TOOL",
            BUILTIN_TOOLS.join(", ")
        ),
    ))
}

impl BudgetConfig {
    /// Every limit is a positive amount.
    pub(super) fn validate(&self, origin: &Origin) -> Result<(), ConfigError> {
        let limits = [
            ("budget.run".to_owned(), self.run),
            ("budget.session".to_owned(), self.session),
        ]
        .into_iter()
        .chain(
            self.daily
                .iter()
                .map(|(name, limit)| (format!("budget.daily.{name}"), Some(*limit))),
        );
        for (key, limit) in limits {
            if let Some(limit) = limit
                && !(limit > 0.0 && limit.is_finite())
            {
                return Err(invalid(
                    origin,
                    key,
                    format!("must be a positive amount, got {limit}"),
                ));
            }
        }
        Ok(())
    }
}

impl SkillsConfig {
    /// No empty path or name.
    pub(super) fn validate(&self, origin: &Origin) -> Result<(), ConfigError> {
        if self.paths.iter().any(|p| p.trim().is_empty()) {
            return Err(invalid(origin, "skills.paths", "a path is empty"));
        }
        if self.disabled.iter().any(|n| n.trim().is_empty()) {
            return Err(invalid(origin, "skills.disabled", "a name is empty"));
        }
        if self
            .catalogue_tokens
            .is_some_and(|t| !(100..=100_000).contains(&t))
        {
            return Err(invalid(
                origin,
                "skills.catalogue_tokens",
                "must be between 100 and 100000",
            ));
        }
        Ok(())
    }
}

impl MemoryConfig {
    /// Shares are between 0 and 1; a half-life is more than 0 days.
    pub(super) fn validate(&self, origin: &Origin) -> Result<(), ConfigError> {
        let share = |f: f64| (0.0..=1.0).contains(&f);
        for (key, value, ok, rule) in [
            (
                "memory.recall_floor",
                self.recall_floor,
                self.recall_floor.is_none_or(share),
                "must be between 0 and 1",
            ),
            (
                "memory.min_similarity",
                self.min_similarity,
                self.min_similarity.is_none_or(share),
                "must be between 0 and 1",
            ),
            (
                "memory.half_life_days",
                self.half_life_days,
                self.half_life_days.is_none_or(|d| d > 0.0 && d.is_finite()),
                "must be more than 0",
            ),
        ] {
            if !ok {
                return Err(invalid(
                    origin,
                    key,
                    format!("{rule}, got {}", value.unwrap_or_default()),
                ));
            }
        }
        Ok(())
    }
}

impl HooksConfig {
    /// Each hook, named by its event and its place among that event's hooks.
    pub(super) fn validate(&self, origin: &Origin) -> Result<(), ConfigError> {
        let mut index: BTreeMap<&str, usize> = BTreeMap::new();
        for (event, hook) in self.all() {
            let n = index.entry(event.as_str()).or_default();
            let key = format!("hooks.{}[{n}]", event.as_str());
            *n += 1;
            hook.validate(&key, origin)?;
        }
        Ok(())
    }
}

/// A `[[hooks.EVENT]]` table (the hooks runner's type, read as written).
impl HookSpec {
    /// A command or an http(s) URL, not both; secrets only for a URL, one way.
    fn validate(&self, key: &str, origin: &Origin) -> Result<(), ConfigError> {
        let invalid = |message: String| invalid(origin, key, message);
        match (&self.command, &self.url) {
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
        if self.command.is_some() && (self.secret.is_some() || self.secret_env.is_some()) {
            return Err(invalid(
                "`secret` and `secret_env` sign `url` requests; a `command` hook takes neither"
                    .into(),
            ));
        }
        if self.secret.is_some() && self.secret_env.is_some() {
            return Err(invalid("give `secret` or `secret_env`, not both".into()));
        }
        if self.timeout_secs == Some(0) {
            return Err(invalid("`timeout_secs` must be at least 1".into()));
        }
        crate::core::hooks::Matcher::parse(self.matcher.as_deref())
            .map_err(|err| invalid(format!("`matcher`: {err}")))?;
        Ok(())
    }
}

impl WebConfig {
    /// Host rules that parse, limits of at least 1, a usable `[web.search]`.
    pub(super) fn validate(&self, origin: &Origin) -> Result<(), ConfigError> {
        let invalid = |key: &str, message: String| invalid(origin, format!("web.{key}"), message);
        for (key, rules) in [("allow", &self.allow), ("deny", &self.deny)] {
            if let Some(rule) = rules.iter().find(|rule| HostRule::parse(rule).is_none()) {
                return Err(invalid(
                    key,
                    format!(
                        "{rule:?} is not a host name (write `example.com`, `*.example.com` or `*`)"
                    ),
                ));
            }
        }
        if let Some(entry) = self
            .allow_private
            .iter()
            .find(|entry| PrivateAllow::parse(entry).is_none())
        {
            return Err(invalid(
                "allow_private",
                format!("{entry:?} is not an address, a network or a host name"),
            ));
        }
        for (key, value) in [
            ("max_bytes", self.max_bytes),
            ("timeout_secs", self.timeout_secs),
        ] {
            if value == Some(0) {
                return Err(invalid(key, "must be at least 1".into()));
            }
        }
        match &self.search {
            Some(search) => search.validate(&invalid),
            None => Ok(()),
        }
    }
}

impl WebSearchConfig {
    /// An http(s) URL where one is given or needed, a key for the APIs that
    /// take one, 1 to 20 results.
    fn validate(&self, invalid: &impl Fn(&str, String) -> ConfigError) -> Result<(), ConfigError> {
        if let Some(url) = &self.url {
            let http = reqwest::Url::parse(url)
                .is_ok_and(|parsed| matches!(parsed.scheme(), "http" | "https"));
            if !http {
                return Err(invalid(
                    "search.url",
                    format!("{url:?} is not an http(s) URL"),
                ));
            }
        }
        match self.backend {
            SearchBackend::Searxng if self.url.is_none() => {
                return Err(invalid(
                    "search.url",
                    "a SearXNG backend needs the instance's URL".into(),
                ));
            }
            SearchBackend::Brave | SearchBackend::Tavily if self.api_key_env.is_none() => {
                return Err(invalid(
                    "search.api_key_env",
                    "Brave and Tavily need the environment variable holding the API key".into(),
                ));
            }
            SearchBackend::Searxng | SearchBackend::Brave | SearchBackend::Tavily => {}
        }
        if matches!(self.max_results, Some(0) | Some(21..)) {
            return Err(invalid("search.max_results", "must be 1 to 20".into()));
        }
        Ok(())
    }
}

impl SubagentsConfig {
    pub(super) fn validate(&self, origin: &Origin) -> Result<(), ConfigError> {
        if let Some(n) = self.max_parallel
            && !(1..=64).contains(&n)
        {
            return Err(invalid(
                origin,
                "subagents.max_parallel",
                format!("must be from 1 to 64, got {n}"),
            ));
        }
        if let Some(n) = self.max_turns
            && !(1..=1000).contains(&n)
        {
            return Err(invalid(
                origin,
                "subagents.max_turns",
                format!("must be from 1 to 1000, got {n}"),
            ));
        }
        Ok(())
    }
}

impl HttpConfig {
    /// An address to bind, limits of at least 1, CORS origins that are origins.
    pub(super) fn validate(&self, origin: &Origin) -> Result<(), ConfigError> {
        let invalid = |key: &str, message: String| invalid(origin, format!("http.{key}"), message);
        if let Some(bind) = &self.bind
            && bind.parse::<std::net::SocketAddr>().is_err()
        {
            return Err(invalid(
                "bind",
                format!("expected an address such as \"127.0.0.1:8787\", got {bind:?}"),
            ));
        }
        if self.token_env.as_ref().is_some_and(|n| n.trim().is_empty()) {
            return Err(invalid("token_env", "must not be empty".into()));
        }
        if self.body_limit_bytes == Some(0) {
            return Err(invalid("body_limit_bytes", "must be at least 1".into()));
        }
        if self.rate_limit_burst == Some(0) {
            return Err(invalid("rate_limit_burst", "must be at least 1".into()));
        }
        let is_origin = |o: &String| {
            o == "*"
                || ((o.starts_with("http://") || o.starts_with("https://"))
                    && !o.ends_with('/')
                    && o.is_ascii())
        };
        if let Some(bad) = self.cors_origins.iter().find(|o| !is_origin(o)) {
            return Err(invalid(
                "cors_origins",
                format!(
                    "expected \"*\" or an origin such as \"https://app.example\" (scheme, host, optional port, no path), got {bad:?}"
                ),
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn origin() -> Origin {
        Origin::File("/c.toml".into())
    }

    /// The file `text` checked: its error as the user reads it.
    fn check(text: &str) -> Result<(), String> {
        let file: FileConfig = toml::from_str(text).map_err(|e| format!("parse: {e}"))?;
        file.validate(&origin()).map_err(|e| e.to_string())
    }

    /// Each rule with a file it accepts, one it refuses, and how the refusal
    /// starts after `config file /c.toml: `.
    fn table(rules: &[(&str, &str, &str)]) {
        for (valid, invalid, expected) in rules {
            assert_eq!(check(valid), Ok(()), "{valid}");
            let err = check(invalid).err().unwrap_or_default();
            let expected = format!("config file /c.toml: {expected}");
            assert!(
                err.starts_with(&expected),
                "{invalid}\n  got {err}\n  not {expected}"
            );
        }
    }

    #[test]
    fn provider_tables() {
        let p = |body: &str| format!("[providers.p]\n{body}\n");
        table(&[
            (
                "[providers.a]\nkind = \"openai\"",
                "[providers.\"a/b\"]\nkind = \"openai\"",
                "providers.a/b.: a provider name must be non-empty and without '/'",
            ),
            (
                &p("kind = \"scripted\"\nscript = \"s\""),
                &p("kind = \"scripted\""),
                "providers.p.script: a scripted provider needs `script = \"FILE\"`",
            ),
            (
                &p("kind = \"anthropic\""),
                &p("kind = \"anthropic\"\nscript = \"s\""),
                "providers.p.script: only a scripted provider takes a script",
            ),
            (
                &p("kind = \"openai\"\nbase_url = \"https://h/v1\""),
                &p("kind = \"openai\"\nbase_url = \"ftp://h\""),
                "providers.p.base_url: must start with http:// or https://",
            ),
            (
                &p("kind = \"failover\"\nmembers = [\"a/m\"]"),
                &p("kind = \"failover\""),
                "providers.p.members: a failover provider needs `members",
            ),
            (
                &p("kind = \"openai\"\nmembers = []"),
                &p("kind = \"openai\"\nmembers = [\"a/m\"]"),
                "providers.p.members: only a failover provider has members",
            ),
            (
                &p("kind = \"openai\"\nattempts = 1\ntimeout_secs = 1\nmax_tokens = 1"),
                &p("kind = \"openai\"\nmax_tokens = 0"),
                "providers.p.: timeout_secs, attempts and max_tokens must be at least 1",
            ),
            (
                &p("kind = \"openai\"\nmodels = [\"m\"]"),
                &p("kind = \"openai\"\nmodels = [\"m\", \" \"]"),
                "providers.p.models: model names must not be empty",
            ),
        ]);
    }

    #[test]
    fn provider_reasoning_efforts() {
        let p = |body: &str| format!("[providers.p]\n{body}\n");
        table(&[
            (
                &p("kind = \"openai\"\nreasoning_efforts = [\"low\", \"x-2\"]"),
                &p("kind = \"anthropic\"\nreasoning_efforts = [\"low\"]"),
                "providers.p.reasoning_efforts: only an OpenAI-compatible provider",
            ),
            (
                &p("kind = \"openai\"\nreasoning_efforts = [\"high\"]"),
                &p("kind = \"openai\"\nreasoning_efforts = [\"High\"]"),
                "providers.p.reasoning_efforts: each effort is a short lower-case word",
            ),
            (
                &p("kind = \"openai\"\nreasoning_efforts = [\"low\", \"high\"]"),
                &p("kind = \"openai\"\nreasoning_efforts = [\"low\", \"low\"]"),
                "providers.p.reasoning_efforts: an effort is listed twice",
            ),
            (
                &p("kind = \"openai\"\nreasoning_efforts = [\"low\"]\nreasoning_effort = \"low\""),
                &p("kind = \"openai\"\nreasoning_efforts = [\"low\"]\nreasoning_effort = \"high\""),
                "providers.p.reasoning_effort: must be one of `reasoning_efforts`",
            ),
        ]);
    }

    #[test]
    fn shell_safety_and_paths() {
        table(&[
            (
                "[shell]\ndeny = [\"rm -rf\"]\nallow = [\"cargo test\"]",
                "[shell]\ndeny = [\"rm | x\"]",
                "shell.deny: the command rule \"rm | x\" contains '|'",
            ),
            (
                "[shell]\ntimeout_secs = 1",
                "[shell]\ntimeout_secs = 0",
                "shell.timeout_secs: must be at least 1",
            ),
            (
                "[safety]\nmax_output_bytes = 1",
                "[safety]\nmax_output_bytes = 0",
                "safety.max_output_bytes: must be at least 1",
            ),
            (
                "[paths]\nprotected = [\"secrets/\", \"/etc/x\"]",
                "[paths]\nprotected = [\"a/../b\"]",
                "paths.protected: \"a/../b\" is not a path to protect (empty, or with `..`)",
            ),
            (
                "[paths]\nprotected = [\"x\"]",
                "[paths]\nprotected = [\" / \"]",
                "paths.protected: \" / \" is not a path to protect",
            ),
            (
                "[paths]\nunprotected = [\".git/hooks/\", \".codex\"]",
                "[paths]\nunprotected = [\"src\"]",
                "paths.unprotected: \"src\" is not a built-in protected path; those are .claude, .codex",
            ),
        ]);
    }

    #[test]
    fn top_level_keys() {
        table(&[
            (
                "currency = \"credits\"",
                "currency = \" \"",
                "currency: must not be empty (an ISO 4217 code",
            ),
            (
                "compact_at = 0.0",
                "compact_at = 1.5",
                "compact_at: must be between 0 and 1, got 1.5",
            ),
            (
                "mcp_call_timeout_secs = 1",
                "mcp_call_timeout_secs = 0",
                "mcp_call_timeout_secs: must be at least 1",
            ),
            (
                "mcp_start_timeout_secs = 1",
                "mcp_start_timeout_secs = 0",
                "mcp_start_timeout_secs: must be at least 1",
            ),
            (
                "session_lease_secs = 1",
                "session_lease_secs = 0",
                "session_lease_secs: must be at least 1",
            ),
        ]);
    }

    #[test]
    fn model_tables() {
        table(&[
            (
                "[models.\"m\"]\nimages = true",
                "[models.\" \"]\nimages = true",
                "models: a model name must not be empty",
            ),
            (
                "[models.\"m\"]\ncontext_window = 1",
                "[models.\"m\"]\ncontext_window = 0",
                "models.\"m\".context_window: must be at least 1",
            ),
            (
                "[models.\"m\"]\ninput_price = 0.0\noutput_price = 1.0\ncached_input_price = 0.1",
                "[models.\"m\"]\ninput_price = 1.0\noutput_price = nan",
                "models.\"m\".output_price: a price must be a number of zero or more, got NaN",
            ),
            (
                "[models.\"m\"]\ninput_price = 1.0\noutput_price = 1.0",
                "[models.\"m\"]\ncached_input_price = 1.0",
                "models.\"m\".input_price: a priced model needs both input_price and output_price",
            ),
        ]);
    }

    #[test]
    fn tool_names() {
        table(&[
            (
                "[tools]\nwrite_file = \"deny\"\n\"github__create_issue\" = \"ask\"",
                "[tools]\nwrite_fle = \"deny\"",
                "tools.write_fle: no such tool; did you mean `write_file`? the built-in tools are read_file,",
            ),
            (
                "[tools]\nweb_search = \"allow\"",
                "[tools]\nbrowse = \"deny\"",
                "tools.browse: no such tool; the built-in tools are",
            ),
        ]);
    }

    #[test]
    fn mcp_server_tables() {
        let url = "[mcpServers.x]\nurl = \"http://h/mcp\"";
        let cmd = "[mcpServers.x]\ncommand = \"a\"";
        table(&[
            (
                "[mcpServers.a-b_9]\ncommand = \"a\"",
                "[mcpServers.\"a.b\"]\ncommand = \"a\"",
                "mcpServers.a.b: a server name must be 1 to 64 letters",
            ),
            (
                "[mcpServers.x]\ntype = \"http\"\nurl = \"http://h/mcp\"",
                "[mcpServers.x]\ntype = \"sse\"\nurl = \"http://h/sse\"",
                "mcpServers.x.type: the SSE transport is not supported",
            ),
            (
                "[mcpServers.x]\ntype = \"stdio\"\ncommand = \"a\"",
                "[mcpServers.x]\ntype = \"ws\"\ncommand = \"a\"",
                "mcpServers.x.type: expected \"stdio\" or \"http\", got \"ws\"",
            ),
            (
                cmd,
                "[mcpServers.x]\ncommand = \"a\"\nurl = \"http://h\"",
                "mcpServers.x: set either `command`",
            ),
            (
                url,
                "[mcpServers.x]\nargs = [\"a\"]",
                "mcpServers.x: set `command`",
            ),
            (
                cmd,
                "[mcpServers.x]\ncommand = \" \"",
                "mcpServers.x.command: must not be empty",
            ),
            (
                cmd,
                "[mcpServers.x]\ntype = \"http\"\ncommand = \"a\"",
                "mcpServers.x.type: type \"http\" needs `url`, not `command`",
            ),
            (
                "[mcpServers.x]\ncommand = \"a\"\nenv = { A = \"b\" }",
                "[mcpServers.x]\ncommand = \"a\"\nheaders = { A = \"b\" }",
                "mcpServers.x.headers: only a `url` server takes headers",
            ),
            (
                cmd,
                "[mcpServers.x]\ncommand = \"a\"\nenv = { \"A=B\" = \"b\" }",
                "mcpServers.x.env: \"A=B\" is not a variable name",
            ),
        ]);
    }

    #[test]
    fn mcp_url_servers() {
        table(&[
            (
                "[mcpServers.x]\nurl = \"https://h/mcp\"",
                "[mcpServers.x]\nurl = \"ftp://h\"",
                "mcpServers.x.url: expected an http:// or https:// URL, got \"ftp://h\"",
            ),
            (
                "[mcpServers.x]\nurl = \"http://h\"",
                "[mcpServers.x]\ntype = \"stdio\"\nurl = \"http://h\"",
                "mcpServers.x.type: type \"stdio\" needs `command`, not `url`",
            ),
            (
                "[mcpServers.x]\nurl = \"http://h\"",
                "[mcpServers.x]\nurl = \"http://h\"\nargs = [\"a\"]",
                "mcpServers.x.url: a `url` server takes `headers`, not `args` or `env`",
            ),
            (
                "[mcpServers.x]\nurl = \"http://h\"\nheaders = { \"X-Key\" = \"v\" }",
                "[mcpServers.x]\nurl = \"http://h\"\nheaders = { \"A B\" = \"v\" }",
                "mcpServers.x.headers: \"A B\" is not a header name",
            ),
        ]);
    }

    #[test]
    fn budget_and_memory() {
        table(&[
            (
                "[budget]\nrun = 0.5\nsession = 2.0",
                "[budget]\nrun = -1",
                "budget.run: must be a positive amount, got -1",
            ),
            (
                "[budget.daily]\nopenai = 1.0",
                "[budget.daily]\nopenai = 0",
                "budget.daily.openai: must be a positive amount, got 0",
            ),
            (
                "[memory]\nrecall_floor = 1.0",
                "[memory]\nrecall_floor = 1.5",
                "memory.recall_floor: must be between 0 and 1, got 1.5",
            ),
            (
                "[memory]\nmin_similarity = 0.0",
                "[memory]\nmin_similarity = -0.1",
                "memory.min_similarity: must be between 0 and 1, got -0.1",
            ),
            (
                "[memory]\nhalf_life_days = 0.5",
                "[memory]\nhalf_life_days = 0",
                "memory.half_life_days: must be more than 0, got 0",
            ),
            (
                "[skills]\npaths = [\"~/s\"]",
                "[skills]\npaths = [\" \"]",
                "skills.paths: a path is empty",
            ),
            (
                "[skills]\ndisabled = [\"a\"]",
                "[skills]\ndisabled = [\"\"]",
                "skills.disabled: a name is empty",
            ),
            (
                "[skills]\ncatalogue_tokens = 500",
                "[skills]\ncatalogue_tokens = 50",
                "skills.catalogue_tokens: must be between 100 and 100000",
            ),
        ]);
    }

    #[test]
    fn hook_tables() {
        let command = "[[hooks.PreToolUse]]\ncommand = \"true\"";
        let url = "[[hooks.Stop]]\nurl = \"http://127.0.0.1:1/h\"\nsecret_env = \"S\"";
        table(&[
            (
                command,
                "[[hooks.PreToolUse]]\ncommand = \"true\"\n[[hooks.PreToolUse]]\ncommand = \" \"",
                "hooks.PreToolUse[1]: `command` is empty",
            ),
            (
                url,
                "[[hooks.Stop]]\nurl = \"not a url\"",
                "hooks.Stop[0]: `url` is not a URL: ",
            ),
            (
                url,
                "[[hooks.Stop]]\nurl = \"ftp://h/x\"",
                "hooks.Stop[0]: `url` must be http or https, got ftp",
            ),
            (
                command,
                "[[hooks.Stop]]\ncommand = \"true\"\nurl = \"http://h\"",
                "hooks.Stop[0]: give `command` or `url`, not both",
            ),
            (
                command,
                "[[hooks.Stop]]\nmatcher = \"*\"",
                "hooks.Stop[0]: give `command` or `url`",
            ),
            (
                url,
                "[[hooks.Stop]]\ncommand = \"true\"\nsecret = \"s\"",
                "hooks.Stop[0]: `secret` and `secret_env` sign `url` requests",
            ),
            (
                url,
                "[[hooks.Stop]]\nurl = \"http://h\"\nsecret = \"s\"\nsecret_env = \"S\"",
                "hooks.Stop[0]: give `secret` or `secret_env`, not both",
            ),
            (
                "[[hooks.Stop]]\ncommand = \"true\"\ntimeout_secs = 1",
                "[[hooks.Stop]]\ncommand = \"true\"\ntimeout_secs = 0",
                "hooks.Stop[0]: `timeout_secs` must be at least 1",
            ),
            (
                "[[hooks.PreToolUse]]\ncommand = \"true\"\nmatcher = \"Edit|Write\"",
                "[[hooks.PreToolUse]]\ncommand = \"true\"\nmatcher = \"(\"",
                "hooks.PreToolUse[0]: `matcher`: not a regular expression",
            ),
        ]);
    }

    #[test]
    fn web_tables() {
        let search = |body: &str| format!("[web.search]\n{body}\n");
        table(&[
            (
                "[web]\nallow = [\"example.com\", \"*\"]\ndeny = [\"*.ads.example\"]",
                "[web]\ndeny = [\"http://x\"]",
                "web.deny: \"http://x\" is not a host name",
            ),
            (
                "[web]\nallow_private = [\"127.0.0.1\", \"10.0.0.0/8\", \"localhost\"]",
                "[web]\nallow_private = [\"10.0.0.0/99\"]",
                "web.allow_private: \"10.0.0.0/99\" is not an address, a network or a host name",
            ),
            (
                "[web]\nmax_bytes = 1\ntimeout_secs = 1",
                "[web]\ntimeout_secs = 0",
                "web.timeout_secs: must be at least 1",
            ),
            (
                &search("backend = \"searxng\"\nurl = \"http://127.0.0.1:1\""),
                &search("backend = \"searxng\"\nurl = \"ftp://h\""),
                "web.search.url: \"ftp://h\" is not an http(s) URL",
            ),
            (
                &search("backend = \"searxng\"\nurl = \"https://s.example\""),
                &search("backend = \"searxng\""),
                "web.search.url: a SearXNG backend needs the instance's URL",
            ),
            (
                &search("backend = \"brave\"\napi_key_env = \"K\""),
                &search("backend = \"tavily\""),
                "web.search.api_key_env: Brave and Tavily need the environment variable",
            ),
            (
                &search("backend = \"brave\"\napi_key_env = \"K\"\nmax_results = 20"),
                &search("backend = \"brave\"\napi_key_env = \"K\"\nmax_results = 21"),
                "web.search.max_results: must be 1 to 20",
            ),
        ]);
    }

    #[test]
    fn subagent_and_http_tables() {
        table(&[
            (
                "[subagents]\nmax_parallel = 64",
                "[subagents]\nmax_parallel = 0",
                "subagents.max_parallel: must be from 1 to 64, got 0",
            ),
            (
                "[subagents]\nmax_turns = 1000",
                "[subagents]\nmax_turns = 1001",
                "subagents.max_turns: must be from 1 to 1000, got 1001",
            ),
            (
                "[http]\nbind = \"[::1]:8787\"",
                "[http]\nbind = \"localhost:8787\"",
                "http.bind: expected an address such as \"127.0.0.1:8787\", got \"localhost:8787\"",
            ),
            (
                "[http]\ntoken_env = \"T\"",
                "[http]\ntoken_env = \" \"",
                "http.token_env: must not be empty",
            ),
            (
                "[http]\nbody_limit_bytes = 1",
                "[http]\nbody_limit_bytes = 0",
                "http.body_limit_bytes: must be at least 1",
            ),
            (
                "[http]\nrate_limit_burst = 1\nrate_limit_per_minute = 0",
                "[http]\nrate_limit_burst = 0",
                "http.rate_limit_burst: must be at least 1",
            ),
            (
                "[http]\ncors_origins = [\"*\", \"https://app.example:8443\"]",
                "[http]\ncors_origins = [\"https://app.example/\"]",
                "http.cors_origins: expected \"*\" or an origin",
            ),
        ]);
    }

    /// Each section's rules are its own: called on the section alone, they
    /// name the same key.
    #[test]
    fn a_section_checks_itself() {
        let shell = ShellConfig {
            timeout_secs: Some(0),
            ..ShellConfig::default()
        };
        let err = shell.validate(&origin()).err().map(|e| e.to_string());
        assert_eq!(
            err.as_deref(),
            Some("config file /c.toml: shell.timeout_secs: must be at least 1")
        );
        assert!(ShellConfig::default().validate(&origin()).is_ok());
    }
}
