//! The command line: flags, subcommands, and the exit codes they map to.

mod inspect;
mod login;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, CommandFactory, Parser, Subcommand, ValueEnum};

use std::sync::Arc;

use crate::config::{Config, Flags, SandboxSetting};
use crate::core::agent_loop::LoopConfig;
use crate::core::policy::DEFAULT_FORBIDDEN;
use crate::core::runtime::{PathsConfig, Runtime, RuntimeConfig};
use crate::store::Store;

/// Exit codes, documented in the README.
pub mod exit {
    pub const OK: u8 = 0;
    pub const RUN_FAILED: u8 = 1;
    pub const USAGE: u8 = 2;
    pub const CANCELLED: u8 = 3;
}

/// Shown after `pincer --help`: what the environment sets, and where to start.
const TOP_AFTER_HELP: &str = "\
Environment:
  OPENAI_API_KEY, OPENAI_BASE_URL        the `openai` provider (any OpenAI-compatible server)
  ANTHROPIC_API_KEY, ANTHROPIC_BASE_URL  the `anthropic` provider
  PINCER_CONFIG, PINCER_DATA_DIR         the config file and the data directory
  PINCER_PROVIDER, PINCER_MODEL, PINCER_MODE, PINCER_SANDBOX, PINCER_MAX_TURN_REQUESTS
                                         defaults of the flags of the same names
  XDG_CONFIG_HOME, XDG_DATA_HOME         where the config and the data live by default
  RUST_LOG                               log filter (overrides -v)
  NO_COLOR                               no colours in the terminal

Examples:
  OPENAI_API_KEY=sk-... pincer run --model gpt-4.1-mini \"Explain this repository\"
  OPENAI_BASE_URL=http://127.0.0.1:11434/v1 pincer run --model llama3.2 \"Hi\"
  pincer run --script examples/hello.jsonl \"Say hello\"   # no model needed
  pincer sessions list
  pincer doctor

Documentation: docs/ in the repository, README.md to start";

