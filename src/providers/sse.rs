//! A server-sent events decoder for streamed model answers: bytes in, each
//! event's `data` (and its `event` type) out. Both providers read their
//! streams with it; `benches/sse.rs` measured it against the
//! `eventsource-stream` crate (`docs/benchmarks.md`).
//!
//! It follows the event stream format of the HTML standard for what a model
//! API uses: lines ending in CRLF, LF or CR; `data` fields joined with a line
//! feed; comments and other fields skipped; an event dispatched at a blank line
//! if it has data; a leading byte order mark ignored; an event cut off by the
//! end of the stream dropped. Bytes are buffered once and each event's data is
//! gathered into a reused buffer, so a burst of events in one read costs no
//! allocation per event. Data that is not UTF-8 is an error for that event.
//! A line or an event's data longer than [`MAX_EVENT`] is an error that ends
//! the stream: what a server sends without a line end is not buffered
//! without bound.

/// Incremental decoder: [`Sse::push`] what the socket gave, then take events
/// with [`Sse::next_data`] until it returns `None`. Public for the fuzzing
/// entry point (`fuzz/`).
#[derive(Debug, Default)]
pub struct Sse {
    /// Received bytes; `buf[pos..]` is not yet decoded.
    buf: Vec<u8>,
    pos: usize,
    /// How far past `pos` is known to hold no line end: a long line arriving
    /// in many reads is scanned once.
    scanned: usize,
    /// The data of the event being read, each line followed by `\n`.
    data: Vec<u8>,
    has_data: bool,
    /// The `event` field of the event being read (empty: none given).
    event: Vec<u8>,
    /// The last call handed out an event: its type is forgotten on the next.
    dispatched: bool,
    /// Set once the start of the stream was checked for a byte order mark.
    started: bool,
    /// Set once a line or an event's data passed [`MAX_EVENT`]: the stream is
    /// over, and bytes pushed after are dropped.
    overflowed: bool,
}

/// The longest line, and the most data one event may carry: 16 MiB, far
/// past any event a model API sends (a finished response's whole output).
pub const MAX_EVENT: usize = 16 * 1024 * 1024;

/// Why an event could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SseError {
    /// The event's data or type is not UTF-8; the stream goes on.
    #[error("an event is not UTF-8: {0}")]
    NotUtf8(#[from] std::str::Utf8Error),
    /// A line or an event's data passed [`MAX_EVENT`]; the stream is over.
    #[error("an event is longer than {} MiB", MAX_EVENT / (1024 * 1024))]
    TooLong,
}

const BOM: &[u8] = b"\xEF\xBB\xBF";

/// One event: its type (`event:`; empty when the event gave none) and data.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SseEvent<'a> {
    pub event: &'a str,
    pub data: &'a str,
}

impl Sse {
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds bytes read from the stream.
    pub fn push(&mut self, bytes: &[u8]) {
        if self.overflowed {
            return;
        }
        if self.pos > 0 {
            // Keep only the undecoded tail: one move per read, not per line.
            self.buf.drain(..self.pos);
            self.pos = 0;
        }
        self.buf.extend_from_slice(bytes);
    }

    /// The data of the next complete event, or `None` until more bytes arrive.
    pub fn next_data(&mut self) -> Option<Result<&str, SseError>> {
        self.next_event().map(|event| event.map(|event| event.data))
    }

