//! Memory items on PostgreSQL: writes (inside the writer's transaction)
//! and reads, with the same indexes held in memory as on SQLite
//! (`core::memory::index`): each search first reads what any instance
//! changed since the index last looked (`memory_changes`, `memory_vectors`
//! and `memory_vectors_gone` are numbered under a row lock held to commit,
//! so no change is committed behind a number already read).

use std::collections::HashSet;

use super::conn::Conn;
use parking_lot::Mutex;
use tokio_postgres::Row;
use tokio_postgres::types::ToSql;

use super::PgFailure;
use crate::core::memory::index::{
    VectorIndex, WordIndex, fuse, scope_token, scope_tokens, tags_text,
};
use crate::core::memory::{MemoryFilter, MemoryHit, MemoryItem, MemorySearch, MemoryWrite, Scope};
use crate::store::StoreError;
use crate::store::memory::finish;
use crate::store::vectors::{from_blob, to_blob};

const COLUMNS: &str = "m.id, m.scope, m.scope_key, m.text, m.tags, m.source, m.created_at, m.updated_at, m.last_used_at, m.pinned";

fn db(err: tokio_postgres::Error) -> StoreError {
    super::pg_error(&err)
}

/// What searching keeps in memory: the word index and one model's vectors.
#[derive(Default)]
pub(super) struct State {
    words: Mutex<Words>,
    vectors: Mutex<Vectors>,
}

#[derive(Default)]
struct Words {
    loaded: bool,
    /// The latest change read (`memory_changes.seq`).
    seen: i64,
    index: WordIndex,
}

#[derive(Default)]
struct Vectors {
    model: String,
    /// The latest arrival and departure read.
    seen: (i64, i64),
    index: VectorIndex,
}

pub(super) async fn apply(client: &Conn<'_>, write: &MemoryWrite) -> Result<(), PgFailure> {
    match write {
        MemoryWrite::Save(item) | MemoryWrite::Import(item) => {
            let source = serde_json::to_string(&item.source)
                .map_err(|err| PgFailure::Store(StoreError::Write(err.to_string())))?;
            let inserted = client
                .execute(
                    "INSERT INTO memories (id, scope, scope_key, text, tags, scope_token, source, created_at, updated_at, last_used_at, pinned)
                     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11) ON CONFLICT (id) DO NOTHING",
                    &[
                        &item.id,
                        &item.scope.as_str(),
                        &item.scope_key,
                        &item.text,
                        &tags_text(&item.tags),
                        &scope_token(item.scope, &item.scope_key),
                        &source,
                        &item.created_at,
                        &item.updated_at,
                        &item.last_used_at,
                        &item.pinned,
                    ],
                )
                .await?;
            if inserted == 0 {
                return Err(PgFailure::Store(StoreError::Conflict(format!(
                    "memory {} already exists",
                    item.id
                ))));
            }
        }
        MemoryWrite::Update {
            id,
            text,
            tags,
            pinned,
            at,
        } => {
            let tags = tags.as_deref().map(tags_text);
            let changed = client
                .execute(
                    "UPDATE memories SET text = coalesce($2, text), tags = coalesce($3, tags),
                     pinned = coalesce($4, pinned), updated_at = $5 WHERE id = $1",
                    &[id, text, &tags, pinned, at],
                )
                .await?;
            if changed == 0 {
                return Err(PgFailure::Store(StoreError::Conflict(format!(
                    "no memory {id}"
                ))));
            }
        }
        MemoryWrite::Forget { id } => {
            let changed = client
                .execute("DELETE FROM memories WHERE id = $1", &[id])
                .await?;
            if changed == 0 {
                return Err(PgFailure::Store(StoreError::Conflict(format!(
                    "no memory {id}"
                ))));
            }
        }
        MemoryWrite::Used { ids, at } => {
            client
                .execute(
                    "UPDATE memories SET last_used_at = $2 WHERE id = ANY($1)",
                    &[ids, at],
                )
                .await?;
        }
        MemoryWrite::Vector {
            id,
            text,
            model,
            vector,
        } => {
            // Replaced by a delete and an insert, never updated in place, so
            // every instance sees it leave and arrive. An item whose text
            // changed since it was embedded keeps none.
            client
                .execute(
                    "DELETE FROM memory_vectors WHERE item = (SELECT rowid FROM memories WHERE id = $1)",
                    &[id],
                )
                .await?;
            client
                .execute(
                    "INSERT INTO memory_vectors (seq, item, model, vector)
                     SELECT pincer_next('memory_vectors'), rowid, $3, $4 FROM memories WHERE id = $1 AND text = $2",
                    &[id, text, model, &to_blob(vector)],
                )
                .await?;
        }
    }
    Ok(())
}

