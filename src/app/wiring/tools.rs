//! Configuration → the tool gate: the built-in tools with their settings
//! (the shell's sandbox, toolchains and environment), the policy rules, the
//! safety pass with every configured secret, and the approval timeout.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use crate::config::{Config, SandboxSetting, ShellConfig};
use crate::core::gate::ToolGate;
use crate::core::policy::shell::CommandRule;
use crate::core::policy::{DEFAULT_SHELL_ALLOW, DEFAULT_SHELL_DENY, PolicyRules};
use crate::core::safety::{Safety, SafetyConfig, is_secret_name};
use crate::core::tool::{Tool, Toolset};
use crate::sandbox::SandboxMode;
use crate::tools::{
    ask_user, delegate, files, memory, schedule, search, send_message, shell, skill, todo,
    toolchains, web, web_search,
};

/// How long a question to the person waits unless `question_timeout_secs`
/// says otherwise.
pub const DEFAULT_QUESTION_TIMEOUT: Duration = Duration::from_secs(600);

/// The gate every run's tool calls go through, built from the configuration.
/// `journal` keeps which workspaces' own hooks the person trusted.
pub fn gate(
    config: &Config,
    journal: Arc<dyn crate::core::journal::ChannelJournal>,
    schedules: Arc<dyn crate::core::journal::Schedules>,
) -> anyhow::Result<ToolGate> {
    let mut tools: Vec<Arc<dyn Tool>> = Vec::new();
    tools.extend(files::tools(files::FileSettings::default()));
    tools.extend(search::tools(search::SearchSettings::default()));
    tools.push(Arc::new(shell::ShellTool::new(shell_settings(config))));
    tools.push(Arc::new(todo::TodoTool));
    // Offered only to a session with skills (`CallEnv::restrict`).
    tools.push(Arc::new(skill::SkillTool));
    tools.push(Arc::new(ask_user::AskUserTool));
    if config.subagents.enabled.unwrap_or(true) {
        tools.push(Arc::new(delegate::DelegateTool));
    }
    if config.memory.enabled.unwrap_or(true) {
        tools.extend(memory::tools(
            config.memory.user_scope_unasked.unwrap_or(false),
        ));
    }
    tools.push(Arc::new(schedule::ScheduleTool::new(
        schedules,
        config.channels.keys().cloned().collect(),
    )));
    if !config.channels.is_empty() {
        let courier = super::courier::ChannelCourier::new(config.clone(), journal.clone());
        tools.push(Arc::new(send_message::SendMessageTool::new(Arc::new(
            courier,
        ))));
    }
    if config.web.enabled.unwrap_or(true) {
        tools.push(Arc::new(web::WebFetchTool::new(web_settings(config))));
        if let Some(search) = &config.web.search {
            tools.push(Arc::new(web_search_tool(search, &config.web)?));
        }
    }
    let hooks = crate::hooks::HookSet::new(&super::hook_settings(config), &|name| {
        std::env::var(name).ok()
    })?
    .with_trust(journal);
    Ok(ToolGate {
        tools: Toolset::new(tools),
        hooks: Arc::new(hooks),
        rules: rules(config),
        safety: Arc::new(safety(config)),
        approval_timeout: config
            .approval_timeout_secs
            .as_ref()
            .filter(|t| t.value > 0)
            .map(|t| std::time::Duration::from_secs(t.value)),
        question_timeout: match config.question_timeout_secs.as_ref().map(|t| t.value) {
            Some(0) => None,
            Some(secs) => Some(Duration::from_secs(secs)),
            None => Some(DEFAULT_QUESTION_TIMEOUT),
        },
    })
}

/// `[web] allow` or `deny` as rules (validated with the configuration).
fn host_rules(list: &[String]) -> Vec<crate::core::policy::HostRule> {
    list.iter()
        .filter_map(|r| crate::core::policy::HostRule::parse(r))
        .collect()
}

/// `[web]` as the `web_fetch` tool's settings (the table was validated).
fn web_settings(config: &Config) -> web::WebSettings {
    use crate::core::policy::PrivateAllow;
    let web = &config.web;
    web::WebSettings {
        allow: host_rules(&web.allow),
        deny: host_rules(&web.deny),
        allow_private: web
            .allow_private
            .iter()
            .filter_map(|e| PrivateAllow::parse(e))
            .collect(),
        max_bytes: web.max_bytes.unwrap_or(web::DEFAULT_MAX_BYTES),
        timeout: web
            .timeout_secs
            .map_or(web::DEFAULT_TIMEOUT, Duration::from_secs),
        max_redirects: web.max_redirects.unwrap_or(web::DEFAULT_MAX_REDIRECTS),
    }
}

