//! Several writers on one database file (an editor window and a terminal
//! each open the store), and writers killed in the middle of writing: every
//! committed write is kept exactly once, each run's tape stays numbered
//! without gaps, a `Together` lands whole or not at all, and the receipts of
//! every writer form one hash chain that `pincer verify` accepts.
//!
//! The crash test re-executes this test binary: `child_writer` is a writer
//! when `PINCER_TEST_CHILD_DB` names a database (and does nothing
//! otherwise). It prints a line for each commit that returned, so the parent
//! knows what it was promised before it kills the child with `SIGKILL`.
//!
//! And a writer kept waiting for the write lock by another connection for
//! longer than its busy timeout loses none of the writes queued meanwhile.

use std::collections::{BTreeSet, HashSet};
use std::io::{BufRead, BufReader, Read, Write as _};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;

use rusqlite::Connection;

use super::{SessionQuery, Store, StoreError, Write};
use crate::core::event::{Event, RunState, StopReason, Usage};
use crate::core::ids::{RunId, SessionId};
use crate::core::journal::contract::{self, Backend};
use crate::core::receipt::{Receipt, ReceiptBody, Verdict, sha256_hex, verify};
use crate::core::session::{Message, Mode, Origin, Session};

/// Events a unit appends after its first, one at a time.
const EVENTS: u64 = 6;
/// Receipts of a complete unit: one in its `Together`, then one after every
/// second event.
const RECEIPTS: u64 = 1 + EVENTS / 2;

fn session_id(prefix: &str, unit: u64) -> String {
    format!("ses_{prefix}_{unit}")
}

fn run_id(prefix: &str, unit: u64) -> String {
    format!("run_{prefix}_{unit}")
}

fn call_id(prefix: &str, unit: u64, n: u64) -> String {
    format!("{prefix}.{unit}.{n}")
}

/// The workspace of a writer's sessions: listing it finds them all.
fn workspace(prefix: &str) -> PathBuf {
    PathBuf::from(format!("/ws/{prefix}"))
}

fn session(prefix: &str, unit: u64) -> Session {
    Session {
        id: SessionId::from_string(session_id(prefix, unit)),
        workspace: workspace(prefix),
        origin: Origin::Headless,
        provider: "p".into(),
        model: "m".into(),
        mode: Mode::Supervised,
        title: None,
        mcp_servers: serde_json::json!([]),
        created_at: 1,
        updated_at: 1,
        closed: false,
        conversation: None,
        prompt: Default::default(),
        parent: None,
        thought_level: None,
    }
}

fn text_of(run: &str, seq: u64) -> String {
    format!("{run}#{seq}")
}

fn event(prefix: &str, unit: u64, seq: u64) -> Write {
    let run = run_id(prefix, unit);
    Write::AppendEvent(crate::core::event::EventRecord {
        session_id: SessionId::from_string(session_id(prefix, unit)),
        run_id: RunId::from_string(run.clone()),
        seq,
        at: seq as i64,
        event: Event::TextDelta {
            text: text_of(&run, seq),
        },
    })
}

fn receipt_body(session: &str, run: &str, call: &str) -> ReceiptBody {
    ReceiptBody {
        session_id: SessionId::from_string(session.into()),
        run_id: RunId::from_string(run.into()),
        call_id: call.into(),
        tool: "read_file".into(),
        input_hash: sha256_hex(call.as_bytes()),
        output_hash: sha256_hex(b"out"),
        verdict: Verdict::Allowed,
        is_error: false,
        at: 1,
        hooks: Vec::new(),
        skills: Vec::new(),
    }
}

fn receipt(prefix: &str, unit: u64, n: u64) -> Write {
    Write::AppendReceipt(receipt_body(
        &session_id(prefix, unit),
        &run_id(prefix, unit),
        &call_id(prefix, unit, n),
    ))
}

