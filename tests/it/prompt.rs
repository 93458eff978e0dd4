//! The system prompt a real provider receives: `pincer run` against a
//! loopback OpenAI-compatible server, the request's system message checked
//! part by part (workspace, environment, git, face, mode), and the
//! configuration's `system_prompt` (replaces) and `instructions` (appended).

use std::process::Command;

use crate::support::TestDir;
use crate::support::http::openai::{chunk, text_stream};
use crate::support::http::{Loopback, Reply};
use serde_json::{Value, json};

/// The system message of the one request `pincer run` sends, with `config`
/// as the config file and `mode` for the session.
fn system_sent(dir: &TestDir, config: &str, mode: &str) -> String {
    system_sent_in(dir, config, mode, &dir.workspace())
}

/// As [`system_sent`], with the session's workspace at `cwd`.
fn system_sent_in(dir: &TestDir, config: &str, mode: &str, cwd: &std::path::Path) -> String {
    let server = Loopback::model(|_, _| Reply::event_stream(text_stream("ok")));
    let config_dir = dir.path().join("config").join("pincer");
    std::fs::create_dir_all(&config_dir).unwrap();
    std::fs::write(config_dir.join("config.toml"), config).unwrap();
    let out = dir
        .command()
        .env("OPENAI_API_KEY", "sk-test")
        .env("OPENAI_BASE_URL", format!("{}/v1", server.url))
        .env("SHELL", "/bin/zsh")
        .args([
            "run",
            "--provider",
            "openai",
            "--model",
            "m",
            "--mode",
            mode,
            "--cwd",
            cwd.to_str().unwrap(),
            "hi",
        ])
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let requests = server.requests();
    assert_eq!(requests.len(), 1);
    let messages = requests[0].body["messages"].as_array().unwrap().clone();
    assert_eq!(messages[0]["role"], "system", "{messages:#?}");
    assert_eq!(messages[1]["role"], "user");
    messages[0]["content"].as_str().unwrap().to_owned()
}

#[test]
fn the_model_is_told_where_it_works_how_and_through_which_face() {
    let dir = TestDir::new();
    let workspace = dir.workspace();
    let system = system_sent(&dir, "", "read_only");
    assert!(system.starts_with("You are Pincer"), "{system}");
    assert!(
        system.contains(&format!("- Workspace: {}\n", workspace.display())),
        "{system}"
    );
    assert!(system.contains(&format!("- Operating system: {}\n", std::env::consts::OS)));
    assert!(system.contains("- Shell: /bin/zsh\n"), "{system}");
    let date = regex::Regex::new(r"- Date: \d{4}-\d{2}-\d{2} \(.+\)\n").unwrap();
    assert!(date.is_match(&system), "{system}");
    assert!(system.contains("- Git: not a repository\n"), "{system}");
    assert!(
        system.contains("In a headless run (`pincer run`)"),
        "{system}"
    );
    assert!(
        system.contains("Read only: you may read and search"),
        "{system}"
    );
    assert!(!system.contains("# Instructions"));
}

#[test]
fn a_git_workspace_shows_its_branch_and_changes() {
    let dir = TestDir::new();
    let workspace = dir.workspace();
    let git = |args: &[&str]| {
        let done = Command::new("git")
            .arg("-C")
            .arg(&workspace)
            .args(args)
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .output();
        match done {
            Ok(out) => out.status.success(),
            Err(_) => false,
        }
    };
    if !git(&["init", "-q", "-b", "feature-x"]) {
        eprintln!("skipped: git is not installed");
        return;
    }
    let system = system_sent(&dir, "", "supervised");
    assert!(
        system.contains("- Git: branch feature-x, clean tree\n"),
        "{system}"
    );
    std::fs::write(workspace.join("notes.txt"), "draft").unwrap();
    let system = system_sent(&dir, "", "full");
    assert!(
        system.contains("- Git: branch feature-x, uncommitted changes in the tree\n"),
        "{system}"
    );
    assert!(system.contains("Full autonomy"), "{system}");
}

