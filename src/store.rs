//! The durable store: SQLite through one writer thread and read-only readers.
//!
//! Writes are queued to a dedicated thread that applies everything waiting in one
//! transaction (group commit) with `synchronous=FULL`; a caller that must know its
//! write is on disk awaits [`Store::commit`]. Reads run on read-only connections in
//! the blocking pool. Only this module knows row types and SQL.

pub mod channels;
#[cfg(test)]
mod concurrency_tests;
pub mod copy;
mod leases;
mod memory;
mod notify;
mod owner;
mod ports;
pub mod postgres;
mod reader;
pub(crate) mod schedules;
mod schema;
mod vectors;
mod words;
mod writer;
use writer::used;

pub use crate::core::channel::{ChannelWrite, Draft};
pub use crate::core::journal::{SessionQuery, Write};

use parking_lot::Mutex;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use rusqlite::{Connection, OpenFlags};
use thiserror::Error;
use tokio::sync::oneshot;

use crate::core::approval::Grant;
use crate::core::channel::{ConversationKey, InboxEntry, IntentStatus, SendIntent};
use crate::core::event::{EventRecord, RunState};
use crate::core::ids::{RunId, SessionId};
use crate::core::memory::{MemoryFilter, MemoryHit, MemoryItem, MemorySearch};
use crate::core::receipt::Receipt;
use crate::core::run::RunInfo;
use crate::core::session::{HistoryEntry, Session};

#[derive(Debug, Error)]
pub enum StoreError {
    #[error("cannot create data directory {path}: {source}")]
    CreateDir {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("cannot make database file {path} private (mode 0600): {source}")]
    Private {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("database {path}: {source}")]
    Open {
        path: PathBuf,
        source: rusqlite::Error,
    },
    #[error(
        "database {path} has schema version {found}, newer than this pincer knows ({known}); upgrade pincer"
    )]
    TooNew {
        path: PathBuf,
        found: i64,
        known: i64,
    },
    #[error("database: {0}")]
    Sql(#[from] rusqlite::Error),
    #[error("stored data is corrupt: {0}")]
    Corrupt(String),
    #[error("the store's writer thread has stopped")]
    WriterGone,
    #[error("write failed: {0}")]
    Write(String),
    #[error("read failed: {0}")]
    Read(String),
    /// A conditional write found the row not in the state it expected (or a
    /// row that must be new already there).
    #[error("{0}")]
    Conflict(String),
    /// A fenced write under a lease that is no longer current.
    #[error("{0}")]
    Fenced(String),
    /// What the PostgreSQL server or its driver reported.
    #[error("PostgreSQL: {0}")]
    Postgres(String),
    /// The PostgreSQL server cannot be reached.
    #[error("cannot reach the PostgreSQL server at {url}: {reason}")]
    Unreachable { url: String, reason: String },
    #[error(
        "the PostgreSQL database has schema version {found}, newer than this pincer knows ({known}); upgrade pincer"
    )]
    TooNewServer { found: i64, known: i64 },
}

/// Where the store is: SQLite in the data directory (the default) or a
/// PostgreSQL server (`--store`, `PINCER_STORE_URL`, `[store] url`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    Sqlite(PathBuf),
    Postgres(String),
}

impl Target {
    /// Whether `url` names a PostgreSQL server Pincer can use; the
    /// problem, in words, when not.
    pub fn check_url(url: &str) -> Result<(), String> {
        postgres::connect::Server::parse(url).map(|_| ())
    }

    /// `url` with its password replaced by `***`.
    pub fn redacted(url: &str) -> String {
        postgres::connect::redacted(url)
    }
}

impl std::fmt::Display for Target {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Target::Sqlite(path) => write!(f, "SQLite {}", path.display()),
            Target::Postgres(url) => write!(f, "PostgreSQL {}", Target::redacted(url)),
        }
    }
}

/// Every port the store serves, on either backend: what the composition
/// root opens once and hands to the runtime (journal, leases, notifier,
/// memory) and to the faces (`verify` through [`Audit`](crate::core::journal::Audit), metrics through
/// [`Counts`](crate::core::journal::Counts), the chat channels).
pub trait Backend:
    crate::core::journal::ChannelJournal
    + crate::core::journal::Audit
    + crate::core::journal::Counts
    + crate::core::lease::Leases
    + crate::core::notify::Notifier
    + crate::core::memory::Memories
    + crate::core::journal::Schedules
{
    /// Waits for queued writes and stops; later writes fail.
    fn shutdown(&self);

    /// Which backend, and where (the URL without its password).
    fn target(&self) -> Target;

    /// The store on PostgreSQL, for what only it answers (`pincer store
    /// status`, the database's clock).
    fn postgres(&self) -> Option<&postgres::Postgres> {
        None
    }
}

impl Backend for Store {
    fn shutdown(&self) {
        Store::shutdown(self);
    }

    fn target(&self) -> Target {
        Target::Sqlite(self.path().to_path_buf())
    }
}

impl Backend for postgres::Postgres {
    fn shutdown(&self) {
        postgres::Postgres::shutdown(self);
    }

    fn target(&self) -> Target {
        Target::Postgres(self.url().to_owned())
    }

    fn postgres(&self) -> Option<&postgres::Postgres> {
        Some(self)
    }
}

/// Opens the store where `target` says: migrated, the runs of processes
/// that are gone ended, ready for writes.
pub async fn open(target: &Target) -> Result<(Arc<dyn Backend>, Recovery), StoreError> {
    match target {
        Target::Sqlite(path) => {
            let (store, recovery) = Store::open(path)?;
            Ok((Arc::new(store), recovery))
        }
        Target::Postgres(url) => {
            let (store, recovery) = postgres::Postgres::open(url).await?;
            Ok((Arc::new(store), recovery))
        }
    }
}

/// This process's name as an owner of runs and a holder of leases
/// (`pid:start@host`).
pub fn process_tag() -> &'static str {
    owner::this_process()
}

/// How long opening waits out other processes holding the database's lock.
const OPEN_BUSY_WAIT: std::time::Duration = std::time::Duration::from_secs(10);

