//! The notifier on PostgreSQL: one connection per process `LISTEN`s on
//! `pincer_changes`, where every writer's commit sends one notification
//! (`writer`), and moves the change counter followers watch
//! (`core::notify`). PostgreSQL delivers each committed notification to
//! every connected listener; what a lost connection missed is covered by
//! moving the counter when it is made again, and by a slow tick besides,
//! so a follower at worst looks at the tape a little later, never misses
//! what is on it.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{mpsc, watch};
use tokio_util::sync::CancellationToken;

use super::connect::Server;

/// How often followers are woken anyway.
const TICK: Duration = Duration::from_secs(5);

pub(super) fn spawn(server: Server, changes: Arc<watch::Sender<u64>>, stop: CancellationToken) {
    tokio::spawn(async move {
        let bump = || changes.send_modify(|n| *n = n.wrapping_add(1));
        let mut pause = Duration::from_millis(100);
        loop {
            let (tx, mut rx) = mpsc::unbounded_channel();
            let client = tokio::select! {
                () = stop.cancelled() => return,
                client = server.connect_listening(tx) => client,
            };
            let client = match client {
                Ok(client) => client,
                Err(err) => {
                    tracing::warn!(error = %crate::causes::chain(&err), "cannot listen for other instances' commits; trying again");
                    tokio::select! {
                        () = stop.cancelled() => return,
                        () = tokio::time::sleep(pause) => {}
                    }
                    pause = (pause * 2).min(Duration::from_secs(5));
                    bump();
                    continue;
                }
            };
            if let Err(err) = client.batch_execute("LISTEN pincer_changes").await {
                tracing::warn!(error = %crate::causes::chain(&err), "cannot listen for other instances' commits; trying again");
                continue;
            }
            pause = Duration::from_millis(100);
            // Whatever was committed while nobody listened.
            bump();
            let mut tick = tokio::time::interval(TICK);
            loop {
                tokio::select! {
                    () = stop.cancelled() => return,
                    message = rx.recv() => match message {
                        Some(tokio_postgres::AsyncMessage::Notification(_)) => bump(),
                        Some(_) => {}
                        None => break,
                    },
                    _ = tick.tick() => bump(),
                }
            }
            tracing::warn!(
                "the connection listening for other instances' commits broke; listening again"
            );
            drop(client);
        }
    });
}
