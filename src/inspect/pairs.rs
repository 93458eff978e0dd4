//! `pincer channels pairs list|revoke`: the senders paired with a channel's
//! pairing code, from the store, so any process can tell; revoking one is a
//! write through the journal, seen by the serving process on the sender's
//! next message.

use anyhow::anyhow;

use super::print;
use crate::app::{App, Failure, Flags, exit};
use crate::cli::PairsCommand;
use crate::core::channel::{ChannelWrite, Pairing};
use crate::core::journal::{JournalError, Write};
use crate::core::quote::quote;
use crate::stdout::timestamp as time;

pub async fn pairs(flags: &Flags, command: &PairsCommand) -> Result<u8, Failure> {
    match command {
        PairsCommand::List { channel, json } => list(flags, channel.as_deref(), *json).await,
        PairsCommand::Revoke { channel, sender } => revoke(flags, channel, sender).await,
    }
}

async fn list(flags: &Flags, channel: Option<&str>, json: bool) -> Result<u8, Failure> {
    let opened = App::open(flags).await?;
    let store = opened.store.clone();
    let pairs = store.pairs(channel).await.map_err(Failure::failed)?;
    let mut out = String::new();
    for pair in &pairs {
        if json {
            out.push_str(&serde_json::to_string(pair).map_err(Failure::failed)?);
            out.push('\n');
        } else {
            out.push_str(&line(pair));
        }
    }
    if pairs.is_empty() && !json {
        out.push_str("no paired senders\n");
    }
    print(&out)?;
    store.shutdown();
    Ok(exit::OK)
}

/// A pairing in a line: when, where, who.
fn line(pair: &Pairing) -> String {
    format!(
        "{}  {}/{}  {}\n",
        time(pair.paired_at),
        pair.channel,
        pair.account,
        pair.sender
    )
}

async fn revoke(flags: &Flags, channel: &str, sender: &str) -> Result<u8, Failure> {
    let opened = App::open(flags).await?;
    let revoked = opened
        .store
        .commit(Write::Channel(ChannelWrite::UnpairPeer {
            channel: channel.to_owned(),
            sender: sender.to_owned(),
        }))
        .await;
    match revoked {
        Ok(()) => {}
        Err(JournalError::Conflict(_)) => {
            opened.store.shutdown();
            return Err(Failure::usage(anyhow!(
                "{} is not paired on channel {} (pincer channels pairs list)",
                quote(sender),
                quote(channel)
            )));
        }
        Err(err) => return Err(Failure::failed(err)),
    }
    print(&format!("{channel}  {sender}  revoked\n"))?;
    opened.store.shutdown();
    Ok(exit::OK)
}
