//! Counting tokens: how much of a model's context window a text takes.
//!
//! Where the model family's tokenizer is public and fits, it is used: OpenAI's
//! `o200k_base` (GPT-4o, GPT-4.1, GPT-5, the o-series, gpt-oss) and
//! `cl100k_base` (GPT-4, GPT-3.5), through `tiktoken-rs`, loaded once per
//! process the first time a run of such a model needs it. Other families
//! (Claude, Llama, Qwen, Mistral, …) are estimated at four bytes of text per
//! token. Either count is then **calibrated** by what the provider reports:
//! after each model turn the input tokens it counted are set against the
//! estimate of that request, and the ratio (per provider and model, smoothed)
//! scales later estimates, so the count converges on the model's own — for
//! the framing a provider adds, and for families without a public tokenizer.
//! Measured errors are in `docs/prompt.md`.

use parking_lot::Mutex;
use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::sync::{Arc, OnceLock};

use tiktoken_rs::CoreBPE;

use super::provider::ToolSpec;
use super::session::{Message, ToolCall, note_for_model, summary_for_model};

/// Bytes of text per token where no tokenizer fits.
const BYTES_PER_TOKEN: usize = 4;

/// Per-message overhead (role, framing) in tokens.
const MESSAGE_OVERHEAD: usize = 4;
/// What one image is estimated to cost, in tokens. Providers scale images
/// down and charge by pixels: Anthropic about width × height / 750, at most
/// about 1,600 for the largest image it keeps; OpenAI 765 for a 1024×1024 image
/// in high detail. The larger figure errs on the side of sending less.
pub const IMAGE_TOKENS: usize = 1_600;
/// The tokens a message costs, its texts counted by `count`: the texts,
/// [`IMAGE_TOKENS`] per image, and the message's framing.
fn estimate_with(message: &Message, count: &dyn Fn(&str) -> usize) -> usize {
    let mut images = 0;
    let text = match message {
        Message::User { content } => content
            .iter()
            .map(|part| {
                if part.is_image() {
                    images += 1;
                    0
                } else {
                    count(&part.to_model_text())
                }
            })
            .sum(),
        Message::Assistant {
            text,
            thought,
            tool_calls,
            ..
        } => {
            count(text)
                + count(thought)
                + tool_calls
                    .iter()
                    .map(|call| call_tokens(call, count))
                    .sum::<usize>()
        }
        Message::Tool { content, .. } => count(content),
        Message::Summary { text, .. } => count(&summary_for_model(text)),
        Message::Note { text } => count(&note_for_model(text)),
    };
    text + images * IMAGE_TOKENS + MESSAGE_OVERHEAD
}

fn call_tokens(call: &ToolCall, count: &dyn Fn(&str) -> usize) -> usize {
    count(&call.name) + count(&call.arguments.to_string())
}

/// A public BPE vocabulary.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Encoding {
    O200k,
    Cl100k,
}

impl Encoding {
    /// The encoding of an OpenAI model, by its name (a provider prefix such
    /// as `openai/` is skipped); `None` for other families.
    pub fn for_model(model: &str) -> Option<Encoding> {
        let name = model
            .rsplit('/')
            .next()
            .unwrap_or(model)
            .to_ascii_lowercase();
        let starts = |prefixes: &[&str]| prefixes.iter().any(|p| name.starts_with(p));
        if starts(&[
            "gpt-4o", "gpt-4.1", "gpt-4.5", "gpt-5", "o1", "o3", "o4", "chatgpt-", "gpt-oss",
            "codex-",
        ]) {
            Some(Encoding::O200k)
        } else if starts(&["gpt-4", "gpt-3.5", "gpt-35"]) {
            Some(Encoding::Cl100k)
        } else {
            None
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Encoding::O200k => "o200k_base",
            Encoding::Cl100k => "cl100k_base",
        }
    }

    /// The tokenizer, loaded on first use (a few hundred milliseconds and
    /// tens of megabytes: [`Encoding::load`] it off the async workers).
    fn bpe(self) -> Option<&'static CoreBPE> {
        static O200K: OnceLock<Option<CoreBPE>> = OnceLock::new();
        static CL100K: OnceLock<Option<CoreBPE>> = OnceLock::new();
        let (cell, load): (_, fn() -> anyhow::Result<CoreBPE>) = match self {
            Encoding::O200k => (&O200K, tiktoken_rs::o200k_base),
            Encoding::Cl100k => (&CL100K, tiktoken_rs::cl100k_base),
        };
        cell.get_or_init(|| match load() {
            Ok(bpe) => Some(bpe),
            Err(err) => {
                tracing::warn!(encoding = self.as_str(), error = %err, "cannot load the tokenizer; estimating by bytes");
                None
            }
        })
        .as_ref()
    }

    /// Loads the tokenizer now (blocking), so counting later does not wait.
    pub fn load(self) {
        let _ = self.bpe();
    }
}

