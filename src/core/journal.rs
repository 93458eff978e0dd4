//! The journal: the port through which the core keeps what must outlive the
//! process, and the contract every backend behind it keeps.
//!
//! The core writes sessions, runs, messages, the tape, receipts and grants
//! through [`Journal`], and reads back only what it needs to resume a
//! session, replay a run to a lagging subscriber or find an edit to undo. It
//! knows nothing of how a backend stores them: the SQLite store
//! (`crate::store`) is one backend; a server database would be another. Faces
//! that need a backend's other queries (metrics, `pincer verify`, the chat
//! channels' outbox) get them from the composition root through narrow traits
//! of their own ([`Audit`], [`Counts`], [`ChannelJournal`]), not
//! through the runtime.
//!
//! # The contract
//!
//! Every backend keeps these; `contract` (built for tests only) is the suite that
//! checks them, run against each backend.
//!
//! 1. **Submission order.** Writes take effect in the order they were
//!    submitted ([`Journal::submit`] or [`Journal::commit`]), across both
//!    calls: a read that sees a write sees every write submitted before it.
//! 2. **Durability.** [`Journal::commit`] returns `Ok` only once the write
//!    and every write submitted before it are durable (they survive a crash
//!    of the process and of the machine). [`Journal::flush`] does the same
//!    without a write of its own. A write only submitted may be lost in a
//!    crash, and so may everything submitted after it, but never a write
//!    before one that was committed.
//! 3. **All or nothing.** A [`Write::Together`] lands whole or not at all; a
//!    write that fails (a conflict) changes nothing.
//! 4. **The tape.** A run's events are numbered from 0 without gaps, by the
//!    core; the journal stores them as given and never changes or reorders
//!    one. [`Journal::tape`] returns them in order of their number.
//! 5. **Receipts.** [`Write::AppendReceipt`] is numbered and linked to the
//!    newest stored receipt inside the backend's own transaction, so the
//!    hash chain has one order even when several processes share a backend.
//! 6. **Reads see the committed state.** A read returns what was durable at
//!    some moment at or after the last `flush`/`commit` the caller awaited.
//! 7. **Stopping.** Once the backend is stopped, `commit` and `flush` fail
//!    with [`JournalError::Stopped`]; nothing submitted before the stop is
//!    lost.

#[cfg(test)]
pub mod contract;
#[cfg(test)]
pub mod memory;

use std::path::PathBuf;

use futures::future::BoxFuture;
use thiserror::Error;

use super::approval::Grant;
use super::channel::{ChannelWrite, ConversationKey, Draft, InboxEntry, IntentStatus, SendIntent};
use super::event::{EventRecord, RunState, StopReason, Usage};
use super::ids::{RunId, SessionId};
use super::models::Cost;
use super::receipt::{Receipt, ReceiptBody};
use super::run::RunInfo;
use super::session::{HistoryEntry, Message, Millis, Mode, Origin, Session};

/// Why a journal operation failed.
#[derive(Debug, Error)]
pub enum JournalError {
    /// The backend has stopped; nothing more can be written or awaited.
    #[error("the store's writer thread has stopped")]
    Stopped,
    /// A conditional write found the row not in the state it expected (or a
    /// row that must be new already there). Nothing was changed.
    #[error("{0}")]
    Conflict(String),
    /// A fenced write (`Write::Fenced`) whose lease token is no longer the
    /// session's current one: another process took the session over. Nothing
    /// was changed.
    #[error("{0}")]
    Fenced(String),
    /// Anything else the backend reports, in its own words.
    #[error(transparent)]
    Backend(Box<dyn std::error::Error + Send + Sync>),
}

/// What a journal's asynchronous operations return.
pub type Reply<'a, T> = BoxFuture<'a, Result<T, JournalError>>;

/// Which sessions to list, newest first.
#[derive(Debug, Clone, Default)]
pub struct SessionQuery {
    /// Only sessions whose workspace is exactly this directory.
    pub workspace: Option<PathBuf>,
    /// Continue after this place.
    pub after: Option<SessionCursor>,
    pub limit: usize,
    /// Only the sessions that pass all of these.
    pub filter: SessionFilter,
}

