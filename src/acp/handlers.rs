//! The ACP method handlers: `initialize`, sessions (new, load, resume, list, close), prompts and slash commands, modes and config options; and turning an ACP request's MCP servers and a run's outcome into their ACP shapes.

use super::*;

impl Connection {
    pub(super) fn initialize(&self, raw: Option<Box<RawValue>>) -> Result<Value, RpcError> {
        let request: acp::InitializeRequest = params(raw)?;
        tracing::info!(client = ?request.client_info.as_ref().map(|i| quote(&i.name).to_string()), version = ?request.protocol_version, "initialize");
        let fs = &request.client_capabilities.fs;
        *self.files.lock() = (fs.read_text_file || fs.write_text_file).then(|| {
            Arc::new(ClientFs {
                peer: self.peer.clone(),
                read: fs.read_text_file,
                write: fs.write_text_file,
                timeout: self.options.client_timeout,
            })
        });
        *self.elicitation_form.lock() = request
            .client_capabilities
            .elicitation
            .as_ref()
            .is_some_and(|e| e.form.is_some());
        *self.view.lock() = convert::ClientView::of(&request.client_capabilities);
        *self.terminal.lock() = request.client_capabilities.terminal.then(|| {
            Arc::new(ClientTerm {
                peer: self.peer.clone(),
            })
        });
        let mut meta = serde_json::Map::new();
        let mut pincer = json!({ "extensionMethods": EXTENSION_METHODS });
        if let (Value::Object(target), Value::Object(extra)) = (&mut pincer, &self.options.meta) {
            target.extend(extra.clone());
        }
        meta.insert("pincer".into(), pincer);
        meta.insert("steering".into(), json!({"supported": true}));
        let auth_methods = self.auth_methods(&request);
        let mut auth = acp::AgentAuthCapabilities::new();
        if self.options.accounts.is_some() {
            auth = auth.logout(acp::LogoutCapabilities::new());
        }
        let capabilities = acp::AgentCapabilities::new()
            .auth(auth)
            .load_session(true)
            .prompt_capabilities(
                // Capabilities are per connection: images are advertised when
                // the model new sessions get takes them. A session switched to
                // another model is checked at each prompt.
                acp::PromptCapabilities::new()
                    .image(self.runtime.default_model_accepts_images())
                    .audio(false)
                    .embedded_context(true),
            )
            // rmcp has no client for the legacy SSE transport.
            .mcp_capabilities(acp::McpCapabilities::new().http(true).sse(false))
            .session_capabilities(
                acp::SessionCapabilities::new()
                    .list(acp::SessionListCapabilities::new())
                    .resume(acp::SessionResumeCapabilities::new())
                    .close(acp::SessionCloseCapabilities::new())
                    .delete(acp::SessionDeleteCapabilities::new())
                    .fork(acp::SessionForkCapabilities::new())
                    .additional_directories(acp::SessionAdditionalDirectoriesCapabilities::new()),
            )
            .meta(meta);
        let response =
            acp::InitializeResponse::new(agent_client_protocol_schema::ProtocolVersion::V1)
                .agent_capabilities(capabilities)
                .auth_methods(auth_methods)
                .meta(steering_meta())
                .agent_info(
                    acp::Implementation::new("pincer", env!("CARGO_PKG_VERSION"))
                        .title("Pincer".to_owned()),
                );
        to_value(response)
    }

    pub(super) fn workspace(cwd: PathBuf) -> Result<PathBuf, RpcError> {
        if !cwd.is_absolute() {
            return Err(invalid_params(format!(
                "`cwd` must be an absolute path, got {}",
                quoted(&cwd.display().to_string())
            )));
        }
        Ok(cwd)
    }

    /// Answers a request that opens a session, then starts forwarding its events:
    /// no update can overtake the response. Events meanwhile wait in the subscription.
    pub(super) async fn answer_and_attach(
        self: &Arc<Self>,
        id: &Id,
        opened: Result<(Value, SessionId, Subscription), RpcError>,
    ) -> Reply {
        match opened {
            Ok((response, session, subscription)) => {
                // Attached before the response, so a prompt sent the moment the
                // client reads it finds the session; forwarding starts after the
                // response is queued, so no update overtakes it.
                let (start, started) = tokio::sync::oneshot::channel();
                let invocable = self.invocable(&session).await;
                self.attach(session.clone(), subscription, started);
                self.peer.respond(id, Ok(response)).await;
                self.notify_update(&session, commands::available(&invocable))
                    .await;
                // The forwarder starts from what the client was just offered.
                let _ = start.send(invocable);
            }
            Err(err) => {
                self.peer.respond(id, Err(err)).await;
            }
        }
        Reply::Later
    }

