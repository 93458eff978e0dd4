//! Messages sent first, answering nothing (`Hub::deliver`): `pincer send`,
//! `POST /v1/channels/NAME/messages`, a schedule, the `send_message` tool.
//! Any process may record one, as a `held` intent carrying the Markdown
//! text and no units yet ([`message_intent`]); the process serving the
//! account adopts it within [`ADOPT_EVERY`] (at once when it recorded it
//! itself), asks the `MessageSending` hooks, renders it with its adapter and
//! lets it go through the outbox with every guarantee of a reply.

use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use super::Hub;
use crate::core::channel::{ChannelWrite, IntentKind, IntentStatus, SendIntent, Target};
use crate::core::journal::{JournalError, Write};
use crate::core::session::now_millis;

/// How often the serving process looks for messages other processes recorded.
pub const ADOPT_EVERY: Duration = Duration::from_secs(2);

/// The intent of a message to send first: `held`, its text to be rendered
/// by the adapter of the process that delivers it. `id` (an idempotency key
/// the caller chose) records a repeat once; by default a fresh one.
pub fn message_intent(
    channel: &str,
    account: &str,
    target: Target,
    text: &str,
    id: Option<&str>,
) -> SendIntent {
    let id = match id {
        Some(id) => format!("message:{id}"),
        None => format!("message:{}", uuid::Uuid::now_v7().simple()),
    };
    let mut intent = SendIntent::new(
        id,
        (channel, account),
        target,
        IntentKind::Message,
        Vec::new(),
        now_millis(),
    );
    intent.status = IntentStatus::Held;
    intent.text = Some(text.to_owned());
    intent
}

impl Hub {
    /// Sends `text` to `target` through the outbox (see the module). The
    /// intent as recorded, or as recorded before under the same `id`.
    pub async fn deliver(
        self: &Arc<Self>,
        target: Target,
        text: &str,
        id: Option<&str>,
    ) -> Result<SendIntent, JournalError> {
        let intent = message_intent(
            self.adapter.channel(),
            self.adapter.account(),
            target,
            text,
            id,
        );
        if let Some(recorded) = self.store.intent(&intent.id).await? {
            return Ok(recorded);
        }
        self.store
            .commit(Write::Channel(ChannelWrite::InsertIntent(intent.clone())))
            .await?;
        self.adopting.notify_one();
        Ok(intent)
    }

    /// While serving: adopts the held messages recorded by any process,
    /// and wakes the outbox for messages another process made `pending`
    /// (an operator's `resend`).
    pub(super) async fn adopt(self: Arc<Self>, serving: CancellationToken) {
        loop {
            match self.outbox.open().await {
                Ok(open) => {
                    self.outbox.wake_for(&open);
                    for intent in open {
                        if intent.status == IntentStatus::Held
                            && !self.screening.lock().contains(&intent.id)
                        {
                            self.tasks.spawn(self.clone().screen(intent));
                        }
                    }
                }
                Err(err) => {
                    tracing::warn!(channel = self.adapter.channel(), error = %err, "cannot read the messages held to send");
                }
            }
            tokio::select! {
                _ = serving.cancelled() => return,
                _ = self.adopting.notified() => {}
                _ = tokio::time::sleep(ADOPT_EVERY) => {}
            }
        }
    }
}