fn item_row(row: &Row) -> Result<(MemoryItem, String, String), tokio_postgres::Error> {
    let scope: String = row.try_get(1)?;
    let tags: String = row.try_get(4)?;
    let source: String = row.try_get(5)?;
    Ok((
        MemoryItem {
            id: row.try_get(0)?,
            scope: Scope::parse(&scope).unwrap_or(Scope::User),
            scope_key: row.try_get(2)?,
            text: row.try_get(3)?,
            tags: tags.split_whitespace().map(str::to_owned).collect(),
            source: Default::default(),
            created_at: row.try_get(6)?,
            updated_at: row.try_get(7)?,
            last_used_at: row.try_get(8)?,
            pinned: row.try_get(9)?,
        },
        scope,
        source,
    ))
}

fn items(rows: &[Row]) -> Result<Vec<MemoryItem>, StoreError> {
    rows.iter()
        .map(|row| finish(item_row(row).map_err(db)?))
        .collect()
}

pub(super) async fn get(client: &Conn<'_>, id: &str) -> Result<Option<MemoryItem>, StoreError> {
    let row = client
        .query_opt(
            &format!("SELECT {COLUMNS} FROM memories m WHERE m.id = $1"),
            &[&id],
        )
        .await
        .map_err(db)?;
    row.map(|row| finish(item_row(&row).map_err(db)?))
        .transpose()
}

async fn item_at(client: &Conn<'_>, rowid: i64) -> Result<Option<MemoryItem>, StoreError> {
    let row = client
        .query_opt(
            &format!("SELECT {COLUMNS} FROM memories m WHERE m.rowid = $1"),
            &[&rowid],
        )
        .await
        .map_err(db)?;
    row.map(|row| finish(item_row(&row).map_err(db)?))
        .transpose()
}

pub(super) async fn list(
    client: &Conn<'_>,
    filter: &MemoryFilter,
) -> Result<Vec<MemoryItem>, StoreError> {
    let mut values: Vec<String> = Vec::new();
    let mut clauses = Vec::new();
    let next = |value: String, values: &mut Vec<String>| {
        values.push(value);
        format!("${}", values.len())
    };
    if !filter.within.is_empty() {
        let parts: Vec<String> = filter
            .within
            .iter()
            .map(|(scope, key)| {
                let scope = next(scope.as_str().to_owned(), &mut values);
                let key = next(key.clone(), &mut values);
                format!("(m.scope = {scope} AND m.scope_key = {key})")
            })
            .collect();
        clauses.push(format!("({})", parts.join(" OR ")));
    }
    if let Some(scope) = filter.scope {
        let scope = next(scope.as_str().to_owned(), &mut values);
        clauses.push(format!("m.scope = {scope}"));
    }
    if let Some(tag) = &filter.tag {
        let tag = next(format!(" {} ", tag.to_lowercase()), &mut values);
        clauses.push(format!("strpos(m.tags, {tag}) > 0"));
    }
    if filter.pinned_only {
        clauses.push("m.pinned".to_owned());
    }
    let mut sql = format!("SELECT {COLUMNS} FROM memories m");
    if !clauses.is_empty() {
        sql.push_str(" WHERE ");
        sql.push_str(&clauses.join(" AND "));
    }
    sql.push_str(" ORDER BY m.updated_at DESC, m.id DESC");
    if filter.limit > 0 {
        sql.push_str(&format!(" LIMIT {}", filter.limit));
    }
    let params: Vec<&(dyn ToSql + Sync)> =
        values.iter().map(|v| v as &(dyn ToSql + Sync)).collect();
    let rows = client.query(&sql, &params).await.map_err(db)?;
    items(&rows)
}

/// Items with no vector by `model`, oldest first.
pub(super) async fn unembedded(
    client: &Conn<'_>,
    model: &str,
    limit: usize,
) -> Result<Vec<MemoryItem>, StoreError> {
    let rows = client
        .query(
            &format!(
                "SELECT {COLUMNS} FROM memories m
                 WHERE NOT EXISTS (SELECT 1 FROM memory_vectors v WHERE v.item = m.rowid AND v.model = $1)
                 ORDER BY m.rowid LIMIT $2"
            ),
            &[&model, &i64::try_from(limit).unwrap_or(i64::MAX)],
        )
        .await
        .map_err(db)?;
    items(&rows)
}