/// A unit's first writes, committed together: its session, its run, the
/// run's first event and receipt, and a note in the session's history.
async fn start_unit(store: &Store, prefix: &str, unit: u64) -> Result<(), StoreError> {
    let (session_name, run) = (session_id(prefix, unit), run_id(prefix, unit));
    store
        .commit(Write::Together(vec![
            Write::InsertSession(session(prefix, unit)),
            Write::InsertRun {
                id: RunId::from_string(run.clone()),
                session_id: SessionId::from_string(session_name.clone()),
                at: 2,
            },
            event(prefix, unit, 0),
            receipt(prefix, unit, 0),
            Write::AppendMessage {
                session_id: SessionId::from_string(session_name),
                run_id: Some(RunId::from_string(run.clone())),
                message: Message::Note { text: run },
                at: 3,
            },
        ]))
        .await
}

/// The rest of a unit, submitted one write at a time (a receipt after every
/// second event), then made durable with the run's end: by `commit`, or by
/// `submit` and `flush`.
async fn finish_unit(
    store: &Store,
    prefix: &str,
    unit: u64,
    flush: bool,
) -> Result<(), StoreError> {
    for seq in 1..=EVENTS {
        store.submit(event(prefix, unit, seq));
        if seq % 2 == 0 {
            store.submit(receipt(prefix, unit, seq / 2));
        }
    }
    let end = Write::SetRunState {
        id: RunId::from_string(run_id(prefix, unit)),
        state: RunState::Completed,
        stop_reason: Some(StopReason::EndTurn),
        error: None,
        usage: Usage::default(),
        cost: None,
        at: 10,
    };
    if flush {
        store.submit(end);
        store.flush().await
    } else {
        store.commit(end).await
    }
}

/// Notes in a group's session.
const GROUP_NOTES: u64 = 10;

/// One `Together` of many writes: a session, its notes in order, a receipt
/// and the session's title, which only a whole group has.
async fn write_group(store: &Store, prefix: &str, unit: u64) -> Result<(), StoreError> {
    let id = SessionId::from_string(session_id(prefix, unit));
    let mut writes = vec![Write::InsertSession(session(prefix, unit))];
    writes.extend((0..GROUP_NOTES).map(|n| Write::AppendMessage {
        session_id: id.clone(),
        run_id: None,
        message: Message::Note {
            text: format!("{id}/{n}"),
        },
        at: n as i64,
    }));
    writes.push(Write::AppendReceipt(receipt_body(
        id.as_str(),
        "run_group",
        &call_id(prefix, unit, 0),
    )));
    writes.push(Write::SetTitle {
        id,
        title: "whole".into(),
    });
    store.commit(Write::Together(writes)).await
}

/// A writer's units, each by the number at the end of its session id.
async fn units_of(store: &Store, prefix: &str) -> u64 {
    let listed = store
        .sessions(SessionQuery {
            workspace: Some(workspace(prefix)),
            after: None,
            limit: 0,
            ..SessionQuery::default()
        })
        .await
        .unwrap();
    let units: BTreeSet<u64> = listed
        .iter()
        .map(|s| {
            let unit = s.id.as_str().rsplit('_').next().unwrap_or_default();
            unit.parse().unwrap()
        })
        .collect();
    let started = units.len() as u64;
    assert!(
        units.iter().copied().eq(0..started),
        "{prefix}: a later unit landed while an earlier one was lost: {units:?}"
    );
    started
}

/// The (unit, n) of a writer's receipts, in chain order.
fn receipts_of(chain: &[Receipt], prefix: &str) -> Vec<(u64, u64)> {
    let mine: Vec<(u64, u64)> = chain
        .iter()
        .filter_map(|r| {
            let rest = r.body.call_id.strip_prefix(&format!("{prefix}."))?;
            let (unit, n) = rest.split_once('.')?;
            Some((unit.parse().unwrap(), n.parse().unwrap()))
        })
        .collect();
    assert!(
        mine.windows(2).all(|w| w[0] < w[1]),
        "{prefix}: receipts out of submission order in the chain: {mine:?}"
    );
    mine
}

