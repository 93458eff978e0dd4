//! Memory items on PostgreSQL: writes (inside the writer's transaction)
//! and reads, with the same indexes held in memory as on SQLite
//! (`store::words`, `store::vectors`). Each search first reads what any
//! instance changed since the index last looked, in one statement (one
//! snapshot) and without holding the index's lock, then applies it under
//! the lock: `memory_changes`, `memory_vectors` and `memory_vectors_gone`
//! are numbered under a row lock held to commit, so no change is committed
//! behind a number already read, and a change two searches both read is
//! applied once.

use std::collections::{HashMap, HashSet};

use parking_lot::Mutex;
use tokio_postgres::Row;
use tokio_postgres::types::ToSql;

use super::PgFailure;
use super::conn::Conn;
use crate::core::memory::index::{fuse, scope_token, scope_tokens, tags_text};
use crate::core::memory::{MemoryFilter, MemoryHit, MemoryItem, MemorySearch, MemoryWrite};
use crate::store::StoreError;
use crate::store::memory::{COLUMNS, Stored, finish};
use crate::store::vectors::{self, Arrival, Vectors, from_blob, to_blob};
use crate::store::words::{self, ItemWords, Words};

fn db(err: tokio_postgres::Error) -> StoreError {
    super::pg_error(&err)
}

