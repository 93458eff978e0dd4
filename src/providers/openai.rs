//! The OpenAI-compatible chat completions provider: one streamed
//! `POST {base_url}/chat/completions` per model turn, decoded from SSE.
//!
//! The same wire format is spoken by OpenAI, OpenRouter, Ollama (`/v1`), vLLM,
//! llama.cpp server and LM Studio, so the decoder is lenient where they differ
//! (reasoning field names, usage chunks, missing tool call ids, no `[DONE]`)
//! and strict where a mistake would hurt (a tool call is only emitted once the
//! model finished its turn, so a cut stream never runs half a call).

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::time::Duration;

use futures::StreamExt;
use serde_json::{Value, json};

use crate::core::event::Usage;
use crate::core::provider::{
    ModelRequest, ModelStop, Provider, ProviderError, ProviderErrorKind, ProviderEvent,
    ProviderStream, ToolSpec,
};
use crate::core::session::{ContentPart, Message, ToolCall, note_for_model, summary_for_model};
use crate::providers::sse::Sse;

mod embeddings;
mod quirks;
mod request;
mod stream;
mod window;

pub use embeddings::OpenAiEmbedder;
pub use window::WindowAsker;

use quirks::{TextCalls, ThinkSplit};
use request::request_body;
pub use stream::decode_for_fuzzing;
use stream::{Decoder, Turn};

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
    client: super::LazyClient,
    url: String,
}

impl OpenAiProvider {
    pub fn new(settings: OpenAiSettings) -> Result<Self, ProviderError> {
        let client = super::LazyClient::new(&settings.name, settings.timeout);
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
        let client = match self.client.get() {
            Ok(client) => client,
            Err(error) => return futures::stream::once(async move { Err(error) }).boxed(),
        };
        let mut builder = client.post(&self.url).json(&body);
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
            timeout: self.settings.timeout,
        };
        let tool_names: Vec<String> = request.tools.iter().map(|t| t.name.clone()).collect();
        let start = async move {
            let response = builder
                .send()
                .await
                .map_err(|err| context.transport(&err))?;
            let status = response.status();
            if !status.is_success() {
                let retry_after = super::retry_after(response.headers());
                // A body that fails to arrive still leaves the status to go by.
                let text = response.text().await.unwrap_or_default();
                let mut error = context.http(status.as_u16(), &text);
                error.retry_after = retry_after;
                return Err(error);
            }
            let is_json = response
                .headers()
                .get(reqwest::header::CONTENT_TYPE)
                .and_then(|v| v.to_str().ok())
                .is_some_and(|v| v.starts_with("application/json"));
            let mut decoder = Decoder::new(context, tool_names);
            if is_json {
                // A server (or proxy) that ignored `stream: true` answers with
                // one whole completion, or with an error under status 200.
                let text = response
                    .text()
                    .await
                    .map_err(|err| decoder.context.transport(&err))?;
                decoder.whole(&text);
                return Ok(Turn {
                    response: None,
                    sse: Sse::new(),
                    decoder,
                });
            }
            Ok(Turn {
                response: Some(response),
                sse: Sse::new(),
                decoder,
            })
        };
        super::ahead::ahead(
            futures::stream::once(start)
                .flat_map(|started| match started {
                    Ok(turn) => turn.into_stream(),
                    Err(error) => futures::stream::once(async move { Err(error) }).boxed(),
                })
                .boxed(),
        )
    }
}

/// What error messages need to name.
struct ErrorContext {
    provider: String,
    model: String,
    url: String,
    has_key: bool,
    timeout: Duration,
}

