//! Memory items in memory, kept and searched as the SQLite store keeps and
//! searches them (`store::memory`, `store::words`, `store::vectors`), so
//! both pass `core::memory::contract`.
//!
//! Search by words ranks as `store::words` does (BM25 over the rarest
//! searched words, stemmed as English; among equals the item written last),
//! recomputed over every item on each search; search by meaning compares
//! the exact cosine similarity of the float vectors, where the store ranks
//! by 8-bit values (the same order to within a few thousandths). Also the
//! in-memory journal as [`Memories`].

use std::collections::HashMap;

use rust_stemmers::{Algorithm, Stemmer};

use super::{MemoryJournal, State};
use crate::core::journal::{Journal, JournalError, Write};
use crate::core::memory::{
    Memories, MemoryError, MemoryFilter, MemoryHit, MemoryItem, MemorySearch, MemoryWrite, Scope,
    search_words, searchable, words,
};

/// One stored item: the item, the order it was saved in (the store's
/// rowid), the order its words last changed in (the word index's slot) and
/// its embedding, if any: (model, vector).
#[derive(Clone)]
struct Stored {
    item: MemoryItem,
    saved: u64,
    changed: u64,
    vector: Option<(String, Vec<f32>)>,
}

#[derive(Default, Clone)]
pub(super) struct Items {
    /// In the order saved.
    items: Vec<Stored>,
    /// The last number given to a save or a change of words.
    counter: u64,
}

/// Tags as the store keeps them: one string, each tag between spaces.
fn tags_column(tags: &[String]) -> String {
    if tags.is_empty() {
        String::new()
    } else {
        format!(" {} ", tags.join(" "))
    }
}

/// Tags as the store reads them back.
fn stored_tags(tags: &[String]) -> Vec<String> {
    tags_column(tags)
        .split_whitespace()
        .map(str::to_owned)
        .collect()
}

/// Whether an item is in one of the (scope, key) pairs a search asks for
/// (every item when none is asked). As in the store's indexes, the user
/// scope is one whatever its key.
fn searched(item: &MemoryItem, within: &[(Scope, String)]) -> bool {
    within.is_empty()
        || within.iter().any(|(scope, key)| {
            *scope == item.scope && (*scope == Scope::User || *key == item.scope_key)
        })
}

/// BM25's parameters and the word index's limits, as `store::words` has them.
const BM25_K1: f64 = 1.2;
const BM25_B: f64 = 0.75;
const TAG_WEIGHT: f64 = 0.5;
const MAX_SEARCH_TERMS: usize = 4;
const CANDIDATES: usize = 256;
/// The constant of reciprocal rank fusion, as `store::memory` has it.
const RRF_K: f64 = 60.0;

/// An item's searchable words (stemmed), each with how often it occurs in
/// the text and in the tags, and how many words each has.
struct Counted {
    counts: HashMap<String, [u8; 2]>,
    lengths: [u16; 2],
}

fn count(stemmer: &Stemmer, item: &MemoryItem) -> Counted {
    let mut counts: HashMap<String, [u8; 2]> = HashMap::new();
    let mut lengths = [0_u16; 2];
    let tags = tags_column(&item.tags);
    for (field, part) in [item.text.as_str(), tags.as_str()].into_iter().enumerate() {
        for word in words(part) {
            lengths[field] = lengths[field].saturating_add(1);
            if !searchable(&word) {
                continue;
            }
            let count = counts.entry(stemmer.stem(&word).into_owned()).or_default();
            count[field] = count[field].saturating_add(1);
        }
    }
    Counted { counts, lengths }
}

impl Items {
    fn find(&self, id: &str) -> Option<&Stored> {
        self.items.iter().find(|s| s.item.id == id)
    }

    fn next(&mut self) -> u64 {
        self.counter += 1;
        self.counter
    }

