//! Real providers through the binary, against loopback servers that answer in
//! the providers' documented streaming formats: the conventional environment
//! variables, config tables, failover, and plain-words errors.

use std::process::{Output, Stdio};
use std::sync::{Arc, Mutex};

use crate::support::TestDir;
use crate::support::http::anthropic::text_stream as anthropic_stream;
use crate::support::http::{Loopback, Reply, dead_url};
use serde_json::{Value, json};

type Seen = crate::support::http::Request;

/// Answers every request with `status` and `body`; records what it saw.
fn serve(status: u16, body: String) -> (String, Arc<Mutex<Vec<Seen>>>) {
    serve_each(status, vec![body])
}

/// Answers the n-th request with the n-th body (the last one repeats).
fn serve_each(status: u16, bodies: Vec<String>) -> (String, Arc<Mutex<Vec<Seen>>>) {
    serve_answers(
        bodies
            .into_iter()
            .map(|body| Answer {
                status,
                headers: Vec::new(),
                body,
            })
            .collect(),
    )
}

/// One scripted HTTP answer.
#[derive(Debug, Clone)]
struct Answer {
    status: u16,
    headers: Vec<(&'static str, &'static str)>,
    body: String,
}

impl Answer {
    fn ok(body: String) -> Self {
        Self {
            status: 200,
            headers: Vec::new(),
            body,
        }
    }

    fn error(status: u16, body: Value) -> Self {
        Self {
            status,
            headers: Vec::new(),
            body: body.to_string(),
        }
    }

    fn header(mut self, name: &'static str, value: &'static str) -> Self {
        self.headers.push((name, value));
        self
    }
}

/// Answers the n-th request with the n-th answer (the last one repeats).
fn serve_answers(answers: Vec<Answer>) -> (String, Arc<Mutex<Vec<Seen>>>) {
    let server = Loopback::model(move |_, n| {
        let answer = &answers[n.min(answers.len() - 1)];
        let kind = if answer.status == 200 {
            "text/event-stream"
        } else {
            "application/json"
        };
        answer.headers.iter().fold(
            Reply::new(answer.status, kind, answer.body.clone()),
            |reply, (name, value)| reply.header(name, value),
        )
    });
    (server.url.clone(), server.seen())
}

