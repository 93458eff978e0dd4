//! The Anthropic Messages API, streaming (`POST /v1/messages`, `stream: true`).
//!
//! Server-sent events: `message_start` (input usage), `content_block_start` /
//! `_delta` / `_stop` (text, `tool_use` with `input_json_delta` fragments,
//! `thinking`), `message_delta` (stop reason, output usage), `message_stop`,
//! `ping`, and `error`. A tool call is emitted only when its block is complete,
//! so a stream cut in the middle of one never yields a half-written call.

use std::collections::{HashMap, VecDeque};
use std::time::Duration;

use futures::StreamExt;
use futures::stream::BoxStream;
use serde_json::{Value, json};

use crate::core::event::Usage;
use crate::core::provider::{
    ModelRequest, ModelStop, Provider, ProviderError, ProviderErrorKind, ProviderEvent,
    ProviderStream,
};
use crate::core::session::{ContentPart, Message, ToolCall, note_for_model, summary_for_model};
use crate::providers::sse::Sse;

/// The API version Pincer speaks.
const API_VERSION: &str = "2023-06-01";

/// Settings of one Anthropic provider.
#[derive(Debug, Clone)]
pub struct AnthropicSettings {
    /// The provider's configured name.
    pub name: String,
    /// Without the `/v1/messages` path, e.g. `https://api.anthropic.com`.
    pub base_url: String,
    pub api_key: Option<String>,
    pub headers: Vec<(String, String)>,
    /// Limit for connecting and for each read of the stream.
    pub timeout: Duration,
    /// `max_tokens` of every request (the API requires one).
    pub max_tokens: u32,
}

pub struct AnthropicProvider {
    settings: AnthropicSettings,
    client: super::LazyClient,
}

impl AnthropicProvider {
    pub fn new(settings: AnthropicSettings) -> Result<Self, ProviderError> {
        let client = super::LazyClient::new(&settings.name, settings.timeout);
        Ok(Self { settings, client })
    }

    fn url(&self) -> String {
        format!(
            "{}/v1/messages",
            self.settings.base_url.trim_end_matches('/')
        )
    }
}

impl Provider for AnthropicProvider {
    fn name(&self) -> &str {
        &self.settings.name
    }

    fn stream(&self, request: ModelRequest) -> ProviderStream {
        let body = request_body(&request, self.settings.max_tokens);
        let client = match self.client.get() {
            Ok(client) => client,
            Err(error) => return futures::stream::once(async move { Err(error) }).boxed(),
        };
        let mut builder = client
            .post(self.url())
            .header("anthropic-version", API_VERSION)
            .header("accept", "text/event-stream")
            .json(&body);
        if let Some(key) = &self.settings.api_key {
            builder = builder.header("x-api-key", key);
        }
        for (name, value) in &self.settings.headers {
            builder = builder.header(name, value);
        }
        let name = self.settings.name.clone();
        let opened = futures::stream::once(async move {
            let response = builder
                .send()
                .await
                .map_err(|err| transport_error(&name, &err))?;
            let status = response.status();
            if !status.is_success() {
                let retry_after = super::retry_after(response.headers());
                let text = response.text().await.unwrap_or_default();
                let mut error = http_error(&name, status.as_u16(), &text);
                error.retry_after = retry_after;
                return Err(error);
            }
            Ok(events(name, response.bytes_stream()))
        })
        .flat_map(|opened| match opened {
            Ok(stream) => stream,
            Err(error) => futures::stream::once(async move { Err(error) }).boxed(),
        });
        super::ahead::ahead(opened.boxed())
    }
}

