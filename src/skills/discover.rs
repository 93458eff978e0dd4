//! Finding skills on disk: [`Discovery`] implements the core's `Skills`
//! port. Project scope is `.agents/skills/`, `.pincer/skills/` and
//! `.claude/skills/` in the workspace and each directory above it up to the
//! repository root (the nearest `.git`; without one, the workspace only),
//! nearest first; user scope is `~/.agents/skills/`, the config directory's
//! `skills/`, `~/.claude/skills/` and `[skills] paths`; plugin scope is the
//! skill folders of the enabled plugins (`crate::plugins`), their skills
//! named `PLUGIN:SKILL` as Claude Code names them. A skill is a folder
//! holding a file named exactly `SKILL.md`, directly in a root or under
//! grouping folders (at most [`MAX_DEPTH`] deep, [`MAX_DIRS`] folders per
//! root; `.git`, `node_modules` and hidden folders skipped).
//!
//! Custom commands (`super::commands`) are found beside them, in the same
//! scopes, and cached with them; an enabled plugin's command folders
//! (`Settings::plugin_commands`) bring commands named `PLUGIN:NAME`.
//!
//! What a workspace has is kept, with the modification times of the
//! folders read and of each `SKILL.md` seen; each ask stats those (no
//! directory walk) and scans again only when one changed, so asking before
//! every model turn costs little and an edit is seen at the next ask.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::SystemTime;

use parking_lot::Mutex;

use super::parse::{self, Parsed};
use super::validate::{MAX_DESCRIPTION_CHARS, name_is_valid};
use crate::core::skills::{Command, Diagnostic, Scope, Skill, SkillSet, Skills};

/// How deep under a root a skill's folder may be (1: directly in it).
pub const MAX_DEPTH: usize = 4;
/// Most folders looked at under one root; past it, a diagnostic.
pub const MAX_DIRS: usize = 2000;
/// Most workspaces whose skills are kept.
const CACHED_WORKSPACES: usize = 32;
/// The project-scope folders, in each directory from the workspace up.
pub const PROJECT_DIRS: [&str; 3] = [".agents/skills", ".pincer/skills", ".claude/skills"];

/// Where to look besides the workspace, from the configuration.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Settings {
    /// The person's home (`~/.agents/skills/`, `~/.claude/skills/`).
    pub home: Option<PathBuf>,
    /// The directory of the config file in use (its `skills/`).
    pub config_dir: Option<PathBuf>,
    /// `[skills] paths`: more user-scope roots, absolute.
    pub paths: Vec<PathBuf>,
    /// `[skills] disabled`: names left out wherever they are found.
    pub disabled: Vec<String>,
    /// The enabled plugins' skills: (plugin name, a folder holding skills
    /// or a skill folder itself), from `plugins::Store::parts`. Their
    /// skills are named `PLUGIN:SKILL`, as Claude Code names them.
    pub plugins: Vec<(String, PathBuf)>,
    /// The enabled plugins' command folders, (plugin name, folder): their
    /// commands are named `PLUGIN:NAME`.
    pub plugin_commands: Vec<(String, PathBuf)>,
}

impl Settings {
    /// The user-scope roots, in order.
    pub fn user_roots(&self) -> Vec<PathBuf> {
        let mut roots = Vec::new();
        if let Some(home) = &self.home {
            roots.push(home.join(".agents/skills"));
        }
        if let Some(dir) = &self.config_dir {
            roots.push(dir.join("skills"));
        }
        if let Some(home) = &self.home {
            roots.push(home.join(".claude/skills"));
        }
        roots.extend(self.paths.iter().cloned());
        dedup(roots)
    }
}

/// The project-scope roots of `workspace`, nearest first.
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

fn dedup(roots: Vec<PathBuf>) -> Vec<PathBuf> {
    let mut seen = Vec::with_capacity(roots.len());
    for root in roots {
        if !seen.contains(&root) {
            seen.push(root);
        }
    }
    seen
}

