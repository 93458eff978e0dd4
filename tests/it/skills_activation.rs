//! Agent Skills at work (`docs/skills.md`): `pincer run` against a loopback
//! OpenAI-compatible model, which sees the skills' catalogue in the system
//! prompt (within its budget, the least recently used shortened first) and
//! the `skill` tool; loads a skill's instructions with it, reads a resource
//! by its path in the skill's folder and runs its script with the shell in
//! the sandbox. The activation is on the tape and in the receipts; a
//! skill's `allowed-tools` pre-approve within the policy and never past the
//! mode; a summary keeps an active skill's instructions.

use std::path::PathBuf;

use crate::support::http::openai::{message_text, text_reply, tool_reply};
use crate::support::http::{Loopback, Request};
use crate::support::{AcpProcess, TestDir};
use serde_json::{Value, json};

/// Writes a user-scope skill (`HOME/.agents/skills/NAME/SKILL.md`) with
/// `frontmatter` lines after its name and description, and `body`; its
/// folder.
fn user_skill(dir: &TestDir, name: &str, description: &str, extra: &str, body: &str) -> PathBuf {
    let folder = dir.path().join("home/.agents/skills").join(name);
    std::fs::create_dir_all(&folder).unwrap();
    std::fs::write(
        folder.join("SKILL.md"),
        format!("---\nname: {name}\ndescription: {description}\n{extra}---\n\n{body}\n"),
    )
    .unwrap();
    folder
}

/// `pincer run` in `mode` against `server`, continuing `session` if given:
/// the output and its JSON lines.
fn run(
    dir: &TestDir,
    server: &Loopback,
    mode: &str,
    session: Option<&str>,
    prompt: &str,
) -> (std::process::Output, Vec<Value>) {
    let mut command = dir.command();
    command
        .env("OPENAI_API_KEY", "sk-test")
        .env("OPENAI_BASE_URL", format!("{}/v1", server.url))
        .args(["run", "--output", "jsonl", "--mode", mode]);
    match session {
        Some(id) => command.args(["--session", id]),
        None => command
            .args(["--provider", "openai", "--model", "m", "--cwd"])
            .arg(dir.workspace()),
    };
    let out = command.arg(prompt).output().unwrap();
    let lines = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    (out, lines)
}

fn succeeded(out: &std::process::Output) {
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn system_of(request: &Request) -> String {
    message_text(&request.body["messages"][0])
}

fn last_message(request: &Request) -> String {
    request.body["messages"]
        .as_array()
        .and_then(|m| m.last())
        .map(message_text)
        .unwrap_or_default()
}

fn tool_names(request: &Request) -> Vec<String> {
    request.body["tools"]
        .as_array()
        .map(|tools| {
            tools
                .iter()
                .map(|t| {
                    t["function"]["name"]
                        .as_str()
                        .unwrap_or_default()
                        .to_owned()
                })
                .collect()
        })
        .unwrap_or_default()
}

fn session_of(events: &[Value]) -> String {
    events
        .iter()
        .find_map(|e| e["session_id"].as_str().map(str::to_owned))
        .unwrap()
}

fn of_type<'a>(events: &'a [Value], kind: &str) -> Vec<&'a Value> {
    events.iter().filter(|e| e["type"] == kind).collect()
}

/// The `tool` and `skills` columns of every receipt, in order.
fn receipts(dir: &TestDir) -> Vec<(String, Option<String>)> {
    let db = rusqlite::Connection::open(dir.data_dir().join("pincer.db")).unwrap();
    let mut statement = db
        .prepare("SELECT tool, skills FROM receipts ORDER BY seq")
        .unwrap();
    statement
        .query_map([], |row| Ok((row.get(0)?, row.get(1)?)))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap()
}