impl ErrorContext {
    /// A failure to send the request or to read the stream.
    fn transport(&self, err: &reqwest::Error) -> ProviderError {
        let detail = crate::causes::chain(err);
        if err.is_timeout() {
            ProviderError::new(
                ProviderErrorKind::Timeout,
                format!(
                    "provider {} did not answer within {:?}: {detail}",
                    self.provider, self.timeout
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
        let mut error = self.classify(Some(status), code, &message);
        error.status = Some(status);
        error
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
            || status == Some(413)
            || lower.contains("context length")
            || lower.contains("context size")
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::providers::fixture::{FixtureResponse, FixtureServer};

    fn settings(server: &FixtureServer, key: Option<&str>) -> OpenAiSettings {
        OpenAiSettings {
            name: "openai".into(),
            base_url: format!("{}/v1", server.base_url),
            api_key: key.map(str::to_owned),
            headers: vec![("x-extra".into(), "yes".into())],
            timeout: Duration::from_secs(5),
        }
    }

    fn user(text: &str) -> Message {
        Message::User {
            content: vec![ContentPart::Text { text: text.into() }],
        }
    }

    fn request(messages: Vec<Message>) -> ModelRequest {
        ModelRequest {
            model: "gpt-test".into(),
            system: Some("You are terse".into()),
            messages,
            tools: [std::sync::Arc::new(ToolSpec {
                name: "read_file".into(),
                description: "Reads a file".into(),
                parameters: json!({"type": "object", "properties": {"path": {"type": "string"}}}),
            })]
            .into(),
            reasoning_effort: None,
        }
    }

    /// A `data:` line as OpenAI sends it.
    pub(super) fn data(chunk: Value) -> String {
        format!("data: {chunk}\n\n")
    }

    /// A chunk in OpenAI's documented `chat.completion.chunk` shape.
    pub(super) fn chunk(delta: Value, finish: Option<&str>) -> String {
        data(json!({
            "id": "chatcmpl-123",
            "object": "chat.completion.chunk",
            "created": 1_694_268_190,
            "model": "gpt-test",
            "system_fingerprint": "fp_44709d6fcb",
            "choices": [{"index": 0, "delta": delta, "logprobs": null, "finish_reason": finish}],
            "usage": null,
        }))
    }

    fn usage_chunk() -> String {
        data(json!({
            "id": "chatcmpl-123",
            "object": "chat.completion.chunk",
            "created": 1_694_268_190,
            "model": "gpt-test",
            "choices": [],
            "usage": {
                "prompt_tokens": 120,
                "completion_tokens": 30,
                "total_tokens": 150,
                "prompt_tokens_details": {"cached_tokens": 100},
                "completion_tokens_details": {"reasoning_tokens": 12},
            },
        }))
    }

    const DONE: &str = "data: [DONE]\n\n";

    async fn run(
        settings: OpenAiSettings,
        request: ModelRequest,
    ) -> Vec<Result<ProviderEvent, ProviderError>> {
        let provider = OpenAiProvider::new(settings).unwrap();
        provider.stream(request).collect().await
    }

    /// Start-up builds no HTTP client (nor TLS roots): the first turn does,
    /// and later turns reuse it.
    #[tokio::test]
    async fn the_http_client_is_built_on_the_first_turn() {
        let server = FixtureServer::start(vec![
            FixtureResponse::sse(&[DONE]),
            FixtureResponse::sse(&[DONE]),
        ])
        .await
        .unwrap();
        let provider = OpenAiProvider::new(settings(&server, Some("sk-test"))).unwrap();
        assert!(provider.client.client.get().is_none());
        let _: Vec<_> = provider.stream(request(vec![user("hi")])).collect().await;
        let first: *const reqwest::Client = provider.client.get().unwrap();
        let _: Vec<_> = provider
            .stream(request(vec![user("again")]))
            .collect()
            .await;
        assert!(std::ptr::eq(first, provider.client.get().unwrap()));
        assert_eq!(server.requests().len(), 2);
    }

    async fn run_one(response: FixtureResponse) -> Vec<Result<ProviderEvent, ProviderError>> {
        let server = FixtureServer::start(vec![response]).await.unwrap();
        run(
            settings(&server, Some("sk-test")),
            request(vec![user("hi")]),
        )
        .await
    }

    /// The events with adjacent text (and adjacent reasoning) joined: how
    /// many pieces a stream's text arrives in follows what reached the
    /// socket together (`providers::ahead`), not the provider's chunks.
    fn coalesced(events: Vec<Result<ProviderEvent, ProviderError>>) -> Vec<ProviderEvent> {
        let mut out: Vec<ProviderEvent> = Vec::new();
        for event in events.into_iter().map(Result::unwrap) {
            match (out.last_mut(), event) {
                (Some(ProviderEvent::Text(a)), ProviderEvent::Text(b))
                | (Some(ProviderEvent::Thinking(a)), ProviderEvent::Thinking(b)) => a.push_str(&b),
                (_, event) => out.push(event),
            }
        }
        out
    }

    fn text_of(events: &[Result<ProviderEvent, ProviderError>]) -> String {
        events
            .iter()
            .filter_map(|e| match e {
                Ok(ProviderEvent::Text(t)) => Some(t.as_str()),
                _ => None,
            })
            .collect()
    }

    fn error_of(events: &[Result<ProviderEvent, ProviderError>]) -> ProviderError {
        match events.last() {
            Some(Err(err)) => err.clone(),
            other => panic!("expected an error last, got {other:?}"),
        }
    }

    #[tokio::test]
    async fn plain_text_streams_in_chunks() {
        let events = run_one(FixtureResponse::sse(&[
            chunk(json!({"role": "assistant", "content": ""}), None),
            chunk(json!({"content": "Hello"}), None),
            chunk(json!({"content": ", wor"}), None),
            chunk(json!({"content": "ld!"}), None),
            chunk(json!({}), Some("stop")),
            DONE.to_owned(),
        ]))
        .await;
        assert_eq!(
            coalesced(events),
            vec![
                ProviderEvent::Text("Hello, world!".into()),
                ProviderEvent::Done(ModelStop::EndTurn),
            ]
        );
    }

    #[tokio::test]
    async fn parallel_tool_calls_are_assembled_from_fragments_in_index_order() {
        let start = |index: u64, id: &str, name: &str| {
            chunk(
                json!({"tool_calls": [{"index": index, "id": id, "type": "function",
                    "function": {"name": name, "arguments": ""}}]}),
                None,
            )
        };
        let piece = |index: u64, arguments: &str| {
            chunk(
                json!({"tool_calls": [{"index": index, "function": {"arguments": arguments}}]}),
                None,
            )
        };
        let events = run_one(FixtureResponse::sse(&[
            chunk(json!({"role": "assistant", "content": null}), None),
            start(0, "call_a", "read_file"),
            piece(0, "{\"pa"),
            start(1, "call_b", "read_file"),
            piece(1, "{\"path\""),
            piece(0, "th\": \"src/"),
            piece(1, ": \"Cargo"),
            piece(0, "main.rs\"}"),
            piece(1, ".toml\"}"),
            chunk(json!({}), Some("tool_calls")),
            usage_chunk(),
            DONE.to_owned(),
        ]))
        .await;
        let events: Vec<ProviderEvent> = events.into_iter().map(Result::unwrap).collect();
        assert_eq!(
            events[..2],
            [
                ProviderEvent::ToolCall(ToolCall {
                    id: "call_a".into(),
                    name: "read_file".into(),
                    arguments: json!({"path": "src/main.rs"}),
                }),
                ProviderEvent::ToolCall(ToolCall {
                    id: "call_b".into(),
                    name: "read_file".into(),
                    arguments: json!({"path": "Cargo.toml"}),
                }),
            ]
        );
        assert!(matches!(events[2], ProviderEvent::Usage(_)));
        assert_eq!(events[3], ProviderEvent::Done(ModelStop::ToolUse));
        assert_eq!(events.len(), 4);
    }

    #[tokio::test]
    async fn reasoning_deltas_become_thinking() {
        let events = run_one(FixtureResponse::sse(&[
            chunk(json!({"reasoning_content": "Let me think"}), None),
            chunk(json!({"reasoning": " harder"}), None),
            chunk(json!({"content": "42"}), None),
            chunk(json!({}), Some("stop")),
            DONE.to_owned(),
        ]))
        .await;
        assert_eq!(
            coalesced(events),
            vec![
                ProviderEvent::Thinking("Let me think harder".into()),
                ProviderEvent::Text("42".into()),
                ProviderEvent::Done(ModelStop::EndTurn),
            ]
        );
    }

    #[tokio::test]
    async fn usage_arrives_before_done() {
        let events = run_one(FixtureResponse::sse(&[
            chunk(json!({"content": "ok"}), None),
            chunk(json!({}), Some("length")),
            usage_chunk(),
            DONE.to_owned(),
        ]))
        .await;
        let events: Vec<ProviderEvent> = events.into_iter().map(Result::unwrap).collect();
        assert_eq!(
            events,
            vec![
                ProviderEvent::Text("ok".into()),
                ProviderEvent::Usage(Usage {
                    input_tokens: 120,
                    output_tokens: 30,
                    cached_input_tokens: 100,
                    reasoning_tokens: 12,
                }),
                ProviderEvent::Done(ModelStop::MaxTokens),
            ]
        );
    }

    #[tokio::test]
    async fn rate_limit_carries_retry_after() {
        let events = run_one(
            FixtureResponse::error(
                429,
                r#"{"error":{"message":"Rate limit reached for gpt-test","type":"requests","code":"rate_limit_exceeded"}}"#,
            )
            .header("retry-after", "7"),
        )
        .await;
        let error = error_of(&events);
        assert_eq!(events.len(), 1);
        assert_eq!(error.kind, ProviderErrorKind::RateLimited);
        assert_eq!(error.retry_after, Some(Duration::from_secs(7)));
        assert!(
            error.message.contains("Rate limit reached"),
            "{}",
            error.message
        );
    }

    #[test]
    fn retry_after_reads_an_http_date() {
        let mut headers = reqwest::header::HeaderMap::new();
        let at = jiff::Timestamp::now() + jiff::SignedDuration::from_secs(30);
        let date = jiff::fmt::rfc2822::DateTimePrinter::new()
            .timestamp_to_rfc9110_string(&at)
            .unwrap();
        headers.insert("retry-after", date.parse().unwrap());
        let wait = crate::providers::retry_after(&headers).unwrap();
        assert!(
            wait > Duration::from_secs(25) && wait <= Duration::from_secs(30),
            "{wait:?}"
        );
    }

    #[tokio::test]
    async fn server_error_is_server() {
        let events = run_one(FixtureResponse::error(
            500,
            r#"{"error":{"message":"The server had an error while processing your request","type":"server_error"}}"#,
        ))
        .await;
        let error = error_of(&events);
        assert_eq!(error.kind, ProviderErrorKind::Server);
        assert!(error.message.contains("had an error"), "{}", error.message);
        assert!(error.is_retryable());
    }

    #[tokio::test]
    async fn bad_key_is_auth_in_plain_words() {
        let events = run_one(FixtureResponse::error(
            401,
            r#"{"error":{"message":"Incorrect API key provided: sk-test. You can find your API key at https://platform.openai.com/account/api-keys.","type":"invalid_request_error","param":null,"code":"invalid_api_key"}}"#,
        ))
        .await;
        let error = error_of(&events);
        assert_eq!(error.kind, ProviderErrorKind::Auth);
        assert!(
            error
                .message
                .starts_with("the provider openai rejected the API key"),
            "{}",
            error.message
        );
        assert!(error.message.contains("Incorrect API key provided"));
        assert!(!error.is_retryable());
    }

    #[tokio::test]
    async fn unknown_model_and_context_length_are_recognised() {
        let unknown = run_one(FixtureResponse::error(
            404,
            r#"{"error":{"message":"The model `gpt-test` does not exist or you do not have access to it.","type":"invalid_request_error","param":null,"code":"model_not_found"}}"#,
        ))
        .await;
        assert_eq!(error_of(&unknown).kind, ProviderErrorKind::UnknownModel);
        let long = run_one(FixtureResponse::error(
            400,
            r#"{"error":{"message":"This model's maximum context length is 8192 tokens. However, your messages resulted in 9000 tokens.","type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}}"#,
        ))
        .await;
        assert_eq!(error_of(&long).kind, ProviderErrorKind::ContextLength);
        // llama.cpp's wording.
        let llama = run_one(FixtureResponse::error(
            400,
            r#"{"error":{"code":400,"message":"the request exceeds the available context size, try increasing it","type":"exceed_context_size_error"}}"#,
        ))
        .await;
        assert_eq!(error_of(&llama).kind, ProviderErrorKind::ContextLength);
        // Ollama's wording for a model that is not pulled.
        let ollama = run_one(FixtureResponse::error(
            404,
            r#"{"error":{"message":"model \"qwen3:4b\" not found, try pulling it first","type":"api_error","param":null,"code":null}}"#,
        ))
        .await;
        assert_eq!(error_of(&ollama).kind, ProviderErrorKind::UnknownModel);
        let other = run_one(FixtureResponse::error(
            400,
            r#"{"error":{"message":"Invalid value for 'temperature'","type":"invalid_request_error"}}"#,
        ))
        .await;
        assert_eq!(error_of(&other).kind, ProviderErrorKind::Protocol);
    }

    #[tokio::test]
    async fn an_error_inside_the_stream_is_mapped() {
        let events = run_one(FixtureResponse::sse(&[
            chunk(json!({"content": "par"}), None),
            data(json!({"error": {"message": "Upstream overloaded", "code": 502}})),
        ]))
        .await;
        assert_eq!(text_of(&events), "par");
        let error = error_of(&events);
        assert_eq!(error.kind, ProviderErrorKind::Server);
        assert!(error.message.contains("Upstream overloaded"));
    }

    #[tokio::test]
    async fn a_cut_stream_fails_after_the_text_received() {
        let mut response = FixtureResponse::sse(&[
            chunk(json!({"content": "Hello"}), None),
            chunk(json!({"content": " there"}), None),
            chunk(
                json!({"tool_calls": [{"index": 0, "id": "call_a", "type": "function",
                    "function": {"name": "read_file", "arguments": "{\"path\": \"a\"}"}}]}),
                None,
            ),
        ]);
        response.cut = true;
        let events = run_one(response).await;
        assert_eq!(text_of(&events), "Hello there");
        let error = error_of(&events);
        assert_eq!(error.kind, ProviderErrorKind::Transport);
        // No tool call from a truncated stream.
        assert!(
            !events
                .iter()
                .any(|e| matches!(e, Ok(ProviderEvent::ToolCall(_))))
        );
        // The text (in one piece or two), then the error, and nothing else.
        let (last, before) = events.split_last().unwrap();
        assert!(last.is_err());
        assert!(
            before
                .iter()
                .all(|e| matches!(e, Ok(ProviderEvent::Text(_))))
        );
    }

    #[tokio::test]
    async fn a_stream_ending_without_a_finish_reason_is_transport() {
        let events = run_one(FixtureResponse::sse(&[chunk(
            json!({"content": "Hel"}),
            None,
        )]))
        .await;
        let error = error_of(&events);
        assert_eq!(error.kind, ProviderErrorKind::Transport);
        assert!(
            error
                .message
                .starts_with("the stream ended before the model finished")
        );
    }

    #[tokio::test]
    async fn malformed_tool_arguments_are_a_protocol_error() {
        let events = run_one(FixtureResponse::sse(&[
            chunk(
                json!({"tool_calls": [{"index": 0, "id": "call_b", "type": "function",
                    "function": {"name": "write_file", "arguments": "{}"}}]}),
                None,
            ),
            chunk(
                json!({"tool_calls": [{"index": 1, "id": "call_a", "type": "function",
                    "function": {"name": "read_file", "arguments": "{\"path\": "}}]}),
                None,
            ),
            chunk(json!({}), Some("tool_calls")),
            DONE.to_owned(),
        ]))
        .await;
        let error = error_of(&events);
        assert_eq!(error.kind, ProviderErrorKind::Protocol);
        assert!(error.message.contains("read_file"), "{}", error.message);
        // The valid call before the broken one is not emitted either.
        assert_eq!(events.len(), 1);
    }

    #[tokio::test]
    async fn a_slow_first_byte_times_out() {
        let mut response = FixtureResponse::sse(&[DONE]);
        response.first_byte_delay = Duration::from_secs(2);
        let server = FixtureServer::start(vec![response]).await.unwrap();
        let mut settings = settings(&server, None);
        settings.timeout = Duration::from_millis(200);
        let started = std::time::Instant::now();
        let events = run(settings, request(vec![user("hi")])).await;
        assert_eq!(error_of(&events).kind, ProviderErrorKind::Timeout);
        assert!(started.elapsed() < Duration::from_millis(1500));
    }

    #[tokio::test]
    async fn connection_refused_is_transport() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let address = listener.local_addr().unwrap();
        drop(listener);
        let events = run(
            OpenAiSettings {
                name: "local".into(),
                base_url: format!("http://{address}/v1"),
                api_key: None,
                headers: Vec::new(),
                timeout: Duration::from_secs(2),
            },
            request(vec![user("hi")]),
        )
        .await;
        assert_eq!(error_of(&events).kind, ProviderErrorKind::Transport);
    }

    #[tokio::test]
    async fn the_request_has_the_documented_shape() {
        let ok = || {
            FixtureResponse::sse(&[
                chunk(json!({"content": "ok"}), Some("stop")),
                DONE.to_owned(),
            ])
        };
        let server = FixtureServer::start(vec![ok(), ok()]).await.unwrap();
        let history = vec![
            user("read main"),
            Message::Assistant {
                text: String::new(),
                thought: "hmm".into(),
                tool_calls: vec![ToolCall {
                    id: "call_a".into(),
                    name: "read_file".into(),
                    arguments: json!({"path": "src/main.rs"}),
                }],
                interrupted: false,
            },
            Message::Tool {
                call_id: "call_a".into(),
                content: "fn main() {}".into(),
                is_error: false,
            },
            Message::Assistant {
                text: "It is emp".into(),
                thought: String::new(),
                tool_calls: Vec::new(),
                interrupted: true,
            },
            user("go on"),
        ];
        let events = run(settings(&server, None), request(history.clone())).await;
        assert!(events.iter().all(Result::is_ok));
        run(settings(&server, Some("sk-test")), request(history)).await;
        let requests = server.requests();
        let first = &requests[0];
        assert_eq!(first.method, "POST");
        assert_eq!(first.path, "/v1/chat/completions");
        assert_eq!(first.header("authorization"), None);
        assert_eq!(first.header("x-extra"), Some("yes"));
        assert_eq!(requests[1].header("authorization"), Some("Bearer sk-test"));
        let body = &first.body;
        assert_eq!(body["model"], "gpt-test");
        assert_eq!(body["stream"], true);
        assert_eq!(body["stream_options"]["include_usage"], true);
        assert_eq!(
            body["tools"],
            json!([{"type": "function", "function": {"name": "read_file",
                "description": "Reads a file",
                "parameters": {"type": "object", "properties": {"path": {"type": "string"}}}}}])
        );
        let messages = body["messages"].as_array().unwrap();
        let roles: Vec<&str> = messages
            .iter()
            .map(|m| m["role"].as_str().unwrap())
            .collect();
        assert_eq!(
            roles,
            ["system", "user", "assistant", "tool", "assistant", "user"]
        );
        assert_eq!(messages[0]["content"], "You are terse");
        assert_eq!(
            messages[2],
            json!({"role": "assistant", "content": null, "tool_calls": [{"id": "call_a",
                "type": "function",
                "function": {"name": "read_file", "arguments": "{\"path\":\"src/main.rs\"}"}}]})
        );
        assert_eq!(
            messages[3],
            json!({"role": "tool", "tool_call_id": "call_a", "content": "fn main() {}"})
        );
        assert_eq!(
            messages[4],
            json!({"role": "assistant", "content": "It is emp"})
        );
    }

    #[tokio::test]
    async fn tool_calls_written_as_text_are_parsed() {
        let events = run_one(FixtureResponse::sse(&[
            chunk(json!({"content": "Reading it. <tool"}), None),
            chunk(json!({"content": "_call>{\"name\": \"read_file\", "}), None),
            chunk(
                json!({"content": "\"arguments\": {\"path\": \"a.rs\"}}</tool_call>"}),
                None,
            ),
            chunk(json!({"content": " <b>"}), None),
            chunk(json!({}), Some("stop")),
            DONE.to_owned(),
        ]))
        .await;
        assert_eq!(text_of(&events), "Reading it.  <b>");
        let events: Vec<ProviderEvent> = events.into_iter().map(Result::unwrap).collect();
        let calls: Vec<&ToolCall> = events
            .iter()
            .filter_map(|e| {
                let ProviderEvent::ToolCall(call) = e else {
                    return None;
                };
                Some(call)
            })
            .collect();
        assert_eq!(calls.len(), 1);
        assert_eq!(calls[0].name, "read_file");
        assert_eq!(calls[0].arguments, json!({"path": "a.rs"}));
        assert_eq!(
            events.last(),
            Some(&ProviderEvent::Done(ModelStop::ToolUse))
        );
    }

    #[test]
    fn text_blocks_naming_unknown_tools_stay_text() {
        let mut calls = TextCalls::new(vec!["read_file".into()]);
        let mut shown = calls.push("a <tool_call>{\"name\": \"rm\"}</tool_call> b <tool_");
        let (rest, found) = calls.finish();
        shown.push_str(&rest);
        assert_eq!(
            shown,
            "a <tool_call>{\"name\": \"rm\"}</tool_call> b <tool_"
        );
        assert!(found.is_empty());
        let mut plain = TextCalls::new(Vec::new());
        assert_eq!(plain.push("<tool_call>"), "<tool_call>");
    }

    #[tokio::test]
    async fn calls_sent_whole_at_one_index_stay_separate() {
        // As some servers send them: each call complete, all at index 0, and
        // the name repeated in later fragments.
        let whole = |id: &str, path: &str| {
            chunk(
                json!({"tool_calls": [{"index": 0, "id": id, "type": "function",
                    "function": {"name": "read_file",
                        "arguments": format!("{{\"path\": \"{path}\"}}")}}]}),
                None,
            )
        };
        let events = run_one(FixtureResponse::sse(&[
            whole("call_1", "a"),
            whole("call_2", "b"),
            chunk(
                json!({"tool_calls": [{"index": 0, "function": {"name": "read_file"}}]}),
                None,
            ),
            chunk(json!({}), Some("stop")),
        ]))
        .await;
        let calls: Vec<ToolCall> = events
            .into_iter()
            .filter_map(|e| match e {
                Ok(ProviderEvent::ToolCall(call)) => Some(call),
                _ => None,
            })
            .collect();
        assert_eq!(calls.len(), 2);
        assert_eq!(
            (calls[0].id.as_str(), calls[0].name.as_str()),
            ("call_1", "read_file")
        );
        assert_eq!(calls[0].arguments, json!({"path": "a"}));
        assert_eq!(
            (calls[1].id.as_str(), calls[1].name.as_str()),
            ("call_2", "read_file")
        );
    }

    #[tokio::test]
    async fn a_whole_json_completion_is_accepted() {
        let body = json!({
            "id": "chatcmpl-1",
            "object": "chat.completion",
            "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
                "role": "assistant", "content": "Looking",
                "tool_calls": [{"id": "call_x", "type": "function",
                    "function": {"name": "read_file", "arguments": "{\"path\":\"x\"}"}}]}}],
            "usage": {"prompt_tokens": 5, "completion_tokens": 2, "total_tokens": 7},
        });
        let events: Vec<ProviderEvent> = run_one(FixtureResponse::error(200, &body.to_string()))
            .await
            .into_iter()
            .map(Result::unwrap)
            .collect();
        assert_eq!(events[0], ProviderEvent::Text("Looking".into()));
        assert!(matches!(&events[1], ProviderEvent::ToolCall(call) if call.id == "call_x"));
        assert!(matches!(&events[2], ProviderEvent::Usage(u) if u.input_tokens == 5));
        assert_eq!(events[3], ProviderEvent::Done(ModelStop::ToolUse));
    }