/// The request body: system apart, alternating user/assistant turns, tool
/// results as `tool_result` blocks of a user turn.
fn request_body(request: &ModelRequest, max_tokens: u32) -> Value {
    let mut messages: Vec<Value> = Vec::new();
    let mut push = |role: &str, blocks: Vec<Value>| {
        if blocks.is_empty() {
            return;
        }
        // Consecutive turns of one role merge: the API wants them alternating.
        if let Some(last) = messages.last_mut()
            && last["role"] == role
            && let Some(content) = last["content"].as_array_mut()
        {
            content.extend(blocks);
            return;
        }
        messages.push(json!({"role": role, "content": blocks}));
    };
    for message in &request.messages {
        match message {
            Message::User { content } => push("user", user_blocks(content)),
            Message::Assistant {
                text, tool_calls, ..
            } => {
                let mut blocks = Vec::new();
                if !text.is_empty() {
                    blocks.push(json!({"type": "text", "text": text}));
                }
                for call in tool_calls {
                    blocks.push(json!({
                        "type": "tool_use",
                        "id": call.id,
                        "name": call.name,
                        "input": call.arguments,
                    }));
                }
                push("assistant", blocks);
            }
            Message::Tool {
                call_id,
                content,
                is_error,
            } => push(
                "user",
                vec![json!({
                    "type": "tool_result",
                    "tool_use_id": call_id,
                    "content": content,
                    "is_error": is_error,
                })],
            ),
            Message::Summary { text, .. } => push(
                "user",
                vec![json!({"type": "text", "text": summary_for_model(text)})],
            ),
            Message::Note { text } => push(
                "user",
                vec![json!({"type": "text", "text": note_for_model(text)})],
            ),
        }
    }
    // Prompt caching: the prefix Anthropic caches is tools, then system, then
    // messages. A breakpoint after the last tool and one after the system
    // prompt keep that stable part cached across the turns of a session; one
    // on the last block of the conversation caches it so far, which the next
    // turn (the same conversation and more) reads back (shorter than the
    // model's minimum, a prefix is simply not cached).
    let ephemeral = json!({"type": "ephemeral"});
    if let Some(block) = messages
        .last_mut()
        .and_then(|message| message["content"].as_array_mut())
        .and_then(|blocks| blocks.last_mut())
        .filter(|block| block["type"] != "thinking" && block["type"] != "redacted_thinking")
    {
        block["cache_control"] = ephemeral.clone();
    }
    let mut body = json!({
        "model": request.model,
        "max_tokens": max_tokens,
        "stream": true,
        "messages": messages,
    });
    if let Some(system) = &request.system {
        body["system"] = json!([{"type": "text", "text": system, "cache_control": ephemeral}]);
    }
    if !request.tools.is_empty() {
        let last = request.tools.len() - 1;
        body["tools"] = request
            .tools
            .iter()
            .enumerate()
            .map(|(index, tool)| {
                let mut spec = json!({
                    "name": tool.name,
                    "description": tool.description,
                    "input_schema": tool.parameters,
                });
                if index == last {
                    spec["cache_control"] = ephemeral.clone();
                }
                spec
            })
            .collect();
    }
    body
}

/// A user message's blocks: its text parts joined into one `text` block, each
/// run of text apart when images come between, and images as base64 `image`
/// blocks, in the prompt's order.
fn user_blocks(content: &[ContentPart]) -> Vec<Value> {
    let mut blocks = Vec::new();
    let mut text: Vec<String> = Vec::new();
    let flush = |text: &mut Vec<String>, blocks: &mut Vec<Value>| {
        if !text.is_empty() {
            blocks.push(json!({"type": "text", "text": text.join("\n")}));
            text.clear();
        }
    };
    for part in content {
        match part {
            ContentPart::Image {
                mime_type, data, ..
            } => {
                flush(&mut text, &mut blocks);
                blocks.push(json!({
                    "type": "image",
                    "source": {"type": "base64", "media_type": mime_type, "data": data},
                }));
            }
            ContentPart::Text { .. }
            | ContentPart::ResourceLink { .. }
            | ContentPart::Resource { .. } => text.push(part.to_model_text()),
        }
    }
    flush(&mut text, &mut blocks);
    blocks
}

/// A block being streamed.
enum Block {
    Text,
    Thinking,
    ToolUse {
        id: String,
        name: String,
        json: String,
    },
}

/// What the stream has seen of the turn so far.
#[derive(Default)]
struct Turn {
    blocks: HashMap<u64, Block>,
    usage: Usage,
    stop: Option<ModelStop>,
    /// Events decoded but not yet handed out.
    ready: VecDeque<Result<ProviderEvent, ProviderError>>,
    finished: bool,
}

