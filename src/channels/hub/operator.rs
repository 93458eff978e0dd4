//! What an operator reads and decides about a channel's outbox over HTTP
//! (`GET /v1/channels/{name}/outbox`, `POST
//! /v1/channels/{name}/outbox/{intent_id}`), through the process running
//! the channel. The store answers for any account, served here or not.

use super::Hub;
use crate::core::channel::{ChannelWrite, IntentStatus, Resolution, SendIntent};
use crate::core::journal::{JournalError, Write};
use crate::core::session::now_millis;

/// Why a resolution was not recorded.
#[derive(Debug)]
pub enum Unresolved {
    /// No intent of this id in this channel.
    NotFound(String),
    /// Not `unknown_after_send` (any more), or a live draft to resend.
    Refused(String),
    /// The store did not answer.
    Store(JournalError),
}

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

    /// Records the operator's decision about an `unknown_after_send`
    /// intent of this channel (conditional on it still being so) and, for
    /// a resend, wakes the outbox here; the intent as it is now.
    pub async fn resolve(
        &self,
        id: &str,
        resolution: Resolution,
    ) -> Result<SendIntent, Unresolved> {
        let missing = || {
            Unresolved::NotFound(format!(
                "no send intent {} in channel {}",
                crate::core::quote::quote(id),
                crate::core::quote::quote(self.adapter.channel())
            ))
        };
        let intent = self
            .store
            .intent(id)
            .await
            .map_err(Unresolved::Store)?
            .filter(|intent| intent.channel == self.adapter.channel())
            .ok_or_else(missing)?;
        let update = resolution
            .update(&intent, now_millis())
            .map_err(Unresolved::Refused)?;
        match self
            .store
            .commit(Write::Channel(ChannelWrite::UpdateIntent(update)))
            .await
        {
            Ok(()) => {}
            Err(JournalError::Conflict(reason)) => return Err(Unresolved::Refused(reason)),
            Err(err) => return Err(Unresolved::Store(err)),
        }
        tracing::info!(intent = %id, channel = self.adapter.channel(), resolution = resolution.as_str(), "unknown_after_send intent resolved");
        if resolution == Resolution::Resend {
            self.outbox.wake();
        }
        self.store
            .intent(id)
            .await
            .map_err(Unresolved::Store)?
            .ok_or_else(missing)
    }
}