    pub(super) fn apply(&mut self, write: MemoryWrite) -> Result<(), JournalError> {
        match write {
            MemoryWrite::Save(mut item) | MemoryWrite::Import(mut item) => {
                if self.find(&item.id).is_some() {
                    return Err(JournalError::Conflict(format!(
                        "memory {} already exists",
                        item.id
                    )));
                }
                item.tags = stored_tags(&item.tags);
                let at = self.next();
                self.items.push(Stored {
                    item,
                    saved: at,
                    changed: at,
                    vector: None,
                });
            }
            MemoryWrite::Update {
                id,
                text,
                tags,
                pinned,
                at,
            } => {
                let next = self.counter + 1;
                let Some(stored) = self.items.iter_mut().find(|s| s.item.id == id) else {
                    return Err(JournalError::Conflict(format!("no memory {id}")));
                };
                let mut words_changed = false;
                if let Some(text) = text
                    && text != stored.item.text
                {
                    // An embedding is of the text it was made from.
                    stored.vector = None;
                    stored.item.text = text;
                    words_changed = true;
                }
                if let Some(tags) = tags {
                    let tags = stored_tags(&tags);
                    words_changed |= tags != stored.item.tags;
                    stored.item.tags = tags;
                }
                if let Some(pinned) = pinned {
                    stored.item.pinned = pinned;
                }
                stored.item.updated_at = at;
                if words_changed {
                    stored.changed = next;
                    self.counter = next;
                }
            }
            MemoryWrite::Forget { id } => {
                let before = self.items.len();
                self.items.retain(|s| s.item.id != id);
                if self.items.len() == before {
                    return Err(JournalError::Conflict(format!("no memory {id}")));
                }
            }
            MemoryWrite::Used { ids, at } => {
                for stored in &mut self.items {
                    if ids.contains(&stored.item.id) {
                        stored.item.last_used_at = Some(at);
                    }
                }
            }
            MemoryWrite::Vector {
                id,
                text,
                model,
                vector,
            } => {
                if let Some(stored) = self.items.iter_mut().find(|s| s.item.id == id) {
                    // Replaced; kept only while the item has the text embedded.
                    stored.vector = (stored.item.text == text).then_some((model, vector));
                }
            }
        }
        Ok(())
    }

    pub(super) fn get(&self, id: &str) -> Option<MemoryItem> {
        self.find(id).map(|s| s.item.clone())
    }

    pub(super) fn list(&self, filter: &MemoryFilter) -> Vec<MemoryItem> {
        let tag = filter
            .tag
            .as_ref()
            .map(|tag| format!(" {} ", tag.to_lowercase()));
        let mut found: Vec<MemoryItem> = self
            .items
            .iter()
            .map(|s| &s.item)
            .filter(|item| {
                filter.within.is_empty()
                    || filter
                        .within
                        .iter()
                        .any(|(scope, key)| *scope == item.scope && *key == item.scope_key)
            })
            .filter(|item| filter.scope.is_none_or(|scope| scope == item.scope))
            .filter(|item| {
                tag.as_ref()
                    .is_none_or(|tag| tags_column(&item.tags).contains(tag.as_str()))
            })
            .filter(|item| !filter.pinned_only || item.pinned)
            .cloned()
            .collect();
        found.sort_by(|a, b| (b.updated_at, &b.id).cmp(&(a.updated_at, &a.id)));
        if filter.limit > 0 {
            found.truncate(filter.limit);
        }
        found
    }

    /// Items with no embedding by `model`, in the order saved.
    pub(super) fn unembedded(&self, model: &str, limit: usize) -> Vec<MemoryItem> {
        self.items
            .iter()
            .filter(|s| s.vector.as_ref().is_none_or(|(m, _)| m != model))
            .take(limit)
            .map(|s| s.item.clone())
            .collect()
    }

