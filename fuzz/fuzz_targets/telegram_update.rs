//! Telegram update normalization: any JSON value becomes a message, a button
//! press or nothing — never a crash — the same way every time; a message
//! carries the ids it was built from, and survives the JSON round trip the
//! store puts it through.

#![no_main]

use std::sync::OnceLock;
use std::time::Duration;

use libfuzzer_sys::fuzz_target;
use pincer::channels::Inbound;
use pincer::channels::telegram::Telegram;
use pincer::core::channel::{ChannelMessage, TargetKind};
use serde_json::Value;

fn telegram() -> &'static Telegram {
    static TELEGRAM: OnceLock<Telegram> = OnceLock::new();
    TELEGRAM.get_or_init(|| {
        Telegram::new(
            "telegram",
            "123456:secret",
            "http://127.0.0.1:9",
            Duration::from_secs(1),
        )
        .unwrap_or_else(|err| panic!("{err}"))
    })
}

fn id_of(value: &Value) -> Option<String> {
    value
        .as_i64()
        .map(|n| n.to_string())
        .or_else(|| value.as_str().map(str::to_owned))
}

fuzz_target!(|data: &[u8]| {
    let Ok(update) = serde_json::from_slice::<Value>(data) else {
        return;
    };
    let telegram = telegram();
    let first = telegram.normalize(&update);
    assert_eq!(
        format!("{first:?}"),
        format!("{:?}", telegram.normalize(&update)),
        "two normalizations differ"
    );
    match first {
        None => {}
        Some(Inbound::Button { id, target, .. }) => {
            let query = &update["callback_query"];
            assert_eq!(query["id"].as_str(), Some(id.as_str()));
            assert_eq!(id_of(&query["message"]["chat"]["id"]), Some(target.id));
        }
        Some(Inbound::Message(message)) => {
            assert!(
                update.get("callback_query").is_none(),
                "a press taken as a message"
            );
            let source = &update["message"];
            let chat = id_of(&source["chat"]["id"]);
            assert_eq!(Some(&message.target.id), chat.as_ref());
            assert_eq!(
                message.id,
                format!("{}:{}", chat.unwrap_or_default(), source["message_id"])
            );
            assert_eq!(
                message.target.kind == TargetKind::Thread,
                message.target.thread.is_some()
            );
            assert!(!message.body.is_empty() || !message.attachments.is_empty());
            let date = source["date"].as_i64().unwrap_or(0);
            assert_eq!(
                message.at,
                date.saturating_mul(1000),
                "the time of the message"
            );
            let stored = serde_json::to_string(&message)
                .unwrap_or_else(|err| panic!("a message does not serialize: {err}"));
            let back: ChannelMessage = serde_json::from_str(&stored)
                .unwrap_or_else(|err| panic!("a stored message does not read back: {err}"));
            assert_eq!(back, message, "the JSON round trip changed the message");
        }
    }
});
