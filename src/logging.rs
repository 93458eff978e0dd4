//! Logging through `tracing`, to stderr or a file; never to stdout.

use std::path::Path;

use anyhow::Context;
use tracing_subscriber::EnvFilter;

/// Keeps the log file open for the life of the process.
pub struct LogGuard {
    _file: Option<std::sync::Arc<std::fs::File>>,
}

/// Sets up logging: `RUST_LOG` if set, else a level from the `-v` count.
pub fn init(verbose: u8, file: Option<&Path>) -> anyhow::Result<LogGuard> {
    let default = match verbose {
        0 => "warn",
        1 => "info",
        2 => "debug",
        _ => "trace",
    };
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(default));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_target(false);
    match file {
        Some(path) => {
            let handle = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(path)
                .with_context(|| format!("cannot open log file {}", path.display()))?;
            let handle = std::sync::Arc::new(handle);
            builder.with_ansi(false).with_writer(handle.clone()).init();
            Ok(LogGuard {
                _file: Some(handle),
            })
        }
        None => {
            // Colours only for a person at a terminal, never into a file or pipe.
            use std::io::IsTerminal;
            builder
                .with_ansi(std::io::stderr().is_terminal())
                .with_writer(std::io::stderr)
                .init();
            Ok(LogGuard { _file: None })
        }
    }
}
