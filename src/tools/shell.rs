//! The shell tool: runs a command line in the workspace under the sandbox
//! (see [`crate::sandbox`] for what a command can and cannot reach).

use std::path::PathBuf;
use std::time::Duration;

use schemars::JsonSchema;
use serde::Deserialize;

use crate::core::tool::{
    ClientTerminal, Plan, Progress, ProgressUpdate, TerminalCommand, TerminalExit, ToolContext,
    ToolError, ToolKind, ToolOutput, TypedTool,
};
use crate::sandbox::{
    self, AttachedSpec, Confinement, DEFAULT_ENV_ALLOW, ExecRequest, ExecResult, SandboxError,
    SandboxMode, SandboxStatus,
};

/// How shell calls run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShellSettings {
    /// When the call gives no `timeout_secs`.
    pub timeout: Duration,
    /// The most a call may ask for.
    pub max_timeout: Duration,
    /// Bytes of output kept (head and tail).
    pub output_limit: usize,
    /// Variables of the server's environment a command gets (never one that
    /// looks like a secret).
    pub env_allow: Vec<String>,
    /// Whether commands may open TCP connections.
    pub network: bool,
    pub mode: SandboxMode,
    /// More trees a command may write, besides the workspace and the
    /// boundary's extra roots.
    pub extra_read_write: Vec<PathBuf>,
    /// More trees a command may read and execute (toolchains under home).
    pub extra_read_only: Vec<PathBuf>,
    /// Paths denied even inside those trees, besides the boundary's forbidden
    /// list (credentials kept in a toolchain's directory).
    pub extra_deny: Vec<PathBuf>,
}

impl Default for ShellSettings {
    fn default() -> Self {
        Self {
            timeout: Duration::from_secs(120),
            max_timeout: Duration::from_secs(600),
            output_limit: 1 << 20,
            env_allow: DEFAULT_ENV_ALLOW
                .iter()
                .map(|name| (*name).to_owned())
                .collect(),
            network: false,
            mode: SandboxMode::BestEffort,
            extra_read_write: Vec::new(),
            extra_read_only: Vec::new(),
            extra_deny: Vec::new(),
        }
    }
}

/// Runs `bash -c <command>` in the workspace, confined by the sandbox.
pub struct ShellTool {
    settings: ShellSettings,
    /// The kernel's sandbox support; probed at each call when not given.
    status: Option<SandboxStatus>,
}

impl ShellTool {
    pub fn new(settings: ShellSettings) -> Self {
        Self {
            settings,
            status: None,
        }
    }

    /// Uses `status` instead of probing the kernel at each call (a status
    /// probed once at start, or a simulated one in tests).
    pub fn with_sandbox_status(mut self, status: SandboxStatus) -> Self {
        self.status = Some(status);
        self
    }

    pub fn settings(&self) -> &ShellSettings {
        &self.settings
    }

    fn timeout(&self, args: &Args) -> Result<Duration, ToolError> {
        match args.timeout_secs {
            None => Ok(self.settings.timeout.min(self.settings.max_timeout)),
            Some(0) => Err(ToolError::InvalidArguments(
                "`timeout_secs` must be at least 1".to_owned(),
            )),
            Some(secs) => Ok(Duration::from_secs(secs).min(self.settings.max_timeout)),
        }
    }

    /// What a command may reach: the workspace and the boundary's other
    /// roots read-write, with the protected paths beneath them read-only;
    /// the toolchains read-only; the forbidden paths denied.
    fn confinement(&self, ctx: &ToolContext) -> Confinement {
        let mut extra_read_write: Vec<PathBuf> =
            ctx.boundary.roots().iter().skip(1).cloned().collect();
        extra_read_write.extend(self.settings.extra_read_write.iter().cloned());
        // The protected paths directly beneath every tree a command may
        // write stay read-only (`sandbox::readonly`); deeper ones are the
        // file tools' and the policy's to guard.
        let read_only: Vec<PathBuf> = std::iter::once(&ctx.workspace)
            .chain(&extra_read_write)
            .flat_map(|root| ctx.boundary.protected().under(root))
            .collect();
        Confinement {
            workspace: ctx.workspace.clone(),
            read_only,
            extra_read_write,
            // The session's skills' folders: their scripts run, nothing
            // there is written.
            extra_read_only: self
                .settings
                .extra_read_only
                .iter()
                .chain(ctx.boundary.readable())
                .cloned()
                .collect(),
            deny: ctx
                .boundary
                .forbidden()
                .iter()
                .chain(&self.settings.extra_deny)
                .cloned()
                .collect(),
            network: self.settings.network,
            mode: self.settings.mode,
        }
    }