#[test]
fn the_config_replaces_the_prompt_and_appends_instructions() {
    let dir = TestDir::new();
    let system = system_sent(
        &dir,
        "instructions = \"Run the tests after every change.\"\n",
        "supervised",
    );
    assert!(system.starts_with("You are Pincer"), "{system}");
    assert!(
        system.ends_with("\n\n# Instructions\n\nRun the tests after every change."),
        "{system}"
    );
    let dir = TestDir::new();
    let system = system_sent(
        &dir,
        "system_prompt = \"You only answer in haiku.\"\ninstructions = \"Mention the moon.\"\n",
        "supervised",
    );
    assert_eq!(
        system,
        "You only answer in haiku.\n\n# Instructions\n\nMention the moon."
    );
    // `config show` names both and where they came from.
    let out = dir.command().args(["config", "show"]).output().unwrap();
    let shown = String::from_utf8_lossy(&out.stdout);
    let line = |key: &str| {
        shown
            .lines()
            .find(|l| l.starts_with(key))
            .unwrap_or_else(|| panic!("no {key} in:\n{shown}"))
            .to_owned()
    };
    assert!(line("system_prompt").contains("haiku"), "{shown}");
    assert!(line("instructions").contains("Mention the moon"), "{shown}");
    assert!(line("instructions").contains("config.toml"), "{shown}");
}

/// The project-instruction files between `# Project instructions` and the
/// next top-level heading, as `(shown name, text)`.
fn project_files(system: &str) -> Vec<(String, String)> {
    let Some(start) = system.find("# Project instructions\n") else {
        return Vec::new();
    };
    let rest = &system[start..];
    let end = rest.find("\n# Instructions").unwrap_or(rest.len());
    rest[..end]
        .split("\n## ")
        .skip(1)
        .map(|part| {
            let (name, text) = part.split_once("\n\n").unwrap_or((part, ""));
            (name.to_owned(), text.trim().to_owned())
        })
        .collect()
}

#[test]
fn agents_md_from_the_repository_root_down_to_the_workspace_and_the_persons_own() {
    let dir = TestDir::new();
    let repo = dir.path().join("repo");
    let workspace = repo.join("service");
    std::fs::create_dir_all(repo.join(".git")).unwrap();
    std::fs::create_dir_all(&workspace).unwrap();
    std::fs::write(repo.join("AGENTS.md"), "Repository rule.").unwrap();
    std::fs::write(workspace.join("AGENTS.md"), "Service rule.").unwrap();
    // A directory with no AGENTS.md offers its fallback instead.
    std::fs::create_dir_all(workspace.join("deep")).unwrap();
    let deep = workspace.join("deep");
    std::fs::write(deep.join("CLAUDE.md"), "Deep fallback.").unwrap();
    std::fs::create_dir_all(dir.path().join("config").join("pincer")).unwrap();
    std::fs::write(
        dir.path().join("config").join("pincer").join("AGENTS.md"),
        "The person's own rule.",
    )
    .unwrap();
    let repo = repo.canonicalize().unwrap();
    let deep = deep.canonicalize().unwrap();
    // The repository root is outside the workspace: read only when the
    // boundary takes it in.
    let system = system_sent_in(&dir, "", "supervised", &deep);
    let files = project_files(&system);
    let texts: Vec<&str> = files.iter().map(|(_, t)| t.as_str()).collect();
    assert_eq!(
        texts,
        ["The person's own rule.", "Deep fallback."],
        "{system}"
    );
    let config = format!("[paths]\nextra_roots = [\"{}\"]\n", repo.display());
    let system = system_sent_in(&dir, &config, "supervised", &deep);
    let files = project_files(&system);
    let texts: Vec<&str> = files.iter().map(|(_, t)| t.as_str()).collect();
    assert_eq!(
        texts,
        [
            "The person's own rule.",
            "Repository rule.",
            "Service rule.",
            "Deep fallback."
        ],
        "{system}"
    );
    assert_eq!(files[3].0, "CLAUDE.md");
    assert_eq!(files[1].0, repo.join("AGENTS.md").display().to_string());
    // Fallbacks are configurable: none.
    let config = format!("instruction_fallbacks = []\n{config}");
    let system = system_sent_in(&dir, &config, "supervised", &deep);
    assert!(!system.contains("Deep fallback."), "{system}");
}