/// `[web.search]` as the `web_search` tool (the table was validated; the
/// API key is read from the environment here).
fn web_search_tool(
    search: &crate::config::WebSearchConfig,
    web: &crate::config::WebConfig,
) -> anyhow::Result<web_search::WebSearchTool> {
    use crate::config::SearchBackend;
    use web_search::Backend;
    let url = |default: &str| -> anyhow::Result<reqwest::Url> {
        Ok(reqwest::Url::parse(
            search.url.as_deref().unwrap_or(default),
        )?)
    };
    let key = || -> anyhow::Result<String> {
        let name = search.api_key_env.as_deref().unwrap_or_default();
        std::env::var(name)
            .ok()
            .filter(|key| !key.is_empty())
            .ok_or_else(|| anyhow::anyhow!("web.search.api_key_env names {name}, which is not set"))
    };
    let backend = match search.backend {
        SearchBackend::Searxng => Backend::Searxng { base: url("")? },
        SearchBackend::Brave => Backend::Brave {
            url: url(web_search::BRAVE_URL)?,
            key: key()?,
        },
        SearchBackend::Tavily => Backend::Tavily {
            url: url(web_search::TAVILY_URL)?,
            key: key()?,
        },
    };
    Ok(web_search::WebSearchTool::new(
        backend,
        search.max_results.unwrap_or(web_search::DEFAULT_RESULTS),
        web.timeout_secs
            .map_or(web::DEFAULT_TIMEOUT, Duration::from_secs),
    ))
}

fn shell_settings(config: &Config) -> shell::ShellSettings {
    let mut settings = shell::ShellSettings::default();
    if let Some(secs) = config.shell.timeout_secs {
        settings.timeout = Duration::from_secs(secs);
        settings.max_timeout = settings.max_timeout.max(settings.timeout);
    }
    settings.network = config.shell.network.unwrap_or(false);
    settings.mode = match config.sandbox.value {
        SandboxSetting::Required => SandboxMode::Required,
        SandboxSetting::BestEffort => SandboxMode::BestEffort,
    };
    shell_home_settings(&mut settings, &config.shell, &|name| {
        std::env::var(name).ok()
    });
    settings
}

/// The toolchains under home (unless `[shell] toolchains = false`) and the
/// `[shell] env`, `read_only` and `read_write` entries, for the environment
/// `env` describes.
fn shell_home_settings(
    settings: &mut shell::ShellSettings,
    config: &ShellConfig,
    env: &dyn Fn(&str) -> Option<String>,
) {
    let mut allow = |name: &str| {
        if !settings.env_allow.iter().any(|n| n == name) {
            settings.env_allow.push(name.to_owned());
        }
    };
    let with_toolchains = config.toolchains.unwrap_or(true);
    if with_toolchains {
        for name in toolchains::TOOLCHAIN_ENV {
            allow(name);
        }
    }
    for name in &config.env {
        allow(name);
    }
    let home = env("HOME").filter(|h| !h.is_empty()).map(PathBuf::from);
    let expand = |path: &PathBuf| toolchains::expand_home(path, home.as_deref());
    if with_toolchains {
        let found = toolchains::home_toolchains(env);
        settings.extra_read_only.extend(found.read_execute);
        settings.extra_deny.extend(found.deny);
    }
    settings
        .extra_read_only
        .extend(config.read_only.iter().map(expand));
    settings
        .extra_read_write
        .extend(config.read_write.iter().map(expand));
}

fn rules(config: &Config) -> PolicyRules {
    let defaults = config.shell.default_rules.unwrap_or(true);
    let parse = |rules: &[String]| -> Vec<CommandRule> {
        // Validated when the config was loaded.
        rules
            .iter()
            .filter_map(|rule| CommandRule::parse(rule).ok())
            .collect()
    };
    let builtin = |rules: &[&str]| -> Vec<String> {
        if defaults {
            rules.iter().map(|r| (*r).to_owned()).collect()
        } else {
            Vec::new()
        }
    };
    let mut allow = builtin(DEFAULT_SHELL_ALLOW);
    allow.extend(config.shell.allow.iter().cloned());
    let mut deny = builtin(DEFAULT_SHELL_DENY);
    deny.extend(config.shell.deny.iter().cloned());
    PolicyRules {
        tools: config.tools.iter().map(|(k, v)| (k.clone(), *v)).collect(),
        shell_allow: parse(&allow),
        shell_ask: parse(&config.shell.ask),
        shell_deny: parse(&deny),
        // Validated with the configuration.
        web_allow: host_rules(&config.web.allow),
        web_deny: host_rules(&config.web.deny),
    }
}