    async fn run(
        &self,
        plan: &Plan,
        ctx: &ToolContext,
        args: &Args,
    ) -> Result<ToolOutput, ToolError> {
        let line = plan.command.clone().unwrap_or_else(|| args.command.clone());
        let cwd = plan
            .reads
            .first()
            .cloned()
            .unwrap_or_else(|| ctx.workspace.clone());
        let timeout = self.timeout(args)?;
        let server_env = std::env::vars_os().filter_map(|(name, value)| {
            Some((name.into_string().ok()?, value.into_string().ok()?))
        });
        let request = ExecRequest {
            line,
            cwd,
            timeout,
            output_limit: self.settings.output_limit,
            env: sandbox::scrubbed_env(server_env, &self.settings.env_allow),
        };
        let confinement = self.confinement(ctx);
        let status = self.status.clone().unwrap_or_else(sandbox::status);
        let snapshot = sandbox::readonly::Snapshot::take(&confinement.read_only);
        let result = match &ctx.terminal {
            Some(terminal) => {
                self.run_in_terminal(terminal.as_ref(), request, confinement, &status, ctx)
                    .await
            }
            None => {
                self.run_here(request, confinement, &status, ctx, timeout)
                    .await
            }
        };
        // Whatever the command did to a protected path is undone, even when
        // it failed or was cancelled.
        let notes = snapshot.restore();
        if notes.is_empty() {
            return result;
        }
        let notes = notes
            .iter()
            .map(|note| format!("[{note}]"))
            .collect::<Vec<_>>()
            .join("\n");
        tracing::warn!(%notes, "a shell command wrote protected paths");
        match result {
            Ok(mut output) => {
                output.text = format!("{}\n{notes}", output.text.trim_end());
                Ok(output)
            }
            Err(ToolError::Failed(text)) => {
                Err(ToolError::Failed(format!("{}\n{notes}", text.trim_end())))
            }
            Err(other) => Err(other),
        }
    }

    async fn run_here(
        &self,
        request: ExecRequest,
        confinement: Confinement,
        status: &SandboxStatus,
        ctx: &ToolContext,
        timeout: Duration,
    ) -> Result<ToolOutput, ToolError> {
        let live = ctx
            .progress
            .is_active()
            .then(|| LineStream::new(ctx.progress.clone()).into_live());
        let result = sandbox::run_streaming(request, &confinement, &ctx.cancel, status, live)
            .await
            .map_err(|err: SandboxError| ToolError::Failed(err.to_string()))?;
        if result.cancelled {
            return Err(ToolError::Cancelled);
        }
        let text = format_result(&result, timeout, self.settings.network);
        if result.timed_out || result.exit_code != Some(0) {
            Err(ToolError::Failed(text))
        } else {
            Ok(ToolOutput::text(text))
        }
    }
}

