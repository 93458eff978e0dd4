//! The PostgreSQL test harness as this binary has it (`support::postgres`,
//! the file the library's unit tests use as `testing::postgres`), checked
//! by the tests the library runs on its copy (`src/testing/postgres_tests.rs`):
//! fresh databases, a restart keeping committed rows, TLS verified for
//! `localhost`, one shared server that ends with the test process.

use crate::support::postgres;

#[path = "../../src/testing/postgres_tests.rs"]
mod cases;
