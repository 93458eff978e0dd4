//! Stream decoding: the SSE events of one turn (or a whole JSON body) into provider events — text, thinking, tool calls assembled from fragments by index, usage, the stop — with a fast path for the usual text chunk.

use super::*;

/// A started turn: the response body, its events, and the decoder turning
/// them into provider events.
pub(super) struct Turn {
    /// `None` when the whole answer was already read (a JSON body).
    pub(super) response: Option<reqwest::Response>,
    pub(super) sse: Sse,
    pub(super) decoder: Decoder,
}

/// Why the event stream stopped early.
pub(super) enum StreamFailure {
    Transport(reqwest::Error),
    Malformed(String),
}

impl Turn {
    pub(super) fn into_stream(self) -> ProviderStream {
        futures::stream::unfold(self, |mut turn| async move {
            loop {
                if let Some(item) = turn.decoder.out.pop_front() {
                    return Some((item, turn));
                }
                if turn.decoder.over {
                    return None;
                }
                match turn.sse.next_data() {
                    Some(Ok(data)) => {
                        turn.decoder.data(data);
                        continue;
                    }
                    Some(Err(err)) => {
                        let failure = StreamFailure::Malformed(err.to_string());
                        turn.decoder.failed(failure);
                        continue;
                    }
                    None => {}
                }
                let Some(response) = turn.response.as_mut() else {
                    turn.decoder.ended();
                    continue;
                };
                match response.chunk().await {
                    Ok(Some(bytes)) => turn.sse.push(&bytes),
                    Ok(None) => turn.decoder.ended(),
                    Err(err) => turn.decoder.failed(StreamFailure::Transport(err)),
                }
            }
        })
        .boxed()
    }
}

/// The fuzzing entry point (`fuzz/`): the events a turn offering `tools`
/// yields for a response body arriving in `pieces`, decoded as
/// `Turn::into_stream` decodes it (`whole`: the body is one JSON completion,
/// as for a server that ignored `stream: true`). With `fast_path` off every
/// chunk goes to the full decoder. Calls sent without an id get random ids.
pub fn decode_for_fuzzing(
    pieces: &[&[u8]],
    tools: &[&str],
    whole: bool,
    fast_path: bool,
) -> Vec<Result<ProviderEvent, ProviderError>> {
    let context = ErrorContext {
        provider: "fuzz".to_owned(),
        model: "fuzz".to_owned(),
        url: "http://127.0.0.1:1/v1/chat/completions".to_owned(),
        has_key: false,
        timeout: Duration::from_secs(1),
    };
    let mut decoder = Decoder::new(context, tools.iter().map(|t| (*t).to_owned()).collect());
    let mut sse = Sse::new();
    let mut pieces = pieces.iter();
    if whole {
        let body: Vec<u8> = pieces.by_ref().flat_map(|p| p.iter().copied()).collect();
        decoder.whole(&String::from_utf8_lossy(&body));
    }
    let mut out = Vec::new();
    loop {
        out.extend(decoder.out.drain(..));
        if decoder.over {
            return out;
        }
        match sse.next_data() {
            Some(Ok(data)) => {
                let trimmed = data.trim();
                if fast_path || trimmed.is_empty() || trimmed == "[DONE]" {
                    decoder.data(data);
                } else {
                    decoder.chunk(trimmed);
                }
            }
            Some(Err(err)) => decoder.failed(StreamFailure::Malformed(err.to_string())),
            None => match pieces.next() {
                Some(piece) => sse.push(piece),
                None => decoder.ended(),
            },
        }
    }
}

/// The common chunk, a piece of answer text and nothing else, read without
/// building a JSON tree. Anything it does not recognise (an error, usage, a
/// finish reason, reasoning, tool calls, a field of an unexpected type) makes
/// [`TextChunk::plain_text`] decline, and the chunk is decoded in full.
#[derive(serde::Deserialize)]
pub(super) struct TextChunk<'a> {
    #[serde(default, borrow)]
    pub(super) choices: Option<Vec<Object<TextChoice<'a>>>>,
    #[serde(default)]
    pub(super) error: Option<serde::de::IgnoredAny>,
    #[serde(default)]
    pub(super) usage: Option<serde::de::IgnoredAny>,
}

