//! Model providers: implementations of [`crate::core::provider::Provider`], and
//! building the set a runtime uses from the configuration.

pub mod ahead;
pub mod anthropic;
pub mod failover;
#[cfg(test)]
pub mod fixture;
pub mod openai;
pub mod scripted;
pub mod sse;

use futures::StreamExt;

use crate::core::provider::{
    ModelRequest, Provider, ProviderError, ProviderErrorKind, ProviderStream,
};
use crate::net::http_client;

/// The kinds of provider Pincer implements.
#[derive(Debug, Clone, PartialEq, Eq, serde::Deserialize, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ProviderKind {
    /// Replays a model script (`docs/scripted-provider.md`).
    Scripted,
    /// An OpenAI-compatible chat completions API (OpenAI, OpenRouter, Ollama,
    /// vLLM, llama.cpp, LM Studio).
    Openai,
    /// The Anthropic Messages API.
    Anthropic,
    /// Tries `members` in order, with retries and cooldowns.
    Failover,
}

impl ProviderKind {
    pub fn as_str(&self) -> &'static str {
        match self {
            ProviderKind::Scripted => "scripted",
            ProviderKind::Openai => "openai",
            ProviderKind::Anthropic => "anthropic",
            ProviderKind::Failover => "failover",
        }
    }

    /// The environment variables a provider of this kind reads by default:
    /// (API key, base URL).
    pub fn default_env(&self) -> Option<(&'static str, &'static str)> {
        match self {
            ProviderKind::Openai => Some(("OPENAI_API_KEY", "OPENAI_BASE_URL")),
            ProviderKind::Anthropic => Some(("ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL")),
            ProviderKind::Scripted | ProviderKind::Failover => None,
        }
    }
}

/// The model name a scripted provider offers when its config lists none.
pub const SCRIPTED_MODEL: &str = "script";

/// Something wrong with the providers' configuration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    pub message: String,
    /// Only new sessions are affected (no model to give them): a session
    /// that goes on has its own.
    pub new_sessions_only: bool,
}

impl std::fmt::Display for Problem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

/// Seconds a provider may take to connect or to send the next piece of a stream.
pub const DEFAULT_TIMEOUT_SECS: u64 = 60;

/// A provider's HTTP client, built on its first turn: the client and its TLS
/// root store cost memory and time that starting `pincer acp` (answering
/// `initialize` and `session/new`) does not need.
pub(crate) struct LazyClient {
    /// The provider's name, for the error if the client cannot be built.
    provider: String,
    /// Passed to [`http_client`].
    timeout: std::time::Duration,
    client: std::sync::OnceLock<reqwest::Client>,
}

impl LazyClient {
    pub(crate) fn new(provider: &str, timeout: std::time::Duration) -> Self {
        Self {
            provider: provider.to_owned(),
            timeout,
            client: std::sync::OnceLock::new(),
        }
    }

    /// The client, built now if this is the first call.
    pub(crate) fn get(&self) -> Result<&reqwest::Client, ProviderError> {
        if let Some(client) = self.client.get() {
            return Ok(client);
        }
        let built = http_client(self.timeout).map_err(|err| {
            ProviderError::new(
                ProviderErrorKind::Config,
                format!(
                    "provider {}: cannot set up the HTTP client: {err}",
                    self.provider
                ),
            )
        })?;
        // Two first turns at once may both build one; the first stays.
        Ok(self.client.get_or_init(|| built))
    }
}

/// `Retry-After` as seconds or an HTTP date; OpenAI also sends `retry-after-ms`.
pub(crate) fn retry_after(headers: &reqwest::header::HeaderMap) -> Option<std::time::Duration> {
    let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    if let Some(ms) = header("retry-after-ms").and_then(|v| v.trim().parse::<f64>().ok()) {
        return Some(std::time::Duration::from_secs_f64(ms.max(0.0) / 1000.0));
    }
    let value = header("retry-after")?.trim();
    if let Ok(seconds) = value.parse::<f64>() {
        return Some(std::time::Duration::from_secs_f64(seconds.max(0.0)));
    }
    static PARSER: jiff::fmt::rfc2822::DateTimeParser = jiff::fmt::rfc2822::DateTimeParser::new();
    let at = PARSER.parse_timestamp(value).ok()?;
    let wait = at.as_millisecond() - jiff::Timestamp::now().as_millisecond();
    Some(std::time::Duration::from_millis(
        u64::try_from(wait).unwrap_or(0),
    ))
}

/// Stands in for a provider whose setup failed: every turn fails with the reason.
pub struct Unavailable {
    name: String,
    message: String,
}

impl Unavailable {
    pub fn new(name: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            message: message.into(),
        }
    }
}

impl Provider for Unavailable {
    fn name(&self) -> &str {
        &self.name
    }

    fn stream(&self, _request: ModelRequest) -> ProviderStream {
        let error = ProviderError::new(ProviderErrorKind::Config, self.message.clone());
        futures::stream::once(async move { Err(error) }).boxed()
    }
}

/// Why [`list_models`] found no answer.
#[derive(Debug, thiserror::Error)]
pub enum ProbeError {
    #[error("the server refused the key (HTTP {0})")]
    Refused(u16),
    #[error("the server answered HTTP {0}")]
    Status(u16),
    #[error("cannot reach {url}: {message}")]
    Unreachable { url: String, message: String },
    #[error("cannot set up the HTTP client: {0}")]
    Client(String),
}

/// One cheap request that shows whether a provider answers and takes the
/// key: `GET {base}/models` (OpenAI-compatible) or `GET {base}/v1/models`
/// (Anthropic). The model ids it lists, when it lists any.
pub async fn list_models(
    kind: &ProviderKind,
    base_url: Option<&str>,
    api_key: Option<&str>,
    timeout: std::time::Duration,
) -> Result<Vec<String>, ProbeError> {
    let client = http_client(timeout).map_err(|e| ProbeError::Client(e.to_string()))?;
    let request = match kind {
        ProviderKind::Anthropic => {
            let base = base_url.unwrap_or("https://api.anthropic.com");
            let url = format!("{}/v1/models", base.trim_end_matches('/'));
            let mut request = client.get(url).header("anthropic-version", "2023-06-01");
            if let Some(key) = api_key {
                request = request.header("x-api-key", key);
            }
            request
        }
        ProviderKind::Openai | ProviderKind::Scripted | ProviderKind::Failover => {
            let base = base_url.unwrap_or("https://api.openai.com/v1");
            let url = format!("{}/models", base.trim_end_matches('/'));
            let mut request = client.get(url);
            if let Some(key) = api_key {
                request = request.bearer_auth(key);
            }
            request
        }
    };
    let url = base_url.unwrap_or("the provider").to_owned();
    let response = request
        .send()
        .await
        .map_err(|err| ProbeError::Unreachable {
            url: url.clone(),
            message: err.to_string(),
        })?;
    let status = response.status().as_u16();
    if status == 401 || status == 403 {
        return Err(ProbeError::Refused(status));
    }
    if !response.status().is_success() {
        return Err(ProbeError::Status(status));
    }
    // A server that answers but lists nothing readable still answered.
    let body: serde_json::Value = response.json().await.unwrap_or_default();
    Ok(body["data"]
        .as_array()
        .or_else(|| body["models"].as_array())
        .map(|models| {
            models
                .iter()
                .filter_map(|m| m["id"].as_str().or_else(|| m["name"].as_str()))
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default())
}
