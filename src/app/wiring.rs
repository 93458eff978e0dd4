//! Configuration → parts: every place that reads the configuration and
//! builds something from it is here, so the parts themselves (tools,
//! providers, MCP, channels, the HTTP face) never see the configuration and
//! get typed settings instead.

pub mod courier;
mod providers;
pub mod schedules;
mod tools;

use std::net::SocketAddr;
use std::num::NonZeroU32;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context as _, anyhow};

use super::Failure;
use crate::channels::{Adapter, ChannelSettings, telegram, webhook};
use crate::cli::ServeArgs;
use crate::config::{ChannelConfig, Config, HooksConfig, Platform};
use crate::core::budget::Budgets;
use crate::core::memory::RecallSettings;
use crate::core::policy::DEFAULT_FORBIDDEN;
use crate::core::prompt::PromptSettings;
use crate::core::runtime::{PathsConfig, RuntimeConfig};
use crate::core::turn::LoopConfig;
use crate::hooks::HookSettings;
use crate::http::limit::RateLimit;
use crate::http::{HttpOptions, auth};
use crate::mcp::{McpSettings, ServerSpec, Transport, sanitize};

pub use providers::{Access, access, build as providers, build_with as providers_with, embedder};
pub use tools::gate;

/// Where `--http` listens when given no address and `[http] bind` is unset.
pub const DEFAULT_BIND: &str = "127.0.0.1:8787";
/// Default largest request body, in bytes.
pub const DEFAULT_BODY_LIMIT: usize = 1024 * 1024;
pub const DEFAULT_RATE_PER_MINUTE: u32 = 600;
pub const DEFAULT_RATE_BURST: u32 = 100;

/// The runtime's own settings: the agent loop's limits and prompt, the
/// default mode, and the path boundary every session gets.
pub fn runtime_config(config: &Config) -> RuntimeConfig {
    let mut forbidden: Vec<String> = DEFAULT_FORBIDDEN.iter().map(|p| (*p).to_owned()).collect();
    forbidden.extend(config.paths.forbidden.iter().cloned());
    forbidden.extend(
        own_files(config, &|name| std::env::var(name).ok())
            .into_iter()
            .map(|path| path.to_string_lossy().into_owned()),
    );
    RuntimeConfig {
        loop_config: LoopConfig {
            max_turn_requests: config.max_turn_requests.value,
            prompt: PromptSettings {
                system_prompt: config.system_prompt.as_ref().map(|p| p.value.clone()),
                instructions: config.instructions.as_ref().map(|i| i.value.clone()),
            },
            context_tokens: config.context_window.as_ref().map(|c| c.value),
            models: config.catalog.clone(),
            loop_guard: config
                .loop_guard
                .unwrap_or(LoopConfig::default().loop_guard),
            memory: recall_settings(&config.memory),
            compact_at: config
                .compact_at
                .unwrap_or(LoopConfig::default().compact_at),
            save_before_compact: config.memory.save_before_compact.unwrap_or(true),
            budgets: Budgets {
                run: config.budget.run,
                session: config.budget.session,
                daily: config.budget.daily.clone(),
                currency: config.catalog.currency.clone(),
            },
            catalogue_tokens: config
                .skills
                .catalogue_tokens
                .unwrap_or(crate::core::skills::CATALOGUE_TOKENS),
            ..LoopConfig::default()
        },
        default_mode: config.mode.value,
        paths: PathsConfig {
            extra_roots: config.paths.extra_roots.clone(),
            forbidden,
            protected: config.paths.protected_entries(),
            home: std::env::var_os("HOME")
                .filter(|h| !h.is_empty())
                .map(PathBuf::from),
        },
        subagents: {
            let defaults = crate::core::runtime::SubagentConfig::default();
            crate::core::runtime::SubagentConfig {
                max_parallel: config
                    .subagents
                    .max_parallel
                    .unwrap_or(defaults.max_parallel),
                max_turns: config.subagents.max_turns.unwrap_or(defaults.max_turns),
            }
        },
        leases: match &config.session_lease_secs {
            Some(secs) => crate::core::runtime::LeaseTiming::lasting(
                std::time::Duration::from_secs(secs.value),
            ),
            None => crate::core::runtime::LeaseTiming::default(),
        },
        ..RuntimeConfig::default()
    }
}

