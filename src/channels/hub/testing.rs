//! What the hub's unit tests share: a person's direct chat with the
//! `telegram` channel's `bot` account, and a message in it.

use crate::core::channel::{ChannelMessage, MessageOrigin, Target, TargetKind};

/// The direct chat `42`.
pub(super) fn direct_chat() -> Target {
    Target {
        kind: TargetKind::Direct,
        id: "42".into(),
        thread: None,
    }
}

/// A person's message `id` in [`direct_chat`], saying `body`.
pub(super) fn message(id: &str, body: &str) -> ChannelMessage {
    ChannelMessage {
        id: id.into(),
        channel: "telegram".into(),
        account: "bot".into(),
        target: direct_chat(),
        sender: None,
        body: body.into(),
        attachments: Vec::new(),
        relation: None,
        origin: MessageOrigin::User,
        at: 0,
    }
}
