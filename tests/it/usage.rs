//! Token usage, cost from the configured price table and the context window,
//! through every face that shows them: ACP `usage_update` and `_pincer/runs/*`,
//! `pincer run --output jsonl`, `pincer runs show` and the tape.

use crate::support::{AcpProcess, TestDir};
use serde_json::{Value, json};

/// Prices per million tokens: input 2, cached input 0.5, output 10.
const CONFIG: &str = r#"
currency = "USD"

[models."script"]
context_window = 50000
input_price = 2.0
output_price = 10.0
cached_input_price = 0.5

[models."other-*"]
context_window = 4096
"#;

fn write_config(dir: &TestDir, text: &str) {
    let config = dir.path().join("config").join("pincer");
    std::fs::create_dir_all(&config).unwrap();
    std::fs::write(config.join("config.toml"), text).unwrap();
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() < 1e-12
}

fn usage_updates(messages: &[Value]) -> Vec<Value> {
    messages
        .iter()
        .filter(|m| m["params"]["update"]["sessionUpdate"] == "usage_update")
        .map(|m| m["params"]["update"].clone())
        .collect()
}

#[test]
fn usage_and_cost_reach_every_face() {
    let dir = TestDir::new();
    write_config(&dir, CONFIG);
    let script = dir.script(
        "usage.jsonl",
        &[
            // 600 fresh input at 2 + 400 cached at 0.5 + 200 output at 10 = 0.0034
            json!([{"text": "one"}, {"usage": {"input_tokens": 1000, "output_tokens": 200, "cached_input_tokens": 400}}]),
            // 1500 input at 2 + 100 output at 10 = 0.004
            json!([{"text": "two"}, {"usage": {"input_tokens": 1500, "output_tokens": 100}}]),
            // 2000 input at 2 + 50 output at 10 = 0.0045
            json!([{"text": "three"}, {"usage": {"input_tokens": 2000, "output_tokens": 50}}]),
        ],
    );
    let script = script.to_str().unwrap();
    let mut acp = AcpProcess::spawn(&dir, &["--provider", "scripted", "--script", script]);
    acp.initialize();
    let session = acp.new_session(&dir.workspace());

    // Each model turn: a usage_update with the context in use, the model's
    // window from the catalogue, and the session's cost so far.
    let (messages, _) = acp.prompt(&session, "first");
    let updates = usage_updates(&messages);
    assert_eq!(updates.len(), 1, "{messages:?}");
    assert_eq!(updates[0]["used"], 1200);
    assert_eq!(updates[0]["size"], 50000);
    assert_eq!(updates[0]["cost"]["currency"], "USD");
    assert!(close(
        updates[0]["cost"]["amount"].as_f64().unwrap(),
        0.0034
    ));
    let turn = &updates[0]["_meta"]["pincer"]["turn"];
    assert_eq!(turn["inputTokens"], 1000);
    assert_eq!(turn["cachedInputTokens"], 400);
    assert_eq!(turn["model"], "script");

    let (messages, _) = acp.prompt(&session, "second");
    let updates = usage_updates(&messages);
    assert_eq!(updates[0]["used"], 1600);
    // Cumulative over the session: the first run's cost included.
    assert!(close(
        updates[0]["cost"]["amount"].as_f64().unwrap(),
        0.0074
    ));
    let turn_cost = updates[0]["_meta"]["pincer"]["turn"]["cost"]["amount"]
        .as_f64()
        .unwrap();
    assert!(close(turn_cost, 0.004));

    // Per run through the extension methods.
    let runs = acp.call("_pincer/runs/list", json!({"sessionId": session}));
    let runs = runs["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 2);
    assert_eq!(runs[0]["usage"]["inputTokens"], 1000);
    assert_eq!(runs[0]["usage"]["cachedInputTokens"], 400);
    assert!(close(runs[0]["cost"]["amount"].as_f64().unwrap(), 0.0034));
    assert!(close(runs[1]["cost"]["amount"].as_f64().unwrap(), 0.004));
    let first_run = runs[0]["runId"].as_str().unwrap().to_owned();
    let got = acp.call("_pincer/runs/get", json!({"runId": first_run}));
    assert_eq!(got["cost"]["currency"], "USD");
    assert!(acp.finish().success());

    // Reopened in a new process, the session's meter comes back with its replay.
    let mut acp = AcpProcess::spawn(&dir, &["--provider", "scripted", "--script", script]);
    acp.initialize();
    let workspace = dir.workspace();
    let (messages, _) = acp.request(
        "session/load",
        json!({"sessionId": session, "cwd": workspace, "mcpServers": []}),
    );
    let updates = usage_updates(&messages);
    assert_eq!(updates.len(), 1, "{messages:?}");
    assert_eq!(updates[0]["used"], 1600);
    assert!(close(
        updates[0]["cost"]["amount"].as_f64().unwrap(),
        0.0074
    ));
    assert!(acp.finish().success());

    // `pincer runs show`, in text and JSON.
    let out = dir
        .command()
        .args(["runs", "show", &first_run])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("tokens in 1000 out 200"), "{text}");
    assert!(text.contains("cost 0.0034 USD"), "{text}");
    let out = dir
        .command()
        .args(["runs", "show", &first_run, "--json"])
        .output()
        .unwrap();
    let run: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(close(run["cost"]["amount"].as_f64().unwrap(), 0.0034));
    assert_eq!(run["usage"]["cached_input_tokens"], 400);

    // Headless JSON lines: the usage event of the turn, and the run's totals on
    // its terminal state.
    let out = dir
        .command()
        .args([
            "run",
            "--provider",
            "scripted",
            "--script",
            script,
            "--session",
            &session,
            "--output",
            "jsonl",
            "third",
        ])
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let lines: Vec<Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let usage = lines.iter().find(|l| l["type"] == "usage").unwrap();
    assert_eq!(usage["usage"]["input_tokens"], 2000);
    assert_eq!(usage["model"], "script");
    assert!(close(usage["cost"]["amount"].as_f64().unwrap(), 0.0045));
    assert_eq!(usage["context"], json!({"used": 2050, "size": 50000}));
    assert!(close(
        usage["session_cost"]["amount"].as_f64().unwrap(),
        0.0119
    ));
    let last = lines.last().unwrap();
    assert_eq!(last["type"], "state");
    assert_eq!(last["state"], "completed");
    assert_eq!(last["usage"]["output_tokens"], 50);
    assert!(close(last["cost"]["amount"].as_f64().unwrap(), 0.0045));

    // The tape keeps the same figures.
    let run_id = last["run_id"].as_str().unwrap();
    let out = dir.command().args(["tape", run_id]).output().unwrap();
    let tape = String::from_utf8_lossy(&out.stdout);
    assert!(
        tape.contains("usage in 2000 out 50 on script, cost 0.0045 USD, context 2050/50000"),
        "{tape}"
    );
}

