//! Test support (temporary: replaced by the harness branch).
pub mod postgres;
