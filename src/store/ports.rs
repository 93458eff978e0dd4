//! The store as a backend of the core's ports: [`Journal`] (what the core
//! writes and reads), [`Audit`] (`pincer verify`), [`Counts`] (metrics) and
//! [`ChannelJournal`] (the chat channels). Each method is the store's own,
//! with its error turned into the port's.

use futures::FutureExt;

use super::{Store, StoreError};
use crate::core::approval::Grant;
use crate::core::channel::{ConversationKey, Draft, InboxEntry, IntentStatus, SendIntent};
use crate::core::event::{EventRecord, RunState};
use crate::core::ids::{RunId, SessionId};
use crate::core::journal::{
    Audit, ChannelJournal, Counts, Journal, JournalError, Reply, SessionQuery, Write,
};
use crate::core::memory::{
    Memories, MemoryError, MemoryFilter, MemoryHit, MemoryItem, MemorySearch, MemoryWrite,
};
use crate::core::receipt::Receipt;
use crate::core::run::RunInfo;
use crate::core::session::{HistoryEntry, Session};

impl From<StoreError> for JournalError {
    fn from(err: StoreError) -> Self {
        match err {
            StoreError::WriterGone => JournalError::Stopped,
            StoreError::Conflict(reason) => JournalError::Conflict(reason),
            StoreError::Fenced(reason) => JournalError::Fenced(reason),
            other @ (StoreError::CreateDir { .. }
            | StoreError::Private { .. }
            | StoreError::Open { .. }
            | StoreError::TooNew { .. }
            | StoreError::Sql(_)
            | StoreError::Corrupt(_)
            | StoreError::Write(_)
            | StoreError::Read(_)
            | StoreError::Postgres(_)
            | StoreError::Unreachable { .. }
            | StoreError::TooNewServer { .. }) => JournalError::Backend(Box::new(other)),
        }
    }
}

/// A store future with its error as the port's.
fn port<'a, T: Send + 'a>(
    future: impl Future<Output = Result<T, StoreError>> + Send + 'a,
) -> Reply<'a, T> {
    future
        .map(|result| result.map_err(JournalError::from))
        .boxed()
}

impl Journal for Store {
    fn submit(&self, write: Write) {
        Store::submit(self, write);
    }

    fn commit(&self, write: Write) -> Reply<'_, ()> {
        port(Store::commit(self, write))
    }

    fn flush(&self) -> Reply<'_, ()> {
        port(Store::flush(self))
    }

    fn session<'a>(&'a self, id: &'a SessionId) -> Reply<'a, Option<Session>> {
        port(Store::session(self, id))
    }

    fn sessions(&self, query: SessionQuery) -> Reply<'_, Vec<Session>> {
        port(Store::sessions(self, query))
    }

    fn history<'a>(&'a self, id: &'a SessionId) -> Reply<'a, Vec<HistoryEntry>> {
        port(Store::history(self, id))
    }

    fn since_compaction<'a>(&'a self, id: &'a SessionId) -> Reply<'a, Vec<HistoryEntry>> {
        port(Store::since_compaction(self, id))
    }

    fn runs<'a>(&'a self, session: &'a SessionId) -> Reply<'a, Vec<RunInfo>> {
        port(Store::runs(self, session))
    }

    fn session_cost<'a>(
        &'a self,
        session: &'a SessionId,
        except: &'a RunId,
    ) -> Reply<'a, Option<crate::core::usage::Cost>> {
        port(Store::session_cost(self, session, except))
    }

    fn runs_to_follow<'a>(
        &'a self,
        session: &'a SessionId,
        from: crate::core::journal::RunsFrom,
    ) -> Reply<'a, crate::core::journal::RunsToFollow> {
        port(Store::runs_to_follow(self, session, from))
    }

    fn run<'a>(&'a self, id: &'a RunId) -> Reply<'a, Option<RunInfo>> {
        port(Store::run(self, id))
    }

    fn waiting_runs(&self) -> Reply<'_, Vec<RunInfo>> {
        port(Store::waiting_runs(self))
    }

    fn tape<'a>(
        &'a self,
        run: &'a RunId,
        from_seq: u64,
        limit: Option<usize>,
    ) -> Reply<'a, Vec<EventRecord>> {
        match limit {
            Some(limit) => port(Store::tape_page(self, run, from_seq, limit)),
            None => port(Store::tape(self, run, from_seq)),
        }
    }

    fn grants<'a>(&'a self, session: &'a SessionId) -> Reply<'a, Vec<Grant>> {
        port(Store::grants(self, session))
    }

    fn spent<'a>(
        &'a self,
        provider: &'a str,
        since: crate::core::session::Millis,
    ) -> Reply<'a, Vec<crate::core::usage::Cost>> {
        port(Store::spent(self, provider, since))
    }

    fn trusted_roots(&self) -> Reply<'_, Vec<crate::core::hooks::Trust>> {
        port(Store::trusted_roots(self))
    }

    fn skills_last_used(&self) -> Reply<'_, Vec<(String, crate::core::session::Millis)>> {
        port(Store::skills_last_used(self))
    }

    fn controls<'a>(
        &'a self,
        session: &'a SessionId,
    ) -> Reply<'a, Vec<(i64, crate::core::control::Control)>> {
        port(Store::controls(self, session))
    }
}

impl Audit for Store {
    fn receipts(&self, from_seq: u64, limit: usize) -> Reply<'_, Vec<Receipt>> {
        port(Store::receipts(self, from_seq, limit))
    }

    fn run_receipts<'a>(&'a self, run: &'a RunId) -> Reply<'a, Vec<Receipt>> {
        port(Store::run_receipts(self, run))
    }

    fn missing_receipts(&self) -> Reply<'_, Vec<(RunId, u64, u64)>> {
        port(Store::missing_receipts(self))
    }
}

