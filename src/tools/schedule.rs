//! `schedule`: the model adds, lists and removes schedules
//! (`core::schedule`, `docs/schedules.md`), so "every weekday at nine, tell
//! me what broke overnight" becomes a schedule. A schedule runs prompts
//! later, unattended, so under `supervised` each call is asked about.

use std::sync::Arc;

use schemars::JsonSchema;
use serde::Deserialize;

use crate::core::journal::{JournalError, Schedules, Write};
use crate::core::schedule::{Definition, Delivery, Place, ScheduleWrite, local_time};
use crate::core::session::now_millis;
use crate::core::tool::{Plan, ToolContext, ToolError, ToolKind, ToolOutput, TypedTool};

/// The longest prompt, in characters.
const MAX_PROMPT: usize = 16_384;

pub struct ScheduleTool {
    store: Arc<dyn Schedules>,
    /// The chat channels a reply can be delivered through.
    channels: Vec<String>,
}

impl ScheduleTool {
    pub fn new(store: Arc<dyn Schedules>, channels: Vec<String>) -> Self {
        Self { store, channels }
    }
}

#[derive(Debug, Clone, Copy, Deserialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum Action {
    Add,
    List,
    Remove,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Args {
    /// `add` a schedule, `list` them, or `remove` one by `id`.
    action: Action,
    /// For `add`: a five-field cron expression (minute hour day-of-month
    /// month day-of-week), e.g. `0 9 * * MON-FRI`. Give this or `at`.
    #[serde(default)]
    cron: Option<String>,
    /// For `add`: once, at this local time (`2026-12-01T09:00`) or instant
    /// (`2026-12-01T08:00:00Z`).
    #[serde(default)]
    at: Option<String>,
    /// For `add`: the IANA time zone of the times (`Europe/Berlin`);
    /// default the machine's.
    #[serde(default)]
    tz: Option<String>,
    /// For `add`: what to ask at each time.
    #[serde(default)]
    #[schemars(length(max = MAX_PROMPT))]
    prompt: Option<String>,
    /// For `add`: send each reply to a chat, as `CHANNEL:TARGET`.
    #[serde(default)]
    deliver: Option<String>,
    /// For `add`: start a new session each time (in this workspace) instead
    /// of continuing this conversation.
    #[serde(default)]
    new_session: bool,
    /// For `remove`: the schedule's id. For `add`: an id to give it.
    #[serde(default)]
    id: Option<String>,
}

impl ScheduleTool {
    fn delivery(&self, args: &Args) -> Result<Option<Delivery>, ToolError> {
        let Some(text) = &args.deliver else {
            return Ok(None);
        };
        let delivery = Delivery::parse(text).ok_or_else(|| {
            ToolError::InvalidArguments("`deliver`: expected CHANNEL:TARGET".to_owned())
        })?;
        if !self.channels.contains(&delivery.channel) {
            return Err(ToolError::InvalidArguments(if self.channels.is_empty() {
                "`deliver`: no chat channel is configured".to_owned()
            } else {
                format!(
                    "`deliver`: no channel {:?}; the channels are {}",
                    delivery.channel.chars().take(40).collect::<String>(),
                    self.channels.join(", ")
                )
            }));
        }
        Ok(Some(delivery))
    }

    fn definition(args: &Args) -> Definition {
        Definition {
            cron: args.cron.clone(),
            at: args.at.clone(),
            tz: args.tz.clone(),
            prompt: args.prompt.clone().unwrap_or_default(),
            catch_up: None,
            id: args.id.clone(),
        }
    }

    fn place(args: &Args, ctx: &ToolContext) -> Place {
        if args.new_session {
            Place::Workspace(ctx.workspace.clone())
        } else {
            Place::Session(ctx.session_id.clone())
        }
    }
}

impl TypedTool for ScheduleTool {
    type Args = Args;
    const NAME: &'static str = "schedule";
    const KIND: ToolKind = ToolKind::Other;

    fn description(&self) -> String {
        "Adds, lists or removes schedules: a prompt Pincer runs later on its own, at times a \
         cron expression names in a time zone, or once at a given time; the reply can be sent \
         to a chat. Use it only when asked to do something at a time or regularly. A scheduled \
         run continues this conversation unless `new_session` is set."
            .to_owned()
    }