/// What a writer of groups left: each group whole, and the groups a prefix
/// of those it wrote.
async fn groups_left(store: &Store, chain: &[Receipt], prefix: &str) -> Left {
    let started = units_of(store, prefix).await;
    assert_eq!(
        receipts_of(chain, prefix),
        (0..started).map(|unit| (unit, 0)).collect::<Vec<_>>(),
        "{prefix}: a group's receipt without its session, or its session without it (a partial Together)"
    );
    for unit in 0..started {
        let id = SessionId::from_string(session_id(prefix, unit));
        let stored = store.session(&id).await.unwrap().unwrap();
        assert_eq!(
            stored.title.as_deref(),
            Some("whole"),
            "{id}: a partial Together"
        );
        let notes: Vec<Message> = store
            .history(&id)
            .await
            .unwrap()
            .into_iter()
            .map(|e| e.message)
            .collect();
        let whole: Vec<Message> = (0..GROUP_NOTES)
            .map(|n| Message::Note {
                text: format!("{id}/{n}"),
            })
            .collect();
        assert_eq!(notes, whole, "{id}: a partial Together");
    }
    Left {
        started,
        complete: started,
    }
}

fn backend(store: &Store) -> Backend {
    let stop = store.clone();
    Backend {
        journal: Arc::new(store.clone()),
        audit: Arc::new(store.clone()),
        schedules: Arc::new(store.clone()),
        counts: Arc::new(store.clone()),
        leases: Arc::new(store.clone()),
        stop: Box::new(move || stop.shutdown()),
        dir: None,
    }
}

/// Contract rules that hold on a file other writers already filled (the
/// ones that count every session or receipt assume an empty backend).
async fn contract_rules_hold(backend: &Backend) {
    contract::writes_take_effect_in_submission_order(backend).await;
    contract::commit_makes_earlier_submits_visible(backend).await;
    contract::together_lands_whole_or_not_at_all(backend).await;
    contract::the_tape_is_numbered_in_order_and_never_changed(backend).await;
    contract::tape_pages_start_and_stop_where_asked(backend).await;
    contract::history_keeps_messages_in_order_and_touches_the_session(backend).await;
    contract::runs_record_their_states_and_times(backend).await;
    contract::grants_are_replaced_per_tool_and_scope(backend).await;
    contract::missing_receipts_are_counted(backend).await;
    contract::fenced_writes_apply_only_under_the_current_lease(backend).await;
    contract::interrupting_runs_ends_each_working_one_once(backend).await;
}

/// The whole receipt chain, read in pages the way `pincer verify` reads it,
/// checked with its verification: numbered 1..n without gaps, each linked
/// to the one before, every hash right, every row of the table in it, and
/// no call in it twice.
async fn the_chain(store: &Store, path: &Path) -> Vec<Receipt> {
    let mut all: Vec<Receipt> = Vec::new();
    loop {
        let page = store.receipts(all.len() as u64 + 1, 97).await.unwrap();
        if page.is_empty() {
            break;
        }
        all.extend(page);
    }
    let (count, head) = verify(&all).unwrap_or_else(|at| panic!("the chain breaks: {at:?}"));
    assert_eq!(count, all.len() as u64);
    let conn = Connection::open(path).unwrap();
    let (rows, last): (i64, Option<i64>) = conn
        .query_row("SELECT COUNT(*), MAX(seq) FROM receipts", [], |row| {
            Ok((row.get(0)?, row.get(1)?))
        })
        .unwrap();
    assert_eq!(rows as u64, count, "receipts outside the chain");
    assert_eq!(last.map_or(0, |seq| seq as u64), count);
    assert_eq!(
        all.last()
            .map_or(crate::core::receipt::GENESIS, |r| r.hash.as_str()),
        head
    );
    let mut calls = HashSet::new();
    for receipt in &all {
        assert!(
            calls.insert(receipt.body.call_id.as_str()),
            "receipt {} is in the chain twice",
            receipt.body.call_id
        );
    }
    all
}