/// Items matching the search's words, and with its embedding those near it
/// in meaning, fused by reciprocal rank.
pub(super) async fn search(
    client: &Conn<'_>,
    search: &MemorySearch,
    state: &State,
) -> Result<Vec<MemoryHit>, StoreError> {
    let by_words = search_words(client, search, state).await?;
    let Some(query) = &search.vector else {
        return Ok(by_words);
    };
    let within: Option<HashSet<String>> = scope_tokens(&search.within);
    let (since, seen, changes) = vector_changes(client, state, &query.model).await?;
    let near = {
        let mut vectors = state.vectors.lock();
        if vectors.model != query.model {
            *vectors = Vectors {
                model: query.model.clone(),
                ..Vectors::default()
            };
        }
        // Another search may have applied these (or newer) changes since
        // they were read: then they are not applied twice.
        let current = vectors.seen == since;
        for change in changes.into_iter().filter(|_| current) {
            match change {
                VectorChange::Gone(seq, item) => {
                    vectors.index.remove(item);
                    vectors.seen.1 = vectors.seen.1.max(seq);
                }
                VectorChange::Arrived(item, token, vector) => {
                    vectors.index.insert(item, token, &vector);
                }
            }
        }
        if current {
            vectors.seen = seen;
        }
        vectors.index.nearest(
            &query.vector,
            within.as_ref(),
            query.min_similarity,
            search.limit.max(1),
        )
    };
    let mut by_meaning = Vec::with_capacity(near.len());
    for (rowid, _) in &near {
        by_meaning.push(item_at(client, *rowid).await?);
    }
    let by_words = by_words.into_iter().map(|hit| Some(hit.item)).collect();
    Ok(fuse(vec![by_words, by_meaning], search.limit))
}

enum VectorChange {
    Gone(i64, i64),
    Arrived(i64, String, Vec<f32>),
}

/// What arrived and left since the vectors held were read (everything, for
/// another model), and the positions read up to. Read before the index is
/// locked: the database is asked without holding it.
async fn vector_changes(
    client: &Conn<'_>,
    state: &State,
    model: &str,
) -> Result<((i64, i64), (i64, i64), Vec<VectorChange>), StoreError> {
    let since = {
        let vectors = state.vectors.lock();
        if vectors.model == model {
            vectors.seen
        } else {
            (0, 0)
        }
    };
    let latest = client
        .query_one(
            "SELECT (SELECT coalesce(max(seq), 0) FROM memory_vectors)::BIGINT,
                    (SELECT coalesce(max(seq), 0) FROM memory_vectors_gone)::BIGINT",
            &[],
        )
        .await
        .map_err(db)?;
    let latest: (i64, i64) = (
        latest.try_get(0).map_err(db)?,
        latest.try_get(1).map_err(db)?,
    );
    if latest == since {
        return Ok((since, latest, Vec::new()));
    }
    let mut changes = Vec::new();
    let gone = client
        .query(
            "SELECT seq, item FROM memory_vectors_gone WHERE seq > $1 AND seq <= $2 ORDER BY seq",
            &[&since.1, &latest.1],
        )
        .await
        .map_err(db)?;
    for row in &gone {
        changes.push(VectorChange::Gone(
            row.try_get(0).map_err(db)?,
            row.try_get(1).map_err(db)?,
        ));
    }
    let arrived = client
        .query(
            "SELECT v.item, m.scope_token, v.vector FROM memory_vectors v
             JOIN memories m ON m.rowid = v.item
             WHERE v.seq > $1 AND v.seq <= $2 AND v.model = $3 ORDER BY v.seq",
            &[&since.0, &latest.0, &model],
        )
        .await
        .map_err(db)?;
    for row in &arrived {
        let blob: Vec<u8> = row.try_get(2).map_err(db)?;
        changes.push(VectorChange::Arrived(
            row.try_get(0).map_err(db)?,
            row.try_get(1).map_err(db)?,
            from_blob(&blob),
        ));
    }
    Ok((since, latest, changes))
}

/// Items matching the search's words, best first.
async fn search_words(
    client: &Conn<'_>,
    search: &MemorySearch,
    state: &State,
) -> Result<Vec<MemoryHit>, StoreError> {
    sync_words(client, state).await?;
    let within: Option<Vec<String>> = scope_tokens(&search.within);
    let ranked =
        state
            .words
            .lock()
            .index
            .search(&search.text, within.as_deref(), search.limit.max(1));
    let mut hits = Vec::with_capacity(ranked.len());
    for (relevance, rowid) in ranked {
        if let Some(item) = item_at(client, rowid).await? {
            hits.push(MemoryHit { item, relevance });
        }
    }
    Ok(hits)
}

