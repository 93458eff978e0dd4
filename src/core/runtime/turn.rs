//! What a turn is made with: the system prompt and memory recall, the
//! conversation from its last compaction point, the tools' context, the
//! budgets' spending, and the prompt hooks before a run.

use super::*;

impl Runtime {
    /// Counts tokens for `provider`'s `model`, calibrated by what this
    /// runtime's runs were told.
    pub(super) fn counter(&self, provider: &str, model: &str) -> crate::core::tokens::Counter {
        crate::core::tokens::Counter::new(provider, model, self.inner.calibration.clone())
    }

    /// Memory as the faces manage it for a person (checked, through the
    /// safety pass), when a store was set.
    pub fn memory(&self) -> Option<Keeper> {
        self.inner
            .memory
            .as_ref()
            .map(|store| Keeper::new(store.clone(), self.inner.gate.safety.clone()))
    }

    /// What `provider` has cost today (UTC), when a daily budget is set for
    /// it: the sum in the budgets' currency.
    pub(super) async fn spent_today(&self, provider: &str) -> Option<Cost> {
        let budgets = &self.inner.config.loop_config.budgets;
        if !budgets.daily.contains_key(provider) {
            return None;
        }
        let midnight = jiff::Timestamp::from_millisecond(self.now())
            .unwrap_or_else(|_| jiff::Timestamp::now())
            .to_zoned(jiff::tz::TimeZone::UTC)
            .start_of_day()
            .map(|start| start.timestamp().as_millisecond())
            .unwrap_or(0);
        match self.inner.journal.spent(provider, midnight).await {
            Ok(sums) => sums.into_iter().find(|c| c.currency == budgets.currency),
            Err(err) => {
                tracing::warn!(provider, error = %err, "cannot read today's spending");
                None
            }
        }
    }

    /// The answer to `/memory ARGUMENT` in a session (`core::memory::command`).
    pub async fn memory_command(
        &self,
        id: &SessionId,
        argument: Option<&str>,
        default_scope: crate::core::memory::Scope,
    ) -> Result<String, RuntimeError> {
        let Some(keeper) = self.memory() else {
            return Ok("Memory is turned off ([memory] enabled = false).".to_owned());
        };
        let keys = self.memory_keys(id).await?;
        Ok(crate::core::memory::command(&keeper, &keys, id, argument, default_scope).await)
    }

    /// Where a session's memory items go and which it sees.
    pub async fn memory_keys(&self, id: &SessionId) -> Result<ScopeKeys, RuntimeError> {
        let session = self.session(id).await?;
        let root = self.repository_root(&session.workspace).await;
        Ok(scope_keys(&session, Some(&root)))
    }

    /// Where items of a workspace go outside any session (the conversation
    /// key is empty: no conversation's items are seen).
    pub async fn workspace_keys(&self, workspace: &std::path::Path) -> ScopeKeys {
        ScopeKeys {
            workspace: self
                .repository_root(workspace)
                .await
                .to_string_lossy()
                .into_owned(),
            conversation: String::new(),
        }
    }

    /// The repository holding `workspace`, or `workspace` itself.
    pub(super) async fn repository_root(&self, workspace: &std::path::Path) -> PathBuf {
        let Some(probe) = self.inner.environment.clone() else {
            return workspace.to_path_buf();
        };
        let dir = workspace.to_path_buf();
        tokio::task::spawn_blocking(move || probe.repository_root(&dir).unwrap_or(dir))
            .await
            .unwrap_or_else(|_| workspace.to_path_buf())
    }

    /// Makes the session's first prompt its title, if it has none: the
    /// title, stored, to announce.
    pub(super) fn title_from(
        &self,
        live: &LiveSession,
        content: &[ContentPart],
        now: crate::core::session::Millis,
    ) -> Option<String> {
        let title = {
            let mut session = live.session.lock();
            session.updated_at = now;
            if session.title.is_some() {
                return None;
            }
            // A prompt is kept as typed, but the title shown in every list
            // is Pincer's own text: a secret in it is redacted.
            session.title =
                title_from_prompt(content, |line| self.inner.gate.safety.redact(line).0);
            session.title.clone()?
        };
        self.inner.journal.submit(Write::SetTitle {
            id: live.session.lock().id.clone(),
            title: title.clone(),
        });
        Some(title)
    }