    /// Items matching the search's words, and with its embedding those near
    /// it in meaning, fused by reciprocal rank.
    pub(super) fn search(&self, search: &MemorySearch) -> Vec<MemoryHit> {
        let limit = search.limit.max(1);
        let by_words = self.by_words(&search.text, &search.within, limit);
        let Some(query) = &search.vector else {
            return by_words;
        };
        let near = self.nearest(
            &query.model,
            &query.vector,
            &search.within,
            query.min_similarity,
            limit,
        );
        let mut fused: HashMap<String, (f64, MemoryItem)> = HashMap::new();
        for (rank, hit) in by_words.into_iter().enumerate() {
            fused.insert(
                hit.item.id.clone(),
                (1.0 / (RRF_K + rank as f64 + 1.0), hit.item),
            );
        }
        for (rank, item) in near.into_iter().enumerate() {
            let entry = fused.entry(item.id.clone()).or_insert((0.0, item));
            entry.0 += 1.0 / (RRF_K + rank as f64 + 1.0);
        }
        let mut hits: Vec<MemoryHit> = fused
            .into_values()
            .map(|(relevance, item)| MemoryHit { item, relevance })
            .collect();
        hits.sort_by(|a, b| {
            b.relevance
                .total_cmp(&a.relevance)
                .then_with(|| a.item.id.cmp(&b.item.id))
        });
        hits.truncate(limit);
        hits
    }

    /// The items best matching `text`'s words, best first (among equals the
    /// one whose words changed last), as `store::words` ranks them.
    fn by_words(&self, text: &str, within: &[(Scope, String)], limit: usize) -> Vec<MemoryHit> {
        let stemmer = Stemmer::create(Algorithm::English);
        // In the order their words last changed, as the index's slots are.
        let mut items: Vec<&Stored> = self.items.iter().collect();
        items.sort_by_key(|s| s.changed);
        let counted: Vec<Counted> = items.iter().map(|s| count(&stemmer, &s.item)).collect();
        let mut held_by: HashMap<&str, u32> = HashMap::new();
        let mut total_lengths = [0_u64; 2];
        for counted in &counted {
            for term in counted.counts.keys() {
                *held_by.entry(term.as_str()).or_default() += 1;
            }
            total_lengths[0] += u64::from(counted.lengths[0]);
            total_lengths[1] += u64::from(counted.lengths[1]);
        }
        let live = items.len() as u32;
        // The words to rank by: the rarest, or when every one is common the
        // two rarest, which an item must hold both of.
        let mut known: Vec<(String, u32)> = Vec::new();
        for word in search_words(text) {
            let term = stemmer.stem(&word).into_owned();
            let held = held_by.get(term.as_str()).copied().unwrap_or(0);
            if held > 0 && !known.iter().any(|(t, _)| *t == term) {
                known.push((term, held));
            }
        }
        known.sort_by_key(|(_, held)| *held);
        let common = (live / 50).max(50);
        let mut chosen: Vec<String> = Vec::new();
        let mut holding = 0;
        for (term, held) in known.iter().filter(|(_, held)| *held <= common) {
            if chosen.len() == MAX_SEARCH_TERMS || (!chosen.is_empty() && holding + held > common) {
                break;
            }
            holding += held;
            chosen.push(term.clone());
        }
        let every = chosen.is_empty() && !known.is_empty();
        if every {
            chosen = known.iter().take(2).map(|(t, _)| t.clone()).collect();
        }
        if chosen.is_empty() {
            return Vec::new();
        }
        let counts_of = |slot: usize| -> Vec<[u8; 2]> {
            chosen
                .iter()
                .map(|term| counted[slot].counts.get(term).copied().unwrap_or_default())
                .collect()
        };
        let wanted = |slot: usize| searched(&items[slot].item, within);
        let holds = |slot: usize, term: &String| counted[slot].counts.contains_key(term);
        let candidates: Vec<usize> = if every {
            (0..items.len())
                .rev()
                .filter(|slot| wanted(*slot) && chosen.iter().all(|t| holds(*slot, t)))
                .take(CANDIDATES)
                .collect()
        } else {
            (0..items.len())
                .filter(|slot| wanted(*slot) && chosen.iter().any(|t| holds(*slot, t)))
                .collect()
        };
        let count = f64::from(live.max(1));
        let idf: Vec<f64> = chosen
            .iter()
            .map(|term| {
                let held = f64::from(held_by.get(term.as_str()).copied().unwrap_or(0).max(1));
                ((count - held + 0.5) / (held + 0.5)).ln().max(1e-6)
            })
            .collect();
        let average = [
            (total_lengths[0] as f64 / count).max(1e-9),
            (total_lengths[1] as f64 / count).max(1e-9),
        ];
        let mut ranked: Vec<(f64, usize)> = candidates
            .into_iter()
            .map(|slot| {
                let length = counted[slot].lengths;
                let counts = counts_of(slot);
                let field = |f: usize| -> f64 {
                    let norm = 1.0 - BM25_B + BM25_B * f64::from(length[f]) / average[f];
                    counts
                        .iter()
                        .zip(&idf)
                        .map(|(count, idf)| {
                            let tf = f64::from(count[f]);
                            idf * tf * (BM25_K1 + 1.0) / (tf + BM25_K1 * norm)
                        })
                        .sum()
                };
                (field(0) + TAG_WEIGHT * field(1), slot)
            })
            .collect();
        ranked.sort_by(|a, b| b.0.total_cmp(&a.0).then(b.1.cmp(&a.1)));
        ranked.truncate(limit);
        ranked
            .into_iter()
            .map(|(relevance, slot)| MemoryHit {
                item: items[slot].item.clone(),
                relevance,
            })
            .collect()
    }

