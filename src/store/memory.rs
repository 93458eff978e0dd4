//! Memory items: writes (applied by the writer thread) and reads, with the
//! FTS5 index the schema keeps in step by triggers.

use rusqlite::{Connection, OptionalExtension, Row, params, params_from_iter, types::Value};

use super::StoreError;
use crate::core::memory::{
    MemoryFilter, MemoryHit, MemoryItem, MemorySearch, MemoryWrite, Scope, fts_query,
};

const COLUMNS: &str = "m.id, m.scope, m.scope_key, m.text, m.tags, m.source, m.created_at, m.updated_at, m.last_used_at, m.pinned";

/// Tags as stored: one string, each tag between spaces, so the index finds
/// them and a tag filter is one `LIKE`.
fn tags_column(tags: &[String]) -> String {
    if tags.is_empty() {
        String::new()
    } else {
        format!(" {} ", tags.join(" "))
    }
}

pub(super) fn apply(conn: &Connection, write: &MemoryWrite) -> Result<(), StoreError> {
    match write {
        MemoryWrite::Save(item) => {
            let source = serde_json::to_string(&item.source)
                .map_err(|err| StoreError::Write(err.to_string()))?;
            let inserted = conn
                .prepare_cached(
                    "INSERT INTO memories (id, scope, scope_key, text, tags, source, created_at, updated_at, last_used_at, pinned)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10) ON CONFLICT (id) DO NOTHING",
                )?
                .execute(params![
                    item.id,
                    item.scope.as_str(),
                    item.scope_key,
                    item.text,
                    tags_column(&item.tags),
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
                    tags.as_deref().map(tags_column),
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
    }
    Ok(())
}

fn item_row(row: &Row<'_>) -> rusqlite::Result<(MemoryItem, String, String)> {
    let scope: String = row.get(1)?;
    let tags: String = row.get(4)?;
    let source: String = row.get(5)?;
    Ok((
        MemoryItem {
            id: row.get(0)?,
            scope: Scope::parse(&scope).unwrap_or(Scope::User),
            scope_key: row.get(2)?,
            text: row.get(3)?,
            tags: tags.split_whitespace().map(str::to_owned).collect(),
            source: Default::default(),
            created_at: row.get(6)?,
            updated_at: row.get(7)?,
            last_used_at: row.get(8)?,
            pinned: row.get(9)?,
        },
        scope,
        source,
    ))
}

fn finish(
    (mut item, scope, source): (MemoryItem, String, String),
) -> Result<MemoryItem, StoreError> {
    if Scope::parse(&scope).is_none() {
        return Err(StoreError::Corrupt(format!(
            "unknown memory scope {scope:?} of {}",
            item.id
        )));
    }
    item.source = serde_json::from_str(&source)
        .map_err(|err| StoreError::Corrupt(format!("source of {}: {err}", item.id)))?;
    Ok(item)
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

pub(super) fn search(
    conn: &Connection,
    search: &MemorySearch,
) -> Result<Vec<MemoryHit>, StoreError> {
    let Some(query) = fts_query(&search.text) else {
        return Ok(Vec::new());
    };
    let mut values = vec![Value::Text(query)];
    let mut sql = format!(
        "SELECT {COLUMNS}, bm25(memories_fts) AS rank FROM memories_fts
         JOIN memories m ON m.rowid = memories_fts.rowid
         WHERE memories_fts MATCH ?"
    );
    if let Some(within) = within_sql(&search.within, &mut values) {
        sql.push_str(" AND ");
        sql.push_str(&within);
    }
    sql.push_str(&format!(" ORDER BY rank LIMIT {}", search.limit.max(1)));
    let rows = conn
        .prepare_cached(&sql)?
        .query_map(params_from_iter(values), |row| {
            Ok((item_row(row)?, row.get::<_, f64>(10)?))
        })?
        .collect::<Result<Vec<_>, _>>()?;
    rows.into_iter()
        .map(|(raw, rank)| {
            Ok(MemoryHit {
                item: finish(raw)?,
                // FTS5's bm25() is lower for better matches.
                relevance: -rank,
            })
        })
        .collect()
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
}
