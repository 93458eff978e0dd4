#![allow(
    clippy::print_stdout,
    reason = "a benchmark's report is its standard output"
)]
#![allow(clippy::unwrap_used, clippy::expect_used)] // a benchmark: a panic is a failed run
//! Policy check plus receipt, per tool call.
//!
//! `cargo bench --bench gate` prints the median and p99 of:
//! - `check`: the policy decision for a planned call (a shell line with a pipeline
//!   and a substitution, and a file write), with the default rules;
//! - `receipt`: hashing the arguments and output, building the chained receipt;
//! - `check + receipt, durable`: both, then the receipt committed to SQLite
//!   (WAL, synchronous=FULL) before the next call — the worst case, one fsync per call;
//! - `check + receipt, submitted`: both, with the receipt handed to the writer
//!   thread as the agent loop does (group commit; flushed at the end and counted).

use std::path::PathBuf;
use std::time::{Duration, Instant};

use pincer::core::approval::Grant;
use pincer::core::ids::{RunId, SessionId};
use pincer::core::policy::shell::CommandRule;
use pincer::core::policy::{
    Check, DEFAULT_FORBIDDEN, DEFAULT_SHELL_ALLOW, DEFAULT_SHELL_DENY, PathBoundary, PolicyRules,
};
use pincer::core::receipt::{GENESIS, ReceiptBody, Verdict, json_hash, sha256_hex};
use pincer::core::session::Mode;
use pincer::core::tool::{Plan, ToolKind};
use pincer::store::{Store, Write};

fn rules() -> PolicyRules {
    let parse = |list: &[&str]| {
        list.iter()
            .map(|r| CommandRule::parse(r).unwrap())
            .collect()
    };
    PolicyRules {
        tools: Default::default(),
        shell_allow: parse(DEFAULT_SHELL_ALLOW),
        shell_ask: Vec::new(),
        shell_deny: parse(DEFAULT_SHELL_DENY),
        web_allow: Vec::new(),
        web_deny: Vec::new(),
    }
}

fn stats(name: &str, mut samples: Vec<Duration>) {
    samples.sort();
    let pct = |p: f64| samples[((samples.len() as f64 - 1.0) * p) as usize];
    println!(
        "{name:<32} n={:<6} median {:>9.1} µs   p99 {:>9.1} µs",
        samples.len(),
        pct(0.5).as_secs_f64() * 1e6,
        pct(0.99).as_secs_f64() * 1e6
    );
}

fn main() {
    let n: usize = std::env::args()
        .skip(1)
        .find_map(|a| a.parse().ok())
        .unwrap_or(5000);
    let dir = tempfile::tempdir().unwrap();
    let ws = std::fs::canonicalize(dir.path()).unwrap();
    std::fs::create_dir_all(ws.join("src")).unwrap();
    let forbidden: Vec<String> = DEFAULT_FORBIDDEN.iter().map(|s| (*s).to_owned()).collect();
    let boundary = PathBoundary::new(&ws, &[], &forbidden, Some(PathBuf::from("/root")));
    let rules = rules();
    let grants: Vec<Grant> = Vec::new();
    let shell_plan = Plan {
        title: "Run".into(),
        reads: vec![ws.clone()],
        command: Some(
            "cargo test 2>&1 | grep -c ok && echo $(git rev-parse HEAD) > /dev/null".into(),
        ),
        ..Plan::default()
    };
    let write_plan = Plan {
        title: "Write src/lib.rs".into(),
        writes: vec![ws.join("src/lib.rs")],
        ..Plan::default()
    };
    let arguments = serde_json::json!({"path": "src/lib.rs", "content": "x".repeat(4096)});
    let output = "Updated src/lib.rs (+120 -80 lines)\n".repeat(20);

    let check = |plan: &Plan, tool: &str, kind: ToolKind| {
        rules.check(&Check {
            mode: Mode::Supervised,
            tool,
            kind,
            plan,
            grants: &grants,
            boundary: &boundary,
            cwd: &ws,
        })
    };
    let receipt = |seq: u64, prev: &str| {
        ReceiptBody {
            session_id: SessionId::from_string("ses_bench".into()),
            run_id: RunId::from_string("run_bench".into()),
            call_id: format!("call_{seq}"),
            tool: "write_file".into(),
            input_hash: json_hash(&arguments),
            output_hash: sha256_hex(output.as_bytes()),
            verdict: Verdict::Approved,
            is_error: false,
            at: 0,
            hooks: Vec::new(),
            skills: Vec::new(),
        }
        .chain(seq, prev)
    };

    let mut samples = Vec::with_capacity(n);
    for _ in 0..n {
        let start = Instant::now();
        std::hint::black_box(check(&shell_plan, "shell", ToolKind::Execute));
        samples.push(start.elapsed());
    }
    stats("check (shell line)", samples);

    let mut samples = Vec::with_capacity(n);
    for _ in 0..n {
        let start = Instant::now();
        std::hint::black_box(check(&write_plan, "write_file", ToolKind::Edit));
        samples.push(start.elapsed());
    }
    stats("check (write_file)", samples);

    let mut samples = Vec::with_capacity(n);
    let mut prev = GENESIS.to_owned();
    for seq in 1..=n as u64 {
        let start = Instant::now();
        let r = receipt(seq, &prev);
        samples.push(start.elapsed());
        prev = r.hash;
    }
    stats("receipt (hash + chain)", samples);

    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let (store, _) = Store::open(&ws.join("bench.db")).unwrap();
        let durable_n = n.min(1000);
        let mut samples = Vec::with_capacity(durable_n);
        for seq in 0..durable_n as u64 {
            let start = Instant::now();
            std::hint::black_box(check(&shell_plan, "shell", ToolKind::Execute));
            let body = receipt(seq + 1, GENESIS).body;
            store.commit(Write::AppendReceipt(body)).await.unwrap();
            samples.push(start.elapsed());
        }
        stats("check + receipt, durable", samples);

        let mut samples = Vec::with_capacity(n);
        let all = Instant::now();
        for seq in 0..n as u64 {
            let start = Instant::now();
            std::hint::black_box(check(&shell_plan, "shell", ToolKind::Execute));
            let body = receipt(seq + 1, GENESIS).body;
            store.submit(Write::AppendReceipt(body));
            samples.push(start.elapsed());
        }
        store.flush().await.unwrap();
        let total = all.elapsed();
        stats("check + receipt, submitted", samples);
        println!(
            "{:<32} {:.1} µs per call including the final flush ({n} calls)",
            "  amortized with group commit",
            total.as_secs_f64() * 1e6 / n as f64
        );
        let receipts = store.receipts(1, usize::MAX >> 1).await.unwrap();
        let (count, _) = pincer::core::receipt::verify(&receipts).unwrap();
        println!("{:<32} {count} receipts, chain intact", "  verified");
        store.shutdown();
    });
}
