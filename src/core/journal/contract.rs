//! The contract suite every journal backend must pass (see the contract in
//! [`super`]'s module doc). A backend's tests call [`journal_contract!`] with
//! an expression that opens a fresh backend; each check becomes a test of its
//! own, named after the rule it checks. Backends that keep data across a
//! reopen also call [`journal_durability_contract!`].

use std::path::PathBuf;
use std::sync::Arc;

use super::{Audit, Journal, JournalError, SessionCursor, SessionFilter, SessionQuery, Write};
use crate::core::approval::Grant;
use crate::core::event::{Event, EventRecord, RunState, StopReason, Usage};
use crate::core::ids::{RunId, SessionId};
use crate::core::receipt::{GENESIS, ReceiptBody, Verdict, verify};
use crate::core::session::{Message, Mode, Origin, Session};

/// A backend under test: its ports, and how to stop it.
pub struct Backend {
    pub journal: Arc<dyn Journal>,
    pub audit: Arc<dyn Audit>,
    /// The schedules' records (`core::schedule`).
    pub schedules: Arc<dyn super::Schedules>,
    /// What the metrics and the health summary count.
    pub counts: Arc<dyn super::Counts>,
    /// The sessions' leases kept with the journal, which fenced writes obey.
    pub leases: Arc<dyn crate::core::lease::Leases>,
    pub stop: Box<dyn Fn() + Send + Sync>,
    /// Where the backend keeps its files, removed with it.
    pub dir: Option<tempfile::TempDir>,
}

/// Generates one `#[tokio::test]` per contract rule for the backend `$open`
/// (an expression of type [`Backend`]; it is evaluated once per test).
#[macro_export]
macro_rules! journal_contract {
    ($open:expr) => {
        $crate::journal_contract!(@tests $open;
            writes_take_effect_in_submission_order,
            commit_makes_earlier_submits_visible,
            together_lands_whole_or_not_at_all,
            the_tape_is_numbered_in_order_and_never_changed,
            tape_pages_start_and_stop_where_asked,
            receipts_are_numbered_and_chained,
            sessions_list_newest_first_by_workspace_and_cursor,
            session_listings_filter_before_they_page,
            a_chats_sessions_are_listed_by_its_conversation,
            history_keeps_messages_in_order_and_touches_the_session,
            the_conversation_since_compaction_starts_at_the_newest_summary,
            runs_record_their_states_and_times,
            a_sessions_cost_is_summed_in_its_first_currency,
            followers_list_new_and_unfinished_runs_once,
            grants_are_replaced_per_tool_and_scope,
            trust_is_kept_per_project_directory,
            missing_receipts_are_counted,
            a_deleted_session_keeps_its_runs_summaries_and_receipts_only,
            a_stopped_journal_refuses_commits,
            fenced_writes_apply_only_under_the_current_lease,
            interrupting_runs_ends_each_working_one_once,
            each_occurrence_of_a_schedule_is_recorded_once,
            a_window_of_runs_is_summed_across_sessions,
        );
    };
    (@tests $open:expr; $($name:ident),* $(,)?) => {
        $(
            #[tokio::test]
            async fn $name() {
                let backend = $open;
                $crate::core::journal::contract::$name(&backend).await;
            }
        )*
    };
}

/// For backends that keep data across a reopen: `$open` opens the backend at
/// a fixed place (a `PathBuf` it is given), twice.
#[macro_export]
macro_rules! journal_durability_contract {
    ($open:expr) => {
        #[tokio::test]
        async fn committed_writes_survive_a_reopen() {
            let dir = tempfile::tempdir().unwrap();
            let place = dir.path().to_path_buf();
            let open = $open;
            $crate::core::journal::contract::committed_writes_survive_a_reopen(&place, &open).await;
        }
    };
}

fn session(id: &str, workspace: &str, updated_at: i64) -> Session {
    Session {
        id: SessionId::from_string(id.into()),
        workspace: PathBuf::from(workspace),
        origin: Origin::Headless,
        provider: "p".into(),
        model: "m".into(),
        mode: Mode::Supervised,
        title: None,
        mcp_servers: serde_json::json!([]),
        created_at: updated_at,
        updated_at,
        closed: false,
        conversation: Some(format!("chat/{id}")),
        prompt: crate::core::session::PromptSettings {
            system_prompt: None,
            instructions: Some(format!("instructions of {id}")),
        },
        parent: None,
        thought_level: Some("high".into()),
    }
}

fn event(session: &SessionId, run: &RunId, seq: u64, text: &str) -> EventRecord {
    EventRecord {
        session_id: session.clone(),
        run_id: run.clone(),
        seq,
        at: 1_000 + seq as i64,
        event: Event::TextDelta { text: text.into() },
    }
}

fn receipt(session: &SessionId, run: &RunId, call: &str) -> ReceiptBody {
    ReceiptBody {
        session_id: session.clone(),
        run_id: run.clone(),
        call_id: call.into(),
        tool: "read_file".into(),
        input_hash: "i".repeat(64),
        output_hash: "o".repeat(64),
        verdict: Verdict::Allowed,
        is_error: false,
        at: 5,
        // Some receipts carry what hooks decided; the chain covers it.
        hooks: if call.ends_with('2') {
            vec![
                "PreToolUse ./a.sh: allow".into(),
                "PostToolUse ./b.sh: block".into(),
            ]
        } else {
            Vec::new()
        },
        // And some the skills active when the call was made.
        skills: if call.ends_with('3') {
            vec!["pdf".into(), "review".into()]
        } else {
            Vec::new()
        },
    }
}

fn texts(records: &[EventRecord]) -> Vec<(u64, String)> {
    records
        .iter()
        .map(|record| {
            if let Event::TextDelta { text } = &record.event {
                (record.seq, text.clone())
            } else {
                (record.seq, record.event.kind().to_owned())
            }
        })
        .collect()
}

/// A session with one run, committed.
async fn session_with_run(journal: &dyn Journal, id: &str) -> (SessionId, RunId) {
    let session = session(id, "/ws", 1);
    let run = RunId::generate();
    journal.submit(Write::InsertSession(session.clone()));
    journal
        .commit(Write::InsertRun {
            id: run.clone(),
            session_id: session.id.clone(),
            at: 2,
        })
        .await
        .unwrap();
    (session.id, run)
}

/// Rule 1: a later write sees the effect of an earlier one, whether each
/// was submitted or committed.
pub async fn writes_take_effect_in_submission_order(backend: &Backend) {
    let journal = backend.journal.as_ref();
    let id = SessionId::from_string("ses_order".into());
    journal.submit(Write::InsertSession(session("ses_order", "/ws", 1)));
    journal.submit(Write::SetTitle {
        id: id.clone(),
        title: "first".into(),
    });
    journal.submit(Write::SetTitle {
        id: id.clone(),
        title: "second".into(),
    });
    journal
        .commit(Write::UpdateSettings {
            id: id.clone(),
            provider: "q".into(),
            model: "n".into(),
            thought_level: Some("low".into()),
            mode: Mode::Full,
            at: 9,
        })
        .await
        .unwrap();
    let stored = journal.session(&id).await.unwrap().unwrap();
    assert_eq!(stored.title.as_deref(), Some("second"));
    assert_eq!(
        (stored.provider.as_str(), stored.model.as_str()),
        ("q", "n")
    );
    assert_eq!(stored.mode, Mode::Full);
    assert_eq!(stored.thought_level.as_deref(), Some("low"));
    assert_eq!(stored.updated_at, 9);
}

