//! The webhook channel: signed inbound POSTs (HMAC-SHA256, timestamp window,
//! dedupe by delivery id), signed outbound POSTs with an idempotency key,
//! retries through the durable send path, and a crash mid-send replayed with
//! the same key.

use std::io::{Read as _, Write as _};
use std::net::TcpStream;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use crate::support::TestDir;
use crate::support::webhook::{Answer, Peer, SECRET, deliver};
use pincer::channels::webhook::sign;
use serde_json::{Value, json};

const HTTP_TOKEN: &str = "http-token-0123456789abcdef";
const WAIT: Duration = Duration::from_secs(20);

/// `pincer serve --http --channel webhook`: deliveries go to
/// `/channels/webhook/webhook` on its one listener (no bearer token).
struct Bridge {
    child: Child,
    url: String,
}

impl Bridge {
    fn start(dir: &TestDir, script: &std::path::Path) -> Self {
        Self::start_with(dir, script, &[])
    }

    /// With more channels (`--channel NAME`) beside the webhook.
    fn start_with(dir: &TestDir, script: &std::path::Path, others: &[&str]) -> Self {
        let log = dir
            .path()
            .join(format!("stderr-{}.log", crate::support::unique()));
        let ready = dir
            .path()
            .join(format!("ready-{}", crate::support::unique()));
        let mut command = dir.command();
        command
            .env("PINCER_WEBHOOK_SECRET", SECRET)
            .env("PINCER_HTTP_TOKEN", HTTP_TOKEN)
            .env("TELEGRAM_BOT_TOKEN", crate::support::telegram::TOKEN)
            .args(["serve", "--http", "127.0.0.1:0", "--ready-file"])
            .arg(&ready)
            .args([
                "--provider",
                "scripted",
                "--script",
                script.to_str().unwrap(),
                "--channel",
                "webhook",
            ]);
        for other in others {
            command.args(["--channel", other]);
        }
        let child = command
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .unwrap();
        let deadline = Instant::now() + WAIT;
        let url = loop {
            let text = std::fs::read_to_string(&log).unwrap_or_default();
            let addr = std::fs::read_to_string(&ready).unwrap_or_default();
            // Listening, and the channel receiving (before it, 503).
            if !addr.trim().is_empty() && text.contains("webhook receiving") {
                break format!("http://{}/channels/webhook/webhook", addr.trim());
            }
            assert!(
                Instant::now() < deadline,
                "the channel did not start: {text}"
            );
            std::thread::sleep(Duration::from_millis(20));
        };
        Self { child, url }
    }

    fn crash(mut self) {
        self.child.kill().unwrap();
        self.child.wait().unwrap();
    }
}

