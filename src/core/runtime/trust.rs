//! The workspace's own hooks and the person's trust in them, and the
//! session lifecycle hooks.

use super::*;
use crate::core::skills::HeldBack;

impl Runtime {
    /// Runs the `SessionStart` or `SessionEnd` hooks of a session (the
    /// subject, `source` or `reason`, is what their matchers test). A
    /// `SessionStart` hook's context joins the conversation as a note the
    /// model reads; neither can block.
    pub(super) async fn session_hooks(
        &self,
        event: HookEvent,
        session: &Session,
        field: &str,
        subject: &str,
    ) {
        let hooks = &self.inner.gate.hooks;
        // A subagent's session is part of its parent's.
        if session.parent.is_some() || !hooks.listens(event, Some(subject)) {
            return;
        }
        let input = HookInput::new(
            event,
            session.id.as_str(),
            session.workspace.clone(),
            session.mode.as_str(),
        )
        .about(field, subject);
        let outcome = hooks.fire(input).await;
        for message in outcome.messages() {
            tracing::info!(session = %session.id, event = event.as_str(), "{}", self.inner.gate.safety.redact(&message).0);
        }
        if event == HookEvent::SessionStart
            && let Some(context) = outcome.context()
        {
            self.inner.journal.submit(Write::AppendMessage {
                session_id: session.id.clone(),
                run_id: None,
                message: Message::Note {
                    text: format!(
                        "context a SessionStart hook added: {}",
                        self.inner.gate.safety.check(&context).text
                    ),
                },
                at: now_millis(),
            });
        }
    }

    /// What the project of `workspace` brings once trusted (its skills
    /// and custom commands), whether it is trusted yet or not.
    async fn project_brings(&self, workspace: &Path) -> HeldBack {
        HeldBack::of(&*self.skill_set(workspace, true).await)
    }

    /// Tells the person, once a session, that the workspace brings hooks
    /// or skills which wait for their trust.
    pub(super) async fn tell_untrusted(
        &self,
        live: &LiveSession,
        session: &Session,
        emitter: &mut Emitter,
    ) {
        let hooks = self
            .inner
            .gate
            .hooks
            .workspace_hooks(&session.workspace)
            .await
            .and_then(|found| trust_notice(&found));
        let skills = if self.workspace_trusted(&session.workspace).await {
            None
        } else {
            let root = crate::core::hooks::project_dir(&session.workspace);
            self.project_brings(&session.workspace).await.notice(&root)
        };
        let message = match (hooks, skills) {
            (Some(hooks), Some(skills)) => Some(format!("{hooks}\n{skills}")),
            (hooks, skills) => hooks.or(skills),
        };
        let mut told = live.told_trust.lock();
        if *told == message {
            return;
        }
        told.clone_from(&message);
        drop(told);
        if let Some(message) = message {
            emitter.emit(Event::Notice { message });
        }
    }

    /// Trusts the project directory of the session's workspace (`/trust`):
    /// from now on its hooks run and its skills are offered in every
    /// session under it. The answer lists them.
    pub async fn trust_hooks(&self, id: &SessionId) -> Result<String, RuntimeError> {
        let session = self.session(id).await?;
        let found = self
            .inner
            .gate
            .hooks
            .workspace_hooks(&session.workspace)
            .await;
        let skills = self.project_brings(&session.workspace).await;
        let root = crate::core::hooks::project_dir(&session.workspace);
        let trusted = match &found {
            Some(found) => found.trusted,
            None => self.workspace_trusted(&session.workspace).await,
        };
        if found.is_none() && skills.is_empty() {
            return Ok(
                "This workspace brings no hooks Pincer reads (see `[hooks] import` in docs/hooks.md), no skills and no custom commands."
                    .to_owned(),
            );
        }
        if !trusted {
            // The hook files as they are now, which is what the answer lists.
            self.inner
                .journal
                .commit(Write::Trust(crate::core::hooks::TrustWrite::Set {
                    root: root.clone(),
                    trusted: true,
                    at: now_millis(),
                    files: found.as_ref().map(|f| f.files.clone()).unwrap_or_default(),
                }))
                .await?;
        }
        Ok(trusted_answer(&root, trusted, found.as_ref(), &skills))
    }
}

/// The answer to `/trust`: what the project's hook files and skill folders
/// bring, now that it is trusted (`already`: it was before).
fn trusted_answer(
    root: &Path,
    already: bool,
    found: Option<&crate::core::hooks::WorkspaceHooks>,
    skills: &HeldBack,
) -> String {
    let what = match (found.is_some(), skills.is_empty()) {
        (true, true) => "its hooks run from now on, as long as their files stay as they are now",
        (true, false) => {
            "its hooks run from now on, as long as their files stay as they are now, and its skills and custom commands are offered"
        }
        (false, _) => "its skills and custom commands are offered from now on",
    };
    let mut text = format!(
        "{} {}: {what}.",
        if already {
            "Already trusted:"
        } else {
            "Trusted"
        },
        root.display()
    );
    if let Some(found) = found {
        for change in &found.changed {
            text.push_str(&format!("\n- since last trusted: {change}"));
        }
        for hook in &found.hooks {
            text.push_str(&format!("\n- {hook}"));
        }
        for left in &found.left_out {
            text.push_str(&format!("\n- left out: {left}"));
        }
    }
    if let Some(skills) = skills.describe() {
        text.push_str(&format!("\n- {skills}"));
    }
    text.push_str(&format!(
        "\n`pincer trust --revoke {}` takes it back.",
        root.display()
    ));
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_answer_to_trust_names_the_hooks_and_the_skills() {
        let skills = HeldBack {
            skills: vec!["pdf".into(), "review".into()],
            commands: Vec::new(),
        };
        assert_eq!(
            trusted_answer(Path::new("/p"), false, None, &skills),
            "Trusted /p: its skills and custom commands are offered from now on.\n\
             - 2 skills (pdf, review)\n\
             `pincer trust --revoke /p` takes it back."
        );
        let found = crate::core::hooks::WorkspaceHooks {
            root: PathBuf::from("/p"),
            trusted: true,
            hooks: vec!["a.json: PreToolUse echo".into()],
            left_out: Vec::new(),
            changed: Vec::new(),
            files: Vec::new(),
        };
        assert_eq!(
            trusted_answer(Path::new("/p"), true, Some(&found), &HeldBack::default()),
            "Already trusted: /p: its hooks run from now on, as long as their files stay as \
             they are now.\n- a.json: PreToolUse echo\n`pincer trust --revoke /p` takes it back."
        );
        assert!(
            trusted_answer(Path::new("/p"), false, Some(&found), &skills).starts_with(
                "Trusted /p: its hooks run from now on, as long as their files stay as they are \
                 now, and its skills and custom commands are offered.\n- a.json: PreToolUse echo\n\
                 - 2 skills (pdf, review)\n"
            )
        );
    }
}