#[test]
fn a_skill_is_offered_loaded_its_resource_read_and_its_script_run_in_the_sandbox() {
    let dir = TestDir::new();
    let folder = user_skill(
        &dir,
        "release-notes",
        "Writes release notes from the changelog. Use when asked for release notes.",
        "",
        "# Release notes\n\nRead `reference.md` first, then run `scripts/stamp.sh`.",
    );
    std::fs::write(
        folder.join("reference.md"),
        "Notes are terse: one line per change.\n",
    )
    .unwrap();
    std::fs::create_dir_all(folder.join("scripts")).unwrap();
    std::fs::write(folder.join("scripts/stamp.sh"), "echo STAMPED-BY-SKILL\n").unwrap();
    let skill_md = folder.join("SKILL.md");
    let reference = folder.join("reference.md").display().to_string();
    let script = folder.join("scripts/stamp.sh").display().to_string();
    let (read, ran) = (reference.clone(), script.clone());
    let server = Loopback::model(move |_, index| match index {
        0 => tool_reply("skill", &json!({"name": "release-notes"})),
        1 => tool_reply("read_file", &json!({"path": read})),
        2 => tool_reply("shell", &json!({"command": format!("sh {ran}")})),
        _ => text_reply("done"),
    });
    let (out, events) = run(&dir, &server, "full", None, "write the release notes");
    succeeded(&out);
    let requests = server.requests();
    assert_eq!(requests.len(), 4, "{events:#?}");

    // The catalogue: instructions, then the skill's name, description and
    // location; the `skill` tool offered with its name as the one choice.
    let system = system_of(&requests[0]);
    assert!(
        system.contains("\n\n# Skills\n\nThe following skills"),
        "{system}"
    );
    assert!(system.contains("<name>release-notes</name>"), "{system}");
    assert!(system.contains(
        "<description>Writes release notes from the changelog. Use when asked for release notes.</description>"
    ));
    assert!(system.contains(&format!("<location>{}</location>", skill_md.display())));
    let tools = requests[0].body["tools"].as_array().unwrap();
    let skill = tools
        .iter()
        .find(|t| t["function"]["name"] == "skill")
        .unwrap();
    assert_eq!(
        skill["function"]["parameters"]["properties"]["name"]["enum"],
        json!(["release-notes"])
    );
    // Every turn of the run starts with the same system prompt.
    for request in &requests[1..] {
        assert_eq!(system_of(request), system);
    }

    // The tool's result: the body without its frontmatter, wrapped with the
    // folder and its files (listed, not read).
    let loaded = last_message(&requests[1]);
    assert!(
        loaded.starts_with("<skill_content name=\"release-notes\">\n# Release notes"),
        "{loaded}"
    );
    assert!(!loaded.contains("description:"), "{loaded}");
    assert!(loaded.contains(&format!("Skill directory: {}", folder.display())));
    assert!(loaded.contains("<file>reference.md</file>"));
    assert!(loaded.contains("<file>scripts/stamp.sh</file>"));
    assert!(!loaded.contains("one line per change"));
    // The resource, read by its path in the skill's folder (outside the
    // workspace), and the script, run by the shell in the sandbox.
    assert!(
        last_message(&requests[2]).contains("one line per change"),
        "{}",
        last_message(&requests[2])
    );
    let ran = last_message(&requests[3]);
    assert!(ran.contains("STAMPED-BY-SKILL"), "{ran}");

    // The activation is a tape event, once; every call from it on names
    // the skill in its receipt.
    let activated = of_type(&events, "skill_activated");
    assert_eq!(activated.len(), 1, "{events:#?}");
    assert_eq!(activated[0]["name"], "release-notes");
    assert_eq!(activated[0]["by"], "tool");
    assert_eq!(activated[0]["location"], skill_md.display().to_string());
    assert_eq!(
        receipts(&dir),
        [
            ("skill".to_owned(), Some("release-notes".to_owned())),
            ("read_file".to_owned(), Some("release-notes".to_owned())),
            ("shell".to_owned(), Some("release-notes".to_owned())),
        ]
    );
    dir.verify();
}

#[test]
fn without_skills_there_is_no_catalogue_and_no_skill_tool() {
    let dir = TestDir::new();
    let server = Loopback::model(|_, _| text_reply("ok"));
    let (out, _) = run(&dir, &server, "full", None, "hi");
    succeeded(&out);
    let request = &server.requests()[0];
    assert!(!system_of(request).contains("# Skills"));
    assert!(!system_of(request).contains("available_skills"));
    let tools = tool_names(request);
    assert!(tools.contains(&"read_file".to_owned()), "{tools:?}");
    assert!(!tools.contains(&"skill".to_owned()), "{tools:?}");

    // A skill only a person may use is no skill for the model either.
    user_skill(
        &dir,
        "deploy",
        "Deploys.",
        "disable-model-invocation: true\n",
        "Deploy.",
    );
    let (out, _) = run(&dir, &server, "full", None, "hi");
    succeeded(&out);
    let request = &server.requests()[1];
    assert!(!system_of(request).contains("# Skills"));
    assert!(!tool_names(request).contains(&"skill".to_owned()));
}

