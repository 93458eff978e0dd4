//! Memory embeddings kept in memory for a search by meaning: every vector
//! of one model, unit length and quantized to 8 bits (a quarter of the
//! floats' size; ranks as the floats would to within a few thousandths of
//! cosine similarity), and its signs as bits. A search scans the bits
//! (Hamming distance: 48 bytes an item at 384 dimensions, where a scan of
//! the 8-bit values is bound by memory bandwidth) for a pool of candidates
//! eight times the limit, then ranks the pool by the 8-bit values; the
//! unit tests measure how many of the exact nearest it keeps. Pure: a
//! backend fills a [`VectorIndex`] from what it stores
//! ([`VectorIndex::insert`], [`VectorIndex::remove`]) and asks it
//! ([`VectorIndex::nearest`]); `store::vectors` keeps one in step with
//! SQLite.

use std::collections::{BinaryHeap, HashMap, HashSet};

/// The vectors of a set of items (one model's: they are compared with each
/// other), each named by a number the backend gives it (`item`, not
/// negative: SQLite's rowid).
#[derive(Default, Clone)]
pub(crate) struct VectorIndex {
    /// Length of every vector (the first one inserted sets it).
    dims: usize,
    /// Per slot: the item's rowid (`-1`: a free slot), its scope token (an
    /// index into `tokens`) and the quantization scale.
    items: Vec<i64>,
    scopes: Vec<u32>,
    scales: Vec<f32>,
    /// `dims` values per slot.
    data: Vec<i8>,
    /// The values' signs, [`VectorIndex::words`] per slot.
    bits: Vec<u64>,
    slot_of: HashMap<i64, usize>,
    free: Vec<usize>,
    tokens: Vec<String>,
    token_of: HashMap<String, u32>,
}

/// A vector scaled to unit length and to 8 bits: the values and the scale
/// that turns their products back into cosine similarity. `None` for a
/// vector of zeros or one that is not finite.
fn quantize(vector: &[f32]) -> Option<(Vec<i8>, f32)> {
    let norm = vector.iter().map(|v| v * v).sum::<f32>().sqrt();
    let largest = vector.iter().fold(0.0_f32, |m, v| m.max(v.abs()));
    if !(norm.is_finite() && norm > 0.0 && largest > 0.0) {
        return None;
    }
    let step = largest / 127.0;
    let values = vector
        .iter()
        .map(|v| (v / step).round().clamp(-127.0, 127.0) as i8)
        .collect();
    Some((values, step / norm))
}

/// The signs of `values` as bits (1 for ≥ 0), padded to whole words.
fn signs(values: &[i8], words: usize) -> Vec<u64> {
    let mut bits = vec![0_u64; words];
    for (i, v) in values.iter().enumerate() {
        if *v >= 0 {
            bits[i / 64] |= 1 << (i % 64);
        }
    }
    bits
}

fn hamming(a: &[u64], b: &[u64]) -> u32 {
    a.iter().zip(b).map(|(x, y)| (x ^ y).count_ones()).sum()
}

/// Candidates the bits keep for each result asked (and at least
/// [`LEAST_POOL`]), ranked again by the 8-bit values.
const POOL_PER_RESULT: usize = 8;
const LEAST_POOL: usize = 256;

fn dot(a: &[i8], b: &[i8]) -> i32 {
    // Written so the compiler vectorizes it: widening multiplies, summed
    // in lanes.
    a.chunks_exact(32)
        .zip(b.chunks_exact(32))
        .map(|(x, y)| {
            x.iter()
                .zip(y)
                .map(|(&p, &q)| i32::from(p) * i32::from(q))
                .sum::<i32>()
        })
        .sum::<i32>()
        + a.chunks_exact(32)
            .remainder()
            .iter()
            .zip(b.chunks_exact(32).remainder())
            .map(|(&p, &q)| i32::from(p) * i32::from(q))
            .sum::<i32>()
}

/// A candidate in the scan's heap: the lowest similarity on top.
#[derive(PartialEq)]
struct Near(f32, i64);

impl Eq for Near {}

impl PartialOrd for Near {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Near {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        other.0.total_cmp(&self.0).then(self.1.cmp(&other.1))
    }
}

impl VectorIndex {
    /// 64-bit words of sign bits per slot.
    fn words(&self) -> usize {
        self.dims.div_ceil(64)
    }

    /// Forgets `item`'s vector (nothing when it has none here).
    pub(crate) fn remove(&mut self, item: i64) {
        if let Some(slot) = self.slot_of.remove(&item) {
            self.items[slot] = -1;
            self.free.push(slot);
        }
    }

