//! A frame fuzzer through the real binary: mutated frames of every kind
//! (random bytes, invalid UTF-8, truncated and deeply nested JSON, odd ids,
//! every ACP method with mutated params, made-up session ids, huge strings),
//! with a liveness probe every 1,000 frames. Every answered request must
//! carry its id exactly as written (compared as raw text), no error text may
//! exceed 2 KB, every message must match the ACP schema, and peak resident
//! memory must stay under a bound.
//!
//! `PINCER_FUZZ_FRAMES` sets the frame count (100,000 by default),
//! `PINCER_FUZZ_SEED` the seed; the soak benchmark in
//! `scripts/bench_acp_soak.py` runs the same kinds of frames a million times
//! against the release binary.

use std::collections::HashSet;
use std::io::{BufRead, BufReader, Write};
use std::process::Stdio;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use crate::support::{Schema, TIMEOUT, TestDir};
use serde_json::value::RawValue;
use serde_json::{Value, json};

/// Peak resident memory allowed for the debug binary through the whole run.
/// Before per-session queues were freed, 100,000 frames naming made-up
/// sessions alone took about 800 MiB.
const PEAK_RSS_LIMIT_KIB: u64 = 96 * 1024;

/// The longest error `message` (and `data`, as JSON) an answer may carry.
const ERROR_TEXT_LIMIT: usize = 2048;

const METHODS: [&str; 17] = [
    "initialize",
    "authenticate",
    "session/new",
    "session/load",
    "session/resume",
    "session/list",
    "session/close",
    "session/prompt",
    "session/set_config_option",
    "session/set_mode",
    "_pincer/runs/list",
    "_pincer/runs/get",
    "_pincer/runs/tape",
    "_pincer/grants/list",
    "_pincer/context",
    "session/cancel",
    "$/cancel_request",
];

/// What the generator knows about the process it talks to.
struct World {
    rng: fastrand::Rng,
    /// A real session, and the workspace it was opened in.
    session: String,
    workspace: String,
    next_id: u64,
}

/// One frame and what its answer must look like.
struct Frame {
    bytes: Vec<u8>,
    /// The id's raw text when the frame is a request with a valid id.
    id: Option<String>,
}

impl World {
    fn huge(&mut self) -> String {
        let len = if self.rng.u8(..) == 0 {
            1 << 20
        } else {
            self.rng.usize(200..5000)
        };
        let c = self.rng.alphanumeric();
        std::iter::repeat_n(c, len).collect()
    }

    fn made_up_session(&mut self) -> String {
        format!("ses_{:016x}", self.rng.u64(..))
    }

    /// A value of any JSON type, sometimes odd.
    fn any_value(&mut self, depth: u32) -> Value {
        match self.rng.u8(..12) {
            0 => Value::Null,
            1 => json!(self.rng.bool()),
            2 => json!(self.rng.i64(..)),
            3 => json!(self.rng.f64() * 1e300),
            4 => json!(self.huge()),
            5 => json!(self.made_up_session()),
            6 => json!("../relative/path"),
            7 if depth < 4 => Value::Array((0..3).map(|_| self.any_value(depth + 1)).collect()),
            8 if depth < 4 => json!({ "sessionId": self.any_value(depth + 1) }),
            9 => json!(self.session.clone()),
            10 => json!(""),
            _ => json!("x"),
        }
    }

