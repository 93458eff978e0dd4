//! The protocol writer: the only code in Pincer that touches standard output.
//!
//! In `acp` mode stdout carries nothing but protocol messages, so every byte
//! bound for it goes through here: the [`LineWriter`] task, fed by async
//! senders, for the streaming faces, and [`write_all`] for one-shot command
//! output. A test fails if any other module names stdout.

use std::io::Write as _;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use tokio::sync::{Notify, mpsc};
use tokio::task::JoinHandle;

/// Lines queued for stdout before senders wait; bounds memory when the reader is slow.
const QUEUE: usize = 4096;

/// Bytes gathered from the queue into one write.
const BATCH: usize = 64 * 1024;

/// Sends whole lines to the stdout task; cheap to clone.
#[derive(Clone)]
pub struct LineSender {
    tx: mpsc::Sender<Vec<u8>>,
    /// How far the writer has got; none for a test's channel.
    progress: Option<Arc<Progress>>,
}

/// Items queued and items written, so a face can wait for stdout to catch up
/// before it writes to stderr (a reply and the status line after it must not
/// run together on a terminal).
#[derive(Default)]
struct Progress {
    queued: AtomicU64,
    written: AtomicU64,
    changed: Notify,
}

impl LineSender {
    /// Queues bytes to write (a newline is not added). Waits while the queue is
    /// full; returns false once stdout is closed.
    pub async fn send(&self, bytes: Vec<u8>) -> bool {
        if let Some(progress) = &self.progress {
            progress.queued.fetch_add(1, Ordering::SeqCst);
        }
        self.tx.send(bytes).await.is_ok()
    }

    /// Waits until everything queued so far is written (or stdout is closed).
    pub async fn written(&self) {
        let Some(progress) = &self.progress else {
            return;
        };
        let target = progress.queued.load(Ordering::SeqCst);
        loop {
            let changed = progress.changed.notified();
            tokio::pin!(changed);
            changed.as_mut().enable();
            if progress.written.load(Ordering::SeqCst) >= target || self.tx.is_closed() {
                return;
            }
            changed.await;
        }
    }

    /// A sender whose lines go to a channel instead of stdout: ACP over a
    /// WebSocket (`http::acp`), tests and the fuzzing entry points (`fuzz/`).
    pub fn channel(tx: mpsc::Sender<Vec<u8>>) -> Self {
        Self { tx, progress: None }
    }
}

/// Wakes [`LineSender::written`] waiters when the writer task ends, however.
struct WakeOnDrop(Arc<Progress>);

impl Drop for WakeOnDrop {
    fn drop(&mut self) {
        self.0.changed.notify_waiters();
    }
}

/// The task that owns stdout.
pub struct LineWriter {
    task: JoinHandle<std::io::Result<()>>,
}

impl LineWriter {
    /// Starts the task; it ends when every sender is dropped and the queue is written.
    ///
    /// The task runs on the blocking pool and writes to stdout itself:
    /// `tokio::io::stdout` would hand every write and every flush to the
    /// blocking pool and wait for it, two thread round trips per burst.
    pub fn spawn() -> (LineSender, LineWriter) {
        let (tx, mut rx) = mpsc::channel::<Vec<u8>>(QUEUE);
        let progress = Arc::new(Progress::default());
        let wake = WakeOnDrop(progress.clone());
        let task = tokio::task::spawn_blocking(move || {
            let progress = &wake.0;
            let stdout = std::io::stdout();
            let mut batch = Vec::with_capacity(BATCH);
            while let Some(line) = rx.blocking_recv() {
                // Whatever else is queued already goes out in the same write, so
                // bursts become few writes; a line alone is written at once.
                let mut items = 1;
                let bytes = match rx.try_recv() {
                    Ok(next) => {
                        batch.clear();
                        batch.extend_from_slice(&line);
                        batch.extend_from_slice(&next);
                        items += 1;
                        while batch.len() < BATCH
                            && let Ok(more) = rx.try_recv()
                        {
                            batch.extend_from_slice(&more);
                            items += 1;
                        }
                        &batch
                    }
                    Err(_) => &line,
                };
                // Locked per write, not for the task's life: nothing else may
                // be left waiting on stdout while the queue is idle.
                let mut out = stdout.lock();
                out.write_all(bytes)?;
                out.flush()?;
                drop(out);
                progress.written.fetch_add(items, Ordering::SeqCst);
                progress.changed.notify_waiters();
            }
            Ok(())
        });
        let sender = LineSender {
            tx,
            progress: Some(progress),
        };
        (sender, LineWriter { task })
    }

    /// Waits until everything queued is written. A reader that went away is not an error.
    pub async fn finish(self) -> std::io::Result<()> {
        match self.task.await {
            Ok(Ok(())) => Ok(()),
            Ok(Err(err)) if err.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
            Ok(Err(err)) => Err(err),
            Err(err) => Err(std::io::Error::other(err)),
        }
    }
}

/// Writes command output (a listing, a completion script) to stdout at once.
/// A closed pipe (`pincer sessions list | head`) is success.
pub fn write_all(bytes: &[u8]) -> std::io::Result<()> {
    let mut out = std::io::stdout().lock();
    match out.write_all(bytes).and_then(|()| out.flush()) {
        Err(err) if err.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        other => other,
    }
}

/// Whether stdout is a terminal (`pincer` alone opens a conversation only then).
pub fn is_terminal() -> bool {
    use std::io::IsTerminal as _;
    std::io::stdout().is_terminal()
}

/// Rows in columns two spaces apart; the last column is not padded.
pub fn table<const N: usize>(rows: &[[String; N]]) -> String {
    let mut widths = [0usize; N];
    for row in rows {
        for (width, cell) in widths.iter_mut().zip(row) {
            *width = (*width).max(cell.chars().count());
        }
    }
    let mut out = String::new();
    for row in rows {
        for (i, cell) in row.iter().enumerate() {
            if i + 1 == N {
                out.push_str(cell);
            } else {
                out.push_str(cell);
                let pad = widths[i] - cell.chars().count() + 2;
                out.extend(std::iter::repeat_n(' ', pad));
            }
        }
        out.push('\n');
    }
    out
}

/// A time as command output shows it (`2026-11-26 12:00:00`, UTC).
pub fn timestamp(millis: i64) -> String {
    jiff::Timestamp::from_millisecond(millis)
        .map(|t| t.strftime("%Y-%m-%d %H:%M:%S").to_string())
        .unwrap_or_default()
}
