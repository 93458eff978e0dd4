//! Test support shared by the library's unit tests (and, by path, the
//! integration tests): a real PostgreSQL server.

pub mod postgres;

/// The harness's own tests, in a file of their own: the integration tests
/// run them too (`tests/it/pg_harness.rs`).
#[cfg(test)]
mod postgres_tests;