    pub(super) fn attach(
        self: &Arc<Self>,
        session: SessionId,
        subscription: Subscription,
        start: tokio::sync::oneshot::Receiver<Vec<Invocable>>,
    ) {
        let files = self
            .files
            .lock()
            .clone()
            .map(|fs| fs as Arc<dyn ClientFiles>);
        self.runtime.set_client_files(&session, files);
        let terminal = self
            .terminal
            .lock()
            .clone()
            .map(|t| t as Arc<dyn ClientTerminal>);
        self.runtime.set_client_terminal(&session, terminal);
        let conn = self.clone();
        let key = session.clone();
        let stop = CancellationToken::new();
        let mut attached = self.attached.lock();
        // A session this client has open already (loaded or resumed again):
        // its forwarder stops after the event it is at, and this one starts
        // once it has, first answering the prompts whose runs ended unseen.
        let previous = attached.remove(&key);
        if let Some(previous) = &previous {
            previous.stop.cancel();
        }
        let forward = self.tasks.spawn({
            let stop = stop.clone();
            async move {
                if let Some(previous) = previous {
                    let _ = previous.forward.await;
                }
                if let Ok(advertised) = start.await {
                    conn.answer_ended(&session).await;
                    conn.forward(session, subscription, stop, advertised).await;
                }
            }
        });
        attached.insert(key, super::Attached { forward, stop });
    }

    pub(super) fn session_response_parts(
        &self,
        session: &Session,
    ) -> (Vec<acp::SessionConfigOption>, acp::SessionModeState) {
        (
            convert::config_options(session, &self.runtime.providers()),
            convert::mode_state(session),
        )
    }

    pub(super) async fn new_session(
        self: &Arc<Self>,
        id: &Id,
        raw: Option<Box<RawValue>>,
    ) -> Reply {
        let result = async {
            let request: acp::NewSessionRequest = params(raw)?;
            let workspace = Self::workspace(request.cwd)?;
            let roots = additional_directories(request.additional_directories)?;
            let (servers, mcp_servers) = mcp_servers(&request.mcp_servers)?;
            let prompt = prompt_settings(request.meta.as_ref())?;
            let session = self
                .runtime
                .create_session(NewSession {
                    workspace,
                    origin: Origin::Editor,
                    mcp_servers,
                    conversation: None,
                    prompt,
                })
                .await
                .map_err(runtime_error)?;
            let (subscription, options, modes) = self.start_new(&session, roots, servers).await?;
            let response = acp::NewSessionResponse::new(session.id.as_str().to_owned())
                .config_options(options)
                .modes(modes);
            Ok((to_value(response)?, session.id, subscription))
        }
        .await;
        self.answer_and_attach(id, result).await
    }

    /// What a session just made (new or forked) gets before it is answered:
    /// its extra roots, the client's MCP servers, a subscription, and the
    /// options and modes of its response.
    async fn start_new(
        &self,
        session: &Session,
        roots: Vec<PathBuf>,
        servers: Vec<crate::mcp::ServerSpec>,
    ) -> Result<
        (
            Subscription,
            Vec<acp::SessionConfigOption>,
            acp::SessionModeState,
        ),
        RpcError,
    > {
        self.runtime
            .set_additional_roots(&session.id, roots)
            .map_err(runtime_error)?;
        if !servers.is_empty() {
            self.start_mcp(session, servers).await;
        }
        let subscription = self.runtime.subscribe(&session.id).map_err(runtime_error)?;
        let (options, modes) = self.session_response_parts(session);
        Ok((subscription, options, modes))
    }

    /// Gives a live session the configured MCP servers plus `servers` (the
    /// client's, which win by name). They start on the session's first turn.
    pub(super) async fn start_mcp(&self, session: &Session, servers: Vec<crate::mcp::ServerSpec>) {
        let Some(factory) = &self.options.mcp else {
            if !servers.is_empty() {
                tracing::warn!(session = %session.id, "MCP servers passed but MCP is not set up; ignoring them");
            }
            return;
        };
        if servers.is_empty() && factory.settings().servers.is_empty() {
            self.runtime.set_session_tools(&session.id, None).await;
            return;
        }
        let tools = factory.session(&session.workspace, servers);
        self.runtime
            .set_session_tools(&session.id, Some(Arc::new(tools)))
            .await;
    }

