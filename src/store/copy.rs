//! `pincer store copy`: everything a store holds, from SQLite to PostgreSQL
//! or back, table by table, into an empty target in one transaction; then
//! the rows of each table counted on both sides, before that transaction
//! commits.
//!
//! The source is only read, as one snapshot: SQLite through a read-only
//! connection in one read transaction, PostgreSQL in a `REPEATABLE READ
//! READ ONLY` transaction. A SQLite source older than this pincer is first
//! opened as every process opens it, which migrates it (the one write a
//! copy makes to its source); a PostgreSQL source of another version, and
//! any source newer than this pincer, is refused, naming both versions. A
//! source with runs not ended is refused too: a copy is of a store at rest.
//!
//! The target is migrated first, then written in one transaction (all or
//! nothing), with every copied table locked against other writers on
//! PostgreSQL, and refused unless it holds no session, receipt or memory
//! item. Rows are read in batches (a SQLite statement stepped, a PostgreSQL
//! cursor fetched) and written as they come (`COPY … FROM STDIN BINARY` on
//! PostgreSQL), so a long tape is never held in memory whole.
//!
//! Every number a row is known by is kept: receipts' `seq`, `prev_hash`
//! and `hash` (the chain verifies on the target; PostgreSQL's
//! `receipt_head` is set to the last), the tape's ids, the memory items'
//! rowids and the rows named by them (`memory_vectors`, `memory_changes`),
//! the requests left for runs. A run's place among its session's runs is
//! kept: PostgreSQL's `pos` is assigned in SQLite's rowid order per session
//! (and `sessions.runs_made` is the session's run count); on the way back
//! runs are inserted in `pos` order, so SQLite's rowid order follows it.
//! PostgreSQL's counters and sequences are set past the copied numbers.
//!
//! Not copied: leases (the live state of the source's processes; the
//! target's processes claim their own, and fencing tokens only need to grow
//! within one store), the departures of memory vectors
//! (`memory_vectors_gone`: news only for a process that loaded the vectors
//! before, and the target's processes load them afresh), and what only
//! PostgreSQL's instances keep about themselves (`instances`,
//! `writer_commits`).

use std::path::{Path, PathBuf};

use rusqlite::types::Value as SqlValue;
use tokio_postgres::types::{ToSql, Type};

use super::StoreError;
use super::postgres::connect::Server;

/// One side of a copy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Place {
    /// A data directory (its `pincer.db`).
    Sqlite(PathBuf),
    /// A PostgreSQL URL.
    Postgres(String),
}

impl Place {
    /// A `postgres://` (or `postgresql://`) URL, else a data directory.
    pub fn parse(text: &str) -> Result<Self, String> {
        if text.starts_with("postgres://") || text.starts_with("postgresql://") {
            Server::parse(text)?;
            return Ok(Place::Postgres(text.to_owned()));
        }
        if text.contains("://") {
            return Err(format!(
                "expected a data directory or a postgres:// URL, got {}",
                crate::core::quote::quote(&super::Target::redacted(text))
            ));
        }
        Ok(Place::Sqlite(PathBuf::from(text)))
    }

    /// Whether `self` and `other` name the same store (a data directory
    /// under two spellings included).
    fn same(&self, other: &Place) -> bool {
        match (self, other) {
            (Place::Sqlite(a), Place::Sqlite(b)) => {
                a == b
                    || matches!(
                        (std::fs::canonicalize(a), std::fs::canonicalize(b)),
                        (Ok(a), Ok(b)) if a == b
                    )
            }
            (Place::Postgres(a), Place::Postgres(b)) => a == b,
            (Place::Sqlite(_), Place::Postgres(_)) | (Place::Postgres(_), Place::Sqlite(_)) => {
                false
            }
        }
    }
}

impl std::fmt::Display for Place {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Place::Sqlite(dir) => write!(f, "SQLite {}", dir.join("pincer.db").display()),
            Place::Postgres(url) => write!(f, "PostgreSQL {}", super::Target::redacted(url)),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Int,
    Real,
    Text,
    Blob,
    Bool,
}

impl Kind {
    fn pg(self) -> Type {
        match self {
            Kind::Int => Type::INT8,
            Kind::Real => Type::FLOAT8,
            Kind::Text => Type::TEXT,
            Kind::Blob => Type::BYTEA,
            Kind::Bool => Type::BOOL,
        }
    }
}

/// A table as copied: its columns (with what to read in its place on each
/// backend, when the two differ) and the order rows are read in.
struct Table {
    name: &'static str,
    columns: &'static [Column],
    sqlite_order: &'static str,
    pg_order: &'static str,
    /// Run on the target before the table's rows are written: what the
    /// target's triggers made of the rows copied before.
    before: Option<&'static str>,
}

const fn table(name: &'static str, columns: &'static [Column], order: &'static str) -> Table {
    Table {
        name,
        columns,
        sqlite_order: order,
        pg_order: order,
        before: None,
    }
}

struct Column {
    name: &'static str,
    kind: Kind,
    /// What SQLite reads for it (`None`: the column itself).
    sqlite: Option<&'static str>,
    /// Whether SQLite has the column to write into.
    in_sqlite: bool,
}

const fn col(name: &'static str, kind: Kind) -> Column {
    Column {
        name,
        kind,
        sqlite: None,
        in_sqlite: true,
    }
}

use Kind::{Blob, Bool, Int, Real, Text};