impl ShellTool {
    /// Runs the call in the client's terminal, which shows it live: the client
    /// starts `pincer sandbox-exec`, which confines the command exactly as the
    /// server's own runner would (the spec travels in a private file).
    async fn run_in_terminal(
        &self,
        terminal: &dyn ClientTerminal,
        request: ExecRequest,
        confinement: Confinement,
        status: &SandboxStatus,
        ctx: &ToolContext,
    ) -> Result<ToolOutput, ToolError> {
        if confinement.mode == SandboxMode::Required && !status.enforced {
            return Err(ToolError::Failed(
                SandboxError::NotEnforced(status.detail.clone()).to_string(),
            ));
        }
        let exe = std::env::current_exe().map_err(|err| {
            ToolError::Failed(format!(
                "cannot find the pincer binary to run the command: {err}"
            ))
        })?;
        let timeout = request.timeout;
        let line = request.line.clone();
        let cwd = request.cwd.clone();
        let output_limit = request.output_limit;
        let spec = AttachedSpec {
            request,
            confinement,
        };
        let spec_path = write_spec(&spec)?;
        let command = TerminalCommand {
            command: exe.display().to_string(),
            args: vec![
                "sandbox-exec".to_owned(),
                "--spec-file".to_owned(),
                spec_path.display().to_string(),
                "--".to_owned(),
                line,
            ],
            env: Vec::new(),
            cwd,
            output_limit,
        };
        // `sandbox-exec` enforces the timeout itself; this only guards
        // against a client that never reports the exit.
        let exit = terminal
            .run(
                &ctx.session_id,
                command,
                timeout + TERMINAL_GRACE,
                ctx.progress.clone(),
                ctx.cancel.clone(),
            )
            .await;
        // Normally `sandbox-exec` removed it on start.
        let _ = std::fs::remove_file(&spec_path);
        if ctx.cancel.is_cancelled() {
            return Err(ToolError::Cancelled);
        }
        let exit = exit.map_err(|err| {
            ToolError::Failed(format!(
                "the editor's terminal failed to run the command: {err}"
            ))
        })?;
        terminal_result(exit, timeout, status)
    }
}

/// How long past the call's timeout to wait for a client terminal's exit.
const TERMINAL_GRACE: Duration = Duration::from_secs(10);

/// Writes a `sandbox-exec` spec to a file only this user can read.
fn write_spec(spec: &AttachedSpec) -> Result<PathBuf, ToolError> {
    use std::io::Write as _;
    let failed = |err: std::io::Error| {
        ToolError::Failed(format!("cannot write the command's sandbox spec: {err}"))
    };
    let mut file = tempfile::Builder::new()
        .prefix("pincer-exec-")
        .suffix(".json")
        .tempfile()
        .map_err(failed)?;
    let json = serde_json::to_vec(spec)
        .map_err(|err| ToolError::Failed(format!("cannot encode the sandbox spec: {err}")))?;
    file.write_all(&json).map_err(failed)?;
    let (_, path) = file.keep().map_err(|err| failed(err.error))?;
    Ok(path)
}

/// The most output streamed to the editor while a command runs; the result
/// still keeps the head and tail of all of it.
const STREAM_LIMIT: usize = 1024 * 1024;

/// Turns a running command's output into progress reports of whole lines.
struct LineStream {
    progress: Progress,
    pending: Vec<u8>,
    streamed: usize,
}

impl LineStream {
    fn new(progress: Progress) -> Self {
        Self {
            progress,
            pending: Vec::new(),
            streamed: 0,
        }
    }

    fn into_live(mut self) -> sandbox::LiveOutput {
        Box::new(move |bytes: &[u8]| self.push(bytes))
    }

    fn push(&mut self, bytes: &[u8]) {
        if self.streamed >= STREAM_LIMIT {
            return;
        }
        self.pending.extend_from_slice(bytes);
        if let Some(end) = self.pending.iter().rposition(|b| *b == b'\n') {
            let lines: Vec<u8> = self.pending.drain(..=end).collect();
            self.send(&lines);
        }
    }

    fn send(&mut self, bytes: &[u8]) {
        self.streamed += bytes.len();
        let mut text = String::from_utf8_lossy(bytes).into_owned();
        if self.streamed >= STREAM_LIMIT {
            text.push_str("[further output is not streamed; the result keeps its head and tail]\n");
        }
        self.progress.report(ProgressUpdate::Output(text));
    }
}

impl Drop for LineStream {
    fn drop(&mut self) {
        // The last line, if it had no newline.
        if !self.pending.is_empty() && self.streamed < STREAM_LIMIT {
            let rest = std::mem::take(&mut self.pending);
            self.send(&rest);
        }
    }
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Args {
    /// The command line, run with `bash -c`.
    command: String,
    // Its description and most are the settings' (`ShellTool::configured`).
    #[serde(default)]
    #[schemars(range(min = 1))]
    timeout_secs: Option<u64>,
    /// Working directory, relative to the workspace (default: the workspace
    /// root).
    #[serde(default)]
    cwd: Option<String>,
}

impl TypedTool for ShellTool {
    type Args = Args;
    const NAME: &'static str = "shell";
    const KIND: ToolKind = ToolKind::Execute;

