#![allow(
    clippy::print_stdout,
    reason = "a benchmark's report is its standard output"
)]
//! Streaming: provider socket to ACP client (issue 4).
//!
//!     cargo bench --bench stream
//!     cargo bench --bench stream -- --wait-idle 120 --write docs/benchmarks.md
//!
//! Options: `--chunks N` (flood chunks per run, default 20,000), `--runs N`
//! (flood runs, default 5), `--paced N` (paced chunks, default 20,000),
//! `--bin PATH` (the pincer to measure), `--zeroclaw PATH` (a peer, below),
//! `--scratch DIR` (where the scratch directories go, default the system temp
//! dir), `--wait-idle SECS` (first wait up to SECS for a quiet machine),
//! `--write FILE` (put the report between the `bench:stream` markers in FILE).
//!
//! A loopback HTTP server in this process answers `POST /v1/chat/completions`
//! with an OpenAI chat completions SSE stream (a role chunk, N content chunks,
//! a `finish_reason: "stop"` chunk, a usage chunk, `data: [DONE]`; chunked
//! transfer encoding, one HTTP chunk and one `write` per SSE event, TCP_NODELAY).
//! `pincer acp` runs as a child with `--provider openai --model bench-model`,
//! `OPENAI_BASE_URL` pointing at the server, and a scratch `HOME` /
//! `XDG_CONFIG_HOME` / `PINCER_DATA_DIR` (and an otherwise empty environment);
//! this process is its ACP client over stdio: `initialize`, `session/new`,
//! `session/prompt`, then every `session/update` until the prompt's response.
//! The binary is the one `cargo build --release` makes (the bench runs that
//! build first, a no-op when it is fresh), not the one cargo builds for
//! benches, which has the dev-dependencies' features.
//!
//! Each content chunk is `"<index>@<nanos> "`: its index, and the time the
//! server took just before writing it to the socket, in nanoseconds since an
//! `Instant` shared by the server and the client threads. The client stamps
//! every `read` of the pipe; a chunk's latency is that stamp minus its own.
//!
//! Phases:
//! - **flood**: the server writes `--chunks` content chunks as fast as it can.
//!   chunks/s = chunks read by the client / (last chunk read from the pipe −
//!   first chunk written to the socket). `--runs` runs, a new process and data
//!   directory each, each after a `sync` and a pause. Latency here is mostly
//!   queueing; reported for information.
//! - **paced**: one chunk in flight: the server writes chunk i+1 only once the
//!   client has read chunk i from the pipe. `--paced` chunks. This is the added
//!   latency per chunk, without queueing behind other chunks.
//! - **baseline**: the same server, flood and paced, read by this process
//!   straight from the socket (no pincer): the floor of loopback TCP plus a
//!   thread wake-up. "Added" figures subtract the baseline percentile from
//!   pincer's percentile of the same rank.
//!
//! Every run checks that every chunk arrived once, in order; the paced run,
//! where no two chunks reach pincer together, that each came in its own
//! `agent_message_chunk` notification. In a flood, chunks that reached pincer
//! together may share one; what bounds that is the latency: every chunk at the
//! client within 20 ms of the provider writing it. pincer's CPU time (user +
//! system, all threads, from /proc) over each flood prompt is reported per
//! chunk and per 1,000 bytes of reply text: it is steadier than the rate on a
//! shared machine.
//!
//! With `--zeroclaw PATH` (or `$BENCH_ZEROCLAW`), ZeroClaw's ACP server
//! (`zeroclaw --config-dir DIR acp`, crates.io zeroclaw 0.8.7) streams the
//! same floods from the same server after pincer's, its OpenAI provider
//! pointed at it by its configuration, and the report sets the two side by
//! side.

use std::fmt::Write as _;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::sync::OnceLock;
use std::sync::mpsc::{Receiver, RecvTimeoutError, Sender, channel};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, anyhow, bail, ensure};
use serde_json::{Value, json};

const START_MARK: &str = "<!-- bench:stream:start -->";
const END_MARK: &str = "<!-- bench:stream:end -->";
const TARGET_CHUNKS_PER_S: f64 = 250_000.0;
const TARGET_ADDED_P99_NS: u64 = 1_000_000;
/// pincer's CPU time per 1,000 bytes of reply text in a flood, at most (ms).
const TARGET_CPU_MS_PER_KB: f64 = 0.5;
/// Every chunk of a flood reaches the client this soon after the provider
/// wrote it, merged or not.
const TARGET_FLOOD_MAX_NS: u64 = 20_000_000;
/// pincer's flood rate over ZeroClaw's, at least.
const TARGET_PEER_RATIO: f64 = 20.0;
/// A run that takes longer than this has hung: the child is killed.
const RUN_TIMEOUT: Duration = Duration::from_secs(300);
/// How long the paced server waits for the client to read a chunk.
const ACK_TIMEOUT: Duration = Duration::from_secs(20);
const MODEL: &str = "bench-model";
/// `--wait-idle` waits for a second with the CPUs less busy than this.
const IDLE_BUSY_PERCENT: f64 = 10.0;

/// The clock every timestamp is measured on.
fn epoch() -> Instant {
    static EPOCH: OnceLock<Instant> = OnceLock::new();
    *EPOCH.get_or_init(Instant::now)
}

fn now_ns() -> u64 {
    epoch().elapsed().as_nanos() as u64
}

struct Options {
    chunks: usize,
    runs: usize,
    paced: usize,
    /// The binary to measure; by default the one `cargo build --release` makes.
    bin: Option<PathBuf>,
    write: Option<PathBuf>,
    /// Where scratch directories (pincer's data directory among them) go.
    scratch: PathBuf,
    /// Wait up to this long for the CPUs to be mostly idle before measuring.
    wait_idle: Duration,
    /// ZeroClaw's binary, to measure its ACP server beside pincer's flood.
    zeroclaw: Option<PathBuf>,
}

fn usage() -> ! {
    eprintln!(
        "usage: cargo bench --bench stream -- [--chunks N] [--runs N] [--paced N] [--bin PATH] [--zeroclaw PATH] [--scratch DIR] [--wait-idle SECS] [--write FILE]"
    );
    std::process::exit(2)
}