/// What a listed session must be, each condition when given; all of them
/// together. The backends apply it as they walk the listing, so a page is
/// full whenever more sessions pass.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SessionFilter {
    /// Only sessions made by this face.
    pub origin: Option<Origin>,
    /// Only closed sessions (`true`) or only open ones (`false`).
    pub closed: Option<bool>,
    /// Only sessions a conversation of the chat channel of this name maps
    /// (`ChannelWrite::MapConversation`).
    pub channel: Option<String>,
    /// Only sessions that belong to this conversation
    /// ([`Session::conversation`]: a chat's scope key, which every session
    /// the chat has had carries, whatever it maps now).
    pub conversation: Option<String>,
    /// Only sessions in whose title, id, model or workspace each of these
    /// words occurs, letters' case (ASCII) aside; the words are taken as
    /// they are, with no wildcards.
    pub words: Vec<String>,
}

impl SessionFilter {
    /// Whether it passes every session.
    pub fn is_empty(&self) -> bool {
        self == &Self::default()
    }

    /// Whether `session` passes all but the channel condition (the one a
    /// session alone cannot answer): for backends that filter in memory.
    pub fn passes(&self, session: &Session) -> bool {
        self.origin.is_none_or(|origin| session.origin == origin)
            && self.closed.is_none_or(|closed| session.closed == closed)
            && self
                .conversation
                .as_ref()
                .is_none_or(|key| session.conversation.as_ref() == Some(key))
            && self.words.iter().all(|word| {
                let word = word.to_ascii_lowercase();
                let found = |text: &str| text.to_ascii_lowercase().contains(&word);
                session.title.as_deref().is_some_and(found)
                    || found(session.id.as_str())
                    || found(&session.model)
                    || found(&session.workspace.to_string_lossy())
            })
    }

    /// `word` as a `LIKE` pattern (escape character: backslash) that
    /// matches the text that contains it: `%`, `_` and backslash in it stand
    /// for themselves; its letters in lower case, for backends whose `LIKE`
    /// heeds case.
    pub fn like_pattern(word: &str) -> String {
        let mut pattern = String::with_capacity(word.len() + 2);
        pattern.push('%');
        for c in word.chars() {
            if matches!(c, '%' | '_' | '\\') {
                pattern.push('\\');
            }
            pattern.push(c.to_ascii_lowercase());
        }
        pattern.push('%');
        pattern
    }
}

/// A place in the listing of sessions (newest first, then by id): just
/// after this session. The faces hand it out as `UPDATED_AT:SESSION_ID`
/// (its `Display`) and read it back with [`SessionCursor::parse`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionCursor {
    pub updated_at: i64,
    pub id: SessionId,
}

impl SessionCursor {
    /// The place just after `session`.
    pub fn after(session: &Session) -> Self {
        Self {
            updated_at: session.updated_at,
            id: session.id.clone(),
        }
    }

    /// A cursor as [`SessionCursor`]'s `Display` writes it; `None` for
    /// anything else.
    pub fn parse(text: &str) -> Option<Self> {
        let (at, id) = text.split_once(':')?;
        let digits = !at.is_empty() && at.len() <= 18 && at.bytes().all(|b| b.is_ascii_digit());
        if !digits {
            return None;
        }
        Some(Self {
            updated_at: at.parse().ok()?,
            id: SessionId::parse_generated(id)?,
        })
    }
}

impl std::fmt::Display for SessionCursor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}", self.updated_at, self.id)
    }
}

/// Which of a session's runs [`Journal::runs_to_follow`] lists besides the
/// unfinished ones.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunsFrom {
    /// Those created at or after this time: a follower's first look.
    Created(Millis),
    /// Those inserted after this position, one an earlier answer gave.
    After(u64),
}

/// What [`Journal::runs_to_follow`] found.
#[derive(Debug, Clone, Default)]
pub struct RunsToFollow {
    pub runs: Vec<RunInfo>,
    /// Where to look from next time (`RunsFrom::After`): every run inserted
    /// after this answer, by any process, has a greater position.
    pub next: u64,
}

