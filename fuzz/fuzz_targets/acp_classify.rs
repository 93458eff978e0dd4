//! ACP message classification: any line gets exactly one answer of the right
//! kind. A response (no `method`, a `result` or an `error`) is never
//! answered; a request's id comes back in the response exactly as it was
//! written; an invalid line is answered with a parse or invalid-request error
//! whose id is a string, a number or null; and the same line always gets the
//! same answer.

#![no_main]

use libfuzzer_sys::fuzz_target;
use pincer::acp::peer::{Id, Incoming, Peer, classify};
use pincer::stdout::LineSender;
use serde_json::Value;
use serde_json::value::RawValue;

/// The id member as written, when the line is an object with one `id`.
#[derive(serde::Deserialize)]
struct RawId<'a> {
    #[serde(borrow)]
    id: Option<&'a RawValue>,
}

fn peer() -> (Peer, tokio::sync::mpsc::Receiver<Vec<u8>>) {
    let (tx, rx) = tokio::sync::mpsc::channel(4);
    (Peer::new(LineSender::channel(tx)), rx)
}

/// The id text of the line the peer writes to answer `id`.
fn echoed(peer: &Peer, rx: &mut tokio::sync::mpsc::Receiver<Vec<u8>>, id: &Id) -> String {
    assert!(futures::executor::block_on(
        peer.respond(id, Ok(Value::Null))
    ));
    let line = rx
        .try_recv()
        .unwrap_or_else(|err| panic!("no response written: {err}"));
    let response: RawId<'_> = serde_json::from_slice(&line)
        .unwrap_or_else(|err| panic!("the response is not JSON: {err}"));
    // serde reads `"id": null` as no id; the peer always writes the member.
    response
        .id
        .map_or_else(|| "null".to_owned(), |id| id.get().to_owned())
}

/// Whether an id's text is one ACP allows: an int64, a string or null.
fn valid_id(raw: &str) -> bool {
    raw == "null" || raw.starts_with('"') || raw.parse::<i64>().is_ok()
}

fn summary(incoming: &Option<Incoming>) -> String {
    match incoming {
        None => "none".to_owned(),
        Some(Incoming::Request { id, method, params }) => {
            format!(
                "request {id} {method} {:?}",
                params.as_ref().map(|p| p.get())
            )
        }
        Some(Incoming::Notification { method, params }) => {
            format!(
                "notification {method} {:?}",
                params.as_ref().map(|p| p.get())
            )
        }
        Some(Incoming::Invalid { id, error }) => {
            format!("invalid {id} {} {:?}", i32::from(error.code), error.data)
        }
    }
}

fuzz_target!(|line: &[u8]| {
    let (peer, mut rx) = peer();
    let incoming = classify(&peer, line);
    assert_eq!(summary(&incoming), summary(&classify(&peer, line)));

    let value: Option<Value> = serde_json::from_slice(line).ok();
    let is_json = serde_json::from_slice::<&RawValue>(line).is_ok();
    if is_json && value.is_none() {
        // Valid JSON that serde_json cannot hold as a value (a number past
        // f64, such as `5.5E0000000055`): the checks below need the value,
        // so only the kind of answer is checked.
        if let Some(Incoming::Invalid { error, .. }) = &incoming {
            assert_ne!(
                i32::from(error.code),
                -32700,
                "a parse error for valid JSON"
            );
        }
        return;
    }
    let object = value.as_ref().and_then(Value::as_object);
    let is_response = object.is_some_and(|o| {
        o.get("method").is_none_or(Value::is_null)
            && (o.contains_key("result") || o.contains_key("error"))
    });
    if is_response {
        assert!(
            incoming.is_none(),
            "a response was answered: {}",
            summary(&incoming)
        );
    }
    match &incoming {
        None => assert!(object.is_some(), "a line that is no object was taken in"),
        Some(Incoming::Request { id, method, .. }) => {
            assert!(valid_id(id.raw()), "request id {id}");
            assert_eq!(
                object.and_then(|o| o.get("method")),
                Some(&Value::from(method.as_str()))
            );
            let echo = echoed(&peer, &mut rx, id);
            let written = serde_json::from_slice::<RawId<'_>>(line)
                .ok()
                .and_then(|r| r.id);
            if let Some(written) = written {
                assert_eq!(echo, written.get(), "the id was not echoed as written");
            }
        }
        Some(Incoming::Notification { method, .. }) => {
            assert_eq!(
                object.and_then(|o| o.get("method")),
                Some(&Value::from(method.as_str()))
            );
            assert!(
                !object.is_some_and(|o| o.contains_key("id")),
                "a request taken as a notification"
            );
        }
        Some(Incoming::Invalid { id, error }) => {
            assert!(valid_id(id.raw()), "error id {id}");
            let code = i32::from(error.code);
            assert!(code == -32700 || code == -32600, "error code {code}");
            assert_eq!(
                code == -32700,
                !is_json,
                "parse error for valid JSON or the reverse"
            );
            // The answer to an invalid line is itself a valid message.
            let echo = echoed(&peer, &mut rx, id);
            assert_eq!(echo, id.raw());
        }
    }
});