fn options() -> Options {
    let mut options = Options {
        chunks: 20_000,
        runs: 5,
        paced: 20_000,
        bin: None,
        write: None,
        scratch: std::env::temp_dir(),
        wait_idle: Duration::ZERO,
        zeroclaw: std::env::var_os("BENCH_ZEROCLAW").map(PathBuf::from),
    };
    // `cargo bench` passes `--bench` to every bench binary; it means nothing here.
    let mut args = std::env::args().skip(1).filter(|arg| arg != "--bench");
    while let Some(arg) = args.next() {
        let mut value = || args.next().unwrap_or_else(|| usage());
        match arg.as_str() {
            "--chunks" => options.chunks = value().parse().unwrap_or_else(|_| usage()),
            "--runs" => options.runs = value().parse().unwrap_or_else(|_| usage()),
            "--paced" => options.paced = value().parse().unwrap_or_else(|_| usage()),
            "--bin" => options.bin = Some(PathBuf::from(value())),
            "--write" => options.write = Some(PathBuf::from(value())),
            "--scratch" => options.scratch = PathBuf::from(value()),
            "--zeroclaw" => options.zeroclaw = Some(PathBuf::from(value())),
            "--wait-idle" => {
                let secs: u64 = value().parse().unwrap_or_else(|_| usage());
                options.wait_idle = Duration::from_secs(secs);
            }
            _ => usage(),
        }
    }
    if options.chunks == 0 || options.runs == 0 || options.paced == 0 {
        usage()
    }
    options
}

/// The binary `cargo build --release` makes, built (or found fresh) now.
///
/// Not `CARGO_BIN_EXE_pincer`: for benches cargo builds the binary with the
/// dev-dependencies' features unified in, which is not what ships.
fn release_binary() -> Result<PathBuf> {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut command = Command::new(cargo);
    // What cargo set for running this bench, not what a shell has: build scripts
    // that watch these (ring watches CARGO_MANIFEST_DIR) would rebuild otherwise.
    for (name, _) in std::env::vars_os() {
        let name = name.to_string_lossy();
        if name.starts_with("CARGO_PKG_")
            || name.starts_with("CARGO_BIN_")
            || [
                "CARGO_MANIFEST_DIR",
                "CARGO_MANIFEST_PATH",
                "CARGO_MANIFEST_LINKS",
                "CARGO_CRATE_NAME",
                "CARGO_PRIMARY_PACKAGE",
                "CARGO_TARGET_TMPDIR",
                "CARGO_RUSTC_CURRENT_DIR",
                "OUT_DIR",
            ]
            .contains(&name.as_ref())
        {
            command.env_remove(name.as_ref());
        }
    }
    let output = command
        .args(["build", "--release", "--locked", "--bin", "pincer"])
        .arg("--message-format=json-render-diagnostics")
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .stderr(Stdio::inherit())
        .output()
        .context("cannot run cargo build --release")?;
    ensure!(output.status.success(), "cargo build --release failed");
    for line in output.stdout.split(|&b| b == b'\n') {
        let Ok(message) = serde_json::from_slice::<Value>(line) else {
            continue;
        };
        if message["reason"] == json!("compiler-artifact")
            && message["target"]["name"] == json!("pincer")
            && let Some(path) = message["executable"].as_str()
        {
            return Ok(PathBuf::from(path));
        }
    }
    bail!("cargo build --release named no pincer executable")
}

// ---------------------------------------------------------------------------
// The provider: a loopback OpenAI-compatible server.

#[derive(Clone, Copy, PartialEq)]
enum Pace {
    /// Every chunk as fast as the socket takes it.
    Flood,
    /// The next chunk only once the client has read the previous one.
    Paced,
}

/// What the server saw and did.
struct Served {
    chunks: usize,
    first_write: u64,
    last_write: u64,
    /// Asked for with `"stream": true`, and streamed.
    streamed: bool,
}

/// Starts a server that answers one request with `chunks` content chunks.
/// With `Pace::Paced`, `acks` carries the index of each chunk the client read.
fn serve(
    chunks: usize,
    pace: Pace,
    acks: Option<Receiver<usize>>,
) -> Result<(u16, JoinHandle<Result<Served>>)> {
    let listener = TcpListener::bind("127.0.0.1:0")?;
    let port = listener.local_addr()?.port();
    let handle = std::thread::Builder::new()
        .name("provider".into())
        .spawn(move || -> Result<Served> {
            // Questions before the turn (pincer asks an OpenAI-compatible
            // server for its context window: vLLM's /v1/models, llama.cpp's
            // /props, ...) are answered 404, as OpenAI's API answers what it
            // does not serve; the chat completion is streamed.
            // A question pincer gave up on (it asks several at once) may be
            // gone before it is answered: not an error.
            let mut stream = loop {
                let (mut stream, _) = listener.accept()?;
                stream.set_nodelay(true)?;
                match read_request(&mut stream) {
                    Ok(Some(true)) => break stream,
                    Ok(Some(false)) => return whole(stream, chunks),
                    Ok(None) => {}
                    Err(err) if err.downcast_ref::<std::io::Error>().is_some() => continue,
                    Err(err) => return Err(err),
                }
                let _ = stream.write_all(
                    b"HTTP/1.1 404 Not Found\r\ncontent-type: application/json\r\n\
                      content-length: 2\r\nconnection: close\r\n\r\n{}",
                );
            };
            stream.write_all(
                b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream; charset=utf-8\r\n\
                  cache-control: no-cache\r\nconnection: close\r\ntransfer-encoding: chunked\r\n\r\n",
            )?;
            let mut event = Vec::with_capacity(512);
            let mut frame = Vec::with_capacity(512);
            let mut send = |stream: &mut TcpStream, event: &[u8]| -> Result<()> {
                frame.clear();
                write!(frame, "{:x}\r\n", event.len())?;
                frame.extend_from_slice(event);
                frame.extend_from_slice(b"\r\n");
                stream.write_all(&frame)?;
                Ok(())
            };
            let head = r#"data: {"id":"chatcmpl-bench","object":"chat.completion.chunk","created":1763700000,"model":"bench-model","system_fingerprint":"fp_bench","choices":["#;
            event.clear();
            event.extend_from_slice(head.as_bytes());
            event.extend_from_slice(br#"{"index":0,"delta":{"role":"assistant","content":"","refusal":null},"logprobs":null,"finish_reason":null}],"usage":null}"#);
            event.extend_from_slice(b"\n\n");
            send(&mut stream, &event)?;
            let mut first_write = 0;
            let mut last_write = 0;
            for index in 0..chunks {
                let at = now_ns();
                event.clear();
                event.extend_from_slice(head.as_bytes());
                write!(
                    event,
                    r#"{{"index":0,"delta":{{"content":"{index}@{at} "}},"logprobs":null,"finish_reason":null}}],"usage":null}}"#
                )?;
                event.extend_from_slice(b"\n\n");
                send(&mut stream, &event)?;
                if index == 0 {
                    first_write = at;
                }
                last_write = at;
                if pace == Pace::Paced
                    && let Some(acks) = &acks
                {
                    // Stale acks cannot happen (one chunk in flight), but skip them anyway.
                    loop {
                        match acks.recv_timeout(ACK_TIMEOUT) {
                            Ok(read) if read >= index => break,
                            Ok(_) => {}
                            Err(err) => bail!("the client did not read chunk {index}: {err}"),
                        }
                    }
                }
            }
            event.clear();
            event.extend_from_slice(head.as_bytes());
            event.extend_from_slice(
                br#"{"index":0,"delta":{},"logprobs":null,"finish_reason":"stop"}],"usage":null}"#,
            );
            event.extend_from_slice(b"\n\n");
            send(&mut stream, &event)?;
            event.clear();
            event.extend_from_slice(head.as_bytes());
            write!(
                event,
                r#"],"usage":{{"prompt_tokens":12,"completion_tokens":{chunks},"total_tokens":{}}}}}"#,
                chunks + 12
            )?;
            event.extend_from_slice(b"\n\n");
            send(&mut stream, &event)?;
            send(&mut stream, b"data: [DONE]\n\n")?;
            stream.write_all(b"0\r\n\r\n")?;
            stream.flush()?;
            let _ = stream.shutdown(std::net::Shutdown::Write);
            // Let the client read to the end before the socket is dropped.
            let mut rest = [0u8; 1024];
            while matches!(stream.read(&mut rest), Ok(n) if n > 0) {}
            Ok(Served {
                chunks,
                first_write,
                last_write,
                streamed: true,
            })
        })?;
    Ok((port, handle))
}

/// A chat completion asked for without `"stream": true` (ZeroClaw 0.8.7
/// asks an OpenAI-compatible server so when it offers tools): the same
/// chunks' text as one completion, each chunk stamped with the time the
/// body is written.
fn whole(mut stream: TcpStream, chunks: usize) -> Result<Served> {
    let at = now_ns();
    let mut text = String::with_capacity(chunks * 18);
    for index in 0..chunks {
        write!(text, "{index}@{at} ")?;
    }
    let body = serde_json::to_vec(&json!({
        "id": "chatcmpl-bench", "object": "chat.completion", "created": 1763700000,
        "model": MODEL, "system_fingerprint": "fp_bench",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": text,
                     "refusal": null}, "logprobs": null, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 12, "completion_tokens": chunks, "total_tokens": chunks + 12},
    }))?;
    write!(
        stream,
        "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
        body.len()
    )?;
    stream.write_all(&body)?;
    stream.flush()?;
    let _ = stream.shutdown(std::net::Shutdown::Write);
    let mut rest = [0u8; 1024];
    while matches!(stream.read(&mut rest), Ok(n) if n > 0) {}
    Ok(Served {
        chunks,
        first_write: at,
        last_write: at,
        streamed: false,
    })
}