/// Rule 2: once `commit` or `flush` returns, every write submitted before is
/// readable.
pub async fn commit_makes_earlier_submits_visible(backend: &Backend) {
    let journal = backend.journal.as_ref();
    let (session, run) = session_with_run(journal, "ses_commit").await;
    for seq in 0..200 {
        journal.submit(Write::AppendEvent(event(&session, &run, seq, "x")));
    }
    journal.flush().await.unwrap();
    assert_eq!(journal.tape(&run, 0, None).await.unwrap().len(), 200);
    journal.submit(Write::AppendMessage {
        session_id: session.clone(),
        run_id: Some(run.clone()),
        message: Message::User {
            content: vec![crate::core::session::ContentPart::Text { text: "hi".into() }],
        },
        at: 3,
    });
    journal
        .commit(Write::SetClosed {
            id: session.clone(),
            closed: true,
            at: 4,
        })
        .await
        .unwrap();
    assert_eq!(journal.history(&session).await.unwrap().len(), 1);
    assert!(journal.session(&session).await.unwrap().unwrap().closed);
}

/// Rule 3: a `Together` whose last part fails leaves no trace of its first.
pub async fn together_lands_whole_or_not_at_all(backend: &Backend) {
    let journal = backend.journal.as_ref();
    journal
        .commit(Write::InsertSession(session("ses_taken", "/ws", 1)))
        .await
        .unwrap();
    let failed = journal
        .commit(Write::Together(vec![
            Write::InsertSession(session("ses_new", "/ws", 2)),
            // The same id again: must fail.
            Write::InsertSession(session("ses_taken", "/ws", 3)),
        ]))
        .await;
    assert!(failed.is_err(), "a duplicate session id was accepted");
    let new = SessionId::from_string("ses_new".into());
    assert_eq!(journal.session(&new).await.unwrap(), None);
    // And one that holds together lands whole.
    journal
        .commit(Write::Together(vec![
            Write::InsertSession(session("ses_a", "/ws", 4)),
            Write::InsertSession(session("ses_b", "/ws", 5)),
        ]))
        .await
        .unwrap();
    for id in ["ses_a", "ses_b"] {
        let id = SessionId::from_string(id.into());
        assert!(journal.session(&id).await.unwrap().is_some());
    }
}

/// Rule 4: the tape comes back in the order of its numbers, and an event
/// whose number is taken does not replace the stored one.
pub async fn the_tape_is_numbered_in_order_and_never_changed(backend: &Backend) {
    let journal = backend.journal.as_ref();
    let (session, run) = session_with_run(journal, "ses_tape").await;
    let (_, other) = session_with_run(journal, "ses_tape_other").await;
    for seq in 0..5 {
        journal.submit(Write::AppendEvent(event(
            &session,
            &run,
            seq,
            &format!("e{seq}"),
        )));
        journal.submit(Write::AppendEvent(event(&session, &other, seq, "other")));
    }
    let rewritten = journal
        .commit(Write::AppendEvent(event(&session, &run, 2, "rewritten")))
        .await;
    assert!(rewritten.is_err(), "an event number was reused");
    let tape = journal.tape(&run, 0, None).await.unwrap();
    assert_eq!(
        texts(&tape),
        (0..5).map(|n| (n, format!("e{n}"))).collect::<Vec<_>>()
    );
    assert!(
        tape.iter()
            .all(|r| r.run_id == run && r.session_id == session)
    );
    assert_eq!(tape[1].at, 1_001);
    let unknown = RunId::generate();
    assert!(journal.tape(&unknown, 0, None).await.unwrap().is_empty());
}

/// Rule 4, read in pages: `from_seq` and `limit` cut the tape exactly.
pub async fn tape_pages_start_and_stop_where_asked(backend: &Backend) {
    let journal = backend.journal.as_ref();
    let (session, run) = session_with_run(journal, "ses_pages").await;
    for seq in 0..10 {
        journal.submit(Write::AppendEvent(event(&session, &run, seq, "p")));
    }
    journal.flush().await.unwrap();
    let seqs = |records: Vec<EventRecord>| records.iter().map(|r| r.seq).collect::<Vec<_>>();
    assert_eq!(
        seqs(journal.tape(&run, 3, Some(4)).await.unwrap()),
        [3, 4, 5, 6]
    );
    assert_eq!(seqs(journal.tape(&run, 8, Some(4)).await.unwrap()), [8, 9]);
    assert_eq!(seqs(journal.tape(&run, 7, None).await.unwrap()), [7, 8, 9]);
    assert!(journal.tape(&run, 10, Some(4)).await.unwrap().is_empty());
}

/// Rule 5: receipts are numbered from 1 and each links to the one before,
/// so the chain verifies; reads by run and from a position cut it exactly.
pub async fn receipts_are_numbered_and_chained(backend: &Backend) {
    let journal = backend.journal.as_ref();
    let (session, run) = session_with_run(journal, "ses_receipts").await;
    let (_, other) = session_with_run(journal, "ses_receipts_other").await;
    for n in 0..6 {
        let run = if n % 2 == 0 { &run } else { &other };
        journal.submit(Write::AppendReceipt(receipt(
            &session,
            run,
            &format!("c{n}"),
        )));
    }
    journal.flush().await.unwrap();
    let all = backend.audit.receipts(1, 100).await.unwrap();
    assert_eq!(
        all.iter().map(|r| r.seq).collect::<Vec<_>>(),
        [1, 2, 3, 4, 5, 6]
    );
    assert_eq!(all[0].prev_hash, GENESIS);
    assert_eq!(all[1].prev_hash, all[0].hash);
    assert_eq!(verify(&all).unwrap().0, 6);
    assert_eq!(
        all[2].body.hooks,
        ["PreToolUse ./a.sh: allow", "PostToolUse ./b.sh: block"]
    );
    assert!(all[3].body.hooks.is_empty());
    let page = backend.audit.receipts(3, 2).await.unwrap();
    assert_eq!(page.iter().map(|r| r.seq).collect::<Vec<_>>(), [3, 4]);
    let of_run = backend.audit.run_receipts(&run).await.unwrap();
    assert_eq!(
        of_run
            .iter()
            .map(|r| r.body.call_id.as_str())
            .collect::<Vec<_>>(),
        ["c0", "c2", "c4"]
    );
}