/// Brings the word index up to date: everything on the first search, then
/// the items changed since. The newest change is read before the items,
/// so an item changed meanwhile is read again next time, never missed.
async fn sync_words(client: &Conn<'_>, state: &State) -> Result<(), StoreError> {
    let (loaded, seen) = {
        let words = state.words.lock();
        (words.loaded, words.seen)
    };
    let latest: i64 = client
        .query_one(
            "SELECT coalesce(max(seq), 0)::BIGINT FROM memory_changes",
            &[],
        )
        .await
        .map_err(db)?
        .try_get(0)
        .map_err(db)?;
    if loaded && latest == seen {
        return Ok(());
    }
    if !loaded {
        let rows = client
            .query(
                "SELECT m.rowid, m.text, m.tags, m.scope_token FROM memories m
                 LEFT JOIN memory_changes c ON c.item = m.rowid ORDER BY c.seq NULLS FIRST, m.rowid",
                &[],
            )
            .await
            .map_err(db)?;
        let mut fresh = Words {
            loaded: true,
            seen: latest,
            index: WordIndex::default(),
        };
        for row in &rows {
            let item: i64 = row.try_get(0).map_err(db)?;
            let text: String = row.try_get(1).map_err(db)?;
            let tags: String = row.try_get(2).map_err(db)?;
            let token: String = row.try_get(3).map_err(db)?;
            fresh.index.insert(item, &text, &tags, &token);
        }
        let mut words = state.words.lock();
        if !words.loaded {
            *words = fresh;
        }
        return Ok(());
    }
    let rows = client
        .query(
            "SELECT c.seq, c.item, m.text, m.tags, m.scope_token FROM memory_changes c
             LEFT JOIN memories m ON m.rowid = c.item WHERE c.seq > $1 ORDER BY c.seq",
            &[&seen],
        )
        .await
        .map_err(db)?;
    let mut words = state.words.lock();
    for row in &rows {
        let seq: i64 = row.try_get(0).map_err(db)?;
        if seq <= words.seen {
            continue;
        }
        let item: i64 = row.try_get(1).map_err(db)?;
        words.index.remove(item);
        if let Some(text) = row.try_get::<_, Option<String>>(2).map_err(db)? {
            let tags: String = row.try_get(3).map_err(db)?;
            let token: String = row.try_get(4).map_err(db)?;
            words.index.insert(item, &text, &tags, &token);
        }
        words.seen = words.seen.max(seq);
    }
    words.index.compact();
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use crate::core::memory::contract::Backend;
    use crate::store::postgres::Postgres;

    async fn fresh() -> Backend {
        let url = crate::testing::postgres::shared().fresh_database();
        let (store, _) = Postgres::open(&url).await.unwrap();
        Backend {
            memories: Arc::new(store),
            dir: None,
        }
    }

    crate::memory_contract!(fresh().await);

    /// A search on one instance sees what another instance saved, changed
    /// and forgot since its index was built.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_search_sees_what_another_instance_changed() {
        use crate::core::memory::{
            Memories as _, MemoryItem, MemorySearch, MemorySource, MemoryWrite, Scope,
        };
        let url = crate::testing::postgres::shared().fresh_database();
        let (one, _) = Postgres::open(&url).await.unwrap();
        let (two, _) = Postgres::open(&url).await.unwrap();
        let item = |id: &str, text: &str| MemoryItem {
            id: id.into(),
            text: text.into(),
            scope: Scope::User,
            scope_key: String::new(),
            tags: Vec::new(),
            source: MemorySource {
                by: "person".into(),
                ..MemorySource::default()
            },
            created_at: 1,
            updated_at: 1,
            last_used_at: None,
            pinned: false,
        };
        let search = |text: &str| MemorySearch {
            text: text.into(),
            within: Vec::new(),
            limit: 10,
            vector: None,
        };
        let found = |hits: Vec<crate::core::memory::MemoryHit>| {
            hits.into_iter().map(|h| h.item.id).collect::<Vec<_>>()
        };
        one.write(MemoryWrite::Save(item(
            "mem_1",
            "deploys need the staging branch",
        )))
        .await
        .unwrap();
        assert_eq!(
            found(two.search(search("staging")).await.unwrap()),
            ["mem_1"]
        );
        one.write(MemoryWrite::Save(item(
            "mem_2",
            "staging is rebuilt nightly",
        )))
        .await
        .unwrap();
        one.write(MemoryWrite::Update {
            id: "mem_1".into(),
            text: Some("deploys need the release branch".into()),
            tags: None,
            pinned: None,
            at: 2,
        })
        .await
        .unwrap();
        assert_eq!(
            found(two.search(search("staging")).await.unwrap()),
            ["mem_2"]
        );
        assert_eq!(
            found(two.search(search("release")).await.unwrap()),
            ["mem_1"]
        );
        one.write(MemoryWrite::Forget { id: "mem_2".into() })
            .await
            .unwrap();
        assert!(two.search(search("staging")).await.unwrap().is_empty());
        one.shutdown();
        two.shutdown();
    }
}
