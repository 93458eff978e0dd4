//! Times Pincer's grep tool over a directory, the Pincer side of
//! `scripts/bench_grep.py`:
//!
//!     cargo bench --bench grep -- DIR PATTERN [--runs N] [--print]
//!
//! The directory is the workspace; the boundary is built the way the runtime
//! builds it (default forbidden list, `~` from `$HOME`), and the tool runs with
//! a cap far above any benchmark query so every match is rendered and counted.
//! Each run is the tool's `plan` and `execute`, timed in the process; the
//! script also times whole processes so start-up is compared with ripgrep's.
//! Prints `elapsed_ms <ms>` per run, then `matches <n>` (matching lines).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use pincer::core::ids::SessionId;
use pincer::core::policy::{DEFAULT_FORBIDDEN, PathBoundary};
use pincer::core::tool::{Files, Tool, ToolContext};
use pincer::tools::search::{Grep, SearchSettings};
use tokio_util::sync::CancellationToken;

fn usage() -> ! {
    eprintln!("usage: cargo bench --bench grep -- DIR PATTERN [--runs N] [--print]");
    std::process::exit(2)
}

fn main() {
    // `cargo bench` passes `--bench` to every bench binary; it means nothing here.
    let mut args = std::env::args().skip(1).filter(|arg| arg != "--bench");
    let mut positional = Vec::new();
    let mut runs = 1usize;
    let mut print = false;
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--runs" => {
                runs = args
                    .next()
                    .and_then(|n| n.parse().ok())
                    .unwrap_or_else(|| usage())
            }
            "--print" => print = true,
            _ => positional.push(arg),
        }
    }
    let [dir, pattern] = positional.as_slice() else {
        usage()
    };
    let workspace = std::fs::canonicalize(dir).expect("the tree directory exists");
    let forbidden: Vec<String> = DEFAULT_FORBIDDEN.iter().map(|s| (*s).to_owned()).collect();
    let home = std::env::var_os("HOME").map(PathBuf::from);
    let ctx = ToolContext {
        session_id: SessionId::generate(),
        workspace: workspace.clone(),
        boundary: Arc::new(PathBoundary::new(&workspace, &[], &forbidden, home)),
        files: Files::local(SessionId::generate()),
        cancel: CancellationToken::new(),
        progress: pincer::core::tool::Progress::none(),
        terminal: None,
        memory: None,
        call_id: None,
        run_id: None,
        skills: None,
    };
    let tool = Grep {
        settings: SearchSettings {
            max_results: usize::MAX / 16,
            ..SearchSettings::default()
        },
    };
    let arguments = serde_json::json!({ "pattern": pattern });
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let mut stdout = std::io::stdout().lock();
    let mut text = String::new();
    for _ in 0..runs {
        let started = Instant::now();
        text = runtime.block_on(async {
            let plan = tool.plan(&arguments, &ctx).await.unwrap();
            tool.execute(&arguments, &plan, &ctx).await.unwrap().text
        });
        let elapsed = started.elapsed();
        let _ = writeln!(stdout, "elapsed_ms {:.1}", elapsed.as_secs_f64() * 1000.0);
    }
    // With the cap out of reach every output line is a matching line.
    let matches = if text == "No matches" {
        0
    } else {
        text.lines().count()
    };
    if print {
        let _ = writeln!(stdout, "{text}");
    }
    let _ = writeln!(stdout, "matches {matches}");
}
