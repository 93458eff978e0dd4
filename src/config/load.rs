//! Loading: the file found and read, checked section by section, then every
//! setting resolved through the layers (`layers`) and the providers chosen
//! (`providers`); relative paths in the file are taken against its directory.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use super::layers::{Layers, file_only};
use super::{
    Config, ConfigError, DEFAULT_MAX_TURN_REQUESTS, Env, FileConfig, Flags, ModelFileConfig,
    Origin, SandboxSetting, Sourced, absolute, providers, toml_quote,
};
use crate::core::models::{ModelCatalog, ModelInfo, Price};
use crate::core::session::Mode;

impl Config {
    pub(super) fn load_unclipped(flags: &Flags, env: Env) -> Result<Self, ConfigError> {
        let path = locate(flags, env)?;
        let file = match &path {
            Some(path) => FileConfig::read(path)?,
            None => FileConfig::default(),
        };
        let origin = Origin::File(path.clone().unwrap_or_default());
        file.validate(&origin)?;
        let base = path
            .as_deref()
            .and_then(Path::parent)
            .map(Path::to_path_buf)
            .unwrap_or_default();
        let Layered {
            data_dir,
            store_url,
            max_turn_requests,
            mode,
            sandbox,
        } = Layered::resolve(flags, env, &file, &origin, &base)?;
        let choice = providers::choose(&file, &origin, &base, flags, env)?;
        let currency = Layers::new("currency")
            .file(&origin, file.currency.clone())
            .or(env, "USD".to_owned())?;
        let catalog = catalog(currency.value.trim(), &file.models, &origin)?;
        let mut paths = file.paths;
        paths.extra_roots = paths.extra_roots.iter().map(|r| base.join(r)).collect();
        let config_dir = match &path {
            Some(path) => path.parent().map(Path::to_path_buf),
            None => default_config_path(env).and_then(|p| p.parent().map(Path::to_path_buf)),
        };
        let mut http = file.http;
        http.token_file = http.token_file.map(|path| base.join(path));
        Ok(Config {
            currency_origin: currency.origin,
            file: path,
            data_dir,
            store_url,
            provider: choice.provider,
            model: choice.model,
            max_turn_requests,
            system_prompt: file_only(&origin, file.system_prompt),
            instructions: file_only(&origin, file.instructions),
            instruction_fallbacks: file.instruction_fallbacks,
            loop_guard: file.loop_guard,
            compact_at: file.compact_at,
            context_window: file_only(&origin, file.context_window),
            providers: choice.providers,
            mode,
            sandbox,
            approval_timeout_secs: file_only(&origin, file.approval_timeout_secs),
            question_timeout_secs: file_only(&origin, file.question_timeout_secs),
            tools: file.tools,
            shell: file.shell,
            paths,
            safety: file.safety,
            memory: file.memory,
            budget: file.budget,
            hooks: file.hooks,
            web: file.web,
            skills: file.skills,
            config_dir,
            subagents: file.subagents,
            models: file.models,
            catalog,
            channels: file.channels,
            http,
            mcp_servers: file.mcp_servers,
            mcp_call_timeout_secs: file_only(&origin, file.mcp_call_timeout_secs),
            mcp_start_timeout_secs: file_only(&origin, file.mcp_start_timeout_secs),
            session_lease_secs: file_only(&origin, file.session_lease_secs),
        })
    }
}

/// The top-level settings a flag and a variable may give too (the provider
/// and the model are chosen in `providers`).
struct Layered {
    data_dir: Sourced<PathBuf>,
    store_url: Option<Sourced<String>>,
    max_turn_requests: Sourced<u32>,
    mode: Sourced<Mode>,
    sandbox: Sourced<SandboxSetting>,
}

