//! The contract suite every backend of [`Memories`] must pass: items saved
//! once, changed field by field, forgotten once, listed newest first,
//! searched by words (BM25, stemmed) and by meaning within the scopes
//! asked, and marked when used. A backend's tests call
//! [`memory_contract!`] with an expression that opens a fresh backend; each
//! rule becomes a test of its own.

use std::sync::Arc;

use super::{
    Memories, MemoryError, MemoryFilter, MemoryHit, MemoryItem, MemorySearch, MemorySource,
    MemoryWrite, QueryVector, Scope,
};
use crate::core::ids::SessionId;
use crate::core::session::Millis;

/// A backend under test.
pub struct Backend {
    pub memories: Arc<dyn Memories>,
    /// Where the backend keeps its files, removed with it.
    pub dir: Option<tempfile::TempDir>,
}

/// Generates one `#[tokio::test]` per rule for the backend `$open` (an
/// expression of type [`Backend`], evaluated once per test).
#[macro_export]
macro_rules! memory_contract {
    ($open:expr) => {
        $crate::memory_contract!(@tests $open;
            an_item_is_saved_once_and_read_back_as_saved,
            an_update_changes_only_the_fields_it_names,
            an_item_is_forgotten_once_and_found_no_more,
            lists_filter_by_scope_tag_and_pin_newest_first,
            search_ranks_by_words_within_the_scopes_asked,
            equally_relevant_items_rank_the_last_written_first,
            used_items_are_marked_without_changing_them,
            embeddings_are_kept_for_their_text_only,
            a_search_with_an_embedding_fuses_words_and_meaning,
        );
    };
    (@tests $open:expr; $($name:ident),* $(,)?) => {
        $(
            #[tokio::test]
            async fn $name() {
                let backend = $open;
                $crate::core::memory::contract::$name(&backend).await;
            }
        )*
    };
}

fn item(id: &str, scope: Scope, key: &str, text: &str, at: Millis) -> MemoryItem {
    MemoryItem {
        id: id.into(),
        text: text.into(),
        scope,
        scope_key: key.into(),
        tags: Vec::new(),
        source: MemorySource {
            session: Some(SessionId::from_string("ses_mem".into())),
            run: None,
            call: Some("call_1".into()),
            by: "model".into(),
        },
        created_at: at,
        updated_at: at,
        last_used_at: None,
        pinned: false,
    }
}

fn tagged(mut item: MemoryItem, tags: &[&str]) -> MemoryItem {
    item.tags = tags.iter().map(|t| (*t).to_owned()).collect();
    item
}

async fn save(memories: &dyn Memories, item: &MemoryItem) {
    memories
        .write(MemoryWrite::Save(item.clone()))
        .await
        .unwrap();
}

async fn get(memories: &dyn Memories, id: &str) -> MemoryItem {
    match memories.get(id).await {
        Ok(Some(item)) => item,
        other => panic!("memory {id}: {other:?}"),
    }
}

fn words(text: &str, within: &[(Scope, &str)], limit: usize) -> MemorySearch {
    MemorySearch {
        text: text.into(),
        within: within
            .iter()
            .map(|(scope, key)| (*scope, (*key).to_owned()))
            .collect(),
        limit,
        vector: None,
    }
}

fn ids(hits: &[MemoryHit]) -> Vec<&str> {
    hits.iter().map(|hit| hit.item.id.as_str()).collect()
}

fn item_ids(items: &[MemoryItem]) -> Vec<&str> {
    items.iter().map(|item| item.id.as_str()).collect()
}

fn is_conflict(result: &Result<(), MemoryError>) -> bool {
    matches!(result, Err(MemoryError::Conflict(_)))
}

/// An item reads back exactly as saved (or imported); an id already taken
/// is a conflict and leaves the first item as it was.
pub async fn an_item_is_saved_once_and_read_back_as_saved(backend: &Backend) {
    let memories = backend.memories.as_ref();
    let mut saved = tagged(
        item(
            "mem_1",
            Scope::Workspace,
            "/repo",
            "Tests run with nextest",
            5,
        ),
        &["ci", "testing"],
    );
    saved.pinned = true;
    save(memories, &saved).await;
    assert_eq!(get(memories, "mem_1").await, saved);
    let again = memories
        .write(MemoryWrite::Save(item(
            "mem_1",
            Scope::User,
            "",
            "other",
            6,
        )))
        .await;
    assert!(is_conflict(&again), "{again:?}");
    let imported = memories
        .write(MemoryWrite::Import(item(
            "mem_1",
            Scope::User,
            "",
            "other",
            6,
        )))
        .await;
    assert!(is_conflict(&imported), "{imported:?}");
    assert_eq!(get(memories, "mem_1").await, saved);
    let mut exported = item(
        "mem_2",
        Scope::Conversation,
        "telegram/bot/direct:1",
        "x",
        1,
    );
    exported.last_used_at = Some(3);
    exported.updated_at = 2;
    memories
        .write(MemoryWrite::Import(exported.clone()))
        .await
        .unwrap();
    assert_eq!(get(memories, "mem_2").await, exported);
    assert_eq!(memories.get("mem_3").await.unwrap(), None);
}

