//! The chat channels' records in memory: the inbox, the outbox, cursors,
//! conversation mappings and paired senders, kept as the SQLite store keeps
//! them (`store::channels`), so both pass `core::channel::contract`; and
//! the in-memory journal as [`ChannelJournal`] and [`Counts`].
//!
//! Like the whole in-memory journal, this file is built for tests only
//! (`#[cfg(test)] pub mod memory` in `core::journal`). The attribute below
//! says so again for the architecture checks (`tests/it/architecture.rs`),
//! which leave out test code from a `#[cfg(test)]` line to the end of its
//! file: the journal's own `Write::Channel` already names `core::channel`,
//! which names `core::journal`.

#[cfg(test)]
use crate::core::journal::ChannelJournal;
use std::collections::HashMap;

use super::MemoryJournal;
use crate::core::channel::{
    ChannelWrite, ConversationKey, Draft, InboxEntry, InboxState, IntentStatus, IntentUpdate,
    Pairing, SendIntent,
};
use crate::core::event::RunState;
use crate::core::ids::SessionId;
use crate::core::journal::{Counts, JournalError, Reply};

/// (channel, account, name): the key of a cursor, an inbox entry (the name
/// being the platform's message id) and a paired sender.
type Key = (String, String, String);

fn key(channel: &str, account: &str, name: &str) -> Key {
    (channel.to_owned(), account.to_owned(), name.to_owned())
}

#[derive(Default, Clone)]
pub(super) struct Channels {
    inbox: HashMap<Key, InboxEntry>,
    outbox: HashMap<String, SendIntent>,
    cursors: HashMap<Key, String>,
    conversations: HashMap<ConversationKey, SessionId>,
    /// Paired senders and when they paired.
    peers: HashMap<Key, crate::core::session::Millis>,
}

impl Channels {
    pub(super) fn apply(&mut self, write: ChannelWrite) -> Result<(), JournalError> {
        match write {
            ChannelWrite::RecordInbound {
                message,
                cursor,
                at,
            } => {
                // The cursor advances even past a message already recorded.
                if let Some((name, value)) = cursor {
                    self.cursors
                        .insert(key(&message.channel, &message.account, &name), value);
                }
                let id = key(&message.channel, &message.account, &message.id);
                if self.inbox.contains_key(&id) {
                    return Err(JournalError::Conflict(format!(
                        "message {} of {}/{} was already received",
                        message.id, message.channel, message.account
                    )));
                }
                self.inbox.insert(
                    id,
                    InboxEntry {
                        message,
                        state: InboxState::Recorded,
                        run_id: None,
                        received_at: at,
                    },
                );
            }
            ChannelWrite::SetInboxState {
                channel,
                account,
                ids,
                state,
                run_id,
                at: _,
            } => {
                for id in ids {
                    if let Some(entry) = self.inbox.get_mut(&key(&channel, &account, &id)) {
                        entry.state = state;
                        if run_id.is_some() {
                            entry.run_id = run_id.clone();
                        }
                    }
                }
            }
            ChannelWrite::PutCursor {
                channel,
                account,
                name,
                value,
            } => {
                self.cursors.insert(key(&channel, &account, &name), value);
            }
            ChannelWrite::InsertIntent(intent) => {
                // Deciding twice records it once: the first stays as it is.
                self.outbox.entry(intent.id.clone()).or_insert(intent);
            }
            ChannelWrite::UpdateIntent(update) => self.update_intent(update)?,
            ChannelWrite::MapConversation {
                key, session_id, ..
            } => {
                self.conversations.insert(key, session_id);
            }
            ChannelWrite::PairPeer {
                channel,
                account,
                sender,
                at,
            } => {
                self.peers
                    .entry(key(&channel, &account, &sender))
                    .or_insert(at);
            }
            ChannelWrite::UnpairPeer { channel, sender } => {
                let before = self.peers.len();
                self.peers
                    .retain(|(c, _, s), _| !(*c == channel && *s == sender));
                if self.peers.len() == before {
                    return Err(JournalError::Conflict(format!(
                        "{} is not paired on channel {}",
                        crate::core::quote::quote(&sender),
                        crate::core::quote::quote(&channel)
                    )));
                }
            }
            // The live-draft table of earlier versions was never kept here.
            ChannelWrite::DeleteDraft { .. } => {}
        }
        Ok(())
    }

    fn update_intent(&mut self, update: IntentUpdate) -> Result<(), JournalError> {
        let Some(intent) = self.outbox.get_mut(&update.id) else {
            return Err(JournalError::Conflict(format!(
                "no send intent {}",
                update.id
            )));
        };
        update.apply(intent).map_err(JournalError::Conflict)
    }

    /// Whether a conversation of the channel named `channel` maps `session`.
    pub(super) fn maps(&self, channel: &str, session: &SessionId) -> bool {
        self.conversations
            .iter()
            .any(|(key, mapped)| key.channel == channel && mapped == session)
    }

