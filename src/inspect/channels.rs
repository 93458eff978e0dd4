//! `pincer channels outbox`: the chat channels' outbound messages (send
//! intents), most recently changed first; `pincer channels resolve`: what
//! the operator found about one left `unknown_after_send`; `pincer channels
//! status`: each account's health as its serving process last wrote it, and
//! its outbox.

use anyhow::anyhow;

use super::print;
use crate::app::{Failure, Flags, exit};
use crate::cli::ChannelsCommand;
use crate::core::channel::{IntentStatus, Resolution, SendIntent};
use crate::stdout::timestamp as time;

pub async fn channels(flags: &Flags, command: &ChannelsCommand) -> Result<u8, Failure> {
    let (status, channel, limit, json) = match command {
        ChannelsCommand::Status { json } => return channel_status(flags, *json).await,
        ChannelsCommand::Resolve {
            intent_id,
            arrived,
            resend,
            drop: _,
        } => {
            let resolution = if *arrived {
                Resolution::Arrived
            } else if *resend {
                Resolution::Resend
            } else {
                Resolution::Drop
            };
            return resolve(flags, intent_id, resolution).await;
        }
        ChannelsCommand::Pairs { command } => return super::pairs::pairs(flags, command).await,
        ChannelsCommand::Outbox {
            status,
            channel,
            limit,
            json,
        } => (status, channel, limit, json),
    };
    let status = status.as_deref().map(parse_status).transpose()?;
    let opened = crate::app::App::open(flags).await?;
    let store = opened.store.clone();
    let intents = store
        .intents(channel.as_deref(), status, *limit)
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

/// `pincer channels resolve`: the operator's decision about an
/// `unknown_after_send` intent, through the journal; a resend is picked up
/// by the process serving the channel's account.
async fn resolve(flags: &Flags, id: &str, resolution: Resolution) -> Result<u8, Failure> {
    use crate::channels::outbox::{self, Unresolved};
    let opened = crate::app::App::open(flags).await?;
    let store = opened.store.clone();
    let intent = match outbox::resolve(store.as_ref(), id, resolution, None).await {
        Ok(intent) => intent,
        Err(err @ (Unresolved::NotFound(_) | Unresolved::Refused(_))) => {
            return Err(Failure::usage(anyhow!(err)));
        }
        Err(Unresolved::Store(err)) => return Err(Failure::failed(err)),
    };
    print(&format!(
        "{id}: {} ({})\n",
        resolution.as_str(),
        intent.status.as_str()
    ))?;
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

/// `pincer channels status`: from the store, so any process can tell.
async fn channel_status(flags: &Flags, json: bool) -> Result<u8, Failure> {
    use std::collections::BTreeMap;

    use crate::core::channel::AccountStatus;

    let opened = crate::app::App::open(flags).await?;
    let store = opened.store.clone();
    let statuses = store.cursors("status").await.map_err(Failure::failed)?;
    let counts = store.intent_counts().await.map_err(Failure::failed)?;
    // Accounts with a status, and channels with intents but none yet.
    let mut accounts: BTreeMap<(String, String), AccountStatus> = BTreeMap::new();
    for (channel, account, value) in statuses {
        let status = serde_json::from_str(&value).unwrap_or_default();
        accounts.insert((channel, account), status);
    }
    for (channel, _, _) in &counts {
        if !accounts.keys().any(|(c, _)| c == channel) {
            accounts.insert((channel.clone(), String::new()), AccountStatus::default());
        }
    }
    let mut out = String::new();
    for ((channel, account), status) in &accounts {
        let outbox: BTreeMap<&'static str, u64> = counts
            .iter()
            .filter(|(c, _, _)| c == channel)
            .map(|(_, s, n)| (s.as_str(), *n))
            .collect();
        if json {
            let view = crate::views::ChannelView {
                name: channel.clone(),
                account: account.clone(),
                kind: None,
                serving: None,
                // What an adapter declares is known to the process running
                // it (`GET /v1/channels`), not to the store.
                capabilities: None,
                status: status.clone(),
                outbox: outbox
                    .iter()
                    .map(|(status, n)| ((*status).to_owned(), *n))
                    .collect(),
            };
            out.push_str(&crate::views::json(&view).to_string());
            out.push('\n');
        } else {
            out.push_str(&status_line(channel, account, status, &outbox));
        }
    }
    if accounts.is_empty() && !json {
        out.push_str("no chat channel has run with this store\n");
    }
    print(&out)?;
    store.shutdown();
    Ok(exit::OK)
}

fn status_line(
    channel: &str,
    account: &str,
    status: &crate::core::channel::AccountStatus,
    outbox: &std::collections::BTreeMap<&'static str, u64>,
) -> String {
    let state = match (status.connected, status.since) {
        (Some(true), Some(since)) => format!("connected since {}", time(since)),
        (Some(false), Some(since)) => format!("not connected since {}", time(since)),
        _ => "not started".to_owned(),
    };
    let event = status
        .last_event_at
        .map(|at| format!("  last event {}", time(at)))
        .unwrap_or_default();
    let error = match (&status.last_error, status.last_error_at) {
        (Some(error), Some(at)) => format!("  last error {}: {error}", time(at)),
        _ => String::new(),
    };
    let outbox: Vec<String> = outbox.iter().map(|(s, n)| format!("{s} {n}")).collect();
    let outbox = if outbox.is_empty() {
        "outbox empty".to_owned()
    } else {
        format!("outbox {}", outbox.join(", "))
    };
    let who = if account.is_empty() {
        channel.to_owned()
    } else {
        format!("{channel} ({account})")
    };
    format!("{who}  {state}{event}  {outbox}{error}\n")
}
