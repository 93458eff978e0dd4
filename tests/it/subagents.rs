//! Subagents (`delegate`, `docs/tools.md`): children run in parallel in
//! sessions of their own, linked from the parent's tape; a child's approval
//! reaches the person labelled with its task; cancelling the parent cancels
//! the children; the turn cap holds; `SubagentStop` hooks fire; an editor
//! sees the child's work as the call's progress.

use std::io::{BufRead, BufReader};
use std::process::Stdio;
use std::time::{Duration, Instant};

use crate::support::{AcpProcess, TestDir, of_type};
use serde_json::{Value, json};

fn delegate(id: &str, task: &str, label: &str) -> Value {
    json!({"tool_call": {"id": id, "name": "delegate", "arguments": {"task": task, "label": label}}})
}

/// `pincer run` of `script` with `input`, in a workspace holding `a.txt`.
fn run(dir: &TestDir, script: &[Value], input: &str) -> (std::process::Output, Vec<Value>) {
    std::fs::write(dir.workspace().join("a.txt"), "alpha\n").unwrap();
    dir.run_jsonl(script, input)
}

#[test]
fn two_children_run_at_once_and_their_answers_come_back_linked_on_the_tape() {
    let dir = TestDir::new();
    dir.write_config("");
    let script = [
        json!([
            // A child never runs in a wider mode than its parent's
            // (supervised): asking for `full` gets supervised, asking for
            // `read_only` gets it.
            {"tool_call": {"id": "d1", "name": "delegate",
                "arguments": {"task": "ALPHA: say what you are", "label": "alpha", "mode": "full"}}},
            {"tool_call": {"id": "d2", "name": "delegate",
                "arguments": {"task": "BETA: read a.txt", "label": "beta", "mode": "read_only"}}}
        ]),
        json!([{"text": "Both done."}]),
        json!({"section": "ALPHA"}),
        json!([{"delay_ms": 400}, {"text": "I am alpha."}]),
        json!({"section": "BETA"}),
        json!([{"tool_call": {"name": "read_file", "arguments": {"path": "a.txt"}}}]),
        json!([{"delay_ms": 400}, {"text": "a.txt says alpha."}]),
    ];
    let (out, lines) = run(&dir, &script, "{\"prompt\": \"split the work\"}\n");
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // Both started before either ended: they ran at once.
    let order: Vec<&str> = lines
        .iter()
        .filter_map(|l| match l["type"].as_str() {
            Some(kind @ ("subagent_started" | "subagent_ended")) => Some(kind),
            _ => None,
        })
        .collect();
    assert_eq!(
        order,
        [
            "subagent_started",
            "subagent_started",
            "subagent_ended",
            "subagent_ended"
        ],
        "{lines:#?}"
    );
    let results = of_type(&lines, "tool_result");
    let result = |id: &str| {
        results
            .iter()
            .find(|r| r["id"] == id)
            .unwrap_or_else(|| panic!("no result for {id}: {lines:#?}"))["output"]
            .as_str()
            .unwrap()
            .to_owned()
    };
    assert!(
        result("d1").starts_with("The subagent finished (1 turn)."),
        "{}",
        result("d1")
    );
    assert!(result("d1").ends_with("I am alpha."), "{}", result("d1"));
    assert!(
        result("d2").ends_with("a.txt says alpha."),
        "{}",
        result("d2")
    );
    // The tape links each child: its session names the parent's run and
    // call, and its own tape holds its work.
    let parent_session = of_type(&lines, "session")[0]["session_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let parent_run = lines[1]["run_id"].as_str().unwrap().to_owned();
    for started in of_type(&lines, "subagent_started") {
        let child = started["session_id"].as_str().unwrap();
        let shown = dir.show_session(child);
        assert_eq!(shown["session"]["origin"], "subagent");
        assert_eq!(
            shown["session"]["parent"]["session_id"],
            parent_session.as_str()
        );
        assert_eq!(shown["session"]["parent"]["run_id"], parent_run.as_str());
        assert_eq!(shown["session"]["parent"]["call_id"], started["call_id"]);
        let mode = if started["task"] == "beta" {
            "read_only"
        } else {
            "supervised"
        };
        assert_eq!(shown["session"]["mode"], mode, "{started}");
        let child_tape = dir.tape(started["run_id"].as_str().unwrap());
        assert_eq!(child_tape.last().unwrap()["state"], "completed");
        if started["task"] == "beta" {
            assert!(
                child_tape.iter().any(|e| e["type"] == "tool_result"
                    && e["output"].as_str().unwrap().contains("alpha")),
                "{child_tape:#?}"
            );
        }
    }
    // Listings show only the parent.
    let listed = dir
        .command()
        .args(["sessions", "list", "--json"])
        .output()
        .unwrap();
    let listed: Vec<Value> = String::from_utf8_lossy(&listed.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(listed.len(), 1, "{listed:#?}");
    assert_eq!(listed[0]["session_id"], parent_session.as_str());
    dir.verify();
}

#[test]
fn a_childs_approval_reaches_the_person_labelled_with_its_task() {
    let dir = TestDir::new();
    dir.write_config("");
    let script = [
        json!([delegate("d1", "WRITER: write the note", "writer")]),
        json!([{"text": "The writer is done."}]),
        json!({"section": "WRITER"}),
        json!([{"tool_call": {"name": "write_file", "arguments": {"path": "note.txt", "content": "from the child\n"}}}]),
        json!([{"text": "Wrote note.txt."}]),
    ];
    let (out, lines) = run(
        &dir,
        &script,
        "{\"prompt\": \"write a note\"}\n{\"approve\": \"allow_once\", \"tool\": \"write_file\"}\n",
    );
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let asked = of_type(&lines, "approval_requested");
    assert_eq!(asked.len(), 1, "{lines:#?}");
    assert_eq!(asked[0]["title"], "Subagent «writer»: Create note.txt");
    // On the delegating call, in the parent's run.
    assert_eq!(asked[0]["call_id"], "d1");
    assert_eq!(asked[0]["run_id"], lines[1]["run_id"]);
    let decided = of_type(&lines, "approval_decided");
    assert_eq!(decided[0]["decision"], "allow_once");
    assert_eq!(
        std::fs::read_to_string(dir.workspace().join("note.txt")).unwrap(),
        "from the child\n"
    );
    let result = &of_type(&lines, "tool_result")[0];
    assert!(
        result["output"]
            .as_str()
            .unwrap()
            .ends_with("Wrote note.txt."),
        "{result}"
    );

    // Unanswered, it is refused as any approval nobody can give.
    let dir = TestDir::new();
    dir.write_config("");
    let (out, lines) = run(&dir, &script, "{\"prompt\": \"write a note\"}\n");
    assert_eq!(
        out.status.code(),
        Some(3),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        of_type(&lines, "approval_decided")[0]["decision"],
        "unattended"
    );
    assert!(!dir.workspace().join("note.txt").exists());
}

#[test]
fn the_turn_cap_holds_and_subagent_stop_hooks_fire() {
    let dir = TestDir::new();
    let log = dir.path().join("subagent-stop.jsonl");
    dir.write_config(&format!(
        "[subagents]\nmax_turns = 2\n\n[[hooks.SubagentStop]]\nmatcher = \"delegate\"\ncommand = {}\n",
        serde_json::to_string(&format!(
            "{{ cat; echo; }} >> '{}'; [ -e '{}' ] || {{ touch '{}'; echo 'check the numbers again' >&2; exit 2; }}",
            log.display(),
            dir.path().join("once").display(),
            dir.path().join("once").display()
        ))
        .unwrap()
    ));
    let script = [
        json!([delegate("d1", "LOOPER: keep reading", "looper")]),
        json!([delegate("d2", "CHECKER: check the numbers", "checker")]),
        json!([{"text": "Done."}]),
        json!({"section": "LOOPER"}),
        json!([{"tool_call": {"name": "read_file", "arguments": {"path": "a.txt"}}}]),
        json!([{"tool_call": {"name": "list_dir", "arguments": {"path": "."}}}]),
        json!([{"text": "never reached"}]),
        json!({"section": "CHECKER"}),
        json!([{"text": "The numbers look fine."}]),
        json!([{"text": "Checked again: fine."}]),
    ];
    let (out, lines) = run(&dir, &script, "{\"prompt\": \"go\"}\n");
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let results = of_type(&lines, "tool_result");
    let looper = results[0]["output"].as_str().unwrap();
    assert!(
        looper.starts_with("The subagent stopped at its turn cap (2 turns)"),
        "{looper}"
    );
    let ended = of_type(&lines, "subagent_ended");
    assert_eq!(ended[0]["stop_reason"], "max_turn_requests");
    // The checker's `SubagentStop` hook kept it going once.
    let checker = results[1]["output"].as_str().unwrap();
    assert!(checker.ends_with("Checked again: fine."), "{checker}");
    let parent_session = of_type(&lines, "session")[0]["session_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let inputs: Vec<Value> = std::fs::read_to_string(&log)
        .unwrap()
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    // The looper stopped at its cap (no hook); the checker ended twice.
    assert_eq!(inputs.len(), 2, "{inputs:#?}");
    assert_eq!(inputs[0]["hook_event_name"], "SubagentStop");
    assert_eq!(inputs[0]["session_id"], parent_session.as_str());
    assert_eq!(inputs[0]["agent_type"], "delegate");
    assert_eq!(inputs[0]["agent_id"], ended[1]["session_id"]);
    assert_eq!(inputs[0]["task"], "checker");
    assert_eq!(inputs[0]["stop_hook_active"], false);
    assert_eq!(
        inputs[0]["last_assistant_message"],
        "The numbers look fine."
    );
    assert_eq!(inputs[1]["stop_hook_active"], true);
    dir.verify();
}

#[test]
fn cancelling_the_parent_cancels_its_children() {
    let dir = TestDir::new();
    dir.write_config("");
    let script = dir.script(
        "s.jsonl",
        &[
            json!([
                delegate("d1", "SLOW ONE: wait", "one"),
                delegate("d2", "SLOW TWO: wait", "two")
            ]),
            json!([{"text": "unreached"}]),
            json!({"section": "SLOW ONE"}),
            json!([{"text": "working"}, {"delay_ms": 60000}, {"text": "done"}]),
            json!({"section": "SLOW TWO"}),
            json!([{"text": "working"}, {"delay_ms": 60000}, {"text": "done"}]),
        ],
    );
    let mut child = dir
        .command()
        .args([
            "run",
            "--script",
            script.to_str().unwrap(),
            "--output",
            "jsonl",
        ])
        .args(["--cwd", dir.workspace().to_str().unwrap(), "go"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut reader = BufReader::new(child.stdout.take().unwrap());
    let mut lines: Vec<Value> = Vec::new();
    let started = Instant::now();
    while lines
        .iter()
        .filter(|l| l["type"] == "subagent_started")
        .count()
        < 2
    {
        let mut line = String::new();
        assert!(reader.read_line(&mut line).unwrap() > 0, "{lines:#?}");
        lines.push(serde_json::from_str(&line).unwrap());
        assert!(started.elapsed() < Duration::from_secs(20));
    }
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut reader, &mut rest).unwrap();
    let status = child.wait().unwrap();
    assert!(
        started.elapsed() < Duration::from_secs(30),
        "the cancel waited for the children"
    );
    assert_eq!(status.code(), Some(3));
    lines.extend(
        rest.lines()
            .map(|l| serde_json::from_str::<Value>(l).unwrap()),
    );
    let ended = of_type(&lines, "subagent_ended");
    assert_eq!(ended.len(), 2, "{lines:#?}");
    for end in ended {
        assert_eq!(end["state"], "cancelled");
        let child_tape = dir.tape(end["run_id"].as_str().unwrap());
        assert_eq!(child_tape.last().unwrap()["state"], "cancelled");
    }
    assert_eq!(lines.last().unwrap()["state"], "cancelled");
    dir.verify();
}

#[test]
fn an_editor_sees_the_childs_work_and_answers_its_approval() {
    let dir = TestDir::new();
    dir.write_config("");
    std::fs::write(dir.workspace().join("a.txt"), "alpha\n").unwrap();
    let script = dir.script(
        "s.jsonl",
        &[
            json!([delegate("d1", "HELPER: read then write", "helper")]),
            json!([{"text": "Helped."}]),
            json!({"section": "HELPER"}),
            json!([{"text": "Reading first.\n"}, {"tool_call": {"name": "read_file", "arguments": {"path": "a.txt"}}}]),
            json!([{"tool_call": {"name": "write_file", "arguments": {"path": "b.txt", "content": "beta\n"}}}]),
            json!([{"text": "Wrote b.txt."}]),
        ],
    );
    let mut acp = AcpProcess::spawn(&dir, &["--script", script.to_str().unwrap()]);
    acp.initialize();
    let session = acp.new_session(&dir.workspace());
    let prompt = acp.prompt_async(&session, "get help");
    let request = loop {
        let message = acp.recv();
        if message["method"] == "session/request_permission" {
            break message;
        }
    };
    assert_eq!(request["params"]["toolCall"]["toolCallId"], "d1");
    assert_eq!(
        request["params"]["toolCall"]["title"],
        "Subagent «helper»: Create b.txt"
    );
    acp.send(&json!({"jsonrpc": "2.0", "id": request["id"], "result": {"outcome": {"outcome": "selected", "optionId": "allow_once"}}}));
    let (updates, response) = acp.until_response(&prompt);
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    let seen: String = acp
        .received
        .iter()
        .filter(|m| m["params"]["update"]["toolCallId"] == "d1")
        .map(|m| m["params"]["update"]["content"].to_string())
        .collect();
    assert!(seen.contains("Reading first."), "{seen}");
    assert!(seen.contains("▸ Read a.txt"), "{seen}");
    assert!(seen.contains("Wrote b.txt."), "{updates:#?}");
    assert_eq!(
        std::fs::read_to_string(dir.workspace().join("b.txt")).unwrap(),
        "beta\n"
    );
    acp.finish();
}

#[test]
fn a_child_spends_at_most_what_its_parent_has_left_and_its_cost_counts_for_the_parent() {
    let dir = TestDir::new();
    // Prices per million tokens: input 2, output 10 (USD).
    dir.write_config(
        "currency = \"USD\"\n[models.\"script\"]\ncontext_window = 50000\ninput_price = 2.0\noutput_price = 10.0\n[budget]\nrun = 0.01\n",
    );
    // A turn of 2,000 input and 200 output tokens costs 0.006 USD.
    let costly =
        |call: Value| json!([call, {"usage": {"input_tokens": 2000, "output_tokens": 200}}]);
    let script = [
        // 0.002: the parent has 0.008 left when it delegates.
        json!([delegate("d1", "SPENDER: work hard", "spender"), {"usage": {"input_tokens": 500, "output_tokens": 100}}]),
        json!([{"text": "unreached: the parent's budget is spent"}]),
        json!({"section": "SPENDER"}),
        costly(json!({"tool_call": {"name": "list_dir", "arguments": {"path": "."}}})),
        costly(json!({"tool_call": {"name": "read_file", "arguments": {"path": "a.txt"}}})),
        json!([{"text": "unreached: the child's budget is spent"}]),
    ];
    let (out, lines) = run(&dir, &script, "{\"prompt\": \"go\"}\n");
    // The child stopped after two turns (0.012 >= 0.008) ...
    let result = &of_type(&lines, "tool_result")[0];
    assert!(
        result["output"]
            .as_str()
            .unwrap()
            .starts_with("The subagent stopped at a budget limit"),
        "{result}"
    );
    assert_eq!(
        of_type(&lines, "subagent_ended")[0]["stop_reason"],
        "budget"
    );
    // ... and the parent, having spent 0.002 + 0.012, stops before its next turn.
    assert_eq!(
        out.status.code(),
        Some(4),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let last = lines.last().unwrap();
    assert_eq!(last["stop_reason"], "budget", "{lines:#?}");
    assert!(
        of_type(&lines, "notice").iter().any(|n| n["message"]
            .as_str()
            .unwrap()
            .contains("This request reached its budget: it cost 0.0140 USD")),
        "{lines:#?}"
    );
    assert_eq!(of_type(&lines, "model_turn").len(), 1);
}
