//! `pincer plugin add|list|enable|disable|rm`: the plugins installed in the
//! configuration directory's `plugins/` (`crate::plugins`).

use anyhow::anyhow;

use super::print;
use crate::app::{Failure, Flags, exit};
use crate::cli::PluginCommand;
use crate::plugins::{Installed, PluginError, Store};

pub fn plugin(flags: &Flags, command: &PluginCommand) -> Result<u8, Failure> {
    let config = crate::app::load_config(flags).map_err(Failure::usage)?;
    let dir = config.config_dir.ok_or_else(|| {
        Failure::usage(anyhow!(
            "no configuration directory: set HOME or XDG_CONFIG_HOME, or pass --config"
        ))
    })?;
    let store = Store::new(dir.join("plugins"));
    let out = match command {
        PluginCommand::Add { path, names } => {
            let added = store.add(path, names).map_err(failure)?;
            added
                .iter()
                .map(|p| format!("added {}\n", line(&store, p)))
                .collect()
        }
        PluginCommand::List { json } => {
            let plugins = store.list().map_err(failure)?;
            if *json {
                plugins
                    .iter()
                    .map(|p| {
                        let mut value = serde_json::to_value(p).map_err(Failure::failed)?;
                        value["folder"] = store.folder(&p.name).to_string_lossy().into();
                        value["parts"] = contents(&store, p).to_json();
                        Ok(format!("{value}\n"))
                    })
                    .collect::<Result<String, Failure>>()?
            } else if plugins.is_empty() {
                "No plugin is installed (add one: `pincer plugin add PATH`).\n".to_owned()
            } else {
                plugins
                    .iter()
                    .map(|p| format!("{}\n", line(&store, p)))
                    .collect()
            }
        }
        PluginCommand::Enable { name } => {
            format!(
                "enabled {}\n",
                line(&store, &store.set_enabled(name, true).map_err(failure)?)
            )
        }
        PluginCommand::Disable { name } => {
            format!(
                "disabled {}\n",
                line(&store, &store.set_enabled(name, false).map_err(failure)?)
            )
        }
        PluginCommand::Rm { name } => {
            let removed = store.remove(name).map_err(failure)?;
            format!("removed {}\n", removed.name)
        }
    };
    print(&out)?;
    Ok(exit::OK)
}

/// A problem with what the person named is theirs to fix (exit 2); a
/// failure to read or write the store is the machine's (exit 1).
fn failure(err: PluginError) -> Failure {
    match err {
        PluginError::Io { .. } => Failure::failed(err),
        PluginError::Manifest { .. }
        | PluginError::NotAPlugin(_)
        | PluginError::Installed(_)
        | PluginError::Unknown(_)
        | PluginError::NotInMarketplace { .. }
        | PluginError::NameThem { .. }
        | PluginError::RemoteSource { .. }
        | PluginError::BadName(_)
        | PluginError::TooLarge { .. }
        | PluginError::LinkOut(_) => Failure::usage(err),
    }
}

/// What an installed plugin's copy holds, read now as a session would:
/// its skills (as discovery names them), command files, hooks that run and
/// MCP servers, and what in them cannot be used (naming the file).
#[derive(Debug, Default)]
pub(crate) struct Contents {
    pub skills: Vec<String>,
    pub commands: Vec<String>,
    pub hooks: Vec<String>,
    pub mcp_servers: Vec<String>,
    /// Skills skipped or loaded with a warning, hooks left out.
    pub notes: Vec<String>,
    /// A hooks or servers file that cannot be read.
    pub problems: Vec<String>,
}

impl Contents {
    fn to_json(&self) -> serde_json::Value {
        serde_json::json!({
            "skills": self.skills,
            "commands": self.commands,
            "hooks": self.hooks,
            "mcp_servers": self.mcp_servers,
            "notes": self.notes,
            "problems": self.problems,
        })
    }
}

/// The parts of `plugin` in `store`.
pub(crate) fn contents(store: &Store, plugin: &Installed) -> Contents {
    let folder = store.folder(&plugin.name);
    let mut contents = Contents::default();
    let skill_folders: Vec<_> = plugin.skills.iter().map(|p| folder.join(p)).collect();
    let skills = crate::skills::discover::plugin_skills(&plugin.name, &skill_folders);
    contents.skills = skills.skills.keys().cloned().collect();
    contents.notes.extend(
        skills
            .diagnostics
            .iter()
            .map(|d| format!("{}: {}", d.location.display(), d.message)),
    );
    for path in &plugin.commands {
        command_files(&folder.join(path), &plugin.name, 0, &mut contents.commands);
    }
    contents.commands.sort();
    if let Some(hooks) = &plugin.hooks {
        let file = crate::hooks::plugin_file(&folder.join(hooks));
        contents.hooks = file.hooks;
        contents.notes.extend(
            file.left_out
                .into_iter()
                .map(|s| format!("{s} (not run by Pincer)")),
        );
        contents.problems.extend(file.problems);
    }
    if let Some(servers) = &plugin.mcp_servers {
        let (found, problems) =
            crate::plugins::mcp_servers(&plugin.name, &folder, &folder.join(servers));
        contents.mcp_servers = found.into_iter().map(|spec| spec.name).collect();
        contents.problems.extend(problems);
    }
    contents
}

/// The Markdown files of a commands folder (or a command file), named
/// `PLUGIN:NAME`; subfolders (at most 3 deep) group them.
fn command_files(path: &std::path::Path, plugin: &str, depth: usize, out: &mut Vec<String>) {
    if path.is_file() {
        if path.extension().is_some_and(|e| e == "md")
            && let Some(stem) = path.file_stem()
        {
            out.push(format!("{plugin}:{}", stem.to_string_lossy()));
        }
        return;
    }
    let Ok(entries) = std::fs::read_dir(path) else {
        return;
    };
    for entry in entries.filter_map(Result::ok) {
        let child = entry.path();
        if entry.file_name().to_string_lossy().starts_with('.') {
            continue;
        }
        if !child.is_dir() {
            command_files(&child, plugin, depth, out);
        } else if depth < 3 {
            command_files(&child, plugin, depth + 1, out);
        }
    }
}

/// `2 skills, 1 command, 1 hook, 1 MCP server` (the kinds it has), or
/// `nothing Pincer uses`.
pub(crate) fn summary(contents: &Contents) -> String {
    let parts: Vec<String> = [
        (contents.skills.len(), "skill", "skills"),
        (contents.commands.len(), "command", "commands"),
        (contents.hooks.len(), "hook", "hooks"),
        (contents.mcp_servers.len(), "MCP server", "MCP servers"),
    ]
    .into_iter()
    .filter(|(n, _, _)| *n > 0)
    .map(|(n, one, many)| match n {
        1 => format!("1 {one}"),
        n => format!("{n} {many}"),
    })
    .collect();
    if parts.is_empty() {
        "nothing Pincer uses".to_owned()
    } else {
        parts.join(", ")
    }
}

/// `name version (disabled): 2 skills, 1 command, 1 hook, 1 MCP server`,
/// with what cannot be used under it.
fn line(store: &Store, plugin: &Installed) -> String {
    let contents = contents(store, plugin);
    let version = plugin
        .version
        .as_deref()
        .map(|v| format!(" {v}"))
        .unwrap_or_default();
    let state = if plugin.enabled { "" } else { " (disabled)" };
    let problems: String = contents
        .problems
        .iter()
        .map(|p| format!("\n  problem: {p}"))
        .collect();
    format!(
        "{}{version}{state}: {}{problems}",
        plugin.name,
        summary(&contents)
    )
}
