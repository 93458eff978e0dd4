//! The system prompt: what the model is told before the conversation. One
//! place, deterministic given its inputs: who the agent is, where it works
//! (workspace, extra roots, operating system, shell, date and time zone, the
//! git branch and whether the tree is dirty), which face it talks through,
//! the session's mode and what it allows, how to use the tools well and how
//! approvals and refusals reach it.
//!
//! `system_prompt` in the configuration replaces the built-in text;
//! `instructions` are appended to whichever is used. The facts about the
//! machine come from an [`EnvironmentProbe`] the composition root gives the
//! runtime; the core does no I/O for them.

use std::path::{Path, PathBuf};

use super::boundary::PathBoundary;
use super::memory::{
    Memories, MemoryFilter, MemorySearch, MemoryWrite, RecallSettings, ScopeKeys, pinned_section,
    rank, recall_block,
};
use super::session::{ContentPart, Message, Mode, Origin};

/// The built-in prompt's version: raised whenever its text changes, so a
/// transcript can say which prompt a model saw.
pub const PROMPT_VERSION: u32 = 2;

/// Facts about the machine and the workspace, as a probe found them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Environment {
    /// `linux`, `macos`, … (`std::env::consts::OS`).
    pub os: String,
    /// The person's shell (`$SHELL`), when known.
    pub shell: Option<String>,
    /// Today's date, `YYYY-MM-DD`, in `time_zone`.
    pub date: String,
    /// An IANA name (`Europe/Berlin`) or an offset (`+01:00`).
    pub time_zone: String,
    /// When the workspace is in a git repository.
    pub git: Option<Git>,
    /// The project's instruction files (`AGENTS.md` and its fallbacks), the
    /// person's own first, then from the repository root down to the
    /// workspace.
    pub instructions: Vec<InstructionFile>,
}

/// One instruction file as read for the prompt.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct InstructionFile {
    /// Where it is, as shown to the model.
    pub shown: String,
    /// Its text, cut at the size cap.
    pub text: String,
    /// The file's whole size when the text was cut.
    pub truncated_from: Option<usize>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Git {
    /// The repository's top directory (the key of workspace memory).
    pub root: PathBuf,
    /// The checked-out branch; `None` for a detached head.
    pub branch: Option<String>,
    /// Uncommitted changes (or untracked files) in the tree.
    pub dirty: bool,
}

/// Finds the [`Environment`] of a workspace. Files it reads for the prompt
/// must pass `boundary` (inside it, not forbidden).
pub trait EnvironmentProbe: Send + Sync {
    /// The facts about the machine and the workspace; once per run.
    fn environment(&self, workspace: &Path) -> Environment;

    /// The top directory of the repository holding `workspace`, if any.
    fn repository_root(&self, workspace: &Path) -> Option<PathBuf> {
        self.environment(workspace).git.map(|git| git.root)
    }

    /// The instruction files down to the workspace (the person's own, then
    /// from the repository root down); before each model turn, so a change
    /// applies from the next turn on.
    fn instructions(&self, workspace: &Path, boundary: &PathBoundary) -> Vec<InstructionFile>;

    /// The instruction files of directories below the workspace, down to
    /// `dir` (the workspace itself excluded), outermost first; before each
    /// model turn, for the directories the run's tools reached.
    fn instructions_below(
        &self,
        workspace: &Path,
        dir: &Path,
        boundary: &PathBoundary,
    ) -> Vec<InstructionFile>;
}

pub use super::session::PromptSettings;

/// Everything the prompt is made from, for one run.
#[derive(Debug, Clone)]
pub struct PromptInputs<'a> {
    pub workspace: &'a Path,
    pub extra_roots: &'a [PathBuf],
    pub environment: &'a Environment,
    pub origin: Origin,
    pub mode: Mode,
    /// The memory tools are there (`core::memory`).
    pub memory: bool,
    /// The skills' catalogue (`core::skills::catalogue`), when the session
    /// has skills to offer.
    pub skills: Option<&'a str>,
}

