//! The OpenAI-compatible chat completions provider: one streamed
//! `POST {base_url}/chat/completions` per model turn, decoded from SSE.
//!
//! The same wire format is spoken by OpenAI, OpenRouter, Ollama (`/v1`), vLLM,
//! llama.cpp server and LM Studio, so the decoder is lenient where they differ
//! (reasoning field names, usage chunks, missing tool call ids, no `[DONE]`)
//! and strict where a mistake would hurt (a tool call is only emitted once the
//! model finished its turn, so a cut stream never runs half a call).

use std::collections::{BTreeMap, VecDeque};
use std::time::Duration;

use eventsource_stream::{EventStreamError, Eventsource};
use futures::StreamExt;
use futures::stream::BoxStream;
use serde_json::{Value, json};

use crate::core::event::Usage;
use crate::core::provider::{
    ModelRequest, ModelStop, Provider, ProviderError, ProviderErrorKind, ProviderEvent,
    ProviderStream, ToolSpec,
};
use crate::core::session::{ContentPart, Message, ToolCall};

/// How to reach one OpenAI-compatible server.
#[derive(Debug, Clone)]
pub struct OpenAiSettings {
    /// The provider's configured name, used in messages and on the tape.
    pub name: String,
    /// The API root, e.g. `https://api.openai.com/v1` or `http://localhost:11434/v1`.
    pub base_url: String,
    /// Sent as `Authorization: Bearer …` when set; local servers need none.
    pub api_key: Option<String>,
    /// Extra request headers (OpenRouter's `HTTP-Referer`, a proxy's key).
    pub headers: Vec<(String, String)>,
    /// The limit for connecting and for each read of the stream.
    pub timeout: Duration,
}

/// A provider speaking the OpenAI chat completions API.
pub struct OpenAiProvider {
    settings: OpenAiSettings,
    client: reqwest::Client,
    url: String,
}

impl OpenAiProvider {
    pub fn new(settings: OpenAiSettings) -> Result<Self, ProviderError> {
        let client = super::http_client(settings.timeout).map_err(|err| {
            ProviderError::new(
                ProviderErrorKind::Config,
                format!(
                    "provider {}: cannot set up the HTTP client: {err}",
                    settings.name
                ),
            )
        })?;
        // Validate header names and values now, so a typo in config is reported
        // when the provider is built rather than on every turn.
        for (name, value) in &settings.headers {
            if reqwest::header::HeaderName::from_bytes(name.as_bytes()).is_err()
                || reqwest::header::HeaderValue::from_str(value).is_err()
            {
                return Err(ProviderError::new(
                    ProviderErrorKind::Config,
                    format!(
                        "provider {}: the header {name:?} is not valid",
                        settings.name
                    ),
                ));
            }
        }
        let url = format!(
            "{}/chat/completions",
            settings.base_url.trim_end_matches('/')
        );
        Ok(Self {
            settings,
            client,
            url,
        })
    }
}

impl Provider for OpenAiProvider {
    fn name(&self) -> &str {
        &self.settings.name
    }

    fn stream(&self, request: ModelRequest) -> ProviderStream {
        let body = request_body(&request);
        let mut builder = self.client.post(&self.url).json(&body);
        if let Some(key) = &self.settings.api_key {
            builder = builder.bearer_auth(key);
        }
        for (name, value) in &self.settings.headers {
            builder = builder.header(name.as_str(), value.as_str());
        }
        let context = ErrorContext {
            provider: self.settings.name.clone(),
            model: request.model.clone(),
            url: self.url.clone(),
            has_key: self.settings.api_key.is_some(),
        };
        let tool_names: Vec<String> = request.tools.iter().map(|t| t.name.clone()).collect();
        let start = async move {
            let response = builder
                .send()
                .await
                .map_err(|err| context.transport(&err))?;
            let status = response.status();
            if !status.is_success() {
                let retry_after = retry_after(response.headers());
                // A body that fails to arrive still leaves the status to go by.
                let text = response.text().await.unwrap_or_default();
                let mut error = context.http(status.as_u16(), &text);
                error.retry_after = retry_after;
                return Err(error);
            }
            Ok(Turn {
                events: response.bytes_stream().eventsource().boxed(),
                decoder: Decoder::new(context, tool_names),
            })
        };
        futures::stream::once(start)
            .flat_map(|started| match started {
                Ok(turn) => turn.into_stream(),
                Err(error) => futures::stream::once(async move { Err(error) }).boxed(),
            })
            .boxed()
    }
}

