//! `pincer plugin` (`docs/plugins.md`): a Claude Code plugin
//! folder and the real Anthropic marketplace file installed into the
//! configuration directory, listed, disabled, enabled and removed; bad input
//! refused naming the problem, nothing half-installed.

use std::path::Path;

use crate::support::{TestDir, agent_skills};
use serde_json::Value;

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
        "added review-kit 0.3.0: 1 skills folder, 1 commands folder, hooks, MCP servers\n"
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
    assert_eq!(out, "added example-skills: 6 skills folders\n");
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
