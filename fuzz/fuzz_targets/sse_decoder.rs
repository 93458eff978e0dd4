//! The SSE decoder: the same bytes give the same events however the reads
//! split them, and those are the events the event stream format defines,
//! worked out here the plain way on the whole input.
//!
//! Input: one byte seeding the split points, then the stream.

#![no_main]

use libfuzzer_sys::fuzz_target;
use pincer::providers::sse::Sse;

type Events = Vec<Result<String, ()>>;

fn decode(pieces: &[&[u8]]) -> Events {
    let mut sse = Sse::new();
    let mut out = Vec::new();
    for piece in pieces {
        sse.push(piece);
        while let Some(event) = sse.next_data() {
            out.push(event.map(str::to_owned).map_err(|_| ()));
            assert!(out.len() <= pieces.iter().map(|p| p.len()).sum::<usize>());
        }
    }
    out
}

/// The format's definition, on the whole stream: lines end in CRLF, LF or
/// CR (a CR last may still become a CRLF, so it ends nothing yet); a leading
/// byte order mark is dropped; `data` values are joined with line feeds and
/// dispatched at a blank line; an unterminated last line is not a line.
fn reference(input: &[u8]) -> Events {
    let input = input.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(input);
    let mut lines = Vec::new();
    let mut start = 0;
    let mut at = 0;
    while at < input.len() {
        match input[at] {
            b'\n' => {
                lines.push(&input[start..at]);
                at += 1;
                start = at;
            }
            b'\r' if at + 1 == input.len() => break,
            b'\r' => {
                lines.push(&input[start..at]);
                at += if input[at + 1] == b'\n' { 2 } else { 1 };
                start = at;
            }
            _ => at += 1,
        }
    }
    let mut out = Vec::new();
    let mut data: Option<Vec<&[u8]>> = None;
    for line in lines {
        if line.is_empty() {
            if let Some(data) = data.take() {
                out.push(String::from_utf8(data.join(&b'\n')).map_err(|_| ()));
            }
            continue;
        }
        if line[0] == b':' {
            continue;
        }
        let (name, value) = match line.iter().position(|&b| b == b':') {
            Some(colon) => {
                let value = &line[colon + 1..];
                (&line[..colon], value.strip_prefix(b" ").unwrap_or(value))
            }
            None => (line, &b""[..]),
        };
        if name == b"data" {
            data.get_or_insert_with(Vec::new).push(value);
        }
    }
    out
}

fuzz_target!(|data: &[u8]| {
    let [seed, input @ ..] = data else {
        return;
    };
    let whole = decode(&[input]);
    for event in whole.iter().flatten() {
        assert!(
            !event.contains('\r'),
            "a carriage return inside data: {event:?}"
        );
    }
    assert_eq!(
        whole,
        reference(input),
        "the decoder differs from the format"
    );

    // Split points from the seed: piece lengths cycle through small values.
    let mut pieces = Vec::new();
    let mut rest = input;
    let mut state = u32::from(*seed) | 1;
    while !rest.is_empty() {
        state ^= state << 13;
        state ^= state >> 17;
        state ^= state << 5;
        let len = (state as usize % 7).min(rest.len());
        let (piece, tail) = rest.split_at(len);
        pieces.push(piece);
        rest = tail;
    }
    assert_eq!(decode(&pieces), whole, "a split changed the events");
    let bytes: Vec<&[u8]> = input.chunks(1).collect();
    assert_eq!(
        decode(&bytes),
        whole,
        "byte-by-byte reads changed the events"
    );
});
