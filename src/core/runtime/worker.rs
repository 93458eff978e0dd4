//! The run worker: each live session's queue, taken one run at a time, each
//! run played under the session's lease and its end recorded.

use super::*;

impl Runtime {
    pub(super) fn enqueue(
        &self,
        id: &SessionId,
        run_id: RunId,
        content: Vec<ContentPart>,
        kind: RunKind,
    ) -> Result<RunTicket, RuntimeError> {
        let live = self
            .live(id)
            .ok_or_else(|| RuntimeError::SessionNotFound(id.clone()))?;
        if self.inner.shutdown.is_cancelled() {
            return Err(RuntimeError::ShuttingDown);
        }
        let (provider, model) = {
            let session = live.session.lock();
            (session.provider.clone(), session.model.clone())
        };
        self.check_content(&provider, &model, &content)?;
        let now = self.now();
        self.inner.journal.submit(Write::InsertRun {
            id: run_id.clone(),
            session_id: id.clone(),
            at: now,
        });
        self.keep_process_lease();
        // A prompt `UserPromptSubmit` hooks may still block gets its title
        // once they let it through (`run_loop`).
        let hooked = self
            .inner
            .gate
            .hooks
            .listens(HookEvent::UserPromptSubmit, None);
        let set_title = match kind {
            RunKind::Prompt if !hooked => self.title_from(live.as_ref(), &content, now),
            // A command is no title for a conversation.
            RunKind::Prompt | RunKind::Command(_) => {
                live.session.lock().updated_at = now;
                None
            }
        };
        let mut emitter = Emitter::new(&self.inner.journal, &live.events, id, &run_id)
            .with_stats(&self.inner.stats);
        emitter.emit(Event::state(RunState::Queued));
        emitter.emit(Event::UserMessage {
            content: content.clone(),
        });
        if let Some(title) = set_title {
            emitter.emit(Event::SessionInfo { title });
        }
        let cancel = CancellationToken::new();
        live.pending.lock().push((run_id.clone(), cancel.clone()));
        let (done_tx, done_rx) = oneshot::channel();
        let queued = QueuedRun {
            id: run_id.clone(),
            next_seq: emitter.next_seq(),
            kind,
            content,
            cancel,
            done: done_tx,
        };
        if live.queue.send(queued).is_err() {
            return Err(RuntimeError::SessionNotFound(id.clone()));
        }
        Ok(RunTicket {
            run_id,
            done: done_rx,
        })
    }

    pub(super) async fn session_worker(
        self,
        live: Arc<LiveSession>,
        mut rx: mpsc::UnboundedReceiver<QueuedRun>,
    ) {
        loop {
            let queued = tokio::select! {
                biased;
                queued = rx.recv() => queued,
                _ = live.closed.cancelled() => {
                    rx.close();
                    rx.recv().await
                }
            };
            let Some(queued) = queued else { break };
            let id = queued.id.clone();
            // Boxed: a run's state lives on the heap while it works, so an
            // idle session's worker is a few hundred bytes, not the largest
            // state a run passes through (about 7 KiB).
            Box::pin(self.execute(&live, queued)).await;
            live.pending.lock().retain(|(run, _)| run != &id);
        }
    }

    pub(super) async fn execute(&self, live: &LiveSession, queued: QueuedRun) {
        let id = live.session.lock().id.clone();
        let mut emitter = Emitter::resume(
            &self.inner.journal,
            &live.events,
            &id,
            &queued.id,
            queued.next_seq,
        )
        .with_stats(&self.inner.stats);
        let mut held = None;
        let outcome = if queued.cancel.is_cancelled() {
            RunOutcome::Cancelled
        } else {
            match self.hold(&id, &queued.cancel, &mut emitter).await {
                Err(outcome) => outcome,
                Ok(lease) => {
                    held = lease;
                    if held.is_some() {
                        self.refresh(live, &id).await;
                    }
                    let session = live.session.lock().clone();
                    self.run_loop(live, &session, &queued, &mut emitter).await
                }
            }
        };
        // A failure's text may come from an outside party (a provider or a proxy
        // echoing a key, an MCP server): it passes the safety pass before it is
        // stored, logged or shown.
        let outcome = match outcome {
            RunOutcome::Failed(message) => {
                RunOutcome::Failed(self.inner.gate.safety.redact(&message).0)
            }
            kept @ (RunOutcome::Completed(_) | RunOutcome::Cancelled) => kept,
        };
        let outcome = self.finish(&mut emitter, &outcome).await;
        let more = live.pending.lock().iter().any(|(run, _)| run != &queued.id);
        self.let_go(held, more).await;
        let _ = queued.done.send(outcome);
    }