    async fn plan(&self, args: &Args, ctx: &ToolContext) -> Result<Plan, ToolError> {
        let title = match args.action {
            Action::List => "List the schedules".to_owned(),
            Action::Remove => {
                let id = args.id.as_deref().ok_or_else(|| {
                    ToolError::InvalidArguments("`id`: which schedule to remove".to_owned())
                })?;
                format!(
                    "Remove schedule {}",
                    id.chars().take(64).collect::<String>()
                )
            }
            Action::Add => {
                let deliver = self.delivery(args)?;
                Self::definition(args)
                    .build(Self::place(args, ctx), deliver, "model", now_millis())
                    .map_err(|err| ToolError::InvalidArguments(field_error(&err)))
                    .map(|s| {
                        format!(
                            "Schedule {:?} {}{}",
                            s.prompt.chars().take(60).collect::<String>(),
                            s.describe_when(),
                            s.deliver
                                .as_ref()
                                .map(|d| format!(", reply to {d}"))
                                .unwrap_or_default()
                        )
                    })?
            }
        };
        Ok(Plan {
            title,
            ..Plan::default()
        })
    }

    async fn execute(
        &self,
        args: &Args,
        _plan: &Plan,
        ctx: &ToolContext,
    ) -> Result<ToolOutput, ToolError> {
        match args.action {
            Action::List => {
                let schedules = self
                    .store
                    .schedules()
                    .await
                    .map_err(|err| ToolError::Failed(err.to_string()))?;
                if schedules.is_empty() {
                    return Ok(ToolOutput::text("No schedules.".to_owned()));
                }
                let now = now_millis();
                let lines: Vec<String> = schedules
                    .iter()
                    .map(|s| {
                        let next = s
                            .next_after(now)
                            .ok()
                            .flatten()
                            .map_or_else(|| "never".to_owned(), |n| local_time(n, &s.tz));
                        format!(
                            "{}: {} (next {next}){}: {}",
                            s.id,
                            s.describe_when(),
                            s.deliver
                                .as_ref()
                                .map(|d| format!(" → {d}"))
                                .unwrap_or_default(),
                            s.prompt.chars().take(200).collect::<String>()
                        )
                    })
                    .collect();
                Ok(ToolOutput::text(lines.join("\n")))
            }
            Action::Remove => {
                let id = args.id.clone().unwrap_or_default();
                match self
                    .store
                    .commit(Write::Schedule(ScheduleWrite::Remove { id: id.clone() }))
                    .await
                {
                    Ok(()) => Ok(ToolOutput::text(format!("Removed schedule {id}."))),
                    Err(JournalError::Conflict(reason)) => {
                        Err(ToolError::InvalidArguments(format!("`id`: {reason}")))
                    }
                    Err(err) => Err(ToolError::Failed(err.to_string())),
                }
            }
            Action::Add => {
                let deliver = self.delivery(args)?;
                let schedule = Self::definition(args)
                    .build(
                        Self::place(args, ctx),
                        deliver,
                        &format!("session {}", ctx.session_id),
                        now_millis(),
                    )
                    .map_err(|err| ToolError::InvalidArguments(field_error(&err)))?;
                match self
                    .store
                    .commit(Write::Schedule(ScheduleWrite::Put(schedule.clone())))
                    .await
                {
                    Ok(()) => {}
                    Err(JournalError::Conflict(reason)) => {
                        return Err(ToolError::InvalidArguments(format!("`id`: {reason}")));
                    }
                    Err(err) => return Err(ToolError::Failed(err.to_string())),
                }
                let next = schedule
                    .next_after(now_millis())
                    .ok()
                    .flatten()
                    .map_or_else(|| "never".to_owned(), |n| local_time(n, &schedule.tz));
                Ok(ToolOutput::text(format!(
                    "Added schedule {}: {}, next at {next}. It fires while a `pincer serve` process runs; `pincer schedule list` shows it.",
                    schedule.id,
                    schedule.describe_when()
                )))
            }
        }
    }
}

/// `tz: …` as `` `tz`: … ``.
fn field_error(err: &str) -> String {
    match err.split_once(": ") {
        Some((field, rest)) if !field.contains(' ') => format!("`{field}`: {rest}"),
        _ => err.to_owned(),
    }
}
