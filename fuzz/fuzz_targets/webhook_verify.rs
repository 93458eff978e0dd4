//! The webhook signature check: a request within the time window with a
//! delivery id is accepted exactly when its signature is the HMAC of its
//! timestamp and body under the channel's secret; anything else is refused.
//!
//! The signature is the correct one, the correct one changed a little, or
//! anything; headers the HTTP layer could not carry are left out.

#![no_main]

use std::sync::OnceLock;
use std::time::Duration;

use arbitrary::Arbitrary;
use http::{HeaderMap, HeaderValue};
use libfuzzer_sys::fuzz_target;
use pincer::channels::webhook::{DELIVERY, SIGNATURE, TIMESTAMP, Webhook, sign};
use pincer::core::session::now_millis;

const SECRET: &str = "0123456789abcdef-secret";

#[derive(Arbitrary, Debug)]
enum Signature {
    Correct,
    /// The correct one with padding around it, which the check trims.
    Padded {
        before: u8,
        after: u8,
    },
    /// The correct one with one byte replaced.
    Flipped {
        at: u16,
        byte: u8,
    },
    /// The correct one cut short or lengthened.
    Cut {
        len: u16,
    },
    Upper,
    /// Signed with another secret.
    OtherSecret(Vec<u8>),
    Raw(Vec<u8>),
    Missing,
}

#[derive(Arbitrary, Debug)]
struct Request {
    body: Vec<u8>,
    /// Seconds from now.
    skew: i16,
    timestamp_text: Option<Vec<u8>>,
    signature: Signature,
    delivery: Option<Vec<u8>>,
}

fn webhook() -> &'static Webhook {
    static WEBHOOK: OnceLock<Webhook> = OnceLock::new();
    WEBHOOK.get_or_init(|| {
        Webhook::new(
            "webhook",
            SECRET,
            "http://127.0.0.1:9/cb",
            Duration::from_secs(1),
        )
        .unwrap_or_else(|err| panic!("{err}"))
    })
}

fn header(headers: &mut HeaderMap, name: &'static str, value: &[u8]) {
    if let Ok(value) = HeaderValue::from_bytes(value) {
        headers.insert(name, value);
    }
}

fuzz_target!(|request: Request| {
    let now = now_millis() / 1000;
    let skew = i64::from(request.skew);
    // A second may pass during the check: stay clear of the window's edge.
    if (295..=305).contains(&skew.abs()) {
        return;
    }
    let timestamp = now + skew;
    let correct = sign(SECRET.as_bytes(), timestamp, &request.body);
    let signature: Option<Vec<u8>> = match &request.signature {
        Signature::Correct => Some(correct.clone().into_bytes()),
        Signature::Padded { before, after } => Some(
            format!(
                "{}{correct}{}",
                " ".repeat(usize::from(before % 4)),
                "\t".repeat(usize::from(after % 4))
            )
            .into_bytes(),
        ),
        Signature::Flipped { at, byte } => {
            let mut bytes = correct.clone().into_bytes();
            let at = usize::from(*at) % bytes.len();
            bytes[at] = *byte;
            Some(bytes)
        }
        Signature::Cut { len } => {
            let mut bytes = correct.clone().into_bytes();
            bytes.resize(usize::from(*len % 128), b'0');
            Some(bytes)
        }
        Signature::Upper => Some(correct.to_ascii_uppercase().into_bytes()),
        Signature::OtherSecret(secret) => Some(sign(secret, timestamp, &request.body).into_bytes()),
        Signature::Raw(bytes) => Some(bytes.clone()),
        Signature::Missing => None,
    };
    let timestamp_text = request
        .timestamp_text
        .clone()
        .unwrap_or_else(|| timestamp.to_string().into_bytes());
    let mut headers = HeaderMap::new();
    header(&mut headers, TIMESTAMP, &timestamp_text);
    if let Some(signature) = &signature {
        header(&mut headers, SIGNATURE, signature);
    }
    if let Some(delivery) = &request.delivery {
        header(&mut headers, DELIVERY, delivery);
    }

    let text = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    let sent_timestamp = text(TIMESTAMP).and_then(|t| t.trim().parse::<i64>().ok());
    let signature_ok = match (sent_timestamp, text(SIGNATURE)) {
        (Some(sent), Some(signature)) => {
            signature.trim() == sign(SECRET.as_bytes(), sent, &request.body)
        }
        _ => false,
    };
    let in_window = sent_timestamp.is_some_and(|sent| (now - sent).abs() <= 300);
    let delivery = text(DELIVERY)
        .map(str::trim)
        .filter(|d| !d.is_empty() && d.len() <= 200);

    let verdict = webhook().verify(&headers, &request.body);
    let accepted = signature_ok && in_window && delivery.is_some();
    assert_eq!(
        verdict.is_ok(),
        accepted,
        "signature ok {signature_ok}, in window {in_window}, delivery {delivery:?}: {verdict:?}"
    );
    if let Ok(id) = verdict {
        assert_eq!(Some(id.as_str()), delivery);
    }
    if matches!(
        request.signature,
        Signature::Correct | Signature::Padded { .. }
    ) && request.timestamp_text.is_none()
        && skew.abs() < 295
        && delivery.is_some()
    {
        assert!(accepted, "the correct signature was refused");
    }
});