    /// Opens a stored session for this client, checking the workspace matches.
    pub(super) async fn open(
        &self,
        session_id: &acp::SessionId,
        cwd: PathBuf,
    ) -> Result<(Session, Subscription), RpcError> {
        let cwd = Self::workspace(cwd)?;
        let id = SessionId::from_string(session_id.0.to_string());
        let stored = self.runtime.session(&id).await.map_err(runtime_error)?;
        if !crate::core::runtime::is_workspace(&stored.workspace, &cwd).await {
            return Err(invalid_params(format!(
                "`cwd` {} does not match the session's workspace {}",
                quote(&cwd.display().to_string()),
                stored.workspace.display()
            )));
        }
        let session = self
            .runtime
            .open_session(&id)
            .await
            .map_err(runtime_error)?;
        let subscription = self.runtime.subscribe(&id).map_err(runtime_error)?;
        Ok((session, subscription))
    }

    pub(super) async fn load_session(
        self: &Arc<Self>,
        id: &Id,
        raw: Option<Box<RawValue>>,
        cancel: &CancellationToken,
    ) -> Reply {
        let result = async {
            let request: acp::LoadSessionRequest = params(raw)?;
            let roots = additional_directories(request.additional_directories)?;
            let (servers, _) = mcp_servers(&request.mcp_servers)?;
            let (session, subscription) = self.open(&request.session_id, request.cwd).await?;
            self.runtime
                .set_additional_roots(&session.id, roots)
                .map_err(runtime_error)?;
            self.start_mcp(&session, servers).await;
            let history = self
                .runtime
                .history(&session.id)
                .await
                .map_err(runtime_error)?;
            let tools = &self.runtime.gate().tools;
            let kind_of = |name: &str| {
                tools
                    .get(name)
                    .map_or(crate::core::tool::ToolKind::Other, |tool| tool.kind())
            };
            let view = *self.view.lock();
            for update in convert::history_updates(&history, kind_of, view) {
                if cancel.is_cancelled() {
                    return Err(RpcError::request_cancelled());
                }
                self.notify_update(&session.id, update).await;
            }
            // The context meter and cost as the last turn left them, and the
            // model's task list.
            let usage = self
                .runtime
                .last_usage(&session.id)
                .await
                .map_err(runtime_error)?;
            let plan = self
                .runtime
                .last_plan(&session.id)
                .await
                .map_err(runtime_error)?;
            for update in usage
                .iter()
                .chain(plan.iter())
                .flat_map(|e| convert::live_update(e, true, view))
            {
                self.notify_update(&session.id, update).await;
            }
            let (options, modes) = self.session_response_parts(&session);
            let response = acp::LoadSessionResponse::new()
                .config_options(options)
                .modes(modes);
            Ok((to_value(response)?, session.id, subscription))
        }
        .await;
        self.answer_and_attach(id, result).await
    }

    /// `session/fork` (unstable in ACP, advertised as
    /// `sessionCapabilities.fork`): a new session with the source's
    /// conversation, whole or up to `_meta.pincer.upToPrompt` user messages.
    pub(super) async fn fork_session(
        self: &Arc<Self>,
        id: &Id,
        raw: Option<Box<RawValue>>,
    ) -> Reply {
        let result = async {
            let raw_value: Value = match &raw {
                Some(raw) => serde_json::from_str(raw.get()).unwrap_or(Value::Null),
                None => Value::Null,
            };
            // The newer drafts fork at a cursor the agent announced; Pincer
            // announces none, so any is unknown (and never a whole fork).
            if !raw_value["cursorId"].is_null() {
                return Err(invalid_params(
                    "`cursorId`: Pincer announces no cursors; fork up to a user message with `_meta.pincer.upToPrompt`",
                ));
            }
            let request: acp::ForkSessionRequest = params(raw)?;
            let up_to = match request.meta.as_ref().and_then(|m| m.get("pincer")).map(|p| &p["upToPrompt"]) {
                None | Some(Value::Null) => None,
                Some(value) => Some(value.as_u64().ok_or_else(|| {
                    invalid_params("`_meta.pincer.upToPrompt` must be a whole number of user messages")
                })? as usize),
            };
            let workspace = Self::workspace(request.cwd)?;
            let roots = additional_directories(request.additional_directories)?;
            let (servers, mcp_servers) = mcp_servers(&request.mcp_servers)?;
            let prompt = prompt_settings(request.meta.as_ref())?;
            let source = SessionId::from_string(request.session_id.0.to_string());
            let session = self
                .runtime
                .fork_session(
                    &source,
                    NewSession {
                        workspace,
                        origin: Origin::Editor,
                        mcp_servers,
                        conversation: None,
                        prompt,
                    },
                    up_to,
                )
                .await
                .map_err(runtime_error)?;
            let (subscription, options, modes) =
                self.start_new(&session, roots, servers).await?;
            let response = acp::ForkSessionResponse::new(session.id.as_str().to_owned())
                .config_options(options)
                .modes(modes);
            Ok((to_value(response)?, session.id, subscription))
        }
        .await;
        self.answer_and_attach(id, result).await
    }

