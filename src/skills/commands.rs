//! Custom commands on disk (`docs/skills.md`): Claude Code's
//! `.claude/commands/NAME.md` and Pincer's `.pincer/commands/NAME.md`, in
//! the workspace and each directory above it up to the repository root
//! (project scope, offered once the project is trusted), and
//! `~/.claude/commands/` and the config directory's `commands/` (user
//! scope). A command is a Markdown file; its name is the file's name
//! without `.md`, a subfolder only groups (`frontend/component.md` is
//! `/component`). Found with the skills' bounds (at most
//! [`MAX_DEPTH`] deep, [`MAX_DIRS`]
//! folders per root, hidden folders and `node_modules` skipped) and cached
//! with them.

use std::path::{Path, PathBuf};

use super::discover::{MAX_DEPTH, MAX_DIRS, Scan, Settings, Stamp};
use super::parse::parse_command;
use crate::core::skills::{Command, Scope};

/// The project-scope command folders, in each directory from the
/// workspace up.
pub const PROJECT_DIRS: [&str; 2] = [".pincer/commands", ".claude/commands"];

/// The largest command file read; a larger one is skipped.
pub const MAX_BYTES: u64 = 256 * 1024;

/// The longest description taken from a body's first line.
const DESCRIPTION_CHARS: usize = 80;

/// The project-scope command roots of `workspace`, nearest first.
pub fn project_roots(workspace: &Path) -> Vec<PathBuf> {
    let top = crate::core::hooks::project_dir(workspace);
    let mut roots = Vec::new();
    for dir in workspace.ancestors() {
        roots.extend(PROJECT_DIRS.iter().map(|sub| dir.join(sub)));
        if dir == top {
            break;
        }
    }
    roots
}

/// The user-scope command roots: `~/.claude/commands/`, then the config
/// directory's `commands/`.
pub fn user_roots(settings: &Settings) -> Vec<PathBuf> {
    let mut roots = Vec::new();
    if let Some(home) = &settings.home {
        roots.push(home.join(".claude/commands"));
    }
    if let Some(dir) = &settings.config_dir {
        let root = dir.join("commands");
        if !roots.contains(&root) {
            roots.push(root);
        }
    }
    roots
}

impl Scan {
    /// The commands under `root`.
    pub(super) fn commands(&mut self, root: &Path, scope: &Scope) {
        self.stamps.push(Stamp::of(root, false));
        if !root.is_dir() {
            return;
        }
        self.dirs = 0;
        self.over = false;
        self.command_dir(root, 1, scope);
    }

    fn command_dir(&mut self, dir: &Path, depth: usize, scope: &Scope) {
        let Ok(read) = std::fs::read_dir(dir) else {
            return;
        };
        let mut files = Vec::new();
        let mut folders = Vec::new();
        for entry in read.filter_map(Result::ok) {
            let name = entry.file_name();
            let name = name.to_string_lossy();
            if name.starts_with('.') || name == "node_modules" {
                continue;
            }
            let path = entry.path();
            if path.is_dir() {
                folders.push(path);
            } else if name.ends_with(".md") && path.is_file() {
                files.push(path);
            }
        }
        files.sort();
        folders.sort();
        for file in files {
            self.stamps.push(Stamp::of(&file, true));
            self.command(&file, scope);
        }
        if depth >= MAX_DEPTH {
            return;
        }
        for folder in folders {
            if self.over {
                return;
            }
            self.dirs += 1;
            if self.dirs > MAX_DIRS {
                self.over = true;
                self.note(
                    dir,
                    scope,
                    false,
                    format!("stopped looking for commands after {MAX_DIRS} folders"),
                );
                return;
            }
            self.stamps.push(Stamp::of(&folder, false));
            self.command_dir(&folder, depth + 1, scope);
        }
    }

    /// Reads the command of `file` leniently.
    fn command(&mut self, file: &Path, scope: &Scope) {
        let stem = file
            .file_stem()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        match read(file, &stem, scope) {
            Ok((command, notes)) => {
                for message in notes {
                    self.note(file, scope, false, message);
                }
                self.found.commands.push(command);
            }
            Err(message) => self.note(file, scope, true, message),
        }
    }
}