/// Reads one request: `Some(streamed)` for a chat completion for the bench's
/// model, `None` for any other request (or none).
fn read_request(stream: &mut TcpStream) -> Result<Option<bool>> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 16 * 1024];
    let header_end = loop {
        let n = stream.read(&mut chunk)?;
        if n == 0 {
            // Closed before asking anything.
            return Ok(None);
        }
        buf.extend_from_slice(&chunk[..n]);
        if let Some(at) = find(&buf, b"\r\n\r\n") {
            break at + 4;
        }
    };
    let head = String::from_utf8_lossy(&buf[..header_end]).into_owned();
    let request_line = head.lines().next().unwrap_or_default();
    if !request_line.starts_with("POST /v1/chat/completions ") {
        return Ok(None);
    }
    let length: usize = head
        .lines()
        .filter_map(|line| line.split_once(':'))
        .find(|(name, _)| name.trim().eq_ignore_ascii_case("content-length"))
        .and_then(|(_, value)| value.trim().parse().ok())
        .context("the request has no content-length")?;
    while buf.len() < header_end + length {
        let n = stream.read(&mut chunk)?;
        ensure!(n > 0, "the request body was cut");
        buf.extend_from_slice(&chunk[..n]);
    }
    let body: Value = serde_json::from_slice(&buf[header_end..header_end + length])?;
    ensure!(
        body["model"] == json!(MODEL),
        "unexpected model: {}",
        body["model"]
    );
    Ok(Some(body["stream"] == json!(true)))
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

// ---------------------------------------------------------------------------
// What a client saw.

/// Chunks as the client read them, checked for order.
struct Received {
    /// Latency per chunk, in arrival order (ns).
    latencies: Vec<u64>,
    /// When the last chunk was read (ns since the epoch).
    last_read: u64,
    /// Lines (notifications or SSE events) that carried chunks.
    messages: usize,
    /// Bytes of chunk text (each chunk with its trailing space).
    bytes: usize,
    acks: Option<Sender<usize>>,
}

impl Received {
    fn new(expected: usize, acks: Option<Sender<usize>>) -> Self {
        Self {
            latencies: Vec::with_capacity(expected),
            last_read: 0,
            messages: 0,
            bytes: 0,
            acks,
        }
    }

    /// Takes the text of one message: `"<index>@<nanos> "`, once or, for
    /// chunks that reached the agent together, several times.
    fn text(&mut self, text: &str, read_at: u64) -> Result<()> {
        self.messages += 1;
        for token in text.split_ascii_whitespace() {
            let (index, sent) = token
                .split_once('@')
                .with_context(|| format!("unexpected chunk text {text:?}"))?;
            let index: usize = index.parse()?;
            let sent: u64 = sent.parse()?;
            ensure!(
                index == self.latencies.len(),
                "chunk {index} arrived when chunk {} was expected",
                self.latencies.len()
            );
            self.latencies.push(read_at.saturating_sub(sent));
            self.bytes += token.len() + 1;
            self.last_read = read_at;
            if let Some(acks) = &self.acks {
                // The server is gone only if it failed; its error is reported.
                let _ = acks.send(index);
            }
        }
        Ok(())
    }
}

// ---------------------------------------------------------------------------
// The ACP client over the child's pipes.

/// The child's stdout, read in large blocks; every line is stamped with the
/// time the `read` that completed it returned.
struct Pipe {
    inner: ChildStdout,
    buf: Vec<u8>,
    start: usize,
    end: usize,
}

impl Pipe {
    fn new(inner: ChildStdout) -> Self {
        Self {
            inner,
            buf: vec![0; 1 << 20],
            start: 0,
            end: 0,
        }
    }

    /// Calls `each(line, read_at)` for every line until it returns false.
    fn lines(&mut self, mut each: impl FnMut(&[u8], u64) -> Result<bool>) -> Result<()> {
        let mut read_at = now_ns();
        loop {
            while let Some(at) = self.buf[self.start..self.end]
                .iter()
                .position(|&b| b == b'\n')
            {
                let line = self.start..self.start + at;
                self.start += at + 1;
                if !each(&self.buf[line], read_at)? {
                    return Ok(());
                }
            }
            if self.start > 0 {
                self.buf.copy_within(self.start..self.end, 0);
                self.end -= self.start;
                self.start = 0;
            }
            if self.end == self.buf.len() {
                let len = self.buf.len();
                self.buf.resize(len * 2, 0);
            }
            let n = self.inner.read(&mut self.buf[self.end..])?;
            read_at = now_ns();
            ensure!(n > 0, "pincer closed its stdout");
            self.end += n;
        }
    }

