//! Test support shared by the library's unit tests (and, by path, the
//! integration tests): a real PostgreSQL server.

pub mod postgres;