#[derive(serde::Deserialize)]
pub(super) struct TextChoice<'a> {
    #[serde(default)]
    pub(super) index: Option<u64>,
    #[serde(default, borrow)]
    pub(super) delta: Option<Object<TextDelta<'a>>>,
    #[serde(default)]
    pub(super) finish_reason: Option<serde::de::IgnoredAny>,
}

#[derive(serde::Deserialize)]
pub(super) struct TextDelta<'a> {
    #[serde(default, borrow)]
    pub(super) content: Option<std::borrow::Cow<'a, str>>,
    #[serde(default)]
    pub(super) reasoning_content: Option<serde::de::IgnoredAny>,
    #[serde(default)]
    pub(super) reasoning: Option<serde::de::IgnoredAny>,
    #[serde(default)]
    pub(super) tool_calls: Option<serde::de::IgnoredAny>,
}

/// A struct read only from a JSON object: derived structs also accept an
/// array of their fields, which the full decoder would ignore.
pub(super) struct Object<T>(T);

impl<'de, T: serde::Deserialize<'de>> serde::Deserialize<'de> for Object<T> {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Visit<T>(std::marker::PhantomData<T>);
        impl<'de, T: serde::Deserialize<'de>> serde::de::Visitor<'de> for Visit<T> {
            type Value = Object<T>;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("an object")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                map: A,
            ) -> Result<Self::Value, A::Error> {
                T::deserialize(serde::de::value::MapAccessDeserializer::new(map)).map(Object)
            }
        }
        deserializer.deserialize_map(Visit(std::marker::PhantomData))
    }
}

impl TextChunk<'_> {
    /// The text of choice 0 (possibly empty) when that is all the chunk says.
    pub(super) fn plain_text(&self) -> Option<&str> {
        if self.error.is_some() || self.usage.is_some() {
            return None;
        }
        let choice = self
            .choices
            .as_ref()?
            .iter()
            .map(|c| &c.0)
            .find(|c| c.index.unwrap_or(0) == 0)?;
        if choice.finish_reason.is_some() {
            return None;
        }
        let Some(Object(delta)) = &choice.delta else {
            return Some("");
        };
        if delta.reasoning_content.is_some()
            || delta.reasoning.is_some()
            || delta.tool_calls.is_some()
        {
            return None;
        }
        Some(delta.content.as_deref().unwrap_or(""))
    }
}

/// A tool call being assembled from fragments.
#[derive(Default)]
pub(super) struct PartialCall {
    pub(super) id: String,
    pub(super) name: String,
    pub(super) arguments: String,
}

/// Turns SSE data lines into provider events, queued in `out`.
pub(super) struct Decoder {
    pub(super) context: ErrorContext,
    pub(super) out: VecDeque<Result<ProviderEvent, ProviderError>>,
    /// Set once nothing more will be queued.
    pub(super) over: bool,
    /// Keyed by the fragment's `index` (and a generation, see `delta`), so
    /// calls come out in index order.
    pub(super) calls: BTreeMap<(u64, u32), PartialCall>,
    /// The current generation of each index.
    pub(super) generations: HashMap<u64, u32>,
    /// The model's finish reason; `Done` is held until usage or the end.
    pub(super) finish: Option<ModelStop>,
    pub(super) usage: Option<Usage>,
    pub(super) think: ThinkSplit,
    pub(super) text_calls: TextCalls,
}

impl Decoder {
    pub(super) fn new(context: ErrorContext, tool_names: Vec<String>) -> Self {
        Self {
            context,
            out: VecDeque::new(),
            over: false,
            calls: BTreeMap::new(),
            generations: HashMap::new(),
            finish: None,
            usage: None,
            think: ThinkSplit::default(),
            text_calls: TextCalls::new(tool_names),
        }
    }

