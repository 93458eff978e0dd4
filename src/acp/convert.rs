//! Conversions between ACP wire types and core types. Only the ACP face knows
//! both sides.

use agent_client_protocol_schema::v1 as acp;
use serde_json::{Value, json};

use std::path::PathBuf;

use crate::core::approval::ApprovalDecision;
use crate::core::event::{CompactionStatus, Event, StopReason};
use crate::core::provider::Providers;
use crate::core::run::RunInfo;
use crate::core::runtime::DEFAULT_THOUGHT_LEVEL;
use crate::core::session::{
    ContentPart, HistoryEntry, Message, Millis, Mode, Session, check_image, decoded_len,
};
use crate::core::tool::{FileDiff, PlanEntry, PlanPriority, PlanStatus, ToolKind};

/// The config option id of the model selector.
pub const MODEL_OPTION: &str = "model";
/// The config option id of the autonomy mode selector.
pub const MODE_OPTION: &str = "mode";
/// The id of the thought level option (the provider's reasoning effort).
pub const THOUGHT_OPTION: &str = "thought_level";

/// Converts prompt content; content Pincer did not advertise is refused by
/// name, and images are checked (type, base64, size) here so the client hears
/// which block is wrong. Whether the session's model takes images is the
/// runtime's call.
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
                // An image embedded as a blob is an image; other binary
                // content has no form a model reads, so it is refused rather
                // than dropped or summarized behind the user's back.
                acp::EmbeddedResourceResource::BlobResourceContents(blob) => {
                    match blob.mime_type {
                        Some(mime_type) if mime_type.starts_with("image/") => {
                            image_part(index, mime_type, blob.blob, Some(blob.uri))
                        }
                        mime_type => Err(format!(
                            "prompt[{index}]: binary embedded resource {} ({}) is not supported; only images (image/png, image/jpeg, image/gif, image/webp) may be embedded as blobs: embed text or send a resource_link",
                            blob.uri,
                            mime_type.as_deref().unwrap_or("no mimeType")
                        )),
                    }
                }
                _ => Err(format!("prompt[{index}]: unsupported embedded resource")),
            },
            acp::ContentBlock::Image(image) => {
                image_part(index, image.mime_type, image.data, image.uri)
            }
            acp::ContentBlock::Audio(_) => Err(format!(
                "prompt[{index}]: audio content is not supported (promptCapabilities.audio is false)"
            )),
            _ => Err(format!("prompt[{index}]: unsupported content block")),
        })
        .collect()
}

fn image_part(
    index: usize,
    mime_type: String,
    data: String,
    uri: Option<String>,
) -> Result<ContentPart, String> {
    check_image(&mime_type, &data).map_err(|err| format!("prompt[{index}]: {err}"))?;
    Ok(ContentPart::Image {
        mime_type,
        data,
        uri,
    })
}

/// Images up to this size (decoded) are replayed as images by `session/load`
/// and to other clients; bigger ones as a line of text naming the image, so a
/// long session with many screenshots does not replay megabytes per image.
pub const REPLAY_IMAGE_BYTES: usize = 1024 * 1024;

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
        ContentPart::Image {
            mime_type,
            data,
            uri,
        } => {
            if decoded_len(data) <= REPLAY_IMAGE_BYTES {
                acp::ContentBlock::Image(
                    acp::ImageContent::new(data.clone(), mime_type.clone()).uri(uri.clone()),
                )
            } else {
                acp::ContentBlock::Text(acp::TextContent::new(format!(
                    "[{}; too large to replay]",
                    part.image_summary().unwrap_or_default()
                )))
            }
        }
    }
}

fn text_chunk(text: &str) -> acp::ContentChunk {
    acp::ContentChunk::new(text_block(text))
}

fn text_block(text: &str) -> acp::ContentBlock {
    acp::ContentBlock::Text(acp::TextContent::new(text.to_owned()))
}

/// A `session/update` as JSON, with every `tool_call`'s `status` written
/// out: the schema crate leaves `pending`, the default, off the wire, and a
/// client that reads a missing status as "in progress" would show a call
/// running before anyone approved it.
pub fn notification_json(notification: &acp::SessionNotification) -> serde_json::Result<Value> {
    let mut value = serde_json::to_value(notification)?;
    if let Some(update) = value.get_mut("update").and_then(Value::as_object_mut)
        && update.get("sessionUpdate").and_then(Value::as_str) == Some("tool_call")
        && !update.contains_key("status")
    {
        update.insert("status".into(), Value::from("pending"));
    }
    Ok(value)
}

