//! The memory embeddings of one model held in memory
//! (`core::memory::index::vectors`), kept in step with the store: a process
//! catches up with what any process changed by reading only the vectors
//! that arrived and left since it last looked (`memory_vectors.seq`,
//! `memory_vectors_gone.seq`). Items are named by their rowid; a vector is
//! stored as a blob of little-endian `f32`s.
//!
//! [`Vectors`] applies what was read and is the same for both backends;
//! reading is the backend's: [`Vectors::sync`] here for SQLite (under the
//! index's lock), `store::postgres::memory` for PostgreSQL (outside it, so
//! two searches may read the same changes: a change is applied once).

use rusqlite::{Connection, params};

use super::StoreError;
use crate::core::memory::index::VectorIndex;

/// One model's vectors, as of the sequence numbers read.
#[derive(Default)]
pub(in crate::store) struct Vectors {
    model: String,
    /// The latest arrival and departure read.
    seen: (i64, i64),
    index: VectorIndex,
}

/// A vector that arrived (`memory_vectors`): its number, the item, the
/// item's scope token and the vector.
pub(in crate::store) struct Arrival {
    pub(in crate::store) seq: i64,
    pub(in crate::store) item: i64,
    pub(in crate::store) token: String,
    pub(in crate::store) vector: Vec<f32>,
}

/// What arrived (of `model`) and left after `since`, up to `latest` (the
/// newest arrival and departure of any model then), as read at one moment.
pub(in crate::store) struct Changes {
    pub(in crate::store) model: String,
    pub(in crate::store) since: (i64, i64),
    pub(in crate::store) latest: (i64, i64),
    /// (number, item), in order.
    pub(in crate::store) gone: Vec<(i64, i64)>,
    /// In order.
    pub(in crate::store) arrived: Vec<Arrival>,
}

/// A vector as stored: little-endian `f32`s.
pub(in crate::store) fn to_blob(vector: &[f32]) -> Vec<u8> {
    vector.iter().flat_map(|v| v.to_le_bytes()).collect()
}

pub(in crate::store) fn from_blob(blob: &[u8]) -> Vec<f32> {
    blob.chunks_exact(4)
        .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        .collect()
}

impl Vectors {
    /// Where `model`'s changes are to be read from: what is held of it;
    /// from the start for another model.
    pub(in crate::store) fn since(&self, model: &str) -> (i64, i64) {
        if self.model == model {
            self.seen
        } else {
            (0, 0)
        }
    }

    /// Applies changes read from [`Vectors::since`]: departures first, then
    /// arrivals (a vector replaced leaves before its successor arrives);
    /// changes of another model than the one held start it afresh. A change
    /// held already (another search read and applied it first) is passed
    /// over, so that an older read never undoes a newer one. Returns
    /// `false`, changing nothing, when the changes do not follow on from
    /// what is held (a search for another model replaced the index after
    /// they were read): the caller reads again from `since`.
    pub(in crate::store) fn catch_up(&mut self, changes: Changes) -> bool {
        if self.model != changes.model {
            if changes.since != (0, 0) {
                return false;
            }
            *self = Vectors {
                model: changes.model,
                ..Vectors::default()
            };
        }
        if changes.since.0 > self.seen.0 || changes.since.1 > self.seen.1 {
            return false;
        }
        for (seq, item) in changes.gone {
            if seq > self.seen.1 {
                self.index.remove(item);
            }
        }
        for arrival in changes.arrived {
            if arrival.seq > self.seen.0 {
                self.index
                    .insert(arrival.item, arrival.token, &arrival.vector);
            }
        }
        self.seen = (
            self.seen.0.max(changes.latest.0),
            self.seen.1.max(changes.latest.1),
        );
        true
    }

    pub(in crate::store) fn index(&self) -> &VectorIndex {
        &self.index
    }

    /// Brings the index up to date with the SQLite store for `model`,
    /// reading what arrived and left since the last look (everything, for a
    /// new model).
    pub(super) fn sync(
        &mut self,
        conn: &Connection,
        model: &str,
    ) -> Result<&VectorIndex, StoreError> {
        let changes = read(conn, model, self.since(model))?;
        // Read under the index's lock: they follow on from what is held.
        let followed = self.catch_up(changes);
        debug_assert!(followed, "vector changes read under the lock follow on");
        Ok(&self.index)
    }
}

