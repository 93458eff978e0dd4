//! Hooks a workspace brings, written for other agents: Claude Code's
//! `.claude/settings.json` (and `settings.local.json`) and Codex's
//! `.codex/hooks.json`, read from the project directory (the nearest
//! ancestor of the workspace holding `.git`, else the workspace). They speak
//! their agent's dialect: a hook written for Claude Code matches `Bash` and
//! reads `tool_input.file_path`, so its input is translated to that dialect
//! and its `updatedInput` back.
//!
//! Trust is given to the files as the person saw them: each file's digest
//! covers its content and the scripts inside the project its hooks name
//! (`./check.sh`, `"$CLAUDE_PROJECT_DIR"/.claude/hooks/lint.sh`), so a
//! changed file, or a changed script, waits to be trusted again.

use std::path::{Path, PathBuf};

use serde_json::{Map, Value, json};
use sha2::Digest as _;

use crate::core::hooks::{HookEvent, HookImport, Matcher, TrustedFile};

/// The files each source reads, relative to the project directory.
pub fn files(source: HookImport) -> &'static [&'static str] {
    match source {
        HookImport::Claude => &[".claude/settings.json", ".claude/settings.local.json"],
        HookImport::Codex => &[".codex/hooks.json"],
    }
}

/// One hook found in a workspace file.
#[derive(Debug, Clone)]
pub struct Found {
    pub source: HookImport,
    /// The file, relative to the project directory (a plugin's: its path).
    pub file: String,
    pub event: HookEvent,
    /// The matcher as written (`*` for none).
    pub spec: String,
    pub matcher: Matcher,
    pub command: String,
    pub timeout_secs: Option<u64>,
}

/// What a project directory's files hold: the hooks Pincer can run, and
/// what it leaves out (events it does not fire, handler types it does not
/// run), as `FILE: EVENT type` lines.
#[derive(Debug, Clone, Default)]
pub struct Imported {
    pub hooks: Vec<Found>,
    pub skipped: Vec<String>,
    pub problems: Vec<String>,
    /// Every file looked at, present or not, as it would be trusted.
    pub files: Vec<TrustedFile>,
}

impl Found {
    /// The hook as the person is shown it: `EVENT [MATCHER] COMMAND`.
    pub fn shown(&self) -> String {
        format!(
            "{} [{}] {}",
            self.event.as_str(),
            self.spec,
            super::label(&self.command)
        )
    }
}

/// Reads the hooks of `sources` under `root`, with each file's digest.
pub fn read(root: &Path, sources: &[HookImport]) -> Imported {
    let mut imported = Imported::default();
    for source in sources {
        for file in files(*source) {
            let path = root.join(file);
            let Ok(bytes) = std::fs::read(&path) else {
                imported.files.push(TrustedFile {
                    path: (*file).to_owned(),
                    digest: None,
                    hooks: Vec::new(),
                });
                continue;
            };
            let first = imported.hooks.len();
            match serde_json::from_slice::<Value>(&bytes) {
                Ok(value) => parse(*source, (*file).to_owned(), &value, &mut imported),
                Err(err) => imported.problems.push(format!("{file}: not JSON: {err}")),
            }
            let found = &imported.hooks[first..];
            let mut digest = sha2::Sha256::new();
            digest.update(&bytes);
            for script in found.iter().flat_map(|hook| scripts(root, &hook.command)) {
                digest.update(b"\0");
                digest.update(script.as_os_str().as_encoded_bytes());
                digest.update(b"\0");
                digest.update(std::fs::read(&script).unwrap_or_default());
            }
            imported.files.push(TrustedFile {
                path: (*file).to_owned(),
                digest: Some(hex::encode(digest.finalize())),
                hooks: found.iter().map(Found::shown).collect(),
            });
        }
    }
    imported
}

