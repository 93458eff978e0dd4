#![allow(
    clippy::print_stdout,
    reason = "a benchmark's report is its standard output"
)]
#![allow(clippy::unwrap_used, clippy::expect_used)] // a benchmark: a panic is a failed run
//! How long `web_fetch` takes to turn a 1 MB HTML page into Markdown (issue
//! target: under 50 ms).
//!
//!     cargo bench --bench web [-- RUNS]
//!
//! The page is made here, deterministic: about 1 MB of a documentation
//! page's usual parts — a head with styles and scripts, navigation lists,
//! headings, paragraphs with inline code, emphasis and links, code blocks,
//! tables — and converted RUNS times (default 30) by
//! `pincer::tools::web::render`, as a fetched `text/html` body is; p50, p90
//! and max are printed, with the Markdown's size.

use std::fmt::Write as _;
use std::time::{Duration, Instant};

fn page(target: usize) -> String {
    let mut html = String::from(
        "<!DOCTYPE html><html><head><meta charset=\"utf-8\"><title>Reference</title>\
         <style>body{font:14px sans-serif}.nav li{display:inline}</style>\
         <script>window.analytics=function(){return 1};</script></head><body>\
         <nav class=\"nav\"><ul>",
    );
    for i in 0..40 {
        write!(html, "<li><a href=\"/section/{i}\">Section {i}</a></li>").unwrap();
    }
    html.push_str("</ul></nav><main>");
    let mut n = 0;
    while html.len() < target {
        write!(
            html,
            "<h2 id=\"s{n}\">Section {n}: configuring the thing</h2>\
             <p>The <code>config.toml</code> file holds <em>every</em> setting; see \
             <a href=\"https://example.com/docs/{n}\">the reference</a> and the \
             <strong>notes</strong> below. Values are read once at start, and a \
             change takes effect on the next run of <code>pincer</code>.</p>\
             <pre><code class=\"language-toml\">[web]\nallow = [\"docs.rs\"]\nmax_bytes = {n}\n</code></pre>\
             <table><thead><tr><th>key</th><th>default</th><th>meaning</th></tr></thead><tbody>\
             <tr><td><code>allow</code></td><td>[]</td><td>hosts fetched without asking</td></tr>\
             <tr><td><code>deny</code></td><td>[]</td><td>hosts never fetched</td></tr>\
             </tbody></table>\
             <ul><li>First point about section {n}</li><li>Second point, with <a href=\"#s{n}\">a link</a></li></ul>\
             <script>track({n});</script>"
        )
        .unwrap();
        n += 1;
    }
    html.push_str("</main></body></html>");
    html
}

fn main() {
    let runs: usize = std::env::args()
        .skip(1)
        .find_map(|a| a.parse().ok())
        .unwrap_or(30);
    let html = page(1024 * 1024);
    // Warm up once.
    let markdown = pincer::tools::web::render("text/html; charset=utf-8", html.as_bytes()).unwrap();
    let mut times: Vec<Duration> = (0..runs)
        .map(|_| {
            let start = Instant::now();
            let out = pincer::tools::web::render("text/html; charset=utf-8", html.as_bytes());
            let took = start.elapsed();
            assert!(out.is_some());
            took
        })
        .collect();
    times.sort();
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    println!(
        "HTML {:.2} MB -> Markdown {:.2} MB: p50 {:.1} ms, p90 {:.1} ms, max {:.1} ms ({runs} runs)",
        html.len() as f64 / 1e6,
        markdown.len() as f64 / 1e6,
        ms(times[runs / 2]),
        ms(times[(runs * 9) / 10]),
        ms(times[runs - 1]),
    );
}
