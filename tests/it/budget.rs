//! Spending limits through the binary: a run, a session and a provider's day
//! each end a run cleanly before the next model turn once reached (stop
//! reason `budget`, exit code 4, a notice saying which), in `pincer run`,
//! ACP and HTTP; what is left is reported with each turn's usage.

use crate::support::{AcpProcess, TestDir};
use serde_json::{Value, json};

/// Prices per million tokens: input 2, output 10 (USD).
const PRICES: &str = r#"
currency = "USD"

[models."script"]
context_window = 50000
input_price = 2.0
output_price = 10.0
"#;

fn write_config(dir: &TestDir, text: &str) {
    let config = dir.path().join("config").join("pincer");
    std::fs::create_dir_all(&config).unwrap();
    std::fs::write(config.join("config.toml"), format!("{PRICES}{text}")).unwrap();
}

/// A turn that calls `todo` (runs unasked) and costs 0.006 USD
/// (2,000 input at 2, 200 output at 10).
fn working_turn(n: usize) -> Value {
    json!([
        {"tool_call": {"id": format!("c{n}"), "name": "todo", "arguments": {"todos": [{"content": format!("step {n}"), "status": "in_progress"}]}}},
        {"usage": {"input_tokens": 2000, "output_tokens": 200}}
    ])
}

fn run(
    dir: &TestDir,
    script: &std::path::Path,
    session: Option<&str>,
    prompt: &str,
) -> std::process::Output {
    let mut command = dir.command();
    command
        .args([
            "run",
            "--output",
            "jsonl",
            "--provider",
            "scripted",
            "--script",
        ])
        .arg(script);
    match session {
        Some(id) => command.args(["--session", id]),
        None => command.arg("--cwd").arg(dir.workspace()),
    };
    command.arg(prompt).output().unwrap()
}

fn events(out: &std::process::Output) -> Vec<Value> {
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

fn notices(events: &[Value]) -> Vec<String> {
    events
        .iter()
        .filter(|e| e["type"] == "notice")
        .map(|e| e["message"].as_str().unwrap().to_owned())
        .collect()
}

fn last_state(events: &[Value]) -> Value {
    events
        .iter()
        .rev()
        .find(|e| e["type"] == "state")
        .unwrap()
        .clone()
}

#[test]
fn a_run_stops_at_its_budget_before_the_next_turn() {
    let dir = TestDir::new();
    write_config(&dir, "[budget]\nrun = 0.01\n");
    // Turns cost 0.006 each: after two (0.012) the third is not asked for.
    let turns: Vec<Value> = (0..5).map(working_turn).collect();
    let script = dir.script("s.jsonl", &turns);
    let out = run(&dir, &script, None, "work");
    assert_eq!(
        out.status.code(),
        Some(4),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let events = events(&out);
    let turns = events.iter().filter(|e| e["type"] == "model_turn").count();
    assert_eq!(turns, 2);
    let state = last_state(&events);
    assert_eq!(state["state"], "completed");
    assert_eq!(state["stop_reason"], "budget");
    let said = notices(&events);
    assert_eq!(said.len(), 1, "{said:?}");
    assert!(
        said[0].starts_with(
            "This request reached its budget: it cost 0.0120 USD of the 0.01 USD a run may"
        ),
        "{said:?}"
    );
    // Each usage event says what is left.
    let left: Vec<f64> = events
        .iter()
        .filter(|e| e["type"] == "usage")
        .map(|e| e["budget"]["run"].as_f64().unwrap())
        .collect();
    assert_eq!(left, vec![0.004, 0.0]);
}

#[test]
fn a_session_and_a_providers_day_have_budgets_across_runs() {
    let dir = TestDir::new();
    write_config(
        &dir,
        "[budget]\nsession = 0.015\n[budget.daily]\nscripted = 0.02\n",
    );
    let script = dir.script(
        "s.jsonl",
        &[
            working_turn(0),
            json!([{"text": "done"}, {"usage": {"input_tokens": 2000, "output_tokens": 200}}]),
            working_turn(2),
            json!([{"text": "done"}, {"usage": {"input_tokens": 2000, "output_tokens": 200}}]),
        ],
    );
    // Run 1 costs 0.012; the session's budget is reached during run 2.
    let first = run(&dir, &script, None, "one");
    assert_eq!(
        first.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&first.stderr)
    );
    let session = events(&first)
        .iter()
        .find_map(|e| e["session_id"].as_str().map(str::to_owned))
        .unwrap();
    let second = run(&dir, &script, Some(&session), "two");
    assert_eq!(second.status.code(), Some(4));
    let said = notices(&events(&second));
    assert!(
        said[0].starts_with("This session reached its budget: it cost 0.0180 USD"),
        "{said:?}"
    );
    // A new session of the same provider: the day's 0.018 leaves room for
    // one more turn of 0.006 (0.024 >= 0.02), then the daily budget stops it.
    let third = run(&dir, &script, None, "three");
    assert_eq!(third.status.code(), Some(4));
    let events = events(&third);
    assert_eq!(
        events.iter().filter(|e| e["type"] == "model_turn").count(),
        1
    );
    let said = notices(&events);
    assert!(
        said[0].starts_with(
            "Provider scripted reached its daily budget: 0.0240 USD of 0.02 USD today"
        ),
        "{said:?}"
    );
    let usage = events.iter().find(|e| e["type"] == "usage").unwrap();
    assert!(
        (usage["budget"]["daily"].as_f64().unwrap() - 0.0).abs() < 1e-9,
        "{usage}"
    );
    // A fresh run on a spent day stops before its first turn.
    let fourth = run(&dir, &script, None, "four");
    assert_eq!(fourth.status.code(), Some(4));
    assert_eq!(events_of_type(&fourth, "model_turn"), 0);
}

fn events_of_type(out: &std::process::Output, kind: &str) -> usize {
    events(out).iter().filter(|e| e["type"] == kind).count()
}

#[test]
fn an_editor_is_told_why_the_run_stopped() {
    let dir = TestDir::new();
    write_config(&dir, "[budget]\nrun = 0.005\n");
    let turns: Vec<Value> = (0..3).map(working_turn).collect();
    let script = dir.script("s.jsonl", &turns);
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
    let (notes, response) = acp.prompt(&session, "work");
    assert_eq!(response["result"]["stopReason"], "max_turn_requests");
    let text: String = notes
        .iter()
        .filter(|n| n["params"]["update"]["sessionUpdate"] == "agent_message_chunk")
        .map(|n| {
            n["params"]["update"]["content"]["text"]
                .as_str()
                .unwrap_or_default()
        })
        .collect();
    assert!(
        text.contains("[pincer] This request reached its budget"),
        "{text}"
    );
    let usage = notes
        .iter()
        .find(|n| n["params"]["update"]["sessionUpdate"] == "usage_update")
        .unwrap();
    assert_eq!(
        usage["params"]["update"]["_meta"]["pincer"]["budgetLeft"]["run"],
        0.0
    );
    assert!(acp.finish().success());
}
