//! Several `pincer serve --http` instances on one PostgreSQL database
//! (`docs/scale-out.md`), through the real binary: prompts spread across
//! instances, streams and approvals across instances, an instance killed
//! or stopped mid-run, and the database restarted mid-run.

use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::support::postgres::{self, PgServer};
use crate::support::{TIMEOUT, TestDir};

const TOKEN: &str = "scale-out-token-0123456789abcdef";

/// Short leases, so a lost instance is found out within seconds.
const CONFIG: &str = "session_lease_secs = 2\n";

/// One `pincer serve --http 127.0.0.1:0` on the shared database, with a
/// data directory of its own.
struct Instance {
    child: Child,
    addr: String,
    dir: TestDir,
    client: reqwest::Client,
}

impl Instance {
    fn start(url: &str, script: &Path) -> Self {
        let dir = TestDir::new();
        dir.write_config(CONFIG);
        let ready = dir.path().join("ready");
        let child = dir
            .command()
            .env("PINCER_STORE_URL", url)
            .env("PINCER_HTTP_TOKEN", TOKEN)
            .args(["serve", "--http", "127.0.0.1:0", "--ready-file"])
            .arg(&ready)
            .arg("--script")
            .arg(script)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(dir.path().join("stderr.log")).unwrap())
            .spawn()
            .unwrap();
        let started = Instant::now();
        let addr = loop {
            if let Ok(text) = std::fs::read_to_string(&ready) {
                break text.trim().to_owned();
            }
            assert!(
                started.elapsed() < TIMEOUT,
                "an instance did not start: {}",
                std::fs::read_to_string(dir.path().join("stderr.log")).unwrap_or_default()
            );
            std::thread::sleep(Duration::from_millis(20));
        };
        let _ = rustls::crypto::ring::default_provider().install_default();
        let client = reqwest::Client::builder().timeout(TIMEOUT).build().unwrap();
        Self {
            child,
            addr,
            dir,
            client,
        }
    }

    fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    async fn get(&self, path: &str) -> (StatusCode, Value) {
        let response = self
            .client
            .get(self.url(path))
            .bearer_auth(TOKEN)
            .send()
            .await
            .unwrap();
        json_of(response).await
    }

    async fn post(&self, path: &str, body: Value) -> (StatusCode, Value) {
        let response = self
            .client
            .post(self.url(path))
            .bearer_auth(TOKEN)
            .json(&body)
            .send()
            .await
            .unwrap();
        json_of(response).await
    }

    async fn events(&self, path: &str, last: Option<&str>) -> Sse {
        let mut request = self.client.get(self.url(path)).bearer_auth(TOKEN);
        if let Some(last) = last {
            request = request.header("Last-Event-ID", last);
        }
        let response = request.send().await.unwrap();
        assert_eq!(response.status(), StatusCode::OK);
        Sse {
            response,
            buffer: String::new(),
        }
    }

    fn stderr(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("stderr.log")).unwrap_or_default()
    }

    fn signal(&self, signal: i32) {
        // SAFETY: a signal to a child this test started.
        unsafe { libc::kill(self.child.id() as i32, signal) };
    }
}