    /// Reads until the response to `id`; other messages are skipped.
    fn response(&mut self, id: u64) -> Result<Value> {
        let mut result = None;
        self.lines(|line, _| {
            let message: Value = serde_json::from_slice(line)?;
            if message["id"] == json!(id) && message.get("method").is_none() {
                result = Some(message);
                return Ok(false);
            }
            Ok(true)
        })?;
        let message = result.context("no response")?;
        if let Some(error) = message.get("error") {
            bail!("request {id} failed: {error}");
        }
        Ok(message["result"].clone())
    }
}

fn send(stdin: &mut ChildStdin, message: &Value) -> Result<()> {
    let mut line = serde_json::to_vec(message)?;
    line.push(b'\n');
    stdin.write_all(&line)?;
    stdin.flush()?;
    Ok(())
}

/// The ACP agent under measurement.
#[derive(Clone)]
enum Agent {
    /// `pincer acp --provider openai --model bench-model`.
    Pincer(PathBuf),
    /// `zeroclaw --config-dir DIR acp`, its OpenAI provider pointed at the
    /// same server.
    ZeroClaw(PathBuf),
}

impl Agent {
    fn bin(&self) -> &Path {
        match self {
            Agent::Pincer(bin) | Agent::ZeroClaw(bin) => bin,
        }
    }
}

/// ZeroClaw's configuration: one agent on an OpenAI-compatible provider at
/// the bench's server (its schema 3, as `scripts/bench_startup.py` writes it,
/// plus the provider's `uri`).
fn zeroclaw_config(port: u16) -> String {
    format!(
        r#"schema_version = 3

[providers.models.openai.default]
model = "{MODEL}"
uri = "http://127.0.0.1:{port}/v1"
api_key = "bench"

[risk_profiles.default]

[runtime_profiles.default]

[agents.bench]
enabled = true
model_provider = "openai.default"
risk_profile = "default"
runtime_profile = "default"
"#
    )
}

/// One prompt through `pincer acp`, timed.
struct PincerRun {
    served: Served,
    received: Received,
    /// `session/prompt` written → its response read.
    prompt_ns: u64,
    stop_reason: String,
    /// pincer's CPU time over the prompt.
    cpu_ns: u64,
}

/// Starts `pincer acp` on a fresh data directory, streams `chunks` chunks
/// through it, and returns what arrived.
fn pincer_run(agent: &Agent, scratch: &Path, chunks: usize, pace: Pace) -> Result<PincerRun> {
    let bin = agent.bin();
    let scratch = tempfile::tempdir_in(scratch)?;
    let root = std::fs::canonicalize(scratch.path())?;
    let workspace = root.join("workspace");
    for dir in ["home", "config", "data", "pincer", "workspace"] {
        std::fs::create_dir_all(root.join(dir))?;
    }
    let (ack_tx, ack_rx) = match pace {
        Pace::Paced => {
            let (tx, rx) = channel();
            (Some(tx), Some(rx))
        }
        Pace::Flood => (None, None),
    };
    let (port, server) = serve(chunks, pace, ack_rx)?;
    let stderr = std::fs::File::create(root.join("stderr.log"))?;
    let mut command = Command::new(bin);
    command.env_clear();
    // Kept for looking into a run: `RUST_LOG=debug` with `PINCER_BENCH_KEEP=1`.
    if let Some(filter) = std::env::var_os("RUST_LOG") {
        command.env("RUST_LOG", filter);
    }
    match agent {
        Agent::Pincer(_) => {
            command.args(["acp", "--provider", "openai", "--model", MODEL]);
        }
        Agent::ZeroClaw(_) => {
            let config = root.join("zeroclaw");
            std::fs::create_dir_all(&config)?;
            std::fs::write(config.join("config.toml"), zeroclaw_config(port))?;
            command.arg("--config-dir").arg(&config).arg("acp");
        }
    }
    let zeroclaw = matches!(agent, Agent::ZeroClaw(_));
    let mut child = command
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", root.join("home"))
        .env("XDG_CONFIG_HOME", root.join("config"))
        .env("XDG_DATA_HOME", root.join("data"))
        .env("PINCER_DATA_DIR", root.join("pincer"))
        .env("OPENAI_API_KEY", "bench")
        .env("OPENAI_BASE_URL", format!("http://127.0.0.1:{port}/v1"))
        .current_dir(&workspace)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(stderr)
        .spawn()
        .with_context(|| format!("cannot start {}", bin.display()))?;
    let stdin = child.stdin.take().context("no stdin")?;
    let stdout = child.stdout.take().context("no stdout")?;
    let pid = child.id();
    let (done_tx, done_rx) = channel();
    let client = std::thread::Builder::new()
        .name("acp-client".into())
        .spawn(move || {
            let result = converse(stdin, stdout, pid, &workspace, chunks, ack_tx, zeroclaw);
            let _ = done_tx.send(());
            result
        })?;
    let outcome = match done_rx.recv_timeout(RUN_TIMEOUT) {
        Ok(()) | Err(RecvTimeoutError::Disconnected) => client
            .join()
            .map_err(|_| anyhow!("the client thread panicked"))?,
        Err(RecvTimeoutError::Timeout) => {
            let _ = child.kill();
            let _ = client.join();
            Err(anyhow!("no answer within {RUN_TIMEOUT:?}"))
        }
    };
    let status = wait_exit(&mut child);
    let outcome = outcome.and_then(|run| {
        let status = status?;
        ensure!(status.success(), "pincer exited with {status}");
        Ok(run)
    });
    let conversation = match outcome {
        Ok(conversation) => conversation,
        Err(err) => {
            let log = std::fs::read_to_string(root.join("stderr.log")).unwrap_or_default();
            let tail: String = log
                .lines()
                .rev()
                .take(20)
                .collect::<Vec<_>>()
                .into_iter()
                .rev()
                .collect::<Vec<_>>()
                .join("\n");
            return Err(err.context(format!("pincer's stderr ends:\n{tail}")));
        }
    };
    let served = server
        .join()
        .map_err(|_| anyhow!("the server thread panicked"))??;
    if std::env::var_os("PINCER_BENCH_KEEP").is_some() {
        eprintln!("kept {}", scratch.keep().display());
    }
    Ok(PincerRun {
        served,
        received: conversation.received,
        prompt_ns: conversation.prompt_ns,
        stop_reason: conversation.stop_reason,
        cpu_ns: conversation.cpu_ns,
    })
}

