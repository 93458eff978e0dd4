#![allow(
    clippy::print_stdout,
    reason = "a benchmark's report is its standard output"
)]
#![allow(clippy::unwrap_used, clippy::expect_used)] // a benchmark: a panic is a failed run
//! ACP over WebSocket (`pincer serve --http`, `/acp`) against ACP on stdio
//! (`pincer acp`), in the same run (issue 17: the WebSocket adds under 1 ms
//! p99 per streamed chunk).
//!
//! `cargo bench --bench acp_ws [-- --prompts N --chunks C --stream S]` starts
//! each transport in a scratch directory and measures:
//! - **per-chunk latency**: a loopback OpenAI-compatible model in this
//!   process streams N replies of C chunks, 1 ms apart, each chunk naming
//!   itself; for each chunk, the time from this process writing it to the
//!   model's socket to this process reading it from the ACP transport
//!   (p50, p99, max). Both transports run the same provider, loop and
//!   conversion code; the difference is the transport (and `pincer serve`
//!   around it);
//! - **stream**: one scripted reply of S chunks handed over one at a time,
//!   from writing the prompt to reading the last chunk, per chunk.
//!
//! Prints a Markdown table (docs/benchmarks.md) and the machine's load.

use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use futures::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;

const TOKEN: &str = "bench-token-0123456789abcdef";
const TARGET_ADDED_P99_MS: f64 = 1.0;

fn arg(name: &str, default: usize) -> usize {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// One ACP client connection, whatever carries it.
#[allow(clippy::large_enum_variant)]
enum Conn {
    Stdio {
        stdin: tokio::process::ChildStdin,
        lines: tokio::io::Lines<BufReader<tokio::process::ChildStdout>>,
    },
    Ws(
        tokio_tungstenite::WebSocketStream<
            tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>,
        >,
    ),
}

impl Conn {
    async fn send(&mut self, message: &Value) {
        match self {
            Conn::Stdio { stdin, .. } => {
                let mut line = message.to_string();
                line.push('\n');
                stdin.write_all(line.as_bytes()).await.unwrap();
                stdin.flush().await.unwrap();
            }
            Conn::Ws(socket) => socket
                .send(Message::text(message.to_string()))
                .await
                .unwrap(),
        }
    }

    async fn recv(&mut self) -> Value {
        match self {
            Conn::Stdio { lines, .. } => {
                let line = lines
                    .next_line()
                    .await
                    .unwrap()
                    .expect("pincer's stdout open");
                serde_json::from_str(&line).unwrap()
            }
            Conn::Ws(socket) => loop {
                // Pings, pongs and the like carry no JSON-RPC message.
                if let Message::Text(text) = socket.next().await.expect("the socket open").unwrap()
                {
                    return serde_json::from_str(&text).unwrap();
                }
            },
        }
    }

    /// Sends a request and reads up to its response.
    async fn call(&mut self, id: u64, method: &str, params: Value) -> Value {
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))
            .await;
        loop {
            let message = self.recv().await;
            if message["id"] == id && message.get("method").is_none() {
                assert!(message.get("result").is_some(), "{method}: {message}");
                return message;
            }
        }
    }
}

/// A transport under test, with its process.
struct Transport {
    child: tokio::process::Child,
    conn: Conn,
}

fn command(dir: &Path) -> tokio::process::Command {
    let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_pincer"));
    command
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("HOME", dir)
        .env("PINCER_DATA_DIR", dir.join("data"))
        .env("XDG_CONFIG_HOME", dir.join("config"))
        .env("RUST_LOG", "warn")
        .env("OPENAI_API_KEY", "sk-bench")
        .stderr(Stdio::null())
        .kill_on_drop(true);
    command
}

fn script_args(script: Option<&Path>) -> Vec<std::ffi::OsString> {
    match script {
        Some(script) => vec!["--script".into(), script.into()],
        None => Vec::new(),
    }
}

async fn stdio(dir: &Path, script: Option<&Path>) -> Transport {
    let mut child = command(dir)
        .arg("acp")
        .args(script_args(script))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let stdin = child.stdin.take().unwrap();
    let lines = BufReader::new(child.stdout.take().unwrap()).lines();
    Transport {
        child,
        conn: Conn::Stdio { stdin, lines },
    }
}

