//! Memory items: writes (applied by the writer thread) and reads; searches
//! by words through `store::words`, by meaning through `store::vectors`,
//! fused by `core::memory::index::fuse`.

use parking_lot::Mutex;
use std::collections::HashSet;

use rusqlite::{Connection, OptionalExtension, Row, params, params_from_iter, types::Value};

use super::StoreError;
use super::vectors::Vectors;
use super::words::Words;
use crate::core::memory::index::{fuse, scope_token, scope_tokens, tags_text};
use crate::core::memory::{MemoryFilter, MemoryHit, MemoryItem, MemorySearch, MemoryWrite, Scope};
use crate::core::session::Millis;

/// The columns of an item (`Stored`), of `memories m`.
pub(in crate::store) const COLUMNS: &str = "m.id, m.scope, m.scope_key, m.text, m.tags, m.source, m.created_at, m.updated_at, m.last_used_at, m.pinned";

pub(super) fn apply(conn: &Connection, write: &MemoryWrite) -> Result<(), StoreError> {
    match write {
        MemoryWrite::Save(item) | MemoryWrite::Import(item) => {
            let source = serde_json::to_string(&item.source)
                .map_err(|err| StoreError::Write(err.to_string()))?;
            let inserted = conn
                .prepare_cached(
                    "INSERT INTO memories (id, scope, scope_key, text, tags, scope_token, source, created_at, updated_at, last_used_at, pinned)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11) ON CONFLICT (id) DO NOTHING",
                )?
                .execute(params![
                    item.id,
                    item.scope.as_str(),
                    item.scope_key,
                    item.text,
                    tags_text(&item.tags),
                    scope_token(item.scope, &item.scope_key),
                    source,
                    item.created_at,
                    item.updated_at,
                    item.last_used_at,
                    item.pinned,
                ])?;
            if inserted == 0 {
                return Err(StoreError::Conflict(format!(
                    "memory {} already exists",
                    item.id
                )));
            }
        }
        MemoryWrite::Update {
            id,
            text,
            tags,
            pinned,
            at,
        } => {
            let changed = conn
                .prepare_cached(
                    "UPDATE memories SET text = coalesce(?2, text), tags = coalesce(?3, tags),
                     pinned = coalesce(?4, pinned), updated_at = ?5 WHERE id = ?1",
                )?
                .execute(params![
                    id,
                    text,
                    tags.as_deref().map(tags_text),
                    pinned,
                    at
                ])?;
            if changed == 0 {
                return Err(StoreError::Conflict(format!("no memory {id}")));
            }
        }
        MemoryWrite::Forget { id } => {
            let changed = conn
                .prepare_cached("DELETE FROM memories WHERE id = ?1")?
                .execute(params![id])?;
            if changed == 0 {
                return Err(StoreError::Conflict(format!("no memory {id}")));
            }
        }
        MemoryWrite::Used { ids, at } => {
            let mut statement =
                conn.prepare_cached("UPDATE memories SET last_used_at = ?2 WHERE id = ?1")?;
            for id in ids {
                statement.execute(params![id, at])?;
            }
        }
        MemoryWrite::Vector {
            id,
            text,
            model,
            vector,
        } => {
            // Replaced by a delete and an insert, never updated in place, so
            // every process sees it leave and arrive (`store::vectors`). An
            // item whose text changed since it was embedded keeps none.
            conn.prepare_cached(
                "DELETE FROM memory_vectors WHERE item = (SELECT rowid FROM memories WHERE id = ?1)",
            )?
            .execute(params![id])?;
            conn.prepare_cached(
                "INSERT INTO memory_vectors (item, model, vector)
                 SELECT rowid, ?3, ?4 FROM memories WHERE id = ?1 AND text = ?2",
            )?
            .execute(params![id, text, model, super::vectors::to_blob(vector)])?;
        }
    }
    Ok(())
}

/// Items with no vector by `model`, oldest first.
pub(super) fn unembedded(
    conn: &Connection,
    model: &str,
    limit: usize,
) -> Result<Vec<MemoryItem>, StoreError> {
    let rows = conn
        .prepare_cached(&format!(
            "SELECT {COLUMNS} FROM memories m
             WHERE NOT EXISTS (SELECT 1 FROM memory_vectors v WHERE v.item = m.rowid AND v.model = ?1)
             ORDER BY m.rowid LIMIT ?2"
        ))?
        .query_map(params![model, limit as i64], item_row)?
        .collect::<Result<Vec<_>, _>>()?;
    rows.into_iter().map(finish).collect()
}

