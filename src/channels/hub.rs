//! The receive and live contexts of one channel account: what happens to an
//! inbound message, and how a run's output becomes outbound messages.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::outbox::Outbox;
use super::{Adapter, ChannelSettings, Inbound, Received, render};
use crate::core::approval::ApprovalDecision;
use crate::core::channel::{
    Actor, Button, ChannelMessage, ConversationKey, DeliveryReceipt, Failure, FailureKind,
    InboxState, IntentKind, IntentStatus, IntentUpdate, MessageOrigin, ReceiptPart, SendIntent,
    Target, Unit, is_own_echo,
};
use crate::core::channel::{ChannelWrite, draft_intent_id};
use crate::core::clock::Clock;
use crate::core::event::{Event, RunState};
use crate::core::hooks::{HookEvent, HookInput};
use crate::core::ids::{RunId, SessionId};
use crate::core::journal::{ChannelJournal, JournalError, Write};
use crate::core::lease::{Lease, LeaseError, LeaseKey, Leases};
use crate::core::memory::Scope;
use crate::core::question::{Question, QuestionAnswer, QuestionOutcome};
use crate::core::run::RunOutcome;
use crate::core::runtime::{LeaseTiming, NewSession, Runtime, SessionCommand, Subscription};
use crate::core::session::{ContentPart, Origin, now_millis};

/// How long showing an approval's answer waits for the prompt's send to
/// settle when the answer came (from another face) while it was in flight.
const SETTLE_WAIT: std::time::Duration = std::time::Duration::from_secs(10);

const HELP: &str = "Pincer commands:\n\
/new — start a new session for this chat\n\
/stop — stop the running request\n\
/status — the session, its model and mode\n\
/compact — summarize the conversation so far; the model continues from the summary\n\
/undo — revert the file edits of the last request that made any\n\
/remember TEXT — remember it in this chat (start with user or workspace to remember it more widely)\n\
/forget ID — forget a remembered item\n\
/memory — what is remembered here (/memory search WORDS)\n\
/trust — run the hooks the workspace brings for other agents\n\
/pair CODE — allow yourself with the operator's pairing code\n\
/help — this list\n\
Anything else is a prompt. When a tool needs approval, answer with the buttons, or y (allow once), a (always), n (reject).";

/// What a dispatched run starts with.
#[derive(Debug, Clone, Copy)]
enum Start {
    /// The messages, as one prompt.
    Prompt,
    /// A session command given in the chat.
    Command(SessionCommand),
}

/// The session command a chat message gives (`/undo`, `/compact@bot`), if any.
fn session_command(body: &str) -> Option<SessionCommand> {
    let name = body.split_whitespace().next()?;
    SessionCommand::parse(name.split('@').next().unwrap_or(name))
}

/// A conversation's state in this process.
#[derive(Default)]
struct Conversation {
    /// Messages waiting for their sender's coalescing window to close, by sender.
    buffers: HashMap<String, Vec<ChannelMessage>>,
    /// Approvals asked in this chat and not yet answered: (session, approval id).
    approvals: Vec<(SessionId, String)>,
    /// Questions (`ask_user`) asked in this chat and not yet answered: the
    /// next message answers the newest.
    questions: Vec<(SessionId, String, Question)>,
}