/// An update changes the fields it names and the time it changed; the rest
/// stays. A missing item is a conflict.
pub async fn an_update_changes_only_the_fields_it_names(backend: &Backend) {
    let memories = backend.memories.as_ref();
    let original = tagged(item("mem_u", Scope::User, "", "Uses vim", 1), &["editor"]);
    save(memories, &original).await;
    memories
        .write(MemoryWrite::Update {
            id: "mem_u".into(),
            text: Some("Uses helix".into()),
            tags: None,
            pinned: None,
            at: 5,
        })
        .await
        .unwrap();
    let mut expected = original.clone();
    expected.text = "Uses helix".into();
    expected.updated_at = 5;
    assert_eq!(get(memories, "mem_u").await, expected);
    memories
        .write(MemoryWrite::Update {
            id: "mem_u".into(),
            text: None,
            tags: Some(vec!["editor".into(), "modal".into()]),
            pinned: Some(true),
            at: 6,
        })
        .await
        .unwrap();
    expected.tags = vec!["editor".into(), "modal".into()];
    expected.pinned = true;
    expected.updated_at = 6;
    assert_eq!(get(memories, "mem_u").await, expected);
    // The old words are found no more, the new ones (and tags) are.
    let search = |text: &str| memories.search(words(text, &[], 5));
    assert!(search("vim").await.unwrap().is_empty());
    assert_eq!(ids(&search("helix").await.unwrap()), ["mem_u"]);
    assert_eq!(ids(&search("modal").await.unwrap()), ["mem_u"]);
    let missing = memories
        .write(MemoryWrite::Update {
            id: "mem_none".into(),
            text: Some("x".into()),
            tags: None,
            pinned: None,
            at: 7,
        })
        .await;
    assert!(is_conflict(&missing), "{missing:?}");
    assert_eq!(memories.get("mem_none").await.unwrap(), None);
}

/// A forgotten item is gone from every read; forgetting it again is a
/// conflict.
pub async fn an_item_is_forgotten_once_and_found_no_more(backend: &Backend) {
    let memories = backend.memories.as_ref();
    save(memories, &item("mem_f", Scope::User, "", "Prefers tabs", 1)).await;
    save(
        memories,
        &item("mem_k", Scope::User, "", "Prefers dark themes", 2),
    )
    .await;
    memories
        .write(MemoryWrite::Forget { id: "mem_f".into() })
        .await
        .unwrap();
    assert_eq!(memories.get("mem_f").await.unwrap(), None);
    assert_eq!(
        item_ids(&memories.list(MemoryFilter::default()).await.unwrap()),
        ["mem_k"]
    );
    assert_eq!(
        ids(&memories
            .search(words("prefers tabs", &[], 5))
            .await
            .unwrap()),
        ["mem_k"]
    );
    let again = memories
        .write(MemoryWrite::Forget { id: "mem_f".into() })
        .await;
    assert!(is_conflict(&again), "{again:?}");
}

