//! `pincer config show`: the effective configuration as TOML that reads back
//! as a config file, each value annotated with the layer that set it, one
//! function per section. A section that cannot be written as TOML (a path
//! that is not UTF-8) is an error naming it, never left out.

use std::collections::BTreeMap;

use serde::Serialize;

use super::{Config, ConfigError, McpServerConfig, Origin, toml_quote};
use crate::core::policy::Rule;

impl Config {
    /// The effective configuration as TOML, each value annotated with its origin.
    pub fn render(&self) -> Result<String, ConfigError> {
        let note = self.file_note();
        let sections = [
            self.render_top_level(),
            self.render_limits(),
            self.render_tools(&note),
            table("shell", &self.shell, &note)?,
            table("paths", &self.paths, &note)?,
            table("safety", &self.safety, &note)?,
            table("budget", &self.budget, &note)?,
            table("memory", &self.memory, &note)?,
            table("web", &self.web, &note)?,
            table("skills", &self.skills, &note)?,
            table("subagents", &self.subagents, &note)?,
            table("hooks", &self.hooks.redacted(), &note)?,
            self.render_channels(&note)?,
            self.render_mcp_servers(&note)?,
            table("http", &self.http, &note)?,
            self.render_store(),
            self.render_models(&note)?,
            self.render_providers(),
        ];
        Ok(sections.concat())
    }

    /// Where the tables came from: the file, or nowhere.
    fn file_note(&self) -> String {
        match &self.file {
            Some(path) => format!("config file {}", path.display()),
            None => "default".to_owned(),
        }
    }

    /// The file read, and the top-level settings every layer may give.
    fn render_top_level(&self) -> String {
        let mut out = match &self.file {
            Some(path) => format!("# config file: {}\n", path.display()),
            None => "# config file: none (defaults, environment and flags only)\n".to_owned(),
        };
        let data_dir = &self.data_dir;
        line(
            &mut out,
            "data_dir",
            &data_dir.value.to_string_lossy(),
            &data_dir.origin,
        );
        match &self.provider {
            Some(p) => line(&mut out, "provider", &p.value, &p.origin),
            None => out.push_str("# provider: none configured\n"),
        }
        if let Some(m) = &self.model {
            line(&mut out, "model", &m.value, &m.origin);
        }
        let turns = &self.max_turn_requests;
        out.push_str(&format!(
            "max_turn_requests = {}  # {}\n",
            turns.value, turns.origin
        ));
        if let Some(prompt) = &self.system_prompt {
            line(&mut out, "system_prompt", &prompt.value, &prompt.origin);
        }
        if let Some(text) = &self.instructions {
            line(&mut out, "instructions", &text.value, &text.origin);
        }
        line(
            &mut out,
            "mode",
            self.mode.value.as_str(),
            &self.mode.origin,
        );
        line(
            &mut out,
            "sandbox",
            self.sandbox.value.as_str(),
            &self.sandbox.origin,
        );
        out
    }

    /// The timeouts the file sets, and the price table's currency: top-level
    /// keys, so before the first table header.
    fn render_limits(&self) -> String {
        let mut out = String::new();
        for (key, secs) in [
            ("approval_timeout_secs", &self.approval_timeout_secs),
            ("question_timeout_secs", &self.question_timeout_secs),
            ("mcp_call_timeout_secs", &self.mcp_call_timeout_secs),
            ("mcp_start_timeout_secs", &self.mcp_start_timeout_secs),
            ("session_lease_secs", &self.session_lease_secs),
        ] {
            if let Some(secs) = secs {
                out.push_str(&format!("{key} = {}  # {}\n", secs.value, secs.origin));
            }
        }
        if let Some(window) = &self.context_window {
            out.push_str(&format!(
                "context_window = {}  # {}\n",
                window.value, window.origin
            ));
        }
        let note = self.file_note();
        if let Some(turns) = self.loop_guard {
            out.push_str(&format!("loop_guard = {turns}  # {note}\n"));
        }
        if let Some(fraction) = self.compact_at {
            out.push_str(&format!("compact_at = {fraction}  # {note}\n"));
        }
        if let Some(names) = &self.instruction_fallbacks {
            out.push_str(&format!(
                "instruction_fallbacks = {}  # {note}\n",
                toml_list(names)
            ));
        }
        if !self.models.is_empty() {
            line(
                &mut out,
                "currency",
                &self.catalog.currency,
                &self.currency_origin,
            );
        }
        out
    }