/// The system prompt of one run, made again before each model turn: the
/// facts are the run's, the instruction files of subdirectories join once the
/// run's tools have read or changed something under them.
pub struct RunPrompt {
    pub settings: PromptSettings,
    pub workspace: PathBuf,
    pub extra_roots: Vec<PathBuf>,
    pub environment: Environment,
    pub origin: Origin,
    pub mode: Mode,
    pub probe: Option<std::sync::Arc<dyn EnvironmentProbe>>,
    pub boundary: std::sync::Arc<PathBoundary>,
    /// The session's memory, recalled into each turn.
    pub memory: Option<Recall>,
    /// The skills' catalogue, made once for the run (so every turn's prompt
    /// starts the same, for the provider's cache).
    pub skills: super::skills::Catalogue,
}

/// A run's recall (`core::memory`): pinned items in the system prompt, the
/// items relevant to the latest prompt in a block before it.
pub struct Recall {
    pub store: std::sync::Arc<dyn Memories>,
    pub keys: ScopeKeys,
    pub settings: RecallSettings,
    /// What time it is, for the items' recency.
    clock: std::sync::Arc<dyn super::clock::Clock>,
    /// The latest prompt recalled for and its block: the turns of one run
    /// share them (and so the provider's cached prefix).
    last: parking_lot::Mutex<Option<(String, Option<String>)>>,
}

impl Recall {
    pub fn new(
        store: std::sync::Arc<dyn Memories>,
        keys: ScopeKeys,
        settings: RecallSettings,
    ) -> Self {
        Self {
            store,
            keys,
            settings,
            clock: std::sync::Arc::new(super::clock::SystemClock),
            last: parking_lot::Mutex::new(None),
        }
    }

    /// The same recall by `clock`'s time.
    pub fn with_clock(mut self, clock: std::sync::Arc<dyn super::clock::Clock>) -> Self {
        self.clock = clock;
        self
    }

    /// The pinned items' section of the system prompt.
    async fn pinned(&self) -> Option<String> {
        if !self.settings.enabled {
            return None;
        }
        let filter = MemoryFilter {
            within: self.keys.visible(),
            pinned_only: true,
            limit: 200,
            ..MemoryFilter::default()
        };
        match self.store.list(filter).await {
            Ok(items) => pinned_section(&items, self.settings.pinned_budget_tokens),
            Err(err) => {
                tracing::warn!(error = %err, "cannot read the pinned memory items");
                None
            }
        }
    }

    /// The recalled block for the latest prompt in `messages`, if anything
    /// is relevant to it; `touch`: the items count as used now (a turn, not
    /// a look at the context).
    pub async fn block(&self, messages: &[Message], touch: bool) -> Option<String> {
        if !self.settings.enabled {
            return None;
        }
        let prompt = latest_prompt(messages)?;
        if let Some((text, block)) = self.last.lock().as_ref()
            && *text == prompt
        {
            return block.clone();
        }
        let search = MemorySearch {
            text: prompt.clone(),
            within: self.keys.visible(),
            limit: 4 * self.settings.max_items.max(1),
            vector: None,
        };
        let block = match self.store.search(search).await {
            Ok(hits) => {
                let now = self.clock.now_millis();
                let items = rank(hits, now, &self.settings);
                if touch && !items.is_empty() {
                    self.store.note(MemoryWrite::Used {
                        ids: items.iter().map(|item| item.id.clone()).collect(),
                        at: now,
                    });
                }
                recall_block(&items)
            }
            Err(err) => {
                tracing::warn!(error = %err, "memory recall failed; the turn goes on without it");
                None
            }
        };
        *self.last.lock() = Some((prompt, block.clone()));
        block
    }
}

/// The text of the latest prompt (the last user message) in `messages`.
fn latest_prompt(messages: &[Message]) -> Option<String> {
    messages.iter().rev().find_map(|message| {
        let Message::User { content } = message else {
            return None;
        };
        let text: Vec<&str> = content
            .iter()
            .filter_map(|part| match part {
                ContentPart::Text { text } | ContentPart::Resource { text, .. } => {
                    Some(text.as_str())
                }
                ContentPart::ResourceLink { .. } | ContentPart::Image { .. } => None,
            })
            .collect();
        Some(text.join("\n"))
    })
}

/// Puts `block` first in the latest prompt of `messages` (the request's copy).
pub fn insert_recall(messages: &mut [Message], block: String) {
    if let Some(Message::User { content }) = messages
        .iter_mut()
        .rev()
        .find(|message| matches!(message, Message::User { .. }))
    {
        content.insert(0, ContentPart::Text { text: block });
    }
}