    pub(super) async fn resume_session(
        self: &Arc<Self>,
        id: &Id,
        raw: Option<Box<RawValue>>,
    ) -> Reply {
        let result = async {
            let request: acp::ResumeSessionRequest = params(raw)?;
            let roots = additional_directories(request.additional_directories)?;
            let (servers, _) = mcp_servers(&request.mcp_servers)?;
            let (session, subscription) = self.open(&request.session_id, request.cwd).await?;
            self.runtime
                .set_additional_roots(&session.id, roots)
                .map_err(runtime_error)?;
            self.start_mcp(&session, servers).await;
            let (options, modes) = self.session_response_parts(&session);
            let response = acp::ResumeSessionResponse::new()
                .config_options(options)
                .modes(modes);
            Ok((to_value(response)?, session.id, subscription))
        }
        .await;
        self.answer_and_attach(id, result).await
    }

    pub(super) async fn list_sessions(
        &self,
        raw: Option<Box<RawValue>>,
    ) -> Result<Value, RpcError> {
        const PAGE: usize = 50;
        let request: acp::ListSessionsRequest = params(raw)?;
        let workspace = match request.cwd {
            Some(cwd) => Some(Self::workspace(cwd)?),
            None => None,
        };
        let after = match request.cursor.as_deref() {
            None => None,
            Some(cursor) => Some(SessionCursor::parse(cursor).ok_or_else(|| {
                invalid_params(format!(
                    "`cursor` {} is not a cursor this agent issued",
                    quoted(cursor)
                ))
            })?),
        };
        let (sessions, next) = self
            .runtime
            .sessions_page(SessionQuery {
                workspace,
                after,
                limit: PAGE,
                ..SessionQuery::default()
            })
            .await
            .map_err(runtime_error)?;
        let next = next.map(|cursor| cursor.to_string());
        let infos: Vec<acp::SessionInfo> = sessions.iter().map(convert::session_info).collect();
        to_value(acp::ListSessionsResponse::new(infos).next_cursor(next))
    }

    pub(super) async fn close_session(
        &self,
        raw: Option<Box<RawValue>>,
    ) -> Result<Value, RpcError> {
        let request: acp::CloseSessionRequest = params(raw)?;
        let id = SessionId::from_string(request.session_id.0.to_string());
        self.runtime
            .close_session(&id)
            .await
            .map_err(runtime_error)?;
        // The forwarder ends by itself once the session's events are drained.
        self.attached.lock().remove(&id);
        to_value(acp::CloseSessionResponse::new())
    }

    /// `session/delete`: the session leaves every listing; its runs'
    /// summaries and receipts stay (`docs/acp.md`, "Sessions").
    pub(super) async fn delete_session(
        &self,
        raw: Option<Box<RawValue>>,
    ) -> Result<Value, RpcError> {
        let request: acp::DeleteSessionRequest = params(raw)?;
        let id = SessionId::from_string(request.session_id.0.to_string());
        self.runtime
            .delete_session(&id)
            .await
            .map_err(runtime_error)?;
        self.attached.lock().remove(&id);
        to_value(acp::DeleteSessionResponse::new())
    }

    pub(super) fn attached_session(
        &self,
        session_id: &acp::SessionId,
    ) -> Result<SessionId, RpcError> {
        let id = SessionId::from_string(session_id.0.to_string());
        if self.attached.lock().contains_key(&id) {
            Ok(id)
        } else {
            let shown = quote(id.as_str()).to_string();
            let mut error = RpcError::session_not_found(shown.clone());
            error.message = format!(
                "Resource not found: session {shown} (create it with session/new or open it with session/load or session/resume)"
            );
            Err(error)
        }
    }

