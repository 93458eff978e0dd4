//! `pincer channels outbox`: the chat channels' outbound messages (send
//! intents), most recently changed first.

use anyhow::anyhow;

use super::print;
use crate::app::{Failure, Flags, exit};
use crate::cli::ChannelsCommand;
use crate::core::channel::{IntentStatus, SendIntent};
use crate::stdout::timestamp as time;

pub async fn channels(flags: &Flags, command: &ChannelsCommand) -> Result<u8, Failure> {
    let ChannelsCommand::Outbox {
        status,
        limit,
        json,
    } = command;
    let status = status.as_deref().map(parse_status).transpose()?;
    let opened = crate::app::App::open(flags).await?;
    let store = opened.store.clone();
    let intents = store
        .intents(status, *limit)
        .await
        .map_err(Failure::failed)?;
    let mut out = String::new();
    for intent in &intents {
        if *json {
            out.push_str(&serde_json::to_string(intent).map_err(Failure::failed)?);
            out.push('\n');
        } else {
            out.push_str(&intent_line(intent));
        }
    }
    if intents.is_empty() && !*json {
        out.push_str("no outbound messages\n");
    }
    print(&out)?;
    store.shutdown();
    Ok(exit::OK)
}

fn parse_status(name: &str) -> Result<IntentStatus, Failure> {
    IntentStatus::parse(name).ok_or_else(|| {
        let known: Vec<&str> = IntentStatus::ALL.iter().map(|s| s.as_str()).collect();
        Failure::usage(anyhow!(
            "--status {name:?}: expected one of {}",
            known.join(", ")
        ))
    })
}

/// An intent in a line: when, which, where to, how far it got.
fn intent_line(intent: &SendIntent) -> String {
    let ids: Vec<&str> = intent
        .receipt
        .parts
        .iter()
        .map(|p| p.platform_id.as_str())
        .collect();
    format!(
        "{}  {}  {}/{}  {}  {}  attempt {}  parts {}/{}{}{}\n",
        time(intent.updated_at),
        intent.id,
        intent.channel,
        intent.target.id,
        intent.kind.as_str(),
        intent.status.as_str(),
        intent.attempt,
        ids.len(),
        intent.units.len(),
        if ids.is_empty() {
            String::new()
        } else {
            format!(" [{}]", ids.join(", "))
        },
        intent
            .failure
            .as_ref()
            .map(|f| format!("  {}: {}", f.kind.as_str(), f.message))
            .unwrap_or_default()
    )
}