    fn render_tools(&self, note: &str) -> String {
        if self.tools.is_empty() {
            return String::new();
        }
        let mut out = format!("\n[tools]  # {note}\n");
        for (name, rule) in &self.tools {
            let rule = match rule {
                Rule::Allow => "allow",
                Rule::Ask => "ask",
                Rule::Deny => "deny",
            };
            out.push_str(&format!("{} = {}\n", toml_key(name), toml_quote(rule)));
        }
        out
    }

    fn render_channels(&self, note: &str) -> Result<String, ConfigError> {
        let mut out = String::new();
        for (name, channel) in &self.channels {
            let header = format!("[channels.{}]", toml_key(name));
            out.push_str(&named_table(&header, channel, note)?);
        }
        Ok(out)
    }

    /// Serialized whole, so `env` and `headers` land in
    /// `[mcpServers.NAME.env]` rather than in top-level tables; their values
    /// are secrets, shown as `[redacted]`.
    fn render_mcp_servers(&self, note: &str) -> Result<String, ConfigError> {
        if self.mcp_servers.is_empty() {
            return Ok(String::new());
        }
        let redacted: BTreeMap<&str, BTreeMap<&str, McpServerConfig>> = BTreeMap::from([(
            "mcpServers",
            self.mcp_servers
                .iter()
                .map(|(name, server)| (name.as_str(), server.redacted()))
                .collect(),
        )]);
        let body = to_toml("[mcpServers]", &redacted)?;
        Ok(format!("\n# MCP servers  # {note}\n{body}"))
    }

    fn render_models(&self, note: &str) -> Result<String, ConfigError> {
        let mut out = String::new();
        for (name, model) in &self.models {
            let header = format!("[models.{}]", toml_quote(name));
            out.push_str(&named_table(&header, model, note)?);
        }
        Ok(out)
    }

    /// Each provider with the layer that made it, and the keys that say
    /// what it is (never a key or a header value).
    fn render_providers(&self) -> String {
        let mut out = String::new();
        for (name, provider) in &self.providers {
            let p = &provider.value;
            out.push_str(&format!(
                "\n[providers.{}]  # {}\n",
                toml_key(name),
                provider.origin
            ));
            out.push_str(&format!("kind = {}\n", toml_quote(p.kind.as_str())));
            if let Some(url) = &p.base_url {
                out.push_str(&format!("base_url = {}\n", toml_quote(url)));
            }
            if let Some(key) = &p.api_key_env {
                out.push_str(&format!("api_key_env = {}\n", toml_quote(key)));
            }
            if !p.members.is_empty() {
                out.push_str(&format!("members = {}\n", toml_list(&p.members)));
            }
            if let Some(script) = &p.script {
                let script = toml_quote(&script.to_string_lossy());
                out.push_str(&format!("script = {script}\n"));
            }
            if !p.models.is_empty() {
                out.push_str(&format!("models = {}\n", toml_list(&p.models)));
            }
            if let Some(images) = p.images {
                out.push_str(&format!("images = {images}\n"));
            }
        }
        out
    }
}

/// `key = "value"  # origin`.
impl Config {
    /// `[store] url`, its password left out, from whichever layer set it.
    fn render_store(&self) -> String {
        let Some(url) = &self.store_url else {
            return String::new();
        };
        let mut out = "\n[store]\n".to_owned();
        line(
            &mut out,
            "url",
            &crate::store::Target::redacted(&url.value),
            &url.origin,
        );
        out
    }
}

fn line(out: &mut String, key: &str, value: &str, origin: &Origin) {
    out.push_str(&format!("{key} = {}  # {origin}\n", toml_quote(value)));
}

/// A table the file gives whole, under its header; nothing when it is all defaults.
fn table<T: Serialize + Default + PartialEq>(
    name: &str,
    value: &T,
    note: &str,
) -> Result<String, ConfigError> {
    if *value == T::default() {
        return Ok(String::new());
    }
    annotated(&format!("[{name}]"), &BTreeMap::from([(name, value)]), note)
}

/// One of a group of tables (`[channels.NAME]`, `[models."NAME"]`), under
/// `header`. Their values hold no tables, so the body needs no path.
fn named_table<T: Serialize>(header: &str, value: &T, note: &str) -> Result<String, ConfigError> {
    let body = to_toml(header, value)?;
    Ok(format!("\n{header}  # {note}\n{body}"))
}