    fn description(&self) -> String {
        let default = self.settings.timeout.as_secs();
        let max = self.settings.max_timeout.as_secs();
        let network = if self.settings.network {
            "Network access is allowed."
        } else {
            "There is no network access (TCP connections are refused)."
        };
        format!(
            "Runs a command line with bash in the workspace and returns its output \
             (stdout and stderr interleaved) followed by its exit status. \
             The command runs in a sandbox: it may read and write the workspace, read \
             and run system files and the installed toolchains (cargo, node, python, go, \
             ...; their caches are read-only), and write a private temporary directory \
             ($TMPDIR); everything else is denied. {network} There is no stdin and no terminal, so \
             interactive programs fail; pass flags such as --yes or --no-pager instead. \
             Background processes are killed when the command ends. Long output keeps \
             its beginning and end. Times out after {default} s unless `timeout_secs` \
             says otherwise (at most {max} s)."
        )
    }

    /// The default and the most of `timeout_secs`, which are the settings'.
    fn configured(&self) -> Vec<(&'static str, serde_json::Value)> {
        let default = self.settings.timeout.as_secs();
        let max = self.settings.max_timeout.as_secs();
        vec![(
            "timeout_secs",
            serde_json::json!({
                "maximum": max,
                "description": format!("Seconds before the command is killed (default {default}, at most {max})."),
            }),
        )]
    }

    async fn plan(&self, args: &Args, ctx: &ToolContext) -> Result<Plan, ToolError> {
        if args.command.trim().is_empty() {
            return Err(ToolError::InvalidArguments("`command` is empty".to_owned()));
        }
        self.timeout(args)?;
        let cwd = ctx.path(args.cwd.as_deref().unwrap_or("."))?;
        match tokio::fs::metadata(&cwd).await {
            Ok(meta) if meta.is_dir() => {}
            Ok(_) => {
                return Err(ToolError::InvalidArguments(format!(
                    "`cwd` {} is not a directory",
                    ctx.display_path(&cwd)
                )));
            }
            Err(err) => {
                return Err(ToolError::InvalidArguments(format!(
                    "`cwd` {}: {err}",
                    ctx.display_path(&cwd)
                )));
            }
        }
        Ok(Plan {
            title: format!("Run `{}`", shorten(&args.command, 80)),
            reads: vec![cwd],
            command: Some(args.command.clone()),
            ..Plan::default()
        })
    }