impl StoreError {
    /// Whether another connection held a lock this operation needed.
    fn is_busy(&self) -> bool {
        let source = match self {
            StoreError::Open { source, .. } | StoreError::Sql(source) => source,
            StoreError::CreateDir { .. }
            | StoreError::Private { .. }
            | StoreError::TooNew { .. }
            | StoreError::Corrupt(_)
            | StoreError::WriterGone
            | StoreError::Write(_)
            | StoreError::Read(_)
            | StoreError::Conflict(_)
            | StoreError::Fenced(_)
            | StoreError::Postgres(_)
            | StoreError::Unreachable { .. }
            | StoreError::TooNewServer { .. } => return false,
        };
        matches!(
            source.sqlite_error_code(),
            Some(rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked)
        )
    }
}

/// Reads at once, and read connections kept open between reads.
const READERS: usize = 8;

/// Handle to the store; cheap to clone.
#[derive(Clone)]
pub struct Store {
    inner: Arc<Inner>,
}

struct Inner {
    /// Database file, for error messages and reader connections.
    path: PathBuf,
    /// Queue to the writer thread; dropped last, which ends the thread.
    writer: writer::WriterHandle,
    /// Idle read-only connections, reused across reads.
    readers: Mutex<Vec<Connection>>,
    /// At most [`READERS`] reads at once: a thousand runs reading together
    /// queue for a few connections instead of each opening one (parsing the
    /// schema) on a blocking thread of its own.
    reading: tokio::sync::Semaphore,
    /// Moves on when the database changes (`notify`), once somebody watches.
    changes: std::sync::OnceLock<tokio::sync::watch::Sender<u64>>,
    /// Set by `shutdown`: the watcher thread ends.
    closed: std::sync::atomic::AtomicBool,
    /// The watcher thread is started once.
    watching: std::sync::Once,
    /// Memory embeddings, read in when a search by meaning first needs them.
    vectors: Mutex<vectors::Vectors>,
    words: Mutex<words::Words>,
    /// Read connections opened, for tests of the bound.
    #[cfg(test)]
    opened: std::sync::atomic::AtomicUsize,
}

/// What opening the store found and repaired.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Recovery {
    /// Runs left unfinished by a previous process, now marked failed.
    pub interrupted_runs: Vec<RunId>,
}

impl Store {
    /// Opens (creating if needed) the database at `path`, migrates it, marks runs
    /// a dead process left unfinished as failed, and starts the writer thread.
    pub fn open(path: &Path) -> Result<(Self, Recovery), StoreError> {
        if let Some(dir) = path.parent() {
            create_private_dir(dir)?;
        }
        private_files(path)?;
        // Another process creating the same database, migrating it or
        // switching it to WAL can hold a lock SQLite does not wait for
        // (changing the journal mode): such an open is tried again.
        let deadline = std::time::Instant::now() + OPEN_BUSY_WAIT;
        loop {
            match Self::open_once(path) {
                Err(err) if err.is_busy() && std::time::Instant::now() < deadline => {
                    std::thread::sleep(std::time::Duration::from_millis(5 + fastrand::u64(0..20)));
                }
                opened => return opened,
            }
        }
    }

    /// The database holds every conversation: it and the files SQLite keeps
    /// beside it (`-wal`, `-shm`, `-journal`, created with the database's
    /// mode) are the person's only, 0600, also when an older Pincer or
    /// another program left them readable.
    fn open_once(path: &Path) -> Result<(Self, Recovery), StoreError> {
        let open_err = |source| StoreError::Open {
            path: path.to_path_buf(),
            source,
        };
        let mut conn = Connection::open(path).map_err(open_err)?;
        configure_writer(&conn).map_err(open_err)?;
        migrate(&mut conn, path)?;
        let recovery = writer::recover_interrupted(&mut conn)?;
        let writer = writer::spawn(conn)?;
        Ok((
            Self {
                inner: Arc::new(Inner {
                    path: path.to_path_buf(),
                    writer,
                    readers: Mutex::new(Vec::new()),
                    reading: tokio::sync::Semaphore::new(READERS),
                    changes: std::sync::OnceLock::new(),
                    closed: std::sync::atomic::AtomicBool::new(false),
                    watching: std::sync::Once::new(),
                    vectors: Mutex::new(vectors::Vectors::default()),
                    words: Mutex::new(words::Words::default()),
                    #[cfg(test)]
                    opened: std::sync::atomic::AtomicUsize::new(0),
                }),
            },
            recovery,
        ))
    }

    pub fn path(&self) -> &Path {
        &self.inner.path
    }

    /// Queues a write; it is committed with the next group.
    pub fn submit(&self, write: Write) {
        self.inner.writer.send(write, None);
    }

    /// Queues a write and waits until it is committed to disk.
    pub async fn commit(&self, write: Write) -> Result<(), StoreError> {
        let (tx, rx) = oneshot::channel();
        self.inner.writer.send(write, Some(tx));
        rx.await.map_err(|_| StoreError::WriterGone)?
    }

    /// Waits until every write queued so far is committed.
    pub async fn flush(&self) -> Result<(), StoreError> {
        let (tx, rx) = oneshot::channel();
        self.inner.writer.flush(tx);
        rx.await.map_err(|_| StoreError::WriterGone)?
    }

    /// Waits for queued writes and stops the writer thread; later writes fail.
    pub fn shutdown(&self) {
        self.inner
            .closed
            .store(true, std::sync::atomic::Ordering::Relaxed);
        self.inner.writer.shutdown();
    }

    pub async fn session(&self, id: &SessionId) -> Result<Option<Session>, StoreError> {
        let id = id.clone();
        self.read(move |conn| reader::session(conn, &id)).await
    }

    pub async fn sessions(&self, query: SessionQuery) -> Result<Vec<Session>, StoreError> {
        self.read(move |conn| reader::sessions(conn, &query)).await
    }

    pub async fn history(&self, id: &SessionId) -> Result<Vec<HistoryEntry>, StoreError> {
        let id = id.clone();
        self.read(move |conn| reader::history(conn, &id)).await
    }

    /// The messages from the session's last compaction point on
    /// (`Journal::since_compaction`).
    pub async fn since_compaction(&self, id: &SessionId) -> Result<Vec<HistoryEntry>, StoreError> {
        let id = id.clone();
        self.read(move |conn| reader::since_compaction(conn, &id))
            .await
    }

