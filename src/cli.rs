//! The command line as clap types: flags, subcommands, their help. Nothing
//! here runs anything; `main.rs` dispatches each command to its face.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};

use crate::config::SandboxSetting;

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
    /// The store on a PostgreSQL server instead of SQLite in the data directory:
    /// postgres://USER@HOST:PORT/DB [env: PINCER_STORE_URL; config: store.url]
    #[arg(long, global = true, value_name = "URL")]
    pub store: Option<String>,
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
    Serve(ServeArgs),
    /// List and inspect sessions
    #[command(subcommand)]
    Sessions(SessionsCommand),
    /// Inspect runs
    #[command(subcommand)]
    Runs(RunsCommand),
    /// Replay a run's events from the tape
    Tape(TapeArgs),
    /// Show what the model is sent
    #[command(subcommand)]
    Context(ContextCommand),
    /// List, search, add, edit, remove, export and import what the agent
    /// remembers
    #[command(subcommand)]
    Memory(MemoryCommand),
    /// List, show and validate Agent Skills (`SKILL.md` folders)
    #[command(subcommand)]
    Skills(SkillsCommand),
    /// Inspect chat channels' durable delivery
    #[command(subcommand)]
    Channels(ChannelsCommand),
    /// Send a message to a chat through a channel's outbox: the process
    /// serving the channel delivers it
    Send(SendArgs),
    /// Run a prompt at times (a cron expression in a time zone) or once at a
    /// given time, optionally sending the reply to a chat; `pincer serve`
    /// fires them
    #[command(subcommand)]
    Schedule(ScheduleCommand),
    /// The store: SQLite in the data directory, or PostgreSQL (`--store`)
    #[command(subcommand)]
    Store(StoreCommand),
    /// Install and manage plugins: Claude Code plugin bundles of skills,
    /// commands, hooks and MCP servers, from a folder or a marketplace file
    #[command(subcommand)]
    Plugin(PluginCommand),
    /// Set up a model provider: an API key or a local server, checked and
    /// stored (mode 0600) for every session
    Login(LoginArgs),
    /// Remove what `pincer login` stored
    Logout(LogoutArgs),
    /// Check the config, each provider (key or URL, model), each MCP server
    /// (started), the database, the HTTP token and the sandbox; each problem
    /// is named with its fix
    #[command(after_help = "\
