#![allow(
    clippy::print_stdout,
    reason = "a benchmark's report is its standard output"
)]
#![allow(clippy::unwrap_used, clippy::expect_used)] // bench code: a panic is a failed measurement
//! Memory at 100,000 items (issue 15): how long a full-text search takes
//! through the store's port, and what memory recall adds to the context
//! assembly of one turn.
//!
//!     cargo bench --bench memory [-- ITEMS [QUERIES]]
//!
//! The store is a fresh SQLite file (WAL, `synchronous=FULL`, as in use)
//! filled with ITEMS items (default 100,000): sentences of 8 to 30 words
//! drawn from a 5,000-word vocabulary with a Zipf-like skew (common words
//! are common), 10 % in the user scope, the rest over 20 workspaces and 50
//! conversations. QUERIES prompts (default 1,000) of 5 to 15 words drawn the
//! same way are then:
//!
//! 1. searched (`Memories::search`, limit 32, within one session's three
//!    scopes) — the search by words recall makes; the first search, which
//!    loads the words into memory, is timed apart;
//! 2. recalled, the whole step a turn adds: the search, ranking, the block,
//!    plus the pinned items for the system prompt (`RunPrompt::render` with
//!    memory, less the same without it).
//!
//! 3. searched by words and meaning (hybrid, `core::semantic::Semantic`):
//!    every item also has a 384-dimension vector (the sum of its words'
//!    fixed pseudo-random vectors, so texts sharing words are near), made
//!    by an in-process embedder so the figure is the store's work, not an
//!    endpoint's; the first search's load of the vectors is timed apart.
//!
//! Each is timed per query; p50, p99 and max are printed.

use std::sync::Arc;
use std::time::{Duration, Instant};

use pincer::core::boundary::PathBoundary;
use pincer::core::memory::{
    Memories, MemoryItem, MemorySearch, MemorySource, MemoryWrite, RecallSettings, Scope, ScopeKeys,
};
use pincer::core::prompt::{Environment, Recall, RunPrompt};
use pincer::core::provider::ProviderError;
use pincer::core::semantic::{Embedder, Semantic};
use pincer::core::session::{ContentPart, Message, Mode, Origin, PromptSettings};
use pincer::store::Store;

/// A deterministic generator (xorshift), so every run measures the same data.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    /// A word index skewed towards small ones (index ~ n^(u^2)).
    fn word(&mut self, vocabulary: usize) -> usize {
        let u = (self.next() % 1_000_000) as f64 / 1_000_000.0;
        ((vocabulary as f64).powf(u * u) as usize).min(vocabulary - 1)
    }
}

fn vocabulary() -> Vec<String> {
    const SYLLABLES: &[&str] = &[
        "ka", "lo", "mer", "tin", "sa", "ber", "qua", "zen", "fi", "dor", "pla", "vek", "ru",
        "shi", "nom", "tal", "gri", "ox", "pe", "wun",
    ];
    let mut words = Vec::with_capacity(5000);
    for a in SYLLABLES {
        for b in SYLLABLES {
            for c in [
                "", "s", "ed", "ing", "er", "al", "ic", "on", "ly", "ux", "ma", "ta", "ri",
            ] {
                words.push(format!("{a}{b}{c}"));
                if words.len() == 5000 {
                    return words;
                }
            }
        }
    }
    words
}

fn sentence(rng: &mut Rng, words: &[String], min: u64, max: u64) -> String {
    let count = min + rng.below(max - min + 1);
    (0..count)
        .map(|_| words[rng.word(words.len())].as_str())
        .collect::<Vec<_>>()
        .join(" ")
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let index = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[index]
}

fn report(name: &str, mut times: Vec<Duration>) {
    times.sort();
    println!(
        "{name:<40} p50 {:>8.3} ms   p99 {:>8.3} ms   max {:>8.3} ms   ({} queries)",
        percentile(&times, 0.5).as_secs_f64() * 1e3,
        percentile(&times, 0.99).as_secs_f64() * 1e3,
        times.last().unwrap().as_secs_f64() * 1e3,
        times.len()
    );
}

/// The process's resident memory, in KiB (Linux `/proc/self/statm`).
fn resident_kib() -> u64 {
    std::fs::read_to_string("/proc/self/statm")
        .ok()
        .and_then(|s| s.split_whitespace().nth(1)?.parse::<u64>().ok())
        .map_or(0, |pages| pages * 4)
}

/// Dimensions of the bench's vectors (as all-MiniLM-L6-v2, bge-small).
const DIMS: usize = 384;