    /// Forgets the chat mappings of deleted sessions.
    pub(super) fn forget_sessions(&mut self, gone: &[SessionId]) {
        self.conversations
            .retain(|_, session| !gone.contains(session));
    }

    pub(super) fn open_intents(&self, channel: &str, account: &str) -> Vec<SendIntent> {
        let mut open: Vec<SendIntent> = self
            .outbox
            .values()
            .filter(|i| i.channel == channel && i.account == account && i.status.is_open())
            .cloned()
            .collect();
        open.sort_by(|a, b| (a.created_at, &a.id).cmp(&(b.created_at, &b.id)));
        open
    }

    pub(super) fn intent(&self, id: &str) -> Option<SendIntent> {
        self.outbox.get(id).cloned()
    }

    pub(super) fn intents(
        &self,
        channel: Option<&str>,
        status: Option<IntentStatus>,
        limit: usize,
    ) -> Vec<SendIntent> {
        let mut found: Vec<SendIntent> = self
            .outbox
            .values()
            .filter(|i| channel.is_none_or(|c| i.channel == c))
            .filter(|i| status.is_none_or(|s| i.status == s))
            .cloned()
            .collect();
        found.sort_by(|a, b| {
            b.updated_at
                .cmp(&a.updated_at)
                .then_with(|| a.id.cmp(&b.id))
        });
        found.truncate(limit);
        found
    }

    pub(super) fn intent_counts(&self) -> Vec<(String, IntentStatus, u64)> {
        let mut counts: HashMap<(String, IntentStatus), u64> = HashMap::new();
        for intent in self.outbox.values() {
            *counts
                .entry((intent.channel.clone(), intent.status))
                .or_default() += 1;
        }
        let mut counts: Vec<(String, IntentStatus, u64)> = counts
            .into_iter()
            .map(|((channel, status), n)| (channel, status, n))
            .collect();
        counts.sort_by(|a, b| (&a.0, a.1.as_str()).cmp(&(&b.0, b.1.as_str())));
        counts
    }

    pub(super) fn open_inbox(&self, channel: &str, account: &str) -> Vec<InboxEntry> {
        let mut open: Vec<InboxEntry> = self
            .inbox
            .values()
            .filter(|e| {
                e.message.channel == channel
                    && e.message.account == account
                    && matches!(e.state, InboxState::Recorded | InboxState::Dispatched)
            })
            .cloned()
            .collect();
        open.sort_by(|a, b| (a.received_at, &a.message.id).cmp(&(b.received_at, &b.message.id)));
        open
    }

    pub(super) fn cursor(&self, channel: &str, account: &str, name: &str) -> Option<String> {
        self.cursors.get(&key(channel, account, name)).cloned()
    }

    pub(super) fn cursors(&self, name: &str) -> Vec<(String, String, String)> {
        let mut found: Vec<(String, String, String)> = self
            .cursors
            .iter()
            .filter(|((_, _, n), _)| n == name)
            .map(|((channel, account, _), value)| (channel.clone(), account.clone(), value.clone()))
            .collect();
        found.sort();
        found
    }

    pub(super) fn conversation(&self, key: &ConversationKey) -> Option<SessionId> {
        self.conversations.get(key).cloned()
    }

    pub(super) fn is_paired(&self, channel: &str, account: &str, sender: &str) -> bool {
        self.peers.contains_key(&key(channel, account, sender))
    }

    pub(super) fn pairs(&self, channel: Option<&str>) -> Vec<Pairing> {
        let mut found: Vec<Pairing> = self
            .peers
            .iter()
            .filter(|((c, _, _), _)| channel.is_none_or(|channel| c == channel))
            .map(|((channel, account, sender), at)| Pairing {
                channel: channel.clone(),
                account: account.clone(),
                sender: sender.clone(),
                paired_at: *at,
            })
            .collect();
        found.sort_by(|a, b| {
            (&a.channel, &a.account, a.paired_at, &a.sender).cmp(&(
                &b.channel,
                &b.account,
                b.paired_at,
                &b.sender,
            ))
        });
        found
    }
}

impl Counts for MemoryJournal {
    fn run_counts(&self) -> Reply<'_, Vec<(RunState, u64)>> {
        self.read(|state| {
            let mut counts: Vec<(RunState, u64)> = Vec::new();
            for run in state.runs.values() {
                match counts.iter_mut().find(|(s, _)| *s == run.state) {
                    Some((_, n)) => *n += 1,
                    None => counts.push((run.state, 1)),
                }
            }
            counts.sort_by_key(|(s, _)| s.as_str());
            counts
        })
    }

    fn intent_counts(&self) -> Reply<'_, Vec<(String, IntentStatus, u64)>> {
        self.read(|state| state.channels.intent_counts())
    }

    fn run_window(
        &self,
        since: crate::core::session::Millis,
        bucket_ms: i64,
    ) -> Reply<'_, crate::core::journal::RunWindow> {
        self.read(move |state| {
            run_window(
                state.runs.values().filter(|run| run.created_at >= since),
                since,
                bucket_ms,
            )
        })
    }

    fn instances(&self) -> Reply<'_, Option<Vec<crate::core::lease::Instance>>> {
        Box::pin(async { Ok(None) })
    }
}

