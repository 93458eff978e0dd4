//! The memory items' words, held in memory for search by words: for each
//! word (stemmed as English, so `testing` finds `tests`) the items holding
//! it, newest last, with how often it occurs in their text and tags, and
//! for each item its length and scope. Pure: a backend fills a
//! [`WordIndex`] from what it stores ([`WordIndex::insert`],
//! [`WordIndex::remove`], [`WordIndex::compact`] after a batch) and asks it
//! ([`WordIndex::search`]); `store::words` keeps one in step with SQLite.
//!
//! A search ranks by BM25 (k1 1.2, b 0.75, the tags at half the weight of
//! the text) over the prompt's rarest words: a word most items hold ranks
//! almost nothing and would have every such item ranked. SQLite's FTS5 did
//! this before; at 100,000 items reading its candidates alone took most of
//! the time a search may take (`docs/benchmarks.md`).

use std::collections::HashMap;

use rust_stemmers::{Algorithm, Stemmer};

use crate::core::memory::{search_words, searchable, words};

/// BM25's parameters, as FTS5 has them.
const BM25_K1: f64 = 1.2;
const BM25_B: f64 = 0.75;
/// The weight of a word in the tags against one in the text.
const TAG_WEIGHT: f64 = 0.5;
/// Most words a search keeps, the rarest first.
const MAX_SEARCH_TERMS: usize = 4;
/// Most items ranked when only common words are searched for: the newest
/// that hold both of the two rarest (the one, if there is one).
const CANDIDATES: usize = 256;
/// A slot no item holds any more.
const GONE: i64 = -1;

/// The items a word is in (slots, ascending) and how often it occurs in
/// each one's text and tags.
#[derive(Default, Clone)]
struct Postings {
    slots: Vec<u32>,
    counts: Vec<[u8; 2]>,
}

/// The words of a set of items, each named by a number the backend gives
/// it (`item`, not negative: SQLite's rowid), searched by BM25.
///
/// Among items ranked equal the one inserted last comes first, so a backend
/// inserts items in the order they were written.
#[derive(Clone)]
pub(crate) struct WordIndex {
    stemmer: English,
    /// Word as stemmed → its number.
    term_of: HashMap<String, u32>,
    /// Word as written (after [`words`]) → its stem's number: the stemmer
    /// runs once per spelling.
    spelled: HashMap<String, u32>,
    /// Per word.
    postings: Vec<Postings>,
    /// Per word: how many items hold it now.
    held_by: Vec<u32>,
    /// Per slot (an item as last read; a changed item gets a new slot, so
    /// slots are in the order items were written): its rowid or [`GONE`],
    /// its scope token (an index into `tokens`), and how many words its
    /// text and tags have.
    rowids: Vec<i64>,
    scopes: Vec<u32>,
    lengths: Vec<[u16; 2]>,
    /// Per slot: its words are `terms[starts[slot]..starts[slot + 1]]`.
    starts: Vec<u32>,
    terms: Vec<u32>,
    slot_of: HashMap<i64, u32>,
    /// Items held, slots gone, and the words of all the items' text and
    /// tags.
    live: u32,
    gone: u32,
    total_lengths: [u64; 2],
    tokens: Vec<String>,
    token_of: HashMap<String, u32>,
}

/// The English stemmer, which can be cloned (a copy is another stemmer:
/// it holds no state).
struct English(Stemmer);

impl Default for English {
    fn default() -> Self {
        English(Stemmer::create(Algorithm::English))
    }
}

/// Longer words are indexed and searched as written: no English word is
/// this long, and the stemmer's time grows with the square of a word's
/// length (a prompt of one 300 KB word took 9 s to look up in memory).
const MAX_STEMMED: usize = 64;

impl English {
    /// The word's stem; a word over [`MAX_STEMMED`] bytes as it is.
    fn stem<'a>(&self, word: &'a str) -> std::borrow::Cow<'a, str> {
        if word.len() > MAX_STEMMED {
            std::borrow::Cow::Borrowed(word)
        } else {
            self.0.stem(word)
        }
    }
}

impl Clone for English {
    fn clone(&self) -> Self {
        English::default()
    }
}

impl Default for WordIndex {
    fn default() -> Self {
        WordIndex {
            stemmer: English::default(),
            term_of: HashMap::new(),
            spelled: HashMap::new(),
            postings: Vec::new(),
            held_by: Vec::new(),
            rowids: Vec::new(),
            scopes: Vec::new(),
            lengths: Vec::new(),
            starts: vec![0],
            terms: Vec::new(),
            slot_of: HashMap::new(),
            live: 0,
            gone: 0,
            total_lengths: [0, 0],
            tokens: Vec::new(),
            token_of: HashMap::new(),
        }
    }
}

/// How a search's words are joined.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Joined {
    /// Any of them (rare words).
    Any,
    /// All of them (only common words: an item must hold both).
    All,
}