Exit codes: 0 every check passed, 1 a check failed, 2 the config file cannot
be read (the checks stop there)")]
    Doctor {
        /// Also send each HTTP provider one cheap request (`GET /models`),
        /// and show each model's context window: configured, asked from its
        /// server (llama.cpp, Ollama, vLLM, LM Studio) or assumed
        #[arg(long)]
        online: bool,
    },
    /// Trust the hooks (`[hooks] import`) and skills (`.agents/skills/`, ...)
    /// a workspace brings: they run, and are offered to the model, in every
    /// session under its project directory from then on
    ///
    /// Examples: `pincer trust` (the current directory's project), `pincer
    /// trust ~/src/app`, `pincer trust --list`, `pincer trust --revoke ~/src/app`
    Trust {
        /// A directory in the project (default: the current directory); its
        /// project directory is the nearest one above it holding `.git`
        path: Option<std::path::PathBuf>,
        /// Take the trust back
        #[arg(long, conflicts_with = "list")]
        revoke: bool,
        /// List the trusted project directories
        #[arg(long)]
        list: bool,
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
3 cancelled, refused, or a call refused because nobody could approve it,
4 stopped at a spending limit ([budget]), 5 the session is busy in another
process (--no-wait)")]
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
    /// With --session: when another Pincer process is running the session,
    /// exit with code 5 instead of waiting for it
    #[arg(long, requires = "session")]
    pub no_wait: bool,
    /// Workspace of a new session [default: the current directory]
    #[arg(long, value_name = "DIR", conflicts_with = "session")]
    pub cwd: Option<PathBuf>,
    /// The new session's system prompt, replacing the configured or built-in
    /// one (docs/prompt.md)
    #[arg(long, value_name = "TEXT", conflicts_with = "session")]
    pub system_prompt: Option<String>,
    /// Instructions for the new session, after the configured ones
    #[arg(long, value_name = "TEXT", conflicts_with = "session")]
    pub instructions: Option<String>,
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
pub enum StoreCommand {
    /// Brings the store's schema to this pincer's version (every process
    /// also does at start); running it again changes nothing
    Migrate,
    /// The backend, its schema version, and (on PostgreSQL) the instances
    /// holding leases now, with their open runs
    Status {
        /// Print JSON instead of text
        #[arg(long)]
        json: bool,
    },
    /// Copies every session, run, tape, receipt, grant, trusted project,
    /// memory item and channel record from one store into an empty other:
    /// a data directory (SQLite) to a postgres:// URL, or back; then counts
    /// the rows on both sides
    #[command(after_help = "\
Examples:
  pincer store copy --from ~/.local/share/pincer --to postgres://pincer@db/pincer
  pincer store copy --from postgres://pincer@db/pincer --to /srv/pincer-data

Stop every Pincer using the source first: a source with runs not ended is
refused. The source is only read, as one snapshot (a SQLite store older than
this pincer is migrated first). The target is migrated, must be empty, and is
written in one transaction; each table's rows are counted on both sides before
it commits. Leases are not copied.")]
    Copy {
        /// The store copied: a data directory or a postgres:// URL
        #[arg(long, value_name = "DIR|URL")]
        from: String,
        /// The empty store written: a data directory or a postgres:// URL
        #[arg(long, value_name = "DIR|URL")]
        to: String,
        /// Print the counts as JSON
        #[arg(long)]
        json: bool,
    },
}

#[derive(Debug, Subcommand)]
pub enum PluginCommand {
    /// Add a plugin folder (with .claude-plugin/plugin.json), or the named
    /// plugins of a marketplace file or a folder holding
    /// .claude-plugin/marketplace.json; each is copied and enabled
    Add {
        /// The plugin folder or marketplace
        path: std::path::PathBuf,
        /// The marketplace's plugins to add (needed when it offers several)
        names: Vec<String>,
    },
    /// List installed plugins and what each brings
    List {
        /// Print JSON lines instead of text
        #[arg(long)]
        json: bool,
    },
    /// Turn an installed plugin on
    Enable {
        /// The plugin's name
        name: String,
    },
    /// Turn an installed plugin off without removing it
    Disable {
        /// The plugin's name
        name: String,
    },
    /// Remove an installed plugin and its copy
    Rm {
        /// The plugin's name
        name: String,
    },
}

#[derive(Debug, Subcommand)]
pub enum ScheduleCommand {
    /// Add a schedule
    ///
    /// Examples: `pincer schedule add --cron "0 9 * * MON-FRI" --tz
    /// Europe/Berlin --prompt "Summarise yesterday's commits" --deliver
    /// team:#dev`, `pincer schedule add --at 2026-12-01T09:00 --prompt
    /// "Remind me to renew the certificate" --deliver tg:42`
    Add(ScheduleAddArgs),
    /// List the schedules with their next and last occurrences
    List {
        /// Print JSON
        #[arg(long)]
        json: bool,
    },
    /// Show a schedule and its recent fires
    Show {
        /// The schedule's id
        id: String,
        /// How many fires to show
        #[arg(long, default_value_t = 20)]
        limit: usize,
        /// Print JSON
        #[arg(long)]
        json: bool,
    },
    /// Remove a schedule (and its record of fires)
    Rm {
        /// The schedule's id
        id: String,
    },
    /// Fire a schedule now, in this process, wait for its run and deliver
    /// the reply as a timed fire would (exit 1 when the run fails)
    RunNow {
        /// The schedule's id
        id: String,
        /// Print the fire as JSON
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        provider: ProviderArgs,
    },
}

#[derive(Debug, Args)]
#[command(group(clap::ArgGroup::new("when").required(true).args(["cron", "at"])))]
#[command(group(clap::ArgGroup::new("place").args(["session", "workspace"])))]
pub struct ScheduleAddArgs {
    /// A five-field cron expression: minute hour day-of-month month
    /// day-of-week (`0 9 * * MON-FRI`), or @hourly, @daily, @weekly,
    /// @monthly, @yearly
    #[arg(long, value_name = "EXPR")]
    pub cron: Option<String>,
    /// Once, at this time: YYYY-MM-DDTHH:MM in the time zone, or an instant
    /// with an offset (`2026-12-01T09:00:00Z`)
    #[arg(long, value_name = "TIME")]
    pub at: Option<String>,
    /// The IANA time zone the times are in (default: this machine's)
    #[arg(long, value_name = "ZONE")]
    pub tz: Option<String>,
    /// What to ask; `-` reads it from standard input
    #[arg(long, value_name = "TEXT")]
    pub prompt: String,
    /// Continue this session at each occurrence
    #[arg(long, value_name = "ID")]
    pub session: Option<String>,
    /// Start a new session in this directory at each occurrence (default:
    /// the current directory)
    #[arg(long, value_name = "DIR")]
    pub workspace: Option<PathBuf>,
    /// Send the reply to a chat: CHANNEL:TARGET (`team:#dev`, `tg:42`)
    #[arg(long, value_name = "CHANNEL:TARGET")]
    pub deliver: Option<String>,
    /// Run an occurrence missed while no `pincer serve` ran if it is less
    /// than this late (`1h`, `30m`, `0`); otherwise skip it
    #[arg(long, value_name = "DURATION", default_value = "1h")]
    pub catch_up: String,
    /// The schedule's id (letters, digits, `-`, `_`; default: made up)
    #[arg(long, value_name = "ID")]
    pub id: Option<String>,
    /// Print the schedule as JSON
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct SendArgs {
    /// The channel (`[channels.NAME]`, or `telegram` / `webhook`)
    #[arg(long, value_name = "NAME")]
    pub channel: String,
    /// The chat: CHAT or CHAT/THREAD in the platform's ids (a Telegram chat
    /// id, negative for a group; a webhook peer's chat)
    #[arg(long, value_name = "TARGET", allow_hyphen_values = true)]
    pub to: String,
    /// The message, in Markdown; `-` reads it from standard input
    pub text: String,
    /// An idempotency key: sending again with the same key sends nothing more
    #[arg(long, value_name = "KEY")]
    pub id: Option<String>,
    /// Wait up to this many seconds for the message to be delivered (exit 1
    /// when it cannot be, 6 when it was not delivered in time)
    #[arg(long, value_name = "SECS")]
    pub wait: Option<u64>,
    /// Print the send intent as JSON
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Subcommand)]
pub enum ChannelsCommand {
    /// Each chat channel account's health as its serving process last wrote
    /// it (connected, since when, last event, last error) and its outbox by
    /// status
    Status {
        /// Print JSON lines instead of a table
        #[arg(long)]
        json: bool,
    },
    /// List outbound chat messages (send intents), most recently changed first
    Outbox {
        /// Only intents in this status: held, pending, sending, committing,
        /// sent, failed, unknown_after_send, cancelled, expired, withheld
        #[arg(long, value_name = "STATUS")]
        status: Option<String>,
        /// Only intents of this channel (`[channels.NAME]`)
        #[arg(long, value_name = "NAME")]
        channel: Option<String>,
        /// At most this many
        #[arg(long, default_value_t = 50)]
        limit: usize,
        /// Print JSON lines instead of a table
        #[arg(long)]
        json: bool,
    },
    /// Record what you found in the chat about a message left
    /// unknown_after_send: it arrived (sent), send it again (pending), or
    /// leave it unsent (cancelled)
    #[command(group(clap::ArgGroup::new("resolution").required(true).args(["arrived", "resend", "drop"])))]
    Resolve {
        /// The send intent's id (pincer channels outbox --status unknown_after_send)
        #[arg(value_name = "INTENT_ID")]
        intent_id: String,
        /// The person saw it arrive: record it sent
        #[arg(long)]
        arrived: bool,
        /// It did not arrive: the process serving the channel sends it again
        #[arg(long)]
        resend: bool,
        /// Leave it unsent: record it cancelled
        #[arg(long)]
        drop: bool,
    },
    /// The senders paired with the pairing code (`/pair CODE`), and
    /// revoking them
    Pairs {
        #[command(subcommand)]
        command: PairsCommand,
    },
}

#[derive(Debug, Subcommand)]
pub enum PairsCommand {
    /// List the paired senders, by channel, account and when they paired
    List {
        /// Only this channel's (`[channels.NAME]`)
        #[arg(long, value_name = "NAME")]
        channel: Option<String>,
        /// Print JSON lines instead of a table
        #[arg(long)]
        json: bool,
    },
    /// Forget a paired sender in every account of the channel: their next
    /// message is a stranger's, told how to pair
    Revoke {
        /// The channel's name (`[channels.NAME]`)
        channel: String,
        /// The sender as `pincer channels pairs list` shows it
        sender: String,
    },
}

#[derive(Debug, Subcommand)]
pub enum SessionsCommand {
    /// List sessions, most recently active first
    List {
        /// Only sessions whose workspace is this directory
        #[arg(long, value_name = "DIR")]
        cwd: Option<PathBuf>,
        /// Only sessions of this origin
        #[arg(long, value_name = "ORIGIN", value_parser = [
            "editor", "headless", "http", "channel", "terminal", "subagent", "schedule",
        ])]
        origin: Option<String>,
        /// Only open or only closed sessions
        #[arg(long, value_name = "STATE", value_parser = ["open", "closed"])]
        state: Option<String>,
        /// Only sessions a chat of the channel of this name maps
        #[arg(long, value_name = "NAME")]
        channel: Option<String>,
        /// Only sessions whose title, id, model or workspace holds each of
        /// these words (letters' case aside)
        #[arg(long, value_name = "WORDS")]
        search: Option<String>,
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
    /// Delete sessions: their conversations and tapes go, their runs'
    /// summaries and receipts stay (`pincer verify` still holds)
    Rm {
        /// The sessions (ses_…)
        #[arg(required = true)]
        ids: Vec<String>,
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

#[derive(Debug, Subcommand)]
pub enum ContextCommand {
    /// What a session's next model turn would be sent (system prompt, tools,
    /// conversation), with the estimated tokens of each part
    Show {
        /// The session [default: the newest session of the current directory]
        #[arg(long, value_name = "ID")]
        session: Option<String>,
        /// Print JSON instead of text
        #[arg(long)]
        json: bool,
    },
}

#[derive(Debug, Subcommand)]
pub enum SkillsCommand {
    /// The skills a session in this workspace finds, with their scope and
    /// location; a project's are marked until the project is trusted
    /// (`pincer trust`); what was skipped or warned about follows
    List {
        /// The workspace [default: the current directory]
        #[arg(long, value_name = "DIR")]
        cwd: Option<PathBuf>,
        /// Print JSON instead of text
        #[arg(long)]
        json: bool,
    },
    /// A skill's frontmatter and instructions
    Show {
        /// The skill's name
        name: String,
        /// The workspace [default: the current directory]
        #[arg(long, value_name = "DIR")]
        cwd: Option<PathBuf>,
        /// Print JSON instead of text
        #[arg(long)]
        json: bool,
    },
    /// Check a skill folder against the Agent Skills specification, as the
    /// reference validator (`agentskills validate`) does
    #[command(after_help = "\
Exit codes: 0 the skill is valid, 1 it is not (each problem on stderr)")]
    Validate {
        /// The skill's folder or its SKILL.md [default: the current directory]
        dir: Option<PathBuf>,
    },
}

/// Which items a memory command sees.
#[derive(Debug, Args)]
pub struct MemoryReach {
    /// Every item, whatever its scope, workspace or conversation [default:
    /// the person's own items and those of this directory's workspace]
    #[arg(long)]
    pub all: bool,
    /// The workspace whose items are seen [default: the current directory;
    /// a repository's items belong to its top directory]
    #[arg(long, value_name = "DIR", conflicts_with = "all")]
    pub cwd: Option<PathBuf>,
}

#[derive(Debug, Subcommand)]
pub enum MemoryCommand {
    /// List items, most recently changed first
    List {
        #[command(flatten)]
        reach: MemoryReach,
        /// Only items of this scope: user, workspace or conversation
        #[arg(long, value_name = "SCOPE")]
        scope: Option<String>,
        /// Only items with this tag
        #[arg(long, value_name = "TAG")]
        tag: Option<String>,
        /// Only pinned items
        #[arg(long)]
        pinned: bool,
        /// At most this many
        #[arg(long, default_value_t = 100)]
        limit: usize,
        /// Print JSON lines instead of a table
        #[arg(long)]
        json: bool,
    },
    /// Search items for any of the words, best matches first
    Search {
        /// The words to look for
        query: String,
        #[command(flatten)]
        reach: MemoryReach,
        /// At most this many
        #[arg(long, default_value_t = 20)]
        limit: usize,
        /// Print JSON lines instead of a table
        #[arg(long)]
        json: bool,
    },
    /// Remember something
    Add {
        /// The text to remember (a secret is refused)
        text: String,
        /// user (every session) or workspace (this directory's repository or
        /// directory); conversation items are saved from their conversation
        #[arg(long, default_value = "workspace", value_name = "SCOPE")]
        scope: String,
        /// The workspace of a workspace item [default: the current directory]
        #[arg(long, value_name = "DIR")]
        cwd: Option<PathBuf>,
        /// A tag (repeat for more)
        #[arg(long = "tag", value_name = "TAG")]
        tags: Vec<String>,
        /// Keep it in view in every session of its scope
        #[arg(long)]
        pin: bool,
    },
    /// Change an item's text, tags or pin
    Edit {
        /// The item (mem_…, from `pincer memory list`)
        id: String,
        /// The new text
        #[arg(long)]
        text: Option<String>,
        /// Replace the tags with these (repeat for more)
        #[arg(long = "tag", value_name = "TAG")]
        tags: Vec<String>,
        /// Remove every tag
        #[arg(long, conflicts_with = "tags")]
        no_tags: bool,
        /// Pin it
        #[arg(long)]
        pin: bool,
        /// Unpin it
        #[arg(long, conflicts_with = "pin")]
        unpin: bool,
    },
    /// Forget items
    Rm {
        /// The items (mem_…)
        #[arg(required = true)]
        ids: Vec<String>,
    },
    /// Print items as JSON lines (every item unless limited)
    Export {
        #[command(flatten)]
        reach: MemoryReach,
    },
    /// Add items from JSON lines (as `export` prints them); items already
    /// there (by id) are skipped, refused lines are named
    Import {
        /// The file to read, or - for standard input
        file: PathBuf,
    },
    /// Embed the items that have no vector yet, for search by meaning
    /// (`[memory] embeddings`; items are embedded as they are saved, so this
    /// is for items from before it was set, an import, or an endpoint that
    /// was down)
    Embed,
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

#[derive(Debug, Args)]
pub struct ServeArgs {
    /// Serve HTTP (REST, SSE, JSON-RPC over WebSocket) on ADDR [default: [http] bind, else 127.0.0.1:8787]
    #[allow(
        rustdoc::broken_intra_doc_links,
        reason = "clap help text: `[http]` names a config table"
    )]
    #[arg(long, value_name = "ADDR", num_args = 0..=1, default_missing_value = "")]
    pub http: Option<String>,
    /// Allow binding an address other than loopback (the token is then all that guards the agent)
    #[arg(long)]
    pub allow_remote: bool,
    /// Write the listening address to this file once the HTTP face listens
    /// and the chat channels started (for scripts and tests)
    #[arg(long, value_name = "FILE")]
    pub ready_file: Option<PathBuf>,
    /// Bridge a chat channel (a [channels.NAME] table, or `telegram` / `webhook`); repeatable
    #[arg(long = "channel", value_name = "NAME")]
    pub channels: Vec<String>,
    #[command(flatten)]
    pub provider: ProviderArgs,
}

