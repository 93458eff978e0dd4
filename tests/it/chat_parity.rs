//! What an editor can do, done from a chat (Telegram, against the fake Bot
//! API, through `pincer serve --http --channel telegram`): the models and
//! modes listed and switched (a switch to `full` ends the approvals), the
//! chat's sessions listed and an earlier one resumed with its history,
//! `/usage`, `/stop`; and pairing: a paired sender listed and revoked over
//! HTTP and by the CLI, wrong codes locking a sender out for longer each
//! time, counted in `/metrics`.

use std::time::Duration;

use crate::support::TestDir;
use crate::support::serve::{HttpServe, TOKEN as HTTP_TOKEN};
use crate::support::telegram::{FakeTelegram, TOKEN};
use serde_json::{Value, json};

const USER: i64 = 42;
const STRANGER: i64 = 77;
const WAIT: Duration = Duration::from_secs(20);

/// `pincer serve --http --channel telegram` with this config (the
/// channel's table added, `extra` in it) and environment.
fn serve(fake: &FakeTelegram, dir: &TestDir, config: &str, extra: &str) -> HttpServe {
    let config = format!(
        "{config}\n[channels.telegram]\napi_base = \"{}\"\nworkspace = \"{}\"\npoll_timeout_secs = 1\ncoalesce_ms = 50\nlive_drafts = false\n{extra}",
        fake.url,
        dir.workspace().display(),
    );
    HttpServe::start_with_env(
        dir,
        Some(&config),
        &["--channel", "telegram"],
        &[
            ("TELEGRAM_BOT_TOKEN", TOKEN),
            ("MY_CODE", "s3cret-code"),
            ("RUST_LOG", "pincer=debug"),
        ],
    )
}

/// A scripted provider `local` offering two models, and prices for one.
fn provider(script: &std::path::Path) -> String {
    format!(
        "provider = \"local\"\ncurrency = \"USD\"\n[providers.local]\nkind = \"scripted\"\nscript = {:?}\nmodels = [\"small\", \"large\"]\n[models.\"large\"]\ninput_price = 2.0\noutput_price = 10.0\n",
        script.display().to_string()
    )
}

/// A message as a person reads it: Telegram's HTML tags dropped, its
/// entities read.
fn plain(text: &str) -> String {
    let mut out = String::new();
    let mut in_tag = false;
    for c in text.chars() {
        match c {
            '<' => in_tag = true,
            '>' if in_tag => in_tag = false,
            _ if !in_tag => out.push(c),
            _ => {}
        }
    }
    out.replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&quot;", "\"")
        .replace("&amp;", "&")
}

/// What the bot said in `user`'s chat, as read.
fn said(fake: &FakeTelegram, user: i64) -> Vec<String> {
    fake.chat(user)
        .into_iter()
        .map(|(_, t)| plain(&t))
        .collect()
}

/// Says `text` in `user`'s chat and waits for the one answer it gets.
fn ask(fake: &FakeTelegram, user: i64, text: &str) -> String {
    let before = fake.chat(user).len();
    fake.user_says(user, text);
    fake.wait_for(&format!("the answer to {text:?}"), WAIT, |f| {
        f.chat(user).len() > before
    });
    said(fake, user)[before].clone()
}

/// Says `text` and waits for an answer that contains `needle`.
fn ask_until(fake: &FakeTelegram, user: i64, text: &str, needle: &str) -> String {
    let before = fake.chat(user).len();
    fake.user_says(user, text);
    fake.wait_for(&format!("{needle:?} after {text:?}"), WAIT, |f| {
        said(f, user)[before..].iter().any(|t| t.contains(needle))
    });
    said(fake, user)[before..]
        .iter()
        .find(|t| t.contains(needle))
        .unwrap()
        .clone()
}

/// One HTTP/1.1 request to the serve face; (status, body).
fn http(addr: &str, method: &str, path: &str) -> (u16, String) {
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect(addr).unwrap();
    write!(
        stream,
        "{method} {path} HTTP/1.1\r\nhost: {addr}\r\nauthorization: Bearer {HTTP_TOKEN}\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"
    )
    .unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    let status = response.split(' ').nth(1).unwrap().parse().unwrap();
    let body = response.split_once("\r\n\r\n").map_or("", |(_, b)| b);
    (status, body.to_owned())
}