/// Pincer's own files, forbidden to every tool and carved out of the
/// sandbox like `~/.ssh`: the configuration directory (the config file,
/// the credentials `pincer login` stores, the person's `AGENTS.md`), the
/// config file in use when it lies elsewhere, the data directory (the
/// database and its WAL, the HTTP token, logs), a token file configured
/// elsewhere, and the log file. From the paths actually in use.
pub fn own_files(config: &Config, env: &dyn Fn(&str) -> Option<String>) -> Vec<PathBuf> {
    let mut own: Vec<PathBuf> = Vec::new();
    if let Some(dir) = crate::credentials::path(env)
        .as_deref()
        .and_then(std::path::Path::parent)
    {
        own.push(dir.to_path_buf());
    }
    own.extend(config.file.clone());
    own.push(config.data_dir.value.clone());
    own.extend(config.http.token_file.clone());
    own.extend(crate::logging::log_file().map(std::path::Path::to_path_buf));
    let mut unique: Vec<PathBuf> = Vec::new();
    for path in own {
        let path = std::path::absolute(&path).unwrap_or(path);
        if !unique.contains(&path) {
            unique.push(path);
        }
    }
    unique
}

/// How memory is recalled, from the `[memory]` table.
fn recall_settings(memory: &crate::config::MemoryConfig) -> RecallSettings {
    let defaults = RecallSettings::default();
    RecallSettings {
        enabled: memory.enabled.unwrap_or(true) && memory.recall.unwrap_or(true),
        max_items: memory.recall_items.unwrap_or(defaults.max_items),
        budget_tokens: memory.recall_tokens.unwrap_or(defaults.budget_tokens),
        floor: memory.recall_floor.unwrap_or(defaults.floor),
        half_life_days: memory.half_life_days.unwrap_or(defaults.half_life_days),
        pinned_budget_tokens: memory
            .pinned_tokens
            .unwrap_or(defaults.pinned_budget_tokens),
    }
}

/// What the system prompt learns about the machine and the project: the
/// person's own `AGENTS.md` beside the config file, and the fallbacks.
pub fn environment_probe(config: &Config) -> crate::environment::Probe {
    let mut probe = crate::environment::Probe::default();
    probe.user_file = crate::credentials::path(&|name| std::env::var(name).ok())
        .map(|credentials| credentials.with_file_name("AGENTS.md"));
    if let Some(fallbacks) = &config.instruction_fallbacks {
        probe.fallbacks = fallbacks.clone();
    }
    probe
}

/// The skills port from `[skills]`: discovery over the project and user
/// folders (`docs/skills.md`), or none when `enabled = false`.
pub fn skills(
    config: &Config,
    env: &dyn Fn(&str) -> Option<String>,
) -> Arc<dyn crate::core::skills::Skills> {
    if config.skills.enabled == Some(false) {
        return Arc::new(crate::core::skills::NoSkills);
    }
    Arc::new(crate::skills::Discovery::new(skill_settings(config, env)))
}

/// Where skills are looked for besides the workspace: `~/` expanded,
/// relative paths taken against the config file's directory.
pub fn skill_settings(
    config: &Config,
    env: &dyn Fn(&str) -> Option<String>,
) -> crate::skills::Settings {
    let home = env("HOME").filter(|h| !h.is_empty()).map(PathBuf::from);
    let base = config
        .file
        .as_deref()
        .and_then(std::path::Path::parent)
        .map(std::path::Path::to_path_buf)
        .unwrap_or_default();
    let paths = config
        .skills
        .paths
        .iter()
        .map(|raw| match (raw.strip_prefix("~/"), &home) {
            (Some(rest), Some(home)) => home.join(rest),
            _ if raw == "~" => home.clone().unwrap_or_else(|| PathBuf::from(raw)),
            _ => base.join(raw),
        })
        .collect();
    let parts = plugin_parts(config);
    let each = |by_plugin: std::collections::BTreeMap<String, Vec<PathBuf>>| {
        by_plugin
            .into_iter()
            .flat_map(|(plugin, folders)| folders.into_iter().map(move |f| (plugin.clone(), f)))
            .collect()
    };
    let plugin_commands = each(parts.commands);
    let plugins = each(parts.skills);
    crate::skills::Settings {
        home,
        config_dir: config.config_dir.clone(),
        paths,
        disabled: config.skills.disabled.clone(),
        plugins,
        plugin_commands,
    }
}

