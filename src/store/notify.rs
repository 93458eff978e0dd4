//! The journal's [`Notifier`] on SQLite: a thread asks a read-only
//! connection for `PRAGMA data_version`, which moves whenever another
//! connection (this process's writer or any other process's) commits, every
//! 10 ms while somebody watches and every 250 ms otherwise. Started on the
//! first watch, so a process that never follows another's session never
//! polls; it ends with the store.

use std::sync::{Arc, Weak};
use std::time::Duration;

use rusqlite::{Connection, OpenFlags};
use tokio::sync::watch;

use super::{Inner, Store};
use crate::core::notify::Notifier;

/// How often the version is read while somebody watches.
const WATCHED: Duration = Duration::from_millis(10);
/// How often while nobody does (a watcher may come back).
const IDLE: Duration = Duration::from_millis(250);

impl Notifier for Store {
    fn watch(&self) -> watch::Receiver<u64> {
        let receiver = self
            .inner
            .changes
            .get_or_init(|| watch::Sender::new(0))
            .subscribe();
        // Started once the sender is in place, which it reads.
        self.inner.watching.call_once(|| {
            let weak = Arc::downgrade(&self.inner);
            if let Err(err) = std::thread::Builder::new()
                .name("pincer-notify".into())
                .spawn(move || poll(weak))
            {
                tracing::warn!(error = %err, "cannot start watching the database for changes");
            }
        });
        receiver
    }
}

fn poll(inner: Weak<Inner>) {
    let Some(path) = inner.upgrade().map(|i| i.path.clone()) else {
        return;
    };
    let conn = match Connection::open_with_flags(
        &path,
        OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    ) {
        Ok(conn) => conn,
        Err(err) => {
            tracing::warn!(error = %err, "cannot watch the database for changes");
            return;
        }
    };
    let mut last: Option<i64> = None;
    loop {
        let Some(inner) = inner.upgrade() else { return };
        let Some(sender) = inner.changes.get() else {
            return;
        };
        if inner.closed.load(std::sync::atomic::Ordering::Relaxed) {
            return;
        }
        match conn.query_row("PRAGMA data_version", [], |row| row.get::<_, i64>(0)) {
            Ok(version) if last != Some(version) => {
                if last.is_some() {
                    sender.send_modify(|n| *n = n.wrapping_add(1));
                }
                last = Some(version);
            }
            Ok(_) => {}
            Err(err) => tracing::debug!(error = %err, "cannot read the database's version"),
        }
        let watched = sender.receiver_count() > 0;
        drop(inner);
        std::thread::sleep(if watched { WATCHED } else { IDLE });
    }
}