    /// Reads the session's settings again from the journal once its lease
    /// is held: another process may have changed them (a mode, a model)
    /// since this one last ran the session. Only the settings are taken:
    /// this process commits its own setting changes before it answers them
    /// (so the stored ones are current), while other fields (the title, the
    /// time of the last change) may have writes of its own still queued.
    pub(super) async fn refresh(&self, live: &LiveSession, id: &SessionId) {
        match self.inner.journal.session(id).await {
            Ok(Some(fresh)) => {
                let mut session = live.session.lock();
                session.provider = fresh.provider;
                session.model = fresh.model;
                session.thought_level = fresh.thought_level;
                session.mode = fresh.mode;
            }
            Ok(None) => {}
            Err(err) => tracing::warn!(error = %err, "cannot read the session again"),
        }
    }

    pub(super) async fn run_loop(
        &self,
        live: &LiveSession,
        session: &Session,
        queued: &QueuedRun,
        emitter: &mut Emitter,
    ) -> RunOutcome {
        let store = &self.inner.journal;
        let now = now_millis();
        if let Err(err) = emitter.enter(RunState::Running) {
            return RunOutcome::Failed(err.to_string());
        }
        emitter.emit(Event::state(RunState::Running));
        emitter.submit(Write::SetRunState {
            id: queued.id.clone(),
            state: RunState::Running,
            stop_reason: None,
            error: None,
            usage: Usage::default(),
            cost: None,
            at: now,
        });
        match queued.kind {
            RunKind::Prompt => {
                self.tell_untrusted(live, session, emitter).await;
                // A `/NAME` of a skill or command (`invoke`), before the
                // hooks: a refused one is not kept.
                let invocation = match self.invocation(live, session, &queued.content).await {
                    Ok(invocation) => invocation,
                    Err(outcome) => return outcome,
                };
                // `UserPromptSubmit` hooks may block the prompt (it is then
                // not kept) or add context after it.
                let submitted = self.prompt_hooks(session, queued, emitter).await;
                let context = match submitted {
                    Ok(context) => context,
                    Err(outcome) => return outcome,
                };
                if self
                    .inner
                    .gate
                    .hooks
                    .listens(HookEvent::UserPromptSubmit, None)
                    && let Some(title) = self.title_from(live, &queued.content, now)
                {
                    emitter.emit(Event::SessionInfo { title });
                }
                emitter.submit(Write::AppendMessage {
                    session_id: session.id.clone(),
                    run_id: Some(queued.id.clone()),
                    message: Message::User {
                        content: invocation
                            .as_ref()
                            .map_or_else(|| queued.content.clone(), |i| i.content.clone()),
                    },
                    at: now,
                });
                if let Some(invocation) = &invocation {
                    invocation.record(&session.id, &queued.id, emitter, now);
                }
                if let Some(text) = context {
                    emitter.submit(Write::AppendMessage {
                        session_id: session.id.clone(),
                        run_id: Some(queued.id.clone()),
                        message: Message::Note { text },
                        at: now,
                    });
                }
                let history = match self.model_history(&session.id).await {
                    Ok(history) => history,
                    Err(outcome) => return outcome,
                };
                let run_session = invocation
                    .as_ref()
                    .and_then(|i| i.session.as_ref())
                    .unwrap_or(session);
                let command = invocation.as_ref().and_then(|i| i.command.as_ref());
                match self
                    .run_context(live, run_session, queued, emitter, history, command)
                    .await
                {
                    Ok(mut context) => {
                        live.steering.open(queued.id.clone());
                        context.steering = Some(live.steering.clone());
                        let outcome =
                            agent_loop::run(&mut context, &self.inner.config.loop_config).await;
                        // Messages that came as the run stopped otherwise
                        // (cancel, cap, failure) join the conversation: the
                        // next prompt carries them.
                        for content in live.steering.close() {
                            context.emitter.append_message(Message::User { content });
                        }
                        outcome
                    }
                    Err(outcome) => outcome,
                }
            }
            RunKind::Command(SessionCommand::Compact) => {
                let history = match self.model_history(&session.id).await {
                    Ok(history) => history,
                    Err(outcome) => return outcome,
                };
                if !compaction::has_anything_to_compact(&history) {
                    return compaction::nothing_to_compact(emitter, &history);
                }
                match self
                    .run_context(live, session, queued, emitter, history, None)
                    .await
                {
                    Ok(mut context) => {
                        compaction::compact(&mut context, &self.inner.config.loop_config).await
                    }
                    Err(outcome) => outcome,
                }
            }
            RunKind::Command(SessionCommand::Undo) => {
                let tools = self.tool_context(live, session, queued);
                commands::undo(&tools, emitter, store.as_ref()).await
            }
        }
    }

    pub(super) async fn finish(&self, emitter: &mut Emitter, outcome: &RunOutcome) -> RunOutcome {
        emitter.finish(outcome).await
    }
}
