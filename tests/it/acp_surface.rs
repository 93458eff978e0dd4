//! The parts of the ACP v1 surface clients still send or newly read
//! (`docs/acp.md`): the removed `session/set_model` kept as an alias.

use crate::support::{AcpProcess, TestDir};
use serde_json::{Value, json};

#[test]
fn set_model_is_kept_as_an_alias_of_the_model_option() {
    let dir = TestDir::new();
    let script = dir.script("s.jsonl", &[json!([{"text": "hi"}])]);
    dir.write_config(&format!(
        "provider = \"demo\"\n[providers.demo]\nkind = \"scripted\"\nscript = {}\nmodels = [\"script\", \"fast\"]\n",
        serde_json::to_string(script.to_str().unwrap()).unwrap()
    ));
    let mut acp = AcpProcess::spawn(&dir, &[]);
    acp.initialize();
    let session = acp.new_session(&dir.workspace());
    let (updates, response) = acp.request(
        "session/set_model",
        json!({"sessionId": session, "modelId": "demo/fast"}),
    );
    assert_eq!(response["result"], json!({}), "{response}");
    // The new options come before the response.
    let update = updates.last().unwrap();
    assert_eq!(
        update["params"]["update"]["sessionUpdate"], "config_option_update",
        "{update}"
    );
    let current: Vec<&Value> = update["params"]["update"]["configOptions"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|o| o["category"] == "model")
        .map(|o| &o["currentValue"])
        .collect();
    assert_eq!(current, [&json!("demo/fast")]);
    assert_eq!(dir.show_session(&session)["session"]["model"], "fast");
    let (_, refused) = acp.request(
        "session/set_model",
        json!({"sessionId": session, "modelId": "demo/none"}),
    );
    assert_eq!(refused["error"]["code"], -32602, "{refused}");
    assert!(
        refused["error"]["message"]
            .as_str()
            .unwrap()
            .contains("demo/none"),
        "{refused}"
    );
    acp.finish();
}

#[test]
fn a_deleted_session_leaves_every_listing_and_verify_still_holds() {
    let dir = TestDir::new();
    dir.write_config("");
    let script = dir.script(
        "s.jsonl",
        &[
            json!([{"tool_call": {"name": "write_file", "arguments": {"path": "a.txt", "content": "x\n"}}}]),
            json!([{"text": "secret answer"}]),
            json!({"section": "hello"}),
            json!([{"text": "kept answer"}]),
        ],
    );
    let mut acp = AcpProcess::spawn(
        &dir,
        &["--script", script.to_str().unwrap(), "--mode", "full"],
    );
    let init = acp.initialize();
    assert_eq!(
        init["agentCapabilities"]["sessionCapabilities"]["delete"],
        json!({})
    );
    let doomed = acp.new_session(&dir.workspace());
    let (_, response) = acp.prompt(&doomed, "write it");
    assert_eq!(response["result"]["stopReason"], "end_turn");
    let run = dir.show_session(&doomed)["runs"][0]["run_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let kept = acp.new_session(&dir.workspace());
    let (_, response) = acp.prompt(&kept, "hello");
    assert_eq!(response["result"]["stopReason"], "end_turn");
    let deleted = acp.call("session/delete", json!({"sessionId": doomed}));
    assert_eq!(deleted, json!({}));
    let listed: Vec<String> = acp.call("session/list", json!({}))["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["sessionId"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(listed, std::slice::from_ref(&kept));
    let (_, refused) = acp.request(
        "session/load",
        json!({"sessionId": doomed, "cwd": dir.workspace(), "mcpServers": []}),
    );
    assert_eq!(refused["error"]["code"], -32002, "{refused}");
    let (_, again) = acp.request("session/delete", json!({"sessionId": doomed}));
    assert_eq!(again["error"]["code"], -32002, "{again}");
    acp.finish();
    // The conversation and the tape are gone; the run's summary and its
    // receipt stay, and the chain verifies.
    let tape = dir
        .command()
        .args(["tape", &run, "--json"])
        .output()
        .unwrap();
    assert!(!String::from_utf8_lossy(&tape.stdout).contains("secret answer"));
    let shown = dir
        .command()
        .args(["runs", "show", &run, "--json"])
        .output()
        .unwrap();
    assert!(
        shown.status.success(),
        "{}",
        String::from_utf8_lossy(&shown.stderr)
    );
    dir.verify();
    let verified = dir.command().args(["verify", "--json"]).output().unwrap();
    let verified: Value = serde_json::from_slice(&verified.stdout).unwrap();
    assert_eq!(verified["receipts"], 1, "{verified}");

    // `pincer sessions rm` does the same from a shell.
    let rm = dir
        .command()
        .args(["sessions", "rm", &kept])
        .output()
        .unwrap();
    assert!(
        rm.status.success(),
        "{}",
        String::from_utf8_lossy(&rm.stderr)
    );
    let list = dir
        .command()
        .args(["sessions", "list", "--json"])
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&list.stdout).trim().is_empty());
    let rm = dir
        .command()
        .args(["sessions", "rm", "ses_nope"])
        .output()
        .unwrap();
    assert_eq!(rm.status.code(), Some(2));
    dir.verify();
}