impl WordIndex {
    /// The number of a word as written, its stem added if new.
    fn term(&mut self, word: &str) -> u32 {
        if let Some(term) = self.spelled.get(word) {
            return *term;
        }
        let stem = self.stemmer.stem(word).into_owned();
        let next = self.postings.len() as u32;
        let term = *self.term_of.entry(stem).or_insert(next);
        if term == next {
            self.postings.push(Postings::default());
            self.held_by.push(0);
        }
        self.spelled.insert(word.to_owned(), term);
        term
    }

    /// The number of a word searched for, if any item ever held it.
    fn find(&self, word: &str) -> Option<u32> {
        if let Some(term) = self.spelled.get(word) {
            return Some(*term);
        }
        self.term_of.get(self.stemmer.stem(word).as_ref()).copied()
    }

    /// Holds `item` with its `text`, its `tags` (as one text; their words
    /// weigh half) and its scope `token` (by which a search narrows the
    /// scopes, [`super::scope_token`]), in place of what it held before.
    pub(crate) fn insert(&mut self, item: i64, text: &str, tags: &str, token: &str) {
        self.remove(item);
        let slot = self.rowids.len() as u32;
        let mut counts: Vec<(u32, [u8; 2])> = Vec::new();
        let mut lengths = [0_u16; 2];
        for (field, part) in [text, tags].into_iter().enumerate() {
            for word in words(part) {
                lengths[field] = lengths[field].saturating_add(1);
                if !searchable(&word) {
                    continue;
                }
                let term = self.term(&word);
                match counts.iter_mut().find(|(t, _)| *t == term) {
                    Some((_, count)) => count[field] = count[field].saturating_add(1),
                    None => {
                        let mut count = [0, 0];
                        count[field] = 1;
                        counts.push((term, count));
                    }
                }
            }
        }
        for (term, count) in counts {
            let postings = &mut self.postings[term as usize];
            postings.slots.push(slot);
            postings.counts.push(count);
            self.held_by[term as usize] += 1;
            self.terms.push(term);
        }
        self.starts.push(self.terms.len() as u32);
        let scope = match self.token_of.get(token) {
            Some(scope) => *scope,
            None => {
                let scope = self.tokens.len() as u32;
                self.tokens.push(token.to_owned());
                self.token_of.insert(token.to_owned(), scope);
                scope
            }
        };
        self.rowids.push(item);
        self.scopes.push(scope);
        self.lengths.push(lengths);
        self.slot_of.insert(item, slot);
        self.live += 1;
        self.total_lengths[0] += u64::from(lengths[0]);
        self.total_lengths[1] += u64::from(lengths[1]);
    }

    /// Forgets `item` (nothing when it is not held). Its slot stays taken
    /// until [`WordIndex::compact`].
    pub(crate) fn remove(&mut self, item: i64) {
        let Some(slot) = self.slot_of.remove(&item) else {
            return;
        };
        let slot = slot as usize;
        let (start, end) = (self.starts[slot] as usize, self.starts[slot + 1] as usize);
        for term in &self.terms[start..end] {
            self.held_by[*term as usize] -= 1;
        }
        self.rowids[slot] = GONE;
        self.live -= 1;
        self.gone += 1;
        self.total_lengths[0] -= u64::from(self.lengths[slot][0]);
        self.total_lengths[1] -= u64::from(self.lengths[slot][1]);
    }

    /// Drops the slots of items gone once they are a third of all (and at
    /// least 1024); otherwise does nothing. Called after a batch of changes.
    pub(crate) fn compact(&mut self) {
        if self.gone < 1024 || self.gone * 3 < self.rowids.len() as u32 {
            return;
        }
        let mut renumbered = vec![u32::MAX; self.rowids.len()];
        let mut next = 0;
        let mut terms = Vec::with_capacity(self.terms.len());
        let mut starts = vec![0];
        for (slot, rowid) in self.rowids.iter().enumerate() {
            if *rowid == GONE {
                continue;
            }
            renumbered[slot] = next;
            next += 1;
            terms.extend_from_slice(
                &self.terms[self.starts[slot] as usize..self.starts[slot + 1] as usize],
            );
            starts.push(terms.len() as u32);
        }
        for postings in &mut self.postings {
            let mut kept = 0;
            for i in 0..postings.slots.len() {
                let slot = renumbered[postings.slots[i] as usize];
                if slot != u32::MAX {
                    postings.slots[kept] = slot;
                    postings.counts[kept] = postings.counts[i];
                    kept += 1;
                }
            }
            postings.slots.truncate(kept);
            postings.counts.truncate(kept);
        }
        let keep = |slot: &usize| renumbered[*slot] != u32::MAX;
        self.scopes = (0..self.rowids.len())
            .filter(keep)
            .map(|s| self.scopes[s])
            .collect();
        self.lengths = (0..self.rowids.len())
            .filter(keep)
            .map(|s| self.lengths[s])
            .collect();
        self.rowids.retain(|rowid| *rowid != GONE);
        self.terms = terms;
        self.starts = starts;
        self.slot_of = self
            .rowids
            .iter()
            .enumerate()
            .map(|(slot, rowid)| (*rowid, slot as u32))
            .collect();
        self.gone = 0;
    }

