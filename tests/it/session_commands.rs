//! `/compact` and `/undo` through the core's API (`Runtime::command_as`), with
//! the scripted model, the real file tools and a store in a fresh directory,
//! built as `pincer` builds them; `pincer verify` checks the receipts after.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, Mutex};

use futures::future::BoxFuture;

use pincer::core::event::{Event, EventRecord, StopReason};
use pincer::core::gate::ToolGate;
use pincer::core::ids::{RunId, SessionId};
use pincer::core::provider::{ModelRequest, Provider, ProviderEntry, ProviderStream, Providers};
use pincer::core::run::RunOutcome;
use pincer::core::runtime::{NewSession, Runtime, RuntimeConfig, SessionCommand};
use pincer::core::session::{ContentPart, Message, Mode, Origin};
use pincer::core::tool::{ClientFiles, Toolset};
use pincer::providers::scripted::ScriptedProvider;
use pincer::store::Store;

/// The scripted model, recording every request it is sent.
struct Recording {
    inner: ScriptedProvider,
    requests: Arc<Mutex<Vec<ModelRequest>>>,
}

impl Provider for Recording {
    fn name(&self) -> &str {
        self.inner.name()
    }

    fn stream(&self, request: ModelRequest) -> ProviderStream {
        self.requests.lock().unwrap().push(request.clone());
        self.inner.stream(request)
    }
}

struct Setup {
    _dir: tempfile::TempDir,
    data: PathBuf,
    workspace: PathBuf,
    runtime: Runtime,
    store: Store,
    session: SessionId,
    requests: Arc<Mutex<Vec<ModelRequest>>>,
}

impl Setup {
    async fn new(script: &str) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        let data = root.join("data");
        let workspace = root.join("work");
        std::fs::create_dir_all(&data).unwrap();
        std::fs::create_dir_all(&workspace).unwrap();
        let script_path = root.join("script.jsonl");
        std::fs::write(&script_path, script).unwrap();
        let requests = Arc::new(Mutex::new(Vec::new()));
        let provider = Recording {
            inner: ScriptedProvider::load("scripted", &script_path).unwrap(),
            requests: requests.clone(),
        };
        let providers = Providers::new(
            vec![ProviderEntry {
                name: "scripted".into(),
                models: vec!["script".into()],
                provider: Arc::new(provider),
                images: Some(false),
                thought: Default::default(),
                window: None,
            }],
            None,
        );
        let mut gate = ToolGate::without_tools();
        gate.tools = Toolset::new(pincer::tools::files::tools(Default::default()));
        let (store, _) = Store::open(&data.join("pincer.db")).unwrap();
        let runtime = Runtime::new(
            Arc::new(store.clone()),
            providers,
            Arc::new(gate),
            RuntimeConfig {
                default_mode: Mode::Full,
                ..RuntimeConfig::default()
            },
        );
        let session = runtime
            .create_session(NewSession {
                workspace: workspace.clone(),
                origin: Origin::Headless,
                mcp_servers: serde_json::json!([]),
                conversation: None,
                prompt: Default::default(),
            })
            .await
            .unwrap()
            .id;
        Self {
            _dir: dir,
            data,
            workspace,
            runtime,
            store,
            session,
            requests,
        }
    }

    async fn prompt(&self, text: &str) -> RunId {
        let ticket = self
            .runtime
            .prompt(&self.session, vec![ContentPart::Text { text: text.into() }])
            .await
            .unwrap();
        assert_eq!(
            ticket.done.await.unwrap(),
            RunOutcome::Completed(StopReason::EndTurn)
        );
        ticket.run_id
    }

    /// Runs a command; its outcome and the text it streamed.
    async fn command(&self, command: SessionCommand) -> (RunOutcome, String, Vec<EventRecord>) {
        let ticket = self
            .runtime
            .command_as(&self.session, RunId::generate(), command)
            .await
            .unwrap();
        let outcome = ticket.done.await.unwrap();
        let tape = self.runtime.tape(&ticket.run_id, 0).await.unwrap();
        (outcome, said(&tape), tape)
    }

    fn requests(&self) -> Vec<ModelRequest> {
        self.requests.lock().unwrap().clone()
    }

    fn file(&self, name: &str) -> Option<String> {
        std::fs::read_to_string(self.workspace.join(name)).ok()
    }

    fn write(&self, name: &str, text: &str) {
        std::fs::write(self.workspace.join(name), text).unwrap();
    }

    /// Stops the runtime and runs `pincer verify` on its database.
    async fn verify(self) -> String {
        self.runtime.shutdown().await;
        self.store.shutdown();
        let out = Command::new(env!("CARGO_BIN_EXE_pincer"))
            .arg("verify")
            .env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("HOME", self.data.join("home"))
            .env("XDG_CONFIG_HOME", self.data.join("config"))
            .env("PINCER_DATA_DIR", &self.data)
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        assert!(
            out.status.success(),
            "pincer verify failed: {stdout}{}",
            String::from_utf8_lossy(&out.stderr)
        );
        stdout
    }
}

