//! The send context: durable intents delivered through an adapter.
//!
//! An intent is committed before any platform call (`record`). Delivering it:
//! claim (`pending → sending`, with the unit about to go out as `inflight`,
//! committed) → the platform call → the part's platform id committed (and the
//! next unit made `inflight`) → after the last unit `committing` (the whole
//! receipt on disk) → `sent`. A crash leaves every intent in a state recovery
//! can act on without guessing: `pending` is sent, `committing` is finished,
//! and `sending` — a platform call may have gone through — is made again if
//! that call can be repeated (an edit, or a send whose idempotency key the
//! platform honours) and otherwise becomes `unknown_after_send`.
//!
//! A reply that replaces a stale live draft names it (`retract`): delivery
//! deletes it first and commits that before the fresh send, so a crash
//! repeats only the deletion.
//!
//! A live draft's first send (`IntentKind::Draft`) is an intent too, but the
//! hub makes its call, not this worker; recovery only marks one a dead
//! process left `unknown_after_send`, and the hub decides what the run's reply
//! does about it.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use super::{Adapter, DeliveryError};
use crate::core::channel::ChannelWrite;
use crate::core::channel::{
    DeliveryReceipt, Failure, FailureKind, IntentKind, IntentStatus, IntentUpdate, ReceiptPart,
    Resolution, SendIntent, Target, Unit,
};
use crate::core::journal::ChannelJournal;
use crate::core::journal::{JournalError, Write};
use crate::core::safety::Safety;
use crate::core::session::now_millis;

/// First retry delay, doubled per attempt up to `MAX_BACKOFF`.
const BASE_BACKOFF: Duration = Duration::from_secs(1);
const MAX_BACKOFF: Duration = Duration::from_secs(300);
/// How long the worker sleeps with nothing due (a new intent wakes it sooner).
const IDLE: Duration = Duration::from_secs(60);
/// Chats an outbox delivers to at once (`deliver_due`): a thousand chats
/// each owed a reply are not served one platform call after another.
const PARALLEL_CHATS: usize = 8;

/// What recovery found at start.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Recovered {
    /// `sending` intents whose call can be repeated, back to `pending`.
    pub resumed: usize,
    /// `sending` intents whose platform call may have happened: not resent.
    pub unknown: Vec<String>,
    /// `committing` intents finished.
    pub finished: usize,
    /// Intents too old to send now.
    pub expired: Vec<String>,
}

/// Delivers one adapter's intents, in the order they were decided.
pub struct Outbox {
    adapter: Arc<dyn Adapter>,
    store: Arc<dyn ChannelJournal>,
    expire_after: Duration,
    max_attempts: u32,
    wake: Notify,
    /// A platform's error text may echo a credential (a bot token in a URL):
    /// it is redacted before it is stored or logged.
    safety: Arc<Safety>,
    /// The channel account's lease this process delivers under
    /// (`Hub::start`): every intent write is fenced with it, so a process
    /// that lost the account (stopped past its lease while another took
    /// over) claims nothing more and sends nothing more.
    fence: parking_lot::Mutex<Option<crate::core::lease::Fence>>,
}

/// Why an operator's decision about an intent was not recorded.
#[derive(Debug, thiserror::Error)]
pub enum Unresolved {
    /// No intent of this id (in this channel).
    #[error("{0}")]
    NotFound(String),
    /// Not `unknown_after_send` (any more), or a live draft to resend.
    #[error("{0}")]
    Refused(String),
    /// The store did not answer.
    #[error(transparent)]
    Store(JournalError),
}

/// Records an operator's decision about an `unknown_after_send` intent
/// (`pincer channels resolve`, `POST /v1/channels/{name}/outbox/{intent_id}`),
/// conditional on it still being so; `channel`, when given, is the channel
/// it must belong to. The intent as it is now. Whoever serves its account
/// sends a resent one (woken at once when that is this process).
pub async fn resolve(
    store: &dyn ChannelJournal,
    id: &str,
    resolution: Resolution,
    channel: Option<&str>,
) -> Result<SendIntent, Unresolved> {
    let missing = || {
        Unresolved::NotFound(match channel {
            Some(channel) => format!(
                "no send intent {} in channel {}",
                crate::core::quote::quote(id),
                crate::core::quote::quote(channel)
            ),
            None => format!(
                "no send intent {} (pincer channels outbox --status unknown_after_send)",
                crate::core::quote::quote(id)
            ),
        })
    };
    let intent = store
        .intent(id)
        .await
        .map_err(Unresolved::Store)?
        .filter(|intent| channel.is_none_or(|c| intent.channel == c))
        .ok_or_else(missing)?;
    let update = resolution
        .update(&intent, now_millis())
        .map_err(Unresolved::Refused)?;
    match store
        .commit(Write::Channel(ChannelWrite::UpdateIntent(update)))
        .await
    {
        Ok(()) => {}
        Err(JournalError::Conflict(reason)) => return Err(Unresolved::Refused(reason)),
        Err(err) => return Err(Unresolved::Store(err)),
    }
    tracing::info!(intent = %id, channel = %intent.channel, resolution = resolution.as_str(), "unknown_after_send intent resolved");
    store
        .intent(id)
        .await
        .map_err(Unresolved::Store)?
        .ok_or_else(missing)
}