/// `wrapped` (a section under its full path, so that tables inside it keep
/// their place) as TOML after a blank line, with `note` on its first line,
/// a table header.
fn annotated<T: Serialize>(section: &str, wrapped: &T, note: &str) -> Result<String, ConfigError> {
    let body = to_toml(section, wrapped)?;
    let (header, rest) = body.split_once('\n').unwrap_or((&body, ""));
    Ok(format!("\n{header}  # {note}\n{rest}"))
}

fn to_toml<T: Serialize>(section: &str, value: &T) -> Result<String, ConfigError> {
    toml::to_string(value).map_err(|err| ConfigError::Render {
        section: section.to_owned(),
        message: err.to_string().trim_end().trim_end_matches('.').to_owned(),
    })
}

/// A name as a TOML key: bare when it can be, else quoted.
fn toml_key(name: &str) -> String {
    let bare = !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
    if bare {
        name.to_owned()
    } else {
        toml_quote(name)
    }
}

fn toml_list(items: &[String]) -> String {
    let items: Vec<String> = items.iter().map(|item| toml_quote(item)).collect();
    format!("[{}]", items.join(", "))
}

#[cfg(test)]
mod tests {
    use super::super::testing::{load, load_file, reparse};
    use super::super::{FileConfig, Flags};
    use super::*;

    /// `config show` names where the currency came from, and prints it as a
    /// top-level key (after a table header it would belong to that table).
    #[test]
    fn config_show_names_the_currency_source_at_the_top_level() {
        let prices = "[safety]\nmax_output_bytes = 100\n[models.\"m\"]\ninput_price = 1.0\noutput_price = 2.0\n";
        for (file, origin) in [
            (prices.to_owned(), "# default"),
            (format!("currency = \"EUR\"\n{prices}"), "# config file"),
        ] {
            let config = load_file(&file).unwrap_or_else(|e| panic!("{e}"));
            let shown = config.render().unwrap_or_else(|e| panic!("{e}"));
            let line = shown
                .lines()
                .find(|l| l.starts_with("currency = "))
                .unwrap_or_else(|| panic!("{shown}"));
            assert!(line.contains(origin), "{shown}");
            let reparsed = reparse(&shown);
            assert!(reparsed.get("currency").is_some(), "{shown}");
        }
    }

    /// What `config show` prints for `file`, read back as a config file.
    fn round_trip(file: &str) -> (Config, FileConfig) {
        let config = load_file(file).unwrap_or_else(|e| panic!("{e}"));
        let shown = config.render().unwrap_or_else(|e| panic!("{e}"));
        let back = toml::from_str(&shown).unwrap_or_else(|e| panic!("{e}\n{shown}"));
        (config, back)
    }

    #[test]
    fn top_level_settings_read_back_as_shown() {
        let file = "provider = \"my provider\"\nmodel = \"m1\"\nmax_turn_requests = 9\n\
                    system_prompt = \"line one\\n\\\"two\\\" \\\\ #three\\u007f\"\ninstructions = \"be brief\"\n\
                    mode = \"full\"\nsandbox = \"required\"\napproval_timeout_secs = 30\n\
                    question_timeout_secs = 0\nmcp_call_timeout_secs = 40\n\
                    mcp_start_timeout_secs = 50\nsession_lease_secs = 60\ncurrency = \"EUR\"\n\
                    [models.\"m1\"]\ncontext_window = 100\n\
                    [providers.\"my provider\"]\nkind = \"openai\"\nmodels = [\"m1\"]\n";
        let (config, back) = round_trip(file);
        assert_eq!(back.data_dir, Some(config.data_dir.value.clone()));
        assert_eq!(back.provider.as_deref(), Some("my provider"));
        assert_eq!(back.model.as_deref(), Some("m1"));
        assert_eq!(back.max_turn_requests, Some(9));
        assert_eq!(
            back.system_prompt.as_deref(),
            Some("line one\n\"two\" \\ #three\u{7f}")
        );
        assert_eq!(back.instructions.as_deref(), Some("be brief"));
        assert_eq!(back.mode.as_deref(), Some("full"));
        assert_eq!(back.sandbox, Some(config.sandbox.value));
        assert_eq!(back.approval_timeout_secs, Some(30));
        assert_eq!(back.question_timeout_secs, Some(0));
        assert_eq!(back.mcp_call_timeout_secs, Some(40));
        assert_eq!(back.mcp_start_timeout_secs, Some(50));
        assert_eq!(back.session_lease_secs, Some(60));
        assert_eq!(back.currency.as_deref(), Some("EUR"));
    }