/// Sessions are listed newest first (then by id), filtered by workspace, and
/// continued after a cursor, at most `limit` at a time.
pub async fn sessions_list_newest_first_by_workspace_and_cursor(backend: &Backend) {
    let journal = backend.journal.as_ref();
    for (id, workspace, at) in [
        ("ses_1", "/a", 10),
        ("ses_2", "/b", 20),
        ("ses_3", "/a", 30),
        ("ses_4", "/a", 30),
        ("ses_5", "/a", 5),
    ] {
        journal.submit(Write::InsertSession(session(id, workspace, at)));
    }
    // A subagent's session is kept, read back with its parent, and left out
    // of listings.
    let mut child = session("ses_child", "/a", 40);
    child.origin = Origin::Subagent;
    child.parent = Some(crate::core::session::SessionParent {
        session: SessionId::from_string("ses_1".into()),
        run: RunId::from_string("run_parent".into()),
        call: "call_1".into(),
    });
    journal.submit(Write::InsertSession(child.clone()));
    journal.flush().await.unwrap();
    assert_eq!(
        journal.session(&child.id).await.unwrap(),
        Some(child.clone())
    );
    let ids = |sessions: Vec<Session>| {
        sessions
            .into_iter()
            .map(|s| s.id.as_str().to_owned())
            .collect::<Vec<_>>()
    };
    let all = journal.sessions(SessionQuery::default()).await.unwrap();
    assert_eq!(ids(all), ["ses_4", "ses_3", "ses_2", "ses_1", "ses_5"]);
    let first = journal
        .sessions(SessionQuery {
            workspace: Some("/a".into()),
            after: None,
            limit: 2,
            ..SessionQuery::default()
        })
        .await
        .unwrap();
    assert_eq!(ids(first), ["ses_4", "ses_3"]);
    let rest = journal
        .sessions(SessionQuery {
            workspace: Some("/a".into()),
            after: Some(SessionCursor {
                updated_at: 30,
                id: SessionId::from_string("ses_3".into()),
            }),
            limit: 2,
            ..SessionQuery::default()
        })
        .await
        .unwrap();
    assert_eq!(ids(rest), ["ses_1", "ses_5"]);
    // A page that ends between two sessions of the same time goes on with
    // the other one, in every workspace too.
    let across = journal
        .sessions(SessionQuery {
            workspace: None,
            after: Some(SessionCursor {
                updated_at: 30,
                id: SessionId::from_string("ses_4".into()),
            }),
            limit: 3,
            ..SessionQuery::default()
        })
        .await
        .unwrap();
    assert_eq!(ids(across), ["ses_3", "ses_2", "ses_1"]);
    let end = journal
        .sessions(SessionQuery {
            workspace: Some("/b".into()),
            after: Some(SessionCursor {
                updated_at: 20,
                id: SessionId::from_string("ses_2".into()),
            }),
            limit: 2,
            ..SessionQuery::default()
        })
        .await
        .unwrap();
    assert!(end.is_empty(), "{end:?}");
}

/// A listing filtered by origin, state, chat channel (by name) and words
/// (in the title, id, model or workspace, case aside, wildcards taken as
/// they are) holds the sessions that pass, newest first; paged one at a
/// time it holds each of them once, whatever fails in between.
pub async fn session_listings_filter_before_they_page(backend: &Backend) {
    use crate::core::channel::{ChannelWrite, ConversationKey, Target, TargetKind};
    let journal = backend.journal.as_ref();
    let mut made = Vec::new();
    for n in 1..=9_i64 {
        let id = format!("ses_{n}");
        let mut s = session(&id, if n % 2 == 0 { "/even" } else { "/odd" }, n * 10);
        s.origin = if n % 3 == 0 {
            Origin::Channel
        } else {
            Origin::Http
        };
        s.closed = n == 4 || n == 7;
        // One untitled: a word must be found elsewhere.
        s.title = match n {
            1 => Some("Fix the Parser".into()),
            2 => Some("100% done_now".into()),
            5 => Some("parser, again".into()),
            9 => None,
            _ => Some(format!("task {n}")),
        };
        if n == 8 {
            s.model = "Big-Parser".into();
        }
        made.push(s.clone());
        journal.submit(Write::InsertSession(s));
    }
    let map = |channel: &str, target: &str, session: &str| {
        Write::Channel(ChannelWrite::MapConversation {
            key: ConversationKey {
                channel: channel.into(),
                account: "bot".into(),
                target: Target {
                    kind: TargetKind::Group,
                    id: target.into(),
                    thread: None,
                },
            },
            session_id: SessionId::from_string(session.into()),
            at: 1,
        })
    };
    journal.submit(map("tg", "a", "ses_3"));
    journal.submit(map("tg", "b", "ses_9"));
    journal.submit(map("irc", "a", "ses_6"));
    journal.flush().await.unwrap();
    let ids = |sessions: &[Session]| {
        sessions
            .iter()
            .map(|s| s.id.as_str().to_owned())
            .collect::<Vec<_>>()
    };
    let list = |workspace: Option<&str>, filter: SessionFilter| {
        let workspace = workspace.map(PathBuf::from);
        async move {
            let all = journal
                .sessions(SessionQuery {
                    workspace: workspace.clone(),
                    filter: filter.clone(),
                    ..SessionQuery::default()
                })
                .await
                .unwrap();
            // One at a time from the cursor of each: the same, in order.
            let mut paged: Vec<Session> = Vec::new();
            loop {
                let page = journal
                    .sessions(SessionQuery {
                        workspace: workspace.clone(),
                        after: paged.last().map(SessionCursor::after),
                        limit: 1,
                        filter: filter.clone(),
                    })
                    .await
                    .unwrap();
                if page.is_empty() {
                    break;
                }
                assert!(paged.len() < 10, "{paged:?}");
                paged.extend(page);
            }
            assert_eq!(ids(&paged), ids(&all), "{filter:?}");
            ids(&all)
        }
    };
    let words = |words: &[&str]| SessionFilter {
        words: words.iter().map(|w| (*w).to_owned()).collect(),
        ..SessionFilter::default()
    };
    assert_eq!(
        list(None, SessionFilter::default()).await,
        made.iter()
            .rev()
            .map(|s| s.id.as_str().to_owned())
            .collect::<Vec<_>>()
    );
    let channel = SessionFilter {
        origin: Some(Origin::Channel),
        ..SessionFilter::default()
    };
    assert_eq!(list(None, channel).await, ["ses_9", "ses_6", "ses_3"]);
    let closed = SessionFilter {
        closed: Some(true),
        ..SessionFilter::default()
    };
    assert_eq!(list(None, closed).await, ["ses_7", "ses_4"]);
    let open_http_odd = SessionFilter {
        origin: Some(Origin::Http),
        closed: Some(false),
        ..SessionFilter::default()
    };
    assert_eq!(list(Some("/odd"), open_http_odd).await, ["ses_5", "ses_1"]);
    let on = |name: &str| SessionFilter {
        channel: Some(name.into()),
        ..SessionFilter::default()
    };
    assert_eq!(list(None, on("tg")).await, ["ses_9", "ses_3"]);
    assert_eq!(list(None, on("irc")).await, ["ses_6"]);
    assert!(list(None, on("t%")).await.is_empty());
    // Words: in the title or the model, case aside; each must be found.
    assert_eq!(
        list(None, words(&["PARSER"])).await,
        ["ses_8", "ses_5", "ses_1"]
    );
    assert_eq!(list(None, words(&["parser", "fix"])).await, ["ses_1"]);
    // In the id and the workspace.
    assert_eq!(list(None, words(&["ses_7"])).await, ["ses_7"]);
    assert_eq!(list(None, words(&["SES_9"])).await, ["ses_9"]);
    assert_eq!(
        list(None, words(&["EVEN", "task"])).await,
        ["ses_8", "ses_6", "ses_4"]
    );
    // `%`, `_` and `\` are themselves, not wildcards.
    assert_eq!(list(None, words(&["100%"])).await, ["ses_2"]);
    assert_eq!(list(None, words(&["e_n"])).await, ["ses_2"]);
    assert_eq!(list(None, words(&["%"])).await, ["ses_2"]);
    assert!(list(None, words(&["s_s"])).await.is_empty());
    assert!(list(None, words(&["\\"])).await.is_empty());
    // A subagent's session stays out, whatever the filter.
    let mut child = session("ses_child", "/odd", 100);
    child.origin = Origin::Subagent;
    child.parent = Some(crate::core::session::SessionParent {
        session: SessionId::from_string("ses_1".into()),
        run: RunId::from_string("run_parent".into()),
        call: "call_1".into(),
    });
    journal.submit(Write::InsertSession(child));
    journal.flush().await.unwrap();
    let subagents = SessionFilter {
        origin: Some(Origin::Subagent),
        ..SessionFilter::default()
    };
    assert!(list(None, subagents).await.is_empty());
}