/// The JSON lines a `pincer` command prints, after checking it succeeded.
fn json_lines(dir: &TestDir, args: &[&str]) -> Vec<Value> {
    let out = dir.command().args(args).output().unwrap();
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[test]
fn models_sessions_and_usage_answer_in_the_chat_as_in_an_editor() {
    let fake = FakeTelegram::start();
    let dir = TestDir::new();
    let script = dir.script(
        "s.jsonl",
        &[
            json!({"section": "ALPHA"}),
            json!([{"text": "alpha one"}, {"usage": {"input_tokens": 1000, "output_tokens": 100}}]),
            json!([{"text": "alpha two, after alpha one"}, {"usage": {"input_tokens": 2000, "output_tokens": 100}}]),
            json!({"section": "BETA"}),
            json!([{"text": "beta one"}, {"usage": {"input_tokens": 5, "output_tokens": 1}}]),
        ],
    );
    let _serve = serve(
        &fake,
        &dir,
        &provider(&script),
        &format!("allow = [\"{USER}\"]\n"),
    );

    // Nothing to show before the first message.
    assert_eq!(
        ask(&fake, USER, "/usage"),
        "No session yet: send a message to start one."
    );
    assert_eq!(
        ask(&fake, USER, "/sessions"),
        "No sessions yet: send a message to start one."
    );
    // The models, the current one marked; a wrong name lists the choices.
    assert_eq!(
        ask(&fake, USER, "/model"),
        "Model: local/small. Available: local/small (current), local/large."
    );
    assert_eq!(
        ask(&fake, USER, "/model nosuch"),
        "nosuch is not a configured model; available: local/small, local/large."
    );
    assert_eq!(
        ask(&fake, USER, "/model@pincer_bot large"),
        "Model set to local/large."
    );
    assert!(ask(&fake, USER, "/status").contains("Model: local/large"));
    assert_eq!(ask(&fake, USER, "ALPHA first"), "alpha one");
    // Priced: 1000 in at 2, 100 out at 10 per million.
    let usage = ask(&fake, USER, "/usage");
    assert!(
        usage.starts_with("Session ses_")
            && usage.ends_with(": 1 run, 1000 tokens in, 100 out; cost 0.003 USD."),
        "{usage}"
    );
    let alpha = usage
        .strip_prefix("Session ")
        .unwrap()
        .split(':')
        .next()
        .unwrap()
        .to_owned();

    // A new session, then back to the first: the model sees its history
    // (the script's second ALPHA line plays after one answer).
    assert!(ask(&fake, USER, "/new").starts_with("New session ses_"));
    // A new session has the configured model, as an editor's does.
    assert!(ask(&fake, USER, "/status").contains("Model: local/small"));
    assert_eq!(
        ask(&fake, USER, "/model local/small"),
        "Model set to local/small."
    );
    assert_eq!(ask(&fake, USER, "BETA first"), "beta one");
    let listed = ask(&fake, USER, "/sessions");
    let lines: Vec<&str> = listed.lines().filter(|l| !l.trim().is_empty()).collect();
    assert_eq!(
        lines[0],
        "This chat's sessions, most recently active first (/resume N continues one):"
    );
    assert!(
        lines[1].starts_with("1. BETA first — ") && lines[1].ends_with(" (current)"),
        "{listed}"
    );
    assert!(
        lines[2].starts_with("2. ALPHA first — ") && lines[2].ends_with(&format!(", {alpha}")),
        "{listed}"
    );
    assert_eq!(lines.len(), 3, "{listed}");
    assert_eq!(
        ask(&fake, USER, "/resume 9"),
        "There are 2 sessions (/sessions lists them): /resume 9 names none."
    );
    assert_eq!(
        ask(&fake, USER, "/resume two"),
        "/resume takes a session's number from /sessions, not two."
    );
    assert_eq!(
        ask(&fake, USER, "/resume 2"),
        format!("Resumed session {alpha} (ALPHA first). The next message continues it.")
    );
    // The list is in order of activity: a resumed session moves up once
    // it is used.
    assert_eq!(
        ask(&fake, USER, "/resume 2"),
        format!("Session {alpha} is this chat's session already.")
    );
    assert_eq!(
        ask(&fake, USER, "ALPHA again"),
        "alpha two, after alpha one"
    );
    // Its model is the one it was switched to; its usage both runs'.
    assert!(ask(&fake, USER, "/status").contains("Model: local/large"));
    assert_eq!(
        ask(&fake, USER, "/usage"),
        format!("Session {alpha}: 2 runs, 3000 tokens in, 200 out; cost 0.008 USD.")
    );
    let shown = dir.show_session(&alpha);
    let prompts: Vec<&str> = shown["history"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["message"]["role"] == "user")
        .map(|e| e["message"]["content"][0]["text"].as_str().unwrap())
        .collect();
    assert_eq!(prompts, ["ALPHA first", "ALPHA again"]);
    let listed = ask(&fake, USER, "/sessions");
    assert!(
        listed.contains("1. ALPHA first — ") && listed.contains(" (current)"),
        "{listed}"
    );
    let help = ask(&fake, USER, "/help");
    for name in ["/model", "/mode", "/sessions", "/resume N", "/usage"] {
        assert!(help.contains(&format!("\n{name} ")), "{name}: {help}");
    }
}

/// Whether some run of the chat's sessions is in state `running`.
fn running(dir: &TestDir) -> bool {
    json_lines(dir, &["sessions", "list", "--json"])
        .iter()
        .any(|session| {
            let shown = dir.show_session(session["session_id"].as_str().unwrap());
            shown["runs"]
                .as_array()
                .is_some_and(|runs| runs.iter().any(|r| r["state"] == "running"))
        })
}

#[test]
fn a_mode_switched_in_the_chat_ends_the_approvals_and_stop_cancels_a_run() {
    let fake = FakeTelegram::start();
    let dir = TestDir::new();
    let script = dir.script(
        "s.jsonl",
        &[
            json!([{"tool_call": {"id": "w1", "name": "write_file", "arguments": {"path": "a.txt", "content": "a\n"}}}]),
            json!([{"text": "Not written."}]),
            json!([{"tool_call": {"id": "w2", "name": "write_file", "arguments": {"path": "b.txt", "content": "b\n"}}}]),
            json!([{"text": "Written."}]),
            json!([{"text": "slow"}, {"delay_ms": 30000}, {"text": " never"}]),
        ],
    );
    let _serve = serve(
        &fake,
        &dir,
        &provider(&script),
        &format!("allow = [\"{USER}\"]\n"),
    );
    let mode = ask(&fake, USER, "/mode");
    assert!(
        mode.starts_with("Mode: Supervised (supervised). Modes: ")
            && mode.contains("supervised (current: Edits and commands wait for your approval)"),
        "{mode}"
    );
    assert_eq!(
        ask(&fake, USER, "/mode reckless"),
        "reckless is not a mode; use read_only, supervised or full."
    );
    // Supervised: the edit waits for an answer; rejected, nothing is written.
    ask_until(&fake, USER, "write a", "Approval needed");
    ask_until(&fake, USER, "n", "Not written.");
    assert!(!dir.workspace().join("a.txt").exists());
    assert_eq!(ask(&fake, USER, "/mode full"), "Mode set to Full autonomy.");
    ask_until(&fake, USER, "write b", "Written.");
    assert_eq!(
        std::fs::read_to_string(dir.workspace().join("b.txt")).unwrap(),
        "b\n"
    );
    let approvals = said(&fake, USER)
        .iter()
        .filter(|t| t.contains("Approval needed"))
        .count();
    assert_eq!(approvals, 1, "{:?}", said(&fake, USER));

    // A long run, stopped from the chat as an editor cancels its prompt.
    fake.user_says(USER, "take your time");
    fake.wait_for_every("the run to start", WAIT, Duration::from_millis(150), |_| {
        running(&dir)
    });
    ask_until(&fake, USER, "/stop", "Stopping 1 request(s).");
    fake.wait_for("the stopped reply", WAIT, |f| {
        said(f, USER)
            .iter()
            .any(|t| t.contains("(stopped)") || t == "Stopped.")
    });
}

/// The `pincer_channel_pairing_*` counter of the telegram channel.
fn counter(addr: &str, name: &str) -> u64 {
    let (status, metrics) = http(addr, "GET", "/metrics");
    assert_eq!(status, 200);
    let prefix = format!("pincer_channel_pairing_{name}_total{{channel=\"telegram\"}} ");
    metrics
        .lines()
        .find_map(|l| l.strip_prefix(&prefix))
        .unwrap_or_else(|| panic!("{prefix} missing: {metrics}"))
        .parse()
        .unwrap()
}

#[test]
fn paired_senders_are_listed_and_revoked_and_wrong_codes_lock_a_sender_out() {
    let fake = FakeTelegram::start();
    let dir = TestDir::new();
    let script = dir.script("s.jsonl", &[json!([{"text": "Welcome."}])]);
    let serve = serve(
        &fake,
        &dir,
        &provider(&script),
        "pairing_code_env = \"MY_CODE\"\npairing_lockout_secs = 4\n",
    );
    let addr = serve.addr.clone();
    const NOT_ALLOWED: &str = "You are not allowed to use this Pincer. Ask its operator for the pairing code, then send /pair CODE.";
    assert_eq!(ask(&fake, STRANGER, "hi"), NOT_ALLOWED);
    assert_eq!(
        ask(&fake, STRANGER, "/pair s3cret-code"),
        "Paired. Send a message to start."
    );
    assert_eq!(ask(&fake, STRANGER, "hello"), "Welcome.");

    // Listed by the CLI and over HTTP.
    let listed = json_lines(&dir, &["channels", "pairs", "list", "--json"]);
    assert_eq!(listed.len(), 1, "{listed:?}");
    assert_eq!(
        (&listed[0]["channel"], &listed[0]["sender"]),
        (&json!("telegram"), &json!("77"))
    );
    let (status, body) = http(&addr, "GET", "/v1/channels/telegram/pairs");
    assert_eq!(status, 200, "{body}");
    let pairs: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(pairs["pairing_open"], true);
    assert_eq!(pairs["pairs"][0]["sender"], "77");

    // Revoked over HTTP: once; the sender is a stranger again, told so.
    let (status, body) = http(&addr, "DELETE", "/v1/channels/telegram/pairs/77");
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        serde_json::from_str::<Value>(&body).unwrap(),
        json!({"channel": "telegram", "sender": "77", "revoked": true})
    );
    let (status, body) = http(&addr, "DELETE", "/v1/channels/telegram/pairs/77");
    assert_eq!(status, 404, "{body}");
    assert_eq!(ask(&fake, STRANGER, "still there?"), NOT_ALLOWED);
    let (_, body) = http(&addr, "GET", "/v1/channels/telegram/pairs");
    assert_eq!(
        serde_json::from_str::<Value>(&body).unwrap()["pairs"],
        json!([])
    );

    // Paired again, then revoked by the CLI: the same.
    ask_until(&fake, STRANGER, "/pair s3cret-code", "Paired.");
    let out = dir
        .command()
        .args(["channels", "pairs", "revoke", "telegram", "77"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(ask(&fake, STRANGER, "and now?"), NOT_ALLOWED);
    let out = dir
        .command()
        .args(["channels", "pairs", "revoke", "telegram", "77"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(json_lines(&dir, &["channels", "pairs", "list", "--json"]).is_empty());

    // Three wrong codes lock the sender out for 4 s (pairing_lockout_secs);
    // while locked out even the right code is refused.
    assert_eq!(
        ask(&fake, STRANGER, "/pair nope"),
        "That pairing code is not right."
    );
    ask(&fake, STRANGER, "/pair nope");
    assert_eq!(
        ask(&fake, STRANGER, "/pair nope"),
        "That pairing code is not right. Too many wrong codes: try again in 4 seconds."
    );
    let refused = ask(&fake, STRANGER, "/pair s3cret-code");
    assert!(
        refused.starts_with("Too many wrong pairing codes: try again in "),
        "{refused}"
    );
    // Once the wait is over, three more wrong codes lock them out for twice as long.
    loop {
        let answer = ask(&fake, STRANGER, "/pair nope");
        if answer == "That pairing code is not right." {
            break;
        }
        assert!(
            answer.starts_with("Too many wrong pairing codes"),
            "{answer}"
        );
        std::thread::sleep(Duration::from_millis(500));
    }
    ask(&fake, STRANGER, "/pair nope");
    assert_eq!(
        ask(&fake, STRANGER, "/pair nope"),
        "That pairing code is not right. Too many wrong codes: try again in 8 seconds."
    );
    assert_eq!(counter(&addr, "failures"), 6);
    assert_eq!(counter(&addr, "lockouts"), 2);
    // The right code pairs once the wait is over.
    loop {
        let answer = ask(&fake, STRANGER, "/pair s3cret-code");
        if answer == "Paired. Send a message to start." {
            break;
        }
        assert!(
            answer.starts_with("Too many wrong pairing codes"),
            "{answer}"
        );
        std::thread::sleep(Duration::from_millis(500));
    }
    assert_eq!(counter(&addr, "failures"), 6);
    assert!(serve.stderr().contains("sender locked out of pairing"));
}
