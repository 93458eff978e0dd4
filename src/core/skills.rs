//! Agent Skills (the open format of agentskills.io): folders holding a
//! `SKILL.md` whose frontmatter names the skill and says when to use it, and
//! whose body is instructions the model loads when it needs them. This is the
//! core's view: what a skill is once found, the set a session sees, and the
//! port that finds them (`Skills`, implemented by `crate::skills`, which
//! reads the file system). The core reads no skill file itself.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::Serialize;

/// Where a skill was found; on a name collision the project's wins.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Scope {
    /// A project directory (`.agents/skills/`, `.pincer/skills/`,
    /// `.claude/skills/`, from the workspace up to the repository root):
    /// offered only once the person trusts the project.
    Project,
    /// The person's own (`~/.agents/skills/`, the config directory's
    /// `skills/`, `~/.claude/skills/`) or a `[skills] paths` entry.
    User,
    /// An installed plugin's, by the plugin's name.
    Plugin { plugin: String },
}

impl Scope {
    /// Higher wins a name collision: project over plugin over user.
    pub fn rank(&self) -> u8 {
        match self {
            Scope::Project => 2,
            Scope::Plugin { .. } => 1,
            Scope::User => 0,
        }
    }
}

/// One skill as discovered: its metadata, never its body (read from
/// `location` when it is activated, so edits between activations count).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Skill {
    /// From the frontmatter (the folder's name when they differ is a
    /// warning, not a refusal).
    pub name: String,
    pub description: String,
    /// The absolute path of its `SKILL.md`.
    pub location: PathBuf,
    pub scope: Scope,
    /// `allowed-tools`, as written: tool names or patterns the skill
    /// pre-approves within what the policy allows (never past a deny or the
    /// mode).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub allowed_tools: Vec<String>,
    /// `disable-model-invocation: true`: only a person's `/NAME` activates
    /// it; it is left out of the model's catalogue.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub person_only: bool,
}

impl Skill {
    /// The skill's folder, against which its relative paths resolve.
    pub fn dir(&self) -> &Path {
        self.location.parent().unwrap_or(Path::new("/"))
    }
}

/// Something found while looking for skills that the person should know:
/// a skill skipped (no description, unreadable YAML) or loaded with a
/// warning (a name that breaks the format's rules, a collision).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Diagnostic {
    /// The `SKILL.md` (or folder) it is about.
    pub location: PathBuf,
    /// Whether the skill was left out because of it.
    pub skipped: bool,
    pub message: String,
}

/// The skills a session sees, by name, with what discovery noticed.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct SkillSet {
    pub skills: BTreeMap<String, Skill>,
    pub diagnostics: Vec<Diagnostic>,
}

impl SkillSet {
    pub fn get(&self, name: &str) -> Option<&Skill> {
        self.skills.get(name)
    }

    pub fn is_empty(&self) -> bool {
        self.skills.is_empty()
    }

    /// Adds `skill`; on a name collision the higher scope wins (the first
    /// found within one scope), and the shadowed one is a diagnostic.
    pub fn add(&mut self, skill: Skill) {
        match self.skills.get(&skill.name) {
            Some(held) if held.scope.rank() >= skill.scope.rank() => {
                self.diagnostics.push(Diagnostic {
                    location: skill.location.clone(),
                    skipped: true,
                    message: format!(
                        "skill `{}` is shadowed by {}",
                        skill.name,
                        held.location.display()
                    ),
                });
            }
            Some(held) => {
                self.diagnostics.push(Diagnostic {
                    location: held.location.clone(),
                    skipped: true,
                    message: format!(
                        "skill `{}` is shadowed by {}",
                        held.name,
                        skill.location.display()
                    ),
                });
                self.skills.insert(skill.name.clone(), skill);
            }
            None => {
                self.skills.insert(skill.name.clone(), skill);
            }
        }
    }
}

/// The port that finds skills: what a session in `workspace` sees now.
/// Implementations cache, so asking before every model turn is cheap; a
/// skill added, changed or removed on disk is seen at the next ask.
pub trait Skills: Send + Sync {
    /// The skills of `workspace`: the user's and the plugins' always, the
    /// project's only when `project_trusted`.
    fn for_workspace(&self, workspace: &Path, project_trusted: bool) -> Arc<SkillSet>;
}

/// No skills at all (tests, and a configuration that turns them off).
pub struct NoSkills;

impl Skills for NoSkills {
    fn for_workspace(&self, _: &Path, _: bool) -> Arc<SkillSet> {
        Arc::new(SkillSet::default())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn skill(name: &str, at: &str, scope: Scope) -> Skill {
        Skill {
            name: name.into(),
            description: "d".into(),
            location: PathBuf::from(at),
            scope,
            allowed_tools: Vec::new(),
            person_only: false,
        }
    }

    #[test]
    fn the_project_overrides_the_user_and_the_first_found_wins_within_a_scope() {
        let mut set = SkillSet::default();
        set.add(skill(
            "review",
            "/home/p/.agents/skills/review/SKILL.md",
            Scope::User,
        ));
        set.add(skill(
            "review",
            "/ws/.agents/skills/review/SKILL.md",
            Scope::Project,
        ));
        set.add(skill(
            "review",
            "/ws/.claude/skills/review/SKILL.md",
            Scope::Project,
        ));
        let held = set.get("review").unwrap();
        assert_eq!(
            held.location,
            Path::new("/ws/.agents/skills/review/SKILL.md")
        );
        assert_eq!(set.diagnostics.len(), 2);
        assert!(set.diagnostics.iter().all(|d| d.skipped));
        assert_eq!(
            set.diagnostics[0].location,
            Path::new("/home/p/.agents/skills/review/SKILL.md")
        );
        assert_eq!(
            set.diagnostics[1].location,
            Path::new("/ws/.claude/skills/review/SKILL.md")
        );
        assert_eq!(held.dir(), Path::new("/ws/.agents/skills/review"));
    }
}
