//! A newcomer's way to a real model: the no-provider messages, a base URL
//! alone, `pincer login` / `logout`, and sessions that keep their provider.
//! The model API is a loopback fake speaking OpenAI's wire format.

use std::io::Write as _;
use std::os::unix::fs::PermissionsExt as _;
use std::process::{Output, Stdio};
use std::sync::{Arc, Mutex};

use crate::support::TestDir;
use crate::support::http::{Loopback, Reply, dead_url};
use serde_json::{Value, json};

/// A request the fake saw.
type Seen = crate::support::http::Request;

/// An OpenAI-compatible server on loopback: `GET /v1/models` lists two
/// models, `POST /v1/chat/completions` streams "Hello from the fake". With
/// `key`, both answer 401 unless `Authorization: Bearer KEY` is sent.
pub(crate) fn fake(key: Option<&'static str>) -> (String, Arc<Mutex<Vec<Seen>>>) {
    let server = Loopback::start(move |request, _| {
        let allowed =
            key.is_none_or(|k| request.header("authorization") == Some(&format!("Bearer {k}")));
        if !allowed {
            Reply::json(
                401,
                &json!({"error": {"message": "Incorrect API key provided", "type": "invalid_request_error"}}),
            )
        } else if request.path.ends_with("/models") {
            Reply::json(
                200,
                &json!({"object": "list", "data": [{"id": "m-small", "object": "model"}, {"id": "m-big", "object": "model"}]}),
            )
        } else {
            Reply::event_stream(stream_body())
        }
    });
    (format!("{}/v1", server.url), server.seen())
}

fn stream_body() -> String {
    let chunk = |delta: Value, finish: Value| {
        format!(
            "data: {}\n\n",
            json!({"id": "c1", "object": "chat.completion.chunk", "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})
        )
    };
    chunk(json!({"content": "Hello from the fake"}), Value::Null)
        + &chunk(json!({}), json!("stop"))
        + "data: [DONE]\n\n"
}

fn run(dir: &TestDir, args: &[&str], env: &[(&str, &str)], stdin: &str) -> Output {
    let mut child = dir
        .command()
        .envs(env.iter().copied())
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(stdin.as_bytes())
        .unwrap();
    child.wait_with_output().unwrap()
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn credentials(dir: &TestDir) -> std::path::PathBuf {
    dir.path().join("config/pincer/credentials.toml")
}

#[test]
fn with_no_provider_every_face_names_login_and_the_key_variable() {
    let dir = TestDir::new();
    let out = run(&dir, &["run", "hi"], &[], "");
    assert_eq!(out.status.code(), Some(2));
    let err = text(&out.stderr);
    for wanted in [
        "pincer login",
        "OPENAI_API_KEY=",
        "OPENAI_BASE_URL=",
        "--model",
    ] {
        assert!(err.contains(wanted), "{wanted}: {err}");
    }
    // The path is the real one, not a variable's name.
    assert!(!err.contains("$XDG_CONFIG_HOME"), "{err}");
    assert_eq!(err.matches("no model provider").count(), 1, "{err}");

    // The editor face: the prompt's run fails with the same words.
    let mut acp = crate::support::AcpProcess::spawn(&dir, &[]);
    acp.initialize();
    let session = acp.new_session(&dir.workspace());
    let (updates, response) = acp.prompt(&session, "hi");
    let shown = serde_json::to_string(&(updates, response)).unwrap();
    assert!(shown.contains("pincer login"), "{shown}");
}

#[test]
fn a_base_url_alone_makes_a_provider_that_sends_no_key() {
    let dir = TestDir::new();
    let (url, seen) = fake(None);
    let out = run(
        &dir,
        &["run", "--model", "m-small", "hi"],
        &[("OPENAI_BASE_URL", &url)],
        "",
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout), "Hello from the fake\n");
    let seen = seen.lock().unwrap();
    let chat = seen
        .iter()
        .find(|s| s.path.ends_with("/chat/completions"))
        .unwrap();
    assert_eq!(chat.header("authorization"), None);
    assert_eq!(chat.body["model"], "m-small");
}

#[test]
fn openai_without_a_key_or_a_url_fails_at_once() {
    let dir = TestDir::new();
    let started = std::time::Instant::now();
    let out = run(
        &dir,
        &[
            "run",
            "--provider",
            "openai",
            "--model",
            "gpt-4.1-mini",
            "hi",
        ],
        &[],
        "",
    );
    assert_eq!(out.status.code(), Some(2));
    let err = text(&out.stderr);
    assert!(
        err.contains("no API key for api.openai.com")
            && err.contains("OPENAI_API_KEY")
            && err.contains("pincer login"),
        "{err}"
    );
    // Printed once, not also as a log line.
    assert_eq!(err.matches("no API key").count(), 1, "{err}");
    assert!(started.elapsed() < std::time::Duration::from_secs(10));
}

#[test]
fn login_checks_and_stores_a_local_server_then_runs_need_no_flags() {
    let dir = TestDir::new();
    let (url, seen) = fake(None);
    // Piped answers, one per line: provider 4 (local), the URL, Enter for
    // the first model the server lists.
    let out = run(&dir, &["login"], &[], &format!("4\n{url}\n\n"));
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let err = text(&out.stderr);
    assert!(
        err.contains("m-small, m-big") && err.contains("logged in: provider local, model m-small"),
        "{err}"
    );
    let path = credentials(&dir);
    let mode = std::fs::metadata(&path).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600);
    assert!(!dir.path().join("config/pincer/config.toml").exists());
    assert!(
        seen.lock()
            .unwrap()
            .iter()
            .any(|s| s.method == "GET" && s.path == "/v1/models")
    );

    let out = run(&dir, &["run", "hi"], &[], "");
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout), "Hello from the fake\n");
    let shown = run(&dir, &["config", "show"], &[], "");
    assert!(
        text(&shown.stdout).contains("provider = \"local\""),
        "{}",
        text(&shown.stdout)
    );

    let out = run(&dir, &["logout"], &[], "");
    assert_eq!(out.status.code(), Some(0));
    assert!(
        text(&out.stderr).contains("removed the logins for local"),
        "{}",
        text(&out.stderr)
    );
    assert!(!path.exists());
    let out = run(&dir, &["run", "hi"], &[], "");
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("pincer login"));
}