#[derive(Debug, Parser)]
#[command(
    name = "pincer",
    version,
    about = "An agent runtime: ACP for editors, headless runs for CI",
    after_help = TOP_AFTER_HELP
)]
pub struct Cli {
    /// Config file [default: $XDG_CONFIG_HOME/pincer/config.toml; env: PINCER_CONFIG]
    #[arg(long, global = true, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Where the database lives [default: $XDG_DATA_HOME/pincer; env: PINCER_DATA_DIR]
    #[arg(long, global = true, value_name = "DIR")]
    pub data_dir: Option<PathBuf>,
    /// More log output on stderr: -v info, -vv debug, -vvv trace (RUST_LOG overrides)
    #[arg(short, long, global = true, action = clap::ArgAction::Count)]
    pub verbose: u8,
    /// Write logs to this file instead of stderr
    #[arg(long, global = true, value_name = "FILE")]
    pub log_file: Option<PathBuf>,
    /// Without one, `pincer` on a terminal opens a conversation (`pincer chat`).
    #[command(subcommand)]
    pub command: Option<Command>,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Serve the Agent Client Protocol on stdin/stdout (what editors launch)
    Acp(AcpArgs),
    /// Run prompts headless and stream the reply
    Run(RunArgs),
    /// Talk to Pincer in the terminal (also what `pincer` alone does on a terminal)
    Chat(ChatArgs),
    /// Serve HTTP (REST, SSE, JSON-RPC over WebSocket) until SIGTERM/SIGINT
    Serve(crate::serve::ServeArgs),
    /// List and inspect sessions
    #[command(subcommand)]
    Sessions(SessionsCommand),
    /// Inspect runs
    #[command(subcommand)]
    Runs(RunsCommand),
    /// Replay a run's events from the tape
    Tape(TapeArgs),
    /// Inspect chat channels' durable delivery
    #[command(subcommand)]
    Channels(ChannelsCommand),
    /// Set up a model provider: an API key or a local server, checked and
    /// stored (mode 0600) for every session
    Login(login::LoginArgs),
    /// Remove what `pincer login` stored
    Logout(login::LogoutArgs),
    /// Check the config, each provider (key or URL, model), each MCP server
    /// (started), the database, the HTTP token and the sandbox; exit 1 on a
    /// problem, each named with its fix
    Doctor {
        /// Also send each HTTP provider one cheap request (`GET /models`)
        #[arg(long)]
        online: bool,
    },
    /// Walk the receipt chain of every tool call and report the first broken link
    Verify {
        /// Print the result as JSON
        #[arg(long)]
        json: bool,
    },
    /// Show the effective configuration
    #[command(subcommand)]
    Config(ConfigCommand),
    /// Run a shell tool call confined, in the client's terminal (started by
    /// Pincer through ACP `terminal/create`; not for direct use)
    #[command(hide = true)]
    SandboxExec {
        /// The call's spec, written by the shell tool; removed once read
        #[arg(long, value_name = "FILE")]
        spec_file: PathBuf,
        /// The command line, shown in the terminal's title; the spec decides what runs
        #[arg(last = true)]
        shown: Vec<String>,
    },
    /// Print a shell completion script
    Completions {
        /// The shell to complete for
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
}

#[derive(Debug, Clone, Args, Default)]
pub struct AcpArgs {
    #[command(flatten)]
    pub provider: ProviderArgs,
    /// Also bridge a chat channel (a [channels.NAME] table, or `telegram`); repeatable
    #[arg(long = "channel", value_name = "NAME")]
    pub channels: Vec<String>,
}

#[derive(Debug, Clone, Args, Default)]
pub struct ProviderArgs {
    /// Provider for new sessions: `openai` or `anthropic` (no table needed:
    /// OPENAI_API_KEY / OPENAI_BASE_URL, ANTHROPIC_API_KEY), one stored by
    /// `pincer login`, a [providers.NAME] table, or `scripted` with --script
    #[arg(long, value_name = "NAME")]
    pub provider: Option<String>,
    /// Model for new sessions
    #[arg(long, value_name = "MODEL")]
    pub model: Option<String>,
    /// Model script for the scripted provider (docs/scripted-provider.md)
    #[arg(long, value_name = "FILE")]
    pub script: Option<PathBuf>,
    /// Most model requests in one run
    #[arg(long, value_name = "N")]
    pub max_turn_requests: Option<u32>,
    /// Autonomy mode of new sessions: read_only, supervised or full
    #[arg(long, value_name = "MODE")]
    pub mode: Option<String>,
    /// Whether shell commands must run under Landlock
    #[arg(long, value_enum, value_name = "SETTING")]
    pub sandbox: Option<SandboxSetting>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Default)]
pub enum OutputFormat {
    /// The reply on stdout, progress on stderr
    #[default]
    Text,
    /// One JSON event per line on stdout (docs/headless.md)
    Jsonl,
}

/// Which approvals `pincer run` grants on its own.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Default)]
pub enum ApprovePolicy {
    /// Refuse every call that needs approval: nobody is there to give it
    #[default]
    Never,
    /// Approve reads and searches, refuse the rest
    Reads,
    /// Approve every call that needs approval (policy denials still apply)
    All,
}

#[derive(Debug, Args)]
#[command(after_help = "\
Examples:
  pincer run --model gpt-4.1-mini \"Why does the build fail?\"
  git diff | pincer run -                          # the prompt from stdin
  pincer run --output jsonl --input steps.jsonl     # prompts and approvals from a file
  pincer run --session ses_... \"And now the tests\"    # continue a session