/// The skills port over the file system, with its cache.
pub struct Discovery {
    settings: Settings,
    cache: Mutex<Cache>,
}

#[derive(Default)]
struct Cache {
    entries: HashMap<PathBuf, Entry>,
    tick: u64,
}

struct Entry {
    stamps: Vec<Stamp>,
    found: Found,
    /// The sets built from `found`: untrusted, trusted.
    sets: [Option<Arc<SkillSet>>; 2],
    used: u64,
}

/// What a scan found, before trust and collisions, in the order found.
#[derive(Debug, Default)]
pub(super) struct Found {
    pub(super) skills: Vec<Skill>,
    pub(super) commands: Vec<Command>,
    /// Each with whether it is about a project root.
    pub(super) diagnostics: Vec<(bool, Diagnostic)>,
}

/// A path as it was: a folder's modification time, a file's time and size.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Stamp {
    path: PathBuf,
    file: bool,
    seen: Option<(SystemTime, u64)>,
}

impl Stamp {
    pub(super) fn of(path: &Path, file: bool) -> Stamp {
        let seen = std::fs::metadata(path).ok().map(|meta| {
            let time = meta.modified().unwrap_or(SystemTime::UNIX_EPOCH);
            (time, if file { meta.len() } else { 0 })
        });
        Stamp {
            path: path.to_path_buf(),
            file,
            seen,
        }
    }

    fn current(&self) -> bool {
        *self == Stamp::of(&self.path, self.file)
    }
}

impl Discovery {
    pub fn new(settings: Settings) -> Self {
        Self {
            settings,
            cache: Mutex::new(Cache::default()),
        }
    }

    /// Scans every root of `workspace`.
    fn scan(&self, workspace: &Path) -> (Found, Vec<Stamp>) {
        let user = self.settings.user_roots();
        let project: Vec<PathBuf> = project_roots(workspace)
            .into_iter()
            .filter(|root| !user.contains(root))
            .collect();
        let mut scan = Scan::default();
        for root in &project {
            scan.root(root, &Scope::Project, false);
        }
        for root in &user {
            let lone = self.settings.paths.contains(root);
            scan.root(root, &Scope::User, lone);
        }
        for (plugin, root) in &self.settings.plugins {
            let scope = Scope::Plugin {
                plugin: plugin.clone(),
            };
            scan.root(root, &scope, true);
        }
        let user_commands = super::commands::user_roots(&self.settings);
        for root in super::commands::project_roots(workspace) {
            if !user_commands.contains(&root) {
                scan.commands(&root, &Scope::Project);
            }
        }
        for root in &user_commands {
            scan.commands(root, &Scope::User);
        }
        for (plugin, dir) in &self.settings.plugin_commands {
            let scope = Scope::Plugin {
                plugin: plugin.clone(),
            };
            scan.commands(dir, &scope);
        }
        let Scan {
            mut found, stamps, ..
        } = scan;
        let disabled = &self.settings.disabled;
        found.skills.retain(|s| !disabled.contains(&s.name));
        found.commands.retain(|c| !disabled.contains(&c.name));
        (found, stamps)
    }
}

impl Skills for Discovery {
    fn for_workspace(&self, workspace: &Path, project_trusted: bool) -> Arc<SkillSet> {
        let workspace = workspace
            .canonicalize()
            .unwrap_or_else(|_| workspace.to_path_buf());
        let mut cache = self.cache.lock();
        cache.tick += 1;
        let tick = cache.tick;
        let fresh = cache
            .entries
            .get(&workspace)
            .is_some_and(|entry| entry.stamps.iter().all(Stamp::current));
        if !fresh {
            let (found, stamps) = self.scan(&workspace);
            if cache.entries.len() >= CACHED_WORKSPACES
                && !cache.entries.contains_key(&workspace)
                && let Some(oldest) = cache
                    .entries
                    .iter()
                    .min_by_key(|(_, e)| e.used)
                    .map(|(k, _)| k.clone())
            {
                cache.entries.remove(&oldest);
            }
            cache.entries.insert(
                workspace.clone(),
                Entry {
                    stamps,
                    found,
                    sets: [None, None],
                    used: tick,
                },
            );
        }
        let Some(entry) = cache.entries.get_mut(&workspace) else {
            return Arc::new(SkillSet::default());
        };
        entry.used = tick;
        let slot = &mut entry.sets[usize::from(project_trusted)];
        if let Some(set) = slot {
            return set.clone();
        }
        let set = Arc::new(build(&entry.found, project_trusted));
        *slot = Some(set.clone());
        set
    }

