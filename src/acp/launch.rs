//! The ACP launcher: opens the app, starts the chat channels asked for, and
//! serves ACP on stdin/stdout through the protocol writer.

use crate::app::{App, Failure, Flags, exit, spawn_signal_watch};
use crate::cli::AcpArgs;

/// `pincer acp`: serves the Agent Client Protocol on stdin/stdout (and any
/// chat channels asked for beside it) until stdin closes or a signal.
pub async fn run(flags: &Flags, args: &AcpArgs) -> Result<u8, Failure> {
    use std::io::IsTerminal as _;
    if std::io::stdin().is_terminal() {
        // A person typed `pincer acp`: say what it is waiting for.
        eprintln!(
            "pincer: `pincer acp` speaks the Agent Client Protocol (JSON-RPC) on stdin/stdout \
             for an editor to launch (docs/editors.md); to talk to Pincer here, run `pincer chat`. \
             Waiting for JSON-RPC messages; Ctrl-D ends"
        );
    }
    let opened = App::open(flags).await?;
    opened.log_problems();
    let channels_cancel = tokio_util::sync::CancellationToken::new();
    let hubs = opened
        .start_channels(
            &args.channels,
            crate::channels::HttpReceiving::None,
            channels_cancel.clone(),
        )
        .await?;
    let options = options(&opened, flags);
    let store = opened.store.clone();
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

/// The ACP face's settings for this process: on stdio (`pincer acp`) and
/// over WebSocket (`pincer serve --http`, at `/acp`).
pub fn options(opened: &App, flags: &Flags) -> crate::acp::AcpOptions {
    crate::acp::AcpOptions {
        meta: serde_json::json!({
            "version": env!("CARGO_PKG_VERSION"),
            "sandbox": opened.sandbox_meta(),
        }),
        mcp: Some(opened.mcp.clone()),
        accounts: Some(std::sync::Arc::new(Logins {
            flags: flags.clone(),
        })),
        ..crate::acp::AcpOptions::default()
    }
}

/// `authenticate` and `logout` through the configuration and the stored
/// logins, read again each time.
struct Logins {
    flags: Flags,
}

impl crate::acp::Accounts for Logins {
    fn providers(&self) -> Result<crate::core::provider::Providers, String> {
        crate::app::reload_providers(&self.flags)
    }

    fn logout(&self) -> Result<Vec<String>, String> {
        crate::app::forget_logins()
    }
}