/// Lists are newest first (by the time changed, then by id), within the
/// (scope, key) pairs asked, of a scope, carrying a tag (in any case),
/// pinned only, at most `limit` (0: all).
pub async fn lists_filter_by_scope_tag_and_pin_newest_first(backend: &Backend) {
    let memories = backend.memories.as_ref();
    let mut pinned = tagged(item("mem_c", Scope::Workspace, "/a", "c", 30), &["api"]);
    pinned.pinned = true;
    for saved in [
        tagged(item("mem_a", Scope::User, "", "a", 10), &["api", "style"]),
        item("mem_b", Scope::Workspace, "/b", "b", 20),
        pinned,
        item("mem_d", Scope::Workspace, "/a", "d", 30),
        item("mem_e", Scope::Conversation, "chat/1", "e", 5),
    ] {
        save(memories, &saved).await;
    }
    let list = |filter: MemoryFilter| async move {
        item_ids(&memories.list(filter).await.unwrap())
            .into_iter()
            .map(str::to_owned)
            .collect::<Vec<_>>()
    };
    assert_eq!(
        list(MemoryFilter::default()).await,
        ["mem_d", "mem_c", "mem_b", "mem_a", "mem_e"]
    );
    let within = vec![
        (Scope::User, String::new()),
        (Scope::Workspace, "/a".to_owned()),
        (Scope::Conversation, "chat/2".to_owned()),
    ];
    assert_eq!(
        list(MemoryFilter {
            within: within.clone(),
            ..MemoryFilter::default()
        })
        .await,
        ["mem_d", "mem_c", "mem_a"]
    );
    assert_eq!(
        list(MemoryFilter {
            scope: Some(Scope::Workspace),
            ..MemoryFilter::default()
        })
        .await,
        ["mem_d", "mem_c", "mem_b"]
    );
    assert_eq!(
        list(MemoryFilter {
            tag: Some("API".into()),
            ..MemoryFilter::default()
        })
        .await,
        ["mem_c", "mem_a"]
    );
    assert_eq!(
        list(MemoryFilter {
            within,
            pinned_only: true,
            ..MemoryFilter::default()
        })
        .await,
        ["mem_c"]
    );
    assert_eq!(
        list(MemoryFilter {
            limit: 2,
            ..MemoryFilter::default()
        })
        .await,
        ["mem_d", "mem_c"]
    );
}

/// Search by words: word forms find each other (`testing`, `tests`), tags
/// are found like words, an item saying a rare word more often ranks
/// higher, only the scopes asked are searched, common words find nothing,
/// and at most `limit` come back, best first.
pub async fn search_ranks_by_words_within_the_scopes_asked(backend: &Backend) {
    let memories = backend.memories.as_ref();
    for saved in [
        tagged(
            item(
                "mem_1",
                Scope::Workspace,
                "/a",
                "The tests run with cargo nextest",
                1,
            ),
            &["testing"],
        ),
        item(
            "mem_2",
            Scope::Workspace,
            "/b",
            "Tests of b need docker running",
            2,
        ),
        item(
            "mem_3",
            Scope::User,
            "",
            "The person prefers short answers",
            3,
        ),
        tagged(
            item(
                "mem_4",
                Scope::Workspace,
                "/a",
                "Deploys go through the staging branch",
                4,
            ),
            &["deploy"],
        ),
        item(
            "mem_5",
            Scope::Conversation,
            "chat/1",
            "We agreed to test the parser first, tests tests",
            5,
        ),
    ] {
        save(memories, &saved).await;
    }
    let within_a = [
        (Scope::User, ""),
        (Scope::Workspace, "/a"),
        (Scope::Conversation, "chat/2"),
    ];
    let search = |search: MemorySearch| async move { memories.search(search).await.unwrap() };
    assert_eq!(
        ids(&search(words("how is testing done?", &within_a, 10)).await),
        ["mem_1"]
    );
    assert_eq!(
        ids(&search(words("deploy", &within_a, 10)).await),
        ["mem_4"]
    );
    assert_eq!(
        ids(&search(words("short answers", &within_a, 10)).await),
        ["mem_3"]
    );
    let all = search(words("tests", &[], 10)).await;
    assert_eq!(ids(&all), ["mem_5", "mem_1", "mem_2"]);
    assert!(
        all.windows(2).all(|w| w[0].relevance > w[1].relevance),
        "{all:?}"
    );
    assert!(all.iter().all(|hit| hit.relevance > 0.0));
    assert_eq!(ids(&search(words("tests", &[], 1)).await), ["mem_5"]);
    assert_eq!(
        ids(&search(words("tests", &[(Scope::Workspace, "/b")], 10)).await),
        ["mem_2"]
    );
    assert!(search(words("the of a", &[], 10)).await.is_empty());
    assert!(search(words("kubernetes", &[], 10)).await.is_empty());
    // A hit carries the item as stored.
    assert_eq!(
        search(words("nextest", &[], 10)).await[0].item,
        get(memories, "mem_1").await
    );
}