fn wait_exit(child: &mut Child) -> Result<std::process::ExitStatus> {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if let Some(status) = child.try_wait()? {
            return Ok(status);
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            bail!("pincer did not exit after its stdin closed");
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// What one ACP conversation saw.
struct Conversation {
    received: Received,
    /// `session/prompt` written → its response read.
    prompt_ns: u64,
    stop_reason: String,
    /// CPU time pincer used (user + system, all threads) during the prompt.
    cpu_ns: u64,
}

/// Lets the previous run's tape reach the disk before the next run starts, so
/// one run's writeback (and the deletion of its scratch directory) is not
/// counted against the next.
fn settle() {
    let _ = Command::new("sync").status();
    std::thread::sleep(Duration::from_millis(500));
}

/// User plus system CPU time of a process and its threads so far, from /proc (ns).
fn cpu_time(pid: u32) -> Result<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))?;
    // The command name, in parentheses, may hold spaces: count fields after it.
    let rest = stat
        .rsplit_once(')')
        .map(|(_, rest)| rest)
        .context("unexpected /proc/PID/stat")?;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // utime and stime are fields 14 and 15 of the whole line, 12 and 13 after the name.
    let ticks: u64 = fields
        .get(11..13)
        .context("unexpected /proc/PID/stat")?
        .iter()
        .map(|f| f.parse::<u64>())
        .sum::<Result<u64, _>>()?;
    Ok(ticks * 1_000_000_000 / clock_ticks())
}

fn clock_ticks() -> u64 {
    static TICKS: OnceLock<u64> = OnceLock::new();
    *TICKS.get_or_init(|| {
        Command::new("getconf")
            .arg("CLK_TCK")
            .output()
            .ok()
            .and_then(|o| String::from_utf8_lossy(&o.stdout).trim().parse().ok())
            .filter(|&t| t > 0)
            .unwrap_or(100)
    })
}

/// The ACP conversation: the chunks, the prompt's round trip, its stop reason.
fn converse(
    mut stdin: ChildStdin,
    stdout: ChildStdout,
    pid: u32,
    workspace: &Path,
    chunks: usize,
    acks: Option<Sender<usize>>,
    zeroclaw: bool,
) -> Result<Conversation> {
    let mut pipe = Pipe::new(stdout);
    send(
        &mut stdin,
        &json!({"jsonrpc": "2.0", "id": 1, "method": "initialize",
                "params": {"protocolVersion": 1, "clientCapabilities": {}}}),
    )?;
    let init = pipe.response(1)?;
    ensure!(
        init["protocolVersion"] == json!(1),
        "unexpected initialize result: {init}"
    );
    let mut params = json!({"cwd": workspace, "mcpServers": []});
    if zeroclaw {
        // Its session/new needs an agent alias from its configuration.
        params["agentAlias"] = json!("bench");
    }
    send(
        &mut stdin,
        &json!({"jsonrpc": "2.0", "id": 2, "method": "session/new", "params": params}),
    )?;
    let session = pipe.response(2)?;
    let session_id = session["sessionId"]
        .as_str()
        .context("session/new returned no sessionId")?
        .to_owned();
    let mut received = Received::new(chunks, acks);
    let mut response = None;
    let mut checked_first = false;
    let cpu_before = cpu_time(pid)?;
    let prompt_sent = now_ns();
    send(
        &mut stdin,
        &json!({"jsonrpc": "2.0", "id": 3, "method": "session/prompt",
                "params": {"sessionId": session_id,
                           "prompt": [{"type": "text", "text": "Stream."}]}}),
    )?;
    pipe.lines(|line, read_at| {
        // The fast path reads the text of an agent_message_chunk without a full
        // parse, so the client costs the machine little; the first one is also
        // parsed whole to check the fast path reads what a client would.
        const MARK: &str = r#""sessionUpdate":"agent_message_chunk""#;
        let line = std::str::from_utf8(line)?;
        if line.contains(MARK) && line.contains(r#""method":"session/update""#) {
            let at = line
                .find(r#""text":""#)
                .context("a text chunk without text")?
                + 8;
            let len = line[at..].find('"').context("unterminated text")?;
            let text = &line[at..at + len];
            if !checked_first {
                let message: Value = serde_json::from_str(line)?;
                let update = &message["params"]["update"];
                ensure!(
                    message["params"]["sessionId"] == json!(session_id)
                        && update["content"]["type"] == json!("text")
                        && update["content"]["text"] == json!(text),
                    "unexpected first chunk notification: {line}"
                );
                checked_first = true;
            }
            received.text(text, read_at)?;
            return Ok(true);
        }
        let message: Value = serde_json::from_str(line)?;
        if message["id"] == json!(3) && message.get("method").is_none() {
            response = Some((message, read_at));
            return Ok(false);
        }
        Ok(true)
    })?;
    let cpu_after = cpu_time(pid)?;
    let (message, answered) = response.context("no prompt response")?;
    if let Some(error) = message.get("error") {
        bail!("session/prompt failed: {error}");
    }
    let stop_reason = message["result"]["stopReason"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    drop(stdin);
    // Drain to the end so the child never blocks on a full pipe while exiting.
    let _ = pipe.lines(|_, _| Ok(true));
    Ok(Conversation {
        received,
        prompt_ns: answered - prompt_sent,
        stop_reason,
        cpu_ns: cpu_after.saturating_sub(cpu_before),
    })
}

// ---------------------------------------------------------------------------
// The baseline: this process reads the socket itself.

fn baseline_run(chunks: usize, pace: Pace) -> Result<(Served, Received)> {
    let (ack_tx, ack_rx) = match pace {
        Pace::Paced => {
            let (tx, rx) = channel();
            (Some(tx), Some(rx))
        }
        Pace::Flood => (None, None),
    };
    let (port, server) = serve(chunks, pace, ack_rx)?;
    let mut stream = TcpStream::connect(("127.0.0.1", port))?;
    stream.set_read_timeout(Some(ACK_TIMEOUT))?;
    let body = serde_json::to_vec(&json!({
        "model": MODEL, "stream": true, "stream_options": {"include_usage": true},
        "messages": [{"role": "user", "content": "Stream."}],
    }))?;
    let mut request = format!(
        "POST /v1/chat/completions HTTP/1.1\r\nhost: 127.0.0.1:{port}\r\n\
         content-type: application/json\r\nauthorization: Bearer bench\r\n\
         content-length: {}\r\n\r\n",
        body.len()
    )
    .into_bytes();
    request.extend_from_slice(&body);
    stream.write_all(&request)?;
    let mut received = Received::new(chunks, ack_tx);
    let mut buf = vec![0u8; 1 << 20];
    let (mut start, mut end) = (0, 0);
    const CONTENT: &[u8] = br#""delta":{"content":""#;
    'read: loop {
        if start > 0 {
            buf.copy_within(start..end, 0);
            end -= start;
            start = 0;
        }
        let n = stream.read(&mut buf[end..])?;
        let read_at = now_ns();
        if n == 0 {
            break;
        }
        end += n;
        // Whole SSE events end with a blank line; HTTP chunk framing sits between them.
        while let Some(at) = find(&buf[start..end], b"\n\n") {
            let event = &buf[start..start + at];
            start += at + 2;
            if event.ends_with(b"[DONE]") {
                break 'read;
            }
            if let Some(pos) = find(event, CONTENT) {
                let text = &event[pos + CONTENT.len()..];
                let len = text
                    .iter()
                    .position(|&b| b == b'"')
                    .context("unterminated")?;
                let text = std::str::from_utf8(&text[..len])?;
                if !text.is_empty() {
                    received.text(text, read_at)?;
                }
            }
        }
    }
    drop(received.acks.take());
    drop(stream);
    let served = server
        .join()
        .map_err(|_| anyhow!("the server thread panicked"))??;
    Ok((served, received))
}

// ---------------------------------------------------------------------------
// Figures and the report.

#[derive(Clone, Copy)]
struct Percentiles {
    n: usize,
    p50: u64,
    p90: u64,
    p99: u64,
    p999: u64,
    max: u64,
}

impl Percentiles {
    fn of(mut samples: Vec<u64>) -> Self {
        samples.sort_unstable();
        // Nearest rank.
        let at = |p: f64| {
            let rank = (p * samples.len() as f64).ceil() as usize;
            samples[rank.clamp(1, samples.len()) - 1]
        };
        Self {
            n: samples.len(),
            p50: at(0.50),
            p90: at(0.90),
            p99: at(0.99),
            p999: at(0.999),
            max: samples.last().copied().unwrap_or(0),
        }
    }

    /// Percentile minus percentile, p50 to p99.9. Not the max: one outlier
    /// on each side, their difference means nothing.
    fn minus(&self, base: &Self) -> [i64; 4] {
        let d = |a: u64, b: u64| a as i64 - b as i64;
        [
            d(self.p50, base.p50),
            d(self.p90, base.p90),
            d(self.p99, base.p99),
            d(self.p999, base.p999),
        ]
    }

    fn cells(&self) -> String {
        format!(
            "{} | {} | {} | {} | {}",
            us(self.p50 as i64),
            us(self.p90 as i64),
            us(self.p99 as i64),
            us(self.p999 as i64),
            us(self.max as i64)
        )
    }
}

/// Nanoseconds shown as microseconds (or milliseconds past 10 ms).
fn us(ns: i64) -> String {
    if ns.abs() >= 10_000_000 {
        format!("{:.1} ms", ns as f64 / 1e6)
    } else {
        format!("{:.1} µs", ns as f64 / 1e3)
    }
}

fn thousands(n: f64) -> String {
    let digits = format!("{n:.0}");
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

fn median(values: &[f64]) -> f64 {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    let mid = sorted.len() / 2;
    if sorted.len() % 2 == 1 {
        sorted[mid]
    } else {
        (sorted[mid - 1] + sorted[mid]) / 2.0
    }
}

/// The agent's CPU time per 1,000 bytes of reply text, in ms.
fn per_kb(run: &PincerRun) -> f64 {
    run.cpu_ns as f64 / 1e6 / (run.received.bytes.max(1) as f64 / 1000.0)
}

fn rate(served: &Served, received: &Received) -> f64 {
    let span = received.last_read.saturating_sub(served.first_write).max(1);
    received.latencies.len() as f64 / (span as f64 / 1e9)
}

/// Every chunk arrived, once and in order (`Received::text` checks the
/// order); with `one_each`, each in a message of its own (one chunk in
/// flight: nothing arrived together, so nothing may be merged).
fn checked(served: &Served, received: &Received, what: &str, one_each: bool) -> Result<()> {
    ensure!(
        received.latencies.len() == served.chunks,
        "{what}: {} of {} chunks arrived",
        received.latencies.len(),
        served.chunks
    );
    ensure!(
        !one_each || received.messages == served.chunks,
        "{what}: {} chunks arrived in {} messages, not one each",
        served.chunks,
        received.messages
    );
    Ok(())
}

fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "unknown".into())
}