impl Outbox {
    pub fn new(
        adapter: Arc<dyn Adapter>,
        store: Arc<dyn ChannelJournal>,
        expire_after: Duration,
        max_attempts: u32,
        safety: Arc<Safety>,
    ) -> Self {
        Self {
            adapter,
            store,
            expire_after,
            max_attempts: max_attempts.max(1),
            wake: Notify::new(),
            safety,
            fence: parking_lot::Mutex::new(None),
        }
    }

    /// Fences every intent write from now on with `fence` (`None`: none).
    pub fn fence_with(&self, fence: Option<crate::core::lease::Fence>) {
        *self.fence.lock() = fence;
    }

    /// `write`, fenced with the account's lease when one is held.
    fn fenced(&self, write: ChannelWrite) -> Write {
        let write = Write::Channel(write);
        match self.fence.lock().clone() {
            Some(fence) => Write::Fenced {
                fence,
                write: Box::new(write),
            },
            None => write,
        }
    }

    /// Puts an intent on disk and wakes the worker. Deciding the same message
    /// twice (same id) records it once.
    pub async fn record(&self, intent: SendIntent) -> Result<(), JournalError> {
        self.store
            .commit(self.fenced(ChannelWrite::InsertIntent(intent)))
            .await?;
        self.wake.notify_one();
        Ok(())
    }

    /// Lets a `held` intent go out (with `units`, when its hooks rewrote
    /// it) and wakes the worker.
    pub async fn release(&self, id: &str, units: Option<Vec<Unit>>) -> Result<(), JournalError> {
        let mut update = IntentUpdate::new(
            id,
            &[IntentStatus::Held],
            IntentStatus::Pending,
            now_millis(),
        );
        update.units = units;
        self.update(update).await?;
        self.wake.notify_one();
        Ok(())
    }

    /// Keeps a `held` intent from ever going out: `withheld`, with why.
    pub async fn withhold(&self, id: &str, reason: &str) -> Result<(), JournalError> {
        let mut update = IntentUpdate::new(
            id,
            &[IntentStatus::Held],
            IntentStatus::Withheld,
            now_millis(),
        );
        update.failure = Some(Failure {
            kind: FailureKind::Permission,
            message: format!("withheld by a MessageSending hook: {reason}"),
        });
        self.update(update).await?;
        // What waited behind it in its chat may go now.
        self.wake.notify_one();
        Ok(())
    }

    /// The intents held for their hooks (a stopped process left them).
    pub async fn held(&self) -> Result<Vec<SendIntent>, JournalError> {
        Ok(self
            .store
            .open_intents(self.adapter.channel(), self.adapter.account())
            .await?
            .into_iter()
            .map(|(intent, _)| intent)
            .filter(|intent| intent.status == IntentStatus::Held)
            .collect())
    }

    /// Wakes the worker: an intent was made `pending` here.
    pub fn wake(&self) {
        self.wake.notify_one();
    }

    /// Wakes the worker when an intent is due that it was not told of:
    /// one another process (or request) made `pending` — an operator's
    /// `resend` of an `unknown_after_send` message. Called every
    /// [`super::hub::ADOPT_EVERY`] while serving, with the open intents.
    pub fn wake_for(&self, open: &[SendIntent]) {
        let now = now_millis();
        if open.iter().any(|intent| {
            intent.status == IntentStatus::Pending
                && intent.kind != IntentKind::Draft
                && intent.next_attempt_at.is_none_or(|at| at <= now)
        }) {
            self.wake.notify_one();
        }
    }

    /// The open intents of this outbox's account (held, pending, sending,
    /// committing), oldest first.
    pub async fn open(&self) -> Result<Vec<SendIntent>, JournalError> {
        Ok(self
            .store
            .open_intents(self.adapter.channel(), self.adapter.account())
            .await?
            .into_iter()
            .map(|(intent, _)| intent)
            .collect())
    }

    async fn update(&self, update: IntentUpdate) -> Result<(), JournalError> {
        self.store
            .commit(self.fenced(ChannelWrite::UpdateIntent(update)))
            .await
    }

    /// Resolves what a stopped process left: run once, before the worker,
    /// by the holder of the channel account's lease.
    pub async fn recover(&self) -> Result<Recovered, JournalError> {
        let mut report = Recovered::default();
        let open = self
            .store
            .open_intents(self.adapter.channel(), self.adapter.account())
            .await?;
        let now = now_millis();
        for (intent, _) in open {
            match intent.status {
                // This process holds the account's lease (`Hub::start`):
                // whoever claimed an intent before it lost the account, so
                // the platform call it was making may or may not have
                // happened, and it will make no more.
                IntentStatus::Sending => {
                    if intent.kind != IntentKind::Draft
                        && self.repeatable(&intent, intent.inflight.unwrap_or(0))
                    {
                        self.update(IntentUpdate::new(
                            &intent.id,
                            &[IntentStatus::Sending],
                            IntentStatus::Pending,
                            now,
                        ))
                        .await?;
                        report.resumed += 1;
                    } else {
                        let mut update = IntentUpdate::new(
                            &intent.id,
                            &[IntentStatus::Sending],
                            IntentStatus::UnknownAfterSend,
                            now,
                        );
                        update.inflight = intent.inflight;
                        update.failure = Some(Failure {
                            kind: FailureKind::Unknown,
                            message: format!(
                                "the process stopped during the platform call for part {} of {}; \
                                 it may or may not have been delivered, and {} cannot check, so it is not resent",
                                intent.inflight.map_or(1, |i| i + 1),
                                intent.units.len(),
                                self.adapter.channel()
                            ),
                        });
                        self.update(update).await?;
                        tracing::warn!(
                            intent = %intent.id,
                            channel = self.adapter.channel(),
                            "send intent left unknown after send: not resent"
                        );
                        report.unknown.push(intent.id);
                    }
                }
                IntentStatus::Committing => {
                    self.update(IntentUpdate::new(
                        &intent.id,
                        &[IntentStatus::Committing],
                        IntentStatus::Sent,
                        now,
                    ))
                    .await?;
                    report.finished += 1;
                }
                IntentStatus::Pending if self.too_old(&intent, now) => {
                    self.expire(&intent, now).await?;
                    report.expired.push(intent.id);
                }
                // Nothing was under way for these: they stay as they are.
                IntentStatus::Held
                | IntentStatus::Pending
                | IntentStatus::Sent
                | IntentStatus::Failed
                | IntentStatus::UnknownAfterSend
                | IntentStatus::Cancelled
                | IntentStatus::Expired
                | IntentStatus::Withheld => {}
            }
        }
        Ok(report)
    }

