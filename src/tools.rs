//! The built-in tools: files, search and shell. Each implements the core's
//! [`Tool`](crate::core::tool::Tool) trait; the core runs the policy gate,
//! approvals, the safety pass and receipts around them.

pub mod search;
pub mod shell;