    /// Valid-looking params for a method, before mutation.
    fn template(&mut self, method: &str) -> Value {
        let session = if self.rng.bool() {
            self.session.clone()
        } else {
            self.made_up_session()
        };
        match method {
            "initialize" => {
                json!({"protocolVersion": 1, "clientCapabilities": {"fs": {"readTextFile": false}}})
            }
            "authenticate" => json!({"methodId": "none"}),
            "session/new" => json!({"cwd": "relative/dir", "mcpServers": []}),
            "session/load" | "session/resume" => {
                json!({"sessionId": session, "cwd": self.workspace, "mcpServers": []})
            }
            "session/list" => json!({"cursor": "1:ses_x"}),
            "session/close" => json!({"sessionId": self.made_up_session()}),
            "session/prompt" => {
                json!({"sessionId": session, "prompt": [{"type": "audio", "data": "", "mimeType": "audio/wav"}]})
            }
            "session/set_config_option" => {
                json!({"sessionId": session, "configId": "mode", "value": "nonsense"})
            }
            "session/set_mode" => json!({"sessionId": session, "modeId": "nonsense"}),
            "_pincer/runs/list" | "_pincer/grants/list" | "_pincer/context" => {
                json!({"sessionId": session})
            }
            "_pincer/runs/get" | "_pincer/runs/tape" => json!({"runId": "run_made_up"}),
            "session/cancel" => json!({"sessionId": session}),
            "$/cancel_request" => json!({"requestId": self.rng.i64(..)}),
            _ => json!({}),
        }
    }

    /// Mutates params: a field dropped, replaced by any value, or added; or
    /// the params replaced whole.
    fn mutate(&mut self, mut params: Value) -> Value {
        for _ in 0..self.rng.usize(0..3) {
            let Some(object) = params.as_object_mut() else {
                break;
            };
            let keys: Vec<String> = object.keys().cloned().collect();
            match self.rng.u8(..4) {
                0 if !keys.is_empty() => {
                    object.remove(&keys[self.rng.usize(..keys.len())]);
                }
                1 if !keys.is_empty() => {
                    let key = keys[self.rng.usize(..keys.len())].clone();
                    let value = self.any_value(0);
                    params[key] = value;
                }
                2 => {
                    let value = self.any_value(0);
                    params["unknownField"] = value;
                }
                _ => params = self.any_value(0),
            }
        }
        params
    }

    fn valid_id(&mut self) -> String {
        self.next_id += 1;
        let n = self.next_id;
        match self.rng.u8(..6) {
            0 => format!("{}", i64::MAX - n as i64),
            1 => format!("-{n}"),
            2 => format!("\"f{n}\""),
            3 => format!("\"\\u0066{n}\\n\""),
            4 => format!("\"{}{n}\"", "é".repeat(3)),
            _ => format!("{n}"),
        }
    }