    /// What the session's runs but `except` cost (`Journal::session_cost`).
    pub async fn session_cost(
        &self,
        session: &SessionId,
        except: &RunId,
    ) -> Result<Option<crate::core::usage::Cost>, StoreError> {
        let (session, except) = (session.clone(), except.clone());
        self.read(move |conn| reader::session_cost(conn, &session, &except))
            .await
    }

    /// The runs of a session a follower has not looked at
    /// (`Journal::runs_to_follow`).
    pub async fn runs_to_follow(
        &self,
        session: &SessionId,
        from: crate::core::journal::RunsFrom,
    ) -> Result<crate::core::journal::RunsToFollow, StoreError> {
        let session = session.clone();
        self.read(move |conn| reader::runs_to_follow(conn, &session, from))
            .await
    }

    pub async fn runs(&self, session: &SessionId) -> Result<Vec<RunInfo>, StoreError> {
        let id = session.clone();
        self.read(move |conn| reader::runs(conn, &id)).await
    }

    pub async fn waiting_runs(&self) -> Result<Vec<RunInfo>, StoreError> {
        self.read(reader::waiting_runs).await
    }

    pub async fn run(&self, id: &RunId) -> Result<Option<RunInfo>, StoreError> {
        let id = id.clone();
        self.read(move |conn| reader::run(conn, &id)).await
    }

    /// How many runs are in each state (states with none are left out).
    /// What the runs of `provider`'s sessions created since `since` cost, per currency.
    pub async fn spent(
        &self,
        provider: &str,
        since: i64,
    ) -> Result<Vec<crate::core::usage::Cost>, StoreError> {
        let provider = provider.to_owned();
        self.read(move |conn| reader::spent(conn, &provider, since))
            .await
    }

    pub async fn run_counts(&self) -> Result<Vec<(RunState, u64)>, StoreError> {
        self.read(reader::run_counts).await
    }

    /// The runs created at or after `since`, summed (`Counts::run_window`).
    pub async fn run_window(
        &self,
        since: i64,
        bucket_ms: i64,
    ) -> Result<crate::core::journal::RunWindow, StoreError> {
        self.read(move |conn| reader::run_window(conn, since, bucket_ms))
            .await
    }

    /// A run's events from `from_seq` on, in order.
    pub async fn tape(&self, run: &RunId, from_seq: u64) -> Result<Vec<EventRecord>, StoreError> {
        let id = run.clone();
        self.read(move |conn| reader::tape(conn, &id, from_seq, None))
            .await
    }

    /// At most `limit` of a run's events from `from_seq` on, in order.
    pub async fn tape_page(
        &self,
        run: &RunId,
        from_seq: u64,
        limit: usize,
    ) -> Result<Vec<EventRecord>, StoreError> {
        let id = run.clone();
        self.read(move |conn| reader::tape(conn, &id, from_seq, Some(limit)))
            .await
    }

    /// At most `limit` receipts from `from_seq` on, in chain order.
    pub async fn receipts(&self, from_seq: u64, limit: usize) -> Result<Vec<Receipt>, StoreError> {
        self.read(move |conn| reader::receipts(conn, from_seq, limit))
            .await
    }

    /// The receipts of one run, in chain order.
    pub async fn run_receipts(&self, run: &RunId) -> Result<Vec<Receipt>, StoreError> {
        let id = run.clone();
        self.read(move |conn| reader::run_receipts(conn, &id)).await
    }

    /// Runs whose tape records more finished tool calls than they have receipts:
    /// (run, tool results on the tape, receipts).
    pub async fn missing_receipts(&self) -> Result<Vec<(RunId, u64, u64)>, StoreError> {
        self.read(reader::missing_receipts).await
    }

    /// The approvals a session remembers.
    /// The project directories whose hooks a person trusted, oldest first.
    pub async fn trusted_roots(&self) -> Result<Vec<crate::core::hooks::Trust>, StoreError> {
        self.read(reader::trusted_roots).await
    }

    /// Each skill's latest activation on any tape, by name.
    pub async fn skills_last_used(
        &self,
    ) -> Result<Vec<(String, crate::core::session::Millis)>, StoreError> {
        self.read(reader::skills_last_used).await
    }

    /// Requests left for a session's runs, not yet taken, oldest first.
    pub async fn controls(
        &self,
        session: &SessionId,
    ) -> Result<Vec<(i64, crate::core::control::Control)>, StoreError> {
        let id = session.clone();
        self.read(move |conn| {
            let mut stmt = conn.prepare_cached(
                "SELECT id, control FROM session_controls WHERE session_id = ?1 ORDER BY id",
            )?;
            let rows = stmt.query_map([id.as_str()], |row| {
                Ok((row.get::<_, i64>(0)?, row.get::<_, String>(1)?))
            })?;
            let mut out = Vec::new();
            for row in rows {
                let (id, text) = row?;
                match serde_json::from_str(&text) {
                    Ok(control) => out.push((id, control)),
                    Err(err) => tracing::warn!(control = id, error = %err, "an unreadable session control is skipped"),
                }
            }
            Ok(out)
        })
        .await
    }

    pub async fn grants(&self, session: &SessionId) -> Result<Vec<Grant>, StoreError> {
        let id = session.clone();
        self.read(move |conn| reader::grants(conn, &id)).await
    }

    /// The open send intents of a channel account (pending, sending,
    /// committing), oldest first, each with the process that claimed it.
    pub async fn open_intents(
        &self,
        channel: &str,
        account: &str,
    ) -> Result<Vec<(SendIntent, Option<String>)>, StoreError> {
        let (channel, account) = (channel.to_owned(), account.to_owned());
        self.read(move |conn| channels::open_intents(conn, &channel, &account))
            .await
    }

    /// Every schedule, oldest first.
    pub async fn schedules(&self) -> Result<Vec<crate::core::schedule::Schedule>, StoreError> {
        self.read(schedules::schedules).await
    }

    /// Fires of one schedule or all, newest occurrence first.
    pub async fn schedule_fires(
        &self,
        schedule: Option<&str>,
        limit: usize,
    ) -> Result<Vec<crate::core::schedule::Fire>, StoreError> {
        let schedule = schedule.map(str::to_owned);
        self.read(move |conn| schedules::fires(conn, schedule.as_deref(), limit))
            .await
    }

    /// Each schedule's latest occurrence fired by the time.
    pub async fn schedules_last_fired(&self) -> Result<Vec<(String, i64)>, StoreError> {
        self.read(schedules::last_fired).await
    }