/// The files inside `root` a hook command names (its words that are paths
/// to a file there), which its digest covers: a hook whose script changed
/// is no longer the hook the person trusted.
pub fn scripts(root: &Path, command: &str) -> Vec<PathBuf> {
    let Ok(root) = std::fs::canonicalize(root) else {
        return Vec::new();
    };
    let mut found: Vec<PathBuf> = Vec::new();
    for word in
        command.split(|c: char| c.is_whitespace() || matches!(c, ';' | '&' | '|' | '(' | ')'))
    {
        let word = word
            .trim_matches(['"', '\''])
            .replace("\"$CLAUDE_PROJECT_DIR\"", &root.to_string_lossy())
            .replace("${CLAUDE_PROJECT_DIR}", &root.to_string_lossy())
            .replace("$CLAUDE_PROJECT_DIR", &root.to_string_lossy())
            .replace(['"', '\''], "");
        if word.is_empty() || !(word.contains('/') || root.join(&word).is_file()) {
            continue;
        }
        let Ok(path) = std::fs::canonicalize(root.join(&word)) else {
            continue;
        };
        if path.starts_with(&root) && path.is_file() && !found.contains(&path) {
            found.push(path);
        }
    }
    found
}

/// A plugin's hooks file (Claude Code's plugin `hooks/hooks.json`): its
/// hooks in Claude Code's dialect, read as the workspace files are, with
/// `file` the path shown. A file that cannot be read or is not JSON is a
/// problem. No digest: the person added the plugin (`pincer plugin add`).
pub fn read_plugin(path: &Path) -> Imported {
    let mut imported = Imported::default();
    let file = path.to_string_lossy().into_owned();
    match std::fs::read(path) {
        Ok(bytes) => match serde_json::from_slice::<Value>(&bytes) {
            Ok(value) => parse(HookImport::Claude, file, &value, &mut imported),
            Err(err) => imported.problems.push(format!("{file}: not JSON: {err}")),
        },
        Err(err) => imported
            .problems
            .push(format!("{file}: cannot read it: {err}")),
    }
    imported
}

fn parse(source: HookImport, file: String, value: &Value, imported: &mut Imported) {
    // `{"hooks": {EVENT: […]}}` (Claude Code's settings, Codex's
    // hooks.json), or the events at the top (older hooks.json).
    let Some(events) = value
        .get("hooks")
        .and_then(Value::as_object)
        .or_else(|| value.as_object())
    else {
        imported.problems.push(format!("{file}: not a JSON object"));
        return;
    };
    for (name, groups) in events {
        if name == "description" {
            continue;
        }
        let event = HookEvent::parse(name);
        for group in groups.as_array().map(Vec::as_slice).unwrap_or_default() {
            let spec = group.get("matcher").and_then(Value::as_str);
            let handlers = group.get("hooks").and_then(Value::as_array);
            for handler in handlers.map(Vec::as_slice).unwrap_or_default() {
                let kind = handler
                    .get("type")
                    .and_then(Value::as_str)
                    .unwrap_or("command");
                let command = handler.get("command").and_then(Value::as_str);
                let (Some(event), "command", Some(command)) = (event, kind, command) else {
                    imported.skipped.push(format!("{file}: {name} {kind}"));
                    continue;
                };
                let matcher = match Matcher::parse(spec.map(|s| alias(source, s)).as_deref()) {
                    Ok(matcher) => matcher,
                    Err(err) => {
                        imported
                            .problems
                            .push(format!("{file}: {name}: matcher: {err}"));
                        continue;
                    }
                };
                imported.hooks.push(Found {
                    source,
                    file: file.clone(),
                    event,
                    spec: spec.unwrap_or("*").to_owned(),
                    matcher,
                    command: command.to_owned(),
                    timeout_secs: handler
                        .get("timeout")
                        .and_then(Value::as_u64)
                        .filter(|t| *t > 0),
                });
            }
        }
    }
}

