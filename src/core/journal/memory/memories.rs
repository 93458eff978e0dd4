//! Memory items in memory, kept as the SQLite store keeps them
//! (`store::memory`), so both pass `core::memory::contract`; and the
//! in-memory journal as [`Memories`].
//!
//! Searched by the same indexes as the store (`core::memory::index`): the
//! items' words in a [`WordIndex`], each model's embeddings in a
//! [`VectorIndex`], kept in step with every write; the two lists fused by
//! [`fuse`]. Items are numbered in the order saved, as the store's rowids
//! are, and an item's words are inserted again whenever they change, as
//! the store's `memory_changes` has them read again.

use std::collections::{HashMap, HashSet};

use super::{MemoryJournal, State};
use crate::core::journal::{Journal, JournalError, Write};
use crate::core::memory::index::{
    VectorIndex, WordIndex, fuse, scope_token, scope_tokens, tags_text,
};
use crate::core::memory::{
    Memories, MemoryError, MemoryFilter, MemoryHit, MemoryItem, MemorySearch, MemoryWrite,
};

/// One stored item: its number in the indexes (the store's rowid), the
/// item, and the model of its embedding, if it has one (the vector is in
/// that model's index).
#[derive(Clone)]
struct Stored {
    number: i64,
    item: MemoryItem,
    embedded_by: Option<String>,
}

#[derive(Default, Clone)]
pub(super) struct Items {
    /// In the order saved: by number, ascending.
    items: Vec<Stored>,
    /// The number the next item saved gets.
    next: i64,
    /// The items' words.
    words: WordIndex,
    /// Per model, the embeddings made by it.
    vectors: HashMap<String, VectorIndex>,
}

/// Tags as the store reads them back.
fn stored_tags(tags: &[String]) -> Vec<String> {
    tags_text(tags)
        .split_whitespace()
        .map(str::to_owned)
        .collect()
}

/// Holds `stored`'s words in `words`, in place of what it held.
fn index_words(words: &mut WordIndex, stored: &Stored) {
    let item = &stored.item;
    words.insert(
        stored.number,
        &item.text,
        &tags_text(&item.tags),
        &scope_token(item.scope, &item.scope_key),
    );
}

impl Items {
    fn find(&self, id: &str) -> Option<&Stored> {
        self.items.iter().find(|s| s.item.id == id)
    }

    /// The item numbered `number`, if it is still stored.
    fn numbered(&self, number: i64) -> Option<&MemoryItem> {
        self.items
            .binary_search_by_key(&number, |s| s.number)
            .ok()
            .map(|at| &self.items[at].item)
    }

    /// Drops `stored`'s embedding, if it has one.
    fn unembed(vectors: &mut HashMap<String, VectorIndex>, stored: &mut Stored) {
        if let Some(model) = stored.embedded_by.take()
            && let Some(index) = vectors.get_mut(&model)
        {
            index.remove(stored.number);
        }
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
                let stored = Stored {
                    number: self.next,
                    item,
                    embedded_by: None,
                };
                self.next += 1;
                index_words(&mut self.words, &stored);
                self.items.push(stored);
            }
            MemoryWrite::Update {
                id,
                text,
                tags,
                pinned,
                at,
            } => {
                let Some(stored) = self.items.iter_mut().find(|s| s.item.id == id) else {
                    return Err(JournalError::Conflict(format!("no memory {id}")));
                };
                let mut words_changed = false;
                if let Some(text) = text
                    && text != stored.item.text
                {
                    // An embedding is of the text it was made from.
                    Self::unembed(&mut self.vectors, stored);
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
                    index_words(&mut self.words, stored);
                    self.words.compact();
                }
            }
            MemoryWrite::Forget { id } => {
                let Some(at) = self.items.iter().position(|s| s.item.id == id) else {
                    return Err(JournalError::Conflict(format!("no memory {id}")));
                };
                let mut gone = self.items.remove(at);
                Self::unembed(&mut self.vectors, &mut gone);
                self.words.remove(gone.number);
                self.words.compact();
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
                    Self::unembed(&mut self.vectors, stored);
                    if stored.item.text == text {
                        let token = scope_token(stored.item.scope, &stored.item.scope_key);
                        self.vectors.entry(model.clone()).or_default().insert(
                            stored.number,
                            token,
                            &vector,
                        );
                        stored.embedded_by = Some(model);
                    }
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
                    .is_none_or(|tag| tags_text(&item.tags).contains(tag.as_str()))
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
            .filter(|s| s.embedded_by.as_deref() != Some(model))
            .take(limit)
            .map(|s| s.item.clone())
            .collect()
    }

    /// Items matching the search's words, and with its embedding those near
    /// it in meaning, fused by reciprocal rank (as `store::memory` searches).
    pub(super) fn search(&self, search: &MemorySearch) -> Vec<MemoryHit> {
        let limit = search.limit.max(1);
        let tokens: Option<Vec<String>> = scope_tokens(&search.within);
        let by_words: Vec<MemoryHit> = self
            .words
            .search(&search.text, tokens.as_deref(), limit)
            .into_iter()
            .filter_map(|(relevance, number)| {
                let item = self.numbered(number)?.clone();
                Some(MemoryHit { item, relevance })
            })
            .collect();
        let Some(query) = &search.vector else {
            return by_words;
        };
        let within: Option<HashSet<String>> = tokens.map(|tokens| tokens.into_iter().collect());
        let near = self
            .vectors
            .get(&query.model)
            .map_or_else(Vec::new, |index| {
                index.nearest(&query.vector, within.as_ref(), query.min_similarity, limit)
            });
        let by_meaning = near
            .into_iter()
            .map(|(number, _)| self.numbered(number).cloned())
            .collect();
        let by_words = by_words.into_iter().map(|hit| Some(hit.item)).collect();
        fuse(vec![by_words, by_meaning], search.limit)
    }
}

/// A journal error as the memory port's, as the store turns its own.
fn memory_error(err: JournalError) -> MemoryError {
    match err {
        JournalError::Conflict(reason) => MemoryError::Conflict(reason),
        other @ (JournalError::Stopped | JournalError::Fenced(_) | JournalError::Backend(_)) => {
            MemoryError::Backend(Box::new(other))
        }
    }
}

impl MemoryJournal {
    fn recall<T>(&self, f: impl FnOnce(&State) -> T) -> crate::core::memory::Reply<'_, T>
    where
        T: Send + 'static,
    {
        let value = f(&self.state.lock());
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
