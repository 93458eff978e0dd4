//! Slash commands: advertised with `available_commands_update`, recognized
//! when a prompt is one text block starting with `/NAME` for a known name
//! (`core::slash`, shared with the terminal face). Anything else starting with
//! `/` (a path, say) goes to the model as written.

use agent_client_protocol_schema::v1 as acp;

pub use crate::core::slash::{Answer, COMMANDS, FaceCommand, SlashCommand, parse};

/// The `available_commands_update` every session gets after it opens.
pub fn available() -> acp::SessionUpdate {
    acp::SessionUpdate::AvailableCommandsUpdate(acp::AvailableCommandsUpdate::new(
        COMMANDS
            .iter()
            .map(|(name, description, hint)| {
                acp::AvailableCommand::new(*name, *description).input(hint.map(|hint| {
                    acp::AvailableCommandInput::Unstructured(acp::UnstructuredCommandInput::new(
                        hint,
                    ))
                }))
            })
            .collect(),
    ))
}
