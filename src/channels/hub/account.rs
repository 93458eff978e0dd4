//! The channel account's lease: one process serves an account at a time.
//! This one serves it while it holds the lease, stands by while another
//! does, and takes over when that lease lapses (`docs/channels.md`, "One
//! process per account").

use std::sync::Arc;

use tokio_util::sync::CancellationToken;

use super::{Hub, HubError};
use crate::core::lease::{Lease, LeaseError, LeaseKey};
use crate::core::runtime::LeaseHolding;

/// The lease this process serves the account under, and the token that
/// stops serving it; `None` while standing by.
type Serving = Option<(Lease, CancellationToken)>;

impl Hub {
    /// Claims the account's lease for this process, now.
    async fn claim_lease(&self, holding: &LeaseHolding) -> Result<Lease, LeaseError> {
        let key = LeaseKey::channel(self.adapter.channel(), self.adapter.account());
        holding
            .leases
            .claim(
                &key,
                &holding.holder,
                holding.clock.now_millis(),
                holding.timing.ttl_ms,
            )
            .await
    }

    /// Serves the account now if its lease is free (or leases are not kept),
    /// else stands by; either way a task then keeps the lease until `cancel`.
    pub(super) async fn take_account(self: &Arc<Self>) -> Result<(), HubError> {
        let Some(holding) = self.runtime.lease_holding() else {
            return self.serve(self.cancel.clone()).await;
        };
        let claimed = self.claim_lease(&holding).await;
        match claimed {
            Ok(lease) => {
                let serving = self.cancel.child_token();
                self.serve_under(&lease, serving.clone()).await?;
                let keeping = self.clone().keep_account(holding, Some((lease, serving)));
                self.tasks.spawn(keeping);
            }
            Err(LeaseError::Held { holder: other, .. }) => {
                tracing::warn!(
                    channel = self.adapter.channel(),
                    account = self.adapter.account(),
                    holder = %other,
                    "another pincer process serves this channel account; standing by to take over if its lease lapses"
                );
                self.tasks.spawn(self.clone().keep_account(holding, None));
            }
            Err(err) => return Err(HubError::Lease(err)),
        }
        Ok(())
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

    /// Recovers what a stopped process left, then starts the outbox worker,
    /// the adoption of messages other processes recorded (`deliver`) and
    /// the adapter's receive loop, all until `serving` is cancelled.
    async fn serve(self: &Arc<Self>, serving: CancellationToken) -> Result<(), HubError> {
        self.recover().await?;
        self.serving
            .store(true, std::sync::atomic::Ordering::Relaxed);
        let hub = self.clone();
        let stopped = serving.clone();
        self.tasks.spawn(async move {
            stopped.cancelled().await;
            hub.serving
                .store(false, std::sync::atomic::Ordering::Relaxed);
            hub.down("not served by this process any more");
        });
        self.tasks.spawn(self.outbox.clone().run(serving.clone()));
        self.tasks.spawn(self.clone().adopt(serving.clone()));
        self.tasks
            .spawn(self.adapter.clone().receive(self.clone(), serving));
        Ok(())
    }

    /// Keeps the account's lease renewed while serving (`serving`), and
    /// waits for it while another process holds it, until `cancel`.
    async fn keep_account(self: Arc<Self>, holding: LeaseHolding, mut serving: Serving) {
        let timing = holding.timing;
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
                Some((lease, token)) => self.renew_account(&holding, lease, token).await,
                None => self.claim_account(&holding).await,
            };
        }
        if let Some((lease, _)) = serving
            && let Err(err) = holding.leases.release(&lease).await
        {
            tracing::debug!(error = %err, "cannot release the channel account's lease");
        }
    }

    /// Renews the lease served under; a lease lost stops serving.
    async fn renew_account(
        &self,
        holding: &LeaseHolding,
        lease: Lease,
        token: CancellationToken,
    ) -> Serving {
        let renewed = holding
            .leases
            .renew(&lease, holding.clock.now_millis(), holding.timing.ttl_ms)
            .await;
        match renewed {
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

    /// Standing by: takes the lease over if it lapsed, and serves under it.
    async fn claim_account(self: &Arc<Self>, holding: &LeaseHolding) -> Serving {
        let claimed = self.claim_lease(holding).await;
        let lease = match claimed {
            Ok(lease) => lease,
            Err(LeaseError::Held { .. }) => return None,
            Err(err) => {
                tracing::warn!(channel = self.adapter.channel(), error = %err, "cannot take the channel account's lease");
                return None;
            }
        };
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
                let _ = holding.leases.release(&lease).await;
                None
            }
        }
    }
}