    /// The next complete event, or `None` until more bytes arrive. Data or
    /// a type that is not UTF-8 is an error for that event; a line or data
    /// past [`MAX_EVENT`] is [`SseError::TooLong`] once, then `None` for ever.
    pub fn next_event(&mut self) -> Option<Result<SseEvent<'_>, SseError>> {
        if self.overflowed {
            return None;
        }
        if self.dispatched {
            self.event.clear();
            self.dispatched = false;
        }
        if !self.started {
            let head = &self.buf[self.pos..];
            if head.len() < BOM.len() && BOM.starts_with(head) {
                return None;
            }
            if head.starts_with(BOM) {
                self.pos += BOM.len();
            }
            self.started = true;
        }
        loop {
            let rest = &self.buf[self.pos..];
            let Some(end) = rest[self.scanned..]
                .iter()
                .position(|&b| b == b'\n' || b == b'\r')
                .map(|at| self.scanned + at)
            else {
                if rest.len() > MAX_EVENT {
                    return Some(Err(self.overflow()));
                }
                self.scanned = rest.len();
                return None;
            };
            if end > MAX_EVENT {
                return Some(Err(self.overflow()));
            }
            let eol = if rest[end] == b'\r' {
                match rest.get(end + 1) {
                    Some(b'\n') => 2,
                    Some(_) => 1,
                    // A CR last: it may be the first half of a CRLF.
                    None => {
                        self.scanned = end;
                        return None;
                    }
                }
            } else {
                1
            };
            let line = self.pos..self.pos + end;
            self.pos += end + eol;
            self.scanned = 0;
            if line.is_empty() {
                if !self.has_data {
                    // No data: nothing to dispatch, and the type is forgotten.
                    self.event.clear();
                    continue;
                }
                self.has_data = false;
                self.dispatched = true;
                // The data ends with the line feed added after its last line.
                self.data.pop();
                return Some(
                    std::str::from_utf8(&self.data)
                        .and_then(|data| {
                            Ok(SseEvent {
                                event: std::str::from_utf8(&self.event)?,
                                data,
                            })
                        })
                        .map_err(SseError::from),
                );
            }
            let line = &self.buf[line];
            if line[0] == b':' {
                continue;
            }
            let (name, value) = match line.iter().position(|&b| b == b':') {
                Some(colon) => {
                    let value = &line[colon + 1..];
                    (&line[..colon], value.strip_prefix(b" ").unwrap_or(value))
                }
                None => (line, &[][..]),
            };
            if name == b"event" {
                self.event.clear();
                self.event.extend_from_slice(value);
            } else if name == b"data" {
                if !self.has_data {
                    self.data.clear();
                    self.has_data = true;
                }
                if self.data.len() + value.len() >= MAX_EVENT {
                    return Some(Err(self.overflow()));
                }
                self.data.extend_from_slice(value);
                self.data.push(b'\n');
            }
        }
    }

    /// Ends the stream: what is buffered is dropped.
    fn overflow(&mut self) -> SseError {
        self.overflowed = true;
        self.buf = Vec::new();
        self.data = Vec::new();
        self.pos = 0;
        self.scanned = 0;
        SseError::TooLong
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every event's data, feeding `pieces` one at a time.
    fn events(pieces: &[&[u8]]) -> Vec<Result<String, ()>> {
        let mut sse = Sse::new();
        let mut out = Vec::new();
        for piece in pieces {
            sse.push(piece);
            while let Some(event) = sse.next_data() {
                out.push(event.map(str::to_owned).map_err(|_| ()));
            }
        }
        out
    }

    fn ok(data: &[&str]) -> Vec<Result<String, ()>> {
        data.iter().map(|d| Ok((*d).to_owned())).collect()
    }

    #[test]
    fn events_end_at_a_blank_line_with_any_line_ending() {
        assert_eq!(
            events(&[b"data: one\n\ndata: two\r\n\r\ndata: three\r\rdata: four\n\n"]),
            ok(&["one", "two", "three", "four"])
        );
    }

    #[test]
    fn every_split_of_the_input_gives_the_same_events() {
        let input: &[u8] = b"\xEF\xBB\xBF: comment\r\ndata: {\"a\":1}\r\n\r\nevent: x\ndata:b\ndata:  c\nid: 7\n\ndata: na\xC3\xAFve \xF0\x9F\xA6\x80\r\r\n";
        let expected = ok(&["{\"a\":1}", "b\n c", "na\u{ef}ve \u{1f980}"]);
        assert_eq!(events(&[input]), expected);
        for at in 0..=input.len() {
            let (a, b) = input.split_at(at);
            assert_eq!(events(&[a, b]), expected, "split at {at}");
        }
        let bytes: Vec<&[u8]> = input.chunks(1).collect();
        assert_eq!(events(&bytes), expected);
    }

    #[test]
    fn fields_without_a_value_and_events_without_data() {
        assert_eq!(
            events(&[b"data\n\nevent: ping\n\n:keep-alive\n\ndata:\n\ndata: x\n\n"]),
            ok(&["", "", "x"])
        );
    }

    #[test]
    fn an_event_cut_off_by_the_end_is_not_dispatched() {
        assert_eq!(events(&[b"data: whole\n\ndata: cut"]), ok(&["whole"]));
        assert_eq!(events(&[b"data: cut\n"]), ok(&[]));
    }

    #[test]
    fn a_byte_order_mark_only_counts_at_the_start() {
        assert_eq!(events(&[b"\xEF\xBB", b"\xBFdata: a\n\n"]), ok(&["a"]));
        // Later, it is part of a field name, so the line is not `data`.
        assert_eq!(events(&[b"data: a\n\n\xEF\xBB\xBFdata: b\n\n"]), ok(&["a"]));
    }

    #[test]
    fn each_event_carries_its_own_type() {
        let mut sse = Sse::new();
        sse.push(
            b"event: ping\ndata: {}\n\ndata: plain\n\nevent: x\n\nevent: a\nevent: b\ndata: 1\n\n",
        );
        let mut seen = Vec::new();
        while let Some(event) = sse.next_event() {
            let event = event.unwrap();
            seen.push((event.event.to_owned(), event.data.to_owned()));
        }
        let pairs = |list: &[(&str, &str)]| {
            list.iter()
                .map(|(e, d)| ((*e).to_owned(), (*d).to_owned()))
                .collect::<Vec<_>>()
        };
        // A type with no data is dropped with its event; the last type wins.
        assert_eq!(seen, pairs(&[("ping", "{}"), ("", "plain"), ("b", "1")]));
    }

    #[test]
    fn a_line_without_end_past_the_bound_ends_the_stream_and_frees_its_bytes() {
        let mut sse = Sse::new();
        sse.push(b"data: first\n\n");
        assert_eq!(sse.next_data().unwrap().unwrap(), "first");
        let piece = vec![b'x'; 1024 * 1024];
        let mut fed = 0;
        let err = loop {
            sse.push(&piece);
            fed += piece.len();
            match sse.next_data() {
                None => assert!(fed <= MAX_EVENT + piece.len(), "buffered {fed} bytes"),
                Some(result) => break result.unwrap_err(),
            }
        };
        assert_eq!(err, SseError::TooLong);
        assert_eq!(err.to_string(), "an event is longer than 16 MiB");
        assert!(sse.buf.capacity() == 0 && sse.data.capacity() == 0);
        // Over: what comes after is neither kept nor decoded.
        sse.push(b"\n\ndata: later\n\n");
        assert!(sse.next_data().is_none());
        assert!(sse.buf.is_empty());
    }

    #[test]
    fn data_lines_adding_up_past_the_bound_end_the_stream() {
        let mut sse = Sse::new();
        let line = format!("data: {}\n", "y".repeat(1024 * 1024 - 7));
        let mut err = None;
        for _ in 0..=16 {
            sse.push(line.as_bytes());
            if let Some(result) = sse.next_data() {
                err = Some(result.unwrap_err());
                break;
            }
        }
        assert_eq!(err, Some(SseError::TooLong));
        // An event just under the bound still comes through whole.
        let mut sse = Sse::new();
        for _ in 0..15 {
            sse.push(line.as_bytes());
        }
        sse.push(b"\n");
        assert_eq!(
            sse.next_data().unwrap().unwrap().len(),
            15 * (1024 * 1024 - 6) - 1
        );
    }

    #[test]
    fn data_that_is_not_utf8_is_an_error_for_that_event_only() {
        assert_eq!(
            events(&[b"data: \xFF\n\ndata: fine\n\n"]),
            vec![Err(()), Ok("fine".to_owned())]
        );
    }
}
