//! The composition root: where Pincer is assembled. `App::open` loads the
//! configuration, opens the store and builds the runtime with its providers,
//! tools and MCP servers (`wiring` turns configuration into those parts);
//! faces get what they need from the `App`. Here too: the exit codes every
//! face maps to, the error type that carries one, and signal handling.
//! Nothing here names a face.

pub mod wiring;

use std::sync::Arc;

use crate::cli::{Cli, ProviderArgs};
use crate::config::Config;
pub use crate::config::Flags;
use crate::core::runtime::{Parts, Runtime};
use crate::store::Backend;

/// Exit codes, documented in the README.
pub mod exit {
    pub const OK: u8 = 0;
    pub const RUN_FAILED: u8 = 1;
    pub const USAGE: u8 = 2;
    pub const CANCELLED: u8 = 3;
    /// A run stopped at a spending limit (`[budget]`).
    pub const BUDGET: u8 = 4;
    /// `pincer run --session ID --no-wait`: another process runs the session.
    pub const BUSY: u8 = 5;
    /// `pincer send --wait`: not delivered in time (it still may be).
    pub const PENDING: u8 = 6;
}

/// An error with the exit code it maps to.
#[derive(Debug)]
pub struct Failure {
    pub code: u8,
    pub error: anyhow::Error,
}

impl Failure {
    pub fn usage(error: impl Into<anyhow::Error>) -> Self {
        Self {
            code: exit::USAGE,
            error: error.into(),
        }
    }

    pub fn failed(error: impl Into<anyhow::Error>) -> Self {
        Self {
            code: exit::RUN_FAILED,
            error: error.into(),
        }
    }
}

/// The assembled program: what every command that runs prompts needs.
pub struct App {
    pub config: Config,
    /// The journal's backend, for what only the backend answers (verify,
    /// metrics, the chat channels' outbox) and to stop it last.
    pub store: Arc<dyn Backend>,
    pub runtime: Runtime,
    /// Providers that could not be set up, with the reason: a face that
    /// stops on them reports them, one that goes on logs them
    /// ([`App::log_problems`]).
    pub problems: Vec<crate::providers::Problem>,
    /// The configured MCP servers; a face adds the servers its client passes.
    pub mcp: Arc<crate::mcp::Factory>,
    /// Memory search by meaning, when `[memory] embeddings` is set.
    pub semantic: Option<Arc<crate::core::semantic::Semantic>>,
    /// The skills of each workspace (`[skills]`, `docs/skills.md`).
    pub skills: Arc<dyn crate::core::skills::Skills>,
}

impl App {
    /// Loads the configuration, opens the store, and assembles the runtime
    /// with its providers, tools and MCP servers.
    pub async fn open(flags: &Flags) -> Result<App, Failure> {
        let config = Config::load(flags).map_err(Failure::usage)?;
        let (providers, problems) = wiring::providers(&config);
        let (store, recovery) = crate::store::open(&config.store_target())
            .await
            .map_err(Failure::failed)?;
        if !recovery.interrupted_runs.is_empty() {
            tracing::warn!(
                runs = recovery.interrupted_runs.len(),
                "marked runs left unfinished by an earlier process as failed"
            );
        }
        let gate =
            Arc::new(wiring::gate(&config, store.clone(), store.clone()).map_err(Failure::usage)?);
        crate::logging::redact_with(gate.safety.clone());
        let mcp = Arc::new(crate::mcp::Factory::new(wiring::mcp_settings(&config)));
        let mut semantic = None;
        let mut memories: Option<Arc<dyn crate::core::memory::Memories>> = None;
        if config.memory.enabled.unwrap_or(true) {
            let embedder = wiring::embedder(&config, &|name| {
                std::env::var(name).ok().filter(|v| !v.is_empty())
            })
            .map_err(|message| Failure::usage(anyhow::anyhow!(message)))?;
            memories = Some(match embedder {
                Some(embedder) => {
                    let min_similarity = config
                        .memory
                        .min_similarity
                        .map_or(crate::core::semantic::DEFAULT_MIN_SIMILARITY, |f| f as f32);
                    let layer = Arc::new(crate::core::semantic::Semantic::new(
                        store.clone(),
                        embedder,
                        min_similarity,
                    ));
                    semantic = Some(layer.clone());
                    layer
                }
                None => store.clone(),
            });
        }
        let skills = wiring::skills(&config, &|name| std::env::var(name).ok());
        let runtime = Runtime::from_parts(Parts {
            leases: Some((store.clone(), crate::store::process_tag().to_owned())),
            notifier: Some(store.clone()),
            memories,
            session_tools: Some(mcp.clone()),
            environment: Some(Arc::new(wiring::environment_probe(&config))),
            // `[skills]`: the workspace's, the home's, the config
            // directory's and the configured paths (`docs/skills.md`).
            skills: skills.clone(),
            ..Parts::new(
                store.clone(),
                providers,
                gate,
                wiring::runtime_config(&config),
            )
        });
        Ok(App {
            config,
            store,
            runtime,
            problems,
            mcp,
            semantic,
            skills,
        })
    }

    /// Starts the chat channels named on the command line (`--channel NAME`)
    /// on the store's channel port; each runs until `cancel`.
    pub async fn start_channels(
        &self,
        names: &[String],
        http: crate::channels::HttpReceiving,
        cancel: tokio_util::sync::CancellationToken,
    ) -> Result<Vec<Arc<crate::channels::hub::Hub>>, Failure> {
        let planned = wiring::channels(&self.config, names, &|name| std::env::var(name).ok())
            .map_err(Failure::usage)?;
        crate::channels::start(&self.runtime, self.store.clone(), planned, http, cancel)
            .await
            .map_err(Failure::usage)
    }