#[test]
fn additional_directories_widen_the_boundary_and_reach_the_prompt() {
    let dir = TestDir::new();
    dir.write_config("");
    let extra = dir.path().join("shared-lib");
    std::fs::create_dir_all(&extra).unwrap();
    std::fs::write(extra.join("notes.txt"), "from the extra root\n").unwrap();
    let read = json!([{"tool_call": {"name": "read_file", "arguments": {"path": extra.join("notes.txt")}}}]);
    let script = dir.script("s.jsonl", &[read.clone(), json!([{"text": "read"}])]);
    let mut acp = AcpProcess::spawn(&dir, &["--script", script.to_str().unwrap()]);
    let init = acp.initialize();
    assert_eq!(
        init["agentCapabilities"]["sessionCapabilities"]["additionalDirectories"],
        json!({})
    );
    // Bad directories are refused, naming which.
    let (_, refused) = acp.request(
        "session/new",
        json!({"cwd": dir.workspace(), "mcpServers": [], "additionalDirectories": ["relative/dir"]}),
    );
    assert_eq!(refused["error"]["code"], -32602, "{refused}");
    assert!(
        refused["error"]["message"]
            .as_str()
            .unwrap()
            .contains("additionalDirectories[0]")
    );
    let (_, refused) = acp.request(
        "session/new",
        json!({"cwd": dir.workspace(), "mcpServers": [], "additionalDirectories": [dir.path().join("missing")]}),
    );
    assert!(
        refused["error"]["message"]
            .as_str()
            .unwrap()
            .contains("is not a directory"),
        "{refused}"
    );

    let result = acp.call(
        "session/new",
        json!({"cwd": dir.workspace(), "mcpServers": [], "additionalDirectories": [extra]}),
    );
    let session = result["sessionId"].as_str().unwrap().to_owned();
    acp.expect_commands(&session);
    let context = acp.call("_pincer/context", json!({"sessionId": session}));
    assert!(
        context["system"]
            .as_str()
            .unwrap()
            .contains(extra.to_str().unwrap()),
        "{}",
        context["system"]
    );
    let (updates, _) = acp.prompt(&session, "read the notes");
    let shown = serde_json::to_string(&updates).unwrap();
    assert!(shown.contains("from the extra root"), "{shown}");
    // Another session without them: the directory is outside.
    let other = acp.new_session(&dir.workspace());
    let (updates, _) = acp.prompt(&other, "read the notes");
    let shown = serde_json::to_string(&updates).unwrap();
    assert!(!shown.contains("from the extra root"), "{shown}");
    assert!(shown.contains("denied by policy"), "{shown}");
    acp.finish();
}

#[test]
fn the_prompt_response_carries_the_turns_usage() {
    let dir = TestDir::new();
    dir.write_config("");
    let script = dir.script(
        "s.jsonl",
        &[json!([{"text": "hi"}, {"usage": {"input_tokens": 120, "output_tokens": 30, "cached_input_tokens": 100}}])],
    );
    let mut acp = AcpProcess::spawn(&dir, &["--script", script.to_str().unwrap()]);
    acp.initialize();
    let session = acp.new_session(&dir.workspace());
    let (_, response) = acp.prompt(&session, "hello");
    assert_eq!(
        response["result"],
        json!({"stopReason": "end_turn", "usage": {"totalTokens": 150, "inputTokens": 120, "outputTokens": 30, "cachedReadTokens": 100}})
    );
    acp.finish();
}