#[test]
fn a_long_file_is_cut_visibly_and_a_forbidden_one_is_never_read() {
    let dir = TestDir::new();
    let workspace = dir.workspace();
    std::fs::write(workspace.join("AGENTS.md"), "x".repeat(40_000)).unwrap();
    let system = system_sent(&dir, "", "supervised");
    assert!(
        system.contains("[truncated: the first 32768 of 40000 bytes; read the file for the rest]"),
        "{}",
        &system[..300]
    );
    // An AGENTS.md that is a link into a forbidden directory.
    let secret = dir.path().join("secret");
    std::fs::create_dir_all(&secret).unwrap();
    std::fs::write(secret.join("notes.md"), "TOP SECRET").unwrap();
    std::fs::remove_file(workspace.join("AGENTS.md")).unwrap();
    std::os::unix::fs::symlink(secret.join("notes.md"), workspace.join("AGENTS.md")).unwrap();
    let config = format!(
        "[paths]\nextra_roots = [\"{}\"]\nforbidden = [\"{}\"]\n",
        dir.path().display(),
        secret.canonicalize().unwrap().display()
    );
    let system = system_sent(&dir, &config, "supervised");
    assert!(!system.contains("TOP SECRET"), "{system}");
    assert!(!system.contains("# Project instructions"), "{system}");
}

#[test]
fn an_agents_md_below_the_workspace_joins_once_the_run_reads_there() {
    let dir = TestDir::new();
    let workspace = dir.workspace();
    std::fs::create_dir_all(workspace.join("sub")).unwrap();
    std::fs::write(workspace.join("sub").join("x.txt"), "hello").unwrap();
    std::fs::write(workspace.join("sub").join("AGENTS.md"), "Sub rule.").unwrap();
    std::fs::create_dir_all(workspace.join("other")).unwrap();
    std::fs::write(workspace.join("other").join("AGENTS.md"), "Other rule.").unwrap();
    let call = chunk(
        json!({"tool_calls": [{"index": 0, "id": "call_1", "type": "function", "function": {"name": "read_file", "arguments": "{\"path\":\"sub/x.txt\"}"}}]}),
        Value::Null,
    ) + &chunk(json!({}), json!("tool_calls"))
        + "data: [DONE]\n\n";
    // The workspace's own file changes while the first turn is answered:
    // the second turn has the new text.
    std::fs::write(workspace.join("AGENTS.md"), "Before.").unwrap();
    let top = workspace.join("AGENTS.md");
    let server = Loopback::model(move |_, n| {
        if n == 0 {
            std::fs::write(&top, "After.").unwrap();
        }
        Reply::event_stream(if n == 0 {
            call.clone()
        } else {
            text_stream("ok")
        })
    });
    let out = dir
        .command()
        .env("OPENAI_API_KEY", "sk-test")
        .env("OPENAI_BASE_URL", format!("{}/v1", server.url))
        .args([
            "run",
            "--provider",
            "openai",
            "--model",
            "m",
            "--cwd",
            workspace.to_str().unwrap(),
            "read sub/x.txt",
        ])
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let requests = server.requests();
    assert_eq!(requests.len(), 2);
    let system = |n: usize| {
        requests[n].body["messages"][0]["content"]
            .as_str()
            .unwrap()
            .to_owned()
    };
    assert!(!system(0).contains("Sub rule."), "{}", system(0));
    assert_eq!(
        project_files(&system(0)),
        [("AGENTS.md".to_owned(), "Before.".to_owned())]
    );
    let second = system(1);
    let files = project_files(&second);
    assert_eq!(files.len(), 2, "{second}");
    assert_eq!(files[0], ("AGENTS.md".to_owned(), "After.".to_owned()));
    assert_eq!(
        files[1].0,
        "sub/AGENTS.md (applies to files under sub/: this run's tools reached them)"
    );
    assert_eq!(files[1].1, "Sub rule.");
    assert!(!second.contains("Other rule."));
}

