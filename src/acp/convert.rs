//! Conversions between ACP wire types and core types. Only the ACP face knows
//! both sides.

use agent_client_protocol_schema::v1 as acp;
use serde_json::{Value, json};

use crate::core::event::{Event, StopReason};
use crate::core::provider::Providers;
use crate::core::run::RunInfo;
use crate::core::session::{ContentPart, HistoryEntry, Message, Millis, Mode, Session};

/// The config option id of the model selector.
pub const MODEL_OPTION: &str = "model";
/// The config option id of the autonomy mode selector.
pub const MODE_OPTION: &str = "mode";

/// Converts prompt content; content Pincer did not advertise is refused by name.
pub fn prompt_content(blocks: Vec<acp::ContentBlock>) -> Result<Vec<ContentPart>, String> {
    blocks
        .into_iter()
        .enumerate()
        .map(|(index, block)| match block {
            acp::ContentBlock::Text(text) => Ok(ContentPart::Text { text: text.text }),
            acp::ContentBlock::ResourceLink(link) => Ok(ContentPart::ResourceLink {
                uri: link.uri,
                name: link.name,
                mime_type: link.mime_type,
            }),
            acp::ContentBlock::Resource(resource) => match resource.resource {
                acp::EmbeddedResourceResource::TextResourceContents(contents) => {
                    Ok(ContentPart::Resource {
                        uri: contents.uri,
                        text: contents.text,
                        mime_type: contents.mime_type,
                    })
                }
                acp::EmbeddedResourceResource::BlobResourceContents(_) => Err(format!(
                    "prompt[{index}]: binary embedded resources are not supported; embed text or send a resource_link"
                )),
                _ => Err(format!("prompt[{index}]: unsupported embedded resource")),
            },
            acp::ContentBlock::Image(_) => Err(format!(
                "prompt[{index}]: image content is not supported (promptCapabilities.image is false)"
            )),
            acp::ContentBlock::Audio(_) => Err(format!(
                "prompt[{index}]: audio content is not supported (promptCapabilities.audio is false)"
            )),
            _ => Err(format!("prompt[{index}]: unsupported content block")),
        })
        .collect()
}

fn content_block(part: &ContentPart) -> acp::ContentBlock {
    match part {
        ContentPart::Text { text } => acp::ContentBlock::Text(acp::TextContent::new(text.clone())),
        ContentPart::ResourceLink {
            uri,
            name,
            mime_type,
        } => acp::ContentBlock::ResourceLink(
            acp::ResourceLink::new(name.clone(), uri.clone()).mime_type(mime_type.clone()),
        ),
        ContentPart::Resource {
            uri,
            text,
            mime_type,
        } => acp::ContentBlock::Resource(acp::EmbeddedResource::new(
            acp::EmbeddedResourceResource::TextResourceContents(
                acp::TextResourceContents::new(text.clone(), uri.clone())
                    .mime_type(mime_type.clone()),
            ),
        )),
    }
}

fn text_chunk(text: &str) -> acp::ContentChunk {
    acp::ContentChunk::new(acp::ContentBlock::Text(acp::TextContent::new(
        text.to_owned(),
    )))
}

/// The session update a live event becomes, if any.
pub fn live_update(event: &Event, own_prompt: bool) -> Vec<acp::SessionUpdate> {
    match event {
        Event::TextDelta { text } => vec![acp::SessionUpdate::AgentMessageChunk(text_chunk(text))],
        Event::ThoughtDelta { text } => {
            vec![acp::SessionUpdate::AgentThoughtChunk(text_chunk(text))]
        }
        Event::UserMessage { content } if !own_prompt => content
            .iter()
            .map(|part| {
                acp::SessionUpdate::UserMessageChunk(acp::ContentChunk::new(content_block(part)))
            })
            .collect(),
        Event::ToolCall {
            id,
            name,
            arguments,
        } => vec![acp::SessionUpdate::ToolCall(
            acp::ToolCall::new(id.clone(), name.clone())
                .kind(acp::ToolKind::Other)
                .status(acp::ToolCallStatus::Pending)
                .raw_input(arguments.clone()),
        )],
        Event::ToolResult {
            id,
            output,
            is_error,
        } => vec![tool_result_update(id, output, *is_error)],
        Event::UserMessage { .. }
        | Event::State { .. }
        | Event::ModelTurn { .. }
        | Event::Usage { .. } => Vec::new(),
    }
}

fn tool_result_update(id: &str, output: &str, is_error: bool) -> acp::SessionUpdate {
    let status = if is_error {
        acp::ToolCallStatus::Failed
    } else {
        acp::ToolCallStatus::Completed
    };
    acp::SessionUpdate::ToolCallUpdate(acp::ToolCallUpdate::new(
        id.to_owned(),
        acp::ToolCallUpdateFields::new()
            .status(status)
            .content(vec![acp::ToolCallContent::Content(acp::Content::new(
                acp::ContentBlock::Text(acp::TextContent::new(output.to_owned())),
            ))]),
    ))
}