/// The JSON body of a chat completions request.
fn request_body(request: &ModelRequest) -> Value {
    let mut messages = Vec::with_capacity(request.messages.len() + 1);
    if let Some(system) = &request.system {
        messages.push(json!({"role": "system", "content": system}));
    }
    for message in &request.messages {
        messages.push(match message {
            Message::User { content } => json!({"role": "user", "content": user_text(content)}),
            // An interrupted turn is sent as what was said: the model should see
            // its partial answer rather than a gap. The thought is not sent back;
            // several servers reject reasoning fields in input messages.
            Message::Assistant {
                text, tool_calls, ..
            } => {
                let mut out = json!({"role": "assistant", "content": text});
                if !tool_calls.is_empty() {
                    if text.is_empty() {
                        out["content"] = Value::Null;
                    }
                    out["tool_calls"] = tool_calls
                        .iter()
                        .map(|call| {
                            json!({
                                "id": call.id,
                                "type": "function",
                                "function": {
                                    "name": call.name,
                                    "arguments": call.arguments.to_string(),
                                },
                            })
                        })
                        .collect();
                }
                out
            }
            Message::Tool {
                call_id, content, ..
            } => json!({"role": "tool", "tool_call_id": call_id, "content": content}),
        });
    }
    let mut body = json!({
        "model": request.model,
        "messages": messages,
        "stream": true,
        "stream_options": {"include_usage": true},
    });
    if !request.tools.is_empty() {
        body["tools"] = request.tools.iter().map(tool_json).collect();
    }
    body
}

fn user_text(content: &[ContentPart]) -> String {
    content
        .iter()
        .map(ContentPart::to_model_text)
        .collect::<Vec<_>>()
        .join("\n\n")
}

fn tool_json(tool: &ToolSpec) -> Value {
    json!({
        "type": "function",
        "function": {
            "name": tool.name,
            "description": tool.description,
            "parameters": tool.parameters,
        },
    })
}

/// `Retry-After` as seconds or an HTTP date; OpenAI also sends `retry-after-ms`.
fn retry_after(headers: &reqwest::header::HeaderMap) -> Option<Duration> {
    let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    if let Some(ms) = header("retry-after-ms").and_then(|v| v.trim().parse::<f64>().ok()) {
        return Some(Duration::from_secs_f64(ms.max(0.0) / 1000.0));
    }
    let value = header("retry-after")?.trim();
    if let Ok(seconds) = value.parse::<f64>() {
        return Some(Duration::from_secs_f64(seconds.max(0.0)));
    }
    static PARSER: jiff::fmt::rfc2822::DateTimeParser = jiff::fmt::rfc2822::DateTimeParser::new();
    let at = PARSER.parse_timestamp(value).ok()?;
    let wait = at.as_millisecond() - jiff::Timestamp::now().as_millisecond();
    Some(Duration::from_millis(u64::try_from(wait).unwrap_or(0)))
}

/// What error messages need to name.
struct ErrorContext {
    provider: String,
    model: String,
    url: String,
    has_key: bool,
}

impl ErrorContext {
    /// A failure to send the request or to read the stream.
    fn transport(&self, err: &reqwest::Error) -> ProviderError {
        let detail = error_chain(err);
        if err.is_timeout() {
            ProviderError::new(
                ProviderErrorKind::Timeout,
                format!(
                    "provider {} did not answer in time: {detail}",
                    self.provider
                ),
            )
        } else if err.is_connect() {
            ProviderError::new(
                ProviderErrorKind::Transport,
                format!(
                    "cannot connect to provider {} at {}: {detail}",
                    self.provider, self.url
                ),
            )
        } else {
            ProviderError::new(
                ProviderErrorKind::Transport,
                format!(
                    "the connection to provider {} failed: {detail}",
                    self.provider
                ),
            )
        }
    }