    /// Runs the `UserPromptSubmit` hooks: the note to keep after the prompt
    /// (their context, through the safety pass), or how the run ends when a
    /// hook blocked the prompt.
    pub(super) async fn prompt_hooks(
        &self,
        session: &Session,
        queued: &QueuedRun,
        emitter: &mut Emitter,
    ) -> Result<Option<String>, RunOutcome> {
        let hooks = &self.inner.gate.hooks;
        if !hooks.listens(HookEvent::UserPromptSubmit, None) {
            return Ok(None);
        }
        let prompt: Vec<&str> = queued
            .content
            .iter()
            .filter_map(|part| {
                if let ContentPart::Text { text } = part {
                    Some(text.as_str())
                } else {
                    None
                }
            })
            .collect();
        let input = HookInput::new(
            HookEvent::UserPromptSubmit,
            session.id.as_str(),
            session.workspace.clone(),
            session.mode.as_str(),
        )
        .with("prompt", prompt.join("\n"));
        let outcome = tokio::select! {
            biased;
            _ = queued.cancel.cancelled() => return Err(RunOutcome::Cancelled),
            outcome = hooks.fire(input) => outcome,
        };
        let safety = &self.inner.gate.safety;
        for message in outcome.messages() {
            emitter.emit(Event::Notice {
                message: safety.redact(&message).0,
            });
        }
        if let Some(reason) = outcome.blocked().or_else(|| outcome.stopped()) {
            emitter.emit(Event::Notice {
                message: format!("A hook blocked the prompt: {}", safety.redact(&reason).0),
            });
            return Err(RunOutcome::Completed(StopReason::Blocked));
        }
        Ok(outcome.context().map(|context| {
            format!(
                "context a UserPromptSubmit hook added: {}",
                safety.check(&context).text
            )
        }))
    }

    /// What the next model turn of a session would be sent, with the tokens
    /// each part is estimated at: the system prompt, the tool definitions,
    /// and the conversation from its last compaction point on, fitted into
    /// the model's window (the messages as the history keeps them, which is
    /// after the safety pass).
    pub async fn context(&self, id: &SessionId) -> Result<ContextView, RuntimeError> {
        let session = self.session(id).await?;
        let messages = self.conversation(id).await?;
        let mut tools: Vec<crate::core::provider::ToolSpec> = self
            .inner
            .gate
            .tools
            .specs()
            .iter()
            .map(|spec| crate::core::provider::ToolSpec::clone(spec))
            .collect();
        if let Some(extra) = self
            .live(id)
            .and_then(|live| live.session_tools.lock().clone())
        {
            tools.extend(extra.tools().await.tools.iter().map(|tool| tool.spec()));
        }
        let skills = self.run_skills(&session, &messages, None).await;
        // The catalogue first: what it leaves out, the tool does not offer.
        let prompt = self.run_prompt(&session, skills.as_deref()).await;
        let offered = skills.as_deref().filter(|skills| skills.any_offered());
        let tools: Vec<crate::core::provider::ToolSpec> = tools
            .into_iter()
            .filter_map(|spec| {
                if spec.name != crate::core::skills::SKILL_TOOL {
                    return Some(spec);
                }
                offered.map(|skills| crate::core::gate::skill_spec(&spec, skills))
            })
            .collect();
        let system = prompt.render(&messages).await;
        let recalled = match &prompt.memory {
            Some(memory) => memory.block(&messages, false).await,
            None => None,
        };
        let config = &self.inner.config.loop_config;
        let window = self.window(&session.provider, &session.model).await;
        let counter = self.counter(&session.provider, &session.model);
        counter.ready().await;
        let system_tokens = counter.text(&system);
        let tool_tokens = counter.tools(&tools);
        let budget = window
            .tokens
            .saturating_sub(config.reserve_in(window.tokens))
            .saturating_sub(system_tokens)
            .saturating_sub(tool_tokens)
            .saturating_sub(recalled.as_ref().map_or(0, |block| counter.text(block)));
        let mut messages = messages;
        let fitted = context::fit(&mut messages, budget, &counter);
        if let Some(block) = recalled {
            crate::core::prompt::insert_recall(&mut messages, block);
        }
        let message_tokens: Vec<usize> = messages.iter().map(|m| counter.message(m)).collect();
        Ok(ContextView {
            provider: session.provider,
            model: session.model,
            window: window.tokens,
            window_from: window.origin.to_string(),
            system,
            system_tokens,
            tools,
            tool_tokens,
            message_tokens,
            messages,
            shortened: fitted.shortened,
            dropped: fitted.dropped,
            counted_by: counter.encoding().map_or("bytes", |e| e.as_str()),
            calibration: counter.ratio(),
            skills: offered.map_or(0, |skills| skills.offered().count()),
            skills_shortened: prompt.skills.shortened.clone(),
            skills_omitted: prompt.skills.omitted.clone(),
        })
    }