/// Every table copied, in an order that writes what others name first.
const TABLES: &[Table] = &[
    table(
        "sessions",
        &[
            col("id", Text),
            col("workspace", Text),
            col("origin", Text),
            col("provider", Text),
            col("model", Text),
            col("mode", Text),
            col("title", Text),
            col("mcp_servers", Text),
            col("created_at", Int),
            col("updated_at", Int),
            col("closed", Bool),
            col("conversation", Text),
            col("system_prompt", Text),
            col("instructions", Text),
            col("parent_session", Text),
            col("parent_run", Text),
            col("parent_call", Text),
            col("deleted_at", Int),
            col("thought_level", Text),
        ],
        "id",
    ),
    table(
        "messages",
        &[
            col("session_id", Text),
            col("seq", Int),
            col("run_id", Text),
            col("role", Text),
            col("body", Text),
            col("at", Int),
        ],
        "session_id, seq",
    ),
    Table {
        name: "runs",
        columns: &[
            col("id", Text),
            col("session_id", Text),
            Column {
                name: "pos",
                kind: Int,
                sqlite: Some("row_number() OVER (PARTITION BY session_id ORDER BY rowid)"),
                in_sqlite: false,
            },
            col("state", Text),
            col("stop_reason", Text),
            col("error", Text),
            col("owner", Text),
            col("input_tokens", Int),
            col("output_tokens", Int),
            col("cached_input_tokens", Int),
            col("reasoning_tokens", Int),
            col("cost", Real),
            col("currency", Text),
            col("created_at", Int),
            col("started_at", Int),
            col("ended_at", Int),
        ],
        // Within a session, in the order its runs were made: SQLite's
        // rowid order on the way back.
        sqlite_order: "session_id, rowid",
        pg_order: "session_id, pos",
        before: None,
    },
    table(
        "tape",
        &[
            col("id", Int),
            col("run_id", Text),
            col("session_id", Text),
            col("seq", Int),
            col("at", Int),
            col("kind", Text),
            col("payload", Text),
        ],
        "id",
    ),
    table(
        "receipts",
        &[
            col("seq", Int),
            col("session_id", Text),
            col("run_id", Text),
            col("call_id", Text),
            col("tool", Text),
            col("input_hash", Text),
            col("output_hash", Text),
            col("verdict", Text),
            col("is_error", Bool),
            col("at", Int),
            col("prev_hash", Text),
            col("hash", Text),
            col("hooks", Text),
            col("skills", Text),
        ],
        "seq",
    ),
    table(
        "grants",
        &[
            col("session_id", Text),
            col("tool", Text),
            col("scope", Text),
            col("allow", Bool),
            col("at", Int),
        ],
        "session_id, tool, scope",
    ),
    table(
        "trusted_roots",
        &[col("root", Text), col("at", Int), col("files", Text)],
        "root",
    ),
    table(
        "session_controls",
        &[
            col("id", Int),
            col("session_id", Text),
            col("control", Text),
            col("at", Int),
        ],
        "id",
    ),
    table(
        "session_costs",
        &[
            col("session_id", Text),
            col("currency", Text),
            col("amount", Real),
            col("first_at", Int),
        ],
        "session_id, currency",
    ),
    table(
        "channel_inbox",
        &[
            col("channel", Text),
            col("account", Text),
            col("message_id", Text),
            col("target", Text),
            col("state", Text),
            col("run_id", Text),
            col("message", Text),
            col("received_at", Int),
            col("updated_at", Int),
        ],
        "channel, account, message_id",
    ),
    table(
        "channel_outbox",
        &[
            col("id", Text),
            col("channel", Text),
            col("account", Text),
            col("status", Text),
            col("next_attempt_at", Int),
            col("owner", Text),
            col("intent", Text),
            col("created_at", Int),
            col("updated_at", Int),
        ],
        "id",
    ),
    table(
        "channel_cursors",
        &[
            col("channel", Text),
            col("account", Text),
            col("name", Text),
            col("value", Text),
        ],
        "channel, account, name",
    ),
    table(
        "channel_sessions",
        &[
            col("channel", Text),
            col("account", Text),
            col("target", Text),
            col("session_id", Text),
            col("created_at", Int),
        ],
        "channel, account, target",
    ),
    table(
        "channel_peers",
        &[
            col("channel", Text),
            col("account", Text),
            col("sender", Text),
            col("paired_at", Int),
        ],
        "channel, account, sender",
    ),
    table(
        "channel_drafts",
        &[
            col("run_id", Text),
            col("channel", Text),
            col("account", Text),
            col("target", Text),
            col("platform_id", Text),
            col("text", Text),
            col("updated_at", Int),
        ],
        "run_id",
    ),
    table(
        "memories",
        &[
            col("rowid", Int),
            col("id", Text),
            col("scope", Text),
            col("scope_key", Text),
            col("text", Text),
            col("tags", Text),
            col("scope_token", Text),
            col("source", Text),
            col("created_at", Int),
            col("updated_at", Int),
            col("last_used_at", Int),
            col("pinned", Bool),
        ],
        "rowid",
    ),
    Table {
        name: "memory_changes",
        columns: &[col("item", Int), col("seq", Int)],
        sqlite_order: "seq",
        pg_order: "seq",
        // The memories' insert trigger numbered each copied item anew; the
        // source's numbers (departures of forgotten items included) replace
        // them.
        before: Some("DELETE FROM memory_changes"),
    },
    table(
        "memory_vectors",
        &[
            col("seq", Int),
            col("item", Int),
            col("model", Text),
            col("vector", Blob),
        ],
        "seq",
    ),
    table(
        "schedules",
        &[
            col("id", Text),
            col("schedule", Text),
            col("created_at", Int),
        ],
        "id",
    ),
    table(
        "schedule_fires",
        &[
            col("schedule_id", Text),
            col("occurrence", Int),
            col("state", Text),
            col("manual", Bool),
            col("fire", Text),
            col("updated_at", Int),
        ],
        "schedule_id, occurrence",
    ),
];

/// Rows fetched at a time from a PostgreSQL cursor.
const BATCH: usize = 2_000;

/// Runs not ended: a process is (or was, until it died) working them.
const OPEN_RUNS: &str = "SELECT COUNT(*) FROM runs WHERE state IN ('queued', 'running', 'waiting')";

/// What the target must not hold (see [`not_empty`]).
const HELD: &str = "SELECT (SELECT COUNT(*) FROM sessions), (SELECT COUNT(*) FROM receipts), (SELECT COUNT(*) FROM memories)";

/// One value as copied.
#[derive(Debug, Clone, PartialEq)]
enum Val {
    Null,
    Int(i64),
    Real(f64),
    Text(String),
    Blob(Vec<u8>),
    Bool(bool),
}

/// What a copy did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Copied {
    /// Each table's rows on the source and on the target, in copy order.
    pub tables: Vec<(&'static str, u64, u64)>,
    /// The schema versions a SQLite source older than this pincer was
    /// migrated from and to before it was read.
    pub source_migrated: Option<(i64, i64)>,
}

/// A PostgreSQL failure at `table`.
fn pg(table: &str) -> impl Fn(tokio_postgres::Error) -> StoreError + '_ {
    move |err| StoreError::Postgres(format!("{table}: {}", crate::causes::chain(&err)))
}

/// A failure reading SQLite at `table`.
fn read_failed(table: &str) -> impl Fn(rusqlite::Error) -> StoreError + '_ {
    move |err| StoreError::Read(format!("{table}: {err}"))
}

/// A failure writing SQLite at `table`.
fn write_failed(table: &str) -> impl Fn(rusqlite::Error) -> StoreError + '_ {
    move |err| StoreError::Write(format!("{table}: {err}"))
}

/// Copies every table of `from` into `to`, which must hold none of it.
pub async fn copy(from: &Place, to: &Place) -> Result<Copied, StoreError> {
    if from.same(to) {
        return Err(StoreError::Conflict(
            "the source and the target are the same store".into(),
        ));
    }
    match (from, to) {
        (Place::Sqlite(source), Place::Postgres(target)) => sqlite_to_postgres(source, target).await,
        (Place::Postgres(source), Place::Sqlite(target)) => postgres_to_sqlite(source, target).await,
        (Place::Sqlite(_), Place::Sqlite(_)) | (Place::Postgres(_), Place::Postgres(_)) => {
            Err(StoreError::Conflict(
                "a copy goes from SQLite to PostgreSQL or back (copy a SQLite data directory's pincer.db with the sqlite3 .backup command, a PostgreSQL database with pg_dump)".into(),
            ))
        }
    }
}