fn safety(config: &Config) -> Safety {
    let mut settings = SafetyConfig::default();
    if let Some(max) = config.safety.max_output_bytes {
        settings.max_output_bytes = max;
    }
    // Keys stored by `pincer login` are secrets wherever they show up.
    settings.secrets.extend(
        config
            .providers
            .values()
            .filter_map(|p| p.value.api_key.clone())
            .filter(|k| !k.is_empty()),
    );
    // Values of named variables are secrets even when the name does not say so:
    // the listed ones and every provider's API key variable.
    let key_vars = config.providers.values().filter_map(|p| {
        p.value
            .api_key_env
            .clone()
            .or_else(|| p.value.kind.default_env().map(|(key, _)| key.to_owned()))
    });
    // And the credentials of the chat channels and the HTTP face, whatever
    // their variables are called: a platform's error may echo them.
    let channel_vars = config.channels.values().flat_map(|c| {
        c.platform
            .secret_vars()
            .into_iter()
            .chain(c.common.pairing_code_env.clone())
    });
    let http_vars = config.http.token_env.iter().cloned();
    for name in config
        .safety
        .secret_env
        .iter()
        .cloned()
        .chain(key_vars)
        .chain(channel_vars)
        .chain(http_vars)
    {
        if let Ok(value) = std::env::var(&name)
            && !value.is_empty()
        {
            settings.secrets.push(value);
        }
    }
    // Credentials of the configured MCP servers (env and header values).
    for server in config.mcp_servers.values() {
        let values = server.env.values().chain(server.headers.values());
        settings
            .secrets
            .extend(values.filter(|v| v.len() >= 8).cloned());
    }
    let env = std::env::vars().filter(|(name, _)| is_secret_name(name));
    Safety::new(settings, env)
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;
    use crate::sandbox::scrubbed_env;

    /// `[tools]` keys are checked against `config::BUILTIN_TOOLS`: it must
    /// name exactly the tools the gate offers.
    #[test]
    fn the_config_knows_every_builtin_tool() {
        let env = |name: &str| (name == "HOME").then(|| "/nonexistent".to_owned());
        let mut config = crate::config::Config::load_with(&crate::config::Flags::default(), &env)
            .unwrap_or_else(|e| panic!("{e}"));
        // `web_search` is offered once a backend is configured.
        config.web.search = Some(crate::config::WebSearchConfig {
            backend: crate::config::SearchBackend::Searxng,
            url: Some("http://127.0.0.1:1".into()),
            api_key_env: None,
            max_results: None,
        });
        // `send_message` once a chat channel is.
        config.channels.insert(
            "telegram".into(),
            crate::config::ChannelConfig::default_for("telegram").unwrap(),
        );
        let journal = Arc::new(crate::core::journal::memory::MemoryJournal::new());
        let gate = super::gate(&config, journal.clone(), journal).unwrap();
        let mut offered: Vec<String> = gate.tools.specs().iter().map(|s| s.name.clone()).collect();
        offered.sort();
        let mut known: Vec<String> = crate::config::BUILTIN_TOOLS
            .iter()
            .map(|n| (*n).to_owned())
            .collect();
        known.sort();
        assert_eq!(offered, known);
    }

    fn settings(config: &ShellConfig, vars: &[(&str, &str)]) -> shell::ShellSettings {
        let vars: HashMap<String, String> = vars
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        let mut settings = shell::ShellSettings::default();
        shell_home_settings(&mut settings, config, &|name| vars.get(name).cloned());
        settings
    }

    const VARS: &[(&str, &str)] = &[
        ("HOME", "/home/ann"),
        ("CARGO_HOME", "/opt/cargo"),
        ("RUSTUP_TOOLCHAIN", "stable"),
        ("LC_PAPER", "C"),
        ("PATH", "/usr/bin"),
        ("GITHUB_TOKEN", "ghp-must-not-pass"),
        ("AWS_SECRET_ACCESS_KEY", "must-not-pass"),
        ("CARGO_REGISTRY_TOKEN", "must-not-pass"),
        ("EDITOR", "vi"),
    ];

    fn env_names(settings: &shell::ShellSettings) -> Vec<String> {
        let source = VARS.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned()));
        scrubbed_env(source, &settings.env_allow)
            .into_iter()
            .map(|(name, _)| name)
            .collect()
    }

    #[test]
    fn toolchains_are_granted_and_their_variables_pass_by_default() {
        let found = settings(&ShellConfig::default(), VARS);
        assert!(found.extra_read_only.contains(&PathBuf::from("/opt/cargo")));
        assert!(
            found
                .extra_read_only
                .contains(&PathBuf::from("/home/ann/.rustup"))
        );
        assert!(found.extra_read_write.is_empty());
        assert!(
            found
                .extra_deny
                .contains(&PathBuf::from("/opt/cargo/credentials.toml"))
        );
        assert_eq!(
            env_names(&found),
            ["HOME", "CARGO_HOME", "RUSTUP_TOOLCHAIN", "LC_PAPER", "PATH"]
        );
    }

    #[test]
    fn toolchains_can_be_turned_off_and_entries_added() {
        let config = ShellConfig {
            toolchains: Some(false),
            env: vec!["EDITOR".to_owned(), "GITHUB_TOKEN".to_owned()],
            read_only: vec![PathBuf::from("~/sdk")],
            read_write: vec![PathBuf::from("~/.cache/go-build"), PathBuf::from("/srv/x")],
            ..ShellConfig::default()
        };
        let found = settings(&config, VARS);
        assert_eq!(found.extra_read_only, vec![PathBuf::from("/home/ann/sdk")]);
        assert_eq!(
            found.extra_read_write,
            vec![
                PathBuf::from("/home/ann/.cache/go-build"),
                PathBuf::from("/srv/x")
            ]
        );
        assert!(found.extra_deny.is_empty());
        // A secret-looking name never passes, even when listed.
        assert_eq!(env_names(&found), ["LC_PAPER", "PATH", "EDITOR"]);
    }
}
