#![allow(
    clippy::print_stdout,
    reason = "a benchmark's report is its standard output"
)]
#![allow(clippy::unwrap_used, clippy::expect_used)] // bench code: a panic is a failed measurement
//! How far token estimates are from the tokenizers' counts, on real text
//! and code (issue 15):
//!
//!     cargo bench --bench tokens [-- DIR …]
//!
//! Corpora (default): this repository's `docs/*.md` and the design seeds in
//! `../shared/seeds` (prose), `src/**/*.rs` (Rust) and CodeCompanion.nvim's
//! Lua in `../shared/third_party` (code not written here). For each file the
//! bench counts OpenAI's `o200k_base` (exact for GPT-4o/4.1/5 and the
//! o-series), `cl100k_base` (GPT-4, and a stand-in for families without a
//! bundled tokenizer: Llama 3's 128k vocabulary extends it) and the byte
//! estimate (four bytes per token). It prints, per corpus, the error of the
//! byte estimate against each tokenizer, over the whole corpus and per file
//! (mean absolute), and again after calibration: the ratio learned, as
//! `core::tokens::Calibration` learns it from a provider's reports, from the
//! first 10 % of files, applied to the rest. Then the counting speed, cold
//! and from the cache.

use std::path::{Path, PathBuf};
use std::time::Instant;

use pincer::core::tokens::{Encoding, raw_count};

fn files(dir: &Path, ext: &str, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let mut entries: Vec<_> = entries.flatten().map(|e| e.path()).collect();
    entries.sort();
    for path in entries {
        if path.is_dir() {
            files(&path, ext, out);
        } else if path.extension().is_some_and(|e| e == ext) {
            out.push(path);
        }
    }
}

/// Which count of a file is taken as the truth.
type Truth = dyn Fn(&Counts) -> usize;

struct Counts {
    o200k: usize,
    cl100k: usize,
    bytes: usize,
}

fn percent(estimate: f64, truth: f64) -> f64 {
    (estimate - truth) / truth * 100.0
}

fn report(name: &str, texts: &[String]) {
    let counts: Vec<Counts> = texts
        .iter()
        .map(|t| Counts {
            o200k: raw_count(Some(Encoding::O200k), t),
            cl100k: raw_count(Some(Encoding::Cl100k), t),
            bytes: raw_count(None, t),
        })
        .collect();
    let sum = |f: &dyn Fn(&Counts) -> usize| counts.iter().map(f).sum::<usize>() as f64;
    let (o, c, b) = (sum(&|c| c.o200k), sum(&|c| c.cl100k), sum(&|c| c.bytes));
    let bytes: usize = texts.iter().map(String::len).sum();
    let per_file = |truth: &dyn Fn(&Counts) -> usize, ratio: f64, skip: usize| {
        let errors: Vec<f64> = counts
            .iter()
            .skip(skip)
            .filter(|c| truth(c) > 0)
            .map(|c| percent(c.bytes as f64 * ratio, truth(c) as f64).abs())
            .collect();
        errors.iter().sum::<f64>() / errors.len().max(1) as f64
    };
    // Calibration: reported ÷ estimated over the first 10 % of the files.
    let learn = (counts.len() / 10).max(1);
    let ratio = |truth: &dyn Fn(&Counts) -> usize| {
        counts[..learn].iter().map(truth).sum::<usize>() as f64
            / counts[..learn].iter().map(|c| c.bytes).sum::<usize>() as f64
    };
    let (ro, rc) = (ratio(&|c| c.o200k), ratio(&|c| c.cl100k));
    let rest = |f: &dyn Fn(&Counts) -> usize| counts[learn..].iter().map(f).sum::<usize>() as f64;
    println!(
        "{name}: {} files, {:.0} KB; o200k {o:.0} tokens ({:.2} bytes/token), cl100k {c:.0} ({:.2}), bytes/4 {b:.0}",
        texts.len(),
        bytes as f64 / 1024.0,
        bytes as f64 / o,
        bytes as f64 / c,
    );
    let truths: [(&str, f64, f64, &Truth); 2] = [
        ("o200k: ", o, ro, &|c| c.o200k),
        ("cl100k:", c, rc, &|c| c.cl100k),
    ];
    for (tokenizer, total, ratio, truth) in truths {
        println!(
            "  bytes/4 vs {tokenizer} corpus {:+.1} %, per file {:.1} % mean abs; calibrated (×{ratio:.3}): corpus {:+.1} %, per file {:.1} %",
            percent(b, total),
            per_file(truth, 1.0, 0),
            percent(rest(&|c| c.bytes) * ratio, rest(truth)),
            per_file(truth, ratio, learn),
        );
    }
}

fn read(paths: &[PathBuf]) -> Vec<String> {
    paths
        .iter()
        .filter_map(|p| std::fs::read_to_string(p).ok())
        .filter(|t| !t.trim().is_empty())
        .collect()
}

fn main() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let shared = root.join("../shared");
    let load = Instant::now();
    Encoding::O200k.load();
    let o200k_load = load.elapsed();
    let load = Instant::now();
    Encoding::Cl100k.load();
    println!(
        "tokenizers loaded: o200k_base {:.0} ms, cl100k_base {:.0} ms",
        o200k_load.as_secs_f64() * 1e3,
        load.elapsed().as_secs_f64() * 1e3
    );
    let mut corpora: Vec<(String, Vec<PathBuf>)> = Vec::new();
    let mut docs = Vec::new();
    files(&root.join("docs"), "md", &mut docs);
    files(&shared.join("seeds"), "txt", &mut docs);
    corpora.push(("prose (docs/*.md, seeds)".into(), docs));
    let mut rust = Vec::new();
    files(&root.join("src"), "rs", &mut rust);
    corpora.push(("Rust (src/**/*.rs)".into(), rust));
    let mut lua = Vec::new();
    files(&shared.join("third_party"), "lua", &mut lua);
    corpora.push(("Lua (CodeCompanion.nvim)".into(), lua));
    for dir in std::env::args().skip(1).filter(|a| !a.starts_with("--")) {
        let mut any = Vec::new();
        for ext in ["md", "txt", "rs", "py", "ts", "js", "go", "lua", "json"] {
            files(Path::new(&dir), ext, &mut any);
        }
        corpora.push((dir, any));
    }
    let mut all = Vec::new();
    for (name, paths) in &corpora {
        let texts = read(paths);
        if texts.is_empty() {
            println!("{name}: no files");
            continue;
        }
        report(name, &texts);
        all.extend(texts);
    }
    let bytes: usize = all.iter().map(String::len).sum();
    // Counting speed: a cold count of every text (new to the cache), then
    // again (from the cache, as a conversation's older messages are).
    let cold: Vec<String> = all.iter().map(|t| format!("{t}\n.")).collect();
    let start = Instant::now();
    let tokens: usize = cold
        .iter()
        .map(|t| raw_count(Some(Encoding::O200k), t))
        .sum();
    let first = start.elapsed();
    let start = Instant::now();
    let again: usize = cold
        .iter()
        .map(|t| raw_count(Some(Encoding::O200k), t))
        .sum();
    let cached = start.elapsed();
    assert_eq!(tokens, again);
    println!(
        "o200k counting: {:.1} MB/s cold, {:.0} MB/s from the cache ({} texts, {:.1} MB)",
        bytes as f64 / first.as_secs_f64() / 1e6,
        bytes as f64 / cached.as_secs_f64() / 1e6,
        cold.len(),
        bytes as f64 / 1e6
    );
}