fn openai_stream(text: &[&str]) -> String {
    let mut out = String::new();
    for piece in text {
        out.push_str(&format!(
            "data: {}\n\n",
            json!({"id": "c1", "object": "chat.completion.chunk", "choices": [{"index": 0, "delta": {"content": piece}, "finish_reason": null}]})
        ));
    }
    out.push_str(&format!(
        "data: {}\n\n",
        json!({"id": "c1", "object": "chat.completion.chunk", "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
    ));
    out.push_str(&format!(
        "data: {}\n\ndata: [DONE]\n\n",
        json!({"id": "c1", "object": "chat.completion.chunk", "choices": [], "usage": {"prompt_tokens": 12, "completion_tokens": 3, "total_tokens": 15}})
    ));
    out
}

fn run(dir: &TestDir, args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut command = dir.command();
    command.args(args).stdin(Stdio::null());
    for (name, value) in env {
        command.env(name, value);
    }
    command.output().unwrap()
}

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn openai_works_from_its_usual_environment_variables() {
    let dir = TestDir::new();
    let (url, seen) = serve(200, openai_stream(&["Hel", "lo"]));
    let out = run(
        &dir,
        &[
            "run",
            "--provider",
            "openai",
            "--model",
            "gpt-test",
            "Say hello",
        ],
        &[
            ("OPENAI_API_KEY", "sk-test-key-0123456789"),
            ("OPENAI_BASE_URL", &format!("{url}/v1")),
        ],
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(stdout(&out), "Hello\n");
    let seen = seen.lock().unwrap();
    assert_eq!(seen[0].path, "/v1/chat/completions");
    assert_eq!(
        seen[0].header("authorization"),
        Some("Bearer sk-test-key-0123456789")
    );
    assert_eq!(seen[0].body["model"], "gpt-test");
    assert_eq!(seen[0].body["stream"], true);
    // The model is offered the tools.
    let tools: Vec<&str> = seen[0].body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap())
        .collect();
    assert!(
        tools.contains(&"read_file") && tools.contains(&"shell"),
        "{tools:?}"
    );
    // The key never reaches the logs.
    assert!(!stderr(&out).contains("sk-test-key-0123456789"));
}

#[test]
fn failover_moves_past_a_dead_provider_to_anthropic() {
    let dir = TestDir::new();
    let (url, seen) = serve(200, anthropic_stream("from claude"));
    let dead = dead_url()
        .rsplit(':')
        .next()
        .unwrap()
        .parse::<u16>()
        .unwrap();
    let config = dir.path().join("config.toml");
    std::fs::write(
        &config,
        format!(
            "provider = \"main\"\n\
             [providers.local]\nkind = \"openai\"\nbase_url = \"http://127.0.0.1:{dead}/v1\"\nmodels = [\"llama\"]\nattempts = 1\n\
             [providers.claude]\nkind = \"anthropic\"\nbase_url = \"{url}\"\napi_key_env = \"MY_CLAUDE_KEY\"\nmodels = [\"claude-test\"]\n\
             [providers.main]\nkind = \"failover\"\nmembers = [\"local/llama\", \"claude/claude-test\"]\nmodels = [\"auto\"]\nattempts = 1\n\
             [models.\"claude-*\"]\ninput_price = 3.0\noutput_price = 15.0\n"
        ),
    )
    .unwrap();
    let out = run(
        &dir,
        &[
            "--config",
            config.to_str().unwrap(),
            "run",
            "--output",
            "jsonl",
            "hi",
        ],
        &[("MY_CLAUDE_KEY", "claude-key-0123456789")],
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let lines: Vec<Value> = stdout(&out)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let text: String = lines
        .iter()
        .filter(|l| l["type"] == "text_delta")
        .map(|l| l["text"].as_str().unwrap())
        .collect();
    assert_eq!(text, "from claude");
    let usage = lines.iter().find(|l| l["type"] == "usage").unwrap();
    assert_eq!(usage["usage"]["input_tokens"], 9);
    assert_eq!(usage["usage"]["output_tokens"], 4);
    // Priced as the member's model that served the turn, not the failover's name.
    assert_eq!(usage["model"], "claude-test");
    let cost = usage["cost"]["amount"].as_f64().unwrap();
    assert!(
        (cost - (9.0 * 3.0 + 4.0 * 15.0) / 1e6).abs() < 1e-12,
        "{cost}"
    );
    let seen = seen.lock().unwrap();
    assert_eq!(seen[0].header("x-api-key"), Some("claude-key-0123456789"));
    assert_eq!(seen[0].body["model"], "claude-test");
}

#[test]
fn provider_errors_reach_the_user_in_plain_words() {
    let dir = TestDir::new();
    let (url, _) = serve(
        401,
        json!({"error": {"message": "Incorrect API key provided", "type": "invalid_request_error", "code": "invalid_api_key"}}).to_string(),
    );
    let out = run(
        &dir,
        &["run", "--provider", "openai", "--model", "gpt-test", "hi"],
        &[("OPENAI_API_KEY", "sk-wrong"), ("OPENAI_BASE_URL", &url)],
    );
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("Incorrect API key provided"),
        "{}",
        stderr(&out)
    );

    // Anthropic without its key: a configuration error naming the variable.
    let out = run(
        &dir,
        &[
            "run",
            "--provider",
            "anthropic",
            "--model",
            "claude-test",
            "hi",
        ],
        &[],
    );
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("ANTHROPIC_API_KEY"),
        "{}",
        stderr(&out)
    );
}

fn openai_tool_calls(calls: &[(&str, &str, Value)]) -> String {
    let mut out = String::new();
    for (index, (id, name, arguments)) in calls.iter().enumerate() {
        let text = arguments.to_string();
        let (head, tail) = text.split_at(text.len() / 2);
        out.push_str(&format!("data: {}\n\n", json!({"choices": [{"index": 0, "delta": {"tool_calls": [{"index": index, "id": id, "type": "function", "function": {"name": name, "arguments": head}}]}, "finish_reason": null}]})));
        out.push_str(&format!("data: {}\n\n", json!({"choices": [{"index": 0, "delta": {"tool_calls": [{"index": index, "function": {"arguments": tail}}]}, "finish_reason": null}]})));
    }
    out.push_str(&format!(
        "data: {}\n\ndata: [DONE]\n\n",
        json!({"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]})
    ));
    out
}

/// Every request the agent loop sent, checked: the system prompt once and
/// first, every tool result right after the assistant turn that asked for it,
/// no result without its call and no call without its result.
#[test]
fn every_request_of_a_tool_loop_keeps_calls_and_results_paired() {
    let dir = TestDir::new();
    std::fs::write(dir.workspace().join("a.txt"), "A").unwrap();
    std::fs::write(dir.workspace().join("b.txt"), "B").unwrap();
    let (url, seen) = serve_each(
        200,
        vec![
            openai_tool_calls(&[
                ("call_a", "read_file", json!({"path": "a.txt"})),
                ("call_b", "read_file", json!({"path": "b.txt"})),
            ]),
            openai_tool_calls(&[(
                "call_c",
                "write_file",
                json!({"path": "c.txt", "content": "C"}),
            )]),
            openai_stream(&["done"]),
        ],
    );
    let config = dir.path().join("config.toml");
    std::fs::write(&config, "system_prompt = \"You are Pincer\"\n").unwrap();
    let out = run(
        &dir,
        &[
            "--config",
            config.to_str().unwrap(),
            "run",
            "--provider",
            "openai",
            "--model",
            "m",
            "--cwd",
            dir.workspace().to_str().unwrap(),
            "read both, then write c",
        ],
        &[("OPENAI_API_KEY", "sk-x"), ("OPENAI_BASE_URL", &url)],
    );
    // The write needed an approval nobody could give: refused, exit 3.
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    assert_eq!(stdout(&out), "done\n");
    let seen = seen.lock().unwrap();
    assert_eq!(seen.len(), 3);
    for (n, request) in seen.iter().enumerate() {
        let messages = request.body["messages"].as_array().unwrap();
        let systems: Vec<usize> = messages
            .iter()
            .enumerate()
            .filter(|(_, m)| m["role"] == "system")
            .map(|(i, _)| i)
            .collect();
        assert_eq!(systems, vec![0], "request {n}: {messages:#?}");
        assert_eq!(messages[0]["content"], "You are Pincer");
        let mut open: Vec<String> = Vec::new();
        for message in messages {
            match message["role"].as_str().unwrap() {
                "tool" => {
                    let id = message["tool_call_id"].as_str().unwrap().to_owned();
                    assert!(
                        open.contains(&id),
                        "request {n}: result {id} without its call"
                    );
                    open.retain(|o| o != &id);
                }
                role => {
                    assert!(
                        open.is_empty(),
                        "request {n}: {role} message before results of {open:?}"
                    );
                    if let Some(calls) = message["tool_calls"].as_array() {
                        open = calls
                            .iter()
                            .map(|c| c["id"].as_str().unwrap().to_owned())
                            .collect();
                    }
                }
            }
        }
        assert!(
            open.is_empty(),
            "request {n}: calls without results: {open:?}"
        );
    }
    // The refused write (nobody can approve it headless) is still answered.
    let last = seen[2].body["messages"].as_array().unwrap();
    let answer = last.iter().rev().find(|m| m["role"] == "tool").unwrap();
    assert_eq!(answer["tool_call_id"], "call_c");
    assert!(
        answer["content"].as_str().unwrap().contains("refused"),
        "{answer}"
    );
    assert!(!dir.workspace().join("c.txt").exists());
}

#[test]
fn the_conversation_is_fitted_into_the_models_own_window() {
    let long = "a".repeat(4000); // about 1000 tokens
    let second_request = |config: &str| {
        let dir = TestDir::new();
        let (url, seen) = serve(200, openai_stream(&["ok"]));
        let path = dir.path().join("config.toml");
        std::fs::write(&path, config).unwrap();
        let env = [
            ("OPENAI_API_KEY", "sk-test"),
            ("OPENAI_BASE_URL", &format!("{url}/v1") as &str),
        ];
        let args = |prompt: &str, session: Option<&str>| {
            let mut args = vec![
                "--config".to_owned(),
                path.to_str().unwrap().to_owned(),
                "run".to_owned(),
                "--provider".to_owned(),
                "openai".to_owned(),
                "--model".to_owned(),
                "gpt-small".to_owned(),
                "--output".to_owned(),
                "jsonl".to_owned(),
            ];
            if let Some(session) = session {
                args.extend(["--session".to_owned(), session.to_owned()]);
            }
            args.push(prompt.to_owned());
            args
        };
        let first = args(&long, None);
        let out = run(
            &dir,
            &first.iter().map(String::as_str).collect::<Vec<_>>(),
            &env,
        );
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        let session: Value = serde_json::from_str(stdout(&out).lines().next().unwrap()).unwrap();
        let session = session["session_id"].as_str().unwrap().to_owned();
        let second = args("and now?", Some(&session));
        let out = run(
            &dir,
            &second.iter().map(String::as_str).collect::<Vec<_>>(),
            &env,
        );
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        let usage = stdout(&out)
            .lines()
            .map(|l| serde_json::from_str::<Value>(l).unwrap())
            .find(|l| l["type"] == "usage")
            .unwrap();
        let seen = seen.lock().unwrap();
        assert_eq!(seen.len(), 2);
        (
            seen[1].body["messages"].to_string(),
            usage["context"].clone(),
        )
    };
    // 4000 tokens less a quarter kept for the answer, the system prompt and
    // the tools' definitions: the old long prompt goes (no automatic
    // compaction, which would summarize it instead).
    let (sent, context) =
        second_request("compact_at = 0\n[models.\"gpt-small\"]\ncontext_window = 4000\n");
    assert!(!sent.contains(&long), "{sent}");
    assert!(sent.contains("and now?"), "{sent}");
    assert_eq!(context["size"], 4000);
    // A pattern that does not cover the model leaves the default window: all kept.
    let (sent, context) = second_request("[models.\"gpt-large*\"]\ncontext_window = 9000\n");
    assert!(sent.contains(&long));
    assert_eq!(context["size"], 128000);
}

#[test]
fn a_bare_model_finds_its_provider() {
    let dir = TestDir::new();
    let (openai, openai_seen) = serve(200, openai_stream(&["from gpt"]));
    let (anthropic, anthropic_seen) = serve(200, anthropic_stream("from claude"));
    let openai_url = format!("{openai}/v1");
    let env = [
        ("OPENAI_API_KEY", "sk-test"),
        ("OPENAI_BASE_URL", openai_url.as_str()),
        ("ANTHROPIC_API_KEY", "sk-ant-test"),
        ("ANTHROPIC_BASE_URL", anthropic.as_str()),
    ];
    // Both keys set, no --provider: the model's family decides.
    let out = run(&dir, &["run", "--model", "claude-test-1", "hi"], &env);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(stdout(&out), "from claude\n");
    assert_eq!(
        anthropic_seen.lock().unwrap()[0].body["model"],
        "claude-test-1"
    );
    let out = run(&dir, &["run", "--model", "gpt-test-1", "hi"], &env);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(stdout(&out), "from gpt\n");
    assert_eq!(openai_seen.lock().unwrap()[0].body["model"], "gpt-test-1");
    // A name of no known family with two providers: refused, naming both.
    let out = run(&dir, &["run", "--model", "llama3", "hi"], &env);
    assert_eq!(out.status.code(), Some(2));
    let err = stderr(&out);
    assert!(
        err.contains("\"llama3\" could be served by more than one provider (anthropic, openai)"),
        "{err}"
    );
    // With one provider, any model name goes to it (Ollama, vLLM, LM Studio).
    let out = run(
        &dir,
        &["run", "--model", "llama3", "hi"],
        &[
            ("OPENAI_API_KEY", "sk-test"),
            ("OPENAI_BASE_URL", openai_url.as_str()),
        ],
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(openai_seen.lock().unwrap()[1].body["model"], "llama3");
}

/// The wire details of one provider kind, for the retry tests.
struct Kind {
    name: &'static str,
    model: &'static str,
    key_var: &'static str,
    url_var: &'static str,
    /// The base URL to give for a server at `url`.
    base: fn(&str) -> String,
    stream: fn(&str) -> String,
}

const OPENAI: Kind = Kind {
    name: "openai",
    model: "gpt-test",
    key_var: "OPENAI_API_KEY",
    url_var: "OPENAI_BASE_URL",
    base: |url| format!("{url}/v1"),
    stream: |text| openai_stream(&[text]),
};

const ANTHROPIC: Kind = Kind {
    name: "anthropic",
    model: "claude-test",
    key_var: "ANTHROPIC_API_KEY",
    url_var: "ANTHROPIC_BASE_URL",
    base: |url| url.to_owned(),
    stream: anthropic_stream,
};

impl Kind {
    fn rate_limited(&self) -> Value {
        match self.name {
            "openai" => {
                json!({"error": {"message": "Rate limit reached for gpt-test in organization org-x on requests per min (RPM): Limit 3, Used 3, Requested 1.", "type": "requests", "param": null, "code": "rate_limit_exceeded"}})
            }
            _ => {
                json!({"type": "error", "error": {"type": "rate_limit_error", "message": "Number of request tokens has exceeded your per-minute rate limit"}})
            }
        }
    }

    fn unavailable(&self) -> Value {
        match self.name {
            "openai" => {
                json!({"error": {"message": "The server is overloaded or not ready yet.", "type": "server_error", "param": null, "code": null}})
            }
            _ => {
                json!({"type": "error", "error": {"type": "api_error", "message": "Internal server error"}})
            }
        }
    }

    /// `pincer run` with this provider against `url`, under a config table
    /// that sets `extra` (retry settings).
    fn run(&self, dir: &TestDir, url: &str, extra: &str) -> Output {
        let config = dir.path().join("config.toml");
        std::fs::write(
            &config,
            format!(
                "[providers.{name}]\nkind = \"{name}\"\nmodels = [\"{model}\"]\n{extra}",
                name = self.name,
                model = self.model
            ),
        )
        .unwrap();
        let base = (self.base)(url);
        run(
            dir,
            &[
                "--config",
                config.to_str().unwrap(),
                "run",
                "--provider",
                self.name,
                "hi",
            ],
            &[(self.key_var, "test-key-0123456789"), (self.url_var, &base)],
        )
    }
}

/// A plain provider (no failover) retries 429 and 5xx before any output,
/// honouring `Retry-After`, and gives up after its `attempts` with the
/// provider's own message.
fn retries_as_documented(kind: &Kind) {
    // 429 with `Retry-After: 1`, then the answer: the wait is the server's,
    // not the (tiny) configured backoff.
    let dir = TestDir::new();
    let (url, seen) = serve_answers(vec![
        Answer::error(429, kind.rate_limited()).header("retry-after", "1"),
        Answer::ok((kind.stream)("after the wait")),
    ]);
    let started = std::time::Instant::now();
    let out = kind.run(&dir, &url, "backoff_ms = 1\n");
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}: {}",
        kind.name,
        stderr(&out)
    );
    assert_eq!(stdout(&out), "after the wait\n");
    assert_eq!(seen.lock().unwrap().len(), 2, "{}", kind.name);
    // A person is told in one line; the log's detail is for `-v`.
    assert!(
        stderr(&out).contains("pincer: retrying in 1 s (429 Too Many Requests), 2 of 3\n"),
        "{}: {}",
        kind.name,
        stderr(&out)
    );
    assert!(
        !stderr(&out).contains("WARN"),
        "{}: {}",
        kind.name,
        stderr(&out)
    );
    assert!(
        started.elapsed() >= std::time::Duration::from_secs(1),
        "{}: Retry-After not honoured ({:?})",
        kind.name,
        started.elapsed()
    );

    // 503 without `Retry-After`, then the answer: the default attempts retry it.
    let dir = TestDir::new();
    let (url, seen) = serve_answers(vec![
        Answer::error(503, kind.unavailable()),
        Answer::ok((kind.stream)("back again")),
    ]);
    let out = kind.run(&dir, &url, "backoff_ms = 10\n");
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}: {}",
        kind.name,
        stderr(&out)
    );
    assert_eq!(stdout(&out), "back again\n");
    assert_eq!(seen.lock().unwrap().len(), 2, "{}", kind.name);

    // Always 429: the run fails after the configured attempts, in the
    // provider's words.
    let dir = TestDir::new();
    let (url, seen) = serve_answers(vec![
        Answer::error(429, kind.rate_limited()).header("retry-after", "0"),
    ]);
    let out = kind.run(&dir, &url, "attempts = 4\nbackoff_ms = 1\n");
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}: {}",
        kind.name,
        stderr(&out)
    );
    assert_eq!(seen.lock().unwrap().len(), 4, "{}", kind.name);
    let said = kind.rate_limited()["error"]["message"]
        .as_str()
        .unwrap()
        .to_owned();
    let err = stderr(&out);
    assert!(err.contains(&said), "{}: {err}", kind.name);
    assert!(
        err.contains("gave up after 4 attempts"),
        "{}: {err}",
        kind.name
    );
}