/// The fuzzing entry point (`fuzz/`): the events a turn yields for a
/// response body arriving in `pieces`, decoded as a response's stream is.
pub fn decode_for_fuzzing(pieces: Vec<Vec<u8>>) -> Vec<Result<ProviderEvent, ProviderError>> {
    let bytes = futures::stream::iter(pieces.into_iter().map(Ok::<_, std::io::Error>));
    futures::executor::block_on(events("fuzz".to_owned(), bytes).collect())
}

/// The turn's events from the response body's bytes.
fn events<S, B, E>(
    name: String,
    bytes: S,
) -> BoxStream<'static, Result<ProviderEvent, ProviderError>>
where
    S: futures::Stream<Item = Result<B, E>> + Send + Unpin + 'static,
    B: AsRef<[u8]> + Send,
    E: std::error::Error + Send + Sync + 'static,
{
    futures::stream::unfold(
        (bytes, Sse::new(), Turn::default(), name),
        |(mut bytes, mut sse, mut turn, name)| async move {
            loop {
                if let Some(item) = turn.ready.pop_front() {
                    if item.is_err() {
                        turn.finished = true;
                    }
                    return Some((item, (bytes, sse, turn, name)));
                }
                if turn.finished {
                    return None;
                }
                match sse.next_event() {
                    Some(Ok(event)) => {
                        if let Err(error) = decode(&name, event.event, event.data, &mut turn) {
                            turn.ready.clear();
                            turn.ready.push_back(Err(error));
                        }
                        continue;
                    }
                    Some(Err(err)) => {
                        turn.ready.push_back(Err(ProviderError::new(
                            ProviderErrorKind::Protocol,
                            format!("provider {name}: {err}"),
                        )));
                        continue;
                    }
                    None => {}
                }
                match bytes.next().await {
                    Some(Ok(piece)) => sse.push(piece.as_ref()),
                    Some(Err(err)) => {
                        turn.ready.push_back(Err(stream_error(&name, &err.to_string(), is_timeout(&err))));
                    }
                    None => {
                        turn.ready.push_back(Err(ProviderError::new(
                            ProviderErrorKind::Transport,
                            format!("provider {name}: the stream ended before the model finished its turn"),
                        )));
                    }
                }
            }
        },
    )
    .boxed()
}

/// Whether a read of the body failed because it took too long.
fn is_timeout<E: std::error::Error + 'static>(err: &E) -> bool {
    let err: &(dyn std::error::Error + 'static) = err;
    err.downcast_ref::<reqwest::Error>()
        .is_some_and(reqwest::Error::is_timeout)
}

