//! The tools' port to the chat channels (`core::channel::Courier`): a
//! message the `send_message` tool sends is recorded here as a send intent
//! for the channel's account, which the process serving it delivers
//! (`channels::hub::deliver`), whichever process the run is in.

use std::sync::Arc;

use futures::future::BoxFuture;

use crate::channels::hub::message_intent;
use crate::config::Config;
use crate::core::channel::{ChannelWrite, Courier};
use crate::core::journal::{ChannelJournal, Write};

pub struct ChannelCourier {
    config: Config,
    journal: Arc<dyn ChannelJournal>,
}

impl ChannelCourier {
    pub fn new(config: Config, journal: Arc<dyn ChannelJournal>) -> Self {
        Self { config, journal }
    }
}

impl Courier for ChannelCourier {
    fn channels(&self) -> Vec<String> {
        self.config.channels.keys().cloned().collect()
    }

    fn send<'a>(
        &'a self,
        channel: &'a str,
        to: &'a str,
        text: &'a str,
        id: Option<&'a str>,
    ) -> BoxFuture<'a, Result<String, String>> {
        Box::pin(async move {
            // The adapter names the account (and reads the chat); its
            // secrets come from this process's environment.
            let adapter =
                super::channel_adapter(&self.config, channel, &|name| std::env::var(name).ok())
                    .map_err(|err| format!("{err:#}"))?;
            let target = adapter.target(to).map_err(|err| format!("`to`: {err}"))?;
            let intent = message_intent(adapter.channel(), adapter.account(), target, text, id);
            let id = intent.id.clone();
            if self
                .journal
                .intent(&id)
                .await
                .map_err(|err| format!("the outbox cannot be read: {err}"))?
                .is_some()
            {
                return Ok(id);
            }
            self.journal
                .commit(Write::Channel(ChannelWrite::InsertIntent(intent)))
                .await
                .map_err(|err| format!("the message was not recorded: {err}"))?;
            Ok(id)
        })
    }
}