#[test]
fn context_show_prints_what_the_next_turn_would_send() {
    let dir = TestDir::new();
    let workspace = dir.workspace();
    std::fs::write(workspace.join("AGENTS.md"), "Shown rule.").unwrap();
    let script = dir.script("s.jsonl", &[json!([{"text": "first answer"}])]);
    let out = dir
        .command()
        .args([
            "run",
            "--script",
            script.to_str().unwrap(),
            "--cwd",
            workspace.to_str().unwrap(),
            "the first question",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    // Without --session: the newest session of the current directory.
    let out = dir
        .command()
        .current_dir(&workspace)
        .args(["context", "show", "--json"])
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let view: Value = serde_json::from_slice(&out.stdout).unwrap();
    let system = view["system"].as_str().unwrap();
    assert!(system.starts_with("You are Pincer"), "{system}");
    assert!(system.contains("Shown rule."), "{system}");
    assert!(system.contains("In a headless run"), "{system}");
    let tools: Vec<&str> = view["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert!(
        tools.contains(&"read_file") && tools.contains(&"shell"),
        "{tools:?}"
    );
    let messages = view["messages"].as_array().unwrap();
    assert_eq!(messages.len(), 2, "{messages:#?}");
    assert_eq!(messages[0]["role"], "user");
    assert_eq!(messages[1]["text"], "first answer");
    let counts: Vec<u64> = view["message_tokens"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n.as_u64().unwrap())
        .collect();
    assert_eq!(counts.len(), 2);
    let total = view["system_tokens"].as_u64().unwrap()
        + view["tool_tokens"].as_u64().unwrap()
        + counts.iter().sum::<u64>();
    assert_eq!(view["total_tokens"].as_u64().unwrap(), total);
    assert!(view["system_tokens"].as_u64().unwrap() > 100);
    // Text: the parts with their counts, then each part.
    let out = dir
        .command()
        .current_dir(&workspace)
        .args(["context", "show"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("system prompt"), "{text}");
    assert!(text.contains("--- messages ---"), "{text}");
    assert!(text.contains("> the first question"), "{text}");
    // A directory without sessions says how to pick one.
    let out = dir
        .command()
        .current_dir(dir.path())
        .args(["context", "show"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("pass --session ID"));
}

#[test]
fn a_session_brings_its_own_prompt_through_every_face() {
    // `pincer run` flags: the session's prompt replaces, its instructions
    // follow the configured ones.
    let dir = TestDir::new();
    let server = Loopback::model(|_, _| Reply::event_stream(text_stream("ok")));
    let config_dir = dir.path().join("config").join("pincer");
    std::fs::create_dir_all(&config_dir).unwrap();
    std::fs::write(
        config_dir.join("config.toml"),
        "instructions = \"Configured.\"\n",
    )
    .unwrap();
    let out = dir
        .command()
        .env("OPENAI_API_KEY", "sk-test")
        .env("OPENAI_BASE_URL", format!("{}/v1", server.url))
        .args(["run", "--provider", "openai", "--model", "m"])
        .args([
            "--system-prompt",
            "You review pull requests.",
            "--instructions",
            "Be terse.",
        ])
        .arg("--cwd")
        .arg(dir.workspace())
        .arg("hi")
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let system = server.requests()[0].body["messages"][0]["content"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(system.starts_with("You review pull requests."), "{system}");
    assert!(!system.contains("You are Pincer"), "{system}");
    assert!(
        system.ends_with("# Instructions\n\nConfigured.\n\nBe terse."),
        "{system}"
    );
    // Continuing the session keeps them (no flags needed, none allowed).
    let session = dir
        .command()
        .args(["sessions", "list", "--json"])
        .output()
        .unwrap();
    let session: Value = serde_json::from_slice(
        String::from_utf8_lossy(&session.stdout)
            .lines()
            .next()
            .unwrap()
            .as_bytes(),
    )
    .unwrap();
    let id = session["session_id"].as_str().unwrap();
    let out = dir
        .command()
        .env("OPENAI_API_KEY", "sk-test")
        .env("OPENAI_BASE_URL", format!("{}/v1", server.url))
        .args(["run", "--session", id, "again"])
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let again = server.requests()[1].body["messages"][0]["content"]
        .as_str()
        .unwrap()
        .to_owned();
    assert_eq!(again, system);

    // ACP: `_meta.pincer` of session/new.
    let mut acp = crate::support::AcpProcess::spawn(
        &dir,
        &[
            "--script",
            dir.script("s.jsonl", &[json!([{"text": "ok"}])])
                .to_str()
                .unwrap(),
        ],
    );
    acp.initialize();
    let created = acp.call(
        "session/new",
        json!({"cwd": dir.workspace(), "mcpServers": [],
               "_meta": {"pincer": {"instructions": "Answer in haiku."}}}),
    );
    let sid = created["sessionId"].as_str().unwrap();
    let context = acp.call("_pincer/context", json!({"sessionId": sid}));
    let system = context["system"].as_str().unwrap();
    assert!(system.starts_with("You are Pincer"), "{system}");
    assert!(
        system.ends_with("Configured.\n\nAnswer in haiku."),
        "{system}"
    );
    let (_, refused) = acp.request(
        "session/new",
        json!({"cwd": dir.workspace(), "mcpServers": [], "_meta": {"pincer": {"systemPrompt": 7}}}),
    );
    assert_eq!(refused["error"]["code"], -32602, "{refused}");
    assert!(
        refused["error"]["message"]
            .as_str()
            .unwrap()
            .contains("_meta.pincer.systemPrompt must be a string"),
        "{refused}"
    );
    assert!(acp.finish().success());
}
