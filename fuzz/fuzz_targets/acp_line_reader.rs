//! The ACP line reader: whatever the bytes and however the reads split them,
//! it yields exactly the lines a plain split on `\n` gives, a line longer than
//! the limit skipped with its length, and then the end.
//!
//! Input: one byte for the limit, one for the read buffer's capacity, then the
//! stream.

#![no_main]

use libfuzzer_sys::fuzz_target;
use pincer::acp::peer::{Line, LineReader};

/// What the reader must yield, worked out on the whole input at once.
fn expected(input: &[u8], limit: usize) -> Vec<Line> {
    let mut out = Vec::new();
    let mut rest = input;
    while !rest.is_empty() {
        let (line, next) = match rest.iter().position(|&b| b == b'\n') {
            Some(at) => rest.split_at(at + 1),
            None => (rest, &[][..]),
        };
        rest = next;
        // The reader counts the line feed against the limit, plus one byte
        // of slack for it.
        if line.len() > limit + 1 {
            out.push(Line::TooLong(line.len()));
            continue;
        }
        // A CR ends a line only before a line feed.
        let line = match line.strip_suffix(b"\n") {
            Some(line) => line.strip_suffix(b"\r").unwrap_or(line),
            None => line,
        };
        out.push(Line::Message(line.to_vec()));
    }
    out.push(Line::End);
    out
}

fn read_all(input: &[u8], limit: usize, capacity: usize) -> Vec<Line> {
    let reader = tokio::io::BufReader::with_capacity(capacity, input);
    let mut reader = LineReader::new(reader, limit);
    let mut out = Vec::new();
    futures::executor::block_on(async {
        loop {
            match reader.next_line().await {
                Ok(Line::End) => break,
                Ok(line) => out.push(line),
                Err(err) => panic!("reading from memory failed: {err}"),
            }
            assert!(out.len() <= input.len(), "more lines than bytes");
        }
    });
    out.push(Line::End);
    out
}

fuzz_target!(|data: &[u8]| {
    let [limit, capacity, input @ ..] = data else {
        return;
    };
    let limit = usize::from(*limit);
    let capacity = usize::from(*capacity % 32) + 1;
    let lines = read_all(input, limit, capacity);
    for line in &lines {
        if let Line::Message(bytes) = line {
            assert!(bytes.len() <= limit + 1, "a message over the limit");
            assert!(!bytes.contains(&b'\n'), "a message holds a line feed");
        }
    }
    assert_eq!(lines, expected(input, limit));
});