/// Among items a search finds equally relevant, the one whose words were
/// written last comes first; changing only its pin or time does not count
/// as writing its words.
pub async fn equally_relevant_items_rank_the_last_written_first(backend: &Backend) {
    let memories = backend.memories.as_ref();
    for (id, at) in [("mem_x", 1), ("mem_y", 2), ("mem_z", 3)] {
        save(memories, &item(id, Scope::User, "", "alpha beta gamma", at)).await;
    }
    let search = || async { memories.search(words("beta", &[], 10)).await.unwrap() };
    let hits = search().await;
    assert_eq!(ids(&hits), ["mem_z", "mem_y", "mem_x"]);
    assert!(hits.windows(2).all(|w| w[0].relevance == w[1].relevance));
    // x's words are written again (the same words, in another order).
    memories
        .write(MemoryWrite::Update {
            id: "mem_x".into(),
            text: Some("gamma beta alpha".into()),
            tags: None,
            pinned: None,
            at: 4,
        })
        .await
        .unwrap();
    memories
        .write(MemoryWrite::Update {
            id: "mem_y".into(),
            text: None,
            tags: None,
            pinned: Some(true),
            at: 5,
        })
        .await
        .unwrap();
    assert_eq!(ids(&search().await), ["mem_x", "mem_z", "mem_y"]);
}

/// Items a turn was given are marked used at that time (an id unknown is
/// passed over); their text and time changed stay, and so does the list's
/// order. A mark only queued (`note`) takes effect before a later write
/// returns.
pub async fn used_items_are_marked_without_changing_them(backend: &Backend) {
    let memories = backend.memories.as_ref();
    let first = item("mem_old", Scope::User, "", "Old fact", 1);
    let second = item("mem_new", Scope::User, "", "New fact", 2);
    let third = item("mem_other", Scope::User, "", "Other fact", 3);
    for saved in [&first, &second, &third] {
        save(memories, saved).await;
    }
    memories.note(MemoryWrite::Used {
        ids: vec!["mem_old".into(), "mem_unknown".into()],
        at: 9,
    });
    memories
        .write(MemoryWrite::Used {
            ids: vec!["mem_other".into()],
            at: 10,
        })
        .await
        .unwrap();
    let mut used = first.clone();
    used.last_used_at = Some(9);
    assert_eq!(get(memories, "mem_old").await, used);
    assert_eq!(get(memories, "mem_new").await, second);
    assert_eq!(get(memories, "mem_other").await.last_used_at, Some(10));
    memories
        .write(MemoryWrite::Used {
            ids: vec!["mem_old".into()],
            at: 12,
        })
        .await
        .unwrap();
    assert_eq!(get(memories, "mem_old").await.last_used_at, Some(12));
    assert_eq!(
        item_ids(&memories.list(MemoryFilter::default()).await.unwrap()),
        ["mem_other", "mem_new", "mem_old"]
    );
    assert_eq!(memories.get("mem_unknown").await.unwrap(), None);
}

/// An embedding is kept only for the text it was made from: one made from
/// an older text is dropped, and changing the text drops it. Items without
/// one by a model are listed for a backfill in the order saved.
pub async fn embeddings_are_kept_for_their_text_only(backend: &Backend) {
    let memories = backend.memories.as_ref();
    for (id, text, at) in [
        ("mem_1", "first", 3),
        ("mem_2", "second", 1),
        ("mem_3", "third", 2),
    ] {
        save(memories, &item(id, Scope::User, "", text, at)).await;
    }
    let vector = |id: &str, text: &str, model: &str| MemoryWrite::Vector {
        id: id.into(),
        text: text.into(),
        model: model.into(),
        vector: vec![1.0, 0.0, 0.0],
    };
    let unembedded = |model: &'static str, limit| async move {
        item_ids(&memories.unembedded(model, limit).await.unwrap())
            .into_iter()
            .map(str::to_owned)
            .collect::<Vec<_>>()
    };
    assert_eq!(unembedded("m", 10).await, ["mem_1", "mem_2", "mem_3"]);
    memories.write(vector("mem_1", "first", "m")).await.unwrap();
    memories.write(vector("mem_2", "stale", "m")).await.unwrap();
    memories
        .write(vector("mem_3", "third", "other"))
        .await
        .unwrap();
    memories
        .write(vector("mem_gone", "gone", "m"))
        .await
        .unwrap();
    assert_eq!(unembedded("m", 10).await, ["mem_2", "mem_3"]);
    assert_eq!(unembedded("m", 1).await, ["mem_2"]);
    assert_eq!(unembedded("other", 10).await, ["mem_1", "mem_2"]);
    // A pin keeps the embedding; a new text drops it.
    for (text, pinned) in [(None, Some(true)), (Some("first, changed"), None)] {
        memories
            .write(MemoryWrite::Update {
                id: "mem_1".into(),
                text: text.map(str::to_owned),
                tags: None,
                pinned,
                at: 9,
            })
            .await
            .unwrap();
        let expected: &[&str] = if text.is_none() {
            &["mem_2", "mem_3"]
        } else {
            &["mem_1", "mem_2", "mem_3"]
        };
        assert_eq!(unembedded("m", 10).await, expected);
    }
    // An embedding made from the item's text replaces the one of another model.
    memories.write(vector("mem_3", "third", "m")).await.unwrap();
    assert_eq!(unembedded("m", 10).await, ["mem_1", "mem_2"]);
    assert_eq!(unembedded("other", 10).await, ["mem_1", "mem_2", "mem_3"]);
}

