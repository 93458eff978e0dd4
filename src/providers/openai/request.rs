//! Request building: a model turn as the JSON body of `POST /chat/completions` (messages with images as `image_url` parts, tools as functions, streaming with usage).

use super::*;

/// The JSON body of a chat completions request.
pub(super) fn request_body(request: &ModelRequest) -> Value {
    let mut messages = Vec::with_capacity(request.messages.len() + 1);
    if let Some(system) = &request.system {
        messages.push(json!({"role": "system", "content": system}));
    }
    for message in &request.messages {
        // A turn interrupted before it said anything has nothing to send, and
        // some servers reject an empty assistant message.
        if let Message::Assistant {
            text, tool_calls, ..
        } = message
            && text.is_empty()
            && tool_calls.is_empty()
        {
            continue;
        }
        messages.push(match message {
            Message::User { content } => json!({"role": "user", "content": user_content(content)}),
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
                call_id,
                content,
                is_error,
            } => {
                // The API has no error flag on tool results (Anthropic's has),
                // so a failure is said in the content where the model reads it.
                let content = if *is_error && !content.to_ascii_lowercase().starts_with("error") {
                    format!("Error: {content}")
                } else {
                    content.clone()
                };
                json!({"role": "tool", "tool_call_id": call_id, "content": content})
            }
            Message::Summary { text, .. } => {
                json!({"role": "user", "content": summary_for_model(text)})
            }
            Message::Note { text } => json!({"role": "user", "content": note_for_model(text)}),
        });
    }
    let mut body = json!({
        "model": request.model,
        "messages": messages,
        "stream": true,
        "stream_options": {"include_usage": true},
    });
    if !request.tools.is_empty() {
        body["tools"] = request.tools.iter().map(|tool| tool_json(tool)).collect();
    }
    if let Some(effort) = &request.reasoning_effort {
        body["reasoning_effort"] = effort.clone().into();
    }
    body
}

/// A user message's `content`: a plain string, which every compatible server
/// takes, unless the prompt has images; then an array of `text` and
/// `image_url` parts (images as `data:` URLs), in the prompt's order.
pub(super) fn user_content(content: &[ContentPart]) -> Value {
    if !content.iter().any(ContentPart::is_image) {
        return Value::String(
            content
                .iter()
                .map(ContentPart::to_model_text)
                .collect::<Vec<_>>()
                .join("\n\n"),
        );
    }
    content
        .iter()
        .map(|part| match part {
            ContentPart::Image {
                mime_type, data, ..
            } => json!({
                "type": "image_url",
                "image_url": {"url": format!("data:{mime_type};base64,{data}")},
            }),
            ContentPart::Text { .. }
            | ContentPart::ResourceLink { .. }
            | ContentPart::Resource { .. } => {
                json!({"type": "text", "text": part.to_model_text()})
            }
        })
        .collect()
}

pub(super) fn tool_json(tool: &ToolSpec) -> Value {
    json!({
        "type": "function",
        "function": {
            "name": tool.name,
            "description": tool.description,
            "parameters": tool.parameters,
        },
    })
}
