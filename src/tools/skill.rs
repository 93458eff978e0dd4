//! `skill`: loads an Agent Skill's instructions (`docs/skills.md`). The
//! model names one of the session's skills (the runtime offers the tool
//! only to a session that has some, its `name` an enum of theirs); the
//! result is the `SKILL.md` body, frontmatter stripped, wrapped with the
//! skill's folder and its resource files (listed, never read):
//! `core::skills::wrap`. The gate records the activation and passes the
//! text through the safety pass like any file's. A skill already active
//! gets a short note instead of its instructions again.

use schemars::JsonSchema;
use serde::Deserialize;

use crate::core::skills::{RunSkills, SKILL_TOOL, Skill};
use crate::core::tool::{Plan, ToolContext, ToolError, ToolKind, ToolOutput, TypedTool};

pub struct SkillTool;

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Args {
    /// The skill's name, as the catalogue lists it.
    name: String,
}

/// The offered skill `name`, or why there is none (with the valid names).
fn find<'a>(skills: Option<&'a RunSkills>, name: &str) -> Result<&'a Skill, ToolError> {
    let Some(skills) = skills else {
        return Err(ToolError::InvalidArguments(
            "this session has no skills".to_owned(),
        ));
    };
    if let Some(skill) = skills.loadable(name) {
        return Ok(skill);
    }
    let names: Vec<&str> = skills.offered().map(|skill| skill.name.as_str()).collect();
    Err(ToolError::InvalidArguments(format!(
        "no skill is named `{}`; the skills are: {}",
        crate::core::quote::clip_message(name),
        names.join(", ")
    )))
}

/// The skill's instructions, wrapped, read now (so an edit since the last
/// activation counts): `crate::skills::instructions`, the one reading the
/// runtime's `/NAME` uses too.
async fn load(skill: &Skill) -> Result<String, ToolError> {
    let skill = skill.clone();
    tokio::task::spawn_blocking(move || crate::skills::instructions(&skill))
        .await
        .map_err(|err| ToolError::Failed(format!("cannot read the skill: {err}")))?
        .map_err(ToolError::Failed)
}

impl TypedTool for SkillTool {
    type Args = Args;
    const NAME: &'static str = SKILL_TOOL;
    const KIND: ToolKind = ToolKind::Read;

    fn description(&self) -> String {
        "Loads a skill's full instructions: call it with the skill's name when a task \
         matches a skill's description in the system prompt's list, before doing the \
         task. The result names the skill's folder and lists its files; read them with \
         the file tools when the instructions refer to them (relative paths are relative \
         to that folder)."
            .to_owned()
    }

    async fn plan(&self, args: &Args, ctx: &ToolContext) -> Result<Plan, ToolError> {
        let skill = find(ctx.skills.as_deref(), &args.name)?;
        Ok(Plan {
            title: format!("Load the skill {}", skill.name),
            reads: vec![skill.location.clone()],
            ..Plan::default()
        })
    }