    pub(super) async fn prompt(
        self: &Arc<Self>,
        id: &Id,
        raw: Option<Box<RawValue>>,
        cancel: &CancellationToken,
    ) -> Reply {
        let started = async {
            let request: acp::PromptRequest = params(raw)?;
            let session = self.attached_session(&request.session_id)?;
            let content = convert::prompt_content(request.prompt)
                .map_err(|message| invalid_params(clip_message(&message)))?;
            if content.is_empty() {
                return Err(invalid_params(
                    "`prompt` must contain at least one content block",
                ));
            }
            // `/compact` and `/undo` are runs of their own; the other commands
            // are answered here without one.
            let queued_command = match commands::parse(&content) {
                Some(SlashCommand::Queued(command)) => Some(command),
                Some(SlashCommand::Answered(command)) => {
                    return Ok(Started::Command(session, command));
                }
                None => None,
            };
            // Nothing can answer yet: the client shows its login.
            if self.runtime.providers().is_empty()
                && self
                    .runtime
                    .session(&session)
                    .await
                    .is_ok_and(|s| s.provider.is_empty())
            {
                return Err(auth::login_required());
            }
            // A prompt while the agent waits for an answer is the answer: the
            // prompt's turn ends here, and the run that asked goes on.
            if queued_command.is_none()
                && let Some(reply) = questions::reply_text(&content)
                && self.runtime.answer_with_reply(&session, &reply)
            {
                return Ok(Started::Answered);
            }
            // Registered before the run exists, so its forwarder always knows the
            // run is this client's own and whom to answer when it ends.
            let run_id = RunId::generate();
            self.prompts
                .lock()
                .insert(run_id.clone(), (id.clone(), session.clone()));
            let started = match queued_command {
                Some(command) => {
                    self.runtime
                        .command_as(&session, run_id.clone(), command)
                        .await
                }
                None => {
                    self.runtime
                        .prompt_as(&session, run_id.clone(), content)
                        .await
                }
            };
            match started {
                // A `$/cancel_request` that came while the run was being queued.
                Ok(_) if cancel.is_cancelled() => {
                    self.runtime.cancel_run(&session, &run_id);
                }
                Ok(_) => {}
                Err(_) => {
                    self.prompts.lock().remove(&run_id);
                }
            }
            started.map(|_| Started::Run).map_err(runtime_error)
        }
        .await;
        match started {
            Ok(Started::Run) => Reply::Later,
            Ok(Started::Command(session, command)) => self.slash_command(&session, command).await,
            Ok(Started::Answered) => {
                Reply::Now(to_value(acp::PromptResponse::new(acp::StopReason::EndTurn)))
            }
            Err(err) => Reply::Now(Err(err)),
        }
    }

    /// Answers a slash command that needs no model: its text as an agent
    /// message, then the prompt's response.
    pub(super) async fn slash_command(
        self: &Arc<Self>,
        session: &SessionId,
        command: FaceCommand,
    ) -> Reply {
        let trusting = command == FaceCommand::Trust;
        let text = match self.command_text(session, command).await {
            Ok(text) => text,
            Err(err) => return Reply::Now(Err(err)),
        };
        // Trusted now: the project's skills and commands join the list.
        if trusting {
            let invocable = self.invocable(session).await;
            self.notify_update(session, commands::available(&invocable))
                .await;
        }
        self.notify_update(
            session,
            acp::SessionUpdate::AgentMessageChunk(acp::ContentChunk::new(acp::ContentBlock::Text(
                acp::TextContent::new(text),
            ))),
        )
        .await;
        Reply::Now(to_value(acp::PromptResponse::new(acp::StopReason::EndTurn)))
    }

    /// The skills and custom commands a session can run by name; none
    /// (logged) when they cannot be looked up.
    pub(super) async fn invocable(&self, session: &SessionId) -> Vec<Invocable> {
        self.runtime.invocable(session).await.unwrap_or_else(|err| {
            tracing::warn!(error = %err, "cannot list the session's skills and commands");
            Vec::new()
        })
    }