/// What the enabled plugins of the configuration directory's `plugins/`
/// bring (`docs/plugins.md`). A store that cannot be read is a warning and
/// no plugins: it never stops a start.
pub fn plugin_parts(config: &Config) -> crate::plugins::Parts {
    let Some(dir) = &config.config_dir else {
        return crate::plugins::Parts::default();
    };
    match crate::plugins::Store::new(dir.join("plugins")).parts() {
        Ok(parts) => parts,
        Err(err) => {
            tracing::warn!(error = %err, "cannot read the installed plugins; going on without them");
            crate::plugins::Parts::default()
        }
    }
}

/// The `[hooks]` tables as the hooks runner's settings (validated when the
/// config was loaded), with the enabled plugins' hooks files.
pub fn hook_settings(config: &Config) -> HookSettings {
    let hooks: &HooksConfig = &config.hooks;
    let parts = plugin_parts(config);
    let hooks_files = parts.hooks.clone();
    HookSettings {
        import: hooks.import.clone(),
        hooks: hooks
            .all()
            .into_iter()
            .map(|(event, hook)| (event, hook.clone()))
            .collect(),
        plugins: hooks_files
            .into_iter()
            .map(|(plugin, file)| crate::hooks::PluginHooks {
                root: parts.folders.get(&plugin).cloned().unwrap_or_default(),
                plugin,
                file,
            })
            .collect(),
    }
}

/// The MCP servers of the enabled plugins, each with its plugin, and what
/// their files hold that cannot be used (logged here; `pincer doctor`
/// names it).
pub fn plugin_servers(config: &Config) -> (Vec<(String, ServerSpec)>, Vec<String>) {
    let parts = plugin_parts(config);
    let mut servers = Vec::new();
    let mut problems = Vec::new();
    for (plugin, file) in &parts.mcp_servers {
        let root = parts.folders.get(plugin).cloned().unwrap_or_default();
        let (found, wrong) = crate::plugins::mcp_servers(plugin, &root, file);
        for problem in &wrong {
            tracing::warn!(plugin = %plugin, "a plugin's MCP server is left out: {problem}");
        }
        problems.extend(wrong);
        servers.extend(found.into_iter().map(|spec| (plugin.clone(), spec)));
    }
    (servers, problems)
}

/// The configured MCP servers and limits (validated when the config was
/// loaded), then the enabled plugins' servers: on a name clash the
/// configured one (or the plugin's first) wins, with a warning.
pub fn mcp_settings(config: &Config) -> McpSettings {
    let mut servers = configured_servers(config);
    for (plugin, spec) in plugin_servers(config).0 {
        if servers.iter().any(|s| s.name == spec.name) {
            tracing::warn!(
                "plugin `{plugin}`: its MCP server `{}` has the name of the configured [mcpServers.{}]; the configured one is used",
                spec.name,
                spec.name
            );
            continue;
        }
        servers.push(spec);
    }
    let defaults = McpSettings::default();
    McpSettings {
        servers,
        call_timeout: config
            .mcp_call_timeout_secs
            .as_ref()
            .map_or(defaults.call_timeout, |t| Duration::from_secs(t.value)),
        start_timeout: config
            .mcp_start_timeout_secs
            .as_ref()
            .map_or(defaults.start_timeout, |t| Duration::from_secs(t.value)),
    }
}

/// The `[mcpServers.NAME]` tables as servers.
fn configured_servers(config: &Config) -> Vec<ServerSpec> {
    config
        .mcp_servers
        .iter()
        .map(|(name, server)| ServerSpec {
            name: sanitize(name),
            transport: match (&server.command, &server.url) {
                (_, Some(url)) => Transport::Http {
                    url: url.clone(),
                    headers: server
                        .headers
                        .iter()
                        .map(|(k, v)| (k.clone(), v.clone()))
                        .collect(),
                },
                (command, None) => Transport::Stdio {
                    command: command.clone().unwrap_or_default(),
                    args: server.args.clone(),
                    env: server
                        .env
                        .iter()
                        .map(|(k, v)| (k.clone(), v.clone()))
                        .collect(),
                },
            },
        })
        .collect()
}

