//! The OpenAI-compatible stream parser: a response body gives the same events
//! however the reads split it, the text fast path decodes every chunk as the
//! full decoder does, and a turn ends exactly once — its last event is `Done`
//! or an error and nothing of the kind comes before — with usage only just
//! before `Done`.
//!
//! Input: one flags byte (bit 0: a tool is offered, bit 1: the body is one
//! JSON completion), one byte seeding the split points, then the body.

#![no_main]

use libfuzzer_sys::fuzz_target;
use pincer::core::provider::{ProviderError, ProviderEvent};
use pincer::providers::openai::decode_for_fuzzing;

/// Events as comparable text; ids the decoder made up (random) are left out.
fn shown(events: &[Result<ProviderEvent, ProviderError>]) -> Vec<String> {
    events
        .iter()
        .map(|event| match event {
            Ok(ProviderEvent::ToolCall(call)) => {
                let id = call.id.as_bytes();
                let generated = id.len() > 38
                    && id.starts_with(b"call_")
                    && id[5..37].iter().all(u8::is_ascii_hexdigit)
                    && id[37] == b'_';
                let id = if generated {
                    "<generated>"
                } else {
                    call.id.as_str()
                };
                format!("call {id} {} {}", call.name, call.arguments)
            }
            other => format!("{other:?}"),
        })
        .collect()
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
    let [flags, seed, body @ ..] = data else {
        return;
    };
    let tools: &[&str] = if flags & 1 == 1 { &["read_file"] } else { &[] };
    let whole = flags & 2 == 2;
    let events = decode_for_fuzzing(&[body], tools, whole, true);
    check_ending(&events);
    let expected = shown(&events);
    let full = decode_for_fuzzing(&[body], tools, whole, false);
    assert_eq!(
        shown(&full),
        expected,
        "the fast path and the full decoder differ"
    );

    let mut pieces = Vec::new();
    let mut rest = body;
    let mut state = u32::from(*seed) | 1;
    while !rest.is_empty() {
        state ^= state << 13;
        state ^= state >> 17;
        state ^= state << 5;
        let len = (state as usize % 64).min(rest.len());
        let (piece, tail) = rest.split_at(len);
        pieces.push(piece);
        rest = tail;
    }
    let split = decode_for_fuzzing(&pieces, tools, whole, true);
    assert_eq!(shown(&split), expected, "a split changed the events");
});