    /// An HTTP error answer before the stream started.
    fn http(&self, status: u16, body: &str) -> ProviderError {
        let parsed: Value = serde_json::from_str(body).unwrap_or(Value::Null);
        let error = &parsed["error"];
        let message = error["message"]
            .as_str()
            .or_else(|| error.as_str())
            .or_else(|| parsed["message"].as_str())
            .map(str::to_owned)
            .unwrap_or_else(|| body.trim().chars().take(500).collect());
        let code = error["code"].as_str().or_else(|| error["type"].as_str());
        self.classify(Some(status), code, &message)
    }

    /// An `error` object sent inside the stream.
    fn in_stream(&self, error: &Value) -> ProviderError {
        let message = error["message"]
            .as_str()
            .or_else(|| error.as_str())
            .map(str::to_owned)
            .unwrap_or_else(|| error.to_string());
        // OpenRouter puts the HTTP status it would have sent in `code`.
        let status = error["code"].as_u64().and_then(|c| u16::try_from(c).ok());
        let code = error["code"].as_str().or_else(|| error["type"].as_str());
        let mut classified = self.classify(status, code, &message);
        if status.is_none() && classified.kind == ProviderErrorKind::Protocol {
            // Without a status an unrecognised error mid-answer is the server's
            // failure, not something we misunderstood.
            classified.kind = ProviderErrorKind::Server;
        }
        classified
    }

    fn classify(&self, status: Option<u16>, code: Option<&str>, message: &str) -> ProviderError {
        let provider = &self.provider;
        let lower = message.to_ascii_lowercase();
        let code = code.unwrap_or_default();
        let said = if message.is_empty() {
            String::new()
        } else {
            format!(": {message}")
        };
        let status_text = status.map(|s| format!(" (HTTP {s})")).unwrap_or_default();
        let (kind, text) = if matches!(status, Some(401 | 403))
            || matches!(
                code,
                "invalid_api_key" | "authentication_error" | "permission_error"
            ) {
            let what = if self.has_key {
                format!("the provider {provider} rejected the API key{status_text}")
            } else {
                format!("the provider {provider} needs an API key and none is set{status_text}")
            };
            (ProviderErrorKind::Auth, format!("{what}{said}"))
        } else if code == "model_not_found" || (status == Some(404) && lower.contains("model")) {
            (
                ProviderErrorKind::UnknownModel,
                format!(
                    "the provider {provider} does not know the model {}{said}",
                    self.model
                ),
            )
        } else if code == "context_length_exceeded"
            || lower.contains("context length")
            || lower.contains("context_length")
            || lower.contains("maximum context")
            || lower.contains("context window")
        {
            (
                ProviderErrorKind::ContextLength,
                format!(
                    "the conversation is too long for the model {}{said}",
                    self.model
                ),
            )
        } else if status == Some(429) || code == "rate_limit_exceeded" || code == "rate_limit_error"
        {
            (
                ProviderErrorKind::RateLimited,
                format!("the provider {provider} is rate limiting requests{status_text}{said}"),
            )
        } else if status.is_some_and(|s| s >= 500) || code == "server_error" {
            (
                ProviderErrorKind::Server,
                format!("the provider {provider} failed{status_text}{said}"),
            )
        } else if status == Some(404) {
            (
                ProviderErrorKind::Protocol,
                format!(
                    "the provider {provider} has no chat completions endpoint at {}{status_text}{said}",
                    self.url
                ),
            )
        } else {
            (
                ProviderErrorKind::Protocol,
                format!("the provider {provider} refused the request{status_text}{said}"),
            )
        };
        ProviderError::new(kind, text)
    }
}

/// The error and its sources in one line: reqwest's own text is terse.
fn error_chain(err: &dyn std::error::Error) -> String {
    let mut text = err.to_string();
    let mut source = err.source();
    while let Some(cause) = source {
        let cause_text = cause.to_string();
        if !text.contains(&cause_text) {
            text.push_str(": ");
            text.push_str(&cause_text);
        }
        source = cause.source();
    }
    text
}

type SseStream =
    BoxStream<'static, Result<eventsource_stream::Event, EventStreamError<reqwest::Error>>>;

