//! The integration tests, one binary: each module drives the real `pincer`
//! binary (or the library's public API) through a real interface. `support`
//! holds what they share: the isolated test directory and launcher, the
//! schema-validating ACP client, the official ACP SDK as a client, and the
//! fake Bot API.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is a failed test

mod support;

mod acp_auth;
mod acp_client_answers;
mod acp_fuzz;
mod acp_malformed;
mod acp_protocol;
mod acp_python;
mod acp_sdk;
mod acp_sdk_surface;
mod acp_shared;
mod acp_surface;
mod adversarial;
mod approvals_sdk;
mod architecture;
mod browser_harness;
mod budget;
mod channel_chaos;
mod chat_attachments;
mod chat_chaos;
mod chat_parity;
mod commands;
mod compaction;
mod conformance;
mod console;
mod console_browser;
mod context_window;
mod crash;
mod deploy;
mod discord;
mod docs_check;
mod email;
mod examples;
mod first_hour;
mod first_run;
mod flags;
mod headless;
mod hooks;
mod http;
mod images;
mod irc;
mod irc_accounts;
mod irc_harness;
mod leases;
mod loop_guard;
mod mail_harness;
mod matrix;
mod matrix_harness;
mod mcp;
mod memory;
mod memory_embeddings;
mod packaging;
mod pg_harness;
mod pipes;
mod plugins;
mod postgres_faces;
mod prompt;
mod protected;
mod providers;
mod questions;
mod sandbox_toolchain;
mod scale_out;
mod schedules;
mod send;
mod session_commands;
mod skill_commands;
mod skills;
mod skills_activation;
mod skills_catalogue;
mod slack;
mod store_copy;
mod subagents;
mod telegram;
mod terminal;
mod tokens;
mod tool_schemas;
mod tools;
mod transcripts;
mod usage;
mod web;
mod webhook;
