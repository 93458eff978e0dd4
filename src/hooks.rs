//! The hooks runner: [`crate::core::hooks::Hooks`] over the `[[hooks.EVENT]]`
//! tables — commands run by `sh -c` with the input on standard input, and
//! HTTP POSTs signed like the webhook channel's. Every hook of an event whose
//! matcher takes the subject runs at once; answers are read as Claude Code's
//! hooks answer (`docs/hooks.md`).

use parking_lot::Mutex;
use std::collections::{HashMap, VecDeque};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context as _, bail};
use futures::future::{BoxFuture, join_all};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use tokio::io::{AsyncRead, AsyncReadExt as _, AsyncWriteExt as _};

use crate::core::hooks::{
    HookAnswer, HookEvent, HookImport, HookInput, HookOutcome, Hooks, Matcher, OnFailure,
    Permission, Trust, TrustedFile, WorkspaceHooks, project_dir,
};
use crate::core::journal::Journal;
use crate::core::quote::Quoted;

mod workspace;

/// How long a hook may take unless its table says.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(60);
/// Most bytes of a hook's output read; the rest is dropped.
const OUTPUT_LIMIT: usize = 256 * 1024;
/// Most characters of context or a reason one hook passes on.
const TEXT_LIMIT: usize = 10_000;

/// What the runner is set up with: the `[hooks]` tables, as `app::wiring`
/// hands them over.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HookSettings {
    /// The other agents whose workspace hook files are read (under a
    /// trusted project directory).
    pub import: Vec<HookImport>,
    /// Every hook with its event, in the order written.
    pub hooks: Vec<(HookEvent, HookSpec)>,
    /// The hooks files of the enabled plugins (`docs/plugins.md`).
    pub plugins: Vec<PluginHooks>,
}

/// An enabled plugin's hooks file: Claude Code's plugin `hooks/hooks.json`,
/// its hooks run in Claude Code's dialect with `${CLAUDE_PLUGIN_ROOT}` the
/// plugin's folder. No trust is asked: adding the plugin was the consent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PluginHooks {
    pub plugin: String,
    /// The plugin's folder.
    pub root: PathBuf,
    pub file: PathBuf,
}

/// What a plugin's hooks file holds, as `pincer doctor` and `pincer
/// plugin list` report it: the hooks that run (`EVENT [MATCHER] COMMAND`),
/// those left out (handler types or events Pincer does not run), and what
/// is wrong with it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PluginFile {
    pub hooks: Vec<String>,
    pub left_out: Vec<String>,
    pub problems: Vec<String>,
}

/// Reads a plugin's hooks file now.
pub fn plugin_file(path: &Path) -> PluginFile {
    let imported = workspace::read_plugin(path);
    PluginFile {
        hooks: imported.hooks.iter().map(workspace::Found::shown).collect(),
        left_out: imported.skipped,
        problems: imported.problems,
    }
}

/// One hook: a `command` run by `sh -c` in the session's workspace, or a
/// `url` the input is POSTed to. Also the shape of a `[[hooks.EVENT]]`
/// table of the config file, which reads it as written.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct HookSpec {
    /// What the hook runs for: the tool's name for tool events (`source`,
    /// `reason`, `trigger`, `notification_type` for others); `*` or unset:
    /// all; names of letters, digits, `_` and `-` joined by `|` or `,`: those
    /// names exactly; anything else: a regular expression
    /// (`core::hooks::Matcher`).
    pub matcher: Option<String>,
    pub command: Option<String>,
    pub url: Option<String>,
    /// The secret `url` requests are signed with (HMAC-SHA256), or
    /// `secret_env`, the environment variable holding it.
    pub secret: Option<String>,
    pub secret_env: Option<String>,
    /// Seconds the hook may take ([`DEFAULT_TIMEOUT`] when `None`).
    pub timeout_secs: Option<u64>,
    /// What a hook that fails (times out, exits with a code other than 0
    /// or 2, answers something unreadable) does: `continue` (default) or
    /// `block`.
    pub on_failure: Option<OnFailure>,
}

/// The hooks of a process.
pub struct HookSet {
    hooks: Vec<Hook>,
    /// For `url` hooks; `None` when there are none.
    client: Option<reqwest::Client>,
    /// The other agents whose workspace hook files are read.
    import: Vec<HookImport>,
    /// Where trust is kept (`with_trust`); without it no workspace hook runs.
    journal: Option<Arc<dyn Journal>>,
    /// Per recent run: the digests of the hook files when the run first
    /// fired a hook; a file that differs later does not run in that run,
    /// even when trusted again meanwhile.
    pins: Mutex<VecDeque<Pin>>,
}