/// Whether an update goes on the wire other than as the schema crate writes
/// it ([`notification_json`]); every other update is serialized directly.
pub fn needs_rewrite(update: &acp::SessionUpdate) -> bool {
    matches!(update, acp::SessionUpdate::ToolCall(_))
}

/// What the client said it can show beyond the base updates
/// (`clientCapabilities.session`): these updates may only go to clients that
/// advertised them.
#[derive(Debug, Clone, Copy, Default)]
pub struct ClientView {
    /// `notice` updates (`session.notices`).
    pub notices: bool,
    /// `compaction_update` and `compaction_summary_chunk` (`session.compaction`).
    pub compaction: bool,
}

impl ClientView {
    pub fn of(capabilities: &acp::ClientCapabilities) -> Self {
        let session = capabilities.session.as_ref();
        ClientView {
            notices: session.is_some_and(|s| s.notices.is_some()),
            compaction: session.is_some_and(|s| s.compaction.is_some()),
        }
    }
}

/// The session update a live event becomes, if any.
pub fn live_update(event: &Event, own_prompt: bool, view: ClientView) -> Vec<acp::SessionUpdate> {
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
            budget,
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
            let mut pincer = json!({ "turn": turn });
            if let Some(budget) = budget {
                pincer["budgetLeft"] = json!(budget);
            }
            meta.insert("pincer".into(), pincer);
            let update = acp::UsageUpdate::new(context.used, context.size)
                .cost(
                    session_cost
                        .as_ref()
                        .map(|c| acp::Cost::new(c.amount, c.currency.clone())),
                )
                .meta(meta);
            vec![acp::SessionUpdate::UsageUpdate(update)]
        }
        Event::Plan { entries } => vec![acp::SessionUpdate::Plan(acp::Plan::new(
            entries.iter().map(plan_entry).collect(),
        ))],
        Event::SessionInfo { title } => vec![acp::SessionUpdate::SessionInfoUpdate(
            acp::SessionInfoUpdate::new().title(title.clone()),
        )],
        // Needs what came before; see `LiveUpdates`.
        Event::ToolProgress { .. } => Vec::new(),
        Event::Notice { message } if view.notices => {
            vec![acp::SessionUpdate::Notice(acp::Notice::new(
                acp::NoticeSeverity::Info,
                message.clone(),
            ))]
        }
        // A client that shows notices is told of a retry; in the reply's
        // place it would stay in the transcript after the wait is over.
        Event::Retrying { .. } if view.notices => event
            .retry_status()
            .map(|status| {
                acp::SessionUpdate::Notice(acp::Notice::new(acp::NoticeSeverity::Info, status))
            })
            .into_iter()
            .collect(),
        Event::Retrying { .. } => Vec::new(),
        // A client that shows notices is told; the tool call's own update
        // (its result) shows it to one that does not.
        Event::SkillActivated { .. } if view.notices => event
            .skill_status()
            .map(|status| {
                acp::SessionUpdate::Notice(acp::Notice::new(acp::NoticeSeverity::Info, status))
            })
            .into_iter()
            .collect(),
        Event::SkillActivated { .. } => Vec::new(),
        // Shown to the person in the reply's place; the model never sees it.
        Event::Notice { message } => vec![acp::SessionUpdate::AgentMessageChunk(text_chunk(
            &format!("[pincer] {message}\n\n"),
        ))],
        Event::Compaction {
            compaction_id,
            status,
            summary,
            error,
            ..
        } if view.compaction => compaction_updates(compaction_id, *status, summary, error),
        Event::UserMessage { .. }
        | Event::State { .. }
        | Event::ModelTurn { .. }
        | Event::ApprovalRequested { .. }
        | Event::ApprovalDecided { .. }
        | Event::QuestionAsked { .. }
        | Event::QuestionAnswered { .. }
        | Event::SubagentStarted { .. }
        | Event::SubagentEnded { .. }
        | Event::Compaction { .. }
        | Event::Usage { context: None, .. } => Vec::new(),
    }
}

