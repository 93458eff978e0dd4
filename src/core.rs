//! The core: sessions, runs, the agent loop and its events.
//!
//! The core knows nothing of ACP, HTTP, chat platforms or the terminal. Faces
//! submit prompts and read events through [`runtime::Runtime`].

pub mod agent_loop;
pub mod approval;
pub mod boundary;
pub mod budget;
pub mod channel;
pub mod clock;
pub mod commands;
pub mod compaction;
pub mod context;
pub mod control;
pub mod emitter;
pub mod event;
pub mod gate;
pub mod hooks;
pub mod ids;
pub mod journal;
pub mod lease;
pub mod memory;
pub mod models;
pub mod notify;
pub mod pending;
pub mod policy;
pub mod prompt;
pub mod provider;
pub mod question;
pub mod quote;
pub mod receipt;
pub mod run;
pub mod runtime;
pub mod safety;
pub mod schedule;
pub mod scheduler;
pub mod semantic;
pub mod session;
pub mod skills;
pub mod slash;
pub mod stats;
pub mod steering;
pub mod subagent;
pub mod subscription;
pub mod tokens;
pub mod tool;
pub mod turn;
pub mod usage;
