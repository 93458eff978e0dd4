//! Conversions between ACP wire types and core types. Only the ACP face knows
//! both sides.

use agent_client_protocol_schema::v1 as acp;
use serde_json::{Value, json};

use std::path::PathBuf;

use crate::core::approval::ApprovalDecision;
use crate::core::event::{Event, StopReason};
use crate::core::provider::Providers;
use crate::core::run::RunInfo;
use crate::core::session::{ContentPart, HistoryEntry, Message, Millis, Mode, Session};
use crate::core::tool::{FileDiff, ToolKind};

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
            kind,
        } => vec![acp::SessionUpdate::ToolCall(
            acp::ToolCall::new(id.clone(), name.clone())
                .kind(tool_kind(*kind))
                .status(acp::ToolCallStatus::Pending)
                .raw_input(arguments.clone()),
        )],
        Event::ToolPlanned {
            id,
            title,
            locations,
            command: _,
            diffs,
        } => {
            let mut fields = acp::ToolCallUpdateFields::new()
                .title(title.clone())
                .locations(tool_locations(locations));
            if !diffs.is_empty() {
                fields = fields.content(diffs.iter().map(diff_content).collect::<Vec<_>>());
            }
            vec![acp::SessionUpdate::ToolCallUpdate(
                acp::ToolCallUpdate::new(id.clone(), fields),
            )]
        }
        Event::ToolStarted { id } => vec![acp::SessionUpdate::ToolCallUpdate(
            acp::ToolCallUpdate::new(
                id.clone(),
                acp::ToolCallUpdateFields::new().status(acp::ToolCallStatus::InProgress),
            ),
        )],
        Event::ToolResult {
            id,
            output,
            is_error,
            verdict: _,
            diffs,
            safety: _,
        } => vec![tool_result_update(id, output, *is_error, diffs)],
        Event::Usage {
            usage,
            model,
            cost,
            context: Some(context),
            session_cost,
        } => {
            let mut turn = serde_json::Map::new();
            turn.insert("inputTokens".into(), usage.input_tokens.into());
            turn.insert("outputTokens".into(), usage.output_tokens.into());
            turn.insert("cachedInputTokens".into(), usage.cached_input_tokens.into());
            turn.insert("reasoningTokens".into(), usage.reasoning_tokens.into());
            if let Some(model) = model {
                turn.insert("model".into(), model.clone().into());
            }
            if let Some(cost) = cost {
                turn.insert(
                    "cost".into(),
                    json!({"amount": cost.amount, "currency": cost.currency}),
                );
            }
            let mut meta = serde_json::Map::new();
            meta.insert("pincer".into(), json!({ "turn": turn }));
            let update = acp::UsageUpdate::new(context.used, context.size)
                .cost(
                    session_cost
                        .as_ref()
                        .map(|c| acp::Cost::new(c.amount, c.currency.clone())),
                )
                .meta(meta);
            vec![acp::SessionUpdate::UsageUpdate(update)]
        }
        // Shown to the person in the reply's place; the model never sees it.
        Event::Notice { message } => vec![acp::SessionUpdate::AgentMessageChunk(text_chunk(
            &format!("[pincer] {message}\n\n"),
        ))],
        Event::UserMessage { .. }
        | Event::State { .. }
        | Event::ModelTurn { .. }
        | Event::ApprovalRequested { .. }
        | Event::ApprovalDecided { .. }
        | Event::Usage { context: None, .. } => Vec::new(),
    }
}

pub fn tool_kind(kind: ToolKind) -> acp::ToolKind {
    match kind {
        ToolKind::Read => acp::ToolKind::Read,
        ToolKind::Edit => acp::ToolKind::Edit,
        ToolKind::Delete => acp::ToolKind::Delete,
        ToolKind::Move => acp::ToolKind::Move,
        ToolKind::Search => acp::ToolKind::Search,
        ToolKind::Execute => acp::ToolKind::Execute,
        ToolKind::Fetch => acp::ToolKind::Fetch,
        ToolKind::Think => acp::ToolKind::Think,
        ToolKind::Other => acp::ToolKind::Other,
    }
}