/// Embeds a text as the sum of its words' vectors, in process.
struct WordVectors {
    words: std::collections::HashMap<String, Vec<f32>>,
}

impl WordVectors {
    fn new(vocabulary: &[String]) -> Self {
        let mut rng = Rng(0xD1B5_4A32_D192_ED03);
        let words = vocabulary
            .iter()
            .map(|word| {
                let vector = (0..DIMS)
                    .map(|_| (rng.below(2001) as f32 - 1000.0) / 1000.0)
                    .collect();
                (word.clone(), vector)
            })
            .collect();
        Self { words }
    }

    fn vector(&self, text: &str) -> Vec<f32> {
        let mut sum = vec![0.0_f32; DIMS];
        for word in text.split_whitespace() {
            if let Some(vector) = self.words.get(word) {
                for (s, v) in sum.iter_mut().zip(vector) {
                    *s += v;
                }
            }
        }
        sum
    }
}

impl Embedder for WordVectors {
    fn label(&self) -> &str {
        "bench/words"
    }

    fn model(&self) -> &str {
        "words"
    }

    fn embed<'a>(
        &'a self,
        texts: &'a [String],
    ) -> futures::future::BoxFuture<'a, Result<Vec<Vec<f32>>, ProviderError>> {
        Box::pin(async move { Ok(texts.iter().map(|t| self.vector(t)).collect()) })
    }
}

/// What recall adds to each prompt's context assembly (`RunPrompt::render`
/// with memory and the recalled block, less the same without), and how many
/// prompts got a block.
async fn recall_times(
    store: &Arc<dyn Memories>,
    keys: &ScopeKeys,
    prompts: &[String],
    workspace: &std::path::Path,
) -> (Vec<Duration>, usize) {
    let mut added = Vec::with_capacity(prompts.len());
    let mut recalled = 0;
    for prompt in prompts {
        let messages = vec![Message::User {
            content: vec![ContentPart::Text {
                text: prompt.clone(),
            }],
        }];
        let without = prompt_with(None, workspace);
        let start = Instant::now();
        let _ = without.render(&messages).await;
        let base = start.elapsed();
        let with = prompt_with(
            Some(Recall::new(
                store.clone(),
                keys.clone(),
                RecallSettings::default(),
            )),
            workspace,
        );
        let start = Instant::now();
        let _ = with.render(&messages).await;
        let block = with.memory.as_ref().unwrap().block(&messages, false).await;
        added.push(start.elapsed().saturating_sub(base));
        if block.is_some() {
            recalled += 1;
        }
    }
    (added, recalled)
}