/// The command in `file` named after `stem`, with warnings; or why it is
/// skipped.
fn read(file: &Path, stem: &str, scope: &Scope) -> Result<(Command, Vec<String>), String> {
    let size = std::fs::metadata(file).map_or(0, |m| m.len());
    if size > MAX_BYTES {
        return Err(format!(
            "command file is larger than {} KiB",
            MAX_BYTES / 1024
        ));
    }
    let text = std::fs::read_to_string(file).map_err(|err| format!("cannot read it: {err}"))?;
    let parsed = parse_command(&text).map_err(|err| err.to_string())?;
    if stem.is_empty() || stem.contains(char::is_whitespace) {
        return Err("a command's file name must be one word".to_owned());
    }
    let mut notes = Vec::new();
    if parsed.repaired {
        notes.push(
            "frontmatter is not valid YAML: read with values holding `: ` taken as text".into(),
        );
    }
    let description = parsed
        .description
        .unwrap_or_else(|| first_line(&parsed.body));
    let name = match scope {
        Scope::Plugin { plugin } => format!("{plugin}:{stem}"),
        Scope::Project | Scope::User => stem.to_owned(),
    };
    Ok((
        Command {
            name,
            description,
            argument_hint: parsed.argument_hint,
            allowed_tools: parsed.allowed_tools,
            model: parsed.model,
            body: parsed.body,
            location: file.to_path_buf(),
            scope: scope.clone(),
        },
        notes,
    ))
}

