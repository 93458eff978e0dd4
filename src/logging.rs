//! Logging through `tracing`, to stderr or a file; never to stdout.

use std::io::Write;
use std::path::Path;
use std::sync::{Arc, OnceLock};

use anyhow::Context;
use tracing_subscriber::EnvFilter;

use crate::core::safety::Safety;

/// The safety pass every log line goes through once the configuration is
/// known: log lines carry outside parties' words (a provider's error body, an
/// MCP server's stderr, a platform's answer), which may echo a key.
static REDACT: OnceLock<Arc<Safety>> = OnceLock::new();

/// The log file of this process (`--log-file`), if any: Pincer's own, so
/// no tool reads it (`app::wiring::own_files`).
static LOG_FILE: OnceLock<std::path::PathBuf> = OnceLock::new();

/// Where this process logs to, when it logs to a file.
pub fn log_file() -> Option<&'static Path> {
    LOG_FILE.get().map(std::path::PathBuf::as_path)
}

/// Redacts every later log line with `safety` (the first call wins).
pub fn redact_with(safety: Arc<Safety>) {
    let _ = REDACT.set(safety);
}

/// A log destination that redacts what is written to it. The formatter writes
/// each event whole, in one `write_all`, so a secret is never split between
/// two writes.
struct Redacting<W>(W);

impl<W: Write> Write for Redacting<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let Some(safety) = REDACT.get() else {
            return self.0.write(buf);
        };
        let (text, _) = safety.redact(&String::from_utf8_lossy(buf));
        self.0.write_all(text.as_bytes())?;
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.0.flush()
    }
}

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
            use std::os::unix::fs::OpenOptionsExt as _;
            // Log lines can quote prompts and tool output: the person's only.
            let handle = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .mode(0o600)
                .open(path)
                .with_context(|| format!("cannot open log file {}", path.display()))?;
            let _ = LOG_FILE.set(std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf()));
            let handle = std::sync::Arc::new(handle);
            let file = handle.clone();
            builder
                .with_ansi(false)
                .with_writer(move || Redacting(file.clone()))
                .init();
            Ok(LogGuard {
                _file: Some(handle),
            })
        }
        None => {
            // Colours only for a person at a terminal, never into a file or pipe.
            use std::io::IsTerminal;
            builder
                .with_ansi(std::io::stderr().is_terminal())
                .with_writer(|| Redacting(std::io::stderr()))
                .init();
            Ok(LogGuard { _file: None })
        }
    }
}