    /// Fires not settled yet.
    pub async fn open_schedule_fires(
        &self,
    ) -> Result<Vec<crate::core::schedule::Fire>, StoreError> {
        self.read(schedules::open_fires).await
    }

    pub async fn intent(&self, id: &str) -> Result<Option<SendIntent>, StoreError> {
        let id = id.to_owned();
        self.read(move |conn| channels::intent(conn, &id)).await
    }

    /// The most recently changed intents, optionally of one channel and of
    /// one status.
    pub async fn intents(
        &self,
        channel: Option<&str>,
        status: Option<IntentStatus>,
        limit: usize,
    ) -> Result<Vec<SendIntent>, StoreError> {
        let channel = channel.map(str::to_owned);
        self.read(move |conn| channels::intents(conn, channel.as_deref(), status, limit))
            .await
    }

    /// How many intents each channel has in each status.
    pub async fn intent_counts(&self) -> Result<Vec<(String, IntentStatus, u64)>, StoreError> {
        self.read(channels::intent_counts).await
    }

    /// Inbound messages of a channel account not yet answered, oldest first.
    pub async fn open_inbox(
        &self,
        channel: &str,
        account: &str,
    ) -> Result<Vec<InboxEntry>, StoreError> {
        let (channel, account) = (channel.to_owned(), account.to_owned());
        self.read(move |conn| channels::open_inbox(conn, &channel, &account))
            .await
    }

    pub async fn cursor(
        &self,
        channel: &str,
        account: &str,
        name: &str,
    ) -> Result<Option<String>, StoreError> {
        let (channel, account, name) = (channel.to_owned(), account.to_owned(), name.to_owned());
        self.read(move |conn| channels::cursor(conn, &channel, &account, &name))
            .await
    }

    /// Every channel account's cursor named `name`.
    pub async fn cursors(&self, name: &str) -> Result<Vec<(String, String, String)>, StoreError> {
        let name = name.to_owned();
        self.read(move |conn| channels::cursors(conn, &name)).await
    }

    /// The session a conversation is mapped to.
    pub async fn conversation(
        &self,
        key: &ConversationKey,
    ) -> Result<Option<SessionId>, StoreError> {
        let key = key.clone();
        self.read(move |conn| channels::conversation(conn, &key))
            .await
    }

    pub async fn is_paired(
        &self,
        channel: &str,
        account: &str,
        sender: &str,
    ) -> Result<bool, StoreError> {
        let (channel, account, sender) =
            (channel.to_owned(), account.to_owned(), sender.to_owned());
        self.read(move |conn| channels::is_paired(conn, &channel, &account, &sender))
            .await
    }

    /// The paired senders, of one channel or of all.
    pub async fn pairs(
        &self,
        channel: Option<&str>,
    ) -> Result<Vec<crate::core::channel::Pairing>, StoreError> {
        let channel = channel.map(str::to_owned);
        self.read(move |conn| channels::pairs(conn, channel.as_deref()))
            .await
    }

    /// The live drafts of a channel account.
    pub async fn drafts(&self, channel: &str, account: &str) -> Result<Vec<Draft>, StoreError> {
        let (channel, account) = (channel.to_owned(), account.to_owned());
        self.read(move |conn| channels::drafts(conn, &channel, &account))
            .await
    }

    pub async fn memory(&self, id: &str) -> Result<Option<MemoryItem>, StoreError> {
        let id = id.to_owned();
        self.read(move |conn| memory::get(conn, &id)).await
    }

    pub async fn memories(&self, filter: MemoryFilter) -> Result<Vec<MemoryItem>, StoreError> {
        self.read(move |conn| memory::list(conn, &filter)).await
    }

    pub async fn search_memory(&self, search: MemorySearch) -> Result<Vec<MemoryHit>, StoreError> {
        let inner = self.inner.clone();
        self.read(move |conn| memory::search(conn, &search, &inner.vectors, &inner.words))
            .await
    }

    /// Items with no embedding by `model`, oldest first.
    pub async fn unembedded_memory(
        &self,
        model: &str,
        limit: usize,
    ) -> Result<Vec<MemoryItem>, StoreError> {
        let model = model.to_owned();
        self.read(move |conn| memory::unembedded(conn, &model, limit))
            .await
    }

    async fn read<T, F>(&self, f: F) -> Result<T, StoreError>
    where
        T: Send + 'static,
        F: FnOnce(&Connection) -> Result<T, StoreError> + Send + 'static,
    {
        let _permit = self
            .inner
            .reading
            .acquire()
            .await
            .map_err(|err| StoreError::Read(format!("readers closed: {err}")))?;
        let inner = self.inner.clone();
        tokio::task::spawn_blocking(move || {
            let conn = inner.take_reader()?;
            let result = f(&conn);
            inner.put_reader(conn);
            result
        })
        .await
        .map_err(|err| StoreError::Read(format!("reader task failed: {err}")))?
    }
}

impl Inner {
    fn take_reader(&self) -> Result<Connection, StoreError> {
        let idle = self.readers.lock().pop();
        if let Some(conn) = idle {
            return Ok(conn);
        }
        let conn = Connection::open_with_flags(
            &self.path,
            OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )
        .map_err(|source| StoreError::Open {
            path: self.path.clone(),
            source,
        })?;
        conn.busy_timeout(std::time::Duration::from_secs(5))?;
        #[cfg(test)]
        self.opened
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        Ok(conn)
    }

    fn put_reader(&self, conn: Connection) {
        let mut pool = self.readers.lock();
        if pool.len() < READERS {
            pool.push(conn);
        }
    }
}

/// Creates the database file with mode 0600 if it is missing, and takes
/// group and other access off it and its companions if they have any.
fn private_files(path: &Path) -> Result<(), StoreError> {
    use std::os::unix::fs::{OpenOptionsExt as _, PermissionsExt as _};
    let failed = |file: &Path| {
        let path = file.to_path_buf();
        move |source| StoreError::Private { path, source }
    };
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .mode(0o600)
        .open(path)
        .map_err(failed(path))?;
    for suffix in ["", "-wal", "-shm", "-journal"] {
        let mut file = path.as_os_str().to_owned();
        file.push(suffix);
        let file = Path::new(&file);
        match std::fs::metadata(file) {
            Ok(meta) if meta.permissions().mode() & 0o077 != 0 => {
                std::fs::set_permissions(file, std::fs::Permissions::from_mode(0o600))
                    .map_err(failed(file))?;
            }
            _ => {}
        }
    }
    Ok(())
}

