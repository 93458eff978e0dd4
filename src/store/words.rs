//! The memory items' words held in memory (`core::memory::index::words`),
//! kept in step with the store: built from it on the first search of a
//! process; after that a process catches up with what any process changed
//! by reading only the items changed since it last looked
//! (`memory_changes`, one row per item with the number of its latest
//! change). Items are named by their rowid.
//!
//! [`Words`] applies what was read and is the same for both backends;
//! reading is the backend's: [`Words::sync`] here for SQLite (under the
//! index's lock), `store::postgres::memory` for PostgreSQL (outside it, so
//! two searches may read the same changes: a change is applied once).

use rusqlite::{Connection, params};

use super::StoreError;
use crate::core::memory::index::WordIndex;

/// An item's words as stored: its text, its tags (`tags_text`) and its
/// scope token.
pub(in crate::store) struct ItemWords {
    pub(in crate::store) text: String,
    pub(in crate::store) tags: String,
    pub(in crate::store) token: String,
}

/// One item's latest change (`memory_changes`): its number, the item, and
/// its words now (`None`: it is gone).
pub(in crate::store) struct Change {
    pub(in crate::store) seq: i64,
    pub(in crate::store) item: i64,
    pub(in crate::store) words: Option<ItemWords>,
}

/// The word index of the items stored, as of the latest change read.
#[derive(Default)]
pub(in crate::store) struct Words {
    /// Built from the store yet.
    loaded: bool,
    /// The latest change read (`memory_changes.seq`).
    seen: i64,
    index: WordIndex,
}

impl Words {
    /// An index of every item, as of change `latest`: `items` come in the
    /// order their words were last written (an item no change names first),
    /// as [`Words::catch_up`] inserts them, so that among equals the last
    /// written comes first either way.
    pub(in crate::store) fn built(
        latest: i64,
        items: impl IntoIterator<Item = (i64, ItemWords)>,
    ) -> Self {
        let mut index = WordIndex::default();
        for (item, words) in items {
            index.insert(item, &words.text, &words.tags, &words.token);
        }
        Self {
            loaded: true,
            seen: latest,
            index,
        }
    }

    /// The latest change held; `None` until built.
    pub(in crate::store) fn seen(&self) -> Option<i64> {
        self.loaded.then_some(self.seen)
    }

    /// Takes `fresh` (built from the store) in place of what is held, unless
    /// what is held is as new already (built or caught up by another search
    /// meanwhile).
    pub(in crate::store) fn adopt(&mut self, fresh: Words) {
        if !self.loaded || fresh.seen > self.seen {
            *self = fresh;
        }
    }

    /// Applies changes read after [`Words::seen`], in the order of their
    /// numbers. A change held already (another search read and applied it
    /// first) is passed over, so that an older read never undoes a newer
    /// one. Nothing is applied before the index is built.
    pub(in crate::store) fn catch_up(&mut self, changes: impl IntoIterator<Item = Change>) {
        if !self.loaded {
            return;
        }
        let mut applied = false;
        for change in changes {
            if change.seq <= self.seen {
                continue;
            }
            self.index.remove(change.item);
            if let Some(words) = change.words {
                self.index
                    .insert(change.item, &words.text, &words.tags, &words.token);
            }
            self.seen = change.seq;
            applied = true;
        }
        if applied {
            self.index.compact();
        }
    }

    pub(in crate::store) fn index(&self) -> &WordIndex {
        &self.index
    }

