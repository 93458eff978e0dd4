//! Pincer: an agent runtime with one core and several faces.
//!
//! See `docs/architecture.md` for the map.

pub mod acp;
pub mod allocator;
pub mod app;
pub mod causes;
pub mod channels;
pub mod cli;
pub mod config;
pub mod core;
pub mod credentials;
pub mod environment;
pub mod headless;
pub mod hooks;
pub mod http;
pub mod inspect;
pub mod logging;
pub mod login;
pub mod mcp;
pub mod memory;
pub mod net;
pub mod plugins;
pub mod process;
pub mod providers;
pub mod sandbox;
pub mod serve;
pub mod signing;
pub mod skills;
pub mod stdout;
pub mod store;
pub mod terminal;
#[cfg(test)]
pub mod testing;
pub mod tools;
pub mod views;