    /// Sends one `session/update`; false once the client is gone.
    pub(super) async fn notify_update(
        &self,
        session: &SessionId,
        update: acp::SessionUpdate,
    ) -> bool {
        let notification = acp::SessionNotification::new(session.as_str().to_owned(), update);
        if !convert::needs_rewrite(&notification.update) {
            // Straight to bytes, no JSON tree: every streamed chunk comes this way.
            return self.peer.notify("session/update", &notification).await;
        }
        match convert::notification_json(&notification) {
            Ok(value) => self.peer.notify("session/update", &value).await,
            Err(err) => {
                tracing::error!(error = %err, "cannot serialize a session update");
                true
            }
        }
    }

    /// The answer to a command worked out by the runtime, in Markdown; a
    /// switched mode or model is announced to the client first.
    pub(super) async fn command_text(
        self: &Arc<Self>,
        session: &SessionId,
        command: FaceCommand,
    ) -> Result<String, RpcError> {
        let answer = self
            .runtime
            .answer(session, command)
            .await
            .map_err(runtime_error)?;
        if let Answer::ModeSet(updated) | Answer::ModelSet(updated) = &answer {
            self.announce_settings(updated, matches!(answer, Answer::ModeSet(_)))
                .await;
        }
        Ok(answer.markdown(convert::run_line))
    }

    /// Tells the client the session's mode or model changed on the agent's side.
    pub(super) async fn announce_settings(&self, session: &Session, mode_changed: bool) {
        if mode_changed {
            self.notify_update(
                &session.id,
                acp::SessionUpdate::CurrentModeUpdate(acp::CurrentModeUpdate::new(
                    session.mode.as_str().to_owned(),
                )),
            )
            .await;
        }
        self.notify_update(
            &session.id,
            acp::SessionUpdate::ConfigOptionUpdate(acp::ConfigOptionUpdate::new(
                convert::config_options(session, &self.runtime.providers()),
            )),
        )
        .await;
    }

    pub(super) async fn set_config_option(
        &self,
        raw: Option<Box<RawValue>>,
    ) -> Result<Value, RpcError> {
        let request: acp::SetSessionConfigOptionRequest = params(raw)?;
        let id = self.attached_session(&request.session_id)?;
        let acp::SessionConfigOptionValue::ValueId { value } = &request.value else {
            return Err(invalid_params(format!(
                "`value` of config option {} must be a value id",
                quoted(&request.config_id.0)
            )));
        };
        let value = value.0.to_string();
        let session = match request.config_id.0.as_ref() {
            convert::MODE_OPTION => {
                let mode = Mode::parse(&value).ok_or_else(|| {
                    invalid_params(format!(
                        "`value` {} is not a mode; expected read_only, supervised or full",
                        quoted(&value)
                    ))
                })?;
                self.runtime
                    .set_mode(&id, mode)
                    .await
                    .map_err(runtime_error)?
            }
            convert::MODEL_OPTION => self
                .runtime
                .set_model(&id, &value)
                .await
                .map_err(runtime_error)?,
            convert::THOUGHT_OPTION => self
                .runtime
                .set_thought_level(&id, &value)
                .await
                .map_err(runtime_error)?,
            other => {
                return Err(invalid_params(format!(
                    "`configId` {} is not a config option; expected \"model\", \"thought_level\" or \"mode\"",
                    quoted(other)
                )));
            }
        };
        to_value(acp::SetSessionConfigOptionResponse::new(
            convert::config_options(&session, &self.runtime.providers()),
        ))
    }

