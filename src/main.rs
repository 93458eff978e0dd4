//! `pincer`: parses the command line and hands each command to its face.
//! The faces are assembled by `pincer::app`; this is the one place that
//! names them all.

use std::process::ExitCode;

use clap::{CommandFactory, Parser};
use pincer::app::{self, Failure, exit};
use pincer::causes;
use pincer::cli::{ChatArgs, Cli, Command, ConfigCommand};
use pincer::{acp, headless, inspect, login, memory, serve, terminal};

fn main() -> ExitCode {
    pincer::allocator::tune();
    let cli = Cli::parse();
    let _guard = match pincer::logging::init(cli.verbose, cli.log_file.as_deref()) {
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

async fn dispatch(cli: Cli) -> u8 {
    let Some(command) = &cli.command else {
        return no_command(&cli).await;
    };
    let result = match *command {
        Command::Acp(ref args) => acp::run(&app::flags(&cli, Some(&args.provider)), args).await,
        Command::Run(ref args) => {
            headless::run(&app::flags(&cli, Some(&args.provider)), args).await
        }
        Command::Chat(ref args) => {
            terminal::run(&app::flags(&cli, Some(&args.provider)), args).await
        }
        Command::Serve(ref args) => serve::run(&app::flags(&cli, Some(&args.provider)), args).await,
        Command::Sessions(ref command) => inspect::sessions(&app::flags(&cli, None), command).await,
        Command::Runs(ref command) => inspect::runs(&app::flags(&cli, None), command).await,
        Command::Channels(ref command) => inspect::channels(&app::flags(&cli, None), command).await,
        Command::Send(ref args) => inspect::send(&app::flags(&cli, None), args).await,
        Command::Schedule(ref command) => {
            let provider = if let pincer::cli::ScheduleCommand::RunNow { provider, .. } = command {
                Some(provider)
            } else {
                None
            };
            inspect::schedule(&app::flags(&cli, provider), command).await
        }
        Command::Store(ref command) => inspect::store(&app::flags(&cli, None), command).await,
        Command::Plugin(ref command) => inspect::plugin(&app::flags(&cli, None), command),
        Command::Tape(ref args) => inspect::tape(&app::flags(&cli, None), args).await,
        Command::Context(ref command) => inspect::context(&app::flags(&cli, None), command).await,
        Command::Memory(ref command) => memory::run(&app::flags(&cli, None), command).await,
        Command::Skills(ref command) => inspect::skills(&app::flags(&cli, None), command).await,
        Command::Login(ref args) => login::login(args).await,
        Command::Logout(ref args) => login::logout(args),
        Command::Doctor { online } => inspect::doctor(&app::flags(&cli, None), online).await,
        Command::Verify { json } => inspect::verify(&app::flags(&cli, None), json).await,
        Command::Trust {
            ref path,
            revoke,
            list,
        } => inspect::trust(&app::flags(&cli, None), path.as_deref(), revoke, list).await,
        Command::Config(ConfigCommand::Show) => inspect::config_show(&app::flags(&cli, None)),
        Command::SandboxExec { ref spec_file, .. } => pincer::sandbox::exec_spec_file(spec_file)
            .await
            .map_err(|err| Failure::failed(anyhow::anyhow!("sandbox-exec: {err}"))),
        Command::Completions { shell } => {
            // Generated whole, then written by the one-shot writer: a reader
            // that went away (`pincer completions zsh | head -1`) is success.
            let mut command = Cli::command();
            let mut script = Vec::new();
            clap_complete::generate(shell, &mut command, "pincer", &mut script);
            pincer::stdout::write_all(&script)
                .map(|()| exit::OK)
                .map_err(|err| Failure::failed(anyhow::anyhow!("completions: {err}")))
        }
    };
    match result {
        Ok(code) => code,
        Err(failure) => {
            eprintln!("pincer: {}", causes::chain(&*failure.error));
            failure.code
        }
    }
}

/// `pincer` alone: a conversation when a person is at a terminal, else the
/// help on stderr and the usage exit code, as clap gives for a missing subcommand.
async fn no_command(cli: &Cli) -> u8 {
    use std::io::IsTerminal as _;
    if std::io::stdin().is_terminal() && pincer::stdout::is_terminal() {
        let args = ChatArgs::default();
        return match terminal::run(&app::flags(cli, Some(&args.provider)), &args).await {
            Ok(code) => code,
            Err(failure) => {
                eprintln!("pincer: {}", causes::chain(&*failure.error));
                failure.code
            }
        };
    }
    eprint!("{}", Cli::command().render_help());
    exit::USAGE
}
