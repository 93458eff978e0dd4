//! Model providers: implementations of [`crate::core::provider::Provider`], and
//! building the set a runtime uses from the configuration.

pub mod anthropic;
pub mod failover;
#[cfg(test)]
pub mod fixture;
pub mod openai;
pub mod scripted;
pub mod sse;

use std::sync::Arc;

use futures::StreamExt;

use self::failover::Member;
use crate::config::{Config, ProviderConfig, ProviderKind};
use crate::core::provider::{
    ModelChoice, ModelRequest, Provider, ProviderEntry, ProviderError, ProviderErrorKind,
    ProviderStream, Providers,
};

/// The model name a scripted provider offers when its config lists none.
pub(crate) const SCRIPTED_MODEL: &str = "script";

/// Where a provider's key and URL come from, and what they are.
pub struct Access {
    /// The variable the key is read from (for messages).
    pub key_var: String,
    pub api_key: Option<String>,
    /// Unset: the vendor's URL.
    pub base_url: Option<String>,
}

/// A provider's key and base URL: a login's own key (or none, for a local
/// server it points at), otherwise the environment's; the table's URL, else
/// the environment's.
pub fn access(provider: &ProviderConfig, env: &dyn Fn(&str) -> Option<String>) -> Access {
    let (key_var, url_var) = provider.kind.default_env().unwrap_or(("", ""));
    let key_var = provider
        .api_key_env
        .as_deref()
        .unwrap_or(key_var)
        .to_owned();
    let api_key = if provider.from_login {
        provider.api_key.clone()
    } else {
        env(&key_var).or_else(|| provider.api_key.clone())
    };
    let base_url = provider.base_url.clone().or_else(|| env(url_var));
    Access {
        key_var,
        api_key,
        base_url,
    }
}

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

/// Builds the configured providers. A provider that cannot be set up (a missing
/// script, a missing API key) is kept but fails every turn with the reason,
/// which is also returned, so an editor session still starts and shows the
/// user what is wrong.
pub fn build(config: &Config) -> (Providers, Vec<Problem>) {
    build_with(config, &|name| {
        std::env::var(name).ok().filter(|v| !v.is_empty())
    })
}

/// Like [`build`], reading API keys and base URLs through `env`.
pub fn build_with(
    config: &Config,
    env: &dyn Fn(&str) -> Option<String>,
) -> (Providers, Vec<Problem>) {
    let mut problems = Vec::new();
    // Each provider as it is, for failovers to retry as members; and as used on
    // its own (an HTTP provider wrapped in its retries), for sessions.
    let mut raw: std::collections::BTreeMap<String, Member> = Default::default();
    let mut built: std::collections::BTreeMap<String, Arc<dyn Provider>> = Default::default();
    // Members first: a failover provider refers to them by name.
    let (failovers, plain): (Vec<_>, Vec<_>) = config
        .providers
        .iter()
        .partition(|(_, p)| p.value.kind == ProviderKind::Failover);
    for (name, provider) in plain.into_iter().chain(failovers) {
        let made = make(name, &provider.value, &raw, env);
        let policy = retry_policy(&provider.value);
        let (provider_impl, on_its_own) = match made {
            Ok(made) => {
                let on_its_own: Arc<dyn Provider> = match provider.value.kind {
                    ProviderKind::Openai | ProviderKind::Anthropic => {
                        Arc::new(failover::Retrying::new(made.clone(), policy.clone()))
                    }
                    ProviderKind::Scripted | ProviderKind::Failover => made.clone(),
                };
                (made, on_its_own)
            }
            Err(message) => {
                problems.push(Problem {
                    message: message.clone(),
                    new_sessions_only: false,
                });
                let unavailable: Arc<dyn Provider> = Arc::new(Unavailable {
                    name: name.clone(),
                    message,
                });
                (unavailable.clone(), unavailable)
            }
        };
        // A member's own retry settings, when its table gives any.
        let own_policy = (provider.value.attempts.is_some() || provider.value.backoff_ms.is_some())
            .then_some(policy);
        raw.insert(
            name.clone(),
            Member {
                provider: provider_impl,
                model: None,
                policy: own_policy,
            },
        );
        built.insert(name.clone(), on_its_own);
    }
    let mut entries = Vec::new();
    for (name, provider) in &config.providers {
        let Some(provider_impl) = built.get(name) else {
            continue;
        };
        let models = match (&provider.value.kind, provider.value.models.is_empty()) {
            (ProviderKind::Scripted, true) => vec![SCRIPTED_MODEL.to_owned()],
            _ => provider.value.models.clone(),
        };
        // A script plays what it was written to; it takes images only when
        // its configuration says so, whatever its model is called.
        let images = match provider.value.kind {
            ProviderKind::Scripted => Some(provider.value.images.unwrap_or(false)),
            ProviderKind::Openai | ProviderKind::Anthropic | ProviderKind::Failover => {
                provider.value.images
            }
        };
        entries.push(ProviderEntry {
            name: name.clone(),
            models,
            provider: provider_impl.clone(),
            images,
        });
    }
    let default = config.provider.as_ref().map(|chosen| {
        let entry = entries.iter_mut().find(|entry| entry.name == chosen.value);
        let model = match (&config.model, entry) {
            (Some(model), Some(entry)) => {
                // A model named by flag or config is offered even if not listed.
                if !entry.models.contains(&model.value) {
                    entry.models.push(model.value.clone());
                }
                model.value.clone()
            }
            (Some(model), None) => model.value.clone(),
            (None, Some(entry)) => entry.models.first().cloned().unwrap_or_default(),
            (None, None) => String::new(),
        };
        ModelChoice {
            provider: chosen.value.clone(),
            model,
        }
    });
    for entry in &entries {
        let is_default = default.as_ref().is_some_and(|d| d.provider == entry.name);
        if entry.models.is_empty() && (is_default || default.is_none()) {
            problems.push(Problem {
                message: format!(
                    "provider {}: no model configured; set `models = [\"...\"]` in [providers.{}] or pass --model",
                    entry.name, entry.name
                ),
                new_sessions_only: true,
            });
        }
    }
    (Providers::new(entries, default), problems)
}