    /// Refuses to start a face when providers could not be set up; one
    /// that goes on with an existing session (`continuing`) keeps its own
    /// model, so only the problems that matter to it count.
    pub fn refuse_problems(&self, continuing: bool) -> Result<(), Failure> {
        match blocking_problems(&self.problems, continuing) {
            Some(message) => Err(Failure::usage(anyhow::anyhow!(message))),
            None => Ok(()),
        }
    }

    /// Logs the providers that could not be set up, for a face that serves
    /// on without them (each of their turns fails with the reason).
    pub fn log_problems(&self) {
        for problem in &self.problems {
            tracing::error!("{problem}");
        }
    }

    /// The sandbox as the configuration asks for it and the kernel gives it,
    /// for a client to show (ACP `initialize`'s `_meta`).
    pub fn sandbox_meta(&self) -> serde_json::Value {
        let status = crate::sandbox::status();
        serde_json::json!({
            "setting": self.config.sandbox.value.as_str(),
            "enforced": status.enforced,
            "detail": status.detail,
            "landlock": {
                "supported": status.abi.is_some(),
                "abi": status.abi,
                "networkRules": status.network_rules,
            },
        })
    }
}

/// What keeps a face from starting, as one message: every problem, but
/// those that only concern new sessions when the face goes on with one.
fn blocking_problems(problems: &[crate::providers::Problem], continuing: bool) -> Option<String> {
    let blocking: Vec<&str> = problems
        .iter()
        .filter(|p| !(continuing && p.new_sessions_only))
        .map(|p| p.message.as_str())
        .collect();
    (!blocking.is_empty()).then(|| blocking.join("; "))
}

/// The configuration alone, for commands that report on it (`config show`,
/// `doctor`): the one place it is read.
pub fn load_config(flags: &Flags) -> Result<Config, crate::config::ConfigError> {
    Config::load(flags)
}

/// The store alone, for commands that only read what it holds (`verify`).
/// The configuration and the store it names.
pub async fn open_config_and_store(flags: &Flags) -> Result<(Config, Arc<dyn Backend>), Failure> {
    let config = Config::load(flags).map_err(Failure::usage)?;
    let (store, _) = crate::store::open(&config.store_target())
        .await
        .map_err(Failure::failed)?;
    Ok((config, store))
}

pub async fn open_store(flags: &Flags) -> Result<Arc<dyn Backend>, Failure> {
    open_config_and_store(flags).await.map(|(_, store)| store)
}

/// The providers the configuration and the stored logins give now (after
/// `pincer login` or a logout in another process): what a long-running face
/// swaps in (`Runtime::set_providers`).
pub fn reload_providers(flags: &Flags) -> Result<crate::core::provider::Providers, String> {
    let config = Config::load(flags).map_err(|err| err.to_string())?;
    let (providers, problems) = wiring::providers(&config);
    for problem in problems {
        tracing::warn!("{problem}");
    }
    Ok(providers)
}

/// Removes every stored login (`credentials.toml`); the names removed.
pub fn forget_logins() -> Result<Vec<String>, String> {
    let env = |name: &str| std::env::var(name).ok();
    let Some(path) = crate::credentials::path(&env) else {
        return Ok(Vec::new());
    };
    crate::credentials::forget_all(&path).map_err(|err| err.to_string())
}

/// The no-provider message with the config file a table would go in.
pub fn no_provider(config: &Config) -> String {
    let file = config.file.clone().or_else(|| {
        crate::credentials::path(&|name| std::env::var(name).ok())
            .map(|p| p.with_file_name("config.toml"))
    });
    match file {
        Some(file) => format!(
            "{} ({})",
            crate::core::provider::NO_PROVIDER,
            file.display()
        ),
        None => crate::core::provider::NO_PROVIDER.to_owned(),
    }
}

/// What the command line says about opening the app.
pub fn flags(cli: &Cli, provider: Option<&ProviderArgs>) -> Flags {
    let provider = provider.cloned().unwrap_or_default();
    Flags {
        config: cli.config.clone(),
        data_dir: cli.data_dir.clone(),
        store: cli.store.clone(),
        provider: provider.provider,
        model: provider.model,
        script: provider.script,
        max_turn_requests: provider.max_turn_requests,
        mode: provider.mode,
        sandbox: provider.sandbox,
    }
}

/// Cancels `shutdown` on SIGTERM or SIGINT, so an editor stopping Pincer gets a
/// clean exit: runs cancelled and recorded, the store flushed.
pub fn spawn_signal_watch(shutdown: tokio_util::sync::CancellationToken) {
    use tokio::signal::unix::{SignalKind, signal};
    tokio::spawn(async move {
        let (Ok(mut term), Ok(mut int)) = (
            signal(SignalKind::terminate()),
            signal(SignalKind::interrupt()),
        ) else {
            tracing::warn!("cannot watch for termination signals");
            return;
        };
        tokio::select! {
            _ = term.recv() => {}
            _ = int.recv() => {}
        }
        shutdown.cancel();
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::providers::Problem;

    #[test]
    fn a_face_going_on_with_a_session_ignores_problems_of_new_sessions_only() {
        let problem = |message: &str, new_sessions_only| Problem {
            message: message.into(),
            new_sessions_only,
        };
        let problems = [problem("no model", true), problem("bad key", false)];
        assert_eq!(
            blocking_problems(&problems, false).as_deref(),
            Some("no model; bad key")
        );
        assert_eq!(
            blocking_problems(&problems, true).as_deref(),
            Some("bad key")
        );
        assert_eq!(blocking_problems(&problems[..1], true), None);
        assert_eq!(blocking_problems(&[], false), None);
    }
}