impl Drop for Bridge {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn setup(peer: &Peer) -> TestDir {
    let dir = TestDir::new();
    let workspace = dir.workspace();
    let config = dir.path().join("config").join("pincer");
    std::fs::create_dir_all(&config).unwrap();
    std::fs::write(
        config.join("config.toml"),
        format!(
            "[channels.webhook]\ncallback_url = \"{}\"\nallow = [\"u1\"]\nworkspace = \"{}\"\ncoalesce_ms = 50\nlive_drafts = false\n",
            peer.url,
            workspace.display()
        ),
    )
    .unwrap();
    dir
}

fn says(text: &str) -> Value {
    json!({"message": {"chat": "room-1", "sender": {"id": "u1", "name": "Ada"}, "text": text}})
}

fn wait_sent(dir: &TestDir) -> Value {
    let deadline = Instant::now() + WAIT;
    loop {
        if let Some(reply) = dir
            .outbox()
            .into_iter()
            .find(|i| i["kind"] == "reply" && i["status"] == "sent")
        {
            return reply;
        }
        assert!(
            Instant::now() < deadline,
            "no sent reply: {:#?}",
            dir.outbox()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn signed_messages_in_signed_replies_out() {
    let peer = Peer::start();
    let dir = setup(&peer);
    let script = dir.script("s.jsonl", &[json!([{"text": "Hello, room."}])]);
    let bridge = Bridge::start(&dir, &script);
    let (status, answer) = deliver(&bridge.url, Some("d1"), &says("hi"), SECRET, 0);
    assert_eq!((status, answer["status"].as_str()), (200, Some("accepted")));
    peer.wait_for("the reply", |posts| !posts.is_empty());
    let post = &peer.posts()[0];
    assert_eq!(post.body["text"], "Hello, room.");
    assert_eq!(post.body["chat"], "room-1");
    assert_eq!(post.body["reply_to"], "d1");
    assert_eq!(post.body["origin"]["source"], "pincer");
    // Signed like inbound, with the idempotency key in header and body.
    let timestamp: i64 = post.header("x-pincer-timestamp").unwrap().parse().unwrap();
    assert_eq!(
        post.header("x-pincer-signature").unwrap(),
        sign(SECRET.as_bytes(), timestamp, &post.raw)
    );
    let key = post.header("idempotency-key").unwrap();
    assert!(
        key.starts_with("reply:run_") && key.ends_with(":0"),
        "{key}"
    );
    assert_eq!(post.body["id"], key);
    let intent = wait_sent(&dir);
    assert_eq!(
        intent["receipt"]["parts"][0]["platform_id"],
        format!("m-{key}")
    );
}

#[test]
fn bad_signatures_stale_timestamps_and_replays_are_refused() {
    let peer = Peer::start();
    let dir = setup(&peer);
    let script = dir.script(
        "s.jsonl",
        &[json!([{"text": "once"}]), json!([{"text": "twice"}])],
    );
    let bridge = Bridge::start(&dir, &script);
    let (status, answer) = deliver(
        &bridge.url,
        Some("d1"),
        &says("hi"),
        "not-the-secret-at-all",
        0,
    );
    assert_eq!(status, 401);
    assert_eq!(answer["error"], "bad signature");
    let (status, answer) = deliver(&bridge.url, Some("d1"), &says("hi"), SECRET, 600);
    assert_eq!(status, 401);
    assert!(answer["error"].as_str().unwrap().contains("window"));
    let (status, _) = deliver(&bridge.url, None, &says("hi"), SECRET, 0);
    assert_eq!(status, 400);
    let (status, answer) = deliver(
        &bridge.url,
        Some("d2"),
        &json!({"message": {"chat": "c"}}),
        SECRET,
        0,
    );
    assert_eq!(status, 400, "{answer}");
    let (status, _) = deliver(&bridge.url, Some("d1"), &says("hi"), SECRET, 0);
    assert_eq!(status, 200);
    // The same delivery again, within the window: acknowledged, not run again.
    let (status, answer) = deliver(&bridge.url, Some("d1"), &says("hi"), SECRET, 0);
    assert_eq!(
        (status, answer["status"].as_str()),
        (200, Some("duplicate"))
    );
    peer.wait_for("the reply", |posts| !posts.is_empty());
    std::thread::sleep(Duration::from_millis(400));
    let texts: Vec<Value> = peer
        .posts()
        .iter()
        .map(|p| p.body["text"].clone())
        .collect();
    assert_eq!(texts, vec![json!("once")]);
    // Pincer's own tagged output posted back into a room by a bot: dropped.
    let echo = json!({"message": {"chat": "room-2", "chat_kind": "group", "sender": {"id": "u1", "is_bot": true},
        "text": "once", "origin": {"source": "pincer", "kind": "message"}}});
    let (status, answer) = deliver(&bridge.url, Some("d3"), &echo, SECRET, 0);
    assert_eq!((status, answer["status"].as_str()), (200, Some("echo")));
    std::thread::sleep(Duration::from_millis(400));
    assert_eq!(peer.posts().len(), 1);
}

#[test]
fn a_lost_answer_is_retried_with_the_same_idempotency_key() {
    let peer = Peer::start();
    let dir = setup(&peer);
    let script = dir.script("s.jsonl", &[json!([{"text": "Retried."}])]);
    // The peer takes the POST and the connection dies; then it is down a moment.
    peer.then(&[Answer::Drop, Answer::Status(503)]);
    let bridge = Bridge::start(&dir, &script);
    deliver(&bridge.url, Some("d1"), &says("hi"), SECRET, 0);
    peer.wait_for("three attempts", |posts| posts.len() == 3);
    let posts = peer.posts();
    let keys: Vec<&str> = posts
        .iter()
        .map(|p| p.header("idempotency-key").unwrap())
        .collect();
    assert!(keys.iter().all(|k| *k == keys[0]), "{keys:?}");
    let intent = wait_sent(&dir);
    assert_eq!(intent["attempt"], 3);
}

#[test]
fn a_crash_mid_send_is_replayed_with_the_same_key_after_restart() {
    let peer = Peer::start();
    let dir = setup(&peer);
    let script = dir.script("s.jsonl", &[json!([{"text": "Survived the crash."}])]);
    peer.then(&[Answer::Hold]);
    let bridge = Bridge::start(&dir, &script);
    deliver(&bridge.url, Some("d1"), &says("hi"), SECRET, 0);
    peer.wait_for("the held send", |posts| posts.len() == 1);
    bridge.crash();
    let _bridge = Bridge::start(&dir, &script);
    peer.wait_for("the replay", |posts| posts.len() == 2);
    let posts = peer.posts();
    assert_eq!(
        posts[0].header("idempotency-key"),
        posts[1].header("idempotency-key")
    );
    assert_eq!(posts[1].body["text"], "Survived the crash.");
    wait_sent(&dir);
}

#[test]
fn a_draft_cut_off_by_a_crash_is_sent_again_with_its_key_then_replaced() {
    let peer = Peer::start();
    let dir = setup(&peer);
    let config = dir.path().join("config/pincer/config.toml");
    let text = std::fs::read_to_string(&config).unwrap();
    std::fs::write(
        &config,
        text.replace("live_drafts = false", "live_drafts = true"),
    )
    .unwrap();
    let script = dir.script(
        "s.jsonl",
        &[json!([{"text": "Drafted"}, {"delay_ms": 60000}, {"text": " never"}])],
    );
    // The peer takes the draft and the process dies before its answer.
    peer.then(&[Answer::Hold]);
    let bridge = Bridge::start(&dir, &script);
    deliver(&bridge.url, Some("d1"), &says("hi"), SECRET, 0);
    peer.wait_for("the held draft", |posts| posts.len() == 1);
    bridge.crash();
    let _bridge = Bridge::start(&dir, &script);
    // The peer deduplicates by key, so sending the draft again names it. A
    // draft a stopped process showed may still get that process's late edits,
    // so it is deleted, and the reply is a fresh message.
    peer.wait_for("the draft again, its deletion, the reply", |posts| {
        posts.len() == 4
    });
    let posts = peer.posts();
    let key = posts[0].header("idempotency-key").unwrap().to_owned();
    assert!(key.starts_with("draft:run_"), "{key}");
    assert_eq!(posts[1].header("idempotency-key"), Some(key.as_str()));
    assert_eq!(posts[1].body["text"], "Drafted");
    let draft = format!("m-{key}");
    assert_eq!(posts[2].body["delete"], draft.as_str());
    assert_eq!(
        posts[2].header("idempotency-key"),
        Some(format!("delete:{draft}").as_str())
    );
    assert!(posts[2].body.get("text").is_none(), "{:#}", posts[2].body);
    assert!(
        posts[3].body.get("edit_of").is_none(),
        "{:#}",
        posts[3].body
    );
    let reply = posts[3].body["text"].as_str().unwrap();
    assert!(
        reply.starts_with("Drafted") && reply.contains("interrupted"),
        "{reply}"
    );
    wait_sent(&dir);
}

#[test]
fn the_webhook_channel_receives_only_on_the_http_face() {
    let peer = Peer::start();
    let dir = setup(&peer);
    // Beside an editor there is no HTTP listener: refused, saying where.
    let out = dir
        .command()
        .env("PINCER_WEBHOOK_SECRET", SECRET)
        .args(["acp", "--channel", "webhook"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("channel webhook receives over HTTP: serve it with `pincer serve --http --channel webhook`"),
        "{err}"
    );
    // The old `listen` key is refused, naming the new place.
    let config = dir.path().join("config").join("pincer").join("config.toml");
    let text = std::fs::read_to_string(&config).unwrap();
    std::fs::write(&config, format!("{text}listen = \"127.0.0.1:8788\"\n")).unwrap();
    let out = dir.command().args(["config", "show"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("/channels/webhook/webhook; remove listen"),
        "{err}"
    );
    std::fs::write(&config, text).unwrap();
    // Served: another endpoint of the channel, or another channel, is 404.
    let script = dir.script("s.jsonl", &[json!([{"text": "ok"}])]);
    let bridge = Bridge::start(&dir, &script);
    let base = bridge
        .url
        .trim_end_matches("/channels/webhook/webhook")
        .to_owned();
    let (status, body) = deliver(
        &format!("{base}/channels/webhook/other"),
        Some("d1"),
        &says("hi"),
        SECRET,
        0,
    );
    assert_eq!(status, 404, "{body}");
    let (status, body) = deliver(
        &format!("{base}/channels/nope/webhook"),
        Some("d1"),
        &says("hi"),
        SECRET,
        0,
    );
    assert_eq!(status, 404, "{body}");
    assert!(
        body["error"].as_str().unwrap().contains("no channel"),
        "{body}"
    );
    // A body over the HTTP face's limit: 413, in the channel's JSON.
    let rest = bridge.url.trim_start_matches("http://");
    let (address, path) = rest.split_at(rest.find('/').unwrap());
    let mut stream = TcpStream::connect(address).unwrap();
    let big = "x".repeat(1_200_000);
    let _ = write!(
        stream,
        "POST {path} HTTP/1.1\r\nhost: {address}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{big}",
        big.len()
    );
    let mut response = String::new();
    let _ = stream.read_to_string(&mut response);
    assert!(
        response.starts_with("HTTP/1.1 413"),
        "{}",
        &response[..response.len().min(300)]
    );
    let body: Value = serde_json::from_str(response.split("\r\n\r\n").nth(1).unwrap()).unwrap();
    assert!(
        body["error"]
            .as_str()
            .unwrap()
            .contains("larger than the server accepts"),
        "{body}"
    );
}

/// `GET /v1/channels` with the bearer token: (status, JSON).
fn list_channels(bridge: &Bridge) -> (u16, Value) {
    let rest = bridge.url.trim_start_matches("http://");
    let address = &rest[..rest.find('/').unwrap()];
    let mut stream = TcpStream::connect(address).unwrap();
    write!(
        stream,
        "GET /v1/channels HTTP/1.1\r\nhost: {address}\r\nauthorization: Bearer {HTTP_TOKEN}\r\nconnection: close\r\n\r\n"
    )
    .unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    let status = response.split(' ').nth(1).unwrap().parse().unwrap();
    let body = response.split_once("\r\n\r\n").map_or("", |(_, b)| b);
    (status, serde_json::from_str(body).unwrap_or(Value::Null))
}

/// Each adapter declares what its platform can do, and `GET /v1/channels`
/// shows it in the OpenAPI document's shape: here the webhook (every call
/// keyed, so repeatable) beside Telegram (UTF-16 lengths, topics, a send
/// never repeated). `pincer channels status` reads the store, where no
/// adapter declares anything, and shows none.
#[test]
fn the_channel_list_shows_what_each_platform_can_do() {
    let peer = Peer::start();
    let fake = crate::support::telegram::FakeTelegram::start();
    let dir = setup(&peer);
    let config = dir.path().join("config").join("pincer").join("config.toml");
    let text = std::fs::read_to_string(&config).unwrap();
    std::fs::write(
        &config,
        format!(
            "{text}[channels.telegram]\napi_base = \"{}\"\npoll_timeout_secs = 1\nallow = [\"42\"]\nworkspace = \"{}\"\n",
            fake.url,
            dir.workspace().display()
        ),
    )
    .unwrap();
    let script = dir.script("s.jsonl", &[json!([{"text": "ok"}])]);
    let bridge = Bridge::start_with(&dir, &script, &["telegram"]);
    let deadline = Instant::now() + WAIT;
    let listed = loop {
        let (status, listed) = list_channels(&bridge);
        assert_eq!(status, 200, "{listed}");
        if listed["channels"].as_array().is_some_and(|c| c.len() == 2) {
            break listed;
        }
        assert!(Instant::now() < deadline, "{listed}");
        std::thread::sleep(Duration::from_millis(50));
    };
    // The answer is what the OpenAPI document says it is.
    let doc: Value = serde_json::from_str(
        &std::fs::read_to_string(
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("schema/openapi.json"),
        )
        .unwrap(),
    )
    .unwrap();
    let schema = &doc["paths"]["/v1/channels"]["get"]["responses"]["200"]["content"]["application/json"]
        ["schema"];
    let validator =
        jsonschema::validator_for(&json!({"allOf": [schema], "components": doc["components"]}))
            .unwrap();
    let errors: Vec<String> = validator
        .iter_errors(&listed)
        .map(|e| format!("{e} at {}", e.instance_path()))
        .collect();
    assert!(errors.is_empty(), "{listed}\n{}", errors.join("\n"));
    let channels = listed["channels"].as_array().unwrap();
    let named = |name: &str| {
        channels
            .iter()
            .find(|c| c["name"] == name)
            .unwrap_or_else(|| panic!("no {name} in {listed}"))
    };
    assert_eq!(named("telegram")["kind"], "telegram");
    assert_eq!(
        named("telegram")["capabilities"],
        json!({
            "max_len": 4096, "length_unit": "utf16", "markup": "html",
            "edit": true, "delete": true, "buttons": true, "reactions": false,
            "threads": true, "files": true, "edit_interval_ms": 1000, "working_after_ms": null,
            "idempotent": {"send": false, "edit": true, "delete": true},
        })
    );
    assert_eq!(named("webhook")["kind"], "webhook");
    assert_eq!(
        named("webhook")["capabilities"],
        json!({
            "max_len": 16000, "length_unit": "chars", "markup": null,
            "edit": true, "delete": true, "buttons": true, "reactions": false,
            "threads": true, "files": false, "edit_interval_ms": 1000, "working_after_ms": null,
            "idempotent": {"send": true, "edit": true, "delete": true},
        })
    );
    // From the store: health and outbox, no declaration.
    let deadline = Instant::now() + WAIT;
    loop {
        let out = dir
            .command()
            .args(["channels", "status", "--json"])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let stored: Vec<Value> = String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        if stored.len() == 2 {
            assert!(
                stored.iter().all(|c| c.get("capabilities").is_none()),
                "{stored:?}"
            );
            break;
        }
        assert!(Instant::now() < deadline, "{stored:?}");
        std::thread::sleep(Duration::from_millis(50));
    }
}