    /// The searched words to rank by, the rarest first, with their numbers:
    /// those held by at most 2 % of the items (at least 50), at most
    /// [`MAX_SEARCH_TERMS`], added only while the items they hold together
    /// stay within that 2 %; when every word is more common, the two
    /// rarest, which an item must hold both of.
    fn chosen(&self, text: &str) -> (Vec<u32>, Joined) {
        let mut known: Vec<(u32, u32)> = Vec::new();
        for word in search_words(text) {
            if let Some(term) = self.find(&word)
                && self.held_by[term as usize] > 0
                && !known.iter().any(|(t, _)| *t == term)
            {
                known.push((term, self.held_by[term as usize]));
            }
        }
        known.sort_by_key(|(_, held)| *held);
        let common = (self.live / 50).max(50);
        let mut rare = Vec::new();
        let mut holding = 0;
        for (term, held) in known.iter().filter(|(_, held)| *held <= common) {
            if rare.len() == MAX_SEARCH_TERMS || (!rare.is_empty() && holding + held > common) {
                break;
            }
            holding += held;
            rare.push(*term);
        }
        if !rare.is_empty() || known.is_empty() {
            return (rare, Joined::Any);
        }
        (known.iter().take(2).map(|(t, _)| *t).collect(), Joined::All)
    }

