//! Configuration → the provider set: each `[providers.NAME]` table (and the
//! implicit `openai` / `anthropic` ones and `pincer login`'s) made into its
//! implementation, with retries, failover members and the default model.

use std::sync::Arc;

use crate::config::{Config, ProviderConfig, ProviderKind};
use crate::core::provider::{ModelChoice, Provider, ProviderEntry, Providers};
use crate::providers::failover::{self, Member};
use crate::providers::{
    DEFAULT_TIMEOUT_SECS, Problem, SCRIPTED_MODEL, Unavailable, anthropic, openai, scripted,
};

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
                let unavailable: Arc<dyn Provider> =
                    Arc::new(Unavailable::new(name.clone(), message));
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
            thought: crate::core::provider::ThoughtLevels {
                levels: provider.value.reasoning_efforts.clone(),
                default: provider.value.reasoning_effort.clone(),
            },
            window: window_asker(name, &provider.value, env),
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
        ProviderKind::Openai => openai::OpenAiProvider::new(openai_settings(name, provider, env)?)
            .map(|p| Arc::new(p) as Arc<dyn Provider>)
            .map_err(|err| err.message),
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

/// Where an OpenAI-compatible provider with a base URL of its own asks its
/// server for a model's context window (`openai::WindowAsker`; nothing is
/// asked until a run needs the window). OpenAI's own API cannot say, so the
/// vendor's URL gets none.
fn window_asker(
    name: &str,
    provider: &ProviderConfig,
    env: &dyn Fn(&str) -> Option<String>,
) -> Option<Arc<dyn crate::core::models::WindowSource>> {
    if provider.kind != ProviderKind::Openai || access(provider, env).base_url.is_none() {
        return None;
    }
    let settings = openai_settings(name, provider, env).ok()?;
    Some(Arc::new(openai::WindowAsker::new(&settings)))
}

/// How to reach an OpenAI-compatible provider: its URL (the vendor's by
/// default), key, headers and timeout. Local servers (Ollama, llama.cpp, LM
/// Studio) need no key; the vendor's API does: without one, fail now rather
/// than on the network.
fn openai_settings(
    name: &str,
    provider: &ProviderConfig,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<openai::OpenAiSettings, String> {
    let Access {
        key_var,
        api_key,
        base_url,
    } = access(provider, env);
    if api_key.is_none() && base_url.is_none() {
        return Err(format!(
            "provider {name}: no API key for api.openai.com: set {key_var}, run `pincer login`, \
             or set OPENAI_BASE_URL (or `base_url` in [providers.{name}]) for a local server"
        ));
    }
    Ok(openai::OpenAiSettings {
        name: name.to_owned(),
        base_url: base_url.unwrap_or_else(|| "https://api.openai.com/v1".to_owned()),
        api_key,
        headers: provider
            .headers
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect(),
        timeout: std::time::Duration::from_secs(
            provider.timeout_secs.unwrap_or(DEFAULT_TIMEOUT_SECS),
        ),
    })
}

/// The embeddings endpoint `[memory] embeddings = "PROVIDER/MODEL"` names:
/// an OpenAI-compatible provider's, with its key, URL and headers. `None`
/// when not configured; an error naming the problem when it cannot be.
pub fn embedder(
    config: &Config,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Option<Arc<dyn crate::core::semantic::Embedder>>, String> {
    let Some(choice) = config.memory.embeddings.as_deref() else {
        return Ok(None);
    };
    let Some((name, model)) = choice
        .split_once('/')
        .filter(|(name, model)| !name.is_empty() && !model.is_empty())
    else {
        return Err(format!(
            "memory.embeddings: expected PROVIDER/MODEL (for example openai/text-embedding-3-small), got {}",
            crate::core::quote::quote(choice)
        ));
    };
    let Some(provider) = config.providers.get(name) else {
        let known: Vec<&str> = config.providers.keys().map(String::as_str).collect();
        return Err(format!(
            "memory.embeddings: no provider named {} (configured: {})",
            crate::core::quote::quote(name),
            if known.is_empty() {
                "none".to_owned()
            } else {
                known.join(", ")
            }
        ));
    };
    if provider.value.kind != ProviderKind::Openai {
        return Err(format!(
            "memory.embeddings: provider {name} is of kind {}; embeddings come from an OpenAI-compatible provider (kind = \"openai\": OpenAI, Ollama, llama.cpp, vLLM)",
            provider.value.kind.as_str()
        ));
    }
    let settings = openai_settings(name, &provider.value, env)
        .map_err(|message| format!("memory.embeddings: {message}"))?;
    Ok(Some(Arc::new(openai::OpenAiEmbedder::new(settings, model))))
}