/// A listing by conversation holds every session of it (a chat's across
/// its `/new`s: `Session::conversation`), whatever the chat maps now,
/// newest first; with an origin, only those the chat made.
pub async fn a_chats_sessions_are_listed_by_its_conversation(backend: &Backend) {
    let journal = backend.journal.as_ref();
    let chat = "tg/bot/group:a";
    for n in 1..=5_i64 {
        let mut s = session(&format!("ses_{n}"), "/w", n * 10);
        s.origin = if n == 4 {
            Origin::Http
        } else {
            Origin::Channel
        };
        if n != 2 {
            s.conversation = Some(chat.into());
        }
        journal.submit(Write::InsertSession(s));
    }
    journal.flush().await.unwrap();
    let list = |conversation: &str, origin: Option<Origin>| {
        let filter = SessionFilter {
            conversation: Some(conversation.into()),
            origin,
            ..SessionFilter::default()
        };
        async move {
            let mut paged: Vec<Session> = Vec::new();
            // One at a time from the cursor of each, as a whole: the same.
            loop {
                let page = journal
                    .sessions(SessionQuery {
                        after: paged.last().map(SessionCursor::after),
                        limit: 1,
                        filter: filter.clone(),
                        ..SessionQuery::default()
                    })
                    .await
                    .unwrap();
                if page.is_empty() {
                    break;
                }
                paged.extend(page);
            }
            let all = journal
                .sessions(SessionQuery {
                    filter,
                    ..SessionQuery::default()
                })
                .await
                .unwrap();
            assert_eq!(paged, all);
            all.iter()
                .map(|s| s.id.as_str().to_owned())
                .collect::<Vec<_>>()
        }
    };
    assert_eq!(list(chat, None).await, ["ses_5", "ses_4", "ses_3", "ses_1"]);
    assert_eq!(
        list(chat, Some(Origin::Channel)).await,
        ["ses_5", "ses_3", "ses_1"]
    );
    assert_eq!(list("chat/ses_2", None).await, ["ses_2"]);
    assert!(list("tg/bot/group:%", None).await.is_empty());
    assert!(list("tg/bot/group:b", None).await.is_empty());
}

/// A session's messages come back in the order appended, with their runs,
/// and appending one makes the session newer.
pub async fn history_keeps_messages_in_order_and_touches_the_session(backend: &Backend) {
    let journal = backend.journal.as_ref();
    let (session, run) = session_with_run(journal, "ses_history").await;
    let note = |text: &str| Message::Note { text: text.into() };
    journal.submit(Write::AppendMessage {
        session_id: session.clone(),
        run_id: Some(run.clone()),
        message: note("one"),
        at: 50,
    });
    journal
        .commit(Write::AppendMessage {
            session_id: session.clone(),
            run_id: None,
            message: note("two"),
            at: 60,
        })
        .await
        .unwrap();
    let history = journal.history(&session).await.unwrap();
    assert_eq!(history.len(), 2);
    assert_eq!(history[0].message, note("one"));
    assert_eq!(history[0].run_id.as_ref(), Some(&run));
    assert_eq!((history[1].run_id.as_ref(), history[1].at), (None, 60));
    let stored = journal.session(&session).await.unwrap().unwrap();
    assert_eq!(stored.updated_at, 60);
}

/// The conversation a model turn is made from starts at the newest summary
/// (every message when there is none); the whole history keeps everything.
pub async fn the_conversation_since_compaction_starts_at_the_newest_summary(backend: &Backend) {
    let journal = backend.journal.as_ref();
    let (session, run) = session_with_run(journal, "ses_compacted").await;
    let (other, _) = session_with_run(journal, "ses_other").await;
    let note = |text: &str| Message::Note { text: text.into() };
    let summary = |text: &str| Message::Summary {
        text: text.into(),
        turns: 2,
    };
    let append = |session: &SessionId, message: Message, at: i64| Write::AppendMessage {
        session_id: session.clone(),
        run_id: Some(run.clone()),
        message,
        at,
    };
    journal.submit(append(&session, note("one"), 10));
    journal
        .commit(append(&other, summary("other's"), 11))
        .await
        .unwrap();
    let texts = |entries: Vec<crate::core::session::HistoryEntry>| -> Vec<Message> {
        entries.into_iter().map(|entry| entry.message).collect()
    };
    assert_eq!(
        texts(journal.since_compaction(&session).await.unwrap()),
        [note("one")],
        "never compacted: all of it (another session's summary is not its own)"
    );
    journal.submit(append(&session, summary("first"), 20));
    journal.submit(append(&session, note("two"), 30));
    journal.submit(append(&session, summary("second"), 40));
    journal
        .commit(append(&session, note("three"), 50))
        .await
        .unwrap();
    let since = journal.since_compaction(&session).await.unwrap();
    assert_eq!(texts(since.clone()), [summary("second"), note("three")]);
    assert_eq!((since[0].at, since[0].run_id.as_ref()), (40, Some(&run)));
    assert_eq!(journal.history(&session).await.unwrap().len(), 5);
    assert!(
        journal
            .since_compaction(&SessionId::from_string("ses_none".into()))
            .await
            .unwrap()
            .is_empty()
    );
}