/// Share of CPU time busy over `window`, from /proc/stat.
fn cpu_busy(window: Duration) -> Option<f64> {
    let sample = || -> Option<(u64, u64)> {
        let stat = std::fs::read_to_string("/proc/stat").ok()?;
        let fields: Vec<u64> = stat
            .lines()
            .next()?
            .split_whitespace()
            .skip(1)
            .filter_map(|f| f.parse().ok())
            .collect();
        let idle = fields.get(3)? + fields.get(4).copied().unwrap_or(0);
        Some((fields.iter().sum(), idle))
    };
    let (total0, idle0) = sample()?;
    std::thread::sleep(window);
    let (total1, idle1) = sample()?;
    let total = total1.checked_sub(total0)?.max(1);
    let idle = idle1.checked_sub(idle0)?;
    Some(100.0 * (1.0 - idle as f64 / total as f64))
}

fn cpu_model() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|info| {
            info.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split_once(':'))
                .map(|(_, v)| v.trim().to_owned())
        })
        .unwrap_or_else(|| "unknown CPU".into())
}

fn git_head() -> String {
    let run = |args: &[&str]| {
        Command::new("git")
            .args(args)
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
    };
    match run(&["rev-parse", "--short", "HEAD"]) {
        Some(head) => {
            // Only what goes into the binary: the report itself lives in docs/.
            let dirty = run(&[
                "status",
                "--porcelain",
                "--untracked-files=no",
                "--",
                "src",
                "Cargo.toml",
                "Cargo.lock",
            ])
            .is_some_and(|s| !s.is_empty());
            if dirty {
                format!("`{head}` plus uncommitted changes to the code")
            } else {
                format!("`{head}`")
            }
        }
        None => "unknown".into(),
    }
}

