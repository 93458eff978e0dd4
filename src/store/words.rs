//! The memory items' words held in memory (`core::memory::index::words`),
//! kept in step with the store: built from it on the first search of a
//! process; after that a process catches up with what any process changed
//! by reading only the items changed since it last looked
//! (`memory_changes`, one row per item with the number of its latest
//! change). Items are named by their rowid.

use rusqlite::{Connection, params};

use super::StoreError;
use crate::core::memory::index::WordIndex;

/// The word index of the items stored, as of the latest change read.
#[derive(Default)]
pub(super) struct Words {
    /// Built from the store yet.
    loaded: bool,
    /// The latest change read (`memory_changes.seq`).
    seen: i64,
    index: WordIndex,
}

impl Words {
    /// Brings the index up to date with the store: everything on the first
    /// call, then the items changed since.
    pub(super) fn sync(&mut self, conn: &Connection) -> Result<&WordIndex, StoreError> {
        if !self.loaded {
            self.load(conn)?;
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
        let mut rows = changed.query(params![self.seen])?;
        while let Some(row) = rows.next()? {
            let seq: i64 = row.get(0)?;
            let item: i64 = row.get(1)?;
            self.index.remove(item);
            if let Some(text) = row.get::<_, Option<String>>(2)? {
                let tags: String = row.get(3)?;
                let token: String = row.get(4)?;
                self.index.insert(item, &text, &tags, &token);
            }
            self.seen = self.seen.max(seq);
        }
        drop(rows);
        self.index.compact();
        Ok(&self.index)
    }

    /// Every item, and the latest change, as of one moment: inserted in the
    /// order their words were last written (`memory_changes`; an item no
    /// change names, saved before the table was, first), as `sync` inserts
    /// them, so that among equals the last written comes first.
    fn load(&mut self, conn: &Connection) -> Result<(), StoreError> {
        *self = Words::default();
        let snapshot = conn.unchecked_transaction()?;
        self.seen = snapshot
            .prepare_cached("SELECT coalesce(max(seq), 0) FROM memory_changes")?
            .query_row([], |row| row.get(0))?;
        let mut all = snapshot.prepare_cached(
            "SELECT m.rowid, m.text, m.tags, m.scope_token FROM memories m
                 LEFT JOIN memory_changes c ON c.item = m.rowid ORDER BY c.seq, m.rowid",
        )?;
        let mut rows = all.query([])?;
        while let Some(row) = rows.next()? {
            let item: i64 = row.get(0)?;
            let text: String = row.get(1)?;
            let tags: String = row.get(2)?;
            let token: String = row.get(3)?;
            self.index.insert(item, &text, &tags, &token);
        }
        drop(rows);
        drop(all);
        snapshot.commit()?;
        self.loaded = true;
        Ok(())
    }
}
