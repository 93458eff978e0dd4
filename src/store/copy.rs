//! `pincer store copy`: everything a store holds, from SQLite to PostgreSQL
//! or back, table by table, into an empty target in one transaction; then
//! the rows of each table counted on both sides.
//!
//! The source is opened as every process opens it (migrated, the runs of
//! processes that are gone ended), and refused while runs are still open
//! (a live process): a copy is of a store at rest. Read in batches, written
//! in batches (`COPY … FROM STDIN BINARY` on PostgreSQL), so a long tape is
//! never held in memory whole. Leases are not copied (they are live state
//! of the source's processes; the target's start anew, and fencing tokens
//! only need to grow within one store); nor what each backend derives for
//! itself (memory change numbers, PostgreSQL's instances and commit
//! markers). A run's place among its session's runs (PostgreSQL's `pos`,
//! SQLite's rowid order) is kept.

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
    Table {
        name: "sessions",
        columns: &[
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
        sqlite_order: "id",
        pg_order: "id",
    },
    Table {
        name: "messages",
        columns: &[
            col("session_id", Text),
            col("seq", Int),
            col("run_id", Text),
            col("role", Text),
            col("body", Text),
            col("at", Int),
        ],
        sqlite_order: "session_id, seq",
        pg_order: "session_id, seq",
    },
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
    },
    Table {
        name: "tape",
        columns: &[
            col("run_id", Text),
            col("session_id", Text),
            col("seq", Int),
            col("at", Int),
            col("kind", Text),
            col("payload", Text),
        ],
        sqlite_order: "run_id, seq",
        pg_order: "run_id, seq",
    },
    Table {
        name: "receipts",
        columns: &[
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
        sqlite_order: "seq",
        pg_order: "seq",
    },
    Table {
        name: "grants",
        columns: &[
            col("session_id", Text),
            col("tool", Text),
            col("scope", Text),
            col("allow", Bool),
            col("at", Int),
        ],
        sqlite_order: "session_id, tool, scope",
        pg_order: "session_id, tool, scope",
    },
    Table {
        name: "trusted_roots",
        columns: &[col("root", Text), col("at", Int), col("files", Text)],
        sqlite_order: "root",
        pg_order: "root",
    },
    Table {
        name: "session_controls",
        columns: &[
            col("id", Int),
            col("session_id", Text),
            col("control", Text),
            col("at", Int),
        ],
        sqlite_order: "id",
        pg_order: "id",
    },
    Table {
        name: "session_costs",
        columns: &[
            col("session_id", Text),
            col("currency", Text),
            col("amount", Real),
            col("first_at", Int),
        ],
        sqlite_order: "session_id, currency",
        pg_order: "session_id, currency",
    },
    Table {
        name: "channel_inbox",
        columns: &[
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
        sqlite_order: "channel, account, message_id",
        pg_order: "channel, account, message_id",
    },
    Table {
        name: "channel_outbox",
        columns: &[
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
        sqlite_order: "id",
        pg_order: "id",
    },
    Table {
        name: "channel_cursors",
        columns: &[
            col("channel", Text),
            col("account", Text),
            col("name", Text),
            col("value", Text),
        ],
        sqlite_order: "channel, account, name",
        pg_order: "channel, account, name",
    },
    Table {
        name: "channel_sessions",
        columns: &[
            col("channel", Text),
            col("account", Text),
            col("target", Text),
            col("session_id", Text),
            col("created_at", Int),
        ],
        sqlite_order: "channel, account, target",
        pg_order: "channel, account, target",
    },
    Table {
        name: "channel_peers",
        columns: &[
            col("channel", Text),
            col("account", Text),
            col("sender", Text),
            col("paired_at", Int),
        ],
        sqlite_order: "channel, account, sender",
        pg_order: "channel, account, sender",
    },
    Table {
        name: "channel_drafts",
        columns: &[
            col("run_id", Text),
            col("channel", Text),
            col("account", Text),
            col("target", Text),
            col("platform_id", Text),
            col("text", Text),
            col("updated_at", Int),
        ],
        sqlite_order: "run_id",
        pg_order: "run_id",
    },
    Table {
        name: "memories",
        columns: &[
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
        sqlite_order: "rowid",
        pg_order: "rowid",
    },
    Table {
        name: "memory_vectors",
        columns: &[
            col("seq", Int),
            col("item", Int),
            col("model", Text),
            col("vector", Blob),
        ],
        sqlite_order: "seq",
        pg_order: "seq",
    },
];

/// Rows read or written at a time.
const BATCH: usize = 2_000;

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

/// What a copy did: each table's rows on the source and on the target.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Copied {
    pub tables: Vec<(&'static str, u64, u64)>,
}

fn db(err: tokio_postgres::Error) -> StoreError {
    StoreError::Postgres(crate::causes::chain(&err))
}

fn sql(table: &str, err: rusqlite::Error) -> StoreError {
    StoreError::Write(format!("{table}: {err}"))
}

/// Copies every table of `from` into `to`, which must hold none of it.
pub async fn copy(from: &Place, to: &Place) -> Result<Copied, StoreError> {
    if from == to {
        return Err(StoreError::Write(
            "the source and the target are the same store".into(),
        ));
    }
    match (from, to) {
        (Place::Sqlite(source), Place::Postgres(target)) => sqlite_to_postgres(source, target).await,
        (Place::Postgres(source), Place::Sqlite(target)) => postgres_to_sqlite(source, target).await,
        (Place::Sqlite(_), Place::Sqlite(_)) | (Place::Postgres(_), Place::Postgres(_)) => {
            Err(StoreError::Write(
                "a copy goes from SQLite to PostgreSQL or back (copy a SQLite data directory's pincer.db with the sqlite3 .backup command, a PostgreSQL database with pg_dump)".into(),
            ))
        }
    }
}

/// The SQLite store of a data directory, opened as every process opens it
/// (migrated, abandoned runs ended), then read with a connection of its own.
fn open_sqlite_source(dir: &Path) -> Result<rusqlite::Connection, StoreError> {
    let path = dir.join("pincer.db");
    if !path.exists() {
        return Err(StoreError::Read(format!(
            "no Pincer store at {}",
            path.display()
        )));
    }
    let (store, _) = super::Store::open(&path)?;
    store.shutdown();
    let conn =
        rusqlite::Connection::open_with_flags(&path, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)
            .map_err(|source| StoreError::Open {
                path: path.clone(),
                source,
            })?;
    let open: i64 = conn
        .query_row(
            "SELECT COUNT(*) FROM runs WHERE state IN ('queued', 'running', 'waiting')",
            [],
            |row| row.get(0),
        )
        .map_err(|err| sql("runs", err))?;
    refuse_open_runs(open)?;
    Ok(conn)
}

fn refuse_open_runs(open: i64) -> Result<(), StoreError> {
    if open > 0 {
        return Err(StoreError::Conflict(format!(
            "the source has {open} run(s) not ended: stop every Pincer using it (a copy is of a store at rest), then copy again"
        )));
    }
    Ok(())
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

/// A value as the PostgreSQL column of `kind` takes it.
fn pg_value(value: &Val, kind: Kind) -> Box<dyn ToSql + Sync + Send> {
    match kind {
        Int => Box::new(if let Val::Int(n) = value {
            Some(*n)
        } else {
            None
        }),
        Real => Box::new(if let Val::Real(x) = value {
            Some(*x)
        } else {
            None
        }),
        Text => Box::new(if let Val::Text(s) = value {
            Some(s.clone())
        } else {
            None
        }),
        Blob => Box::new(if let Val::Blob(b) = value {
            Some(b.clone())
        } else {
            None
        }),
        Bool => Box::new(if let Val::Bool(b) = value {
            Some(*b)
        } else if let Val::Int(n) = value {
            Some(*n != 0)
        } else {
            None
        }),
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

/// A connection to the target, its schema migrated, in a transaction, its
/// store checked empty.
async fn pg_target(url: &str) -> Result<tokio_postgres::Client, StoreError> {
    let server = Server::parse(url).map_err(StoreError::Postgres)?;
    let client = server
        .connect()
        .await
        .map_err(|err| StoreError::Unreachable {
            url: server.shown.clone(),
            reason: crate::causes::chain(&err),
        })?;
    super::postgres::migrate(&client).await?;
    client.batch_execute("BEGIN").await.map_err(db)?;
    let row = client
        .query_one(
            "SELECT (SELECT COUNT(*) FROM sessions), (SELECT COUNT(*) FROM receipts), (SELECT COUNT(*) FROM memories)",
            &[],
        )
        .await
        .map_err(db)?;
    let held: (i64, i64, i64) = (
        row.try_get(0).map_err(db)?,
        row.try_get(1).map_err(db)?,
        row.try_get(2).map_err(db)?,
    );
    not_empty(held)?;
    Ok(client)
}

fn not_empty((sessions, receipts, memories): (i64, i64, i64)) -> Result<(), StoreError> {
    if sessions + receipts + memories > 0 {
        return Err(StoreError::Conflict(format!(
            "the target is not empty ({sessions} session(s), {receipts} receipt(s), {memories} memory item(s)): copy into an empty database"
        )));
    }
    Ok(())
}

async fn sqlite_to_postgres(source: &Path, target: &str) -> Result<Copied, StoreError> {
    let conn = open_sqlite_source(source)?;
    let client = pg_target(target).await?;
    let copied = async {
        for table in TABLES {
            let columns: Vec<&str> = table.columns.iter().map(|c| c.name).collect();
            let types: Vec<Type> = table.columns.iter().map(|c| c.kind.pg()).collect();
            let sink = client
                .copy_in(&format!(
                    "COPY {} ({}) FROM STDIN BINARY",
                    table.name,
                    columns.join(", ")
                ))
                .await
                .map_err(db)?;
            let writer = tokio_postgres::binary_copy::BinaryCopyInWriter::new(sink, &types);
            futures::pin_mut!(writer);
            let mut statement = conn
                .prepare(&select(table, true))
                .map_err(|err| sql(table.name, err))?;
            let mut rows = statement.query([]).map_err(|err| sql(table.name, err))?;
            loop {
                let mut batch: Vec<Vec<Val>> = Vec::with_capacity(BATCH);
                let mut done = false;
                while batch.len() < BATCH {
                    match rows.next().map_err(|err| sql(table.name, err))? {
                        Some(row) => batch
                            .push(read_sqlite_row(row, table).map_err(|err| sql(table.name, err))?),
                        None => {
                            done = true;
                            break;
                        }
                    }
                }
                for values in batch {
                    let boxed: Vec<Box<dyn ToSql + Sync + Send>> = values
                        .iter()
                        .zip(table.columns)
                        .map(|(v, c)| pg_value(v, c.kind))
                        .collect();
                    let refs: Vec<&(dyn ToSql + Sync)> = boxed
                        .iter()
                        .map(|b| b.as_ref() as &(dyn ToSql + Sync))
                        .collect();
                    writer.as_mut().write(&refs).await.map_err(db)?;
                }
                if done {
                    break;
                }
            }
            writer.as_mut().finish().await.map_err(db)?;
        }
        finish_postgres(&client).await
    }
    .await;
    commit_pg(&client, copied).await?;
    let mut counts = Vec::new();
    for table in TABLES {
        let source_count: i64 = conn
            .query_row(&format!("SELECT COUNT(*) FROM {}", table.name), [], |row| {
                row.get(0)
            })
            .map_err(|err| sql(table.name, err))?;
        counts.push((
            table.name,
            source_count,
            pg_count(&client, table.name).await?,
        ));
    }
    checked(counts)
}

async fn commit_pg(
    client: &tokio_postgres::Client,
    copied: Result<(), StoreError>,
) -> Result<(), StoreError> {
    match copied {
        Ok(()) => client.batch_execute("COMMIT").await.map_err(db),
        Err(err) => {
            let _ = client.batch_execute("ROLLBACK").await;
            Err(err)
        }
    }
}

/// What PostgreSQL keeps beside the rows: each session's run count, the
/// chain's head, the counters and sequences past the copied numbers.
async fn finish_postgres(client: &tokio_postgres::Client) -> Result<(), StoreError> {
    client
        .batch_execute(
            "UPDATE sessions s SET runs_made = COALESCE((SELECT MAX(pos) FROM runs r WHERE r.session_id = s.id), 0);
             UPDATE receipt_head SET seq = r.seq, hash = r.hash
               FROM (SELECT seq, hash FROM receipts ORDER BY seq DESC LIMIT 1) r WHERE one;
             UPDATE counters SET n = GREATEST(n, COALESCE((SELECT MAX(seq) FROM memory_vectors), 0)) WHERE name = 'memory_vectors';
             SELECT setval(pg_get_serial_sequence('session_controls', 'id'), COALESCE((SELECT MAX(id) FROM session_controls), 0) + 1, false);
             SELECT setval(pg_get_serial_sequence('memories', 'rowid'), COALESCE((SELECT MAX(rowid) FROM memories), 0) + 1, false);",
        )
        .await
        .map_err(db)
}

async fn pg_count(client: &tokio_postgres::Client, table: &str) -> Result<i64, StoreError> {
    client
        .query_one(&format!("SELECT COUNT(*) FROM {table}"), &[])
        .await
        .and_then(|row| row.try_get(0))
        .map_err(db)
}

fn checked(counts: Vec<(&'static str, i64, i64)>) -> Result<Copied, StoreError> {
    let count = |n: i64| u64::try_from(n).unwrap_or(0);
    if let Some((table, from, to)) = counts.iter().find(|(_, from, to)| from != to) {
        return Err(StoreError::Write(format!(
            "{table}: {from} row(s) in the source but {to} in the target after the copy"
        )));
    }
    Ok(Copied {
        tables: counts
            .into_iter()
            .map(|(table, from, to)| (table, count(from), count(to)))
            .collect(),
    })
}

async fn postgres_to_sqlite(source: &str, target: &Path) -> Result<Copied, StoreError> {
    let server = Server::parse(source).map_err(StoreError::Postgres)?;
    let client = server
        .connect()
        .await
        .map_err(|err| StoreError::Unreachable {
            url: server.shown.clone(),
            reason: crate::causes::chain(&err),
        })?;
    let version = super::postgres::migrate(&client).await?;
    debug_assert_eq!(version, super::postgres::schema_version());
    let path = target.join("pincer.db");
    let (store, _) = super::Store::open(&path)?;
    store.shutdown();
    let mut conn = rusqlite::Connection::open(&path).map_err(|source| StoreError::Open {
        path: path.clone(),
        source,
    })?;
    conn.busy_timeout(std::time::Duration::from_secs(10))
        .map_err(|err| sql("pincer.db", err))?;
    // One snapshot of the source for the whole copy.
    client
        .batch_execute("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
        .await
        .map_err(db)?;
    let copied = async {
        let open: i64 = client
            .query_one(
                "SELECT COUNT(*) FROM runs WHERE state IN ('queued', 'running', 'waiting')",
                &[],
            )
            .await
            .and_then(|row| row.try_get(0))
            .map_err(db)?;
        refuse_open_runs(open)?;
        let tx = conn
            .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)
            .map_err(|err| sql("pincer.db", err))?;
        let held: (i64, i64, i64) = tx
            .query_row(
                "SELECT (SELECT COUNT(*) FROM sessions), (SELECT COUNT(*) FROM receipts), (SELECT COUNT(*) FROM memories)",
                [],
                |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?)),
            )
            .map_err(|err| sql("pincer.db", err))?;
        not_empty(held)?;
        let mut counts = Vec::new();
        for table in TABLES {
            let kept: Vec<&Column> = table.columns.iter().filter(|c| c.in_sqlite).collect();
            let names: Vec<&str> = kept.iter().map(|c| c.name).collect();
            let marks: Vec<String> = (1..=kept.len()).map(|i| format!("?{i}")).collect();
            let insert = format!(
                "INSERT INTO {} ({}) VALUES ({})",
                table.name,
                names.join(", "),
                marks.join(", ")
            );
            let cursor = format!("copy_{}", table.name);
            client
                .batch_execute(&format!("DECLARE {cursor} NO SCROLL CURSOR FOR {}", select(table, false)))
                .await
                .map_err(db)?;
            let mut statement = tx.prepare(&insert).map_err(|err| sql(table.name, err))?;
            loop {
                let rows = client
                    .query(&format!("FETCH {BATCH} FROM {cursor}"), &[])
                    .await
                    .map_err(db)?;
                if rows.is_empty() {
                    break;
                }
                for row in &rows {
                    let values = read_pg_row(row, table).map_err(db)?;
                    let values: Vec<SqlValue> = values
                        .into_iter()
                        .zip(table.columns)
                        .filter(|(_, c)| c.in_sqlite)
                        .map(|(v, _)| sqlite_value(v))
                        .collect();
                    statement
                        .execute(rusqlite::params_from_iter(values))
                        .map_err(|err| sql(table.name, err))?;
                }
            }
            drop(statement);
            client
                .batch_execute(&format!("CLOSE {cursor}"))
                .await
                .map_err(db)?;
            let written: i64 = tx
                .query_row(&format!("SELECT COUNT(*) FROM {}", table.name), [], |row| row.get(0))
                .map_err(|err| sql(table.name, err))?;
            counts.push((table.name, pg_count(&client, table.name).await?, written));
        }
        tx.commit().map_err(|err| sql("pincer.db", err))?;
        Ok::<_, StoreError>(counts)
    }
    .await;
    let _ = client.batch_execute("COMMIT").await;
    checked(copied?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::channel::contract::{insert, intent, message, record};
    use crate::core::channel::{ChannelWrite, ConversationKey, IntentStatus};
    use crate::core::journal::Write;
    use crate::core::memory::{Memories as _, MemoryItem, MemorySource, MemoryWrite, Scope};

    /// A session with two runs (one with an event, a receipt and a cost), a
    /// grant, a trusted project and a request left for the owner.
    async fn fill(store: &super::super::Store) {
        use crate::core::ids::{RunId, SessionId};
        let session = SessionId::from_string("ses_fill".into());
        store.submit(Write::InsertSession(crate::core::session::Session {
            id: session.clone(),
            workspace: "/ws".into(),
            origin: crate::core::session::Origin::Headless,
            provider: "p".into(),
            model: "m".into(),
            mode: crate::core::session::Mode::Supervised,
            title: Some("filled".into()),
            mcp_servers: serde_json::json!([]),
            created_at: 1,
            updated_at: 1,
            closed: false,
            conversation: Some("chat/1".into()),
            prompt: crate::core::session::PromptSettings::default(),
            parent: None,
            thought_level: Some("high".into()),
        }));
        for (n, run) in ["run_b", "run_a"].into_iter().enumerate() {
            let run = RunId::from_string(run.into());
            store.submit(Write::InsertRun {
                id: run.clone(),
                session_id: session.clone(),
                at: 2 + n as i64,
            });
            store.submit(Write::AppendMessage {
                session_id: session.clone(),
                run_id: Some(run.clone()),
                message: crate::core::session::Message::Note {
                    text: format!("note {n}"),
                },
                at: 3,
            });
            store.submit(Write::AppendEvent(crate::core::event::EventRecord {
                session_id: session.clone(),
                run_id: run.clone(),
                seq: 0,
                at: 3,
                event: crate::core::event::Event::TextDelta { text: "hi".into() },
            }));
            store.submit(Write::SetRunState {
                id: run.clone(),
                state: crate::core::event::RunState::Completed,
                stop_reason: Some(crate::core::event::StopReason::EndTurn),
                error: None,
                usage: crate::core::usage::Usage::default(),
                cost: Some(crate::core::models::Cost {
                    amount: 0.5,
                    currency: "USD".into(),
                }),
                at: 4,
            });
            store.submit(Write::AppendReceipt(crate::core::receipt::ReceiptBody {
                session_id: session.clone(),
                run_id: run,
                call_id: format!("call_{n}"),
                tool: "read_file".into(),
                input_hash: "a".repeat(64),
                output_hash: "b".repeat(64),
                verdict: crate::core::receipt::Verdict::Allowed,
                is_error: false,
                at: 4,
                hooks: vec!["guard: allow".into()],
                skills: Vec::new(),
            }));
        }
        store.submit(Write::PutGrant {
            session_id: session.clone(),
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
            files: Vec::new(),
        }));
        store.submit(Write::Control {
            session,
            control: crate::core::control::Control::Cancel { runs: Vec::new() },
            at: 5,
        });
        store.submit(Write::Channel(ChannelWrite::InsertIntent(intent(
            "draft:run_1",
            "telegram",
            IntentStatus::Sending,
            6,
        ))));
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

    /// A store with a row in every table, written through the ports,
    /// copied to PostgreSQL and back: every row comes back as it was, and
    /// the chain verifies on PostgreSQL.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn every_row_of_every_table_survives_a_round_trip() {
        let dir = tempfile::tempdir().unwrap();
        let source = dir.path().join("source");
        let (store, _) = super::super::Store::open(&source.join("pincer.db")).unwrap();
        fill(&store).await;
        store.submit(record(message("bot", "41", "hello", 5), "42", 5));
        store.submit(insert(&intent(
            "reply:run_1",
            "telegram",
            IntentStatus::Pending,
            6,
        )));
        store.submit(Write::Channel(ChannelWrite::MapConversation {
            key: ConversationKey {
                channel: "telegram".into(),
                account: "bot".into(),
                target: crate::core::channel::contract::target("-100"),
            },
            session_id: crate::core::ids::SessionId::from_string("ses_fill".into()),
            at: 7,
        }));
        store.submit(Write::Channel(ChannelWrite::PairPeer {
            channel: "telegram".into(),
            account: "bot".into(),
            sender: "u1".into(),
            at: 8,
        }));
        let item = MemoryItem {
            id: "mem_1".into(),
            text: "Deploys go through staging".into(),
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
        };
        store.write(MemoryWrite::Save(item.clone())).await.unwrap();
        store
            .write(MemoryWrite::Vector {
                id: item.id.clone(),
                text: item.text.clone(),
                model: "e".into(),
                vector: vec![0.25, -1.0, 3.5],
            })
            .await
            .unwrap();
        store.flush().await.unwrap();
        store.shutdown();
        let original = rows(&source.join("pincer.db"));
        // Nothing writes `channel_drafts` any more (a live draft is a send
        // intent, `draft:RUN`); every other table holds a row.
        for (table, rows) in &original {
            assert!(
                !rows.is_empty() || *table == "channel_drafts",
                "the fill left {table} empty"
            );
        }

        let url = crate::testing::postgres::shared().fresh_database();
        let there = copy(
            &Place::Sqlite(source.clone()),
            &Place::Postgres(url.clone()),
        )
        .await
        .unwrap();
        assert!(
            there.tables.iter().all(|(_, from, to)| from == to),
            "{there:?}"
        );
        let (pg, _) = super::super::postgres::Postgres::open(&url).await.unwrap();
        let receipts = crate::core::journal::Audit::receipts(&pg, 1, 1_000)
            .await
            .unwrap();
        assert!(!receipts.is_empty());
        crate::core::receipt::verify(&receipts).unwrap();
        pg.shutdown();

        let back = dir.path().join("back");
        copy(&Place::Postgres(url), &Place::Sqlite(back.clone()))
            .await
            .unwrap();
        assert_eq!(rows(&back.join("pincer.db")), original);
    }
}