/// The named channels (`--channel NAME`), each an adapter and its settings:
/// a `[channels.NAME]` table, or `telegram` / `webhook` with their defaults.
pub fn channels(
    config: &Config,
    names: &[String],
    env: &dyn Fn(&str) -> Option<String>,
) -> anyhow::Result<Vec<(Arc<dyn Adapter>, ChannelSettings)>> {
    let mut planned = Vec::new();
    for name in names {
        let table = channel_table(config, name)?;
        let common = &table.common;
        let workspace = match &common.workspace {
            Some(dir) => dir.clone(),
            None => std::env::current_dir().context("cannot read the current directory")?,
        };
        let workspace = std::fs::canonicalize(&workspace).with_context(|| {
            format!(
                "channel {name}: workspace {} is not a directory",
                workspace.display()
            )
        })?;
        let mut settings = ChannelSettings::new(workspace);
        settings.allow = common.allow.clone();
        if let Some(ms) = common.coalesce_ms {
            settings.coalesce = Duration::from_millis(ms);
        }
        if let Some(secs) = common.expire_after_secs {
            settings.expire_after = Duration::from_secs(secs);
        }
        if let Some(attempts) = common.max_attempts {
            settings.max_attempts = attempts;
        }
        if let Some(secs) = common.pairing_lockout_secs {
            settings.pairing_lockout = Duration::from_secs(secs);
        }
        if let Some(live) = common.live_drafts {
            settings.live_drafts = live;
        }
        let adapter = adapter(name, &table.platform, env)?;
        let code_var = common
            .pairing_code_env
            .clone()
            .unwrap_or_else(|| "PINCER_PAIRING_CODE".to_owned());
        settings.pairing_code = env(&code_var).filter(|c| !c.trim().is_empty());
        if settings.pairing_code.is_none() && settings.allow.is_empty() {
            let code: String = std::iter::repeat_with(fastrand::alphanumeric)
                .take(10)
                .collect();
            tracing::warn!(
                channel = %name,
                "no allowed senders are configured; senders can pair by sending: /pair {code}"
            );
            settings.pairing_code = Some(code);
        }
        tracing::info!(channel = %name, kind = table.platform.kind(), account = adapter.account(), "channel planned");
        planned.push((adapter, settings));
    }
    Ok(planned)
}

/// The `[channels.NAME]` table, or the platform `name` with its defaults.
fn channel_table(config: &Config, name: &str) -> anyhow::Result<ChannelConfig> {
    match config.channels.get(name) {
        Some(table) => Ok(table.clone()),
        None => ChannelConfig::default_for(name).ok_or_else(|| {
            let known: Vec<&str> = config.channels.keys().map(String::as_str).collect();
            anyhow!(
                "--channel {name}: no [channels.{name}] table in the config{}",
                if known.is_empty() {
                    String::new()
                } else {
                    format!(" (configured: {})", known.join(", "))
                }
            )
        }),
    }
}

/// The adapter of one channel (`pincer send`), not started: it names the
/// account and reads targets.
pub fn channel_adapter(
    config: &Config,
    name: &str,
    env: &dyn Fn(&str) -> Option<String>,
) -> anyhow::Result<Arc<dyn Adapter>> {
    adapter(name, &channel_table(config, name)?.platform, env)
}