/// A session's cost is the sum of its runs' costs but the one named, in
/// the currency of its first costed run; it follows a run's cost as it is
/// written again, and other sessions' runs do not count.
pub async fn a_sessions_cost_is_summed_in_its_first_currency(backend: &Backend) {
    use crate::core::usage::Cost;
    let journal = backend.journal.as_ref();
    let (session, first) = session_with_run(journal, "ses_cost").await;
    let (other, theirs) = session_with_run(journal, "ses_cost_other").await;
    let none = RunId::generate();
    assert_eq!(journal.session_cost(&session, &none).await.unwrap(), None);
    let insert = |id: &RunId, session: &SessionId, at: i64| Write::InsertRun {
        id: id.clone(),
        session_id: session.clone(),
        at,
    };
    let costs = |id: &RunId, amount: f64, currency: &str| Write::SetRunState {
        id: id.clone(),
        state: RunState::Completed,
        stop_reason: Some(StopReason::EndTurn),
        error: None,
        usage: Usage::default(),
        cost: Some(Cost {
            amount,
            currency: currency.into(),
        }),
        at: 100,
    };
    let (second, third, fourth) = (RunId::generate(), RunId::generate(), RunId::generate());
    journal.submit(insert(&second, &session, 3));
    journal.submit(insert(&third, &session, 4));
    journal.submit(insert(&fourth, &session, 5));
    journal.submit(costs(&first, 0.25, "USD"));
    journal.submit(costs(&second, 0.5, "USD"));
    journal.submit(costs(&third, 7.0, "EUR"));
    journal.commit(costs(&theirs, 100.0, "USD")).await.unwrap();
    let usd = |amount: f64| {
        Some(Cost {
            amount,
            currency: "USD".into(),
        })
    };
    assert_eq!(
        journal.session_cost(&session, &none).await.unwrap(),
        usd(0.75)
    );
    assert_eq!(
        journal.session_cost(&session, &second).await.unwrap(),
        usd(0.25),
        "the run named is left out"
    );
    assert_eq!(
        journal.session_cost(&session, &third).await.unwrap(),
        usd(0.75),
        "a run in another currency changes nothing"
    );
    journal.commit(costs(&second, 1.5, "USD")).await.unwrap();
    assert_eq!(
        journal.session_cost(&session, &fourth).await.unwrap(),
        usd(1.75)
    );
    assert_eq!(
        journal.session_cost(&other, &none).await.unwrap(),
        usd(100.0)
    );
}

/// A follower's first look lists the runs created from its time on and the
/// unfinished ones; later looks, from the position it was given, the runs
/// inserted since and the unfinished ones; a finished run is listed once.
pub async fn followers_list_new_and_unfinished_runs_once(backend: &Backend) {
    let journal = backend.journal.as_ref();
    let (session, working) = session_with_run(journal, "ses_follow").await;
    let (other, _) = session_with_run(journal, "ses_follow_other").await;
    let insert = |id: &RunId, session: &SessionId, at: i64| Write::InsertRun {
        id: id.clone(),
        session_id: session.clone(),
        at,
    };
    let done = |id: &RunId| Write::SetRunState {
        id: id.clone(),
        state: RunState::Completed,
        stop_reason: Some(StopReason::EndTurn),
        error: None,
        usage: Usage::default(),
        cost: None,
        at: 100,
    };
    let (old, recent) = (RunId::generate(), RunId::generate());
    journal.submit(insert(&old, &session, 1));
    journal.submit(done(&old));
    journal.submit(insert(&recent, &session, 50));
    journal.commit(done(&recent)).await.unwrap();
    let ids = |found: &super::RunsToFollow| -> Vec<RunId> {
        found.runs.iter().map(|run| run.id.clone()).collect()
    };
    let first = journal
        .runs_to_follow(&session, super::RunsFrom::Created(40))
        .await
        .unwrap();
    assert_eq!(
        ids(&first),
        [working.clone(), recent.clone()],
        "the unfinished run and the one created since; not the old one nor another session's"
    );
    let again = journal
        .runs_to_follow(&session, super::RunsFrom::After(first.next))
        .await
        .unwrap();
    assert_eq!(
        ids(&again),
        std::slice::from_ref(&working),
        "only the unfinished one again"
    );
    assert_eq!(again.next, first.next);
    let (late, later) = (RunId::generate(), RunId::generate());
    // Created "before" the follower's time (another process's clock), but
    // inserted after its last look: listed all the same.
    journal.submit(insert(&late, &session, 2));
    journal.submit(done(&late));
    journal.submit(insert(&RunId::generate(), &other, 60));
    journal.submit(done(&working));
    journal.commit(insert(&later, &session, 70)).await.unwrap();
    let next = journal
        .runs_to_follow(&session, super::RunsFrom::After(again.next))
        .await
        .unwrap();
    assert_eq!(ids(&next), [late, later.clone()]);
    assert!(next.next > again.next);
    let last = journal
        .runs_to_follow(&session, super::RunsFrom::After(next.next))
        .await
        .unwrap();
    assert_eq!(ids(&last), [later], "still queued");
}

/// A run starts queued; its first `running` sets when it started, a
/// terminal state when it ended; usage, stop reason and error are kept.
pub async fn runs_record_their_states_and_times(backend: &Backend) {
    let journal = backend.journal.as_ref();
    let (session, run) = session_with_run(journal, "ses_runs").await;
    let queued = journal.run(&run).await.unwrap().unwrap();
    assert_eq!(
        (queued.state, queued.created_at, queued.started_at),
        (RunState::Queued, 2, None)
    );
    let set = |state, at| Write::SetRunState {
        id: run.clone(),
        state,
        stop_reason: state.is_terminal().then_some(StopReason::EndTurn),
        error: None,
        usage: Usage {
            input_tokens: 7,
            output_tokens: 3,
            ..Usage::default()
        },
        cost: None,
        at,
    };
    journal.submit(set(RunState::Running, 10));
    journal.commit(set(RunState::Waiting, 11)).await.unwrap();
    let waiting: Vec<RunId> = journal
        .waiting_runs()
        .await
        .unwrap()
        .into_iter()
        .map(|r| r.id)
        .collect();
    assert_eq!(
        waiting,
        std::slice::from_ref(&run),
        "a waiting run is listed"
    );
    journal.submit(set(RunState::Running, 12));
    journal.commit(set(RunState::Completed, 20)).await.unwrap();
    let done = journal.run(&run).await.unwrap().unwrap();
    assert_eq!(done.state, RunState::Completed);
    assert_eq!((done.started_at, done.ended_at), (Some(10), Some(20)));
    assert_eq!(done.stop_reason, Some(StopReason::EndTurn));
    assert_eq!((done.usage.input_tokens, done.usage.output_tokens), (7, 3));
    let later = RunId::generate();
    journal
        .commit(Write::InsertRun {
            id: later.clone(),
            session_id: session.clone(),
            at: 30,
        })
        .await
        .unwrap();
    let runs = journal.runs(&session).await.unwrap();
    assert_eq!(
        runs.iter().map(|r| r.id.clone()).collect::<Vec<_>>(),
        [run, later]
    );
    assert!(journal.waiting_runs().await.unwrap().is_empty());
    assert_eq!(
        journal.session(&session).await.unwrap().unwrap().updated_at,
        30
    );
}