#[test]
fn reading_a_skills_file_activates_it_and_a_second_load_is_only_a_note() {
    let dir = TestDir::new();
    let folder = user_skill(&dir, "lint", "Lints things.", "", "# Lint\n\nLINT-RULES");
    let path = folder.join("SKILL.md").display().to_string();
    let server = Loopback::model(move |_, index| match index {
        0 => tool_reply("read_file", &json!({"path": path})),
        1 => tool_reply("skill", &json!({"name": "lint"})),
        _ => text_reply("done"),
    });
    let (out, events) = run(&dir, &server, "full", None, "lint it");
    succeeded(&out);
    let requests = server.requests();
    assert!(last_message(&requests[1]).contains("LINT-RULES"));
    let again = last_message(&requests[2]);
    assert!(again.contains("already active"), "{again}");
    assert!(!again.contains("LINT-RULES"), "{again}");
    let activated = of_type(&events, "skill_activated");
    assert_eq!(activated.len(), 1, "{events:#?}");
    assert_eq!(activated[0]["by"], "read_file");
}

/// Forty skills whose descriptions together pass the catalogue's default
/// budget (2,000 tokens).
fn many_skills(dir: &TestDir) -> Vec<String> {
    let long = "Handles one careful kind of document work in this project, step by step, \
                with checks before and after each change. "
        .repeat(3);
    (0..40)
        .map(|n| {
            let name = format!("skill-{n:02}");
            user_skill(dir, &name, &long, "", "body");
            name
        })
        .collect()
}

/// The skills `system` lists by name only.
fn by_name_only(system: &str) -> Vec<String> {
    system
        .lines()
        .filter_map(|line| {
            line.trim()
                .strip_prefix("<skill><name>")
                .and_then(|rest| rest.strip_suffix("</name></skill>"))
                .map(str::to_owned)
        })
        .collect()
}

/// `pincer context show --json` of `session`.
fn context(dir: &TestDir, session: &str) -> Value {
    let out = dir
        .command()
        .env("OPENAI_API_KEY", "sk-test")
        .args(["context", "show", "--session", session, "--json"])
        .output()
        .unwrap();
    succeeded(&out);
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
fn past_its_budget_the_catalogue_lists_the_least_recently_used_by_name_only() {
    let dir = TestDir::new();
    let names = many_skills(&dir);
    // The first run loads `skill-00`, the first of the never used (by name)
    // and so among the first shortened.
    let server = Loopback::model(|_, index| match index {
        0 => tool_reply("skill", &json!({"name": "skill-00"})),
        _ => text_reply("done"),
    });
    let (out, events) = run(&dir, &server, "full", None, "go");
    succeeded(&out);
    let session = session_of(&events);
    let system = system_of(&server.requests()[0]);
    let short = by_name_only(&system);
    assert!(!short.is_empty() && short.len() < names.len(), "{system}");
    assert!(short.contains(&"skill-00".to_owned()), "{short:?}");
    assert!(system.contains("listed by name only"));
    // The never used go first, by name.
    assert_eq!(short, names[..short.len()]);
    // `skill` still offers every skill, shortened or not.
    let tools = server.requests()[0].body["tools"].clone();
    let offered = tools
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["function"]["name"] == "skill")
        .unwrap()["function"]["parameters"]["properties"]["name"]["enum"]
        .as_array()
        .unwrap()
        .len();
    assert_eq!(offered, names.len());

    // Used now, `skill-00` is listed in full; `context show` says which
    // are shortened, as the next turn's prompt does.
    let shown = context(&dir, &session);
    assert_eq!(shown["skills"], json!(names.len()));
    let shortened: Vec<String> = serde_json::from_value(shown["skills_shortened"].clone()).unwrap();
    assert!(!shortened.contains(&"skill-00".to_owned()), "{shortened:?}");
    assert_eq!(shortened, by_name_only(shown["system"].as_str().unwrap()));
    assert_eq!(shortened.len(), short.len());
    let text = dir
        .command()
        .env("OPENAI_API_KEY", "sk-test")
        .args(["context", "show", "--session", &session])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(
        text.contains(&format!(
            "{} of {} skills listed by name only to fit the catalogue's budget (least recently used): {}",
            shortened.len(),
            names.len(),
            shortened.join(", ")
        )),
        "{text}"
    );
}

