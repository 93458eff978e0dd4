//! `pincer plugin` (`docs/plugins.md`): a Claude Code plugin
//! folder and the real Anthropic marketplace file installed into the
//! configuration directory, listed, disabled, enabled and removed; bad input
//! refused naming the problem, nothing half-installed. An enabled plugin's
//! parts reach `pincer run`: its skill offered and activated (a loopback
//! OpenAI-compatible model sees it), its hook blocking a shell call, its
//! MCP server (the reference `server-everything`) called; disabled, none.

use std::path::Path;
use std::process::{Output, Stdio};

use crate::support::http::Loopback;
use crate::support::http::openai::{message_text, text_reply, tool_reply};
use crate::support::{TestDir, agent_skills};
use serde_json::{Value, json};

fn pincer(dir: &TestDir, args: &[&str]) -> (i32, String, String) {
    let out = dir.command().args(args).output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn listed(dir: &TestDir) -> Vec<Value> {
    let (code, out, err) = pincer(dir, &["plugin", "list", "--json"]);
    assert_eq!(code, 0, "{err}");
    out.lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn write(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

#[test]
fn a_plugin_folder_is_added_listed_disabled_enabled_and_removed() {
    let dir = TestDir::new();
    let source = dir.path().join("src/review-kit");
    write(
        &source.join(".claude-plugin/plugin.json"),
        r#"{"name": "review-kit", "version": "0.3.0", "description": "Reviews", "author": {"name": "A"}}"#,
    );
    write(
        &source.join("skills/review/SKILL.md"),
        "---\nname: review\ndescription: Review a change\n---\nRead the diff.\n",
    );
    write(&source.join("commands/ship.md"), "Ship $ARGUMENTS\n");
    write(
        &source.join("hooks/hooks.json"),
        r#"{"hooks": {"Stop": [{"hooks": [{"type": "command", "command": "true"}]}]}}"#,
    );
    write(
        &source.join(".mcp.json"),
        r#"{"mcpServers": {"everything": {"command": "npx"}}}"#,
    );

    let (code, out, err) = pincer(&dir, &["plugin", "add", source.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(
        out,
        "added review-kit 0.3.0: 1 skill, 1 command, 1 hook, 1 MCP server\n"
    );
    let store = dir.path().join("config/pincer/plugins");
    assert!(store.join("review-kit/skills/review/SKILL.md").is_file());
    assert!(store.join("plugins.toml").is_file());
    let plugins = listed(&dir);
    assert_eq!(plugins.len(), 1);
    assert_eq!(plugins[0]["name"], "review-kit");
    assert_eq!(plugins[0]["enabled"], true);
    assert_eq!(plugins[0]["skills"], serde_json::json!(["skills"]));
    assert_eq!(plugins[0]["hooks"], "hooks/hooks.json");
    assert_eq!(plugins[0]["mcp_servers"], ".mcp.json");
    assert_eq!(
        plugins[0]["folder"],
        store.join("review-kit").to_str().unwrap()
    );
    // The parts as a session gets them: the skill and command named after
    // the plugin, the hook in Claude Code's dialect, the server prefixed.
    assert_eq!(
        plugins[0]["parts"],
        json!({
            "skills": ["review-kit:review"],
            "commands": ["review-kit:ship"],
            "hooks": ["Stop [*] true"],
            "mcp_servers": ["review-kit_everything"],
            "notes": [],
            "problems": []
        })
    );

    // Added twice: refused, the first copy untouched.
    let (code, _, err) = pincer(&dir, &["plugin", "add", source.to_str().unwrap()]);
    assert_eq!(code, 2);
    assert!(
        err.contains("plugin `review-kit` is already installed"),
        "{err}"
    );

    let (code, out, _) = pincer(&dir, &["plugin", "disable", "review-kit"]);
    assert_eq!(code, 0);
    assert!(
        out.starts_with("disabled review-kit 0.3.0 (disabled):"),
        "{out}"
    );
    assert_eq!(listed(&dir)[0]["enabled"], false);
    let (code, out, _) = pincer(&dir, &["plugin", "list"]);
    assert_eq!(code, 0);
    assert!(out.starts_with("review-kit 0.3.0 (disabled): "), "{out}");
    let (code, _, _) = pincer(&dir, &["plugin", "enable", "review-kit"]);
    assert_eq!(code, 0);
    assert_eq!(listed(&dir)[0]["enabled"], true);

    let (code, out, _) = pincer(&dir, &["plugin", "rm", "review-kit"]);
    assert_eq!(code, 0);
    assert_eq!(out, "removed review-kit\n");
    assert!(!store.join("review-kit").exists());
    assert!(listed(&dir).is_empty());
    let (code, _, err) = pincer(&dir, &["plugin", "rm", "review-kit"]);
    assert_eq!(code, 2);
    assert!(err.contains("no plugin `review-kit` is installed"), "{err}");
    let (code, out, _) = pincer(&dir, &["plugin", "list"]);
    assert_eq!(code, 0);
    assert!(out.starts_with("No plugin is installed"), "{out}");
}

#[test]
fn the_anthropic_marketplace_adds_the_named_plugin_with_the_skills_it_has() {
    let Some(skills) = agent_skills() else {
        return;
    };
    let dir = TestDir::new();
    // The marketplace's layout: its file under .claude-plugin/, the skills
    // it lists under skills/ (six of the twelve `example-skills` names).
    let market = dir.path().join("market");
    let anthropic = skills.join("anthropic-skills");
    write(
        &market.join(".claude-plugin/marketplace.json"),
        &std::fs::read_to_string(anthropic.join("marketplace.json")).unwrap(),
    );
    for entry in std::fs::read_dir(&anthropic).unwrap() {
        let entry = entry.unwrap();
        if entry.file_type().unwrap().is_dir() {
            crate::support::copy_tree(
                &entry.path(),
                &market.join("skills").join(entry.file_name()),
            );
        }
    }

    let (code, _, err) = pincer(&dir, &["plugin", "add", market.to_str().unwrap()]);
    assert_eq!(code, 2);
    assert!(
        err.contains(
            "offers several plugins; name those to add: document-skills, example-skills, claude-api"
        ),
        "{err}"
    );
    let (code, _, err) = pincer(&dir, &["plugin", "add", market.to_str().unwrap(), "nope"]);
    assert_eq!(code, 2);
    assert!(err.contains("has no plugin `nope`"), "{err}");
    assert!(listed(&dir).is_empty());

    let (code, out, err) = pincer(
        &dir,
        &["plugin", "add", market.to_str().unwrap(), "example-skills"],
    );
    assert_eq!(code, 0, "{err}");
    assert_eq!(out, "added example-skills: 6 skills\n");
    let plugins = listed(&dir);
    assert_eq!(plugins[0]["marketplace"], "anthropic-agent-skills");
    let recorded: Vec<&str> = plugins[0]["skills"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s.as_str().unwrap())
        .collect();
    assert_eq!(
        recorded,
        [
            "skills/algorithmic-art",
            "skills/brand-guidelines",
            "skills/internal-comms",
            "skills/mcp-builder",
            "skills/skill-creator",
            "skills/webapp-testing"
        ]
    );
    let folder = Path::new(plugins[0]["folder"].as_str().unwrap());
    assert!(folder.join("skills/webapp-testing/SKILL.md").is_file());
    // Its skills are offered under the plugin's name.
    let skills = skills_listed(&dir);
    let names: Vec<&str> = skills.iter().map(|s| s["name"].as_str().unwrap()).collect();
    assert_eq!(
        names,
        [
            "example-skills:algorithmic-art",
            "example-skills:brand-guidelines",
            "example-skills:internal-comms",
            "example-skills:mcp-builder",
            "example-skills:skill-creator",
            "example-skills:webapp-testing"
        ]
    );
    assert!(
        skills
            .iter()
            .all(|s| s["scope"] == "plugin" && s["offered"] == true)
    );
}

#[test]
fn what_is_not_a_plugin_is_refused_naming_the_problem() {
    let dir = TestDir::new();
    let empty = dir.path().join("empty");
    std::fs::create_dir_all(&empty).unwrap();
    let (code, _, err) = pincer(&dir, &["plugin", "add", empty.to_str().unwrap()]);
    assert_eq!(code, 2);
    assert!(
        err.contains("not a plugin (no .claude-plugin/plugin.json)"),
        "{err}"
    );
    let broken = dir.path().join("broken");
    write(&broken.join(".claude-plugin/plugin.json"), "{\"name\": ");
    let (code, _, err) = pincer(&dir, &["plugin", "add", broken.to_str().unwrap()]);
    assert_eq!(code, 2);
    assert!(err.contains("plugin.json: EOF"), "{err}");
    let climbing = dir.path().join("climbing");
    write(
        &climbing.join(".claude-plugin/plugin.json"),
        r#"{"name": "../up"}"#,
    );
    let (code, _, err) = pincer(&dir, &["plugin", "add", climbing.to_str().unwrap()]);
    assert_eq!(code, 2);
    assert!(err.contains("is not allowed"), "{err}");
    let (code, _, err) = pincer(&dir, &["plugin", "add", "/nonexistent/x"]);
    assert_ne!(code, 0);
    assert!(err.contains("/nonexistent/x"), "{err}");
    assert!(listed(&dir).is_empty());
}

/// `pincer skills list --json`'s skills, from the workspace.
fn skills_listed(dir: &TestDir) -> Vec<Value> {
    let out = dir
        .command()
        .current_dir(dir.workspace())
        .args(["skills", "list", "--json"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let listing: Value = serde_json::from_slice(&out.stdout).unwrap();
    listing["skills"].as_array().unwrap().clone()
}

/// A plugin folder `name` under `dir/src` with `files` (path, text) and
/// its manifest, added with `pincer plugin add`; its copy in the store.
fn added(dir: &TestDir, name: &str, files: &[(&str, &str)]) -> std::path::PathBuf {
    let source = dir.path().join("src").join(name);
    write(
        &source.join(".claude-plugin/plugin.json"),
        &format!(r#"{{"name": "{name}"}}"#),
    );
    for (path, text) in files {
        write(&source.join(path), text);
    }
    let (code, _, err) = pincer(dir, &["plugin", "add", source.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    dir.path().join("config/pincer/plugins").join(name)
}

/// `pincer run --output jsonl` in full mode with a scripted model.
fn scripted_run(dir: &TestDir, script: &[Value]) -> (Output, Vec<Value>) {
    let script = dir.script("s.jsonl", script);
    let out = dir
        .command()
        .args(["run", "--output", "jsonl", "--mode", "full", "--script"])
        .arg(&script)
        .arg("--cwd")
        .arg(dir.workspace())
        .arg("go")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let lines = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    (out, lines)
}

fn call(name: &str, arguments: Value) -> Value {
    json!([{"tool_call": {"name": name, "arguments": arguments}}])
}

fn tool_results(lines: &[Value]) -> Vec<&Value> {
    lines
        .iter()
        .filter(|l| l["type"] == "tool_result")
        .collect()
}

#[test]
fn a_plugins_skill_is_offered_and_activated_in_a_run_and_gone_once_disabled() {
    let dir = TestDir::new();
    let folder = added(
        &dir,
        "review-kit",
        &[(
            "skills/review/SKILL.md",
            "---\nname: review\ndescription: Reviews a change. Use when asked for a review.\n---\n\nREVIEW-KIT-BODY: read the diff twice.\n",
        )],
    );
    let skill_md = folder.join("skills/review/SKILL.md");
    // Listed with its plugin's scope, offered in an untrusted workspace
    // (adding the plugin was the person's choice).
    let skills = skills_listed(&dir);
    assert_eq!(skills.len(), 1, "{skills:?}");
    assert_eq!(skills[0]["name"], "review-kit:review");
    assert_eq!(skills[0]["scope"], "plugin");
    assert_eq!(skills[0]["plugin"], "review-kit");
    assert_eq!(skills[0]["offered"], true);
    assert_eq!(skills[0]["location"], skill_md.to_str().unwrap());
    let out = dir
        .command()
        .current_dir(dir.workspace())
        .args(["skills", "list"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.starts_with("review-kit:review  (plugin review-kit)  Reviews a change."),
        "{text}"
    );

    let server = Loopback::model(|_, index| match index {
        0 => tool_reply("skill", &json!({"name": "review-kit:review"})),
        _ => text_reply("reviewed"),
    });
    let run = |dir: &TestDir| {
        dir.command()
            .env("OPENAI_API_KEY", "sk-test")
            .env("OPENAI_BASE_URL", format!("{}/v1", server.url))
            .args(["run", "--output", "jsonl", "--mode", "full"])
            .args(["--provider", "openai", "--model", "m", "--cwd"])
            .arg(dir.workspace())
            .arg("review my change")
            .stdin(Stdio::null())
            .output()
            .unwrap()
    };
    let out = run(&dir);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let requests = server.requests();
    assert_eq!(requests.len(), 2);
    let system = message_text(&requests[0].body["messages"][0]);
    assert!(
        system.contains("<name>review-kit:review</name>"),
        "{system}"
    );
    assert!(system.contains(&format!("<location>{}</location>", skill_md.display())));
    let loaded = requests[1].body["messages"]
        .as_array()
        .and_then(|m| m.last())
        .map(message_text)
        .unwrap_or_default();
    assert!(
        loaded.starts_with("<skill_content name=\"review-kit:review\">"),
        "{loaded}"
    );
    assert!(loaded.contains("REVIEW-KIT-BODY"), "{loaded}");
    let events: Vec<Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    assert!(
        events
            .iter()
            .any(|e| e["type"] == "skill_activated" && e["name"] == "review-kit:review"),
        "{events:#?}"
    );

    // Disabled: not listed, not in the catalogue, no skill tool.
    let (code, _, _) = pincer(&dir, &["plugin", "disable", "review-kit"]);
    assert_eq!(code, 0);
    assert!(skills_listed(&dir).is_empty());
    let out = run(&dir);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let request = &server.requests()[2];
    assert!(!message_text(&request.body["messages"][0]).contains("review-kit"));
    let tools = request.body["tools"].to_string();
    assert!(!tools.contains("\"skill\""), "{tools}");
}

#[test]
fn a_plugins_hook_blocks_a_shell_call_until_the_plugin_is_disabled() {
    let dir = TestDir::new();
    let folder = added(
        &dir,
        "guard",
        &[
            (
                "hooks/hooks.json",
                r#"{"description": "no shells", "hooks": {"PreToolUse": [{"matcher": "Bash",
                    "hooks": [{"type": "command", "command": "sh \"${CLAUDE_PLUGIN_ROOT}/hooks/deny.sh\""}]}]}}"#,
            ),
            (
                "hooks/deny.sh",
                "cat > \"$CLAUDE_PLUGIN_ROOT/seen.json\"\necho \"guard says no from $(basename \"$CLAUDE_PLUGIN_ROOT\")\" >&2\nexit 2\n",
            ),
        ],
    );
    let (_, out, _) = pincer(&dir, &["plugin", "list"]);
    assert_eq!(out, "guard: 1 hook\n");
    let script = [
        call("shell", json!({"command": "touch made.txt"})),
        json!([{"text": "ok"}]),
    ];
    let (out, lines) = scripted_run(&dir, &script);
    assert_eq!(out.status.code(), Some(0), "{lines:#?}");
    let results = tool_results(&lines);
    assert_eq!(results[0]["verdict"], "denied", "{lines:#?}");
    assert_eq!(
        results[0]["output"],
        "denied by a hook: guard says no from guard"
    );
    assert!(!dir.workspace().join("made.txt").exists());
    // The receipt names the plugin's hook.
    let db = rusqlite::Connection::open(dir.data_dir().join("pincer.db")).unwrap();
    let hooks: String = db
        .query_row(
            "SELECT hooks FROM receipts ORDER BY seq LIMIT 1",
            [],
            |row| row.get(0),
        )
        .unwrap();
    assert!(
        hooks.starts_with("PreToolUse plugin guard: sh ") && hooks.ends_with(": block"),
        "{hooks}"
    );
    // It read the call in Claude Code's dialect.
    let seen: Value =
        serde_json::from_str(&std::fs::read_to_string(folder.join("seen.json")).unwrap()).unwrap();
    assert_eq!(seen["tool_name"], "Bash");
    assert_eq!(seen["tool_input"]["command"], "touch made.txt");
    assert_eq!(seen["hook_event_name"], "PreToolUse");

    // A broken hooks file: `pincer doctor` names it, a run goes on without it.
    std::fs::write(folder.join("hooks/hooks.json"), "{\"hooks\": ").unwrap();
    let (_, report, _) = pincer(&dir, &["doctor"]);
    let line = report
        .lines()
        .find(|l| l.contains("plugin guard"))
        .unwrap_or_else(|| panic!("{report}"));
    assert!(line.starts_with("FAIL"), "{line}");
    assert!(
        line.contains(&format!(
            "{}: not JSON",
            folder.join("hooks/hooks.json").display()
        )),
        "{line}"
    );
    let (_, out, _) = pincer(&dir, &["plugin", "list", "--json"]);
    let listed: Value = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(listed["parts"]["problems"].as_array().unwrap().len(), 1);
    let (_, out, _) = pincer(&dir, &["plugin", "list"]);
    assert!(
        out.starts_with("guard: nothing Pincer uses\n  problem: ") && out.contains("not JSON"),
        "{out}"
    );
    std::fs::remove_file(folder.join("seen.json")).unwrap();
    let (out, lines) = scripted_run(&dir, &script);
    assert_eq!(out.status.code(), Some(0), "{lines:#?}");
    assert_eq!(tool_results(&lines)[0]["verdict"], "allowed", "{lines:#?}");
    assert!(dir.workspace().join("made.txt").exists());
    assert!(!folder.join("seen.json").exists());
    std::fs::remove_file(dir.workspace().join("made.txt")).unwrap();

    // Disabled: the hook never runs.
    write(
        &folder.join("hooks/hooks.json"),
        r#"{"hooks": {"PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "sh \"${CLAUDE_PLUGIN_ROOT}/hooks/deny.sh\""}]}]}}"#,
    );
    let (code, _, _) = pincer(&dir, &["plugin", "disable", "guard"]);
    assert_eq!(code, 0);
    let (out, lines) = scripted_run(&dir, &script);
    assert_eq!(out.status.code(), Some(0), "{lines:#?}");
    assert_eq!(tool_results(&lines)[0]["verdict"], "allowed", "{lines:#?}");
    assert!(dir.workspace().join("made.txt").exists());
    assert!(!folder.join("seen.json").exists());
}

#[test]
fn a_plugins_mcp_server_serves_a_run_under_the_policy_and_a_configured_one_wins_a_clash() {
    let everything = crate::mcp::fixtures()
        .join("node_modules/@modelcontextprotocol/server-everything/dist/index.js");
    let node = crate::mcp::node();
    let dir = TestDir::new();
    let servers = json!({"mcpServers": {"everything": {
        "command": "sh",
        "args": ["${CLAUDE_PLUGIN_ROOT}/start.sh"],
        "env": {"KIT_ROOT": "${CLAUDE_PLUGIN_ROOT}/data"}
    }}});
    let folder = added(
        &dir,
        "kit",
        &[
            (".mcp.json", &servers.to_string()),
            (
                "start.sh",
                &format!(
                    "echo \"$KIT_ROOT\" > \"$(dirname \"$0\")/root.txt\"\nexec {node:?} {:?} stdio\n",
                    everything.to_str().unwrap()
                ),
            ),
        ],
    );
    let script = [
        call("kit_everything__get-env", json!({})),
        json!([{"text": "done"}]),
    ];
    let (out, lines) = scripted_run(&dir, &script);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let results = tool_results(&lines);
    assert_eq!(results[0]["is_error"], false, "{lines:#?}");
    // Started from the plugin's folder, `${CLAUDE_PLUGIN_ROOT}` expanded in
    // its arguments and environment (whose values, secrets of the session,
    // are redacted from what the model reads).
    let output = results[0]["output"].as_str().unwrap();
    assert!(
        output.contains("\"KIT_ROOT\": \"[REDACTED:session]\""),
        "{output}"
    );
    assert_eq!(
        std::fs::read_to_string(folder.join("root.txt"))
            .unwrap()
            .trim(),
        format!("{}/data", folder.display())
    );

    // `pincer doctor` starts it like a configured server.
    let (_, report, _) = pincer(&dir, &["doctor"]);
    let line = report
        .lines()
        .find(|l| l.contains("mcp kit_everything"))
        .unwrap_or_else(|| panic!("{report}"));
    assert!(
        line.starts_with("ok") && line.contains("started, "),
        "{line}"
    );
    assert!(
        report.lines().any(|l| l.starts_with("ok")
            && l.contains("plugin kit")
            && l.ends_with(" 1 MCP server")),
        "{report}"
    );

    // The same policy as configured servers: a rule denies its tool.
    dir.write_config("[tools]\n\"kit_everything__get-env\" = \"deny\"\n");
    let (out, lines) = scripted_run(&dir, &script);
    assert_eq!(out.status.code(), Some(0), "{lines:#?}");
    assert_eq!(tool_results(&lines)[0]["verdict"], "denied", "{lines:#?}");

    // A configured server of the same name wins, with a warning naming both.
    dir.write_config("[mcpServers.kit_everything]\ncommand = \"/nonexistent/server\"\n");
    let (out, lines) = scripted_run(&dir, &script);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(
            "plugin `kit`: its MCP server `kit_everything` has the name of the configured [mcpServers.kit_everything]"
        ),
        "{stderr}"
    );
    assert!(
        stderr.contains("/nonexistent/server")
            || lines
                .iter()
                .any(|l| l.to_string().contains("/nonexistent/server")),
        "{stderr}{lines:#?}"
    );

    // Disabled: its server is not started, its tool unknown.
    dir.write_config("");
    let (code, _, _) = pincer(&dir, &["plugin", "disable", "kit"]);
    assert_eq!(code, 0);
    std::fs::remove_file(folder.join("root.txt")).unwrap();
    let (_, lines) = scripted_run(&dir, &script);
    assert_eq!(tool_results(&lines)[0]["is_error"], true, "{lines:#?}");
    assert!(!folder.join("root.txt").exists());
}

#[test]
fn a_plugins_record_that_cannot_be_read_is_a_warning_and_the_run_goes_on() {
    let dir = TestDir::new();
    added(
        &dir,
        "guard",
        &[(
            "hooks/hooks.json",
            r#"{"hooks": {"PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "exit 2"}]}]}}"#,
        )],
    );
    write(
        &dir.path().join("config/pincer/plugins/plugins.toml"),
        "[[plugin]\nname = ",
    );
    let script = [
        call("shell", json!({"command": "touch made.txt"})),
        json!([{"text": "ok"}]),
    ];
    let (out, lines) = scripted_run(&dir, &script);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(
        stderr.contains("cannot read the installed plugins; going on without them"),
        "{stderr}"
    );
    assert_eq!(tool_results(&lines)[0]["verdict"], "allowed", "{lines:#?}");
    assert!(dir.workspace().join("made.txt").exists());
}

/// A plugin's custom command runs by its `PLUGIN:NAME` with its arguments
/// put in, and is gone once the plugin is disabled.
#[test]
fn a_plugins_command_runs_by_its_plugin_name_until_disabled() {
    let dir = TestDir::new();
    added(
        &dir,
        "ship-kit",
        &[(
            "commands/ship.md",
            "---\ndescription: Ships a release\n---\nShip release $1 now.\n",
        )],
    );
    let server = Loopback::model(|_, _| text_reply("shipped"));
    let run = |dir: &TestDir| {
        dir.command()
            .env("OPENAI_API_KEY", "sk-test")
            .env("OPENAI_BASE_URL", format!("{}/v1", server.url))
            .args(["run", "--output", "jsonl", "--mode", "full"])
            .args(["--provider", "openai", "--model", "m", "--cwd"])
            .arg(dir.workspace())
            .arg("/ship-kit:ship 1.4")
            .stdin(Stdio::null())
            .output()
            .unwrap()
    };
    let out = run(&dir);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let last = |index: usize| {
        server.requests()[index].body["messages"]
            .as_array()
            .and_then(|m| m.last())
            .map(message_text)
            .unwrap_or_default()
    };
    assert_eq!(last(0), "Ship release 1.4 now.");
    let (code, _, _) = pincer(&dir, &["plugin", "disable", "ship-kit"]);
    assert_eq!(code, 0);
    let out = run(&dir);
    assert_eq!(out.status.code(), Some(0));
    // Disabled: the text goes to the model as typed.
    assert_eq!(last(1), "/ship-kit:ship 1.4");
}
