//! The built-in tools: files, search and shell. Each implements the core's
//! [`Tool`](crate::core::tool::Tool) trait; the core runs the policy gate,
//! approvals, the safety pass and receipts around them.

pub mod files;
pub mod search;
pub mod shell;

use std::sync::Arc;

use crate::config::Config;
use crate::core::gate::ToolGate;
use crate::core::policy::shell::CommandRule;
use crate::core::policy::{DEFAULT_SHELL_ALLOW, DEFAULT_SHELL_DENY, PolicyRules};
use crate::core::safety::{Safety, SafetyConfig, is_secret_name};
use crate::core::tool::{Tool, Toolset};

/// The gate every run's tool calls go through, built from the configuration.
pub fn gate(config: &Config) -> ToolGate {
    let mut tools: Vec<Arc<dyn Tool>> = Vec::new();
    tools.extend(files::tools(files::FileSettings::default()));
    ToolGate {
        tools: Toolset::new(tools),
        rules: rules(config),
        safety: Arc::new(safety(config)),
        approval_timeout: config
            .approval_timeout_secs
            .as_ref()
            .filter(|t| t.value > 0)
            .map(|t| std::time::Duration::from_secs(t.value)),
    }
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
    }
}

fn safety(config: &Config) -> Safety {
    let mut settings = SafetyConfig::default();
    if let Some(max) = config.safety.max_output_bytes {
        settings.max_output_bytes = max;
    }
    // Values of named variables are secrets even when the name does not say so.
    for name in &config.safety.secret_env {
        if let Ok(value) = std::env::var(name)
            && !value.is_empty()
        {
            settings.secrets.push(value);
        }
    }
    let env = std::env::vars().filter(|(name, _)| is_secret_name(name));
    Safety::new(settings, env)
}