fn prompt_with(memory: Option<Recall>, workspace: &std::path::Path) -> RunPrompt {
    RunPrompt {
        settings: PromptSettings::default(),
        workspace: workspace.to_path_buf(),
        extra_roots: Vec::new(),
        environment: Environment::default(),
        origin: Origin::Editor,
        mode: Mode::Supervised,
        probe: None,
        boundary: Arc::new(PathBoundary::new(workspace, &[], &[], None)),
        memory,
        skills: pincer::core::skills::Catalogue::default(),
    }
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
#[allow(
    clippy::too_many_lines,
    reason = "one benchmark run, measured then reported, read top to bottom"
)]
async fn main() {
    let args: Vec<usize> = std::env::args()
        .skip(1)
        .filter_map(|a| a.parse().ok())
        .collect();
    let items = args.first().copied().unwrap_or(100_000);
    let queries = args.get(1).copied().unwrap_or(1_000);
    let dir = tempfile::tempdir().unwrap();
    // PINCER_BENCH_KEEP=DIR keeps the database there, to study a query.
    let dir_path = std::env::var_os("PINCER_BENCH_KEEP")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| dir.path().to_path_buf());
    let (store, _) = Store::open(&dir_path.join("bench.db")).unwrap();
    let words = vocabulary();
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);

    let embedder = Arc::new(WordVectors::new(&words));
    let started = Instant::now();
    for i in 0..items {
        let (scope, key) = match rng.below(10) {
            0 => (Scope::User, String::new()),
            1..=6 => (Scope::Workspace, format!("/work/repo{}", rng.below(20))),
            _ => (
                Scope::Conversation,
                format!("telegram/bot/direct:{}", rng.below(50)),
            ),
        };
        let now = 1_790_000_000_000 + i as i64 * 1000;
        let text = sentence(&mut rng, &words, 8, 30);
        Memories::note(
            &store,
            MemoryWrite::Save(MemoryItem {
                id: format!("mem_{i:08}"),
                text: text.clone(),
                scope,
                scope_key: key,
                tags: vec![words[rng.word(words.len())].clone()],
                source: MemorySource {
                    by: "model".into(),
                    ..MemorySource::default()
                },
                created_at: now,
                updated_at: now,
                last_used_at: None,
                // A few pinned items, as people pin.
                pinned: i % 5000 == 0,
            }),
        );
        Memories::note(
            &store,
            MemoryWrite::Vector {
                id: format!("mem_{i:08}"),
                vector: embedder.vector(&text),
                text,
                model: "words".into(),
            },
        );
    }
    pincer::core::journal::Journal::flush(&store).await.unwrap();
    let size = std::fs::metadata(dir_path.join("bench.db")).unwrap().len();
    println!(
        "{items} items stored in {:.1} s (database {:.1} MiB, WAL aside)",
        started.elapsed().as_secs_f64(),
        size as f64 / (1 << 20) as f64
    );

    let keys = ScopeKeys {
        workspace: "/work/repo3".into(),
        conversation: "telegram/bot/direct:7".into(),
    };
    let prompts: Vec<String> = (0..queries)
        .map(|_| sentence(&mut rng, &words, 5, 15))
        .collect();
    let store: Arc<dyn Memories> = Arc::new(store);

    let before = resident_kib();
    let start = Instant::now();
    let _ = store
        .search(MemorySearch {
            text: prompts[0].clone(),
            within: keys.visible(),
            limit: 32,
            vector: None,
        })
        .await
        .unwrap();
    println!(
        "first search, loading the words of {items} items: {:.0} ms, resident memory +{:.1} MiB",
        start.elapsed().as_secs_f64() * 1e3,
        resident_kib().saturating_sub(before) as f64 / 1024.0
    );
    // Warm the page cache and the statement cache once.
    for prompt in prompts.iter().take(20) {
        let _ = store
            .search(MemorySearch {
                text: prompt.clone(),
                within: keys.visible(),
                limit: 32,
                vector: None,
            })
            .await
            .unwrap();
    }

    let mut search = Vec::with_capacity(queries);
    let mut found = 0usize;
    for prompt in &prompts {
        let start = Instant::now();
        let hits = store
            .search(MemorySearch {
                text: prompt.clone(),
                within: keys.visible(),
                limit: 32,
                vector: None,
            })
            .await
            .unwrap();
        search.push(start.elapsed());
        found += hits.len();
    }
    let mut slowest: Vec<(Duration, &String)> = search.iter().copied().zip(&prompts).collect();
    slowest.sort_by_key(|s| std::cmp::Reverse(s.0));
    if std::env::var_os("PINCER_BENCH_KEEP").is_some() {
        for (time, prompt) in slowest.iter().take(10) {
            println!("  slow: {:.1} ms {prompt}", time.as_secs_f64() * 1e3);
        }
    }
    report("search (words, BM25, 3 scopes, limit 32)", search);
    println!(
        "  {:.1} hits per query on average",
        found as f64 / queries as f64
    );

    let workspace = dir.path();
    let (added, recalled) = recall_times(&store, &keys, &prompts, workspace).await;
    report("recall added to a turn's context", added);
    println!("  {recalled} of {queries} prompts got a recalled block");

    let semantic: Arc<dyn Memories> = Arc::new(Semantic::new(store.clone(), embedder, 0.35));
    let hybrid = |prompt: &String| MemorySearch {
        text: prompt.clone(),
        within: keys.visible(),
        limit: 32,
        vector: None,
    };
    let before = resident_kib();
    let start = Instant::now();
    let _ = semantic.search(hybrid(&prompts[0])).await.unwrap();
    println!(
        "first hybrid search, loading {items} vectors: {:.0} ms, resident memory +{:.1} MiB",
        start.elapsed().as_secs_f64() * 1e3,
        resident_kib().saturating_sub(before) as f64 / 1024.0
    );
    let mut times = Vec::with_capacity(queries);
    let mut found = 0usize;
    for prompt in &prompts {
        let start = Instant::now();
        let hits = semantic.search(hybrid(prompt)).await.unwrap();
        times.push(start.elapsed());
        found += hits.len();
    }
    report("search (hybrid: BM25 + 384-d vectors, RRF)", times);
    println!(
        "  {:.1} hits per query on average",
        found as f64 / queries as f64
    );
    let (added, _) = recall_times(&semantic, &keys, &prompts, workspace).await;
    report("hybrid recall added to a turn's context", added);
}