    /// Brings the index up to date with the SQLite store: everything on the
    /// first call, then the items changed since.
    pub(super) fn sync(&mut self, conn: &Connection) -> Result<&WordIndex, StoreError> {
        if !self.loaded {
            *self = load(conn)?;
            return Ok(&self.index);
        }
        let latest: i64 = conn
            .prepare_cached("SELECT coalesce(max(seq), 0) FROM memory_changes")?
            .query_row([], |row| row.get(0))?;
        if latest == self.seen {
            return Ok(&self.index);
        }
        let mut changed = conn.prepare_cached(
            "SELECT c.seq, c.item, m.text, m.tags, m.scope_token FROM memory_changes c
             LEFT JOIN memories m ON m.rowid = c.item WHERE c.seq > ?1 ORDER BY c.seq",
        )?;
        let changes = changed
            .query_map(params![self.seen], |row| {
                let words = match row.get::<_, Option<String>>(2)? {
                    Some(text) => Some(ItemWords {
                        text,
                        tags: row.get(3)?,
                        token: row.get(4)?,
                    }),
                    None => None,
                };
                Ok(Change {
                    seq: row.get(0)?,
                    item: row.get(1)?,
                    words,
                })
            })?
            .collect::<Result<Vec<_>, _>>()?;
        self.catch_up(changes);
        Ok(&self.index)
    }
}

/// Every item, and the latest change, as of one moment (one transaction),
/// in the order their words were last written (`memory_changes`; an item no
/// change names, saved before the table was, first).
fn load(conn: &Connection) -> Result<Words, StoreError> {
    let snapshot = conn.unchecked_transaction()?;
    let latest: i64 = snapshot
        .prepare_cached("SELECT coalesce(max(seq), 0) FROM memory_changes")?
        .query_row([], |row| row.get(0))?;
    let items = snapshot
        .prepare_cached(
            "SELECT m.rowid, m.text, m.tags, m.scope_token FROM memories m
                 LEFT JOIN memory_changes c ON c.item = m.rowid ORDER BY c.seq, m.rowid",
        )?
        .query_map([], |row| {
            Ok((
                row.get(0)?,
                ItemWords {
                    text: row.get(1)?,
                    tags: row.get(2)?,
                    token: row.get(3)?,
                },
            ))
        })?
        .collect::<Result<Vec<_>, _>>()?;
    snapshot.commit()?;
    Ok(Words::built(latest, items))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(text: &str) -> ItemWords {
        ItemWords {
            text: text.into(),
            tags: String::new(),
            token: "u0".into(),
        }
    }

    fn change(seq: i64, item: i64, text: Option<&str>) -> Change {
        Change {
            seq,
            item,
            words: text.map(words),
        }
    }

    fn found(words: &Words, text: &str) -> Vec<i64> {
        words
            .index()
            .search(text, None, 10)
            .into_iter()
            .map(|(_, item)| item)
            .collect()
    }

    /// Two searches may read overlapping changes and apply them in either
    /// order: the older read, applied last, changes nothing.
    #[test]
    fn a_change_read_twice_is_applied_once_and_an_older_read_undoes_nothing() {
        let mut held = Words::built(1, [(1, words("alpha"))]);
        let older = vec![change(2, 1, Some("beta"))];
        let newer = vec![change(2, 1, Some("beta")), change(3, 1, Some("gamma"))];
        held.catch_up(newer);
        held.catch_up(older);
        assert_eq!(held.seen(), Some(3));
        assert!(found(&held, "beta").is_empty());
        assert_eq!(found(&held, "gamma"), [1]);
        held.catch_up(vec![change(4, 1, None)]);
        assert!(found(&held, "gamma").is_empty());
    }

    /// A fresh build replaces what is held only when it is newer; nothing
    /// is applied to an index not built yet.
    #[test]
    fn a_fresh_build_is_taken_only_when_newer() {
        let mut held = Words::default();
        held.catch_up(vec![change(1, 1, Some("alpha"))]);
        assert_eq!(held.seen(), None);
        held.adopt(Words::built(5, [(1, words("alpha"))]));
        assert_eq!(held.seen(), Some(5));
        held.adopt(Words::built(4, [(2, words("beta"))]));
        assert_eq!((held.seen(), found(&held, "alpha")), (Some(5), vec![1]));
        held.adopt(Words::built(6, [(2, words("beta"))]));
        assert_eq!(
            (found(&held, "alpha"), found(&held, "beta")),
            (vec![], vec![2])
        );
    }
}