    async fn execute(
        &self,
        args: &Args,
        _plan: &Plan,
        ctx: &ToolContext,
    ) -> Result<ToolOutput, ToolError> {
        let skills = ctx.skills.as_deref();
        let skill = find(skills, &args.name)?;
        if skills.is_some_and(|skills| skills.is_active(&skill.name)) {
            return Ok(ToolOutput::text(format!(
                "The skill `{}` is already active: its instructions are earlier in this \
                 conversation; follow them.",
                skill.name
            )));
        }
        Ok(ToolOutput {
            text: load(skill).await?,
            skill: Some(skill.name.clone()),
            ..ToolOutput::default()
        })
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use std::path::Path;

    use super::*;
    use crate::core::boundary::PathBoundary;
    use crate::core::ids::SessionId;
    use crate::core::skills::{Scope, SkillSet};
    use crate::core::tool::{Files, Progress, Tool};

    fn skill_in(root: &Path, name: &str, body: &str) -> Skill {
        let dir = root.join(name);
        std::fs::create_dir_all(dir.join("scripts")).unwrap();
        std::fs::write(
            dir.join("SKILL.md"),
            format!("---\nname: {name}\ndescription: Does {name} things.\n---\n\n{body}\n"),
        )
        .unwrap();
        std::fs::write(dir.join("scripts/run.sh"), "echo hi\n").unwrap();
        std::fs::write(dir.join("REFERENCE.md"), "more\n").unwrap();
        std::fs::write(dir.join(".hidden"), "no\n").unwrap();
        Skill {
            name: name.into(),
            description: format!("Does {name} things."),
            location: dir.join("SKILL.md"),
            scope: Scope::User,
            allowed_tools: Vec::new(),
            person_only: false,
        }
    }

    fn ctx(ws: &Path, skills: Option<Arc<RunSkills>>) -> ToolContext {
        let id = SessionId::from_string("ses_skill".into());
        ToolContext {
            session_id: id.clone(),
            workspace: ws.to_path_buf(),
            boundary: Arc::new(PathBoundary::new(ws, &[], &[], None)),
            files: Files::local(id),
            cancel: tokio_util::sync::CancellationToken::new(),
            progress: Progress::none(),
            terminal: None,
            memory: None,
            call_id: None,
            run_id: None,
            skills,
        }
    }

    async fn call(ctx: &ToolContext, name: &str) -> Result<ToolOutput, ToolError> {
        let args = serde_json::json!({ "name": name });
        let plan = Tool::plan(&SkillTool, &args, ctx).await?;
        Tool::execute(&SkillTool, &args, &plan, ctx).await
    }

    #[tokio::test]
    async fn the_body_comes_wrapped_with_the_folder_and_its_files_and_only_once() {
        let dir = tempfile::tempdir().unwrap();
        let skill = skill_in(dir.path(), "pdf", "# PDF\n\nRun `scripts/run.sh`.");
        let mut set = SkillSet::default();
        set.add(skill.clone());
        let skills = Arc::new(RunSkills::new(Arc::new(set), Vec::new()));
        let ctx = ctx(dir.path(), Some(skills.clone()));
        let out = call(&ctx, "pdf").await.unwrap();
        assert_eq!(out.skill.as_deref(), Some("pdf"));
        assert_eq!(
            out.text,
            format!(
                "<skill_content name=\"pdf\">\n# PDF\n\nRun `scripts/run.sh`.\n\n\
                 Skill directory: {}\n\
                 Relative paths in this skill are relative to the skill directory.\n\n\
                 <skill_resources>\n  <file>REFERENCE.md</file>\n  <file>scripts/run.sh</file>\n\
                 </skill_resources>\n</skill_content>",
                skill.dir().display()
            )
        );
        // The gate marks it active once the call is recorded; then a second
        // call is a note, not the instructions again.
        assert!(skills.activate("pdf"));
        let again = call(&ctx, "pdf").await.unwrap();
        assert_eq!(again.skill, None);
        assert!(again.text.contains("already active"), "{}", again.text);
        assert!(!again.text.contains("# PDF"));
    }

    #[tokio::test]
    async fn an_unknown_or_person_only_name_is_refused_with_the_valid_names() {
        let dir = tempfile::tempdir().unwrap();
        let mut set = SkillSet::default();
        set.add(skill_in(dir.path(), "pdf", "body"));
        set.add(Skill {
            person_only: true,
            ..skill_in(dir.path(), "deploy", "body")
        });
        let ctx = ctx(
            dir.path(),
            Some(Arc::new(RunSkills::new(Arc::new(set), Vec::new()))),
        );
        for name in ["nope", "deploy"] {
            let err = call(&ctx, name).await.unwrap_err();
            assert_eq!(
                err,
                ToolError::InvalidArguments(format!(
                    "no skill is named `{name}`; the skills are: pdf"
                ))
            );
        }
        let none = self::ctx(dir.path(), None);
        assert!(call(&none, "pdf").await.is_err());
    }
}