/// The file as SQLite sees it: intact, every reference kept.
fn the_file_is_sound(path: &Path) {
    let conn = Connection::open(path).unwrap();
    let integrity: Vec<String> = conn
        .prepare("PRAGMA integrity_check")
        .unwrap()
        .query_map([], |row| row.get(0))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    assert_eq!(integrity, ["ok"]);
    let dangling = conn
        .prepare("PRAGMA foreign_key_check")
        .unwrap()
        .query_map([], |row| row.get::<_, String>(0))
        .unwrap()
        .count();
    assert_eq!(dangling, 0, "rows refer to rows that are not there");
}

/// What one writer (units under `prefix`, written in order) left in the file.
#[derive(Debug, Default, PartialEq, Eq)]
struct Left {
    /// Units whose `Together` landed: always units 0..started.
    started: u64,
    /// Of those, units whose run ended completed with all its writes.
    complete: u64,
}

/// Reads back one writer's units and checks that what landed is what the
/// contract allows after a crash: each `Together` whole, a unit's later
/// writes a prefix of what it submitted (never one lost before one kept),
/// every unit before the last complete, the tape gap-free, and the writer's
/// receipts in the chain in the order submitted.
async fn writer_left(store: &Store, chain: &[Receipt], prefix: &str) -> Left {
    let started = units_of(store, prefix).await;
    let mine = receipts_of(chain, prefix);
    let mut complete = 0;
    for unit in 0..started {
        let (session_name, run) = (session_id(prefix, unit), run_id(prefix, unit));
        let session = SessionId::from_string(session_name.clone());
        let runs = store.runs(&session).await.unwrap();
        assert_eq!(runs.len(), 1, "{session_name}: {runs:?}");
        assert_eq!(runs[0].id.as_str(), run);
        let history = store.history(&session).await.unwrap();
        assert_eq!(
            history.iter().map(|e| &e.message).collect::<Vec<_>>(),
            [&Message::Note { text: run.clone() }],
            "{session_name}"
        );
        let tape = store
            .tape(&RunId::from_string(run.clone()), 0)
            .await
            .unwrap();
        assert!(
            tape.iter().map(|r| r.seq).eq(0..tape.len() as u64),
            "{run}: the tape has gaps: {:?}",
            tape.iter().map(|r| r.seq).collect::<Vec<_>>()
        );
        let texts = tape
            .iter()
            .take_while(|r| matches!(r.event, Event::TextDelta { .. }))
            .count() as u64;
        for record in &tape[..texts as usize] {
            assert_eq!(
                record.event,
                Event::TextDelta {
                    text: text_of(&run, record.seq)
                }
            );
        }
        let receipts: Vec<u64> = mine
            .iter()
            .filter(|(u, _)| *u == unit)
            .map(|(_, n)| *n)
            .collect();
        assert!(
            receipts.iter().copied().eq(0..receipts.len() as u64),
            "{run}: receipts {receipts:?}"
        );
        let receipts = receipts.len() as u64;
        assert!(texts >= 1 && receipts >= 1, "{run}: a partial Together");
        // Submission order within the unit: receipt n follows event 2n and
        // precedes event 2n + 1; what landed is a prefix of that order.
        assert!(
            (1..receipts).all(|n| texts > 2 * n),
            "{run}: a receipt landed without an event before it ({texts} events, {receipts} receipts)"
        );
        assert!(
            (1..RECEIPTS).all(|n| texts <= 2 * n + 1 || receipts > n),
            "{run}: an event landed without a receipt before it ({texts} events, {receipts} receipts)"
        );
        let state = runs[0].state;
        if state == RunState::Completed {
            assert_eq!((texts, receipts), (EVENTS + 1, RECEIPTS), "{run}");
            assert_eq!(tape.len() as u64, texts, "{run}: {tape:?}");
            complete += 1;
        } else {
            // Cut short by the kill, then ended by the recovery at reopen.
            assert_eq!(state, RunState::Failed, "{run}");
            assert_eq!(unit, started - 1, "{run}: unfinished but not the last unit");
            assert_eq!(tape.len() as u64, texts + 1, "{run}: {tape:?}");
            assert!(matches!(
                tape.last().map(|r| &r.event),
                Some(Event::State {
                    state: RunState::Failed,
                    ..
                })
            ));
        }
    }
    Left { started, complete }
}

