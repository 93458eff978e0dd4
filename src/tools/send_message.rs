//! `send_message`: a message to a person in a chat, through one of the
//! configured channels (`docs/channels.md`, "Sending first"), so a run can
//! tell someone when it is done. The message is a send intent like any
//! reply: the process serving the channel delivers it with the outbox's
//! guarantees. It reaches people, so under `supervised` it is asked about.

use std::sync::Arc;

use schemars::JsonSchema;
use serde::Deserialize;

use crate::core::channel::Courier;
use crate::core::tool::{Plan, ToolContext, ToolError, ToolKind, ToolOutput, TypedTool};

/// The longest message, in characters.
const MAX_TEXT: usize = 16_384;

pub struct SendMessageTool {
    courier: Arc<dyn Courier>,
}

impl SendMessageTool {
    pub fn new(courier: Arc<dyn Courier>) -> Self {
        Self { courier }
    }
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Args {
    /// The channel to send through (its name in the configuration).
    channel: String,
    /// The chat: CHAT or CHAT/THREAD in the platform's ids (a Telegram chat
    /// id, an IRC #channel or nick).
    to: String,
    /// The message, in Markdown.
    #[schemars(length(min = 1, max = MAX_TEXT))]
    text: String,
}

impl SendMessageTool {
    fn check(&self, args: &Args) -> Result<(), ToolError> {
        let channels = self.courier.channels();
        if !channels.iter().any(|c| c == &args.channel) {
            return Err(ToolError::InvalidArguments(format!(
                "`channel`: no channel {:?}; the channels are {}",
                args.channel.chars().take(40).collect::<String>(),
                channels.join(", ")
            )));
        }
        if args.text.trim().is_empty() {
            return Err(ToolError::InvalidArguments("`text` is empty".to_owned()));
        }
        if args.text.chars().count() > MAX_TEXT {
            return Err(ToolError::InvalidArguments(format!(
                "`text` is longer than {MAX_TEXT} characters"
            )));
        }
        if args.to.trim().is_empty() {
            return Err(ToolError::InvalidArguments("`to` is empty".to_owned()));
        }
        Ok(())
    }
}

impl TypedTool for SendMessageTool {
    type Args = Args;
    const NAME: &'static str = "send_message";
    const KIND: ToolKind = ToolKind::Other;

    fn description(&self) -> String {
        format!(
            "Sends a message to a person in a chat through one of Pincer's chat channels \
             ({}), for example to tell them a long task is done. It is delivered by the \
             process serving the channel, with retries; the result is the message's id, \
             not its delivery. Use it only when asked to notify someone.",
            self.courier.channels().join(", ")
        )
    }

    fn configured(&self) -> Vec<(&'static str, serde_json::Value)> {
        vec![(
            "channel",
            serde_json::json!({"enum": self.courier.channels()}),
        )]
    }

    async fn plan(&self, args: &Args, _ctx: &ToolContext) -> Result<Plan, ToolError> {
        self.check(args)?;
        Ok(Plan {
            title: format!(
                "Send a message to {} on {}",
                args.to.chars().take(60).collect::<String>(),
                args.channel
            ),
            ..Plan::default()
        })
    }

    async fn execute(
        &self,
        args: &Args,
        _plan: &Plan,
        _ctx: &ToolContext,
    ) -> Result<ToolOutput, ToolError> {
        let id = self
            .courier
            .send(&args.channel, &args.to, &args.text, None)
            .await
            .map_err(ToolError::Failed)?;
        Ok(ToolOutput::text(format!(
            "Queued {id} for {} on {}: the process serving the channel delivers it (`pincer channels outbox` shows whether it went out).",
            args.to, args.channel
        )))
    }
}
