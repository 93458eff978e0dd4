//! Messages sent first, answering nothing (`docs/channels.md`, "Sending
//! first"): `pincer send` and `POST /v1/channels/NAME/messages`, recorded
//! by any process and delivered through the outbox by the one serving the
//! channel — here Telegram, against the fake Bot API.

use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::support::TestDir;
use crate::support::telegram::{FakeTelegram, TOKEN};

const USER: i64 = 42;
const WAIT: Duration = Duration::from_secs(20);
const HTTP_TOKEN: &str = "http-token-0123456789abcdef";

fn setup(fake: &FakeTelegram) -> TestDir {
    let dir = TestDir::new();
    let config = dir.path().join("config").join("pincer");
    std::fs::create_dir_all(&config).unwrap();
    std::fs::write(
        config.join("config.toml"),
        format!(
            "[channels.telegram]\napi_base = \"{}\"\nworkspace = \"{}\"\npoll_timeout_secs = 1\nallow = [\"{USER}\"]\n",
            fake.url,
            dir.workspace().display(),
        ),
    )
    .unwrap();
    dir
}

/// `pincer serve --http --channel telegram`; its address once listening.
struct Serve {
    child: Child,
    addr: String,
}

impl Serve {
    fn start(dir: &TestDir) -> Self {
        let ready = dir.path().join("ready");
        let _ = std::fs::remove_file(&ready);
        let child = dir
            .command()
            .env("TELEGRAM_BOT_TOKEN", TOKEN)
            .env("PINCER_HTTP_TOKEN", HTTP_TOKEN)
            .args(["serve", "--http", "127.0.0.1:0", "--channel", "telegram"])
            .arg("--ready-file")
            .arg(&ready)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(dir.path().join("stderr.log")).unwrap())
            .spawn()
            .unwrap();
        let deadline = Instant::now() + WAIT;
        let addr = loop {
            if let Ok(text) = std::fs::read_to_string(&ready)
                && !text.trim().is_empty()
            {
                break text.trim().to_owned();
            }
            assert!(Instant::now() < deadline, "{}", dir.log());
            std::thread::sleep(Duration::from_millis(20));
        };
        Self { child, addr }
    }
}

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn send(dir: &TestDir, args: &[&str]) -> (i32, String, String) {
    let out = dir
        .command()
        .env("TELEGRAM_BOT_TOKEN", TOKEN)
        .arg("send")
        .args(args)
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn http(addr: &str, path: &str, body: &Value) -> (u16, Value) {
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect(addr).unwrap();
    let body = body.to_string();
    write!(
        stream,
        "POST {path} HTTP/1.1\r\nhost: {addr}\r\nauthorization: Bearer {HTTP_TOKEN}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    let status = response.split(' ').nth(1).unwrap().parse().unwrap();
    let body = response.split_once("\r\n\r\n").map_or("", |(_, b)| b);
    (status, serde_json::from_str(body).unwrap_or(Value::Null))
}

/// The texts Telegram was asked to send to `chat`, with their parse mode.
fn sent(fake: &FakeTelegram, chat: i64) -> Vec<(String, Option<String>)> {
    fake.calls("sendMessage")
        .into_iter()
        .filter(|c| {
            c.body["chat_id"] == json!(chat) || c.body["chat_id"] == json!(chat.to_string())
        })
        .map(|c| {
            (
                c.body["text"].as_str().unwrap_or_default().to_owned(),
                c.body["parse_mode"].as_str().map(str::to_owned),
            )
        })
        .collect()
}

#[test]
fn pincer_send_records_and_the_serving_process_delivers_once() {
    let fake = FakeTelegram::start();
    let dir = setup(&fake);
    // Nobody serves the channel yet: recorded, not delivered in time.
    let (code, out, err) = send(
        &dir,
        &[
            "--channel",
            "telegram",
            "--to",
            "42",
            "--id",
            "build-1",
            "--wait",
            "1",
            "The **build** finished: `ok`",
        ],
    );
    assert_eq!(code, 6, "{out}{err}");
    assert!(
        out.contains("message:build-1") && out.contains("held"),
        "{out}"
    );
    // The serving process adopts it, renders it for Telegram and sends it.
    let _serve = Serve::start(&dir);
    fake.wait_for("the message", WAIT, |f| !sent(f, USER).is_empty());
    assert_eq!(
        sent(&fake, USER),
        [(
            "The <b>build</b> finished: <code>ok</code>".to_owned(),
            Some("HTML".to_owned())
        )]
    );
    // Sent again with the same key: nothing more goes out.
    let (code, out, err) = send(
        &dir,
        &[
            "--channel",
            "telegram",
            "--to",
            "42",
            "--id",
            "build-1",
            "--wait",
            "10",
            "--json",
            "again",
        ],
    );
    assert_eq!(code, 0, "{out}{err}");
    let intent: Value = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(intent["status"], "sent");
    assert_eq!(intent["kind"], "message");
    assert_eq!(intent["text"], "The **build** finished: `ok`");
    // A new message while served: delivered, `--wait` says so.
    let (code, out, err) = send(
        &dir,
        &[
            "--channel",
            "telegram",
            "--to",
            "42",
            "--wait",
            "20",
            "second",
        ],
    );
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("sent"), "{out}");
    std::thread::sleep(Duration::from_millis(500));
    let texts: Vec<String> = sent(&fake, USER).into_iter().map(|(t, _)| t).collect();
    assert_eq!(texts.len(), 2, "{texts:?}");
    assert_eq!(texts[1], "second");
}

#[test]
fn pincer_send_refuses_what_it_cannot_send() {
    let fake = FakeTelegram::start();
    let dir = setup(&fake);
    let cases: [(&[&str], &str); 4] = [
        (
            &["--channel", "telegram", "--to", "alice", "hi"],
            "--to: a Telegram chat is a number",
        ),
        (
            &["--channel", "nope", "--to", "42", "hi"],
            "no [channels.nope] table in the config (configured: telegram)",
        ),
        (
            &["--channel", "telegram", "--to", "42", "  "],
            "the message is empty",
        ),
        (
            &["--channel", "telegram", "--to", "", "hi"],
            "--to: expected a chat",
        ),
    ];
    for (args, expected) in cases {
        let (code, out, err) = send(&dir, args);
        assert_eq!(code, 2, "{args:?}: {out}{err}");
        assert!(err.contains(expected), "{args:?}: {err}");
    }
    // Without the bot token the channel's account cannot be named.
    let out = dir
        .command()
        .env_remove("TELEGRAM_BOT_TOKEN")
        .args(["send", "--channel", "telegram", "--to", "42", "hi"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("set TELEGRAM_BOT_TOKEN"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(sent(&fake, USER).is_empty());
}

#[test]
fn http_sends_through_the_channel_outbox() {
    let fake = FakeTelegram::start();
    let dir = setup(&fake);
    let serve = Serve::start(&dir);
    let path = "/v1/channels/telegram/messages";
    let (status, intent) = http(
        &serve.addr,
        path,
        &json!({"to": "42", "text": "Deployed *v2*", "id": "deploy-2"}),
    );
    assert_eq!(status, 202, "{intent}");
    assert_eq!(intent["id"], "message:deploy-2");
    assert_eq!(intent["kind"], "message");
    fake.wait_for("the message", WAIT, |f| !sent(f, USER).is_empty());
    assert_eq!(sent(&fake, USER)[0].0, "Deployed <i>v2</i>");
    // The same key again: the intent as recorded, nothing sent twice.
    let (status, again) = http(
        &serve.addr,
        path,
        &json!({"to": "42", "text": "Deployed *v2*", "id": "deploy-2"}),
    );
    assert_eq!(status, 202, "{again}");
    // Bad input is named.
    let (status, body) = http(&serve.addr, path, &json!({"to": "bob", "text": "x"}));
    assert_eq!(status, 400, "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .starts_with("to: "),
        "{body}"
    );
    let (status, body) = http(&serve.addr, path, &json!({"to": "42", "text": ""}));
    assert_eq!(status, 400, "{body}");
    let (status, body) = http(&serve.addr, path, &json!({"to": "42"}));
    assert_eq!(status, 400, "{body}");
    assert!(
        body["error"]["message"].as_str().unwrap().contains("text"),
        "{body}"
    );
    let (status, body) = http(
        &serve.addr,
        "/v1/channels/matrix/messages",
        &json!({"to": "42", "text": "x"}),
    );
    assert_eq!(status, 404, "{body}");
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(sent(&fake, USER).len(), 1, "{:?}", sent(&fake, USER));
    // The channel's health and outbox, over HTTP and from the store.
    // Connected once the first long poll answered.
    let deadline = Instant::now() + WAIT;
    let listed = loop {
        let (status, listed) = get(&serve.addr, "/v1/channels");
        assert_eq!(status, 200, "{listed}");
        if listed["channels"][0]["connected"] == true || Instant::now() > deadline {
            break listed;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let channel = &listed["channels"][0];
    assert_eq!(channel["name"], "telegram");
    assert_eq!(channel["kind"], "telegram");
    assert_eq!(channel["account"], "123456");
    assert_eq!(channel["serving"], true);
    assert_eq!(channel["connected"], true);
    assert_eq!(channel["outbox"]["sent"], 1);
    let out = dir
        .command()
        .args(["channels", "status", "--json"])
        .output()
        .unwrap();
    let stored: Value = serde_json::from_str(String::from_utf8_lossy(&out.stdout).trim()).unwrap();
    assert_eq!(stored["name"], "telegram");
    assert_eq!(stored["connected"], true);
    assert_eq!(stored["outbox"]["sent"], 1);
    let out = dir.command().args(["channels", "status"]).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.starts_with("telegram (123456)  connected since "),
        "{text}"
    );
    assert!(text.contains("outbox sent 1"), "{text}");
}

fn get(addr: &str, path: &str) -> (u16, Value) {
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect(addr).unwrap();
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nhost: {addr}\r\nauthorization: Bearer {HTTP_TOKEN}\r\nconnection: close\r\n\r\n"
    )
    .unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    let status = response.split(' ').nth(1).unwrap().parse().unwrap();
    let body = response.split_once("\r\n\r\n").map_or("", |(_, b)| b);
    (status, serde_json::from_str(body).unwrap_or(Value::Null))
}

#[test]
fn a_run_tells_someone_with_the_send_message_tool() {
    let fake = FakeTelegram::start();
    let dir = setup(&fake);
    let _serve = Serve::start(&dir);
    let script = dir.script(
        "s.jsonl",
        &[
            json!([{"tool_call": {"id": "m1", "name": "send_message", "arguments": {"channel": "telegram", "to": "42", "text": "The job is **done**"}}}]),
            json!([{"text": "Told them."}]),
        ],
    );
    // Another process (a headless run) records it; the serving one delivers.
    let out = dir
        .command()
        .env("TELEGRAM_BOT_TOKEN", TOKEN)
        .args(["run", "--mode", "full", "--output", "jsonl", "--script"])
        .arg(&script)
        .arg("build it and tell me")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("Queued message:"), "{stdout}");
    fake.wait_for("the message", WAIT, |f| !sent(f, USER).is_empty());
    assert_eq!(
        sent(&fake, USER),
        [("The job is <b>done</b>".to_owned(), Some("HTML".to_owned()))]
    );
    // A channel that does not exist is refused, naming those that do.
    let script = dir.script(
        "t.jsonl",
        &[
            json!([{"tool_call": {"id": "m2", "name": "send_message", "arguments": {"channel": "slack", "to": "x", "text": "hi"}}}]),
            json!([{"text": "Could not."}]),
        ],
    );
    let out = dir
        .command()
        .env("TELEGRAM_BOT_TOKEN", TOKEN)
        .args(["run", "--mode", "full", "--output", "jsonl", "--script"])
        .arg(&script)
        .arg("tell slack")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("no channel \\\"slack\\\"; the channels are telegram"),
        "{stdout}"
    );
}

/// `pincer channels ARGS`: exit code, stdout, stderr.
fn channels(dir: &TestDir, args: &[&str]) -> (i32, String, String) {
    let out = dir.command().arg("channels").args(args).output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// The intents `pincer channels outbox --channel telegram --json` lists.
fn telegram_outbox(dir: &TestDir, status: &str) -> Vec<Value> {
    let (code, out, err) = channels(
        dir,
        &[
            "outbox",
            "--channel",
            "telegram",
            "--status",
            status,
            "--json",
        ],
    );
    assert_eq!(code, 0, "{err}");
    out.lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn status_of(dir: &TestDir, id: &str) -> Value {
    dir.outbox()
        .into_iter()
        .find(|i| i["id"] == id)
        .map_or(Value::Null, |i| i["status"].clone())
}

/// Messages a kill left `unknown_after_send` (Telegram took each request,
/// no answer came) wait for an operator, who checks the chat and decides:
/// sent again (over HTTP, and from another process with the CLI, each
/// delivered once more), arrived (`sent`), dropped (`cancelled`); a
/// decision about anything else is refused naming its status.
#[test]
fn messages_left_unknown_after_send_are_resolved_by_an_operator() {
    let fake = FakeTelegram::start();
    let dir = setup(&fake);
    let chats = ["42", "43", "44", "45"];
    {
        let _serve = Serve::start(&dir);
        fake.hold("sendMessage");
        for (n, chat) in chats.iter().enumerate() {
            let (code, out, err) = send(
                &dir,
                &[
                    "--channel",
                    "telegram",
                    "--to",
                    chat,
                    "--id",
                    &format!("m{n}"),
                    &format!("Message {n}"),
                ],
            );
            assert_eq!(code, 0, "{out}{err}");
        }
        fake.wait_for("every send in flight", WAIT, |f| {
            f.calls("sendMessage").len() == chats.len()
        });
        // `kill -9` with the four requests taken and unanswered.
    }
    fake.release("sendMessage");
    let serve = Serve::start(&dir);
    fake.wait_for_every(
        "the sends found unknown after the kill",
        WAIT,
        Duration::from_millis(150),
        |_| telegram_outbox(&dir, "unknown_after_send").len() == chats.len(),
    );
    assert_eq!(
        fake.calls("sendMessage").len(),
        chats.len(),
        "resent blindly"
    );
    // The channel filter is in the read: none of another channel.
    let (code, out, _) = channels(&dir, &["outbox", "--channel", "matrix"]);
    assert_eq!((code, out.as_str()), (0, "no outbound messages\n"));

    // Over HTTP: the channel's outbox, of one status.
    let (status, listed) = get(
        &serve.addr,
        "/v1/channels/telegram/outbox?status=unknown_after_send&limit=10",
    );
    assert_eq!(status, 200, "{listed}");
    assert_eq!(listed["channel"], "telegram");
    let intents = listed["intents"].as_array().unwrap();
    assert_eq!(intents.len(), chats.len(), "{listed:#}");
    let first = intents.iter().find(|i| i["id"] == "message:m0").unwrap();
    assert_eq!(first["excerpt"], "Message 0");
    assert_eq!(first["to"], "42");
    assert_eq!(first["kind"], "message");
    assert_eq!(first["status"], "unknown_after_send");
    assert_eq!(first["failure"]["kind"], "unknown");
    let (status, _) = get(&serve.addr, "/v1/channels/telegram/outbox?status=sent");
    assert_eq!(status, 200);
    for (query, parameter) in [("status=lost", "status"), ("limit=0", "limit")] {
        let (status, body) = get(
            &serve.addr,
            &format!("/v1/channels/telegram/outbox?{query}"),
        );
        assert_eq!(status, 400, "{body}");
        let message = body["error"]["message"].as_str().unwrap();
        assert!(message.contains(&format!("`{parameter}`")), "{message}");
    }
    let (status, body) = get(&serve.addr, "/v1/channels/matrix/outbox");
    assert_eq!(status, 404, "{body}");

    // Resend over HTTP: pending again, delivered once more by this process.
    let resolve = |id: &str, how: &str| {
        http(
            &serve.addr,
            &format!("/v1/channels/telegram/outbox/{id}"),
            &json!({"resolve": how}),
        )
    };
    let (status, body) = resolve("message:m0", "resend");
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["id"], "message:m0");
    fake.wait_for("the message sent again", WAIT, |f| sent(f, 42).len() == 2);
    // Resend from another process: the serving one picks it up.
    let (code, out, err) = channels(&dir, &["resolve", "message:m1", "--resend"]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("resend"), "{out}");
    fake.wait_for("the message sent again", WAIT, |f| sent(f, 43).len() == 2);
    // The person saw it: recorded sent, nothing sent.
    let (code, out, err) = channels(&dir, &["resolve", "message:m2", "--arrived"]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("(sent)"), "{out}");
    let (status, body) = resolve("message:m3", "drop");
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["status"], "cancelled");
    fake.wait_for_every(
        "the resent ones recorded sent",
        WAIT,
        Duration::from_millis(150),
        |_| status_of(&dir, "message:m0") == "sent" && status_of(&dir, "message:m1") == "sent",
    );
    assert_eq!(status_of(&dir, "message:m2"), "sent");
    assert_eq!(status_of(&dir, "message:m3"), "cancelled");

    // Only from unknown_after_send: a second decision is refused, naming why.
    let (status, body) = resolve("message:m0", "drop");
    assert_eq!(status, 409, "{body}");
    let message = body["error"]["message"].as_str().unwrap();
    assert!(message.contains("is sent"), "{message}");
    let (code, _, err) = channels(&dir, &["resolve", "message:m3", "--resend"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("is cancelled"), "{err}");
    let (status, body) = resolve("message:nope", "arrived");
    assert_eq!(status, 404, "{body}");
    let (status, body) = resolve("message:m1", "maybe");
    assert_eq!(status, 400, "{body}");
    let (code, _, err) = channels(&dir, &["resolve", "message:m1"]);
    assert_eq!(code, 2, "{err}");

    // Each resent message went out once more, and nothing else did.
    let counts: Vec<usize> = [42, 43, 44, 45]
        .iter()
        .map(|c| sent(&fake, *c).len())
        .collect();
    assert_eq!(counts, [2, 2, 1, 1]);
    assert_eq!(sent(&fake, 42)[1].0, "Message 0");
}