#[test]
fn login_with_a_key_stores_it_privately_and_a_refused_key_stores_nothing() {
    let dir = TestDir::new();
    let (url, seen) = fake(Some("sk-good-0123456789abcdef"));
    let args = [
        "login",
        "--provider",
        "openai",
        "--base-url",
        &url,
        "--api-key-stdin",
        "--model",
        "m-big",
    ];
    let out = run(&dir, &args, &[], "sk-wrong-0123456789abcdef\n");
    assert_eq!(out.status.code(), Some(2));
    let err = text(&out.stderr);
    assert!(
        err.contains("refused the key (HTTP 401)") && err.contains("nothing was stored"),
        "{err}"
    );
    assert!(!credentials(&dir).exists());

    let out = run(&dir, &args, &[], "sk-good-0123456789abcdef\n");
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let stored = std::fs::read_to_string(credentials(&dir)).unwrap();
    assert!(stored.contains("sk-good-0123456789abcdef"), "{stored}");
    // The key is never shown: not by login, not by config show.
    assert!(!text(&out.stderr).contains("sk-good"));
    let shown = run(&dir, &["config", "show"], &[], "");
    assert!(
        !text(&shown.stdout).contains("sk-good"),
        "{}",
        text(&shown.stdout)
    );

    // A run with no flags, and the environment's key does not replace the login's.
    let out = run(
        &dir,
        &["run", "hi"],
        &[("OPENAI_API_KEY", "sk-env-other")],
        "",
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let seen = seen.lock().unwrap();
    let chat = seen
        .iter()
        .rfind(|s| s.path.ends_with("/chat/completions"))
        .unwrap();
    assert_eq!(
        chat.header("authorization"),
        Some("Bearer sk-good-0123456789abcdef")
    );
    assert_eq!(chat.body["model"], "m-big");
    drop(seen);

    let out = run(&dir, &["logout", "openai"], &[], "");
    assert_eq!(out.status.code(), Some(0));
    assert!(!credentials(&dir).exists());
    let out = run(&dir, &["logout", "nobody"], &[], "");
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn a_continued_session_keeps_its_provider_and_model_without_flags() {
    let dir = TestDir::new();
    let (url, seen) = fake(None);
    let env = [("OPENAI_BASE_URL", url.as_str())];
    let out = run(
        &dir,
        &["run", "--output", "jsonl", "--model", "m-big", "first"],
        &env,
        "",
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let first: Value = serde_json::from_str(text(&out.stdout).lines().next().unwrap()).unwrap();
    let session = first["session_id"].as_str().unwrap().to_owned();
    let out = run(&dir, &["run", "--session", &session, "second"], &env, "");
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let seen = seen.lock().unwrap();
    let chats: Vec<&Seen> = seen
        .iter()
        .filter(|s| s.path.ends_with("/chat/completions"))
        .collect();
    assert_eq!(chats.len(), 2);
    assert_eq!(chats[1].body["model"], "m-big");

    // A scripted session says what it needs to go on.
    let script = dir.script(
        "s.jsonl",
        &[json!([{"text": "one"}]), json!([{"text": "two"}])],
    );
    let out = run(
        &dir,
        &[
            "run",
            "--output",
            "jsonl",
            "--script",
            script.to_str().unwrap(),
            "a",
        ],
        &[],
        "",
    );
    let first: Value = serde_json::from_str(text(&out.stdout).lines().next().unwrap()).unwrap();
    let session = first["session_id"].as_str().unwrap().to_owned();
    let out = run(&dir, &["run", "--session", &session, "b"], &[], "");
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("pass --script FILE to continue it"),
        "{}",
        text(&out.stderr)
    );
    let out = run(
        &dir,
        &[
            "run",
            "--session",
            &session,
            "--script",
            script.to_str().unwrap(),
            "b",
        ],
        &[],
        "",
    );
    assert_eq!(text(&out.stdout), "two\n", "{}", text(&out.stderr));
}

fn config(dir: &TestDir, text: &str) {
    let path = dir.path().join("config/pincer/config.toml");
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

fn line<'a>(out: &'a str, start: &str) -> &'a str {
    out.lines()
        .find(|l| l.contains(start))
        .unwrap_or_else(|| panic!("no line with {start:?}:\n{out}"))
}

#[test]
fn doctor_passes_a_good_setup_and_names_each_problem_with_its_fix() {
    // Good: a scripted provider with its model; exit 0.
    let dir = TestDir::new();
    config(&dir, "");
    dir.script("config/pincer/s.jsonl", &[json!([{"text": "hi"}])]);
    config(
        &dir,
        "provider = \"demo\"\n[providers.demo]\nkind = \"scripted\"\nscript = \"s.jsonl\"\nmodels = [\"script\"]\n",
    );
    let out = run(&dir, &["doctor"], &[], "");
    let shown = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{shown}{}", text(&out.stderr));
    assert!(line(&shown, "provider demo").starts_with("ok"), "{shown}");

    // A config file that cannot be read is a configuration error: exit 2,
    // as in the exit-code table, and the checks stop there.
    let dir = TestDir::new();
    config(&dir, "provider = [\n");
    let out = run(&dir, &["doctor"], &[], "");
    let shown = text(&out.stdout);
    assert_eq!(out.status.code(), Some(2), "{shown}{}", text(&out.stderr));
    assert!(line(&shown, "config").starts_with("FAIL"), "{shown}");
    assert!(!shown.contains("database"), "{shown}");

    // openai named, no key, no URL: the fix names the variable and login.
    let dir = TestDir::new();
    config(&dir, "provider = \"openai\"\nmodel = \"gpt-4.1-mini\"\n");
    let out = run(&dir, &["doctor"], &[], "");
    let shown = text(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{shown}");
    let openai = line(&shown, "provider openai");
    assert!(
        openai.starts_with("FAIL")
            && openai.contains("OPENAI_API_KEY")
            && openai.contains("pincer login"),
        "{shown}"
    );

    // A key but no model: the fix is a setting, not a flag doctor lacks.
    let dir = TestDir::new();
    config(&dir, "provider = \"openai\"\n");
    let out = run(
        &dir,
        &["doctor"],
        &[("OPENAI_API_KEY", "sk-test-0123456789")],
        "",
    );
    let shown = text(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{shown}");
    let openai = line(&shown, "provider openai");
    assert!(
        openai.contains("no model") && openai.contains("PINCER_MODEL"),
        "{shown}"
    );
    assert!(!openai.contains("--model"), "{shown}");
    assert!(!shown.contains("sk-test"), "{shown}");

    // --online: a server that answers, and a port nobody listens on.
    let (url, _) = fake(None);
    let dir = TestDir::new();
    config(&dir, "provider = \"openai\"\nmodel = \"m-small\"\n");
    let out = run(
        &dir,
        &["doctor", "--online"],
        &[("OPENAI_BASE_URL", &url)],
        "",
    );
    let shown = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{shown}");
    assert!(
        line(&shown, "provider openai").contains("answers (2 models listed)"),
        "{shown}"
    );
    let dead = format!("{}/v1", dead_url());
    let out = run(
        &dir,
        &["doctor", "--online"],
        &[("OPENAI_BASE_URL", &dead)],
        "",
    );
    let shown = text(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{shown}");
    assert!(
        line(&shown, "provider openai").contains("does not answer"),
        "{shown}"
    );

    // An MCP server whose command does not exist.
    let dir = TestDir::new();
    config(&dir, "");
    dir.script("config/pincer/s.jsonl", &[json!([{"text": "hi"}])]);
    config(
        &dir,
        "provider = \"demo\"\n[providers.demo]\nkind = \"scripted\"\nscript = \"s.jsonl\"\nmodels = [\"script\"]\n\
         [mcpServers.broken]\ncommand = \"/nonexistent/mcp-server\"\n",
    );
    let out = run(&dir, &["doctor"], &[], "");
    let shown = text(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{shown}");
    let mcp = line(&shown, "mcp broken");
    assert!(
        mcp.starts_with("FAIL")
            && mcp.contains("/nonexistent/mcp-server")
            && mcp.contains("[mcpServers.broken]"),
        "{shown}"
    );
}

/// `pincer doctor --help` states the exit codes the test above sees: 0 when
/// every check passes, 1 when one fails, 2 when the config cannot be read.
#[test]
fn doctor_help_states_its_exit_codes() {
    let dir = TestDir::new();
    let out = run(&dir, &["doctor", "--help"], &[], "");
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let help = text(&out.stdout)
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ");
    for code in [
        "0 every check passed",
        "1 a check failed",
        "2 the config file cannot be read",
    ] {
        assert!(help.contains(code), "missing {code:?} in {help}");
    }
}

/// A local server's URL given without `/v1` answers 404 for its models:
/// login finds them under `/v1`, offers that URL and stores it once taken;
/// a model the server does not list is stored with a warning naming the
/// list; declining the offer stores nothing.
#[test]
fn login_offers_the_url_with_v1_and_warns_of_a_model_the_server_does_not_list() {
    let server = Loopback::start(|request, _| {
        if request.path == "/v1/models" {
            Reply::json(
                200,
                &json!({"object": "list", "data": [{"id": "m-small", "object": "model"}, {"id": "m-big", "object": "model"}]}),
            )
        } else {
            Reply::json(404, &json!({"error": "not found"}))
        }
    });
    let url = server.url.clone();
    let dir = TestDir::new();
    let args = [
        "login",
        "--provider",
        "local",
        "--base-url",
        url.as_str(),
        "--model",
        "m-huge",
    ];
    let out = run(&dir, &args, &[], "\n");
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert!(err.contains(&format!("{url} answered HTTP 404")), "{err}");
    assert!(err.contains(&format!("Use {url}/v1? [Y/n]")), "{err}");
    assert!(
        err.contains("does not list the model") && err.contains("it lists: m-small, m-big"),
        "{err}"
    );
    let stored = std::fs::read_to_string(credentials(&dir)).unwrap();
    assert!(
        stored.contains(&format!("base_url = \"{url}/v1\"")),
        "{stored}"
    );
    assert!(stored.contains("model = \"m-huge\""), "{stored}");

    let declined = TestDir::new();
    let out = run(&declined, &args, &[], "n\n");
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    assert!(text(&out.stderr).contains("nothing was stored"));
    assert!(!credentials(&declined).exists());
}