impl RunPrompt {
    /// The prompt for the next turn over `messages` (the conversation so far).
    pub async fn render(&self, messages: &[super::session::Message]) -> String {
        let mut environment = self.environment.clone();
        if let Some(probe) = &self.probe {
            let dirs = touched_dirs(messages, &self.workspace);
            let (probe, workspace, boundary) =
                (probe.clone(), self.workspace.clone(), self.boundary.clone());
            let files = tokio::task::spawn_blocking(move || {
                let mut found = probe.instructions(&workspace, &boundary);
                for dir in dirs {
                    for file in probe.instructions_below(&workspace, &dir, &boundary) {
                        if !found.iter().any(|f| f.shown == file.shown) {
                            found.push(file);
                        }
                    }
                }
                found
            })
            .await
            .unwrap_or_default();
            environment.instructions.extend(files);
        }
        let mut prompt = system_prompt(
            &self.settings,
            &PromptInputs {
                workspace: &self.workspace,
                extra_roots: &self.extra_roots,
                environment: &environment,
                origin: self.origin,
                mode: self.mode,
                memory: self.memory.is_some(),
                skills: self.skills.text.as_deref(),
            },
        );
        if let Some(memory) = &self.memory
            && let Some(pinned) = memory.pinned().await
        {
            prompt.push_str("\n\n");
            prompt.push_str(pinned.trim_end());
        }
        prompt
    }
}

/// The directories under the workspace that tool calls in `messages` named
/// with a `path` argument (a file's directory, or the directory itself).
fn touched_dirs(messages: &[super::session::Message], workspace: &Path) -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> = Vec::new();
    for message in messages {
        let super::session::Message::Assistant { tool_calls, .. } = message else {
            continue;
        };
        for call in tool_calls {
            let Some(raw) = call.arguments.get("path").and_then(|p| p.as_str()) else {
                continue;
            };
            let path = workspace.join(raw);
            let dir = if raw.ends_with('/') || path.is_dir() {
                path
            } else {
                match path.parent() {
                    Some(parent) => parent.to_path_buf(),
                    None => continue,
                }
            };
            if dir != workspace && dir.starts_with(workspace) && !dirs.contains(&dir) {
                dirs.push(dir);
            }
        }
    }
    dirs
}

/// The system prompt a run's model turns are sent.
pub fn system_prompt(settings: &PromptSettings, inputs: &PromptInputs<'_>) -> String {
    let mut prompt = match &settings.system_prompt {
        Some(replaced) => replaced.trim_end().to_owned(),
        None => built_in(inputs),
    };
    // The catalogue is the same for every turn of a run: it goes before
    // what a turn may change (the instruction files of directories the
    // run's tools reached, the pinned memory), in the cached prefix.
    if let Some(catalogue) = inputs.skills {
        prompt.push_str("\n\n");
        prompt.push_str(catalogue.trim_end());
    }
    let files = &inputs.environment.instructions;
    if !files.is_empty() {
        prompt.push_str(
            "\n\n# Project instructions\n\nThe person and the project left these for agents \
             working here; follow them unless the person says otherwise.\n",
        );
        for file in files {
            prompt.push_str(&format!("\n## {}\n\n{}", file.shown, file.text.trim_end()));
            if let Some(size) = file.truncated_from {
                prompt.push_str(&format!(
                    "\n\n[truncated: the first {} of {size} bytes; read the file for the rest]",
                    file.text.len()
                ));
            }
            prompt.push('\n');
        }
        while prompt.ends_with('\n') {
            prompt.pop();
        }
    }
    if let Some(instructions) = settings
        .instructions
        .as_deref()
        .map(str::trim)
        .filter(|i| !i.is_empty())
    {
        prompt.push_str("\n\n# Instructions\n\n");
        prompt.push_str(instructions);
    }
    prompt
}