#[test]
fn allowed_tools_pre_approve_within_the_policy_and_never_past_read_only() {
    let dir = TestDir::new();
    user_skill(
        &dir,
        "scribe",
        "Writes notes.",
        "allowed-tools: Write Bash(touch:*)\n",
        "Write notes.",
    );
    let script = |index: usize| match index {
        0 => tool_reply("skill", &json!({"name": "scribe"})),
        1 => tool_reply(
            "write_file",
            &json!({"path": "notes.txt", "content": "hello\n"}),
        ),
        2 => tool_reply("shell", &json!({"command": "touch stamped.txt"})),
        3 => tool_reply("shell", &json!({"command": "mkdir unasked"})),
        _ => text_reply("done"),
    };
    // Read only: the skill names `Write`, and the write is still refused.
    let server = Loopback::model(move |_, index| match index {
        0 | 1 => script(index),
        _ => text_reply("done"),
    });
    let (out, events) = run(&dir, &server, "read_only", None, "take notes");
    succeeded(&out);
    let results = of_type(&events, "tool_result");
    assert_eq!(results[1]["verdict"], "denied", "{results:#?}");
    assert!(
        results[1]["output"].as_str().unwrap().contains("read_only"),
        "{results:#?}"
    );
    assert!(!dir.workspace().join("notes.txt").exists());

    // Supervised, headless (nobody to ask): what the skill names runs
    // without asking, what it does not (a command the policy asks about)
    // is not approved.
    let server = Loopback::model(move |_, index| script(index));
    let (out, events) = run(&dir, &server, "supervised", None, "take notes");
    // The run ends at the call nobody could approve.
    assert_eq!(
        out.status.code(),
        Some(3),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stderr).contains("refused shell (Run `mkdir unasked`)"));
    let results = of_type(&events, "tool_result");
    assert_eq!(results.len(), 4, "{results:#?}");
    assert_eq!(results[1]["verdict"], "allowed", "{results:#?}");
    assert_eq!(
        std::fs::read_to_string(dir.workspace().join("notes.txt")).unwrap(),
        "hello\n"
    );
    assert_eq!(results[2]["verdict"], "allowed", "{results:#?}");
    assert!(dir.workspace().join("stamped.txt").exists());
    assert_eq!(results[3]["verdict"], "rejected", "{results:#?}");
    assert!(!dir.workspace().join("unasked").exists());
    let asked = of_type(&events, "approval_requested");
    assert_eq!(asked.len(), 1, "{asked:#?}");
    assert_eq!(asked[0]["tool"], "shell");
}