/// A run's hook files as it first saw them: (run, project directory, file → digest).
type Pin = (String, PathBuf, HashMap<String, Option<String>>);

/// Runs whose hook files are pinned.
const PINNED_RUNS: usize = 64;

/// A project directory's hook files, read.
struct Loaded {
    imported: workspace::Imported,
    hooks: Vec<Hook>,
}

struct Hook {
    /// `None` for Pincer's own; for an imported hook, the agent whose
    /// dialect it speaks.
    dialect: Option<HookImport>,
    event: HookEvent,
    /// As the person wrote it, shortened: `./check.sh`, `https://host/path`.
    label: String,
    matcher: Matcher,
    handler: Handler,
    timeout: Duration,
    on_failure: OnFailure,
    /// A plugin's hook: the plugin's folder (`CLAUDE_PLUGIN_ROOT`).
    plugin_root: Option<PathBuf>,
}

enum Handler {
    Command(String),
    Http {
        url: reqwest::Url,
        secret: Option<Vec<u8>>,
    },
}

impl HookSet {
    /// The hooks of the settings (validated with the configuration they
    /// came from); `env` gives the secrets `secret_env` names.
    pub fn new(
        settings: &HookSettings,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> anyhow::Result<Self> {
        let mut hooks = Vec::new();
        for (event, hook) in &settings.hooks {
            let event = *event;
            let matcher = Matcher::parse(hook.matcher.as_deref())
                .map_err(|err| anyhow::anyhow!("hooks.{}: matcher: {err}", event.as_str()))?;
            let (label, handler) = match (&hook.command, &hook.url) {
                (Some(command), _) => (label(command), Handler::Command(command.clone())),
                (None, Some(url)) => {
                    let url = reqwest::Url::parse(url)
                        .with_context(|| format!("hooks.{}: url", event.as_str()))?;
                    let secret = match (&hook.secret, &hook.secret_env) {
                        (Some(secret), _) => Some(secret.clone().into_bytes()),
                        (None, Some(name)) => match env(name) {
                            Some(secret) if !secret.is_empty() => Some(secret.into_bytes()),
                            _ => bail!(
                                "hooks.{}: secret_env names {name}, which is not set",
                                event.as_str()
                            ),
                        },
                        (None, None) => None,
                    };
                    let mut shown = url.clone();
                    shown.set_query(None);
                    (shown.to_string(), Handler::Http { url, secret })
                }
                (None, None) => bail!("hooks.{}: give `command` or `url`", event.as_str()),
            };
            hooks.push(Hook {
                dialect: None,
                event,
                label,
                matcher,
                handler,
                timeout: hook
                    .timeout_secs
                    .map_or(DEFAULT_TIMEOUT, Duration::from_secs),
                on_failure: hook.on_failure.unwrap_or_default(),
                plugin_root: None,
            });
        }
        for plugin in &settings.plugins {
            hooks.extend(plugin_hooks(plugin));
        }
        // Only HTTP hooks need a client (its TLS roots cost start-up time).
        let client = if hooks
            .iter()
            .any(|hook| matches!(hook.handler, Handler::Http { .. }))
        {
            Some(
                crate::net::client_builder()
                    // The answer decides; a redirect elsewhere is no answer.
                    .redirect(reqwest::redirect::Policy::none())
                    .build()
                    .context("cannot build the HTTP client of the hooks")?,
            )
        } else {
            None
        };
        Ok(HookSet {
            hooks,
            client,
            import: settings.import.clone(),
            journal: None,
            pins: Mutex::default(),
        })
    }

    /// Workspace hooks run under the project directories trusted in
    /// `journal`.
    pub fn with_trust(mut self, journal: Arc<dyn Journal>) -> Self {
        self.journal = Some(journal);
        self
    }

    pub fn is_empty(&self) -> bool {
        self.hooks.is_empty() && self.import.is_empty()
    }

    /// The hook files of the project directory `root` as they are now
    /// (read each time: what runs is what is there, not what was cached).
    fn loaded(&self, root: &Path) -> Loaded {
        let imported = workspace::read(root, &self.import);
        let hooks = imported
            .hooks
            .iter()
            .map(|found| Hook {
                dialect: Some(found.source),
                event: found.event,
                label: format!("{}: {}", found.file, label(&found.command)),
                matcher: found.matcher.clone(),
                handler: Handler::Command(found.command.clone()),
                timeout: found
                    .timeout_secs
                    .map_or(DEFAULT_TIMEOUT, Duration::from_secs),
                on_failure: OnFailure::Continue,
                plugin_root: None,
            })
            .collect();
        Loaded { imported, hooks }
    }

    /// The trust given to `root`, if any.
    async fn trust(&self, root: &Path) -> Option<Trust> {
        let journal = self.journal.as_ref()?;
        match journal.trusted_roots().await {
            Ok(roots) => roots.into_iter().find(|trust| trust.root == root),
            Err(err) => {
                tracing::warn!(error = %err, "cannot read which workspaces are trusted");
                None
            }
        }
    }

    /// The files of `loaded` whose hooks may run: trusted as they are now,
    /// and unchanged since `run` first fired a hook.
    fn runnable(
        &self,
        root: &Path,
        trust: &Trust,
        loaded: &Loaded,
        run: Option<&str>,
    ) -> Vec<String> {
        let now: HashMap<String, Option<String>> = loaded
            .imported
            .files
            .iter()
            .map(|file| (file.path.clone(), file.digest.clone()))
            .collect();
        let pinned = run.map(|run| {
            let mut pins = self.pins.lock();
            if let Some((_, _, digests)) = pins.iter().find(|(r, p, _)| r == run && p == root) {
                return digests.clone();
            }
            if pins.len() >= PINNED_RUNS {
                pins.pop_front();
            }
            pins.push_back((run.to_owned(), root.to_path_buf(), now.clone()));
            now.clone()
        });
        loaded
            .imported
            .files
            .iter()
            .filter(|file| file.digest.is_some())
            .filter(|file| {
                trust
                    .files
                    .iter()
                    .any(|t| t.path == file.path && t.digest == file.digest)
            })
            .filter(|file| {
                pinned
                    .as_ref()
                    .is_none_or(|pinned| pinned.get(&file.path) == Some(&file.digest))
            })
            .map(|file| file.path.clone())
            .collect()
    }
}

/// The hooks of a plugin's file, read once (a plugin changes by `pincer
/// plugin`, which a process started before it does not see); what cannot
/// run is logged, and `pincer doctor` names it.
fn plugin_hooks(plugin: &PluginHooks) -> Vec<Hook> {
    let imported = workspace::read_plugin(&plugin.file);
    for problem in imported.problems.iter().chain(&imported.skipped) {
        tracing::warn!(plugin = %plugin.plugin, "a plugin hook is left out: {problem}");
    }
    imported
        .hooks
        .iter()
        .map(|found| Hook {
            dialect: Some(HookImport::Claude),
            event: found.event,
            label: format!("plugin {}: {}", plugin.plugin, label(&found.command)),
            matcher: found.matcher.clone(),
            handler: Handler::Command(crate::plugins::expand_root(&found.command, &plugin.root)),
            timeout: found
                .timeout_secs
                .map_or(DEFAULT_TIMEOUT, Duration::from_secs),
            on_failure: OnFailure::Continue,
            plugin_root: Some(plugin.root.clone()),
        })
        .collect()
}

/// The subject a hook's matcher tests: a tool's name in the hook's dialect.
fn subject_for<'a>(
    hook: &Hook,
    event: HookEvent,
    subject: Option<&'a str>,
) -> Option<std::borrow::Cow<'a, str>> {
    let subject = subject?;
    Some(match (hook.dialect, event) {
        (Some(source), HookEvent::PreToolUse | HookEvent::PostToolUse) => {
            std::borrow::Cow::Owned(workspace::tool_name(source, subject).to_owned())
        }
        _ => std::borrow::Cow::Borrowed(subject),
    })
}