/// A body's first non-empty line, a heading's `#` marks dropped, cut to
/// [`DESCRIPTION_CHARS`] with an ellipsis.
fn first_line(body: &str) -> String {
    let line = body
        .lines()
        .map(|line| line.trim().trim_start_matches('#').trim())
        .find(|line| !line.is_empty())
        .unwrap_or_default();
    if line.chars().count() <= DESCRIPTION_CHARS {
        return line.to_owned();
    }
    let cut: String = line.chars().take(DESCRIPTION_CHARS - 1).collect();
    format!("{}…", cut.trim_end())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::skills::{InvocableKind, Skills, invocable};
    use crate::skills::Discovery;

    fn write(path: &Path, text: &str) {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }

    fn settings(home: &Path) -> Settings {
        Settings {
            home: Some(home.to_path_buf()),
            config_dir: Some(home.join(".config/pincer")),
            ..Settings::default()
        }
    }

    #[test]
    fn commands_are_found_in_every_scope_grouped_trusted_and_shadowed() {
        let tmp = tempfile::tempdir().unwrap();
        let home = tmp.path().join("home");
        let repo = tmp.path().join("repo");
        let ws = repo.join("ws");
        std::fs::create_dir_all(repo.join(".git")).unwrap();
        write(
            &ws.join(".claude/commands/frontend/component.md"),
            "---\ndescription: Makes a component\nargument-hint: <name>\n---\nMake $1.",
        );
        write(
            &repo.join(".pincer/commands/review.md"),
            "# Review the change\n\nLook at $ARGUMENTS.",
        );
        write(&ws.join(".claude/commands/.hidden/x.md"), "hidden");
        write(&ws.join(".claude/commands/notes.txt"), "not a command");
        write(&home.join(".claude/commands/review.md"), "User review.");
        write(
            &home.join(".config/pincer/commands/deploy.md"),
            "---\nallowed-tools: Bash(make:*)\nmodel: fast\n---\nDeploy.",
        );
        write(&home.join(".claude/commands/help.md"), "Shadowed by /help.");
        write(
            &home.join(".claude/commands/broken.md"),
            "---\nx: [a\n---\n",
        );
        write(
            &home.join(".agents/skills/deploy/SKILL.md"),
            "---\nname: deploy\ndescription: Deploys.\ndisable-model-invocation: true\n---\nbody",
        );
        let plugin = tmp.path().join("plugin");
        write(&plugin.join("commands/ship.md"), "Ship it.");
        write(
            &plugin.join("skills/lint/SKILL.md"),
            "---\nname: lint\ndescription: Lints.\n---\nbody",
        );
        let discovery = Discovery::new(Settings {
            plugins: vec![("tools".into(), plugin.join("skills"))],
            plugin_commands: vec![("tools".into(), plugin.join("commands"))],
            ..settings(&home)
        });
        let trusted = discovery.for_workspace(&ws, true);
        let names: Vec<&str> = trusted.commands.keys().map(String::as_str).collect();
        assert_eq!(
            names,
            ["component", "deploy", "help", "review", "tools:ship"]
        );
        let component = trusted.command("component").unwrap();
        assert_eq!(component.description, "Makes a component");
        assert_eq!(component.argument_hint.as_deref(), Some("<name>"));
        assert_eq!(component.scope, Scope::Project);
        let review = trusted.command("review").unwrap();
        assert_eq!(review.description, "Review the change");
        assert_eq!(review.scope, Scope::Project);
        assert_eq!(review.body, "# Review the change\n\nLook at $ARGUMENTS.");
        let deploy = trusted.command("deploy").unwrap();
        assert_eq!(deploy.allowed_tools, ["Bash(make:*)"]);
        assert_eq!(deploy.model.as_deref(), Some("fast"));
        assert!(trusted.get("tools:lint").is_some());
        let messages: Vec<String> = trusted
            .diagnostics
            .iter()
            .map(|d| format!("{} {}", d.skipped, d.message))
            .collect();
        for expected in [
            "true command `review` is shadowed by",
            "true command `help` is shadowed by the built-in command /help",
            "true command `deploy` is shadowed by the skill at",
            "true invalid YAML",
        ] {
            assert!(
                messages.iter().any(|m| m.starts_with(expected)),
                "{expected}: {messages:?}"
            );
        }
        // What a person can type: the skills (a person's own too) and the
        // commands, not the built-ins; the skill over the command.
        let typed: Vec<(String, InvocableKind, Option<String>)> = invocable(&trusted)
            .into_iter()
            .map(|i| (i.name, i.kind, i.hint))
            .collect();
        assert_eq!(
            typed,
            [
                (
                    "component".to_owned(),
                    InvocableKind::Command,
                    Some("<name>".to_owned())
                ),
                ("deploy".to_owned(), InvocableKind::Skill, None),
                ("review".to_owned(), InvocableKind::Command, None),
                ("tools:lint".to_owned(), InvocableKind::Skill, None),
                ("tools:ship".to_owned(), InvocableKind::Command, None),
            ]
        );
        // Untrusted: the project's are left out, the user's review shows.
        let untrusted = discovery.for_workspace(&ws, false);
        assert!(untrusted.command("component").is_none());
        assert_eq!(untrusted.command("review").unwrap().scope, Scope::User);
        assert_eq!(
            untrusted.command("review").unwrap().description,
            "User review."
        );
        // An edit is seen at the next ask.
        write(&home.join(".claude/commands/review.md"), "Edited review.");
        let again = discovery.for_workspace(&ws, false);
        assert_eq!(again.command("review").unwrap().body, "Edited review.");
    }

    #[test]
    fn a_long_first_line_is_shortened_and_a_huge_file_skipped() {
        assert_eq!(first_line("\n\n## Title  \nmore"), "Title");
        let long = "word ".repeat(40);
        let short = first_line(&long);
        assert!(short.ends_with('…'));
        assert_eq!(short.chars().count(), DESCRIPTION_CHARS);
        let tmp = tempfile::tempdir().unwrap();
        let file = tmp.path().join("big.md");
        std::fs::write(&file, "x".repeat(MAX_BYTES as usize + 1)).unwrap();
        let err = read(&file, "big", &Scope::User).unwrap_err();
        assert!(err.contains("larger than 256 KiB"), "{err}");
    }
}
