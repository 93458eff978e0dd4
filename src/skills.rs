//! Agent Skills on disk (`docs/skills.md`): `parse` reads a `SKILL.md`
//! leniently, `validate` checks one strictly as the reference validator
//! does, `discover` finds them and implements the core's `Skills` port with
//! its cache, `commands` finds custom commands beside them. Here: what
//! `pincer skills list|show` and `GET /v1/skills` answer, the same for the
//! command line and HTTP.

pub mod commands;
pub mod discover;
pub mod parse;
pub mod validate;

use std::path::{Path, PathBuf};

pub use discover::{Discovery, Settings};

use crate::core::skills::{Command, Diagnostic, Scope, Skill, Skills};
use crate::views::{SkillCommand, SkillDetails, SkillDiagnostic, SkillList, SkillScope, SkillView};

/// The skills of a workspace as the person is shown them: those a session
/// is offered, and the project's held back until it is trusted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Listing {
    pub workspace: PathBuf,
    /// The project directory trust is given to.
    pub project: PathBuf,
    pub trusted: bool,
    pub entries: Vec<Entry>,
    /// The custom commands, offered or held back like the skills.
    pub commands: Vec<CommandEntry>,
    pub diagnostics: Vec<Diagnostic>,
}

/// One custom command listed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommandEntry {
    pub command: Command,
    /// False for a project's command while the project is not trusted.
    pub offered: bool,
}

/// One skill listed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    pub skill: Skill,
    /// False for a project skill of an untrusted project: listed, never
    /// offered to the model.
    pub offered: bool,
}

impl Listing {
    /// What `skills` holds for `workspace`.
    pub fn of(skills: &dyn Skills, workspace: &Path, trusted: bool) -> Listing {
        let offered = skills.for_workspace(workspace, trusted);
        let mut entries: Vec<Entry> = offered
            .skills
            .values()
            .map(|skill| Entry {
                skill: skill.clone(),
                offered: true,
            })
            .collect();
        let mut commands: Vec<CommandEntry> = offered
            .commands
            .values()
            .map(|command| CommandEntry {
                command: command.clone(),
                offered: true,
            })
            .collect();
        let mut diagnostics = offered.diagnostics.clone();
        if !trusted {
            let all = skills.for_workspace(workspace, true);
            commands.extend(
                all.commands
                    .values()
                    .filter(|command| command.scope == Scope::Project)
                    .map(|command| CommandEntry {
                        command: command.clone(),
                        offered: false,
                    }),
            );
            entries.extend(
                all.skills
                    .values()
                    .filter(|skill| skill.scope == Scope::Project)
                    .map(|skill| Entry {
                        skill: skill.clone(),
                        offered: false,
                    }),
            );
            // What only the project's skills bring, but not a shadowing of
            // a skill that is offered (it is not shadowed while untrusted).
            let shown: Vec<&Path> = offered
                .skills
                .values()
                .map(|s| s.location.as_path())
                .collect();
            diagnostics.extend(
                all.diagnostics
                    .iter()
                    .filter(|d| !offered.diagnostics.contains(d))
                    .filter(|d| !shown.contains(&d.location.as_path()))
                    .cloned(),
            );
        }
        entries.sort_by(|a, b| (&a.skill.name, !a.offered).cmp(&(&b.skill.name, !b.offered)));
        commands.sort_by(|a, b| (&a.command.name, !a.offered).cmp(&(&b.command.name, !b.offered)));
        Listing {
            workspace: workspace.to_path_buf(),
            project: crate::core::hooks::project_dir(workspace),
            trusted,
            entries,
            commands,
            diagnostics,
        }
    }

    /// The skill named `name`: the offered one first.
    pub fn get(&self, name: &str) -> Option<&Entry> {
        self.entries.iter().find(|e| e.skill.name == name)
    }

    /// `pincer skills list --json` and `GET /v1/skills`.
    pub fn view(&self) -> SkillList {
        SkillList {
            workspace: self.workspace.clone(),
            project: self.project.clone(),
            trusted: self.trusted,
            skills: self.entries.iter().map(Entry::view).collect(),
            commands: self.commands.iter().map(CommandEntry::view).collect(),
            diagnostics: self
                .diagnostics
                .iter()
                .map(|d| SkillDiagnostic {
                    location: d.location.clone(),
                    skipped: d.skipped,
                    message: d.message.clone(),
                })
                .collect(),
        }
    }

    /// `pincer skills list`: a line per skill with its scope and
    /// description shortened, its location under it; diagnostics after.
    pub fn to_text(&self) -> String {
        let mut out = String::new();
        if self.entries.is_empty() && self.commands.is_empty() {
            out.push_str(&format!(
                "No skills found for {} (docs/skills.md says where they are looked for).\n",
                self.workspace.display()
            ));
        }
        for entry in &self.entries {
            let skill = &entry.skill;
            out.push_str(&format!(
                "{}  ({})  {}\n    {}\n",
                skill.name,
                entry.scope_text(),
                shorten(&skill.description, 80),
                skill.location.display()
            ));
        }
        if !self.commands.is_empty() {
            out.push_str("Custom commands:\n");
        }
        for entry in &self.commands {
            let command = &entry.command;
            let hint = command
                .argument_hint
                .as_deref()
                .map(|hint| format!(" {hint}"))
                .unwrap_or_default();
            out.push_str(&format!(
                "/{}{hint}  ({})  {}\n    {}\n",
                command.name,
                scope_text(&command.scope, entry.offered),
                shorten(&command.description, 80),
                command.location.display()
            ));
        }
        for d in &self.diagnostics {
            let kind = if d.skipped { "skipped" } else { "warning" };
            out.push_str(&format!(
                "{kind}: {}: {}\n",
                d.location.display(),
                d.message
            ));
        }
        out
    }
}