    fn instructions(&self, skill: &Skill) -> Result<String, String> {
        super::instructions(skill)
    }
}

/// The skills of one plugin's folders as discovery finds them, with what
/// it noticed (`pincer plugin list`, `pincer doctor`).
pub fn plugin_skills(plugin: &str, folders: &[PathBuf]) -> SkillSet {
    let scope = Scope::Plugin {
        plugin: plugin.to_owned(),
    };
    let mut scan = Scan::default();
    for root in folders {
        scan.root(root, &scope, true);
    }
    build(&scan.found, false)
}

/// The set a session sees: the project's skills and commands only when
/// trusted, project over plugin over user on a name collision; the user's
/// and the plugins' always.
fn build(found: &Found, project_trusted: bool) -> SkillSet {
    let mut set = SkillSet::default();
    set.diagnostics.extend(
        found
            .diagnostics
            .iter()
            .filter(|(project, _)| project_trusted || !project)
            .map(|(_, d)| d.clone()),
    );
    let offered = |scope: &Scope| project_trusted || *scope != Scope::Project;
    for skill in found.skills.iter().filter(|s| offered(&s.scope)) {
        set.add(skill.clone());
    }
    for command in found.commands.iter().filter(|c| offered(&c.scope)) {
        set.add_command(command.clone());
    }
    set.note_shadowed();
    set
}

/// One scan's state.
#[derive(Default)]
pub(super) struct Scan {
    pub(super) found: Found,
    pub(super) stamps: Vec<Stamp>,
    pub(super) dirs: usize,
    pub(super) over: bool,
}

impl Scan {
    /// The skills under `root`; `lone`: `root` may itself be a skill.
    fn root(&mut self, root: &Path, scope: &Scope, lone: bool) {
        self.stamps.push(Stamp::of(root, false));
        if !root.is_dir() {
            return;
        }
        self.dirs = 0;
        self.over = false;
        let file = root.join("SKILL.md");
        if lone && file.is_file() {
            self.stamps.push(Stamp::of(&file, true));
            self.skill(&file, scope);
            return;
        }
        self.walk(root, 1, scope);
    }

    fn walk(&mut self, dir: &Path, depth: usize, scope: &Scope) {
        let Ok(read) = std::fs::read_dir(dir) else {
            return;
        };
        let mut children: Vec<PathBuf> = read
            .filter_map(Result::ok)
            .filter(|entry| {
                let name = entry.file_name();
                let name = name.to_string_lossy();
                !name.starts_with('.') && name != "node_modules"
            })
            .map(|entry| entry.path())
            .filter(|path| path.is_dir())
            .collect();
        children.sort();
        for child in children {
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
                    format!("stopped looking for skills after {MAX_DIRS} folders"),
                );
                return;
            }
            let file = child.join("SKILL.md");
            if file.is_file() {
                self.stamps.push(Stamp::of(&file, true));
                self.skill(&file, scope);
            } else if depth < MAX_DEPTH {
                self.stamps.push(Stamp::of(&child, false));
                self.walk(&child, depth + 1, scope);
            }
        }
    }

    pub(super) fn note(&mut self, location: &Path, scope: &Scope, skipped: bool, message: String) {
        self.found.diagnostics.push((
            *scope == Scope::Project,
            Diagnostic {
                location: location.to_path_buf(),
                skipped,
                message,
            },
        ));
    }

    /// Reads the skill of `file` leniently.
    fn skill(&mut self, file: &Path, scope: &Scope) {
        let folder = file
            .parent()
            .and_then(Path::file_name)
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let parsed = match std::fs::read_to_string(file) {
            Ok(text) => parse::parse(&text).map_err(|err| err.to_string()),
            Err(err) => Err(format!("cannot read SKILL.md: {err}")),
        };
        let (skill, notes) = match parsed {
            Ok(parsed) => lenient(parsed, &folder, file, scope.clone()),
            Err(message) => (None, vec![message]),
        };
        let skipped = skill.is_none();
        for message in notes {
            self.note(file, scope, skipped, message);
        }
        if let Some(skill) = skill {
            self.found.skills.push(skill);
        }
    }
}