    /// Whether the platform call for unit `index` may be made again when its
    /// outcome is unknown, as the adapter declares it per operation
    /// (`Capabilities::idempotent`): the call in flight for the first unit is
    /// a stale draft's deletion while the intent still names one to retract,
    /// else the edit that finalizes a draft in place while it names one,
    /// and a send otherwise — while the platform still knows its key
    /// ([`Adapter::send_key_lifetime`], counted from the attempt's start)
    /// — (each switch is committed before the next call).
    /// A draft's own first send is never replayed here: only the hub can
    /// tell what its message shows.
    fn repeatable(&self, intent: &SendIntent, index: usize) -> bool {
        let idempotent = self.adapter.capabilities().idempotent;
        if index == 0 && intent.retract.is_some() {
            idempotent.delete
        } else if index == 0 && intent.edit_of.is_some() {
            idempotent.edit
        } else {
            // A key the platform has forgotten makes a repeat a second message.
            let fresh = self.adapter.send_key_lifetime().is_none_or(|lifetime| {
                now_millis().saturating_sub(intent.updated_at)
                    <= i64::try_from(lifetime.as_millis()).unwrap_or(i64::MAX)
            });
            idempotent.send && fresh
        }
    }

    fn too_old(&self, intent: &SendIntent, now: i64) -> bool {
        now.saturating_sub(intent.decided_at()) > self.expire_after.as_millis() as i64
    }

    async fn expire(&self, intent: &SendIntent, now: i64) -> Result<(), JournalError> {
        let mut update = IntentUpdate::new(
            &intent.id,
            &[IntentStatus::Pending],
            IntentStatus::Expired,
            now,
        );
        update.failure = Some(Failure {
            kind: FailureKind::Transient,
            message: format!(
                "not delivered within {} s of being decided; expired instead of sent late",
                self.expire_after.as_secs()
            ),
        });
        tracing::warn!(intent = %intent.id, channel = self.adapter.channel(), "send intent expired");
        self.update(update).await
    }

    /// Delivers due intents until `cancel`.
    pub async fn run(self: Arc<Self>, cancel: CancellationToken) {
        loop {
            let next_due = match self.deliver_due(&cancel).await {
                Ok(next) => next,
                Err(err) => {
                    tracing::error!(channel = self.adapter.channel(), error = %err, "outbox pass failed");
                    Some(now_millis() + 1000)
                }
            };
            let wait = next_due.map_or(IDLE, |at| {
                Duration::from_millis(at.saturating_sub(now_millis()).max(0) as u64).min(IDLE)
            });
            tokio::select! {
                _ = cancel.cancelled() => return,
                _ = self.wake.notified() => {}
                _ = tokio::time::sleep(wait) => {}
            }
        }
    }

    /// One pass over the open intents; returns when the next one falls due.
    /// Chats are delivered to side by side, up to [`PARALLEL_CHATS`] at once;
    /// a chat's own intents go one after another, in the order decided.
    async fn deliver_due(&self, cancel: &CancellationToken) -> Result<Option<i64>, JournalError> {
        let open = self
            .store
            .open_intents(self.adapter.channel(), self.adapter.account())
            .await?;
        let mut next_due: Option<i64> = None;
        // Chats with a message held for its hooks: what follows it there
        // waits, so a chat's messages arrive in the order decided.
        let mut held: Vec<Target> = Vec::new();
        let mut chats: HashMap<Target, usize> = HashMap::new();
        let mut due: Vec<Vec<SendIntent>> = Vec::new();
        for (intent, _) in open {
            if cancel.is_cancelled() {
                break;
            }
            if intent.status == IntentStatus::Held {
                held.push(intent.target);
                continue;
            }
            // A draft's first send belongs to the hub that shows it.
            if intent.status != IntentStatus::Pending
                || intent.kind == IntentKind::Draft
                || held.contains(&intent.target)
            {
                continue;
            }
            let now = now_millis();
            if let Some(at) = intent.next_attempt_at
                && at > now
            {
                next_due = Some(next_due.map_or(at, |n| n.min(at)));
                continue;
            }
            if self.too_old(&intent, now) {
                self.expire(&intent, now).await?;
                continue;
            }
            let chat = *chats.entry(intent.target.clone()).or_insert_with(|| {
                due.push(Vec::new());
                due.len() - 1
            });
            if let Some(intents) = due.get_mut(chat) {
                intents.push(intent);
            }
        }
        let passes: Vec<Result<Option<i64>, JournalError>> = futures::stream::iter(due)
            .map(|intents| self.deliver_in_order(intents, cancel))
            .buffer_unordered(PARALLEL_CHATS)
            .collect()
            .await;
        for pass in passes {
            if let Some(at) = pass? {
                next_due = Some(next_due.map_or(at, |n| n.min(at)));
            }
        }
        Ok(next_due)
    }

