//! The workspace's own hooks and the person's trust in them, and the
//! session lifecycle hooks.

use super::*;

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

    /// Tells the person, once a session, that the workspace brings hooks
    /// which wait for their trust.
    pub(super) async fn tell_untrusted(
        &self,
        live: &LiveSession,
        session: &Session,
        emitter: &mut Emitter,
    ) {
        let Some(found) = self
            .inner
            .gate
            .hooks
            .workspace_hooks(&session.workspace)
            .await
        else {
            return;
        };
        let message = trust_notice(&found);
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

    /// Trusts the hooks the session's workspace brings (`/trust`): from now
    /// on they run in every session under its project directory. The answer
    /// lists them.
    pub async fn trust_hooks(&self, id: &SessionId) -> Result<String, RuntimeError> {
        let session = self.session(id).await?;
        let Some(found) = self
            .inner
            .gate
            .hooks
            .workspace_hooks(&session.workspace)
            .await
        else {
            return Ok(
                "This workspace brings no hooks Pincer reads (see `[hooks] import` in docs/hooks.md)."
                    .to_owned(),
            );
        };
        if !found.trusted {
            // The files as they are now, which is what the answer lists.
            self.inner
                .journal
                .commit(Write::Trust(crate::core::hooks::TrustWrite::Set {
                    root: found.root.clone(),
                    trusted: true,
                    at: now_millis(),
                    files: found.files.clone(),
                }))
                .await?;
        }
        let mut text = format!(
            "{} {}: its hooks run from now on, as long as their files stay as they are now.",
            if found.trusted {
                "Already trusted:"
            } else {
                "Trusted"
            },
            found.root.display()
        );
        for change in &found.changed {
            text.push_str(&format!("\n- since last trusted: {change}"));
        }
        for hook in &found.hooks {
            text.push_str(&format!("\n- {hook}"));
        }
        for left in &found.left_out {
            text.push_str(&format!("\n- left out: {left}"));
        }
        text.push_str(&format!(
            "\n`pincer trust --revoke {}` takes it back.",
            found.root.display()
        ));
        Ok(text)
    }
}