/// One change to the durable state. The core's own are variants here
/// (sessions, runs, the tape, receipts, grants, fenced writes, requests for
/// another process); each narrower port's are an enum of its own, owned by
/// that port ([`Write::Channel`]: `core::channel::ChannelWrite`,
/// [`Write::Memory`]: `core::memory::MemoryWrite`, [`Write::Trust`]:
/// `core::hooks::TrustWrite`). A backend keeps all of them in one ordered
/// queue, so the contract's order holds across ports (a chat's session and
/// its mapping land together; a memory write lands after the run it
/// follows).
#[derive(Debug, Clone)]
pub enum Write {
    InsertSession(Session),
    UpdateSettings {
        id: SessionId,
        provider: String,
        model: String,
        thought_level: Option<String>,
        mode: Mode,
        at: Millis,
    },
    SetTitle {
        id: SessionId,
        title: String,
    },
    SetClosed {
        id: SessionId,
        closed: bool,
        at: Millis,
    },
    /// Deletes a session (and its subagents' sessions): its conversation,
    /// remembered approvals, chat mapping and its runs' tapes go; its runs'
    /// summaries (state, tokens, cost: budgets still count them) and their
    /// receipts (hashes only, chained) stay. The session is then unknown to
    /// every read.
    DeleteSession {
        id: SessionId,
        at: Millis,
    },
    AppendMessage {
        session_id: SessionId,
        run_id: Option<RunId>,
        message: Message,
        at: Millis,
    },
    InsertRun {
        id: RunId,
        session_id: SessionId,
        at: Millis,
    },
    SetRunState {
        id: RunId,
        state: RunState,
        stop_reason: Option<StopReason>,
        error: Option<String>,
        usage: Usage,
        cost: Option<Cost>,
        at: Millis,
    },
    AppendEvent(EventRecord),
    /// Joins the receipt chain: the backend numbers it and links it to the
    /// newest stored receipt inside its transaction, so the chain has one order
    /// even when several processes share the backend.
    AppendReceipt(ReceiptBody),
    /// Remembers an `allow_always` / `reject_always` answer for a session.
    PutGrant {
        session_id: SessionId,
        grant: Grant,
        at: Millis,
    },
    /// The trusted project directories (`core::hooks`).
    Trust(super::hooks::TrustWrite),
    /// The chat channels' records.
    Channel(ChannelWrite),
    /// Memory items (`core::memory`).
    Memory(super::memory::MemoryWrite),
    /// Schedules and their fires (`core::schedule`).
    Schedule(super::schedule::ScheduleWrite),
    /// Writes that must land together: all of them or none (a chat's new
    /// session and its mapping to the chat, so a crash cannot orphan one).
    Together(Vec<Write>),
    /// A write made under a session's lease: applied only while the lease's
    /// token is the session's current one, else refused with
    /// [`JournalError::Fenced`] and nothing applied (`core::lease`, rule 5).
    Fenced {
        fence: super::lease::Fence,
        write: Box<Write>,
    },
    /// Leaves a request for the process running the session's runs
    /// (`core::control`); it reads it with [`Journal::controls`].
    Control {
        session: SessionId,
        control: super::control::Control,
        at: Millis,
    },
    /// Takes a request left with `Control` off the journal, to carry it
    /// out: refused with [`JournalError::Conflict`] when another took it
    /// first, so it is carried out once.
    TakeControl {
        id: i64,
    },
    /// Ends the runs of a session another process left working (`running`
    /// or `waiting`) when it lost the session's lease: each is marked failed
    /// as interrupted, with `error`, keeping the partial reply of a model
    /// turn it cut short. Made fenced, by the process that just took the
    /// lease, so exactly once.
    InterruptRuns {
        session: SessionId,
        error: String,
        at: Millis,
    },
}

/// What the core writes and reads. Cheap to share (`Arc<dyn Journal>`);
/// every method may be called from any task.
pub trait Journal: Send + Sync {
    /// Queues a write; it becomes durable with a later `commit` or `flush`.
    fn submit(&self, write: Write);

    /// Queues a write and waits until it, and everything before it, is durable.
    fn commit(&self, write: Write) -> Reply<'_, ()>;

    /// Waits until every write submitted so far is durable.
    fn flush(&self) -> Reply<'_, ()>;

    fn session<'a>(&'a self, id: &'a SessionId) -> Reply<'a, Option<Session>>;

