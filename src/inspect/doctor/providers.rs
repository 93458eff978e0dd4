//! The providers' checks: each configured provider set up, with a model,
//! and (with `--online`) answering.

use std::fmt::Display;

use super::{Check, config_file};
use crate::app::wiring::Access;
use crate::config::{Config, ProviderConfig, Sourced};
use crate::core::provider::Providers;
use crate::core::turn::LoopConfig;
use crate::providers::{Problem, ProviderKind};

const NONE: &str = "none configured: run `pincer login`, or set OPENAI_API_KEY (OPENAI_BASE_URL for a \
                    local server) and pass --model to `pincer run` (docs/providers.md)";

/// A check a configured provider, after one that says when there is none.
pub(super) async fn checks(
    config: &Config,
    env: &dyn Fn(&str) -> Option<String>,
    online: bool,
) -> Vec<Check> {
    let (built, problems) = crate::app::wiring::providers(config);
    let mut checks = Vec::new();
    if config.providers.is_empty() {
        checks.push(Check::fail("providers", NONE));
    }
    let context = Context {
        config,
        built,
        problems,
        loop_config: crate::app::wiring::runtime_config(config).loop_config,
        config_file: config_file(config),
        env,
        online,
    };
    for (name, provider) in &config.providers {
        checks.push(context.check(name, provider).await);
    }
    checks
}

/// What every provider's check reads.
struct Context<'a> {
    config: &'a Config,
    /// The providers as built, for the window a server states.
    built: Providers,
    /// What building them found wrong.
    problems: Vec<Problem>,
    loop_config: LoopConfig,
    config_file: String,
    env: &'a dyn Fn(&str) -> Option<String>,
    online: bool,
}

impl Context<'_> {
    async fn check(&self, name: &str, provider: &Sourced<ProviderConfig>) -> Check {
        let what = format!("provider {name}");
        let prefix = format!("provider {name}:");
        let setup: Vec<&str> = self
            .problems
            .iter()
            .filter(|p| !p.new_sessions_only && p.message.starts_with(&prefix))
            .map(|p| p.message.as_str())
            .collect();
        if !setup.is_empty() {
            return Check::fail(what, setup.join("; "));
        }
        let p = &provider.value;
        let is_default = self
            .config
            .provider
            .as_ref()
            .is_some_and(|d| d.value == name);
        let default_model = self
            .config
            .model
            .as_ref()
            .filter(|_| is_default)
            .map(|m| m.value.as_str());
        let access = crate::app::wiring::access(p, self.env);
        let mut detail = describe(p.kind.as_str(), &provider.origin, is_default, &access);
        let Some(model) = model_for(default_model, &p.models, &p.kind) else {
            if p.kind == ProviderKind::Failover {
                return Check::ok(what, detail);
            }
            let fix = no_model_fix(name, is_default, &self.config_file);
            return Check::fail(what, format!("{detail}; no model: {fix}"));
        };
        detail.push_str(&format!(", model {model}"));
        let remote = matches!(p.kind, ProviderKind::Openai | ProviderKind::Anthropic);
        if !(self.online && remote) {
            return Check::ok(what, detail);
        }
        self.ask(name, &p.kind, &access, &model, what, detail).await
    }

    /// Asks the provider for its models, and the model's window.
    async fn ask(
        &self,
        name: &str,
        kind: &ProviderKind,
        access: &Access,
        model: &str,
        what: String,
        detail: String,
    ) -> Check {
        let answered = crate::providers::list_models(
            kind,
            access.base_url.as_deref(),
            access.api_key.as_deref(),
            std::time::Duration::from_secs(5),
        )
        .await;
        match answered {
            Ok(models) => {
                let window = crate::core::models::Window::resolve(
                    self.loop_config.configured_window(model),
                    self.built.window_source(name).as_deref(),
                    model,
                )
                .await;
                Check::ok(
                    what,
                    format!(
                        "{detail}; answers ({} models listed); window {} tokens, {}",
                        models.len(),
                        window.tokens,
                        window.origin
                    ),
                )
            }
            Err(err) => Check::fail(
                what,
                format!(
                    "{detail}; does not answer: {err} (check the URL or key; `pincer login` checks both)"
                ),
            ),
        }
    }
}

/// A provider's kind, where it was configured, and how it is reached.
fn describe(kind: &str, origin: &dyn Display, is_default: bool, access: &Access) -> String {
    let mut detail = format!("{kind} from {origin}");
    if is_default {
        detail.push_str(", the default");
    }
    if let Some(url) = &access.base_url {
        detail.push_str(&format!(", {url}"));
    }
    if access.api_key.is_some() {
        detail.push_str(", key set");
    }
    detail
}

/// The model a provider's sessions would get: the configured default
/// model (for the default provider), its first model, or the script's.
fn model_for(
    default_model: Option<&str>,
    models: &[String],
    kind: &ProviderKind,
) -> Option<String> {
    default_model
        .map(str::to_owned)
        .or_else(|| models.first().cloned())
        .or_else(|| {
            (*kind == ProviderKind::Scripted).then(|| crate::providers::SCRIPTED_MODEL.to_owned())
        })
}

/// Where to name a model for a provider without one.
fn no_model_fix(name: &str, is_default: bool, config_file: &str) -> String {
    if is_default {
        format!(
            "set `model = \"...\"` in {config_file} or PINCER_MODEL, or `models = [\"...\"]` in [providers.{name}]"
        )
    } else {
        format!("set `models = [\"...\"]` in [providers.{name}] of {config_file}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_model_is_the_default_then_the_first_then_the_scripts() {
        let models = vec!["small".to_owned(), "large".to_owned()];
        assert_eq!(
            model_for(Some("large"), &models, &ProviderKind::Openai).as_deref(),
            Some("large")
        );
        assert_eq!(
            model_for(None, &models, &ProviderKind::Openai).as_deref(),
            Some("small")
        );
        assert_eq!(
            model_for(None, &[], &ProviderKind::Scripted).as_deref(),
            Some(crate::providers::SCRIPTED_MODEL)
        );
        assert_eq!(model_for(None, &[], &ProviderKind::Anthropic), None);
    }

    #[test]
    fn the_detail_names_origin_default_url_and_key() {
        let access = Access {
            key_var: "OPENAI_API_KEY".into(),
            api_key: Some("sk-x".into()),
            base_url: Some("http://127.0.0.1:8080/v1".into()),
        };
        assert_eq!(
            describe("openai", &"the config file", true, &access),
            "openai from the config file, the default, http://127.0.0.1:8080/v1, key set"
        );
        let bare = Access {
            key_var: String::new(),
            api_key: None,
            base_url: None,
        };
        assert_eq!(
            describe("scripted", &"--script", false, &bare),
            "scripted from --script"
        );
    }

    #[test]
    fn the_fix_for_no_model_depends_on_being_the_default() {
        assert_eq!(
            no_model_fix("local", true, "/c.toml"),
            "set `model = \"...\"` in /c.toml or PINCER_MODEL, or `models = [\"...\"]` in [providers.local]"
        );
        assert_eq!(
            no_model_fix("local", false, "/c.toml"),
            "set `models = [\"...\"]` in [providers.local] of /c.toml"
        );
    }
}