    #[tokio::test]
    async fn a_cut_stream_names_the_break() {
        let mut response = FixtureResponse::sse(&[chunk(json!({"content": "Hi"}), None)]);
        response.cut = true;
        let error = error_of(&run_one(response).await);
        assert!(
            error.message.contains("before the model finished"),
            "{}",
            error.message
        );
    }

    #[test]
    fn an_assistant_turn_that_said_nothing_is_not_sent() {
        let body = request_body(&request(vec![
            user("hi"),
            Message::Assistant {
                text: String::new(),
                thought: "thinking".into(),
                tool_calls: Vec::new(),
                interrupted: true,
            },
            user("again"),
        ]));
        let roles: Vec<&str> = body["messages"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m["role"].as_str().unwrap())
            .collect();
        assert_eq!(roles, ["system", "user", "user"]);
        let failed = request_body(&request(vec![Message::Tool {
            call_id: "c".into(),
            content: "no such file".into(),
            is_error: true,
        }]));
        assert_eq!(failed["messages"][1]["content"], "Error: no such file");
    }

    #[test]
    fn a_prompt_with_an_image_becomes_text_and_image_url_parts() {
        let prompt = Message::User {
            content: vec![
                ContentPart::Text {
                    text: "what is this?".into(),
                },
                ContentPart::Image {
                    mime_type: "image/png".into(),
                    data: "iVBORw0KGgo=".into(),
                    uri: Some("file:///a.png".into()),
                },
                ContentPart::Resource {
                    uri: "file:///notes.md".into(),
                    text: "notes".into(),
                    mime_type: None,
                },
            ],
        };
        let body = request_body(&request(vec![user("earlier"), prompt]));
        // Without images the content stays a plain string.
        assert_eq!(body["messages"][1]["content"], "earlier");
        assert_eq!(
            body["messages"][2]["content"],
            json!([
                {"type": "text", "text": "what is this?"},
                {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}},
                {"type": "text", "text": "<resource uri=\"file:///notes.md\">\nnotes\n</resource>"},
            ])
        );
    }

    #[tokio::test]
    async fn dropping_the_stream_closes_the_connection() {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        // A server that streams text forever and reports when its writes fail.
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        let (closed_tx, closed_rx) = tokio::sync::oneshot::channel();
        tokio::spawn(async move {
            let (mut socket, _) = listener.accept().await.unwrap();
            let mut buf = [0u8; 65536];
            let _ = socket.read(&mut buf).await;
            let head = "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n\r\n";
            socket.write_all(head.as_bytes()).await.unwrap();
            let line = chunk(json!({"content": "x"}), None);
            loop {
                if socket.write_all(line.as_bytes()).await.is_err() {
                    let _ = closed_tx.send(());
                    return;
                }
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        });
        let provider = OpenAiProvider::new(OpenAiSettings {
            name: "local".into(),
            base_url: format!("http://{address}/v1"),
            api_key: None,
            headers: Vec::new(),
            timeout: Duration::from_secs(5),
        })
        .unwrap();
        let mut stream = provider.stream(request(vec![user("hi")]));
        assert_eq!(
            stream.next().await.unwrap().unwrap(),
            ProviderEvent::Text("x".into())
        );
        drop(stream);
        tokio::time::timeout(Duration::from_secs(5), closed_rx)
            .await
            .unwrap()
            .unwrap();
    }

    #[tokio::test]
    async fn a_leading_think_block_in_the_content_is_thinking() {
        let events = run_one(FixtureResponse::sse(&[
            chunk(json!({"content": "<thi"}), None),
            chunk(json!({"content": "nk>Weigh it</th"}), None),
            chunk(json!({"content": "ink>\n\nAnswer: 4"}), None),
            chunk(json!({}), Some("stop")),
        ]))
        .await;
        let events: Vec<ProviderEvent> = events.into_iter().map(Result::unwrap).collect();
        assert_eq!(
            events,
            vec![
                ProviderEvent::Thinking("Weigh it".into()),
                ProviderEvent::Text("Answer: 4".into()),
                ProviderEvent::Done(ModelStop::EndTurn),
            ]
        );
    }

    #[test]
    fn think_tags_later_in_the_text_stay_text() {
        let mut split = ThinkSplit::default();
        assert_eq!(split.push("Use "), (String::new(), "Use ".into()));
        assert_eq!(split.push("<think>"), (String::new(), "<think>".into()));
        let mut unfinished = ThinkSplit::default();
        assert_eq!(
            unfinished.push("<think>still"),
            ("still".into(), String::new())
        );
        assert_eq!(
            unfinished.push(" going</"),
            (" going".into(), String::new())
        );
        assert_eq!(unfinished.finish(), ("</".into(), String::new()));
    }

    #[tokio::test]
    async fn a_stalled_stream_times_out_after_the_text_received() {
        let mut response = FixtureResponse::sse(&[
            chunk(json!({"content": "Hel"}), None),
            chunk(json!({"content": "lo"}), Some("stop")),
        ]);
        response.chunks[1].0 = Duration::from_secs(2);
        let server = FixtureServer::start(vec![response]).await.unwrap();
        let mut settings = settings(&server, None);
        settings.timeout = Duration::from_millis(200);
        let events = run(settings, request(vec![user("hi")])).await;
        assert_eq!(text_of(&events), "Hel");
        let error = error_of(&events);
        assert_eq!(error.kind, ProviderErrorKind::Timeout);
        assert!(
            error.message.contains("went silent for 200ms"),
            "{}",
            error.message
        );
    }

    #[tokio::test]
    async fn a_character_split_across_reads_arrives_whole() {
        let event = chunk(json!({"content": "naïve 🦀"}), Some("stop"));
        let bytes = event.as_bytes();
        // Split inside the crab's four bytes.
        let split = event.find('🦀').unwrap() + 2;
        let mut response = FixtureResponse::sse(&[DONE]);
        response.chunks = vec![
            (Duration::ZERO, bytes[..split].to_vec()),
            (Duration::from_millis(50), bytes[split..].to_vec()),
            (Duration::ZERO, DONE.as_bytes().to_vec()),
        ];
        let events = run_one(response).await;
        assert_eq!(text_of(&events), "naïve 🦀");
    }
}