    /// `_session/steering` (the extension claude-agent-acp, codex-acp and
    /// JetBrains AIR speak): a message for the prompt that is working, taken
    /// in at its next turn boundary (`injected`). With nothing working it is
    /// sent back (`promptRequired`) when `_meta.steering.idleBehavior` asks
    /// for that, else it starts a turn of its own (`startedNewTurn`).
    pub(super) async fn steer(&self, raw: Option<Box<RawValue>>) -> Result<Value, RpcError> {
        #[derive(serde::Deserialize)]
        #[serde(rename_all = "camelCase")]
        struct Steer {
            session_id: acp::SessionId,
            prompt: Vec<acp::ContentBlock>,
            #[serde(default, rename = "_meta")]
            meta: Option<Value>,
        }
        let request: Steer = params(raw)?;
        let id = self.attached_session(&request.session_id)?;
        let content = convert::prompt_content(request.prompt)
            .map_err(|message| invalid_params(clip_message(&message)))?;
        if content.is_empty() {
            return Err(invalid_params(
                "`prompt` must contain at least one content block",
            ));
        }
        let idle = request
            .meta
            .as_ref()
            .and_then(|m| m.get("steering"))
            .and_then(|s| s.get("idleBehavior"))
            .and_then(Value::as_str)
            .map(str::to_owned);
        match idle.as_deref() {
            None | Some("promptRequired" | "startNewTurn") => {}
            Some(other) => {
                return Err(invalid_params(format!(
                    "unsupported steering idleBehavior {}",
                    quoted(other)
                )));
            }
        }
        if self
            .runtime
            .steer(&id, content.clone())
            .map_err(runtime_error)?
            .is_some()
        {
            return Ok(json!({"outcome": "injected"}));
        }
        if idle.as_deref() == Some("promptRequired") {
            return Ok(json!({"outcome": "promptRequired", "reason": "noRunningTurn"}));
        }
        self.runtime
            .prompt(&id, content)
            .await
            .map_err(runtime_error)?;
        Ok(json!({"outcome": "startedNewTurn"}))
    }

    /// `session/set_model`, removed from ACP v1 but still sent by
    /// CodeCompanion.nvim and several VS Code clients: the model option by
    /// another name. Answers `{}`; the new options follow as a
    /// `config_option_update`.
    pub(super) async fn set_model_alias(
        &self,
        raw: Option<Box<RawValue>>,
    ) -> Result<Value, RpcError> {
        #[derive(serde::Deserialize)]
        #[serde(rename_all = "camelCase")]
        struct SetModel {
            session_id: acp::SessionId,
            model_id: String,
        }
        let request: SetModel = params(raw)?;
        let id = self.attached_session(&request.session_id)?;
        let session = self
            .runtime
            .set_model(&id, &request.model_id)
            .await
            .map_err(runtime_error)?;
        self.announce_settings(&session, false).await;
        Ok(json!({}))
    }

    pub(super) async fn set_mode(&self, raw: Option<Box<RawValue>>) -> Result<Value, RpcError> {
        let request: acp::SetSessionModeRequest = params(raw)?;
        let id = self.attached_session(&request.session_id)?;
        let value = request.mode_id.0.to_string();
        let mode = Mode::parse(&value).ok_or_else(|| {
            invalid_params(format!(
                "`modeId` {} is not a mode; expected read_only, supervised or full",
                quoted(&value)
            ))
        })?;
        self.runtime
            .set_mode(&id, mode)
            .await
            .map_err(runtime_error)?;
        to_value(acp::SetSessionModeResponse::new())
    }
}

/// `additionalDirectories` of a `session/new`, `session/load` or
/// `session/resume`: each an absolute path of an existing directory.
fn additional_directories(dirs: Vec<PathBuf>) -> Result<Vec<PathBuf>, RpcError> {
    for (index, dir) in dirs.iter().enumerate() {
        let shown = || quote(&dir.display().to_string()).to_string();
        if !dir.is_absolute() {
            return Err(invalid_params(format!(
                "`additionalDirectories[{index}]` must be an absolute path, got {}",
                shown()
            )));
        }
        if !dir.is_dir() {
            return Err(invalid_params(format!(
                "`additionalDirectories[{index}]` is not a directory: {}",
                shown()
            )));
        }
    }
    Ok(dirs)
}