    /// The `limit` items embedded by `model` nearest to `query`, with at
    /// least `floor` cosine similarity, nearest first (among equals the one
    /// saved first).
    fn nearest(
        &self,
        model: &str,
        query: &[f32],
        within: &[(Scope, String)],
        floor: f32,
        limit: usize,
    ) -> Vec<MemoryItem> {
        let Some(query_norm) = norm(query) else {
            return Vec::new();
        };
        let mut near: Vec<(f32, u64, &MemoryItem)> = self
            .items
            .iter()
            .filter(|s| searched(&s.item, within))
            .filter_map(|s| {
                let (by, vector) = s.vector.as_ref()?;
                if by != model || vector.len() != query.len() {
                    return None;
                }
                let dot: f32 = vector.iter().zip(query).map(|(a, b)| a * b).sum();
                let similarity = dot / (norm(vector)? * query_norm);
                (similarity >= floor).then_some((similarity, s.saved, &s.item))
            })
            .collect();
        near.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
        near.into_iter()
            .take(limit)
            .map(|(_, _, item)| item.clone())
            .collect()
    }
}

/// A vector's length, if it can be compared (not zero, finite).
fn norm(vector: &[f32]) -> Option<f32> {
    let norm = vector.iter().map(|v| v * v).sum::<f32>().sqrt();
    (norm.is_finite() && norm > 0.0).then_some(norm)
}

/// A journal error as the memory port's, as the store turns its own.
fn memory_error(err: JournalError) -> MemoryError {
    match err {
        JournalError::Conflict(reason) => MemoryError::Conflict(reason),
        other => MemoryError::Backend(Box::new(other)),
    }
}

impl MemoryJournal {
    fn recall<T>(&self, f: impl FnOnce(&State) -> T) -> crate::core::memory::Reply<'_, T>
    where
        T: Send + 'static,
    {
        let value = f(&self.lock());
        Box::pin(async move { Ok(value) })
    }
}

impl Memories for MemoryJournal {
    fn write(&self, write: MemoryWrite) -> crate::core::memory::Reply<'_, ()> {
        let result = self.apply(Write::Memory(write)).map_err(memory_error);
        Box::pin(async move { result })
    }

    fn note(&self, write: MemoryWrite) {
        Journal::submit(self, Write::Memory(write));
    }

    fn get<'a>(&'a self, id: &'a str) -> crate::core::memory::Reply<'a, Option<MemoryItem>> {
        self.recall(|state| state.memories.get(id))
    }

    fn list(&self, filter: MemoryFilter) -> crate::core::memory::Reply<'_, Vec<MemoryItem>> {
        self.recall(move |state| state.memories.list(&filter))
    }

    fn search(&self, search: MemorySearch) -> crate::core::memory::Reply<'_, Vec<MemoryHit>> {
        self.recall(move |state| state.memories.search(&search))
    }

    fn unembedded<'a>(
        &'a self,
        model: &'a str,
        limit: usize,
    ) -> crate::core::memory::Reply<'a, Vec<MemoryItem>> {
        self.recall(|state| state.memories.unembedded(model, limit))
    }
}
