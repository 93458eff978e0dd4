//! What an operator reads and decides about a channel's outbox over HTTP
//! (`GET /v1/channels/{name}/outbox`, `POST
//! /v1/channels/{name}/outbox/{intent_id}`), through the process running
//! the channel. The store answers for any account, served here or not.

use super::Hub;
use crate::channels::outbox::{self, Unresolved};
use crate::core::channel::{IntentStatus, Resolution, SendIntent};
use crate::core::journal::JournalError;

impl Hub {
    /// This channel's intents, optionally of one status, most recently
    /// changed first, at most `limit`.
    pub async fn intents(
        &self,
        status: Option<IntentStatus>,
        limit: usize,
    ) -> Result<Vec<SendIntent>, JournalError> {
        self.store
            .intents(Some(self.adapter.channel()), status, limit)
            .await
    }

    /// Records the operator's decision about an `unknown_after_send` intent
    /// of this channel and, for a resend, wakes the outbox here; the intent
    /// as it is now.
    pub async fn resolve(
        &self,
        id: &str,
        resolution: Resolution,
    ) -> Result<SendIntent, Unresolved> {
        let intent = outbox::resolve(
            self.store.as_ref(),
            id,
            resolution,
            Some(self.adapter.channel()),
        )
        .await?;
        if resolution == Resolution::Resend {
            self.outbox.wake();
        }
        Ok(intent)
    }
}