/// The input as `hook` reads it: in its agent's dialect for an imported
/// hook.
fn body_for(hook: &Hook, input: &HookInput) -> Value {
    let mut body = input.to_json();
    let (Some(source), Some(tool)) = (
        hook.dialect,
        input.fields.get("tool_name").and_then(Value::as_str),
    ) else {
        return body;
    };
    body["tool_name"] = Value::from(workspace::tool_name(source, tool));
    if source == HookImport::Claude
        && let Some(tool_input) = input.fields.get("tool_input")
    {
        body["tool_input"] = workspace::claude_input(tool, tool_input, &input.cwd);
    }
    body
}

/// A command as the person wrote it, short enough for a message.
fn label(command: &str) -> String {
    Quoted(&command.split_whitespace().collect::<Vec<_>>().join(" ")).to_string()
}

impl Hooks for HookSet {
    fn listens(&self, event: HookEvent, subject: Option<&str>) -> bool {
        // A workspace's hooks depend on the workspace: with imports on,
        // every event is worth asking about.
        !self.import.is_empty()
            || self.hooks.iter().any(|hook| {
                hook.event == event
                    && hook
                        .matcher
                        .accepts(subject_for(hook, event, subject).as_deref())
            })
    }

    fn fire(&self, input: HookInput) -> BoxFuture<'_, HookOutcome> {
        Box::pin(async move {
            let mut imported = None;
            if !self.import.is_empty() {
                let root = project_dir(&input.cwd);
                if let Some(trust) = self.trust(&root).await {
                    let loaded = self.loaded(&root);
                    let runnable = self.runnable(&root, &trust, &loaded, input.run_id.as_deref());
                    imported = Some((loaded, runnable));
                }
            }
            let workspace_hooks = imported.iter().flat_map(|(loaded, runnable)| {
                loaded
                    .hooks
                    .iter()
                    .zip(&loaded.imported.hooks)
                    .filter(|(_, found)| runnable.contains(&found.file))
                    .map(|(hook, _)| hook)
            });
            let runs = self
                .hooks
                .iter()
                .chain(workspace_hooks)
                .filter(|hook| {
                    hook.event == input.event
                        && hook.matcher.accepts(
                            subject_for(hook, input.event, input.subject.as_deref()).as_deref(),
                        )
                })
                .map(|hook| self.run(hook, &input));
            HookOutcome {
                answers: join_all(runs).await,
            }
        })
    }

    fn workspace_hooks<'a>(&'a self, cwd: &'a Path) -> BoxFuture<'a, Option<WorkspaceHooks>> {
        Box::pin(async move {
            if self.import.is_empty() {
                return None;
            }
            let root = project_dir(cwd);
            let loaded = self.loaded(&root);
            let imported = &loaded.imported;
            let trust = self.trust(&root).await;
            if imported.hooks.is_empty()
                && imported.skipped.is_empty()
                && imported.problems.is_empty()
                && trust.is_none()
            {
                return None;
            }
            let changed = trust
                .as_ref()
                .map(|trust| changes(trust, &imported.files))
                .unwrap_or_default();
            Some(WorkspaceHooks {
                trusted: trust.is_some() && changed.is_empty(),
                changed,
                files: imported.files.clone(),
                root,
                hooks: imported
                    .hooks
                    .iter()
                    .map(|found| format!("{}: {}", found.file, found.shown()))
                    .collect(),
                left_out: imported
                    .skipped
                    .iter()
                    .map(|s| format!("{s} (not run by Pincer)"))
                    .chain(imported.problems.iter().cloned())
                    .collect(),
            })
        })
    }
}

