//! The send context: durable intents delivered through an adapter.
//!
//! An intent is committed before any platform call (`record`). Delivering it:
//! claim (`pending → sending`, with the unit about to go out as `inflight`,
//! committed) → the platform call → the part's platform id committed (and the
//! next unit made `inflight`) → after the last unit `committing` (the whole
//! receipt on disk) → `sent`. A crash leaves every intent in a state recovery
//! can act on without guessing: `pending` is sent, `committing` is finished,
//! and `sending` — a platform call may have gone through — becomes
//! `unknown_after_send` unless the adapter deduplicates by idempotency key.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use super::{Adapter, DeliveryError};
use crate::core::channel::{
    DeliveryReceipt, Failure, FailureKind, IntentStatus, IntentUpdate, ReceiptPart, SendIntent,
};
use crate::core::safety::Safety;
use crate::core::session::now_millis;
use crate::store::{ChannelWrite, Store, StoreError, Write};

/// First retry delay, doubled per attempt up to `MAX_BACKOFF`.
const BASE_BACKOFF: Duration = Duration::from_secs(1);
const MAX_BACKOFF: Duration = Duration::from_secs(300);
/// How long the worker sleeps with nothing due (a new intent wakes it sooner).
const IDLE: Duration = Duration::from_secs(60);

/// What recovery found at start.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Recovered {
    /// `sending` intents resumed (the adapter deduplicates) or left `pending`.
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
    store: Store,
    expire_after: Duration,
    max_attempts: u32,
    wake: Notify,
    /// A platform's error text may echo a credential (a bot token in a URL):
    /// it is redacted before it is stored or logged.
    safety: Arc<Safety>,
}

impl Outbox {
    pub fn new(
        adapter: Arc<dyn Adapter>,
        store: Store,
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
        }
    }

    /// Puts an intent on disk and wakes the worker. Deciding the same message
    /// twice (same id) records it once.
    pub async fn record(&self, intent: SendIntent) -> Result<(), StoreError> {
        self.store
            .commit(Write::Channel(ChannelWrite::InsertIntent(intent)))
            .await?;
        self.wake.notify_one();
        Ok(())
    }

    async fn update(&self, update: IntentUpdate) -> Result<(), StoreError> {
        self.store
            .commit(Write::Channel(ChannelWrite::UpdateIntent(update)))
            .await
    }

    /// Resolves what a stopped process left: run once, before the worker.
    pub async fn recover(&self) -> Result<Recovered, StoreError> {
        let mut report = Recovered::default();
        let open = self
            .store
            .open_intents(self.adapter.channel(), self.adapter.account())
            .await?;
        let now = now_millis();
        for (intent, owner) in open {
            match intent.status {
                IntentStatus::Sending => {
                    if owner.as_deref().is_some_and(crate::store::owner_is_alive) {
                        continue; // another live process is delivering it
                    }
                    if self.adapter.idempotent() {
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
                _ => {}
            }
        }
        Ok(report)
    }

    fn too_old(&self, intent: &SendIntent, now: i64) -> bool {
        now.saturating_sub(intent.created_at) > self.expire_after.as_millis() as i64
    }

    async fn expire(&self, intent: &SendIntent, now: i64) -> Result<(), StoreError> {
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
    async fn deliver_due(&self, cancel: &CancellationToken) -> Result<Option<i64>, StoreError> {
        let open = self
            .store
            .open_intents(self.adapter.channel(), self.adapter.account())
            .await?;
        let mut next_due: Option<i64> = None;
        for (intent, _) in open {
            if cancel.is_cancelled() {
                break;
            }
            if intent.status != IntentStatus::Pending {
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
            match self.deliver(intent).await {
                Ok(Some(at)) => next_due = Some(next_due.map_or(at, |n| n.min(at))),
                Ok(None) => {}
                Err(StoreError::Conflict(reason)) => {
                    tracing::debug!(%reason, "intent moved by someone else");
                }
                Err(err) => return Err(err),
            }
        }
        Ok(next_due)
    }

    /// One attempt at an intent; returns when to retry, if it should be.
    async fn deliver(&self, intent: SendIntent) -> Result<Option<i64>, StoreError> {
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

        for (position, &index) in remaining.iter().enumerate() {
            let unit = &intent.units[index];
            let result = self.call(&intent, index, unit).await;
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

    /// The platform call for one unit: a fresh send, or the in-place
    /// finalization of a live draft (falling back to a fresh send when the
    /// draft is gone). A unit the platform refuses in its markup is sent once
    /// more as plain text.
    async fn call(
        &self,
        intent: &SendIntent,
        index: usize,
        unit: &crate::core::channel::Unit,
    ) -> Result<String, DeliveryError> {
        let key = format!("{}:{index}", intent.id);
        let reply_to = if index == 0 {
            intent.reply_to.as_deref()
        } else {
            None
        };
        if index == 0
            && let Some(draft) = &intent.edit_of
        {
            match self.adapter.edit(&intent.target, draft, unit).await {
                Ok(()) => return Ok(draft.clone()),
                Err(err) if err.kind == FailureKind::NotFound => {
                    tracing::info!(intent = %intent.id, "the draft to finalize is gone; sending afresh");
                }
                Err(err) => return Err(err),
            }
        }
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
    ) -> Result<Option<i64>, StoreError> {
        error.message = self.safety.redact(&error.message).0;
        let now = now_millis();
        let retryable = match error.kind {
            FailureKind::Transient | FailureKind::RateLimit => true,
            // The call may have reached the platform: replay only if it dedupes.
            FailureKind::Unknown => self.adapter.idempotent(),
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
        match status {
            IntentStatus::Pending => tracing::info!(
                intent = %intent.id, attempt, error = %error, "delivery failed; will retry"
            ),
            _ => tracing::warn!(
                intent = %intent.id, attempt, error = %error, status = status.as_str(), "delivery failed"
            ),
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

    #[test]
    fn backoff_doubles_and_is_capped() {
        assert!(backoff(1) <= Duration::from_millis(1200));
        assert!(backoff(3) >= Duration::from_millis(3200));
        assert_eq!(backoff(30), MAX_BACKOFF);
    }
}