/// A compaction's updates: its summary as one chunk before the update that
/// completes it, so a client shows the summary once it is whole.
fn compaction_updates(
    id: &str,
    status: CompactionStatus,
    summary: &Option<String>,
    error: &Option<String>,
) -> Vec<acp::SessionUpdate> {
    let mut updates = Vec::new();
    if let Some(summary) = summary.as_ref().filter(|s| !s.is_empty()) {
        updates.push(acp::SessionUpdate::CompactionSummaryChunk(
            acp::CompactionSummaryChunk::new(id.to_owned(), text_block(summary)),
        ));
    }
    let mut update = acp::CompactionUpdate::new(
        id.to_owned(),
        match status {
            CompactionStatus::InProgress => acp::CompactionStatus::InProgress,
            CompactionStatus::Completed => acp::CompactionStatus::Completed,
            CompactionStatus::Failed => acp::CompactionStatus::Failed,
            CompactionStatus::Cancelled => acp::CompactionStatus::Cancelled,
        },
    );
    if let Some(error) = error {
        update = update.error(error.clone());
    }
    updates.push(acp::SessionUpdate::CompactionUpdate(update));
    updates
}

fn plan_entry(entry: &PlanEntry) -> acp::PlanEntry {
    acp::PlanEntry::new(
        entry.content.clone(),
        match entry.priority {
            PlanPriority::High => acp::PlanEntryPriority::High,
            PlanPriority::Medium => acp::PlanEntryPriority::Medium,
            PlanPriority::Low => acp::PlanEntryPriority::Low,
        },
        match entry.status {
            PlanStatus::Pending => acp::PlanEntryStatus::Pending,
            PlanStatus::InProgress => acp::PlanEntryStatus::InProgress,
            PlanStatus::Completed => acp::PlanEntryStatus::Completed,
        },
    )
}

/// How much of a running call's output an update carries: its tail.
const PROGRESS_TAIL_BYTES: usize = 64 * 1024;

/// A session's live updates, with what they need to remember: a tool call's
/// content is replaced whole by each update, so streamed output is sent as the
/// output so far (its tail), and a call that ran in the client's terminal keeps
/// the terminal embedded when it ends.
#[derive(Default)]
pub struct LiveUpdates {
    calls: std::collections::HashMap<String, CallProgress>,
    view: ClientView,
}

#[derive(Default)]
struct CallProgress {
    output: String,
    terminal: Option<String>,
}

impl LiveUpdates {
    pub fn new(view: ClientView) -> Self {
        LiveUpdates {
            calls: Default::default(),
            view,
        }
    }

    pub fn updates(&mut self, event: &Event, own_prompt: bool) -> Vec<acp::SessionUpdate> {
        if let Event::ToolProgress {
            id,
            output,
            terminal_id,
        } = event
        {
            let call = self.calls.entry(id.clone()).or_default();
            if let Some(terminal) = terminal_id {
                call.terminal = Some(terminal.clone());
            }
            if let Some(more) = output {
                call.output.push_str(more);
                if call.output.len() > PROGRESS_TAIL_BYTES {
                    let mut cut = call.output.len() - PROGRESS_TAIL_BYTES;
                    while !call.output.is_char_boundary(cut) {
                        cut += 1;
                    }
                    call.output.drain(..cut);
                }
            }
            let content = match &call.terminal {
                Some(terminal) => vec![acp::ToolCallContent::Terminal(acp::Terminal::new(
                    terminal.clone(),
                ))],
                None => vec![text_content(&fenced(&call.output))],
            };
            return vec![acp::SessionUpdate::ToolCallUpdate(
                acp::ToolCallUpdate::new(
                    id.clone(),
                    acp::ToolCallUpdateFields::new().content(content),
                ),
            )];
        }
        // A call that ran in the client's terminal keeps it embedded.
        if let Event::ToolResult {
            id,
            output,
            is_error,
            diffs,
            ..
        } = event
            && let Some(CallProgress {
                terminal: Some(terminal),
                ..
            }) = self.calls.remove(id)
        {
            let mut update = tool_result_update(id, output, *is_error, diffs);
            if let acp::SessionUpdate::ToolCallUpdate(call) = &mut update {
                let mut content =
                    vec![acp::ToolCallContent::Terminal(acp::Terminal::new(terminal))];
                content.extend(call.fields.content.take().unwrap_or_default());
                call.fields.content = Some(content);
            }
            return vec![update];
        }
        live_update(event, own_prompt, self.view)
    }
}

/// Command output as a code block (longer fences when the output has some).
fn fenced(output: &str) -> String {
    let mut fence = "```".to_owned();
    while output.contains(&fence) {
        fence.push('`');
    }
    let newline = if output.ends_with('\n') || output.is_empty() {
        ""
    } else {
        "\n"
    };
    format!("{fence}\n{output}{newline}{fence}")
}