Exit codes: 0 completed, 1 failed, 2 usage or configuration error,
3 cancelled, refused, or a call refused because nobody could approve it")]
pub struct RunArgs {
    /// The prompt ("-" reads it from stdin)
    #[arg(value_name = "PROMPT", conflicts_with_all = ["prompt_file", "input"])]
    pub prompt: Option<String>,
    /// Read the prompt from a file ("-" for stdin)
    #[arg(long, value_name = "FILE", conflicts_with = "input")]
    pub prompt_file: Option<PathBuf>,
    /// Scripted user input: JSON lines such as {"prompt": "..."}, run in order
    #[arg(long, value_name = "FILE")]
    pub input: Option<PathBuf>,
    /// Attach an image (PNG, JPEG, GIF or WebP) to the prompt; may be repeated
    #[arg(long, value_name = "FILE", conflicts_with = "input")]
    pub image: Vec<PathBuf>,
    /// What stdout carries
    #[arg(long, value_enum, default_value_t)]
    pub output: OutputFormat,
    /// How to answer approvals the input script does not answer
    #[arg(long, value_enum, default_value_t, value_name = "WHICH")]
    pub approve: ApprovePolicy,
    /// Continue an existing session
    #[arg(long, value_name = "ID")]
    pub session: Option<String>,
    /// Workspace of a new session [default: the current directory]
    #[arg(long, value_name = "DIR", conflicts_with = "session")]
    pub cwd: Option<PathBuf>,
    #[command(flatten)]
    pub provider: ProviderArgs,
}

#[derive(Debug, Args, Default)]
pub struct ChatArgs {
    /// Pick an earlier session of this workspace to continue (or give its id)
    #[arg(long, value_name = "ID", num_args = 0..=1, conflicts_with = "session")]
    pub resume: Option<Option<String>>,
    /// Continue this session
    #[arg(long, value_name = "ID")]
    pub session: Option<String>,
    #[command(flatten)]
    pub provider: ProviderArgs,
}

#[derive(Debug, Subcommand)]
pub enum ChannelsCommand {
    /// List outbound chat messages (send intents), most recently changed first
    Outbox {
        /// Only intents in this status: pending, sending, committing, sent,
        /// failed, unknown_after_send, cancelled, expired
        #[arg(long, value_name = "STATUS")]
        status: Option<String>,
        /// At most this many
        #[arg(long, default_value_t = 50)]
        limit: usize,
        /// Print JSON lines instead of a table
        #[arg(long)]
        json: bool,
    },
}

#[derive(Debug, Subcommand)]
pub enum SessionsCommand {
    /// List sessions, most recently active first
    List {
        /// Only sessions whose workspace is this directory
        #[arg(long, value_name = "DIR")]
        cwd: Option<PathBuf>,
        /// At most this many
        #[arg(long, default_value_t = 50)]
        limit: usize,
        /// Print JSON lines instead of a table
        #[arg(long)]
        json: bool,
    },
    /// Show a session with its history and runs
    Show {
        /// The session (ses_…, from `pincer sessions list`)
        id: String,
        /// Print JSON instead of text
        #[arg(long)]
        json: bool,
    },
}

#[derive(Debug, Subcommand)]
pub enum RunsCommand {
    /// Show a run's state, timings, stop reason and usage
    Show {
        /// The run (run_…, from `pincer sessions show` or `--output jsonl`)
        id: String,
        /// Print JSON instead of text
        #[arg(long)]
        json: bool,
    },
}

#[derive(Debug, Args)]
pub struct TapeArgs {
    /// The run to replay
    pub run: String,
    /// Print the raw events as JSON lines
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Subcommand)]
pub enum ConfigCommand {
    /// Print the effective configuration and where each value came from
    Show,
}

/// Parses the command line, runs the command, and maps the result to an exit code.
pub fn main() -> ExitCode {
    let cli = Cli::parse();
    let _guard = match crate::logging::init(cli.verbose, cli.log_file.as_deref()) {
        Ok(guard) => guard,
        Err(err) => {
            eprintln!("pincer: {err:#}");
            return ExitCode::from(exit::USAGE);
        }
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(err) => {
            eprintln!("pincer: cannot start the async runtime: {err}");
            return ExitCode::from(exit::RUN_FAILED);
        }
    };
    let code = runtime.block_on(dispatch(cli));
    // Do not wait for stray blocking reads of stdin.
    runtime.shutdown_timeout(std::time::Duration::from_millis(100));
    ExitCode::from(code)
}

