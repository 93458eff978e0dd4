//! The memory embeddings of one model held in memory
//! (`core::memory::index::vectors`), kept in step with the store: a process
//! catches up with what any process changed by reading only the vectors
//! that arrived and left since it last looked (`memory_vectors.seq`,
//! `memory_vectors_gone.seq`). Items are named by their rowid; a vector is
//! stored as a blob of little-endian `f32`s.

use rusqlite::{Connection, params};

use super::StoreError;
use crate::core::memory::index::VectorIndex;

/// One model's vectors, as of the sequence numbers read.
#[derive(Default)]
pub(super) struct Vectors {
    model: String,
    /// The latest arrival and departure read.
    seen: (i64, i64),
    index: VectorIndex,
}

/// A vector as stored: little-endian `f32`s.
pub(super) fn to_blob(vector: &[f32]) -> Vec<u8> {
    vector.iter().flat_map(|v| v.to_le_bytes()).collect()
}

pub(super) fn from_blob(blob: &[u8]) -> Vec<f32> {
    blob.chunks_exact(4)
        .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        .collect()
}

impl Vectors {
    /// Brings the index up to date with the store for `model`, reading what
    /// arrived and left since the last look (everything, for a new model).
    pub(super) fn sync(
        &mut self,
        conn: &Connection,
        model: &str,
    ) -> Result<&VectorIndex, StoreError> {
        if self.model != model {
            *self = Vectors {
                model: model.to_owned(),
                ..Vectors::default()
            };
        }
        let latest: (i64, i64) = conn
            .prepare_cached(
                "SELECT (SELECT coalesce(max(seq), 0) FROM memory_vectors),
                        (SELECT coalesce(max(seq), 0) FROM memory_vectors_gone)",
            )?
            .query_row([], |row| Ok((row.get(0)?, row.get(1)?)))?;
        if latest == self.seen {
            return Ok(&self.index);
        }
        let mut gone = conn.prepare_cached(
            "SELECT seq, item FROM memory_vectors_gone WHERE seq > ?1 ORDER BY seq",
        )?;
        let left = gone
            .query_map(params![self.seen.1], |row| {
                Ok((row.get::<_, i64>(0)?, row.get::<_, i64>(1)?))
            })?
            .collect::<Result<Vec<_>, _>>()?;
        for (seq, item) in left {
            self.index.remove(item);
            self.seen.1 = self.seen.1.max(seq);
        }
        let mut arrived = conn.prepare_cached(
            "SELECT v.seq, v.item, m.scope_token, v.vector FROM memory_vectors v
             JOIN memories m ON m.rowid = v.item
             WHERE v.seq > ?1 AND v.model = ?2 ORDER BY v.seq",
        )?;
        let mut rows = arrived.query(params![self.seen.0, model])?;
        while let Some(row) = rows.next()? {
            let item: i64 = row.get(1)?;
            let token: String = row.get(2)?;
            let blob: Vec<u8> = row.get(3)?;
            self.index.insert(item, token, &from_blob(&blob));
        }
        drop(rows);
        self.seen = (latest.0, self.seen.1.max(latest.1));
        Ok(&self.index)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_vector_survives_its_blob() {
        let vector = [0.5_f32, -1.25, f32::MIN_POSITIVE, 3.0e7];
        let blob = to_blob(&vector);
        assert_eq!(blob.len(), 16);
        assert_eq!(from_blob(&blob), vector);
    }
}