/// The client guide's lenient rules: no description skips the skill; a
/// name that breaks the format's rules or differs from its folder is a
/// warning.
fn lenient(
    parsed: Parsed,
    folder: &str,
    file: &Path,
    scope: Scope,
) -> (Option<Skill>, Vec<String>) {
    let mut notes = Vec::new();
    let Some(description) = parsed.description.filter(|d| !d.is_empty()) else {
        return (
            None,
            vec!["no description: a skill needs one to be offered".into()],
        );
    };
    if parsed.repaired {
        notes.push(
            "frontmatter is not valid YAML: read with values holding `: ` taken as text".into(),
        );
    }
    let name = match parsed.name.filter(|n| !n.is_empty()) {
        Some(name) => name,
        None => {
            notes.push(format!("no name: named after its folder `{folder}`"));
            folder.to_owned()
        }
    };
    let shown = crate::core::quote::quote(&name);
    if !name_is_valid(&name) {
        notes.push(format!(
            "name `{shown}` breaks the format's rules (at most 64 lowercase letters, digits and single hyphens)"
        ));
    } else if name != folder {
        notes.push(format!(
            "name `{shown}` does not match its folder `{folder}`"
        ));
    }
    if description.chars().count() > MAX_DESCRIPTION_CHARS {
        notes.push(format!(
            "description is longer than {MAX_DESCRIPTION_CHARS} characters"
        ));
    }
    // A plugin's skills are its own: `PLUGIN:SKILL`, so they never collide
    // with the person's or the project's, nor with another plugin's.
    let name = match &scope {
        Scope::Plugin { plugin } => format!("{plugin}:{name}"),
        Scope::Project | Scope::User => name,
    };
    let skill = Skill {
        name,
        description,
        location: file.to_path_buf(),
        scope,
        allowed_tools: parsed.allowed_tools,
        person_only: parsed.person_only,
    };
    (Some(skill), notes)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(path: &Path, text: &str) {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }

    fn skill_md(name: &str, description: &str) -> String {
        format!("---\nname: {name}\ndescription: {description}\n---\nbody of {name}\n")
    }

    fn settings(home: &Path) -> Settings {
        Settings {
            home: Some(home.to_path_buf()),
            config_dir: Some(home.join(".config/pincer")),
            paths: Vec::new(),
            disabled: Vec::new(),
            plugins: Vec::new(),
            plugin_commands: Vec::new(),
        }
    }

    #[test]
    fn project_and_user_roots_are_found_in_order() {
        let tmp = tempfile::tempdir().unwrap();
        let repo = tmp.path().join("repo");
        let ws = repo.join("sub/ws");
        std::fs::create_dir_all(repo.join(".git")).unwrap();
        std::fs::create_dir_all(&ws).unwrap();
        let roots = project_roots(&ws);
        assert_eq!(roots.len(), 9);
        assert_eq!(roots[0], ws.join(".agents/skills"));
        assert_eq!(roots[8], repo.join(".claude/skills"));
        // Without a repository, the workspace only.
        let lone = tmp.path().join("lone");
        assert_eq!(project_roots(&lone).len(), 3);
        let home = tmp.path().join("home");
        let user = Settings {
            paths: vec![home.join("more")],
            ..settings(&home)
        }
        .user_roots();
        assert_eq!(
            user,
            [
                home.join(".agents/skills"),
                home.join(".config/pincer/skills"),
                home.join(".claude/skills"),
                home.join("more"),
            ]
        );
    }

    #[test]
    fn skills_are_found_grouped_trusted_and_shadowed() {
        let tmp = tempfile::tempdir().unwrap();
        let home = tmp.path().join("home");
        let ws = tmp.path().join("ws");
        write(
            &ws.join(".agents/skills/review/SKILL.md"),
            &skill_md("review", "Project review."),
        );
        write(
            &ws.join(".claude/skills/group/deeper/lint/SKILL.md"),
            &skill_md("lint", "Lints."),
        );
        write(
            &ws.join(".claude/skills/node_modules/x/SKILL.md"),
            &skill_md("x", "Hidden."),
        );
        write(
            &ws.join(".claude/skills/.hidden/y/SKILL.md"),
            &skill_md("y", "Hidden."),
        );
        write(
            &ws.join(".claude/skills/a/b/c/d/too-deep/SKILL.md"),
            &skill_md("too-deep", "Too deep."),
        );
        write(
            &home.join(".claude/skills/review/SKILL.md"),
            &skill_md("review", "User review."),
        );
        write(
            &home.join(".agents/skills/Bad_Name/SKILL.md"),
            &skill_md("Bad_Name", "Loaded anyway."),
        );
        write(
            &home.join(".agents/skills/empty/SKILL.md"),
            "---\nname: empty\n---\n",
        );
        write(&home.join(".agents/skills/notes/README.md"), "not a skill");
        let discovery = Discovery::new(settings(&home));
        let trusted = discovery.for_workspace(&ws, true);
        let names: Vec<&str> = trusted.skills.keys().map(String::as_str).collect();
        assert_eq!(names, ["Bad_Name", "lint", "review"]);
        assert_eq!(
            trusted.get("review").unwrap().description,
            "Project review."
        );
        assert_eq!(trusted.get("review").unwrap().scope, Scope::Project);
        let messages: Vec<String> = trusted
            .diagnostics
            .iter()
            .map(|d| format!("{} {}", d.skipped, d.message))
            .collect();
        for expected in [
            "true no description",
            "false name `Bad_Name` breaks",
            "true skill `review` is shadowed",
        ] {
            assert!(
                messages.iter().any(|m| m.starts_with(expected)),
                "{expected}: {messages:?}"
            );
        }
        // Untrusted: the user's own only.
        let untrusted = discovery.for_workspace(&ws, false);
        let names: Vec<&str> = untrusted.skills.keys().map(String::as_str).collect();
        assert_eq!(names, ["Bad_Name", "review"]);
        assert_eq!(untrusted.get("review").unwrap().scope, Scope::User);
        // Disabled by name.
        let discovery = Discovery::new(Settings {
            disabled: vec!["review".into()],
            ..settings(&home)
        });
        assert!(discovery.for_workspace(&ws, true).get("review").is_none());
    }

    #[test]
    fn a_change_on_disk_is_seen_at_the_next_ask_and_nothing_else_rescans() {
        let tmp = tempfile::tempdir().unwrap();
        let home = tmp.path().join("home");
        let ws = tmp.path().join("ws");
        std::fs::create_dir_all(&ws).unwrap();
        let discovery = Discovery::new(settings(&home));
        assert!(discovery.for_workspace(&ws, true).is_empty());
        // A root created, with a skill.
        let file = ws.join(".pincer/skills/one/SKILL.md");
        write(&file, &skill_md("one", "First."));
        let first = discovery.for_workspace(&ws, true);
        assert_eq!(first.get("one").unwrap().description, "First.");
        // Unchanged: the same set, not rebuilt.
        assert!(Arc::ptr_eq(&first, &discovery.for_workspace(&ws, true)));
        // Changed: its description.
        write(&file, &skill_md("one", "Second, longer."));
        assert_eq!(
            discovery
                .for_workspace(&ws, true)
                .get("one")
                .unwrap()
                .description,
            "Second, longer."
        );
        // Added under a grouping folder, then beside it.
        write(
            &home.join(".agents/skills/group/two/SKILL.md"),
            &skill_md("two", "Two."),
        );
        assert!(discovery.for_workspace(&ws, true).get("two").is_some());
        write(
            &home.join(".agents/skills/group/three/SKILL.md"),
            &skill_md("three", "Three."),
        );
        assert!(discovery.for_workspace(&ws, true).get("three").is_some());
        // Removed.
        std::fs::remove_dir_all(ws.join(".pincer/skills/one")).unwrap();
        let now = discovery.for_workspace(&ws, true);
        assert!(now.get("one").is_none());
        assert_eq!(now.skills.len(), 2);
    }

    #[test]
    fn plugin_skills_are_named_after_their_plugin_and_offered_untrusted() {
        let tmp = tempfile::tempdir().unwrap();
        let home = tmp.path().join("home");
        let ws = tmp.path().join("ws");
        std::fs::create_dir_all(&ws).unwrap();
        let kit = tmp.path().join("store/kit");
        write(
            &kit.join("skills/review/SKILL.md"),
            &skill_md("review", "Plugin review."),
        );
        write(
            &kit.join("skills/lint/SKILL.md"),
            &skill_md("lint", "Plugin lint."),
        );
        // A marketplace entry names skill folders themselves.
        let art = tmp.path().join("store/examples/skills/art");
        write(&art.join("SKILL.md"), &skill_md("art", "Art."));
        write(
            &home.join(".agents/skills/review/SKILL.md"),
            &skill_md("review", "User review."),
        );
        let discovery = Discovery::new(Settings {
            plugins: vec![
                ("kit".into(), kit.join("skills")),
                ("examples".into(), art.clone()),
            ],
            ..settings(&home)
        });
        let set = discovery.for_workspace(&ws, false);
        let names: Vec<&str> = set.skills.keys().map(String::as_str).collect();
        assert_eq!(names, ["examples:art", "kit:lint", "kit:review", "review"]);
        let review = set.get("kit:review").unwrap();
        assert_eq!(
            review.scope,
            Scope::Plugin {
                plugin: "kit".into()
            }
        );
        assert_eq!(review.description, "Plugin review.");
        assert!(set.diagnostics.is_empty(), "{:?}", set.diagnostics);
        // Two folders of one plugin with a skill of the same name: the
        // first wins, the other is a diagnostic.
        write(
            &kit.join("more/review/SKILL.md"),
            &skill_md("review", "Again."),
        );
        let discovery = Discovery::new(Settings {
            plugins: vec![
                ("kit".into(), kit.join("skills")),
                ("kit".into(), kit.join("more")),
            ],
            disabled: vec!["kit:lint".into()],
            ..settings(&home)
        });
        let set = discovery.for_workspace(&ws, true);
        assert_eq!(set.get("kit:review").unwrap().description, "Plugin review.");
        assert!(set.get("kit:lint").is_none());
        assert!(
            set.diagnostics
                .iter()
                .any(|d| d.message.starts_with("skill `kit:review` is shadowed")),
            "{:?}",
            set.diagnostics
        );
    }

    #[test]
    fn scanning_stops_past_its_bound_with_a_diagnostic() {
        let tmp = tempfile::tempdir().unwrap();
        let home = tmp.path().join("home");
        let ws = tmp.path().join("ws");
        let root = ws.join(".agents/skills");
        for n in 0..=MAX_DIRS {
            std::fs::create_dir_all(root.join(format!("d{n:05}"))).unwrap();
        }
        let set = Discovery::new(settings(&home)).for_workspace(&ws, true);
        assert!(
            set.diagnostics
                .iter()
                .any(|d| d.message.contains("after 2000 folders")),
            "{:?}",
            set.diagnostics
        );
    }
}