/// A started turn: the SSE stream and the decoder turning it into events.
struct Turn {
    events: SseStream,
    decoder: Decoder,
}

impl Turn {
    fn into_stream(self) -> ProviderStream {
        futures::stream::unfold(self, |mut turn| async move {
            loop {
                if let Some(item) = turn.decoder.out.pop_front() {
                    return Some((item, turn));
                }
                if turn.decoder.over {
                    return None;
                }
                match turn.events.next().await {
                    Some(Ok(event)) => turn.decoder.data(&event.data),
                    Some(Err(err)) => turn.decoder.failed(err),
                    None => turn.decoder.ended(),
                }
            }
        })
        .boxed()
    }
}

/// A tool call being assembled from fragments.
#[derive(Default)]
struct PartialCall {
    id: String,
    name: String,
    arguments: String,
}

/// Turns SSE data lines into provider events, queued in `out`.
struct Decoder {
    context: ErrorContext,
    out: VecDeque<Result<ProviderEvent, ProviderError>>,
    /// Set once nothing more will be queued.
    over: bool,
    /// Keyed by the fragment's `index`, so calls come out in index order.
    calls: BTreeMap<u64, PartialCall>,
    /// The model's finish reason; `Done` is held until usage or the end.
    finish: Option<ModelStop>,
    usage: Option<Usage>,
    text_calls: TextCalls,
}

impl Decoder {
    fn new(context: ErrorContext, tool_names: Vec<String>) -> Self {
        Self {
            context,
            out: VecDeque::new(),
            over: false,
            calls: BTreeMap::new(),
            finish: None,
            usage: None,
            text_calls: TextCalls::new(tool_names),
        }
    }

    fn fail(&mut self, error: ProviderError) {
        self.out.push_back(Err(error));
        self.over = true;
    }

    /// Ends the turn with the held usage and `Done`.
    fn finish_turn(&mut self, stop: ModelStop) {
        if let Some(usage) = self.usage.take() {
            self.out.push_back(Ok(ProviderEvent::Usage(usage)));
        }
        self.out.push_back(Ok(ProviderEvent::Done(stop)));
        self.over = true;
    }

    fn data(&mut self, data: &str) {
        let data = data.trim();
        if data.is_empty() {
            return;
        }
        if data == "[DONE]" {
            match self.finish {
                Some(stop) => self.finish_turn(stop),
                // `[DONE]` is an explicit end, unlike a cut connection: a
                // server that omits the finish reason still finished.
                None => {
                    let stop = self.close_choice(None);
                    if !self.over {
                        self.finish_turn(stop);
                    }
                }
            }
            return;
        }
        let chunk: Value = match serde_json::from_str(data) {
            Ok(chunk) => chunk,
            Err(err) => {
                let shown: String = data.chars().take(200).collect();
                let error = ProviderError::new(
                    ProviderErrorKind::Protocol,
                    format!(
                        "provider {} sent a stream chunk that is not JSON ({err}): {shown}",
                        self.context.provider
                    ),
                );
                return self.fail(error);
            }
        };
        if let Some(error) = chunk.get("error").filter(|e| !e.is_null()) {
            let error = self.context.in_stream(error);
            return self.fail(error);
        }
        let choice = chunk["choices"].as_array().and_then(|choices| {
            choices
                .iter()
                .find(|c| c["index"].as_u64().unwrap_or(0) == 0)
        });
        if let Some(choice) = choice {
            self.delta(&choice["delta"]);
            if self.over {
                return;
            }
            if self.finish.is_none()
                && let Some(reason) = choice["finish_reason"].as_str()
            {
                let stop = self.close_choice(Some(reason));
                if self.over {
                    return;
                }
                self.finish = Some(stop);
            }
        }
        if let Some(usage) = chunk.get("usage").filter(|u| u.is_object()) {
            // Kept rather than emitted: servers that send usage on every chunk
            // send running totals, and only the last one counts.
            self.usage = Some(parse_usage(usage));
            if let Some(stop) = self.finish {
                self.finish_turn(stop);
            }
        }
    }

