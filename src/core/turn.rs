//! One model turn and what a run works with: the loop's settings
//! (`LoopConfig`), the run's context (`RunContext`), and `stream_turn`, which
//! plays one request to the provider and turns what comes back into events.
//! The agent loop, `/compact` and the automatic compaction all stream their
//! turns through it.

use std::sync::Arc;

use futures::StreamExt;
use tokio_util::sync::CancellationToken;

use super::budget::{self, Budgets};
use super::context;
use super::emitter::Emitter;
use super::event::Usage;
use super::event::{ContextUse, Event};
use super::gate::{self, CallEnv};
use super::memory::RecallSettings;
use super::models::{Cost, ModelCatalog};
use super::prompt::{PromptSettings, RunPrompt};
use super::provider::{
    ModelRequest, ModelStop, Provider, ProviderError, ProviderErrorKind, ProviderEvent,
    ProviderStream, Retry, ToolSpec,
};
use super::run::RunOutcome;
use super::session::{Message, ToolCall};
use super::tokens::Counter;
use super::tool::SessionTools;

/// Settings of the loop.
#[derive(Debug, Clone)]
pub struct LoopConfig {
    /// Most model requests in one run; the run then ends with `max_turn_requests`.
    pub max_turn_requests: u32,
    /// The configured system prompt and instructions (`core::prompt`).
    pub prompt: PromptSettings,
    /// The configured context window in tokens of models the catalogue does
    /// not cover; unset, the server's word or `models::ASSUMED_WINDOW`. The
    /// conversation sent is fitted into the window, less `output_reserve`.
    pub context_tokens: Option<usize>,
    /// Context windows and prices by model.
    pub models: ModelCatalog,
    /// Tokens left free for the model's answer.
    pub output_reserve: usize,
    /// Identical calls (same tool, same arguments) one run may make before
    /// the next is answered with a note instead (`gate::LoopGuard`); 0: off.
    pub loop_guard: u32,
    /// How memory is recalled into each turn (`core::memory`).
    pub memory: RecallSettings,
    /// The share of the context window (0 to 1) an estimated request may
    /// take before the conversation is compacted automatically; 0: never.
    pub compact_at: f64,
    /// Before an automatic compaction, the model gets one turn with
    /// `memory_save` to keep what should outlast it.
    pub save_before_compact: bool,
    /// Spending limits, checked before each model turn (`core::budget`).
    pub budgets: Budgets,
    /// The most tokens the skills' catalogue in the system prompt takes
    /// (`[skills] catalogue_tokens`, `core::skills::catalogue`).
    pub catalogue_tokens: usize,
}

impl LoopConfig {
    /// The tokens kept free for the answer in a window of `window` tokens:
    /// `output_reserve`, but at most a quarter of the window, so a small
    /// local model's window (4,096) still holds the conversation.
    pub fn reserve_in(&self, window: usize) -> usize {
        self.output_reserve.min(window / 4)
    }
}

impl Default for LoopConfig {
    fn default() -> Self {
        Self {
            max_turn_requests: 50,
            prompt: PromptSettings::default(),
            context_tokens: None,
            output_reserve: 8_192,
            models: ModelCatalog::default(),
            loop_guard: 3,
            memory: RecallSettings::default(),
            compact_at: 0.8,
            save_before_compact: true,
            budgets: Budgets::default(),
            catalogue_tokens: crate::core::skills::CATALOGUE_TOKENS,
        }
    }
}