/// The adapter of channel `name` on `platform`, its secrets read through `env`.
fn adapter(
    name: &str,
    platform: &Platform,
    env: &dyn Fn(&str) -> Option<String>,
) -> anyhow::Result<Arc<dyn Adapter>> {
    let secret = |var: String, what: &str| {
        env(&var)
            .filter(|t| !t.trim().is_empty())
            .map(|t| t.trim().to_owned())
            .ok_or_else(|| anyhow!("channel {name}: set {var} to {what}"))
    };
    Ok(match platform {
        Platform::Telegram(telegram) => {
            let token = secret(telegram.token_env(), "the bot token from @BotFather")?;
            let base = telegram
                .api_base
                .clone()
                .unwrap_or_else(|| "https://api.telegram.org".to_owned());
            let timeout = Duration::from_secs(telegram.poll_timeout_secs.unwrap_or(30));
            Arc::new(
                telegram::Telegram::new(name, &token, &base, timeout)
                    .map_err(|e| anyhow!("channel {name}: {e}"))?,
            )
        }
        Platform::Irc(irc) => {
            let password = match &irc.password_env {
                Some(var) => Some(secret(var.clone(), "the IRC password")?),
                None => None,
            };
            let tls = if irc.tls {
                let config = crate::net::tls_config(irc.tls_ca.as_deref())
                    .map_err(|e| anyhow!("channel {name}: {e}"))?;
                Some(Arc::new(config))
            } else {
                if irc.tls_ca.is_some() {
                    return Err(anyhow!("channel {name}: tls_ca is set but tls is not"));
                }
                None
            };
            let settings = crate::channels::irc::IrcSettings {
                server: irc.server.clone(),
                tls,
                nick: irc.nick.clone(),
                username: irc.username.clone().unwrap_or_else(|| irc.nick.clone()),
                password,
                channels: irc.channels.clone(),
            };
            Arc::new(
                crate::channels::irc::Irc::new(name, settings)
                    .map_err(|e| anyhow!("channel {name}: {e}"))?,
            )
        }
        Platform::Email(email) => {
            use crate::channels::email::{Email, EmailSettings, Security};
            use crate::config::channels::EmailTls;
            let password = secret(email.password_env.clone(), "the mailbox's password")?;
            let security = match email.tls {
                EmailTls::None => Security::None,
                EmailTls::Starttls => Security::StartTls,
                EmailTls::Implicit => Security::Implicit,
            };
            let tls = match security {
                Security::None => None,
                Security::StartTls | Security::Implicit => Some(Arc::new(
                    crate::net::tls_config(email.tls_ca.as_deref())
                        .map_err(|e| anyhow!("channel {name}: {e}"))?,
                )),
            };
            let settings = EmailSettings {
                imap: email.imap.clone(),
                smtp: email.smtp.clone(),
                security,
                tls,
                tls_ca: email.tls_ca.clone(),
                username: email.username.clone(),
                password,
                address: email.address.clone(),
                folder: email.folder.clone().unwrap_or_else(|| "INBOX".to_owned()),
                poll_secs: email.poll_secs.unwrap_or(30),
                authserv_id: email.authserv_id.clone(),
            };
            Arc::new(Email::new(name, settings).map_err(|e| anyhow!("channel {name}: {e}"))?)
        }
        Platform::Matrix(matrix) => {
            let credentials = match (&matrix.access_token_env, &matrix.password_env) {
                (Some(var), None) => crate::channels::matrix::Credentials::AccessToken(secret(
                    var.clone(),
                    "the Matrix access token",
                )?),
                (None, Some(var)) => crate::channels::matrix::Credentials::Password(secret(
                    var.clone(),
                    "the Matrix account's password",
                )?),
                _ => {
                    return Err(anyhow!(
                        "channel {name}: set exactly one of access_token_env and password_env"
                    ));
                }
            };
            let settings = crate::channels::matrix::MatrixSettings {
                homeserver: matrix.homeserver.clone(),
                user_id: matrix.user_id.clone(),
                credentials,
                rooms: matrix.rooms.clone(),
            };
            Arc::new(
                crate::channels::matrix::Matrix::new(name, settings)
                    .map_err(|e| anyhow!("channel {name}: {e}"))?,
            )
        }
        Platform::Discord(discord) => discord_adapter(name, discord, &secret)?,
        Platform::Slack(slack) => {
            use crate::channels::slack::{Receiving, Slack, SlackSettings};
            let bot_token = secret(slack.bot_token_env(), "the Slack bot token (xoxb-…)")?;
            let receiving = match (slack.app_token_env(), &slack.signing_secret_env) {
                (Some(var), None) => Receiving::Socket {
                    app_token: secret(var, "the Slack app-level token (xapp-…)")?,
                },
                (None, Some(var)) => Receiving::Events {
                    signing_secret: secret(var.clone(), "the Slack app's signing secret")?,
                    listen: slack.listen,
                },
                _ => {
                    return Err(anyhow!(
                        "channel {name}: set app_token_env (Socket Mode) or signing_secret_env (the Events API), not both"
                    ));
                }
            };
            let tls = crate::net::tls_config(None).map_err(|e| anyhow!("channel {name}: {e}"))?;
            let settings = SlackSettings {
                bot_token,
                receiving,
                api_base: slack
                    .api_base
                    .clone()
                    .unwrap_or_else(|| "https://slack.com/api".to_owned()),
                channels: slack.channels.clone(),
                tls: Arc::new(tls),
            };
            Arc::new(Slack::new(name, settings).map_err(|e| anyhow!("channel {name}: {e}"))?)
        }
        Platform::Webhook(webhook) => {
            let key = secret(
                webhook.secret_env(),
                "the secret shared with the peer (16 characters or more)",
            )?;
            let callback = webhook.callback_url.clone().ok_or_else(|| {
                anyhow!("channel {name}: set callback_url, where outbound messages are POSTed")
            })?;
            Arc::new(
                webhook::Webhook::new(name, &key, &callback, Duration::from_secs(30))
                    .map_err(|e| anyhow!("channel {name}: {e}"))?,
            )
        }
    })
}