fn item_row(row: &Row<'_>) -> rusqlite::Result<Stored> {
    Ok(Stored {
        id: row.get(0)?,
        scope: row.get(1)?,
        scope_key: row.get(2)?,
        text: row.get(3)?,
        tags: row.get(4)?,
        source: row.get(5)?,
        created_at: row.get(6)?,
        updated_at: row.get(7)?,
        last_used_at: row.get(8)?,
        pinned: row.get(9)?,
    })
}

/// An item's columns as stored (`COLUMNS`, in that order), as either
/// backend reads them.
pub(in crate::store) struct Stored {
    pub(in crate::store) id: String,
    pub(in crate::store) scope: String,
    pub(in crate::store) scope_key: String,
    pub(in crate::store) text: String,
    /// `tags_text`: each tag between spaces.
    pub(in crate::store) tags: String,
    /// `MemorySource` as JSON.
    pub(in crate::store) source: String,
    pub(in crate::store) created_at: Millis,
    pub(in crate::store) updated_at: Millis,
    pub(in crate::store) last_used_at: Option<Millis>,
    pub(in crate::store) pinned: bool,
}

/// The item a row holds; an unknown scope or a source that does not parse
/// is corrupt.
pub(in crate::store) fn finish(stored: Stored) -> Result<MemoryItem, StoreError> {
    let Some(scope) = Scope::parse(&stored.scope) else {
        return Err(StoreError::Corrupt(format!(
            "unknown memory scope {:?} of {}",
            stored.scope, stored.id
        )));
    };
    let source = serde_json::from_str(&stored.source)
        .map_err(|err| StoreError::Corrupt(format!("source of {}: {err}", stored.id)))?;
    Ok(MemoryItem {
        tags: stored.tags.split_whitespace().map(str::to_owned).collect(),
        id: stored.id,
        scope,
        scope_key: stored.scope_key,
        text: stored.text,
        source,
        created_at: stored.created_at,
        updated_at: stored.updated_at,
        last_used_at: stored.last_used_at,
        pinned: stored.pinned,
    })
}

/// `(scope, key)` pairs as SQL: `(m.scope = ? AND m.scope_key = ?) OR …`,
/// with its values appended to `values`; `None` for no restriction.
fn within_sql(within: &[(Scope, String)], values: &mut Vec<Value>) -> Option<String> {
    if within.is_empty() {
        return None;
    }
    let parts: Vec<&str> = within
        .iter()
        .map(|(scope, key)| {
            values.push(Value::Text(scope.as_str().to_owned()));
            values.push(Value::Text(key.clone()));
            "(m.scope = ? AND m.scope_key = ?)"
        })
        .collect();
    Some(format!("({})", parts.join(" OR ")))
}

/// The item stored at `rowid` (the index's key), if it is still there.
fn item_at(conn: &Connection, rowid: i64) -> Result<Option<MemoryItem>, StoreError> {
    conn.prepare_cached(&format!(
        "SELECT {COLUMNS} FROM memories m WHERE m.rowid = ?1"
    ))?
    .query_row(params![rowid], item_row)
    .optional()?
    .map(finish)
    .transpose()
}

pub(super) fn get(conn: &Connection, id: &str) -> Result<Option<MemoryItem>, StoreError> {
    conn.prepare_cached(&format!("SELECT {COLUMNS} FROM memories m WHERE m.id = ?1"))?
        .query_row(params![id], item_row)
        .optional()?
        .map(finish)
        .transpose()
}