/// Everything one run of the loop works with.
pub struct RunContext<'a> {
    pub provider: Arc<dyn Provider>,
    pub model: String,
    /// The reasoning effort the run's turns are sent with.
    pub thought_level: Option<String>,
    /// The conversation as the model is sent it (from its last compaction
    /// point on); for a prompt's run, ending with that prompt.
    pub history: Vec<Message>,
    pub cancel: CancellationToken,
    pub emitter: &'a mut Emitter,
    /// The tools, the policy and the approvals the run's tool calls go through.
    pub calls: CallEnv,
    /// What the session's earlier runs cost.
    pub session_cost: Option<Cost>,
    /// What the session's provider cost today before this run (for its
    /// daily budget).
    pub spent_today: Option<Cost>,
    /// The system prompt of the run's model turns, made before each
    /// (`core::prompt`).
    pub prompt: RunPrompt,
    /// The session's tools beyond the built-in ones, asked for before each
    /// model turn (so a changed list applies from the next turn on).
    pub session_tools: Option<Arc<dyn SessionTools>>,
    /// Counts the model's tokens, calibrated by its provider's reports.
    pub tokens: Counter,
    /// The model's context window in tokens (`models::Window`), settled
    /// before the run's first turn.
    pub window: usize,
    /// Model turns this run may take, when not the configured cap (a
    /// subagent's).
    pub max_turns: Option<u32>,
    /// For a subagent's run: whom it works for.
    pub subagent: Option<SubagentOf>,
    /// The budgets this run is held to, when not the configured ones (a
    /// subagent's: at most what its parent had left).
    pub budgets: Option<budget::Budgets>,
    /// Messages a person sends while the run works (`core::steering`);
    /// `None` for runs that take none.
    pub steering: Option<std::sync::Arc<super::steering::SteerBox>>,
}

/// The session a subagent's run works for, and its task's label.
#[derive(Debug, Clone)]
pub struct SubagentOf {
    pub parent_session: super::ids::SessionId,
    pub label: String,
}

impl LoopConfig {
    /// The configured context window of `model`: its catalogue entry, else
    /// the top-level one.
    pub fn configured_window(&self, model: &str) -> Option<usize> {
        self.models.context_window(model).or(self.context_tokens)
    }

    /// The context window of `model` without asking its server: the
    /// configured one, else `models::ASSUMED_WINDOW`.
    pub fn context_window(&self, model: &str) -> usize {
        self.configured_window(model)
            .unwrap_or(super::models::ASSUMED_WINDOW)
    }
}

/// What a model turn said, whole or up to where it stopped.
#[derive(Debug, Default)]
pub struct Said {
    pub text: String,
    pub thought: String,
    pub tool_calls: Vec<ToolCall>,
    /// How the provider failed, when it did.
    pub failure: Option<ProviderErrorKind>,
}

impl Said {
    /// The provider refused the request as too long before saying anything.
    pub fn overflowed(&self) -> bool {
        self.failure == Some(ProviderErrorKind::ContextLength) && self.is_empty()
    }

    /// Nothing was said: no text, no thought, no tool call.
    fn is_empty(&self) -> bool {
        self.text.is_empty() && self.thought.is_empty() && self.tool_calls.is_empty()
    }
}

/// One model turn to stream.
pub struct TurnRequest {
    /// The turn's number in the run (for the `model_turn` event).
    pub index: u32,
    /// The conversation, before it is fitted into the window.
    pub messages: Vec<Message>,
    /// The tools offered.
    pub tools: Arc<[Arc<ToolSpec>]>,
    /// The system prompt when already made for this turn; made now if `None`.
    pub system: Option<String>,
    /// Whether what the model says goes out as text and thought deltas (a
    /// summary written for an automatic compaction is not shown).
    pub shown: bool,
}

/// Text chunks a provider already has waiting: a burst of this many or
/// more goes out as one delta.
const BURST_MERGE: usize = 32;
/// The most chunks one burst gathers.
const BURST_MAX: usize = 4096;
/// The most bytes one burst gathers.
const BURST_BYTES: usize = 64 * 1024;

/// An item of a provider's stream: an event, a failure, or (`None`) its end.
type Item = Option<Result<ProviderEvent, ProviderError>>;