/// Two stores on one file, as two processes would open it, each with
/// several tasks writing at once: every write lands once, every tape is
/// whole, and the receipts of both are one chain.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_stores_writing_at_once_keep_every_write_once_and_one_receipt_chain() {
    const TASKS: u64 = 4;
    const UNITS: u64 = 20;
    const PING_PONG: u64 = 20;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("pincer.db");
    let (a, _) = Store::open(&path).unwrap();
    let (b, _) = Store::open(&path).unwrap();
    // Opened now: an open ends the unfinished runs of a process it takes
    // for gone, and a store of this process takes this process's runs so.
    let (checker, _) = Store::open(&path).unwrap();

    // Turn about: each store must link to the receipt the other just wrote.
    for n in 0..PING_PONG {
        let store = if n % 2 == 0 { &a } else { &b };
        store
            .commit(Write::AppendReceipt(receipt_body(
                "ses_pp",
                "run_pp",
                &format!("pp.{n}"),
            )))
            .await
            .unwrap();
    }

    // All at once: four tasks writing units and one writing groups on
    // each store.
    let barrier = Arc::new(tokio::sync::Barrier::new(2 * TASKS as usize + 2));
    let mut tasks = Vec::new();
    for (name, store) in [("a", &a), ("b", &b)] {
        let (group_store, group_barrier) = (store.clone(), barrier.clone());
        let prefix = format!("{name}g");
        tasks.push(tokio::spawn(async move {
            group_barrier.wait().await;
            for unit in 0..UNITS {
                write_group(&group_store, &prefix, unit).await.unwrap();
            }
            prefix
        }));
        for task in 0..TASKS {
            let (store, barrier) = (store.clone(), barrier.clone());
            let prefix = format!("{name}{task}");
            tasks.push(tokio::spawn(async move {
                barrier.wait().await;
                for unit in 0..UNITS {
                    start_unit(&store, &prefix, unit).await.unwrap();
                    finish_unit(&store, &prefix, unit, (unit + task) % 2 == 0)
                        .await
                        .unwrap();
                }
                prefix
            }));
        }
    }
    let mut prefixes = Vec::new();
    for task in tasks {
        prefixes.push(task.await.unwrap());
    }

    the_file_is_sound(&path);
    let chain = the_chain(&checker, &path).await;
    assert_eq!(
        chain.len() as u64,
        PING_PONG + 2 * TASKS * UNITS * RECEIPTS + 2 * UNITS
    );
    assert!(
        chain[..PING_PONG as usize]
            .iter()
            .map(|r| r.body.call_id.clone())
            .eq((0..PING_PONG).map(|n| format!("pp.{n}")))
    );
    for prefix in &prefixes {
        let left = if prefix.ends_with('g') {
            groups_left(&checker, &chain, prefix).await
        } else {
            writer_left(&checker, &chain, prefix).await
        };
        assert_eq!(
            left,
            Left {
                started: UNITS,
                complete: UNITS
            },
            "{prefix}"
        );
    }
    assert!(checker.missing_receipts().await.unwrap().is_empty());

    // The contract still holds on the file, while both stores go on
    // chaining receipts beside it.
    let stop = Arc::new(AtomicBool::new(false));
    let mut beside = Vec::new();
    for (name, store) in [("a", &a), ("b", &b)] {
        let (store, stop) = (store.clone(), stop.clone());
        beside.push(tokio::spawn(async move {
            let mut written = 0u64;
            while !stop.load(Ordering::Relaxed) || written == 0 {
                let call = format!("beside.{name}.{written}");
                store
                    .commit(Write::AppendReceipt(receipt_body("ses_b", "run_b", &call)))
                    .await
                    .unwrap();
                written += 1;
            }
            written
        }));
    }
    contract_rules_hold(&backend(&checker)).await;
    stop.store(true, Ordering::Relaxed);
    let mut written = 0;
    for task in beside {
        written += task.await.unwrap();
    }
    let after = the_chain(&checker, &path).await;
    // The contract's own: two receipts (missing_receipts_are_counted).
    assert_eq!(after.len(), chain.len() + written as usize + 2);
    assert_eq!(after[..chain.len()], chain[..]);
    for store in [a, b, checker] {
        store.shutdown();
    }
    the_file_is_sound(&path);
}