async fn websocket(dir: &Path, script: Option<&Path>) -> Transport {
    let ready = dir.join("ready");
    let _ = std::fs::remove_file(&ready);
    let child = command(dir)
        .env("PINCER_HTTP_TOKEN", TOKEN)
        .args(["serve", "--http", "127.0.0.1:0", "--ready-file"])
        .arg(&ready)
        .args(script_args(script))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let started = Instant::now();
    let addr = loop {
        if let Ok(text) = std::fs::read_to_string(&ready) {
            break text.trim().to_owned();
        }
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "the server did not start"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    };
    let mut request = format!("ws://{addr}/acp").into_client_request().unwrap();
    request
        .headers_mut()
        .insert("authorization", format!("Bearer {TOKEN}").parse().unwrap());
    let (socket, _) = tokio_tungstenite::connect_async(request).await.unwrap();
    // Small frames each way: as an editor would, no batching.
    let tcp = match socket.get_ref() {
        tokio_tungstenite::MaybeTlsStream::Plain(tcp) => tcp,
        tokio_tungstenite::MaybeTlsStream::Rustls(_) => unreachable!("plain ws"),
        // The enum is non-exhaustive.
        #[allow(
            clippy::wildcard_enum_match_arm,
            clippy::match_wildcard_for_single_variants
        )]
        _ => unreachable!("plain ws"),
    };
    tcp.set_nodelay(true).unwrap();
    Transport {
        child,
        conn: Conn::Ws(socket),
    }
}

async fn open_session(conn: &mut Conn, cwd: &Path) -> String {
    conn.call(
        1,
        "initialize",
        json!({"protocolVersion": 1, "clientCapabilities": {}}),
    )
    .await;
    let created = conn
        .call(2, "session/new", json!({"cwd": cwd, "mcpServers": []}))
        .await;
    created["result"]["sessionId"].as_str().unwrap().to_owned()
}

fn prompt(id: u64, session: &str) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "session/prompt",
           "params": {"sessionId": session, "prompt": [{"type": "text", "text": "go"}]}})
}

fn is_chunk(message: &Value) -> bool {
    message["params"]["update"]["sessionUpdate"] == "agent_message_chunk"
}

/// When each chunk left the loopback model, by its name (`p3c17`).
type Sent = std::sync::Arc<std::sync::Mutex<std::collections::HashMap<String, Instant>>>;

/// A loopback OpenAI-compatible model: every request is answered with
/// `chunks` chunks 1 ms apart, named `p{request}c{k} `, then a stop.
async fn model(chunks: usize, sent: Sent) -> std::net::SocketAddr {
    use tokio::io::AsyncReadExt;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        let mut request = 0usize;
        loop {
            let (mut socket, _) = listener.accept().await.unwrap();
            socket.set_nodelay(true).unwrap();
            let n = request;
            request += 1;
            let sent = sent.clone();
            tokio::spawn(async move {
                // The request: headers, then the body its length gives.
                let mut buf = Vec::new();
                let mut part = [0u8; 65536];
                loop {
                    let read = socket.read(&mut part).await.unwrap();
                    buf.extend_from_slice(&part[..read]);
                    if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                        let head = String::from_utf8_lossy(&buf[..end]).to_ascii_lowercase();
                        let length: usize = head
                            .lines()
                            .find_map(|l| l.strip_prefix("content-length:"))
                            .map(|v| v.trim().parse().unwrap())
                            .unwrap_or(0);
                        if buf.len() >= end + 4 + length {
                            break;
                        }
                    }
                    if read == 0 {
                        return;
                    }
                }
                socket
                    .write_all(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\n")
                    .await
                    .unwrap();
                let chunk = |delta: Value, finish: Value| {
                    format!(
                        "data: {}\n\n",
                        json!({"id": "c", "object": "chat.completion.chunk", "created": 0, "model": "m",
                               "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})
                    )
                };
                for k in 0..chunks {
                    let name = format!("p{n}c{k} ");
                    let line = chunk(json!({"content": name}), Value::Null);
                    sent.lock().unwrap().insert(name, Instant::now());
                    socket.write_all(line.as_bytes()).await.unwrap();
                    tokio::time::sleep(Duration::from_millis(1)).await;
                }
                let end = chunk(json!({}), json!("stop")) + "data: [DONE]\n\n";
                let _ = socket.write_all(end.as_bytes()).await;
                let _ = socket.shutdown().await;
            });
        }
    });
    addr
}

/// Per-chunk latencies of `prompts` replies, in ms: from the model writing
/// each chunk to reading it here.
async fn latencies(conn: &mut Conn, session: &str, prompts: usize, sent: &Sent) -> Vec<f64> {
    let mut times = Vec::new();
    for n in 0..prompts {
        let id = 100 + n as u64;
        conn.send(&prompt(id, session)).await;
        loop {
            let message = conn.recv().await;
            let arrived = Instant::now();
            if is_chunk(&message) {
                // A chunk may carry several names when they came at once.
                let text = message["params"]["update"]["content"]["text"]
                    .as_str()
                    .unwrap();
                let sent = sent.lock().unwrap();
                for name in text.split_inclusive(' ') {
                    let at = sent.get(name).expect("a chunk the model sent");
                    times.push((arrived - *at).as_secs_f64() * 1000.0);
                }
            }
            if message["id"] == id && message.get("method").is_none() {
                assert_eq!(message["result"]["stopReason"], "end_turn", "{message}");
                break;
            }
        }
    }
    times
}