fn said(tape: &[EventRecord]) -> String {
    tape.iter()
        .filter_map(|r| {
            let Event::TextDelta { text } = &r.event else {
                return None;
            };
            Some(text.as_str())
        })
        .collect()
}

fn user(text: &str) -> Message {
    Message::User {
        content: vec![ContentPart::Text { text: text.into() }],
    }
}

fn texts(messages: &[Message]) -> Vec<String> {
    messages
        .iter()
        .map(|m| match m {
            Message::User { content } => format!(
                "user: {}",
                content
                    .iter()
                    .map(ContentPart::to_model_text)
                    .collect::<String>()
            ),
            Message::Assistant { text, .. } => format!("assistant: {text}"),
            Message::Tool { content, .. } => format!("tool: {content}"),
            Message::Summary { text, turns } => format!("summary of {turns} turns: {text}"),
            Message::Note { text } => format!("note: {text}"),
        })
        .collect()
}

const SUMMARY: &str = "Goals: greet the user. Files: none.";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_compact_the_model_is_sent_the_summary_and_only_what_came_after() {
    let script = format!(
        "[{{\"text\":\"Hello there\"}}]\n\
         [{{\"text\":\"{SUMMARY}\"}},{{\"usage\":{{\"input_tokens\":40,\"output_tokens\":9}}}}]\n\
         [{{\"text\":\"Still here\"}}]\n"
    );
    let s = Setup::new(&script).await;

    // Nothing said yet: nothing to compact, and the model is not called.
    let (outcome, text, _) = s.command(SessionCommand::Compact).await;
    assert_eq!(outcome, RunOutcome::Completed(StopReason::EndTurn));
    assert_eq!(text, "Nothing to compact: the conversation is empty.");
    assert!(s.requests().is_empty());

    s.prompt("first question").await;
    let (outcome, text, tape) = s.command(SessionCommand::Compact).await;
    assert_eq!(outcome, RunOutcome::Completed(StopReason::EndTurn));
    assert!(text.starts_with(SUMMARY), "{text}");
    assert!(text.contains("[Compacted 2 earlier messages"), "{text}");
    // The run shows its command as its prompt, and its usage like any turn.
    assert!(tape.iter().any(|r| matches!(&r.event,
        Event::UserMessage { content } if *content == SessionCommand::Compact.content())));
    assert!(tape.iter().any(|r| matches!(&r.event,
        Event::Usage { usage, .. } if usage.output_tokens == 9)));
    let run = s.runtime.run(&tape[0].run_id).await.unwrap();
    assert_eq!(run.usage.input_tokens, 40);

    // The summary turn saw the whole conversation and the instruction, no tools.
    let summarize = s.requests()[1].clone();
    assert!(summarize.tools.is_empty());
    let sent = texts(&summarize.messages);
    assert_eq!(
        sent[..2],
        ["user: first question", "assistant: Hello there"]
    );
    assert!(sent[2].contains("Keep identifiers exactly"), "{}", sent[2]);

    // The next turn is sent the summary and the new prompt only, and the
    // scripted model plays its third line: the count of turns went on.
    s.prompt("second question").await;
    let next = s.requests()[2].clone();
    assert_eq!(
        next.messages,
        vec![
            Message::Summary {
                text: SUMMARY.into(),
                turns: 2
            },
            user("second question")
        ]
    );
    // The stored history keeps everything, the command included.
    let history: Vec<Message> = s
        .runtime
        .history(&s.session)
        .await
        .unwrap()
        .into_iter()
        .map(|e| e.message)
        .collect();
    assert_eq!(
        texts(&history),
        [
            "user: first question",
            "assistant: Hello there",
            "user: /compact",
            format!("summary of 2 turns: {SUMMARY}").as_str(),
            "user: second question",
            "assistant: Still here",
        ]
    );
    s.verify().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn compact_right_after_compact_has_nothing_to_do() {
    let s = Setup::new(&format!(
        "[{{\"text\":\"Hi\"}}]\n[{{\"text\":\"{SUMMARY}\"}}]\n"
    ))
    .await;
    s.prompt("hello").await;
    let (outcome, _, _) = s.command(SessionCommand::Compact).await;
    assert_eq!(outcome, RunOutcome::Completed(StopReason::EndTurn));
    let (outcome, text, _) = s.command(SessionCommand::Compact).await;
    assert_eq!(outcome, RunOutcome::Completed(StopReason::EndTurn));
    assert_eq!(
        text,
        "Nothing to compact: nothing was said since the last summary."
    );
    assert_eq!(s.requests().len(), 2);
    s.verify().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_summary_leaves_the_conversation_as_it_was() {
    let s = Setup::new(
        "[{\"text\":\"Hi\"}]\n\
         [{\"text\":\"partial\"},{\"error\":{\"kind\":\"server\",\"message\":\"boom\"}}]\n",
    )
    .await;
    s.prompt("hello").await;
    let (outcome, _, _) = s.command(SessionCommand::Compact).await;
    assert!(
        matches!(&outcome, RunOutcome::Failed(message) if message.contains("boom")),
        "{outcome:?}"
    );
    let history = s.runtime.history(&s.session).await.unwrap();
    assert_eq!(history.len(), 2, "no summary, no command in the history");
    s.verify().await;
}

fn write_file(path: &str, content: &str) -> String {
    serde_json::json!({"tool_call": {"name": "write_file", "arguments": {"path": path, "content": content}}})
        .to_string()
}

fn edit_file(path: &str, old: &str, new: &str) -> String {
    serde_json::json!({"tool_call": {"name": "edit_file", "arguments": {"path": path, "edits": [{"old_text": old, "new_text": new}]}}})
        .to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn undo_reverts_run_by_run_and_leaves_files_changed_since() {
    let script = [
        // Run 1: changes b.txt and d.txt.
        format!(
            "[{},{}]",
            write_file("b.txt", "b from run 1\n"),
            edit_file("d.txt", "original d", "d from run 1")
        ),
        "[{\"text\":\"done 1\"}]".to_owned(),
        // Run 2: edits a.txt, creates new.txt, rewrites b.txt twice.
        format!(
            "[{},{},{}]",
            edit_file("a.txt", "original a", "a from run 2"),
            write_file("sub/new.txt", "created\n"),
            write_file("b.txt", "b from run 2\n"),
        ),
        format!("[{}]", edit_file("b.txt", "from run 2", "again from run 2")),
        "[{\"text\":\"done 2\"}]".to_owned(),
        "[{\"text\":\"noted\"}]".to_owned(),
    ]
    .join("\n");
    let s = Setup::new(&script).await;
    s.write("a.txt", "original a\n");
    s.write("b.txt", "original b\n");
    s.write("d.txt", "original d\n");

    let run1 = s.prompt("change b and d").await;
    let run2 = s.prompt("change a, b, make new").await;
    assert_eq!(s.file("b.txt").as_deref(), Some("b again from run 2\n"));
    assert_eq!(s.file("sub/new.txt").as_deref(), Some("created\n"));

    // First undo: run 2, exactly, the created file deleted.
    let (outcome, text, tape) = s.command(SessionCommand::Undo).await;
    assert_eq!(outcome, RunOutcome::Completed(StopReason::EndTurn));
    assert_eq!(s.file("a.txt").as_deref(), Some("original a\n"));
    assert_eq!(s.file("b.txt").as_deref(), Some("b from run 1\n"));
    assert_eq!(s.file("sub/new.txt"), None);
    assert_eq!(
        text,
        format!("Reverted 3 files from run {run2}: b.txt, sub/new.txt, a.txt.")
    );
    // Each file is an `undo` edit call: call, plan (diffs swapped), start, result.
    let calls: Vec<&EventRecord> = tape
        .iter()
        .filter(|r| matches!(&r.event, Event::ToolCall { name, .. } if name == "undo"))
        .collect();
    assert_eq!(calls.len(), 3);
    for kind in ["tool_planned", "tool_started", "tool_result"] {
        assert_eq!(
            tape.iter().filter(|r| r.event.kind() == kind).count(),
            3,
            "{kind}"
        );
    }
    let planned = tape
        .iter()
        .find_map(|r| {
            let Event::ToolPlanned { diffs, .. } = &r.event else {
                return None;
            };
            diffs[0].path.ends_with("a.txt").then(|| diffs[0].clone())
        })
        .unwrap();
    assert_eq!(planned.old_text.as_deref(), Some("a from run 2\n"));
    assert_eq!(planned.new_text, "original a\n");

    // A hand edit of b.txt, then the second undo goes back to run 1: d.txt
    // is restored, b.txt (changed since) is left alone.
    s.write("b.txt", "edited by hand\n");
    let (outcome, text, _) = s.command(SessionCommand::Undo).await;
    assert_eq!(outcome, RunOutcome::Completed(StopReason::EndTurn));
    assert_eq!(s.file("d.txt").as_deref(), Some("original d\n"));
    assert_eq!(s.file("b.txt").as_deref(), Some("edited by hand\n"));
    assert_eq!(
        text,
        format!("Reverted 1 file from run {run1}: d.txt; left b.txt as it is (it changed since).")
    );

    // Everything is undone now.
    let (outcome, text, _) = s.command(SessionCommand::Undo).await;
    assert_eq!(outcome, RunOutcome::Completed(StopReason::EndTurn));
    assert!(text.starts_with("Nothing to undo"), "{text}");

    // The model learns what happened, and the script goes on where it was.
    s.prompt("what now?").await;
    let last = s.requests().last().cloned().unwrap();
    let notes: Vec<String> = last
        .messages
        .iter()
        .filter_map(|m| {
            let Message::Note { text } = m else {
                return None;
            };
            Some(text.clone())
        })
        .collect();
    assert_eq!(notes.len(), 2);
    assert!(notes[1].contains("left b.txt as it is"), "{}", notes[1]);
    let history = s.runtime.history(&s.session).await.unwrap();
    assert!(matches!(&history.last().unwrap().message,
        Message::Assistant { text, .. } if text == "noted"));

    let verified = s.verify().await;
    // 6 edit calls of the model; 3 + 2 undo calls.
    assert!(verified.starts_with("ok: 11 receipts"), "{verified}");
}

/// Client file access that cancels the run at its first write: a cancel that
/// arrives while an undo is under way.
struct CancelOnWrite {
    runtime: Runtime,
    session: SessionId,
}

impl ClientFiles for CancelOnWrite {
    fn can_read(&self) -> bool {
        false
    }

    fn can_write(&self) -> bool {
        true
    }

    fn read_text(&self, _: &SessionId, _: &Path) -> BoxFuture<'static, Result<String, String>> {
        Box::pin(async { Err("reads are local".to_owned()) })
    }

    fn write_text(
        &self,
        _: &SessionId,
        path: &Path,
        content: String,
    ) -> BoxFuture<'static, Result<(), String>> {
        self.runtime.cancel(&self.session).unwrap();
        let path = path.to_path_buf();
        Box::pin(async move { std::fs::write(path, content).map_err(|e| e.to_string()) })
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancelled_undo_stops_between_files_and_the_next_one_finishes() {
    let script = [
        format!(
            "[{},{}]",
            write_file("x.txt", "x new\n"),
            write_file("y.txt", "y new\n")
        ),
        "[{\"text\":\"done\"}]".to_owned(),
    ]
    .join("\n");
    let s = Setup::new(&script).await;
    s.write("x.txt", "x old\n");
    s.write("y.txt", "y old\n");
    s.prompt("write both").await;
    s.runtime.set_client_files(
        &s.session,
        Some(Arc::new(CancelOnWrite {
            runtime: s.runtime.clone(),
            session: s.session.clone(),
        })),
    );
    let (outcome, text, tape) = s.command(SessionCommand::Undo).await;
    assert_eq!(outcome, RunOutcome::Cancelled);
    assert!(
        text.ends_with("Stopped early: the run was cancelled."),
        "{text}"
    );
    // One file was reverted, its call finished; the other was not started.
    assert_eq!(s.file("y.txt").as_deref(), Some("y old\n"));
    assert_eq!(s.file("x.txt").as_deref(), Some("x new\n"));
    assert_eq!(
        tape.iter()
            .filter(|r| r.event.kind() == "tool_call")
            .count(),
        1
    );
    assert_eq!(
        tape.iter()
            .filter(|r| r.event.kind() == "tool_result")
            .count(),
        1
    );

    s.runtime.set_client_files(&s.session, None);
    let (outcome, text, _) = s.command(SessionCommand::Undo).await;
    assert_eq!(outcome, RunOutcome::Completed(StopReason::EndTurn));
    assert!(text.contains(": x.txt."), "{text}");
    assert_eq!(s.file("x.txt").as_deref(), Some("x old\n"));
    s.verify().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancelled_compact_leaves_the_conversation_as_it_was() {
    let s =
        Setup::new("[{\"text\":\"Hi\"}]\n[{\"text\":\"Goals: \"},{\"delay_ms\":30000}]\n").await;
    s.prompt("hello").await;
    let mut events = s.runtime.subscribe(&s.session).unwrap();
    let ticket = s
        .runtime
        .command_as(&s.session, RunId::generate(), SessionCommand::Compact)
        .await
        .unwrap();
    // The summary is streaming: cancel it.
    loop {
        let record = events.next().await.unwrap();
        if record.run_id == ticket.run_id && matches!(record.event, Event::TextDelta { .. }) {
            break;
        }
    }
    assert!(s.runtime.cancel_run(&s.session, &ticket.run_id));
    let outcome = tokio::time::timeout(std::time::Duration::from_secs(5), ticket.done)
        .await
        .expect("the cancel ends the run at once")
        .unwrap();
    assert_eq!(outcome, RunOutcome::Cancelled);
    let history: Vec<Message> = s
        .runtime
        .history(&s.session)
        .await
        .unwrap()
        .into_iter()
        .map(|e| e.message)
        .collect();
    assert_eq!(texts(&history), ["user: hello", "assistant: Hi"]);
    s.verify().await;
}