    async fn execute(
        &self,
        args: &Args,
        plan: &Plan,
        ctx: &ToolContext,
    ) -> Result<ToolOutput, ToolError> {
        self.run(plan, ctx, args).await
    }
}

/// How a command in the client's terminal ended, as the model reads it:
/// its output, then how it ended and whether the sandbox held.
fn terminal_result(
    exit: TerminalExit,
    timeout: Duration,
    status: &SandboxStatus,
) -> Result<ToolOutput, ToolError> {
    let mut text = exit.output;
    if !text.is_empty() && !text.ends_with('\n') {
        text.push('\n');
    }
    if exit.truncated {
        text.insert_str(0, "[earlier output cut off by the terminal's limit]\n");
    }
    let ok = exit.exit_code == Some(0) && !exit.timed_out;
    if exit.timed_out {
        text.push_str(&format!(
            "[timed out after {} s; killed]\n",
            timeout.as_secs()
        ));
    } else if let Some(code) = exit.exit_code {
        text.push_str(&format!("[exit code {code}]\n"));
    } else if let Some(signal) = &exit.signal {
        text.push_str(&format!("[killed by signal {signal}]\n"));
    }
    if !status.enforced {
        text.push_str(&format!("[not sandboxed: {}]\n", status.detail));
    }
    text.truncate(text.trim_end_matches('\n').len());
    if ok {
        Ok(ToolOutput {
            text,
            terminal_id: Some(exit.terminal_id),
            ..ToolOutput::default()
        })
    } else {
        Err(ToolError::Failed(text))
    }
}

/// The output, then one line per fact the model needs: how the command ended,
/// and whether the sandbox held.
fn format_result(result: &ExecResult, timeout: Duration, network_allowed: bool) -> String {
    let mut text = result.output.clone();
    if !text.is_empty() && !text.ends_with('\n') {
        text.push('\n');
    }
    if result.timed_out {
        text.push_str(&format!(
            "[timed out after {} s; process group killed]\n",
            timeout.as_secs()
        ));
    } else if let Some(code) = result.exit_code {
        text.push_str(&format!("[exit code {code}]\n"));
    } else if let Some(signal) = result.signal {
        match signal_name(signal) {
            Some(name) => text.push_str(&format!("[killed by signal {signal} ({name})]\n")),
            None => text.push_str(&format!("[killed by signal {signal}]\n")),
        }
    }
    if result.output_detached {
        text.push_str(
            "[output cut off: a process that left the process group kept the output open]\n",
        );
    }
    match &result.sandbox_note {
        Some(note) if !result.confined => text.push_str(&format!("[not sandboxed: {note}]\n")),
        Some(note) if !network_allowed && !result.network_confined => {
            text.push_str(&format!("[network not sandboxed: {note}]\n"));
        }
        _ => {}
    }
    text.truncate(text.trim_end_matches('\n').len());
    text
}

fn signal_name(signal: i32) -> Option<&'static str> {
    Some(match signal {
        libc::SIGHUP => "SIGHUP",
        libc::SIGINT => "SIGINT",
        libc::SIGQUIT => "SIGQUIT",
        libc::SIGILL => "SIGILL",
        libc::SIGABRT => "SIGABRT",
        libc::SIGBUS => "SIGBUS",
        libc::SIGFPE => "SIGFPE",
        libc::SIGKILL => "SIGKILL",
        libc::SIGSEGV => "SIGSEGV",
        libc::SIGPIPE => "SIGPIPE",
        libc::SIGALRM => "SIGALRM",
        libc::SIGTERM => "SIGTERM",
        libc::SIGXCPU => "SIGXCPU",
        libc::SIGXFSZ => "SIGXFSZ",
        _ => return None,
    })
}

/// The first line of `line`, at most `max` characters, marked when cut.
fn shorten(line: &str, max: usize) -> String {
    let first = line.lines().next().unwrap_or("").trim_end();
    let more_lines = line.trim_end().contains('\n');
    let mut out: String = first.chars().take(max).collect();
    if more_lines || first.chars().count() > max {
        out.push('…');
    }
    out
}

#[cfg(test)]
mod tests {
    use std::path::Path;
    use std::sync::Arc;

    use tokio_util::sync::CancellationToken;

    use super::*;
    use crate::core::ids::SessionId;
    use crate::core::policy::{DEFAULT_FORBIDDEN, PathBoundary};
    use crate::core::tool::{Files, Tool};
    use serde_json::json;

    fn context(ws: &Path) -> ToolContext {
        let forbidden: Vec<String> = DEFAULT_FORBIDDEN.iter().map(|s| (*s).to_owned()).collect();
        let session_id = SessionId::generate();
        ToolContext {
            session_id: session_id.clone(),
            workspace: ws.to_path_buf(),
            boundary: Arc::new(PathBoundary::new(ws, &[], &forbidden, None)),
            files: Files::local(session_id),
            cancel: CancellationToken::new(),
            progress: crate::core::tool::Progress::none(),
            terminal: None,
            memory: None,
            call_id: None,
            run_id: None,
            skills: None,
        }
    }

    fn workspace() -> (tempfile::TempDir, PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let path = std::fs::canonicalize(dir.path()).unwrap();
        (dir, path)
    }

    async fn call(
        tool: &dyn Tool,
        ctx: &ToolContext,
        arguments: serde_json::Value,
    ) -> Result<ToolOutput, ToolError> {
        let plan = tool.plan(&arguments, ctx).await?;
        tool.execute(&arguments, &plan, ctx).await
    }

    fn unavailable() -> SandboxStatus {
        SandboxStatus {
            abi: None,
            enforced: false,
            network_rules: false,
            detail: "simulated: no Landlock here".to_owned(),
        }
    }