/// An error with the exit code it maps to.
#[derive(Debug)]
pub struct Failure {
    pub code: u8,
    pub error: anyhow::Error,
}

impl Failure {
    pub fn usage(error: impl Into<anyhow::Error>) -> Self {
        Self {
            code: exit::USAGE,
            error: error.into(),
        }
    }

    pub fn failed(error: impl Into<anyhow::Error>) -> Self {
        Self {
            code: exit::RUN_FAILED,
            error: error.into(),
        }
    }
}

async fn dispatch(cli: Cli) -> u8 {
    let Some(command) = &cli.command else {
        return no_command(&cli).await;
    };
    let result = match *command {
        Command::Acp(ref args) => acp(&cli, args).await,
        Command::Run(ref args) => {
            crate::headless::run(&flags(&cli, Some(&args.provider)), args).await
        }
        Command::Chat(ref args) => {
            crate::terminal::run(&flags(&cli, Some(&args.provider)), args).await
        }
        Command::Serve(ref args) => {
            crate::serve::run(&flags(&cli, Some(&args.provider)), args).await
        }
        Command::Sessions(ref command) => inspect::sessions(&flags(&cli, None), command).await,
        Command::Runs(ref command) => inspect::runs(&flags(&cli, None), command).await,
        Command::Channels(ref command) => inspect::channels(&flags(&cli, None), command).await,
        Command::Tape(ref args) => inspect::tape(&flags(&cli, None), args).await,
        Command::Login(ref args) => login::login(args).await,
        Command::Logout(ref args) => login::logout(args),
        Command::Doctor { online } => inspect::doctor(&flags(&cli, None), online).await,
        Command::Verify { json } => inspect::verify(&flags(&cli, None), json).await,
        Command::Config(ConfigCommand::Show) => inspect::config_show(&flags(&cli, None)),
        Command::SandboxExec { ref spec_file, .. } => crate::sandbox::exec_spec_file(spec_file)
            .await
            .map_err(|err| Failure::failed(anyhow::anyhow!("sandbox-exec: {err}"))),
        Command::Completions { shell } => {
            let mut command = Cli::command();
            clap_complete::generate(shell, &mut command, "pincer", &mut crate::stdout::writer());
            Ok(exit::OK)
        }
    };
    match result {
        Ok(code) => code,
        Err(failure) => {
            eprintln!("pincer: {}", chain(&failure.error));
            failure.code
        }
    }
}

/// The no-provider message with the config file a table would go in.
pub fn no_provider(config: &Config) -> String {
    let file = config.file.clone().or_else(|| {
        crate::credentials::path(&|name| std::env::var(name).ok())
            .map(|p| p.with_file_name("config.toml"))
    });
    match file {
        Some(file) => format!(
            "{} ({})",
            crate::core::provider::NO_PROVIDER,
            file.display()
        ),
        None => crate::core::provider::NO_PROVIDER.to_owned(),
    }
}

/// An error and its causes on one line, each cause once: an error whose own
/// text already ends with its cause's (`cannot read X: No such file…`, with
/// the `io::Error` as its source) does not repeat it.
pub fn chain(error: &anyhow::Error) -> String {
    let mut line = String::new();
    for cause in error.chain() {
        let text = cause.to_string();
        if line.ends_with(&text) {
            continue;
        }
        if !line.is_empty() {
            line.push_str(": ");
        }
        line.push_str(&text);
    }
    line
}