    /// The context window of `model` served by `provider`: the configured
    /// one, else the one the provider's server states (asked once per process
    /// and server, `models::WindowSource`), else the assumed one.
    pub async fn window(&self, provider: &str, model: &str) -> Window {
        let configured = self.inner.config.loop_config.configured_window(model);
        let source = self.providers().window_source(provider);
        Window::resolve(configured, source.as_deref(), model).await
    }

    /// The session's conversation as the model is sent it: from its last
    /// compaction point on, read from the journal as far back as that point
    /// and no further (what came before stays on disk until a face asks for
    /// the whole history).
    pub(super) async fn conversation(&self, id: &SessionId) -> Result<Vec<Message>, RuntimeError> {
        self.inner.journal.flush().await?;
        let entries = self.inner.journal.since_compaction(id).await?;
        Ok(context::since_compaction(
            entries.into_iter().map(|entry| entry.message).collect(),
        ))
    }

    /// [`Runtime::conversation`] for a run: a failure to read it fails the run.
    pub(super) async fn model_history(&self, id: &SessionId) -> Result<Vec<Message>, RunOutcome> {
        self.conversation(id)
            .await
            .map_err(|err| RunOutcome::Failed(format!("cannot read the session history: {err}")))
    }

    /// What a run's tools work with: the session's workspace and boundary, its
    /// files (through the client when it offers), the run's cancellation.
    pub(super) fn tool_context(
        &self,
        live: &LiveSession,
        session: &Session,
        queued: &QueuedRun,
    ) -> ToolContext {
        let boundary = self
            .inner
            .config
            .paths
            .boundary(&session.workspace, &self.extra_roots(session));
        ToolContext {
            session_id: session.id.clone(),
            workspace: boundary.workspace().to_path_buf(),
            boundary: Arc::new(boundary),
            files: Files::new(session.id.clone(), live.client_files.lock().clone())
                .cancelled_by(queued.cancel.clone()),
            cancel: queued.cancel.clone(),
            progress: Progress::none(),
            terminal: live.client_terminal.lock().clone(),
            memory: None,
            call_id: None,
            run_id: Some(queued.id.clone()),
            skills: None,
        }
    }

    /// A session's extra roots: the configured ones, then those its client
    /// added (`additionalDirectories`), each once.
    pub(super) fn extra_roots(&self, session: &Session) -> Vec<PathBuf> {
        let mut roots = self.inner.config.paths.extra_roots.clone();
        if let Some(live) = self.live(&session.id) {
            for root in live.extra_roots.lock().iter() {
                if !roots.contains(root) {
                    roots.push(root.clone());
                }
            }
        }
        roots
    }

    /// The system prompt of a run of `session`: the environment as the probe
    /// finds it now (off the async threads: it may run `git`).
    pub(super) async fn run_prompt(
        &self,
        session: &Session,
        skills: Option<&crate::core::skills::RunSkills>,
    ) -> RunPrompt {
        let extra_roots = self.extra_roots(session);
        let boundary = Arc::new(
            self.inner
                .config
                .paths
                .boundary(&session.workspace, &extra_roots),
        );
        let probe = self.inner.environment.clone();
        let environment = match probe.clone() {
            Some(probe) => {
                let workspace = session.workspace.clone();
                tokio::task::spawn_blocking(move || probe.environment(&workspace))
                    .await
                    .unwrap_or_else(|err| {
                        tracing::warn!(error = %err, "cannot read the environment");
                        Environment::default()
                    })
            }
            None => Environment::default(),
        };
        let keys = scope_keys(
            session,
            environment.git.as_ref().map(|git| git.root.as_path()),
        );
        let memory = self.inner.memory.as_ref().map(|store| {
            Recall::new(
                store.clone(),
                keys,
                self.inner.config.loop_config.memory.clone(),
            )
            .with_clock(self.inner.clock.clone())
        });
        RunPrompt {
            settings: prompt_settings(&self.inner.config.loop_config.prompt, &session.prompt),
            workspace: session.workspace.clone(),
            extra_roots,
            environment,
            origin: session.origin,
            mode: session.mode,
            probe,
            boundary,
            memory,
            skills: match skills {
                Some(skills) => self.catalogue(session, skills).await,
                None => crate::core::skills::Catalogue::default(),
            },
        }
    }