/// Trusted project directories are kept once each, in the order trusted,
/// until trust is withdrawn.
pub async fn trust_is_kept_per_project_directory(backend: &Backend) {
    let journal = backend.journal.as_ref();
    let root = |name: &str| std::path::PathBuf::from(format!("/work/{name}"));
    let file = |digest: &str| crate::core::hooks::TrustedFile {
        path: ".claude/settings.json".into(),
        digest: Some(digest.into()),
        hooks: vec!["PreToolUse [Bash] ./check.sh".into()],
    };
    for (name, trusted, at, digest) in [
        ("a", true, 1, "1"),
        ("b", true, 2, "2"),
        ("c", true, 3, "3"),
        ("a", true, 4, "4"),
        ("b", false, 5, ""),
    ] {
        journal.submit(Write::Trust(crate::core::hooks::TrustWrite::Set {
            root: root(name),
            trusted,
            at,
            files: if trusted {
                vec![file(digest)]
            } else {
                Vec::new()
            },
        }));
    }
    journal.flush().await.unwrap();
    // Trusting again records the files as seen then, and moves it last.
    let trusted = journal.trusted_roots().await.unwrap();
    assert_eq!(
        trusted
            .iter()
            .map(|t| (t.root.clone(), t.files.clone()))
            .collect::<Vec<_>>(),
        [(root("c"), vec![file("3")]), (root("a"), vec![file("4")])]
    );
}

/// A remembered answer replaces the one for the same tool and scope.
pub async fn grants_are_replaced_per_tool_and_scope(backend: &Backend) {
    let journal = backend.journal.as_ref();
    let (session, _) = session_with_run(journal, "ses_grants").await;
    let grant = |tool: &str, scope: &str, allow| Grant {
        tool: tool.into(),
        scope: scope.into(),
        allow,
    };
    for (g, at) in [
        (grant("shell", "cargo test", true), 1),
        (grant("write_file", "*", false), 2),
        (grant("shell", "cargo test", false), 3),
    ] {
        journal.submit(Write::PutGrant {
            session_id: session.clone(),
            grant: g,
            at,
        });
    }
    journal.flush().await.unwrap();
    assert_eq!(
        journal.grants(&session).await.unwrap(),
        [
            grant("write_file", "*", false),
            grant("shell", "cargo test", false)
        ]
    );
}

/// `pincer verify`'s count: runs with more tool results on the tape than
/// receipts.
pub async fn missing_receipts_are_counted(backend: &Backend) {
    let journal = backend.journal.as_ref();
    let (session, run) = session_with_run(journal, "ses_missing").await;
    let result = |seq| EventRecord {
        session_id: session.clone(),
        run_id: run.clone(),
        seq,
        at: 1,
        event: Event::ToolResult {
            id: format!("c{seq}"),
            output: "ok".into(),
            is_error: false,
            verdict: Verdict::Allowed,
            diffs: Vec::new(),
            safety: Vec::new(),
        },
    };
    journal.submit(Write::AppendEvent(result(0)));
    journal.submit(Write::AppendEvent(result(1)));
    journal.submit(Write::AppendReceipt(receipt(&session, &run, "c0")));
    journal.flush().await.unwrap();
    assert_eq!(
        backend.audit.missing_receipts().await.unwrap(),
        [(run.clone(), 2, 1)]
    );
    journal.submit(Write::AppendReceipt(receipt(&session, &run, "c1")));
    journal.flush().await.unwrap();
    assert!(backend.audit.missing_receipts().await.unwrap().is_empty());
}

/// A deleted session (and its subagents' sessions) is unknown to every read;
/// its conversation, grants and tapes are gone; its runs' summaries and
/// receipts stay, so the chain verifies and nothing is counted missing.
pub async fn a_deleted_session_keeps_its_runs_summaries_and_receipts_only(backend: &Backend) {
    let journal = backend.journal.as_ref();
    let (session, run) = session_with_run(journal, "ses_gone").await;
    let (kept, _) = session_with_run(journal, "ses_kept").await;
    let mut child = super::contract::session("ses_gone_child", "/ws", 3);
    child.parent = Some(crate::core::session::SessionParent {
        session: session.clone(),
        run: run.clone(),
        call: "c0".into(),
    });
    journal.submit(Write::InsertSession(child.clone()));
    journal.submit(Write::AppendEvent(event(&session, &run, 0, "secret words")));
    journal.submit(Write::AppendMessage {
        session_id: session.clone(),
        run_id: Some(run.clone()),
        message: Message::Note {
            text: "secret words".into(),
        },
        at: 3,
    });
    journal.submit(Write::AppendReceipt(receipt(&session, &run, "c0")));
    journal
        .commit(Write::DeleteSession {
            id: session.clone(),
            at: 9,
        })
        .await
        .unwrap();
    assert_eq!(journal.session(&session).await.unwrap(), None);
    assert_eq!(journal.session(&child.id).await.unwrap(), None);
    let listed: Vec<SessionId> = journal
        .sessions(SessionQuery::default())
        .await
        .unwrap()
        .into_iter()
        .map(|s| s.id)
        .collect();
    assert_eq!(listed, [kept]);
    assert!(journal.history(&session).await.unwrap().is_empty());
    assert!(journal.tape(&run, 0, None).await.unwrap().is_empty());
    assert!(journal.run(&run).await.unwrap().is_some());
    assert_eq!(backend.audit.run_receipts(&run).await.unwrap().len(), 1);
    assert!(backend.audit.missing_receipts().await.unwrap().is_empty());
}

/// Rule 7: once stopped, commits and flushes fail as `Stopped`, and what was
/// committed before stays readable.
pub async fn a_stopped_journal_refuses_commits(backend: &Backend) {
    let journal = backend.journal.as_ref();
    let (session, _) = session_with_run(journal, "ses_stop").await;
    (backend.stop)();
    let commit = journal
        .commit(Write::SetTitle {
            id: session.clone(),
            title: "late".into(),
        })
        .await;
    assert!(
        matches!(commit, Err(JournalError::Stopped)),
        "commit after stop: {commit:?}"
    );
    assert!(matches!(journal.flush().await, Err(JournalError::Stopped)));
    let stored = journal.session(&session).await.unwrap().unwrap();
    assert_eq!(stored.title, None);
}

/// Rule 2 across processes: what a commit acknowledged is there after the
/// backend is stopped and opened again.
pub async fn committed_writes_survive_a_reopen(
    place: &std::path::Path,
    open: &dyn Fn(&std::path::Path) -> Backend,
) {
    let first = open(place);
    let (session, run) = session_with_run(first.journal.as_ref(), "ses_durable").await;
    for seq in 0..3 {
        first
            .journal
            .submit(Write::AppendEvent(event(&session, &run, seq, "d")));
    }
    first
        .journal
        .submit(Write::AppendReceipt(receipt(&session, &run, "c")));
    // Ended, so a backend's recovery of interrupted runs leaves it alone.
    first
        .journal
        .commit(Write::SetRunState {
            id: run.clone(),
            state: RunState::Completed,
            stop_reason: Some(StopReason::EndTurn),
            error: None,
            usage: Usage::default(),
            cost: None,
            at: 9,
        })
        .await
        .unwrap();
    (first.stop)();
    drop(first);
    let second = open(place);
    assert_eq!(second.journal.tape(&run, 0, None).await.unwrap().len(), 3);
    let ended = second.journal.run(&run).await.unwrap().unwrap();
    assert_eq!(ended.state, RunState::Completed);
    assert_eq!(second.audit.receipts(1, 10).await.unwrap().len(), 1);
    assert!(second.journal.session(&session).await.unwrap().is_some());
    (second.stop)();
}

