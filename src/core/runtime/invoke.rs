//! A person's `/NAME` in a prompt (`docs/skills.md`): a skill made active
//! for the run, or a custom command's prompt in place of what was typed,
//! worked out once here so every face that runs prompts gets it.

use super::*;
use crate::core::skills::{ActivatedBy, Command, Expansion};

/// What a prompt that named a skill or command comes to.
pub(super) struct Invocation {
    /// The user message the model reads: as typed for a skill, the
    /// command's prompt for a command.
    pub(super) content: Vec<ContentPart>,
    /// The skill a person activated: its name, its `SKILL.md` and the note
    /// holding its instructions (through the safety pass).
    pub(super) skill: Option<(String, PathBuf, String)>,
    /// The command run, for its `allowed-tools`.
    pub(super) command: Option<Command>,
    /// The session as the run sees it: the command's `model`, when it names
    /// one (the session's own setting does not change).
    pub(super) session: Option<Session>,
}

impl Invocation {
    /// Keeps what the invocation adds after the user message: the skill's
    /// instructions as a note (so it stays active, and compaction keeps
    /// it) and its activation on the tape.
    pub(super) fn record(&self, session: &SessionId, run: &RunId, emitter: &mut Emitter, at: i64) {
        let Some((name, location, note)) = &self.skill else {
            return;
        };
        emitter.submit(Write::AppendMessage {
            session_id: session.clone(),
            run_id: Some(run.clone()),
            message: Message::Note { text: note.clone() },
            at,
        });
        emitter.emit(Event::SkillActivated {
            name: name.clone(),
            location: location.clone(),
            by: ActivatedBy::Person,
        });
    }
}

impl Runtime {
    /// What `content` asks for when it starts with the `/NAME` of one of
    /// the session's skills or commands (`core::skills::resolve`): `None`
    /// for a prompt that goes as typed; the run's end, with the reason,
    /// for one that cannot run (an unknown `/skill NAME`, a name only an
    /// untrusted project has, a command's model that is not configured).
    /// A subagent's task is the model's words, not a person's: it is sent
    /// as written (so the model cannot reach a person's skill or a
    /// command's pre-approvals through a subagent).
    pub(super) async fn invocation(
        &self,
        live: &LiveSession,
        session: &Session,
        content: &[ContentPart],
    ) -> Result<Option<Invocation>, RunOutcome> {
        if live.child.lock().is_some() {
            return Ok(None);
        }
        let Some(ContentPart::Text { text }) = content.first() else {
            return Ok(None);
        };
        if !text.trim_start().starts_with('/') {
            return Ok(None);
        }
        let (set, held_back) = self.skill_sets(&session.workspace).await;
        match crate::core::skills::resolve(&set, held_back.as_deref(), text) {
            Expansion::Typed => Ok(None),
            Expansion::Refused(message) => Err(RunOutcome::Failed(message)),
            Expansion::Skill(skill) => {
                let port = self.inner.skills.clone();
                let wanted = skill.clone();
                let read = tokio::task::spawn_blocking(move || port.instructions(&wanted))
                    .await
                    .unwrap_or_else(|err| Err(err.to_string()));
                let body = read.map_err(|err| {
                    RunOutcome::Failed(format!("cannot load the skill `{}`: {err}", skill.name))
                })?;
                let note = format!(
                    "The person activated the skill `{}` with /{}; its instructions:\n\n{}",
                    skill.name,
                    skill.name,
                    self.inner.gate.safety.check(&body).text
                );
                Ok(Some(Invocation {
                    content: content.to_vec(),
                    skill: Some((skill.name.clone(), skill.location.clone(), note)),
                    command: None,
                    session: None,
                }))
            }
            Expansion::Command { command, text } => {
                let session = match &command.model {
                    None => None,
                    Some(model) => Some(self.command_session(session, command, model)?),
                };
                let mut content = content.to_vec();
                content[0] = ContentPart::Text { text };
                Ok(Some(Invocation {
                    content,
                    skill: None,
                    command: Some(command.clone()),
                    session,
                }))
            }
        }
    }

    /// `session` with the model a command's `model` names, which must be a
    /// configured one.
    fn command_session(
        &self,
        session: &Session,
        command: &Command,
        model: &str,
    ) -> Result<Session, RunOutcome> {
        let Some(choice) = self.providers().find(model) else {
            return Err(RunOutcome::Failed(format!(
                "the command /{} asks for the model `{}`, which is not configured; the models are: {}",
                command.name,
                quote(model),
                self.model_choices()
            )));
        };
        let mut session = session.clone();
        if session.provider != choice.provider {
            // Another provider's reasoning efforts differ: its default.
            session.thought_level = None;
        }
        session.provider = choice.provider;
        session.model = choice.model;
        Ok(session)
    }
}