pub(super) fn list(
    conn: &Connection,
    filter: &MemoryFilter,
) -> Result<Vec<MemoryItem>, StoreError> {
    let mut values = Vec::new();
    let mut clauses = Vec::new();
    if let Some(within) = within_sql(&filter.within, &mut values) {
        clauses.push(within);
    }
    if let Some(scope) = filter.scope {
        clauses.push("m.scope = ?".to_owned());
        values.push(Value::Text(scope.as_str().to_owned()));
    }
    if let Some(tag) = &filter.tag {
        clauses.push("instr(m.tags, ?) > 0".to_owned());
        values.push(Value::Text(format!(" {} ", tag.to_lowercase())));
    }
    if filter.pinned_only {
        clauses.push("m.pinned = 1".to_owned());
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
    let rows = conn
        .prepare_cached(&sql)?
        .query_map(params_from_iter(values), item_row)?
        .collect::<Result<Vec<_>, _>>()?;
    rows.into_iter().map(finish).collect()
}

/// Items matching the search's words, and with its embedding those near it
/// in meaning, fused by reciprocal rank.
pub(super) fn search(
    conn: &Connection,
    search: &MemorySearch,
    vectors: &Mutex<Vectors>,
    words: &Mutex<Words>,
) -> Result<Vec<MemoryHit>, StoreError> {
    let by_words = search_words(conn, search, words)?;
    let Some(query) = &search.vector else {
        return Ok(by_words);
    };
    let within: Option<HashSet<String>> = scope_tokens(&search.within);
    let near = {
        let mut vectors = vectors.lock();
        vectors.sync(conn, &query.model)?.nearest(
            &query.vector,
            within.as_ref(),
            query.min_similarity,
            search.limit.max(1),
        )
    };
    let by_meaning = near
        .iter()
        .map(|(rowid, _)| item_at(conn, *rowid))
        .collect::<Result<Vec<_>, _>>()?;
    let by_words = by_words.into_iter().map(|hit| Some(hit.item)).collect();
    Ok(fuse(vec![by_words, by_meaning], search.limit))
}

/// Items matching the search's words, best first (`store::words`).
fn search_words(
    conn: &Connection,
    search: &MemorySearch,
    words: &Mutex<Words>,
) -> Result<Vec<MemoryHit>, StoreError> {
    let within: Option<Vec<String>> = scope_tokens(&search.within);
    let ranked = {
        let mut words = words.lock();
        words
            .sync(conn)?
            .search(&search.text, within.as_deref(), search.limit.max(1))
    };
    let mut hits = Vec::with_capacity(ranked.len());
    for (relevance, rowid) in ranked {
        if let Some(item) = item_at(conn, rowid)? {
            hits.push(MemoryHit { item, relevance });
        }
    }
    Ok(hits)
}

#[cfg(test)]
mod tests {
    use crate::core::memory::{
        Memories, MemoryError, MemoryFilter, MemoryItem, MemorySearch, MemorySource, MemoryWrite,
        Scope,
    };
    use crate::store::Store;

    fn item(id: &str, scope: Scope, key: &str, text: &str, tags: &[&str]) -> MemoryItem {
        MemoryItem {
            id: id.into(),
            text: text.into(),
            scope,
            scope_key: key.into(),
            tags: tags.iter().map(|t| (*t).to_owned()).collect(),
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

    fn ids(items: impl IntoIterator<Item = MemoryItem>) -> Vec<String> {
        items.into_iter().map(|i| i.id).collect()
    }

    #[tokio::test]
    async fn search_ranks_by_relevance_within_the_scopes_asked() {
        let dir = tempfile::tempdir().unwrap();
        let (store, _) = Store::open(&dir.path().join("p.db")).unwrap();
        for saved in [
            item(
                "mem_1",
                Scope::Workspace,
                "/a",
                "The tests run with cargo nextest",
                &["testing"],
            ),
            item(
                "mem_2",
                Scope::Workspace,
                "/b",
                "Tests of b need docker running",
                &[],
            ),
            item(
                "mem_3",
                Scope::User,
                "",
                "The person prefers short answers",
                &[],
            ),
            item(
                "mem_4",
                Scope::Workspace,
                "/a",
                "Deploys go through the staging branch",
                &["deploy"],
            ),
            item(
                "mem_5",
                Scope::Conversation,
                "chat/1",
                "We agreed to test the parser first, tests tests",
                &[],
            ),
        ] {
            store.write(MemoryWrite::Save(saved)).await.unwrap();
        }
        let within_a = vec![
            (Scope::User, String::new()),
            (Scope::Workspace, "/a".to_owned()),
            (Scope::Conversation, "chat/2".to_owned()),
        ];
        let search = |text: &str, within: Vec<(Scope, String)>| MemorySearch {
            text: text.into(),
            within,
            limit: 10,
            vector: None,
        };
        // Stemmed: "testing" finds "tests"; b's item and another chat's are not seen.
        let hits = store
            .search(search("how is testing done?", within_a.clone()))
            .await
            .unwrap();
        assert_eq!(ids(hits.into_iter().map(|h| h.item)), vec!["mem_1"]);
        // A tag is found like a word.
        let hits = store
            .search(search("deploy", within_a.clone()))
            .await
            .unwrap();
        assert_eq!(ids(hits.into_iter().map(|h| h.item)), vec!["mem_4"]);
        // Everything, best first: the item saying "tests" three times leads.
        let hits = store.search(search("tests", Vec::new())).await.unwrap();
        assert_eq!(hits[0].item.id, "mem_5");
        assert_eq!(hits.len(), 3);
        assert!(hits.windows(2).all(|w| w[0].relevance >= w[1].relevance));
        // Nothing to look for finds nothing rather than everything.
        assert!(
            store
                .search(search("the of a", Vec::new()))
                .await
                .unwrap()
                .is_empty()
        );
    }

    #[tokio::test]
    async fn edits_reindex_forgetting_removes_and_missing_items_conflict() {
        let dir = tempfile::tempdir().unwrap();
        let (store, _) = Store::open(&dir.path().join("p.db")).unwrap();
        store
            .write(MemoryWrite::Save(item(
                "mem_1",
                Scope::User,
                "",
                "Uses vim",
                &["editor"],
            )))
            .await
            .unwrap();
        let again = store
            .write(MemoryWrite::Save(item("mem_1", Scope::User, "", "x", &[])))
            .await;
        assert!(matches!(again, Err(MemoryError::Conflict(_))), "{again:?}");
        store
            .write(MemoryWrite::Update {
                id: "mem_1".into(),
                text: Some("Uses helix".into()),
                tags: Some(vec!["editor".into(), "modal".into()]),
                pinned: Some(true),
                at: 5,
            })
            .await
            .unwrap();
        let search = |text: &str| MemorySearch {
            text: text.into(),
            within: Vec::new(),
            limit: 5,
            vector: None,
        };
        assert!(store.search(search("vim")).await.unwrap().is_empty());
        assert_eq!(store.search(search("helix")).await.unwrap().len(), 1);
        let got = store.get("mem_1").await.unwrap().unwrap();
        assert_eq!(got.tags, vec!["editor", "modal"]);
        assert!(got.pinned);
        assert_eq!(got.updated_at, 5);
        let pinned = store
            .list(MemoryFilter {
                pinned_only: true,
                tag: Some("modal".into()),
                ..MemoryFilter::default()
            })
            .await
            .unwrap();
        assert_eq!(ids(pinned), vec!["mem_1"]);
        store.note(MemoryWrite::Used {
            ids: vec!["mem_1".into()],
            at: 9,
        });
        crate::core::journal::Journal::flush(&store).await.unwrap();
        assert_eq!(
            store.get("mem_1").await.unwrap().unwrap().last_used_at,
            Some(9)
        );
        store
            .write(MemoryWrite::Forget { id: "mem_1".into() })
            .await
            .unwrap();
        assert!(store.search(search("helix")).await.unwrap().is_empty());
        assert_eq!(store.get("mem_1").await.unwrap(), None);
        let gone = store
            .write(MemoryWrite::Forget { id: "mem_1".into() })
            .await;
        assert!(matches!(gone, Err(MemoryError::Conflict(_))), "{gone:?}");
    }

    /// A process that reads the words afresh ranks items found equally
    /// relevant as one that followed every change did: the one whose words
    /// were written last first, not the one saved last.
    #[tokio::test]
    async fn a_process_reading_afresh_ranks_the_words_written_last_first() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("p.db");
        let (writer, _) = Store::open(&path).unwrap();
        for id in ["mem_x", "mem_y"] {
            writer
                .write(MemoryWrite::Save(item(
                    id,
                    Scope::User,
                    "",
                    "alpha beta",
                    &[],
                )))
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
        let (fresh, _) = Store::open(&path).unwrap();
        let hits = fresh
            .search(MemorySearch {
                text: "beta".into(),
                within: Vec::new(),
                limit: 5,
                vector: None,
            })
            .await
            .unwrap();
        assert_eq!(ids(hits.into_iter().map(|h| h.item)), ["mem_x", "mem_y"]);
    }

    /// A process holding the words in memory sees what another process
    /// saves, changes and forgets, also when a new item takes a forgotten
    /// one's rowid.
    #[tokio::test]
    async fn a_search_sees_what_another_process_changed() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("p.db");
        let (ours, _) = Store::open(&path).unwrap();
        let (theirs, _) = Store::open(&path).unwrap();
        let search = |text: &str| MemorySearch {
            text: text.into(),
            within: Vec::new(),
            limit: 5,
            vector: None,
        };
        let found =
            |hits: Vec<crate::core::memory::MemoryHit>| ids(hits.into_iter().map(|h| h.item));
        theirs
            .write(MemoryWrite::Save(item(
                "mem_1",
                Scope::User,
                "",
                "Uses vim",
                &[],
            )))
            .await
            .unwrap();
        assert_eq!(found(ours.search(search("vim")).await.unwrap()), ["mem_1"]);
        theirs
            .write(MemoryWrite::Update {
                id: "mem_1".into(),
                text: None,
                tags: Some(vec!["kakoune".into()]),
                pinned: None,
                at: 2,
            })
            .await
            .unwrap();
        assert_eq!(
            found(ours.search(search("kakoune")).await.unwrap()),
            ["mem_1"]
        );
        theirs
            .write(MemoryWrite::Forget { id: "mem_1".into() })
            .await
            .unwrap();
        theirs
            .write(MemoryWrite::Save(item(
                "mem_2",
                Scope::User,
                "",
                "Uses emacs",
                &[],
            )))
            .await
            .unwrap();
        assert!(ours.search(search("vim")).await.unwrap().is_empty());
        assert!(ours.search(search("kakoune")).await.unwrap().is_empty());
        assert_eq!(
            found(ours.search(search("emacs")).await.unwrap()),
            ["mem_2"]
        );
    }
}