/// A data directory's store as a copy reads it: through a read-only
/// connection, in one read transaction (one snapshot for the whole copy).
/// A store older than this pincer is opened as every process opens it
/// first, which migrates it: the versions are returned.
fn sqlite_source(dir: &Path) -> Result<(rusqlite::Connection, Option<(i64, i64)>), StoreError> {
    let path = dir.join("pincer.db");
    if !path.is_file() {
        return Err(StoreError::Read(format!(
            "no Pincer store at {}",
            path.display()
        )));
    }
    let found = super::probe(&path)?;
    let known = super::schema_version();
    if found > known {
        return Err(StoreError::TooNew { path, found, known });
    }
    let migrated = if found < known {
        let (store, _) = super::Store::open(&path)?;
        store.shutdown();
        Some((found, known))
    } else {
        None
    };
    let conn =
        rusqlite::Connection::open_with_flags(&path, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)
            .map_err(|source| StoreError::Open {
                path: path.clone(),
                source,
            })?;
    conn.busy_timeout(super::OPEN_BUSY_WAIT)
        .map_err(read_failed("pincer.db"))?;
    conn.execute_batch("BEGIN")
        .map_err(read_failed("pincer.db"))?;
    let open: i64 = conn
        .query_row(OPEN_RUNS, [], |row| row.get(0))
        .map_err(read_failed("runs"))?;
    refuse_open_runs(
        open,
        &format!("pincer --data-dir {} store migrate", dir.display()),
    )?;
    Ok((conn, migrated))
}

fn refuse_open_runs(open: i64, opener: &str) -> Result<(), StoreError> {
    if open > 0 {
        return Err(StoreError::Conflict(format!(
            "the source has {open} run(s) not ended: stop every Pincer using it (a copy is of a store at rest), then copy again; the runs of processes that are gone are ended by the next pincer that opens the store (`{opener}`)"
        )));
    }
    Ok(())
}

/// A connection to the PostgreSQL server `url` names, and the URL as shown.
async fn connect(url: &str) -> Result<(tokio_postgres::Client, String), StoreError> {
    let server = Server::parse(url).map_err(StoreError::Postgres)?;
    let client = server
        .connect()
        .await
        .map_err(|err| StoreError::Unreachable {
            url: server.shown.clone(),
            reason: crate::causes::chain(&err),
        })?;
    Ok((client, server.shown))
}