/// One reply of `chunks` chunks: ms per chunk from send to the last.
async fn stream(conn: &mut Conn, session: &str, chunks: usize) -> f64 {
    let sent = Instant::now();
    conn.send(&prompt(99, session)).await;
    let mut seen = 0;
    loop {
        let message = conn.recv().await;
        if is_chunk(&message) {
            seen += 1;
        }
        if message["id"] == 99 && message.get("method").is_none() {
            break;
        }
    }
    assert_eq!(seen, chunks, "every chunk on its own");
    sent.elapsed().as_secs_f64() * 1000.0 / chunks as f64
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

struct Figures {
    p50: f64,
    p99: f64,
    max: f64,
    per_chunk: f64,
}

async fn measure(ws: bool, prompts: usize, chunks: usize, streamed: usize) -> Figures {
    let dir = tempfile::tempdir().unwrap();
    let workspace = dir.path().join("work");
    std::fs::create_dir_all(&workspace).unwrap();
    // Per-chunk latency through the loopback model.
    let sent = Sent::default();
    let addr = model(chunks, sent.clone()).await;
    let config = dir.path().join("config/pincer/config.toml");
    std::fs::create_dir_all(config.parent().unwrap()).unwrap();
    std::fs::write(
        &config,
        format!("provider = \"oa\"\n[providers.oa]\nkind = \"openai\"\nbase_url = \"http://{addr}/v1\"\nmodels = [\"m\"]\n"),
    )
    .unwrap();
    // The script only answers the streaming measure below.
    let script = dir.path().join("stream.jsonl");
    std::fs::write(
        &script,
        json!([{"repeat": {"count": streamed, "text": "x", "apart": true}}]).to_string() + "\n",
    )
    .unwrap();
    let mut transport = if ws {
        websocket(dir.path(), None).await
    } else {
        stdio(dir.path(), None).await
    };
    let session = open_session(&mut transport.conn, &workspace).await;
    // Warm up: the first reply pays for what is loaded once.
    let _ = latencies(&mut transport.conn, &session, 1, &sent).await;
    let mut times = latencies(&mut transport.conn, &session, prompts, &sent).await;
    transport.child.kill().await.unwrap();
    times.sort_by(f64::total_cmp);
    std::fs::remove_file(&config).unwrap();

    let data = dir.path().join("data");
    let _ = std::fs::remove_dir_all(&data);
    let mut transport = if ws {
        websocket(dir.path(), Some(&script)).await
    } else {
        stdio(dir.path(), Some(&script)).await
    };
    let session = open_session(&mut transport.conn, &workspace).await;
    let per_chunk = stream(&mut transport.conn, &session, streamed).await;
    transport.child.kill().await.unwrap();
    Figures {
        p50: percentile(&times, 50.0),
        p99: percentile(&times, 99.0),
        max: *times.last().unwrap(),
        per_chunk,
    }
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let prompts = arg("--prompts", 5);
    let chunks = arg("--chunks", 200);
    let streamed = arg("--stream", 20_000);
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    println!(
        "machine load (1, 5, 15 min) at start: {}",
        load.split_whitespace()
            .take(3)
            .collect::<Vec<_>>()
            .join(" ")
    );
    println!(
        "per-chunk latency: {prompts} replies of {chunks} chunks 1 ms apart from a loopback model, model socket to ACP client; stream: one scripted reply of {streamed} chunks handed over one at a time\n"
    );
    // Interleaved, twice, so a change in the machine's load hits both.
    let mut stdio_runs = Vec::new();
    let mut ws_runs = Vec::new();
    for _ in 0..2 {
        stdio_runs.push(measure(false, prompts, chunks, streamed).await);
        ws_runs.push(measure(true, prompts, chunks, streamed).await);
    }
    let best = |runs: &[Figures]| -> Figures {
        let by_p99 = runs.iter().min_by(|a, b| a.p99.total_cmp(&b.p99)).unwrap();
        Figures {
            p50: by_p99.p50,
            p99: by_p99.p99,
            max: by_p99.max,
            per_chunk: runs
                .iter()
                .map(|r| r.per_chunk)
                .fold(f64::INFINITY, f64::min),
        }
    };
    let (s, w) = (best(&stdio_runs), best(&ws_runs));
    println!("| transport | chunk latency p50 | p99 | max | stream, per chunk |");
    println!("| --- | --- | --- | --- | --- |");
    for (name, f) in [("stdio (`pincer acp`)", &s), ("WebSocket (`/acp`)", &w)] {
        println!(
            "| {name} | {:.3} ms | {:.3} ms | {:.3} ms | {:.4} ms |",
            f.p50, f.p99, f.max, f.per_chunk
        );
    }
    let added = w.p99 - s.p99;
    println!(
        "\nadded by the WebSocket: p50 {:+.3} ms, p99 {:+.3} ms (target < {TARGET_ADDED_P99_MS} ms: {}), per streamed chunk {:+.4} ms",
        w.p50 - s.p50,
        added,
        if added < TARGET_ADDED_P99_MS {
            "met"
        } else {
            "NOT met"
        },
        w.per_chunk - s.per_chunk
    );
}