    /// Holds `vector` for `item`, in place of the one it had, with its
    /// scope `token` (by which a search narrows the scopes,
    /// [`super::scope_token`]). A vector whose length is not the first
    /// one's, or that is all zeros or not finite, is left out, and `item`
    /// keeps what it had.
    pub(crate) fn insert(&mut self, item: i64, token: String, vector: &[f32]) {
        if self.dims == 0 {
            self.dims = vector.len();
        }
        if vector.len() != self.dims {
            // A vector of another length cannot be compared; the model's
            // vectors all have one.
            return;
        }
        let Some((values, scale)) = quantize(vector) else {
            return;
        };
        self.remove(item);
        let scope = match self.token_of.get(&token) {
            Some(index) => *index,
            None => {
                let index = self.tokens.len() as u32;
                self.tokens.push(token.clone());
                self.token_of.insert(token, index);
                index
            }
        };
        let bits = signs(&values, self.words());
        let slot = match self.free.pop() {
            Some(slot) => {
                self.items[slot] = item;
                self.scopes[slot] = scope;
                self.scales[slot] = scale;
                self.data[slot * self.dims..(slot + 1) * self.dims].copy_from_slice(&values);
                let words = self.words();
                self.bits[slot * words..(slot + 1) * words].copy_from_slice(&bits);
                slot
            }
            None => {
                self.items.push(item);
                self.scopes.push(scope);
                self.scales.push(scale);
                self.data.extend_from_slice(&values);
                self.bits.extend_from_slice(&bits);
                self.items.len() - 1
            }
        };
        self.slot_of.insert(item, slot);
    }

    /// The `limit` items nearest to `query` with at least `floor` cosine
    /// similarity, nearest first, among items whose scope token is in
    /// `within` (every item when `within` is `None`): (item, similarity).
    pub(crate) fn nearest(
        &self,
        query: &[f32],
        within: Option<&HashSet<String>>,
        floor: f32,
        limit: usize,
    ) -> Vec<(i64, f32)> {
        if query.len() != self.dims || limit == 0 {
            return Vec::new();
        }
        let Some((query, query_scale)) = quantize(query) else {
            return Vec::new();
        };
        let allowed: Option<Vec<bool>> = within.map(|within| {
            self.tokens
                .iter()
                .map(|token| within.contains(token))
                .collect()
        });
        // The pool: the items whose signs differ least from the query's.
        let query_bits = signs(&query, self.words());
        let pool = (limit * POOL_PER_RESULT).max(LEAST_POOL);
        let mut closest: BinaryHeap<(u32, usize)> = BinaryHeap::with_capacity(pool + 1);
        for (slot, bits) in self.bits.chunks_exact(self.words()).enumerate() {
            if self.items[slot] < 0
                || allowed
                    .as_ref()
                    .is_some_and(|allowed| !allowed[self.scopes[slot] as usize])
            {
                continue;
            }
            let distance = hamming(bits, &query_bits);
            if closest.len() < pool {
                closest.push((distance, slot));
            } else if closest.peek().is_some_and(|far| distance < far.0) {
                closest.pop();
                closest.push((distance, slot));
            }
        }
        // Ranked by the 8-bit values.
        let mut heap: BinaryHeap<Near> = BinaryHeap::with_capacity(limit + 1);
        for (_, slot) in closest {
            let values = &self.data[slot * self.dims..(slot + 1) * self.dims];
            let similarity = dot(values, &query) as f32 * self.scales[slot] * query_scale;
            if similarity < floor {
                continue;
            }
            let item = self.items[slot];
            if heap.len() < limit {
                heap.push(Near(similarity, item));
            } else if heap.peek().is_some_and(|low| similarity > low.0) {
                heap.pop();
                heap.push(Near(similarity, item));
            }
        }
        let mut near: Vec<(i64, f32)> = heap.into_iter().map(|n| (n.1, n.0)).collect();
        near.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        near
    }