    fn sessions(&self, query: SessionQuery) -> Reply<'_, Vec<Session>>;

    /// A session's messages in the order they were appended.
    fn history<'a>(&'a self, id: &'a SessionId) -> Reply<'a, Vec<HistoryEntry>>;

    /// A session's messages from its last compaction point (its newest
    /// `Message::Summary`) on, in the order they were appended; all of them
    /// when it was never compacted. What the next model turn is made from
    /// (`context::since_compaction`): its cost follows what came after the
    /// last summary, not the whole history.
    fn since_compaction<'a>(&'a self, id: &'a SessionId) -> Reply<'a, Vec<HistoryEntry>>;

    /// A session's runs, oldest first.
    fn runs<'a>(&'a self, session: &'a SessionId) -> Reply<'a, Vec<RunInfo>>;

    fn run<'a>(&'a self, id: &'a RunId) -> Reply<'a, Option<RunInfo>>;

    /// What a session's runs other than `except` cost: their sum in the
    /// currency of the first of them (by creation) that has a cost; costs in
    /// another currency are left out, as `Cost::add` leaves them. `None`
    /// when none has a cost. Kept as the runs' costs are written, so reading
    /// it costs the same after ten runs as after ten thousand.
    fn session_cost<'a>(
        &'a self,
        session: &'a SessionId,
        except: &'a RunId,
    ) -> Reply<'a, Option<Cost>>;

    /// The runs of a session a follower has not looked at
    /// (`core::subscription`): those [`RunsFrom`] names and every run of the
    /// session not ended yet, oldest first (each once), with the position
    /// to look from next time.
    fn runs_to_follow<'a>(
        &'a self,
        session: &'a SessionId,
        from: RunsFrom,
    ) -> Reply<'a, RunsToFollow>;

    /// The runs of every session waiting for an answer (state `waiting`:
    /// an approval or a question), oldest first.
    fn waiting_runs(&self) -> Reply<'_, Vec<RunInfo>>;

    /// A run's events from `from_seq` on, in order; at most `limit` if given.
    fn tape<'a>(
        &'a self,
        run: &'a RunId,
        from_seq: u64,
        limit: Option<usize>,
    ) -> Reply<'a, Vec<EventRecord>>;

    /// The approvals a session remembers.
    fn grants<'a>(&'a self, session: &'a SessionId) -> Reply<'a, Vec<Grant>>;

    /// What the runs of sessions served by `provider` created at or after
    /// `since` cost, one sum per currency.
    fn spent<'a>(&'a self, provider: &'a str, since: Millis) -> Reply<'a, Vec<Cost>>;

    /// The project directories whose hooks a person trusted, in the order
    /// last trusted, each with its hook files as trusted.
    fn trusted_roots(&self) -> Reply<'_, Vec<super::hooks::Trust>>;

    /// Each skill's latest activation (`Event::SkillActivated`) on any
    /// session's tape, by name: how the catalogue picks the least recently
    /// used to shorten (`core::skills::catalogue`).
    fn skills_last_used(&self) -> Reply<'_, Vec<(String, Millis)>>;

    /// The requests left for a session's runs (`Write::Control`) not yet
    /// taken, oldest first, each with its id.
    fn controls<'a>(
        &'a self,
        session: &'a SessionId,
    ) -> Reply<'a, Vec<(i64, super::control::Control)>>;
}

/// What `pincer verify` reads: the receipt chain and its counts.
pub trait Audit: Send + Sync {
    /// At most `limit` receipts from `from_seq` on, in chain order.
    fn receipts(&self, from_seq: u64, limit: usize) -> Reply<'_, Vec<Receipt>>;

    /// The receipts of one run, in chain order.
    fn run_receipts<'a>(&'a self, run: &'a RunId) -> Reply<'a, Vec<Receipt>>;

    /// Runs whose tape records more finished tool calls than they have
    /// receipts: (run, tool results on the tape, receipts).
    fn missing_receipts(&self) -> Reply<'_, Vec<(RunId, u64, u64)>>;
}