    #[test]
    fn a_terminal_exit_is_worded_as_the_model_reads_it() {
        let exit = |output: &str, exit_code, timed_out, truncated| TerminalExit {
            terminal_id: "term_1".to_owned(),
            output: output.to_owned(),
            truncated,
            exit_code,
            signal: None,
            timed_out,
        };
        let enforced = SandboxStatus {
            enforced: true,
            ..unavailable()
        };
        let timeout = Duration::from_secs(7);
        let ok = terminal_result(exit("done", Some(0), false, false), timeout, &enforced).unwrap();
        assert_eq!(ok.text, "done\n[exit code 0]");
        assert_eq!(ok.terminal_id.as_deref(), Some("term_1"));
        let failed = terminal_result(
            exit("tail\n", Some(2), false, true),
            timeout,
            &unavailable(),
        );
        assert_eq!(
            failed.unwrap_err().to_string(),
            "[earlier output cut off by the terminal's limit]\ntail\n[exit code 2]\n\
             [not sandboxed: simulated: no Landlock here]"
        );
        let slow = terminal_result(exit("", None, true, false), timeout, &enforced);
        assert_eq!(
            slow.unwrap_err().to_string(),
            "[timed out after 7 s; killed]"
        );
    }

    #[test]
    fn the_spec_describes_the_parameters() {
        let tool = ShellTool::new(ShellSettings::default());
        let spec = tool.spec();
        assert_eq!(spec.name, "shell");
        assert_eq!(tool.kind(), ToolKind::Execute);
        assert_eq!(spec.parameters["required"], json!(["command"]));
        assert_eq!(
            spec.parameters["properties"]["timeout_secs"]["maximum"],
            600
        );
        assert!(spec.description.contains("120 s"));
    }

    #[tokio::test]
    async fn the_plan_names_the_command_and_the_directory() {
        let (_dir, ws) = workspace();
        std::fs::create_dir(ws.join("sub")).unwrap();
        let ctx = context(&ws);
        let tool: &dyn Tool = &ShellTool::new(ShellSettings::default());
        let plan = tool
            .plan(&json!({"command": "cargo test", "cwd": "sub"}), &ctx)
            .await
            .unwrap();
        assert_eq!(plan.title, "Run `cargo test`");
        assert_eq!(plan.command.as_deref(), Some("cargo test"));
        assert_eq!(plan.reads, vec![ws.join("sub")]);
        assert!(plan.writes.is_empty());

        let plan = tool.plan(&json!({"command": "ls"}), &ctx).await.unwrap();
        assert_eq!(plan.reads, vec![ws.clone()]);

        let long = format!("echo {}\necho second", "x".repeat(200));
        let plan = tool.plan(&json!({"command": long}), &ctx).await.unwrap();
        assert_eq!(plan.title, format!("Run `echo {}…`", "x".repeat(75)));
    }

    #[tokio::test]
    async fn bad_arguments_and_directories_are_refused() {
        let (_dir, ws) = workspace();
        std::fs::write(ws.join("file"), "").unwrap();
        let ctx = context(&ws);
        let tool: &dyn Tool = &ShellTool::new(ShellSettings::default());
        for (arguments, expected) in [
            (json!({}), "`command`"),
            (json!({"command": "  "}), "`command` is empty"),
            (
                json!({"command": "ls", "timeout_secs": 0}),
                "`timeout_secs`",
            ),
            (
                json!({"command": "ls", "timeout_secs": -1}),
                "`timeout_secs`",
            ),
            (json!({"command": "ls", "cwd": "file"}), "not a directory"),
            (json!({"command": "ls", "cwd": "missing"}), "`cwd` missing"),
            (json!({"command": "ls", "shell": "zsh"}), "unknown field"),
        ] {
            match tool.plan(&arguments, &ctx).await {
                Err(ToolError::InvalidArguments(message)) => {
                    assert!(message.contains(expected), "{arguments}: {message}")
                }
                other => panic!("{arguments}: {other:?}"),
            }
        }
        assert!(matches!(
            tool.plan(&json!({"command": "ls", "cwd": "/etc"}), &ctx)
                .await,
            Err(ToolError::Path(_))
        ));
        assert!(matches!(
            tool.plan(&json!({"command": "ls", "cwd": ".."}), &ctx)
                .await,
            Err(ToolError::Path(_))
        ));
    }