/// How a provider's turns are retried, from its table.
fn retry_policy(provider: &ProviderConfig) -> failover::RetryPolicy {
    let default = failover::RetryPolicy::default();
    failover::RetryPolicy {
        attempts: provider.attempts.unwrap_or(default.attempts),
        base_delay: provider
            .backoff_ms
            .map_or(default.base_delay, std::time::Duration::from_millis),
        ..default
    }
}

fn make(
    name: &str,
    provider: &ProviderConfig,
    built: &std::collections::BTreeMap<String, Member>,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Arc<dyn Provider>, String> {
    let timeout =
        std::time::Duration::from_secs(provider.timeout_secs.unwrap_or(DEFAULT_TIMEOUT_SECS));
    let headers: Vec<(String, String)> = provider
        .headers
        .iter()
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    let Access {
        key_var,
        api_key,
        base_url,
    } = access(provider, env);
    match provider.kind {
        ProviderKind::Scripted => match &provider.script {
            Some(path) => scripted::ScriptedProvider::load(name, path)
                .map(|p| Arc::new(p) as Arc<dyn Provider>)
                .map_err(|err| err.to_string()),
            None => Err(format!("provider {name}: no script configured")),
        },
        ProviderKind::Openai => {
            // Local servers (Ollama, llama.cpp, LM Studio) need no key; the
            // vendor's API does: without one, fail now rather than on the network.
            if api_key.is_none() && base_url.is_none() {
                return Err(format!(
                    "provider {name}: no API key for api.openai.com: set {key_var}, run `pincer login`, \
                     or set OPENAI_BASE_URL (or `base_url` in [providers.{name}]) for a local server"
                ));
            }
            let base_url = base_url.unwrap_or_else(|| "https://api.openai.com/v1".to_owned());
            openai::OpenAiProvider::new(openai::OpenAiSettings {
                name: name.to_owned(),
                base_url,
                api_key,
                headers,
                timeout,
            })
            .map(|p| Arc::new(p) as Arc<dyn Provider>)
            .map_err(|err| err.message)
        }
        ProviderKind::Anthropic => {
            let Some(api_key) = api_key else {
                return Err(format!(
                    "provider {name}: no API key: set {key_var}, run `pincer login`, \
                     or set `api_key_env` in [providers.{name}]"
                ));
            };
            anthropic::AnthropicProvider::new(anthropic::AnthropicSettings {
                name: name.to_owned(),
                base_url: base_url.unwrap_or_else(|| "https://api.anthropic.com".to_owned()),
                api_key: Some(api_key),
                headers,
                timeout,
                max_tokens: provider.max_tokens.unwrap_or(8192),
            })
            .map(|p| Arc::new(p) as Arc<dyn Provider>)
            .map_err(|err| err.message)
        }
        ProviderKind::Failover => {
            let mut members = Vec::new();
            for member in &provider.members {
                let (member_name, model) = match member.split_once('/') {
                    Some((p, m)) => (p, Some(m.to_owned())),
                    None => (member.as_str(), None),
                };
                let Some(member_impl) = built.get(member_name) else {
                    return Err(format!(
                        "provider {name}: member {member:?} names no configured provider (or another failover)"
                    ));
                };
                members.push(Member {
                    provider: member_impl.provider.clone(),
                    model,
                    policy: member_impl.policy.clone(),
                });
            }
            Ok(Arc::new(failover::Failover::new(
                name,
                members,
                retry_policy(provider),
            )))
        }
    }
}

/// Seconds a provider may take to connect or to send the next piece of a stream.
const DEFAULT_TIMEOUT_SECS: u64 = 60;

/// An HTTP client for model providers: rustls with the `ring` provider (no
/// system OpenSSL), HTTP/2 where the server offers it, `timeout` as the limit
/// for connecting and for each read (a stalled stream fails, a long one does not).
pub fn http_client(timeout: std::time::Duration) -> Result<reqwest::Client, reqwest::Error> {
    // Installing twice is harmless: the first provider stays.
    let _ = rustls::crypto::ring::default_provider().install_default();
    reqwest::Client::builder()
        .connect_timeout(timeout)
        .read_timeout(timeout)
        .user_agent(concat!("pincer/", env!("CARGO_PKG_VERSION")))
        .build()
}

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

/// Stands in for a provider whose setup failed.
struct Unavailable {
    name: String,
    message: String,
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