/// What arrived (of `model`) and left after `since` in the SQLite store, up
/// to the newest numbers read first (a change committed meanwhile is read
/// next time).
fn read(conn: &Connection, model: &str, since: (i64, i64)) -> Result<Changes, StoreError> {
    let latest: (i64, i64) = conn
        .prepare_cached(
            "SELECT (SELECT coalesce(max(seq), 0) FROM memory_vectors),
                    (SELECT coalesce(max(seq), 0) FROM memory_vectors_gone)",
        )?
        .query_row([], |row| Ok((row.get(0)?, row.get(1)?)))?;
    let mut changes = Changes {
        model: model.to_owned(),
        since,
        latest,
        gone: Vec::new(),
        arrived: Vec::new(),
    };
    if latest == since {
        return Ok(changes);
    }
    changes.gone = conn
        .prepare_cached(
            "SELECT seq, item FROM memory_vectors_gone WHERE seq > ?1 AND seq <= ?2 ORDER BY seq",
        )?
        .query_map(params![since.1, latest.1], |row| {
            Ok((row.get(0)?, row.get(1)?))
        })?
        .collect::<Result<Vec<_>, _>>()?;
    changes.arrived = conn
        .prepare_cached(
            "SELECT v.seq, v.item, m.scope_token, v.vector FROM memory_vectors v
             JOIN memories m ON m.rowid = v.item
             WHERE v.seq > ?1 AND v.seq <= ?2 AND v.model = ?3 ORDER BY v.seq",
        )?
        .query_map(params![since.0, latest.0, model], |row| {
            Ok(Arrival {
                seq: row.get(0)?,
                item: row.get(1)?,
                token: row.get(2)?,
                vector: from_blob(&row.get::<_, Vec<u8>>(3)?),
            })
        })?
        .collect::<Result<Vec<_>, _>>()?;
    Ok(changes)
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

    fn arrival(seq: i64, item: i64, vector: [f32; 2]) -> Arrival {
        Arrival {
            seq,
            item,
            token: "u0".into(),
            vector: vector.to_vec(),
        }
    }

    fn changes(
        model: &str,
        since: (i64, i64),
        latest: (i64, i64),
        gone: Vec<(i64, i64)>,
        arrived: Vec<Arrival>,
    ) -> Changes {
        Changes {
            model: model.into(),
            since,
            latest,
            gone,
            arrived,
        }
    }

    fn near(vectors: &Vectors, query: [f32; 2]) -> Vec<i64> {
        vectors
            .index()
            .nearest(&query, None, 0.9, 10)
            .into_iter()
            .map(|(item, _)| item)
            .collect()
    }

    /// Two searches may read overlapping changes and apply them in either
    /// order: the older read, applied last, changes nothing.
    #[test]
    fn a_change_read_twice_is_applied_once_and_an_older_read_undoes_nothing() {
        let mut held = Vectors::default();
        let first = || vec![arrival(1, 7, [1.0, 0.0])];
        // Item 7's vector replaced (2 left, 3 arrived).
        let newer = changes(
            "m",
            (0, 0),
            (3, 2),
            vec![(2, 7)],
            vec![arrival(3, 7, [0.0, 1.0])],
        );
        assert!(held.catch_up(newer));
        assert!(held.catch_up(changes("m", (0, 0), (1, 0), vec![], first())));
        assert_eq!(held.since("m"), (3, 2));
        assert_eq!(near(&held, [0.0, 1.0]), [7]);
        assert!(near(&held, [1.0, 0.0]).is_empty());
    }

    /// Changes read for one model while another's search replaced the index
    /// do not follow on: refused, and read again from the start.
    #[test]
    fn changes_that_do_not_follow_on_are_refused() {
        let mut held = Vectors::default();
        assert!(held.catch_up(changes(
            "m",
            (0, 0),
            (1, 0),
            vec![],
            vec![arrival(1, 7, [1.0, 0.0])]
        )));
        let since = held.since("m");
        assert!(held.catch_up(changes("other", (0, 0), (1, 0), vec![], vec![])));
        assert_eq!(held.since("m"), (0, 0));
        let late = changes("m", since, (2, 0), vec![], vec![arrival(2, 8, [1.0, 0.0])]);
        assert!(!held.catch_up(late));
        assert_eq!(held.since("other"), (1, 0));
        let again = changes(
            "m",
            (0, 0),
            (2, 0),
            vec![],
            vec![arrival(1, 7, [1.0, 0.0]), arrival(2, 8, [1.0, 0.0])],
        );
        assert!(held.catch_up(again));
        assert_eq!(near(&held, [1.0, 0.0]).len(), 2);
    }
}
