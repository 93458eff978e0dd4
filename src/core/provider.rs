//! The seam between the agent loop and the models: a provider streams one model turn.
//!
//! Implementations live outside the core (`crate::providers`); the core only sees
//! this trait. A turn is a stream of [`ProviderEvent`]s ending in `Done`, or an
//! error. Dropping the stream cancels the turn: that is how cancellation reaches a
//! provider (an HTTP provider closes its connection when dropped).

use std::time::Duration;

use futures::stream::BoxStream;
use thiserror::Error;

use super::models::{ModelCatalog, WindowSource, images_by_family};
use super::session::{Message, ToolCall};
use super::usage::Usage;

/// What the model is asked in one turn.
#[derive(Debug, Clone)]
pub struct ModelRequest {
    pub model: String,
    pub system: Option<String>,
    pub messages: Vec<Message>,
    /// Tools the model may call, as name and JSON schema: each made once
    /// (`tool::Toolset`) and shared by every turn that offers it.
    pub tools: std::sync::Arc<[std::sync::Arc<ToolSpec>]>,
    /// How hard the model should think (the API's reasoning effort); `None`:
    /// the API's default.
    pub reasoning_effort: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, schemars::JsonSchema)]
pub struct ToolSpec {
    pub name: String,
    pub description: String,
    pub parameters: serde_json::Value,
}

/// Why the model ended its turn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ModelStop {
    EndTurn,
    /// The model wants tool results before it goes on.
    ToolUse,
    MaxTokens,
    Refusal,
}

/// One piece of a streamed model turn.
#[derive(Debug, Clone, PartialEq)]
pub enum ProviderEvent {
    Text(String),
    Thinking(String),
    ToolCall(ToolCall),
    Usage(Usage),
    /// Which provider and model are serving the turn, when a layer in between
    /// (failover) chose among several; sent before the turn's first output.
    Served {
        provider: String,
        model: String,
    },
    /// A start that failed before any output is tried again after a wait;
    /// sent before the wait, and only before the turn's first output.
    Retrying(Retry),
    Done(ModelStop),
}

/// A retry about to be made: what a person waiting is told.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Retry {
    /// The attempt about to be made, from 2.
    pub attempt: u32,
    /// Attempts in all, the first included.
    pub attempts: u32,
    /// How long until it is made.
    pub wait: Duration,
    /// Why the last one failed, in a few words (`429 Too Many Requests`).
    pub reason: String,
}

/// The kinds of provider failure the loop and the failover layer branch on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProviderErrorKind {
    /// Bad credentials; retrying will not help.
    Auth,
    /// The model name is unknown to the provider.
    UnknownModel,
    /// The conversation does not fit the model's context window.
    ContextLength,
    RateLimited,
    /// Connection refused, reset or cut mid-stream.
    Transport,
    Timeout,
    /// The provider answered with a server error.
    Server,
    /// The provider sent something we could not understand.
    Protocol,
    /// The provider is not set up (a missing script, key or URL).
    Config,
}

#[derive(Debug, Clone, Error)]
#[error("{message}")]
pub struct ProviderError {
    pub kind: ProviderErrorKind,
    pub message: String,
    /// How long the provider asked us to wait before trying again.
    pub retry_after: Option<Duration>,
    /// The HTTP status the provider answered with, when it answered with one.
    pub status: Option<u16>,
}

impl ProviderError {
    pub fn new(kind: ProviderErrorKind, message: impl Into<String>) -> Self {
        Self {
            kind,
            message: message.into(),
            retry_after: None,
            status: None,
        }
    }

    /// The failure in a few words, for a status line: the HTTP status when
    /// there was one (`429 Too Many Requests`), else its kind.
    pub fn reason(&self) -> String {
        if let Some(status) = self.status {
            let phrase = match status {
                408 => "Request Timeout",
                409 => "Conflict",
                425 => "Too Early",
                429 => "Too Many Requests",
                500 => "Internal Server Error",
                502 => "Bad Gateway",
                503 => "Service Unavailable",
                504 => "Gateway Timeout",
                529 => "Overloaded",
                _ => return format!("HTTP {status}"),
            };
            return format!("{status} {phrase}");
        }
        match self.kind {
            ProviderErrorKind::Auth => "refused credentials",
            ProviderErrorKind::UnknownModel => "unknown model",
            ProviderErrorKind::ContextLength => "context too long",
            ProviderErrorKind::RateLimited => "rate limited",
            ProviderErrorKind::Transport => "connection failed",
            ProviderErrorKind::Timeout => "timed out",
            ProviderErrorKind::Server => "server error",
            ProviderErrorKind::Protocol => "unreadable answer",
            ProviderErrorKind::Config => "not set up",
        }
        .to_owned()
    }

    /// Whether trying the same request again may succeed.
    pub fn is_retryable(&self) -> bool {
        match self.kind {
            ProviderErrorKind::RateLimited
            | ProviderErrorKind::Transport
            | ProviderErrorKind::Timeout
            | ProviderErrorKind::Server => true,
            ProviderErrorKind::Auth
            | ProviderErrorKind::UnknownModel
            | ProviderErrorKind::ContextLength
            | ProviderErrorKind::Protocol
            | ProviderErrorKind::Config => false,
        }
    }
}

