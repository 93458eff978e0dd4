//! Several `pincer serve --http` instances on one PostgreSQL database
//! (`docs/scale-out.md`), through the real binary: prompts spread across
//! instances, streams and approvals across instances, an instance killed
//! or stopped mid-run, and the database restarted mid-run.
//!
//! Every test has a fresh database on the module's one shared server
//! (`postgres::shared`), except the restart, which stops a server of its
//! own. Instances run with two-second leases, so a lost one is found out
//! within seconds.

use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::support::postgres::{self, PgServer};
use crate::support::{TIMEOUT, TestDir};

const TOKEN: &str = "scale-out-token-0123456789abcdef";

/// Short leases, so a lost instance is found out within seconds.
const LEASE: Duration = Duration::from_secs(2);
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
        Self::start_with(url, script, CONFIG)
    }

    fn start_with(url: &str, script: &Path, config: &str) -> Self {
        let dir = TestDir::new();
        dir.write_config(config);
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

    /// Three instances on `url`, all playing `script`.
    fn three(url: &str, script: &Path) -> [Self; 3] {
        [0, 1, 2].map(|_| Self::start(url, script))
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

    /// An SSE stream (`/v1/runs/RUN/events`, `/v1/sessions/S/events`),
    /// after `last` when given (`Last-Event-ID`).
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

    async fn ready(&self) -> StatusCode {
        self.get("/readyz").await.0
    }

    fn stderr(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("stderr.log")).unwrap_or_default()
    }

    fn signal(&self, signal: i32) {
        // SAFETY: a signal to a child this test started (and has not reaped).
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
    /// The next event's id and data; `None` when the stream ends (or breaks).
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

    /// Events up to and including the end of a run (the first terminal
    /// `state` event); fewer when the stream ends before.
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

    /// Events until one satisfies `stop` (included).
    async fn until(&mut self, stop: impl Fn(&Value) -> bool) -> Vec<(String, Value)> {
        let mut got = Vec::new();
        while let Some((id, event)) = self.next().await {
            let end = stop(&event);
            got.push((id, event));
            if end {
                return got;
            }
        }
        panic!("the stream ended before the event looked for: {got:?}");
    }
}

fn is_terminal(event: &Value) -> bool {
    event["type"] == "state"
        && matches!(
            event["state"].as_str(),
            Some("completed" | "cancelled" | "failed")
        )
}

fn is_text(text: &str) -> impl Fn(&Value) -> bool + '_ {
    move |event| event["type"] == "text_delta" && event["text"] == text
}

/// The `RUN:SEQ` id a stream gives an event of the tape.
fn id_of(event: &Value) -> String {
    format!(
        "{}:{}",
        event["run_id"].as_str().unwrap(),
        event["seq"].as_u64().unwrap()
    )
}

/// A stream's events are the tape's: the same ids, the same events, no
/// gap, no duplicate.
fn assert_is_tape(streamed: &[(String, Value)], tape: &[Value]) {
    let ids: Vec<&str> = streamed.iter().map(|(id, _)| id.as_str()).collect();
    let tape_ids: Vec<String> = tape.iter().map(id_of).collect();
    assert_eq!(ids, tape_ids, "the stream's ids are not the tape's");
    for ((_, event), stored) in streamed.iter().zip(tape) {
        assert_eq!(event, stored);
    }
    for (n, stored) in tape.iter().enumerate() {
        assert_eq!(stored["seq"].as_u64(), Some(n as u64), "{tape:?}");
    }
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
    assert_eq!(status, StatusCode::ACCEPTED, "{run}");
    run["run_id"].as_str().unwrap().to_owned()
}

