//! Slash commands over ACP through the real binary: `/help`, `/mode`,
//! `/model` and `/runs` answered without a run; `/undo` and `/compact` as runs
//! of their own; and a shell call's output streamed into its tool call while
//! it runs in Pincer's own runner.

use crate::support::{AcpProcess, TestDir, agent_text};
use pretty_assertions::assert_eq;
use serde_json::{Value, json};

fn kinds(notes: &[Value]) -> Vec<&str> {
    notes
        .iter()
        .map(|n| n["params"]["update"]["sessionUpdate"].as_str().unwrap())
        .collect()
}

fn runs(acp: &mut AcpProcess, session: &str) -> Vec<Value> {
    acp.call("_pincer/runs/list", json!({"sessionId": session}))["runs"]
        .as_array()
        .unwrap()
        .clone()
}

#[test]
fn help_mode_model_and_runs_answer_without_a_run() {
    let dir = TestDir::new();
    let script = dir.script(
        "s.jsonl",
        &[json!([{"text": "hello"}, {"usage": {"input_tokens": 4, "output_tokens": 1}}])],
    );
    let config = dir.path().join("config.toml");
    std::fs::write(
        &config,
        format!(
            "provider = \"local\"\n[providers.local]\nkind = \"scripted\"\nscript = {:?}\nmodels = [\"small\", \"large\"]\n",
            script.display().to_string()
        ),
    )
    .unwrap();
    let mut acp = AcpProcess::spawn(&dir, &["--config", config.to_str().unwrap()]);
    acp.initialize();
    let session = acp.new_session(&dir.workspace());

    let (notes, response) = acp.prompt(&session, "/help");
    assert_eq!(response["result"], json!({"stopReason": "end_turn"}));
    assert_eq!(kinds(&notes), vec!["agent_message_chunk"]);
    let help = agent_text(&notes);
    for name in [
        "/compact", "/undo", "/mode", "/model", "/runs", "/memory", "/help",
    ] {
        assert!(help.contains(name), "{help}");
    }
    assert!(runs(&mut acp, &session).is_empty(), "/help made a run");

    let (notes, _) = acp.prompt(&session, "/mode");
    assert!(
        agent_text(&notes).contains("Mode: Supervised (`supervised`)"),
        "{notes:?}"
    );
    let (notes, response) = acp.prompt(&session, "/mode full");
    assert_eq!(response["result"], json!({"stopReason": "end_turn"}));
    assert_eq!(
        kinds(&notes),
        vec![
            "current_mode_update",
            "config_option_update",
            "agent_message_chunk"
        ]
    );
    assert_eq!(notes[0]["params"]["update"]["currentModeId"], "full");
    let options = notes[1]["params"]["update"]["configOptions"]
        .as_array()
        .unwrap();
    let mode = options.iter().find(|o| o["id"] == "mode").unwrap();
    assert_eq!(mode["currentValue"], "full");
    assert_eq!(dir.show_session(&session)["session"]["mode"], "full");
    let (notes, _) = acp.prompt(&session, "/mode reckless");
    assert!(
        agent_text(&notes).contains("`reckless` is not a mode"),
        "{notes:?}"
    );
    assert_eq!(kinds(&notes), vec!["agent_message_chunk"]);

    let (notes, _) = acp.prompt(&session, "/model");
    let text = agent_text(&notes);
    assert!(
        text.contains("Model: `local/small`") && text.contains("`local/large`"),
        "{text}"
    );
    let (notes, _) = acp.prompt(&session, "/model large");
    assert_eq!(
        kinds(&notes),
        vec!["config_option_update", "agent_message_chunk"]
    );
    let options = notes[0]["params"]["update"]["configOptions"]
        .as_array()
        .unwrap();
    let model = options.iter().find(|o| o["id"] == "model").unwrap();
    assert_eq!(model["currentValue"], "local/large");
    let (notes, _) = acp.prompt(&session, "/model huge");
    assert!(
        agent_text(&notes).contains("`huge` is not a configured model"),
        "{notes:?}"
    );

    // A real prompt, then /runs lists it; a path-like prompt goes to the model.
    let (notes, _) = acp.prompt(&session, "/etc/hosts says what?");
    assert_eq!(agent_text(&notes), "hello");
    let (notes, _) = acp.prompt(&session, "/runs");
    let text = agent_text(&notes);
    let listed = runs(&mut acp, &session);
    assert_eq!(listed.len(), 1);
    let run_id = listed[0]["runId"].as_str().unwrap();
    assert!(
        text.contains(run_id) && text.contains("completed (end_turn); 4 tokens in, 1 out"),
        "{text}"
    );
    assert!(acp.finish().success());
}