    #[tokio::test]
    async fn a_successful_command_returns_its_output_and_exit_code() {
        let (_dir, ws) = workspace();
        std::fs::create_dir(ws.join("sub")).unwrap();
        let ctx = context(&ws);
        let tool = ShellTool::new(ShellSettings::default());
        let output = call(
            &tool,
            &ctx,
            json!({"command": "pwd; echo err >&2", "cwd": "sub"}),
        )
        .await
        .unwrap();
        let expected = format!("{}\nerr\n[exit code 0]", ws.join("sub").display());
        if crate::sandbox::status().enforced {
            assert_eq!(output.text, expected);
        } else {
            assert!(output.text.starts_with(&expected), "{}", output.text);
            assert!(output.text.contains("[not sandboxed: "), "{}", output.text);
        }
    }

    #[tokio::test]
    async fn a_failing_command_is_a_failed_call_with_its_output() {
        let (_dir, ws) = workspace();
        let ctx = context(&ws);
        let tool = ShellTool::new(ShellSettings::default());
        let err = call(&tool, &ctx, json!({"command": "echo oops; exit 3"}))
            .await
            .unwrap_err();
        let ToolError::Failed(text) = err else {
            panic!("{err:?}");
        };
        assert!(text.starts_with("oops\n[exit code 3]"), "{text}");
        let err = call(&tool, &ctx, json!({"command": "kill -SEGV $$"}))
            .await
            .unwrap_err();
        let ToolError::Failed(text) = err else {
            panic!("{err:?}");
        };
        assert!(
            text.starts_with("[killed by signal 11 (SIGSEGV)]"),
            "{text}"
        );
    }

    #[tokio::test]
    async fn a_timeout_is_a_failed_call() {
        let (_dir, ws) = workspace();
        let ctx = context(&ws);
        let tool = ShellTool::new(ShellSettings::default());
        let started = std::time::Instant::now();
        let err = call(
            &tool,
            &ctx,
            json!({"command": "echo started; sleep 30 & sleep 30", "timeout_secs": 2}),
        )
        .await
        .unwrap_err();
        assert!(started.elapsed() < Duration::from_secs(15));
        let ToolError::Failed(text) = err else {
            panic!("{err:?}");
        };
        assert!(
            text.starts_with("started\n[timed out after 2 s; process group killed]"),
            "{text}"
        );
    }

    #[test]
    fn the_timeout_is_capped() {
        let tool = ShellTool::new(ShellSettings {
            max_timeout: Duration::from_secs(5),
            ..ShellSettings::default()
        });
        let args = Args {
            command: "true".to_owned(),
            timeout_secs: Some(3600),
            cwd: None,
        };
        assert_eq!(tool.timeout(&args).unwrap(), Duration::from_secs(5));
        let args = Args {
            timeout_secs: None,
            ..args
        };
        assert_eq!(tool.timeout(&args).unwrap(), Duration::from_secs(5));
    }