    /// The skills a session sees now (the project's once it is trusted),
    /// with those its conversation (`messages`) holds active; `None` when it
    /// has none.
    /// `command`: the custom command the run is, whose `allowed-tools`
    /// pre-approve.
    pub(super) async fn run_skills(
        &self,
        session: &Session,
        messages: &[Message],
        command: Option<&crate::core::skills::Command>,
    ) -> Option<Arc<crate::core::skills::RunSkills>> {
        let trusted = self.workspace_trusted(&session.workspace).await;
        let set = self.skill_set(&session.workspace, trusted).await;
        if set.skills.is_empty() && command.is_none_or(|c| c.allowed_tools.is_empty()) {
            return None;
        }
        let boundary = self
            .inner
            .config
            .paths
            .boundary(&session.workspace, &self.extra_roots(session));
        let active = crate::core::skills::active_in(messages, &set, |raw| {
            boundary.resolve_unchecked(&session.workspace, raw)
        });
        let mut skills = crate::core::skills::RunSkills::new(set, active);
        if let Some(command) = command.filter(|c| !c.allowed_tools.is_empty()) {
            skills = skills.with_command(&command.name, command.allowed_tools.clone());
        }
        Some(Arc::new(skills))
    }

    /// Whether the project directory of `workspace` is trusted (`pincer
    /// trust`); an unreadable trust table is no trust.
    pub(super) async fn workspace_trusted(&self, workspace: &std::path::Path) -> bool {
        crate::core::journal::project_trusted(self.inner.journal.as_ref(), workspace).await
    }

    /// The skills and commands of `workspace` (the project's when
    /// `trusted`), off the async threads.
    pub(super) async fn skill_set(
        &self,
        workspace: &std::path::Path,
        trusted: bool,
    ) -> Arc<crate::core::skills::SkillSet> {
        let port = self.inner.skills.clone();
        let workspace = workspace.to_path_buf();
        tokio::task::spawn_blocking(move || port.for_workspace(&workspace, trusted))
            .await
            .unwrap_or_else(|err| {
                tracing::warn!(error = %err, "cannot look for skills");
                Arc::default()
            })
    }

    /// The skills and custom commands a person can type as `/NAME` in a
    /// session (`core::skills::invocable`): its workspace's, the project's
    /// once it is trusted.
    pub async fn invocable(
        &self,
        id: &SessionId,
    ) -> Result<Vec<crate::core::skills::Invocable>, RuntimeError> {
        let session = self.session(id).await?;
        Ok(self.invocable_in(&session.workspace).await)
    }

    /// The skills and commands a session in `workspace` sees, and, while
    /// its project is not trusted, the set it would see once it is (so a
    /// name only the project has is refused with the way to trust it).
    pub(super) async fn skill_sets(
        &self,
        workspace: &std::path::Path,
    ) -> (
        Arc<crate::core::skills::SkillSet>,
        Option<Arc<crate::core::skills::SkillSet>>,
    ) {
        if self.workspace_trusted(workspace).await {
            (self.skill_set(workspace, true).await, None)
        } else {
            let held_back = self.skill_set(workspace, true).await;
            (self.skill_set(workspace, false).await, Some(held_back))
        }
    }

    /// The skills' catalogue of a run of `session`, within the configured
    /// budget as its model's tokens are counted, the least recently used
    /// shortened first.
    async fn catalogue(
        &self,
        session: &Session,
        skills: &crate::core::skills::RunSkills,
    ) -> crate::core::skills::Catalogue {
        if !skills.any_offered() {
            return crate::core::skills::Catalogue::default();
        }
        let last_used = match self.inner.journal.skills_last_used().await {
            Ok(list) => list.into_iter().collect(),
            Err(err) => {
                tracing::warn!(error = %err, "cannot read when skills were last used");
                std::collections::HashMap::new()
            }
        };
        let counter = self.counter(&session.provider, &session.model);
        counter.ready().await;
        let catalogue = crate::core::skills::catalogue(
            &skills.set,
            &last_used,
            self.inner.config.loop_config.catalogue_tokens,
            |text| counter.text(text),
        );
        if !catalogue.flagged.is_empty() {
            tracing::warn!(session = %session.id, skills = ?catalogue.flagged, "skill descriptions look like a prompt injection; the catalogue marks them as data");
        }
        // What the list leaves out, the `skill` tool does not offer either.
        skills.leave_out(catalogue.omitted.clone());
        catalogue
    }