/// Applies one SSE event to the turn, queueing what it produces.
fn decode(name: &str, kind: &str, data: &str, turn: &mut Turn) -> Result<(), ProviderError> {
    let protocol = |what: String| {
        ProviderError::new(
            ProviderErrorKind::Protocol,
            format!("provider {name}: {what}"),
        )
    };
    let value: Value = match kind {
        "ping" => return Ok(()),
        _ => serde_json::from_str(data)
            .map_err(|err| protocol(format!("event {kind:?} is not valid JSON: {err}")))?,
    };
    match value["type"].as_str().unwrap_or(kind) {
        "message_start" => add_usage(&mut turn.usage, &value["message"]["usage"]),
        "content_block_start" => {
            let index = value["index"].as_u64().unwrap_or(0);
            let block = &value["content_block"];
            let decoded = match block["type"].as_str() {
                Some("tool_use") => Block::ToolUse {
                    id: block["id"].as_str().unwrap_or_default().to_owned(),
                    name: block["name"].as_str().unwrap_or_default().to_owned(),
                    json: String::new(),
                },
                Some("thinking") | Some("redacted_thinking") => Block::Thinking,
                _ => Block::Text,
            };
            turn.blocks.insert(index, decoded);
            if let Some(text) = block["text"].as_str().filter(|t| !t.is_empty()) {
                turn.ready
                    .push_back(Ok(ProviderEvent::Text(text.to_owned())));
            }
        }
        "content_block_delta" => {
            let index = value["index"].as_u64().unwrap_or(0);
            let delta = &value["delta"];
            match delta["type"].as_str() {
                Some("text_delta") => {
                    let text = delta["text"].as_str().unwrap_or_default();
                    if !text.is_empty() {
                        turn.ready
                            .push_back(Ok(ProviderEvent::Text(text.to_owned())));
                    }
                }
                Some("thinking_delta") => {
                    let text = delta["thinking"].as_str().unwrap_or_default();
                    if !text.is_empty() {
                        turn.ready
                            .push_back(Ok(ProviderEvent::Thinking(text.to_owned())));
                    }
                }
                Some("input_json_delta") => {
                    if let Some(Block::ToolUse { json, .. }) = turn.blocks.get_mut(&index) {
                        json.push_str(delta["partial_json"].as_str().unwrap_or_default());
                    }
                }
                _ => {}
            }
        }
        "content_block_stop" => {
            let index = value["index"].as_u64().unwrap_or(0);
            if let Some(Block::ToolUse {
                id,
                name: tool,
                json,
            }) = turn.blocks.remove(&index)
            {
                let arguments = if json.trim().is_empty() {
                    json!({})
                } else {
                    serde_json::from_str(&json).map_err(|err| {
                        protocol(format!(
                            "the arguments of tool call `{tool}` are not valid JSON ({err}): {json}"
                        ))
                    })?
                };
                turn.ready.push_back(Ok(ProviderEvent::ToolCall(ToolCall {
                    id,
                    name: tool,
                    arguments,
                })));
            }
        }
        "message_delta" => {
            add_usage(&mut turn.usage, &value["usage"]);
            if let Some(reason) = value["delta"]["stop_reason"].as_str() {
                turn.stop = Some(match reason {
                    "tool_use" => ModelStop::ToolUse,
                    "max_tokens" => ModelStop::MaxTokens,
                    "refusal" => ModelStop::Refusal,
                    _ => ModelStop::EndTurn,
                });
            }
        }
        "message_stop" => {
            turn.ready.push_back(Ok(ProviderEvent::Usage(turn.usage)));
            turn.ready.push_back(Ok(ProviderEvent::Done(
                turn.stop.unwrap_or(ModelStop::EndTurn),
            )));
            turn.finished = true;
        }
        "error" => {
            let error = &value["error"];
            return Err(api_error(
                name,
                error["type"].as_str().unwrap_or_default(),
                error["message"].as_str().unwrap_or("unknown error"),
                None,
            ));
        }
        _ => {}
    }
    Ok(())
}

/// Usage fields are cumulative in `message_delta`; take the largest seen.
/// Anthropic counts cache reads apart from `input_tokens`; Pincer's
/// `input_tokens` is every token read, cached ones included (as OpenAI's).
fn add_usage(usage: &mut Usage, value: &Value) {
    let field = |name: &str| value[name].as_u64().unwrap_or(0);
    usage.input_tokens = usage.input_tokens.max(
        field("input_tokens")
            .saturating_add(field("cache_creation_input_tokens"))
            .saturating_add(field("cache_read_input_tokens")),
    );
    usage.cached_input_tokens = usage
        .cached_input_tokens
        .max(field("cache_read_input_tokens"));
    usage.output_tokens = usage.output_tokens.max(field("output_tokens"));
}

fn api_error(name: &str, kind: &str, message: &str, status: Option<u16>) -> ProviderError {
    let lower = message.to_ascii_lowercase();
    let (kind, text) = match (kind, status) {
        ("authentication_error", _) | (_, Some(401)) => (
            ProviderErrorKind::Auth,
            format!(
                "provider {name} rejected the API key (check ANTHROPIC_API_KEY or the provider's api key): {message}"
            ),
        ),
        ("permission_error", _) | (_, Some(403)) => (
            ProviderErrorKind::Auth,
            format!("provider {name}: this API key may not use that model or feature: {message}"),
        ),
        ("not_found_error", _) | (_, Some(404)) => (
            ProviderErrorKind::UnknownModel,
            format!("provider {name} does not know that model: {message}"),
        ),
        ("rate_limit_error", _) | (_, Some(429)) => (
            ProviderErrorKind::RateLimited,
            format!("provider {name} is rate limiting requests: {message}"),
        ),
        ("invalid_request_error", _) | (_, Some(400 | 413))
            if lower.contains("prompt is too long") || lower.contains("context") =>
        {
            (
                ProviderErrorKind::ContextLength,
                format!("the conversation is too long for the model: {message}"),
            )
        }
        ("overloaded_error" | "api_error", _) | (_, Some(500..=599)) => (
            ProviderErrorKind::Server,
            format!("provider {name} failed: {message}"),
        ),
        _ => (
            ProviderErrorKind::Protocol,
            format!("provider {name} refused the request: {message}"),
        ),
    };
    ProviderError::new(kind, text)
}