#[test]
fn openai_retries_429_and_503_before_any_output() {
    retries_as_documented(&OPENAI);
}

#[test]
fn anthropic_retries_429_and_503_before_any_output() {
    retries_as_documented(&ANTHROPIC);
}

/// Everything a person can read about a failed run: `pincer run`'s own
/// output, `sessions show`, `runs show` and `tape`, in text and JSON.
fn everything_shown(dir: &TestDir, run_out: &Output) -> String {
    let mut all = format!("{}{}", stdout(run_out), stderr(run_out));
    let run_id = stderr(run_out)
        .split("pincer: run ")
        .nth(1)
        .and_then(|rest| rest.split(' ').next())
        .unwrap()
        .to_owned();
    let listed = run(dir, &["sessions", "list", "--json"], &[]);
    let session: Value = serde_json::from_str(stdout(&listed).lines().next().unwrap()).unwrap();
    let session = session["session_id"].as_str().unwrap().to_owned();
    for args in [
        vec!["sessions", "show", &session],
        vec!["sessions", "show", &session, "--json"],
        vec!["runs", "show", &run_id],
        vec!["runs", "show", &run_id, "--json"],
        vec!["tape", &run_id],
        vec!["tape", &run_id, "--json"],
    ] {
        let out = run(dir, &args, &[]);
        assert_eq!(out.status.code(), Some(0), "{args:?}: {}", stderr(&out));
        all.push_str(&stdout(&out));
        all.push_str(&stderr(&out));
    }
    all
}