/// What walking the whole receipt chain and cross-checking it against the
/// tapes found (`audit_chain`).
#[derive(Debug, Clone)]
pub struct ChainAudit {
    pub walk: super::receipt::ChainWalk,
    /// The first receipt that does not link, if any.
    pub broken: Option<super::receipt::Break>,
    /// Runs with fewer receipts than tool results: (run, results, receipts).
    pub missing: Vec<(RunId, u64, u64)>,
}

impl ChainAudit {
    /// The chain links throughout and no run lacks a receipt.
    pub fn ok(&self) -> bool {
        self.broken.is_none() && self.missing.is_empty()
    }
}

/// Walks the stored chain page by page, up to its first break, and
/// cross-checks it against the tapes (`pincer verify`, `GET /v1/verify`).
pub async fn audit_chain(audit: &dyn Audit) -> Result<ChainAudit, JournalError> {
    const PAGE: usize = 10_000;
    let mut walk = super::receipt::ChainWalk::default();
    let mut broken = None;
    'pages: loop {
        let page = audit.receipts(walk.count() + 1, PAGE).await?;
        if page.is_empty() {
            break;
        }
        for receipt in &page {
            if let Err(at) = walk.push(receipt) {
                broken = Some(at);
                break 'pages;
            }
        }
    }
    let missing = audit.missing_receipts().await?;
    Ok(ChainAudit {
        walk,
        broken,
        missing,
    })
}

/// What the metrics endpoint and the health summary count.
pub trait Counts: Send + Sync {
    /// How many runs are in each state (states with none are left out).
    fn run_counts(&self) -> Reply<'_, Vec<(RunState, u64)>>;

    /// How many send intents each channel has in each status.
    fn intent_counts(&self) -> Reply<'_, Vec<(String, IntentStatus, u64)>>;

    /// The runs created at or after `since`, in every session (of every
    /// process sharing the store), summed; their buckets are `bucket_ms`
    /// wide from `since` on.
    fn run_window(&self, since: Millis, bucket_ms: i64) -> Reply<'_, RunWindow>;

    /// The processes sharing the store, each holding its process lease,
    /// oldest first; `None` for a store only one machine's processes open
    /// (SQLite).
    fn instances(&self) -> Reply<'_, Option<Vec<super::lease::Instance>>>;
}

/// The runs of a window of time, summed ([`Counts::run_window`]).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RunWindow {
    /// How many runs are in each state, by state name (states with none
    /// are left out).
    pub by_state: Vec<(RunState, u64)>,
    pub input_tokens: u64,
    pub output_tokens: u64,
    /// What they cost, per currency, by currency.
    pub cost: Vec<Cost>,
    /// How many ended after they started (those the durations are of).
    pub ended: u64,
    /// The median and the 95th percentile of `ended_at - started_at` of
    /// the runs that ended (nearest rank: [`nearest_rank`]); `None` when
    /// none did.
    pub p50_ms: Option<Millis>,
    pub p95_ms: Option<Millis>,
    /// The buckets with runs, oldest first.
    pub buckets: Vec<WindowBucket>,
}

/// The runs created in one bucket of a window.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WindowBucket {
    /// The bucket's number from the window's start (0 first).
    pub index: u64,
    pub runs: u64,
    /// Of those, the failed ones.
    pub failed: u64,
}

/// The 0-based place of the `percent`th percentile among `count` sorted
/// values, by nearest rank (`ceil(count * percent / 100)`th, 1-based): the
/// same rule as PostgreSQL's `percentile_disc`. `None` when `count` is 0.
pub fn nearest_rank(count: u64, percent: u64) -> Option<u64> {
    (count > 0).then(|| (count * percent).div_ceil(100).max(1) - 1)
}