impl Entry {
    /// `project`, `user` or `plugin NAME`, with the trust note.
    pub fn scope_text(&self) -> String {
        scope_text(&self.skill.scope, self.offered)
    }

    pub fn view(&self) -> SkillView {
        let skill = &self.skill;
        SkillView {
            name: skill.name.clone(),
            description: skill.description.clone(),
            scope: scope_view(&skill.scope),
            plugin: plugin_of(&skill.scope),
            location: skill.location.clone(),
            offered: self.offered,
            allowed_tools: skill.allowed_tools.clone(),
            person_only: skill.person_only,
        }
    }

    /// `pincer skills show --json` and `GET /v1/skills/{name}`: the entry,
    /// the other frontmatter fields and the body, read now.
    pub fn details(&self) -> Result<SkillDetails, String> {
        let parsed = read(&self.skill.location)?;
        Ok(SkillDetails {
            skill: self.view(),
            license: parsed.license,
            compatibility: parsed.compatibility,
            metadata: parsed.metadata,
            body: parsed.body,
        })
    }

    /// `pincer skills show`: the metadata, a blank line, the body.
    pub fn details_text(&self) -> Result<String, String> {
        let parsed = read(&self.skill.location)?;
        let skill = &self.skill;
        let mut out = format!(
            "name: {}\ndescription: {}\nscope: {}\nlocation: {}\n",
            skill.name,
            skill.description,
            self.scope_text(),
            skill.location.display()
        );
        for (key, value) in [
            ("license", parsed.license.as_deref()),
            ("compatibility", parsed.compatibility.as_deref()),
        ] {
            if let Some(value) = value {
                out.push_str(&format!("{key}: {value}\n"));
            }
        }
        if !skill.allowed_tools.is_empty() {
            out.push_str(&format!(
                "allowed-tools: {}\n",
                skill.allowed_tools.join(" ")
            ));
        }
        if skill.person_only {
            out.push_str("disable-model-invocation: true (only a person's /NAME activates it)\n");
        }
        for (key, value) in &parsed.metadata {
            out.push_str(&format!("metadata.{key}: {value}\n"));
        }
        out.push('\n');
        out.push_str(&parsed.body);
        out.push('\n');
        Ok(out)
    }
}

impl CommandEntry {
    pub fn view(&self) -> SkillCommand {
        let command = &self.command;
        SkillCommand {
            name: command.name.clone(),
            description: command.description.clone(),
            argument_hint: command.argument_hint.clone(),
            scope: scope_view(&command.scope),
            plugin: plugin_of(&command.scope),
            location: command.location.clone(),
            offered: self.offered,
            allowed_tools: command.allowed_tools.clone(),
            model: command.model.clone(),
        }
    }
}

/// `project`, `user` or `plugin NAME`, with the trust note when it is held
/// back.
fn scope_text(scope: &Scope, offered: bool) -> String {
    let scope = match scope {
        Scope::Project => "project".to_owned(),
        Scope::User => "user".to_owned(),
        Scope::Plugin { plugin } => format!("plugin {plugin}"),
    };
    if offered {
        scope
    } else {
        format!("{scope}, not trusted: run `pincer trust`")
    }
}

/// How deep below a skill's folder resource files are listed.
const RESOURCE_DEPTH: usize = 4;

/// A skill's instructions as an activation hands them to the model: its
/// `SKILL.md` read now, the body wrapped with its folder and resource files
/// (`core::skills::wrap`). The `skill` tool and a person's `/NAME` (through
/// the `Skills` port) both read a skill here.
pub fn instructions(skill: &Skill) -> Result<String, String> {
    let parsed = read(&skill.location)?;
    let (files, more) = resources(skill.dir());
    Ok(crate::core::skills::wrap(skill, &parsed.body, &files, more))
}