    /// One chat's due intents, one after another; when the first to retry
    /// falls due.
    async fn deliver_in_order(
        &self,
        intents: Vec<SendIntent>,
        cancel: &CancellationToken,
    ) -> Result<Option<i64>, JournalError> {
        let mut next_due: Option<i64> = None;
        for intent in intents {
            if cancel.is_cancelled() {
                break;
            }
            match self.deliver(intent).await {
                Ok(Some(at)) => next_due = Some(next_due.map_or(at, |n| n.min(at))),
                Ok(None) => {}
                Err(JournalError::Conflict(reason)) => {
                    tracing::debug!(%reason, "intent moved by someone else");
                }
                Err(err) => return Err(err),
            }
        }
        Ok(next_due)
    }

    /// One attempt at an intent; returns when to retry, if it should be.
    async fn deliver(&self, intent: SendIntent) -> Result<Option<i64>, JournalError> {
        let attempt = intent.attempt + 1;
        let mut receipt = intent.receipt.clone();
        let remaining: Vec<usize> = (0..intent.units.len())
            .filter(|i| !receipt.has(*i))
            .collect();
        let mut claim = IntentUpdate::new(
            &intent.id,
            &[IntentStatus::Pending],
            IntentStatus::Sending,
            now_millis(),
        );
        claim.attempt = Some(attempt);
        claim.inflight = remaining.first().copied();
        self.update(claim).await?;

        let mut intent = intent;
        if let Err(error) = self.retract(&mut intent, attempt).await {
            return self.failed(&intent, attempt, receipt, 0, error).await;
        }
        // Retracting may have put a note before the first unit.
        let remaining: Vec<usize> = (0..intent.units.len())
            .filter(|i| !receipt.has(*i))
            .collect();
        for (position, &index) in remaining.iter().enumerate() {
            let result = self.call(&mut intent, index).await;
            let platform_id = match result {
                Ok(id) => id,
                Err(error) => return self.failed(&intent, attempt, receipt, index, error).await,
            };
            receipt.parts.push(ReceiptPart { index, platform_id });
            let next = remaining.get(position + 1).copied();
            let status = if next.is_some() {
                IntentStatus::Sending
            } else {
                IntentStatus::Committing
            };
            let mut update =
                IntentUpdate::new(&intent.id, &[IntentStatus::Sending], status, now_millis());
            update.inflight = next;
            update.receipt = Some(receipt.clone());
            self.update(update).await?;
        }
        if remaining.is_empty() {
            let mut update = IntentUpdate::new(
                &intent.id,
                &[IntentStatus::Sending],
                IntentStatus::Committing,
                now_millis(),
            );
            update.receipt = Some(receipt.clone());
            self.update(update).await?;
        }
        // After-send effects would run here, between the receipt and `sent`.
        self.update(IntentUpdate::new(
            &intent.id,
            &[IntentStatus::Committing],
            IntentStatus::Sent,
            now_millis(),
        ))
        .await?;
        Ok(None)
    }

    /// Deletes the stale live draft the reply replaces, before the reply's
    /// first unit goes out as a fresh message; then commits that it is done
    /// (so recovery repeats only the deletion, which is harmless, never the
    /// fresh send) and marks the draft's own intent `cancelled`. A draft
    /// already gone counts as deleted. A failure worth retrying is returned
    /// while attempts remain; past them, or for a refusal (a message too old
    /// to delete), the reply goes out with a first part saying the draft
    /// above is stale.
    async fn retract(&self, intent: &mut SendIntent, attempt: u32) -> Result<(), DeliveryError> {
        let Some(draft) = intent.retract.clone() else {
            return Ok(());
        };
        let mut update = IntentUpdate::new(
            &intent.id,
            &[IntentStatus::Sending],
            IntentStatus::Sending,
            now_millis(),
        );
        update.inflight = Some(0);
        update.retract = Some(None);
        let deleted = match self.adapter.delete(&intent.target, &draft).await {
            Ok(()) => true,
            Err(err) if err.kind == FailureKind::NotFound => {
                tracing::debug!(intent = %intent.id, "the stale draft is gone already");
                true
            }
            Err(err)
                if matches!(
                    err.kind,
                    FailureKind::Transient | FailureKind::RateLimit | FailureKind::Unknown
                ) && attempt < self.max_attempts =>
            {
                return Err(err);
            }
            Err(err) => {
                let err = self.safety.redact(&err.to_string()).0;
                tracing::warn!(intent = %intent.id, error = %err, "a stale draft cannot be deleted; the reply says so first");
                let mut units = vec![Unit {
                    text: format!("[pincer] {}", super::hub::DRAFT_STALE),
                    ..Unit::default()
                }];
                units.extend(intent.units.iter().cloned());
                update.units = Some(units.clone());
                intent.units = units;
                false
            }
        };
        // The draft's intent first: a crash before the reply's record
        // repeats the deletion (harmless), never leaves a deleted draft
        // recorded `sent`.
        if deleted && let Some(run) = &intent.run_id {
            let mut cancelled = IntentUpdate::new(
                &crate::core::channel::draft_intent_id(run),
                &[IntentStatus::Sent],
                IntentStatus::Cancelled,
                now_millis(),
            );
            cancelled.failure = Some(Failure {
                kind: FailureKind::NotFound,
                message: format!(
                    "deleted, and {} sent as a fresh message: an edit from before a restart may still have been in flight",
                    intent.id
                ),
            });
            if let Err(err) = self.update(cancelled).await {
                tracing::debug!(intent = %intent.id, error = %err, "the deleted draft's intent not marked");
            }
        }
        self.update(update).await.map_err(|err| {
            DeliveryError::new(
                FailureKind::Transient,
                format!("cannot record that the stale draft is dealt with: {err}"),
            )
        })?;
        intent.retract = None;
        Ok(())
    }