/// The hook files that differ from what the person trusted, each with what
/// changed in words.
fn changes(trust: &Trust, now: &[TrustedFile]) -> Vec<String> {
    let mut out = Vec::new();
    for file in now {
        let before = trust.files.iter().find(|t| t.path == file.path);
        let before_digest = before.and_then(|t| t.digest.as_ref());
        if before.is_some() && before_digest == file.digest.as_ref() {
            continue;
        }
        if before.is_none() && trust.files.is_empty() && file.digest.is_none() {
            continue;
        }
        let what = match (before, &file.digest) {
            (_, None) => "removed".to_owned(),
            (None, Some(_)) if trust.files.is_empty() => {
                "trusted before Pincer recorded what it trusted".to_owned()
            }
            (None, Some(_)) | (Some(TrustedFile { digest: None, .. }), Some(_)) => "new".to_owned(),
            (Some(before), Some(_)) => {
                let added: Vec<&str> = file
                    .hooks
                    .iter()
                    .filter(|h| !before.hooks.contains(h))
                    .map(String::as_str)
                    .collect();
                let removed: Vec<&str> = before
                    .hooks
                    .iter()
                    .filter(|h| !file.hooks.contains(h))
                    .map(String::as_str)
                    .collect();
                let parts: Vec<String> = [("hooks added", added), ("hooks removed", removed)]
                    .into_iter()
                    .filter(|(_, hooks)| !hooks.is_empty())
                    .map(|(what, hooks)| format!("{what}: {}", hooks.join("; ")))
                    .collect();
                if parts.is_empty() {
                    "changed (the same hooks; the file or a script they run differs)".to_owned()
                } else {
                    format!("changed ({})", parts.join("; "))
                }
            }
        };
        let hooks = if file.hooks.is_empty() || what.starts_with("changed") {
            String::new()
        } else {
            format!(": {}", file.hooks.join("; "))
        };
        out.push(format!("{} {what}{hooks}", file.path));
    }
    out
}

