//! Memory items on PostgreSQL: being written (the helper's part).

use tokio_postgres::Client;

use super::PgFailure;
use crate::core::memory::{MemoryFilter, MemoryHit, MemoryItem, MemorySearch, MemoryWrite};
use crate::store::StoreError;

/// What searching keeps in memory: the word index and the vectors.
#[derive(Default)]
pub(super) struct State {}

fn pending() -> StoreError {
    StoreError::Postgres("memory on PostgreSQL is not built yet".into())
}

pub(super) async fn apply(_client: &Client, _write: &MemoryWrite) -> Result<(), PgFailure> {
    Err(PgFailure::Store(pending()))
}
pub(super) async fn get(_c: &Client, _id: &str) -> Result<Option<MemoryItem>, StoreError> {
    Err(pending())
}
pub(super) async fn list(
    _c: &Client,
    _filter: &MemoryFilter,
) -> Result<Vec<MemoryItem>, StoreError> {
    Err(pending())
}
pub(super) async fn search(
    _c: &Client,
    _search: &MemorySearch,
    _state: &State,
) -> Result<Vec<MemoryHit>, StoreError> {
    Err(pending())
}
pub(super) async fn unembedded(
    _c: &Client,
    _model: &str,
    _limit: usize,
) -> Result<Vec<MemoryItem>, StoreError> {
    Err(pending())
}
