#![allow(
    clippy::print_stdout,
    reason = "a benchmark's report is its standard output"
)]
#![allow(clippy::unwrap_used, clippy::expect_used)] // a benchmark: a panic is a failed run
//! 1,000 concurrent sessions, each prompted once over HTTP, against a scripted model.
//!
//! `cargo bench --bench http [-- --sessions N --reps R]` starts the release
//! `pincer serve --http 127.0.0.1:0` (rate limit off) in a scratch directory,
//! creates N sessions at once, then sends the N prompts at once with
//! `?wait=true` and times from the first request to the last answer. It checks
//! every run completed (each answer, and `/metrics`), then reads the server's
//! peak resident memory (`VmHWM`). Each repetition is a fresh server and
//! database. Prints a Markdown table (docs/benchmarks.md).

use std::path::Path;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

const TOKEN: &str = "bench-token-0123456789abcdef";
const TARGET_RUNS_PER_SEC: f64 = 500.0;
const TARGET_RSS_MIB: f64 = 150.0;

struct Rep {
    sessions_secs: f64,
    runs_secs: f64,
    hwm_kib: u64,
    rss_kib: u64,
    threads: u64,
}

fn arg(name: &str, default: usize) -> usize {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn status_field(pid: u32, field: &str) -> u64 {
    let text = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    text.lines()
        .find_map(|l| l.strip_prefix(field))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

fn raise_fd_limit() {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) == 0 {
            limit.rlim_cur = limit.rlim_max;
            libc::setrlimit(libc::RLIMIT_NOFILE, &limit);
        }
    }
}

fn start(dir: &Path) -> (Child, String) {
    let script = dir.join("bench.jsonl");
    std::fs::write(
        &script,
        "[{\"text\": \"Hello\"}, {\"text\": \" from\"}, {\"text\": \" the bench\"}, {\"usage\": {\"input_tokens\": 12, \"output_tokens\": 4}}]\n",
    )
    .unwrap();
    let config = dir.join("config/pincer/config.toml");
    std::fs::create_dir_all(config.parent().unwrap()).unwrap();
    std::fs::write(&config, "[http]\nrate_limit_per_minute = 0\n").unwrap();
    let ready = dir.join("ready");
    let child = std::process::Command::new(env!("CARGO_BIN_EXE_pincer"))
        .env_clear()
        .env("HOME", dir.join("home"))
        .env("XDG_CONFIG_HOME", dir.join("config"))
        .env("PINCER_DATA_DIR", dir.join("data"))
        .env("PINCER_HTTP_TOKEN", TOKEN)
        .args(["serve", "--http", "127.0.0.1:0", "--ready-file"])
        .arg(&ready)
        .arg("--script")
        .arg(&script)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let started = Instant::now();
    while !ready.exists() {
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "server did not start"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    let addr = std::fs::read_to_string(&ready).unwrap().trim().to_owned();
    (child, addr)
}

async fn rep(n: usize) -> Rep {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().join("ws");
    std::fs::create_dir_all(&ws).unwrap();
    let (mut child, addr) = start(dir.path());
    let client = reqwest::Client::builder()
        .pool_max_idle_per_host(n)
        .timeout(Duration::from_secs(300))
        .build()
        .unwrap();
    let post = |path: String, body: Value| {
        let client = client.clone();
        let url = format!("http://{addr}{path}");
        async move {
            let response = client
                .post(url)
                .bearer_auth(TOKEN)
                .json(&body)
                .send()
                .await
                .unwrap();
            let status = response.status();
            let value: Value = response.json().await.unwrap();
            assert!(status.is_success(), "{status}: {value}");
            value
        }
    };
    let started = Instant::now();
    let sessions = futures::future::join_all(
        (0..n).map(|_| post("/v1/sessions".into(), json!({"workspace": ws}))),
    )
    .await;
    let sessions_secs = started.elapsed().as_secs_f64();
    let ids: Vec<String> = sessions
        .iter()
        .map(|s| s["session_id"].as_str().unwrap().to_owned())
        .collect();
    let started = Instant::now();
    let runs = futures::future::join_all(ids.iter().map(|id| {
        post(
            format!("/v1/sessions/{id}/prompt?wait=true"),
            json!({"prompt": "hi"}),
        )
    }))
    .await;
    let runs_secs = started.elapsed().as_secs_f64();
    for run in &runs {
        assert_eq!(run["state"], "completed", "{run}");
    }
    let metrics = client
        .get(format!("http://{addr}/metrics"))
        .bearer_auth(TOKEN)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        metrics.contains(&format!("pincer_runs{{state=\"completed\"}} {n}\n")),
        "{metrics}"
    );
    let pid = child.id();
    let result = Rep {
        sessions_secs,
        runs_secs,
        hwm_kib: status_field(pid, "VmHWM:"),
        rss_kib: status_field(pid, "VmRSS:"),
        threads: status_field(pid, "Threads:"),
    };
    unsafe { libc::kill(pid as i32, libc::SIGTERM) };
    assert!(child.wait().unwrap().success());
    result
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(|a, b| a.total_cmp(b));
    values[values.len() / 2]
}