fn create_private_dir(dir: &Path) -> Result<(), StoreError> {
    if dir.as_os_str().is_empty() || dir.is_dir() {
        return Ok(());
    }
    let mut builder = std::fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::DirBuilderExt;
        builder.mode(0o700);
    }
    builder.create(dir).map_err(|source| StoreError::CreateDir {
        path: dir.to_path_buf(),
        source,
    })
}

fn configure_writer(conn: &Connection) -> Result<(), rusqlite::Error> {
    conn.busy_timeout(std::time::Duration::from_secs(5))?;
    conn.pragma_update(None, "journal_mode", "WAL")?;
    conn.pragma_update(None, "synchronous", "FULL")?;
    conn.pragma_update(None, "foreign_keys", "ON")?;
    Ok(())
}

/// Applies the migrations the database lacks, one transaction each. The
/// version is read inside a write transaction, so several processes opening a
/// new database at once (an editor starting two windows) migrate it once: the
/// others wait, then find it done.
fn migrate(conn: &mut Connection, path: &Path) -> Result<(), StoreError> {
    let known = schema::MIGRATIONS.len() as i64;
    // A database already at this version needs no write lock: many processes
    // opening it at once (inspection commands beside a bridge) must not queue
    // behind each other or behind the bridge's writer.
    let current: i64 = conn.pragma_query_value(None, "user_version", |row| row.get(0))?;
    if current == known {
        return Ok(());
    }
    loop {
        let tx = conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
        let found: i64 = tx.pragma_query_value(None, "user_version", |row| row.get(0))?;
        if found > known {
            return Err(StoreError::TooNew {
                path: path.to_path_buf(),
                found,
                known,
            });
        }
        let Some(sql) = schema::MIGRATIONS.get(found as usize) else {
            tx.commit()?;
            return Ok(());
        };
        tx.execute_batch(sql)?;
        tx.pragma_update(None, "user_version", found + 1)?;
        tx.commit()?;
    }
}

/// The schema version this build writes.
pub fn schema_version() -> i64 {
    schema::MIGRATIONS.len() as i64
}

/// Reads a database's schema version without migrating it (for `pincer doctor`).
pub fn probe(path: &Path) -> Result<i64, StoreError> {
    let conn =
        Connection::open_with_flags(path, OpenFlags::SQLITE_OPEN_READ_ONLY).map_err(|source| {
            StoreError::Open {
                path: path.to_path_buf(),
                source,
            }
        })?;
    Ok(conn.pragma_query_value(None, "user_version", |row| row.get(0))?)
}

#[cfg(test)]
mod contract {
    use std::path::Path;
    use std::sync::Arc;

    use super::Store;
    use crate::core::journal::contract::Backend;

    fn open(dir: &Path) -> Backend {
        let (store, _) = Store::open(&dir.join("pincer.db")).unwrap();
        let stop = store.clone();
        Backend {
            journal: Arc::new(store.clone()),
            audit: Arc::new(store.clone()),
            schedules: Arc::new(store.clone()),
            counts: Arc::new(store.clone()),
            leases: Arc::new(store),
            stop: Box::new(move || stop.shutdown()),
            dir: None,
        }
    }

    fn fresh() -> Backend {
        let dir = tempfile::tempdir().unwrap();
        let backend = open(dir.path());
        Backend {
            dir: Some(dir),
            ..backend
        }
    }

    crate::journal_contract!(fresh());
    crate::journal_durability_contract!(open);

    /// A fresh store in a directory of its own, and the directory.
    fn store() -> (Store, tempfile::TempDir) {
        let dir = tempfile::tempdir().unwrap();
        let (store, _) = Store::open(&dir.path().join("pincer.db")).unwrap();
        (store, dir)
    }

    mod channels {
        use std::sync::Arc;

        use crate::core::channel::contract::Backend;

        fn fresh() -> Backend {
            let (store, dir) = super::store();
            Backend {
                journal: Arc::new(store.clone()),
                counts: Arc::new(store),
                dir: Some(dir),
            }
        }

        crate::channel_contract!(fresh());
    }

    mod memories {
        use std::sync::Arc;

        use crate::core::memory::contract::Backend;

        fn fresh() -> Backend {
            let (store, dir) = super::store();
            Backend {
                memories: Arc::new(store),
                dir: Some(dir),
            }
        }

        crate::memory_contract!(fresh());
    }
}

#[cfg(test)]
mod tests {
    /// Processes opening a new database at once (an editor's two windows,
    /// `pincer sessions list` beside a starting bridge) all get it: none
    /// fails with "database is locked" while another creates or migrates it.
    #[test]
    fn many_opening_a_new_database_at_once_all_succeed() {
        for _ in 0..20 {
            let dir = tempfile::tempdir().unwrap();
            let path = dir.path().join("pincer.db");
            let barrier = std::sync::Arc::new(std::sync::Barrier::new(8));
            let openers: Vec<_> = (0..8)
                .map(|_| {
                    let (path, barrier) = (path.clone(), barrier.clone());
                    std::thread::spawn(move || {
                        barrier.wait();
                        Store::open(&path).map(|(store, _)| store.shutdown())
                    })
                })
                .collect();
            for opener in openers {
                let opened = opener.join().unwrap();
                assert!(opened.is_ok(), "{opened:?}");
            }
        }
    }

    use super::*;
    use crate::core::event::Event;
    use crate::core::session::{Message, Mode};
    use crate::core::session::{Origin, now_millis};

    fn session(id: &str) -> Session {
        Session {
            id: SessionId::from_string(id.into()),
            workspace: "/ws".into(),
            origin: Origin::Editor,
            provider: "p".into(),
            model: "m".into(),
            mode: Mode::Supervised,
            title: None,
            mcp_servers: serde_json::json!([{"name": "fs", "command": "mcp-fs", "args": [], "env": []}]),
            created_at: 1,
            updated_at: 1,
            closed: false,
            conversation: None,
            prompt: Default::default(),
            parent: None,
            thought_level: None,
        }
    }