/// A provider (or a proxy in front of it) that echoes the API key in its
/// error: the key reaches neither the run's error nor the logs nor anything
/// the inspection commands show — whether it has a key's usual shape or is
/// only known as the configured key's value.
#[test]
fn an_echoed_api_key_never_reaches_the_tape_or_the_logs() {
    // A realistic OpenAI project key, under its usual variable.
    let key = "sk-proj-Qx7vR2mN8kL4pW9sT3yB6hJ1dF5gA0cE-zU_iO2aSd4Fg6Hj";
    let dir = TestDir::new();
    let (url, _) = serve_answers(vec![Answer::error(
        401,
        json!({"error": {"message": format!("Incorrect API key provided: {key}. You can find your API key at https://platform.openai.com/account/api-keys."), "type": "invalid_request_error", "param": null, "code": "invalid_api_key"}}),
    )]);
    let out = run(
        &dir,
        &["run", "--provider", "openai", "--model", "gpt-test", "hi"],
        &[("OPENAI_API_KEY", key), ("OPENAI_BASE_URL", &url)],
    );
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let shown = everything_shown(&dir, &out);
    assert!(!shown.contains(key), "{shown}");
    assert!(!shown.contains("Qx7vR2mN8kL4pW9sT3yB6hJ1dF5"), "{shown}");
    assert!(
        shown.contains("Incorrect API key provided: [REDACTED:"),
        "{shown}"
    );

    // A key of no known shape, under a variable whose name does not say
    // "key": known only as the configured provider's key. A 500 that echoes
    // it is retried, so it is logged too.
    let odd = "zq9~odd!value#42";
    let dir = TestDir::new();
    let (url, seen) = serve_answers(vec![Answer::error(
        500,
        json!({"type": "error", "error": {"type": "api_error", "message": format!("upstream refused credential {odd} for this route")}}),
    )]);
    let config = dir.path().join("config.toml");
    std::fs::write(
        &config,
        format!(
            "[providers.claude]\nkind = \"anthropic\"\nbase_url = \"{url}\"\napi_key_env = \"LLM_CRED\"\nmodels = [\"claude-test\"]\nattempts = 2\nbackoff_ms = 1\n"
        ),
    )
    .unwrap();
    let out = run(
        &dir,
        &[
            "--config",
            config.to_str().unwrap(),
            "run",
            "--provider",
            "claude",
            "hi",
        ],
        &[("LLM_CRED", odd)],
    );
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert_eq!(seen.lock().unwrap()[0].header("x-api-key"), Some(odd));
    // The retry was logged, with the provider's words.
    assert!(
        stderr(&out).contains("model turn failed before any output"),
        "{}",
        stderr(&out)
    );
    let shown = everything_shown(&dir, &out);
    assert!(!shown.contains(odd), "{shown}");
    assert!(
        shown.contains("upstream refused credential [REDACTED:configured] for this route"),
        "{shown}"
    );
}