fn main() {
    let n = arg("--sessions", 1000);
    let reps = arg("--reps", 3);
    raise_fd_limit();
    let _ = rustls::crypto::ring::default_provider().install_default();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    let results: Vec<Rep> = (0..reps).map(|_| runtime.block_on(rep(n))).collect();
    let rate = |r: &Rep| n as f64 / r.runs_secs;
    let mib = |kib: u64| kib as f64 / 1024.0;
    let rates: Vec<f64> = results.iter().map(rate).collect();
    let hwms: Vec<f64> = results.iter().map(|r| mib(r.hwm_kib)).collect();
    let each = |f: &dyn Fn(&Rep) -> String| results.iter().map(f).collect::<Vec<_>>().join(", ");
    println!(
        "{n} sessions, {reps} repetitions, {} CPUs, load average before: {}",
        std::thread::available_parallelism().map_or(0, |p| p.get()),
        load.split_whitespace()
            .take(3)
            .collect::<Vec<_>>()
            .join(" ")
    );
    println!();
    println!("| measure | median | each repetition |");
    println!("| --- | ---: | --- |");
    println!(
        "| {n} sessions created at once (`POST /v1/sessions`), wall time | {:.0} ms | {} |",
        median(results.iter().map(|r| r.sessions_secs * 1000.0).collect()),
        each(&|r| format!("{:.0} ms", r.sessions_secs * 1000.0))
    );
    println!(
        "| {n} prompts at once (`?wait=true`), first request to last answer | {:.0} ms | {} |",
        median(results.iter().map(|r| r.runs_secs * 1000.0).collect()),
        each(&|r| format!("{:.0} ms", r.runs_secs * 1000.0))
    );
    println!(
        "| runs per second | {:.0} | {} |",
        median(rates.clone()),
        each(&|r| format!("{:.0}", rate(r)))
    );
    println!("| runs completed | {n} of {n} | all, each repetition |");
    println!(
        "| server peak resident memory (VmHWM) | {:.1} MiB | {} |",
        median(hwms.clone()),
        each(&|r| format!("{:.1} MiB", mib(r.hwm_kib)))
    );
    println!(
        "| server resident memory at the end (VmRSS) | {:.1} MiB | {} |",
        median(results.iter().map(|r| mib(r.rss_kib)).collect()),
        each(&|r| format!("{:.1} MiB", mib(r.rss_kib)))
    );
    println!(
        "| server threads at the end | {} | {} |",
        results[results.len() / 2].threads,
        each(&|r| r.threads.to_string())
    );
    println!();
    let verdict = |ok: bool| if ok { "met" } else { "missed" };
    println!(
        "Targets: over {TARGET_RUNS_PER_SEC:.0} runs/s: {} (median {:.0}); under {TARGET_RSS_MIB:.0} MiB resident: {} (median peak {:.1} MiB).",
        verdict(median(rates.clone()) > TARGET_RUNS_PER_SEC),
        median(rates),
        verdict(median(hwms.clone()) < TARGET_RSS_MIB),
        median(hwms)
    );
}