    /// Everything a run that calls the model needs; fails the run when the
    /// session's provider is missing.
    pub(super) async fn run_context<'a>(
        &self,
        live: &LiveSession,
        session: &Session,
        queued: &QueuedRun,
        emitter: &'a mut Emitter,
        history: Vec<Message>,
        command: Option<&crate::core::skills::Command>,
    ) -> Result<RunContext<'a>, RunOutcome> {
        let session_cost = match self
            .inner
            .journal
            .session_cost(&session.id, &queued.id)
            .await
        {
            Ok(cost) => cost,
            Err(err) => {
                tracing::warn!(session = %session.id, error = %err, "cannot read the session's earlier costs");
                None
            }
        };
        let provider = if session.provider.is_empty() {
            None
        } else {
            self.providers().get(&session.provider)
        };
        let Some(provider) = provider else {
            return Err(RunOutcome::Failed(no_provider_message(&session.provider)));
        };
        let spent_today = self.spent_today(&session.provider).await;
        let tokens = self.counter(&session.provider, &session.model);
        tokens.ready().await;
        let window = self.window(&session.provider, &session.model).await;
        let session_tools = live.session_tools.lock().clone();
        let secrets = session_tools
            .as_ref()
            .map(|tools| tools.secrets())
            .unwrap_or_default();
        let skills = self.run_skills(session, &history, command).await;
        let prompt = self.run_prompt(session, skills.as_deref()).await;
        let safety = self.inner.gate.safety.with_secrets(&secrets, "session");
        let mut ctx = self.tool_context(live, session, queued);
        if let Some(skills) = &skills {
            // The skills' folders are readable: their resources and scripts.
            ctx.boundary = Arc::new(
                ctx.boundary
                    .as_ref()
                    .clone()
                    .with_readable(&skills.folders()),
            );
        }
        ctx.skills = skills;
        ctx.memory = prompt.memory.as_ref().map(|recall| MemoryAccess {
            keeper: Keeper::new(recall.store.clone(), safety.clone()),
            keys: recall.keys.clone(),
            session: session.id.clone(),
            run: Some(queued.id.clone()),
        });
        let child = live.child.lock().clone();
        let only = child.as_ref().map(|child| {
            let list = child.tools.clone();
            Arc::new(move |name: &str| {
                name != crate::core::subagent::TOOL
                    && list.as_ref().is_none_or(|l| l.iter().any(|n| n == name))
            }) as crate::core::gate::ToolFilter
        });
        let mut calls = CallEnv {
            gate: self.inner.gate.clone(),
            tools: crate::core::tool::Toolset::default(),
            only,
            delegated: Arc::default(),
            budget_left: Arc::default(),
            answerers: child
                .as_ref()
                .map(|c| vec![c.parent.session.clone()])
                .unwrap_or_default(),
            subagents: child.is_none().then(|| {
                Arc::new(subagents::RuntimeSubagents {
                    runtime: self.clone(),
                }) as Arc<dyn crate::core::subagent::Subagents>
            }),
            mode: session.mode,
            safety,
            ctx,
            grants: live.grants.clone(),
            approvals: self.inner.approvals.clone(),
            questions: self.inner.questions.clone(),
            guard: Arc::new(LoopGuard::new(self.inner.config.loop_config.loop_guard)),
            ended: Arc::default(),
        };
        calls.tools = calls.restrict(self.inner.gate.tools.clone());
        Ok(RunContext {
            provider,
            model: session.model.clone(),
            thought_level: self
                .providers()
                .thought(&session.provider)
                .effective(session.thought_level.as_deref()),
            history,
            cancel: queued.cancel.clone(),
            emitter,
            calls,
            session_cost,
            spent_today,
            prompt,
            session_tools,
            tokens,
            window: window.tokens,
            steering: None,
            max_turns: child.as_ref().map(|c| c.max_turns),
            // A subagent's run may spend what its parent had left; its
            // session is new, so only the run's and the day's limits hold.
            budgets: child.as_ref().map(|c| {
                let configured = &self.inner.config.loop_config.budgets;
                crate::core::budget::Budgets {
                    run: match (configured.run, c.budget_left) {
                        (Some(run), Some(left)) => Some(run.min(left)),
                        (run, left) => run.or(left),
                    },
                    session: None,
                    ..configured.clone()
                }
            }),
            subagent: child.map(|c| crate::core::turn::SubagentOf {
                parent_session: c.parent.session,
                label: c.label,
            }),
        })
    }
}