#[test]
fn a_message_sent_while_a_prompt_works_steers_it() {
    let dir = TestDir::new();
    dir.write_config("");
    let script = dir.script(
        "s.jsonl",
        &[
            json!([{"text": "Counting"}, {"delay_ms": 1500}, {"text": " to ten."}]),
            json!([{"text": "Stopping at five, as you asked."}]),
        ],
    );
    let mut acp = AcpProcess::spawn(&dir, &["--script", script.to_str().unwrap()]);
    let init = acp.initialize();
    assert_eq!(init["_meta"]["steering"]["supported"], true, "{init}");
    let session = acp.new_session(&dir.workspace());
    // Nothing works yet: the message is handed back.
    let idle = acp.call(
        "_session/steering",
        json!({"sessionId": session, "prompt": [{"type": "text", "text": "early"}],
               "_meta": {"steering": {"idleBehavior": "promptRequired"}}}),
    );
    assert_eq!(
        idle,
        json!({"outcome": "promptRequired", "reason": "noRunningTurn"})
    );
    let prompt = acp.prompt_async(&session, "count to ten");
    // Once the reply streams, steer the run.
    loop {
        let message = acp.recv();
        if message["params"]["update"]["sessionUpdate"] == "agent_message_chunk" {
            break;
        }
    }
    let steered = acp.call(
        "_session/steering",
        json!({"sessionId": session, "prompt": [{"type": "text", "text": "stop at five"}]}),
    );
    assert_eq!(steered, json!({"outcome": "injected"}));
    let (updates, response) = acp.until_response(&prompt);
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    let text = crate::support::agent_text(&updates);
    assert!(text.contains("Stopping at five, as you asked."), "{text}");
    // The message joined the conversation between the two answers, and
    // every face saw it.
    let history: Vec<String> = dir.show_session(&session)["history"]
        .as_array()
        .unwrap()
        .iter()
        .map(|entry| entry["message"].to_string())
        .collect();
    let at = |needle: &str| history.iter().position(|m| m.contains(needle)).unwrap();
    assert!(at("count to ten") < at("Counting to ten."));
    assert!(at("Counting to ten.") < at("stop at five"));
    assert!(at("stop at five") < at("Stopping at five"));
    // On the tape as a user message of the same run, which other faces
    // watching the session show (the sender already shows it).
    let run = dir.show_session(&session)["runs"][0]["run_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let tape = dir
        .command()
        .args(["tape", &run, "--json"])
        .output()
        .unwrap();
    let users = String::from_utf8_lossy(&tape.stdout)
        .lines()
        .filter(|l| l.contains("\"type\":\"user_message\""))
        .count();
    assert_eq!(users, 2, "{}", String::from_utf8_lossy(&tape.stdout));
    let (_, bad) = acp.request(
        "_session/steering",
        json!({"sessionId": session, "prompt": [{"type": "text", "text": "x"}],
               "_meta": {"steering": {"idleBehavior": "whatever"}}}),
    );
    assert_eq!(bad["error"]["code"], -32602, "{bad}");
    acp.finish();
}

/// The thought level option, for a provider whose configuration lists the
/// reasoning efforts its API takes; each turn carries the chosen one.
#[test]
fn the_thought_level_option_sets_the_reasoning_effort_of_each_turn() {
    use crate::support::http::openai::text_reply;
    use crate::support::http::{Loopback, Request};
    let server = Loopback::model(|_: &Request, _| text_reply("ok"));
    let dir = TestDir::new();
    dir.write_config(&format!(
        "provider = \"oa\"\n[providers.oa]\nkind = \"openai\"\nbase_url = \"{}/v1\"\nmodels = [\"m\"]\nreasoning_efforts = [\"low\", \"high\"]\nreasoning_effort = \"low\"\n[providers.plain]\nkind = \"openai\"\nbase_url = \"{}/v1\"\nmodels = [\"p\"]\n",
        server.url, server.url
    ));
    let mut acp = AcpProcess::spawn_env(&dir, &[], &[("OPENAI_API_KEY", "sk-test")]);
    acp.initialize();
    let result = acp.call(
        "session/new",
        json!({"cwd": dir.workspace(), "mcpServers": []}),
    );
    let session = result["sessionId"].as_str().unwrap().to_owned();
    acp.expect_commands(&session);
    let thought = |options: &Value| -> Option<Value> {
        options
            .as_array()
            .unwrap()
            .iter()
            .find(|o| o["category"] == "thought_level")
            .cloned()
    };
    let option = thought(&result["configOptions"]).expect("a thought level option");
    assert_eq!(option["id"], "thought_level");
    assert_eq!(option["currentValue"], "default");
    let values: Vec<&Value> = option["options"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| &v["value"])
        .collect();
    assert_eq!(values, [&json!("default"), &json!("low"), &json!("high")]);
    assert_eq!(option["options"][0]["name"], "Default (low)");

    let efforts = |server: &Loopback| -> Vec<Value> {
        server
            .requests()
            .iter()
            .map(|r| {
                r.body
                    .get("reasoning_effort")
                    .cloned()
                    .unwrap_or(Value::Null)
            })
            .collect()
    };
    acp.prompt(&session, "one");
    assert_eq!(efforts(&server), [json!("low")], "the configured default");

    let changed = acp.call(
        "session/set_config_option",
        json!({"sessionId": session, "configId": "thought_level", "value": "high"}),
    );
    // The response carries every option, the changed one current.
    let categories: Vec<&Value> = changed["configOptions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| &o["category"])
        .collect();
    assert_eq!(
        categories,
        [&json!("model"), &json!("thought_level"), &json!("mode")]
    );
    assert_eq!(
        thought(&changed["configOptions"]).unwrap()["currentValue"],
        "high"
    );
    acp.prompt(&session, "two");
    assert_eq!(efforts(&server)[1], json!("high"));
    assert_eq!(
        dir.show_session(&session)["session"]["thought_level"],
        "high"
    );

    let (_, refused) = acp.request(
        "session/set_config_option",
        json!({"sessionId": session, "configId": "thought_level", "value": "extreme"}),
    );
    crate::support::assert_error(&refused, -32602, "unknown thought level \"extreme\"");
    assert!(
        refused["error"].to_string().contains("low, high, default"),
        "{refused}"
    );

    // A provider without efforts: no option, and none is sent.
    let changed = acp.call(
        "session/set_config_option",
        json!({"sessionId": session, "configId": "model", "value": "plain/p"}),
    );
    assert!(thought(&changed["configOptions"]).is_none(), "{changed}");
    acp.prompt(&session, "three");
    assert_eq!(efforts(&server)[2], Value::Null);
    let (_, refused) = acp.request(
        "session/set_config_option",
        json!({"sessionId": session, "configId": "thought_level", "value": "low"}),
    );
    crate::support::assert_error(&refused, -32602, "no reasoning_efforts");
    // Back on the first provider the session's choice still holds; then
    // `default` returns to the configured level.
    acp.call(
        "session/set_config_option",
        json!({"sessionId": session, "configId": "model", "value": "oa/m"}),
    );
    acp.prompt(&session, "four");
    assert_eq!(efforts(&server)[3], json!("high"));
    acp.call(
        "session/set_config_option",
        json!({"sessionId": session, "configId": "thought_level", "value": "default"}),
    );
    acp.prompt(&session, "five");
    assert_eq!(efforts(&server)[4], json!("low"));
    assert!(acp.finish().success());
}

#[test]
fn a_reasoning_effort_on_a_provider_without_one_is_refused_naming_the_key() {
    let dir = TestDir::new();
    dir.write_config(
        "[providers.a]\nkind = \"anthropic\"\nmodels = [\"claude\"]\nreasoning_efforts = [\"low\"]\n",
    );
    let out = dir.command().args(["run", "hi"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("providers.a.reasoning_efforts"), "{stderr}");
    assert!(stderr.contains("kind = \"openai\""), "{stderr}");
    dir.write_config(
        "[providers.o]\nkind = \"openai\"\nmodels = [\"m\"]\nreasoning_efforts = [\"low\"]\nreasoning_effort = \"high\"\n",
    );
    let out = dir.command().args(["run", "hi"]).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("providers.o.reasoning_effort"), "{stderr}");
    assert!(
        stderr.contains("must be one of `reasoning_efforts`"),
        "{stderr}"
    );
}

/// `session/fork`: a new session with the source's conversation, whole or up
/// to a user message; the source is left as it was.
#[test]
fn a_fork_carries_the_conversation_whole_or_up_to_a_prompt() {
    let dir = TestDir::new();
    // Each reply names the model turn it is: the script's Nth line answers a
    // conversation that already holds N-1 answers.
    let lines: Vec<Value> = (1..=6)
        .map(|n| json!([{"text": format!("answer {n}")}]))
        .collect();
    let script = dir.script("s.jsonl", &lines);
    dir.write_config(&format!(
        "provider = \"demo\"\n[providers.demo]\nkind = \"scripted\"\nscript = {}\n",
        serde_json::to_string(script.to_str().unwrap()).unwrap()
    ));
    let mut acp = AcpProcess::spawn(&dir, &[]);
    let init = acp.initialize();
    assert_eq!(
        init["agentCapabilities"]["sessionCapabilities"]["fork"],
        json!({})
    );
    let source = acp.new_session(&dir.workspace());
    for prompt in ["one", "two", "three"] {
        acp.prompt(&source, prompt);
    }
    acp.call(
        "session/set_config_option",
        json!({"sessionId": source, "configId": "mode", "value": "read_only"}),
    );

    // Up to the first prompt, into another directory.
    let elsewhere = dir.path().join("elsewhere");
    std::fs::create_dir_all(&elsewhere).unwrap();
    let fork = acp.call(
        "session/fork",
        json!({"sessionId": source, "cwd": elsewhere, "mcpServers": [],
               "_meta": {"pincer": {"upToPrompt": 1}}}),
    );
    let early = fork["sessionId"].as_str().unwrap().to_owned();
    assert_ne!(early, source);
    acp.expect_commands(&early);
    let mode = fork["configOptions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|o| o["id"] == "mode")
        .unwrap();
    assert_eq!(mode["currentValue"], "read_only", "the source's mode");
    let (_, response) = acp.prompt(&early, "again");
    assert_eq!(response["result"]["stopReason"], "end_turn");
    let shown = dir.show_session(&early);
    let texts: Vec<String> = shown["history"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["message"].to_string())
        .collect();
    assert_eq!(
        texts.len(),
        4,
        "one, its answer, again, its answer: {texts:?}"
    );
    assert!(texts[0].contains("one") && texts[1].contains("answer 1"));
    assert!(texts[3].contains("answer 2"), "{texts:?}");
    assert_eq!(shown["session"]["workspace"], json!(elsewhere));

    // Whole: the next answer is the fourth.
    let whole = acp.call(
        "session/fork",
        json!({"sessionId": source, "cwd": dir.workspace(), "mcpServers": []}),
    );
    let whole = whole["sessionId"].as_str().unwrap().to_owned();
    acp.expect_commands(&whole);
    let (notes, _) = acp.prompt(&whole, "four");
    assert_eq!(crate::support::agent_text(&notes), "answer 4");

    // The source is as it was: three prompts, three answers.
    let source_history = dir.show_session(&source)["history"]
        .as_array()
        .unwrap()
        .len();
    assert_eq!(source_history, 6);

    // Bad input, each named.
    let (_, refused) = acp.request(
        "session/fork",
        json!({"sessionId": source, "cwd": dir.workspace(), "mcpServers": [],
               "_meta": {"pincer": {"upToPrompt": 4}}}),
    );
    crate::support::assert_error(&refused, -32602, "has 3 user messages");
    let (_, refused) = acp.request(
        "session/fork",
        json!({"sessionId": source, "cwd": dir.workspace(), "mcpServers": [],
               "_meta": {"pincer": {"upToPrompt": "two"}}}),
    );
    crate::support::assert_error(&refused, -32602, "upToPrompt");
    let (_, refused) = acp.request(
        "session/fork",
        json!({"sessionId": source, "cwd": dir.workspace(), "mcpServers": [], "cursorId": "c1"}),
    );
    crate::support::assert_error(&refused, -32602, "cursorId");
    let (_, refused) = acp.request(
        "session/fork",
        json!({"sessionId": "ses_nope", "cwd": dir.workspace(), "mcpServers": []}),
    );
    crate::support::assert_error(&refused, -32002, "");
    assert!(acp.finish().success());
}

#[test]
fn a_symlinked_cwd_is_stored_as_the_directory_it_names() {
    let dir = TestDir::new();
    dir.write_config("");
    let real = dir.workspace();
    let base = dir.path().canonicalize().unwrap();
    let link = base.join("link");
    std::os::unix::fs::symlink(&real, &link).unwrap();
    let script = dir.script(
        "s.jsonl",
        &[
            json!([{"tool_call": {"name": "write_file", "arguments": {"path": link.join("made.txt"), "content": "x\n"}}}]),
            json!([{"text": "written"}]),
        ],
    );
    let mut acp = AcpProcess::spawn(
        &dir,
        &["--script", script.to_str().unwrap(), "--mode", "full"],
    );
    acp.initialize();
    // A directory that is not there is refused, naming it.
    let missing = base.join("missing");
    let (_, refused) = acp.request("session/new", json!({"cwd": missing, "mcpServers": []}));
    assert_eq!(refused["error"]["code"], -32602, "{refused}");
    let message = refused["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("`cwd`") && message.contains(missing.to_str().unwrap()),
        "{refused}"
    );
    assert!(message.contains("does not exist"), "{refused}");

    let session = acp.new_session(&link);
    let cwd_of = |listed: &Value| -> Vec<(String, String)> {
        listed["sessions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| {
                (
                    s["sessionId"].as_str().unwrap().to_owned(),
                    s["cwd"].as_str().unwrap().to_owned(),
                )
            })
            .collect()
    };
    let shown = real.to_str().unwrap().to_owned();
    let everything = acp.call("session/list", json!({}));
    assert_eq!(cwd_of(&everything), [(session.clone(), shown.clone())]);
    assert_eq!(
        dir.show_session(&session)["session"]["workspace"],
        shown.as_str()
    );
    // Listed under either name.
    for cwd in [&link, &real] {
        let listed = acp.call("session/list", json!({"cwd": cwd}));
        assert_eq!(
            cwd_of(&listed),
            [(session.clone(), shown.clone())],
            "{cwd:?}"
        );
    }
    // A write through the link's name lands in the real directory.
    let (updates, response) = acp.prompt(&session, "write it");
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    assert_eq!(
        std::fs::read_to_string(real.join("made.txt")).unwrap(),
        "x\n"
    );
    let located = serde_json::to_string(&updates).unwrap();
    assert!(
        located.contains(&format!("\"{}\"", real.join("made.txt").display())),
        "{located}"
    );
    // Opened again under either name.
    let (_, loaded) = acp.request(
        "session/load",
        json!({"sessionId": session, "cwd": link, "mcpServers": []}),
    );
    assert!(loaded.get("result").is_some(), "{loaded}");
    acp.expect_commands(&session);
    let (_, resumed) = acp.request(
        "session/resume",
        json!({"sessionId": session, "cwd": real, "mcpServers": []}),
    );
    assert!(resumed.get("result").is_some(), "{resumed}");
    acp.expect_commands(&session);

    // A session stored under a name that has since become a link (as
    // sessions made before workspaces were resolved are): still opened
    // under that name, and under the directory it now names.
    let old = base.join("old");
    std::fs::create_dir(&old).unwrap();
    let earlier = acp.new_session(&old);
    let moved = base.join("moved");
    std::fs::rename(&old, &moved).unwrap();
    std::os::unix::fs::symlink(&moved, &old).unwrap();
    let listed = acp.call("session/list", json!({"cwd": old}));
    assert_eq!(
        cwd_of(&listed),
        [(earlier.clone(), old.to_str().unwrap().to_owned())]
    );
    for cwd in [&old, &moved] {
        let (_, opened) = acp.request(
            "session/load",
            json!({"sessionId": earlier, "cwd": cwd, "mcpServers": []}),
        );
        assert!(opened.get("result").is_some(), "{cwd:?}: {opened}");
        acp.expect_commands(&earlier);
    }
    acp.finish();
}
