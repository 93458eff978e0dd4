//! `pincer send`: a message sent first, through a channel's outbox. Recorded
//! here (the channel's adapter, built from the config and its environment,
//! names the account and reads the target); the process serving the
//! channel's account renders and delivers it (`channels::hub::deliver`).

use std::io::Read as _;
use std::time::{Duration, Instant};

use anyhow::{Context as _, anyhow};

use super::print;
use crate::app::{Failure, Flags, exit, wiring};
use crate::channels::hub::message_intent;
use crate::cli::SendArgs;
use crate::core::channel::{ChannelWrite, IntentStatus, SendIntent};
use crate::core::journal::Write;

/// How often `--wait` reads the intent.
const POLL: Duration = Duration::from_millis(200);

pub async fn send(flags: &Flags, args: &SendArgs) -> Result<u8, Failure> {
    let text = if args.text == "-" {
        let mut text = String::new();
        std::io::stdin()
            .read_to_string(&mut text)
            .context("cannot read the message from standard input")
            .map_err(Failure::usage)?;
        text
    } else {
        args.text.clone()
    };
    if text.trim().is_empty() {
        return Err(Failure::usage(anyhow!("the message is empty")));
    }
    if let Some(id) = &args.id
        && (id.is_empty() || id.len() > 200 || id.chars().any(char::is_control))
    {
        return Err(Failure::usage(anyhow!(
            "--id: expected 1 to 200 characters without control characters"
        )));
    }
    let opened = crate::app::App::open(flags).await?;
    let adapter = wiring::channel_adapter(&opened.config, &args.channel, &|name| {
        std::env::var(name).ok()
    })
    .map_err(Failure::usage)?;
    let target = adapter
        .target(&args.to)
        .map_err(|err| Failure::usage(anyhow!("--to: {err}")))?;
    let intent = message_intent(
        adapter.channel(),
        adapter.account(),
        target,
        &text,
        args.id.as_deref(),
    );
    let store = opened.store.clone();
    let recorded = match store.intent(&intent.id).await.map_err(Failure::failed)? {
        Some(recorded) => recorded,
        None => {
            store
                .commit(Write::Channel(ChannelWrite::InsertIntent(intent.clone())))
                .await
                .map_err(Failure::failed)?;
            intent
        }
    };
    let (shown, code) = match args.wait {
        None => (recorded, exit::OK),
        Some(secs) => {
            let deadline = Instant::now() + Duration::from_secs(secs);
            let mut current = recorded;
            loop {
                if let Some(code) = settled(current.status) {
                    break (current, code);
                }
                if Instant::now() >= deadline {
                    break (current, exit::PENDING);
                }
                tokio::time::sleep(POLL).await;
                if let Some(now) = store.intent(&current.id).await.map_err(Failure::failed)? {
                    current = now;
                }
            }
        }
    };
    let out = if args.json {
        format!(
            "{}\n",
            serde_json::to_string(&shown).map_err(Failure::failed)?
        )
    } else {
        line(&shown, args.wait.is_some())
    };
    print(&out)?;
    store.shutdown();
    Ok(code)
}

/// The exit code of an intent that will not change any more.
fn settled(status: IntentStatus) -> Option<u8> {
    match status {
        IntentStatus::Sent => Some(exit::OK),
        IntentStatus::Failed
        | IntentStatus::UnknownAfterSend
        | IntentStatus::Cancelled
        | IntentStatus::Expired
        | IntentStatus::Withheld => Some(exit::RUN_FAILED),
        IntentStatus::Held
        | IntentStatus::Pending
        | IntentStatus::Sending
        | IntentStatus::Committing => None,
    }
}

fn line(intent: &SendIntent, waited: bool) -> String {
    let status = intent.status.as_str();
    let failure = intent
        .failure
        .as_ref()
        .map(|f| format!(": {}: {}", f.kind.as_str(), f.message))
        .unwrap_or_default();
    if !waited && matches!(intent.status, IntentStatus::Held | IntentStatus::Pending) {
        return format!(
            "{}  queued for {}/{}: the process serving the channel delivers it (pincer channels outbox shows it)\n",
            intent.id, intent.channel, intent.target.id
        );
    }
    format!(
        "{}  {}/{}  {status}{failure}\n",
        intent.id, intent.channel, intent.target.id
    )
}