/// The providers `pincer login` knows how to set up.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Preset {
    /// OpenAI's API (a key from platform.openai.com)
    Openai,
    /// Anthropic's API (a key from console.anthropic.com)
    Anthropic,
    /// OpenRouter, many vendors behind one key (openrouter.ai)
    Openrouter,
    /// A local OpenAI-compatible server: Ollama, llama.cpp, LM Studio, vLLM (no key)
    Local,
}

#[derive(Debug, Args)]
#[command(after_help = "\
Examples:
  pincer login                                   # asks which provider, the key, the model
  pincer login --provider local --base-url http://127.0.0.1:11434/v1 --model llama3.2
  echo \"$OPENAI_API_KEY\" | pincer login --provider openai --api-key-stdin --model gpt-4.1-mini")]
pub struct LoginArgs {
    /// Which provider; asked when not given
    #[arg(long, value_enum)]
    pub provider: Option<Preset>,
    /// The API's base URL (a local server's, or a proxy) [default: the provider's]
    #[arg(long, value_name = "URL")]
    pub base_url: Option<String>,
    /// The model new sessions use; asked when not given (the server's list is shown)
    #[arg(long, value_name = "MODEL")]
    pub model: Option<String>,
    /// Read the API key from the first line of stdin instead of asking
    #[arg(long)]
    pub api_key_stdin: bool,
    /// Store without the check request (the server is not up yet)
    #[arg(long)]
    pub no_check: bool,
    /// The name to store it under [default: the provider's: openai, anthropic, openrouter, local]
    #[arg(long, value_name = "NAME")]
    pub name: Option<String>,
}

#[derive(Debug, Args)]
pub struct LogoutArgs {
    /// The stored provider to remove [default: all of them]
    pub name: Option<String>,
}

#[cfg(test)]
mod tests {
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
}