fn http_error(name: &str, status: u16, body: &str) -> ProviderError {
    let parsed: Value = serde_json::from_str(body).unwrap_or(Value::Null);
    let message = parsed["error"]["message"]
        .as_str()
        .map(str::to_owned)
        .unwrap_or_else(|| {
            format!(
                "HTTP {status}: {}",
                body.chars().take(300).collect::<String>()
            )
        });
    let mut error = api_error(
        name,
        parsed["error"]["type"].as_str().unwrap_or_default(),
        &message,
        Some(status),
    );
    error.status = Some(status);
    error
}

fn transport_error(name: &str, err: &reqwest::Error) -> ProviderError {
    stream_error(name, &err.to_string(), err.is_timeout())
}

fn stream_error(name: &str, text: &str, timeout: bool) -> ProviderError {
    if timeout {
        ProviderError::new(
            ProviderErrorKind::Timeout,
            format!("provider {name} did not answer in time: {text}"),
        )
    } else {
        ProviderError::new(
            ProviderErrorKind::Transport,
            format!("provider {name}: connection failed: {text}"),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::provider::ToolSpec;
    use crate::core::session::ContentPart;
    use crate::providers::fixture::{FixtureResponse, FixtureServer};

    fn provider(server: &FixtureServer, timeout: Duration) -> AnthropicProvider {
        AnthropicProvider::new(AnthropicSettings {
            name: "claude".into(),
            base_url: server.base_url.clone(),
            api_key: Some("sk-ant-test".into()),
            headers: vec![("x-extra".into(), "1".into())],
            timeout,
            max_tokens: 1024,
        })
        .unwrap()
    }

    fn request() -> ModelRequest {
        ModelRequest {
            model: "claude-test".into(),
            system: Some("be brief".into()),
            messages: vec![
                Message::User {
                    content: vec![ContentPart::Text { text: "hi".into() }],
                },
                Message::Assistant {
                    text: "looking".into(),
                    thought: String::new(),
                    tool_calls: vec![ToolCall {
                        id: "toolu_1".into(),
                        name: "read_file".into(),
                        arguments: json!({"path": "a"}),
                    }],
                    interrupted: false,
                },
                Message::Tool {
                    call_id: "toolu_1".into(),
                    content: "A".into(),
                    is_error: false,
                },
            ],
            tools: [std::sync::Arc::new(ToolSpec {
                name: "read_file".into(),
                description: "read".into(),
                parameters: json!({"type": "object"}),
            })]
            .into(),
            reasoning_effort: None,
        }
    }

    fn sse(kind: &str, data: Value) -> String {
        format!("event: {kind}\ndata: {data}\n\n")
    }

    async fn collect(provider: &AnthropicProvider) -> Vec<Result<ProviderEvent, ProviderError>> {
        provider.stream(request()).collect().await
    }

    /// [`kinds`] with adjacent text (and adjacent thinking) joined: how many
    /// pieces a stream's text arrives in follows what reached the socket
    /// together (`providers::ahead`), not the provider's events.
    fn joined(events: &[Result<ProviderEvent, ProviderError>]) -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        for kind in kinds(events) {
            let joins =
                |prefix: &str, last: &String| kind.starts_with(prefix) && last.starts_with(prefix);
            match out.last_mut() {
                Some(last) if joins("text ", last) => last.push_str(&kind["text ".len()..]),
                Some(last) if joins("thinking ", last) => {
                    last.push_str(&kind["thinking ".len()..]);
                }
                _ => out.push(kind),
            }
        }
        out
    }

    fn kinds(events: &[Result<ProviderEvent, ProviderError>]) -> Vec<String> {
        events
            .iter()
            .map(|e| match e {
                Ok(ProviderEvent::Text(t)) => format!("text {t}"),
                Ok(ProviderEvent::Thinking(t)) => format!("thinking {t}"),
                Ok(ProviderEvent::ToolCall(c)) => {
                    format!("tool {} {} {}", c.id, c.name, c.arguments)
                }
                Ok(ProviderEvent::Usage(u)) => format!(
                    "usage {} {} {}",
                    u.input_tokens, u.output_tokens, u.cached_input_tokens
                ),
                Ok(ProviderEvent::Served { provider, model }) => {
                    format!("served {provider} {model}")
                }
                Ok(ProviderEvent::Retrying(r)) => format!("retrying {}", r.attempt),
                Ok(ProviderEvent::Done(s)) => format!("done {s:?}"),
                Err(e) => format!("error {:?} {}", e.kind, e.message),
            })
            .collect()
    }

    fn full_stream() -> Vec<String> {
        vec![
            sse(
                "message_start",
                json!({"type": "message_start", "message": {"id": "msg_1", "usage": {"input_tokens": 25, "cache_read_input_tokens": 5, "output_tokens": 1}}}),
            ),
            sse(
                "content_block_start",
                json!({"type": "content_block_start", "index": 0, "content_block": {"type": "thinking", "thinking": ""}}),
            ),
            sse(
                "content_block_delta",
                json!({"type": "content_block_delta", "index": 0, "delta": {"type": "thinking_delta", "thinking": "hmm"}}),
            ),
            sse(
                "content_block_stop",
                json!({"type": "content_block_stop", "index": 0}),
            ),
            "event: ping\ndata: {\"type\": \"ping\"}\n\n".into(),
            sse(
                "content_block_start",
                json!({"type": "content_block_start", "index": 1, "content_block": {"type": "text", "text": ""}}),
            ),
            sse(
                "content_block_delta",
                json!({"type": "content_block_delta", "index": 1, "delta": {"type": "text_delta", "text": "Hel"}}),
            ),
            sse(
                "content_block_delta",
                json!({"type": "content_block_delta", "index": 1, "delta": {"type": "text_delta", "text": "lo"}}),
            ),
            sse(
                "content_block_stop",
                json!({"type": "content_block_stop", "index": 1}),
            ),
            sse(
                "content_block_start",
                json!({"type": "content_block_start", "index": 2, "content_block": {"type": "tool_use", "id": "toolu_2", "name": "grep", "input": {}}}),
            ),
            sse(
                "content_block_delta",
                json!({"type": "content_block_delta", "index": 2, "delta": {"type": "input_json_delta", "partial_json": "{\"patt"}}),
            ),
            sse(
                "content_block_delta",
                json!({"type": "content_block_delta", "index": 2, "delta": {"type": "input_json_delta", "partial_json": "ern\": \"fn\"}"}}),
            ),
            sse(
                "content_block_stop",
                json!({"type": "content_block_stop", "index": 2}),
            ),
            sse(
                "message_delta",
                json!({"type": "message_delta", "delta": {"stop_reason": "tool_use"}, "usage": {"output_tokens": 42}}),
            ),
            sse("message_stop", json!({"type": "message_stop"})),
        ]
    }

    #[tokio::test]
    async fn a_full_turn_streams_thinking_text_a_tool_call_usage_and_the_stop() {
        let server = FixtureServer::start(vec![FixtureResponse::sse(&full_stream())])
            .await
            .unwrap();
        let events = collect(&provider(&server, Duration::from_secs(5))).await;
        assert_eq!(
            joined(&events),
            vec![
                "thinking hmm",
                "text Hello",
                "tool toolu_2 grep {\"pattern\":\"fn\"}",
                "usage 30 42 5",
                "done ToolUse",
            ]
        );
        let sent = &server.requests()[0];
        assert_eq!(sent.path, "/v1/messages");
        assert_eq!(sent.header("x-api-key"), Some("sk-ant-test"));
        assert_eq!(sent.header("anthropic-version"), Some(API_VERSION));
        assert_eq!(sent.header("x-extra"), Some("1"));
        // The stable prefix carries cache breakpoints: the system prompt and
        // the last tool.
        assert_eq!(
            sent.body["system"],
            json!([{"type": "text", "text": "be brief", "cache_control": {"type": "ephemeral"}}])
        );
        let tools = sent.body["tools"].as_array().unwrap();
        assert_eq!(
            tools.last().unwrap()["cache_control"],
            json!({"type": "ephemeral"})
        );
        assert!(
            tools[..tools.len() - 1]
                .iter()
                .all(|t| t.get("cache_control").is_none())
        );
        // And the conversation so far, at its last block only.
        let messages = sent.body["messages"].as_array().unwrap();
        let last = messages.last().unwrap()["content"].as_array().unwrap();
        assert_eq!(
            last.last().unwrap()["cache_control"],
            json!({"type": "ephemeral"})
        );
        let marked = sent.body["messages"]
            .to_string()
            .matches("cache_control")
            .count();
        assert_eq!(marked, 1, "{}", sent.body["messages"]);
        assert_eq!(sent.body["stream"], true);
        assert_eq!(
            sent.body["tools"][0]["input_schema"],
            json!({"type": "object"})
        );
        // Alternating turns; the tool result follows its call in a user turn.
        let roles: Vec<&str> = sent.body["messages"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m["role"].as_str().unwrap())
            .collect();
        assert_eq!(roles, vec!["user", "assistant", "user"]);
        assert_eq!(sent.body["messages"][1]["content"][1]["type"], "tool_use");
        assert_eq!(
            sent.body["messages"][2]["content"][0],
            json!({"type": "tool_result", "tool_use_id": "toolu_1", "content": "A", "is_error": false,
                   "cache_control": {"type": "ephemeral"}})
        );
    }

    #[tokio::test]
    async fn a_cut_stream_fails_after_the_text_and_never_yields_a_half_tool_call() {
        let mut events = full_stream();
        events.truncate(11); // inside the tool call's arguments
        let mut response = FixtureResponse::sse(&events);
        response.cut = true;
        let server = FixtureServer::start(vec![response]).await.unwrap();
        let got = joined(&collect(&provider(&server, Duration::from_secs(5))).await);
        assert_eq!(&got[..2], &["thinking hmm", "text Hello"]);
        assert_eq!(got.len(), 3, "{got:?}");
        assert!(got[2].starts_with("error Transport"), "{got:?}");
    }

    #[tokio::test]
    async fn http_and_stream_errors_are_classified_in_plain_words() {
        let cases = vec![
            (
                FixtureResponse::error(
                    401,
                    r#"{"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key"}}"#,
                ),
                ProviderErrorKind::Auth,
                "rejected the API key",
            ),
            (
                FixtureResponse::error(
                    404,
                    r#"{"type":"error","error":{"type":"not_found_error","message":"model: claude-nope"}}"#,
                ),
                ProviderErrorKind::UnknownModel,
                "does not know that model",
            ),
            (
                FixtureResponse::error(
                    400,
                    r#"{"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: 210000 tokens > 200000 maximum"}}"#,
                ),
                ProviderErrorKind::ContextLength,
                "too long for the model",
            ),
            (
                FixtureResponse::error(
                    529,
                    r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#,
                ),
                ProviderErrorKind::Server,
                "Overloaded",
            ),
            (
                FixtureResponse::error(503, "upstream down"),
                ProviderErrorKind::Server,
                "HTTP 503: upstream down",
            ),
        ];
        for (response, kind, fragment) in cases {
            let server = FixtureServer::start(vec![response]).await.unwrap();
            let events = collect(&provider(&server, Duration::from_secs(5))).await;
            assert_eq!(events.len(), 1);
            let err = events[0].as_ref().unwrap_err();
            assert_eq!(err.kind, kind, "{}", err.message);
            assert!(err.message.contains(fragment), "{}", err.message);
        }
        let server = FixtureServer::start(vec![
            FixtureResponse::error(
                429,
                r#"{"type":"error","error":{"type":"rate_limit_error","message":"slow down"}}"#,
            )
            .header("retry-after", "7"),
        ])
        .await
        .unwrap();
        let events = collect(&provider(&server, Duration::from_secs(5))).await;
        let err = events[0].as_ref().unwrap_err();
        assert_eq!(err.kind, ProviderErrorKind::RateLimited);
        assert_eq!(err.retry_after, Some(Duration::from_secs(7)));
        // An error event inside the stream, after some text.
        let server = FixtureServer::start(vec![FixtureResponse::sse(&[
            sse("content_block_delta", json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Hi"}})),
            sse("error", json!({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}})),
        ])])
        .await
        .unwrap();
        let got = kinds(&collect(&provider(&server, Duration::from_secs(5))).await);
        assert_eq!(got[0], "text Hi");
        assert!(got[1].starts_with("error Server"), "{got:?}");
        assert_eq!(got.len(), 2);
    }

    #[tokio::test]
    async fn malformed_tool_arguments_are_a_protocol_error() {
        let server = FixtureServer::start(vec![FixtureResponse::sse(&[
            sse("content_block_start", json!({"type": "content_block_start", "index": 0, "content_block": {"type": "tool_use", "id": "t", "name": "shell", "input": {}}})),
            sse("content_block_delta", json!({"type": "content_block_delta", "index": 0, "delta": {"type": "input_json_delta", "partial_json": "{\"command\": "}})),
            sse("content_block_stop", json!({"type": "content_block_stop", "index": 0})),
            sse("message_stop", json!({"type": "message_stop"})),
        ])])
        .await
        .unwrap();
        let got = kinds(&collect(&provider(&server, Duration::from_secs(5))).await);
        assert_eq!(got.len(), 1, "{got:?}");
        assert!(
            got[0].starts_with("error Protocol") && got[0].contains("`shell`"),
            "{got:?}"
        );
    }

    #[tokio::test]
    async fn a_slow_first_byte_times_out() {
        let mut response = FixtureResponse::sse(&full_stream());
        response.first_byte_delay = Duration::from_secs(3);
        let server = FixtureServer::start(vec![response]).await.unwrap();
        let events = collect(&provider(&server, Duration::from_millis(200))).await;
        let err = events[0].as_ref().unwrap_err();
        assert_eq!(err.kind, ProviderErrorKind::Timeout, "{}", err.message);
    }

    /// Found by fuzzing (`anthropic_stream`): input and cache counts near
    /// `u64::MAX` overflowed when added up.
    #[test]
    fn usage_counts_too_large_to_add_saturate() {
        let body = sse(
            "message_delta",
            json!({"type": "message_delta", "delta": {"stop_reason": "end_turn"},
                "usage": {"input_tokens": u64::MAX, "cache_read_input_tokens": u64::MAX,
                    "output_tokens": 3}}),
        ) + &sse("message_stop", json!({"type": "message_stop"}));
        let events = decode_for_fuzzing(vec![body.into_bytes()]);
        assert_eq!(
            kinds(&events),
            vec![
                format!("usage {} 3 {}", u64::MAX, u64::MAX),
                "done EndTurn".to_owned()
            ]
        );
    }

    #[test]
    fn a_prompt_with_an_image_becomes_text_and_base64_image_blocks() {
        let mut request = request();
        request.messages = vec![Message::User {
            content: vec![
                ContentPart::Text {
                    text: "compare".into(),
                },
                ContentPart::ResourceLink {
                    uri: "file:///a.rs".into(),
                    name: "a.rs".into(),
                    mime_type: None,
                },
                ContentPart::Image {
                    mime_type: "image/jpeg".into(),
                    data: "/9j/4AAQ".into(),
                    uri: None,
                },
                ContentPart::Text {
                    text: "with this".into(),
                },
            ],
        }];
        let body = request_body(&request, 1024);
        assert_eq!(
            body["messages"],
            json!([{"role": "user", "content": [
                {"type": "text", "text": "compare\n[a.rs](file:///a.rs)"},
                {"type": "image", "source": {"type": "base64", "media_type": "image/jpeg", "data": "/9j/4AAQ"}},
                {"type": "text", "text": "with this", "cache_control": {"type": "ephemeral"}},
            ]}])
        );
    }
}