/// What running a hook gave back.
#[derive(Debug)]
struct Ran {
    /// The exit code (an HTTP hook: 0 for a 2xx answer).
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

impl HookSet {
    async fn run(&self, hook: &Hook, input: &HookInput) -> HookAnswer {
        let body = &body_for(hook, input);
        let ran = match &hook.handler {
            Handler::Command(command) => {
                let root = hook.plugin_root.as_deref();
                run_command(command, &input.cwd, root, body, hook.timeout).await
            }
            Handler::Http { url, secret } => {
                self.post(url, secret.as_deref(), input.event, body, hook.timeout)
                    .await
            }
        };
        let mut answer = match ran {
            Ok(ran) => interpret(input.event, &ran),
            Err(failed) => HookAnswer {
                failed: Some(failed),
                ..HookAnswer::default()
            },
        };
        answer.hook = hook.label.clone();
        // An imported hook's new input is in its agent's dialect.
        if hook.dialect == Some(HookImport::Claude)
            && let (Some(updated), Some(tool)) = (
                &answer.updated_input,
                input.fields.get("tool_name").and_then(Value::as_str),
            )
        {
            answer.updated_input = Some(workspace::from_claude_input(tool, updated));
        }
        if let Some(failed) = &answer.failed {
            tracing::warn!(hook = %hook.label, event = input.event.as_str(), %failed, "hook failed");
            if hook.on_failure == OnFailure::Block && answer.block.is_none() {
                answer.block = Some(format!("hook `{}` failed: {failed}", hook.label));
            }
        }
        answer
    }

    async fn post(
        &self,
        url: &reqwest::Url,
        secret: Option<&[u8]>,
        event: HookEvent,
        body: &Value,
        timeout: Duration,
    ) -> Result<Ran, String> {
        let bytes = serde_json::to_vec(body).map_err(|err| err.to_string())?;
        let Some(client) = &self.client else {
            return Err("no HTTP client".into());
        };
        let mut request = client
            .post(url.clone())
            .timeout(timeout)
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .header("x-pincer-event", event.as_str());
        if let Some(secret) = secret {
            let timestamp = crate::core::session::now_millis() / 1000;
            request = request
                .header(
                    crate::signing::SIGNATURE,
                    crate::signing::sign(secret, timestamp, &bytes),
                )
                .header(crate::signing::TIMESTAMP, timestamp.to_string());
        }
        let response = request.body(bytes).send().await.map_err(|err| {
            if err.is_timeout() {
                format!("no answer within {} s", timeout.as_secs())
            } else {
                format!("cannot reach it: {err}")
            }
        })?;
        let status = response.status();
        let text = response
            .text()
            .await
            .map_err(|err| format!("cannot read its answer: {err}"))?;
        if !status.is_success() {
            return Err(format!("it answered HTTP {}", status.as_u16()));
        }
        let text = text.trim();
        if !text.is_empty() && !text.starts_with('{') {
            return Err(format!(
                "it answered something other than a JSON object: {}",
                Quoted(text)
            ));
        }
        Ok(Ran {
            code: Some(0),
            stdout: text.to_owned(),
            stderr: String::new(),
        })
    }
}

/// Runs `command` with `sh -c` in `cwd`, the input on its standard input
/// (a plugin's hook with `CLAUDE_PLUGIN_ROOT` set to `plugin_root`); on
/// timeout its whole process group is killed.
async fn run_command(
    command: &str,
    cwd: &std::path::Path,
    plugin_root: Option<&Path>,
    body: &Value,
    timeout: Duration,
) -> Result<Ran, String> {
    let dir: PathBuf = if cwd.is_dir() {
        cwd.to_path_buf()
    } else {
        PathBuf::from("/")
    };
    let mut command_line = tokio::process::Command::new("/bin/sh");
    if let Some(root) = plugin_root {
        command_line
            .env("CLAUDE_PLUGIN_ROOT", root)
            .env("PINCER_PLUGIN_ROOT", root);
    }
    let mut child = command_line
        .arg("-c")
        .arg(command)
        .current_dir(&dir)
        .env("PINCER_PROJECT_DIR", cwd)
        .env("CLAUDE_PROJECT_DIR", cwd)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .kill_on_drop(true)
        .spawn()
        .map_err(|err| format!("cannot start it: {err}"))?;
    let group = child.id();
    let input = serde_json::to_vec(body).map_err(|err| err.to_string())?;
    let mut stdin = child.stdin.take();
    let stdout = child.stdout.take();
    let stderr = child.stderr.take();
    let work = async {
        let write = async {
            if let Some(mut stdin) = stdin.take() {
                // A hook that does not read its input closes the pipe early.
                let _ = stdin.write_all(&input).await;
                let _ = stdin.shutdown().await;
            }
        };
        let (_, out, err, status) = tokio::join!(
            write,
            read_capped(stdout),
            read_capped(stderr),
            child.wait()
        );
        (out, err, status)
    };
    match tokio::time::timeout(timeout, work).await {
        Ok((stdout, stderr, status)) => {
            let status = status.map_err(|err| format!("cannot wait for it: {err}"))?;
            Ok(Ran {
                code: status.code(),
                stdout,
                stderr,
            })
        }
        Err(_) => {
            if let Some(group) = group {
                crate::process::kill_group(group);
            }
            Err(format!(
                "no answer within {} s (stopped)",
                timeout.as_secs()
            ))
        }
    }
}

async fn read_capped(pipe: Option<impl AsyncRead + Unpin>) -> String {
    let Some(mut pipe) = pipe else {
        return String::new();
    };
    let mut kept = Vec::new();
    let mut buffer = [0_u8; 8192];
    loop {
        match pipe.read(&mut buffer).await {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                let room = OUTPUT_LIMIT.saturating_sub(kept.len());
                kept.extend_from_slice(&buffer[..n.min(room)]);
            }
        }
    }
    String::from_utf8_lossy(&kept).into_owned()
}