/// The files of a skill's folder besides its `SKILL.md`, relative and
/// sorted, at most `MAX_RESOURCES` (`true` when there were more); hidden
/// files and folders left out.
fn resources(dir: &Path) -> (Vec<String>, bool) {
    use crate::core::skills::MAX_RESOURCES;
    let mut found: Vec<String> = Vec::new();
    let mut more = false;
    let mut pending: Vec<(PathBuf, usize)> = vec![(dir.to_path_buf(), 0)];
    while let Some((at, depth)) = pending.pop() {
        let Ok(entries) = std::fs::read_dir(&at) else {
            continue;
        };
        let mut entries: Vec<_> = entries.filter_map(Result::ok).collect();
        entries.sort_by_key(std::fs::DirEntry::file_name);
        for entry in entries {
            let name = entry.file_name();
            if name.to_string_lossy().starts_with('.') {
                continue;
            }
            let path = entry.path();
            let Ok(kind) = entry.file_type() else {
                continue;
            };
            if kind.is_dir() {
                if depth + 1 < RESOURCE_DEPTH {
                    pending.push((path, depth + 1));
                }
                continue;
            }
            if depth == 0 && name == "SKILL.md" {
                continue;
            }
            if found.len() == MAX_RESOURCES {
                more = true;
                continue;
            }
            if let Ok(relative) = path.strip_prefix(dir) {
                found.push(relative.to_string_lossy().into_owned());
            }
        }
    }
    found.sort();
    (found, more)
}

fn read(location: &Path) -> Result<parse::Parsed, String> {
    let text = std::fs::read_to_string(location)
        .map_err(|err| format!("cannot read {}: {err}", location.display()))?;
    parse::parse(&text).map_err(|err| format!("{}: {err}", location.display()))
}

fn scope_view(scope: &Scope) -> SkillScope {
    match scope {
        Scope::Project => SkillScope::Project,
        Scope::User => SkillScope::User,
        Scope::Plugin { .. } => SkillScope::Plugin,
    }
}

fn plugin_of(scope: &Scope) -> Option<String> {
    match scope {
        Scope::Plugin { plugin } => Some(plugin.clone()),
        Scope::Project | Scope::User => None,
    }
}

/// `text` cut to `max` characters with an ellipsis.
fn shorten(text: &str, max: usize) -> String {
    let text = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if text.chars().count() <= max {
        return text;
    }
    let cut: String = text.chars().take(max.saturating_sub(1)).collect();
    format!("{}…", cut.trim_end())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::skills::SkillSet;
    use std::sync::Arc;

    struct Fixed(SkillSet, SkillSet);

    impl Skills for Fixed {
        fn for_workspace(&self, _: &Path, trusted: bool) -> Arc<SkillSet> {
            Arc::new(if trusted {
                self.1.clone()
            } else {
                self.0.clone()
            })
        }

        fn instructions(&self, skill: &Skill) -> Result<String, String> {
            instructions(skill)
        }
    }

    #[test]
    fn at_most_fifty_resources_are_listed() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("SKILL.md"), "x").unwrap();
        for n in 0..60 {
            std::fs::write(dir.path().join(format!("f{n:02}.txt")), "x").unwrap();
        }
        let (files, more) = resources(dir.path());
        assert_eq!(files.len(), crate::core::skills::MAX_RESOURCES);
        assert!(more);
        assert!(!files.iter().any(|f| f == "SKILL.md"));
        let (few, more) = resources(&dir.path().join("missing"));
        assert!(few.is_empty() && !more);
    }

    fn skill(name: &str, at: &str, scope: Scope) -> Skill {
        Skill {
            name: name.into(),
            description: "Does things. ".repeat(10),
            location: PathBuf::from(at),
            scope,
            allowed_tools: Vec::new(),
            person_only: false,
        }
    }

    #[test]
    fn an_untrusted_projects_skills_are_listed_marked_and_never_shadow() {
        let user = skill(
            "review",
            "/home/.agents/skills/review/SKILL.md",
            Scope::User,
        );
        let project = skill(
            "review",
            "/ws/.agents/skills/review/SKILL.md",
            Scope::Project,
        );
        let mut untrusted = SkillSet::default();
        untrusted.add(user.clone());
        let mut trusted = SkillSet::default();
        trusted.add(user);
        trusted.add(project);
        trusted.add(skill(
            "lint",
            "/ws/.agents/skills/lint/SKILL.md",
            Scope::Project,
        ));
        let skills = Fixed(untrusted, trusted);
        let listing = Listing::of(&skills, Path::new("/ws"), false);
        let rows: Vec<(String, bool)> = listing
            .entries
            .iter()
            .map(|e| (e.scope_text(), e.offered))
            .collect();
        assert_eq!(
            rows,
            [
                ("project, not trusted: run `pincer trust`".to_owned(), false),
                ("user".to_owned(), true),
                ("project, not trusted: run `pincer trust`".to_owned(), false),
            ]
        );
        assert!(listing.diagnostics.is_empty(), "{:?}", listing.diagnostics);
        assert_eq!(listing.get("review").unwrap().skill.scope, Scope::User);
        let text = listing.to_text();
        assert!(
            text.contains("review  (user)  Does things. Does things."),
            "{text}"
        );
        assert!(
            text.contains("…\n    /home/.agents/skills/review/SKILL.md"),
            "{text}"
        );
        // Trusted: the project's wins, the user's is a diagnostic.
        let listing = Listing::of(&skills, Path::new("/ws"), true);
        assert_eq!(listing.entries.len(), 2);
        assert_eq!(listing.diagnostics.len(), 1);
        assert_eq!(
            crate::views::json(&listing.view())["skills"][1]["scope"],
            serde_json::json!("project")
        );
    }
}
