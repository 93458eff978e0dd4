//! Skills and custom commands as `pincer skills list|show --json` and
//! `GET /v1/skills[/{name}]` show them (`skills::Listing` builds these).

use std::collections::BTreeMap;
use std::path::PathBuf;

use schemars::JsonSchema;
use serde::Serialize;

/// The skills and custom commands a session in `workspace` finds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct SkillList {
    pub workspace: PathBuf,
    /// The project directory trust is given to (`pincer trust`)
    pub project: PathBuf,
    pub trusted: bool,
    pub skills: Vec<SkillView>,
    /// The custom commands (docs/skills.md, "Custom commands"), offered or
    /// held back like the skills
    pub commands: Vec<SkillCommand>,
    pub diagnostics: Vec<SkillDiagnostic>,
}

/// Where a skill or command was found.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum SkillScope {
    Project,
    User,
    Plugin,
}

/// One skill.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, JsonSchema)]
#[schemars(rename = "Skill", deny_unknown_fields)]
pub struct SkillView {
    pub name: String,
    pub description: String,
    pub scope: SkillScope,
    /// The plugin's name, for a plugin's skill
    #[serde(skip_serializing_if = "Option::is_none")]
    pub plugin: Option<String>,
    /// The absolute path of its SKILL.md
    pub location: PathBuf,
    /// False for a project's skill while the project is not trusted:
    /// listed, never offered to the model
    pub offered: bool,
    pub allowed_tools: Vec<String>,
    /// `disable-model-invocation: true`: only a person's /NAME activates it
    pub person_only: bool,
}

/// One custom command.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct SkillCommand {
    /// What a person types after `/`
    pub name: String,
    pub description: String,
    /// `argument-hint`: what to type after the name
    #[serde(skip_serializing_if = "Option::is_none")]
    pub argument_hint: Option<String>,
    pub scope: SkillScope,
    /// The plugin's name, for a plugin's command
    #[serde(skip_serializing_if = "Option::is_none")]
    pub plugin: Option<String>,
    /// The absolute path of its Markdown file
    pub location: PathBuf,
    /// False for a project's command while the project is not trusted
    pub offered: bool,
    pub allowed_tools: Vec<String>,
    /// `model`: the configured model its run uses
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
}

/// A problem found with a skill.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct SkillDiagnostic {
    pub location: PathBuf,
    /// Whether the skill was left out because of it
    pub skipped: bool,
    pub message: String,
}

/// One skill whole: its entry, the other frontmatter fields and its body.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct SkillDetails {
    #[serde(flatten)]
    pub skill: SkillView,
    pub license: Option<String>,
    pub compatibility: Option<String>,
    pub metadata: BTreeMap<String, String>,
    /// The instructions: SKILL.md after its frontmatter, trimmed
    pub body: String,
}