/// The MCP servers of a `session/new`, `session/load` or `session/resume`,
/// and their JSON as stored with the session: env and header values redacted.
fn mcp_servers(
    servers: &[acp::McpServer],
) -> Result<(Vec<crate::mcp::ServerSpec>, Value), RpcError> {
    use crate::mcp::{ServerSpec, Transport, sanitize};
    let mut specs = Vec::new();
    let mut stored = Vec::new();
    for (index, server) in servers.iter().enumerate() {
        match server {
            acp::McpServer::Stdio(stdio) => {
                let env: Vec<(String, String)> = stdio
                    .env
                    .iter()
                    .map(|v| (v.name.clone(), v.value.clone()))
                    .collect();
                stored.push(json!({
                    "name": stdio.name,
                    "command": stdio.command,
                    "args": stdio.args,
                    "env": env.iter().map(|(name, _)| json!({"name": name, "value": "[redacted]"})).collect::<Vec<_>>(),
                }));
                specs.push(ServerSpec {
                    name: sanitize(&stdio.name),
                    transport: Transport::Stdio {
                        command: stdio.command.to_string_lossy().into_owned(),
                        args: stdio.args.clone(),
                        env,
                    },
                });
            }
            acp::McpServer::Http(http) => {
                let headers: Vec<(String, String)> = http
                    .headers
                    .iter()
                    .map(|h| (h.name.clone(), h.value.clone()))
                    .collect();
                stored.push(json!({
                    "type": "http",
                    "name": http.name,
                    "url": http.url,
                    "headers": headers.iter().map(|(name, _)| json!({"name": name, "value": "[redacted]"})).collect::<Vec<_>>(),
                }));
                specs.push(ServerSpec {
                    name: sanitize(&http.name),
                    transport: Transport::Http {
                        url: http.url.clone(),
                        headers,
                    },
                });
            }
            acp::McpServer::Sse(sse) => {
                return Err(invalid_params(format!(
                    "`mcpServers[{index}]`: the MCP server {} uses the SSE transport, which Pincer does not support (mcpCapabilities.sse is false); use streamable HTTP (type \"http\")",
                    quoted(&sse.name)
                )));
            }
            #[allow(unreachable_patterns)]
            _ => {
                return Err(invalid_params(format!(
                    "`mcpServers[{index}]`: a transport Pincer does not support; use stdio or http"
                )));
            }
        }
    }
    Ok((specs, Value::Array(stored)))
}

pub(super) fn prompt_result(
    run: &RunId,
    outcome: &RunOutcome,
    usage: Option<&crate::core::usage::Usage>,
) -> Result<Value, RpcError> {
    // The turn's tokens, in the shape of ACP's draft `PromptResponse.usage`
    // (an extra field the stable schema allows).
    let with_usage = |response: acp::PromptResponse| {
        let mut value = to_value(response)?;
        if let (Some(usage), Value::Object(fields)) = (usage, &mut value) {
            let mut shown = json!({
                "totalTokens": usage.input_tokens + usage.output_tokens,
                "inputTokens": usage.input_tokens,
                "outputTokens": usage.output_tokens,
            });
            if usage.reasoning_tokens > 0 {
                shown["thoughtTokens"] = usage.reasoning_tokens.into();
            }
            if usage.cached_input_tokens > 0 {
                shown["cachedReadTokens"] = usage.cached_input_tokens.into();
            }
            fields.insert("usage".into(), shown);
        }
        Ok(value)
    };
    match outcome {
        RunOutcome::Completed(reason) => {
            with_usage(acp::PromptResponse::new(convert::stop_reason(*reason)))
        }
        RunOutcome::Cancelled => with_usage(acp::PromptResponse::new(acp::StopReason::Cancelled)),
        RunOutcome::Failed(message) => {
            let mut error =
                RpcError::internal_error().data(json!({ "runId": run.as_str(), "error": message }));
            error.message = message.clone();
            Err(error)
        }
    }
}

/// A new session's own prompt settings, from `_meta.pincer.systemPrompt`
/// (replaces the configured or built-in prompt) and
/// `_meta.pincer.instructions` (appended after the configured ones).
fn prompt_settings(meta: Option<&acp::Meta>) -> Result<PromptSettings, RpcError> {
    let Some(pincer) = meta.and_then(|meta| meta.get("pincer")) else {
        return Ok(PromptSettings::default());
    };
    let Some(pincer) = pincer.as_object() else {
        return Err(invalid_params("_meta.pincer must be an object"));
    };
    let text = |key: &str| -> Result<Option<String>, RpcError> {
        match pincer.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(text)) if text.trim().is_empty() => Ok(None),
            Some(Value::String(text)) => Ok(Some(text.clone())),
            Some(_) => Err(invalid_params(format!(
                "_meta.pincer.{key} must be a string"
            ))),
        }
    };
    Ok(PromptSettings {
        system_prompt: text("systemPrompt")?,
        instructions: text("instructions")?,
    })
}

/// What a prompt request started.
enum Started {
    /// A run; the request is answered when it ends.
    Run,
    /// A slash command answered without a run.
    Command(SessionId, FaceCommand),
    /// Nothing: the prompt answered the question a run waits on.
    Answered,
}

/// `_meta.steering.supported`: clients probe it (on the response and on
/// the agent's capabilities) before they send `_session/steering`.
fn steering_meta() -> acp::Meta {
    let mut meta = acp::Meta::new();
    meta.insert("steering".into(), json!({"supported": true}));
    meta
}