/// Another process holding the write lock for longer than the writer's
/// busy timeout (a migration, a long group on a slow disk) costs nothing
/// queued meanwhile: those writes wait for the lock and land, in order,
/// before the writes that follow them. (The writer used to give the group
/// up, dropping its submitted writes while later ones landed: a tape with a
/// gap, a receipt lost before one kept.)
#[tokio::test]
async fn writes_kept_waiting_by_another_writer_land_in_order() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("pincer.db");
    let (store, _) = Store::open(&path).unwrap();
    start_unit(&store, "w", 0).await.unwrap();
    let other = Connection::open(&path).unwrap();
    other.execute_batch("BEGIN IMMEDIATE").unwrap();
    store.submit(event("w", 0, 1));
    store.submit(event("w", 0, 2));
    store.submit(receipt("w", 0, 1));
    let flushed = {
        let store = store.clone();
        tokio::spawn(async move { store.flush().await })
    };
    // Until the writer's wait for the lock has run out at least once.
    while store.inner.writer.lock_waits() == 0 {
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    other.execute_batch("COMMIT").unwrap();
    flushed.await.unwrap().unwrap();
    store.commit(event("w", 0, 3)).await.unwrap();
    let run = RunId::from_string(run_id("w", 0));
    let tape = store.tape(&run, 0).await.unwrap();
    assert_eq!(tape.iter().map(|r| r.seq).collect::<Vec<_>>(), [0, 1, 2, 3]);
    let chain = the_chain(&store, &path).await;
    assert_eq!(receipts_of(&chain, "w"), [(0, 0), (0, 1)]);
    store.shutdown();
}

const CHILD_DB: &str = "PINCER_TEST_CHILD_DB";
const CHILD_TAG: &str = "PINCER_TEST_CHILD_TAG";
/// Tasks writing at once in each child.
const CHILD_TASKS: u64 = 3;

fn say(line: &str) {
    let mut out = std::io::stdout().lock();
    // The parent reads line by line: each is out before the next write.
    let _ = writeln!(out, "{line}");
    let _ = out.flush();
}

/// The writer the crash test starts as a child process and kills: with
/// `PINCER_TEST_CHILD_DB` set, writes units until killed, printing
/// `TOGETHER prefix unit` once a unit's (or a group's) `Together` is
/// committed and `RUN prefix unit` once a unit's run's end is. Without it,
/// does nothing.
#[test]
fn child_writer() {
    let Some(path) = std::env::var_os(CHILD_DB) else {
        return;
    };
    let tag = std::env::var(CHILD_TAG).unwrap_or_else(|_| "child".into());
    // The parent holds this child's stdin; should the parent go away
    // without killing it, so does the child.
    std::thread::spawn(|| {
        let _ = std::io::copy(&mut std::io::stdin(), &mut std::io::sink());
        std::process::exit(0);
    });
    say("OPENING");
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async move {
        let store = match Store::open(Path::new(&path)) {
            Ok((store, _)) => store,
            Err(err) => return say(&format!("ERROR open: {err}")),
        };
        say("OPENED");
        let groups = {
            let store = store.clone();
            let prefix = format!("{tag}g");
            tokio::spawn(async move {
                for unit in 0.. {
                    if let Err(err) = write_group(&store, &prefix, unit).await {
                        return say(&format!("ERROR {prefix} {unit}: {err}"));
                    }
                    say(&format!("TOGETHER {prefix} {unit}"));
                }
            })
        };
        let tasks: Vec<_> = (0..CHILD_TASKS)
            .map(|task| {
                let store = store.clone();
                let prefix = format!("{tag}t{task}");
                tokio::spawn(async move {
                    for unit in 0.. {
                        if let Err(err) = start_unit(&store, &prefix, unit).await {
                            return say(&format!("ERROR {prefix} {unit}: {err}"));
                        }
                        say(&format!("TOGETHER {prefix} {unit}"));
                        if let Err(err) = finish_unit(&store, &prefix, unit, unit % 2 == 1).await {
                            return say(&format!("ERROR {prefix} {unit}: {err}"));
                        }
                        say(&format!("RUN {prefix} {unit}"));
                    }
                })
            })
            .collect();
        for task in tasks {
            let _ = task.await;
        }
        let _ = groups.await;
    });
}