fn text_content(text: &str) -> acp::ToolCallContent {
    acp::ToolCallContent::Content(acp::Content::new(acp::ContentBlock::Text(
        acp::TextContent::new(text.to_owned()),
    )))
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
                | ApprovalDecision::Cancelled
                | ApprovalDecision::Unattended => (
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
    view: ClientView,
) -> Vec<acp::SessionUpdate> {
    let mut updates = Vec::new();
    for (index, entry) in history.iter().enumerate() {
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
            // A client that shows compactions gets each summary as one.
            Message::Summary { text, .. } if view.compaction => {
                updates.extend(compaction_updates(
                    &format!("compaction_{}_{index}", entry.at),
                    CompactionStatus::Completed,
                    &Some(text.clone()),
                    &None,
                ));
            }
            // What the person saw when the command ran: the summary, the
            // report of an undo, as the agent's words.
            Message::Summary { text, .. } | Message::Note { text } => {
                updates.push(acp::SessionUpdate::AgentMessageChunk(text_chunk(text)));
            }
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
        // ACP has no budget stop: the limit the agent reached is the
        // nearest, and the notice before it says which.
        StopReason::Budget => acp::StopReason::MaxTurnRequests,
        StopReason::Blocked => acp::StopReason::Refusal,
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
    let thought = providers.thought(&session.provider);
    if !thought.levels.is_empty() {
        let default_name = match &thought.default {
            Some(level) => format!("Default ({level})"),
            None => "Default".to_owned(),
        };
        let mut values = vec![
            acp::SessionConfigSelectOption::new(DEFAULT_THOUGHT_LEVEL, default_name)
                .description("The level the configuration sets, else the model's own".to_owned()),
        ];
        values.extend(thought.levels.iter().map(|level| {
            acp::SessionConfigSelectOption::new(level.clone(), title_case(level))
                .description(format!("Reasoning effort {level:?}"))
        }));
        let current = session
            .thought_level
            .as_deref()
            .filter(|level| thought.levels.iter().any(|l| l == level))
            .unwrap_or(DEFAULT_THOUGHT_LEVEL)
            .to_owned();
        options.push(
            acp::SessionConfigOption::select(THOUGHT_OPTION, "Thought level", current, values)
                .description("How hard the model thinks before it answers".to_owned())
                .category(acp::SessionConfigOptionCategory::ThoughtLevel),
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

/// `low` → `Low`, `x-high` → `X-high`.
fn title_case(word: &str) -> String {
    let mut chars = word.chars();
    match chars.next() {
        Some(first) => first.to_uppercase().chain(chars).collect(),
        None => String::new(),
    }
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
/// One run as a line of text (`/runs`).
pub fn run_line(run: &RunInfo) -> String {
    let mut line = format!(
        "`{}` {} {}",
        run.id,
        timestamp(run.created_at),
        run.state.as_str()
    );
    if let Some(reason) = run.stop_reason {
        line.push_str(&format!(" ({})", reason.as_str()));
    }
    if let Some(error) = &run.error {
        line.push_str(&format!(": {error}"));
    }
    line.push_str(&format!(
        "; {} tokens in, {} out",
        run.usage.input_tokens, run.usage.output_tokens
    ));
    if let Some(cost) = &run.cost {
        line.push_str(&format!(", {cost}"));
    }
    if let (Some(start), Some(end)) = (run.started_at, run.ended_at) {
        line.push_str(&format!(", {:.1} s", (end - start) as f64 / 1000.0));
    }
    line
}

/// A run for the `_pincer/runs` extension: the fields of `views::RunView`
/// (the shape every other face shows), named in ACP's camelCase, with
/// RFC 3339 times and the run's duration.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AcpRun {
    pub run_id: String,
    pub session_id: String,
    pub state: crate::core::event::RunState,
    pub stop_reason: Option<StopReason>,
    pub error: Option<String>,
    pub usage: AcpUsage,
    pub cost: Option<crate::core::usage::Cost>,
    pub created_at: String,
    pub started_at: Option<String>,
    pub ended_at: Option<String>,
    pub duration_ms: Option<Millis>,
}

/// A run's token counts, every one shown.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AcpUsage {
    pub input_tokens: u64,
    pub output_tokens: u64,
    pub cached_input_tokens: u64,
    pub reasoning_tokens: u64,
}

impl From<crate::views::RunView> for AcpRun {
    fn from(run: crate::views::RunView) -> Self {
        let duration_ms = run.duration_ms();
        let crate::views::RunView {
            run_id,
            session_id,
            state,
            stop_reason,
            error,
            usage,
            cost,
            created_at,
            started_at,
            ended_at,
            reply: _,
        } = run;
        AcpRun {
            run_id,
            session_id,
            state,
            stop_reason,
            error,
            usage: AcpUsage {
                input_tokens: usage.input_tokens,
                output_tokens: usage.output_tokens,
                cached_input_tokens: usage.cached_input_tokens,
                reasoning_tokens: usage.reasoning_tokens,
            },
            cost,
            created_at: timestamp(created_at),
            started_at: started_at.map(timestamp),
            ended_at: ended_at.map(timestamp),
            duration_ms,
        }
    }
}

pub fn run_json(run: &RunInfo) -> Value {
    crate::views::json(&AcpRun::from(crate::views::RunView::from(run)))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A retry is a notice to a client that shows notices, and nothing to
    /// one that does not (it would stay in the reply's text).
    #[test]
    fn a_retry_is_a_notice_only_where_notices_show() {
        let retry = Event::Retrying {
            attempt: 2,
            attempts: 3,
            wait_ms: 2000,
            reason: "503 Service Unavailable".into(),
        };
        let shows = ClientView {
            notices: true,
            compaction: false,
        };
        let updates = live_update(&retry, true, shows);
        assert_eq!(updates.len(), 1);
        let json = serde_json::to_value(&updates[0]).unwrap();
        assert_eq!(json["sessionUpdate"], "notice", "{json}");
        assert!(
            json.to_string()
                .contains("retrying in 2 s (503 Service Unavailable), 2 of 3"),
            "{json}"
        );
        assert!(live_update(&retry, true, ClientView::default()).is_empty());
    }

    #[test]
    fn a_tool_call_says_pending_on_the_wire() {
        let call = acp::SessionNotification::new(
            "ses_1",
            acp::SessionUpdate::ToolCall(
                acp::ToolCall::new("c1", "read_file").status(acp::ToolCallStatus::Pending),
            ),
        );
        let value = notification_json(&call).unwrap();
        assert_eq!(value["update"]["status"], "pending");
        // Other statuses, and other updates, are as the schema crate writes them.
        let done = acp::SessionNotification::new(
            "ses_1",
            acp::SessionUpdate::ToolCall(
                acp::ToolCall::new("c1", "read_file").status(acp::ToolCallStatus::Completed),
            ),
        );
        assert_eq!(
            notification_json(&done).unwrap()["update"]["status"],
            "completed"
        );
        let text = acp::SessionNotification::new(
            "ses_1",
            acp::SessionUpdate::AgentMessageChunk(text_chunk("hi")),
        );
        assert_eq!(
            notification_json(&text).unwrap(),
            serde_json::to_value(&text).unwrap()
        );
    }

    /// Updates the face serializes directly are the same bytes the JSON tree
    /// (`notification_json`) gives, and only a tool call is rewritten.
    #[test]
    fn updates_serialized_directly_are_the_bytes_of_the_tree() {
        let texts = [
            "",
            "hi",
            "a \"quoted\" \\ back\nslash\ttab \u{1} \u{7f}",
            "ünïcødé 😀 \u{2028}",
            "</script>",
        ];
        let mut updates = Vec::new();
        for text in texts {
            updates.push(acp::SessionUpdate::AgentMessageChunk(text_chunk(text)));
            updates.push(acp::SessionUpdate::AgentThoughtChunk(text_chunk(text)));
            updates.push(acp::SessionUpdate::UserMessageChunk(text_chunk(text)));
        }
        updates.push(acp::SessionUpdate::ToolCallUpdate(
            acp::ToolCallUpdate::new(
                "c1",
                acp::ToolCallUpdateFields::new()
                    .status(acp::ToolCallStatus::Completed)
                    .content(vec![text_content("out")]),
            ),
        ));
        for update in updates {
            assert!(!needs_rewrite(&update));
            let notification = acp::SessionNotification::new("ses_1", update);
            assert_eq!(
                serde_json::to_vec(&notification).unwrap(),
                serde_json::to_vec(&notification_json(&notification).unwrap()).unwrap()
            );
        }
        assert!(needs_rewrite(&acp::SessionUpdate::ToolCall(
            acp::ToolCall::new("c1", "read_file")
        )));
    }

    fn image_block(mime: &str, data: &str) -> acp::ContentBlock {
        acp::ContentBlock::Image(acp::ImageContent::new(data, mime))
    }

    const PNG_B64: &str = "iVBORw0KGgoAAAANSUhEUg==";

    #[test]
    fn images_are_checked_and_named_by_their_block() {
        let ok = prompt_content(vec![
            acp::ContentBlock::Text(acp::TextContent::new("see")),
            image_block("image/png", PNG_B64),
        ])
        .unwrap();
        assert_eq!(
            ok[1],
            ContentPart::Image {
                mime_type: "image/png".into(),
                data: PNG_B64.into(),
                uri: None
            }
        );
        let bad = |blocks| prompt_content(blocks).unwrap_err();
        let text = acp::ContentBlock::Text(acp::TextContent::new("see"));
        let err = bad(vec![text.clone(), image_block("image/bmp", PNG_B64)]);
        assert!(
            err.starts_with("prompt[1]: image type \"image/bmp\""),
            "{err}"
        );
        let err = bad(vec![text, image_block("image/png", "%%%")]);
        assert!(
            err.starts_with("prompt[1]: image data is not valid base64"),
            "{err}"
        );
    }

    #[test]
    fn blobs_are_images_or_refused() {
        let blob = |mime: &str| {
            acp::ContentBlock::Resource(acp::EmbeddedResource::new(
                acp::EmbeddedResourceResource::BlobResourceContents(
                    acp::BlobResourceContents::new(PNG_B64, "file:///shot.png")
                        .mime_type(mime.to_owned()),
                ),
            ))
        };
        let parts = prompt_content(vec![blob("image/png")]).unwrap();
        assert_eq!(
            parts,
            vec![ContentPart::Image {
                mime_type: "image/png".into(),
                data: PNG_B64.into(),
                uri: Some("file:///shot.png".into())
            }]
        );
        let err = prompt_content(vec![blob("application/pdf")]).unwrap_err();
        assert!(
            err.starts_with("prompt[0]: binary embedded resource file:///shot.png (application/pdf) is not supported"),
            "{err}"
        );
    }

    #[test]
    fn large_images_replay_as_a_line_of_text() {
        let small = ContentPart::Image {
            mime_type: "image/png".into(),
            data: PNG_B64.into(),
            uri: None,
        };
        assert!(matches!(content_block(&small), acp::ContentBlock::Image(_)));
        let large = ContentPart::Image {
            mime_type: "image/png".into(),
            data: "A".repeat(REPLAY_IMAGE_BYTES / 3 * 4 + 8),
            uri: Some("file:///big.png".into()),
        };
        let acp::ContentBlock::Text(text) = content_block(&large) else {
            panic!("a large image should replay as text");
        };
        assert_eq!(
            text.text,
            "[image image/png, 1.0 MiB, file:///big.png; too large to replay]"
        );
    }

    #[test]
    fn timestamps_have_fixed_millisecond_precision() {
        assert_eq!(timestamp(1_795_311_555_070), "2026-11-22T01:39:15.070Z");
        assert_eq!(timestamp(1_795_311_555_000), "2026-11-22T01:39:15.000Z");
    }

    #[test]
    fn a_compacted_history_replays_whole_with_the_summary_as_the_agent_said_it() {
        let entry = |message: Message| HistoryEntry {
            run_id: None,
            message,
            at: 0,
        };
        let user = |text: &str| Message::User {
            content: vec![ContentPart::Text { text: text.into() }],
        };
        let history = vec![
            entry(user("hello")),
            entry(Message::Assistant {
                text: "hi".into(),
                thought: String::new(),
                tool_calls: Vec::new(),
                interrupted: false,
            }),
            entry(user("/compact")),
            entry(Message::Summary {
                text: "the summary".into(),
                turns: 2,
            }),
            entry(user("/undo")),
            entry(Message::Note {
                text: "Reverted 1 file from run run_1: a.txt.".into(),
            }),
        ];
        let updates = history_updates(&history, |_| ToolKind::Other, ClientView::default());
        assert_eq!(
            updates,
            vec![
                acp::SessionUpdate::UserMessageChunk(text_chunk("hello")),
                acp::SessionUpdate::AgentMessageChunk(text_chunk("hi")),
                acp::SessionUpdate::UserMessageChunk(text_chunk("/compact")),
                acp::SessionUpdate::AgentMessageChunk(text_chunk("the summary")),
                acp::SessionUpdate::UserMessageChunk(text_chunk("/undo")),
                acp::SessionUpdate::AgentMessageChunk(text_chunk(
                    "Reverted 1 file from run run_1: a.txt."
                )),
            ]
        );
    }
}