#[test]
fn an_unpriced_model_reports_usage_without_cost_and_the_default_window() {
    let dir = TestDir::new();
    // No price for `script`: tokens and the context still show, cost does not.
    write_config(
        &dir,
        "[models.\"gpt-*\"]\ninput_price = 1.0\noutput_price = 1.0\n",
    );
    let script = dir.script(
        "usage.jsonl",
        &[json!([{"text": "hi"}, {"usage": {"input_tokens": 10, "output_tokens": 5}}])],
    );
    let mut acp = AcpProcess::spawn(
        &dir,
        &[
            "--provider",
            "scripted",
            "--script",
            script.to_str().unwrap(),
        ],
    );
    acp.initialize();
    let session = acp.new_session(&dir.workspace());
    let (messages, _) = acp.prompt(&session, "hi");
    let updates = usage_updates(&messages);
    assert_eq!(updates.len(), 1);
    assert_eq!(updates[0]["used"], 15);
    assert_eq!(updates[0]["size"], 128000);
    assert!(updates[0].get("cost").is_none_or(Value::is_null));
    let runs = acp.call("_pincer/runs/list", json!({"sessionId": session}));
    assert!(runs["runs"][0]["cost"].is_null());
    assert!(acp.finish().success());
}

#[test]
fn bad_price_tables_are_refused_by_name() {
    for (config, fragment) in [
        (
            "[models.\"m\"]\ninput_price = 1.0\n",
            "needs both input_price and output_price",
        ),
        (
            "[models.\"m\"]\ninput_price = -1.0\noutput_price = 1.0\n",
            "models.\"m\".input_price",
        ),
        ("[models.\"m\"]\ncontext_window = 0\n", "must be at least 1"),
        ("[models.\"m\"]\nprice = 3\n", "unknown field `price`"),
        ("currency = \"\"\n", "currency"),
        ("[models.\"gpt-[*\"]\ncontext_window = 10\n", "gpt-[*"),
    ] {
        let dir = TestDir::new();
        write_config(&dir, config);
        let out = dir.command().args(["config", "show"]).output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{config}: {stderr}");
        assert!(stderr.contains(fragment), "{config}: {stderr}");
    }
    // A good table shows in `config show`.
    let dir = TestDir::new();
    write_config(&dir, CONFIG);
    let out = dir.command().args(["config", "show"]).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("[models.\"script\"]"), "{text}");
    assert!(text.contains("input_price = 2.0"), "{text}");
}