/// Streams one model turn over `messages` (fitted into the context window)
/// with `tools` offered: the turn's events (`model_turn`, deltas, tool calls,
/// usage) go to the emitter as they come. Returns how the turn ended — its
/// stop, or the outcome that ends the run (cancelled, failed) — and what it
/// said; records nothing in the history.
pub async fn stream_turn(
    ctx: &mut RunContext<'_>,
    config: &LoopConfig,
    turn: TurnRequest,
) -> (Result<ModelStop, RunOutcome>, Said) {
    let TurnRequest {
        index,
        messages,
        tools,
        system,
        shown,
    } = turn;
    ctx.emitter.emit(Event::ModelTurn {
        index,
        provider: ctx.provider.name().to_owned(),
        model: ctx.model.clone(),
    });
    let (request, sent) = model_request(ctx, config, messages, tools, system).await;
    let mut stream = ctx.provider.stream(request);
    let mut turn = Streaming {
        said: Said::default(),
        served_model: ctx.model.clone(),
        sent,
        shown,
    };
    // An item taken while gathering a burst of text, handled next.
    let mut held: Option<Item> = None;
    let ended = loop {
        let item = match held.take() {
            Some(item) => item,
            None => tokio::select! {
                biased;
                _ = ctx.cancel.cancelled() => break Err(RunOutcome::Cancelled),
                item = stream.next() => item,
            },
        };
        match item {
            Some(Ok(ProviderEvent::Text(delta))) => {
                let deltas = burst(&mut stream, delta, &mut held);
                turn.text(ctx, deltas);
            }
            Some(Ok(ProviderEvent::Thinking(delta))) => turn.thought(ctx, delta),
            Some(Ok(ProviderEvent::ToolCall(call))) => turn.tool_call(ctx, call),
            Some(Ok(ProviderEvent::Retrying(retry))) => turn.retrying(ctx, retry),
            Some(Ok(ProviderEvent::Served { provider, model })) => {
                tracing::debug!(%provider, %model, "model turn served");
                turn.served_model = model;
            }
            Some(Ok(ProviderEvent::Usage(usage))) => turn.usage(ctx, config, usage),
            Some(Ok(ProviderEvent::Done(stop))) => break Ok(stop),
            Some(Err(err)) => break Err(turn.failed(ctx, &err)),
            None => {
                break Err(RunOutcome::Failed(format!(
                    "provider {} ended the stream without finishing the turn",
                    ctx.provider.name()
                )));
            }
        }
    };
    // Dropping the stream here is what stops a provider on cancel.
    drop(stream);
    (ended, turn.said)
}

/// A turn's request: the system prompt (made now unless given), the
/// conversation fitted into what the window leaves beside it, the tools
/// and the memory recalled for it; and what is sent as counted before
/// calibration, to set against what the provider reports.
async fn model_request(
    ctx: &RunContext<'_>,
    config: &LoopConfig,
    mut messages: Vec<Message>,
    tools: Arc<[Arc<ToolSpec>]>,
    system: Option<String>,
) -> (ModelRequest, usize) {
    let system = match system {
        Some(system) => system,
        None => ctx.prompt.render(&messages).await,
    };
    let recalled = match &ctx.prompt.memory {
        Some(memory) => memory.block(&messages, true).await,
        None => None,
    };
    let tokens = &ctx.tokens;
    let budget = ctx
        .window
        .saturating_sub(config.reserve_in(ctx.window))
        .saturating_sub(tokens.text(&system))
        .saturating_sub(tokens.tools(&tools))
        .saturating_sub(recalled.as_ref().map_or(0, |block| tokens.text(block)));
    let fitted = context::fit(&mut messages, budget, tokens);
    if let Some(block) = recalled {
        super::prompt::insert_recall(&mut messages, block);
    }
    if fitted != context::Fitted::default() {
        tracing::info!(
            shortened = fitted.shortened,
            dropped = fitted.dropped,
            budget,
            "fitted the conversation into the context window"
        );
    }
    let sent = tokens.raw_request(&system, &tools, &messages);
    let request = ModelRequest {
        model: ctx.model.clone(),
        system: Some(system),
        messages,
        tools,
        reasoning_effort: ctx.thought_level.clone(),
    };
    (request, sent)
}

