//! What the runtime knows about models: context windows and prices.
//!
//! The catalogue is data from the configuration (`[models."NAME"]` tables); the
//! core uses it to fit the conversation into the window of the model it asks,
//! and to price each model turn. Names match exactly, or by a `*` pattern
//! (`claude-sonnet-4*`); the most specific entry wins: an exact name, else the
//! pattern with the most literal characters.
//!
//! A model's [`Window`] is, in order: the configured one (its catalogue entry,
//! else the top-level `context_window`), the one its server states when asked
//! through a [`WindowSource`] (a local server knows what it was started with),
//! else [`ASSUMED_WINDOW`].
//!
//! Whether a model takes images is the catalogue's `images` (the most specific
//! entry that says), else the provider's `images`, else [`images_by_family`].

use futures::future::BoxFuture;
use globset::{Glob, GlobMatcher};

use thiserror::Error;

pub use super::usage::Cost;
use super::usage::Usage;

/// Prices of one model, per million tokens, in the catalogue's currency.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Price {
    pub input: f64,
    pub output: f64,
    /// Input tokens served from the provider's prompt cache; `input` if unset.
    pub cached_input: Option<f64>,
}

impl Price {
    /// What `usage` costs at these prices. Cached input tokens are a part of
    /// `usage.input_tokens`, priced at the cached rate.
    pub fn cost(&self, usage: &Usage) -> f64 {
        let cached = usage.cached_input_tokens.min(usage.input_tokens);
        let fresh = usage.input_tokens - cached;
        let cached_rate = self.cached_input.unwrap_or(self.input);
        (fresh as f64 * self.input
            + cached as f64 * cached_rate
            + usage.output_tokens as f64 * self.output)
            / 1_000_000.0
    }
}

/// One entry of the catalogue.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ModelInfo {
    pub context_window: Option<usize>,
    pub price: Option<Price>,
    /// Whether the model takes images in prompts; unset: not said here.
    pub images: Option<bool>,
}

#[derive(Debug, Clone)]
struct Entry {
    name: String,
    /// `None` for an exact name.
    pattern: Option<GlobMatcher>,
    /// Characters that are not `*`: how specific a pattern is.
    literal: usize,
    info: ModelInfo,
}

/// A bad catalogue entry.
#[derive(Debug, Error, PartialEq, Eq)]
#[error("model pattern {name:?}: {message}")]
pub struct CatalogError {
    pub name: String,
    pub message: String,
}

/// Context windows and prices by model name.
#[derive(Debug, Clone)]
pub struct ModelCatalog {
    entries: Vec<Entry>,
    /// The unit of every price: an ISO 4217 code, or another unit such as "credits".
    pub currency: String,
}

impl Default for ModelCatalog {
    fn default() -> Self {
        Self {
            entries: Vec::new(),
            currency: "USD".to_owned(),
        }
    }
}

impl ModelCatalog {
    pub fn new(
        currency: impl Into<String>,
        entries: impl IntoIterator<Item = (String, ModelInfo)>,
    ) -> Result<Self, CatalogError> {
        let mut built = Vec::new();
        for (name, info) in entries {
            let pattern = if name.contains('*') {
                let glob = Glob::new(&name).map_err(|err| CatalogError {
                    name: name.clone(),
                    message: err.kind().to_string(),
                })?;
                Some(glob.compile_matcher())
            } else {
                None
            };
            built.push(Entry {
                literal: name.chars().filter(|c| *c != '*').count(),
                name,
                pattern,
                info,
            });
        }
        Ok(Self {
            entries: built,
            currency: currency.into(),
        })
    }

    /// The entry for `model`: its exact name, else the most specific pattern.
    pub fn lookup(&self, model: &str) -> Option<&ModelInfo> {
        if let Some(entry) = self
            .entries
            .iter()
            .find(|e| e.pattern.is_none() && e.name == model)
        {
            return Some(&entry.info);
        }
        self.entries
            .iter()
            .filter(|e| e.pattern.as_ref().is_some_and(|p| p.is_match(model)))
            .max_by_key(|e| e.literal)
            .map(|e| &e.info)
    }