pub type ProviderStream = BoxStream<'static, Result<ProviderEvent, ProviderError>>;

/// Streams model turns.
pub trait Provider: Send + Sync {
    /// The provider's configured name, recorded on the tape with each turn.
    fn name(&self) -> &str;

    /// Starts one model turn. Errors before the first event (connection refused,
    /// bad credentials) arrive as the stream's first item; errors after visible
    /// output arrive in place of the next event. The stream ends after `Done` or
    /// an error.
    fn stream(&self, request: ModelRequest) -> ProviderStream;
}

/// A provider and model a session can use.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ModelChoice {
    pub provider: String,
    pub model: String,
}

impl ModelChoice {
    /// The choice as one identifier, `provider/model`.
    pub fn id(&self) -> String {
        format!("{}/{}", self.provider, self.model)
    }
}

/// A configured provider with the models it offers.
pub struct ProviderEntry {
    pub name: String,
    pub models: Vec<String>,
    pub provider: std::sync::Arc<dyn Provider>,
    /// Whether this provider's models take images when the catalogue does not
    /// say; `None`: judge by the model's family ([`images_by_family`]).
    pub images: Option<bool>,
    /// The thought levels (reasoning efforts) its API takes.
    pub thought: ThoughtLevels,
    /// Asks its server for a model's context window, when it can say.
    pub window: Option<std::sync::Arc<dyn WindowSource>>,
}

/// The reasoning efforts a provider's API takes, and the one sent when a
/// session chose none.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ThoughtLevels {
    pub levels: Vec<String>,
    pub default: Option<String>,
}

impl ThoughtLevels {
    /// The effort a turn is sent with, given the session's choice: that
    /// choice when this provider takes it (a session keeps its choice across
    /// a switch to a provider without it), else the default.
    pub fn effective(&self, chosen: Option<&str>) -> Option<String> {
        chosen
            .filter(|level| self.levels.iter().any(|l| l == level))
            .map(str::to_owned)
            .or_else(|| self.default.clone())
    }
}

/// The providers a runtime may use; the first is the default unless one is named.
#[derive(Default)]
pub struct Providers {
    entries: Vec<ProviderEntry>,
    default: Option<ModelChoice>,
}

impl Providers {
    /// `default` names the provider (and optionally the model) new sessions use.
    pub fn new(entries: Vec<ProviderEntry>, default: Option<ModelChoice>) -> Self {
        Self { entries, default }
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    pub fn default_choice(&self) -> Option<ModelChoice> {
        if let Some(choice) = &self.default {
            return Some(choice.clone());
        }
        let entry = self.entries.first()?;
        Some(ModelChoice {
            provider: entry.name.clone(),
            model: entry.models.first().cloned().unwrap_or_default(),
        })
    }

    /// Every provider/model pair, in configuration order.
    pub fn choices(&self) -> Vec<ModelChoice> {
        self.entries
            .iter()
            .flat_map(|entry| {
                entry.models.iter().map(|model| ModelChoice {
                    provider: entry.name.clone(),
                    model: model.clone(),
                })
            })
            .collect()
    }

    /// Finds a choice by its `provider/model` identifier or by a bare model name.
    pub fn find(&self, id: &str) -> Option<ModelChoice> {
        let choices = self.choices();
        choices
            .iter()
            .find(|choice| choice.id() == id)
            .or_else(|| choices.iter().find(|choice| choice.model == id))
            .cloned()
    }

    /// Whether `model` served by `provider` takes images: the catalogue's word,
    /// else the provider's, else the model's family.
    pub fn accepts_images(&self, catalog: &ModelCatalog, provider: &str, model: &str) -> bool {
        catalog
            .images(model)
            .or_else(|| {
                self.entries
                    .iter()
                    .find(|entry| entry.name == provider)
                    .and_then(|entry| entry.images)
            })
            .unwrap_or_else(|| images_by_family(model))
    }

    /// The thought levels of the provider named `name` (none for an unknown one).
    pub fn thought(&self, name: &str) -> ThoughtLevels {
        self.entries
            .iter()
            .find(|entry| entry.name == name)
            .map(|entry| entry.thought.clone())
            .unwrap_or_default()
    }

    /// Where the provider named `name` asks its server for a model's window.
    pub fn window_source(&self, name: &str) -> Option<std::sync::Arc<dyn WindowSource>> {
        self.entries
            .iter()
            .find(|entry| entry.name == name)
            .and_then(|entry| entry.window.clone())
    }

    pub fn get(&self, name: &str) -> Option<std::sync::Arc<dyn Provider>> {
        self.entries
            .iter()
            .find(|entry| entry.name == name)
            .map(|entry| entry.provider.clone())
    }
}

/// What every face says when no model provider is configured: the two
/// shortest ways to one, then where the rest is written.
pub const NO_PROVIDER: &str = "no model provider is configured. The two shortest ways to one: \
     run `pincer login` (an API key or a local server, kept for every session), \
     or give a key and a model: `OPENAI_API_KEY=sk-... pincer run --model gpt-4.1-mini \"...\"` \
     (a local server needs no key: `OPENAI_BASE_URL=http://127.0.0.1:11434/v1 pincer run --model llama3.2 \"...\"`). \
     Everything else: a [providers.NAME] table in the config file (docs/providers.md)";