impl Layered {
    fn resolve(
        flags: &Flags,
        env: Env,
        file: &FileConfig,
        origin: &Origin,
        base: &Path,
    ) -> Result<Self, ConfigError> {
        let data_dir = Layers::new("data_dir")
            .flag("--data-dir", flags.data_dir.as_deref().map(absolute))
            .env("PINCER_DATA_DIR")
            .file(origin, file.data_dir.as_ref().map(|dir| base.join(dir)))
            .resolve(env)?;
        let data_dir = match data_dir {
            Some(dir) => dir,
            None => Sourced::new(default_data_dir(env)?, Origin::Default),
        };
        let store_url = Layers::new("store.url")
            .flag("--store", flags.store.clone())
            .env("PINCER_STORE_URL")
            .file(origin, file.store.url.clone())
            .resolve(env)?;
        if let Some(url) = &store_url {
            crate::store::Target::check_url(&url.value).map_err(|message| {
                ConfigError::Invalid {
                    origin: url.origin.clone(),
                    key: "store.url".into(),
                    message,
                }
            })?;
        }
        let max_turn_requests = Layers::new("max_turn_requests")
            .flag("--max-turn-requests", flags.max_turn_requests)
            .env("PINCER_MAX_TURN_REQUESTS")
            .file(origin, file.max_turn_requests)
            .or(env, DEFAULT_MAX_TURN_REQUESTS)?;
        if max_turn_requests.value == 0 {
            return Err(ConfigError::Invalid {
                origin: max_turn_requests.origin,
                key: "max_turn_requests".into(),
                message: "must be at least 1".into(),
            });
        }
        let mode = Layers::new("mode")
            .flag("--mode", flags.mode.clone())
            .env("PINCER_MODE")
            .file(origin, file.mode.clone())
            .resolve(env)?;
        let sandbox = Layers::new("sandbox")
            .flag("--sandbox", flags.sandbox)
            .env("PINCER_SANDBOX")
            .file(origin, file.sandbox)
            .or(env, SandboxSetting::default())?;
        Ok(Self {
            data_dir,
            store_url,
            max_turn_requests,
            mode: parse_mode(mode)?,
            sandbox,
        })
    }
}

/// The config file to read: `--config`, else `PINCER_CONFIG` (either one
/// must exist), else the default place when a file is there.
fn locate(flags: &Flags, env: Env) -> Result<Option<PathBuf>, ConfigError> {
    let named = Layers::new("config")
        .flag("--config", flags.config.as_deref().map(absolute))
        .env("PINCER_CONFIG")
        .resolve(env)?;
    Ok(match named {
        Some(path) => Some(path.value),
        None => default_config_path(env).filter(|path| path.exists()),
    })
}

fn parse_mode(raw: Option<Sourced<String>>) -> Result<Sourced<Mode>, ConfigError> {
    let Some(raw) = raw else {
        return Ok(Sourced::new(Mode::default(), Origin::Default));
    };
    match Mode::parse(&raw.value) {
        Some(mode) => Ok(Sourced::new(mode, raw.origin)),
        None => Err(ConfigError::Invalid {
            message: format!(
                "expected read_only, supervised or full, got {:?}",
                raw.value
            ),
            origin: raw.origin,
            key: "mode".into(),
        }),
    }
}

fn home(env: Env) -> Option<PathBuf> {
    env("HOME").filter(|h| !h.is_empty()).map(PathBuf::from)
}

fn default_config_path(env: Env) -> Option<PathBuf> {
    let base = env("XDG_CONFIG_HOME")
        .filter(|d| !d.is_empty())
        .map(PathBuf::from)
        .or_else(|| home(env).map(|h| h.join(".config")))?;
    Some(base.join("pincer").join("config.toml"))
}

fn default_data_dir(env: Env) -> Result<PathBuf, ConfigError> {
    let base = env("XDG_DATA_HOME")
        .filter(|d| !d.is_empty())
        .map(PathBuf::from)
        .or_else(|| home(env).map(|h| h.join(".local").join("share")))
        .ok_or(ConfigError::NoHome)?;
    Ok(base.join("pincer"))
}