/// A child writer and what it says.
struct Writer {
    child: Child,
    stderr: std::thread::JoinHandle<String>,
    lines: std::thread::JoinHandle<()>,
}

fn start_writer(path: &Path, tag: &str, said: mpsc::Sender<(String, Option<String>)>) -> Writer {
    let module = module_path!();
    let test = format!(
        "{}::child_writer",
        module.split_once("::").map_or(module, |(_, rest)| rest)
    );
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", &test, "--nocapture", "--test-threads=1"])
        .env(CHILD_DB, path)
        .env(CHILD_TAG, tag)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let mut stderr = child.stderr.take().unwrap();
    let tag = tag.to_owned();
    let lines = std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            let _ = said.send((tag.clone(), Some(line)));
        }
        let _ = said.send((tag, None));
    });
    let stderr = std::thread::spawn(move || {
        let mut text = String::new();
        let _ = stderr.read_to_string(&mut text);
        text
    });
    Writer {
        child,
        stderr,
        lines,
    }
}

/// What the children said they committed, over every round.
#[derive(Default)]
struct Promised {
    /// (prefix, unit) whose `Together` was committed.
    started: BTreeSet<(String, u64)>,
    /// (prefix, unit) whose run's end was committed.
    ended: BTreeSet<(String, u64)>,
}

impl Promised {
    /// Takes in one line of a child; whether it told of progress.
    fn hear(&mut self, tag: &str, line: &str) -> bool {
        // The first line follows the test harness's `test name ... `.
        let said = line.rsplit(" ... ").next().unwrap_or(line);
        let mut words = said.split_whitespace();
        match (words.next(), words.next(), words.next()) {
            (Some("OPENING" | "OPENED"), None, None) => true,
            (Some(kind @ ("TOGETHER" | "RUN")), Some(prefix), Some(unit)) => {
                let key = (prefix.to_owned(), unit.parse().unwrap());
                if kind == "TOGETHER" {
                    self.started.insert(key);
                } else {
                    self.ended.insert(key);
                }
                true
            }
            (Some("ERROR"), _, _) => panic!("child {tag}: {line}"),
            _ => false,
        }
    }
}