/// `pincer` alone: a conversation when a person is at a terminal, else the
/// help on stderr and the usage exit code, as clap gives for a missing subcommand.
async fn no_command(cli: &Cli) -> u8 {
    use std::io::IsTerminal as _;
    if std::io::stdin().is_terminal() && crate::stdout::is_terminal() {
        let args = ChatArgs::default();
        return match crate::terminal::run(&flags(cli, Some(&args.provider)), &args).await {
            Ok(code) => code,
            Err(failure) => {
                eprintln!("pincer: {}", chain(&failure.error));
                failure.code
            }
        };
    }
    eprint!("{}", Cli::command().render_help());
    exit::USAGE
}

fn flags(cli: &Cli, provider: Option<&ProviderArgs>) -> Flags {
    let provider = provider.cloned().unwrap_or_default();
    Flags {
        config: cli.config.clone(),
        data_dir: cli.data_dir.clone(),
        provider: provider.provider,
        model: provider.model,
        script: provider.script,
        max_turn_requests: provider.max_turn_requests,
        mode: provider.mode,
        sandbox: provider.sandbox,
    }
}

/// What every command that runs prompts needs: the config, the store, the runtime.
pub struct Opened {
    pub config: Config,
    pub runtime: Runtime,
    /// Providers that could not be set up, with the reason: a face that
    /// stops on them reports them, one that goes on logs them
    /// ([`Opened::log_problems`]).
    pub problems: Vec<crate::providers::Problem>,
    /// The configured MCP servers; a face adds the servers its client passes.
    pub mcp: Arc<crate::mcp::Factory>,
}

impl Opened {
    /// Logs the providers that could not be set up, for a face that serves
    /// on without them (each of their turns fails with the reason).
    pub fn log_problems(&self) {
        for problem in &self.problems {
            tracing::error!("{problem}");
        }
    }
}

pub fn open(flags: &Flags) -> Result<Opened, Failure> {
    let config = Config::load(flags).map_err(Failure::usage)?;
    let (providers, problems) = crate::providers::build(&config);
    let path = config.database_path();
    let (store, recovery) = Store::open(&path).map_err(Failure::failed)?;
    if !recovery.interrupted_runs.is_empty() {
        tracing::warn!(
            runs = recovery.interrupted_runs.len(),
            "marked runs left unfinished by an earlier process as failed"
        );
    }
    let mut forbidden: Vec<String> = DEFAULT_FORBIDDEN.iter().map(|p| (*p).to_owned()).collect();
    forbidden.extend(config.paths.forbidden.iter().cloned());
    let gate = Arc::new(crate::tools::gate(&config));
    crate::logging::redact_with(gate.safety.clone());
    let runtime = Runtime::new(
        store,
        providers,
        gate,
        RuntimeConfig {
            loop_config: LoopConfig {
                max_turn_requests: config.max_turn_requests.value,
                system_prompt: config.system_prompt.as_ref().map(|p| p.value.clone()),
                context_tokens: config
                    .context_window
                    .as_ref()
                    .map_or(LoopConfig::default().context_tokens, |c| c.value),
                models: config.catalog.clone(),
                ..LoopConfig::default()
            },
            default_mode: config.mode.value,
            paths: PathsConfig {
                extra_roots: config.paths.extra_roots.clone(),
                forbidden,
                home: std::env::var_os("HOME")
                    .filter(|h| !h.is_empty())
                    .map(PathBuf::from),
            },
            ..RuntimeConfig::default()
        },
    );
    let mcp = Arc::new(crate::mcp::Factory::new(
        crate::mcp::McpSettings::from_config(&config),
    ));
    runtime.set_session_tools_factory(mcp.clone());
    Ok(Opened {
        config,
        runtime,
        problems,
        mcp,
    })
}

