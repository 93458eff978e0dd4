//! The built-in tools: files, search, shell, the task list (`todo`), questions
//! to the person (`ask_user`), subagents (`delegate`), Agent Skills (`skill`), memory and the web. Each implements the core's
//! [`Tool`](crate::core::tool::Tool) trait; the core runs the policy gate,
//! approvals, the safety pass and receipts around them. `app::wiring` builds
//! them, and the gate around them, from the configuration.

pub mod ask_user;
pub mod delegate;
pub mod files;
pub mod memory;
pub mod schedule;
pub mod search;
pub mod send_message;
pub mod shell;
pub mod skill;
pub mod todo;
pub mod toolchains;
pub mod web;
pub mod web_search;