    /// The platform call for one unit: a fresh send, or the in-place
    /// finalization of a live draft (falling back to a fresh send when the
    /// draft is gone). A unit the platform refuses in its markup is sent once
    /// more as plain text.
    ///
    /// Falling back from the edit to a fresh send is committed first (the
    /// intent no longer names the draft), so recovery knows which of the two
    /// calls a crash interrupted: the edit may be repeated, the send not.
    async fn call(&self, intent: &mut SendIntent, index: usize) -> Result<String, DeliveryError> {
        let unit = &intent.units[index];
        let key = format!("{}:{index}", intent.id);
        let reply_to = if index == 0 {
            intent.reply_to.as_deref()
        } else {
            None
        };
        if index == 0
            && let Some(draft) = &intent.edit_of
        {
            let edited = match self.adapter.edit(&intent.target, draft, unit).await {
                Err(err) if err.kind == FailureKind::InvalidPayload && unit.markup.is_some() => {
                    tracing::warn!(intent = %intent.id, error = %err, "markup refused; editing as plain text");
                    let plain = crate::core::channel::Unit {
                        markup: None,
                        ..unit.clone()
                    };
                    self.adapter.edit(&intent.target, draft, &plain).await
                }
                other => other,
            };
            match edited {
                Ok(()) => return Ok(draft.clone()),
                Err(err) if err.kind == FailureKind::NotFound => {
                    tracing::info!(intent = %intent.id, "the draft to finalize is gone; sending afresh");
                }
                Err(err) => return Err(err),
            }
            let mut update = IntentUpdate::new(
                &intent.id,
                &[IntentStatus::Sending],
                IntentStatus::Sending,
                now_millis(),
            );
            update.inflight = Some(index);
            update.edit_of = Some(None);
            self.update(update).await.map_err(|err| {
                DeliveryError::new(
                    FailureKind::Transient,
                    format!("cannot record that the draft is gone: {err}"),
                )
            })?;
            intent.edit_of = None;
        }
        let unit = &intent.units[index];
        match self
            .adapter
            .send(&intent.target, unit, reply_to, &key)
            .await
        {
            Err(err) if err.kind == FailureKind::InvalidPayload && unit.markup.is_some() => {
                tracing::warn!(intent = %intent.id, error = %err, "markup refused; sending as plain text");
                let plain = crate::core::channel::Unit {
                    markup: None,
                    ..unit.clone()
                };
                self.adapter
                    .send(&intent.target, &plain, reply_to, &key)
                    .await
            }
            other => other,
        }
    }

    /// Records a failed attempt per its class; returns when to retry.
    async fn failed(
        &self,
        intent: &SendIntent,
        attempt: u32,
        receipt: DeliveryReceipt,
        index: usize,
        mut error: DeliveryError,
    ) -> Result<Option<i64>, JournalError> {
        error.message = self.safety.redact(&error.message).0;
        let now = now_millis();
        let retryable = match error.kind {
            FailureKind::Transient | FailureKind::RateLimit => true,
            // The call may have reached the platform: repeat only what is
            // harmless to repeat.
            FailureKind::Unknown => self.repeatable(intent, index),
            FailureKind::Auth
            | FailureKind::Permission
            | FailureKind::NotFound
            | FailureKind::InvalidPayload
            | FailureKind::Conflict => false,
        };
        let failure = Some(Failure {
            kind: error.kind,
            message: format!(
                "part {} of {}: {}",
                index + 1,
                intent.units.len(),
                error.message
            ),
        });
        let (status, retry_at) = if retryable && attempt < self.max_attempts {
            let wait = error.retry_after.unwrap_or_else(|| backoff(attempt));
            (IntentStatus::Pending, Some(now + wait.as_millis() as i64))
        } else if error.kind == FailureKind::Unknown {
            (IntentStatus::UnknownAfterSend, None)
        } else {
            (IntentStatus::Failed, None)
        };
        if status == IntentStatus::Pending {
            tracing::info!(
                intent = %intent.id, attempt, error = %error, "delivery failed; will retry"
            );
        } else {
            tracing::warn!(
                intent = %intent.id, attempt, error = %error, status = status.as_str(), "delivery failed"
            );
        }
        let mut update = IntentUpdate::new(&intent.id, &[IntentStatus::Sending], status, now);
        update.next_attempt_at = retry_at;
        update.inflight = (status == IntentStatus::UnknownAfterSend).then_some(index);
        update.receipt = Some(receipt);
        update.failure = failure;
        self.update(update).await?;
        Ok(retry_at)
    }
}

