//! A session's cost as it grows: what a run reads of its session, past
//! compactions, is what follows the last compaction point; no run reads the
//! whole history or every run the session had, while a face that asks
//! still gets everything.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use futures::StreamExt;

use super::*;
use crate::core::event::StopReason;
use crate::core::journal::memory::MemoryJournal;
use crate::core::journal::{Reply, RunsFrom, RunsToFollow, SessionQuery};
use crate::core::provider::{
    ModelRequest, ModelStop, Provider, ProviderEntry, ProviderEvent, ProviderStream,
};
use crate::core::session::{HistoryEntry, Millis};

/// A memory journal that counts the reads whose length follows the whole
/// life of a session: its entire history, and the list of all its runs.
#[derive(Default)]
struct Counting {
    inner: MemoryJournal,
    whole_history: AtomicUsize,
    all_runs: AtomicUsize,
}

impl Journal for Counting {
    fn submit(&self, write: Write) {
        self.inner.submit(write);
    }
    fn commit(&self, write: Write) -> Reply<'_, ()> {
        self.inner.commit(write)
    }
    fn flush(&self) -> Reply<'_, ()> {
        self.inner.flush()
    }
    fn session<'a>(&'a self, id: &'a SessionId) -> Reply<'a, Option<Session>> {
        self.inner.session(id)
    }
    fn sessions(&self, query: SessionQuery) -> Reply<'_, Vec<Session>> {
        self.inner.sessions(query)
    }
    fn history<'a>(&'a self, id: &'a SessionId) -> Reply<'a, Vec<HistoryEntry>> {
        self.whole_history.fetch_add(1, Ordering::SeqCst);
        self.inner.history(id)
    }
    fn since_compaction<'a>(&'a self, id: &'a SessionId) -> Reply<'a, Vec<HistoryEntry>> {
        self.inner.since_compaction(id)
    }
    fn runs<'a>(&'a self, session: &'a SessionId) -> Reply<'a, Vec<RunInfo>> {
        self.all_runs.fetch_add(1, Ordering::SeqCst);
        self.inner.runs(session)
    }
    fn run<'a>(&'a self, id: &'a RunId) -> Reply<'a, Option<RunInfo>> {
        self.inner.run(id)
    }
    fn session_cost<'a>(
        &'a self,
        session: &'a SessionId,
        except: &'a RunId,
    ) -> Reply<'a, Option<Cost>> {
        self.inner.session_cost(session, except)
    }
    fn runs_to_follow<'a>(
        &'a self,
        session: &'a SessionId,
        from: RunsFrom,
    ) -> Reply<'a, RunsToFollow> {
        self.inner.runs_to_follow(session, from)
    }
    fn waiting_runs(&self) -> Reply<'_, Vec<RunInfo>> {
        self.inner.waiting_runs()
    }
    fn tape<'a>(
        &'a self,
        run: &'a RunId,
        from_seq: u64,
        limit: Option<usize>,
    ) -> Reply<'a, Vec<EventRecord>> {
        self.inner.tape(run, from_seq, limit)
    }
    fn grants<'a>(&'a self, session: &'a SessionId) -> Reply<'a, Vec<Grant>> {
        self.inner.grants(session)
    }
    fn spent<'a>(&'a self, provider: &'a str, since: Millis) -> Reply<'a, Vec<Cost>> {
        self.inner.spent(provider, since)
    }
    fn trusted_roots(&self) -> Reply<'_, Vec<crate::core::hooks::Trust>> {
        self.inner.trusted_roots()
    }
    fn skills_last_used(&self) -> Reply<'_, Vec<(String, crate::core::session::Millis)>> {
        self.inner.skills_last_used()
    }
    fn controls<'a>(
        &'a self,
        session: &'a SessionId,
    ) -> Reply<'a, Vec<(i64, crate::core::control::Control)>> {
        self.inner.controls(session)
    }
}

impl crate::core::notify::Notifier for Counting {
    fn watch(&self) -> tokio::sync::watch::Receiver<u64> {
        crate::core::notify::Notifier::watch(&self.inner)
    }
}