/// Token counts of texts already counted, by a hash of the encoding and
/// text: a conversation is counted again before every turn, and all but its
/// newest messages were counted before.
fn cached(encoding: Encoding, text: &str, count: impl FnOnce() -> usize) -> usize {
    static CACHE: OnceLock<Mutex<HashMap<u64, usize>>> = OnceLock::new();
    /// Texts shorter than this are counted again rather than remembered.
    const WORTH_KEEPING: usize = 256;
    /// Entries kept before the cache starts over.
    const MOST: usize = 50_000;
    if text.len() < WORTH_KEEPING {
        return count();
    }
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    encoding.as_str().hash(&mut hasher);
    text.hash(&mut hasher);
    let key = hasher.finish();
    let cache = CACHE.get_or_init(|| Mutex::new(HashMap::new()));
    if let Some(count) = cache.lock().get(&key).copied() {
        return count;
    }
    let counted = count();
    let mut cache = cache.lock();
    if cache.len() >= MOST {
        cache.clear();
    }
    cache.insert(key, counted);
    counted
}

/// The tokens of `text` as the encoding counts them, or by bytes.
pub fn raw_count(encoding: Option<Encoding>, text: &str) -> usize {
    match encoding.and_then(|e| e.bpe().map(|bpe| (e, bpe))) {
        Some((encoding, bpe)) => cached(encoding, text, || bpe.encode_ordinary(text).len()),
        None => text.len().div_ceil(BYTES_PER_TOKEN),
    }
}

/// How far the estimates of each provider and model were from what the
/// provider reported: reported ÷ estimated, smoothed. Shared by a runtime's
/// runs.
#[derive(Debug, Default)]
pub struct Calibration {
    ratios: Mutex<HashMap<String, f64>>,
}

/// Weight of the newest observation in the smoothed ratio.
const SMOOTHING: f64 = 0.3;
/// The ratio is kept within these bounds: a report far outside them is a
/// provider counting something else (images, a cached prefix it leaves out).
const RATIO_BOUNDS: (f64, f64) = (0.5, 2.5);
/// Requests smaller than this are not used: their fixed framing dominates.
const LEAST_OBSERVED: usize = 200;

fn key(provider: &str, model: &str) -> String {
    format!("{provider}/{model}")
}

impl Calibration {
    /// The ratio for `provider`'s `model`: 1 until a turn was reported.
    pub fn ratio(&self, provider: &str, model: &str) -> f64 {
        self.ratios
            .lock()
            .get(&key(provider, model))
            .copied()
            .unwrap_or(1.0)
    }

    /// A turn whose request was estimated at `estimated` tokens (before
    /// calibration) and reported at `reported`.
    pub fn observe(&self, provider: &str, model: &str, estimated: usize, reported: u64) {
        if estimated < LEAST_OBSERVED || reported == 0 {
            return;
        }
        let seen = (reported as f64 / estimated as f64).clamp(RATIO_BOUNDS.0, RATIO_BOUNDS.1);
        let mut ratios = self.ratios.lock();
        let ratio = ratios.entry(key(provider, model)).or_insert(seen);
        *ratio = (1.0 - SMOOTHING) * *ratio + SMOOTHING * seen;
    }
}

/// Counts tokens for one provider's model: its tokenizer or the byte
/// estimate, times the calibration.
#[derive(Clone)]
pub struct Counter {
    provider: String,
    model: String,
    encoding: Option<Encoding>,
    calibration: Arc<Calibration>,
}

impl Counter {
    pub fn new(provider: &str, model: &str, calibration: Arc<Calibration>) -> Self {
        Self {
            provider: provider.to_owned(),
            model: model.to_owned(),
            encoding: Encoding::for_model(model),
            calibration,
        }
    }

    /// A counter by bytes alone, uncalibrated (tests, and where no model is
    /// known).
    pub fn bytes() -> Self {
        Self {
            provider: String::new(),
            model: String::new(),
            encoding: None,
            calibration: Arc::new(Calibration::default()),
        }
    }

    /// The tokenizer used, when one fits the model.
    pub fn encoding(&self) -> Option<Encoding> {
        self.encoding
    }

    /// Loads the tokenizer off the async workers, before a run counts.
    pub async fn ready(&self) {
        if let Some(encoding) = self.encoding {
            let _ = tokio::task::spawn_blocking(move || encoding.load()).await;
        }
    }

    /// The calibration applied: reported ÷ estimated so far.
    pub fn ratio(&self) -> f64 {
        self.calibration.ratio(&self.provider, &self.model)
    }

