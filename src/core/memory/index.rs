//! Memory search held in memory, the same for every backend: `words`, the
//! items' words ranked by BM25; `vectors`, their embeddings searched for the
//! nearest; [`scope_token`], the word by which both narrow a search to the
//! scopes asked; and [`fuse`], which joins a search's lists by reciprocal
//! rank. Nothing here reads or writes a store: a backend feeds the indexes
//! what it holds and turns the item numbers they answer into items
//! (`store::memory`, `store::words` and `store::vectors` for SQLite).

pub(crate) mod vectors;
pub(crate) mod words;

use std::collections::HashMap;

use super::{MemoryHit, MemoryItem, Scope};

pub(crate) use vectors::VectorIndex;
pub(crate) use words::WordIndex;

/// A scope and its key as one word (`u0`, `w` or `c` and 16 hex digits of
/// the key's SHA-256), by which the indexes in memory narrow a search to the
/// scopes asked. A backend may store it beside the item.
pub(crate) fn scope_token(scope: Scope, key: &str) -> String {
    use sha2::Digest as _;
    let prefix = match scope {
        Scope::User => return "u0".to_owned(),
        Scope::Workspace => 'w',
        Scope::Conversation => 'c',
    };
    let digest = sha2::Sha256::digest(key.as_bytes());
    format!("{prefix}{}", hex::encode(&digest[..8]))
}

/// The scope tokens of the (scope, key) pairs a search asks for, as the
/// indexes take them; `None` when it asks for none (every scope).
pub(crate) fn scope_tokens<C: FromIterator<String>>(within: &[(Scope, String)]) -> Option<C> {
    (!within.is_empty()).then(|| {
        within
            .iter()
            .map(|(scope, key)| scope_token(*scope, key))
            .collect()
    })
}

/// An item's tags as one text, each tag between spaces (none: empty): the
/// words of its tags as the word index reads them, and what a tag filter
/// looks for ` tag ` in. A backend may store it so.
pub(crate) fn tags_text(tags: &[String]) -> String {
    if tags.is_empty() {
        String::new()
    } else {
        format!(" {} ", tags.join(" "))
    }
}

/// The constant of reciprocal rank fusion: an item's fused score is the sum
/// of `1 / (RRF_K + rank)` over the lists it is in (Cormack et al., 2009).
const RRF_K: f64 = 60.0;

/// Ranked lists of one search (by words, by meaning), best first, fused by
/// reciprocal rank: each item's relevance is the sum over the lists it is
/// in of `1 / (60 + its rank)`, ranks counted from 1. A `None` keeps its
/// place in a list but adds nothing (an item the index named that is no
/// longer stored); an item in several lists counts once, as its first list
/// has it. The best `limit` (at least 1), ties by id.
pub(crate) fn fuse(lists: Vec<Vec<Option<MemoryItem>>>, limit: usize) -> Vec<MemoryHit> {
    let mut fused: HashMap<String, (f64, MemoryItem)> = HashMap::new();
    for list in lists {
        for (rank, item) in list.into_iter().enumerate() {
            let Some(item) = item else {
                continue;
            };
            let score = 1.0 / (RRF_K + rank as f64 + 1.0);
            fused.entry(item.id.clone()).or_insert((0.0, item)).0 += score;
        }
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
    hits.truncate(limit.max(1));
    hits
}

#[cfg(test)]
mod tests {
    use super::*;

    fn item(id: &str) -> MemoryItem {
        MemoryItem {
            id: id.into(),
            text: format!("text of {id}"),
            scope: Scope::User,
            scope_key: String::new(),
            tags: Vec::new(),
            source: Default::default(),
            created_at: 1,
            updated_at: 1,
            last_used_at: None,
            pinned: false,
        }
    }

    #[test]
    fn scope_tokens_name_the_scope_and_a_digest_of_the_key() {
        assert_eq!(scope_token(Scope::User, "anything"), "u0");
        let workspace = scope_token(Scope::Workspace, "/a");
        assert_eq!(workspace.len(), 17);
        assert!(workspace.starts_with('w'));
        assert_ne!(workspace, scope_token(Scope::Workspace, "/b"));
        assert_eq!(
            workspace[1..],
            scope_token(Scope::Conversation, "/a")[1..],
            "the same key, another scope"
        );
        assert!(scope_token(Scope::Conversation, "/a").starts_with('c'));
    }

    #[test]
    fn scope_tokens_are_none_when_no_scope_is_asked() {
        assert_eq!(scope_tokens::<Vec<String>>(&[]), None);
        let within = [
            (Scope::User, "ignored".to_owned()),
            (Scope::Workspace, "/a".to_owned()),
        ];
        assert_eq!(
            scope_tokens::<Vec<String>>(&within),
            Some(vec!["u0".to_owned(), scope_token(Scope::Workspace, "/a")])
        );
    }

    #[test]
    fn tags_stand_each_between_spaces() {
        assert_eq!(tags_text(&[]), "");
        assert_eq!(tags_text(&["a".into(), "b".into()]), " a b ");
    }

    #[test]
    fn fusion_adds_reciprocal_ranks_and_keeps_the_places_of_items_gone() {
        let words = vec![Some(item("a")), Some(item("b"))];
        let meaning = vec![None, Some(item("c")), Some(item("b"))];
        let hits = fuse(vec![words, meaning], 10);
        let ranked: Vec<(&str, f64)> = hits
            .iter()
            .map(|hit| (hit.item.id.as_str(), hit.relevance))
            .collect();
        assert_eq!(ranked[0].0, "b");
        assert!((ranked[0].1 - (1.0 / 62.0 + 1.0 / 63.0)).abs() < 1e-12);
        assert_eq!(ranked[1], ("a", 1.0 / 61.0));
        // `c` is second in its list: the item gone keeps the first place.
        assert_eq!(ranked[2], ("c", 1.0 / 62.0));
        assert_eq!(ranked.len(), 3);
        // Ties by id, and the limit (at least one).
        let tied = fuse(vec![vec![Some(item("y"))], vec![Some(item("x"))]], 0);
        assert_eq!(tied.len(), 1);
        assert_eq!(tied[0].item.id, "x");
    }
}
