#![allow(
    clippy::print_stdout,
    reason = "a benchmark's report is its standard output"
)]
#![allow(clippy::unwrap_used, clippy::expect_used)] // a benchmark: a panic is a failed run
//! What a `PreToolUse` command hook adds to a tool call beyond the hook's
//! own run time (issue target: under 5 ms).
//!
//!     cargo bench --bench hooks [-- CALLS]
//!
//! For each of two hooks — `cat >/dev/null` (reads its input, answers
//! nothing) and one printing a JSON `allow` decision — it times, alternating
//! and CALLS times each (default 300):
//! - `direct`: the hook's own run: `/bin/sh -c COMMAND` spawned with the
//!   same input written to its standard input, its output read, waited for;
//! - `hooked`: `Hooks::fire` of a `PreToolUse` input through the runner
//!   Pincer uses (`pincer::hooks::HookSet`), answer read and combined.
//!
//! The overhead is `hooked − direct` (medians and p99s), the part Pincer
//! adds: building the input, matching, the process group, reading and
//! interpreting the answer.

use std::process::Stdio;
use std::time::{Duration, Instant};

use pincer::core::hooks::{HookEvent, HookInput, Hooks};
use pincer::hooks::{HookSet, HookSettings, HookSpec};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

fn percentile(times: &mut [Duration], p: f64) -> Duration {
    times.sort();
    times[((times.len() as f64 - 1.0) * p).round() as usize]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

async fn direct(command: &str, input: &[u8]) -> Duration {
    let start = Instant::now();
    let mut child = tokio::process::Command::new("/bin/sh")
        .arg("-c")
        .arg(command)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(input).await.unwrap();
    drop(stdin);
    let mut out = Vec::new();
    child
        .stdout
        .take()
        .unwrap()
        .read_to_end(&mut out)
        .await
        .unwrap();
    child.wait().await.unwrap();
    start.elapsed()
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let calls: usize = std::env::args()
        .skip(1)
        .find_map(|a| a.parse().ok())
        .unwrap_or(300);
    let workspace = tempfile::tempdir().unwrap();
    let allow = r#"cat >/dev/null; printf '%s' '{"hookSpecificOutput":{"hookEventName":"PreToolUse","permissionDecision":"allow"}}'"#;
    for (name, command) in [
        ("reads its input", "cat >/dev/null"),
        ("answers allow", allow),
    ] {
        let hooks = HookSet::new(
            &HookSettings {
                hooks: vec![(
                    HookEvent::PreToolUse,
                    HookSpec {
                        matcher: Some("shell".into()),
                        command: Some(command.into()),
                        ..HookSpec::default()
                    },
                )],
                ..HookSettings::default()
            },
            &|_| None,
        )
        .unwrap();
        let input = || {
            HookInput::new(
                HookEvent::PreToolUse,
                "ses_bench",
                workspace.path().to_path_buf(),
                "supervised",
            )
            .about("tool_name", "shell")
            .with(
                "tool_input",
                serde_json::json!({"command": "cargo test --workspace 2>&1 | tail -n 50"}),
            )
            .with("tool_use_id", "call_1")
        };
        let body = serde_json::to_vec(&input().to_json()).unwrap();
        // Warm up both paths.
        for _ in 0..20 {
            direct(command, &body).await;
            hooks.fire(input()).await;
        }
        let (mut plain, mut fired) = (Vec::new(), Vec::new());
        for _ in 0..calls {
            plain.push(direct(command, &body).await);
            let start = Instant::now();
            let outcome = hooks.fire(input()).await;
            fired.push(start.elapsed());
            assert!(outcome.answers.iter().all(|a| a.failed.is_none()));
        }
        let (d50, d99) = (percentile(&mut plain, 0.5), percentile(&mut plain, 0.99));
        let (h50, h99) = (percentile(&mut fired, 0.5), percentile(&mut fired, 0.99));
        println!(
            "hook that {name}: direct p50 {:.3} ms p99 {:.3} ms | hooked p50 {:.3} ms p99 {:.3} ms | added p50 {:.3} ms p99 {:.3} ms ({calls} calls)",
            ms(d50),
            ms(d99),
            ms(h50),
            ms(h99),
            ms(h50) - ms(d50),
            ms(h99) - ms(d99),
        );
    }
}