    /// The items best matching `text`'s words, best first (among equals the
    /// newest), within the scope tokens given (`None`: every scope), as
    /// their BM25 and item number. At most `limit` items.
    pub(crate) fn search(
        &self,
        text: &str,
        within: Option<&[String]>,
        limit: usize,
    ) -> Vec<(f64, i64)> {
        let (chosen, joined) = self.chosen(text);
        if chosen.is_empty() {
            return Vec::new();
        }
        let scopes: Option<Vec<u32>> = within.map(|tokens| {
            tokens
                .iter()
                .filter_map(|token| self.token_of.get(token).copied())
                .collect()
        });
        let wanted = |slot: u32| {
            self.rowids[slot as usize] != GONE
                && scopes
                    .as_ref()
                    .is_none_or(|scopes| scopes.contains(&self.scopes[slot as usize]))
        };
        // Per candidate slot, each chosen word's counts in its text and tags.
        let mut candidates: Vec<(u32, Vec<[u8; 2]>)> = Vec::new();
        match joined {
            Joined::Any => {
                let mut at: HashMap<u32, usize> = HashMap::new();
                for (i, term) in chosen.iter().enumerate() {
                    let postings = &self.postings[*term as usize];
                    for (slot, count) in postings.slots.iter().zip(&postings.counts) {
                        if !wanted(*slot) {
                            continue;
                        }
                        let index = *at.entry(*slot).or_insert_with(|| {
                            candidates.push((*slot, vec![[0, 0]; chosen.len()]));
                            candidates.len() - 1
                        });
                        candidates[index].1[i] = *count;
                    }
                }
            }
            Joined::All if chosen.len() == 1 => {
                let a = &self.postings[chosen[0] as usize];
                for (slot, count) in a.slots.iter().zip(&a.counts).rev() {
                    if candidates.len() == CANDIDATES {
                        break;
                    }
                    if wanted(*slot) {
                        candidates.push((*slot, vec![*count]));
                    }
                }
            }
            Joined::All => {
                let (a, b) = (
                    &self.postings[chosen[0] as usize],
                    &self.postings[chosen[1] as usize],
                );
                let (mut i, mut j) = (a.slots.len(), b.slots.len());
                while i > 0 && j > 0 && candidates.len() < CANDIDATES {
                    let (x, y) = (a.slots[i - 1], b.slots[j - 1]);
                    if x > y {
                        i -= 1;
                    } else if y > x {
                        j -= 1;
                    } else {
                        if wanted(x) {
                            candidates.push((x, vec![a.counts[i - 1], b.counts[j - 1]]));
                        }
                        i -= 1;
                        j -= 1;
                    }
                }
            }
        }
        let items = f64::from(self.live.max(1));
        let idf: Vec<f64> = chosen
            .iter()
            .map(|term| {
                let held = f64::from(self.held_by[*term as usize].max(1));
                ((items - held + 0.5) / (held + 0.5)).ln().max(1e-6)
            })
            .collect();
        let average = [
            (self.total_lengths[0] as f64 / items).max(1e-9),
            (self.total_lengths[1] as f64 / items).max(1e-9),
        ];
        let mut ranked: Vec<(f64, u32)> = candidates
            .iter()
            .map(|(slot, counts)| {
                let length = self.lengths[*slot as usize];
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
                (field(0) + TAG_WEIGHT * field(1), *slot)
            })
            .collect();
        ranked.sort_by(|a, b| b.0.total_cmp(&a.0).then(b.1.cmp(&a.1)));
        ranked.truncate(limit);
        ranked
            .into_iter()
            .map(|(score, slot)| (score, self.rowids[slot as usize]))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn index(items: &[(i64, &str, &str, &str)]) -> WordIndex {
        let mut index = WordIndex::default();
        for (rowid, text, tags, token) in items {
            index.insert(*rowid, text, tags, token);
        }
        index
    }

    fn rowids(hits: Vec<(f64, i64)>) -> Vec<i64> {
        hits.into_iter().map(|(_, rowid)| rowid).collect()
    }

    #[test]
    fn word_forms_find_each_other_and_rarer_words_rank_higher() {
        let index = index(&[
            (1, "We run the tests with cargo nextest", "", "u0"),
            (2, "Testing needs a database running", "", "u0"),
            (3, "The deploy goes through cargo dist", "", "u0"),
            (4, "Café au lait", "drinks", "u0"),
        ]);
        assert_eq!(rowids(index.search("testing", None, 10)), [2, 1]);
        assert_eq!(rowids(index.search("Tests nextest", None, 10)), [1, 2]);
        assert_eq!(rowids(index.search("cafe", None, 10)), [4]);
        assert_eq!(rowids(index.search("drink", None, 10)), [4]);
        assert!(index.search("the of a", None, 10).is_empty());
        assert!(index.search("unknown", None, 10).is_empty());
    }

    #[test]
    fn a_huge_word_is_looked_up_as_written_in_linear_time() {
        // One 1 MB word: stemmed, it took minutes (the stemmer is quadratic
        // in a word's length); as written, a moment.
        let huge = "y".repeat(1 << 20);
        let started = std::time::Instant::now();
        let index = index(&[(1, &format!("{huge} testing"), "", "u0")]);
        assert_eq!(rowids(index.search(&huge, None, 10)), [1]);
        assert_eq!(rowids(index.search("tests", None, 10)), [1]);
        let long = "z".repeat(MAX_STEMMED + 1);
        assert_eq!(index.stemmer.stem(&long), long.as_str());
        assert_eq!(index.stemmer.stem("testing"), "test");
        assert!(
            started.elapsed() < std::time::Duration::from_secs(5),
            "{:?}",
            started.elapsed()
        );
    }

    #[test]
    fn scopes_changes_and_removals_are_kept() {
        let mut index = index(&[
            (1, "postgres port 5433", "", "w1"),
            (2, "postgres runs in docker", "", "w2"),
        ]);
        let w1 = ["w1".to_owned()];
        assert_eq!(rowids(index.search("postgres", Some(&w1), 10)), [1]);
        // The shorter text first.
        assert_eq!(rowids(index.search("postgres", None, 10)), [1, 2]);
        assert!(
            index
                .search("postgres", Some(&["w9".to_owned()]), 10)
                .is_empty()
        );
        index.insert(1, "mysql port 3306", "", "w1");
        assert_eq!(rowids(index.search("postgres", None, 10)), [2]);
        assert_eq!(index.search("5433", None, 10), []);
        assert_eq!(rowids(index.search("mysql", None, 10)), [1]);
        index.remove(2);
        assert!(index.search("postgres", None, 10).is_empty());
        assert_eq!(index.held_by[index.find("postgres").unwrap() as usize], 0);
        assert_eq!(index.live, 1);
    }

    #[test]
    fn compaction_keeps_what_is_held() {
        let mut index = WordIndex::default();
        for rowid in 0..3000 {
            index.insert(rowid, &format!("item number{rowid} common"), "", "u0");
        }
        for rowid in 0..2000 {
            index.remove(rowid);
        }
        let before = index.rowids.len();
        index.compact();
        assert!(index.rowids.len() < before);
        assert_eq!(index.rowids.len(), 1000);
        assert_eq!(rowids(index.search("number2500", None, 5)), [2500]);
        assert!(index.search("number1500", None, 5).is_empty());
        // Common words only: the newest holding both of the two rarest, or
        // the one.
        assert_eq!(
            rowids(index.search("item common", None, 3)),
            [2999, 2998, 2997]
        );
        assert_eq!(rowids(index.search("common", None, 2)), [2999, 2998]);
        index.insert(2500, "changed", "", "u0");
        assert_eq!(rowids(index.search("changed", None, 5)), [2500]);
        assert!(index.search("number2500", None, 5).is_empty());
    }
}
