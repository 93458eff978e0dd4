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
                .map(|p| format!("added {}\n", line(p)))
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
                        Ok(format!("{value}\n"))
                    })
                    .collect::<Result<String, Failure>>()?
            } else if plugins.is_empty() {
                "No plugin is installed (add one: `pincer plugin add PATH`).\n".to_owned()
            } else {
                plugins.iter().map(|p| format!("{}\n", line(p))).collect()
            }
        }
        PluginCommand::Enable { name } => {
            format!(
                "enabled {}\n",
                line(&store.set_enabled(name, true).map_err(failure)?)
            )
        }
        PluginCommand::Disable { name } => {
            format!(
                "disabled {}\n",
                line(&store.set_enabled(name, false).map_err(failure)?)
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

/// `name version (off): N skill folders, commands, hooks, MCP servers`.
fn line(plugin: &Installed) -> String {
    let mut parts = Vec::new();
    let count = |n: usize, one: &str, many: &str| match n {
        1 => format!("1 {one}"),
        n => format!("{n} {many}"),
    };
    if !plugin.skills.is_empty() {
        parts.push(count(
            plugin.skills.len(),
            "skills folder",
            "skills folders",
        ));
    }
    if !plugin.commands.is_empty() {
        parts.push(count(
            plugin.commands.len(),
            "commands folder",
            "commands folders",
        ));
    }
    if plugin.hooks.is_some() {
        parts.push("hooks".to_owned());
    }
    if plugin.mcp_servers.is_some() {
        parts.push("MCP servers".to_owned());
    }
    let version = plugin
        .version
        .as_deref()
        .map(|v| format!(" {v}"))
        .unwrap_or_default();
    let state = if plugin.enabled { "" } else { " (disabled)" };
    let brings = if parts.is_empty() {
        "nothing Pincer uses".to_owned()
    } else {
        parts.join(", ")
    };
    format!("{}{version}{state}: {brings}", plugin.name)
}