impl ChannelJournal for MemoryJournal {
    /// Nobody's claim is named here: every owner is `None`.
    fn open_intents<'a>(
        &'a self,
        channel: &'a str,
        account: &'a str,
    ) -> Reply<'a, Vec<(SendIntent, Option<String>)>> {
        self.read(|state| {
            state
                .channels
                .open_intents(channel, account)
                .into_iter()
                .map(|intent| (intent, None))
                .collect()
        })
    }

    fn intent<'a>(&'a self, id: &'a str) -> Reply<'a, Option<SendIntent>> {
        self.read(|state| state.channels.intent(id))
    }

    fn intents<'a>(
        &'a self,
        channel: Option<&'a str>,
        status: Option<IntentStatus>,
        limit: usize,
    ) -> Reply<'a, Vec<SendIntent>> {
        self.read(move |state| state.channels.intents(channel, status, limit))
    }

    fn open_inbox<'a>(&'a self, channel: &'a str, account: &'a str) -> Reply<'a, Vec<InboxEntry>> {
        self.read(|state| state.channels.open_inbox(channel, account))
    }

    fn cursor<'a>(
        &'a self,
        channel: &'a str,
        account: &'a str,
        name: &'a str,
    ) -> Reply<'a, Option<String>> {
        self.read(|state| state.channels.cursor(channel, account, name))
    }

    fn cursors<'a>(&'a self, name: &'a str) -> Reply<'a, Vec<(String, String, String)>> {
        self.read(|state| state.channels.cursors(name))
    }

    fn conversation<'a>(&'a self, key: &'a ConversationKey) -> Reply<'a, Option<SessionId>> {
        self.read(|state| state.channels.conversation(key))
    }

    fn is_paired<'a>(
        &'a self,
        channel: &'a str,
        account: &'a str,
        sender: &'a str,
    ) -> Reply<'a, bool> {
        self.read(|state| state.channels.is_paired(channel, account, sender))
    }

    fn pairs<'a>(&'a self, channel: Option<&'a str>) -> Reply<'a, Vec<Pairing>> {
        self.read(|state| state.channels.pairs(channel))
    }

    /// Drafts are `draft:RUN` intents; the live-draft table of earlier
    /// versions, which this reads in the store, was never kept here.
    fn drafts<'a>(&'a self, _channel: &'a str, _account: &'a str) -> Reply<'a, Vec<Draft>> {
        self.read(|_| Vec::new())
    }
}

/// The runs of a window summed, as the stores' queries sum them.
fn run_window<'a>(
    runs: impl Iterator<Item = &'a crate::core::run::RunInfo>,
    since: crate::core::session::Millis,
    bucket_ms: i64,
) -> crate::core::journal::RunWindow {
    use crate::core::journal::{RunWindow, WindowBucket, nearest_rank};
    let mut window = RunWindow::default();
    let mut durations = Vec::new();
    for run in runs {
        match window.by_state.iter_mut().find(|(s, _)| *s == run.state) {
            Some((_, n)) => *n += 1,
            None => window.by_state.push((run.state, 1)),
        }
        window.input_tokens += run.usage.input_tokens;
        window.output_tokens += run.usage.output_tokens;
        if let Some(cost) = &run.cost {
            match window.cost.iter_mut().find(|c| c.currency == cost.currency) {
                Some(sum) => sum.amount += cost.amount,
                None => window.cost.push(cost.clone()),
            }
        }
        if let (Some(start), Some(end)) = (run.started_at, run.ended_at) {
            durations.push(end - start);
        }
        let index = u64::try_from((run.created_at - since) / bucket_ms.max(1)).unwrap_or(0);
        let failed = u64::from(run.state == RunState::Failed);
        match window.buckets.iter_mut().find(|b| b.index == index) {
            Some(bucket) => {
                bucket.runs += 1;
                bucket.failed += failed;
            }
            None => window.buckets.push(WindowBucket {
                index,
                runs: 1,
                failed,
            }),
        }
    }
    window.by_state.sort_by_key(|(s, _)| s.as_str());
    window.cost.sort_by(|a, b| a.currency.cmp(&b.currency));
    window.buckets.sort_by_key(|b| b.index);
    durations.sort_unstable();
    window.ended = durations.len() as u64;
    let at = |percent| {
        nearest_rank(window.ended, percent).and_then(|rank| {
            durations
                .get(usize::try_from(rank).unwrap_or(usize::MAX))
                .copied()
        })
    };
    window.p50_ms = at(50);
    window.p95_ms = at(95);
    window
}