/// Lease rule 5 (`core::lease`): a fenced write applies only while its
/// token is the session's current one; a refused write changes nothing,
/// even inside `Together`.
pub async fn fenced_writes_apply_only_under_the_current_lease(backend: &Backend) {
    let journal = backend.journal.as_ref();
    let (session, _run) = session_with_run(journal, "ses_fenced").await;
    let a = backend
        .leases
        .claim(&(&session).into(), "a", 1_000, 100)
        .await
        .unwrap();
    let title = |title: &str| Write::SetTitle {
        id: session.clone(),
        title: title.into(),
    };
    let fenced = |fence: &crate::core::lease::Fence, write: Write| Write::Fenced {
        fence: fence.clone(),
        write: Box::new(write),
    };
    journal
        .commit(fenced(&a.fence(), title("by a")))
        .await
        .unwrap();
    // a's lease lapses; b takes the session.
    let b = backend
        .leases
        .claim(&(&session).into(), "b", 2_000, 100)
        .await
        .unwrap();
    let refused = journal.commit(fenced(&a.fence(), title("late a"))).await;
    assert!(
        matches!(refused, Err(JournalError::Fenced(_))),
        "{refused:?}"
    );
    let together = journal
        .commit(Write::Together(vec![
            title("together"),
            fenced(&a.fence(), title("late a again")),
        ]))
        .await;
    assert!(
        matches!(together, Err(JournalError::Fenced(_))),
        "{together:?}"
    );
    let shown = journal.session(&session).await.unwrap().unwrap();
    assert_eq!(shown.title.as_deref(), Some("by a"));
    journal
        .commit(fenced(&b.fence(), title("by b")))
        .await
        .unwrap();
    // A released lease keeps its token: b's writes still apply, a's not.
    backend.leases.release(&b).await.unwrap();
    journal
        .commit(fenced(&b.fence(), title("b after release")))
        .await
        .unwrap();
    assert!(matches!(
        journal.commit(fenced(&a.fence(), title("a"))).await,
        Err(JournalError::Fenced(_))
    ));
    // A session that never had a lease admits no fenced write.
    let (other, _) = session_with_run(journal, "ses_unleased").await;
    let stray = crate::core::lease::Fence {
        key: (&other).into(),
        token: 1,
    };
    assert!(matches!(
        journal.commit(fenced(&stray, title("stray"))).await,
        Err(JournalError::Fenced(_))
    ));
    let shown = journal.session(&session).await.unwrap().unwrap();
    assert_eq!(shown.title.as_deref(), Some("b after release"));
}

/// `InterruptRuns` ends the session's running and waiting runs as failed
/// with its error, each with one last state event, keeping the partial turn
/// a run streamed; other runs and sessions are untouched; a second time
/// finds nothing to do.
pub async fn interrupting_runs_ends_each_working_one_once(backend: &Backend) {
    let journal = backend.journal.as_ref();
    let (session, working) = session_with_run(journal, "ses_interrupt").await;
    let queued = RunId::generate();
    let (other_session, other_run) = session_with_run(journal, "ses_untouched").await;
    journal.submit(Write::InsertRun {
        id: queued.clone(),
        session_id: session.clone(),
        at: 3,
    });
    for run in [&working, &other_run] {
        journal.submit(Write::SetRunState {
            id: run.clone(),
            state: RunState::Running,
            stop_reason: None,
            error: None,
            usage: Usage::default(),
            cost: None,
            at: 4,
        });
    }
    journal.submit(Write::AppendMessage {
        session_id: session.clone(),
        run_id: Some(working.clone()),
        message: Message::User {
            content: vec![crate::core::session::ContentPart::Text { text: "go".into() }],
        },
        at: 4,
    });
    journal.submit(Write::AppendEvent(EventRecord {
        session_id: session.clone(),
        run_id: working.clone(),
        seq: 0,
        at: 5,
        event: Event::ModelTurn {
            index: 0,
            provider: "p".into(),
            model: "m".into(),
        },
    }));
    journal.submit(Write::AppendEvent(event(
        &session,
        &working,
        1,
        "half a rep",
    )));
    let interrupt = Write::InterruptRuns {
        session: session.clone(),
        error: "interrupted: gone".into(),
        at: 9,
    };
    journal.commit(interrupt.clone()).await.unwrap();
    journal.commit(interrupt).await.unwrap();
    let run = journal.run(&working).await.unwrap().unwrap();
    assert_eq!(run.state, RunState::Failed);
    assert_eq!(run.error.as_deref(), Some("interrupted: gone"));
    let tape = journal.tape(&working, 0, None).await.unwrap();
    let ends = tape
        .iter()
        .filter(|r| {
            matches!(
                r.event,
                Event::State {
                    state: RunState::Failed,
                    ..
                }
            )
        })
        .count();
    assert_eq!(ends, 1, "{tape:?}");
    assert_eq!(tape.last().unwrap().seq, 2);
    let history = journal.history(&session).await.unwrap();
    let last = &history.last().unwrap().message;
    let Message::Assistant {
        text, interrupted, ..
    } = last
    else {
        panic!("{last:?}");
    };
    assert_eq!((text.as_str(), *interrupted), ("half a rep", true));
    assert_eq!(
        journal.run(&queued).await.unwrap().unwrap().state,
        RunState::Queued
    );
    assert_eq!(
        journal.run(&other_run).await.unwrap().unwrap().state,
        RunState::Running
    );
    let _ = other_session;
}

