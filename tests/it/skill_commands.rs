//! A person's `/NAME` (`docs/skills.md`, "Using a skill by name" and
//! "Custom commands"): `pincer run` and the HTTP face against a loopback
//! OpenAI-compatible model, which is sent a skill's instructions with the
//! prompt as typed, or a custom command's prompt with its arguments put in;
//! a command's `allowed-tools` pre-approve within the policy and its
//! `model` serves its run only; an untrusted project's commands wait for
//! `pincer trust`; what cannot run is refused without calling the model.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use crate::support::http::openai::{message_text, text_reply, tool_reply};
use crate::support::http::{Loopback, Request};
use crate::support::{TestDir, copy_tree, of_type};
use serde_json::{Value, json};

fn write(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

/// The config naming the loopback model `m` (and `fast`) as provider `oa`.
fn config(dir: &TestDir, server: &Loopback) {
    dir.write_config(&format!(
        "provider = \"oa\"\nmodel = \"m\"\n[providers.oa]\nkind = \"openai\"\nbase_url = \"{}/v1\"\nmodels = [\"m\", \"fast\"]\n",
        server.url
    ));
}

/// `pincer run` in `mode`, in a new session or `session`: the output and
/// its JSON lines.
fn run(
    dir: &TestDir,
    mode: &str,
    session: Option<&str>,
    prompt: &str,
) -> (std::process::Output, Vec<Value>) {
    let mut command = dir.command();
    command
        .env("OPENAI_API_KEY", "sk-test")
        .args(["run", "--output", "jsonl", "--mode", mode]);
    match session {
        Some(id) => command.args(["--session", id]),
        None => command.arg("--cwd").arg(dir.workspace()),
    };
    let out = command.arg(prompt).output().unwrap();
    let lines = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    (out, lines)
}

fn exit(out: &std::process::Output, code: i32) {
    assert_eq!(
        out.status.code(),
        Some(code),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn stderr(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// The texts of a request's messages after the system prompt.
fn sent(request: &Request) -> Vec<String> {
    request.body["messages"].as_array().unwrap()[1..]
        .iter()
        .map(message_text)
        .collect()
}

/// The error of the run that failed in `events`.
fn failed(events: &[Value]) -> String {
    events
        .iter()
        .find(|e| e["type"] == "state" && e["state"] == "failed")
        .and_then(|e| e["error"].as_str())
        .unwrap_or_else(|| panic!("no failed run in {events:#?}"))
        .to_owned()
}

fn session_of(events: &[Value]) -> String {
    events
        .iter()
        .find_map(|e| e["session_id"].as_str().map(str::to_owned))
        .unwrap()
}

/// A skill of `../shared/third_party/agent-skills/anthropic-skills` copied
/// into `root`; its folder.
fn real_skill(root: &Path, name: &str) -> Option<PathBuf> {
    let source = crate::support::agent_skills()?
        .join("anthropic-skills")
        .join(name);
    let folder = root.join(name);
    copy_tree(&source, &folder);
    Some(folder.canonicalize().unwrap())
}

#[test]
fn a_skill_by_name_runs_the_prompt_with_its_instructions() {
    let dir = TestDir::new();
    let Some(folder) = real_skill(&dir.path().join("home/.claude/skills"), "internal-comms") else {
        return;
    };
    let server = Loopback::model(|_, index| match index {
        // The second prompt's model loads the skill again: it is active.
        1 => tool_reply("skill", &json!({"name": "internal-comms"})),
        _ => text_reply("done"),
    });
    config(&dir, &server);
    let (out, events) = run(
        &dir,
        "full",
        None,
        "/internal-comms a 3P update for the team",
    );
    exit(&out, 0);
    let requests = server.requests();
    assert_eq!(requests.len(), 1);
    let messages = sent(&requests[0]);
    // The prompt as typed, then the skill's instructions: its body without
    // the frontmatter, wrapped with its folder and files.
    assert_eq!(messages[0], "/internal-comms a 3P update for the team");
    let note = &messages[1];
    assert!(
        note.contains("<skill_content name=\"internal-comms\">\n## When to use this skill"),
        "{note}"
    );
    assert!(!note.contains("license: Complete terms"), "{note}");
    assert!(note.contains(&format!("Skill directory: {}", folder.display())));
    assert!(
        note.contains("<file>examples/3p-updates.md</file>"),
        "{note}"
    );
    // On the tape: activated by a person.
    let activated = of_type(&events, "skill_activated");
    assert_eq!(activated.len(), 1, "{events:#?}");
    assert_eq!(activated[0]["name"], "internal-comms");
    assert_eq!(activated[0]["by"], "person");
    assert_eq!(
        activated[0]["location"],
        folder.join("SKILL.md").display().to_string()
    );

    // It stays active in the session: the model's load is only a note.
    let session = session_of(&events);
    let (out, _) = run(&dir, "full", Some(&session), "and a newsletter");
    exit(&out, 0);
    let loaded = sent(&server.requests()[2]).pop().unwrap();
    assert!(loaded.contains("already active"), "{loaded}");

    // `/skill NAME rest` is the same, and text output says who activated it.
    let out = dir
        .command()
        .env("OPENAI_API_KEY", "sk-test")
        .args(["run", "--mode", "full", "--cwd"])
        .arg(dir.workspace())
        .arg("/skill internal-comms an incident report")
        .output()
        .unwrap();
    exit(&out, 0);
    assert!(
        stderr(&out).contains("pincer: skill internal-comms activated by /internal-comms"),
        "{}",
        stderr(&out)
    );
    let messages = sent(server.requests().last().unwrap());
    assert_eq!(messages[0], "/skill internal-comms an incident report");
    assert!(messages[1].contains("<skill_content name=\"internal-comms\">"));
}

#[test]
fn a_skill_only_a_person_may_use_runs_by_name_with_its_folder_readable() {
    let dir = TestDir::new();
    let folder = dir.path().join("home/.agents/skills/deploy");
    write(
        &folder.join("SKILL.md"),
        "---\nname: deploy\ndescription: Deploys.\ndisable-model-invocation: true\n---\n\nDEPLOY-STEPS: read checklist.md\n",
    );
    write(&folder.join("checklist.md"), "CHECKLIST-ITEM-7\n");
    let checklist = folder.canonicalize().unwrap().join("checklist.md");
    let read = checklist.display().to_string();
    let server = Loopback::model(move |_, index| match index {
        0 => tool_reply("read_file", &json!({"path": read})),
        _ => text_reply("deployed"),
    });
    config(&dir, &server);
    let (out, events) = run(&dir, "full", None, "/deploy staging");
    exit(&out, 0);
    let requests = server.requests();
    // Not in the catalogue, no `skill` tool: yet active by the person's word.
    let system = message_text(&requests[0].body["messages"][0]);
    assert!(!system.contains("deploy"), "{system}");
    assert!(sent(&requests[0])[1].contains("DEPLOY-STEPS"));
    let result = sent(&requests[1]).pop().unwrap();
    assert!(result.contains("CHECKLIST-ITEM-7"), "{result}");
    assert_eq!(of_type(&events, "skill_activated")[0]["by"], "person");
}

#[test]
fn what_names_no_skill_is_refused_or_sent_as_typed() {
    let dir = TestDir::new();
    write(
        &dir.path().join("home/.agents/skills/lint/SKILL.md"),
        "---\nname: lint\ndescription: Lints.\n---\nLINT\n",
    );
    let server = Loopback::model(|_, _| text_reply("ok"));
    config(&dir, &server);
    for (prompt, message) in [
        (
            "/skill",
            "/skill needs a skill's name: the skills are: lint",
        ),
        (
            "/skill nope please",
            "no skill is named `nope`; the skills are: lint",
        ),
    ] {
        let (out, events) = run(&dir, "full", None, prompt);
        exit(&out, 1);
        assert_eq!(failed(&events), message);
    }
    assert!(server.requests().is_empty());
    // A path, or a name no skill or command has, goes as typed.
    for prompt in ["/etc/hosts looks odd", "/nothing-here hi"] {
        let (out, _) = run(&dir, "full", None, prompt);
        exit(&out, 0);
        assert_eq!(sent(server.requests().last().unwrap()), [prompt]);
    }
    // A command named like a skill is the skill's; one named like a
    // built-in cannot be typed; `pincer skills list` says both.
    write(
        &dir.path().join("home/.claude/commands/lint.md"),
        "COMMAND-LINT
",
    );
    write(
        &dir.path().join("home/.claude/commands/help.md"),
        "COMMAND-HELP
",
    );
    let (out, _) = run(&dir, "full", None, "/lint src");
    exit(&out, 0);
    let messages = sent(server.requests().last().unwrap());
    assert_eq!(messages[0], "/lint src");
    assert!(messages[1].contains("<skill_content name=\"lint\">\nLINT"));
    assert!(!messages.concat().contains("COMMAND-LINT"));
    let out = dir
        .command()
        .current_dir(dir.workspace())
        .args(["skills", "list"])
        .output()
        .unwrap();
    exit(&out, 0);
    let listed = String::from_utf8_lossy(&out.stdout);
    let home = dir.path().join("home").canonicalize().unwrap();
    for line in [
        format!(
            "skipped: {}: command `help` is shadowed by the built-in command /help",
            home.join(".claude/commands/help.md").display()
        ),
        format!(
            "skipped: {}: command `lint` is shadowed by the skill at {}",
            home.join(".claude/commands/lint.md").display(),
            home.join(".agents/skills/lint/SKILL.md").display()
        ),
    ] {
        assert!(listed.contains(&line), "{line}\n{listed}");
    }
}

#[test]
fn a_command_puts_its_arguments_into_its_prompt() {
    let dir = TestDir::new();
    write(
        &dir.path().join("home/.claude/commands/fix.md"),
        "---\ndescription: Fix an issue\nargument-hint: [issue] [priority]\n---\n\
         Fix issue #$1 at priority \"$2\" ($3). Asked: $ARGUMENTS\n",
    );
    write(
        &dir.path().join("config/pincer/commands/tidy.md"),
        "Tidy up. Then !`git status` and read @notes.md.\n",
    );
    let server = Loopback::model(|_, _| text_reply("ok"));
    config(&dir, &server);
    let (out, events) = run(&dir, "full", None, "/fix 42 'very high'");
    exit(&out, 0);
    assert_eq!(
        sent(&server.requests()[0]),
        ["Fix issue #42 at priority \"very high\" (). Asked: 42 'very high'"]
    );
    // The person's prompt on the tape is as typed.
    let typed = of_type(&events, "user_message");
    assert_eq!(typed[0]["content"][0]["text"], "/fix 42 'very high'");
    // A body naming no argument gets them after it; `!` lines and `@` files
    // are left as text.
    let (out, _) = run(&dir, "full", None, "/tidy src/");
    exit(&out, 0);
    assert_eq!(
        sent(&server.requests()[1]),
        ["Tidy up. Then !`git status` and read @notes.md.\n\nARGUMENTS: src/"]
    );
}

#[test]
fn an_untrusted_projects_commands_wait_for_pincer_trust() {
    let dir = TestDir::new();
    let ws = dir.workspace();
    write(
        &ws.join(".claude/commands/frontend/component.md"),
        "Make the component $1.\n",
    );
    write(
        &ws.join(".pincer/skills/house/SKILL.md"),
        "---\nname: house\ndescription: House rules.\n---\nHOUSE-RULES\n",
    );
    let server = Loopback::model(|_, _| text_reply("ok"));
    config(&dir, &server);
    for (prompt, name) in [
        ("/component Button", "component"),
        ("/house", "house"),
        ("/skill house", "house"),
    ] {
        let (out, events) = run(&dir, "full", None, prompt);
        exit(&out, 1);
        assert_eq!(
            failed(&events),
            format!(
                "/{name} is the project's, which is not trusted yet: run `pincer trust` in the \
                 project to use its skills and commands"
            )
        );
    }
    assert!(server.requests().is_empty());
    // `pincer skills list` shows the command held back, then offered.
    let listed = |dir: &TestDir| -> Value {
        let out = dir
            .command()
            .current_dir(dir.workspace())
            .args(["skills", "list", "--json"])
            .output()
            .unwrap();
        exit(&out, 0);
        serde_json::from_slice(&out.stdout).unwrap()
    };
    let commands = listed(&dir)["commands"].clone();
    assert_eq!(commands.as_array().unwrap().len(), 1, "{commands}");
    assert_eq!(commands[0]["name"], "component");
    assert_eq!(commands[0]["scope"], "project");
    assert_eq!(commands[0]["offered"], false);
    let text = dir
        .command()
        .current_dir(&ws)
        .args(["skills", "list"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&text.stdout).into_owned();
    assert!(
        text.contains("Custom commands:\n/component  (project, not trusted: run `pincer trust`)  Make the component $1."),
        "{text}"
    );
    let out = dir
        .command()
        .current_dir(&ws)
        .arg("trust")
        .output()
        .unwrap();
    exit(&out, 0);
    assert_eq!(listed(&dir)["commands"][0]["offered"], true);
    let (out, _) = run(&dir, "full", None, "/component Button");
    exit(&out, 0);
    assert_eq!(sent(&server.requests()[0]), ["Make the component Button."]);
    let (out, _) = run(&dir, "full", None, "/house");
    exit(&out, 0);
    assert!(sent(&server.requests()[1])[1].contains("HOUSE-RULES"));
}

#[test]
fn a_commands_allowed_tools_pre_approve_within_the_policy() {
    let dir = TestDir::new();
    write(
        &dir.path().join("home/.claude/commands/stamp.md"),
        "---\nallowed-tools: Bash(touch:*), Write\n---\nStamp it.\n",
    );
    let server = Loopback::model(|_, index| match index {
        0 => tool_reply("shell", &json!({"command": "touch stamped.txt"})),
        1 => tool_reply(
            "write_file",
            &json!({"path": "notes.txt", "content": "hi\n"}),
        ),
        2 => tool_reply("shell", &json!({"command": "mkdir unasked"})),
        _ => text_reply("done"),
    });
    config(&dir, &server);
    // A policy deny stays a deny: `write_file` is refused whatever the
    // command says.
    let text = std::fs::read_to_string(dir.path().join("config/pincer/config.toml")).unwrap();
    dir.write_config(&format!("{text}[tools]\nwrite_file = \"deny\"\n"));
    let (out, events) = run(&dir, "supervised", None, "/stamp");
    // Supervised and headless: what the command names runs without asking,
    // what it does not is refused (nobody to ask).
    exit(&out, 3);
    let results = of_type(&events, "tool_result");
    assert_eq!(results.len(), 3, "{results:#?}");
    assert_eq!(results[0]["verdict"], "allowed", "{results:#?}");
    assert!(dir.workspace().join("stamped.txt").exists());
    assert_eq!(results[1]["verdict"], "denied", "{results:#?}");
    assert!(!dir.workspace().join("notes.txt").exists());
    assert_eq!(results[2]["verdict"], "rejected", "{results:#?}");
    assert!(!dir.workspace().join("unasked").exists());

    // Without the command, the same call is asked about (and refused).
    let server2 = Loopback::model(|_, index| match index {
        0 => tool_reply("shell", &json!({"command": "touch again.txt"})),
        _ => text_reply("done"),
    });
    dir.write_config(&format!(
        "provider = \"oa\"\nmodel = \"m\"\n[providers.oa]\nkind = \"openai\"\nbase_url = \"{}/v1\"\nmodels = [\"m\"]\n",
        server2.url
    ));
    let (out, _) = run(&dir, "supervised", None, "Stamp it.");
    exit(&out, 3);
    assert!(!dir.workspace().join("again.txt").exists());
}

#[test]
fn a_commands_model_serves_its_run_only() {
    let dir = TestDir::new();
    write(
        &dir.path().join("home/.claude/commands/quick.md"),
        "---\nmodel: fast\n---\nQuickly: $ARGUMENTS\n",
    );
    write(
        &dir.path().join("home/.claude/commands/odd.md"),
        "---\nmodel: no-such-model\n---\nOdd.\n",
    );
    let server = Loopback::model(|_, _| text_reply("ok"));
    config(&dir, &server);
    let (out, events) = run(&dir, "full", None, "/quick sum it up");
    exit(&out, 0);
    let session = session_of(&events);
    let (out, _) = run(&dir, "full", Some(&session), "and now slowly");
    exit(&out, 0);
    let requests = server.requests();
    assert_eq!(requests[0].body["model"], "fast");
    assert_eq!(sent(&requests[0]), ["Quickly: sum it up"]);
    assert_eq!(requests[1].body["model"], "m");
    assert_eq!(dir.show_session(&session)["session"]["model"], "m");
    // A model that is not configured: the run fails naming it.
    let (out, events) = run(&dir, "full", None, "/odd");
    exit(&out, 1);
    assert_eq!(
        failed(&events),
        "the command /odd asks for the model `no-such-model`, which is not configured; \
         the models are: oa/m, oa/fast"
    );
    assert_eq!(server.requests().len(), 2);
}

const HTTP_TOKEN: &str = "commands-test-token-0123456789";

/// One HTTP/1.1 request; the status and the JSON body.
fn http(addr: &str, method: &str, path: &str, body: &Value) -> (u16, Value) {
    let mut stream = std::net::TcpStream::connect(addr).unwrap();
    let body = body.to_string();
    write!(
        stream,
        "{method} {path} HTTP/1.1\r\nhost: {addr}\r\nauthorization: Bearer {HTTP_TOKEN}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    let (head, body) = response.split_once("\r\n\r\n").unwrap();
    let status = head.split(' ').nth(1).unwrap().parse().unwrap();
    (status, serde_json::from_str(body).unwrap_or(Value::Null))
}

#[test]
fn an_http_prompt_expands_the_same_way() {
    let dir = TestDir::new();
    write(
        &dir.path().join("home/.claude/commands/fix.md"),
        "Fix issue #$1.\n",
    );
    write(
        &dir.path().join("home/.agents/skills/lint/SKILL.md"),
        "---\nname: lint\ndescription: Lints.\n---\nLINT-RULES\n",
    );
    let server = Loopback::model(|_, _| text_reply("ok"));
    config(&dir, &server);
    let ready = dir.path().join("ready");
    let mut child = dir
        .command()
        .env("OPENAI_API_KEY", "sk-test")
        .env("PINCER_HTTP_TOKEN", HTTP_TOKEN)
        .args(["serve", "--http", "127.0.0.1:0", "--ready-file"])
        .arg(&ready)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let started = std::time::Instant::now();
    let addr = loop {
        if let Ok(text) = std::fs::read_to_string(&ready)
            && !text.trim().is_empty()
        {
            break text.trim().to_owned();
        }
        assert!(
            started.elapsed() < crate::support::TIMEOUT,
            "the server did not start"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    let (status, session) = http(
        &addr,
        "POST",
        "/v1/sessions",
        &json!({"workspace": dir.workspace(), "mode": "full"}),
    );
    assert_eq!(status, 201, "{session}");
    let prompt = format!(
        "/v1/sessions/{}/prompt?wait=true",
        session["session_id"].as_str().unwrap()
    );
    let (status, run) = http(&addr, "POST", &prompt, &json!({"prompt": "/fix 12"}));
    assert_eq!(status, 200, "{run}");
    assert_eq!(run["state"], "completed", "{run}");
    assert_eq!(sent(&server.requests()[0]), ["Fix issue #12."]);
    let (status, run) = http(&addr, "POST", &prompt, &json!({"prompt": "/lint src"}));
    assert_eq!(status, 200, "{run}");
    let messages = sent(&server.requests()[1]);
    assert_eq!(messages[messages.len() - 2], "/lint src");
    assert!(
        messages.last().unwrap().contains("LINT-RULES"),
        "{messages:#?}"
    );
    let (status, run) = http(&addr, "POST", &prompt, &json!({"prompt": "/skill"}));
    assert_eq!(status, 200, "{run}");
    assert_eq!(run["state"], "failed", "{run}");
    assert!(
        run.to_string().contains("/skill needs a skill's name"),
        "{run}"
    );
    assert_eq!(server.requests().len(), 2);
    child.kill().unwrap();
    child.wait().unwrap();
}

#[test]
fn a_subagents_task_is_the_models_words_and_never_expanded() {
    let dir = TestDir::new();
    write(
        &dir.path().join("home/.claude/commands/stamp.md"),
        "---\nallowed-tools: Bash(touch:*)\n---\nSTAMP-BODY\n",
    );
    let server = Loopback::model(|request, index| {
        let child = request.body["messages"]
            .as_array()
            .unwrap()
            .iter()
            .any(|m| m["role"] == "user" && message_text(m) == "/stamp now");
        if child {
            text_reply("child answered")
        } else if index == 0 {
            tool_reply("delegate", &json!({"task": "/stamp now", "label": "s"}))
        } else {
            text_reply("done")
        }
    });
    config(&dir, &server);
    let (out, _) = run(&dir, "full", None, "split it");
    exit(&out, 0);
    let requests = server.requests();
    assert_eq!(requests.len(), 3);
    assert!(
        requests
            .iter()
            .any(|r| sent(r).first().map(String::as_str) == Some("/stamp now"))
    );
    assert!(
        !requests
            .iter()
            .any(|r| sent(r).concat().contains("STAMP-BODY"))
    );
}

#[test]
fn a_persons_skill_survives_compaction() {
    let dir = TestDir::new();
    write(
        &dir.path().join("home/.agents/skills/deploy/SKILL.md"),
        "---\nname: deploy\ndescription: Deploys.\ndisable-model-invocation: true\n---\nDEPLOY-RULE-9\n",
    );
    let script = dir.script(
        "s.jsonl",
        &[
            json!([{"text": "Deploying."}]),
            json!([{"text": "SUMMARY: deployed once."}]),
        ],
    );
    let mut acp = crate::support::AcpProcess::spawn(
        &dir,
        &["--script", script.to_str().unwrap(), "--mode", "full"],
    );
    acp.initialize();
    let session = acp.new_session(&dir.workspace());
    let (_, response) = acp.prompt(&session, "/deploy to staging");
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    let (_, response) = acp.prompt(&session, "/compact");
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    assert!(acp.finish().success());
    let out = dir
        .command()
        .args(["context", "show", "--session", &session, "--json"])
        .output()
        .unwrap();
    exit(&out, 0);
    let shown: Value = serde_json::from_slice(&out.stdout).unwrap();
    let sent: Vec<String> = shown["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(Value::to_string)
        .collect();
    let summary = sent
        .iter()
        .position(|m| m.contains("SUMMARY: deployed once."))
        .unwrap_or_else(|| panic!("{sent:#?}"));
    assert!(
        sent.get(summary + 1)
            .is_some_and(|m| m.contains("DEPLOY-RULE-9")),
        "{sent:#?}"
    );
}