/// Text a hook passes on, at most [`TEXT_LIMIT`] characters.
fn clip(text: &str) -> String {
    let text = text.trim();
    match text.char_indices().nth(TEXT_LIMIT) {
        Some((at, _)) => format!("{}… (cut at {TEXT_LIMIT} characters)", &text[..at]),
        None => text.to_owned(),
    }
}

/// Reads a hook's exit code and output as Claude Code does: exit 0 with a
/// JSON object decides by its fields (plain text is context where the event
/// takes it); exit 2 blocks with the JSON's reason or the standard error;
/// another code is a failure unless the output is a JSON object, which then
/// decides.
fn interpret(event: HookEvent, ran: &Ran) -> HookAnswer {
    let stdout = ran.stdout.trim();
    let json = stdout
        .starts_with('{')
        .then(|| serde_json::from_str::<Value>(stdout).ok())
        .flatten()
        .filter(Value::is_object);
    let mut answer = HookAnswer::default();
    if let Some(json) = &json {
        read_json(event, json, &mut answer);
    }
    match ran.code {
        Some(0) if json.is_none() && !stdout.is_empty() => {
            if stdout.starts_with('{') {
                answer.failed = Some("its output starts with `{` but is not a JSON object".into());
            } else if event.takes_plain_context() {
                answer.context = Some(clip(stdout));
            }
        }
        Some(0) => {}
        Some(2) => {
            if answer.block.is_none() {
                let stderr = ran.stderr.trim();
                answer.block = Some(if stderr.is_empty() {
                    "blocked by a hook".to_owned()
                } else {
                    clip(stderr)
                });
            }
            // An exit 2 cannot allow.
            if answer.permission != Some(Permission::Deny) {
                answer.permission = None;
            }
            answer.updated_input = None;
            answer.updated_message = None;
        }
        code if json.is_none() => {
            let first = ran.stderr.trim().lines().next().unwrap_or("").to_owned();
            let code = code.map_or("a signal".to_owned(), |c| format!("code {c}"));
            answer.failed = Some(if first.is_empty() {
                format!("it exited with {code}")
            } else {
                format!("it exited with {code}: {}", Quoted(&first))
            });
        }
        _ => {}
    }
    answer
}

