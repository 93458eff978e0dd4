//! Slash commands: advertised with `available_commands_update`, recognized
//! when a prompt is one text block starting with `/NAME` for a known name
//! (`core::slash`, shared with the terminal face). Anything else starting with
//! `/` (a path, say) goes to the model as written; a skill's or custom
//! command's `/NAME` too, where the runtime expands it.

use agent_client_protocol_schema::v1 as acp;

use crate::core::skills::Invocable;
pub use crate::core::slash::{Answer, COMMANDS, FaceCommand, SlashCommand, parse};

/// The `available_commands_update` a session gets after it opens and after
/// `/trust`: the built-in commands, then the session's skills and custom
/// commands (`/skill NAME` among them while it has a skill).
pub fn available(invocable: &[Invocable]) -> acp::SessionUpdate {
    let built_in = COMMANDS
        .iter()
        .map(|(name, description, hint)| command(name, description, *hint));
    let own = invocable.iter().map(|item| {
        let description = item.description.lines().next().unwrap_or_default();
        command(&item.name, description, item.hint.as_deref())
    });
    let skill = crate::core::slash::skill_command(invocable)
        .map(|(name, description, hint)| command(name, description, Some(hint)));
    acp::SessionUpdate::AvailableCommandsUpdate(acp::AvailableCommandsUpdate::new(
        built_in.chain(own).chain(skill).collect(),
    ))
}

fn command(name: &str, description: &str, hint: Option<&str>) -> acp::AvailableCommand {
    acp::AvailableCommand::new(name, description).input(hint.map(|hint| {
        acp::AvailableCommandInput::Unstructured(acp::UnstructuredCommandInput::new(hint))
    }))
}
