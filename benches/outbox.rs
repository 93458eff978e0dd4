#![allow(
    clippy::print_stdout,
    reason = "a benchmark's report is its standard output"
)]
#![allow(clippy::unwrap_used, clippy::expect_used)] // a benchmark: a panic is a failed run
//! Durable send intents committed per second, with `synchronous=FULL`.
//!
//! `cargo bench --bench outbox [-- N [CONCURRENCY]] [-- --store URL]`
//! commits N intents
//! (default 20,000) from CONCURRENCY tasks (default 256) at once, each task
//! waiting for its intent to be on disk before recording the next — what many
//! chats answering at the same moment do. It then drives every intent through
//! the rest of its lifecycle (claim → committing with its receipt → sent, each
//! committed) and reports both rates. The store's writer thread commits
//! concurrent writes together (group commit), so one fsync covers many intents.
//! With `--store postgres://…` (an empty database) the same runs against
//! PostgreSQL, whose writer commits in groups the same way.

use std::sync::Arc;
use std::time::Instant;

use pincer::core::channel::{
    DeliveryReceipt, IntentKind, IntentStatus, IntentUpdate, ReceiptPart, SendIntent, Target,
    TargetKind, Unit,
};
use pincer::core::session::now_millis;
use pincer::store::{Backend, ChannelWrite, Target as Place, Write};

fn intent(i: usize) -> SendIntent {
    let chat = 1000 + i % 1000;
    let target = Target {
        kind: TargetKind::Direct,
        id: chat.to_string(),
        thread: None,
    };
    let unit = Unit {
        text: "A reply of ordinary length, a sentence or two, as a chat answer is.".into(),
        markup: None,
        buttons: Vec::new(),
        file: None,
    };
    SendIntent {
        reply_to: Some(format!("{chat}:{i}")),
        ..SendIntent::new(
            format!("reply:bench-{i}"),
            ("telegram", "123456"),
            target,
            IntentKind::Reply,
            vec![unit],
            now_millis(),
        )
    }
}

async fn lifecycle(store: &dyn Backend, i: usize) {
    let id = format!("reply:bench-{i}");
    let mut claim = IntentUpdate::new(
        &id,
        &[IntentStatus::Pending],
        IntentStatus::Sending,
        now_millis(),
    );
    claim.attempt = Some(1);
    claim.inflight = Some(0);
    store
        .commit(Write::Channel(ChannelWrite::UpdateIntent(claim)))
        .await
        .unwrap();
    let mut committing = IntentUpdate::new(
        &id,
        &[IntentStatus::Sending],
        IntentStatus::Committing,
        now_millis(),
    );
    committing.receipt = Some(DeliveryReceipt {
        parts: vec![ReceiptPart {
            index: 0,
            platform_id: format!("{}", 50_000 + i),
        }],
    });
    store
        .commit(Write::Channel(ChannelWrite::UpdateIntent(committing)))
        .await
        .unwrap();
    store
        .commit(Write::Channel(ChannelWrite::UpdateIntent(
            IntentUpdate::new(
                &id,
                &[IntentStatus::Committing],
                IntentStatus::Sent,
                now_millis(),
            ),
        )))
        .await
        .unwrap();
}

fn main() {
    let all: Vec<String> = std::env::args().skip(1).collect();
    let url = all
        .iter()
        .position(|a| a == "--store")
        .and_then(|at| all.get(at + 1).cloned());
    let mut args = all.iter().filter_map(|a| a.parse::<usize>().ok());
    let n = args.next().unwrap_or(20_000);
    let concurrency = args.next().unwrap_or(256).max(1);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async move {
        let dir = tempfile::tempdir().unwrap();
        let target = match &url {
            Some(url) => Place::Postgres(url.clone()),
            None => Place::Sqlite(dir.path().join("pincer.db")),
        };
        let (store, _) = pincer::store::open(&target).await.unwrap();
        let store: Arc<dyn Backend> = store;

        let started = Instant::now();
        let mut tasks = Vec::new();
        for worker in 0..concurrency {
            let store = store.clone();
            tasks.push(tokio::spawn(async move {
                let mut i = worker;
                while i < n {
                    store
                        .commit(Write::Channel(ChannelWrite::InsertIntent(intent(i))))
                        .await
                        .unwrap();
                    i += concurrency;
                }
            }));
        }
        for task in tasks {
            task.await.unwrap();
        }
        let recorded = started.elapsed();

        let started = Instant::now();
        let mut tasks = Vec::new();
        for worker in 0..concurrency {
            let store = store.clone();
            tasks.push(tokio::spawn(async move {
                let mut i = worker;
                while i < n {
                    lifecycle(store.as_ref(), i).await;
                    i += concurrency;
                }
            }));
        }
        for task in tasks {
            task.await.unwrap();
        }
        let delivered = started.elapsed();

        let counts = store.intent_counts().await.unwrap();
        let sent: u64 = counts
            .iter()
            .filter(|(_, s, _)| *s == IntentStatus::Sent)
            .map(|(_, _, c)| c)
            .sum();
        assert_eq!(sent as usize, n, "every intent sent");
        println!(
            "outbox: {n} intents, {concurrency} concurrent writers, {}",
            match &target {
                Place::Sqlite(_) => "SQLite, synchronous=FULL".to_owned(),
                Place::Postgres(url) => format!("PostgreSQL {}", Place::redacted(url)),
            }
        );
        println!(
            "  intents recorded (committed before returning): {:>10.0}/s  ({:.2} s)",
            n as f64 / recorded.as_secs_f64(),
            recorded.as_secs_f64()
        );
        println!(
            "  claim + receipt + sent (3 commits each):       {:>10.0}/s  ({:.2} s)",
            n as f64 / delivered.as_secs_f64(),
            delivered.as_secs_f64()
        );
        store.shutdown();
    });
}