/// The updates that replay a session's history to a client, in order.
pub fn history_updates(history: &[HistoryEntry]) -> Vec<acp::SessionUpdate> {
    let mut updates = Vec::new();
    for entry in history {
        match &entry.message {
            Message::User { content } => updates.extend(content.iter().map(|part| {
                acp::SessionUpdate::UserMessageChunk(acp::ContentChunk::new(content_block(part)))
            })),
            Message::Assistant {
                text,
                thought,
                tool_calls,
                interrupted: _,
            } => {
                if !thought.is_empty() {
                    updates.push(acp::SessionUpdate::AgentThoughtChunk(text_chunk(thought)));
                }
                if !text.is_empty() {
                    updates.push(acp::SessionUpdate::AgentMessageChunk(text_chunk(text)));
                }
                for call in tool_calls {
                    updates.push(acp::SessionUpdate::ToolCall(
                        acp::ToolCall::new(call.id.clone(), call.name.clone())
                            .kind(acp::ToolKind::Other)
                            .status(acp::ToolCallStatus::Pending)
                            .raw_input(call.arguments.clone()),
                    ));
                }
            }
            Message::Tool {
                call_id,
                content,
                is_error,
            } => updates.push(tool_result_update(call_id, content, *is_error)),
        }
    }
    updates
}

pub fn stop_reason(reason: StopReason) -> acp::StopReason {
    match reason {
        StopReason::EndTurn => acp::StopReason::EndTurn,
        StopReason::MaxTokens => acp::StopReason::MaxTokens,
        StopReason::MaxTurnRequests => acp::StopReason::MaxTurnRequests,
        StopReason::Refusal => acp::StopReason::Refusal,
        StopReason::Cancelled => acp::StopReason::Cancelled,
    }
}

/// The session's model and mode selectors.
pub fn config_options(session: &Session, providers: &Providers) -> Vec<acp::SessionConfigOption> {
    let mut options = Vec::new();
    let choices = providers.choices();
    if !choices.is_empty() {
        let current = format!("{}/{}", session.provider, session.model);
        let mut values: Vec<acp::SessionConfigSelectOption> = choices
            .iter()
            .map(|choice| {
                acp::SessionConfigSelectOption::new(choice.id(), choice.model.clone())
                    .description(format!("{} via provider {}", choice.model, choice.provider))
            })
            .collect();
        // A session keeps its model across restarts even if the config no longer
        // lists it; show it rather than a selector pointing at nothing.
        if !choices.iter().any(|choice| choice.id() == current) {
            values.push(
                acp::SessionConfigSelectOption::new(current.clone(), session.model.clone())
                    .description(format!(
                        "{} via provider {} (not in the current configuration)",
                        session.model, session.provider
                    )),
            );
        }
        options.push(
            acp::SessionConfigOption::select(MODEL_OPTION, "Model", current, values)
                .description("The model that answers prompts in this session".to_owned())
                .category(acp::SessionConfigOptionCategory::Model),
        );
    }
    let modes: Vec<acp::SessionConfigSelectOption> = Mode::ALL
        .iter()
        .map(|mode| {
            acp::SessionConfigSelectOption::new(mode.as_str(), mode.title())
                .description(mode.description().to_owned())
        })
        .collect();
    options.push(
        acp::SessionConfigOption::select(MODE_OPTION, "Mode", session.mode.as_str(), modes)
            .description("How much the agent may do without asking".to_owned())
            .category(acp::SessionConfigOptionCategory::Mode),
    );
    options
}

/// The same modes in the older `modes` form, for clients without config options.
pub fn mode_state(session: &Session) -> acp::SessionModeState {
    acp::SessionModeState::new(
        session.mode.as_str(),
        Mode::ALL
            .iter()
            .map(|mode| {
                acp::SessionMode::new(mode.as_str(), mode.title())
                    .description(mode.description().to_owned())
            })
            .collect::<Vec<_>>(),
    )
}

/// RFC 3339 in UTC with exactly three fractional digits, so timestamps sort as text.
pub fn timestamp(millis: Millis) -> String {
    jiff::Timestamp::from_millisecond(millis)
        .map(|t| t.strftime("%Y-%m-%dT%H:%M:%S%.3fZ").to_string())
        .unwrap_or_default()
}

pub fn session_info(session: &Session) -> acp::SessionInfo {
    acp::SessionInfo::new(session.id.as_str().to_owned(), session.workspace.clone())
        .title(session.title.clone())
        .updated_at(timestamp(session.updated_at))
}

/// A run as `_pincer/runs/*` reports it.
pub fn run_json(run: &RunInfo) -> Value {
    json!({
        "runId": run.id.as_str(),
        "sessionId": run.session_id.as_str(),
        "state": run.state.as_str(),
        "stopReason": run.stop_reason.map(StopReason::as_str),
        "error": run.error,
        "usage": {
            "inputTokens": run.usage.input_tokens,
            "outputTokens": run.usage.output_tokens,
        },
        "createdAt": timestamp(run.created_at),
        "startedAt": run.started_at.map(timestamp),
        "endedAt": run.ended_at.map(timestamp),
        "durationMs": match (run.started_at, run.ended_at) {
            (Some(start), Some(end)) => Some(end - start),
            _ => None,
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps_have_fixed_millisecond_precision() {
        assert_eq!(timestamp(1_795_311_555_070), "2026-11-22T01:39:15.070Z");
        assert_eq!(timestamp(1_795_311_555_000), "2026-11-22T01:39:15.000Z");
    }
}