impl Counts for Store {
    fn run_counts(&self) -> Reply<'_, Vec<(RunState, u64)>> {
        port(Store::run_counts(self))
    }

    fn intent_counts(&self) -> Reply<'_, Vec<(String, IntentStatus, u64)>> {
        port(Store::intent_counts(self))
    }

    fn run_window(
        &self,
        since: crate::core::session::Millis,
        bucket_ms: i64,
    ) -> Reply<'_, crate::core::journal::RunWindow> {
        port(Store::run_window(self, since, bucket_ms))
    }

    /// A SQLite store is shared only by one machine's processes: no
    /// instances are listed.
    fn instances(&self) -> Reply<'_, Option<Vec<crate::core::lease::Instance>>> {
        Box::pin(async { Ok(None) })
    }
}

impl ChannelJournal for Store {
    fn open_intents<'a>(
        &'a self,
        channel: &'a str,
        account: &'a str,
    ) -> Reply<'a, Vec<(SendIntent, Option<String>)>> {
        port(Store::open_intents(self, channel, account))
    }

    fn intent<'a>(&'a self, id: &'a str) -> Reply<'a, Option<SendIntent>> {
        port(Store::intent(self, id))
    }

    fn intents<'a>(
        &'a self,
        channel: Option<&'a str>,
        status: Option<IntentStatus>,
        limit: usize,
    ) -> Reply<'a, Vec<SendIntent>> {
        port(Store::intents(self, channel, status, limit))
    }

    fn open_inbox<'a>(&'a self, channel: &'a str, account: &'a str) -> Reply<'a, Vec<InboxEntry>> {
        port(Store::open_inbox(self, channel, account))
    }

    fn cursor<'a>(
        &'a self,
        channel: &'a str,
        account: &'a str,
        name: &'a str,
    ) -> Reply<'a, Option<String>> {
        port(Store::cursor(self, channel, account, name))
    }

    fn cursors<'a>(&'a self, name: &'a str) -> Reply<'a, Vec<(String, String, String)>> {
        port(Store::cursors(self, name))
    }

    fn conversation<'a>(&'a self, key: &'a ConversationKey) -> Reply<'a, Option<SessionId>> {
        port(Store::conversation(self, key))
    }

    fn is_paired<'a>(
        &'a self,
        channel: &'a str,
        account: &'a str,
        sender: &'a str,
    ) -> Reply<'a, bool> {
        port(Store::is_paired(self, channel, account, sender))
    }

    fn pairs<'a>(
        &'a self,
        channel: Option<&'a str>,
    ) -> Reply<'a, Vec<crate::core::channel::Pairing>> {
        port(Store::pairs(self, channel))
    }

    fn drafts<'a>(&'a self, channel: &'a str, account: &'a str) -> Reply<'a, Vec<Draft>> {
        port(Store::drafts(self, channel, account))
    }
}

impl From<StoreError> for MemoryError {
    fn from(err: StoreError) -> Self {
        match err {
            StoreError::Conflict(reason) => MemoryError::Conflict(reason),
            other @ (StoreError::CreateDir { .. }
            | StoreError::Private { .. }
            | StoreError::Open { .. }
            | StoreError::TooNew { .. }
            | StoreError::Sql(_)
            | StoreError::Corrupt(_)
            | StoreError::WriterGone
            | StoreError::Write(_)
            | StoreError::Read(_)
            | StoreError::Fenced(_)
            | StoreError::Postgres(_)
            | StoreError::Unreachable { .. }
            | StoreError::TooNewServer { .. }) => MemoryError::Backend(Box::new(other)),
        }
    }
}

/// A store future with its error as the memory port's.
fn memory_port<'a, T: Send + 'a>(
    future: impl Future<Output = Result<T, StoreError>> + Send + 'a,
) -> crate::core::memory::Reply<'a, T> {
    future
        .map(|result| result.map_err(MemoryError::from))
        .boxed()
}

impl Memories for Store {
    fn write(&self, write: MemoryWrite) -> crate::core::memory::Reply<'_, ()> {
        memory_port(Store::commit(self, Write::Memory(write)))
    }

    fn note(&self, write: MemoryWrite) {
        Store::submit(self, Write::Memory(write));
    }

    fn get<'a>(&'a self, id: &'a str) -> crate::core::memory::Reply<'a, Option<MemoryItem>> {
        memory_port(Store::memory(self, id))
    }

    fn list(&self, filter: MemoryFilter) -> crate::core::memory::Reply<'_, Vec<MemoryItem>> {
        memory_port(Store::memories(self, filter))
    }

    fn search(&self, search: MemorySearch) -> crate::core::memory::Reply<'_, Vec<MemoryHit>> {
        memory_port(Store::search_memory(self, search))
    }

    fn unembedded<'a>(
        &'a self,
        model: &'a str,
        limit: usize,
    ) -> crate::core::memory::Reply<'a, Vec<MemoryItem>> {
        memory_port(Store::unembedded_memory(self, model, limit))
    }
}

impl crate::core::journal::Schedules for Store {
    fn schedules(&self) -> Reply<'_, Vec<crate::core::schedule::Schedule>> {
        port(Store::schedules(self))
    }

    fn fires<'a>(
        &'a self,
        schedule: Option<&'a str>,
        limit: usize,
    ) -> Reply<'a, Vec<crate::core::schedule::Fire>> {
        port(Store::schedule_fires(self, schedule, limit))
    }

    fn last_fired(&self) -> Reply<'_, Vec<(String, crate::core::session::Millis)>> {
        port(Store::schedules_last_fired(self))
    }

    fn open_fires(&self) -> Reply<'_, Vec<crate::core::schedule::Fire>> {
        port(Store::open_schedule_fires(self))
    }
}