    fn delta(&mut self, delta: &Value) {
        let reasoning = delta["reasoning_content"]
            .as_str()
            .or_else(|| delta["reasoning"].as_str());
        if let Some(thought) = reasoning.filter(|t| !t.is_empty()) {
            self.out
                .push_back(Ok(ProviderEvent::Thinking(thought.to_owned())));
        }
        if let Some(text) = delta["content"].as_str().filter(|t| !t.is_empty()) {
            let shown = self.text_calls.push(text);
            if !shown.is_empty() {
                self.out.push_back(Ok(ProviderEvent::Text(shown)));
            }
        }
        if let Some(fragments) = delta["tool_calls"].as_array() {
            for (position, fragment) in fragments.iter().enumerate() {
                // Servers that send whole calls at once sometimes omit `index`.
                let index = fragment["index"].as_u64().unwrap_or(position as u64);
                let call = self.calls.entry(index).or_default();
                if let Some(id) = fragment["id"].as_str().filter(|id| !id.is_empty()) {
                    call.id = id.to_owned();
                }
                let function = &fragment["function"];
                if let Some(name) = function["name"].as_str() {
                    call.name.push_str(name);
                }
                match &function["arguments"] {
                    Value::String(piece) => call.arguments.push_str(piece),
                    Value::Null => {}
                    // Some servers send the arguments as an object, not a string.
                    whole => call.arguments = whole.to_string(),
                }
            }
        }
    }

    /// The choice is finished: flushes held text and emits the assembled tool
    /// calls, returning the stop reason.
    fn close_choice(&mut self, reason: Option<&str>) -> ModelStop {
        let (rest, text_calls) = self.text_calls.finish();
        if !rest.is_empty() {
            self.out.push_back(Ok(ProviderEvent::Text(rest)));
        }
        let mut any_call = false;
        for (index, call) in std::mem::take(&mut self.calls) {
            let arguments = if call.arguments.trim().is_empty() {
                Ok(json!({}))
            } else {
                serde_json::from_str::<Value>(&call.arguments)
            };
            match arguments {
                Ok(arguments) => {
                    any_call = true;
                    let id = if call.id.is_empty() {
                        new_call_id(index)
                    } else {
                        call.id
                    };
                    self.out.push_back(Ok(ProviderEvent::ToolCall(ToolCall {
                        id,
                        name: call.name,
                        arguments,
                    })));
                }
                Err(err) => {
                    let shown: String = call.arguments.chars().take(200).collect();
                    let error = ProviderError::new(
                        ProviderErrorKind::Protocol,
                        format!(
                            "the model sent malformed JSON arguments for the tool {} ({err}): {shown}",
                            call.name
                        ),
                    );
                    self.fail(error);
                    return ModelStop::EndTurn;
                }
            }
        }
        for (index, call) in text_calls.into_iter().enumerate() {
            any_call = true;
            self.out.push_back(Ok(ProviderEvent::ToolCall(ToolCall {
                id: new_call_id(index as u64),
                name: call.0,
                arguments: call.1,
            })));
        }
        match reason {
            Some("length") => ModelStop::MaxTokens,
            Some("content_filter") => ModelStop::Refusal,
            Some("tool_calls" | "function_call") => ModelStop::ToolUse,
            // Some servers say "stop" even when the turn ends in tool calls.
            _ if any_call => ModelStop::ToolUse,
            _ => ModelStop::EndTurn,
        }
    }

    /// The SSE stream failed.
    fn failed(&mut self, err: EventStreamError<reqwest::Error>) {
        if let Some(stop) = self.finish {
            // The answer was complete; only the usage or `[DONE]` was lost.
            return self.finish_turn(stop);
        }
        let error = match err {
            EventStreamError::Transport(err) => {
                let mut error = self.context.transport(&err);
                if error.kind == ProviderErrorKind::Transport {
                    error.message = format!(
                        "the stream from provider {} broke before the model finished: {}",
                        self.context.provider,
                        error_chain(&err)
                    );
                }
                error
            }
            other => ProviderError::new(
                ProviderErrorKind::Protocol,
                format!(
                    "provider {} sent a malformed event stream: {other}",
                    self.context.provider
                ),
            ),
        };
        self.fail(error);
    }