    fn invalid_id(&mut self) -> &'static str {
        const ODD: [&str; 10] = [
            "123456789012345678901234567890",
            "-9223372036854775809",
            "9223372036854775808",
            "1.5",
            "1e3",
            "-0.0",
            "true",
            "[1]",
            "{\"a\":1}",
            "1E400",
        ];
        ODD[self.rng.usize(..ODD.len())]
    }

    fn frame(&mut self) -> Frame {
        let kind = self.rng.u8(..100);
        match kind {
            // Random bytes, newlines excluded (one frame, one line).
            0..=4 => {
                let len = self.rng.usize(0..200);
                let bytes = (0..len)
                    .map(|_| self.rng.u8(..))
                    .map(|b| if b == b'\n' { b' ' } else { b })
                    .collect();
                Frame { bytes, id: None }
            }
            // Invalid UTF-8 inside a string of a request.
            5..=9 => {
                let mut bytes =
                    br#"{"jsonrpc":"2.0","id":1,"method":"session/list","params":{"cursor":""#
                        .to_vec();
                bytes.extend([0xff, 0xfe, 0xc3, 0x28]);
                bytes.extend(br#""}}"#);
                Frame { bytes, id: None }
            }
            // A request cut short.
            10..=14 => {
                let text = json!({"jsonrpc": "2.0", "id": 7, "method": "session/new", "params": {"cwd": "/x", "mcpServers": []}}).to_string();
                let cut = self.rng.usize(1..text.len());
                Frame {
                    bytes: text.as_bytes()[..cut].to_vec(),
                    id: None,
                }
            }
            // Deeply nested JSON, in params or alone.
            15..=19 => {
                let depth = self.rng.usize(1..20_000);
                let nested = format!("{}{}", "[".repeat(depth), "]".repeat(depth));
                let id = self.valid_id();
                let in_params = self.rng.bool();
                let text = if in_params {
                    format!(
                        r#"{{"jsonrpc":"2.0","id":{id},"method":"session/prompt","params":{nested}}}"#
                    )
                } else {
                    nested
                };
                Frame {
                    bytes: text.into_bytes(),
                    id: in_params.then_some(id),
                }
            }
            // A request with an id ACP does not allow.
            20..=29 => {
                let id = self.invalid_id();
                let method = METHODS[self.rng.usize(..METHODS.len())];
                Frame {
                    bytes: format!(
                        r#"{{"jsonrpc":"2.0","id":{id},"method":"{method}","params":{{}}}}"#
                    )
                    .into_bytes(),
                    id: None,
                }
            }
            // A response of the client's, to an id Pincer never used or
            // one it did; never answered.
            30..=34 => {
                let body = match self.rng.u8(..4) {
                    0 => "\"result\":null",
                    1 => "\"result\":{}",
                    2 => "\"error\":{\"code\":-1,\"message\":\"no\"}",
                    _ => "\"error\":null",
                };
                let id = if self.rng.bool() {
                    self.rng.u64(..1000).to_string()
                } else {
                    self.invalid_id().to_owned()
                };
                Frame {
                    bytes: format!(r#"{{"jsonrpc":"2.0","id":{id},{body}}}"#).into_bytes(),
                    id: None,
                }
            }
            // A huge method name.
            35 => {
                let id = self.valid_id();
                let method = self.huge();
                Frame {
                    bytes: format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"{method}"}}"#)
                        .into_bytes(),
                    id: Some(id),
                }
            }
            // Notifications naming made-up sessions (cost nothing).
            36..=54 => {
                let method = if self.rng.bool() {
                    "session/cancel"
                } else {
                    "session/anything"
                };
                let session = self.made_up_session();
                Frame {
                    bytes: json!({"jsonrpc": "2.0", "method": method, "params": {"sessionId": session}})
                        .to_string()
                        .into_bytes(),
                    id: None,
                }
            }
            // Every method, params mutated; notifications for the two that are.
            _ => {
                let method = METHODS[self.rng.usize(..METHODS.len())];
                let template = self.template(method);
                let params = self.mutate(template);
                let notification = method == "session/cancel" || method == "$/cancel_request";
                if notification {
                    Frame {
                        bytes: json!({"jsonrpc": "2.0", "method": method, "params": params})
                            .to_string()
                            .into_bytes(),
                        id: None,
                    }
                } else {
                    let id = self.valid_id();
                    let params = params.to_string();
                    Frame {
                        bytes: format!(
                            r#"{{"jsonrpc":"2.0","id":{id},"method":"{method}","params":{params}}}"#
                        )
                        .into_bytes(),
                        id: Some(id),
                    }
                }
            }
        }
    }
}

/// A line from the agent: its raw id text, and the message.
struct Received {
    raw_id: Option<String>,
    message: Value,
}

#[derive(serde::Deserialize)]
struct RawId<'a> {
    #[serde(borrow, default)]
    id: Option<&'a RawValue>,
}

fn read_lines(stdout: std::process::ChildStdout, tx: mpsc::Sender<Received>) {
    let schema = Schema::load();
    let mut reader = BufReader::new(stdout);
    let mut line = String::new();
    loop {
        line.clear();
        match reader.read_line(&mut line) {
            Ok(0) | Err(_) => return,
            Ok(_) => {}
        }
        let message: Value = serde_json::from_str(&line)
            .unwrap_or_else(|e| panic!("pincer wrote a line that is not JSON ({e}): {line:?}"));
        schema.check_agent_message(&message);
        let raw_id = serde_json::from_str::<RawId>(&line)
            .unwrap()
            .id
            .map(|raw| raw.get().to_owned());
        if tx.send(Received { raw_id, message }).is_err() {
            return;
        }
    }
}