    #[tokio::test]
    async fn cancelling_the_run_cancels_the_call() {
        let (_dir, ws) = workspace();
        let ctx = context(&ws);
        let tool = ShellTool::new(ShellSettings::default());
        let cancel = ctx.cancel.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(500)).await;
            cancel.cancel();
        });
        let started = std::time::Instant::now();
        let err = call(&tool, &ctx, json!({"command": "sleep 30"}))
            .await
            .unwrap_err();
        assert_eq!(err, ToolError::Cancelled);
        assert!(started.elapsed() < Duration::from_secs(15));
    }

    #[tokio::test]
    async fn required_mode_refuses_without_landlock() {
        let (_dir, ws) = workspace();
        let ctx = context(&ws);
        let tool = ShellTool::new(ShellSettings {
            mode: SandboxMode::Required,
            ..ShellSettings::default()
        })
        .with_sandbox_status(unavailable());
        let err = call(&tool, &ctx, json!({"command": "touch ran"}))
            .await
            .unwrap_err();
        let ToolError::Failed(message) = err else {
            panic!("{err:?}");
        };
        assert!(message.contains("sandbox = \"required\""), "{message}");
        assert!(message.contains("simulated: no Landlock here"), "{message}");
        assert!(!ws.join("ran").exists());

        let tool = ShellTool::new(ShellSettings::default()).with_sandbox_status(unavailable());
        let output = call(&tool, &ctx, json!({"command": "touch ran"}))
            .await
            .unwrap();
        assert_eq!(
            output.text,
            "[exit code 0]\n[not sandboxed: simulated: no Landlock here]"
        );
        assert!(ws.join("ran").exists());
    }

    #[tokio::test]
    async fn commands_are_confined_to_the_workspace() {
        let status = crate::sandbox::status();
        if !status.enforced {
            eprintln!(
                "skipping commands_are_confined_to_the_workspace: {}",
                status.detail
            );
            return;
        }
        let (_dir, ws) = workspace();
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(outside.path().join("secret"), "TOP SECRET").unwrap();
        let ctx = context(&ws);
        let tool = ShellTool::new(ShellSettings::default());
        let line = format!(
            "echo inside > inside.txt && cat {dir}/secret; echo x > {dir}/new",
            dir = outside.path().display()
        );
        let err = call(&tool, &ctx, json!({"command": line}))
            .await
            .unwrap_err();
        let ToolError::Failed(text) = err else {
            panic!("{err:?}");
        };
        assert!(!text.contains("TOP SECRET"), "{text}");
        assert_eq!(text.matches("Permission denied").count(), 2, "{text}");
        assert!(text.ends_with("[exit code 1]"), "{text}");
        assert!(ws.join("inside.txt").exists());
        assert!(!outside.path().join("new").exists());
    }

    #[tokio::test]
    async fn secrets_in_the_server_environment_do_not_reach_the_command() {
        // The server's real environment is the source; no variable is set
        // here (tests share the process environment), so check whatever
        // secret-looking names this process happens to have, and that PATH
        // arrives.
        let (_dir, ws) = workspace();
        let ctx = context(&ws);
        let tool = ShellTool::new(ShellSettings {
            env_allow: vec!["PATH".to_owned(), "HOSTNAME".to_owned()],
            ..ShellSettings::default()
        });
        let output = call(&tool, &ctx, json!({"command": "env"})).await.unwrap();
        let names: Vec<&str> = output
            .text
            .lines()
            .filter_map(|line| line.split_once('=').map(|(name, _)| name))
            .collect();
        assert!(names.contains(&"PATH"), "{}", output.text);
        assert!(names.contains(&"HOME"), "{}", output.text);
        for name in names {
            assert!(
                [
                    "PATH",
                    "HOSTNAME",
                    "HOME",
                    "TMPDIR",
                    "XDG_CACHE_HOME",
                    "PWD",
                    "SHLVL",
                    "_"
                ]
                .contains(&name),
                "{name} reached the command"
            );
        }
    }

    #[test]
    fn results_are_formatted_for_the_model() {
        let base = ExecResult {
            exit_code: Some(0),
            signal: None,
            output: "out".to_owned(),
            omitted_bytes: 0,
            timed_out: false,
            cancelled: false,
            confined: true,
            network_confined: true,
            sandbox_note: None,
            output_detached: false,
            duration: Duration::from_millis(5),
        };
        let timeout = Duration::from_secs(120);
        assert_eq!(format_result(&base, timeout, false), "out\n[exit code 0]");
        let partial = ExecResult {
            network_confined: false,
            sandbox_note: Some("TCP is not confined".to_owned()),
            output_detached: true,
            ..base.clone()
        };
        assert_eq!(
            format_result(&partial, timeout, false),
            "out\n[exit code 0]\n[output cut off: a process that left the process group kept the output open]\n[network not sandboxed: TCP is not confined]"
        );
        assert_eq!(
            format_result(&partial, timeout, true),
            "out\n[exit code 0]\n[output cut off: a process that left the process group kept the output open]"
        );
        let empty = ExecResult {
            output: String::new(),
            exit_code: None,
            signal: Some(9),
            timed_out: true,
            ..base
        };
        assert_eq!(
            format_result(&empty, timeout, false),
            "[timed out after 120 s; process group killed]"
        );
    }
}