/// With the query's embedding, items found by words and items near in
/// meaning (of the same model, at least as similar as asked, within the
/// scopes asked) are fused by reciprocal rank: found both ways ranks first.
/// An item forgotten, or whose text changed, is near in meaning no more.
pub async fn a_search_with_an_embedding_fuses_words_and_meaning(backend: &Backend) {
    let memories = backend.memories.as_ref();
    // (id, scope, key, text, embedding by model `m`)
    let user = |id, text, vector| (id, Scope::User, "", text, vector);
    let embedded = [
        user("mem_a", "the zebra crossing", Some([1.0, 0.0, 0.0])),
        user("mem_b", "a quiet harbour", Some([0.0, 1.0, 0.0])),
        user("mem_c", "zebra stripes pattern", None),
        user("mem_d", "striped horses", Some([0.9, 0.3, 0.0])),
        (
            "mem_e",
            Scope::Workspace,
            "/other",
            "equine",
            Some([1.0, 0.05, 0.0]),
        ),
    ];
    for (n, (id, scope, key, text, vector)) in embedded.into_iter().enumerate() {
        save(memories, &item(id, scope, key, text, n as Millis)).await;
        if let Some(vector) = vector {
            memories
                .write(MemoryWrite::Vector {
                    id: id.into(),
                    text: text.into(),
                    model: "m".into(),
                    vector: vector.to_vec(),
                })
                .await
                .unwrap();
        }
    }
    let hybrid = |model: &str, limit| MemorySearch {
        text: "zebra".into(),
        within: vec![(Scope::User, String::new())],
        limit,
        vector: Some(QueryVector {
            model: model.into(),
            vector: vec![1.0, 0.1, 0.0],
            min_similarity: 0.5,
        }),
    };
    let hits = memories.search(hybrid("m", 10)).await.unwrap();
    // By words: c, then a (as relevant, written earlier). By meaning: a, d.
    assert_eq!(ids(&hits), ["mem_a", "mem_c", "mem_d"]);
    let rank = |n: f64| 1.0 / (60.0 + n);
    let expected = [rank(2.0) + rank(1.0), rank(1.0), rank(2.0)];
    for (hit, expected) in hits.iter().zip(expected) {
        assert!(
            (hit.relevance - expected).abs() < 1e-9,
            "{}: {} != {expected}",
            hit.item.id,
            hit.relevance
        );
    }
    assert_eq!(
        ids(&memories.search(hybrid("m", 1)).await.unwrap()),
        ["mem_a"]
    );
    // Another model's embeddings are not compared: words alone, fused.
    let words_only = memories.search(hybrid("other", 10)).await.unwrap();
    assert_eq!(ids(&words_only), ["mem_c", "mem_a"]);
    // An item forgotten is near in meaning no more, and takes no place
    // there: d is now the nearest.
    memories
        .write(MemoryWrite::Forget { id: "mem_a".into() })
        .await
        .unwrap();
    let hits = memories.search(hybrid("m", 10)).await.unwrap();
    assert_eq!(ids(&hits), ["mem_c", "mem_d"]);
    assert!(
        hits.iter()
            .all(|hit| (hit.relevance - rank(1.0)).abs() < 1e-9),
        "{hits:?}"
    );
    // Nor is one whose text changed.
    memories
        .write(MemoryWrite::Update {
            id: "mem_d".into(),
            text: Some("the harbour wall".into()),
            tags: None,
            pinned: None,
            at: 9,
        })
        .await
        .unwrap();
    assert_eq!(
        ids(&memories.search(hybrid("m", 10)).await.unwrap()),
        ["mem_c"]
    );
}
