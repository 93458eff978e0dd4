//! Memory search by meaning (`[memory] embeddings = "PROVIDER/MODEL"`): a
//! [`Memories`] in front of the store that embeds each item's text as it is
//! saved or changed, and each search's text, through an [`Embedder`] (an
//! OpenAI-compatible `/v1/embeddings` endpoint). The store fuses the words'
//! ranking and the vectors' by reciprocal rank.
//!
//! Meaning is an addition, never a condition: when the endpoint fails, an
//! item is stored without its vector (a backfill, `pincer memory embed`,
//! adds it later) and a search runs on words alone; the failure is logged
//! once per minute at most and [`Memories::degraded`] says why.

use parking_lot::Mutex;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::FutureExt;

use super::memory::{
    Memories, MemoryFilter, MemoryHit, MemoryItem, MemorySearch, MemoryWrite, QueryVector, Reply,
};
use super::provider::ProviderError;

/// Turns texts into vectors, one per text, in order.
pub trait Embedder: Send + Sync {
    /// `PROVIDER/MODEL`, for messages.
    fn label(&self) -> &str;
    /// The model, which the store keeps with each vector.
    fn model(&self) -> &str;
    fn embed<'a>(
        &'a self,
        texts: &'a [String],
    ) -> futures::future::BoxFuture<'a, Result<Vec<Vec<f32>>, ProviderError>>;
}

/// Least cosine similarity for a match by meaning, when not configured.
pub const DEFAULT_MIN_SIMILARITY: f32 = 0.35;
/// How often the same failing endpoint is logged.
const WARN_EVERY: Duration = Duration::from_secs(60);
/// Texts embedded in one request by a backfill.
pub const BACKFILL_BATCH: usize = 64;

/// The store, with search by meaning.
pub struct Semantic {
    store: Arc<dyn Memories>,
    embedder: Arc<dyn Embedder>,
    min_similarity: f32,
    /// The latest failure and when it was logged; cleared by a success.
    failing: Mutex<Option<(String, Instant)>>,
}

/// What a backfill did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Backfill {
    pub embedded: usize,
    /// Items left without a vector (the endpoint failed).
    pub left: usize,
}

impl Semantic {
    pub fn new(store: Arc<dyn Memories>, embedder: Arc<dyn Embedder>, min_similarity: f32) -> Self {
        Self {
            store,
            embedder,
            min_similarity,
            failing: Mutex::new(None),
        }
    }

    pub fn label(&self) -> &str {
        self.embedder.label()
    }

    /// The vectors of `texts`, or `None` (logged) when the endpoint fails.
    async fn vectors(&self, texts: &[String]) -> Option<Vec<Vec<f32>>> {
        match self.embedder.embed(texts).await {
            Ok(vectors) => {
                if self.failing.lock().take().is_some() {
                    tracing::info!(
                        embeddings = self.embedder.label(),
                        "memory embeddings answer again; searching by meaning and words"
                    );
                }
                Some(vectors)
            }
            Err(err) => {
                let message = format!(
                    "memory embeddings from {} failed ({}); memory is searched by words alone until it answers",
                    self.embedder.label(),
                    err.message
                );
                {
                    let mut failing = self.failing.lock();
                    let due = failing
                        .as_ref()
                        .is_none_or(|(_, at)| at.elapsed() >= WARN_EVERY);
                    if due {
                        tracing::warn!("{message}");
                        *failing = Some((message, Instant::now()));
                    } else if let Some((text, _)) = failing.as_mut() {
                        *text = message;
                    }
                }
                None
            }
        }
    }

    async fn vector(&self, text: &str) -> Option<Vec<f32>> {
        let mut vectors = self.vectors(&[text.to_owned()]).await?;
        vectors.pop()
    }

    /// Stores the vector of an item's text (a failure to store it is logged:
    /// the item stands, a backfill adds it).
    async fn keep(&self, id: &str, text: &str, vector: Vec<f32>) {
        let write = MemoryWrite::Vector {
            id: id.to_owned(),
            text: text.to_owned(),
            model: self.embedder.model().to_owned(),
            vector,
        };
        if let Err(err) = self.store.write(write).await {
            tracing::warn!(error = %err, item = id, "cannot store a memory item's embedding");
        }
    }

    /// Embeds every item that has no vector by the configured model, in
    /// batches; stops at the first batch the endpoint refuses.
    pub async fn backfill(&self) -> Result<Backfill, super::memory::MemoryError> {
        let items = self
            .store
            .unembedded(self.embedder.model(), i64::MAX as usize)
            .await?;
        let mut done = Backfill::default();
        for (index, batch) in items.chunks(BACKFILL_BATCH).enumerate() {
            let texts: Vec<String> = batch.iter().map(|item| item.text.clone()).collect();
            let Some(vectors) = self.vectors(&texts).await else {
                done.left = items.len() - index * BACKFILL_BATCH;
                return Ok(done);
            };
            for (item, vector) in batch.iter().zip(vectors) {
                self.keep(&item.id, &item.text, vector).await;
                done.embedded += 1;
            }
        }
        Ok(done)
    }
}

impl Memories for Semantic {
    fn write(&self, write: MemoryWrite) -> Reply<'_, ()> {
        async move {
            match write {
                // Imports are embedded in batches afterwards ([`Semantic::backfill`]).
                MemoryWrite::Save(item) => {
                    let vector = self.vector(&item.text).await;
                    let (id, text) = (item.id.clone(), item.text.clone());
                    self.store.write(MemoryWrite::Save(item)).await?;
                    if let Some(vector) = vector {
                        self.keep(&id, &text, vector).await;
                    }
                    Ok(())
                }
                MemoryWrite::Update {
                    id,
                    text: Some(text),
                    tags,
                    pinned,
                    at,
                } => {
                    let vector = self.vector(&text).await;
                    self.store
                        .write(MemoryWrite::Update {
                            id: id.clone(),
                            text: Some(text.clone()),
                            tags,
                            pinned,
                            at,
                        })
                        .await?;
                    if let Some(vector) = vector {
                        self.keep(&id, &text, vector).await;
                    }
                    Ok(())
                }
                other @ (MemoryWrite::Import(_)
                | MemoryWrite::Update { .. }
                | MemoryWrite::Forget { .. }
                | MemoryWrite::Used { .. }
                | MemoryWrite::Vector { .. }) => self.store.write(other).await,
            }
        }
        .boxed()
    }

    fn note(&self, write: MemoryWrite) {
        self.store.note(write);
    }

    fn get<'a>(&'a self, id: &'a str) -> Reply<'a, Option<MemoryItem>> {
        self.store.get(id)
    }

    fn list(&self, filter: MemoryFilter) -> Reply<'_, Vec<MemoryItem>> {
        self.store.list(filter)
    }

    fn search(&self, mut search: MemorySearch) -> Reply<'_, Vec<MemoryHit>> {
        async move {
            if search.vector.is_none()
                && let Some(vector) = self.vector(&search.text).await
            {
                search.vector = Some(QueryVector {
                    model: self.embedder.model().to_owned(),
                    vector,
                    min_similarity: self.min_similarity,
                });
            }
            self.store.search(search).await
        }
        .boxed()
    }

    fn unembedded<'a>(&'a self, model: &'a str, limit: usize) -> Reply<'a, Vec<MemoryItem>> {
        self.store.unembedded(model, limit)
    }

    fn degraded(&self) -> Option<String> {
        self.failing.lock().as_ref().map(|(text, _)| text.clone())
    }
}