/// The text chunks the provider already has waiting after `first`, as the
/// deltas to show: a burst of [`BURST_MERGE`] or more goes out as one delta
/// (the same text in fewer events), so a subscriber keeps up with a
/// provider that delivers faster than events can be journaled one by one.
/// The first other item found waits in `held`.
fn burst(stream: &mut ProviderStream, first: String, held: &mut Option<Item>) -> Vec<String> {
    let mut burst = vec![first];
    let mut bytes = burst[0].len();
    while burst.len() < BURST_MAX && bytes < BURST_BYTES {
        match futures::FutureExt::now_or_never(stream.next()) {
            Some(Some(Ok(ProviderEvent::Text(more)))) => {
                bytes += more.len();
                burst.push(more);
            }
            Some(other) => {
                *held = Some(other);
                break;
            }
            None => break,
        }
    }
    if burst.len() >= BURST_MERGE {
        vec![burst.concat()]
    } else {
        burst
    }
}

/// A turn as it streams: what it said so far, the model serving it, what
/// was sent (counted before calibration) and whether what it says is shown.
struct Streaming {
    said: Said,
    served_model: String,
    sent: usize,
    shown: bool,
}

impl Streaming {
    fn text(&mut self, ctx: &mut RunContext<'_>, deltas: Vec<String>) {
        for delta in deltas {
            self.said.text.push_str(&delta);
            if self.shown {
                ctx.emitter.emit(Event::TextDelta { text: delta });
            }
        }
    }

    fn thought(&mut self, ctx: &mut RunContext<'_>, delta: String) {
        self.said.thought.push_str(&delta);
        if self.shown {
            ctx.emitter.emit(Event::ThoughtDelta { text: delta });
        }
    }

    fn tool_call(&mut self, ctx: &mut RunContext<'_>, call: ToolCall) {
        ctx.emitter.emit(Event::ToolCall {
            id: call.id.clone(),
            name: call.name.clone(),
            arguments: gate::redact_json(&ctx.calls.safety, &call.arguments),
            kind: gate::kind_of(&ctx.calls, &call),
        });
        self.said.tool_calls.push(call);
    }

    fn retrying(&self, ctx: &mut RunContext<'_>, retry: Retry) {
        if self.shown {
            ctx.emitter.emit(Event::Retrying {
                attempt: retry.attempt,
                attempts: retry.attempts,
                wait_ms: u64::try_from(retry.wait.as_millis()).unwrap_or(u64::MAX),
                reason: retry.reason,
            });
        }
    }

    fn usage(&self, ctx: &mut RunContext<'_>, config: &LoopConfig, usage: Usage) {
        ctx.tokens
            .observe(&self.served_model, self.sent, usage.input_tokens);
        let event = usage_event(ctx, config, &self.served_model, usage);
        ctx.emitter.emit(event);
    }

    /// The run's failure when the provider failed, said before or after
    /// the turn's first output.
    fn failed(&mut self, ctx: &RunContext<'_>, err: &ProviderError) -> RunOutcome {
        self.said.failure = Some(err.kind);
        let when = if self.said.is_empty() {
            "before any output"
        } else {
            "mid-stream"
        };
        // With the session's own secrets too (an MCP server's token).
        let said = ctx.calls.safety.redact(&err.to_string()).0;
        RunOutcome::Failed(format!(
            "provider {} failed {when}: {said}",
            ctx.provider.name()
        ))
    }
}

/// What the run has cost so far (its turns' usage events), and what its
/// session and provider had cost before it, in the budgets' currency.
pub fn spent(ctx: &RunContext<'_>, config: &LoopConfig) -> budget::Spent {
    let currency = &config.budgets.currency;
    let delegated = ctx.calls.delegated.lock().clone();
    budget::Spent {
        run: budget::amount(ctx.emitter.cost.as_ref(), currency)
            + budget::amount(delegated.as_ref(), currency),
        session_before: budget::amount(ctx.session_cost.as_ref(), currency),
        today_before: budget::amount(ctx.spent_today.as_ref(), currency),
    }
}

