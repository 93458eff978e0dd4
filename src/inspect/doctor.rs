//! `pincer doctor`: a list of small checks, each of which returns what it
//! found (a [`Check`]), and one renderer. The configuration comes first: the
//! rest are not checked without it.

mod memory;
mod providers;
mod store;

use anyhow::anyhow;

use super::print;
use crate::app::{Failure, Flags, exit};
use crate::config::{Config, SandboxSetting};
use crate::sandbox::SandboxStatus;

/// What one check found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Check {
    /// What was checked (`config`, `provider NAME`, `sandbox`).
    pub name: String,
    pub status: Status,
    /// What was found, or what is wrong and how to fix it.
    pub detail: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Status {
    Ok,
    Fail,
}

impl Check {
    fn new(ok: bool, name: impl Into<String>, detail: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            status: if ok { Status::Ok } else { Status::Fail },
            detail: detail.into(),
        }
    }

    fn ok(name: impl Into<String>, detail: impl Into<String>) -> Self {
        Self::new(true, name, detail)
    }

    fn fail(name: impl Into<String>, detail: impl Into<String>) -> Self {
        Self::new(false, name, detail)
    }
}

/// `pincer doctor [--online]`: every check, printed; fails when any does
/// (with `exit::USAGE` when the configuration does not load).
pub async fn doctor(flags: &Flags, online: bool) -> Result<u8, Failure> {
    let config = match crate::app::load_config(flags) {
        Ok(config) => config,
        Err(err) => {
            print(&render(&[Check::fail("config", err.to_string())]))?;
            return Ok(exit::USAGE);
        }
    };
    let checks = checks(&config, online).await?;
    print(&render(&checks))?;
    let problems = checks.iter().filter(|c| c.status == Status::Fail).count();
    if problems > 0 {
        Err(Failure::failed(anyhow!("{problems} problem(s) found")))
    } else {
        Ok(exit::OK)
    }
}

/// Every check of a loaded configuration, in the order shown.
async fn checks(config: &Config, online: bool) -> Result<Vec<Check>, Failure> {
    let env = |name: &str| std::env::var(name).ok().filter(|v| !v.is_empty());
    let mut checks = vec![
        config_check(config.file.as_deref()),
        Check::ok("data dir", config.data_dir.value.display().to_string()),
    ];
    checks.extend(providers::checks(config, &env, online).await);
    if config.memory.enabled.unwrap_or(true) {
        checks.push(memory::check(config, &env, online).await);
    }
    checks.extend(plugin_checks(config));
    checks.extend(mcp_checks(config).await);
    checks.extend(store::checks(config).await?);
    let (ok, token) = crate::http::auth::describe(
        &crate::app::wiring::token_place(config),
        &config.data_dir.value,
        &|name| std::env::var(name).ok(),
    );
    checks.push(Check::new(ok, "http token", token));
    checks.push(sandbox_check(
        &crate::sandbox::status(),
        config.sandbox.value,
    ));
    checks.push(protected_check(
        &config.paths.protected_entries(),
        crate::sandbox::readonly::available(),
    ));
    Ok(checks)
}

/// The report: the version, then a line a check.
fn render(checks: &[Check]) -> String {
    let mut out = format!("pincer {}\n", env!("CARGO_PKG_VERSION"));
    for check in checks {
        let mark = match check.status {
            Status::Ok => "ok  ",
            Status::Fail => "FAIL",
        };
        out.push_str(&format!("{mark} {:<12} {}\n", check.name, check.detail));
    }
    out
}

/// The config file read, if any.
fn config_check(file: Option<&std::path::Path>) -> Check {
    Check::ok(
        "config",
        file.map_or_else(|| "none (defaults)".to_owned(), |p| p.display().to_string()),
    )
}

/// Where the config file is, for a fix to name.
fn config_file(config: &Config) -> String {
    config
        .file
        .as_ref()
        .map_or_else(|| "the config file".to_owned(), |p| p.display().to_string())
}

/// Each MCP server started once from the current directory, with its tools
/// counted.
async fn mcp_checks(config: &Config) -> Vec<Check> {
    let settings = crate::app::wiring::mcp_settings(config);
    if settings.servers.is_empty() {
        return Vec::new();
    }
    let (from_plugins, _) = crate::app::wiring::plugin_servers(config);
    let mcp = crate::mcp::Factory::new(settings);
    let here = std::env::current_dir().unwrap_or_else(|_| std::path::PathBuf::from("/"));
    let config_file = config_file(config);
    mcp.check(&here)
        .await
        .into_iter()
        .map(|(name, outcome)| {
            let plugin = from_plugins
                .iter()
                .find(|(_, spec)| spec.name == name)
                .filter(|_| !config.mcp_servers.keys().any(|k| crate::mcp::sanitize(k) == name))
                .map(|(plugin, _)| plugin);
            match (outcome, plugin) {
                (Ok(tools), _) => {
                    Check::ok(format!("mcp {name}"), format!("started, {tools} tools"))
                }
                (Err(problem), None) => Check::fail(
                    format!("mcp {name}"),
                    format!("{problem} (fix [mcpServers.{name}] in {config_file})"),
                ),
                (Err(problem), Some(plugin)) => Check::fail(
                    format!("mcp {name}"),
                    format!("{problem} (a server of plugin `{plugin}`: `pincer plugin disable {plugin}` turns it off)"),
                ),
            }
        })
        .collect()
}