impl Drop for Instance {
    fn drop(&mut self) {
        self.signal(libc::SIGCONT);
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

async fn json_of(response: reqwest::Response) -> (StatusCode, Value) {
    let status = response.status();
    let text = response.text().await.unwrap();
    (
        status,
        serde_json::from_str(&text).unwrap_or(Value::String(text)),
    )
}

/// Server-Sent Events off a streaming response.
struct Sse {
    response: reqwest::Response,
    buffer: String,
}

impl Sse {
    /// The next event's id and data; `None` when the stream ends.
    async fn next(&mut self) -> Option<(String, Value)> {
        tokio::time::timeout(TIMEOUT, async {
            loop {
                if let Some(end) = self.buffer.find("\n\n") {
                    let block: String = self.buffer.drain(..end + 2).collect();
                    let mut id = None;
                    let mut data = String::new();
                    for line in block.lines() {
                        if let Some(rest) = line.strip_prefix("id:") {
                            id = Some(rest.trim().to_owned());
                        } else if let Some(rest) = line.strip_prefix("data:") {
                            data.push_str(rest.trim_start());
                        }
                    }
                    if let Some(id) = id {
                        return Some((id, serde_json::from_str(&data).unwrap()));
                    }
                    continue;
                }
                let chunk = self.response.chunk().await.ok()??;
                self.buffer.push_str(std::str::from_utf8(&chunk).unwrap());
            }
        })
        .await
        .expect("no event within the timeout")
    }

    /// Events up to and including the run's end.
    async fn until_end(&mut self) -> Vec<(String, Value)> {
        let mut got = Vec::new();
        while let Some((id, event)) = self.next().await {
            let end = is_terminal(&event);
            got.push((id, event));
            if end {
                break;
            }
        }
        got
    }
}

fn is_terminal(event: &Value) -> bool {
    event["type"] == "state"
        && matches!(
            event["state"].as_str(),
            Some("completed" | "cancelled" | "failed")
        )
}

fn script(dir: &TestDir, turns: &[Value]) -> PathBuf {
    dir.script("s.jsonl", turns)
}

async fn new_session(instance: &Instance, workspace: &Path) -> String {
    let (status, session) = instance
        .post("/v1/sessions", json!({"workspace": workspace}))
        .await;
    assert_eq!(status, StatusCode::CREATED, "{session}");
    session["session_id"].as_str().unwrap().to_owned()
}

async fn prompt(instance: &Instance, session: &str, text: &str) -> String {
    let (status, run) = instance
        .post(
            &format!("/v1/sessions/{session}/prompt"),
            json!({"prompt": text}),
        )
        .await;
    assert!(status.is_success(), "{status}: {run}");
    run["run_id"].as_str().unwrap().to_owned()
}

/// Polls `what` until it gives `Some`, or fails after `within`.
async fn eventually<T, F, Fut>(within: Duration, what: &str, mut probe: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let started = Instant::now();
    loop {
        if let Some(found) = probe().await {
            return found;
        }
        assert!(started.elapsed() < within, "{what} within {within:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The tape as `GET /v1/runs/RUN/tape` gives it.
async fn tape(instance: &Instance, run: &str) -> Vec<Value> {
    let (status, tape) = instance.get(&format!("/v1/runs/{run}/tape")).await;
    assert_eq!(status, StatusCode::OK, "{tape}");
    tape["events"].as_array().unwrap().clone()
}

fn pincer(dir: &TestDir, url: &str, args: &[&str]) -> std::process::Output {
    dir.command()
        .env("PINCER_STORE_URL", url)
        .args(args)
        .output()
        .unwrap()
}

fn texts(events: &[Value]) -> String {
    events
        .iter()
        .filter(|e| e["type"] == "text_delta")
        .map(|e| e["text"].as_str().unwrap_or_default())
        .collect()
}

/// A session made on A is prompted through B and C; a stream on A follows
/// B's run gap-free to its end and one resumed on C gives exactly the
/// rest; two prompts through two instances at once run one after the
/// other, never interleaved.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prompts_spread_across_instances_and_streams_follow_them_anywhere() {
    let url = postgres::shared().fresh_database();
    let work = TestDir::new();
    let turn = json!([{"text": "one "}, {"delay_ms": 150}, {"text": "two "}, {"delay_ms": 150}, {"text": "three"}]);
    let script = script(
        &work,
        &[turn.clone(), turn.clone(), turn.clone(), turn.clone(), turn],
    );
    let [a, b, c] = [0, 1, 2].map(|_| Instance::start(&url, &script));
    let session = new_session(&a, &work.workspace()).await;

    let run = prompt(&b, &session, "count").await;
    let mut on_a = a.events(&format!("/v1/runs/{run}/events"), None).await;
    let first = on_a.next().await.unwrap();
    let mut seen = vec![first.clone()];
    seen.extend(on_a.until_end().await);
    assert_eq!(seen.last().unwrap().1["state"], "completed", "{seen:?}");
    let tape_events = tape(&c, &run).await;
    assert_eq!(
        seen.len(),
        tape_events.len(),
        "A's stream is the tape, whole"
    );
    for ((_, event), stored) in seen.iter().zip(&tape_events) {
        assert_eq!(event["type"], stored["type"]);
    }
    assert_eq!(texts(&tape_events), "one two three");
    // Resumed on C after A's first event: exactly the rest.
    let mut on_c = c
        .events(&format!("/v1/runs/{run}/events"), Some(&first.0))
        .await;
    let rest = on_c.until_end().await;
    assert_eq!(
        rest.iter().map(|(id, _)| id.clone()).collect::<Vec<_>>(),
        seen[1..]
            .iter()
            .map(|(id, _)| id.clone())
            .collect::<Vec<_>>()
    );

    // Two prompts through B and C at once: one run at a time.
    let (one, two) = tokio::join!(
        prompt(&b, &session, "again"),
        prompt(&c, &session, "and again")
    );
    for run in [&one, &two] {
        let mut stream = a.events(&format!("/v1/runs/{run}/events"), None).await;
        let events = stream.until_end().await;
        assert_eq!(events.last().unwrap().1["state"], "completed", "{events:?}");
    }
    let shown = work
        .command()
        .env("PINCER_STORE_URL", &url)
        .args(["sessions", "show", &session, "--json"])
        .output()
        .unwrap();
    assert!(
        shown.status.success(),
        "{}",
        String::from_utf8_lossy(&shown.stderr)
    );
    let shown: Value = serde_json::from_slice(&shown.stdout).unwrap();
    let roles: Vec<&str> = shown["history"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["message"]["role"].as_str().unwrap_or(""))
        .collect();
    assert_eq!(
        roles,
        [
            "user",
            "assistant",
            "user",
            "assistant",
            "user",
            "assistant"
        ],
        "{shown}"
    );
    let out = pincer(&work, &url, &["verify"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    drop((a, b, c));
}

/// An approval asked by a run on B is listed on A and answered through C;
/// a second answer anywhere is refused: the first answer wins.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_approval_asked_on_one_instance_is_answered_through_another() {
    let url = postgres::shared().fresh_database();
    let work = TestDir::new();
    let script = script(
        &work,
        &[
            json!([{"tool_call": {"id": "w1", "name": "write_file", "arguments": {"path": "a.txt", "content": "hi\n"}}}]),
            json!([{"text": "done"}]),
        ],
    );
    let [a, b, c] = [0, 1, 2].map(|_| Instance::start(&url, &script));
    let session = new_session(&a, &work.workspace()).await;
    let run = prompt(&b, &session, "write").await;
    let approval = eventually(TIMEOUT, "the approval listed on A", || async {
        let (_, listed) = a.get("/v1/approvals").await;
        listed["approvals"].as_array()?.first().cloned()
    })
    .await;
    assert_eq!(approval["run_id"], run.as_str());
    let id = approval["approval_id"].as_str().unwrap();
    let (status, answered) = c
        .post(
            &format!("/v1/approvals/{id}"),
            json!({"decision": "allow_once"}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{answered}");
    let mut stream = a.events(&format!("/v1/runs/{run}/events"), None).await;
    let events = stream.until_end().await;
    assert_eq!(events.last().unwrap().1["state"], "completed", "{events:?}");
    let (status, again) = a
        .post(
            &format!("/v1/approvals/{id}"),
            json!({"decision": "reject_once"}),
        )
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{again}");
    assert_eq!(
        std::fs::read_to_string(work.workspace().join("a.txt")).unwrap(),
        "hi\n"
    );
}

/// An instance killed mid-run: within its lease time a survivor marks the
/// run failed as interrupted, once, and the receipts still verify.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_instance_killed_mid_run_has_its_run_ended_once_by_a_survivor() {
    let url = postgres::shared().fresh_database();
    let work = TestDir::new();
    let script = script(
        &work,
        &[json!([{"text": "started"}, {"delay_ms": 60000}, {"text": "never"}])],
    );
    let [a, b, c] = [0, 1, 2].map(|_| Instance::start(&url, &script));
    let session = new_session(&a, &work.workspace()).await;
    let run = prompt(&b, &session, "go").await;
    eventually(TIMEOUT, "the run streaming on B", || async {
        texts(&tape(&a, &run).await)
            .contains("started")
            .then_some(())
    })
    .await;
    b.signal(libc::SIGKILL);
    let events = eventually(
        Duration::from_secs(15),
        "a survivor ending the run",
        || async {
            let events = tape(&c, &run).await;
            events.iter().any(is_terminal).then_some(events)
        },
    )
    .await;
    let ends: Vec<&Value> = events.iter().filter(|e| is_terminal(e)).collect();
    assert_eq!(ends.len(), 1, "{events:?}");
    assert_eq!(ends[0]["state"], "failed");
    assert!(
        ends[0]["error"].as_str().unwrap().contains("interrupted"),
        "{:?}",
        ends[0]
    );
    // Later looks change nothing: ended once.
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(tape(&a, &run).await.len(), events.len());
    let (_, shown) = a.get(&format!("/v1/runs/{run}")).await;
    assert_eq!(shown["state"], "failed", "{shown}");
    // The session goes on through another instance.
    let out = pincer(&work, &url, &["verify"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    drop((a, c));
}

/// An instance stopped (`SIGSTOP`) past its lease, whose run a survivor
/// ended meanwhile, has every late write refused when it resumes: its run's
/// tape ends where the survivor ended it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stopped_instance_resumed_after_its_lease_lapsed_writes_nothing_more() {
    let url = postgres::shared().fresh_database();
    let work = TestDir::new();
    let script = script(
        &work,
        &[
            json!([{"text": "before"}, {"delay_ms": 6000}, {"text": " late"}, {"delay_ms": 500}, {"text": " later"}]),
        ],
    );
    let [a, b] = [0, 1].map(|_| Instance::start(&url, &script));
    let session = new_session(&a, &work.workspace()).await;
    let run = prompt(&b, &session, "go").await;
    eventually(TIMEOUT, "the run streaming on B", || async {
        texts(&tape(&a, &run).await)
            .contains("before")
            .then_some(())
    })
    .await;
    b.signal(libc::SIGSTOP);
    let ended = eventually(
        Duration::from_secs(15),
        "A ending the stopped instance's run",
        || async {
            let events = tape(&a, &run).await;
            events.iter().any(is_terminal).then_some(events)
        },
    )
    .await;
    b.signal(libc::SIGCONT);
    // B wakes, its model turn goes on and it tries to write: refused.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let after = tape(&a, &run).await;
    assert_eq!(after.len(), ended.len(), "late writes landed: {after:?}");
    assert!(!texts(&after).contains("late"), "{after:?}");
    assert!(
        b.stderr().contains("no longer current") || b.stderr().contains("lease was lost"),
        "B should have been refused: {}",
        b.stderr()
    );
    let out = pincer(&work, &url, &["verify"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
}

/// The database restarted in the middle of a run: `/readyz` fails while it
/// is down and recovers by itself; the run's events from before are kept
/// and the run ends; no instance restarts.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_database_restart_mid_run_loses_no_committed_event() {
    let server = PgServer::start();
    let url = server.fresh_database();
    let work = TestDir::new();
    let script = script(
        &work,
        &[
            json!([{"text": "before "}, {"delay_ms": 3000}, {"text": "after"}]),
            json!([{"text": "next"}]),
        ],
    );
    let [a, b] = [0, 1].map(|_| Instance::start(&url, &script));
    let session = new_session(&a, &work.workspace()).await;
    let run = prompt(&b, &session, "go").await;
    let before = eventually(TIMEOUT, "the run streaming", || async {
        let events = tape(&a, &run).await;
        texts(&events).contains("before").then_some(events)
    })
    .await;
    server.stop();
    let (status, body) = a.get("/readyz").await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{body}");
    server.start_again();
    eventually(
        Duration::from_secs(15),
        "/readyz answering 200 again",
        || async { (a.get("/readyz").await.0 == StatusCode::OK).then_some(()) },
    )
    .await;
    let after = eventually(Duration::from_secs(20), "the run ending", || async {
        let events = tape(&a, &run).await;
        events.iter().any(is_terminal).then_some(events)
    })
    .await;
    for (kept, was) in after.iter().zip(&before) {
        assert_eq!(kept, was, "an event seen before the restart changed");
    }
    assert!(after.len() >= before.len());
    // Both instances go on without a restart.
    let next = prompt(&a, &session, "more").await;
    let mut stream = b.events(&format!("/v1/runs/{next}/events"), None).await;
    let events = stream.until_end().await;
    assert!(is_terminal(&events.last().unwrap().1), "{events:?}");
    drop((a, b));
}