#[test]
fn undo_reverts_the_last_runs_edits_and_compact_summarizes() {
    let dir = TestDir::new();
    std::fs::write(dir.workspace().join("kept.txt"), "old\n").unwrap();
    let script = dir.script(
        "s.jsonl",
        &[
            json!([
                {"tool_call": {"name": "write_file", "arguments": {"path": "new.txt", "content": "fresh\n"}}},
                {"tool_call": {"name": "edit_file", "arguments": {"path": "kept.txt", "edits": [{"old_text": "old", "new_text": "changed"}]}}}
            ]),
            json!([{"text": "Edited two files."}]),
            // The /compact turn: the model's summary.
            json!([{"text": "Summary: the user asked for two edits, which were undone."}]),
            json!([{"text": "Still here."}]),
        ],
    );
    let mut acp = AcpProcess::spawn(
        &dir,
        &["--script", script.to_str().unwrap(), "--mode", "full"],
    );
    acp.initialize();
    let session = acp.new_session(&dir.workspace());
    let (_, response) = acp.prompt(&session, "edit the files");
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    assert_eq!(
        std::fs::read_to_string(dir.workspace().join("kept.txt")).unwrap(),
        "changed\n"
    );

    let (notes, response) = acp.prompt(&session, "/undo");
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    assert!(!dir.workspace().join("new.txt").exists());
    assert_eq!(
        std::fs::read_to_string(dir.workspace().join("kept.txt")).unwrap(),
        "old\n"
    );
    // Each reverted file is a tool call the editor shows with its diff.
    let calls: Vec<&Value> = notes
        .iter()
        .filter(|n| n["params"]["update"]["sessionUpdate"] == "tool_call")
        .collect();
    assert_eq!(calls.len(), 2, "{notes:?}");
    assert!(
        calls
            .iter()
            .all(|c| c["params"]["update"]["title"] == "undo")
    );
    let text = agent_text(&notes);
    assert!(text.contains("Reverted"), "{text}");
    assert!(
        text.contains("new.txt") && text.contains("kept.txt"),
        "{text}"
    );

    let (notes, response) = acp.prompt(&session, "/compact");
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    assert!(
        agent_text(&notes).contains("Summary: the user asked for two edits"),
        "{notes:?}"
    );
    let (notes, _) = acp.prompt(&session, "go on");
    assert_eq!(agent_text(&notes), "Still here.");
    let listed = runs(&mut acp, &session);
    assert_eq!(listed.len(), 4, "prompt, /undo, /compact, prompt");
    assert!(acp.finish().success());

    let verify = dir.command().args(["verify", "--json"]).output().unwrap();
    assert!(
        verify.status.success(),
        "{}",
        String::from_utf8_lossy(&verify.stdout)
    );
}