pub fn tool_locations(paths: &[PathBuf]) -> Vec<acp::ToolCallLocation> {
    paths
        .iter()
        .map(|path| acp::ToolCallLocation::new(path.clone()))
        .collect()
}

pub fn diff_content(diff: &FileDiff) -> acp::ToolCallContent {
    acp::ToolCallContent::Diff(
        acp::Diff::new(diff.path.clone(), diff.new_text.clone()).old_text(diff.old_text.clone()),
    )
}

fn tool_result_update(
    id: &str,
    output: &str,
    is_error: bool,
    diffs: &[FileDiff],
) -> acp::SessionUpdate {
    let status = if is_error {
        acp::ToolCallStatus::Failed
    } else {
        acp::ToolCallStatus::Completed
    };
    let mut content: Vec<acp::ToolCallContent> = diffs.iter().map(diff_content).collect();
    content.push(acp::ToolCallContent::Content(acp::Content::new(
        acp::ContentBlock::Text(acp::TextContent::new(output.to_owned())),
    )));
    acp::SessionUpdate::ToolCallUpdate(acp::ToolCallUpdate::new(
        id.to_owned(),
        acp::ToolCallUpdateFields::new()
            .status(status)
            .content(content),
    ))
}

/// The `session/request_permission` params for an approval.
pub fn permission_request(session: &str, event: &Event) -> Option<acp::RequestPermissionRequest> {
    let Event::ApprovalRequested {
        approval_id: _,
        call_id,
        tool: _,
        kind,
        title,
        reason: _,
        arguments,
        locations,
        command: _,
        diffs,
    } = event
    else {
        return None;
    };
    let mut fields = acp::ToolCallUpdateFields::new()
        .kind(tool_kind(*kind))
        .status(acp::ToolCallStatus::Pending)
        .title(title.clone())
        .locations(tool_locations(locations))
        .raw_input(arguments.clone());
    if !diffs.is_empty() {
        fields = fields.content(diffs.iter().map(diff_content).collect::<Vec<_>>());
    }
    let options = ApprovalDecision::OPTIONS
        .iter()
        .map(|decision| {
            let (name, kind) = match decision {
                ApprovalDecision::AllowOnce => ("Allow once", acp::PermissionOptionKind::AllowOnce),
                ApprovalDecision::AllowAlways => (
                    "Always allow in this session",
                    acp::PermissionOptionKind::AllowAlways,
                ),
                ApprovalDecision::RejectOnce => ("Reject", acp::PermissionOptionKind::RejectOnce),
                ApprovalDecision::RejectAlways
                | ApprovalDecision::TimedOut
                | ApprovalDecision::Cancelled => (
                    "Always reject in this session",
                    acp::PermissionOptionKind::RejectAlways,
                ),
            };
            acp::PermissionOption::new(decision.as_str(), name, kind)
        })
        .collect();
    Some(acp::RequestPermissionRequest::new(
        session.to_owned(),
        acp::ToolCallUpdate::new(call_id.clone(), fields),
        options,
    ))
}

/// The updates that replay a session's history to a client, in order.
/// `kind_of` names the kind of a tool by its name (`other` for tools gone since).
pub fn history_updates(
    history: &[HistoryEntry],
    kind_of: impl Fn(&str) -> ToolKind,
) -> Vec<acp::SessionUpdate> {
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
                            .kind(tool_kind(kind_of(&call.name)))
                            .status(acp::ToolCallStatus::Pending)
                            .raw_input(call.arguments.clone()),
                    ));
                }
            }
            Message::Tool {
                call_id,
                content,
                is_error,
            } => updates.push(tool_result_update(call_id, content, *is_error, &[])),
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
            "cachedInputTokens": run.usage.cached_input_tokens,
            "reasoningTokens": run.usage.reasoning_tokens,
        },
        "cost": run.cost.as_ref().map(|c| json!({"amount": c.amount, "currency": c.currency})),
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
