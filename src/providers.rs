//! Model providers: implementations of [`crate::core::provider::Provider`], and
//! building the set a runtime uses from the configuration.

pub mod anthropic;
pub mod failover;
#[cfg(test)]
pub mod fixture;
pub mod openai;
pub mod scripted;

use std::sync::Arc;

use futures::StreamExt;

use crate::config::{Config, ProviderKind};
use crate::core::provider::{
    ModelChoice, ModelRequest, Provider, ProviderEntry, ProviderError, ProviderErrorKind,
    ProviderStream, Providers,
};

/// The model name a scripted provider offers when its config lists none.
const SCRIPTED_MODEL: &str = "script";

/// Builds the configured providers. A provider that cannot be set up (a missing
/// script) is kept but fails every turn with the reason, which is also returned,
/// so an editor session still starts and shows the user what is wrong.
pub fn build(config: &Config) -> (Providers, Vec<String>) {
    let mut problems = Vec::new();
    let mut entries = Vec::new();
    for (name, provider) in &config.providers {
        let provider = &provider.value;
        let built: Result<Arc<dyn Provider>, String> = match provider.kind {
            ProviderKind::Scripted => match &provider.script {
                Some(path) => scripted::ScriptedProvider::load(name, path)
                    .map(|p| Arc::new(p) as Arc<dyn Provider>)
                    .map_err(|err| err.to_string()),
                None => Err(format!("provider {name}: no script configured")),
            },
        };
        let provider_impl = built.unwrap_or_else(|message| {
            problems.push(message.clone());
            Arc::new(Unavailable {
                name: name.clone(),
                message,
            })
        });
        let models = if provider.models.is_empty() {
            vec![SCRIPTED_MODEL.to_owned()]
        } else {
            provider.models.clone()
        };
        entries.push(ProviderEntry {
            name: name.clone(),
            models,
            provider: provider_impl,
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
    (Providers::new(entries, default), problems)
}

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