#[test]
fn a_shell_calls_output_streams_into_its_tool_call_while_it_runs() {
    let dir = TestDir::new();
    let script = dir.script(
        "s.jsonl",
        &[
            json!([{"tool_call": {"id": "sh", "name": "shell", "arguments": {"command": "echo first; sleep 1.5; echo second"}}}]),
            json!([{"text": "done"}]),
        ],
    );
    let mut acp = AcpProcess::spawn(
        &dir,
        &["--script", script.to_str().unwrap(), "--mode", "full"],
    );
    acp.initialize();
    let session = acp.new_session(&dir.workspace());
    let (notes, response) = acp.prompt(&session, "run it");
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    let updates: Vec<&Value> = notes
        .iter()
        .map(|n| &n["params"]["update"])
        .filter(|u| u["sessionUpdate"] == "tool_call_update" && u["toolCallId"] == "sh")
        .collect();
    let texts: Vec<&str> = updates
        .iter()
        .filter(|u| u.get("status").is_none())
        .filter_map(|u| u["content"][0]["content"]["text"].as_str())
        .collect();
    // The first line showed up on its own, before the second was printed,
    // then both; each update carries the output so far, fenced.
    assert_eq!(
        texts,
        vec!["```\nfirst\n```", "```\nfirst\nsecond\n```"],
        "{updates:?}"
    );
    let last = updates.last().unwrap();
    assert_eq!(last["status"], "completed");
    let result = last["content"][0]["content"]["text"].as_str().unwrap();
    assert!(
        result.starts_with("first\nsecond\n[exit code 0]"),
        "{result}"
    );
    assert!(acp.finish().success());
}

#[test]
fn memory_is_managed_with_slash_memory_and_recalled_into_the_context() {
    let dir = TestDir::new();
    let script = dir.script("s.jsonl", &[json!([{"text": "noted"}])]);
    let mut acp = AcpProcess::spawn(&dir, &["--script", script.to_str().unwrap()]);
    acp.initialize();
    let session = acp.new_session(&dir.workspace());

    let (notes, response) = acp.prompt(&session, "/memory");
    assert_eq!(response["result"], json!({"stopReason": "end_turn"}));
    assert_eq!(agent_text(&notes), "Nothing is remembered here yet.");
    let (notes, _) = acp.prompt(&session, "/memory add The build needs protoc 25 installed");
    let added = agent_text(&notes);
    assert!(
        added.starts_with("Remembered `mem_") && added.ends_with("(workspace)."),
        "{added}"
    );
    let id = added.split('`').nth(1).unwrap().to_owned();
    let (notes, _) = acp.prompt(&session, "/memory add user Answers in German");
    assert!(agent_text(&notes).ends_with("(user)."), "{notes:?}");
    let (notes, _) = acp.prompt(&session, "/memory search protoc");
    let found = agent_text(&notes);
    assert!(found.contains(&id) && !found.contains("German"), "{found}");
    let (notes, _) = acp.prompt(
        &session,
        "/memory add token sk-proj-Abcdefghijklmnopqrstuvwxyz0123456789ABCD",
    );
    let refused = agent_text(&notes);
    assert!(refused.contains("looks like a secret"), "{refused}");
    assert!(!refused.contains("sk-proj"), "{refused}");
    let (notes, _) = acp.prompt(&session, "/memory frobnicate");
    assert!(
        agent_text(&notes).contains("`/memory search WORDS`"),
        "{notes:?}"
    );
    assert!(runs(&mut acp, &session).is_empty(), "/memory made a run");

    // A prompt about the build: the next turn is sent the item in a marked block.
    let (notes, _) = acp.prompt(&session, "why does the build fail on protoc?");
    assert_eq!(agent_text(&notes), "noted");
    let context = acp.call("_pincer/context", json!({"sessionId": session}));
    let text = context.to_string();
    assert!(text.contains("<memory>"), "{context:#}");
    assert!(
        text.contains("The build needs protoc 25 installed"),
        "{context:#}"
    );

    let (notes, _) = acp.prompt(&session, &format!("/memory pin {id}"));
    assert_eq!(agent_text(&notes), format!("`{id}` is pinned."));
    let context = acp.call("_pincer/context", json!({"sessionId": session}));
    let system = context["system"].as_str().unwrap();
    assert!(system.contains("# Remembered (pinned)"), "{system}");
    let (notes, _) = acp.prompt(&session, &format!("/memory forget {id}"));
    assert_eq!(agent_text(&notes), format!("Forgot `{id}`."));
    let (notes, _) = acp.prompt(&session, &format!("/memory forget {id}"));
    assert!(agent_text(&notes).contains("no memory item"), "{notes:?}");
    assert!(acp.finish().success());
}