    pub(super) fn fail(&mut self, error: ProviderError) {
        self.out.push_back(Err(error));
        self.over = true;
    }

    /// Ends the turn with the held usage and `Done`.
    pub(super) fn finish_turn(&mut self, stop: ModelStop) {
        if let Some(usage) = self.usage.take() {
            self.out.push_back(Ok(ProviderEvent::Usage(usage)));
        }
        self.out.push_back(Ok(ProviderEvent::Done(stop)));
        self.over = true;
    }

    pub(super) fn data(&mut self, data: &str) {
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
        // Most chunks are a piece of text: read those without building a tree.
        if self.finish.is_none()
            && let Ok(Object(chunk)) = serde_json::from_str::<Object<TextChunk<'_>>>(data)
            && let Some(text) = chunk.plain_text()
        {
            if !text.is_empty() {
                let (thought, text) = self.think.push(text);
                self.content(thought, &text);
            }
            return;
        }
        self.chunk(data);
    }

    /// Any chunk, decoded in full.
    pub(super) fn chunk(&mut self, data: &str) {
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
        // Anything after the finish reason but the usage is ignored: the
        // turn's text and calls were already flushed.
        if let Some(choice) = choice.filter(|_| self.finish.is_none()) {
            self.delta(&choice["delta"]);
            if self.over {
                return;
            }
            if let Some(reason) = choice["finish_reason"].as_str() {
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

    /// A whole (not streamed) completion: decoded as one chunk carrying the
    /// message as its delta, then the end.
    pub(super) fn whole(&mut self, body: &str) {
        let mut completion: Value = match serde_json::from_str(body) {
            Ok(value) => value,
            Err(_) => return self.data(body),
        };
        // Not indexed with `[]`: a body that is no object would panic.
        if let Some(choices) = completion.get_mut("choices").and_then(Value::as_array_mut) {
            for choice in choices {
                if let Some(message) = choice.get_mut("message").map(Value::take) {
                    choice["delta"] = message;
                }
            }
        }
        self.data(&completion.to_string());
        if !self.over {
            self.data("[DONE]");
        }
    }

    pub(super) fn delta(&mut self, delta: &Value) {
        let reasoning = delta["reasoning_content"]
            .as_str()
            .or_else(|| delta["reasoning"].as_str());
        if let Some(thought) = reasoning.filter(|t| !t.is_empty()) {
            self.out
                .push_back(Ok(ProviderEvent::Thinking(thought.to_owned())));
        }
        if let Some(text) = delta["content"].as_str().filter(|t| !t.is_empty()) {
            let (thought, text) = self.think.push(text);
            self.content(thought, &text);
        }
        if let Some(fragments) = delta["tool_calls"].as_array() {
            for (position, fragment) in fragments.iter().enumerate() {
                // Servers that send whole calls at once sometimes omit `index`.
                let index = fragment["index"].as_u64().unwrap_or(position as u64);
                let id = fragment["id"].as_str().filter(|id| !id.is_empty());
                let mut generation = self.generations.get(&index).copied().unwrap_or(0);
                // A new id at an index already holding a call starts another
                // call: some servers send every call whole at index 0.
                if let (Some(id), Some(existing)) = (id, self.calls.get(&(index, generation)))
                    && !existing.id.is_empty()
                    && existing.id != id
                {
                    generation += 1;
                    self.generations.insert(index, generation);
                }
                let call = self.calls.entry((index, generation)).or_default();
                if let Some(id) = id {
                    call.id = id.to_owned();
                }
                let function = &fragment["function"];
                // The name comes whole in the first fragment; a server that
                // repeats it must not double it.
                if let Some(name) = function["name"].as_str()
                    && name != call.name
                {
                    call.name.push_str(name);
                }
                let arguments = &function["arguments"];
                if let Some(piece) = arguments.as_str() {
                    call.arguments.push_str(piece);
                } else if !arguments.is_null() {
                    // Some servers send the arguments as an object, not a string.
                    call.arguments = arguments.to_string();
                }
            }
        }
    }

    /// Queues content split into thought and text.
    pub(super) fn content(&mut self, thought: String, text: &str) {
        if !thought.is_empty() {
            self.out.push_back(Ok(ProviderEvent::Thinking(thought)));
        }
        if !text.is_empty() {
            let shown = self.text_calls.push(text);
            if !shown.is_empty() {
                self.out.push_back(Ok(ProviderEvent::Text(shown)));
            }
        }
    }

    /// The choice is finished: flushes held text and emits the assembled tool
    /// calls, returning the stop reason.
    pub(super) fn close_choice(&mut self, reason: Option<&str>) -> ModelStop {
        let (thought, text) = self.think.finish();
        self.content(thought, &text);
        let (rest, text_calls) = self.text_calls.finish();
        if !rest.is_empty() {
            self.out.push_back(Ok(ProviderEvent::Text(rest)));
        }
        self.generations.clear();
        // Every call is checked before any is queued: a turn with one broken
        // call yields no calls at all, so nothing runs half of what was asked.
        let mut calls = Vec::new();
        for ((index, _), call) in std::mem::take(&mut self.calls) {
            match finish_call(index, call) {
                Ok(call) => calls.push(call),
                Err(error) => {
                    self.fail(error);
                    return ModelStop::EndTurn;
                }
            }
        }
        for (index, (name, arguments)) in text_calls.into_iter().enumerate() {
            calls.push(ToolCall {
                id: new_call_id(index as u64),
                name,
                arguments,
            });
        }
        let any_call = !calls.is_empty();
        self.out.extend(
            calls
                .into_iter()
                .map(|call| Ok(ProviderEvent::ToolCall(call))),
        );
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
    pub(super) fn failed(&mut self, err: StreamFailure) {
        if let Some(stop) = self.finish {
            // The answer was complete; only the usage or `[DONE]` was lost.
            return self.finish_turn(stop);
        }
        let error = match err {
            StreamFailure::Transport(err) => {
                let mut error = self.context.transport(&err);
                if error.kind == ProviderErrorKind::Timeout {
                    error.message = format!(
                        "provider {} went silent for {:?} before the model finished",
                        self.context.provider, self.context.timeout
                    );
                } else {
                    error.message = format!(
                        "the stream from provider {} broke before the model finished: {}",
                        self.context.provider,
                        crate::causes::chain(&err)
                    );
                }
                error
            }
            StreamFailure::Malformed(what) => ProviderError::new(
                ProviderErrorKind::Protocol,
                format!(
                    "provider {} sent a malformed event stream: {what}",
                    self.context.provider
                ),
            ),
        };
        self.fail(error);
    }

    /// The SSE stream ended without `[DONE]`.
    pub(super) fn ended(&mut self) {
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

/// A call assembled from fragments, with its arguments parsed.
pub(super) fn finish_call(index: u64, call: PartialCall) -> Result<ToolCall, ProviderError> {
    if call.name.is_empty() {
        return Err(ProviderError::new(
            ProviderErrorKind::Protocol,
            "the model sent a tool call without a tool name",
        ));
    }
    let arguments = if call.arguments.trim().is_empty() {
        json!({})
    } else {
        serde_json::from_str::<Value>(&call.arguments).map_err(|err| {
            let shown: String = call.arguments.chars().take(200).collect();
            ProviderError::new(
                ProviderErrorKind::Protocol,
                format!(
                    "the model sent malformed JSON arguments for the tool {} ({err}): {shown}",
                    call.name
                ),
            )
        })?
    };
    let id = if call.id.is_empty() {
        new_call_id(index)
    } else {
        call.id
    };
    Ok(ToolCall {
        id,
        name: call.name,
        arguments,
    })
}

/// An id for a call the server sent without one; unique so tool results
/// cannot be matched to the wrong call across turns.
pub(super) fn new_call_id(index: u64) -> String {
    format!("call_{}_{index}", uuid::Uuid::now_v7().simple())
}

pub(super) fn parse_usage(usage: &Value) -> Usage {
    let count = |value: &Value| value.as_u64().unwrap_or(0);
    Usage {
        input_tokens: count(&usage["prompt_tokens"]),
        output_tokens: count(&usage["completion_tokens"]),
        cached_input_tokens: count(&usage["prompt_tokens_details"]["cached_tokens"]),
        reasoning_tokens: count(&usage["completion_tokens_details"]["reasoning_tokens"]),
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::chunk;
    use super::*;

    fn decoder(tools: &[&str]) -> Decoder {
        Decoder::new(
            ErrorContext {
                provider: "openai".into(),
                model: "gpt-test".into(),
                url: "http://127.0.0.1:1/v1/chat/completions".into(),
                has_key: true,
                timeout: Duration::from_secs(5),
            },
            tools.iter().map(|t| (*t).to_owned()).collect(),
        )
    }

    /// The queued events, with generated call ids left out.
    fn drained(decoder: &mut Decoder) -> Vec<String> {
        decoder
            .out
            .drain(..)
            .map(|event| match event {
                Ok(ProviderEvent::ToolCall(call)) => {
                    format!("call {} {}", call.name, call.arguments)
                }
                other => format!("{other:?}"),
            })
            .collect()
    }

    /// Found by fuzzing (`openai_stream`): a whole JSON body that is not an
    /// object (a string, a number, a list) panicked.
    #[test]
    fn a_whole_body_that_is_no_object_ends_the_turn_without_a_panic() {
        for body in [&b"\"x\""[..], b"42", b"[1,2]", b"null"] {
            let events = decode_for_fuzzing(&[body], &[], true, true);
            assert!(
                matches!(
                    events.as_slice(),
                    [Ok(ProviderEvent::Done(ModelStop::EndTurn))]
                ),
                "{events:?}"
            );
        }
    }

    #[test]
    fn the_text_fast_path_reads_the_usual_chunk() {
        let data = chunk(json!({"content": "Hello"}), None);
        let data = data.trim().strip_prefix("data: ").unwrap();
        let Object(parsed) = serde_json::from_str::<Object<TextChunk<'_>>>(data).unwrap();
        assert_eq!(parsed.plain_text(), Some("Hello"));
        let role = chunk(json!({"role": "assistant", "content": ""}), None);
        let role = role.trim().strip_prefix("data: ").unwrap();
        let Object(parsed) = serde_json::from_str::<Object<TextChunk<'_>>>(role).unwrap();
        assert_eq!(parsed.plain_text(), Some(""));
    }

    #[test]
    fn the_text_fast_path_decodes_every_chunk_as_the_full_decoder_does() {
        let one = |chunk: &str| vec![chunk.to_owned()];
        let text =
            |t: &str| json!({"choices": [{"index": 0, "delta": {"content": t}}]}).to_string();
        let cases: Vec<Vec<String>> = vec![
            one(chunk(json!({"content": "Hello"}), None)
                .trim()
                .trim_start_matches("data: ")),
            one(r#"{"choices":[{"index":0,"delta":{"role":"assistant","content":""}}]}"#),
            one(r#"{"choices":[{"index":0,"delta":{"content":null}}]}"#),
            one(r#"{"choices":[{"index":0}]}"#),
            one(r#"{"choices":[{"index":0,"delta":null}]}"#),
            one(r#"{"choices":[{"index":0,"delta":{}}]}"#),
            one(r#"{"choices":[]}"#),
            one(r#"{"choices":null}"#),
            one(r#"{"id":"x"}"#),
            one(r#"{"choices":[{"index":1,"delta":{"content":"other"}}]}"#),
            one(
                r#"{"choices":[{"index":1,"delta":{"content":"no"}},{"index":0,"delta":{"content":"yes"}}]}"#,
            ),
            one(r#"{"choices":[{"delta":{"content":"no index"}}]}"#),
            one(r#"{"choices":[{"index":null,"delta":{"content":"null index"}}]}"#),
            one(r#"{"choices":[{"index":"0","delta":{"content":"string index"}}]}"#),
            one(r#"{"choices":[{"index":1.0,"delta":{"content":"float index"}}]}"#),
            one(r#"{"choices":[{"index":-1,"delta":{"content":"negative index"}}]}"#),
            one(r#"{"choices":[[0,{"content":"array choice"}]]}"#),
            one(r#"[[{"index":0,"delta":{"content":"array chunk"}}]]"#),
            one(r#"{"choices":[{"index":0,"delta":["array delta"]}]}"#),
            one(
                r#"{"choices":[{"index":0,"delta":{"content":[{"type":"text","text":"parts"}]}}]}"#,
            ),
            one(r#"{"choices":[{"index":0,"delta":{"content":5}}]}"#),
            one(r#"{"choices":[{"index":0,"delta":{"content":"a\nb\u00e9\"\ud83e\udd80"}}]}"#),
            one(r#"{"choices":[{"index":0,"delta":{"content":"\ud83e"}}]}"#),
            one(r#"{"choices":[{"index":0,"delta":{"reasoning_content":"r","content":"x"}}]}"#),
            one(r#"{"choices":[{"index":0,"delta":{"reasoning":"r","content":"x"}}]}"#),
            one(r#"{"choices":[{"index":0,"delta":{"reasoning_content":null,"content":"x"}}]}"#),
            one(r#"{"choices":[{"index":0,"delta":{"reasoning":5,"content":"x"}}]}"#),
            one(
                r#"{"choices":[{"index":0,"delta":{"content":"x","tool_calls":[{"index":0,"id":"c1","function":{"name":"read_file","arguments":"{}"}}]}}]}"#,
            ),
            one(r#"{"choices":[{"index":0,"delta":{"content":"x","tool_calls":null}}]}"#),
            one(r#"{"choices":[{"index":0,"delta":{"content":"x"},"finish_reason":"length"}]}"#),
            one(r#"{"choices":[{"index":0,"delta":{"content":"x"},"finish_reason":null}]}"#),
            one(r#"{"choices":[{"index":0,"delta":{"content":"x"},"finish_reason":7}]}"#),
            one(
                r#"{"choices":[{"index":0,"delta":{"content":"x"}}],"usage":{"prompt_tokens":3,"completion_tokens":4}}"#,
            ),
            one(r#"{"choices":[{"index":0,"delta":{"content":"x"}}],"usage":null}"#),
            one(r#"{"choices":[{"index":0,"delta":{"content":"x"}}],"usage":"none"}"#),
            one(r#"{"error":{"message":"overloaded","code":"server_error"}}"#),
            one(r#"{"choices":[{"index":0,"delta":{"content":"x"}}],"error":null}"#),
            one(r#"{"choices":[{"index":0,"delta":{"content":"a","content":"b"}}]}"#),
            one(r#"{"choices":[{"index":0,"delta":{"content":"a"}}],"choices":[]}"#),
            one("{oops"),
            one(r#""just a string""#),
            vec![
                text("<thi"),
                text("nk>hidden"),
                text(" more</thi"),
                text("nk> shown"),
            ],
            vec![text("  <think>a</think>b"), text("c")],
            vec![
                text("before <tool_call>"),
                text(r#"{"name":"read_file","arguments":{"path":"a"}}"#),
                text("</tool_call> after"),
            ],
            vec![text("<tool_call>{\"name\":\"nope\"}</tool_call>")],
            vec![
                text("a"),
                r#"{"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}"#.to_owned(),
                text("late"),
            ],
        ];
        let end = r#"{"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}"#;
        for tools in [&[][..], &["read_file"][..]] {
            for case in &cases {
                let mut fast = decoder(tools);
                let mut full = decoder(tools);
                for data in case.iter().map(String::as_str).chain([end, "[DONE]"]) {
                    if fast.over {
                        break;
                    }
                    fast.data(data);
                    if data == "[DONE]" {
                        full.data(data);
                    } else {
                        full.chunk(data);
                    }
                }
                assert_eq!(
                    drained(&mut fast),
                    drained(&mut full),
                    "{case:?} with tools {tools:?}"
                );
                assert_eq!(fast.over, full.over);
            }
        }
    }
}