/// Prompts and waits for the run's end (`?wait=true`): the run as it ended.
async fn prompt_and_wait(instance: &Instance, session: &str, text: &str) -> Value {
    let (status, run) = instance
        .post(
            &format!("/v1/sessions/{session}/prompt?wait=true"),
            json!({"prompt": text}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{run}");
    run
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

/// The run's tape once it holds its end (read through `instance`).
async fn ended_tape(instance: &Instance, run: &str, within: Duration) -> Vec<Value> {
    eventually(within, &format!("run {run} ending"), || async {
        let events = tape(instance, run).await;
        events.iter().any(is_terminal).then_some(events)
    })
    .await
}

fn terminals(events: &[Value]) -> Vec<&Value> {
    events.iter().filter(|e| is_terminal(e)).collect()
}

fn texts(events: &[Value]) -> String {
    events
        .iter()
        .filter(|e| e["type"] == "text_delta")
        .map(|e| e["text"].as_str().unwrap_or_default())
        .collect()
}

/// `pincer ARGS --store URL`, as an operator runs it beside the instances.
fn pincer(dir: &TestDir, url: &str, args: &[&str]) -> std::process::Output {
    dir.command()
        .args(args)
        .args(["--store", url])
        .output()
        .unwrap()
}

fn assert_verifies(dir: &TestDir, url: &str) {
    let out = pincer(dir, url, &["verify"]);
    assert!(
        out.status.success(),
        "pincer verify --store URL failed: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The session's history as `pincer sessions show --json` gives it:
/// `(run_id, role, text)` per message.
fn history(dir: &TestDir, url: &str, session: &str) -> Vec<(String, String, String)> {
    let out = pincer(dir, url, &["sessions", "show", session, "--json"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let shown: Value = serde_json::from_slice(&out.stdout).unwrap();
    shown["history"]
        .as_array()
        .unwrap()
        .iter()
        .map(|entry| {
            let message = &entry["message"];
            let text = message["text"]
                .as_str()
                .or(message["content"][0]["text"].as_str())
                .unwrap_or_default()
                .to_owned();
            (
                entry["run_id"].as_str().unwrap_or_default().to_owned(),
                message["role"].as_str().unwrap_or_default().to_owned(),
                text,
            )
        })
        .collect()
}

fn now_millis() -> i64 {
    let since = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap();
    i64::try_from(since.as_millis()).unwrap()
}

fn entry(run: &str, role: &str, text: &str) -> (String, String, String) {
    (run.to_owned(), role.to_owned(), text.to_owned())
}

/// The health summary of an instance counts the runs every instance made
/// and lists the instances sharing the database, naming the one answering.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_health_summary_lists_the_instances_and_counts_every_ones_runs() {
    let url = postgres::shared().fresh_database();
    let work = TestDir::new();
    let script = script(&work, &[json!([{"text": "hi"}])]);
    let a = Instance::start(&url, &script);
    let b = Instance::start(&url, &script);
    for instance in [&a, &b] {
        let session = new_session(instance, &work.workspace()).await;
        let end = prompt_and_wait(instance, &session, "hello").await;
        assert_eq!(end["state"], "completed", "{end}");
    }
    for (asked, other) in [(&a, &b), (&b, &a)] {
        let (status, summary) = asked.get("/v1/health/summary").await;
        assert_eq!(status, StatusCode::OK, "{summary}");
        assert_eq!(summary["store"], "postgres", "{summary}");
        assert_eq!(summary["runs"]["total"], 2, "{summary}");
        assert_eq!(summary["runs"]["by_state"]["completed"], 2, "{summary}");
        let instances = summary["instances"].as_array().unwrap();
        let pid_of = |i: &Value| {
            i["instance_id"]
                .as_str()
                .unwrap()
                .split(':')
                .next()
                .unwrap()
                .to_owned()
        };
        let mut pids: Vec<String> = instances.iter().map(pid_of).collect();
        pids.sort();
        let mut expected = vec![asked.child.id().to_string(), other.child.id().to_string()];
        expected.sort();
        assert_eq!(pids, expected, "{summary}");
        let answering: Vec<String> = instances
            .iter()
            .filter(|i| i["answering"] == true)
            .map(pid_of)
            .collect();
        assert_eq!(answering, [asked.child.id().to_string()], "{summary}");
        for instance in instances {
            assert!(
                instance["lease_expires_at"].as_i64().unwrap()
                    > instance["started_at"].as_i64().unwrap(),
                "{instance}"
            );
        }
    }
}

/// Sessions made on A are prompted through B and C and read back on every
/// instance; two prompts to one session through two instances at once
/// both complete, one after the other: the later waited for the earlier
/// (it says so), and its model turn saw the earlier's reply.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prompts_spread_across_instances_and_run_one_at_a_time_per_session() {
    let url = postgres::shared().fresh_database();
    let work = TestDir::new();
    // The turn played is the number of replies the session has so far.
    let turn = |n: usize| json!([{"text": format!("reply {n}")}, {"delay_ms": 700}, {"text": "."}]);
    let script = script(&work, &[turn(0), turn(1), turn(2)]);
    let [a, b, c] = Instance::three(&url, &script);
    let mut sessions = Vec::new();
    for _ in 0..3 {
        sessions.push(new_session(&a, &work.workspace()).await);
    }

    // One prompt per session, through B, C and B, all at once.
    let ends = futures::future::join_all(
        sessions
            .iter()
            .zip([&b, &c, &b])
            .map(|(session, instance)| prompt_and_wait(instance, session, "hello")),
    )
    .await;
    for (session, end) in sessions.iter().zip(&ends) {
        assert_eq!(end["state"], "completed", "{end}");
        assert_eq!(end["reply"], "reply 0.", "{end}");
        let run = end["run_id"].as_str().unwrap();
        for instance in [&a, &b, &c] {
            let (status, shown) = instance.get(&format!("/v1/sessions/{session}")).await;
            assert_eq!(status, StatusCode::OK, "{shown}");
            assert_eq!(shown["session_id"], session.as_str());
            let (_, runs) = instance.get(&format!("/v1/sessions/{session}/runs")).await;
            let runs = runs["runs"].as_array().unwrap();
            assert_eq!(runs.len(), 1, "{runs:?}");
            assert_eq!(runs[0]["run_id"], run);
            assert_eq!(runs[0]["state"], "completed");
            assert_eq!(texts(&tape(instance, run).await), "reply 0.");
        }
    }

    // Two prompts to one session, through B and C at once.
    let session = &sessions[0];
    let (on_b, on_c) = tokio::join!(prompt(&b, session, "from b"), prompt(&c, session, "from c"));
    let mut runs = Vec::new();
    for run in [&on_b, &on_c] {
        let events = ended_tape(&a, run, TIMEOUT).await;
        assert_eq!(terminals(&events).len(), 1, "{events:?}");
        assert_eq!(terminals(&events)[0]["state"], "completed", "{events:?}");
        let (_, info) = a.get(&format!("/v1/runs/{run}")).await;
        runs.push((info, events));
    }
    runs.sort_by_key(|(info, _)| info["started_at"].as_i64().unwrap());
    let [(first, _), (second, second_tape)] = &runs[..] else {
        unreachable!()
    };
    let at = |run: &Value, field: &str| run[field].as_i64().unwrap();
    assert!(
        at(second, "created_at") < at(first, "ended_at"),
        "the prompts did not overlap, the test proves nothing: {first} {second}"
    );
    assert!(
        at(first, "ended_at") <= at(second, "started_at"),
        "two runs of one session worked at once: {first} {second}"
    );
    assert!(
        second_tape
            .iter()
            .any(|e| e["type"] == "notice" && e["message"].as_str().unwrap().contains("Another")),
        "the later run did not wait for the other instance: {second_tape:?}"
    );
    let (first, second) = (
        first["run_id"].as_str().unwrap(),
        second["run_id"].as_str().unwrap(),
    );
    let prompt_of = |run: &str| if run == on_b { "from b" } else { "from c" };
    assert_eq!(
        history(&work, &url, session),
        [
            entry(ends[0]["run_id"].as_str().unwrap(), "user", "hello"),
            entry(ends[0]["run_id"].as_str().unwrap(), "assistant", "reply 0."),
            entry(first, "user", prompt_of(first)),
            entry(first, "assistant", "reply 1."),
            entry(second, "user", prompt_of(second)),
            entry(second, "assistant", "reply 2."),
        ]
    );
    assert_verifies(&work, &url);
}

/// Streams on A (a run's and the session's) follow a run executing on B as
/// it goes, gap-free, to its end, though the session was made on C and A
/// never ran it; resumed on C with `Last-Event-ID` mid-run they give
/// exactly the rest; the session's streams go on with the next run,
/// prompted through C.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streams_on_one_instance_follow_a_run_on_another_and_resume_on_a_third() {
    let url = postgres::shared().fresh_database();
    let work = TestDir::new();
    let script = script(
        &work,
        &[
            json!([{"text": "one "}, {"delay_ms": 1000}, {"text": "two "}, {"delay_ms": 1000}, {"text": "three"}]),
            json!([{"text": "four"}]),
        ],
    );
    let [a, b, c] = Instance::three(&url, &script);
    let session = new_session(&c, &work.workspace()).await;

    let run = prompt(&b, &session, "count").await;
    let mut run_on_a = a.events(&format!("/v1/runs/{run}/events"), None).await;
    let mut seen = run_on_a.until(is_text("one ")).await;
    // Delivered while the run still works on B: followed, not replayed.
    let (_, info) = c.get(&format!("/v1/runs/{run}")).await;
    assert_eq!(info["state"], "running", "{info}");
    let middle = seen.last().unwrap().0.clone();
    let mut session_on_a = a
        .events(&format!("/v1/sessions/{session}/events"), Some(&middle))
        .await;
    let mut run_on_c = c
        .events(&format!("/v1/runs/{run}/events"), Some(&middle))
        .await;
    let mut session_on_c = c
        .events(&format!("/v1/sessions/{session}/events"), Some(&middle))
        .await;

    seen.extend(run_on_a.until_end().await);
    assert_eq!(seen.last().unwrap().1["state"], "completed", "{seen:?}");
    assert!(
        run_on_a.next().await.is_none(),
        "a run's stream ends with it"
    );
    let stored = tape(&c, &run).await;
    assert_is_tape(&seen, &stored);
    assert_eq!(texts(&stored), "one two three");
    // Resumed after the middle, on A and on C: exactly the rest.
    let rest = &seen[seen.iter().position(|(id, _)| *id == middle).unwrap() + 1..];
    assert_eq!(run_on_c.until_end().await, rest);
    assert!(run_on_c.next().await.is_none());
    assert_eq!(session_on_a.until_end().await, rest);
    assert_eq!(session_on_c.until_end().await, rest);

    // The next run, through C: the session's streams go on with it, and
    // one opened now on A (no cursor) starts with it.
    let mut from_now_on_a = a
        .events(&format!("/v1/sessions/{session}/events"), None)
        .await;
    let next = prompt(&c, &session, "more").await;
    let stored = ended_tape(&b, &next, TIMEOUT).await;
    assert_eq!(texts(&stored), "four");
    for stream in [&mut session_on_a, &mut session_on_c, &mut from_now_on_a] {
        assert_is_tape(&stream.until_end().await, &stored);
    }
}

/// The approval of a `write_file` to `path`, once `instance` lists it.
async fn approval_listed(instance: &Instance, path: &str) -> Value {
    eventually(TIMEOUT, "the approval listed", || async {
        let (_, listed) = instance.get("/v1/approvals").await;
        listed["approvals"]
            .as_array()?
            .iter()
            .find(|asked| asked["arguments"]["path"] == path)
            .cloned()
    })
    .await
}

async fn answer(instance: &Instance, approval: &str, decision: &str) -> (StatusCode, Value) {
    instance
        .post(
            &format!("/v1/approvals/{approval}"),
            json!({ "decision": decision }),
        )
        .await
}

/// An approval asked by a run on B is listed on every instance and
/// answered through C; a second answer through A is refused at once, and
/// when A and C answer the next approval at the same moment, exactly one
/// answer wins and the run does as that one said.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_approval_asked_on_one_instance_is_answered_through_another_once() {
    let url = postgres::shared().fresh_database();
    let work = TestDir::new();
    let write = |id: &str, path: &str| json!([{"tool_call": {"id": id, "name": "write_file", "arguments": {"path": path, "content": "hi\n"}}}]);
    let script = script(
        &work,
        &[
            write("w1", "a.txt"),
            write("w2", "b.txt"),
            json!([{"text": "done"}]),
        ],
    );
    let [a, b, c] = Instance::three(&url, &script);
    let session = new_session(&a, &work.workspace()).await;
    let run = prompt(&b, &session, "write").await;

    let approval = approval_listed(&a, "a.txt").await;
    assert_eq!(approval["run_id"], run.as_str());
    let id = approval["approval_id"].as_str().unwrap().to_owned();
    for instance in [&b, &c] {
        let (_, listed) = instance
            .get(&format!("/v1/sessions/{session}/approvals"))
            .await;
        assert_eq!(listed["approvals"], json!([approval.clone()]));
    }
    let (status, answered) = answer(&c, &id, "allow_once").await;
    assert_eq!(status, StatusCode::OK, "{answered}");
    assert_eq!(answered["decision"], "allow_once");
    let (status, again) = answer(&a, &id, "reject_once").await;
    assert!(
        matches!(status, StatusCode::NOT_FOUND | StatusCode::CONFLICT),
        "a second answer was taken: {status} {again}"
    );

    // The next approval, answered through A and C at the same moment.
    let next = approval_listed(&a, "b.txt").await;
    let id = next["approval_id"].as_str().unwrap().to_owned();
    let (on_a, on_c) = tokio::join!(
        answer(&a, &id, "reject_once"),
        answer(&c, &id, "allow_once")
    );
    let winners: Vec<&str> = [(&on_a, "reject_once"), (&on_c, "allow_once")]
        .iter()
        .filter(|((status, _), _)| *status == StatusCode::OK)
        .map(|(_, decision)| *decision)
        .collect();
    assert_eq!(winners.len(), 1, "A: {on_a:?}, C: {on_c:?}");
    for (status, body) in [&on_a, &on_c] {
        assert!(
            matches!(
                *status,
                StatusCode::OK | StatusCode::NOT_FOUND | StatusCode::CONFLICT
            ),
            "{status} {body}"
        );
    }

    let events = ended_tape(&a, &run, TIMEOUT).await;
    assert_eq!(terminals(&events)[0]["state"], "completed", "{events:?}");
    let decided: Vec<(&str, &str)> = events
        .iter()
        .filter(|e| e["type"] == "approval_decided")
        .map(|e| {
            (
                e["approval_id"].as_str().unwrap(),
                e["decision"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        decided,
        [
            (approval["approval_id"].as_str().unwrap(), "allow_once"),
            (id.as_str(), winners[0])
        ]
    );
    assert_eq!(
        std::fs::read_to_string(work.workspace().join("a.txt")).unwrap(),
        "hi\n"
    );
    assert_eq!(
        work.workspace().join("b.txt").exists(),
        winners[0] == "allow_once"
    );
    for instance in [&a, &b, &c] {
        let (_, listed) = instance.get("/v1/approvals").await;
        assert_eq!(listed["approvals"], json!([]));
    }
}

/// An instance killed (`kill -9`) mid-run: within about its lease time a
/// survivor marks the run failed as interrupted, exactly once though two
/// survivors look, the receipts still verify and the session goes on
/// through another instance.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_instance_killed_mid_run_has_its_run_ended_once_by_a_survivor() {
    let url = postgres::shared().fresh_database();
    let work = TestDir::new();
    let script = script(
        &work,
        &[
            json!([{"text": "started"}, {"delay_ms": 60000}, {"text": "never"}]),
            json!([{"text": "carried on"}]),
        ],
    );
    let [a, b, c] = Instance::three(&url, &script);
    let session = new_session(&a, &work.workspace()).await;
    let run = prompt(&b, &session, "go").await;
    eventually(TIMEOUT, "the run streaming on B", || async {
        texts(&tape(&a, &run).await)
            .contains("started")
            .then_some(())
    })
    .await;
    // B stays unreaped (a zombie) until the test ends, so its pid still
    // looks alive here: the survivors wait its lease out, as they would for
    // an instance on another machine.
    b.signal(libc::SIGKILL);
    let events = ended_tape(&c, &run, 5 * LEASE).await;
    let ends = terminals(&events);
    assert_eq!(ends.len(), 1, "{events:?}");
    assert_eq!(ends[0]["state"], "failed");
    assert!(
        ends[0]["error"].as_str().unwrap().contains("interrupted"),
        "{:?}",
        ends[0]
    );
    assert_eq!(texts(&events), "started");
    // Both survivors look again (every lease period): still ended once.
    tokio::time::sleep(2 * LEASE).await;
    assert_eq!(tape(&a, &run).await, events);
    let (_, shown) = a.get(&format!("/v1/runs/{run}")).await;
    assert_eq!(shown["state"], "failed", "{shown}");
    assert_verifies(&work, &url);

    // The session goes on through C, after the partial reply it kept.
    let next = prompt_and_wait(&c, &session, "again").await;
    assert_eq!(next["state"], "completed", "{next}");
    assert_eq!(next["reply"], "carried on");
    let next = next["run_id"].as_str().unwrap();
    assert_eq!(
        history(&work, &url, &session),
        [
            entry(&run, "user", "go"),
            entry(&run, "assistant", "started"),
            entry(next, "user", "again"),
            entry(next, "assistant", "carried on"),
        ]
    );
    assert_verifies(&work, &url);
}

/// An instance stopped (`SIGSTOP`) mid-run past its lease: a survivor ends
/// its run and takes the session over with a run of its own; resumed
/// meanwhile, the stopped instance has every late write refused by
/// fencing: its run's tape ends where the survivor ended it, the taker's
/// run is whole, and the history holds nothing of the late writes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stopped_instance_resumed_after_its_lease_lapsed_has_its_late_writes_refused() {
    let url = postgres::shared().fresh_database();
    let work = TestDir::new();
    let script = script(
        &work,
        &[
            json!([{"text": "before"}, {"delay_ms": 5000}, {"text": " late"}, {"delay_ms": 300}, {"text": " later"}]),
            json!([{"text": "taken "}, {"delay_ms": 3000}, {"text": "over"}]),
            json!([{"text": "still serving"}]),
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
    let ended = ended_tape(&a, &run, 5 * LEASE).await;
    let ends = terminals(&ended);
    assert_eq!(ends.len(), 1, "{ended:?}");
    assert!(
        ends[0]["error"].as_str().unwrap().contains("interrupted"),
        "{ended:?}"
    );

    // A takes the session over; B wakes while A's run works.
    let taker = prompt(&a, &session, "take over").await;
    eventually(TIMEOUT, "the taker's run streaming on A", || async {
        texts(&tape(&a, &taker).await)
            .contains("taken")
            .then_some(())
    })
    .await;
    b.signal(libc::SIGCONT);
    eventually(TIMEOUT, "B's late write refused", || async {
        b.stderr().contains("is no longer current").then_some(())
    })
    .await;
    let taken = ended_tape(&a, &taker, TIMEOUT).await;
    assert_eq!(terminals(&taken)[0]["state"], "completed", "{taken:?}");
    assert_eq!(texts(&taken), "taken over");
    assert_eq!(tape(&a, &run).await, ended, "a late write landed");
    assert_eq!(
        history(&work, &url, &session),
        [
            entry(&run, "user", "go"),
            entry(&run, "assistant", "before"),
            entry(&taker, "user", "take over"),
            entry(&taker, "assistant", "taken over"),
        ]
    );
    let (_, shown) = b.get(&format!("/v1/runs/{run}")).await;
    assert_eq!(shown["state"], "failed", "{shown}");
    assert_verifies(&work, &url);

    // B goes on serving: the session's next prompt runs there.
    let next = prompt_and_wait(&b, &session, "and now").await;
    assert_eq!(next["state"], "completed", "{next}");
    assert_eq!(next["reply"], "still serving");
    assert_eq!(tape(&a, &run).await, ended);
    assert_verifies(&work, &url);
}

/// Follows a run's stream to its end as `EventSource` would: when the
/// stream breaks, again from the last id seen.
async fn follow_to_end(instance: &Instance, run: &str, mut stream: Sse) -> Vec<(String, Value)> {
    let mut got = Vec::new();
    for _ in 0..10 {
        got.extend(stream.until_end().await);
        if got.last().is_some_and(|(_, event)| is_terminal(event)) {
            return got;
        }
        let last = got.last().map(|(id, _)| id.clone());
        stream = instance
            .events(&format!("/v1/runs/{run}/events"), last.as_deref())
            .await;
    }
    panic!("the stream of run {run} broke again and again: {got:?}");
}

/// The database restarted in the middle of two runs (on A and on B),
/// followed on C: `/readyz` is 503 everywhere while it is down and 200
/// again after, no instance restarts; the events the runs made while it
/// was down are committed after it, the runs complete, every event C saw
/// before is still on the tape and C's streams (resumed where they broke,
/// if they did) are the tapes whole.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_database_restart_mid_run_loses_no_committed_event() {
    let server = PgServer::start();
    let url = server.fresh_database();
    let work = TestDir::new();
    let pause = 1500;
    let script = script(
        &work,
        &[
            json!([{"text": "before "}, {"delay_ms": pause}, {"text": "after"}]),
            json!([{"text": "next"}]),
        ],
    );
    // Leases that outlive the restart: the runs' owners keep them.
    let instances =
        [0, 1, 2].map(|_| Instance::start_with(&url, &script, "session_lease_secs = 10\n"));
    let [a, b, c] = &instances;
    let mut started = Vec::new();
    for instance in [a, b] {
        let session = new_session(instance, &work.workspace()).await;
        started.push((session.clone(), prompt(instance, &session, "go").await));
    }
    let mut followed = Vec::new();
    for (session, run) in started {
        let mut stream = c.events(&format!("/v1/runs/{run}/events"), None).await;
        let before = stream.until(is_text("before ")).await;
        followed.push((session, run, stream, before));
    }

    server.stop();
    let down_at = now_millis();
    for instance in &instances {
        eventually(
            TIMEOUT,
            "/readyz failing while the database is down",
            || async { (instance.ready().await == StatusCode::SERVICE_UNAVAILABLE).then_some(()) },
        )
        .await;
        assert_eq!(instance.get("/healthz").await.0, StatusCode::OK);
    }
    // The runs make their last events while it is down.
    let last_made = followed
        .iter()
        .map(|(_, _, _, before)| before.last().unwrap().1["at"].as_i64().unwrap())
        .max()
        .unwrap()
        + pause
        + 500;
    let wait = u64::try_from(last_made - now_millis()).unwrap_or(0);
    tokio::time::sleep(Duration::from_millis(wait)).await;
    server.start_again();
    let back_at = now_millis();
    for instance in &instances {
        eventually(TIMEOUT, "/readyz answering 200 again", || async {
            (instance.ready().await == StatusCode::OK).then_some(())
        })
        .await;
    }

    for (session, run, stream, before) in followed {
        let mut seen = before.clone();
        seen.extend(follow_to_end(c, &run, stream).await);
        let stored = tape(a, &run).await;
        for (id, event) in &before {
            let kept = stored.iter().find(|e| id_of(e) == *id);
            assert_eq!(
                kept,
                Some(event),
                "an event seen before the restart changed"
            );
        }
        assert_is_tape(&seen, &stored);
        let end = terminals(&stored)[0];
        assert_eq!(end["state"], "completed", "{stored:?}");
        assert_eq!(texts(&stored), "before after");
        let made_while_down: Vec<&Value> = stored[before.len()..].iter().collect();
        assert!(!made_while_down.is_empty());
        for event in made_while_down {
            let at = event["at"].as_i64().unwrap();
            assert!(
                down_at < at && at < back_at,
                "not made while the database was down ({down_at}..{back_at}): {event}"
            );
        }
        // Every instance goes on without a restart.
        for instance in [a, b, c] {
            let (_, shown) = instance.get(&format!("/v1/runs/{run}")).await;
            assert_eq!(shown["state"], "completed", "{shown}");
        }
        let next = prompt_and_wait(c, &session, "more").await;
        assert_eq!(next["state"], "completed", "{next}");
        assert_eq!(next["reply"], "next");
    }
    assert_verifies(&work, &url);
}