/// The Discord adapter of channel `name`, its token read through `secret`.
fn discord_adapter(
    name: &str,
    discord: &crate::config::channels::DiscordConfig,
    secret: &dyn Fn(String, &str) -> anyhow::Result<String>,
) -> anyhow::Result<Arc<dyn Adapter>> {
    let token = secret(
        discord.token_env(),
        "the bot token from the Developer Portal",
    )?;
    let tls = crate::net::tls_config(None).map_err(|e| anyhow!("channel {name}: {e}"))?;
    let settings = crate::channels::discord::DiscordSettings {
        token,
        api_base: discord
            .api_base
            .clone()
            .unwrap_or_else(|| "https://discord.com/api/v10".to_owned()),
        gateway_url: discord
            .gateway_url
            .clone()
            .unwrap_or_else(|| "wss://gateway.discord.gg".to_owned()),
        guilds: discord.guilds.clone(),
        channels: discord.channels.clone(),
        tls: Arc::new(tls),
    };
    Ok(Arc::new(
        crate::channels::discord::Discord::new(name, settings)
            .map_err(|e| anyhow!("channel {name}: {e}"))?,
    ))
}

/// Where the HTTP face's token comes from.
pub fn token_place(config: &Config) -> auth::TokenPlace {
    auth::TokenPlace {
        env: config.http.token_env.clone(),
        file: config.http.token_file.clone(),
    }
}

/// What the HTTP face will do, worked out from flags and configuration.
pub struct HttpPlan {
    pub addr: SocketAddr,
    pub options: HttpOptions,
    pub token_source: auth::TokenSource,
}