#[allow(
    clippy::too_many_lines,
    reason = "one benchmark run, measured then reported, read top to bottom"
)]
fn main() -> Result<()> {
    let options = options();
    let copy = tempfile::tempdir()?;
    let (bin, exe) = match &options.bin {
        Some(bin) => (bin.clone(), bin.clone()),
        None => {
            let bin = release_binary()?;
            // A copy: a `cargo bench` of another bench re-links target/release/pincer.
            let exe = copy.path().join("pincer");
            std::fs::copy(&bin, &exe)?;
            (bin, exe)
        }
    };
    epoch();
    if !options.wait_idle.is_zero() {
        let deadline = Instant::now() + options.wait_idle;
        loop {
            let busy = cpu_busy(Duration::from_secs(1)).unwrap_or(0.0);
            if busy < IDLE_BUSY_PERCENT {
                break;
            }
            if Instant::now() > deadline {
                eprintln!("the machine is still {busy:.0}% busy; measuring anyway");
                break;
            }
            eprintln!("waiting for a quiet machine ({busy:.0}% busy)");
        }
    }
    let cpus = std::thread::available_parallelism().map_or(0, |n| n.get());
    let load_before = load_average();
    let busy_before = cpu_busy(Duration::from_secs(1));
    let started = jiff::Timestamp::now();

    // Warm-up: page cache, first-run costs; not measured.
    eprintln!("warm-up");
    let pincer = Agent::Pincer(exe.clone());
    pincer_run(&pincer, &options.scratch, 2_000, Pace::Flood)?;
    baseline_run(2_000, Pace::Flood)?;

    let mut flood = Vec::new();
    for run in 1..=options.runs {
        settle();
        let result = pincer_run(&pincer, &options.scratch, options.chunks, Pace::Flood)?;
        checked(&result.served, &result.received, "flood", false)?;
        ensure!(result.served.streamed, "pincer did not ask for a stream");
        ensure!(
            result.stop_reason == "end_turn",
            "stop reason {}",
            result.stop_reason
        );
        eprintln!(
            "flood {run}/{}: {:.0} chunks/s, prompt answered in {:.0} ms, pincer CPU {:.1} µs per chunk, {:.3} ms per KB, {} messages, latency p99 {} max {}",
            options.runs,
            rate(&result.served, &result.received),
            result.prompt_ns as f64 / 1e6,
            result.cpu_ns as f64 / 1e3 / options.chunks as f64,
            per_kb(&result),
            result.received.messages,
            us(Percentiles::of(result.received.latencies.clone()).p99 as i64),
            us(Percentiles::of(result.received.latencies.clone()).max as i64),
        );
        flood.push(result);
    }
    settle();
    let paced = pincer_run(&pincer, &options.scratch, options.paced, Pace::Paced)?;
    checked(&paced.served, &paced.received, "paced", true)?;
    ensure!(
        paced.stop_reason == "end_turn",
        "stop reason {}",
        paced.stop_reason
    );
    eprintln!(
        "paced: {} chunks in {:.1} s",
        options.paced,
        (paced.received.last_read - paced.served.first_write) as f64 / 1e9
    );
    let (base_flood_served, base_flood) = baseline_run(options.chunks, Pace::Flood)?;
    checked(&base_flood_served, &base_flood, "baseline flood", false)?;
    let (base_paced_served, base_paced) = baseline_run(options.paced, Pace::Paced)?;
    checked(&base_paced_served, &base_paced, "baseline paced", true)?;
    eprintln!("baselines done");
    let mut peer = Vec::new();
    if let Some(bin) = &options.zeroclaw {
        let zeroclaw = Agent::ZeroClaw(bin.clone());
        settle();
        pincer_run(&zeroclaw, &options.scratch, 2_000, Pace::Flood)
            .context("zeroclaw's warm-up run")?;
        for run in 1..=options.runs {
            settle();
            let result = pincer_run(&zeroclaw, &options.scratch, options.chunks, Pace::Flood)?;
            checked(&result.served, &result.received, "zeroclaw flood", false)?;
            eprintln!(
                "zeroclaw flood {run}/{}: {:.0} chunks/s, CPU {:.3} ms per KB, {} messages",
                options.runs,
                rate(&result.served, &result.received),
                per_kb(&result),
                result.received.messages
            );
            peer.push(result);
        }
    }

    let busy_after = cpu_busy(Duration::from_secs(1));
    let load_after = load_average();

    let rates: Vec<f64> = flood.iter().map(|r| rate(&r.served, &r.received)).collect();
    let rate_median = median(&rates);
    let prompt_ms: Vec<f64> = flood.iter().map(|r| r.prompt_ns as f64 / 1e6).collect();
    let cpu_us: Vec<f64> = flood
        .iter()
        .map(|r| r.cpu_ns as f64 / 1e3 / options.chunks as f64)
        .collect();
    let cpu_kb: Vec<f64> = flood.iter().map(per_kb).collect();
    let messages: Vec<f64> = flood.iter().map(|r| r.received.messages as f64).collect();
    let text_kb = flood
        .first()
        .map_or(0.0, |r| r.received.bytes as f64 / 1000.0);
    let flood_latency = Percentiles::of(
        flood
            .iter()
            .flat_map(|r| r.received.latencies.iter().copied())
            .collect(),
    );
    let paced_latency = Percentiles::of(paced.received.latencies.clone());
    let base_paced_latency = Percentiles::of(base_paced.latencies.clone());
    let base_flood_latency = Percentiles::of(base_flood.latencies.clone());
    let added = paced_latency.minus(&base_paced_latency);
    let paced_span = (paced.received.last_read - paced.served.first_write) as f64 / 1e9;
    let write_span = flood
        .iter()
        .map(|r| (r.served.last_write - r.served.first_write) as f64 / 1e9)
        .collect::<Vec<_>>();

    let busy = |b: Option<f64>| b.map_or("unknown".into(), |b| format!("{b:.0}%"));
    let mut md = String::new();
    writeln!(
        md,
        "Measured {} with `cargo bench --bench stream` (`benches/stream.rs`) against `{}`, work tree at {}.",
        started.round(jiff::Unit::Second)?,
        bin.strip_prefix(env!("CARGO_MANIFEST_DIR"))
            .unwrap_or(&bin)
            .display(),
        git_head()
    )?;
    writeln!(md)?;
    writeln!(
        md,
        "Machine: {cpus} CPUs ({}). Load average {load_before} before, {load_after} after; CPUs {} busy in the second before, {} in the second after. The server, the client and pincer share these CPUs.",
        cpu_model(),
        busy(busy_before),
        busy(busy_after)
    )?;
    writeln!(md)?;
    let runs_list = rates
        .iter()
        .map(|r| thousands(*r))
        .collect::<Vec<_>>()
        .join(", ");
    writeln!(md, "| measure | result |")?;
    writeln!(md, "| --- | ---: |")?;
    writeln!(
        md,
        "| flood, {} chunks: chunks/s reaching the client, median of {} ({runs_list}) | {}/s |",
        thousands(options.chunks as f64),
        options.runs,
        thousands(rate_median)
    )?;
    writeln!(
        md,
        "| flood: `session/prompt` sent → its response read, median | {:.0} ms |",
        median(&prompt_ms)
    )?;
    writeln!(
        md,
        "| flood: pincer's CPU time per chunk (user + system, all threads), median ({}) | {:.1} µs |",
        cpu_us
            .iter()
            .map(|c| format!("{c:.1}"))
            .collect::<Vec<_>>()
            .join(", "),
        median(&cpu_us)
    )?;
    writeln!(
        md,
        "| flood: pincer's CPU time per KB of reply text ({text_kb:.0} KB a run), median ({}) | {:.3} ms |",
        cpu_kb
            .iter()
            .map(|c| format!("{c:.3}"))
            .collect::<Vec<_>>()
            .join(", "),
        median(&cpu_kb)
    )?;
    writeln!(
        md,
        "| flood: `agent_message_chunk` notifications carrying the {} chunks, median ({}) | {} |",
        thousands(options.chunks as f64),
        messages
            .iter()
            .map(|m| thousands(*m))
            .collect::<Vec<_>>()
            .join(", "),
        thousands(median(&messages))
    )?;
    writeln!(
        md,
        "| flood: the server's own writing time for the chunks, median | {:.0} ms |",
        median(&write_span) * 1e3
    )?;
    writeln!(
        md,
        "| baseline flood (this process reading the socket, no pincer): chunks/s | {}/s |",
        thousands(rate(&base_flood_served, &base_flood))
    )?;
    writeln!(
        md,
        "| every chunk arrived once, in order | {} of {} flood runs, and the paced run |",
        flood.len(),
        options.runs
    )?;
    writeln!(
        md,
        "| paced (one chunk in flight): one `agent_message_chunk` each | {} chunks, {} messages |",
        thousands(paced.served.chunks as f64),
        thousands(paced.received.messages as f64)
    )?;
    writeln!(md)?;
    writeln!(
        md,
        "Latency per chunk, provider socket write → client pipe read:"
    )?;
    writeln!(md)?;
    writeln!(md, "| phase | chunks | p50 | p90 | p99 | p99.9 | max |")?;
    writeln!(md, "| --- | ---: | ---: | ---: | ---: | ---: | ---: |")?;
    writeln!(
        md,
        "| paced, through pincer (one chunk in flight, {:.1} s) | {} | {} |",
        paced_span,
        thousands(paced_latency.n as f64),
        paced_latency.cells()
    )?;
    writeln!(
        md,
        "| paced, baseline (socket read by this process) | {} | {} |",
        thousands(base_paced_latency.n as f64),
        base_paced_latency.cells()
    )?;
    writeln!(
        md,
        "| **paced, added by pincer** (pincer − baseline, rank by rank; not for the max) | — | **{}** | **{}** | **{}** | **{}** | — |",
        us(added[0]),
        us(added[1]),
        us(added[2]),
        us(added[3])
    )?;
    writeln!(
        md,
        "| flood, through pincer (queueing behind earlier chunks included; all {} runs) | {} | {} |",
        options.runs,
        thousands(flood_latency.n as f64),
        flood_latency.cells()
    )?;
    writeln!(
        md,
        "| flood, baseline (for information) | {} | {} |",
        thousands(base_flood_latency.n as f64),
        base_flood_latency.cells()
    )?;
    writeln!(md)?;
    let verdict = |ok: bool| if ok { "met" } else { "**not met**" };
    writeln!(md, "| target | result | verdict |")?;
    writeln!(md, "| --- | --- | --- |")?;
    writeln!(
        md,
        "| over {} chunks/s reaching the client | {}/s | {} |",
        thousands(TARGET_CHUNKS_PER_S),
        thousands(rate_median),
        verdict(rate_median > TARGET_CHUNKS_PER_S)
    )?;
    writeln!(
        md,
        "| under {TARGET_CPU_MS_PER_KB} ms of pincer's CPU per KB of reply text | {:.3} ms | {} |",
        median(&cpu_kb),
        verdict(median(&cpu_kb) < TARGET_CPU_MS_PER_KB)
    )?;
    writeln!(
        md,
        "| every chunk of every flood at the client within {} of the provider writing it | max {} | {} |",
        us(TARGET_FLOOD_MAX_NS as i64),
        us(flood_latency.max as i64),
        verdict(flood_latency.max <= TARGET_FLOOD_MAX_NS)
    )?;
    writeln!(
        md,
        "| p99 added latency under 1 ms (paced, pincer − baseline) | {} (raw {}) | {} |",
        us(added[2]),
        us(paced_latency.p99 as i64),
        verdict(added[2] < TARGET_ADDED_P99_NS as i64)
    )?;
    if !peer.is_empty() {
        let peer_rates: Vec<f64> = peer.iter().map(|r| rate(&r.served, &r.received)).collect();
        let peer_kb: Vec<f64> = peer.iter().map(per_kb).collect();
        let peer_messages: Vec<f64> = peer.iter().map(|r| r.received.messages as f64).collect();
        let peer_latency = Percentiles::of(
            peer.iter()
                .flat_map(|r| r.received.latencies.iter().copied())
                .collect(),
        );
        let ratio = rate_median / median(&peer_rates);
        writeln!(md)?;
        writeln!(
            md,
            "Beside ZeroClaw's ACP server (`zeroclaw acp`, `{}`), the same server and flood, its runs after pincer's:",
            options
                .zeroclaw
                .as_deref()
                .map(Path::display)
                .map(|d| d.to_string())
                .unwrap_or_default()
        )?;
        writeln!(md)?;
        writeln!(
            md,
            "| flood, {} chunks, median of {} | pincer | zeroclaw | pincer ÷ zeroclaw |",
            thousands(options.chunks as f64),
            options.runs
        )?;
        writeln!(md, "| --- | ---: | ---: | ---: |")?;
        writeln!(
            md,
            "| chunks/s reaching the client (zeroclaw: {}) | {}/s | {}/s | {:.1}× |",
            peer_rates
                .iter()
                .map(|r| thousands(*r))
                .collect::<Vec<_>>()
                .join(", "),
            thousands(rate_median),
            thousands(median(&peer_rates)),
            ratio
        )?;
        writeln!(
            md,
            "| CPU per KB of reply text | {:.3} ms | {:.3} ms | {:.1}× less |",
            median(&cpu_kb),
            median(&peer_kb),
            median(&peer_kb) / median(&cpu_kb)
        )?;
        writeln!(
            md,
            "| `agent_message_chunk` notifications | {} | {} | — |",
            thousands(median(&messages)),
            thousands(median(&peer_messages))
        )?;
        writeln!(
            md,
            "| latency p50 / p99 (queueing included) | {} / {} | {} / {} | — |",
            us(flood_latency.p50 as i64),
            us(flood_latency.p99 as i64),
            us(peer_latency.p50 as i64),
            us(peer_latency.p99 as i64)
        )?;
        writeln!(md)?;
        writeln!(
            md,
            "Target: the stream at least {TARGET_PEER_RATIO}× ZeroClaw's: {:.1}×, {}.",
            ratio,
            verdict(ratio >= TARGET_PEER_RATIO)
        )?;
    }
    print!("{md}");
    if let Some(path) = &options.write {
        write_section(path, &md)?;
        eprintln!("wrote {}", path.display());
    }
    Ok(())
}

/// Puts `body` between the markers in `path`, appending a section if they are missing.
fn write_section(path: &Path, body: &str) -> Result<()> {
    let section = format!("{START_MARK}\n{body}{END_MARK}\n");
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let text = match (text.find(START_MARK), text.find(END_MARK)) {
        (Some(start), Some(end)) if end > start => {
            let after = text[end + END_MARK.len()..].trim_start_matches('\n');
            format!("{}{section}{after}", &text[..start])
        }
        _ => format!(
            "{}\n\n## Streaming: provider socket to ACP client\n\n{section}",
            text.trim_end_matches('\n')
        ),
    };
    std::fs::write(path, text)?;
    Ok(())
}