/// Each installed plugin: what it brings, or the files of it that cannot
/// be used (a hooks or MCP servers file that is not JSON, …).
fn plugin_checks(config: &Config) -> Vec<Check> {
    let Some(dir) = &config.config_dir else {
        return Vec::new();
    };
    let store = crate::plugins::Store::new(dir.join("plugins"));
    let plugins = match store.list() {
        Ok(plugins) => plugins,
        Err(err) => return vec![Check::fail("plugins", err.to_string())],
    };
    plugins
        .iter()
        .map(|plugin| {
            let name = format!("plugin {}", plugin.name);
            if !plugin.enabled {
                return Check::ok(name, "disabled: none of its parts is loaded");
            }
            let contents = super::plugins::contents(&store, plugin);
            if contents.problems.is_empty() {
                Check::ok(name, super::plugins::summary(&contents))
            } else {
                Check::fail(name, contents.problems.join("; "))
            }
        })
        .collect()
}

/// Whether shell commands can run as `sandbox` asks: confined, or
/// unconfined when best effort allows it.
fn sandbox_check(sandbox: &SandboxStatus, setting: SandboxSetting) -> Check {
    let ok = sandbox.enforced || setting == SandboxSetting::BestEffort;
    let consequence = match (sandbox.enforced, setting) {
        (true, _) => "shell commands run confined",
        (false, SandboxSetting::BestEffort) => {
            "shell commands run unconfined (sandbox = \"best_effort\")"
        }
        (false, SandboxSetting::Required) => "shell commands are refused (sandbox = \"required\")",
    };
    Check::new(ok, "sandbox", format!("{}; {consequence}", sandbox.detail))
}

/// How the protected paths are kept from commands: read-only mounts, or
/// undone after.
fn protected_check(entries: &[String], read_only: Result<(), String>) -> Check {
    let protected = entries.join(", ");
    Check::ok(
        "protected",
        match read_only {
            Ok(()) => format!("{protected}: read-only for commands (a mount namespace each)"),
            Err(why) => format!(
                "{protected}: {why}; what a command writes there is undone after it instead"
            ),
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sandbox(enforced: bool) -> SandboxStatus {
        SandboxStatus {
            abi: enforced.then_some(4),
            enforced,
            network_rules: enforced,
            detail: if enforced {
                "Landlock ABI 4"
            } else {
                "no Landlock"
            }
            .into(),
        }
    }

    #[test]
    fn the_sandbox_fails_only_when_required_and_missing() {
        let cases = [
            (
                true,
                SandboxSetting::Required,
                Status::Ok,
                "Landlock ABI 4; shell commands run confined",
            ),
            (
                true,
                SandboxSetting::BestEffort,
                Status::Ok,
                "Landlock ABI 4; shell commands run confined",
            ),
            (
                false,
                SandboxSetting::BestEffort,
                Status::Ok,
                "no Landlock; shell commands run unconfined (sandbox = \"best_effort\")",
            ),
            (
                false,
                SandboxSetting::Required,
                Status::Fail,
                "no Landlock; shell commands are refused (sandbox = \"required\")",
            ),
        ];
        for (enforced, setting, status, detail) in cases {
            let check = sandbox_check(&sandbox(enforced), setting);
            assert_eq!(check.status, status, "{enforced} {setting:?}");
            assert_eq!(check.detail, detail);
        }
    }

    #[test]
    fn protected_paths_say_how_they_are_kept() {
        let entries = vec![".git".to_owned(), ".pincer".to_owned()];
        let check = protected_check(&entries, Ok(()));
        assert_eq!(check.status, Status::Ok);
        assert_eq!(
            check.detail,
            ".git, .pincer: read-only for commands (a mount namespace each)"
        );
        let check = protected_check(&entries, Err("no user namespaces".into()));
        assert_eq!(check.status, Status::Ok);
        assert_eq!(
            check.detail,
            ".git, .pincer: no user namespaces; what a command writes there is undone after it instead"
        );
    }

    #[test]
    fn the_report_marks_each_check_in_aligned_columns() {
        let out = render(&[
            Check::ok("config", "none (defaults)"),
            Check::fail("provider openai", "no model"),
        ]);
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(lines[0], format!("pincer {}", env!("CARGO_PKG_VERSION")));
        assert_eq!(lines[1], "ok   config       none (defaults)");
        assert_eq!(lines[2], "FAIL provider openai no model");
        assert_eq!(lines.len(), 3);
    }

    #[test]
    fn without_a_file_the_config_is_the_defaults() {
        assert_eq!(config_check(None).detail, "none (defaults)");
        assert_eq!(
            config_check(Some(std::path::Path::new("/etc/pincer.toml"))).detail,
            "/etc/pincer.toml"
        );
    }
}