/// Answers every turn with `said N` and keeps what each turn was sent.
#[derive(Default)]
struct Recording {
    sent: Mutex<Vec<Vec<Message>>>,
}

impl Provider for Recording {
    fn name(&self) -> &str {
        "test"
    }

    fn stream(&self, request: ModelRequest) -> ProviderStream {
        let mut sent = self.sent.lock();
        sent.push(request.messages);
        let reply = format!("said {}", sent.len());
        futures::stream::iter([
            Ok(ProviderEvent::Text(reply)),
            Ok(ProviderEvent::Done(ModelStop::EndTurn)),
        ])
        .boxed()
    }
}

fn text(content: &str) -> Vec<ContentPart> {
    vec![ContentPart::Text {
        text: content.into(),
    }]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn runs_read_the_conversation_from_its_compaction_point_and_faces_get_all_of_it() {
    let dir = tempfile::tempdir().unwrap();
    let journal = Arc::new(Counting::default());
    let recording = Arc::new(Recording::default());
    let provider: Arc<dyn Provider> = recording.clone();
    let providers = Providers::new(
        vec![ProviderEntry {
            name: "test".into(),
            models: vec!["m".into()],
            provider,
            images: None,
            thought: Default::default(),
            window: None,
        }],
        None,
    );
    let rt = Runtime::from_parts(Parts {
        notifier: Some(journal.clone()),
        ..Parts::new(
            journal.clone(),
            providers,
            Arc::new(ToolGate::without_tools()),
            RuntimeConfig::default(),
        )
    });
    let session = rt
        .create_session(NewSession {
            workspace: dir.path().to_path_buf(),
            origin: Origin::Headless,
            mcp_servers: serde_json::json!([]),
            conversation: None,
            prompt: Default::default(),
        })
        .await
        .unwrap();
    // A face following the session, as an editor's does, other processes'
    // runs included.
    let mut events = rt.subscribe(&session.id).unwrap();
    let ends = Arc::new(AtomicUsize::new(0));
    let seen = ends.clone();
    let follower = tokio::spawn(async move {
        while let Some(record) = events.next().await {
            if record.event.terminal_state().is_some() {
                seen.fetch_add(1, Ordering::SeqCst);
            }
        }
    });
    let mut tickets = Vec::new();
    for round in 0..3 {
        for prompt in ["one", "two"] {
            let content = text(&format!("{prompt} of {round}"));
            tickets.push(rt.prompt(&session.id, content).await.unwrap());
        }
        let compact = rt.command_as(&session.id, RunId::generate(), SessionCommand::Compact);
        tickets.push(compact.await.unwrap());
    }
    tickets.push(rt.prompt(&session.id, text("last")).await.unwrap());
    let runs = tickets.len();
    for ticket in tickets {
        let outcome = ticket.done.await.unwrap();
        assert_eq!(outcome, RunOutcome::Completed(StopReason::EndTurn));
    }

    // The last turn was sent the newest summary and what followed it.
    let sent = recording.sent.lock().last().cloned().unwrap();
    assert!(
        matches!(&sent[..], [Message::Summary { text, .. }, Message::User { .. }] if text == "said 9"),
        "{sent:#?}"
    );
    // No run read the whole history or listed every run of the session:
    // neither did the face following it.
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while ends.load(Ordering::SeqCst) < runs && std::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(
        ends.load(Ordering::SeqCst),
        runs,
        "the face saw every run end"
    );
    assert_eq!(journal.whole_history.load(Ordering::SeqCst), 0);
    assert_eq!(journal.all_runs.load(Ordering::SeqCst), 0);
    // Asked, the history is whole: 3 × (two prompts and replies, the
    // command and its summary), then the last prompt and reply.
    let history = rt.history(&session.id).await.unwrap();
    assert_eq!(history.len(), 3 * 6 + 2);
    assert_eq!(
        history
            .iter()
            .filter(|entry| matches!(entry.message, Message::Summary { .. }))
            .count(),
        3
    );
    follower.abort();
}