/// The `usage` event of a turn: its tokens, its cost, how full the context is
/// and what the session has cost so far.
fn usage_event(ctx: &RunContext<'_>, config: &LoopConfig, model: &str, usage: Usage) -> Event {
    let cost = config.models.cost(model, &usage);
    let run_cost = Cost::sum(ctx.emitter.cost.clone(), cost.as_ref());
    let session_cost = match (&ctx.session_cost, run_cost) {
        (Some(before), run) => Cost::sum(Some(before.clone()), run.as_ref()),
        (None, run) => run,
    };
    let mut spent = spent(ctx, config);
    spent.run += budget::amount(cost.as_ref(), &config.budgets.currency);
    Event::Usage {
        usage,
        model: Some(model.to_owned()),
        cost,
        context: Some(ContextUse {
            used: usage.input_tokens + usage.output_tokens,
            size: if model == ctx.model {
                ctx.window
            } else {
                config.context_window(model)
            } as u64,
        }),
        session_cost,
        budget: budget::left(&config.budgets, ctx.provider.name(), &spent),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The answer's reserve never eats a small window whole.
    #[test]
    fn the_answers_reserve_is_at_most_a_quarter_of_the_window() {
        let config = LoopConfig::default();
        assert_eq!(config.reserve_in(128_000), 8_192);
        assert_eq!(config.reserve_in(32_768), 8_192);
        assert_eq!(config.reserve_in(4_096), 1_024);
        assert_eq!(config.reserve_in(0), 0);
    }

    fn chunks(texts: &[&str]) -> Vec<Result<ProviderEvent, ProviderError>> {
        texts
            .iter()
            .map(|text| Ok(ProviderEvent::Text((*text).to_owned())))
            .collect()
    }

    #[test]
    fn a_burst_of_waiting_chunks_is_one_delta_and_the_next_item_waits() {
        let texts: Vec<String> = (1..40).map(|i| format!("{i} ")).collect();
        let texts: Vec<&str> = texts.iter().map(String::as_str).collect();
        let mut items = chunks(&texts);
        items.push(Ok(ProviderEvent::Done(ModelStop::EndTurn)));
        let mut stream: ProviderStream = futures::stream::iter(items).boxed();
        let mut held = None;
        let deltas = burst(&mut stream, "0 ".into(), &mut held);
        let whole: String = (0..40).map(|i| format!("{i} ")).collect();
        assert_eq!(deltas, [whole]);
        assert!(
            matches!(
                held,
                Some(Some(Ok(ProviderEvent::Done(ModelStop::EndTurn))))
            ),
            "{held:?}"
        );
    }

    #[test]
    fn a_few_waiting_chunks_stay_apart_and_a_chunk_not_yet_come_is_not_waited_for() {
        let ready = futures::stream::iter(chunks(&["b", "c"]));
        let mut stream: ProviderStream = ready.chain(futures::stream::pending()).boxed();
        let mut held = None;
        assert_eq!(burst(&mut stream, "a".into(), &mut held), ["a", "b", "c"]);
        assert!(held.is_none(), "{held:?}");
        // The stream's end is an item too: it waits for the loop.
        let mut stream: ProviderStream = futures::stream::iter(chunks(&["b"])).boxed();
        assert_eq!(burst(&mut stream, "a".into(), &mut held), ["a", "b"]);
        assert!(matches!(held, Some(None)), "{held:?}");
    }

    #[test]
    fn a_burst_stops_gathering_at_its_byte_bound() {
        let half = "x".repeat(BURST_BYTES / 2);
        let items = chunks(&[half.as_str(), "after"]);
        let mut stream: ProviderStream = futures::stream::iter(items).boxed();
        let mut held = None;
        let deltas = burst(&mut stream, half.clone(), &mut held);
        let sizes: Vec<usize> = deltas.iter().map(String::len).collect();
        assert_eq!(sizes, [half.len(), half.len()]);
        assert!(held.is_none());
        let next = futures::FutureExt::now_or_never(stream.next());
        assert!(
            matches!(&next, Some(Some(Ok(ProviderEvent::Text(t)))) if t == "after"),
            "the chunk after the bound was taken"
        );
    }
}