/// One channel account: receives, dispatches runs, renders and sends their output.
pub struct Hub {
    runtime: Runtime,
    store: Arc<dyn ChannelJournal>,
    adapter: Arc<dyn Adapter>,
    settings: ChannelSettings,
    outbox: Arc<Outbox>,
    conversations: Mutex<HashMap<ConversationKey, Conversation>>,
    /// Senders told how to pair, so they are told once per process.
    told: Mutex<HashSet<String>>,
    /// Held while a conversation's session is looked up or created, so two
    /// senders writing at once to a new chat get one session.
    sessions: tokio::sync::Mutex<()>,
    tasks: TaskTracker,
    cancel: CancellationToken,
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// A failure the hub reports; inbound handling never panics on one.
#[derive(Debug, thiserror::Error)]
pub enum HubError {
    #[error(transparent)]
    Journal(#[from] JournalError),
    #[error(transparent)]
    Runtime(#[from] crate::core::runtime::RuntimeError),
    #[error("the channel account's lease: {0}")]
    Lease(crate::core::lease::LeaseError),
}

impl Hub {
    /// Starts serving one channel account: once this process holds the
    /// account's lease (`LeaseKey::channel`), recovers what the previous
    /// holder left, then starts the outbox worker and the adapter's
    /// receive loop. While another process holds it, this one stands by
    /// and takes over when that lease lapses; a lease lost while serving
    /// (the process stopped past it) stops both until it is held again.
    /// Everything stops with `cancel`.
    pub async fn start(
        runtime: Runtime,
        store: Arc<dyn ChannelJournal>,
        adapter: Arc<dyn Adapter>,
        settings: ChannelSettings,
        cancel: CancellationToken,
    ) -> Result<Arc<Hub>, HubError> {
        let outbox = Arc::new(Outbox::new(
            adapter.clone(),
            store.clone(),
            settings.expire_after,
            settings.max_attempts,
            runtime.gate().safety.clone(),
        ));
        let holding = runtime.lease_holding();
        let hub = Arc::new(Hub {
            runtime,
            store,
            adapter: adapter.clone(),
            settings,
            outbox: outbox.clone(),
            conversations: Mutex::new(HashMap::new()),
            told: Mutex::new(HashSet::new()),
            sessions: tokio::sync::Mutex::new(()),
            tasks: TaskTracker::new(),
            cancel: cancel.clone(),
        });
        let Some(crate::core::runtime::LeaseHolding {
            leases,
            holder,
            timing,
            clock,
        }) = holding
        else {
            hub.serve(cancel.clone()).await?;
            return Ok(hub);
        };
        let key = LeaseKey::channel(adapter.channel(), adapter.account());
        match leases
            .claim(&key, &holder, clock.now_millis(), timing.ttl_ms)
            .await
        {
            Ok(lease) => {
                let serving = cancel.child_token();
                hub.serve_under(&lease, serving.clone()).await?;
                hub.tasks.spawn(hub.clone().keep_account(
                    leases,
                    holder,
                    timing,
                    clock,
                    Some((lease, serving)),
                ));
            }
            Err(LeaseError::Held { holder: other, .. }) => {
                tracing::warn!(
                    channel = adapter.channel(),
                    account = adapter.account(),
                    holder = %other,
                    "another pincer process serves this channel account; standing by to take over if its lease lapses"
                );
                hub.tasks.spawn(
                    hub.clone()
                        .keep_account(leases, holder, timing, clock, None),
                );
            }
            Err(err) => return Err(HubError::Lease(err)),
        }
        Ok(hub)
    }

    /// Serves the account under `lease`: its intent writes fenced with it.
    async fn serve_under(
        self: &Arc<Self>,
        lease: &Lease,
        serving: CancellationToken,
    ) -> Result<(), HubError> {
        self.outbox.fence_with(Some(lease.fence()));
        self.serve(serving).await
    }

    /// Keeps the account's lease renewed while serving (`serving`), and
    /// waits for it while another process holds it, until `cancel`.
    async fn keep_account(
        self: Arc<Self>,
        leases: Arc<dyn Leases>,
        holder: String,
        timing: LeaseTiming,
        clock: Arc<dyn Clock>,
        mut serving: Option<(Lease, CancellationToken)>,
    ) {
        let key = LeaseKey::channel(self.adapter.channel(), self.adapter.account());
        loop {
            let wait = if serving.is_some() {
                timing.renew
            } else {
                timing.poll.max(timing.renew / 4)
            };
            tokio::select! {
                _ = self.cancel.cancelled() => break,
                _ = tokio::time::sleep(wait) => {}
            }
            serving = match serving.take() {
                Some((lease, token)) => {
                    match leases
                        .renew(&lease, clock.now_millis(), timing.ttl_ms)
                        .await
                    {
                        Ok(renewed) => Some((renewed, token)),
                        Err(LeaseError::Backend(err)) => {
                            tracing::warn!(channel = self.adapter.channel(), error = %err, "cannot renew the channel account's lease");
                            Some((lease, token))
                        }
                        Err(err) => {
                            tracing::error!(
                                channel = self.adapter.channel(),
                                account = self.adapter.account(),
                                error = %err,
                                "lost the channel account's lease: another process serves it now; this one stops sending and stands by"
                            );
                            token.cancel();
                            self.outbox.fence_with(None);
                            None
                        }
                    }
                }
                None => match leases
                    .claim(&key, &holder, clock.now_millis(), timing.ttl_ms)
                    .await
                {
                    Ok(lease) => {
                        tracing::warn!(
                            channel = self.adapter.channel(),
                            account = self.adapter.account(),
                            "took over the channel account: its lease lapsed"
                        );
                        let token = self.cancel.child_token();
                        match self.serve_under(&lease, token.clone()).await {
                            Ok(()) => Some((lease, token)),
                            Err(err) => {
                                tracing::error!(channel = self.adapter.channel(), error = %err, "cannot serve the channel account");
                                token.cancel();
                                let _ = leases.release(&lease).await;
                                None
                            }
                        }
                    }
                    Err(LeaseError::Held { .. }) => None,
                    Err(err) => {
                        tracing::warn!(channel = self.adapter.channel(), error = %err, "cannot take the channel account's lease");
                        None
                    }
                },
            };
        }
        if let Some((lease, _)) = serving
            && let Err(err) = leases.release(&lease).await
        {
            tracing::debug!(error = %err, "cannot release the channel account's lease");
        }
    }

    /// Recovers what a stopped process left, then starts the outbox worker
    /// and the adapter's receive loop, both until `serving` is cancelled.
    async fn serve(self: &Arc<Self>, serving: CancellationToken) -> Result<(), HubError> {
        let (outbox, adapter, hub) = (&self.outbox, &self.adapter, self);
        let recovered = outbox.recover().await?;
        if !recovered.unknown.is_empty() || !recovered.expired.is_empty() || recovered.resumed > 0 {
            tracing::warn!(
                channel = adapter.channel(),
                resumed = recovered.resumed,
                unknown_after_send = recovered.unknown.len(),
                expired = recovered.expired.len(),
                finished = recovered.finished,
                "recovered the outbox of a stopped process"
            );
        }
        // Messages a stopped process held for their hooks: asked again (none
        // was sent, so nothing goes out twice). Before the inbox's recovery,
        // whose replies ask for themselves.
        for intent in outbox.held().await? {
            hub.tasks.spawn(hub.clone().screen(intent));
        }
        hub.recover_inbox().await?;
        hub.tasks.spawn(outbox.clone().run(serving.clone()));
        hub.tasks
            .spawn(adapter.clone().receive(hub.clone(), serving));
        Ok(())
    }

    /// The adapter's acknowledgement watermark as last stored (`name`: e.g.
    /// Telegram's `offset`).
    pub async fn cursor(&self, name: &str) -> Option<String> {
        self.store
            .cursor(self.adapter.channel(), self.adapter.account(), name)
            .await
            .unwrap_or_else(|err| {
                tracing::error!(error = %err, "cannot read the channel's cursor");
                None
            })
    }

    /// Moves the watermark past an event Pincer takes no interest in.
    pub fn skip(&self, name: &str, value: String) {
        self.store.submit(Write::Channel(ChannelWrite::PutCursor {
            channel: self.adapter.channel().to_owned(),
            account: self.adapter.account().to_owned(),
            name: name.to_owned(),
            value,
        }));
    }

    pub fn adapter(&self) -> &Arc<dyn Adapter> {
        &self.adapter
    }

    pub fn outbox(&self) -> &Arc<Outbox> {
        &self.outbox
    }

    /// Waits for the hub's tasks after `cancel`.
    pub async fn stopped(&self) {
        self.tasks.close();
        self.tasks.wait().await;
    }

    /// Takes one inbound event. `cursor` (name, value) is the platform's
    /// acknowledgement watermark, stored in the same transaction as the message.
    pub async fn receive(
        self: &Arc<Self>,
        inbound: Inbound,
        cursor: Option<(String, String)>,
    ) -> Received {
        match inbound {
            Inbound::Message(message) => self.receive_message(message, cursor).await,
            Inbound::Button {
                id,
                target,
                sender,
                data,
            } => {
                let message = ChannelMessage {
                    id: format!("button:{id}"),
                    channel: self.adapter.channel().to_owned(),
                    account: self.adapter.account().to_owned(),
                    target,
                    sender: Some(Actor {
                        id: sender,
                        name: None,
                        is_bot: false,
                    }),
                    body: data,
                    attachments: Vec::new(),
                    relation: None,
                    origin: MessageOrigin::User,
                    at: now_millis(),
                };
                match self.record(&message, cursor).await {
                    Ok(()) => {}
                    Err(outcome) => return outcome,
                }
                if !self.authorized(&message).await {
                    self.handled(&message).await;
                    return Received::Unauthorized;
                }
                self.button(&message).await;
                self.handled(&message).await;
                Received::Accepted
            }
        }
    }

    async fn record(
        &self,
        message: &ChannelMessage,
        cursor: Option<(String, String)>,
    ) -> Result<(), Received> {
        let write = ChannelWrite::RecordInbound {
            message: message.clone(),
            cursor,
            at: now_millis(),
        };
        match self.store.commit(Write::Channel(write)).await {
            Ok(()) => Ok(()),
            Err(JournalError::Conflict(_)) => Err(Received::Duplicate),
            Err(err) => {
                tracing::error!(channel = self.adapter.channel(), error = %err, "cannot record an inbound message");
                Err(Received::Failed(err.to_string()))
            }
        }
    }

    async fn receive_message(
        self: &Arc<Self>,
        message: ChannelMessage,
        cursor: Option<(String, String)>,
    ) -> Received {
        if is_own_echo(&message) {
            if let Some((name, value)) = cursor {
                self.store.submit(Write::Channel(ChannelWrite::PutCursor {
                    channel: message.channel.clone(),
                    account: message.account.clone(),
                    name,
                    value,
                }));
            }
            return Received::Echo;
        }
        if let Err(outcome) = self.record(&message, cursor).await {
            return outcome;
        }
        let body = message.body.trim();
        if !self.authorized(&message).await {
            if let Some(code) = body.strip_prefix("/pair") {
                self.pair(&message, code.trim()).await;
                self.handled(&message).await;
                return Received::Accepted;
            }
            let sender = message.sender.as_ref().map_or("", |s| s.id.as_str());
            if lock(&self.told).insert(sender.to_owned()) {
                self.notice(
                    &message,
                    "You are not allowed to use this Pincer. Ask its operator for the pairing code, then send /pair CODE.",
                )
                .await;
            }
            self.handled(&message).await;
            return Received::Unauthorized;
        }
        if let Some(reason) = self.message_hooks(&message).await {
            self.notice(&message, &format!("A hook blocked this message: {reason}"))
                .await;
            self.handled(&message).await;
            return Received::Accepted;
        }
        if let Some(command) = session_command(body) {
            let key = ConversationKey::of(&message);
            let messages = std::slice::from_ref(&message);
            if let Err(err) = self.dispatch(&key, messages, Start::Command(command)).await {
                tracing::error!(channel = %key.channel, error = %err, "cannot start a command");
                self.notice(
                    &message,
                    &format!("Pincer could not start {}: {err}", command.as_str()),
                )
                .await;
                self.handled(&message).await;
            }
            return Received::Accepted;
        }
        if body.starts_with('/') {
            self.command(&message).await;
            self.handled(&message).await;
            return Received::Accepted;
        }
        if let Some(decision) = text_decision(body)
            && self.answer_in_chat(&message, decision)
        {
            self.handled(&message).await;
            return Received::Accepted;
        }
        if self.reply_in_chat(&message) {
            self.handled(&message).await;
            return Received::Accepted;
        }
        self.coalesce(message);
        Received::Accepted
    }

    /// Runs the `MessageReceived` hooks of an authorized sender's message:
    /// the reason, through the safety pass, when one blocked it.
    /// A chat hook's input: the chat's session (empty before its first),
    /// then its channel, account and conversation.
    async fn chat_hook_input(&self, event: HookEvent, key: &ConversationKey) -> HookInput {
        let session = match self.store.conversation(key).await {
            Ok(Some(id)) => self.runtime.session(&id).await.ok(),
            _ => None,
        };
        HookInput::new(
            event,
            session.as_ref().map_or("", |s| s.id.as_str()),
            self.settings.workspace.clone(),
            session
                .as_ref()
                .map_or(self.runtime.default_mode(), |s| s.mode)
                .as_str(),
        )
        .about("channel", &key.channel)
        .with("account", key.account.clone())
        .with("conversation", key.target.id.clone())
    }

    async fn message_hooks(&self, message: &ChannelMessage) -> Option<String> {
        let hooks = self.runtime.gate().hooks.clone();
        if !hooks.listens(HookEvent::MessageReceived, Some(&message.channel)) {
            return None;
        }
        let key = ConversationKey::of(message);
        let input = self
            .chat_hook_input(HookEvent::MessageReceived, &key)
            .await
            .with(
                "sender",
                message
                    .sender
                    .as_ref()
                    .map_or(String::new(), |s| s.id.clone()),
            )
            .with("message", message.body.clone());
        let outcome = hooks.fire(input).await;
        let safety = &self.runtime.gate().safety;
        for note in outcome.messages() {
            tracing::info!(channel = %message.channel, "{}", safety.redact(&note).0);
        }
        outcome
            .blocked()
            .or_else(|| outcome.stopped())
            .map(|reason| safety.redact(&reason).0)
    }

    async fn authorized(&self, message: &ChannelMessage) -> bool {
        let Some(sender) = &message.sender else {
            return false;
        };
        if self.settings.allow.iter().any(|a| a == &sender.id) {
            return true;
        }
        self.store
            .is_paired(&message.channel, &message.account, &sender.id)
            .await
            .unwrap_or_else(|err| {
                tracing::error!(error = %err, "cannot read paired senders");
                false
            })
    }

    async fn pair(self: &Arc<Self>, message: &ChannelMessage, code: &str) {
        let Some(sender) = &message.sender else {
            return;
        };
        let matches = self
            .settings
            .pairing_code
            .as_deref()
            .is_some_and(|expected| !expected.is_empty() && constant_eq(expected, code));
        if !matches {
            self.notice(message, "That pairing code is not right.")
                .await;
            return;
        }
        let paired = self
            .store
            .commit(Write::Channel(ChannelWrite::PairPeer {
                channel: message.channel.clone(),
                account: message.account.clone(),
                sender: sender.id.clone(),
                at: now_millis(),
            }))
            .await;
        match paired {
            Ok(()) => {
                tracing::info!(channel = %message.channel, sender = %sender.id, "sender paired");
                self.notice(message, "Paired. Send a message to start.")
                    .await;
            }
            Err(err) => tracing::error!(error = %err, "cannot record a paired sender"),
        }
    }

    async fn handled(&self, message: &ChannelMessage) {
        self.set_inbox(std::slice::from_ref(&message.id), InboxState::Handled, None)
            .await;
    }

    async fn set_inbox(&self, ids: &[String], state: InboxState, run_id: Option<RunId>) {
        let write = ChannelWrite::SetInboxState {
            channel: self.adapter.channel().to_owned(),
            account: self.adapter.account().to_owned(),
            ids: ids.to_vec(),
            state,
            run_id,
            at: now_millis(),
        };
        if let Err(err) = self.store.commit(Write::Channel(write)).await {
            tracing::error!(error = %err, "cannot update the inbox");
        }
    }

    /// Pincer's answer to one inbound message (a command, a refusal); its id
    /// follows from the message, so a redelivery cannot send it twice.
    async fn notice(self: &Arc<Self>, message: &ChannelMessage, text: &str) {
        let intent = self.intent(
            format!(
                "notice:{}:{}:{}",
                message.channel, message.account, message.id
            ),
            message.target.clone(),
            IntentKind::Notice,
            text,
            Some(message.id.clone()),
            None,
        );
        if let Err(err) = self.send(intent, text).await {
            tracing::error!(error = %err, "cannot record a notice");
        }
    }

    /// Whether `MessageSending` hooks read this channel's outbound messages.
    fn screens(&self) -> bool {
        self.runtime
            .gate()
            .hooks
            .listens(HookEvent::MessageSending, Some(self.adapter.channel()))
    }

    /// Records an outbound message (`text`, cut into the intent's units).
    /// With `MessageSending` hooks it is recorded `held` and they are asked
    /// in a task of its own, so a slow hook holds back only this chat.
    async fn send(
        self: &Arc<Self>,
        mut intent: SendIntent,
        text: &str,
    ) -> Result<(), JournalError> {
        if !self.screens() {
            return self.outbox.record(intent).await;
        }
        // Decided before (a reply recovery decides again): recorded once,
        // and its hooks asked once.
        if self.store.intent(&intent.id).await?.is_some() {
            return Ok(());
        }
        intent.status = IntentStatus::Held;
        intent.text = Some(text.to_owned());
        self.outbox.record(intent.clone()).await?;
        self.tasks.spawn(self.clone().screen(intent));
        Ok(())
    }

    /// Runs the `MessageSending` hooks of a held intent and commits what
    /// they decided: the message goes out (rewritten, if one rewrote it), or
    /// it is withheld. The decision is on disk before any platform call, so a
    /// crash after it never asks the hooks again; a crash before it leaves
    /// the intent held, and the next start asks them again.
    async fn screen(self: Arc<Self>, intent: SendIntent) {
        let text = intent.text.clone().unwrap_or_else(|| {
            intent
                .units
                .iter()
                .map(|u| u.text.as_str())
                .collect::<Vec<_>>()
                .join("\n")
        });
        let key = ConversationKey {
            channel: intent.channel.clone(),
            account: intent.account.clone(),
            target: intent.target.clone(),
        };
        let input = self
            .chat_hook_input(HookEvent::MessageSending, &key)
            .await
            .with("message", text);
        let hooks = self.runtime.gate().hooks.clone();
        let outcome = tokio::select! {
            // Stopping: the intent stays held for the next start.
            _ = self.cancel.cancelled() => return,
            outcome = hooks.fire(input) => outcome,
        };
        let safety = &self.runtime.gate().safety;
        for note in outcome.messages() {
            tracing::info!(channel = %intent.channel, intent = %intent.id, "{}", safety.redact(&note).0);
        }
        let settled = if let Some(reason) = outcome.blocked().or_else(|| outcome.stopped()) {
            let reason = safety.redact(&reason).0;
            tracing::warn!(
                channel = %intent.channel,
                intent = %intent.id,
                %reason,
                "a MessageSending hook withheld a message; it is not sent"
            );
            self.outbox.withhold(&intent.id, &reason).await
        } else {
            let units = outcome.updated_message().map(|rewritten| {
                // What a hook gives the person passes the safety pass.
                let rewritten = safety.redact(rewritten).0;
                let buttons = intent.units.last().map(|u| u.buttons.clone());
                tracing::info!(channel = %intent.channel, intent = %intent.id, "a MessageSending hook rewrote a message");
                self.units(&rewritten, buttons)
            });
            self.outbox.release(&intent.id, units).await
        };
        match settled {
            Ok(()) => {}
            // Settled elsewhere (an approval answered before its prompt went out).
            Err(JournalError::Conflict(reason)) => {
                tracing::debug!(intent = %intent.id, %reason, "held message settled elsewhere");
            }
            Err(err) => {
                tracing::error!(intent = %intent.id, error = %err, "cannot record what the MessageSending hooks decided; the message stays held");
            }
        }
    }

    /// `text` cut into units the platform takes, `buttons` on the last.
    fn units(&self, text: &str, buttons: Option<Vec<Button>>) -> Vec<Unit> {
        let caps = self.adapter.capabilities();
        let mut units: Vec<Unit> = render::chunk(text, caps.max_len)
            .into_iter()
            .map(|piece| Unit {
                markup: (caps.markup == Some("html")).then(|| render::telegram_html(&piece)),
                text: piece,
                buttons: Vec::new(),
            })
            .collect();
        if units.is_empty() {
            units.push(Unit {
                text: "(no reply)".to_owned(),
                markup: None,
                buttons: Vec::new(),
            });
        }
        if let (Some(buttons), Some(last)) = (buttons, units.last_mut()) {
            last.buttons = buttons;
        }
        units
    }

    fn intent(
        &self,
        id: String,
        target: Target,
        kind: IntentKind,
        text: &str,
        reply_to: Option<String>,
        buttons: Option<Vec<Button>>,
    ) -> SendIntent {
        let units = self.units(text, buttons);
        let now = now_millis();
        SendIntent {
            id,
            channel: self.adapter.channel().to_owned(),
            account: self.adapter.account().to_owned(),
            target,
            kind,
            units,
            text: None,
            edit_of: None,
            retract: None,
            reply_to,
            status: IntentStatus::Pending,
            attempt: 0,
            next_attempt_at: None,
            inflight: None,
            receipt: Default::default(),
            failure: None,
            session_id: None,
            run_id: None,
            created_at: now,
            updated_at: now,
        }
    }

    /// The session of a conversation: mapped, or created and mapped now.
    async fn session_of(&self, key: &ConversationKey, fresh: bool) -> Result<SessionId, HubError> {
        let _creating = self.sessions.lock().await;
        if !fresh && let Some(id) = self.store.conversation(key).await? {
            match self.runtime.open_session(&id).await {
                Ok(session) => return Ok(session.id),
                Err(err) => {
                    tracing::warn!(session = %id, error = %err, "the chat's session cannot be opened; starting a new one");
                }
            }
        }
        // The session and the chat's mapping to it in one transaction: a crash
        // cannot leave a session no chat leads to.
        let session = self
            .runtime
            .create_session_with(
                NewSession {
                    workspace: self.settings.workspace.clone(),
                    origin: Origin::Channel,
                    mcp_servers: serde_json::json!([]),
                    conversation: Some(key.as_scope_key()),
                    prompt: Default::default(),
                },
                |id| {
                    vec![Write::Channel(ChannelWrite::MapConversation {
                        key: key.clone(),
                        session_id: id.clone(),
                        at: now_millis(),
                    })]
                },
            )
            .await?;
        Ok(session.id)
    }

    async fn command(self: &Arc<Self>, message: &ChannelMessage) {
        let body = message.body.trim();
        let (name, rest) = body.split_once(char::is_whitespace).unwrap_or((body, ""));
        // `/cmd@botname` in groups.
        let name = name.split('@').next().unwrap_or(name);
        let key = ConversationKey::of(message);
        let answer = match name {
            "/help" | "/start" => HELP.to_owned(),
            "/pair" => "You are already allowed here.".to_owned(),
            "/new" => match self.session_of(&key, true).await {
                Ok(id) => format!("New session {id}. The previous one is kept."),
                Err(err) => format!("Cannot start a new session: {err}"),
            },
            "/stop" => match self.store.conversation(&key).await {
                Ok(Some(id)) => match self.runtime.cancel(&id) {
                    Ok(0) | Err(_) => "Nothing is running.".to_owned(),
                    Ok(n) => format!("Stopping {n} request(s)."),
                },
                _ => "Nothing is running.".to_owned(),
            },
            "/status" => match self.store.conversation(&key).await {
                Ok(Some(id)) => match self.runtime.session(&id).await {
                    Ok(session) => format!(
                        "Session {}\nModel: {}/{}\nMode: {}\nWorkspace: {}",
                        session.id,
                        session.provider,
                        session.model,
                        session.mode.as_str(),
                        session.workspace.display()
                    ),
                    Err(err) => format!("Session {id}: {err}"),
                },
                Ok(None) => "No session yet: send a message to start one.".to_owned(),
                Err(err) => format!("Cannot read the session: {err}"),
            },
            "/remember" | "/forget" | "/memory" => {
                let argument = match name {
                    "/remember" => format!("add {rest}"),
                    "/forget" => format!("forget {rest}"),
                    _ => rest.to_owned(),
                };
                match self.session_of(&key, false).await {
                    Ok(id) => match self
                        .runtime
                        .memory_command(&id, Some(&argument), Scope::Conversation)
                        .await
                    {
                        Ok(answer) => answer,
                        Err(err) => format!("Cannot reach the memory: {err}"),
                    },
                    Err(err) => format!("Cannot open the session: {err}"),
                }
            }
            "/trust" => match self.session_of(&key, false).await {
                Ok(id) => match self.runtime.trust_hooks(&id).await {
                    Ok(answer) => answer,
                    Err(err) => format!("Cannot trust the workspace: {err}"),
                },
                Err(err) => format!("Cannot open the session: {err}"),
            },
            other => format!("Unknown command {other}. /help lists the commands."),
        };
        self.notice(message, &answer).await;
    }

    /// A message while a question of this chat waits answers the newest.
    fn reply_in_chat(&self, message: &ChannelMessage) -> bool {
        let key = ConversationKey::of(message);
        let pending = {
            let conversations = lock(&self.conversations);
            conversations
                .get(&key)
                .and_then(|c| c.questions.last().cloned())
        };
        match pending {
            Some((session, question_id, question)) => self.runtime.answer_question(
                &session,
                &question_id,
                QuestionAnswer::from_reply(&question, &message.body),
            ),
            None => false,
        }
    }

    /// A button press on a question: `qa:QUESTION:N` picks option N (from
    /// 1); `qa:QUESTION:0` declines.
    async fn question_button(&self, message: &ChannelMessage, question_id: &str, choice: &str) {
        let key = ConversationKey::of(message);
        let pending = {
            let conversations = lock(&self.conversations);
            conversations.get(&key).and_then(|c| {
                c.questions
                    .iter()
                    .find(|(_, id, _)| id == question_id)
                    .cloned()
            })
        };
        let Some((session, _, question)) = pending else {
            tracing::info!(question = question_id, "question already answered or gone");
            return;
        };
        let answer = match choice.parse::<usize>() {
            Ok(0) | Err(_) => QuestionAnswer::without(QuestionOutcome::Declined),
            Ok(n) => match question.options.get(n - 1) {
                Some(option) => QuestionAnswer::answered(option),
                None => return,
            },
        };
        if !self.runtime.answer_question(&session, question_id, answer) {
            tracing::info!(question = question_id, "question already answered or gone");
        }
    }

    /// A button press: `ap:APPROVAL:DECISION`, or `qa:QUESTION:N`.
    async fn button(&self, message: &ChannelMessage) {
        if let Some(rest) = message.body.strip_prefix("qa:")
            && let Some((question, choice)) = rest.split_once(':')
        {
            self.question_button(message, question, choice).await;
            return;
        }
        let mut parts = message.body.splitn(3, ':');
        let (Some("ap"), Some(approval), Some(decision)) =
            (parts.next(), parts.next(), parts.next())
        else {
            tracing::debug!(data = %message.body, "unknown button");
            return;
        };
        let Some(decision) =
            ApprovalDecision::parse(decision).filter(|d| ApprovalDecision::OPTIONS.contains(d))
        else {
            return;
        };
        let key = ConversationKey::of(message);
        let session = {
            let conversations = lock(&self.conversations);
            conversations.get(&key).and_then(|c| {
                c.approvals
                    .iter()
                    .find(|(_, id)| id == approval)
                    .map(|(s, _)| s.clone())
            })
        };
        let session = match session {
            Some(session) => Some(session),
            None => self.store.conversation(&key).await.ok().flatten(),
        };
        if let Some(session) = session
            && !self.runtime.answer_approval(&session, approval, decision)
        {
            tracing::info!(approval, "approval already answered or gone");
        }
    }

    /// `y` / `n` / `a` answers the newest approval asked in this chat.
    fn answer_in_chat(&self, message: &ChannelMessage, decision: ApprovalDecision) -> bool {
        let key = ConversationKey::of(message);
        let pending = {
            let conversations = lock(&self.conversations);
            conversations
                .get(&key)
                .and_then(|c| c.approvals.last().cloned())
        };
        match pending {
            Some((session, approval)) => {
                self.runtime.answer_approval(&session, &approval, decision)
            }
            None => false,
        }
    }

    /// Buffers a prompt; a sender's first message of a window schedules the
    /// dispatch of everything that sender writes within it.
    fn coalesce(self: &Arc<Self>, message: ChannelMessage) {
        let key = ConversationKey::of(&message);
        let sender = message
            .sender
            .as_ref()
            .map(|s| s.id.clone())
            .unwrap_or_default();
        let first = {
            let mut conversations = lock(&self.conversations);
            let buffer = conversations
                .entry(key.clone())
                .or_default()
                .buffers
                .entry(sender.clone())
                .or_default();
            buffer.push(message);
            buffer.len() == 1
        };
        if first {
            let hub = self.clone();
            let window = self.settings.coalesce;
            self.tasks.spawn(async move {
                tokio::select! {
                    _ = hub.cancel.cancelled() => return,
                    _ = tokio::time::sleep(window) => {}
                }
                hub.flush(&key, &sender).await;
            });
        }
    }

    async fn flush(self: &Arc<Self>, key: &ConversationKey, sender: &str) {
        let messages = {
            let mut conversations = lock(&self.conversations);
            conversations
                .get_mut(key)
                .and_then(|c| c.buffers.remove(sender))
                .unwrap_or_default()
        };
        if messages.is_empty() {
            return;
        }
        if let Err(err) = self.dispatch(key, &messages, Start::Prompt).await {
            tracing::error!(channel = %key.channel, error = %err, "cannot start a run for a chat message");
            if let Some(last) = messages.last() {
                self.notice(last, &format!("Pincer could not start on this: {err}"))
                    .await;
            }
            let ids: Vec<String> = messages.iter().map(|m| m.id.clone()).collect();
            self.set_inbox(&ids, InboxState::Handled, None).await;
        }
    }

    /// Starts a run of the conversation's session: the messages as its prompt,
    /// or the command one of them gave.
    async fn dispatch(
        self: &Arc<Self>,
        key: &ConversationKey,
        messages: &[ChannelMessage],
        start: Start,
    ) -> Result<(), HubError> {
        let session = self.session_of(key, false).await?;
        let mut text: Vec<String> = Vec::new();
        for message in messages {
            let mut part = message.body.clone();
            for attachment in &message.attachments {
                part.push_str(&format!(
                    "\n[attached {}: {}]",
                    attachment.kind,
                    attachment.name.as_deref().unwrap_or(&attachment.reference)
                ));
            }
            text.push(part);
        }
        let ids: Vec<String> = messages.iter().map(|m| m.id.clone()).collect();
        // A message while the chat's prompt works steers that run: its
        // reply answers both.
        if matches!(start, Start::Prompt) {
            let content = vec![ContentPart::Text {
                text: text.join("\n\n"),
            }];
            if let Some(working) = self.runtime.steer(&session, content)? {
                self.set_inbox(&ids, InboxState::Dispatched, Some(working))
                    .await;
                return Ok(());
            }
        }
        let run_id = RunId::generate();
        let subscription = self.runtime.subscribe(&session)?;
        match start {
            Start::Prompt => {
                let content = vec![ContentPart::Text {
                    text: text.join("\n\n"),
                }];
                self.runtime
                    .prompt_as(&session, run_id.clone(), content)
                    .await?
            }
            Start::Command(command) => {
                self.runtime
                    .command_as(&session, run_id.clone(), command)
                    .await?
            }
        };
        self.set_inbox(&ids, InboxState::Dispatched, Some(run_id.clone()))
            .await;
        let hub = self.clone();
        let key = key.clone();
        let reply_to = messages.last().map(|m| m.id.clone());
        self.tasks.spawn(async move {
            hub.watch(key, session, run_id, reply_to, ids, subscription)
                .await;
        });
        Ok(())
    }

    /// Follows a run: live draft, approval prompts, and the final reply.
    async fn watch(
        self: Arc<Self>,
        key: ConversationKey,
        session: SessionId,
        run_id: RunId,
        reply_to: Option<String>,
        ids: Vec<String>,
        mut events: Subscription,
    ) {
        let caps = self.adapter.capabilities();
        // With `MessageSending` hooks nothing is shown before they read it:
        // no live draft, the reply comes whole once they let it go.
        let drafting = caps.edit && self.settings.live_drafts && !self.screens();
        let mut text = String::new();
        let mut draft = LiveDraft::NotYet;
        let outcome = loop {
            let next = tokio::select! {
                // Stopping: the run is recorded as it ends, and the next start
                // answers it from the inbox.
                _ = self.cancel.cancelled() => return,
                next = events.next() => next,
            };
            let Some(record) = next else {
                break RunOutcome::Failed("the session closed".to_owned());
            };
            if record.run_id != run_id {
                continue;
            }
            match &record.event {
                Event::TextDelta { .. } | Event::Notice { .. } => {
                    if let Some(part) = reply_part(&record.event) {
                        text.push_str(&part);
                    }
                    if drafting {
                        self.live(&key, &run_id, &text, &mut draft).await;
                    }
                }
                Event::ApprovalRequested {
                    approval_id,
                    title,
                    reason,
                    ..
                } => {
                    self.ask(&key, &session, approval_id, title, reason).await;
                }
                Event::ApprovalDecided {
                    approval_id,
                    decision,
                    ..
                } => {
                    {
                        let mut conversations = lock(&self.conversations);
                        if let Some(c) = conversations.get_mut(&key) {
                            c.approvals.retain(|(_, id)| id != approval_id);
                        }
                    }
                    self.show_decision(&key, approval_id, *decision).await;
                }
                event @ Event::QuestionAsked { .. } => {
                    if let Some((question_id, question)) = event.question() {
                        self.ask_question(&key, &session, question_id, question)
                            .await;
                    }
                }
                Event::QuestionAnswered { question_id, .. } => {
                    let mut conversations = lock(&self.conversations);
                    if let Some(c) = conversations.get_mut(&key) {
                        c.questions.retain(|(_, id, _)| id != question_id);
                    }
                }
                event => {
                    if let Some(outcome) = RunOutcome::from_event(event) {
                        break outcome;
                    }
                }
            }
        };
        self.finish(
            &key,
            &run_id,
            &outcome,
            &text,
            draft.reference(),
            reply_to,
            &ids,
        )
        .await;
    }

    /// Sends or edits the live draft, at most once per the platform's edit
    /// interval. The first send is an intent of its own (`draft:RUN`),
    /// committed as `sending` before the platform call and given the draft's
    /// message id after it, so a crash in between is known to have left a
    /// draft that may be in the chat.
    async fn live(&self, key: &ConversationKey, run_id: &RunId, text: &str, draft: &mut LiveDraft) {
        let caps = self.adapter.capabilities();
        let preview = preview(text, caps.max_len);
        if preview.trim().is_empty() {
            return;
        }
        let unit = Unit {
            text: preview.clone(),
            markup: None,
            buttons: Vec::new(),
        };
        match draft {
            LiveDraft::NotYet => {
                let id = draft_intent_id(run_id);
                let now = now_millis();
                let intent = SendIntent {
                    id: id.clone(),
                    channel: self.adapter.channel().to_owned(),
                    account: self.adapter.account().to_owned(),
                    target: key.target.clone(),
                    kind: IntentKind::Draft,
                    units: vec![unit.clone()],
                    text: None,
                    edit_of: None,
                    retract: None,
                    reply_to: None,
                    status: IntentStatus::Sending,
                    attempt: 1,
                    next_attempt_at: None,
                    inflight: Some(0),
                    receipt: DeliveryReceipt::default(),
                    failure: None,
                    session_id: None,
                    run_id: Some(run_id.clone()),
                    created_at: now,
                    updated_at: now,
                };
                if let Err(err) = self
                    .store
                    .commit(Write::Channel(ChannelWrite::InsertIntent(intent)))
                    .await
                {
                    tracing::error!(run = %run_id, error = %err, "cannot record a live draft; the reply comes whole");
                    *draft = LiveDraft::Stopped { maybe_shown: false };
                    return;
                }
                let sent = self
                    .adapter
                    .send(&key.target, &unit, None, &format!("{id}:0"))
                    .await;
                let update = match &sent {
                    Ok(platform_id) => {
                        let mut update = IntentUpdate::new(
                            &id,
                            &[IntentStatus::Sending],
                            IntentStatus::Sent,
                            now_millis(),
                        );
                        update.receipt = Some(DeliveryReceipt {
                            parts: vec![ReceiptPart {
                                index: 0,
                                platform_id: platform_id.clone(),
                            }],
                        });
                        update
                    }
                    Err(err) => {
                        tracing::debug!(run = %run_id, error = %err, "live draft not sent; the reply comes whole");
                        let unknown = err.kind == FailureKind::Unknown;
                        let status = if unknown {
                            IntentStatus::UnknownAfterSend
                        } else {
                            IntentStatus::Failed
                        };
                        let mut update =
                            IntentUpdate::new(&id, &[IntentStatus::Sending], status, now_millis());
                        update.inflight = unknown.then_some(0);
                        update.failure = Some(Failure {
                            kind: err.kind,
                            message: err.message.clone(),
                        });
                        update
                    }
                };
                if let Err(err) = self
                    .store
                    .commit(Write::Channel(ChannelWrite::UpdateIntent(update)))
                    .await
                {
                    tracing::error!(run = %run_id, error = %err, "cannot record a live draft's outcome");
                }
                *draft = match sent {
                    Ok(platform_id) => LiveDraft::Shown {
                        platform_id,
                        last: Instant::now(),
                        text: preview,
                        unsettled: false,
                    },
                    Err(err) => LiveDraft::Stopped {
                        maybe_shown: err.kind == FailureKind::Unknown,
                    },
                };
            }
            LiveDraft::Shown {
                platform_id,
                last,
                text: shown,
                unsettled,
            } => {
                if last.elapsed() < caps.edit_interval || *shown == preview {
                    return;
                }
                match self.adapter.edit(&key.target, platform_id, &unit).await {
                    Ok(()) => {
                        *last = Instant::now();
                        *shown = preview;
                    }
                    Err(err) => {
                        tracing::debug!(error = %err, "live draft not edited");
                        *last = Instant::now();
                        // The platform may still apply it, later than the
                        // reply's own edit would be.
                        if matches!(err.kind, FailureKind::Unknown | FailureKind::Transient) {
                            *unsettled = true;
                        }
                    }
                }
            }
            LiveDraft::Stopped { .. } => {}
        }
    }

    /// What a stopped process left of a run's live draft. A draft it named is
    /// stale: an edit of the stopped process may still land on it, so the
    /// reply deletes it rather than finalizing it in place. A draft whose
    /// first send has no known outcome may be in the chat with its id
    /// unknown: an adapter whose platform deduplicates sends by key sends it
    /// again to learn the id; otherwise the reply will say that a partial
    /// draft may show above it.
    async fn recovered_draft(&self, run_id: &RunId, legacy: Option<&String>) -> DraftRef {
        let intent = match self.store.intent(&draft_intent_id(run_id)).await {
            Ok(Some(intent)) => intent,
            // Drafts recorded before draft intents existed.
            Ok(None) => return legacy.map_or(DraftRef::None, |id| DraftRef::Stale(id.clone())),
            Err(err) => {
                tracing::error!(run = %run_id, error = %err, "cannot read a live draft");
                return DraftRef::MaybeShown;
            }
        };
        match intent.status {
            IntentStatus::Sent | IntentStatus::Committing => intent
                .receipt
                .primary()
                .map_or(DraftRef::MaybeShown, |id| DraftRef::Stale(id.to_owned())),
            IntentStatus::Failed
            | IntentStatus::Cancelled
            | IntentStatus::Expired
            | IntentStatus::Withheld => DraftRef::None,
            IntentStatus::UnknownAfterSend
            | IntentStatus::Sending
            | IntentStatus::Pending
            | IntentStatus::Held => {
                if !self.adapter.idempotent() {
                    return DraftRef::MaybeShown;
                }
                let Some(unit) = intent.units.first() else {
                    return DraftRef::MaybeShown;
                };
                let key = format!("{}:0", intent.id);
                match self.adapter.send(&intent.target, unit, None, &key).await {
                    Ok(platform_id) => {
                        let mut update = IntentUpdate::new(
                            &intent.id,
                            &[intent.status],
                            IntentStatus::Sent,
                            now_millis(),
                        );
                        update.receipt = Some(DeliveryReceipt {
                            parts: vec![ReceiptPart {
                                index: 0,
                                platform_id: platform_id.clone(),
                            }],
                        });
                        if let Err(err) = self
                            .store
                            .commit(Write::Channel(ChannelWrite::UpdateIntent(update)))
                            .await
                        {
                            tracing::error!(run = %run_id, error = %err, "cannot record a live draft's id");
                        }
                        DraftRef::Stale(platform_id)
                    }
                    Err(err) => {
                        tracing::warn!(run = %run_id, error = %err, "a live draft's id could not be learnt again");
                        DraftRef::MaybeShown
                    }
                }
            }
        }
    }

    async fn ask(
        self: &Arc<Self>,
        key: &ConversationKey,
        session: &SessionId,
        approval_id: &str,
        title: &str,
        reason: &str,
    ) {
        {
            let mut conversations = lock(&self.conversations);
            conversations
                .entry(key.clone())
                .or_default()
                .approvals
                .push((session.clone(), approval_id.to_owned()));
        }
        let caps = self.adapter.capabilities();
        let (text, buttons) = if caps.buttons {
            (
                format!("Approval needed: {title}\n{reason}"),
                Some(vec![
                    Button {
                        label: "Allow once".into(),
                        data: format!("ap:{approval_id}:allow_once"),
                    },
                    Button {
                        label: "Always".into(),
                        data: format!("ap:{approval_id}:allow_always"),
                    },
                    Button {
                        label: "Reject".into(),
                        data: format!("ap:{approval_id}:reject_once"),
                    },
                ]),
            )
        } else {
            (
                format!(
                    "Approval needed: {title}\n{reason}\nReply y (allow once), a (always) or n (reject)."
                ),
                None,
            )
        };
        let intent = self.intent(
            format!("approval:{approval_id}"),
            key.target.clone(),
            IntentKind::Approval,
            &text,
            None,
            buttons,
        );
        if let Err(err) = self.send(intent, &text).await {
            tracing::error!(error = %err, "cannot record an approval prompt");
        }
    }

    /// Sends a question to the chat: with a button per answer where the
    /// channel has buttons; a reply answers it either way.
    async fn ask_question(
        &self,
        key: &ConversationKey,
        session: &SessionId,
        question_id: &str,
        question: Question,
    ) {
        let mut text = format!("Question: {}", question.text);
        for (index, option) in question.options.iter().enumerate() {
            text.push_str(&format!("\n{}. {option}", index + 1));
        }
        text.push_str(if question.options.is_empty() {
            "\nReply to answer."
        } else {
            "\nReply with a number or your own answer."
        });
        let buttons =
            (self.adapter.capabilities().buttons && !question.options.is_empty()).then(|| {
                let mut buttons: Vec<Button> = question
                    .options
                    .iter()
                    .enumerate()
                    .map(|(index, option)| Button {
                        label: option.clone(),
                        data: format!("qa:{question_id}:{}", index + 1),
                    })
                    .collect();
                buttons.push(Button {
                    label: "Decline".into(),
                    data: format!("qa:{question_id}:0"),
                });
                buttons
            });
        {
            let mut conversations = lock(&self.conversations);
            conversations
                .entry(key.clone())
                .or_default()
                .questions
                .push((session.clone(), question_id.to_owned(), question));
        }
        let intent = self.intent(
            format!("question:{question_id}"),
            key.target.clone(),
            IntentKind::Approval,
            &text,
            None,
            buttons,
        );
        if let Err(err) = self.outbox.record(intent).await {
            tracing::error!(error = %err, "cannot record a question");
        }
    }

    /// Replaces an approval prompt's buttons with the answer, wherever it came
    /// from (this chat, the editor, HTTP). Cosmetic: a failure is only logged.
    async fn show_decision(
        &self,
        key: &ConversationKey,
        approval_id: &str,
        decision: ApprovalDecision,
    ) {
        let id = format!("approval:{approval_id}");
        let mut intent = match self.store.intent(&id).await {
            Ok(Some(intent)) => intent,
            _ => return,
        };
        // Answered elsewhere while the prompt is on its way to the chat:
        // the platform has it (or is about to) but its id is not on disk
        // yet. Wait for the send to settle, then edit it.
        let deadline = tokio::time::Instant::now() + SETTLE_WAIT;
        while intent.status == IntentStatus::Sending
            && intent.receipt.primary().is_none()
            && tokio::time::Instant::now() < deadline
        {
            tokio::select! {
                _ = self.cancel.cancelled() => return,
                _ = tokio::time::sleep(std::time::Duration::from_millis(25)) => {}
            }
            intent = match self.store.intent(&id).await {
                Ok(Some(intent)) => intent,
                _ => return,
            };
        }
        if matches!(intent.status, IntentStatus::Pending | IntentStatus::Held)
            && intent.receipt.parts.is_empty()
        {
            // Answered before the prompt went out: it need not go out at all.
            let update = crate::core::channel::IntentUpdate::new(
                &intent.id,
                &[IntentStatus::Pending, IntentStatus::Held],
                IntentStatus::Cancelled,
                now_millis(),
            );
            let _ = self
                .store
                .commit(Write::Channel(ChannelWrite::UpdateIntent(update)))
                .await;
            return;
        }
        let Some(platform_id) = intent.receipt.primary() else {
            return;
        };
        if !self.adapter.capabilities().edit {
            return;
        }
        let answer = match decision {
            ApprovalDecision::AllowOnce => "allowed once",
            ApprovalDecision::AllowAlways => "allowed always",
            ApprovalDecision::RejectOnce | ApprovalDecision::RejectAlways => "rejected",
            ApprovalDecision::TimedOut => "timed out (rejected)",
            ApprovalDecision::Cancelled => "cancelled",
            ApprovalDecision::Unattended => "rejected (nobody to ask)",
        };
        let first = intent.units.first().map_or("", |u| u.text.as_str());
        let unit = Unit {
            text: format!(
                "{}
→ {answer}",
                first.lines().take(2).collect::<Vec<_>>().join("\n")
            ),
            markup: None,
            buttons: Vec::new(),
        };
        if let Err(err) = self.adapter.edit(&key.target, platform_id, &unit).await {
            tracing::debug!(error = %err, "approval prompt not updated");
        }
    }

    /// Records the run's reply (finalizing the live draft in place when it
    /// fits one message) and marks its inbound messages done.
    #[allow(clippy::too_many_arguments)]
    async fn finish(
        self: &Arc<Self>,
        key: &ConversationKey,
        run_id: &RunId,
        outcome: &RunOutcome,
        text: &str,
        draft: DraftRef,
        reply_to: Option<String>,
        ids: &[String],
    ) {
        let body = match outcome {
            RunOutcome::Completed(_) if text.trim().is_empty() => "Done.".to_owned(),
            RunOutcome::Completed(_) => text.to_owned(),
            RunOutcome::Cancelled if text.trim().is_empty() => "Stopped.".to_owned(),
            RunOutcome::Cancelled => format!("{text}\n\n(stopped)"),
            RunOutcome::Failed(error) if text.trim().is_empty() => {
                format!("The run failed: {error}")
            }
            RunOutcome::Failed(error) => format!("{text}\n\n(the run failed: {error})"),
        };
        let (body, edit_of, retract) = match draft {
            DraftRef::None => (body, None, None),
            DraftRef::Known(id) => (body, Some(id), None),
            DraftRef::Stale(id) => (body, None, Some(id)),
            DraftRef::MaybeShown => (format!("[pincer] {DRAFT_LOST}\n\n{body}"), None, None),
        };
        let mut intent = self.intent(
            format!("reply:{run_id}"),
            key.target.clone(),
            IntentKind::Reply,
            &body,
            reply_to,
            None,
        );
        intent.run_id = Some(run_id.clone());
        intent.edit_of = edit_of;
        intent.retract = retract;
        if let Err(err) = self.send(intent, &body).await {
            tracing::error!(run = %run_id, error = %err, "cannot record a reply");
            return;
        }
        self.set_inbox(ids, InboxState::Done, None).await;
        self.store.submit(Write::Channel(ChannelWrite::DeleteDraft {
            run_id: run_id.clone(),
        }));
    }

    /// Picks up inbound messages a stopped process left: recorded ones are
    /// dispatched; dispatched ones whose run ended get their reply.
    async fn recover_inbox(self: &Arc<Self>) -> Result<(), HubError> {
        let channel = self.adapter.channel().to_owned();
        let account = self.adapter.account().to_owned();
        let open = self.store.open_inbox(&channel, &account).await?;
        if open.is_empty() {
            return Ok(());
        }
        let drafts: HashMap<RunId, String> = self
            .store
            .drafts(&channel, &account)
            .await?
            .into_iter()
            .map(|d| (d.run_id, d.platform_id))
            .collect();
        let mut by_run: HashMap<RunId, Vec<ChannelMessage>> = HashMap::new();
        let mut recorded: Vec<ChannelMessage> = Vec::new();
        for entry in open {
            match (entry.state, entry.run_id) {
                (InboxState::Dispatched, Some(run)) => {
                    by_run.entry(run).or_default().push(entry.message)
                }
                _ => recorded.push(entry.message),
            }
        }
        for (run_id, messages) in by_run {
            let info = match self.runtime.run(&run_id).await {
                Ok(info) => info,
                Err(err) => {
                    tracing::warn!(run = %run_id, error = %err, "a chat message's run is unknown");
                    continue;
                }
            };
            if !info.state.is_terminal() {
                continue; // another live process runs it
            }
            let tape = self.runtime.tape(&run_id, 0).await.unwrap_or_default();
            let text: String = tape.iter().filter_map(|r| reply_part(&r.event)).collect();
            let outcome = match info.state {
                RunState::Completed => RunOutcome::Completed(
                    info.stop_reason
                        .unwrap_or(crate::core::event::StopReason::EndTurn),
                ),
                RunState::Cancelled => RunOutcome::Cancelled,
                _ => RunOutcome::Failed(
                    info.error
                        .clone()
                        .unwrap_or_else(|| "the run failed".to_owned()),
                ),
            };
            let Some(first) = messages.first() else {
                continue;
            };
            let key = ConversationKey::of(first);
            let ids: Vec<String> = messages.iter().map(|m| m.id.clone()).collect();
            tracing::info!(run = %run_id, state = info.state.as_str(), "answering a chat message a stopped process left");
            self.finish(
                &key,
                &run_id,
                &outcome,
                &text,
                self.recovered_draft(&run_id, drafts.get(&run_id)).await,
                messages.last().map(|m| m.id.clone()),
                &ids,
            )
            .await;
        }
        for message in recorded {
            self.coalesce(message);
        }
        Ok(())
    }
}

/// What a reply says first when its live draft may be in the chat with its
/// message id unknown (a crash or a lost answer between the platform taking
/// the draft and Pincer learning its id): that draft cannot be finalized or
/// removed, so the person is told it is stale.
pub const DRAFT_LOST: &str = "If a partial draft of this reply shows above, it is stale: Pincer lost track of it (a restart or a lost answer), and this message is the whole reply.";

/// What a reply says first, as a part of its own, when the stale live draft
/// it replaces could not be deleted (too old for the platform to delete, or
/// the platform kept refusing): the draft may show partial text forever.
pub const DRAFT_STALE: &str = "The partial draft of this reply above is stale and could not be removed; the whole reply follows.";

/// A run's live draft, as the process showing it knows it.
enum LiveDraft {
    /// Nothing sent yet.
    NotYet,
    /// In the chat: its message id, when it was last edited, what it shows,
    /// and whether an edit's outcome is unknown (the platform may apply it
    /// late, after any edit made now).
    Shown {
        platform_id: String,
        last: Instant,
        text: String,
        unsettled: bool,
    },
    /// No more drafting for this run: its first send failed. `maybe_shown`
    /// when the outcome is unknown (the draft may be in the chat).
    Stopped { maybe_shown: bool },
}

impl LiveDraft {
    fn reference(self) -> DraftRef {
        match self {
            LiveDraft::NotYet | LiveDraft::Stopped { maybe_shown: false } => DraftRef::None,
            LiveDraft::Shown {
                platform_id,
                unsettled: false,
                ..
            } => DraftRef::Known(platform_id),
            LiveDraft::Shown {
                platform_id,
                unsettled: true,
                ..
            } => DraftRef::Stale(platform_id),
            LiveDraft::Stopped { maybe_shown: true } => DraftRef::MaybeShown,
        }
    }
}

/// What a run's reply does about its live draft.
#[derive(Debug, Clone, PartialEq, Eq)]
enum DraftRef {
    /// There is none: the reply is a fresh message.
    None,
    /// Finalize this message in place: every call on it so far has landed.
    Known(String),
    /// Delete this message, then send the reply afresh: a call on it may
    /// still land (an edit of a stopped process, or one whose outcome is
    /// unknown), and would overwrite a reply finalized in place.
    Stale(String),
    /// One may be in the chat, its id unknown: the reply is a fresh message
    /// that says so first.
    MaybeShown,
}

/// What the live draft shows: the text so far, cut to fit with an ellipsis.
fn preview(text: &str, max: usize) -> String {
    let limit = max.saturating_sub(2).max(1);
    if text.chars().count() <= limit {
        return text.to_owned();
    }
    let tail: String = text.chars().take(limit).collect();
    format!("{tail}…")
}

/// `y`/`yes` allow once, `a`/`always` allow always, `n`/`no` reject.
fn text_decision(body: &str) -> Option<ApprovalDecision> {
    match body.to_ascii_lowercase().as_str() {
        "y" | "yes" => Some(ApprovalDecision::AllowOnce),
        "a" | "always" => Some(ApprovalDecision::AllowAlways),
        "n" | "no" => Some(ApprovalDecision::RejectOnce),
        _ => None,
    }
}

/// Compares secrets without an early exit on the first difference.
fn constant_eq(a: &str, b: &str) -> bool {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// What an event adds to a run's reply in the chat: the model's text, and
/// notices for the person (an MCP server that failed to start), marked as
/// Pincer's own as the editor shows them.
fn reply_part(event: &Event) -> Option<std::borrow::Cow<'_, str>> {
    match event {
        Event::TextDelta { text } => Some(std::borrow::Cow::Borrowed(text.as_str())),
        Event::Notice { message } => {
            Some(std::borrow::Cow::Owned(format!("[pincer] {message}\n\n")))
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn approval_words() {
        assert_eq!(text_decision("Y"), Some(ApprovalDecision::AllowOnce));
        assert_eq!(text_decision("always"), Some(ApprovalDecision::AllowAlways));
        assert_eq!(text_decision("no"), Some(ApprovalDecision::RejectOnce));
        assert_eq!(text_decision("yes please"), None);
    }

    #[test]
    fn previews_fit_the_platform() {
        assert_eq!(preview("short", 100), "short");
        let long = "x".repeat(50);
        let shown = preview(&long, 20);
        assert_eq!(shown.chars().count(), 19);
        assert!(shown.ends_with('…'));
    }

    #[test]
    fn a_reply_finalizes_a_settled_draft_deletes_an_unsettled_one_and_reports_one_it_cannot_name() {
        let shown = |unsettled| LiveDraft::Shown {
            platform_id: "7".into(),
            last: Instant::now(),
            text: "partial".into(),
            unsettled,
        };
        assert_eq!(shown(false).reference(), DraftRef::Known("7".into()));
        assert_eq!(shown(true).reference(), DraftRef::Stale("7".into()));
        assert_eq!(LiveDraft::NotYet.reference(), DraftRef::None);
        assert_eq!(
            LiveDraft::Stopped { maybe_shown: false }.reference(),
            DraftRef::None
        );
        assert_eq!(
            LiveDraft::Stopped { maybe_shown: true }.reference(),
            DraftRef::MaybeShown
        );
    }

    #[test]
    fn secrets_compare_whole() {
        assert!(constant_eq("abc123", "abc123"));
        assert!(!constant_eq("abc123", "abc124"));
        assert!(!constant_eq("abc", "abcd"));
    }
}
