#![allow(
    clippy::print_stdout,
    reason = "a benchmark's report is its standard output"
)]
#![allow(clippy::unwrap_used, clippy::expect_used)] // bench code: a panic is a failed measurement
//! The two SSE decoders side by side (issue 14: keep one, measured): the
//! crate `eventsource-stream` (what the anthropic provider used) and our
//! `providers::sse::Sse` (what the openai provider uses).
//!
//!     cargo bench --bench sse
//!
//! Inputs, each decoded whole by both, in reads of 1,337 bytes (so lines,
//! events and multi-byte characters are cut at awkward places):
//! - **openai**: 200,000 `data: {chat.completion.chunk}` events with a short
//!   piece of text (some of it non-ASCII), then `data: [DONE]`;
//! - **anthropic**: 200,000 `event: content_block_delta` + `data: {…}` pairs.
//!
//! For each: wall time (best of 5), events per second, and heap allocations
//! and bytes allocated per event (a counting global allocator).

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use eventsource_stream::Eventsource;
use futures::StreamExt;
use pincer::providers::sse::Sse;

struct Counting;

static ALLOCATIONS: AtomicU64 = AtomicU64::new(0);
static BYTES: AtomicU64 = AtomicU64::new(0);

// SAFETY: forwards to the system allocator; only counts.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        BYTES.fetch_add(layout.size() as u64, Ordering::Relaxed);
        // SAFETY: the caller's layout is passed on unchanged.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` came from `alloc` above with this layout.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        BYTES.fetch_add(new_size as u64, Ordering::Relaxed);
        // SAFETY: as for `alloc` and `dealloc`.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

const EVENTS: usize = 200_000;
const READ: usize = 1_337;

fn openai_stream() -> Vec<u8> {
    let mut out = String::new();
    for i in 0..EVENTS {
        let text = if i % 3 == 0 { "naïve 🦀 " } else { "word " };
        out.push_str(&format!(
            "data: {{\"id\":\"chatcmpl-1\",\"object\":\"chat.completion.chunk\",\"choices\":[{{\"index\":0,\"delta\":{{\"content\":\"{text}{i}\"}},\"finish_reason\":null}}]}}\n\n"
        ));
    }
    out.push_str("data: [DONE]\n\n");
    out.into_bytes()
}

fn anthropic_stream() -> Vec<u8> {
    let mut out = String::new();
    for i in 0..EVENTS {
        out.push_str(&format!(
            "event: content_block_delta\ndata: {{\"type\":\"content_block_delta\",\"index\":0,\"delta\":{{\"type\":\"text_delta\",\"text\":\"word {i} \"}}}}\n\n"
        ));
    }
    out.into_bytes()
}

/// (events, data bytes) decoded by ours.
fn ours(reads: &[&[u8]]) -> (usize, usize) {
    let mut sse = Sse::new();
    let (mut events, mut bytes) = (0, 0);
    for read in reads {
        sse.push(read);
        while let Some(data) = sse.next_data() {
            let data = data.expect("UTF-8");
            events += 1;
            bytes += data.len();
        }
    }
    (events, bytes)
}

/// (events, data bytes) decoded by the crate.
fn crate_(reads: &[&[u8]]) -> (usize, usize) {
    let source =
        futures::stream::iter(reads.iter().map(|r| Ok::<_, std::io::Error>(*r))).eventsource();
    futures::executor::block_on(source.fold((0, 0), |(events, bytes), event| async move {
        let event = event.expect("event");
        (events + 1, bytes + event.data.len())
    }))
}

fn measure(name: &str, input: &[u8], decode: fn(&[&[u8]]) -> (usize, usize)) {
    let reads: Vec<&[u8]> = input.chunks(READ).collect();
    let mut best = Duration::MAX;
    let mut counts = (0, 0);
    let mut allocations = 0;
    let mut bytes = 0;
    for _ in 0..5 {
        let (a0, b0) = (
            ALLOCATIONS.load(Ordering::Relaxed),
            BYTES.load(Ordering::Relaxed),
        );
        let started = Instant::now();
        counts = std::hint::black_box(decode(&reads));
        best = best.min(started.elapsed());
        allocations = ALLOCATIONS.load(Ordering::Relaxed) - a0;
        bytes = BYTES.load(Ordering::Relaxed) - b0;
    }
    let (events, data) = counts;
    println!(
        "| {name} | {events} | {:.1} ms | {:.2} M events/s | {:.2} | {:.0} |  ({data} data bytes)",
        best.as_secs_f64() * 1000.0,
        events as f64 / best.as_secs_f64() / 1e6,
        allocations as f64 / events as f64,
        bytes as f64 / events as f64,
    );
}

fn main() {
    // `cargo bench` passes `--bench`; nothing to configure.
    let openai = openai_stream();
    let anthropic = anthropic_stream();
    println!(
        "load average: {}",
        std::fs::read_to_string("/proc/loadavg")
            .unwrap_or_default()
            .trim()
    );
    println!(
        "| input, decoder | events | best of 5 | throughput | allocations / event | bytes allocated / event |"
    );
    println!("| --- | ---: | ---: | ---: | ---: | ---: |");
    measure("openai, providers::sse", &openai, ours);
    measure("openai, eventsource-stream", &openai, crate_);
    measure("anthropic, providers::sse", &anthropic, ours);
    measure("anthropic, eventsource-stream", &anthropic, crate_);
}