/// A matcher as written, with the older names its agent still accepts
/// made current (`Task` is now `Agent`, `MultiEdit` edits as `Edit`).
fn alias(source: HookImport, spec: &str) -> String {
    match source {
        HookImport::Claude => spec
            .split('|')
            .map(|name| match name.trim() {
                "Task" => "Agent",
                "MultiEdit" => "Edit",
                other => other,
            })
            .collect::<Vec<_>>()
            .join("|"),
        HookImport::Codex => spec.to_owned(),
    }
}

/// A Pincer tool's name in a source's dialect.
pub fn tool_name(source: HookImport, tool: &str) -> &str {
    match (source, tool) {
        (_, "shell") => "Bash",
        (HookImport::Codex, "write_file" | "edit_file") => "apply_patch",
        (HookImport::Codex, other) => other,
        (HookImport::Claude, "read_file") => "Read",
        (HookImport::Claude, "write_file") => "Write",
        (HookImport::Claude, "edit_file") => "Edit",
        (HookImport::Claude, "glob") => "Glob",
        (HookImport::Claude, "grep") => "Grep",
        (HookImport::Claude, "list_dir") => "LS",
        (HookImport::Claude, "todo") => "TodoWrite",
        (HookImport::Claude, "web_fetch") => "WebFetch",
        (HookImport::Claude, "web_search") => "WebSearch",
        (HookImport::Claude, "delegate") => "Agent",
        (HookImport::Claude, other) => other,
    }
}

/// A Pincer tool's input in Claude Code's dialect: `file_path` (absolute)
/// for `path`, an edit as `old_string` / `new_string`. Other fields are
/// kept; other tools' input is passed as it is.
pub fn claude_input(tool: &str, input: &Value, cwd: &Path) -> Value {
    let Some(object) = input.as_object() else {
        return input.clone();
    };
    let mut out: Map<String, Value> = object.clone();
    let absolute = |path: &str| cwd.join(path).to_string_lossy().into_owned();
    if matches!(tool, "read_file" | "write_file" | "edit_file")
        && let Some(path) = out.remove("path")
    {
        let path = path.as_str().map(absolute).map_or(path, Value::from);
        out.insert("file_path".into(), path);
    }
    if tool == "edit_file"
        && let Some(Value::Array(edits)) = out.remove("edits")
    {
        let translate = |edit: &Value| {
            json!({
                "old_string": edit.get("old_text").cloned().unwrap_or(Value::Null),
                "new_string": edit.get("new_text").cloned().unwrap_or(Value::Null),
                "replace_all": edit.get("replace_all").cloned().unwrap_or(json!(false)),
            })
        };
        if let [only] = edits.as_slice() {
            if let Value::Object(fields) = translate(only) {
                out.extend(fields);
            }
        } else {
            out.insert(
                "edits".into(),
                Value::Array(edits.iter().map(translate).collect()),
            );
        }
    }
    Value::Object(out)
}

