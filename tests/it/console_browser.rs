//! The web console in headless Chromium (`tests/fixtures/browser/console.mjs`,
//! driven by Playwright; `docs/console.md`): what an operator does from the
//! browser works, and checked where it lands (the file on disk, the
//! channel's outbox); what another origin tries with the logged-in browser
//! does nothing. Screenshots of every page are kept in
//! `target/browser-artifacts/`.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::support::serve::{HttpServe, TOKEN};
use crate::support::webhook::{Peer, SECRET};
use crate::support::{TIMEOUT, TestDir, browser};

/// Sends a message first through the webhook channel and waits until the
/// peer took it: the channel page then has an outbox to show.
fn send_first(server: &HttpServe) {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        let client = reqwest::Client::new();
        let deadline = Instant::now() + TIMEOUT;
        loop {
            let response = client
                .post(server.url("/v1/channels/webhook/messages"))
                .bearer_auth(TOKEN)
                .json(&json!({"to": "room-1", "text": "Deploy finished", "id": "deploy-1"}))
                .send()
                .await
                .unwrap();
            let status = response.status().as_u16();
            if status == 202 {
                break;
            }
            let body = response.text().await.unwrap_or_default();
            assert!(
                status == 503 && Instant::now() < deadline,
                "sending first: {status} {body}"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        loop {
            let channels: Value = client
                .get(server.url("/v1/channels"))
                .bearer_auth(TOKEN)
                .send()
                .await
                .unwrap()
                .json()
                .await
                .unwrap();
            if channels["channels"][0]["outbox"]["sent"] == 1 {
                return;
            }
            assert!(Instant::now() < deadline, "not sent: {channels}");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    });
}

#[test]
fn an_operator_logs_in_watches_approves_answers_reads_and_logs_out_and_another_origin_cannot_act() {
    if !browser::available() {
        return;
    }
    let peer = Peer::start();
    let dir = TestDir::new();
    let workspace = dir.workspace();
    let config = format!(
        "[channels.webhook]\ncallback_url = \"{}\"\nallow = [\"u1\"]\nworkspace = \"{}\"\n",
        peer.url,
        workspace.display()
    );
    let script = dir.script(
        "s.jsonl",
        &[
            // Streamed in three parts; the last carries markup and a
            // `javascript:` link that must show as text.
            json!([
                {"text": "Streaming one "}, {"delay_ms": 700},
                {"text": "two "}, {"delay_ms": 700},
                {"text": "three <script>window.pwned=1</script> <img src=x onerror=\"window.pwned=2\"> [click](javascript:window.pwned=3)"}
            ]),
            json!([{"tool_call": {"id": "w1", "name": "write_file", "arguments": {"path": "a.txt", "content": "from the console\n"}}}]),
            json!([{"text": "Wrote a.txt"}]),
            json!([{"tool_call": {"id": "q1", "name": "ask_user", "arguments": {"question": "Which colour?", "options": ["Red", "Blue"]}}}]),
            json!([{"text": "You chose"}]),
        ],
    );
    let server = HttpServe::start_with_env(
        &dir,
        Some(&config),
        &["--script", script.to_str().unwrap(), "--channel", "webhook"],
        &[("PINCER_WEBHOOK_SECRET", SECRET)],
    );
    send_first(&server);
    let port = server.addr.rsplit(':').next().unwrap().to_owned();
    let outcome = browser::run(
        &browser::script("console.mjs"),
        &[
            ("PINCER_URL", &server.url("")),
            ("PINCER_OTHER_ORIGIN", &format!("http://localhost:{port}")),
            ("PINCER_TOKEN", TOKEN),
            ("PINCER_WORKSPACE", workspace.to_str().unwrap()),
        ],
    );
    // The approval given in the browser let the tool write the file (the
    // script read it), and the browser's /undo took it away again.
    assert!(!workspace.join("a.txt").exists());
    let session = outcome.result["session"].as_str().unwrap();
    let shown = dir.show_session(session);
    assert_eq!(shown["runs"].as_array().unwrap().len(), 4, "{shown}");
    // Nothing another origin tried made a session: the one the browser
    // started is the only one of origin `http`.
    let listed = dir
        .command()
        .args(["sessions", "list", "--json"])
        .output()
        .unwrap();
    // One session per line.
    let listed = String::from_utf8(listed.stdout).unwrap();
    let http_sessions = listed
        .lines()
        .map(|line| serde_json::from_str::<Value>(line).unwrap())
        .filter(|session| session["origin"] == "http")
        .count();
    assert_eq!(http_sessions, 1, "{listed}");
    for page in [
        "login",
        "session-streamed",
        "approvals",
        "session",
        "run",
        "sessions",
        "channels",
        "health",
        "session-phone",
        "logged-out",
    ] {
        assert!(
            outcome.artifacts.join(format!("{page}.png")).is_file(),
            "no screenshot of {page}"
        );
    }
    assert!(server.stop().success());
}

/// Two messages a `kill -9` left `unknown_after_send` (the fake Bot API
/// took the requests and never answered), decided from the Channels page
/// (`tests/fixtures/browser/outbox.mjs`): the one sent again reaches the
/// chat once more, the one dropped is `cancelled` and nothing more is sent.
#[test]
fn an_operator_decides_about_unknown_messages_and_revokes_a_paired_sender_from_the_channels_page() {
    use crate::support::telegram::{FakeTelegram, TOKEN as BOT_TOKEN};
    if !browser::available() {
        return;
    }
    let fake = FakeTelegram::start();
    let dir = TestDir::new();
    let config = format!(
        "[channels.telegram]\napi_base = \"{}\"\nworkspace = \"{}\"\npoll_timeout_secs = 1\nallow = [\"42\"]\npairing_code_env = \"PINCER_PAIRING\"\n",
        fake.url,
        dir.workspace().display()
    );
    let sends_to = |chat: i64| {
        fake.calls("sendMessage")
            .into_iter()
            .filter(|c| {
                c.body["chat_id"] == json!(chat) || c.body["chat_id"] == json!(chat.to_string())
            })
            .count()
    };
    fake.hold("sendMessage");
    let first = HttpServe::start_with_env(
        &dir,
        Some(&config),
        &["--channel", "telegram"],
        &[
            ("TELEGRAM_BOT_TOKEN", BOT_TOKEN),
            ("PINCER_PAIRING", "s3cret"),
        ],
    );
    for (id, chat, text) in [("m0", "42", "Lost one"), ("m1", "43", "Lost two")] {
        let out = dir
            .command()
            .env("TELEGRAM_BOT_TOKEN", BOT_TOKEN)
            .args([
                "send",
                "--channel",
                "telegram",
                "--to",
                chat,
                "--id",
                id,
                text,
            ])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    fake.wait_for("both sends in flight", TIMEOUT, |f| {
        f.calls("sendMessage").len() == 2
    });
    first.crash();
    fake.release("sendMessage");
    let server = HttpServe::start_with_env(
        &dir,
        None,
        &["--channel", "telegram"],
        &[
            ("TELEGRAM_BOT_TOKEN", BOT_TOKEN),
            ("PINCER_PAIRING", "s3cret"),
        ],
    );
    // A stranger pairs with the code: the page lists them, to revoke.
    fake.user_says(77, "/pair s3cret");
    let paired = || {
        let out = dir
            .command()
            .args([
                "channels",
                "pairs",
                "list",
                "--channel",
                "telegram",
                "--json",
            ])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(|line| serde_json::from_str::<Value>(line).unwrap()["sender"].clone())
            .collect::<Vec<_>>()
    };
    fake.wait_for_every(
        "the stranger paired",
        TIMEOUT,
        Duration::from_millis(150),
        |_| paired() == [json!("77")],
    );
    fake.wait_for_every(
        "both found unknown after send",
        TIMEOUT,
        Duration::from_millis(150),
        |_| {
            dir.outbox()
                .iter()
                .filter(|i| i["status"] == "unknown_after_send")
                .count()
                == 2
        },
    );
    let outcome = browser::run(
        &browser::script("outbox.mjs"),
        &[("PINCER_URL", &server.url("")), ("PINCER_TOKEN", TOKEN)],
    );
    fake.wait_for("the message sent again", TIMEOUT, |_| sends_to(42) == 2);
    let status = |id: &str| {
        dir.outbox()
            .into_iter()
            .find(|i| i["id"] == id)
            .map(|i| i["status"].clone())
    };
    fake.wait_for_every(
        "the resent one recorded sent",
        TIMEOUT,
        Duration::from_millis(150),
        |_| status("message:m0") == Some(json!("sent")),
    );
    assert_eq!(status("message:m1"), Some(json!("cancelled")));
    assert_eq!((sends_to(42), sends_to(43)), (2, 1));
    assert!(paired().is_empty(), "the revoked sender is still paired");
    // Revoked: their next message is a stranger's, told how to pair.
    fake.user_says(77, "hello again");
    fake.wait_for("the revoked sender told how to pair", TIMEOUT, |f| {
        f.chat(77)
            .iter()
            .any(|(_, text)| text.contains("Ask its operator for the pairing code"))
    });
    for page in ["unknown", "unknown-phone", "pairs"] {
        assert!(
            outcome.artifacts.join(format!("{page}.png")).is_file(),
            "no screenshot of {page}"
        );
    }
    assert!(server.stop().success());
}