fn status_kib(pid: u32, field: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let line = status
        .lines()
        .find(|l| l.starts_with(field))
        .unwrap_or_else(|| panic!("no {field} in /proc/{pid}/status"));
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

/// Checks one message from the agent against what was sent.
struct Checker {
    /// Raw ids of requests sent and not answered yet.
    sent: HashSet<String>,
    answered: u64,
    errors: u64,
}

impl Checker {
    fn check(&mut self, received: &Received) {
        let message = &received.message;
        if message.get("method").is_some() {
            return;
        }
        self.answered += 1;
        if let Some(error) = message.get("error") {
            self.errors += 1;
            let text = error["message"].as_str().unwrap_or_default();
            assert!(
                text.len() <= ERROR_TEXT_LIMIT,
                "error message of {} bytes: {}…",
                text.len(),
                &text[..200.min(text.len())]
            );
            let data = error.get("data").map(Value::to_string).unwrap_or_default();
            assert!(
                data.len() <= ERROR_TEXT_LIMIT,
                "error data of {} bytes: {}…",
                data.len(),
                data.chars().take(200).collect::<String>()
            );
        }
        let raw = received.raw_id.as_deref().unwrap_or("null");
        if raw != "null" {
            assert!(
                self.sent.remove(raw),
                "an answer whose id is not one sent (or answered twice): {}",
                raw.chars().take(200).collect::<String>()
            );
        }
    }
}

#[test]
fn mutated_frames_never_break_the_server() {
    let frames: usize = std::env::var("PINCER_FUZZ_FRAMES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(100_000);
    let seed: u64 = std::env::var("PINCER_FUZZ_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0x5eed_acb1);
    let dir = TestDir::new();
    let workspace = dir.workspace();
    let stderr = std::fs::File::create(dir.path().join("stderr.log")).unwrap();
    // Logs at the default level: debug logs of a million frames would be
    // what the test measures.
    let mut child = dir
        .command()
        .env("RUST_LOG", "pincer=info")
        .arg("acp")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(stderr)
        .spawn()
        .unwrap();
    let pid = child.id();
    let mut stdin = std::io::BufWriter::new(child.stdin.take().unwrap());
    let (tx, rx) = mpsc::channel();
    let stdout = child.stdout.take().unwrap();
    let reader = std::thread::spawn(move || read_lines(stdout, tx));
    let mut checker = Checker {
        sent: HashSet::new(),
        answered: 0,
        errors: 0,
    };

    // One call, answered, with everything before it checked.
    let call = |stdin: &mut std::io::BufWriter<std::process::ChildStdin>,
                checker: &mut Checker,
                id: &str,
                message: Value|
     -> Value {
        let line = message.to_string();
        stdin.write_all(line.as_bytes()).unwrap();
        stdin.write_all(b"\n").unwrap();
        stdin.flush().unwrap();
        checker.sent.insert(id.to_owned());
        let deadline = Instant::now() + TIMEOUT;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let received = rx
                .recv_timeout(left)
                .unwrap_or_else(|_| panic!("no answer to {id} within {TIMEOUT:?}"));
            let ours =
                received.raw_id.as_deref() == Some(id) && received.message.get("method").is_none();
            checker.check(&received);
            if ours {
                return received.message;
            }
        }
    };

    let opened = call(
        &mut stdin,
        &mut checker,
        "\"open\"",
        json!({"jsonrpc": "2.0", "id": "open", "method": "session/new",
               "params": {"cwd": workspace, "mcpServers": []}}),
    );
    let session = opened["result"]["sessionId"].as_str().unwrap().to_owned();
    let mut world = World {
        rng: fastrand::Rng::with_seed(seed),
        session,
        workspace: workspace.to_str().unwrap().to_owned(),
        next_id: 0,
    };

    let started = Instant::now();
    for n in 0..frames {
        let frame = world.frame();
        if let Some(id) = frame.id {
            checker.sent.insert(id);
        }
        stdin.write_all(&frame.bytes).unwrap();
        stdin.write_all(b"\n").unwrap();
        // What came meanwhile is checked as it comes.
        while let Ok(received) = rx.try_recv() {
            checker.check(&received);
        }
        if (n + 1) % 1000 == 0 {
            let id = format!("\"probe-{n}\"");
            let answer = call(
                &mut stdin,
                &mut checker,
                &id,
                json!({"jsonrpc": "2.0", "id": format!("probe-{n}"), "method": "session/list", "params": {}}),
            );
            assert!(
                answer["result"]["sessions"].is_array(),
                "probe after {} frames: {answer}",
                n + 1
            );
        }
    }
    let elapsed = started.elapsed();
    let peak = status_kib(pid, "VmHWM:");
    eprintln!(
        "{frames} frames in {elapsed:?} ({:.0}/s), {} answers ({} errors), peak RSS {} KiB",
        frames as f64 / elapsed.as_secs_f64(),
        checker.answered,
        checker.errors,
        peak
    );
    assert!(
        peak < PEAK_RSS_LIMIT_KIB,
        "peak RSS {peak} KiB exceeds {PEAK_RSS_LIMIT_KIB} KiB"
    );

    drop(stdin);
    let deadline = Instant::now() + TIMEOUT;
    let status = loop {
        while let Ok(received) = rx.try_recv() {
            checker.check(&received);
        }
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        assert!(Instant::now() < deadline, "pincer did not exit");
        std::thread::sleep(Duration::from_millis(10));
    };
    reader.join().unwrap();
    while let Ok(received) = rx.try_recv() {
        checker.check(&received);
    }
    assert!(status.success(), "{status:?}");
}

/// 100,000 notifications and requests naming sessions that never existed
/// leave resident memory where it was: an unknown session costs nothing
/// beyond its error reply.
#[test]
fn made_up_session_ids_cost_nothing() {
    let dir = TestDir::new();
    let stderr = std::fs::File::create(dir.path().join("stderr.log")).unwrap();
    let mut child = dir
        .command()
        .env("RUST_LOG", "pincer=info")
        .arg("acp")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(stderr)
        .spawn()
        .unwrap();
    let pid = child.id();
    let mut stdin = std::io::BufWriter::new(child.stdin.take().unwrap());
    let (tx, rx) = mpsc::channel();
    let stdout = child.stdout.take().unwrap();
    std::thread::spawn(move || read_lines(stdout, tx));
    let round = |stdin: &mut std::io::BufWriter<std::process::ChildStdin>, start: u64| {
        for n in start..start + 50_000 {
            let session = format!("ses_made_up_{n}");
            let line = if n % 2 == 0 {
                json!({"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": session}})
            } else {
                json!({"jsonrpc": "2.0", "id": n, "method": "session/set_mode", "params": {"sessionId": session, "modeId": "full"}})
            };
            stdin.write_all(line.to_string().as_bytes()).unwrap();
            stdin.write_all(b"\n").unwrap();
        }
        let probe = format!("probe-{start}");
        stdin
            .write_all(
                json!({"jsonrpc": "2.0", "id": probe, "method": "session/list", "params": {}})
                    .to_string()
                    .as_bytes(),
            )
            .unwrap();
        stdin.write_all(b"\n").unwrap();
        stdin.flush().unwrap();
        // Requests are handled concurrently, so the probe's answer may
        // overtake the last few errors: wait for all of them.
        let mut answered = 0;
        let mut probed = false;
        while !probed || answered < 25_000 {
            let received = rx.recv_timeout(TIMEOUT).expect("an answer");
            if received.message["id"] == probe {
                probed = true;
                continue;
            }
            assert_eq!(
                received.message["error"]["code"], -32002,
                "{}",
                received.message
            );
            answered += 1;
        }
        assert_eq!(answered, 25_000);
    };
    // Warm up: buffers and pools reach their working size.
    round(&mut stdin, 0);
    let before = status_kib(pid, "VmRSS:");
    round(&mut stdin, 50_000);
    round(&mut stdin, 100_000);
    let after = status_kib(pid, "VmRSS:");
    eprintln!("VmRSS {before} KiB before, {after} KiB after 100,000 frames");
    // About 8 KiB per made-up session when each got a queue and a task:
    // 800 MiB. Allow a little allocator noise.
    assert!(
        after < before + 4 * 1024,
        "VmRSS grew from {before} KiB to {after} KiB"
    );
    drop(stdin);
    assert!(child.wait().unwrap().success());
}