/// The model catalogue from the `[models]` tables (validated): a name with
/// `*` is a pattern, which must compile.
fn catalog(
    currency: &str,
    models: &BTreeMap<String, ModelFileConfig>,
    origin: &Origin,
) -> Result<ModelCatalog, ConfigError> {
    let entries = models.iter().map(|(name, model)| {
        let price = match (model.input_price, model.output_price) {
            (Some(input), Some(output)) => Some(Price {
                input,
                output,
                cached_input: model.cached_input_price,
            }),
            _ => None,
        };
        let info = ModelInfo {
            context_window: model.context_window,
            price,
            images: model.images,
        };
        (name.clone(), info)
    });
    ModelCatalog::new(currency, entries).map_err(|err| ConfigError::Invalid {
        origin: origin.clone(),
        key: format!("models.{}", toml_quote(&err.name)),
        message: err.message,
    })
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use super::super::testing::{file_error, load, load_error, load_file, reparse};
    use super::super::{Flags, Origin, SCRIPTED};
    use super::*;
    use crate::core::policy::Rule;

    /// Found by fuzzing (`config_load`): errors echoed long values whole.
    #[test]
    fn errors_quote_long_values_briefly() {
        let long = "local-".repeat(500);
        let cases = [
            format!("provider = \"{long}\"\n"),
            format!("model = \"{long}\n"),
            format!(
                "[mcpServers.x]\nurl = \"http://127.0.0.1/mcp\"\nheaders = {{ \"{long}@\" = \"v\" }}\n"
            ),
        ];
        for file in cases {
            let err = load_file(&file).unwrap_err();
            assert!(err.len() < 2048, "{} bytes: {err}", err.len());
            assert!(err.contains("bytes)"), "{err}");
        }
    }

    #[test]
    fn mcp_servers_are_read_in_the_zed_shape() {
        let file = r#"
mcp_call_timeout_secs = 30
mcp_start_timeout_secs = 90
[mcpServers.fs]
command = "npx"
args = ["-y", "@modelcontextprotocol/server-filesystem", "/tmp"]
env = { FOO = "bar" }
[mcpServers.remote]
url = "http://127.0.0.1:3001/mcp"
headers = { Authorization = "Bearer abc" }
"#;
        let config = load_file(file).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(config.mcp_servers.len(), 2);
        assert_eq!(config.mcp_servers["fs"].command.as_deref(), Some("npx"));
        assert_eq!(config.mcp_servers["fs"].env["FOO"], "bar");
        assert_eq!(
            config.mcp_servers["remote"].url.as_deref(),
            Some("http://127.0.0.1:3001/mcp")
        );
        assert_eq!(
            config.mcp_call_timeout_secs.as_ref().map(|t| t.value),
            Some(30)
        );
        let shown = config.render().unwrap_or_else(|e| panic!("{e}"));
        assert!(shown.contains("[mcpServers.remote]"), "{shown}");
        assert!(shown.contains("[mcpServers.fs.env]"), "{shown}");
        // What is shown is valid TOML with the same servers, values hidden.
        let reparsed = reparse(&shown);
        assert_eq!(
            reparsed["mcpServers"]["fs"]["env"]["FOO"].as_str(),
            Some("[redacted]")
        );
        assert!(
            !shown.contains("Bearer abc") && !shown.contains("\"bar\""),
            "{shown}"
        );
    }

    #[test]
    fn bad_mcp_servers_are_refused_naming_the_key() {
        let cases = [
            (
                "[mcpServers.x]\nargs = [\"a\"]\n",
                "mcpServers.x: set `command`",
            ),
            (
                "[mcpServers.x]\ncommand = \"a\"\nurl = \"http://h\"\n",
                "mcpServers.x: set either",
            ),
            (
                "[mcpServers.\"a b\"]\ncommand = \"a\"\n",
                "mcpServers.a b: a server name",
            ),
            (
                "[mcpServers.x]\nurl = \"ftp://h\"\n",
                "mcpServers.x.url: expected an http",
            ),
            (
                "[mcpServers.x]\ntype = \"sse\"\nurl = \"http://h/sse\"\n",
                "mcpServers.x.type: the SSE transport is not supported",
            ),
            (
                "[mcpServers.x]\ncommand = \"a\"\nheaders = { A = \"b\" }\n",
                "mcpServers.x.headers: only a `url` server",
            ),
            (
                "[mcpServers.x]\nurl = \"http://h\"\nheaders = { \"A B\" = \"b\" }\n",
                "mcpServers.x.headers: \"A B\" is not a header name",
            ),
            (
                "[mcpServers.x]\ncommand = \"a\"\ncwd = \"/\"\n",
                "unknown field `cwd`",
            ),
            (
                "mcp_call_timeout_secs = 0\n",
                "mcp_call_timeout_secs: must be at least 1",
            ),
        ];
        for (file, expected) in cases {
            let err = file_error(file);
            assert!(
                err.contains(expected),
                "{file:?}: expected {expected:?} in {err:?}"
            );
            assert!(err.contains("c.toml"), "{err}");
        }
    }

    #[test]
    fn defaults_follow_xdg() {
        let config = load(&[], &[("XDG_DATA_HOME", "/data")], Flags::default())
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(config.data_dir.value, PathBuf::from("/data/pincer"));
        assert_eq!(config.data_dir.origin, Origin::Default);
        assert_eq!(config.max_turn_requests.value, DEFAULT_MAX_TURN_REQUESTS);
        assert!(config.provider.is_none());
    }

    #[test]
    fn flags_beat_environment_beats_file() {
        let file = "max_turn_requests = 7\ndata_dir = \"/from-file\"\n";
        let vars = [
            ("PINCER_CONFIG", "$DIR/c.toml"),
            ("PINCER_MAX_TURN_REQUESTS", "9"),
        ];
        let config =
            load(&[("c.toml", file)], &vars, Flags::default()).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(config.max_turn_requests.value, 9);
        assert_eq!(config.data_dir.value, PathBuf::from("/from-file"));
        let flags = Flags {
            max_turn_requests: Some(3),
            data_dir: Some("/from-flag".into()),
            ..Flags::default()
        };
        let config = load(&[("c.toml", file)], &vars, flags).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(config.max_turn_requests.value, 3);
        assert_eq!(config.data_dir.value, PathBuf::from("/from-flag"));
        assert_eq!(config.data_dir.origin, Origin::Flag("--data-dir"));
    }

    #[test]
    fn unknown_keys_and_bad_values_name_the_key_and_file() {
        let err = file_error("max_turns = 3\n");
        assert!(
            err.contains("c.toml") && err.contains("unknown field `max_turns`"),
            "{err}"
        );
        let err = file_error("max_turn_requests = \"lots\"\n");
        assert!(
            err.contains("c.toml") && err.contains("max_turn_requests"),
            "{err}"
        );
        let err = file_error("[providers.x]\nkind = \"scripted\"\n");
        assert!(err.contains("providers.x.script"), "{err}");
        let err = load_error(&[("PINCER_MAX_TURN_REQUESTS", "many")], Flags::default());
        assert_eq!(
            err,
            "environment variable PINCER_MAX_TURN_REQUESTS: max_turn_requests: expected a whole number, got \"many\""
        );
    }

    #[test]
    fn script_flag_makes_a_scripted_provider_and_paths_resolve_against_the_file() {
        let flags = Flags {
            script: Some("/abs/s.jsonl".into()),
            ..Flags::default()
        };
        let config = load(&[], &[], flags).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(config.provider.map(|p| p.value).as_deref(), Some(SCRIPTED));
        let file =
            "provider = \"demo\"\n[providers.demo]\nkind = \"scripted\"\nscript = \"s.jsonl\"\n";
        let config = load(
            &[("c.toml", file)],
            &[("PINCER_CONFIG", "$DIR/c.toml")],
            Flags::default(),
        )
        .unwrap_or_else(|e| panic!("{e}"));
        let script = config
            .providers
            .get("demo")
            .and_then(|p| p.value.script.clone())
            .unwrap_or_default();
        assert!(
            script.ends_with("s.jsonl") && script.is_absolute(),
            "{}",
            script.display()
        );
        let err = load_error(
            &[],
            Flags {
                provider: Some("nope".into()),
                ..Flags::default()
            },
        );
        assert!(err.contains("no provider named \"nope\""), "{err}");
    }

    #[test]
    fn tool_settings_are_read_and_bad_ones_name_the_key() {
        let vars = [("PINCER_CONFIG", "$DIR/c.toml")];
        let file = "mode = \"read_only\"\nsandbox = \"required\"\napproval_timeout_secs = 30\n\
                    [tools]\nwrite_file = \"deny\"\n[shell]\nallow = [\"cargo test\"]\n";
        let config = load_file(file).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(config.mode.value, Mode::ReadOnly);
        assert_eq!(config.sandbox.value, SandboxSetting::Required);
        assert_eq!(config.approval_timeout_secs.map(|t| t.value), Some(30));
        assert_eq!(config.tools.get("write_file"), Some(&Rule::Deny));
        assert_eq!(config.shell.allow, vec!["cargo test".to_owned()]);
        let flags = Flags {
            mode: Some("full".into()),
            ..Flags::default()
        };
        let config = load(&[("c.toml", file)], &vars, flags).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(config.mode.value, Mode::Full);
        assert_eq!(config.mode.origin, Origin::Flag("--mode"));
        for (text, fragment) in [
            (
                "mode = \"yolo\"\n",
                "mode: expected read_only, supervised or full, got \"yolo\"",
            ),
            ("sandbox = \"sometimes\"\n", "unknown variant `sometimes`"),
            ("[tools]\nshell = \"maybe\"\n", "unknown variant `maybe`"),
            (
                "[tools]\nwrite_fle = \"deny\"\n",
                "tools.write_fle: no such tool; did you mean `write_file`?",
            ),
            (
                "[tools]\nbrowse = \"deny\"\n",
                "MCP tools are named SERVER__TOOL",
            ),
            (
                "[shell]\ndeny = [\"rm | x\"]\n",
                "shell.deny: the command rule \"rm | x\" contains '|'",
            ),
            (
                "[shell]\ntimeout_secs = 0\n",
                "shell.timeout_secs: must be at least 1",
            ),
            ("[paths]\nextra = []\n", "unknown field `extra`"),
            (
                "[memory]\nrecall_floor = 1.5\n",
                "memory.recall_floor: must be between 0 and 1, got 1.5",
            ),
            (
                "[memory]\nhalf_life_days = 0\n",
                "memory.half_life_days: must be more than 0",
            ),
            ("[memory]\nrecal = false\n", "unknown field `recal`"),
            (
                "[budget]\nrun = -1\n",
                "budget.run: must be a positive amount, got -1",
            ),
            (
                "[budget.daily]\nopenai = 0\n",
                "budget.daily.openai: must be a positive amount, got 0",
            ),
        ] {
            let err = file_error(text);
            assert!(
                err.contains(fragment) && err.contains("c.toml"),
                "{text}: {err}"
            );
        }
    }

    #[test]
    fn the_http_table_is_read_shown_and_checked() {
        let file = "[http]\nbind = \"127.0.0.1:9000\"\ntoken_file = \"tok\"\nrate_limit_per_minute = 0\ncors_origins = [\"https://app.example\"]\n";
        let config = load_file(file).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(config.http.bind.as_deref(), Some("127.0.0.1:9000"));
        assert!(
            config
                .http
                .token_file
                .as_ref()
                .is_some_and(|p| p.is_absolute() && p.ends_with("tok"))
        );
        let shown = config.render().unwrap_or_else(|e| panic!("{e}"));
        assert!(shown.contains("\n[http]  # config file "), "{shown}");
        assert!(shown.contains("bind = \"127.0.0.1:9000\""), "{shown}");
        for (text, fragment) in [
            (
                "[http]\nbind = \"localhost\"\n",
                "http.bind: expected an address",
            ),
            (
                "[http]\nbody_limit_bytes = 0\n",
                "http.body_limit_bytes: must be at least 1",
            ),
            (
                "[http]\nrate_limit_burst = 0\n",
                "http.rate_limit_burst: must be at least 1",
            ),
            (
                "[http]\ncors_origins = [\"app.example\"]\n",
                "http.cors_origins: expected",
            ),
            ("[http]\ntoken = \"x\"\n", "unknown field `token`"),
        ] {
            let err = file_error(text);
            assert!(
                err.contains(fragment) && err.contains("c.toml"),
                "{text}: {err}"
            );
        }
    }

    /// Every layered setting through `load`: each one's origin is the layer
    /// that set it.
    #[test]
    fn each_setting_records_the_layer_that_set_it() {
        let file = "mode = \"read_only\"\nsandbox = \"required\"\nmax_turn_requests = 7\n";
        let vars = [
            ("PINCER_CONFIG", "$DIR/c.toml"),
            ("PINCER_MODE", "supervised"),
            ("PINCER_SANDBOX", "best_effort"),
        ];
        let config =
            load(&[("c.toml", file)], &vars, Flags::default()).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(config.mode.value, Mode::Supervised);
        assert_eq!(config.mode.origin, Origin::Env("PINCER_MODE"));
        assert_eq!(config.sandbox.value, SandboxSetting::BestEffort);
        assert_eq!(config.sandbox.origin, Origin::Env("PINCER_SANDBOX"));
        assert!(matches!(config.max_turn_requests.origin, Origin::File(_)));
        let flags = Flags {
            sandbox: Some(SandboxSetting::Required),
            ..Flags::default()
        };
        let config = load(&[("c.toml", file)], &vars, flags).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(config.sandbox.origin, Origin::Flag("--sandbox"));
        let config = load(&[], &[], Flags::default()).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(config.mode.origin, Origin::Default);
        assert_eq!(config.sandbox.origin, Origin::Default);
        assert_eq!(config.currency_origin, Origin::Default);
        assert_eq!(config.catalog.currency, "USD");
    }

    /// An empty variable is unset for every setting, `PINCER_MAX_TURN_REQUESTS`
    /// included (it was an error, unlike the others).
    #[test]
    fn empty_variables_are_unset() {
        let vars = [
            ("PINCER_MAX_TURN_REQUESTS", ""),
            ("PINCER_MODE", ""),
            ("PINCER_SANDBOX", ""),
            ("PINCER_PROVIDER", ""),
            ("PINCER_CONFIG", ""),
        ];
        let config = load(&[], &vars, Flags::default()).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(config.max_turn_requests.value, DEFAULT_MAX_TURN_REQUESTS);
        assert_eq!(config.max_turn_requests.origin, Origin::Default);
        assert!(config.provider.is_none() && config.file.is_none());
    }

    #[test]
    fn bad_layered_values_name_their_layer() {
        let vars = [("PINCER_SANDBOX", "sometimes")];
        let err = load_error(&vars, Flags::default());
        assert_eq!(
            err,
            "environment variable PINCER_SANDBOX: sandbox: expected required or best_effort, got \"sometimes\""
        );
        let flags = Flags {
            mode: Some("yolo".into()),
            ..Flags::default()
        };
        let err = load_error(&[], flags);
        assert_eq!(
            err,
            "flag --mode: mode: expected read_only, supervised or full, got \"yolo\""
        );
        let flags = Flags {
            max_turn_requests: Some(0),
            ..Flags::default()
        };
        let err = load_error(&[], flags);
        assert_eq!(
            err,
            "flag --max-turn-requests: max_turn_requests: must be at least 1"
        );
    }

    /// A named config file must exist; the default place may be empty.
    #[test]
    fn a_named_config_file_must_exist() {
        let vars = [("PINCER_CONFIG", "$DIR/missing.toml")];
        let err = load_error(&vars, Flags::default());
        assert!(
            err.starts_with("cannot read config file ") && err.contains("missing.toml"),
            "{err}"
        );
        let vars = [("XDG_CONFIG_HOME", "$DIR/nowhere")];
        let config = load(&[], &vars, Flags::default()).unwrap_or_else(|e| panic!("{e}"));
        assert!(config.file.is_none());
    }

    #[test]
    fn relative_paths_in_the_file_resolve_against_its_directory() {
        let file =
            "data_dir = \"data\"\n[paths]\nextra_roots = [\"lib\"]\n[http]\ntoken_file = \"tok\"\n";
        let config = load_file(file).unwrap_or_else(|e| panic!("{e}"));
        let dir = config
            .file
            .as_deref()
            .and_then(Path::parent)
            .map(Path::to_path_buf)
            .unwrap_or_default();
        assert_eq!(config.data_dir.value, dir.join("data"));
        assert_eq!(config.paths.extra_roots, vec![dir.join("lib")]);
        assert_eq!(config.http.token_file, Some(dir.join("tok")));
    }

    #[test]
    fn model_prices_make_the_catalogue() {
        let file = "currency = \"EUR\"\n[models.\"gpt-*\"]\ncontext_window = 1000\ninput_price = 1.0\noutput_price = 2.0\n[models.\"m\"]\nimages = true\n";
        let config = load_file(file).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(config.catalog.currency, "EUR");
        assert!(matches!(config.currency_origin, Origin::File(_)));
        let info = config.catalog.lookup("gpt-4o");
        assert_eq!(info.and_then(|i| i.context_window), Some(1000));
        assert_eq!(
            info.and_then(|i| i.price.as_ref()).map(|p| p.output),
            Some(2.0)
        );
        assert_eq!(
            config.catalog.lookup("m").and_then(|i| i.images),
            Some(true)
        );
        let err = file_error("[models.\"[x*\"]\ncontext_window = 5\n");
        assert!(err.contains("models.\"[x*\""), "{err}");
    }
}
