//! Who may talk to the channel: the senders in its `allow` list and those
//! who paired with the operator's code (`/pair CODE`, stored, so it
//! survives restarts). Anyone else is told once per process how to pair.

use std::sync::Arc;

use super::super::Received;
use super::Hub;
use super::lockout::{Wrong, wait_text};
use crate::core::channel::{ChannelMessage, ChannelWrite};
use crate::core::journal::{JournalError, Write};
use crate::core::session::now_millis;
use crate::signing::same_secret;

const NOT_ALLOWED: &str = "You are not allowed to use this Pincer. Ask its operator for the pairing code, then send /pair CODE.";

/// Whether `code` is the channel's pairing code; no code set pairs nobody.
/// In constant time: `same_secret` compares MACs of the two, so neither how
/// much of the code was right nor its length shows in the time taken.
fn pairs(expected: Option<&str>, code: &str) -> bool {
    expected.is_some_and(|expected| {
        !expected.is_empty() && same_secret(expected.as_bytes(), code.as_bytes())
    })
}

impl Hub {
    /// Whether the message's sender is allowed, or paired.
    pub(super) async fn authorized(&self, message: &ChannelMessage) -> bool {
        let Some(sender) = &message.sender else {
            return false;
        };
        self.allows(&sender.id).await
    }

    /// Whether `sender` (a platform id) is in the `allow` list or paired:
    /// for an adapter deciding on something that is no message (a Matrix
    /// invite).
    pub async fn allows(&self, sender: &str) -> bool {
        let sender = self.adapter.sender_key(sender);
        if self
            .settings
            .allow
            .iter()
            .any(|a| self.adapter.sender_key(a) == sender)
        {
            return true;
        }
        self.store
            .is_paired(self.adapter.channel(), self.adapter.account(), &sender)
            .await
            .unwrap_or_else(|err| {
                tracing::error!(error = %err, "cannot read paired senders");
                false
            })
    }

    /// A message of a sender not allowed: `/pair CODE` pairs them; anything
    /// else is refused, and the sender told how to pair once per process.
    pub(super) async fn unauthorized(self: &Arc<Self>, message: &ChannelMessage) -> Received {
        if let Some(code) = message.body.trim().strip_prefix("/pair") {
            self.pair(message, code.trim()).await;
            self.handled(message).await;
            return Received::Accepted;
        }
        let sender = message.sender.as_ref().map_or("", |s| s.id.as_str());
        if self.told.lock().insert(sender.to_owned()) {
            self.notice(message, NOT_ALLOWED).await;
        }
        self.handled(message).await;
        Received::Unauthorized
    }

    /// Who may talk to this channel: its `allow` list, whether pairing is
    /// open (a code is set) and its paired senders; never the code.
    pub async fn pairs(&self) -> Result<crate::views::ChannelPairs, JournalError> {
        let channel = self.adapter.channel();
        Ok(crate::views::ChannelPairs {
            channel: channel.to_owned(),
            pairing_open: self
                .settings
                .pairing_code
                .as_deref()
                .is_some_and(|code| !code.is_empty()),
            allow: self.settings.allow.clone(),
            pairs: self.store.pairs(Some(channel)).await?,
        })
    }

    /// Forgets a paired sender (a platform id, compared as the platform
    /// compares ids): their next message is a stranger's, told again how to
    /// pair. `Ok(None)` when they were not paired; else the sender's key.
    pub async fn revoke(&self, sender: &str) -> Result<Option<String>, JournalError> {
        let key = self.adapter.sender_key(sender);
        let revoked = self
            .store
            .commit(Write::Channel(ChannelWrite::UnpairPeer {
                channel: self.adapter.channel().to_owned(),
                sender: key.clone(),
            }))
            .await;
        match revoked {
            Ok(()) => {
                self.told
                    .lock()
                    .retain(|told| self.adapter.sender_key(told) != key);
                tracing::info!(channel = %self.adapter.channel(), sender = %key, "paired sender revoked");
                Ok(Some(key))
            }
            Err(JournalError::Conflict(_)) => Ok(None),
            Err(err) => Err(err),
        }
    }

    /// `/pair CODE`: a right code adds the sender to the paired senders; a
    /// wrong one counts towards a lockout (`lockout`), during which no code
    /// is even looked at.
    async fn pair(self: &Arc<Self>, message: &ChannelMessage, code: &str) {
        let Some(sender) = &message.sender else {
            return;
        };
        let key = self.adapter.sender_key(&sender.id);
        let now = std::time::Instant::now();
        let locked = self.lockouts.lock().locked(&key, now);
        if let Some(wait) = locked {
            self.notice(
                message,
                &format!(
                    "Too many wrong pairing codes: try again in {}.",
                    wait_text(wait)
                ),
            )
            .await;
            return;
        }
        if !pairs(self.settings.pairing_code.as_deref(), code) {
            let channel = self.adapter.channel();
            self.runtime.stats().pairing_failure(channel);
            let wrong = self.lockouts.lock().wrong(&key, now);
            let answer = match wrong {
                Wrong::Counted { .. } => "That pairing code is not right.".to_owned(),
                Wrong::LockedOut(wait) => {
                    self.runtime.stats().pairing_lockout(channel);
                    tracing::warn!(channel = %channel, sender = %key, wait_secs = wait.as_secs(), "sender locked out of pairing after wrong codes");
                    format!(
                        "That pairing code is not right. Too many wrong codes: try again in {}.",
                        wait_text(wait)
                    )
                }
            };
            self.notice(message, &answer).await;
            return;
        }
        let paired = self
            .store
            .commit(Write::Channel(ChannelWrite::PairPeer {
                channel: message.channel.clone(),
                account: message.account.clone(),
                sender: key.clone(),
                at: now_millis(),
            }))
            .await;
        match paired {
            Ok(()) => {
                self.lockouts.lock().paired(&key);
                // Told again how to pair should they be revoked one day.
                self.told
                    .lock()
                    .retain(|told| self.adapter.sender_key(told) != key);
                tracing::info!(channel = %message.channel, sender = %sender.id, "sender paired");
                self.notice(message, "Paired. Send a message to start.")
                    .await;
            }
            Err(err) => tracing::error!(error = %err, "cannot record a paired sender"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_set_code_pairs() {
        assert!(pairs(Some("s3cret"), "s3cret"));
        assert!(!pairs(Some("s3cret"), "s3cre"));
        assert!(!pairs(Some("s3cret"), ""));
        assert!(!pairs(Some(""), ""), "an empty code pairs nobody");
        assert!(!pairs(None, "anything"));
    }
}