/// What searching keeps in memory: the word index and one model's vectors.
#[derive(Default)]
pub(super) struct State {
    words: Mutex<Words>,
    vectors: Mutex<Vectors>,
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

/// The item in `row`'s columns from `first` on (`COLUMNS`).
fn item_row(row: &Row, first: usize) -> Result<MemoryItem, StoreError> {
    let column = |n: usize| first + n;
    let stored = (|| {
        Ok::<_, tokio_postgres::Error>(Stored {
            id: row.try_get(column(0))?,
            scope: row.try_get(column(1))?,
            scope_key: row.try_get(column(2))?,
            text: row.try_get(column(3))?,
            tags: row.try_get(column(4))?,
            source: row.try_get(column(5))?,
            created_at: row.try_get(column(6))?,
            updated_at: row.try_get(column(7))?,
            last_used_at: row.try_get(column(8))?,
            pinned: row.try_get(column(9))?,
        })
    })()
    .map_err(db)?;
    finish(stored)
}

fn items(rows: &[Row]) -> Result<Vec<MemoryItem>, StoreError> {
    rows.iter().map(|row| item_row(row, 0)).collect()
}

pub(super) async fn get(client: &Conn<'_>, id: &str) -> Result<Option<MemoryItem>, StoreError> {
    let row = client
        .query_opt(
            &format!("SELECT {COLUMNS} FROM memories m WHERE m.id = $1"),
            &[&id],
        )
        .await
        .map_err(db)?;
    row.map(|row| item_row(&row, 0)).transpose()
}

/// The items stored at `rowids` (the indexes' keys), read at once, each in
/// its place: `None` for one no longer stored.
async fn items_at(
    client: &Conn<'_>,
    rowids: &[i64],
) -> Result<Vec<Option<MemoryItem>>, StoreError> {
    if rowids.is_empty() {
        return Ok(Vec::new());
    }
    let rows = client
        .query(
            &format!("SELECT m.rowid, {COLUMNS} FROM memories m WHERE m.rowid = ANY($1)"),
            &[&rowids],
        )
        .await
        .map_err(db)?;
    let mut found = HashMap::with_capacity(rows.len());
    for row in &rows {
        let rowid: i64 = row.try_get(0).map_err(db)?;
        found.insert(rowid, item_row(row, 1)?);
    }
    Ok(rowids.iter().map(|rowid| found.remove(rowid)).collect())
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
    let mut since = state.vectors.lock().since(&query.model);
    let near = loop {
        let changes = vector_changes(client, &query.model, since).await?;
        let mut vectors = state.vectors.lock();
        if vectors.catch_up(changes) {
            break vectors.index().nearest(
                &query.vector,
                within.as_ref(),
                query.min_similarity,
                search.limit.max(1),
            );
        }
        // A search for another model replaced the index after these were
        // read: this model's are read again from the start, which always
        // follows on.
        since = (0, 0);
    };
    let rowids: Vec<i64> = near.iter().map(|(rowid, _)| *rowid).collect();
    let by_meaning = items_at(client, &rowids).await?;
    let by_words = by_words.into_iter().map(|hit| Some(hit.item)).collect();
    Ok(fuse(vec![by_words, by_meaning], search.limit))
}

/// What arrived (of `model`) and left after `since`, and the newest arrival
/// and departure of any model, in one statement: one snapshot.
async fn vector_changes(
    client: &Conn<'_>,
    model: &str,
    since: (i64, i64),
) -> Result<vectors::Changes, StoreError> {
    let rows = client
        .query(
            "SELECT 0 AS part,
                    (SELECT coalesce(max(seq), 0) FROM memory_vectors)::BIGINT AS seq,
                    (SELECT coalesce(max(seq), 0) FROM memory_vectors_gone)::BIGINT AS item,
                    NULL::TEXT AS token, NULL::BYTEA AS vector
             UNION ALL
             SELECT 1, seq, item, NULL, NULL FROM memory_vectors_gone WHERE seq > $2
             UNION ALL
             SELECT 2, v.seq, v.item, m.scope_token, v.vector FROM memory_vectors v
             JOIN memories m ON m.rowid = v.item WHERE v.seq > $1 AND v.model = $3
             ORDER BY part, seq",
            &[&since.0, &since.1, &model],
        )
        .await
        .map_err(db)?;
    let mut changes = vectors::Changes {
        model: model.to_owned(),
        since,
        latest: since,
        gone: Vec::new(),
        arrived: Vec::new(),
    };
    for row in &rows {
        let part: i32 = row.try_get(0).map_err(db)?;
        let seq: i64 = row.try_get(1).map_err(db)?;
        let item: i64 = row.try_get(2).map_err(db)?;
        match part {
            0 => changes.latest = (seq, item),
            1 => changes.gone.push((seq, item)),
            _ => {
                let blob: Vec<u8> = row.try_get(4).map_err(db)?;
                changes.arrived.push(Arrival {
                    seq,
                    item,
                    token: row.try_get(3).map_err(db)?,
                    vector: from_blob(&blob),
                });
            }
        }
    }
    Ok(changes)
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
            .index()
            .search(&search.text, within.as_deref(), search.limit.max(1));
    let rowids: Vec<i64> = ranked.iter().map(|(_, rowid)| *rowid).collect();
    let found = items_at(client, &rowids).await?;
    Ok(ranked
        .into_iter()
        .zip(found)
        .filter_map(|((relevance, _), item)| item.map(|item| MemoryHit { item, relevance }))
        .collect())
}

/// Brings the word index up to date: built from every item on the first
/// search, then caught up with the items changed since.
async fn sync_words(client: &Conn<'_>, state: &State) -> Result<(), StoreError> {
    let seen = state.words.lock().seen();
    match seen {
        None => {
            let fresh = all_words(client).await?;
            state.words.lock().adopt(fresh);
        }
        Some(seen) => {
            let changes = word_changes(client, seen).await?;
            state.words.lock().catch_up(changes);
        }
    }
    Ok(())
}

/// Every item's words and the latest change, in one statement (one
/// snapshot), in the order their words were last written (`Words::built`).
async fn all_words(client: &Conn<'_>) -> Result<Words, StoreError> {
    let rows = client
        .query(
            "SELECT l.seq, m.rowid, m.text, m.tags, m.scope_token
             FROM (SELECT coalesce(max(seq), 0)::BIGINT AS seq FROM memory_changes) l
             LEFT JOIN (memories m LEFT JOIN memory_changes c ON c.item = m.rowid) ON TRUE
             ORDER BY c.seq NULLS FIRST, m.rowid",
            &[],
        )
        .await
        .map_err(db)?;
    let mut latest = 0;
    let mut items = Vec::with_capacity(rows.len());
    for row in &rows {
        latest = row.try_get(0).map_err(db)?;
        // No item at all: the one row has none.
        if let Some(item) = row.try_get::<_, Option<i64>>(1).map_err(db)? {
            items.push((item, item_words(row, 2)?));
        }
    }
    Ok(Words::built(latest, items))
}

/// The items changed after `seen`, with their words now, in order.
async fn word_changes(client: &Conn<'_>, seen: i64) -> Result<Vec<words::Change>, StoreError> {
    let rows = client
        .query(
            "SELECT c.seq, c.item, m.text, m.tags, m.scope_token FROM memory_changes c
             LEFT JOIN memories m ON m.rowid = c.item WHERE c.seq > $1 ORDER BY c.seq",
            &[&seen],
        )
        .await
        .map_err(db)?;
    rows.iter()
        .map(|row| {
            let gone = row.try_get::<_, Option<&str>>(2).map_err(db)?.is_none();
            Ok(words::Change {
                seq: row.try_get(0).map_err(db)?,
                item: row.try_get(1).map_err(db)?,
                words: if gone {
                    None
                } else {
                    Some(item_words(row, 2)?)
                },
            })
        })
        .collect()
}

/// An item's words: text, tags and scope token from column `first` on.
fn item_words(row: &Row, first: usize) -> Result<ItemWords, StoreError> {
    Ok(ItemWords {
        text: row.try_get(first).map_err(db)?,
        tags: row.try_get(first + 1).map_err(db)?,
        token: row.try_get(first + 2).map_err(db)?,
    })
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use crate::core::memory::contract::Backend;
    use crate::core::memory::{
        Memories as _, MemoryHit, MemoryItem, MemorySearch, MemorySource, MemoryWrite, QueryVector,
        Scope,
    };
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

    fn item(id: &str, text: &str) -> MemoryItem {
        MemoryItem {
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
        }
    }

    fn words(text: &str) -> MemorySearch {
        MemorySearch {
            text: text.into(),
            within: Vec::new(),
            limit: 10,
            vector: None,
        }
    }

    /// A search by meaning alone (no word of it is stored).
    fn meaning(vector: [f32; 3]) -> MemorySearch {
        MemorySearch {
            vector: Some(QueryVector {
                model: "m".into(),
                vector: vector.to_vec(),
                min_similarity: 0.9,
            }),
            ..words("qqq")
        }
    }

    fn embed(id: &str, text: &str, vector: [f32; 3]) -> MemoryWrite {
        MemoryWrite::Vector {
            id: id.into(),
            text: text.into(),
            model: "m".into(),
            vector: vector.to_vec(),
        }
    }

    fn found(hits: Vec<MemoryHit>) -> Vec<String> {
        hits.into_iter().map(|h| h.item.id).collect()
    }

    /// Two instances on one database: a search on one sees what the other
    /// saved, changed (text or tags), embedded and forgot since its indexes
    /// were built.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_search_sees_what_another_instance_changed() {
        let url = crate::testing::postgres::shared().fresh_database();
        let (one, _) = Postgres::open(&url).await.unwrap();
        let (two, _) = Postgres::open(&url).await.unwrap();
        let deploys = "deploys need the staging branch";
        one.write(MemoryWrite::Save(item("mem_1", deploys)))
            .await
            .unwrap();
        one.write(embed("mem_1", deploys, [1.0, 0.0, 0.0]))
            .await
            .unwrap();
        assert_eq!(
            found(two.search(words("staging")).await.unwrap()),
            ["mem_1"]
        );
        assert_eq!(
            found(two.search(meaning([1.0, 0.0, 0.0])).await.unwrap()),
            ["mem_1"]
        );
        let nightly = "staging is rebuilt nightly";
        one.write(MemoryWrite::Save(item("mem_2", nightly)))
            .await
            .unwrap();
        one.write(embed("mem_2", nightly, [0.0, 1.0, 0.0]))
            .await
            .unwrap();
        // A new text drops mem_1's vector; its new one arrives after.
        let release = "deploys need the release branch";
        one.write(MemoryWrite::Update {
            id: "mem_1".into(),
            text: Some(release.into()),
            tags: Some(vec!["kakoune".into()]),
            pinned: None,
            at: 2,
        })
        .await
        .unwrap();
        assert_eq!(
            found(two.search(words("staging")).await.unwrap()),
            ["mem_2"]
        );
        assert_eq!(
            found(two.search(words("release")).await.unwrap()),
            ["mem_1"]
        );
        assert_eq!(
            found(two.search(words("kakoune")).await.unwrap()),
            ["mem_1"]
        );
        assert!(
            two.search(meaning([1.0, 0.0, 0.0]))
                .await
                .unwrap()
                .is_empty()
        );
        one.write(embed("mem_1", release, [0.0, 0.0, 1.0]))
            .await
            .unwrap();
        assert_eq!(
            found(two.search(meaning([0.0, 0.0, 1.0])).await.unwrap()),
            ["mem_1"]
        );
        // Replaced by another embedding (a delete and an insert).
        one.write(embed("mem_2", nightly, [1.0, 0.0, 0.0]))
            .await
            .unwrap();
        assert!(
            two.search(meaning([0.0, 1.0, 0.0]))
                .await
                .unwrap()
                .is_empty()
        );
        assert_eq!(
            found(two.search(meaning([1.0, 0.0, 0.0])).await.unwrap()),
            ["mem_2"]
        );
        one.write(MemoryWrite::Forget { id: "mem_2".into() })
            .await
            .unwrap();
        assert!(two.search(words("staging")).await.unwrap().is_empty());
        assert!(
            two.search(meaning([1.0, 0.0, 0.0]))
                .await
                .unwrap()
                .is_empty()
        );
        one.shutdown();
        two.shutdown();
    }