async fn acp(cli: &Cli, args: &AcpArgs) -> Result<u8, Failure> {
    use std::io::IsTerminal as _;
    if std::io::stdin().is_terminal() {
        // A person typed `pincer acp`: say what it is waiting for.
        eprintln!(
            "pincer: `pincer acp` speaks the Agent Client Protocol (JSON-RPC) on stdin/stdout \
             for an editor to launch (docs/editors.md); to talk to Pincer here, run `pincer chat`. \
             Waiting for JSON-RPC messages; Ctrl-D ends"
        );
    }
    let opened = open(&flags(cli, Some(&args.provider)))?;
    opened.log_problems();
    let channels_cancel = tokio_util::sync::CancellationToken::new();
    let hubs = crate::channels::start(
        &opened.runtime,
        &opened.config,
        &args.channels,
        &|name| std::env::var(name).ok(),
        channels_cancel.clone(),
    )
    .await
    .map_err(Failure::usage)?;
    let options = crate::acp::AcpOptions {
        meta: serde_json::json!({
            "version": env!("CARGO_PKG_VERSION"),
            "sandbox": inspect::sandbox_meta(opened.config.sandbox.value),
        }),
        mcp: Some(opened.mcp.clone()),
        ..crate::acp::AcpOptions::default()
    };
    let store = opened.runtime.store().clone();
    let (out, writer) = crate::stdout::LineWriter::spawn();
    let input = tokio::io::BufReader::with_capacity(64 * 1024, tokio::io::stdin());
    let shutdown = tokio_util::sync::CancellationToken::new();
    spawn_signal_watch(shutdown.clone());
    let served = crate::acp::serve(opened.runtime, input, out, options, shutdown).await;
    channels_cancel.cancel();
    for hub in &hubs {
        hub.stopped().await;
    }
    let written = writer.finish().await;
    store.shutdown();
    served.map_err(Failure::failed)?;
    written.map_err(Failure::failed)?;
    Ok(exit::OK)
}

/// Cancels `shutdown` on SIGTERM or SIGINT, so an editor stopping Pincer gets a
/// clean exit: runs cancelled and recorded, the store flushed.
pub(crate) fn spawn_signal_watch(shutdown: tokio_util::sync::CancellationToken) {
    use tokio::signal::unix::{SignalKind, signal};
    tokio::spawn(async move {
        let (Ok(mut term), Ok(mut int)) = (
            signal(SignalKind::terminate()),
            signal(SignalKind::interrupt()),
        ) else {
            tracing::warn!("cannot watch for termination signals");
            return;
        };
        tokio::select! {
            _ = term.recv() => {}
            _ = int.recv() => {}
        }
        shutdown.cancel();
    });
}

#[cfg(test)]
mod tests {
    use super::chain;
    use anyhow::Context as _;

    /// Every flag, argument and command says what it is for in `--help`.
    #[test]
    fn every_argument_and_command_has_help() {
        fn walk(command: &clap::Command, path: &str, missing: &mut Vec<String>) {
            for arg in command.get_arguments() {
                let builtin = matches!(arg.get_id().as_str(), "help" | "version");
                if !builtin && !arg.is_hide_set() && arg.get_help().is_none() {
                    missing.push(format!("{path} {}", arg.get_id()));
                }
            }
            for sub in command.get_subcommands() {
                if sub.is_hide_set() || sub.get_name() == "help" {
                    continue;
                }
                if sub.get_about().is_none() {
                    missing.push(format!("{path} {}", sub.get_name()));
                }
                walk(sub, &format!("{path} {}", sub.get_name()), missing);
            }
        }
        let mut missing = Vec::new();
        walk(
            &<super::Cli as clap::CommandFactory>::command(),
            "pincer",
            &mut missing,
        );
        assert!(missing.is_empty(), "no help text: {missing:?}");
    }

    #[test]
    fn a_cause_already_in_the_message_is_not_repeated() {
        let io = std::io::Error::new(std::io::ErrorKind::NotFound, "No such file");
        let err = crate::config::ConfigError::Read {
            path: "/nope.toml".into(),
            source: io,
        };
        let err = anyhow::Error::from(err);
        assert_eq!(
            chain(&err),
            "cannot read config file /nope.toml: No such file"
        );
        let err = Err::<(), _>(anyhow::anyhow!("disk full"))
            .context("cannot save")
            .unwrap_err();
        assert_eq!(chain(&err), "cannot save: disk full");
    }
}