    /// The context window the catalogue gives `model`.
    pub fn context_window(&self, model: &str) -> Option<usize> {
        self.lookup(model).and_then(|info| info.context_window)
    }

    /// Whether the catalogue says `model` takes images: the most specific
    /// matching entry that sets `images` (an exact name, else the longest pattern).
    pub fn images(&self, model: &str) -> Option<bool> {
        if let Some(images) = self
            .entries
            .iter()
            .find(|e| e.pattern.is_none() && e.name == model)
            .and_then(|e| e.info.images)
        {
            return Some(images);
        }
        self.entries
            .iter()
            .filter(|e| e.info.images.is_some())
            .filter(|e| e.pattern.as_ref().is_some_and(|p| p.is_match(model)))
            .max_by_key(|e| e.literal)
            .and_then(|e| e.info.images)
    }

    /// What `usage` on `model` cost, if the catalogue prices it.
    pub fn cost(&self, model: &str, usage: &Usage) -> Option<Cost> {
        let price = self.lookup(model)?.price?;
        Some(Cost {
            amount: price.cost(usage),
            currency: self.currency.clone(),
        })
    }
}

/// The context window of a model nothing configures and no server states.
pub const ASSUMED_WINDOW: usize = 128_000;

/// A context window as a model's server states it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StatedWindow {
    pub tokens: usize,
    /// Which server said it (`llama.cpp`, `Ollama`, `vLLM`, `LM Studio`).
    pub server: String,
    /// Where it said it, for a person (`n_ctx in GET /props`).
    pub field: String,
}

/// Asks a model's server for the context window it serves the model with.
/// An implementation asks the network lazily, bounds the time it takes and
/// remembers the answer: the core may ask before every run.
pub trait WindowSource: Send + Sync {
    /// The window the server states for `model`; `None` when it cannot say
    /// (or does not answer in time).
    fn ask<'a>(&'a self, model: &'a str) -> BoxFuture<'a, Option<StatedWindow>>;
}

/// Where a model's window comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WindowOrigin {
    /// A `[models]` entry or the top-level `context_window`.
    Configured,
    /// Asked from the model's server.
    Asked(StatedWindow),
    /// Neither: [`ASSUMED_WINDOW`].
    Assumed,
}

impl std::fmt::Display for WindowOrigin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            WindowOrigin::Configured => f.write_str("configured"),
            WindowOrigin::Asked(stated) => {
                write!(f, "asked from {} ({})", stated.server, stated.field)
            }
            WindowOrigin::Assumed => f.write_str("assumed"),
        }
    }
}

/// A model's context window in tokens, and where it comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Window {
    pub tokens: usize,
    pub origin: WindowOrigin,
}

impl Window {
    /// The window of `model`: `configured` when set (the server is not
    /// asked), else what `source` states, else [`ASSUMED_WINDOW`].
    pub async fn resolve(
        configured: Option<usize>,
        source: Option<&dyn WindowSource>,
        model: &str,
    ) -> Window {
        if let Some(tokens) = configured {
            return Window {
                tokens,
                origin: WindowOrigin::Configured,
            };
        }
        let stated = match source {
            Some(source) => source.ask(model).await,
            None => None,
        };
        match stated {
            Some(stated) => Window {
                tokens: stated.tokens,
                origin: WindowOrigin::Asked(stated),
            },
            None => Window {
                tokens: ASSUMED_WINDOW,
                origin: WindowOrigin::Assumed,
            },
        }
    }
}