/// The built-in prompt (version [`PROMPT_VERSION`]).
pub fn built_in(inputs: &PromptInputs<'_>) -> String {
    let env = inputs.environment;
    let mut out = String::from(
        "You are Pincer, a coding agent working on a person's machine. You read, search and \
         change the files of their workspace and run commands there with the tools below, to \
         do what they ask. Be direct and concise; do the work rather than describe it.\n",
    );

    out.push_str("\n# Environment\n\n");
    out.push_str(&format!("- Workspace: {}\n", inputs.workspace.display()));
    if !inputs.extra_roots.is_empty() {
        let roots: Vec<String> = inputs
            .extra_roots
            .iter()
            .map(|r| r.display().to_string())
            .collect();
        out.push_str(&format!(
            "- Also reachable: {} (nothing outside these and the workspace)\n",
            roots.join(", ")
        ));
    }
    out.push_str(&format!("- Operating system: {}\n", env.os));
    if let Some(shell) = &env.shell {
        out.push_str(&format!("- Shell: {shell}\n"));
    }
    out.push_str(&format!("- Date: {} ({})\n", env.date, env.time_zone));
    match &env.git {
        Some(git) => out.push_str(&format!(
            "- Git: {}, {}\n",
            git.branch
                .as_deref()
                .map_or("detached head".to_owned(), |b| format!("branch {b}")),
            if git.dirty {
                "uncommitted changes in the tree"
            } else {
                "clean tree"
            }
        )),
        None => out.push_str("- Git: not a repository\n"),
    }

    out.push_str("\n# Where you are talking\n\n");
    out.push_str(match inputs.origin {
        Origin::Editor => {
            "In the person's editor. They see your messages, each tool call and its diff as it \
             happens. Markdown renders; refer to files by their path relative to the workspace.\n"
        }
        Origin::Terminal => {
            "In a terminal conversation (`pincer chat`). Markdown is rendered for the terminal; \
             keep lines short and code in fenced blocks.\n"
        }
        Origin::Headless => {
            "In a headless run (`pincer run`), often from a script or CI. Nobody may be watching \
             and nobody can answer a question: finish the task on your own, and end with a short \
             summary of what you did and what is left.\n"
        }
        Origin::Http => {
            "Through Pincer's HTTP API, to a program. Answer in plain Markdown and keep the reply \
             self-contained.\n"
        }
        Origin::Channel => {
            "In a chat (a messaging platform). Keep replies short, a few paragraphs at most; use \
             simple formatting only (bold, italics, inline code, short code blocks).\n"
        }
        Origin::Schedule => {
            "In a scheduled run (`pincer schedule`): nobody is watching and nobody can answer a \
             question. Do the task on your own; your final message is the result, and it may be \
             sent to a chat as it is, so make it complete and short.\n"
        }
        Origin::Subagent => {
            "As a subagent: another agent handed you one task and reads your final message as \
             the result. Do the task, then end with a complete, self-contained answer; the \
             person does not see your messages, only your tool calls that need approval.\n"
        }
    });

    out.push_str("\n# Mode\n\n");
    out.push_str(match inputs.mode {
        Mode::ReadOnly => {
            "Read only: you may read and search; every change and every command that could \
             change something is refused. Say what you would change instead.\n"
        }
        Mode::Supervised => {
            "Supervised: reads and searches run at once; edits and most commands wait for the \
             person's approval, and they may refuse.\n"
        }
        Mode::Full => {
            "Full autonomy: what the policy allows runs without asking; the policy still refuses \
             some commands and paths.\n"
        }
    });

    out.push_str("\n# Working with the tools\n\n");
    out.push_str(
        "- Read a file before you change it, and search before you guess where something is.\n\
         - Prefer `edit_file` for a change to part of a file; rewrite a whole file only when \
         most of it changes.\n\
         - Keep the person informed: say briefly what you are about to do and what you found.\n\
         - Never print, log or write secrets (keys, tokens, passwords) you come across.\n\
         - Paths outside the workspace and the roots above, and some paths inside (such as \
         `~/.ssh`), are refused.\n",
    );
    if inputs.memory {
        out.push_str(
            "- `memory_save` keeps a fact for later sessions: the person's preferences, how this \
             project builds and tests, decisions and their reasons. Save what will matter again, \
             not what the files already say, and never a secret. A `<memory>` block before a \
             message holds items recalled for it; they may be stale, so check before relying on \
             them, and `memory_forget` one that is wrong.\n",
        );
    }

    out.push_str("\n# Approvals and refusals\n\n");
    out.push_str(
        "A call that needs approval waits for the person; its result tells you if they \
         rejected it, if nobody could approve it, or if the policy refused it, with the reason. \
         Do not retry a refused call unchanged: take another way, or explain what you need and \
         stop.\n",
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn environment() -> Environment {
        Environment {
            os: "linux".into(),
            shell: Some("/bin/bash".into()),
            date: "2026-11-24".into(),
            time_zone: "Europe/Berlin".into(),
            git: Some(Git {
                root: PathBuf::from("/home/ada/src/pincer"),
                branch: Some("main".into()),
                dirty: true,
            }),
            instructions: Vec::new(),
        }
    }

    fn inputs<'a>(environment: &'a Environment, roots: &'a [PathBuf]) -> PromptInputs<'a> {
        PromptInputs {
            workspace: Path::new("/home/ann/project"),
            extra_roots: roots,
            environment,
            origin: Origin::Editor,
            mode: Mode::Supervised,
            memory: true,
            skills: None,
        }
    }

    /// The built-in prompt, whole: a change to it is a deliberate change of
    /// what every model is told (raise `PROMPT_VERSION`).
    #[test]
    fn the_built_in_prompt() {
        let env = environment();
        let roots = [PathBuf::from("/opt/shared")];
        let prompt = built_in(&inputs(&env, &roots));
        insta::assert_snapshot!(format!("version {PROMPT_VERSION}\n\n{prompt}"));
        // Under about 1,500 tokens, counted generously at 3 bytes a token.
        assert!(prompt.len() < 4_500, "{} bytes", prompt.len());
    }

    #[test]
    fn each_face_and_mode_says_something_of_its_own() {
        let env = environment();
        let mut seen = std::collections::HashSet::new();
        for origin in [
            Origin::Editor,
            Origin::Terminal,
            Origin::Headless,
            Origin::Http,
            Origin::Channel,
            Origin::Schedule,
        ] {
            for mode in Mode::ALL {
                let prompt = built_in(&PromptInputs {
                    origin,
                    mode,
                    ..inputs(&env, &[])
                });
                assert!(seen.insert(prompt), "{origin:?} {mode:?} repeats another");
            }
        }
    }

    #[test]
    fn project_instructions_follow_the_prompt_with_a_visible_cut() {
        let env = Environment {
            instructions: vec![
                InstructionFile {
                    shown: "~/.config/pincer/AGENTS.md".into(),
                    text: "Answer briefly.\n".into(),
                    truncated_from: None,
                },
                InstructionFile {
                    shown: "AGENTS.md".into(),
                    text: "Use tabs.".into(),
                    truncated_from: Some(90_000),
                },
            ],
            ..environment()
        };
        let prompt = system_prompt(
            &PromptSettings {
                system_prompt: Some("Base.".into()),
                instructions: Some("Configured.".into()),
            },
            &inputs(&env, &[]),
        );
        assert_eq!(
            prompt,
            "Base.\n\n# Project instructions\n\nThe person and the project left these for agents \
             working here; follow them unless the person says otherwise.\n\n\
             ## ~/.config/pincer/AGENTS.md\n\nAnswer briefly.\n\n## AGENTS.md\n\nUse tabs.\n\n\
             [truncated: the first 9 of 90000 bytes; read the file for the rest]\n\n\
             # Instructions\n\nConfigured."
        );
    }

    /// The skills' catalogue follows the prompt (built-in or configured)
    /// and comes before the instruction files, which a turn may add to:
    /// what changes within a run is after it.
    #[test]
    fn the_skills_catalogue_comes_before_what_a_turn_may_change() {
        let env = Environment {
            instructions: vec![InstructionFile {
                shown: "AGENTS.md".into(),
                text: "Use tabs.".into(),
                truncated_from: None,
            }],
            ..environment()
        };
        let catalogue = "# Skills\n\n<available_skills>\n</available_skills>\n";
        let settings = PromptSettings {
            system_prompt: Some("Base.".into()),
            instructions: Some("Configured.".into()),
        };
        let prompt = system_prompt(
            &settings,
            &PromptInputs {
                skills: Some(catalogue),
                ..inputs(&env, &[])
            },
        );
        assert!(
            prompt.starts_with(
                "Base.\n\n# Skills\n\n<available_skills>\n</available_skills>\n\n# Project instructions"
            ),
            "{prompt}"
        );
        let without = system_prompt(&settings, &inputs(&env, &[]));
        assert!(!without.contains("# Skills"));
        assert!(without.starts_with("Base.\n\n# Project instructions"));
    }

    #[test]
    fn a_configured_prompt_replaces_and_instructions_append() {
        let env = environment();
        let inputs = inputs(&env, &[]);
        let replaced = system_prompt(
            &PromptSettings {
                system_prompt: Some("You answer in French.\n".into()),
                instructions: None,
            },
            &inputs,
        );
        assert_eq!(replaced, "You answer in French.");
        let both = system_prompt(
            &PromptSettings {
                system_prompt: None,
                instructions: Some("Run `cargo fmt` after editing Rust.".into()),
            },
            &inputs,
        );
        assert!(both.starts_with("You are Pincer"));
        assert!(both.ends_with("# Instructions\n\nRun `cargo fmt` after editing Rust."));
        let detached = Environment {
            git: Some(Git {
                root: PathBuf::from("/home/ada/src/pincer"),
                branch: None,
                dirty: false,
            }),
            ..env.clone()
        };
        let prompt = built_in(&PromptInputs {
            environment: &detached,
            ..inputs
        });
        assert!(prompt.contains("- Git: detached head, clean tree"));
    }

    /// A memory store whose reads fail, or find one item.
    struct Store {
        broken: bool,
    }

    fn saved() -> crate::core::memory::MemoryItem {
        crate::core::memory::MemoryItem {
            id: "mem_1".into(),
            text: "The tests need the staging fixture".into(),
            scope: crate::core::memory::Scope::User,
            scope_key: String::new(),
            tags: Vec::new(),
            source: crate::core::memory::MemorySource::default(),
            created_at: 1,
            updated_at: 1,
            last_used_at: None,
            pinned: false,
        }
    }

    impl Memories for Store {
        fn write(&self, _: MemoryWrite) -> crate::core::memory::Reply<'_, ()> {
            Box::pin(async { Ok(()) })
        }

        fn note(&self, _: MemoryWrite) {}

        fn get<'a>(
            &'a self,
            _: &'a str,
        ) -> crate::core::memory::Reply<'a, Option<crate::core::memory::MemoryItem>> {
            Box::pin(async { Ok(None) })
        }

        fn list(
            &self,
            _: MemoryFilter,
        ) -> crate::core::memory::Reply<'_, Vec<crate::core::memory::MemoryItem>> {
            let broken = self.broken;
            Box::pin(async move {
                if broken {
                    return Err(crate::core::memory::MemoryError::Backend(
                        "disk I/O error".into(),
                    ));
                }
                Ok(vec![crate::core::memory::MemoryItem {
                    pinned: true,
                    ..saved()
                }])
            })
        }

        fn search(
            &self,
            _: MemorySearch,
        ) -> crate::core::memory::Reply<'_, Vec<crate::core::memory::MemoryHit>> {
            let broken = self.broken;
            Box::pin(async move {
                if broken {
                    return Err(crate::core::memory::MemoryError::Backend(
                        "disk I/O error".into(),
                    ));
                }
                Ok(vec![crate::core::memory::MemoryHit {
                    item: saved(),
                    relevance: 1.0,
                }])
            })
        }

        fn unembedded<'a>(
            &'a self,
            _: &'a str,
            _: usize,
        ) -> crate::core::memory::Reply<'a, Vec<crate::core::memory::MemoryItem>> {
            Box::pin(async { Ok(Vec::new()) })
        }
    }

    /// A store that fails leaves the turn without recalled or pinned items,
    /// and the turn goes on; the same store reading well gives both.
    #[tokio::test]
    async fn a_failing_memory_store_leaves_the_turn_without_recall() {
        let messages = vec![Message::User {
            content: vec![ContentPart::Text {
                text: "How do the tests run?".into(),
            }],
        }];
        for broken in [false, true] {
            let recall = Recall::new(
                std::sync::Arc::new(Store { broken }),
                ScopeKeys::default(),
                RecallSettings::default(),
            );
            let block = recall.block(&messages, true).await;
            let pinned = recall.pinned().await;
            if broken {
                assert_eq!(block, None);
                assert_eq!(pinned, None);
            } else {
                assert!(block.is_some_and(|b| b.contains("staging fixture")));
                assert!(pinned.is_some_and(|p| p.contains("staging fixture")));
            }
        }
    }
}
