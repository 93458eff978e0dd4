//! The system prompt a real provider receives: `pincer run` against a
//! loopback OpenAI-compatible server, the request's system message checked
//! part by part (workspace, environment, git, face, mode), and the
//! configuration's `system_prompt` (replaces) and `instructions` (appended).

use std::process::Command;

use crate::support::TestDir;
use crate::support::http::{Loopback, Reply};
use serde_json::{Value, json};

fn stream() -> String {
    let chunk = |delta: Value, finish: Value| {
        format!(
            "data: {}\n\n",
            json!({"id": "c1", "object": "chat.completion.chunk", "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})
        )
    };
    chunk(json!({"content": "ok"}), Value::Null)
        + &chunk(json!({}), json!("stop"))
        + "data: [DONE]\n\n"
}

/// The system message of the one request `pincer run` sends, with `config`
/// as the config file and `mode` for the session.
fn system_sent(dir: &TestDir, config: &str, mode: &str) -> String {
    let server = Loopback::start(|_, _| Reply::event_stream(stream()));
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
            dir.workspace().to_str().unwrap(),
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