/// Whether a model of a well-known family takes images, when nothing in the
/// configuration says: the vision-capable families of OpenAI and Anthropic as of
/// late 2025 (`gpt-4o*`, `gpt-4.1*`, `gpt-5*`, `o1`, `o3`, `o4*`, `claude-*`
/// from Claude 3 on), less their audio-only, realtime and `o1-mini`/`o3-mini`
/// variants. Every other name is text-only until `images = true` says
/// otherwise; a list like this goes stale, so the configuration always wins.
pub fn images_by_family(model: &str) -> bool {
    let model = model.to_ascii_lowercase();
    let model = model.rsplit('/').next().unwrap_or(&model);
    if ["audio", "realtime", "transcribe", "tts"]
        .iter()
        .any(|word| model.contains(word))
    {
        return false;
    }
    if let Some(rest) = model.strip_prefix("claude-") {
        return !(rest.starts_with("2") || rest.starts_with("instant"));
    }
    let family = |prefix: &str| {
        model == prefix
            || model
                .strip_prefix(prefix)
                .is_some_and(|rest| rest.starts_with('-') && !rest.starts_with("-mini"))
    };
    ["gpt-4o", "gpt-4.1", "gpt-5", "o4"]
        .iter()
        .any(|prefix| model.starts_with(prefix))
        || family("o1")
        || family("o3")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn priced(input: f64, output: f64) -> ModelInfo {
        ModelInfo {
            context_window: None,
            images: None,
            price: Some(Price {
                input,
                output,
                cached_input: None,
            }),
        }
    }

    #[test]
    fn exact_names_beat_patterns_and_longer_patterns_beat_shorter() {
        let catalog = ModelCatalog::new(
            "USD",
            [
                ("claude-*".to_owned(), priced(1.0, 1.0)),
                ("claude-sonnet-*".to_owned(), priced(3.0, 15.0)),
                ("claude-sonnet-4-5".to_owned(), priced(4.0, 16.0)),
            ],
        )
        .unwrap();
        let input = |m: &str| catalog.lookup(m).and_then(|i| i.price).map(|p| p.input);
        assert_eq!(input("claude-sonnet-4-5"), Some(4.0));
        assert_eq!(input("claude-sonnet-4-0"), Some(3.0));
        assert_eq!(input("claude-haiku-4-5"), Some(1.0));
        assert_eq!(input("gpt-4o"), None);
    }

    #[test]
    fn cost_prices_cached_input_at_its_own_rate() {
        let price = Price {
            input: 2.0,
            output: 8.0,
            cached_input: Some(0.5),
        };
        let usage = Usage {
            input_tokens: 1_000_000,
            output_tokens: 500_000,
            cached_input_tokens: 400_000,
            reasoning_tokens: 0,
        };
        // 600k fresh at 2.0 + 400k cached at 0.5 + 500k out at 8.0
        let expected = 1.2 + 0.2 + 4.0;
        assert!((price.cost(&usage) - expected).abs() < 1e-9);
        let no_cache_rate = Price {
            cached_input: None,
            ..price
        };
        assert!((no_cache_rate.cost(&usage) - (2.0 + 4.0)).abs() < 1e-9);
    }

    #[test]
    fn unpriced_models_have_no_cost_and_windows_come_from_the_entry() {
        let catalog = ModelCatalog::new(
            "EUR",
            [(
                "local-*".to_owned(),
                ModelInfo {
                    context_window: Some(8192),
                    price: None,
                    images: None,
                },
            )],
        )
        .unwrap();
        assert_eq!(catalog.context_window("local-llama"), Some(8192));
        assert_eq!(catalog.cost("local-llama", &Usage::default()), None);
        assert_eq!(catalog.context_window("other"), None);
    }

    #[test]
    fn costs_in_other_currencies_are_not_summed() {
        let usd = Cost {
            amount: 1.0,
            currency: "USD".into(),
        };
        let eur = Cost {
            amount: 5.0,
            currency: "EUR".into(),
        };
        let total = Cost::sum(Some(usd.clone()), Some(&eur)).unwrap();
        assert_eq!(total, usd);
        let total = Cost::sum(Some(usd), Some(&usd_of(2.0))).unwrap();
        assert!((total.amount - 3.0).abs() < 1e-12);
        assert_eq!(Cost::sum(None, Some(&eur)), Some(eur));
    }

    fn usd_of(amount: f64) -> Cost {
        Cost {
            amount,
            currency: "USD".into(),
        }
    }

    #[test]
    fn costs_display_with_two_to_six_decimals() {
        assert_eq!(usd_of(1.5).to_string(), "1.50 USD");
        assert_eq!(usd_of(0.0123).to_string(), "0.0123 USD");
        assert_eq!(usd_of(0.00000012).to_string(), "0.00 USD");
        assert_eq!(usd_of(12.3456789).to_string(), "12.345679 USD");
    }

    #[test]
    fn image_support_comes_from_the_most_specific_entry_that_says() {
        let entry = |images: Option<bool>, window: Option<usize>| ModelInfo {
            context_window: window,
            images,
            ..ModelInfo::default()
        };
        let catalog = ModelCatalog::new(
            "USD",
            [
                ("llava*".to_owned(), entry(Some(true), None)),
                ("llava-text*".to_owned(), entry(Some(false), None)),
                // More specific but silent on images: the pattern above decides.
                ("llava-text-13b*".to_owned(), entry(None, Some(4096))),
                ("exact".to_owned(), entry(Some(false), None)),
            ],
        )
        .unwrap();
        assert_eq!(catalog.images("llava-7b"), Some(true));
        assert_eq!(catalog.images("llava-text-7b"), Some(false));
        assert_eq!(catalog.images("llava-text-13b-q4"), Some(false));
        assert_eq!(catalog.images("exact"), Some(false));
        assert_eq!(catalog.images("gpt-4o"), None);
    }

    #[test]
    fn families_that_take_images_by_default() {
        for model in [
            "gpt-4o",
            "gpt-4o-mini",
            "gpt-4.1-nano",
            "gpt-5",
            "gpt-5-mini",
            "o1",
            "o3",
            "o3-2025-04-16",
            "o4-mini",
            "claude-sonnet-4-5",
            "claude-3-haiku-20240307",
            "openrouter/gpt-4o",
        ] {
            assert!(images_by_family(model), "{model} should take images");
        }
        for model in [
            "gpt-4o-audio-preview",
            "gpt-4o-realtime-preview",
            "gpt-3.5-turbo",
            "gpt-4",
            "o1-mini",
            "o3-mini",
            "claude-2.1",
            "claude-instant-1.2",
            "llama3.1:8b",
            "script",
            "o30",
        ] {
            assert!(!images_by_family(model), "{model} should be text-only");
        }
    }

    /// States `tokens` for every model and counts the questions.
    struct Stating {
        tokens: Option<usize>,
        asked: std::sync::atomic::AtomicUsize,
    }

    impl WindowSource for Stating {
        fn ask<'a>(&'a self, _model: &'a str) -> BoxFuture<'a, Option<StatedWindow>> {
            self.asked.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            let stated = self.tokens.map(|tokens| StatedWindow {
                tokens,
                server: "llama.cpp".into(),
                field: "n_ctx in GET /props".into(),
            });
            Box::pin(async move { stated })
        }
    }

    #[tokio::test]
    async fn a_configured_window_beats_the_server_which_beats_the_assumption() {
        let server = Stating {
            tokens: Some(4096),
            asked: Default::default(),
        };
        let configured = Window::resolve(Some(32_768), Some(&server), "m").await;
        assert_eq!(configured.tokens, 32_768);
        assert_eq!(configured.origin.to_string(), "configured");
        assert_eq!(
            server.asked.load(std::sync::atomic::Ordering::SeqCst),
            0,
            "a configured window asks no server"
        );
        let asked = Window::resolve(None, Some(&server), "m").await;
        assert_eq!(asked.tokens, 4096);
        assert_eq!(
            asked.origin.to_string(),
            "asked from llama.cpp (n_ctx in GET /props)"
        );
        let silent = Stating {
            tokens: None,
            asked: Default::default(),
        };
        for source in [Some(&silent as &dyn WindowSource), None] {
            let assumed = Window::resolve(None, source, "m").await;
            assert_eq!(assumed.tokens, ASSUMED_WINDOW);
            assert_eq!(assumed.origin, WindowOrigin::Assumed);
        }
    }

    #[test]
    fn a_bad_pattern_is_named() {
        let err =
            ModelCatalog::new("USD", [("gpt-[*".to_owned(), ModelInfo::default())]).unwrap_err();
        assert_eq!(err.name, "gpt-[*");
    }
}
