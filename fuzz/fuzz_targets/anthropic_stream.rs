//! The Anthropic stream parser: a response body gives the same events however
//! the reads split it, and a turn ends exactly once — its last event is
//! `Done` or an error and nothing of the kind comes before — with usage only
//! just before `Done`.
//!
//! Input: one byte seeding the split points, then the body.

#![no_main]

use libfuzzer_sys::fuzz_target;
use pincer::core::provider::{ProviderError, ProviderEvent};
use pincer::providers::anthropic::decode_for_fuzzing;

fn shown(events: &[Result<ProviderEvent, ProviderError>]) -> Vec<String> {
    events.iter().map(|event| format!("{event:?}")).collect()
}

fn check_ending(events: &[Result<ProviderEvent, ProviderError>]) {
    let Some((last, before)) = events.split_last() else {
        panic!("a turn without events");
    };
    assert!(
        matches!(last, Ok(ProviderEvent::Done(_)) | Err(_)),
        "the turn does not end with done or an error: {last:?}"
    );
    for (at, event) in before.iter().enumerate() {
        assert!(
            !matches!(event, Ok(ProviderEvent::Done(_)) | Err(_)),
            "an end before the last event: {event:?}"
        );
        if let Ok(ProviderEvent::Usage(_)) = event {
            assert_eq!(at + 1, before.len(), "usage not just before the end");
            assert!(
                matches!(last, Ok(ProviderEvent::Done(_))),
                "usage before an error"
            );
        }
    }
}

fuzz_target!(|data: &[u8]| {
    let [seed, body @ ..] = data else {
        return;
    };
    let events = decode_for_fuzzing(vec![body.to_vec()]);
    check_ending(&events);
    let expected = shown(&events);

    let mut pieces = Vec::new();
    let mut rest = body;
    let mut state = u32::from(*seed) | 1;
    while !rest.is_empty() {
        state ^= state << 13;
        state ^= state >> 17;
        state ^= state << 5;
        let len = (state as usize % 64).min(rest.len());
        let (piece, tail) = rest.split_at(len);
        pieces.push(piece.to_vec());
        rest = tail;
    }
    let split = decode_for_fuzzing(pieces);
    assert_eq!(shown(&split), expected, "a split changed the events");
});