    /// How many vectors the index holds.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.slot_of.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantized_similarity_is_close_to_the_cosine() {
        let a: Vec<f32> = (0..384).map(|i| ((i * 7919) % 113) as f32 - 56.0).collect();
        let b: Vec<f32> = (0..384)
            .map(|i| ((i * 104_729) % 97) as f32 - 40.0)
            .collect();
        let cosine = a.iter().zip(&b).map(|(x, y)| x * y).sum::<f32>()
            / (a.iter().map(|x| x * x).sum::<f32>().sqrt()
                * b.iter().map(|x| x * x).sum::<f32>().sqrt());
        let (qa, sa) = quantize(&a).unwrap();
        let (qb, sb) = quantize(&b).unwrap();
        let approx = dot(&qa, &qb) as f32 * sa * sb;
        assert!((approx - cosine).abs() < 0.01, "{approx} vs {cosine}");
        let (qa2, _) = quantize(&a).unwrap();
        assert!((dot(&qa, &qa2) as f32 * sa * sa - 1.0).abs() < 0.01);
    }

    #[test]
    fn zero_and_non_finite_vectors_are_not_kept() {
        assert!(quantize(&[0.0, 0.0]).is_none());
        assert!(quantize(&[f32::NAN, 1.0]).is_none());
        let mut index = VectorIndex::default();
        index.insert(1, "u0".into(), &[0.0, 0.0]);
        index.insert(2, "u0".into(), &[1.0, 0.0]);
        index.insert(3, "u0".into(), &[1.0, 0.0, 0.0]);
        assert_eq!(index.len(), 1);
    }

    /// The exact nearest by the 8-bit values, for comparison.
    fn exact(index: &VectorIndex, query: &[f32], limit: usize) -> Vec<i64> {
        let (q, _) = quantize(query).unwrap();
        let mut all: Vec<(f32, i64)> = (0..index.items.len())
            .map(|slot| {
                let values = &index.data[slot * index.dims..(slot + 1) * index.dims];
                (
                    dot(values, &q) as f32 * index.scales[slot],
                    index.items[slot],
                )
            })
            .collect();
        all.sort_by(|a, b| b.0.total_cmp(&a.0));
        all.into_iter().take(limit).map(|(_, item)| item).collect()
    }

    #[test]
    fn the_bits_keep_nearly_all_of_the_exact_nearest() {
        // 8,000 vectors of 384 dimensions around 200 topics, as sentence
        // embeddings cluster; queries near an item of a topic.
        let mut seed = 0x2545_F491_4F6C_DD1D_u64;
        let mut noise = move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            (seed % 2001) as f32 / 1000.0 - 1.0
        };
        let topics: Vec<Vec<f32>> = (0..200)
            .map(|_| (0..384).map(|_| noise()).collect())
            .collect();
        let mut index = VectorIndex::default();
        let mut kept = Vec::new();
        for item in 0..8_000 {
            let topic = &topics[item % topics.len()];
            let vector: Vec<f32> = topic.iter().map(|t| t + 0.8 * noise()).collect();
            index.insert(item as i64, "u0".into(), &vector);
            kept.push(vector);
        }
        let (mut found, mut asked) = (0, 0);
        for query in 0..40 {
            let vector: Vec<f32> = kept[query * 37].iter().map(|v| v + 0.5 * noise()).collect();
            let exact = exact(&index, &vector, 10);
            let near: Vec<i64> = index
                .nearest(&vector, None, -1.0, 10)
                .into_iter()
                .map(|(item, _)| item)
                .collect();
            found += exact.iter().filter(|item| near.contains(item)).count();
            asked += exact.len();
        }
        let recall = found as f64 / asked as f64;
        assert!(recall >= 0.95, "recall@10 {recall}");
    }

    #[test]
    fn nearest_keeps_the_scopes_asked_and_the_floor() {
        let mut index = VectorIndex::default();
        index.insert(1, "u0".into(), &[1.0, 0.0, 0.0]);
        index.insert(2, "wa".into(), &[0.9, 0.1, 0.0]);
        index.insert(3, "u0".into(), &[0.0, 1.0, 0.0]);
        index.insert(4, "u0".into(), &[0.7, 0.7, 0.0]);
        let all = index.nearest(&[1.0, 0.0, 0.0], None, 0.5, 10);
        assert_eq!(all.iter().map(|n| n.0).collect::<Vec<_>>(), [1, 2, 4]);
        let user: HashSet<String> = ["u0".to_owned()].into();
        let mine = index.nearest(&[1.0, 0.0, 0.0], Some(&user), 0.5, 1);
        assert_eq!(mine.iter().map(|n| n.0).collect::<Vec<_>>(), [1]);
        index.remove(1);
        index.insert(5, "u0".into(), &[0.0, 0.0, 1.0]);
        let after = index.nearest(&[1.0, 0.0, 0.0], Some(&user), 0.1, 10);
        assert_eq!(after.iter().map(|n| n.0).collect::<Vec<_>>(), [4]);
    }
}