    /// A thousand reads at once wait for the [`READERS`] read connections
    /// instead of each opening one (every open parses the schema, and each
    /// connection keeps its own page cache).
    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn reads_at_once_share_a_bounded_set_of_connections() {
        let dir = tempfile::tempdir().unwrap();
        let (store, _) = Store::open(&dir.path().join("pincer.db")).unwrap();
        store
            .commit(Write::InsertSession(session("ses_1")))
            .await
            .unwrap();
        let reads = (0..1000).map(|_| {
            let store = store.clone();
            tokio::spawn(
                async move { store.session(&SessionId::from_string("ses_1".into())).await },
            )
        });
        for read in futures::future::join_all(reads).await {
            assert!(read.unwrap().unwrap().is_some());
        }
        let opened = store.inner.opened.load(std::sync::atomic::Ordering::SeqCst);
        assert!(
            (1..=READERS).contains(&opened),
            "{opened} connections opened"
        );
        store.shutdown();
    }

    /// The plans SQLite makes for the queries whose cost must not grow with
    /// the sessions and runs stored: each listing page seeks its index to the
    /// cursor and reads it in order (no sort, no scan from the newest), and an
    /// open reads unfinished runs only (`docs/benchmarks.md`, "10,000 stored
    /// sessions").
    #[test]
    fn listings_and_the_recovery_check_read_only_what_they_return() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("pincer.db");
        let (store, _) = Store::open(&path).unwrap();
        store.shutdown();
        let conn = rusqlite::Connection::open(&path).unwrap();
        let plan = |sql: &str| -> String {
            let mut stmt = conn.prepare(&format!("EXPLAIN QUERY PLAN {sql}")).unwrap();
            let nulls = std::iter::repeat_n(rusqlite::types::Null, stmt.parameter_count());
            let rows = stmt
                .query_map(rusqlite::params_from_iter(nulls), |row| {
                    row.get::<_, String>(3)
                })
                .unwrap()
                .collect::<Result<Vec<_>, _>>()
                .unwrap();
            rows.join("; ")
        };
        for in_workspace in [false, true] {
            for after in [false, true] {
                let query = SessionQuery {
                    workspace: in_workspace.then(|| "/w".into()),
                    after: after.then(|| crate::core::journal::SessionCursor {
                        updated_at: 1,
                        id: SessionId::from_string("ses_1".into()),
                    }),
                    limit: 10,
                    ..SessionQuery::default()
                };
                let found = plan(&reader::sessions_sql(&query).0);
                let index = if in_workspace {
                    "USING INDEX sessions_listed_in_workspace (workspace=?"
                } else {
                    "USING INDEX sessions_listed"
                };
                assert!(found.contains(index), "{in_workspace} {after}: {found}");
                assert!(!found.contains("TEMP B-TREE"), "{found}");
                assert_eq!(
                    found.contains("(updated_at,id)<(?,?)"),
                    after,
                    "{in_workspace} {after}: {found}"
                );
            }
        }
        // Filtered by origin, state and words, the walk is the same: each
        // session it reads is checked, and it stops at the page's end. (By
        // chat channel, SQLite reads the channel's sessions by its key and
        // sorts them: a chat channel maps few enough.)
        for in_workspace in [false, true] {
            let query = SessionQuery {
                workspace: in_workspace.then(|| "/w".into()),
                after: Some(crate::core::journal::SessionCursor {
                    updated_at: 1,
                    id: SessionId::from_string("ses_1".into()),
                }),
                limit: 10,
                filter: crate::core::journal::SessionFilter {
                    origin: Some(crate::core::session::Origin::Http),
                    closed: Some(false),
                    channel: None,
                    conversation: None,
                    words: vec!["fix".into(), "parser".into()],
                },
            };
            let found = plan(&reader::sessions_sql(&query).0);
            assert!(found.contains("USING INDEX sessions_listed"), "{found}");
            assert!(!found.contains("TEMP B-TREE"), "{found}");
        }
        // A chat's sessions (`/sessions`): through their conversation's key,
        // in order, whatever else the store holds.
        let query = SessionQuery {
            limit: 20,
            filter: crate::core::journal::SessionFilter {
                origin: Some(crate::core::session::Origin::Channel),
                conversation: Some("telegram/bot/private:42".into()),
                ..Default::default()
            },
            ..SessionQuery::default()
        };
        let found = plan(&reader::sessions_sql(&query).0);
        assert!(
            found.contains("USING INDEX sessions_of_conversation (conversation=?)"),
            "{found}"
        );
        assert!(!found.contains("TEMP B-TREE"), "{found}");
        let found = plan(writer::UNFINISHED_RUNS);
        assert!(found.contains("USING INDEX runs_unfinished"), "{found}");
        // What a run reads of its session: the newest summary through the
        // summaries' index, the messages from it through the primary key,
        // the session's cost by its key (`runs_to_follow` names its indexes).
        let found = plan(reader::SINCE_COMPACTION);
        assert!(
            found.contains("USING PRIMARY KEY (session_id=? AND seq>?)"),
            "{found}"
        );
        assert!(
            found.contains("USING COVERING INDEX messages_summaries (session_id=?)"),
            "{found}"
        );
        let found = plan(reader::SESSION_COST);
        assert!(
            found.contains("USING PRIMARY KEY (session_id=?)"),
            "{found}"
        );
    }

    /// Migration 19 sums the costs of the runs made before it, per session
    /// and currency, and the triggers keep the sums from then on.
    #[tokio::test]
    async fn the_costs_of_runs_before_migration_19_are_summed() {
        use crate::core::event::Usage;
        use crate::core::usage::Cost;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("pincer.db");
        {
            let conn = rusqlite::Connection::open(&path).unwrap();
            for migration in &schema::MIGRATIONS[..18] {
                conn.execute_batch(migration).unwrap();
            }
            conn.pragma_update(None, "user_version", 18).unwrap();
            conn.execute_batch(
                "INSERT INTO sessions (id, workspace, origin, provider, model, mode, created_at, updated_at)
                     VALUES ('ses_old', '/ws', 'headless', 'p', 'm', 'supervised', 1, 1);
                 INSERT INTO runs (id, session_id, state, created_at, cost, currency) VALUES
                     ('run_a', 'ses_old', 'completed', 1, 0.5, 'USD'),
                     ('run_b', 'ses_old', 'completed', 2, 0.25, 'USD'),
                     ('run_c', 'ses_old', 'completed', 3, NULL, NULL),
                     ('run_d', 'ses_old', 'completed', 4, 9.0, 'EUR');",
            )
            .unwrap();
        }
        let (store, _) = Store::open(&path).unwrap();
        let session = SessionId::from_string("ses_old".into());
        let none = RunId::from_string("run_none".into());
        let usd = |amount: f64| {
            Some(Cost {
                amount,
                currency: "USD".into(),
            })
        };
        assert_eq!(
            store.session_cost(&session, &none).await.unwrap(),
            usd(0.75)
        );
        store
            .commit(Write::SetRunState {
                id: RunId::from_string("run_c".into()),
                state: RunState::Completed,
                stop_reason: None,
                error: None,
                usage: Usage::default(),
                cost: usd(1.0),
                at: 5,
            })
            .await
            .unwrap();
        assert_eq!(
            store.session_cost(&session, &none).await.unwrap(),
            usd(1.75)
        );
        store.shutdown();
    }

    #[test]
    fn processes_opening_a_new_database_at_once_migrate_it_once() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("pincer.db");
        let openers: Vec<_> = (0..6)
            .map(|_| {
                let path = path.clone();
                std::thread::spawn(move || Store::open(&path).map(|(store, _)| store.shutdown()))
            })
            .collect();
        for opener in openers {
            opener.join().unwrap().unwrap();
        }
        assert_eq!(probe(&path).unwrap(), schema_version());
    }

    #[test]
    fn an_open_and_a_shutdown_with_nothing_to_write_take_no_write_lock() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("pincer.db");
        Store::open(&path).unwrap().0.shutdown();
        // Another process holds the write lock (a bridge in the middle of
        // a write group) for as long as this test runs.
        let holder = rusqlite::Connection::open(&path).unwrap();
        holder.execute_batch("BEGIN IMMEDIATE").unwrap();
        let (done, opened) = std::sync::mpsc::channel();
        let opener = path.clone();
        std::thread::spawn(move || {
            let _ = done.send(Store::open(&opener).map(|(store, _)| store.shutdown()));
        });
        let result = opened
            .recv_timeout(std::time::Duration::from_secs(20))
            .expect("an open of a current database waited for the write lock");
        result.unwrap();
        holder.execute_batch("ROLLBACK").unwrap();
    }

    #[tokio::test]
    async fn writes_together_land_all_or_none() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("pincer.db");
        let (store, _) = Store::open(&path).unwrap();
        store
            .commit(Write::InsertSession(session("ses_1")))
            .await
            .unwrap();
        // The second write fails (the session exists): the first is undone,
        // while a write of the same group outside the batch still lands.
        store.submit(Write::InsertSession(session("ses_3")));
        let failed = store
            .commit(Write::Together(vec![
                Write::InsertSession(session("ses_2")),
                Write::InsertSession(session("ses_1")),
            ]))
            .await;
        assert!(failed.is_err());
        assert!(
            store
                .session(&SessionId::from_string("ses_2".into()))
                .await
                .unwrap()
                .is_none()
        );
        assert!(
            store
                .session(&SessionId::from_string("ses_3".into()))
                .await
                .unwrap()
                .is_some()
        );
        store
            .commit(Write::Together(vec![Write::InsertSession(session(
                "ses_2",
            ))]))
            .await
            .unwrap();
        assert!(
            store
                .session(&SessionId::from_string("ses_2".into()))
                .await
                .unwrap()
                .is_some()
        );
    }

    #[tokio::test]
    async fn the_tape_rejects_update_and_delete() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("pincer.db");
        let (store, _) = Store::open(&path).unwrap();
        store
            .commit(Write::InsertSession(session("ses_1")))
            .await
            .unwrap();
        let record = EventRecord {
            session_id: SessionId::from_string("ses_1".into()),
            run_id: RunId::from_string("run_1".into()),
            seq: 0,
            at: now_millis(),
            event: Event::TextDelta { text: "x".into() },
        };
        store.commit(Write::AppendEvent(record)).await.unwrap();
        store.shutdown();
        let conn = Connection::open(&path).unwrap();
        let update = conn.execute("UPDATE tape SET payload = '{}'", []);
        assert!(
            update
                .unwrap_err()
                .to_string()
                .contains("the tape is append-only"),
            "UPDATE must be refused"
        );
        let delete = conn.execute("DELETE FROM tape", []);
        assert!(delete.unwrap_err().to_string().contains("append-only"));
        let count: i64 = conn
            .query_row("SELECT COUNT(*) FROM tape", [], |r| r.get(0))
            .unwrap();
        assert_eq!(count, 1);
    }

    #[tokio::test]
    async fn a_crash_keeps_a_prompts_partial_reply_but_not_a_summary_cut_short() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("pincer.db");
        let (store, _) = Store::open(&path).unwrap();
        store
            .commit(Write::InsertSession(session("ses_1")))
            .await
            .unwrap();
        let text = |text: &str| vec![crate::core::session::ContentPart::Text { text: text.into() }];
        for (run, prompt) in [("run_1", "hello"), ("run_2", "/compact")] {
            let run_id = RunId::from_string(run.into());
            store.submit(Write::InsertRun {
                id: run_id.clone(),
                session_id: SessionId::from_string("ses_1".into()),
                at: 1,
            });
            if run == "run_1" {
                store.submit(Write::AppendMessage {
                    session_id: SessionId::from_string("ses_1".into()),
                    run_id: Some(run_id.clone()),
                    message: Message::User {
                        content: text(prompt),
                    },
                    at: 1,
                });
            }
            let events = [
                Event::UserMessage {
                    content: text(prompt),
                },
                Event::ModelTurn {
                    index: 0,
                    provider: "p".into(),
                    model: "m".into(),
                },
                Event::TextDelta {
                    text: format!("partial {run}"),
                },
            ];
            for (seq, event) in events.into_iter().enumerate() {
                store.submit(Write::AppendEvent(EventRecord {
                    session_id: SessionId::from_string("ses_1".into()),
                    run_id: run_id.clone(),
                    seq: seq as u64,
                    at: 1,
                    event,
                }));
            }
        }
        store.flush().await.unwrap();
        store.shutdown();
        drop(store);
        // As if the process that ran them had died.
        Connection::open(&path)
            .unwrap()
            .execute("UPDATE runs SET owner = NULL", [])
            .unwrap();
        let (store, recovery) = Store::open(&path).unwrap();
        assert_eq!(recovery.interrupted_runs.len(), 2);
        let history: Vec<Message> = store
            .history(&SessionId::from_string("ses_1".into()))
            .await
            .unwrap()
            .into_iter()
            .map(|e| e.message)
            .collect();
        assert_eq!(
            history,
            vec![
                Message::User {
                    content: text("hello")
                },
                Message::Assistant {
                    text: "partial run_1".into(),
                    thought: String::new(),
                    tool_calls: Vec::new(),
                    interrupted: true,
                },
            ]
        );
        store.shutdown();
    }

    /// An open ends the runs nobody works on any more, by leases: a working
    /// run's session lease lapsed (taken over, so its holder's late writes
    /// are refused), a queued run's process lease lapsed, or no lease and
    /// no live owner; a run whose lease is live (another host's process
    /// holds it) is left alone.
    #[tokio::test]
    async fn an_open_ends_the_runs_whose_leases_lapsed_and_no_other() {
        use crate::core::lease::{Fence, LeaseKey};
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("pincer.db");
        let (store, _) = Store::open(&path).unwrap();
        let far = now_millis() + 3_600_000;
        // (session, state, run owner, (lease key, holder, expires_at))
        type Case<'a> = (
            &'a str,
            &'a str,
            Option<&'a str>,
            Option<(String, &'a str, i64)>,
        );
        let cases: [Case; 6] = [
            (
                "ses_live",
                "running",
                Some("host-b:1"),
                Some(("ses_live".into(), "host-b:1", far)),
            ),
            (
                "ses_lapsed",
                "waiting",
                Some("host-b:1"),
                Some(("ses_lapsed".into(), "host-b:1", 5)),
            ),
            (
                "ses_released",
                "running",
                Some("host-b:2"),
                Some(("ses_released".into(), "host-b:2", 0)),
            ),
            (
                "ses_queued_live",
                "queued",
                Some("host-c:7"),
                Some(("process:host-c:7".into(), "host-c:7", far)),
            ),
            (
                "ses_queued_gone",
                "queued",
                Some("host-d:8"),
                Some(("process:host-d:8".into(), "host-d:8", 5)),
            ),
            ("ses_legacy", "running", None, None),
        ];
        for (name, _, _, _) in &cases {
            store.submit(Write::InsertSession(session(name)));
            store.submit(Write::InsertRun {
                id: RunId::from_string(format!("run_{name}")),
                session_id: SessionId::from_string((*name).into()),
                at: 1,
            });
        }
        store.flush().await.unwrap();
        store.shutdown();
        drop(store);
        let conn = Connection::open(&path).unwrap();
        for (name, state, owner, lease) in &cases {
            conn.execute(
                "UPDATE runs SET state = ?2, owner = ?3 WHERE id = ?1",
                rusqlite::params![format!("run_{name}"), state, owner],
            )
            .unwrap();
            if let Some((key, holder, expires_at)) = lease {
                conn.execute(
                    "INSERT INTO leases (key, holder, token, expires_at) VALUES (?1, ?2, 4, ?3)",
                    rusqlite::params![key, holder, expires_at],
                )
                .unwrap();
            }
        }
        drop(conn);
        let (store, recovery) = Store::open(&path).unwrap();
        let mut ended: Vec<String> = recovery
            .interrupted_runs
            .iter()
            .map(|r| r.as_str().to_owned())
            .collect();
        ended.sort();
        assert_eq!(
            ended,
            [
                "run_ses_lapsed",
                "run_ses_legacy",
                "run_ses_queued_gone",
                "run_ses_released"
            ]
        );
        for (name, state) in [
            ("ses_live", RunState::Running),
            ("ses_queued_live", RunState::Queued),
        ] {
            let run = store
                .run(&RunId::from_string(format!("run_{name}")))
                .await
                .unwrap()
                .unwrap();
            assert_eq!(run.state, state, "{name}");
        }
        // The lapsed lease was taken over: its holder's late writes are refused.
        let lapsed = SessionId::from_string("ses_lapsed".into());
        let taken = crate::core::lease::Leases::current(&store, &LeaseKey::session(&lapsed))
            .await
            .unwrap()
            .unwrap();
        assert_eq!((taken.token, taken.expires_at), (5, 0));
        assert_eq!(taken.holder, owner::this_process());
        let late = store
            .commit(Write::Fenced {
                fence: Fence {
                    key: LeaseKey::session(&lapsed),
                    token: 4,
                },
                write: Box::new(Write::SetTitle {
                    id: lapsed.clone(),
                    title: "late".into(),
                }),
            })
            .await;
        assert!(matches!(late, Err(StoreError::Fenced(_))), "{late:?}");
        // The live lease is untouched.
        let live = crate::core::lease::Leases::current(
            &store,
            &LeaseKey::session(&SessionId::from_string("ses_live".into())),
        )
        .await
        .unwrap()
        .unwrap();
        assert_eq!((live.token, live.holder.as_str()), (4, "host-b:1"));
        store.shutdown();
    }

    #[tokio::test]
    async fn sessions_survive_reopening_and_newer_schemas_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("nested/dir/pincer.db");
        let (store, _) = Store::open(&path).unwrap();
        store
            .commit(Write::InsertSession(session("ses_1")))
            .await
            .unwrap();
        store.shutdown();
        drop(store);
        let (store, recovery) = Store::open(&path).unwrap();
        assert!(recovery.interrupted_runs.is_empty());
        let loaded = store
            .session(&SessionId::from_string("ses_1".into()))
            .await
            .unwrap();
        assert_eq!(loaded, Some(session("ses_1")));
        assert_eq!(probe(&path).unwrap(), schema_version());
        let journal: String = Connection::open(&path)
            .unwrap()
            .pragma_query_value(None, "journal_mode", |r| r.get(0))
            .unwrap();
        assert_eq!(journal, "wal");
        store.shutdown();
        drop(store);
        Connection::open(&path)
            .unwrap()
            .pragma_update(None, "user_version", schema_version() + 1)
            .unwrap();
        let err = Store::open(&path).err().unwrap().to_string();
        assert!(err.contains("newer than this pincer knows"), "{err}");
    }
}