#[test]
fn a_summary_keeps_an_active_skills_instructions() {
    let dir = TestDir::new();
    user_skill(
        &dir,
        "style",
        "House style.",
        "",
        "# Style\n\nSTYLE-RULE-42",
    );
    let script = dir.script(
        "s.jsonl",
        &[
            json!([{"tool_call": {"name": "skill", "arguments": {"name": "style"}}}]),
            json!([{"text": "Styled."}]),
            // The /compact turn: the model's summary.
            json!([{"text": "SUMMARY: one paragraph styled."}]),
            // After it, the skill is still active: loading it is a note.
            json!([{"tool_call": {"name": "skill", "arguments": {"name": "style"}}}]),
            json!([{"text": "Still styled."}]),
        ],
    );
    let mut acp = AcpProcess::spawn(
        &dir,
        &["--script", script.to_str().unwrap(), "--mode", "full"],
    );
    acp.initialize();
    let session = acp.new_session(&dir.workspace());
    let (_, response) = acp.prompt(&session, "style this");
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    let (_, response) = acp.prompt(&session, "/compact");
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");

    // What the next turn is sent: the summary, then the skill's
    // instructions read again.
    let shown = context(&dir, &session);
    let sent: Vec<String> = shown["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m.to_string())
        .collect();
    let summary = sent
        .iter()
        .position(|m| m.contains("SUMMARY: one paragraph styled."))
        .unwrap_or_else(|| panic!("{sent:#?}"));
    let kept = sent
        .iter()
        .position(|m| m.contains("STYLE-RULE-42"))
        .unwrap_or_else(|| panic!("{sent:#?}"));
    assert_eq!(kept, summary + 1, "{sent:#?}");
    assert!(
        sent[kept].contains(r#"<skill_content name=\"style\">"#),
        "{}",
        sent[kept]
    );

    let (notes, response) = acp.prompt(&session, "go on");
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    let results: Vec<String> = notes
        .iter()
        .filter(|n| n["params"]["update"]["sessionUpdate"] == "tool_call_update")
        .map(|n| n["params"]["update"].to_string())
        .filter(|u| u.contains("already active"))
        .collect();
    assert_eq!(results.len(), 1, "{notes:#?}");
    assert!(acp.finish().success());
}

/// The names of the commands an `available_commands_update` offers, with
/// each one's description and input hint.
fn offered(note: &Value) -> Vec<(String, String, Option<String>)> {
    note["params"]["update"]["availableCommands"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            (
                c["name"].as_str().unwrap().to_owned(),
                c["description"].as_str().unwrap().to_owned(),
                c["input"]["hint"].as_str().map(str::to_owned),
            )
        })
        .collect()
}

/// An editor is offered the person's skills by name after the built-in
/// commands (`/skill NAME` with them), `/help` lists them, and a project's
/// skill joins the list once `/trust` trusts the project.
#[test]
fn the_editor_is_offered_the_skills_by_name_and_the_projects_once_trusted() {
    let dir = TestDir::new();
    user_skill(
        &dir,
        "pdf",
        "Extract tables from PDF files.",
        "",
        "Use pdftotext.",
    );
    let workspace = dir.workspace();
    std::fs::create_dir_all(workspace.join(".git")).unwrap();
    let house = workspace.join(".agents/skills/house");
    std::fs::create_dir_all(&house).unwrap();
    std::fs::write(
        house.join("SKILL.md"),
        "---\nname: house\ndescription: The house style of this project.\n---\n\nTabs.\n",
    )
    .unwrap();
    let script = dir.script("s.jsonl", &[json!([{"text": "unused"}])]);
    let mut acp = AcpProcess::spawn(&dir, &["--script", script.to_str().unwrap()]);
    acp.initialize();
    let result = acp.call("session/new", json!({ "cwd": workspace, "mcpServers": [] }));
    let session = result["sessionId"].as_str().unwrap().to_owned();
    let first = offered(&acp.expect_commands(&session));
    let names: Vec<&str> = first.iter().map(|(n, _, _)| n.as_str()).collect();
    assert_eq!(names.first(), Some(&"compact"), "{names:?}");
    assert!(names.contains(&"pdf"), "{names:?}");
    assert!(!names.contains(&"house"), "untrusted: {names:?}");
    assert!(
        first.contains(&("pdf".into(), "Extract tables from PDF files.".into(), None)),
        "{first:?}"
    );
    assert!(
        first.contains(&(
            "skill".into(),
            "Run a prompt with a skill active".into(),
            Some("NAME [request]".into())
        )),
        "{first:?}"
    );

    let (notes, response) = acp.prompt(&session, "/help");
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    let help = notes
        .iter()
        .find_map(|n| n["params"]["update"]["content"]["text"].as_str())
        .unwrap_or_default()
        .to_owned();
    assert!(
        help.contains("- `/pdf`: Extract tables from PDF files."),
        "{help}"
    );

    let (notes, response) = acp.prompt(&session, "/trust");
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    let update = notes
        .iter()
        .rev()
        .find(|n| n["params"]["update"]["sessionUpdate"] == "available_commands_update")
        .unwrap_or_else(|| panic!("no new list after /trust: {notes:#?}"));
    let names: Vec<String> = offered(update).into_iter().map(|(n, _, _)| n).collect();
    assert!(names.iter().any(|n| n == "house"), "{names:?}");
    assert!(acp.finish().success());
}

/// The six real skills of `../shared/third_party/agent-skills` in a
/// trusted project and a home: all in the catalogue the model is sent; the
/// model loads one, reads one of its examples and runs its helper script
/// with `--help` in the sandbox, as its instructions say to.
#[test]
fn the_six_real_skills_are_offered_and_one_is_loaded_read_and_run() {
    let Some(shared) = crate::support::agent_skills() else {
        return;
    };
    assert!(
        std::path::Path::new("/usr/bin/python3").exists(),
        "/usr/bin/python3 is missing: scripts/test-deps.sh installs it"
    );
    let real = shared.join("anthropic-skills");
    let dir = TestDir::new();
    let workspace = dir.workspace();
    std::fs::create_dir_all(workspace.join(".git")).unwrap();
    let project = workspace.join(".agents/skills");
    let home = dir.path().join("home/.claude/skills");
    for name in ["algorithmic-art", "brand-guidelines", "internal-comms"] {
        crate::support::copy_tree(&real.join(name), &project.join(name));
    }
    for name in ["mcp-builder", "skill-creator", "webapp-testing"] {
        crate::support::copy_tree(&real.join(name), &home.join(name));
    }
    let trusted = dir
        .command()
        .current_dir(&workspace)
        .arg("trust")
        .output()
        .unwrap();
    succeeded(&trusted);
    let folder = home.join("webapp-testing").canonicalize().unwrap();
    let example = folder.join("examples/element_discovery.py");
    let helper = folder.join("scripts/with_server.py");
    let (read, ran) = (
        example.display().to_string(),
        // The system's interpreter: the test's home is a temporary one, so
        // a toolchain under the real home (pyenv's shims) is not among
        // those the sandbox lets a command read.
        format!("/usr/bin/python3 {} --help", helper.display()),
    );
    let server = Loopback::model(move |_, index| match index {
        0 => tool_reply("skill", &json!({"name": "webapp-testing"})),
        1 => tool_reply("read_file", &json!({"path": read})),
        2 => tool_reply("shell", &json!({"command": ran})),
        _ => text_reply("done"),
    });
    let (out, events) = run(&dir, &server, "full", None, "test the web app");
    succeeded(&out);
    let requests = server.requests();
    assert_eq!(requests.len(), 4, "{events:#?}");
    let system = system_of(&requests[0]);
    for name in [
        "algorithmic-art",
        "brand-guidelines",
        "internal-comms",
        "mcp-builder",
        "skill-creator",
        "webapp-testing",
    ] {
        assert!(
            system.contains(&format!("<name>{name}</name>")),
            "{name} in {system}"
        );
    }
    assert!(
        system.contains("Toolkit for interacting with and testing local web applications"),
        "{system}"
    );
    let loaded = last_message(&requests[1]);
    assert!(
        loaded.starts_with("<skill_content name=\"webapp-testing\">"),
        "{loaded}"
    );
    assert!(loaded.contains("# Web Application Testing"), "{loaded}");
    assert!(
        loaded.contains("<file>scripts/with_server.py</file>"),
        "{loaded}"
    );
    let example_text = std::fs::read_to_string(&example).unwrap();
    let first_line = example_text.lines().find(|l| !l.trim().is_empty()).unwrap();
    assert!(
        last_message(&requests[2]).contains(first_line),
        "{}",
        last_message(&requests[2])
    );
    let help = last_message(&requests[3]);
    assert!(
        help.contains("usage:") && help.contains("--server"),
        "{help}"
    );
    let activated = of_type(&events, "skill_activated");
    assert_eq!(activated.len(), 1, "{events:#?}");
    assert_eq!(activated[0]["name"], "webapp-testing");
}

/// A custom command of the person's (`~/.claude/commands/fix.md`) over
/// ACP: offered with its description and hint, and `/fix 42 "src/a b.rs"`
/// sends the model its prompt with the arguments put in.
#[test]
fn a_custom_command_with_arguments_runs_over_acp() {
    let dir = TestDir::new();
    let commands = dir.path().join("home/.claude/commands");
    std::fs::create_dir_all(&commands).unwrap();
    std::fs::write(
        commands.join("fix.md"),
        "---\ndescription: Fix an issue in a file\nargument-hint: ISSUE FILE\n---\nFix issue #$1 in `$2`. Everything: $ARGUMENTS\n",
    )
    .unwrap();
    let server = Loopback::model(|_, _| text_reply("fixed"));
    let url = format!("{}/v1", server.url);
    let mut acp = AcpProcess::spawn_env(
        &dir,
        &["--provider", "openai", "--model", "m"],
        &[("OPENAI_API_KEY", "sk-test"), ("OPENAI_BASE_URL", &url)],
    );
    acp.initialize();
    let result = acp.call(
        "session/new",
        json!({ "cwd": dir.workspace(), "mcpServers": [] }),
    );
    let session = result["sessionId"].as_str().unwrap().to_owned();
    let commands = offered(&acp.expect_commands(&session));
    assert!(
        commands.contains(&(
            "fix".into(),
            "Fix an issue in a file".into(),
            Some("ISSUE FILE".into())
        )),
        "{commands:?}"
    );
    let (_, response) = acp.prompt(&session, r#"/fix 42 "src/a b.rs""#);
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    let requests = server.requests();
    assert_eq!(requests.len(), 1);
    assert_eq!(
        last_message(&requests[0]),
        "Fix issue #42 in `src/a b.rs`. Everything: 42 \"src/a b.rs\""
    );
    assert!(acp.finish().success());
}

/// A skill added on disk while an editor's session is open is offered to
/// the client once the next prompt's run ends, with no new session.
#[test]
fn a_skill_added_during_a_session_is_offered_after_the_next_run() {
    let dir = TestDir::new();
    user_skill(
        &dir,
        "pdf",
        "Extract tables from PDF files.",
        "",
        "Use pdftotext.",
    );
    let script = dir.script(
        "s.jsonl",
        &[json!([{"text": "one"}]), json!([{"text": "two"}])],
    );
    let mut acp = AcpProcess::spawn(&dir, &["--script", script.to_str().unwrap()]);
    acp.initialize();
    let result = acp.call(
        "session/new",
        json!({ "cwd": dir.workspace(), "mcpServers": [] }),
    );
    let session = result["sessionId"].as_str().unwrap().to_owned();
    acp.expect_commands(&session);
    // Nothing changed: no new list after the run.
    let (_, response) = acp.prompt(&session, "hello");
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    user_skill(
        &dir,
        "charts",
        "Draw charts from CSV files.",
        "",
        "Use gnuplot.",
    );
    let (notes, response) = acp.prompt(&session, "again");
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    assert!(
        !notes
            .iter()
            .any(|n| n["params"]["update"]["sessionUpdate"] == "available_commands_update"),
        "a list came before the run ended: {notes:#?}"
    );
    let note = acp.expect_commands(&session);
    let names: Vec<String> = offered(&note).into_iter().map(|(n, _, _)| n).collect();
    assert!(names.iter().any(|n| n == "charts"), "{names:?}");
    assert!(names.iter().any(|n| n == "pdf"), "{names:?}");
    assert!(acp.finish().success());
}

/// Past what even their names take, the least recently used skills are
/// left out of the catalogue and of the `skill` tool alike; `context show`
/// names them; a person's `/NAME` still activates one.
#[test]
fn past_what_their_names_take_the_least_recently_used_are_left_out() {
    let dir = TestDir::new();
    let names = many_skills(&dir);
    dir.write_config("[skills]\ncatalogue_tokens = 300\n");
    let server = Loopback::model(|_, _| text_reply("done"));
    let (out, events) = run(&dir, &server, "full", None, "go");
    succeeded(&out);
    let session = session_of(&events);
    let request = &server.requests()[0];
    let system = system_of(request);
    let listed: Vec<String> = names
        .iter()
        .filter(|n| system.contains(&format!("<name>{n}</name>")))
        .cloned()
        .collect();
    let left_out = names.len() - listed.len();
    assert!(
        !listed.is_empty() && left_out > 0,
        "listed {listed:?}: {system}"
    );
    assert!(
        system.contains(&format!("\n{left_out} more installed skills are left out")),
        "{system}"
    );
    // The never used go first, by name: the last names stay.
    assert_eq!(listed, names[left_out..]);
    let offered: Vec<String> = request.body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["function"]["name"] == "skill")
        .map(|t| {
            serde_json::from_value(
                t["function"]["parameters"]["properties"]["name"]["enum"].clone(),
            )
            .unwrap()
        })
        .unwrap();
    assert_eq!(offered, listed);
    let shown = context(&dir, &session);
    let omitted: Vec<String> = serde_json::from_value(shown["skills_omitted"].clone()).unwrap();
    assert_eq!(omitted, names[..left_out]);
    assert_eq!(shown["skills"], json!(listed.len()));
    // A person names a left-out skill: it is active for the run.
    let (out, events) = run(&dir, &server, "full", Some(&session), "/skill-00 go on");
    succeeded(&out);
    let activated = of_type(&events, "skill_activated");
    assert_eq!(activated.len(), 1, "{events:#?}");
    assert_eq!(activated[0]["name"], "skill-00");
    assert_eq!(activated[0]["by"], "person");
}