/// Exponential from one second, doubling per attempt, ±20 % jitter, capped.
fn backoff(attempt: u32) -> Duration {
    let base = BASE_BACKOFF.saturating_mul(2u32.saturating_pow(attempt.saturating_sub(1)));
    base.mul_f64(0.8 + fastrand::f64() * 0.4).min(MAX_BACKOFF)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::channels::{Capabilities, Hub, Idempotence};
    use crate::core::channel::{Target, TargetKind, Unit};
    use futures::future::BoxFuture;

    /// An adapter whose calls all succeed (but a deletion it is told to
    /// refuse); only its idempotency matters here.
    #[derive(Default)]
    struct Stub {
        idempotent: Idempotence,
        /// The text of every unit sent, in order.
        sent: parking_lot::Mutex<Vec<String>>,
        /// Every message deleted, in order.
        deleted: parking_lot::Mutex<Vec<String>>,
        /// Deletions fail with this class.
        refuse_delete: Option<FailureKind>,
        /// How long a send takes.
        pause: Duration,
        /// What `send_key_lifetime` answers.
        key_lifetime: Option<Duration>,
        /// Sends under way now, and the most there ever were.
        in_flight: std::sync::atomic::AtomicUsize,
        peak: std::sync::atomic::AtomicUsize,
    }

    impl Adapter for Stub {
        fn channel(&self) -> &str {
            "chat"
        }
        fn account(&self) -> &str {
            "bot"
        }

        fn kind(&self) -> &'static str {
            "test"
        }
        fn send_key_lifetime(&self) -> Option<Duration> {
            self.key_lifetime
        }
        fn capabilities(&self) -> Capabilities {
            Capabilities {
                max_len: 100,
                length_unit: crate::channels::LengthUnit::Chars,
                edit: true,
                delete: true,
                buttons: false,
                reactions: false,
                threads: false,
                files: false,
                edit_interval: Duration::ZERO,
                markup: None,
                working_after: None,
                idempotent: self.idempotent,
            }
        }
        fn send<'a>(
            &'a self,
            _: &'a Target,
            unit: &'a Unit,
            _: Option<&'a str>,
            _: &'a str,
        ) -> BoxFuture<'a, Result<String, DeliveryError>> {
            use std::sync::atomic::Ordering::SeqCst;
            self.sent.lock().push(unit.text.clone());
            Box::pin(async move {
                let now = self.in_flight.fetch_add(1, SeqCst) + 1;
                self.peak.fetch_max(now, SeqCst);
                tokio::time::sleep(self.pause).await;
                self.in_flight.fetch_sub(1, SeqCst);
                Ok("1".to_owned())
            })
        }
        fn edit<'a>(
            &'a self,
            _: &'a Target,
            _: &'a str,
            _: &'a Unit,
        ) -> BoxFuture<'a, Result<(), DeliveryError>> {
            Box::pin(async { Ok(()) })
        }
        fn delete<'a>(
            &'a self,
            _: &'a Target,
            platform_id: &'a str,
        ) -> BoxFuture<'a, Result<(), DeliveryError>> {
            let refused = self.refuse_delete;
            if refused.is_none() {
                self.deleted.lock().push(platform_id.to_owned());
            }
            Box::pin(async move {
                match refused {
                    Some(kind) => Err(DeliveryError::new(kind, "no")),
                    None => Ok(()),
                }
            })
        }
        fn receive(self: Arc<Self>, _: Arc<Hub>, _: CancellationToken) -> BoxFuture<'static, ()> {
            Box::pin(async {})
        }
    }

    /// An intent a process claimed and left (this test process counts as
    /// gone to recovery, which runs before a process sends anything).
    fn left_sending(
        id: &str,
        kind: IntentKind,
        edit_of: Option<&str>,
        inflight: usize,
    ) -> SendIntent {
        let unit = Unit {
            text: "text".into(),
            markup: None,
            buttons: Vec::new(),
            file: None,
        };
        SendIntent {
            id: id.into(),
            channel: "chat".into(),
            account: "bot".into(),
            target: Target {
                kind: TargetKind::Direct,
                id: "c".into(),
                thread: None,
            },
            kind,
            units: vec![unit.clone(), unit],
            text: None,
            edit_of: edit_of.map(str::to_owned),
            retract: None,
            reply_to: None,
            status: IntentStatus::Sending,
            attempt: 1,
            next_attempt_at: None,
            inflight: Some(inflight),
            receipt: DeliveryReceipt::default(),
            failure: None,
            session_id: None,
            run_id: None,
            created_at: now_millis(),
            updated_at: now_millis(),
            resent_at: None,
        }
    }

    /// What recovery makes of the intents a dead process left: (resumed, unknown).
    async fn recover_with(idempotent: Idempotence) -> (Vec<String>, Vec<String>) {
        recover_after(idempotent, None).await
    }

    /// As [`recover_with`], the platform remembering send keys for
    /// `key_lifetime`, recovery starting 50 ms after the attempts began.
    async fn recover_after(
        idempotent: Idempotence,
        key_lifetime: Option<Duration>,
    ) -> (Vec<String>, Vec<String>) {
        let dir = tempfile::tempdir().unwrap();
        let (store, _) = crate::store::Store::open(&dir.path().join("pincer.db")).unwrap();
        for intent in [
            // The edit that finalizes a draft in place.
            left_sending("reply:edit", IntentKind::Reply, Some("7"), 0),
            // A fresh send.
            left_sending("reply:fresh", IntentKind::Reply, None, 0),
            // The second part after a finalizing edit: a fresh send.
            left_sending("reply:part", IntentKind::Reply, Some("7"), 1),
            // A live draft's first send: left to the hub.
            left_sending("draft:run", IntentKind::Draft, None, 0),
            // The deletion of a stale draft before a fresh reply.
            {
                let mut intent = left_sending("reply:retract", IntentKind::Reply, None, 0);
                intent.retract = Some("7".into());
                intent
            },
        ] {
            store
                .commit(Write::Channel(crate::store::ChannelWrite::InsertIntent(
                    intent,
                )))
                .await
                .unwrap();
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
        let outbox = Outbox::new(
            Arc::new(Stub {
                idempotent,
                key_lifetime,
                ..Stub::default()
            }),
            Arc::new(store.clone()),
            Duration::from_secs(900),
            8,
            Arc::new(crate::core::safety::Safety::new(
                crate::core::safety::SafetyConfig::default(),
                Vec::new(),
            )),
        );
        let mut report = outbox.recover().await.unwrap();
        report.unknown.sort();
        let mut resumed = Vec::new();
        for id in [
            "reply:edit",
            "reply:fresh",
            "reply:part",
            "draft:run",
            "reply:retract",
        ] {
            let status = store.intent(id).await.unwrap().unwrap().status;
            if status == IntentStatus::Pending {
                resumed.push(id.to_owned());
            }
        }
        assert_eq!(report.resumed, resumed.len());
        store.shutdown();
        (resumed, report.unknown)
    }

    /// Telegram's declaration: edits and deletions, not sends.
    const EDITS_AND_DELETIONS: Idempotence = Idempotence {
        send: false,
        edit: true,
        delete: true,
    };
    const EVERY_CALL: Idempotence = Idempotence {
        send: true,
        edit: true,
        delete: true,
    };

    #[tokio::test]
    async fn a_keyed_send_is_not_repeated_once_the_platform_forgot_its_key() {
        // Keys remembered for a minute: as any keyed send.
        let (resumed, _) = recover_after(EVERY_CALL, Some(Duration::from_secs(60))).await;
        assert!(resumed.contains(&"reply:fresh".to_owned()), "{resumed:?}");
        // Keys forgotten after 10 ms: the fresh sends are left unknown, the
        // edit and the deletion still repeated.
        let (resumed, unknown) = recover_after(EVERY_CALL, Some(Duration::from_millis(10))).await;
        assert_eq!(
            resumed,
            vec!["reply:edit".to_owned(), "reply:retract".to_owned()]
        );
        assert!(
            unknown.contains(&"reply:fresh".to_owned())
                && unknown.contains(&"reply:part".to_owned()),
            "{unknown:?}"
        );
    }

    #[tokio::test]
    async fn recovery_repeats_edits_and_keyed_sends_only() {
        assert_eq!(
            recover_with(EDITS_AND_DELETIONS).await,
            (
                vec!["reply:edit".to_owned(), "reply:retract".to_owned()],
                vec![
                    "draft:run".to_owned(),
                    "reply:fresh".to_owned(),
                    "reply:part".to_owned()
                ]
            )
        );
        assert_eq!(
            recover_with(EVERY_CALL).await,
            (
                vec![
                    "reply:edit".to_owned(),
                    "reply:fresh".to_owned(),
                    "reply:part".to_owned(),
                    "reply:retract".to_owned()
                ],
                vec!["draft:run".to_owned()]
            )
        );
        // Each operation as declared: keyed sends, but edits and deletions
        // the adapter does not call repeatable are not repeated.
        assert_eq!(
            recover_with(Idempotence {
                send: true,
                edit: false,
                delete: false,
            })
            .await,
            (
                vec!["reply:fresh".to_owned(), "reply:part".to_owned()],
                vec![
                    "draft:run".to_owned(),
                    "reply:edit".to_owned(),
                    "reply:retract".to_owned()
                ]
            )
        );
    }

    fn safety() -> Arc<Safety> {
        Arc::new(Safety::new(
            crate::core::safety::SafetyConfig::default(),
            Vec::new(),
        ))
    }

    /// A fresh one-unit intent to chat `chat`, in `status`.
    fn fresh(id: &str, chat: &str, status: IntentStatus, text: &str) -> SendIntent {
        let mut intent = left_sending(id, IntentKind::Reply, None, 0);
        intent.target.id = chat.into();
        intent.status = status;
        intent.attempt = 0;
        intent.inflight = None;
        intent.units.truncate(1);
        intent.units[0].text = text.into();
        intent
    }

    #[tokio::test]
    async fn a_held_message_holds_back_its_chat_only_until_released_or_withheld() {
        let dir = tempfile::tempdir().unwrap();
        let (store, _) = crate::store::Store::open(&dir.path().join("pincer.db")).unwrap();
        let stub = Arc::new(Stub::default());
        let outbox = Outbox::new(
            stub.clone(),
            Arc::new(store.clone()),
            Duration::from_secs(900),
            8,
            safety(),
        );
        // Decided in this order (the same millisecond: then by id).
        for intent in [
            fresh("a", "c1", IntentStatus::Held, "held"),
            fresh("b", "c1", IntentStatus::Pending, "after held"),
            fresh("c", "c2", IntentStatus::Pending, "other chat"),
            fresh("d", "c3", IntentStatus::Held, "to withhold"),
        ] {
            outbox.record(intent).await.unwrap();
        }
        let cancel = CancellationToken::new();
        outbox.deliver_due(&cancel).await.unwrap();
        assert_eq!(*stub.sent.lock(), ["other chat"]);
        assert_eq!(outbox.held().await.unwrap().len(), 2);
        // Released with the text a hook gave: it goes out, then what waited.
        let rewritten = vec![Unit {
            text: "rewritten".into(),
            markup: None,
            buttons: Vec::new(),
            file: None,
        }];
        outbox.release("a", Some(rewritten)).await.unwrap();
        outbox.withhold("d", "no").await.unwrap();
        outbox.deliver_due(&cancel).await.unwrap();
        assert_eq!(*stub.sent.lock(), ["other chat", "rewritten", "after held"]);
        let withheld = store.intent("d").await.unwrap().unwrap();
        assert_eq!(withheld.status, IntentStatus::Withheld);
        assert_eq!(withheld.attempt, 0);
        assert!(withheld.failure.unwrap().message.ends_with(": no"));
        // Settled once: a second decision is refused, and nothing is sent again.
        assert!(outbox.release("d", None).await.is_err());
        assert!(outbox.release("a", None).await.is_err());
        outbox.deliver_due(&cancel).await.unwrap();
        assert_eq!(stub.sent.lock().len(), 3);
        store.shutdown();
    }

    /// Chats are delivered to side by side, at most [`PARALLEL_CHATS`] at
    /// once; each chat's messages go one after another, in order.
    #[tokio::test]
    async fn chats_are_served_side_by_side_each_in_its_order() {
        let dir = tempfile::tempdir().unwrap();
        let (store, _) = crate::store::Store::open(&dir.path().join("pincer.db")).unwrap();
        let stub = Arc::new(Stub {
            pause: Duration::from_millis(200),
            ..Stub::default()
        });
        let outbox = Outbox::new(
            stub.clone(),
            Arc::new(store.clone()),
            Duration::from_secs(900),
            8,
            safety(),
        );
        for n in 0..20 {
            for k in 0..2 {
                let id = format!("m{n:02}-{k}");
                let text = format!("c{n:02}:{k}");
                outbox
                    .record(fresh(
                        &id,
                        &format!("c{n:02}"),
                        IntentStatus::Pending,
                        &text,
                    ))
                    .await
                    .unwrap();
            }
        }
        outbox.deliver_due(&CancellationToken::new()).await.unwrap();
        let sent = stub.sent.lock().clone();
        assert_eq!(sent.len(), 40);
        for n in 0..20 {
            let chat: Vec<&String> = sent
                .iter()
                .filter(|t| t.starts_with(&format!("c{n:02}:")))
                .collect();
            assert_eq!(chat, [&format!("c{n:02}:0"), &format!("c{n:02}:1")]);
        }
        assert_eq!(
            stub.peak.load(std::sync::atomic::Ordering::SeqCst),
            PARALLEL_CHATS
        );
        store.shutdown();
    }

    #[test]
    fn backoff_doubles_and_is_capped() {
        assert!(backoff(1) <= Duration::from_millis(1200));
        assert!(backoff(3) >= Duration::from_millis(3200));
        assert_eq!(backoff(30), MAX_BACKOFF);
    }

    /// A reply replacing a stale draft: the draft deleted first and its
    /// intent marked `cancelled`, the deletion committed, then the fresh
    /// send; a refused deletion puts a note before the reply instead.
    #[tokio::test]
    async fn a_stale_draft_is_deleted_before_the_fresh_reply_or_named_when_it_cannot_be() {
        for refuse in [None, Some(FailureKind::Permission)] {
            let dir = tempfile::tempdir().unwrap();
            let (store, _) = crate::store::Store::open(&dir.path().join("pincer.db")).unwrap();
            let stub = Arc::new(Stub {
                refuse_delete: refuse,
                ..Stub::default()
            });
            let outbox = Outbox::new(
                stub.clone(),
                Arc::new(store.clone()),
                Duration::from_secs(900),
                8,
                safety(),
            );
            let run = crate::core::ids::RunId::from_string("run_1".to_owned());
            let mut draft = fresh("draft:run_1", "c", IntentStatus::Sent, "partial");
            draft.kind = IntentKind::Draft;
            draft.receipt = DeliveryReceipt {
                parts: vec![ReceiptPart {
                    index: 0,
                    platform_id: "7".into(),
                }],
            };
            store
                .commit(Write::Channel(ChannelWrite::InsertIntent(draft)))
                .await
                .unwrap();
            let mut reply = fresh("reply:run_1", "c", IntentStatus::Pending, "whole");
            reply.retract = Some("7".into());
            reply.run_id = Some(run);
            outbox.record(reply).await.unwrap();
            outbox.deliver_due(&CancellationToken::new()).await.unwrap();

            let reply = store.intent("reply:run_1").await.unwrap().unwrap();
            let draft = store.intent("draft:run_1").await.unwrap().unwrap();
            assert_eq!(reply.status, IntentStatus::Sent);
            assert_eq!(reply.retract, None);
            match refuse {
                None => {
                    assert_eq!(*stub.deleted.lock(), ["7"]);
                    assert_eq!(*stub.sent.lock(), ["whole"]);
                    assert_eq!(draft.status, IntentStatus::Cancelled);
                    assert_eq!(reply.units.len(), 1);
                }
                Some(_) => {
                    assert!(stub.deleted.lock().is_empty());
                    let sent = stub.sent.lock().clone();
                    assert_eq!(sent.len(), 2);
                    assert!(
                        sent[0].starts_with("[pincer] The partial draft"),
                        "{sent:?}"
                    );
                    assert_eq!(sent[1], "whole");
                    assert_eq!(draft.status, IntentStatus::Sent);
                    assert_eq!(reply.units.len(), 2);
                    assert_eq!(reply.receipt.parts.len(), 2);
                }
            }
            store.shutdown();
        }
    }
}