    #[test]
    fn the_tools_table_reads_back_as_shown() {
        let file =
            "[tools]\nwrite_file = \"deny\"\nshell = \"ask\"\n\"fs__read.file\" = \"allow\"\n";
        let (config, back) = round_trip(file);
        assert_eq!(config.tools.len(), 3);
        assert_eq!(back.tools, config.tools);
    }

    #[test]
    fn whole_tables_read_back_as_shown() {
        let file = "[shell]\nallow = [\"cargo test\"]\ntimeout_secs = 9\nread_only = [\"/opt\"]\n\
                    [paths]\nextra_roots = [\"/srv\"]\nforbidden = [\"~/.ssh\"]\nprotected = [\"x/\"]\n\
                    [safety]\nmax_output_bytes = 100\nsecret_env = [\"S\"]\n\
                    [budget]\nrun = 1.5\n[budget.daily]\nopenai = 3.0\n\
                    [memory]\nrecall = false\nrecall_floor = 0.5\nembeddings = \"p/m\"\n\
                    [skills]\nenabled = false\npaths = [\"~/team\"]\ndisabled = [\"a\"]\n\
                    [http]\nbind = \"127.0.0.1:9000\"\ncors_origins = [\"*\"]\nrate_limit_burst = 5\n";
        let (config, back) = round_trip(file);
        assert_eq!(back.shell, config.shell);
        assert_eq!(back.paths, config.paths);
        assert_eq!(back.safety, config.safety);
        assert_eq!(back.budget, config.budget);
        assert_eq!(back.memory, config.memory);
        assert_eq!(back.skills, config.skills);
        assert_eq!(back.skills.paths, ["~/team"]);
        assert_eq!(back.http, config.http);
        assert!(config.budget.daily.contains_key("openai"));
    }

    #[test]
    fn web_subagents_hooks_and_the_loop_settings_read_back_as_shown_with_secrets_hidden() {
        let file = "loop_guard = 4\ncompact_at = 0.75\ninstruction_fallbacks = [\"CLAUDE.md\"]\n\
                    context_window = 64000\n\
                    [web]\nallow = [\"docs.rs\"]\ndeny = [\"x.example\"]\nmax_redirects = 2\n\
                    [web.search]\nbackend = \"searxng\"\nurl = \"http://127.0.0.1:8888\"\n\
                    [subagents]\nmax_parallel = 2\nmax_turns = 7\n\
                    [hooks]\nimport = [\"claude\"]\n\
                    [[hooks.PreToolUse]]\nmatcher = \"shell\"\ncommand = \"./check.sh\"\n\
                    [[hooks.Stop]]\nurl = \"http://127.0.0.1:9/h\"\nsecret = \"s3cret\"\n";
        let config = load_file(file).unwrap_or_else(|e| panic!("{e}"));
        let shown = config.render().unwrap_or_else(|e| panic!("{e}"));
        assert!(!shown.contains("s3cret"), "{shown}");
        let back: FileConfig = toml::from_str(&shown).unwrap_or_else(|e| panic!("{e}\n{shown}"));
        assert_eq!(back.loop_guard, Some(4));
        assert_eq!(back.compact_at, Some(0.75));
        assert_eq!(
            back.instruction_fallbacks,
            Some(vec!["CLAUDE.md".to_owned()])
        );
        assert_eq!(back.context_window, Some(64000));
        assert_eq!(back.web, config.web);
        assert_eq!(back.subagents, config.subagents);
        assert_eq!(back.hooks, config.hooks.redacted());
        assert_eq!(back.hooks.pre_tool_use, config.hooks.pre_tool_use);
        assert_eq!(back.hooks.stop[0].secret.as_deref(), Some("[redacted]"));
    }

    #[test]
    fn channel_tables_read_back_as_shown() {
        let file = "[channels.telegram]\nallow = [\"42\"]\ncoalesce_ms = 10\n\
                    [channels.\"team chat\"]\nkind = \"webhook\"\ncallback_url = \"http://127.0.0.1:1/\"\n";
        let (config, back) = round_trip(file);
        assert_eq!(back.channels, config.channels);
        assert_eq!(back.channels.len(), 2);
    }