/// A PostgreSQL store as a copy reads it: in a `REPEATABLE READ READ
/// ONLY` transaction (one snapshot for the whole copy), its schema this
/// pincer's own.
async fn pg_source(url: &str) -> Result<tokio_postgres::Client, StoreError> {
    let (client, shown) = connect(url).await?;
    client
        .batch_execute("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
        .await
        .map_err(pg("the source"))?;
    let found = super::postgres::current_version(&client).await?;
    let known = super::postgres::schema_version();
    if found > known {
        return Err(StoreError::TooNewServer { found, known });
    }
    if found == 0 {
        return Err(StoreError::Read(format!("no Pincer store in {shown}")));
    }
    if found < known {
        return Err(StoreError::Conflict(format!(
            "the source database has schema version {found}, older than this pincer's ({known}): migrate it first (`pincer --store URL store migrate`)"
        )));
    }
    let open: i64 = client
        .query_one(OPEN_RUNS, &[])
        .await
        .and_then(|row| row.try_get(0))
        .map_err(pg("runs"))?;
    refuse_open_runs(open, "pincer --store URL store migrate")?;
    Ok(client)
}

/// The target's store must be empty: its sessions, receipts and memory
/// items, counted.
fn not_empty((sessions, receipts, memories): (i64, i64, i64), fix: &str) -> Result<(), StoreError> {
    if sessions + receipts + memories > 0 {
        return Err(StoreError::Conflict(format!(
            "the target is not empty: it holds {sessions} session(s), {receipts} receipt(s) and {memories} memory item(s); {fix} (nothing was written)"
        )));
    }
    Ok(())
}

/// A connection to the PostgreSQL target, its schema migrated, in a
/// transaction holding every copied table against other writers, its
/// store checked empty.
async fn pg_target(url: &str) -> Result<tokio_postgres::Client, StoreError> {
    let (client, _) = connect(url).await?;
    super::postgres::migrate(&client).await?;
    let tables: Vec<&str> = TABLES
        .iter()
        .map(|t| t.name)
        .chain(["receipt_head", "counters"])
        .collect();
    client
        .batch_execute(&format!(
            "BEGIN; SET LOCAL lock_timeout = '10s'; LOCK TABLE {} IN EXCLUSIVE MODE",
            tables.join(", ")
        ))
        .await
        .map_err(pg("the target"))?;
    let row = client
        .query_one(HELD, &[])
        .await
        .map_err(pg("the target"))?;
    let held = (|| -> Result<(i64, i64, i64), tokio_postgres::Error> {
        Ok((row.try_get(0)?, row.try_get(1)?, row.try_get(2)?))
    })()
    .map_err(pg("the target"))?;
    not_empty(held, "copy into an empty database")?;
    Ok(client)
}

/// The data directory's store, made and migrated as every process makes
/// it, then a connection of the copy's own to write it.
fn sqlite_target(dir: &Path) -> Result<rusqlite::Connection, StoreError> {
    let path = dir.join("pincer.db");
    let (store, _) = super::Store::open(&path)?;
    store.shutdown();
    let conn = rusqlite::Connection::open(&path).map_err(|source| StoreError::Open {
        path: path.clone(),
        source,
    })?;
    conn.busy_timeout(super::OPEN_BUSY_WAIT)
        .map_err(write_failed("pincer.db"))?;
    Ok(conn)
}

fn select(table: &Table, sqlite: bool) -> String {
    let columns: Vec<String> = table
        .columns
        .iter()
        .map(|c| match (sqlite, c.sqlite) {
            (true, Some(expr)) => format!("{expr} AS {}", c.name),
            _ => c.name.to_owned(),
        })
        .collect();
    format!(
        "SELECT {} FROM {} ORDER BY {}",
        columns.join(", "),
        table.name,
        if sqlite {
            table.sqlite_order
        } else {
            table.pg_order
        }
    )
}

fn read_sqlite_row(row: &rusqlite::Row<'_>, table: &Table) -> rusqlite::Result<Vec<Val>> {
    table
        .columns
        .iter()
        .enumerate()
        .map(|(i, c)| {
            Ok(match c.kind {
                Int => row.get::<_, Option<i64>>(i)?.map_or(Val::Null, Val::Int),
                Real => row.get::<_, Option<f64>>(i)?.map_or(Val::Null, Val::Real),
                Text => row
                    .get::<_, Option<String>>(i)?
                    .map_or(Val::Null, Val::Text),
                Blob => row
                    .get::<_, Option<Vec<u8>>>(i)?
                    .map_or(Val::Null, Val::Blob),
                Bool => row
                    .get::<_, Option<i64>>(i)?
                    .map_or(Val::Null, |n| Val::Bool(n != 0)),
            })
        })
        .collect()
}

fn read_pg_row(
    row: &tokio_postgres::Row,
    table: &Table,
) -> Result<Vec<Val>, tokio_postgres::Error> {
    table
        .columns
        .iter()
        .enumerate()
        .map(|(i, c)| {
            Ok(match c.kind {
                Int => row
                    .try_get::<_, Option<i64>>(i)?
                    .map_or(Val::Null, Val::Int),
                Real => row
                    .try_get::<_, Option<f64>>(i)?
                    .map_or(Val::Null, Val::Real),
                Text => row
                    .try_get::<_, Option<String>>(i)?
                    .map_or(Val::Null, Val::Text),
                Blob => row
                    .try_get::<_, Option<Vec<u8>>>(i)?
                    .map_or(Val::Null, Val::Blob),
                Bool => row
                    .try_get::<_, Option<bool>>(i)?
                    .map_or(Val::Null, Val::Bool),
            })
        })
        .collect()
}

/// A value as the PostgreSQL column of `kind` takes it (a row is read by
/// its columns' kinds, so a value's variant is its column's kind).
fn pg_value(value: Val, kind: Kind) -> Box<dyn ToSql + Sync + Send> {
    match value {
        Val::Int(n) => Box::new(n),
        Val::Real(x) => Box::new(x),
        Val::Text(s) => Box::new(s),
        Val::Blob(b) => Box::new(b),
        Val::Bool(b) => Box::new(b),
        Val::Null => match kind {
            Int => Box::new(None::<i64>),
            Real => Box::new(None::<f64>),
            Text => Box::new(None::<String>),
            Blob => Box::new(None::<Vec<u8>>),
            Bool => Box::new(None::<bool>),
        },
    }
}

fn sqlite_value(value: Val) -> SqlValue {
    match value {
        Val::Null => SqlValue::Null,
        Val::Int(n) => SqlValue::Integer(n),
        Val::Real(x) => SqlValue::Real(x),
        Val::Text(s) => SqlValue::Text(s),
        Val::Blob(b) => SqlValue::Blob(b),
        Val::Bool(b) => SqlValue::Integer(i64::from(b)),
    }
}

async fn sqlite_to_postgres(source: &Path, target: &str) -> Result<Copied, StoreError> {
    let (conn, source_migrated) = sqlite_source(source)?;
    let client = pg_target(target).await?;
    let copied = async {
        for table in TABLES {
            to_postgres(&conn, &client, table).await?;
        }
        finish_postgres(&client).await?;
        let mut counts = Vec::new();
        for table in TABLES {
            counts.push((
                table.name,
                sqlite_count(&conn, table.name)?,
                pg_count(&client, table.name).await?,
            ));
        }
        checked(counts)
    }
    .await;
    let tables = match copied {
        Ok(tables) => {
            client
                .batch_execute("COMMIT")
                .await
                .map_err(pg("the target"))?;
            tables
        }
        Err(err) => {
            let _ = client.batch_execute("ROLLBACK").await;
            return Err(err);
        }
    };
    Ok(Copied {
        tables,
        source_migrated,
    })
}

/// One table's rows from SQLite into PostgreSQL, streamed through `COPY`
/// as the SQLite statement steps through them.
async fn to_postgres(
    conn: &rusqlite::Connection,
    client: &tokio_postgres::Client,
    table: &Table,
) -> Result<(), StoreError> {
    if let Some(before) = table.before {
        client.batch_execute(before).await.map_err(pg(table.name))?;
    }
    let columns: Vec<&str> = table.columns.iter().map(|c| c.name).collect();
    let types: Vec<Type> = table.columns.iter().map(|c| c.kind.pg()).collect();
    let sink = client
        .copy_in(&format!(
            "COPY {} ({}) FROM STDIN BINARY",
            table.name,
            columns.join(", ")
        ))
        .await
        .map_err(pg(table.name))?;
    let writer = tokio_postgres::binary_copy::BinaryCopyInWriter::new(sink, &types);
    futures::pin_mut!(writer);
    let mut statement = conn
        .prepare(&select(table, true))
        .map_err(read_failed(table.name))?;
    let mut rows = statement.query([]).map_err(read_failed(table.name))?;
    while let Some(row) = rows.next().map_err(read_failed(table.name))? {
        let values: Vec<Box<dyn ToSql + Sync + Send>> = read_sqlite_row(row, table)
            .map_err(read_failed(table.name))?
            .into_iter()
            .zip(table.columns)
            .map(|(value, column)| pg_value(value, column.kind))
            .collect();
        let values: Vec<&(dyn ToSql + Sync)> = values
            .iter()
            .map(|value| value.as_ref() as &(dyn ToSql + Sync))
            .collect();
        writer
            .as_mut()
            .write(&values)
            .await
            .map_err(pg(table.name))?;
    }
    writer.as_mut().finish().await.map_err(pg(table.name))?;
    Ok(())
}

/// What PostgreSQL keeps beside the rows: each session's run count, the
/// chain's head, the counters and sequences past the copied numbers.
async fn finish_postgres(client: &tokio_postgres::Client) -> Result<(), StoreError> {
    client
        .batch_execute(
            "UPDATE sessions s SET runs_made = r.n
               FROM (SELECT session_id, COUNT(*) AS n FROM runs GROUP BY session_id) r
              WHERE r.session_id = s.id;
             UPDATE receipt_head SET seq = r.seq, hash = r.hash
               FROM (SELECT seq, hash FROM receipts ORDER BY seq DESC LIMIT 1) r WHERE one;
             UPDATE counters SET n = GREATEST(n, (SELECT COALESCE(MAX(seq), 0) FROM memory_changes))
              WHERE name = 'memory_changes';
             UPDATE counters SET n = GREATEST(n, (SELECT COALESCE(MAX(seq), 0) FROM memory_vectors))
              WHERE name = 'memory_vectors';
             SELECT setval(pg_get_serial_sequence('tape', 'id'), COALESCE((SELECT MAX(id) FROM tape), 0) + 1, false);
             SELECT setval(pg_get_serial_sequence('session_controls', 'id'), COALESCE((SELECT MAX(id) FROM session_controls), 0) + 1, false);
             SELECT setval(pg_get_serial_sequence('memories', 'rowid'), COALESCE((SELECT MAX(rowid) FROM memories), 0) + 1, false);",
        )
        .await
        .map_err(pg("counters and sequences"))
}

fn count(n: i64) -> u64 {
    u64::try_from(n).unwrap_or(0)
}

async fn pg_count(client: &tokio_postgres::Client, table: &str) -> Result<u64, StoreError> {
    client
        .query_one(&format!("SELECT COUNT(*) FROM {table}"), &[])
        .await
        .and_then(|row| row.try_get(0))
        .map(count)
        .map_err(pg(table))
}

fn sqlite_count(conn: &rusqlite::Connection, table: &str) -> Result<u64, StoreError> {
    conn.query_row(&format!("SELECT COUNT(*) FROM {table}"), [], |row| {
        row.get(0)
    })
    .map(count)
    .map_err(read_failed(table))
}

/// The counts, when every table has as many rows on the target as on the
/// source; else the first table where they differ, named.
fn checked(
    counts: Vec<(&'static str, u64, u64)>,
) -> Result<Vec<(&'static str, u64, u64)>, StoreError> {
    if let Some((table, from, to)) = counts.iter().find(|(_, from, to)| from != to) {
        return Err(StoreError::Conflict(format!(
            "the rows of {table} differ after the copy: {from} in the source, {to} in the target (nothing was written)"
        )));
    }
    Ok(counts)
}

async fn postgres_to_sqlite(source: &str, target: &Path) -> Result<Copied, StoreError> {
    let client = pg_source(source).await?;
    let mut conn = sqlite_target(target)?;
    let copied = async {
        let tx = conn
            .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)
            .map_err(write_failed("pincer.db"))?;
        let held = tx
            .query_row(HELD, [], |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?)))
            .map_err(read_failed("pincer.db"))?;
        not_empty(held, "copy into a new data directory")?;
        for table in TABLES {
            to_sqlite(&client, &tx, table).await?;
        }
        let mut counts = Vec::new();
        for table in TABLES {
            counts.push((
                table.name,
                pg_count(&client, table.name).await?,
                sqlite_count(&tx, table.name)?,
            ));
        }
        let tables = checked(counts)?;
        tx.commit().map_err(write_failed("pincer.db"))?;
        Ok::<_, StoreError>(tables)
    }
    .await;
    // The source's read-only snapshot ends either way.
    let _ = client.batch_execute("COMMIT").await;
    Ok(Copied {
        tables: copied?,
        source_migrated: None,
    })
}