    /// The SSE stream ended without `[DONE]`.
    fn ended(&mut self) {
        match self.finish {
            Some(stop) => self.finish_turn(stop),
            None => self.fail(ProviderError::new(
                ProviderErrorKind::Transport,
                format!(
                    "the stream ended before the model finished (provider {})",
                    self.context.provider
                ),
            )),
        }
    }
}

/// An id for a call the server sent without one; unique so tool results
/// cannot be matched to the wrong call across turns.
fn new_call_id(index: u64) -> String {
    format!("call_{}_{index}", uuid::Uuid::now_v7().simple())
}

fn parse_usage(usage: &Value) -> Usage {
    let count = |value: &Value| value.as_u64().unwrap_or(0);
    Usage {
        input_tokens: count(&usage["prompt_tokens"]),
        output_tokens: count(&usage["completion_tokens"]),
        cached_input_tokens: count(&usage["prompt_tokens_details"]["cached_tokens"]),
        reasoning_tokens: count(&usage["completion_tokens_details"]["reasoning_tokens"]),
    }
}

const OPEN_TAG: &str = "<tool_call>";
const CLOSE_TAG: &str = "</tool_call>";

/// Picks `<tool_call>{"name": ..., "arguments": ...}</tool_call>` blocks out of
/// streamed text, as small local models write tool calls. Text that might be
/// the start of a block is held back until it is clear it is not, so the block
/// never reaches the user as text. Only active when tools were offered, and a
/// block naming no offered tool is shown as the text it was.
struct TextCalls {
    tool_names: Vec<String>,
    /// Text not yet shown: a possible tag start, or a block's body.
    held: String,
    in_block: bool,
    calls: Vec<(String, Value)>,
}

impl TextCalls {
    fn new(tool_names: Vec<String>) -> Self {
        Self {
            tool_names,
            held: String::new(),
            in_block: false,
            calls: Vec::new(),
        }
    }

    /// Takes a text delta; returns the part that can be shown now.
    fn push(&mut self, text: &str) -> String {
        if self.tool_names.is_empty() {
            return text.to_owned();
        }
        self.held.push_str(text);
        let mut shown = String::new();
        loop {
            if self.in_block {
                let Some(end) = self.held.find(CLOSE_TAG) else {
                    break;
                };
                let body = self.held[..end].to_owned();
                self.held.drain(..end + CLOSE_TAG.len());
                self.in_block = false;
                match self.parse_block(&body) {
                    Some(call) => self.calls.push(call),
                    None => {
                        shown.push_str(OPEN_TAG);
                        shown.push_str(&body);
                        shown.push_str(CLOSE_TAG);
                    }
                }
            } else if let Some(start) = self.held.find(OPEN_TAG) {
                shown.push_str(&self.held[..start]);
                self.held.drain(..start + OPEN_TAG.len());
                self.in_block = true;
            } else {
                // Keep the longest tail that could begin the open tag.
                let keep = (1..OPEN_TAG.len())
                    .rev()
                    .find(|&n| self.held.ends_with(&OPEN_TAG[..n]))
                    .unwrap_or(0);
                let cut = self.held.len() - keep;
                shown.push_str(&self.held[..cut]);
                self.held.drain(..cut);
                break;
            }
        }
        shown
    }

    /// The turn ended: the held text and the calls found.
    fn finish(&mut self) -> (String, Vec<(String, Value)>) {
        let mut rest = String::new();
        if self.in_block {
            // An unclosed block is shown as written rather than guessed at.
            rest.push_str(OPEN_TAG);
            self.in_block = false;
        }
        rest.push_str(&std::mem::take(&mut self.held));
        (rest, std::mem::take(&mut self.calls))
    }

    fn parse_block(&self, body: &str) -> Option<(String, Value)> {
        let value: Value = serde_json::from_str(body.trim()).ok()?;
        let name = value["name"].as_str()?;
        if !self.tool_names.iter().any(|known| known == name) {
            return None;
        }
        let arguments = match value.get("arguments").or_else(|| value.get("parameters")) {
            None | Some(Value::Null) => json!({}),
            // Some models write the arguments as a JSON string.
            Some(Value::String(text)) => serde_json::from_str(text).ok()?,
            Some(other) => other.clone(),
        };
        Some((name.to_owned(), arguments))
    }
}