    /// An instance that builds its index afresh ranks items found equally
    /// relevant as one that followed every change did: the one whose words
    /// were written last first, not the one saved last.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn an_instance_reading_afresh_ranks_the_words_written_last_first() {
        let url = crate::testing::postgres::shared().fresh_database();
        let (writer, _) = Postgres::open(&url).await.unwrap();
        for id in ["mem_x", "mem_y"] {
            writer
                .write(MemoryWrite::Save(item(id, "alpha beta")))
                .await
                .unwrap();
        }
        writer
            .write(MemoryWrite::Update {
                id: "mem_x".into(),
                text: Some("beta alpha".into()),
                tags: None,
                pinned: None,
                at: 2,
            })
            .await
            .unwrap();
        let (fresh, _) = Postgres::open(&url).await.unwrap();
        assert_eq!(
            found(fresh.search(words("beta")).await.unwrap()),
            ["mem_x", "mem_y"]
        );
        writer.shutdown();
        fresh.shutdown();
    }

    /// Searches at once on one instance, each catching up outside the
    /// index's lock, each see every item saved (and embedded) before they
    /// began, whichever applies its reading last.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn searches_at_once_each_see_what_was_committed_before_them() {
        let url = crate::testing::postgres::shared().fresh_database();
        let (one, _) = Postgres::open(&url).await.unwrap();
        let (two, _) = Postgres::open(&url).await.unwrap();
        let two = Arc::new(two);
        for n in 1..=8 {
            let id = format!("mem_{n}");
            let text = format!("zebra number {n}");
            one.write(MemoryWrite::Save(item(&id, &text)))
                .await
                .unwrap();
            one.write(embed(&id, &text, [1.0, n as f32 / 100.0, 0.0]))
                .await
                .unwrap();
            let searches: Vec<_> = (0..4)
                .map(|k| {
                    let two = Arc::clone(&two);
                    tokio::spawn(async move {
                        let search = if k % 2 == 0 {
                            words("zebra")
                        } else {
                            meaning([1.0, 0.0, 0.0])
                        };
                        two.search(search).await.unwrap().len()
                    })
                })
                .collect();
            for search in searches {
                assert_eq!(search.await.unwrap(), n, "after {n} saved");
            }
        }
        one.shutdown();
        two.shutdown();
    }
}