    fn scale(&self, raw: usize) -> usize {
        (raw as f64 * self.ratio()).round() as usize
    }

    /// Uncalibrated: as the tokenizer (or the byte estimate) counts.
    pub fn raw(&self, text: &str) -> usize {
        raw_count(self.encoding, text)
    }

    /// The tokens of a text.
    pub fn text(&self, text: &str) -> usize {
        self.scale(self.raw(text))
    }

    fn raw_message(&self, message: &Message) -> usize {
        estimate_with(message, &|text| self.raw(text))
    }

    /// The tokens of a message (with its framing; an image at a fixed cost).
    pub fn message(&self, message: &Message) -> usize {
        self.scale(self.raw_message(message))
    }

    /// The tokens of a conversation.
    pub fn messages(&self, messages: &[Message]) -> usize {
        self.scale(messages.iter().map(|m| self.raw_message(m)).sum())
    }

    fn raw_tools<T: std::borrow::Borrow<ToolSpec>>(&self, tools: &[T]) -> usize {
        tools
            .iter()
            .map(|t| {
                let t = t.borrow();
                self.raw(&t.name) + self.raw(&t.description) + self.raw(&t.parameters.to_string())
            })
            .sum()
    }

    /// The tokens tool definitions take.
    pub fn tools<T: std::borrow::Borrow<ToolSpec>>(&self, tools: &[T]) -> usize {
        self.scale(self.raw_tools(tools))
    }

    /// A request of `system`, `tools` and `messages`, uncalibrated: what
    /// [`Counter::observe`] sets against the provider's report.
    pub fn raw_request<T: std::borrow::Borrow<ToolSpec>>(
        &self,
        system: &str,
        tools: &[T],
        messages: &[Message],
    ) -> usize {
        self.raw(system)
            + self.raw_tools(tools)
            + messages.iter().map(|m| self.raw_message(m)).sum::<usize>()
    }

    /// Calibrates by a turn the provider reported: the request was counted
    /// `raw` ([`Counter::raw_request`]), the provider `served` it with the
    /// model named so and counted `reported` input tokens.
    pub fn observe(&self, served: &str, raw: usize, reported: u64) {
        self.calibration
            .observe(&self.provider, served, raw, reported);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn openai_models_get_their_encoding_and_others_none() {
        for (model, encoding) in [
            ("gpt-4o-mini", Some(Encoding::O200k)),
            ("openai/gpt-5.1", Some(Encoding::O200k)),
            ("o3-mini", Some(Encoding::O200k)),
            ("gpt-4-turbo", Some(Encoding::Cl100k)),
            ("gpt-3.5-turbo", Some(Encoding::Cl100k)),
            ("claude-sonnet-4-5", None),
            ("llama3.2", None),
            ("qwen3:8b", None),
        ] {
            assert_eq!(Encoding::for_model(model), encoding, "{model}");
        }
    }

    #[test]
    fn the_tokenizer_counts_as_openai_does() {
        // Counts from OpenAI's tokenizer for these strings.
        assert_eq!(raw_count(Some(Encoding::O200k), "hello world"), 2);
        assert_eq!(raw_count(Some(Encoding::Cl100k), "hello world"), 2);
        let long = "fn main() { println!(\"hello\"); }\n".repeat(20);
        let first = raw_count(Some(Encoding::O200k), &long);
        assert_eq!(raw_count(Some(Encoding::O200k), &long), first, "cached");
        assert!(first > 100 && first < 300, "{first}");
        assert_eq!(raw_count(None, "abcdefgh"), 2);
    }

    #[test]
    fn calibration_moves_estimates_towards_what_the_provider_reported() {
        let calibration = Arc::new(Calibration::default());
        let counter = Counter::new("p", "llama3", calibration.clone());
        let text = "x".repeat(4000);
        assert_eq!(counter.text(&text), 1000);
        // The provider counted 1,500 where 1,000 were estimated: the first
        // report sets the ratio, later ones move it.
        calibration.observe("p", "llama3", 1000, 1500);
        assert_eq!(counter.text(&text), 1500);
        calibration.observe("p", "llama3", 1000, 1000);
        assert_eq!(counter.text(&text), 1350);
        // Tiny requests, zero reports and other models change nothing.
        calibration.observe("p", "llama3", 10, 100);
        calibration.observe("p", "llama3", 1000, 0);
        assert_eq!(counter.text(&text), 1350);
        assert_eq!(
            Counter::new("p", "other", calibration.clone()).text(&text),
            1000
        );
        // A wild report is bounded.
        let wild = Arc::new(Calibration::default());
        wild.observe("p", "m", 1000, 1_000_000);
        assert_eq!(wild.ratio("p", "m"), 2.5);
    }
}