/// What the chat channels read from the journal besides the core's port:
/// the inbox, the outbox, cursors, conversation mappings, pairings and
/// drafts. Writes go through [`Journal::submit`] / [`Journal::commit`] as
/// [`Write::Channel`]. The outbox's counts come with it (`Counts`).
pub trait ChannelJournal: Journal + Counts {
    /// The open send intents of a channel account (pending, sending,
    /// committing), oldest first, each with the process that claimed it.
    fn open_intents<'a>(
        &'a self,
        channel: &'a str,
        account: &'a str,
    ) -> Reply<'a, Vec<(SendIntent, Option<String>)>>;

    fn intent<'a>(&'a self, id: &'a str) -> Reply<'a, Option<SendIntent>>;

    /// The most recently changed intents, optionally of one channel and
    /// of one status.
    fn intents<'a>(
        &'a self,
        channel: Option<&'a str>,
        status: Option<IntentStatus>,
        limit: usize,
    ) -> Reply<'a, Vec<SendIntent>>;

    /// Inbound messages of a channel account not yet answered, oldest first.
    fn open_inbox<'a>(&'a self, channel: &'a str, account: &'a str) -> Reply<'a, Vec<InboxEntry>>;

    fn cursor<'a>(
        &'a self,
        channel: &'a str,
        account: &'a str,
        name: &'a str,
    ) -> Reply<'a, Option<String>>;

    /// Every channel account's cursor named `name`: (channel, account,
    /// value), by channel and account.
    fn cursors<'a>(&'a self, name: &'a str) -> Reply<'a, Vec<(String, String, String)>>;

    /// The session a conversation is mapped to.
    fn conversation<'a>(&'a self, key: &'a ConversationKey) -> Reply<'a, Option<SessionId>>;

    fn is_paired<'a>(
        &'a self,
        channel: &'a str,
        account: &'a str,
        sender: &'a str,
    ) -> Reply<'a, bool>;

    /// The paired senders, of one channel or of all, by channel, account
    /// and when they paired.
    fn pairs<'a>(&'a self, channel: Option<&'a str>) -> Reply<'a, Vec<super::channel::Pairing>>;

    /// The live drafts of a channel account.
    fn drafts<'a>(&'a self, channel: &'a str, account: &'a str) -> Reply<'a, Vec<Draft>>;
}

/// The schedules' port: their records, read from any process.
pub trait Schedules: Journal {
    /// Every schedule, oldest first.
    fn schedules(&self) -> Reply<'_, Vec<super::schedule::Schedule>>;
    /// The fires of one schedule (or of all), newest occurrence first.
    fn fires<'a>(
        &'a self,
        schedule: Option<&'a str>,
        limit: usize,
    ) -> Reply<'a, Vec<super::schedule::Fire>>;
    /// Each schedule's latest fired (or skipped) occurrence.
    fn last_fired(&self) -> Reply<'_, Vec<(String, Millis)>>;
    /// The fires not settled yet (`claimed`, `running`).
    fn open_fires(&self) -> Reply<'_, Vec<super::schedule::Fire>>;
}

/// Whether the project directory of `workspace` is trusted (`pincer
/// trust`, `/trust`): its hooks run, its skills and custom commands are
/// offered. An unreadable trust table is no trust.
pub async fn project_trusted(journal: &dyn Journal, workspace: &std::path::Path) -> bool {
    let root = super::hooks::project_dir(workspace);
    match journal.trusted_roots().await {
        Ok(roots) => roots.iter().any(|trust| trust.root == root),
        Err(err) => {
            tracing::warn!(error = %err, "cannot read which workspaces are trusted");
            false
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::contract::Backend;
    use super::memory::MemoryJournal;

    fn memory() -> Backend {
        let journal = Arc::new(MemoryJournal::new());
        let stop = journal.clone();
        Backend {
            journal: journal.clone(),
            audit: journal.clone(),
            schedules: journal.clone(),
            counts: journal.clone(),
            leases: journal,
            stop: Box::new(move || stop.stop()),
            dir: None,
        }
    }

    crate::journal_contract!(memory());

    mod channels {
        use std::sync::Arc;

        use crate::core::channel::contract::Backend;
        use crate::core::journal::memory::MemoryJournal;

        fn fresh() -> Backend {
            let journal = Arc::new(MemoryJournal::new());
            Backend {
                journal: journal.clone(),
                counts: journal,
                dir: None,
            }
        }

        crate::channel_contract!(fresh());
    }

    mod memories {
        use std::sync::Arc;

        use crate::core::journal::memory::MemoryJournal;
        use crate::core::memory::contract::Backend;

        fn fresh() -> Backend {
            Backend {
                memories: Arc::new(MemoryJournal::new()),
                dir: None,
            }
        }

        crate::memory_contract!(fresh());
    }
}