/// Schedules are kept until removed; an occurrence's fire is recorded once
/// (a second record is a conflict, so one process of several fires it);
/// the latest occurrence fired by the time leaves `run-now` fires out; a
/// removed schedule takes its fires with it.
pub async fn each_occurrence_of_a_schedule_is_recorded_once(backend: &Backend) {
    use crate::core::schedule::{Fire, FireState, Place, Schedule, ScheduleWrite, When};
    let book = backend.schedules.as_ref();
    let schedule = |id: &str, at: i64| Schedule {
        id: id.into(),
        when: When::Cron {
            expr: "0 9 * * *".into(),
        },
        tz: "UTC".into(),
        prompt: "p".into(),
        place: Place::Workspace("/ws".into()),
        deliver: None,
        catch_up_ms: 1,
        created_at: at,
        origin: "cli".into(),
    };
    let fire = |id: &str, occurrence: i64, manual: bool| Fire {
        schedule_id: id.into(),
        occurrence,
        state: FireState::Claimed,
        run_id: None,
        session_id: None,
        intent_id: None,
        note: None,
        by: "p1".into(),
        manual,
        created_at: occurrence,
        updated_at: occurrence,
    };
    let put = |s: Schedule| Write::Schedule(ScheduleWrite::Put(s));
    let claim = |f: Fire| Write::Schedule(ScheduleWrite::Claim(f));
    book.commit(put(schedule("b", 2))).await.unwrap();
    book.commit(put(schedule("a", 1))).await.unwrap();
    assert!(matches!(
        book.commit(put(schedule("a", 3))).await,
        Err(JournalError::Conflict(_))
    ));
    let ids: Vec<String> = book
        .schedules()
        .await
        .unwrap()
        .into_iter()
        .map(|s| s.id)
        .collect();
    assert_eq!(ids, ["a", "b"]);

    book.commit(claim(fire("a", 100, false))).await.unwrap();
    assert!(matches!(
        book.commit(claim(fire("a", 100, false))).await,
        Err(JournalError::Conflict(_))
    ));
    book.commit(claim(fire("a", 200, false))).await.unwrap();
    book.commit(claim(fire("a", 300, true))).await.unwrap();
    book.commit(claim(fire("b", 150, false))).await.unwrap();
    let mut last = book.last_fired().await.unwrap();
    last.sort();
    assert_eq!(last, [("a".to_owned(), 200), ("b".to_owned(), 150)]);

    let mut done = fire("a", 200, false);
    done.state = FireState::Done;
    done.note = Some("ok".into());
    book.commit(Write::Schedule(ScheduleWrite::Settle(done.clone())))
        .await
        .unwrap();
    let fires = book.fires(Some("a"), 10).await.unwrap();
    assert_eq!(
        fires
            .iter()
            .map(|f| (f.occurrence, f.state))
            .collect::<Vec<_>>(),
        [
            (300, FireState::Claimed),
            (200, FireState::Done),
            (100, FireState::Claimed)
        ]
    );
    assert_eq!(fires[1], done);
    assert_eq!(book.fires(None, 2).await.unwrap().len(), 2);
    let open: Vec<(String, i64)> = book
        .open_fires()
        .await
        .unwrap()
        .into_iter()
        .map(|f| (f.schedule_id, f.occurrence))
        .collect();
    assert_eq!(
        open,
        [
            ("a".to_owned(), 100),
            ("b".to_owned(), 150),
            ("a".to_owned(), 300)
        ]
    );

    book.commit(Write::Schedule(ScheduleWrite::Remove { id: "a".into() }))
        .await
        .unwrap();
    assert!(matches!(
        book.commit(Write::Schedule(ScheduleWrite::Remove { id: "a".into() }))
            .await,
        Err(JournalError::Conflict(_))
    ));
    assert!(book.fires(Some("a"), 10).await.unwrap().is_empty());
    assert_eq!(book.schedules().await.unwrap().len(), 1);
    // Its id is free again, with no fires of the old one.
    book.commit(put(schedule("a", 4))).await.unwrap();
    book.commit(claim(fire("a", 100, false))).await.unwrap();
}

/// A run as `a_window_of_runs_is_summed_across_sessions` writes it:
/// session, created, started, (ended, end state), tokens in and out, cost.
type RunSketch<'a> = (
    &'a SessionId,
    i64,
    Option<i64>,
    Option<(i64, RunState)>,
    (u64, u64),
    Option<(f64, &'a str)>,
);

/// The runs of a window of time are summed across sessions: counted by
/// state, their tokens and costs (per currency) added up, the durations of
/// those that ended ranked (nearest rank), and counted per bucket; a run
/// created before the window is left out, even one that ended inside it.
pub async fn a_window_of_runs_is_summed_across_sessions(backend: &Backend) {
    use crate::core::usage::Cost;
    let journal = backend.journal.as_ref();
    let (since, bucket) = (1_000_000, 300_000);
    let (a, b) = (
        session("ses_win_a", "/ws", 1),
        session("ses_win_b", "/ws", 1),
    );
    journal.submit(Write::InsertSession(a.clone()));
    journal.submit(Write::InsertSession(b.clone()));
    // (session, created, started, ended, end state, tokens in/out, cost)
    let runs: [RunSketch; 6] = [
        (
            &a.id,
            since - 1,
            Some(since - 1),
            Some((since + 50, RunState::Completed)),
            (1000, 1000),
            Some((9.0, "USD")),
        ),
        (
            &a.id,
            since,
            Some(since + 10),
            Some((since + 110, RunState::Completed)),
            (10, 5),
            Some((0.5, "USD")),
        ),
        (
            &b.id,
            since + 5,
            None,
            Some((since + 6, RunState::Cancelled)),
            (0, 0),
            None,
        ),
        (
            &a.id,
            since + 300_000,
            Some(since + 300_010),
            Some((since + 300_310, RunState::Failed)),
            (1, 0),
            Some((1.0, "EUR")),
        ),
        (
            &b.id,
            since + 300_001,
            Some(since + 300_100),
            Some((since + 300_120, RunState::Completed)),
            (4, 6),
            Some((0.25, "USD")),
        ),
        (&b.id, since + 900_000, None, None, (0, 0), None),
    ];
    for (session, created, started, ended, (input, output), cost) in runs {
        let id = RunId::generate();
        journal.submit(Write::InsertRun {
            id: id.clone(),
            session_id: session.clone(),
            at: created,
        });
        let usage = Usage {
            input_tokens: input,
            output_tokens: output,
            ..Usage::default()
        };
        let set = |state: RunState, at| Write::SetRunState {
            id: id.clone(),
            state,
            stop_reason: (state == RunState::Completed).then_some(StopReason::EndTurn),
            error: (state == RunState::Failed).then(|| "boom".to_owned()),
            usage,
            cost: cost
                .filter(|_| state.is_terminal())
                .map(|(amount, currency)| Cost {
                    amount,
                    currency: currency.into(),
                }),
            at,
        };
        if let Some(at) = started {
            journal.submit(set(RunState::Running, at));
        }
        if let Some((at, state)) = ended {
            journal.submit(set(state, at));
        }
    }
    journal.flush().await.unwrap();
    let window = backend.counts.run_window(since, bucket).await.unwrap();
    assert_eq!(
        window.by_state,
        [
            (RunState::Cancelled, 1),
            (RunState::Completed, 2),
            (RunState::Failed, 1),
            (RunState::Queued, 1),
        ],
        "by state, the run created before the window left out"
    );
    assert_eq!((window.input_tokens, window.output_tokens), (15, 11));
    assert_eq!(
        window.cost,
        [
            Cost {
                amount: 1.0,
                currency: "EUR".into()
            },
            Cost {
                amount: 0.75,
                currency: "USD".into()
            },
        ]
    );
    assert_eq!(
        window.ended, 3,
        "a run cancelled before it started has no duration"
    );
    assert_eq!((window.p50_ms, window.p95_ms), (Some(100), Some(300)));
    let buckets: Vec<(u64, u64, u64)> = window
        .buckets
        .iter()
        .map(|b| (b.index, b.runs, b.failed))
        .collect();
    assert_eq!(buckets, [(0, 2, 0), (1, 2, 1), (3, 1, 0)]);
    let empty = backend
        .counts
        .run_window(since + 1_000_000, bucket)
        .await
        .unwrap();
    assert_eq!(empty, super::RunWindow::default(), "a window with no runs");
}