    #[test]
    fn mcp_servers_read_back_as_shown_with_secrets_hidden() {
        let file = "[mcpServers.fs]\ncommand = \"npx\"\nargs = [\"-y\"]\nenv = { TOKEN = \"s3cret\" }\n\
                    [mcpServers.remote]\nurl = \"http://127.0.0.1:3001/mcp\"\nheaders = { Authorization = \"Bearer abc\" }\n";
        let (config, back) = round_trip(file);
        let redacted: BTreeMap<String, McpServerConfig> = config
            .mcp_servers
            .iter()
            .map(|(name, server)| (name.clone(), server.redacted()))
            .collect();
        assert_eq!(back.mcp_servers, redacted);
        assert_eq!(back.mcp_servers["fs"].env["TOKEN"], "[redacted]");
    }

    #[test]
    fn model_tables_read_back_as_shown() {
        let file = "[models.\"claude-*\"]\ncontext_window = 200000\ninput_price = 3.0\noutput_price = 15.0\ncached_input_price = 0.3\n\
                    [models.\"a.b\"]\nimages = false\n";
        let (config, back) = round_trip(file);
        assert_eq!(back.models, config.models);
        assert_eq!(back.models.len(), 2);
    }

    /// A provider reads back with the keys shown: its kind and what says
    /// where it is and what it offers.
    #[test]
    fn provider_tables_read_back_as_shown() {
        let file = "[providers.\"my openai\"]\nkind = \"openai\"\nbase_url = \"http://127.0.0.1:1/v1\"\n\
                    api_key_env = \"MY_KEY\"\nmodels = [\"a\", \"b\"]\nimages = true\n\
                    [providers.both]\nkind = \"failover\"\nmembers = [\"my openai/a\", \"x/y\"]\n\
                    [providers.s]\nkind = \"scripted\"\nscript = \"s.jsonl\"\n";
        let (config, back) = round_trip(file);
        assert_eq!(back.providers.len(), 3);
        for (name, provider) in &config.providers {
            assert_eq!(back.providers.get(name), Some(&provider.value), "{name}");
        }
    }

    /// `[paths]` and `[http]` hold paths joined to the config file's
    /// directory; one that is not UTF-8 cannot be written as TOML. The
    /// section was left out of `config show`; it is an error naming it.
    #[test]
    fn a_section_that_cannot_be_written_is_an_error_naming_it() {
        use std::os::unix::ffi::OsStrExt;
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let odd = dir.path().join(std::ffi::OsStr::from_bytes(b"conf\xff"));
        std::fs::create_dir(&odd).unwrap_or_else(|e| panic!("{e}"));
        for (text, section) in [
            ("[paths]\nextra_roots = [\"lib\"]\n", "[paths]"),
            ("[http]\ntoken_file = \"tok\"\n", "[http]"),
        ] {
            std::fs::write(odd.join("c.toml"), text).unwrap_or_else(|e| panic!("{e}"));
            let flags = Flags {
                config: Some(odd.join("c.toml")),
                data_dir: Some(dir.path().join("data")),
                ..Flags::default()
            };
            let config = Config::load_with(&flags, &|_| None).unwrap_or_else(|e| panic!("{e}"));
            let err = config.render().err().map(|e| e.to_string());
            assert_eq!(
                err.as_deref(),
                Some(
                    format!("cannot show {section}: path contains invalid UTF-8 characters")
                        .as_str()
                )
            );
        }
    }

    #[test]
    fn names_that_are_not_bare_keys_are_quoted() {
        assert_eq!(toml_key("read_file"), "read_file");
        assert_eq!(toml_key("a-b_9"), "a-b_9");
        assert_eq!(toml_key("a.b"), "\"a.b\"");
        assert_eq!(toml_key("my provider"), "\"my provider\"");
        assert_eq!(toml_key(""), "\"\"");
    }

    #[test]
    fn without_a_file_the_tables_say_default_and_nothing_is_empty() {
        let config = load(&[], &[], Flags::default()).unwrap_or_else(|e| panic!("{e}"));
        let shown = config.render().unwrap_or_else(|e| panic!("{e}"));
        assert!(
            shown.starts_with("# config file: none (defaults, environment and flags only)\n"),
            "{shown}"
        );
        assert!(shown.contains("# provider: none configured\n"), "{shown}");
        assert!(!shown.contains('['), "{shown}");
    }
}