/// One table's rows from PostgreSQL into SQLite, fetched from a cursor
/// [`BATCH`] rows at a time.
async fn to_sqlite(
    client: &tokio_postgres::Client,
    tx: &rusqlite::Transaction<'_>,
    table: &Table,
) -> Result<(), StoreError> {
    if let Some(before) = table.before {
        tx.execute_batch(before).map_err(write_failed(table.name))?;
    }
    let kept: Vec<&Column> = table.columns.iter().filter(|c| c.in_sqlite).collect();
    let names: Vec<&str> = kept.iter().map(|c| c.name).collect();
    let marks: Vec<String> = (1..=kept.len()).map(|i| format!("?{i}")).collect();
    let mut statement = tx
        .prepare(&format!(
            "INSERT INTO {} ({}) VALUES ({})",
            table.name,
            names.join(", "),
            marks.join(", ")
        ))
        .map_err(write_failed(table.name))?;
    let cursor = format!("copy_{}", table.name);
    client
        .batch_execute(&format!(
            "DECLARE {cursor} NO SCROLL CURSOR FOR {}",
            select(table, false)
        ))
        .await
        .map_err(pg(table.name))?;
    let fetch = format!("FETCH {BATCH} FROM {cursor}");
    loop {
        let rows = client.query(&fetch, &[]).await.map_err(pg(table.name))?;
        if rows.is_empty() {
            break;
        }
        for row in &rows {
            let values = read_pg_row(row, table).map_err(pg(table.name))?;
            let values = values
                .into_iter()
                .zip(table.columns)
                .filter(|(_, c)| c.in_sqlite)
                .map(|(value, _)| sqlite_value(value));
            statement
                .execute(rusqlite::params_from_iter(values))
                .map_err(write_failed(table.name))?;
        }
    }
    client
        .batch_execute(&format!("CLOSE {cursor}"))
        .await
        .map_err(pg(table.name))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::channel::contract::{insert, intent, message, record, target};
    use crate::core::channel::{ChannelWrite, ConversationKey, IntentStatus};
    use crate::core::ids::{RunId, SessionId};
    use crate::core::journal::{Audit as _, Journal as _, SessionQuery, Write};
    use crate::core::lease::{LeaseKey, Leases as _};
    use crate::core::memory::{
        Memories as _, MemoryFilter, MemoryItem, MemorySearch, MemorySource, MemoryWrite,
        QueryVector, Scope,
    };
    use crate::store::{Backend, Store};

    const SESSIONS: [&str; 2] = ["ses_fill", "ses_two"];
    /// Events on the long run: more than one cursor batch.
    const LONG: usize = BATCH * 2 + 345;

    fn sid(id: &str) -> SessionId {
        SessionId::from_string(id.into())
    }

    fn rid(id: &str) -> RunId {
        RunId::from_string(id.into())
    }

    fn session(id: &str, parent: Option<&str>) -> crate::core::session::Session {
        crate::core::session::Session {
            id: sid(id),
            workspace: "/ws".into(),
            origin: crate::core::session::Origin::Headless,
            provider: "p".into(),
            model: "m".into(),
            mode: crate::core::session::Mode::Supervised,
            title: Some(format!("{id} filled")),
            mcp_servers: serde_json::json!([]),
            created_at: 1,
            updated_at: 1,
            closed: false,
            conversation: Some("chat/1".into()),
            prompt: crate::core::session::PromptSettings::default(),
            parent: parent.map(|p| crate::core::session::SessionParent {
                session: sid(p),
                run: rid("run_b"),
                call: "call_0".into(),
            }),
            thought_level: Some("high".into()),
        }
    }

    fn receipt(session: &str, run: &str, call: String) -> Write {
        Write::AppendReceipt(crate::core::receipt::ReceiptBody {
            session_id: sid(session),
            run_id: rid(run),
            call_id: call,
            tool: "read_file".into(),
            input_hash: "a".repeat(64),
            output_hash: "b".repeat(64),
            verdict: crate::core::receipt::Verdict::Allowed,
            is_error: false,
            at: 4,
            hooks: vec!["guard: allow".into()],
            skills: Vec::new(),
        })
    }

    fn event(session: &str, run: &str, seq: u64, text: &str) -> Write {
        Write::AppendEvent(crate::core::event::EventRecord {
            session_id: sid(session),
            run_id: rid(run),
            seq,
            at: 3,
            event: crate::core::event::Event::TextDelta { text: text.into() },
        })
    }

    fn ended(run: &str, cost: Option<f64>) -> Write {
        Write::SetRunState {
            id: rid(run),
            state: crate::core::event::RunState::Completed,
            stop_reason: Some(crate::core::event::StopReason::EndTurn),
            error: None,
            usage: crate::core::usage::Usage::default(),
            cost: cost.map(|amount| crate::core::models::Cost {
                amount,
                currency: "USD".into(),
            }),
            at: 4,
        }
    }

    fn memory(id: &str, text: &str) -> MemoryItem {
        MemoryItem {
            id: id.into(),
            text: text.into(),
            scope: Scope::User,
            scope_key: String::new(),
            tags: vec!["deploy".into()],
            source: MemorySource {
                by: "person".into(),
                ..MemorySource::default()
            },
            created_at: 9,
            updated_at: 9,
            last_used_at: Some(10),
            pinned: true,
        }
    }

    /// Two sessions (one a subagent's), runs made in an order their ids
    /// do not sort in (one with more events than a cursor batch), their
    /// messages, events, receipts and costs, a grant, a trusted project, a
    /// request left for a run, every kind of channel record, memory items
    /// (one edited, one forgotten, one embedded) and a lease: every table
    /// written through the ports.
    async fn fill(store: &Store) {
        store.submit(Write::InsertSession(session("ses_fill", None)));
        store.submit(Write::InsertSession(session("ses_two", Some("ses_fill"))));
        for (n, (ses, run)) in [
            ("ses_fill", "run_b"),
            ("ses_two", "run_z"),
            ("ses_fill", "run_a"),
            ("ses_fill", "run_c"),
        ]
        .into_iter()
        .enumerate()
        {
            store.submit(Write::InsertRun {
                id: rid(run),
                session_id: sid(ses),
                at: 2 + n as i64,
            });
            store.submit(Write::AppendMessage {
                session_id: sid(ses),
                run_id: Some(rid(run)),
                message: crate::core::session::Message::Note {
                    text: format!("note {n}"),
                },
                at: 3,
            });
            store.submit(event(ses, run, 0, "hi"));
            store.submit(receipt(ses, run, format!("call_{n}")));
            store.submit(ended(run, (n != 1).then_some(0.5)));
        }
        for seq in 1..LONG as u64 {
            store.submit(event("ses_fill", "run_c", seq, &format!("part {seq}")));
        }
        store.submit(Write::PutGrant {
            session_id: sid("ses_fill"),
            grant: crate::core::approval::Grant {
                tool: "shell".into(),
                scope: "cargo test".into(),
                allow: true,
            },
            at: 5,
        });
        store.submit(Write::Trust(crate::core::hooks::TrustWrite::Set {
            root: "/ws".into(),
            trusted: true,
            at: 5,
            files: vec![crate::core::hooks::TrustedFile {
                path: ".claude/settings.json".into(),
                digest: Some("c".repeat(64)),
                hooks: vec!["PreToolUse shell ./guard".into()],
            }],
        }));
        for _ in 0..2 {
            store.submit(Write::Control {
                session: sid("ses_fill"),
                control: crate::core::control::Control::Cancel {
                    runs: vec![rid("run_c")],
                },
                at: 5,
            });
        }
        fill_channels(store);
        fill_schedules(store);
        fill_memory(store).await;
        store
            .claim(
                &LeaseKey::from(&sid("ses_fill")),
                "pid:1@elsewhere",
                5,
                60_000,
            )
            .await
            .unwrap();
        store.flush().await.unwrap();
    }

    fn fill_schedules(store: &Store) {
        use crate::core::schedule::{Fire, FireState, Place, Schedule, ScheduleWrite, When};
        store.submit(Write::Schedule(ScheduleWrite::Put(Schedule {
            id: "daily".into(),
            when: When::Cron {
                expr: "0 9 * * MON-FRI".into(),
            },
            tz: "Europe/Berlin".into(),
            prompt: "the news".into(),
            place: Place::Session(sid("ses_fill")),
            deliver: None,
            catch_up_ms: 3_600_000,
            created_at: 5,
            origin: "cli".into(),
        })));
        store.submit(Write::Schedule(ScheduleWrite::Claim(Fire {
            schedule_id: "daily".into(),
            occurrence: 7,
            state: FireState::Done,
            run_id: Some(rid("run_1")),
            session_id: Some(sid("ses_fill")),
            intent_id: None,
            note: None,
            by: "pid:1@elsewhere".into(),
            manual: true,
            created_at: 7,
            updated_at: 8,
        })));
    }

    fn fill_channels(store: &Store) {
        store.submit(record(message("bot", "41", "hello", 5), "42", 5));
        store.submit(insert(&intent(
            "reply:run_1",
            "telegram",
            IntentStatus::Pending,
            6,
        )));
        store.submit(Write::Channel(ChannelWrite::InsertIntent(intent(
            "draft:run_1",
            "telegram",
            IntentStatus::Sending,
            6,
        ))));
        store.submit(Write::Channel(ChannelWrite::MapConversation {
            key: key(),
            session_id: sid("ses_fill"),
            at: 7,
        }));
        store.submit(Write::Channel(ChannelWrite::PairPeer {
            channel: "telegram".into(),
            account: "bot".into(),
            sender: "u1".into(),
            at: 8,
        }));
    }

    async fn fill_memory(store: &Store) {
        for (id, text) in [
            ("mem_1", "Deploys go through staging"),
            ("mem_2", "Forgotten soon"),
            ("mem_3", "The staging database is read-only"),
        ] {
            store
                .write(MemoryWrite::Save(memory(id, text)))
                .await
                .unwrap();
        }
        store
            .write(MemoryWrite::Forget { id: "mem_2".into() })
            .await
            .unwrap();
        store
            .write(MemoryWrite::Update {
                id: "mem_1".into(),
                text: None,
                tags: Some(vec!["deploy".into(), "ops".into()]),
                pinned: None,
                at: 11,
            })
            .await
            .unwrap();
        store
            .write(MemoryWrite::Vector {
                id: "mem_3".into(),
                text: "The staging database is read-only".into(),
                model: "e".into(),
                vector: vec![0.25, -1.0, 3.5],
            })
            .await
            .unwrap();
    }

    fn key() -> ConversationKey {
        ConversationKey {
            channel: "telegram".into(),
            account: "bot".into(),
            target: target("-100"),
        }
    }

    /// Everything the ports read back, one line per answer.
    async fn view(store: &dyn Backend) -> Vec<String> {
        let mut seen = vec![format!(
            "{:?}",
            store
                .sessions(SessionQuery {
                    workspace: None,
                    after: None,
                    limit: 100,
                    ..SessionQuery::default()
                })
                .await
                .unwrap()
        )];
        for id in SESSIONS.map(sid) {
            seen.push(format!("{:?}", store.session(&id).await.unwrap()));
            seen.push(format!("{:?}", store.history(&id).await.unwrap()));
            let runs = store.runs(&id).await.unwrap();
            seen.push(format!("{runs:?}"));
            for run in &runs {
                seen.push(format!("{:?}", store.tape(&run.id, 0, None).await.unwrap()));
                seen.push(format!("{:?}", store.run_receipts(&run.id).await.unwrap()));
            }
            seen.push(format!("{:?}", store.grants(&id).await.unwrap()));
            seen.push(format!("{:?}", store.controls(&id).await.unwrap()));
            let cost = store.session_cost(&id, &rid("none")).await.unwrap();
            seen.push(format!("{cost:?}"));
        }
        seen.push(format!("{:?}", store.trusted_roots().await.unwrap()));
        seen.push(format!("{:?}", store.schedules().await.unwrap()));
        seen.push(format!("{:?}", store.fires(None, 100).await.unwrap()));
        seen.push(format!("{:?}", store.last_fired().await.unwrap()));
        let receipts = store.receipts(1, 1_000).await.unwrap();
        crate::core::receipt::verify(&receipts).unwrap();
        seen.push(format!("{receipts:?}"));
        seen.push(format!("{:?}", store.run_counts().await.unwrap()));
        seen.push(format!("{:?}", store.intent_counts().await.unwrap()));
        seen.push(format!(
            "{:?}",
            store.open_intents("telegram", "bot").await.unwrap()
        ));
        seen.push(format!(
            "{:?}",
            store.intents(None, None, 100).await.unwrap()
        ));
        seen.push(format!(
            "{:?}",
            store.open_inbox("telegram", "bot").await.unwrap()
        ));
        seen.push(format!(
            "{:?}",
            store.cursor("telegram", "bot", "offset").await.unwrap()
        ));
        seen.push(format!("{:?}", store.conversation(&key()).await.unwrap()));
        seen.push(format!(
            "{:?}",
            store.is_paired("telegram", "bot", "u1").await.unwrap()
        ));
        seen.push(format!(
            "{:?}",
            store.drafts("telegram", "bot").await.unwrap()
        ));
        seen.push(format!(
            "{:?}",
            store.list(MemoryFilter::default()).await.unwrap()
        ));
        let hits = store
            .search(MemorySearch {
                text: "staging".into(),
                within: Vec::new(),
                limit: 10,
                vector: Some(QueryVector {
                    model: "e".into(),
                    vector: vec![0.25, -1.0, 3.5],
                    min_similarity: 0.5,
                }),
            })
            .await
            .unwrap();
        seen.push(format!(
            "{:?}",
            hits.iter().map(|hit| &hit.item.id).collect::<Vec<_>>()
        ));
        seen
    }

    /// Every table's rows as SQLite reads them, in copy order.
    fn rows(path: &Path) -> Vec<(&'static str, Vec<Vec<Val>>)> {
        let conn = rusqlite::Connection::open(path).unwrap();
        TABLES
            .iter()
            .map(|table| {
                let mut statement = conn.prepare(&select(table, true)).unwrap();
                let rows = statement
                    .query_map([], |row| read_sqlite_row(row, table))
                    .unwrap()
                    .collect::<Result<Vec<_>, _>>()
                    .unwrap();
                (table.name, rows)
            })
            .collect()
    }

    async fn pg_numbers(url: &str) -> Vec<(String, i64)> {
        let (client, _) = connect(url).await.unwrap();
        let mut numbers = Vec::new();
        for (name, query) in [
            (
                "runs_made ses_fill",
                "SELECT runs_made FROM sessions WHERE id = 'ses_fill'",
            ),
            (
                "runs_made ses_two",
                "SELECT runs_made FROM sessions WHERE id = 'ses_two'",
            ),
            ("head", "SELECT seq FROM receipt_head"),
            (
                "memory_changes",
                "SELECT n FROM counters WHERE name = 'memory_changes'",
            ),
            (
                "memory_vectors",
                "SELECT n FROM counters WHERE name = 'memory_vectors'",
            ),
        ] {
            numbers.push((
                name.to_owned(),
                client.query_one(query, &[]).await.unwrap().get(0),
            ));
        }
        for row in client
            .query("SELECT id, pos FROM runs ORDER BY id", &[])
            .await
            .unwrap()
        {
            numbers.push((row.get(0), row.get(1)));
        }
        let head: String = client
            .query_one(
                "SELECT h.hash FROM receipt_head h JOIN receipts r ON r.seq = h.seq AND r.hash = h.hash",
                &[],
            )
            .await
            .unwrap()
            .get(0);
        assert_eq!(head.len(), 64);
        numbers
    }

    /// A store with a row in every table, written through the ports, copied
    /// to PostgreSQL and back: the ports read the same on all three, every
    /// row comes back as it was, and PostgreSQL's own numbers go on from
    /// the copied ones.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn every_row_of_every_table_survives_a_round_trip() {
        let dir = tempfile::tempdir().unwrap();
        let source = dir.path().join("source");
        let (store, _) = Store::open(&source.join("pincer.db")).unwrap();
        fill(&store).await;
        store.shutdown();
        // Nothing writes `channel_drafts` any more (a live draft is a send
        // intent, `draft:RUN`): a row an earlier version left.
        rusqlite::Connection::open(source.join("pincer.db"))
            .unwrap()
            .execute(
                "INSERT INTO channel_drafts VALUES ('run_old', 'telegram', 'bot', ?1, '99', 'draft text', 5)",
                [serde_json::to_string(&target("-100")).unwrap()],
            )
            .unwrap();
        let original = rows(&source.join("pincer.db"));
        for (table, rows) in &original {
            assert!(!rows.is_empty(), "the fill left {table} empty");
        }
        let (store, _) = Store::open(&source.join("pincer.db")).unwrap();
        let seen = view(&store).await;
        store.shutdown();
        assert!(seen.iter().any(|line| line.contains("run_old")), "{seen:?}");

        let url = crate::testing::postgres::shared().fresh_database();
        let there = copy(
            &Place::Sqlite(source.clone()),
            &Place::Postgres(url.clone()),
        )
        .await
        .unwrap();
        assert_eq!(there.source_migrated, None);
        let expected: Vec<(&str, u64, u64)> = original
            .iter()
            .map(|(table, rows)| (*table, rows.len() as u64, rows.len() as u64))
            .collect();
        assert_eq!(there.tables, expected);
        // The source was only read.
        assert_eq!(rows(&source.join("pincer.db")), original);
        assert_eq!(
            pg_numbers(&url).await,
            [
                ("runs_made ses_fill", 3),
                ("runs_made ses_two", 1),
                ("head", 4),
                ("memory_changes", 5),
                ("memory_vectors", 1),
                ("run_a", 2),
                ("run_b", 1),
                ("run_c", 3),
                ("run_z", 1),
            ]
            .map(|(name, n)| (name.to_owned(), n))
        );
        let (pg, _) = crate::store::postgres::Postgres::open(&url).await.unwrap();
        assert_eq!(view(&pg).await, seen);
        let lease = pg.current(&LeaseKey::from(&sid("ses_fill"))).await.unwrap();
        assert!(lease.is_none(), "leases are not copied: {lease:?}");
        pg.shutdown();

        // A target not empty is refused, and left as it was.
        let err = copy(
            &Place::Sqlite(source.clone()),
            &Place::Postgres(url.clone()),
        )
        .await
        .unwrap_err()
        .to_string();
        assert!(
            err.contains(
                "the target is not empty: it holds 2 session(s), 4 receipt(s) and 2 memory item(s)"
            ),
            "{err}"
        );

        let back = dir.path().join("back");
        let home = copy(&Place::Postgres(url.clone()), &Place::Sqlite(back.clone()))
            .await
            .unwrap();
        assert_eq!(home.tables, expected);
        assert_eq!(rows(&back.join("pincer.db")), original);
        let (store, _) = Store::open(&back.join("pincer.db")).unwrap();
        assert_eq!(view(&store).await, seen);
        store.shutdown();
        let err = copy(&Place::Postgres(url.clone()), &Place::Sqlite(back.clone()))
            .await
            .unwrap_err()
            .to_string();
        assert!(err.contains("the target is not empty"), "{err}");

        goes_on(&url).await;
    }

    /// PostgreSQL's own numbers (a session's next run, the chain, the
    /// tape's and requests' ids, memory rowids, changes and vectors) go on
    /// from the copied ones.
    async fn goes_on(url: &str) {
        let (pg, _) = crate::store::postgres::Postgres::open(url).await.unwrap();
        pg.submit(Write::InsertRun {
            id: rid("run_0"),
            session_id: sid("ses_fill"),
            at: 20,
        });
        pg.submit(event("ses_fill", "run_0", 0, "after the copy"));
        pg.submit(receipt("ses_fill", "run_0", "call_after".into()));
        pg.submit(ended("run_0", None));
        pg.submit(Write::Control {
            session: sid("ses_fill"),
            control: crate::core::control::Control::Cancel { runs: Vec::new() },
            at: 21,
        });
        pg.flush().await.unwrap();
        pg.write(MemoryWrite::Save(memory("mem_4", "Staging again")))
            .await
            .unwrap();
        pg.write(MemoryWrite::Vector {
            id: "mem_4".into(),
            text: "Staging again".into(),
            model: "e".into(),
            vector: vec![1.0, 0.0, 0.0],
        })
        .await
        .unwrap();
        let runs = pg.runs(&sid("ses_fill")).await.unwrap();
        let order: Vec<&str> = runs.iter().map(|run| run.id.as_str()).collect();
        assert_eq!(order, ["run_b", "run_a", "run_c", "run_0"]);
        let receipts = pg.receipts(1, 1_000).await.unwrap();
        assert_eq!(crate::core::receipt::verify(&receipts).unwrap().0, 5);
        let controls = pg.controls(&sid("ses_fill")).await.unwrap();
        assert_eq!(
            controls.iter().map(|(id, _)| *id).collect::<Vec<_>>(),
            [1, 2, 3]
        );
        let hits = pg
            .search(MemorySearch {
                text: "staging".into(),
                within: Vec::new(),
                limit: 10,
                vector: None,
            })
            .await
            .unwrap();
        assert_eq!(hits.len(), 3, "{hits:?}");
        pg.shutdown();
    }

    /// The source's schema: an older SQLite store is migrated first (and
    /// said so), a newer one refused naming both versions, as is a
    /// PostgreSQL database holding no store.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_source_of_another_version_is_migrated_or_refused() {
        let dir = tempfile::tempdir().unwrap();
        let known = crate::store::schema_version();
        let older = dir.path().join("older");
        std::fs::create_dir(&older).unwrap();
        {
            let conn = rusqlite::Connection::open(older.join("pincer.db")).unwrap();
            for migration in &crate::store::schema::MIGRATIONS[..known as usize - 1] {
                conn.execute_batch(migration).unwrap();
            }
            conn.pragma_update(None, "user_version", known - 1).unwrap();
        }
        let url = crate::testing::postgres::shared().fresh_database();
        let copied = copy(&Place::Sqlite(older.clone()), &Place::Postgres(url.clone()))
            .await
            .unwrap();
        assert_eq!(copied.source_migrated, Some((known - 1, known)));
        assert!(
            copied
                .tables
                .iter()
                .all(|(_, from, to)| *from == 0 && *to == 0)
        );

        rusqlite::Connection::open(older.join("pincer.db"))
            .unwrap()
            .pragma_update(None, "user_version", known + 1)
            .unwrap();
        let err = copy(
            &Place::Sqlite(older),
            &Place::Postgres(crate::testing::postgres::shared().fresh_database()),
        )
        .await
        .unwrap_err()
        .to_string();
        assert!(
            err.contains(&format!(
                "has schema version {}, newer than this pincer knows ({known})",
                known + 1
            )),
            "{err}"
        );

        let nothing = crate::testing::postgres::shared().fresh_database();
        let err = copy(
            &Place::Postgres(nothing),
            &Place::Sqlite(dir.path().join("back")),
        )
        .await
        .unwrap_err()
        .to_string();
        assert!(err.contains("no Pincer store in postgres://"), "{err}");
        assert!(
            !dir.path().join("back").exists(),
            "nothing made for a refused copy"
        );

        let newer = crate::testing::postgres::shared().fresh_database();
        let (client, _) = connect(&newer).await.unwrap();
        let known = crate::store::postgres::migrate(&client).await.unwrap();
        client
            .execute(
                "INSERT INTO pincer_schema (version, at) VALUES ($1, 0)",
                &[&i32::try_from(known + 1).unwrap()],
            )
            .await
            .unwrap();
        let err = copy(
            &Place::Postgres(newer),
            &Place::Sqlite(dir.path().join("back")),
        )
        .await
        .unwrap_err()
        .to_string();
        assert_eq!(
            err,
            format!(
                "the PostgreSQL database has schema version {}, newer than this pincer knows ({known}); upgrade pincer",
                known + 1
            )
        );
    }

    /// A source with a run not ended (a live process works it) is refused,
    /// and the target left empty.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_source_with_open_runs_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let (store, _) = Store::open(&dir.path().join("pincer.db")).unwrap();
        store.submit(Write::InsertSession(session("ses_fill", None)));
        store.submit(Write::InsertRun {
            id: rid("run_a"),
            session_id: sid("ses_fill"),
            at: 2,
        });
        store.flush().await.unwrap();
        store.shutdown();
        let url = crate::testing::postgres::shared().fresh_database();
        let err = copy(
            &Place::Sqlite(dir.path().to_path_buf()),
            &Place::Postgres(url.clone()),
        )
        .await
        .unwrap_err()
        .to_string();
        assert!(
            err.starts_with("the source has 1 run(s) not ended: stop every Pincer using it"),
            "{err}"
        );
        let (client, _) = connect(&url).await.unwrap();
        let version = crate::store::postgres::current_version(&client)
            .await
            .unwrap();
        assert_eq!(
            version, 0,
            "the target is not touched before the source is checked"
        );
    }
    /// A row the target cannot take (PostgreSQL's text holds no NUL, SQLite's
    /// may) fails the copy naming its table, and the target is left empty:
    /// the copy is one transaction.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_failed_copy_writes_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let (store, _) = Store::open(&dir.path().join("pincer.db")).unwrap();
        store.submit(Write::InsertSession(session("ses_fill", None)));
        store.submit(Write::InsertRun {
            id: rid("run_a"),
            session_id: sid("ses_fill"),
            at: 2,
        });
        store.submit(event("ses_fill", "run_a", 0, "fine"));
        store.submit(ended("run_a", None));
        store.flush().await.unwrap();
        store.shutdown();
        rusqlite::Connection::open(dir.path().join("pincer.db"))
            .unwrap()
            .execute(
                "INSERT INTO tape (run_id, session_id, seq, at, kind, payload) VALUES ('run_a', 'ses_fill', 1, 3, 'text_delta', 'a' || char(0) || 'b')",
                [],
            )
            .unwrap();
        let url = crate::testing::postgres::shared().fresh_database();
        let err = copy(
            &Place::Sqlite(dir.path().to_path_buf()),
            &Place::Postgres(url.clone()),
        )
        .await
        .unwrap_err()
        .to_string();
        assert!(err.starts_with("PostgreSQL: tape: "), "{err}");
        let (client, _) = connect(&url).await.unwrap();
        let held: Vec<i64> = client
            .query_one("SELECT (SELECT COUNT(*) FROM sessions), (SELECT COUNT(*) FROM runs), (SELECT COUNT(*) FROM tape)", &[])
            .await
            .map(|row| vec![row.get(0), row.get(1), row.get(2)])
            .unwrap();
        assert_eq!(held, [0, 0, 0]);
    }

    #[test]
    fn counts_that_differ_name_the_table() {
        let err = checked(vec![("sessions", 2, 2), ("tape", 7, 6)]).unwrap_err();
        assert_eq!(
            err.to_string(),
            "the rows of tape differ after the copy: 7 in the source, 6 in the target (nothing was written)"
        );
    }
}