/// The fields of a hook's JSON answer Pincer reads.
fn read_json(event: HookEvent, json: &Value, answer: &mut HookAnswer) {
    let text = |value: Option<&Value>| value.and_then(Value::as_str).map(clip);
    let specific = json.get("hookSpecificOutput");
    let field = |name: &str| specific.and_then(|s| s.get(name));
    if json.get("continue").and_then(Value::as_bool) == Some(false) {
        answer.stop =
            Some(text(json.get("stopReason")).unwrap_or_else(|| "a hook ended the run".to_owned()));
    }
    answer.message = text(json.get("systemMessage"));
    answer.context = text(field("additionalContext"));
    let reason = text(json.get("reason"));
    match json.get("decision").and_then(Value::as_str) {
        Some("block") => {
            answer.block = Some(
                reason
                    .clone()
                    .unwrap_or_else(|| "blocked by a hook".to_owned()),
            );
        }
        // Claude Code's older spelling of a PreToolUse `allow`.
        Some("approve") if event == HookEvent::PreToolUse => {
            answer.permission = Some(Permission::Allow);
            answer.reason = reason.clone();
        }
        _ => {}
    }
    if event == HookEvent::PreToolUse {
        if let Some(decision) = field("permissionDecision")
            .and_then(Value::as_str)
            .and_then(Permission::parse)
        {
            let why = text(field("permissionDecisionReason"));
            answer.permission = Some(decision);
            if decision == Permission::Deny {
                answer.block = Some(why.unwrap_or_else(|| "denied by a hook".to_owned()));
            } else {
                answer.reason = why;
            }
        }
        if let Some(input) = field("updatedInput").filter(|v| v.is_object()) {
            answer.updated_input = Some(input.clone());
        }
    }
    // Pincer's own: Claude Code has no outbound chat messages.
    if event == HookEvent::MessageSending {
        answer.updated_message = text(field("updatedMessage"));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn ran(code: i32, stdout: &str, stderr: &str) -> Ran {
        Ran {
            code: Some(code),
            stdout: stdout.into(),
            stderr: stderr.into(),
        }
    }

    #[test]
    fn exit_codes_and_output_are_read_as_claude_codes_hooks_are() {
        let pre = HookEvent::PreToolUse;
        assert_eq!(interpret(pre, &ran(0, "", "")), HookAnswer::default());
        // Plain text is context only where the event takes it.
        assert_eq!(interpret(pre, &ran(0, "checked", "")).context, None);
        assert_eq!(
            interpret(HookEvent::UserPromptSubmit, &ran(0, "branch: main\n", ""))
                .context
                .as_deref(),
            Some("branch: main")
        );
        let blocked = interpret(pre, &ran(2, "", "no rm -rf\n"));
        assert_eq!(blocked.block.as_deref(), Some("no rm -rf"));
        // Exit 2 cannot allow or rewrite.
        let two = interpret(
            pre,
            &ran(
                2,
                r#"{"hookSpecificOutput":{"permissionDecision":"allow","updatedInput":{"a":1}}}"#,
                "stop",
            ),
        );
        assert_eq!((two.block.as_deref(), two.permission), (Some("stop"), None));
        assert_eq!(two.updated_input, None);
        let failed = interpret(pre, &ran(1, "", "boom\nmore"));
        assert_eq!(
            failed.failed.as_deref(),
            Some("it exited with code 1: boom")
        );
        assert_eq!(failed.block, None);
        // A JSON answer decides whatever the exit code.
        let json_one = interpret(
            pre,
            &ran(
                1,
                r#"{"hookSpecificOutput":{"permissionDecision":"ask"}}"#,
                "",
            ),
        );
        assert_eq!(
            (json_one.permission, json_one.failed),
            (Some(Permission::Ask), None)
        );
        assert!(interpret(pre, &ran(0, "{not json", "")).failed.is_some());
    }

    #[test]
    fn the_json_fields_pincer_reads() {
        let answer = interpret(
            HookEvent::PreToolUse,
            &ran(
                0,
                &json!({
                    "continue": false,
                    "stopReason": "build broken",
                    "systemMessage": "checked by policy.sh",
                    "hookSpecificOutput": {
                        "hookEventName": "PreToolUse",
                        "permissionDecision": "deny",
                        "permissionDecisionReason": "writes outside src/",
                        "updatedInput": {"path": "src/a.rs"},
                        "additionalContext": "src/ only",
                    }
                })
                .to_string(),
                "",
            ),
        );
        assert_eq!(answer.stop.as_deref(), Some("build broken"));
        assert_eq!(answer.message.as_deref(), Some("checked by policy.sh"));
        assert_eq!(answer.permission, Some(Permission::Deny));
        assert_eq!(answer.block.as_deref(), Some("writes outside src/"));
        assert_eq!(answer.updated_input, Some(json!({"path": "src/a.rs"})));
        assert_eq!(answer.context.as_deref(), Some("src/ only"));
        let stop = interpret(
            HookEvent::Stop,
            &ran(
                0,
                r#"{"decision":"block","reason":"run the tests first"}"#,
                "",
            ),
        );
        assert_eq!(stop.block.as_deref(), Some("run the tests first"));
        // Only PreToolUse reads permission decisions.
        let post = interpret(
            HookEvent::PostToolUse,
            &ran(
                0,
                r#"{"hookSpecificOutput":{"permissionDecision":"deny"}}"#,
                "",
            ),
        );
        assert_eq!((post.permission, post.block), (None, None));
    }

    #[test]
    fn an_outbound_message_may_be_rewritten_unless_blocked() {
        let rewrite = r#"{"hookSpecificOutput":{"updatedMessage":"shorter"}}"#;
        let answer = interpret(HookEvent::MessageSending, &ran(0, rewrite, ""));
        assert_eq!(answer.updated_message.as_deref(), Some("shorter"));
        assert_eq!(answer.block, None);
        // Exit 2 blocks and cannot rewrite; other events do not read it.
        let blocked = interpret(HookEvent::MessageSending, &ran(2, rewrite, "no"));
        assert_eq!(
            (blocked.block.as_deref(), blocked.updated_message),
            (Some("no"), None)
        );
        let other = interpret(HookEvent::MessageReceived, &ran(0, rewrite, ""));
        assert_eq!(other.updated_message, None);
        let not_text = interpret(
            HookEvent::MessageSending,
            &ran(0, r#"{"hookSpecificOutput":{"updatedMessage":7}}"#, ""),
        );
        assert_eq!(not_text.updated_message, None);
    }

    #[tokio::test]
    async fn a_plugins_hooks_run_in_claudes_dialect_from_its_folder() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("kit");
        std::fs::create_dir_all(root.join("hooks")).unwrap();
        std::fs::write(
            root.join("hooks/check.sh"),
            "cat > \"$CLAUDE_PLUGIN_ROOT/input.json\"; echo \"no shell from $PINCER_PLUGIN_ROOT\" >&2; exit 2\n",
        )
        .unwrap();
        let file = root.join("hooks/hooks.json");
        std::fs::write(
            &file,
            json!({"description": "kit hooks", "hooks": {
                "PreToolUse": [{"matcher": "Bash", "hooks": [
                    {"type": "command", "command": "sh ${CLAUDE_PLUGIN_ROOT}/hooks/check.sh", "timeout": 5},
                    {"type": "prompt", "prompt": "judge it"}
                ]}],
                "PermissionRequest": [{"hooks": [{"type": "command", "command": "true"}]}]
            }})
            .to_string(),
        )
        .unwrap();
        let settings = HookSettings {
            plugins: vec![PluginHooks {
                plugin: "kit".into(),
                root: root.clone(),
                file: file.clone(),
            }],
            ..HookSettings::default()
        };
        let hooks = HookSet::new(&settings, &|_| None).unwrap();
        assert!(!hooks.is_empty());
        assert!(hooks.listens(HookEvent::PreToolUse, Some("shell")));
        assert!(!hooks.listens(HookEvent::PreToolUse, Some("read_file")));
        let input = HookInput::new(
            HookEvent::PreToolUse,
            "ses_1",
            dir.path().to_path_buf(),
            "supervised",
        )
        .about("tool_name", "shell")
        .with("tool_input", json!({"command": "ls"}));
        let outcome = hooks.fire(input).await;
        assert_eq!(outcome.answers.len(), 1);
        let answer = &outcome.answers[0];
        assert_eq!(
            answer.block.as_deref(),
            Some(format!("no shell from {}", root.display()).as_str())
        );
        assert!(
            answer.hook.starts_with("plugin kit: sh "),
            "{}",
            answer.hook
        );
        let seen: Value =
            serde_json::from_str(&std::fs::read_to_string(root.join("input.json")).unwrap())
                .unwrap();
        assert_eq!(seen["tool_name"], "Bash");
        // The listing names what is left out; a broken file is a problem.
        let listed = plugin_file(&file);
        assert_eq!(listed.hooks.len(), 1);
        assert!(listed.hooks[0].starts_with("PreToolUse [Bash] "));
        assert_eq!(listed.left_out.len(), 2, "{:?}", listed.left_out);
        std::fs::write(&file, "{\"hooks\": ").unwrap();
        let broken = plugin_file(&file);
        assert!(
            broken.problems[0].contains("hooks.json: not JSON"),
            "{broken:?}"
        );
        let without = HookSet::new(&settings, &|_| None).unwrap();
        assert!(without.is_empty());
    }

    #[tokio::test]
    async fn a_command_reads_its_input_and_a_slow_one_is_stopped() {
        let dir = tempfile::tempdir().unwrap();
        let body = json!({"hook_event_name": "PreToolUse", "tool_name": "shell"});
        let ran = run_command(
            "cat; echo \"$PINCER_PROJECT_DIR\" >&2; exit 3",
            dir.path(),
            None,
            &body,
            Duration::from_secs(10),
        )
        .await
        .unwrap();
        assert_eq!(ran.code, Some(3));
        assert_eq!(serde_json::from_str::<Value>(&ran.stdout).unwrap(), body);
        assert_eq!(ran.stderr.trim(), dir.path().to_string_lossy());
        // Output is read up to its limit, and text passed on is cut.
        let big = run_command(
            "head -c 1000000 /dev/zero | tr '\\0' a",
            dir.path(),
            None,
            &body,
            Duration::from_secs(10),
        )
        .await
        .unwrap();
        assert_eq!(big.stdout.len(), OUTPUT_LIMIT);
        let context = interpret(HookEvent::UserPromptSubmit, &big)
            .context
            .unwrap();
        assert!(context.starts_with(&"a".repeat(TEXT_LIMIT)));
        assert!(context.ends_with("… (cut at 10000 characters)"));
        let started = std::time::Instant::now();
        let slow = run_command(
            "sleep 30 & wait",
            dir.path(),
            None,
            &body,
            Duration::from_secs(1),
        )
        .await;
        assert!(slow.unwrap_err().contains("within 1 s"));
        assert!(started.elapsed() < Duration::from_secs(10));
    }
}