/// Child writers killed with `SIGKILL` in the middle of writing, at varied
/// moments, eight times over one file (two children at once, the parent a
/// third writer beside them): each time the file opens intact, everything
/// a child was told was committed is there, no `Together` is partial, every
/// tape is gap-free and the receipt chain verifies.
#[test]
fn writers_killed_mid_write_keep_all_they_committed() {
    const CHILDREN: usize = 2;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("pincer.db");
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let mut promised = Promised::default();
    let mut parent_receipts: Vec<String> = Vec::new();
    let mut prefixes = Vec::new();
    // Lines heard (progress) before the kill; the first round's children
    // are killed while opening (creating and migrating) the new file.
    for (round, kill_after) in [2usize, 9, 37, 16, 300, 60, 5, 120].into_iter().enumerate() {
        let (said, heard) = mpsc::channel();
        let tags: Vec<String> = (0..CHILDREN).map(|c| format!("k{round}c{c}")).collect();
        let mut writers: Vec<Writer> = tags
            .iter()
            .map(|tag| start_writer(&path, tag, said.clone()))
            .collect();
        drop(said);
        for tag in &tags {
            prefixes.extend((0..CHILD_TASKS).map(|task| format!("{tag}t{task}")));
            prefixes.push(format!("{tag}g"));
        }
        // After the first round the parent writes too, until the kill.
        let parent = (round > 0).then(|| {
            let (store, _) = Store::open(&path).unwrap();
            let stop = Arc::new(AtomicBool::new(false));
            let writing = {
                let (store, stop) = (store.clone(), stop.clone());
                runtime.spawn(async move {
                    let mut committed = Vec::new();
                    while !stop.load(Ordering::Relaxed) {
                        let call = format!("parent.{round}.{}", committed.len());
                        store
                            .commit(Write::AppendReceipt(receipt_body(
                                "ses_parent",
                                "run_parent",
                                &call,
                            )))
                            .await
                            .unwrap();
                        committed.push(call);
                    }
                    committed
                })
            };
            (store, stop, writing)
        });
        let mut progress = 0;
        while progress < kill_after {
            let Ok((tag, line)) = heard.recv() else { break };
            match line {
                Some(line) => progress += usize::from(promised.hear(&tag, &line)),
                None => {
                    let stderr: Vec<String> = writers
                        .drain(..)
                        .map(|mut writer| {
                            let _ = writer.child.kill();
                            let _ = writer.child.wait();
                            writer.stderr.join().unwrap_or_default()
                        })
                        .collect();
                    panic!("child {tag} ended before it was killed: {stderr:#?}");
                }
            }
        }
        for writer in &mut writers {
            writer.child.kill().unwrap();
        }
        for writer in &mut writers {
            let status = writer.child.wait().unwrap();
            assert!(!status.success(), "a child was not killed: {status}");
        }
        // What they said until the kill was committed too.
        for (tag, line) in heard.iter() {
            if let Some(line) = line {
                promised.hear(&tag, &line);
            }
        }
        for writer in writers {
            writer.lines.join().unwrap();
            let stderr = writer.stderr.join().unwrap();
            assert!(!stderr.contains("panicked"), "{stderr}");
        }
        if let Some((store, stop, writing)) = parent {
            stop.store(true, Ordering::Relaxed);
            parent_receipts.extend(runtime.block_on(writing).unwrap());
            store.shutdown();
        }

        // Reopened as the next process would.
        let (store, recovery) = Store::open(&path).unwrap();
        assert!(
            recovery.interrupted_runs.iter().all(|run| tags
                .iter()
                .any(|tag| run.as_str().starts_with(&format!("run_{tag}")))),
            "{recovery:?}"
        );
        the_file_is_sound(&path);
        runtime.block_on(async {
            let chain = the_chain(&store, &path).await;
            for prefix in &prefixes {
                let left = if prefix.ends_with('g') {
                    groups_left(&store, &chain, prefix).await
                } else {
                    writer_left(&store, &chain, prefix).await
                };
                for (_, unit) in promised.started.iter().filter(|(p, _)| p == prefix) {
                    assert!(
                        *unit < left.started,
                        "{prefix}: unit {unit}'s Together was committed but is not there ({left:?})"
                    );
                }
                for (_, unit) in promised.ended.iter().filter(|(p, _)| p == prefix) {
                    assert!(
                        *unit < left.complete,
                        "{prefix}: unit {unit}'s run was committed but is not whole ({left:?})"
                    );
                }
            }
            let calls: HashSet<&str> = chain.iter().map(|r| r.body.call_id.as_str()).collect();
            for call in &parent_receipts {
                assert!(
                    calls.contains(call.as_str()),
                    "{call} was committed but is lost"
                );
            }
            assert!(store.missing_receipts().await.unwrap().is_empty());
        });
        store.shutdown();
    }
    // Each round's children were killed after they committed something
    // (but the first's, killed while opening).
    assert!(promised.ended.len() > 10, "{}", promised.ended.len());

    // The contract still holds on the file that survived it all.
    let (store, _) = Store::open(&path).unwrap();
    runtime.block_on(async {
        contract_rules_hold(&backend(&store)).await;
        the_chain(&store, &path).await;
    });
    store.shutdown();
    the_file_is_sound(&path);
}