/// A Claude Code `updatedInput` as a Pincer tool's input (the reverse of
/// [`claude_input`]).
pub fn from_claude_input(tool: &str, input: &Value) -> Value {
    let Some(object) = input.as_object() else {
        return input.clone();
    };
    let mut out = object.clone();
    if let Some(path) = out.remove("file_path") {
        out.insert("path".into(), path);
    }
    if tool == "edit_file" {
        let back = |edit: &Map<String, Value>| {
            let mut pincer = json!({
                "old_text": edit.get("old_string").cloned().unwrap_or(Value::Null),
                "new_text": edit.get("new_string").cloned().unwrap_or(Value::Null),
            });
            if edit.get("replace_all").and_then(Value::as_bool) == Some(true) {
                pincer["replace_all"] = json!(true);
            }
            pincer
        };
        if out.contains_key("old_string") {
            let edit = back(&out);
            out.remove("old_string");
            out.remove("new_string");
            out.remove("replace_all");
            out.insert("edits".into(), json!([edit]));
        } else if let Some(Value::Array(edits)) = out.remove("edits") {
            let edits: Vec<Value> = edits
                .iter()
                .filter_map(Value::as_object)
                .map(back)
                .collect();
            out.insert("edits".into(), Value::Array(edits));
        }
    }
    Value::Object(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn claude_settings_are_read_with_their_names_and_the_rest_named() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join(".claude")).unwrap();
        std::fs::write(
            dir.path().join(".claude/settings.json"),
            json!({
                "permissions": {"allow": ["Bash(ls)"]},
                "hooks": {
                    "PreToolUse": [
                        {"matcher": "Bash", "hooks": [{"type": "command", "command": "./check.sh", "timeout": 5}]},
                        {"matcher": "Edit|MultiEdit", "hooks": [{"type": "http", "url": "http://x"}]}
                    ],
                    "PermissionRequest": [{"hooks": [{"type": "command", "command": "true"}]}]
                }
            })
            .to_string(),
        )
        .unwrap();
        let found = read(dir.path(), &[HookImport::Claude, HookImport::Codex]);
        assert_eq!(found.hooks.len(), 1);
        let hook = &found.hooks[0];
        assert_eq!(
            (hook.event, hook.command.as_str(), hook.timeout_secs),
            (HookEvent::PreToolUse, "./check.sh", Some(5))
        );
        assert!(hook.matcher.accepts(Some("Bash")));
        assert!(!hook.matcher.accepts(Some("shell")));
        assert_eq!(
            found.skipped,
            [
                ".claude/settings.json: PreToolUse http",
                ".claude/settings.json: PermissionRequest command"
            ]
        );
        let digest = |imported: &Imported, file: &str| {
            imported
                .files
                .iter()
                .find(|f| f.path == file)
                .unwrap()
                .digest
                .clone()
        };
        assert_eq!(digest(&found, ".claude/settings.local.json"), None);
        assert_eq!(
            found.files[0].hooks,
            ["PreToolUse [Bash] ./check.sh".to_owned()]
        );
        // A file appearing, and the script a hook names changing, change
        // the digests.
        std::fs::write(dir.path().join(".claude/settings.local.json"), "{}").unwrap();
        let again = read(dir.path(), &[HookImport::Claude]);
        assert!(digest(&again, ".claude/settings.local.json").is_some());
        assert_eq!(
            digest(&again, ".claude/settings.json"),
            digest(&found, ".claude/settings.json")
        );
        std::fs::write(dir.path().join("check.sh"), "exit 0").unwrap();
        let with_script = read(dir.path(), &[HookImport::Claude]);
        std::fs::write(dir.path().join("check.sh"), "cp ~/.ssh/id_rsa /tmp").unwrap();
        let script_changed = read(dir.path(), &[HookImport::Claude]);
        assert_ne!(
            digest(&with_script, ".claude/settings.json"),
            digest(&script_changed, ".claude/settings.json")
        );
    }

    #[test]
    fn inputs_are_translated_to_claudes_dialect_and_back() {
        let cwd = Path::new("/w");
        let edit = json!({"path": "src/a.rs", "edits": [{"old_text": "a", "new_text": "b"}]});
        let claude = claude_input("edit_file", &edit, cwd);
        assert_eq!(
            claude,
            json!({"file_path": "/w/src/a.rs", "old_string": "a", "new_string": "b", "replace_all": false})
        );
        assert_eq!(
            from_claude_input("edit_file", &claude),
            json!({"path": "/w/src/a.rs", "edits": [{"old_text": "a", "new_text": "b"}]})
        );
        assert_eq!(
            claude_input("shell", &json!({"command": "ls"}), cwd),
            json!({"command": "ls"})
        );
        assert_eq!(tool_name(HookImport::Claude, "write_file"), "Write");
        assert_eq!(tool_name(HookImport::Codex, "write_file"), "apply_patch");
        assert_eq!(tool_name(HookImport::Codex, "shell"), "Bash");
        assert_eq!(tool_name(HookImport::Claude, "memory_save"), "memory_save");
    }
}
