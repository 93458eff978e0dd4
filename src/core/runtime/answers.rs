//! What a slash command the face answers comes to (`core::slash`): worked
//! out here once, for every face to word.

use std::path::Path;

use super::{Runtime, RuntimeError};
use crate::core::ids::SessionId;
use crate::core::memory::Scope;
use crate::core::provider::ModelChoice;
use crate::core::session::Mode;
use crate::core::skills::Invocable;
use crate::core::slash::{Answer, FaceCommand, RUNS_SHOWN};

impl Runtime {
    /// The skills and custom commands a person can type as `/NAME` in
    /// `workspace` (the project's once it is trusted): for a face that has
    /// no session yet.
    pub async fn invocable_in(&self, workspace: &Path) -> Vec<Invocable> {
        let trusted = self.workspace_trusted(workspace).await;
        crate::core::skills::invocable(&*self.skill_set(workspace, trusted).await)
    }

    /// Whether `text`, a prompt in `workspace`, is one the runtime expands
    /// or refuses rather than sends as typed: `/NAME` of a skill or custom
    /// command (an untrusted project's included: its run says to trust the
    /// project), or `/skill`. For the faces that answer other `/` words
    /// themselves.
    pub async fn invokes(&self, workspace: &Path, text: &str) -> bool {
        let (set, held_back) = self.skill_sets(workspace).await;
        !matches!(
            crate::core::skills::resolve(&set, held_back.as_deref(), text),
            crate::core::skills::Expansion::Typed
        )
    }

    /// Answers `command` in a session: `/mode NAME` and `/model NAME`
    /// switch it, `/memory` and `/trust` do what they say.
    pub async fn answer(
        &self,
        id: &SessionId,
        command: FaceCommand,
    ) -> Result<Answer, RuntimeError> {
        Ok(match command {
            FaceCommand::Help => Answer::Help(self.invocable(id).await?),
            FaceCommand::Mode(None) => Answer::Mode(self.session(id).await?.mode),
            FaceCommand::Mode(Some(value)) => match Mode::parse(&value) {
                Some(mode) => Answer::ModeSet(self.set_mode(id, mode).await?),
                None => Answer::NotAMode(value),
            },
            FaceCommand::Model(None) => {
                let current = self.session(id).await?;
                Answer::Model {
                    current: format!("{}/{}", current.provider, current.model),
                    choices: self
                        .providers()
                        .choices()
                        .iter()
                        .map(ModelChoice::id)
                        .collect(),
                }
            }
            FaceCommand::Model(Some(value)) => match self.set_model(id, &value).await {
                Ok(updated) => Answer::ModelSet(updated),
                Err(RuntimeError::UnknownModel(model, available)) => {
                    Answer::NotAModel { model, available }
                }
                Err(err) => return Err(err),
            },
            FaceCommand::Memory(argument) => Answer::Text(
                self.memory_command(id, argument.as_deref(), Scope::Workspace)
                    .await?,
            ),
            FaceCommand::Trust => Answer::Text(self.trust_hooks(id).await?),
            FaceCommand::Runs => {
                let runs = self.runs(id).await?;
                Answer::Runs {
                    total: runs.len(),
                    newest: runs.into_iter().rev().take(RUNS_SHOWN).collect(),
                }
            }
        })
    }
}