pub fn http_plan(config: &Config, args: &ServeArgs) -> Result<Option<HttpPlan>, Failure> {
    let http = &config.http;
    let raw = match (&args.http, &http.bind) {
        (Some(addr), _) if !addr.is_empty() => addr.clone(),
        (Some(_), Some(bind)) | (None, Some(bind)) => bind.clone(),
        (Some(_), None) => DEFAULT_BIND.to_owned(),
        (None, None) => return Ok(None),
    };
    let addr: SocketAddr = raw.parse().map_err(|_| {
        Failure::usage(anyhow::anyhow!(
            "--http: expected an address such as 127.0.0.1:8787, got {raw:?}"
        ))
    })?;
    let allow_remote = args.allow_remote || http.allow_remote.unwrap_or(false);
    if !addr.ip().is_loopback() {
        if !allow_remote {
            return Err(Failure::usage(anyhow::anyhow!(
                "refusing to listen on {addr}, which is not a loopback address: pass --allow-remote (or set `allow_remote = true` in [http]) if you mean it"
            )));
        }
        tracing::warn!(%addr, "listening beyond loopback: anyone who can reach this address and has the token controls the agent");
    }
    let (token, token_source) =
        auth::resolve(&token_place(config), &config.data_dir.value, &|name| {
            std::env::var(name).ok()
        })
        .map_err(Failure::usage)?;
    let per_minute = http
        .rate_limit_per_minute
        .unwrap_or(DEFAULT_RATE_PER_MINUTE);
    let burst = http.rate_limit_burst.unwrap_or(DEFAULT_RATE_BURST);
    let rate_limit = match (NonZeroU32::new(per_minute), NonZeroU32::new(burst)) {
        (Some(per_minute), Some(burst)) => Some(RateLimit { per_minute, burst }),
        _ => None,
    };
    Ok(Some(HttpPlan {
        addr,
        options: HttpOptions {
            token,
            body_limit: http.body_limit_bytes.unwrap_or(DEFAULT_BODY_LIMIT),
            rate_limit,
            cors_origins: http.cors_origins.clone(),
            console: http.console.unwrap_or(true),
        },
        token_source,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn skill_paths_expand_the_home_and_follow_the_config_file() {
        let tmp = tempfile::tempdir().unwrap();
        let file = tmp.path().join("conf/config.toml");
        std::fs::create_dir_all(file.parent().unwrap()).unwrap();
        std::fs::write(
            &file,
            "[skills]\npaths = [\"~/team\", \"local\", \"/abs\"]\ndisabled = [\"x\"]\n",
        )
        .unwrap();
        let home = tmp.path().join("home");
        let env = |name: &str| match name {
            "HOME" => Some(home.to_string_lossy().into_owned()),
            _ => None,
        };
        let flags = crate::config::Flags {
            config: Some(file.clone()),
            ..Default::default()
        };
        let config = Config::load_with(&flags, &env).unwrap();
        let settings = skill_settings(&config, &env);
        assert_eq!(
            settings.paths,
            [
                home.join("team"),
                tmp.path().join("conf/local"),
                PathBuf::from("/abs")
            ]
        );
        assert_eq!(settings.config_dir, Some(tmp.path().join("conf")));
        assert_eq!(settings.home, Some(home));
        assert_eq!(settings.disabled, ["x"]);
    }

    #[test]
    fn the_enabled_plugins_parts_join_the_settings_and_a_broken_store_is_none() {
        let tmp = tempfile::tempdir().unwrap();
        let conf = tmp.path().join("conf");
        let file = conf.join("config.toml");
        std::fs::create_dir_all(&conf).unwrap();
        std::fs::write(&file, "[mcpServers.kit_clash]\ncommand = \"mine\"\n").unwrap();
        let source = tmp.path().join("kit");
        for (path, text) in [
            (".claude-plugin/plugin.json", r#"{"name": "kit"}"#),
            ("skills/a/SKILL.md", "---\nname: a\ndescription: A.\n---\n"),
            ("hooks/hooks.json", r#"{"hooks": {}}"#),
            (
                ".mcp.json",
                r#"{"mcpServers": {"clash": {"command": "theirs"}, "own": {"command": "x"}}}"#,
            ),
        ] {
            let path = source.join(path);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, text).unwrap();
        }
        let store = crate::plugins::Store::new(conf.join("plugins"));
        store.add(&source, &[]).unwrap();
        let home = tmp.path().join("home");
        let env = |name: &str| (name == "HOME").then(|| home.to_string_lossy().into_owned());
        let flags = crate::config::Flags {
            config: Some(file.clone()),
            ..Default::default()
        };
        let config = Config::load_with(&flags, &env).unwrap();
        let folder = store.folder("kit");
        assert_eq!(
            skill_settings(&config, &env).plugins,
            [("kit".to_owned(), folder.join("skills"))]
        );
        let hooks = hook_settings(&config);
        assert_eq!(hooks.plugins.len(), 1);
        assert_eq!(hooks.plugins[0].root, folder);
        assert_eq!(hooks.plugins[0].file, folder.join("hooks/hooks.json"));
        let servers: Vec<(String, String)> = mcp_settings(&config)
            .servers
            .iter()
            .map(|s| {
                let Transport::Stdio { command, .. } = &s.transport else {
                    panic!("{s:?}")
                };
                (s.name.clone(), command.clone())
            })
            .collect();
        assert_eq!(
            servers,
            [
                ("kit_clash".to_owned(), "mine".to_owned()),
                ("kit_own".to_owned(), "x".to_owned())
            ]
        );
        // Disabled: nothing; a store that cannot be read: nothing either.
        store.set_enabled("kit", false).unwrap();
        assert!(skill_settings(&config, &env).plugins.is_empty());
        assert!(hook_settings(&config).plugins.is_empty());
        assert_eq!(mcp_settings(&config).servers.len(), 1);
        std::fs::write(conf.join("plugins/plugins.toml"), "not [toml").unwrap();
        assert!(skill_settings(&config, &env).plugins.is_empty());
        assert_eq!(mcp_settings(&config).servers.len(), 1);
    }
}
