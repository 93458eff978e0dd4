//! The gate's paths, driven through `run_calls` with test tools, test hooks
//! and the in-memory journal: what each path emits and records (the tape,
//! the receipts, the history, the session's grants).

use parking_lot::Mutex;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use futures::future::BoxFuture;
use serde_json::{Value, json};
use tokio::sync::broadcast;
use tokio_util::sync::CancellationToken;

use super::*;
use crate::core::approval::ApprovalDecision;
use crate::core::boundary::PathBoundary;
use crate::core::event::{EventRecord, RunState};
use crate::core::hooks::{HookAnswer, HookEvent, HookInput, HookOutcome, Permission};
use crate::core::ids::{RunId, SessionId};
use crate::core::journal::memory::MemoryJournal;
use crate::core::journal::{Audit, Journal, Write};
use crate::core::question::{Question, QuestionAnswer};
use crate::core::receipt::{Receipt, json_hash, sha256_hex};
use crate::core::safety::SafetyConfig;
use crate::core::session::{Origin, Session};
use crate::core::tool::{Files, Progress, ProgressUpdate, ToolError, ToolSpec};

/// A test tool. `{"path": P}` (required) plans reading `P` in the
/// workspace (writing it, for a kind that changes things), asking the
/// person `ask` first when given; running it reports `progress` and
/// answers `done P` (with the person's answer, if any).
struct Probe {
    name: &'static str,
    kind: ToolKind,
    progress: Vec<ProgressUpdate>,
    ran: Arc<AtomicUsize>,
}

fn path_of(arguments: &Value) -> Result<&str, ToolError> {
    arguments
        .get("path")
        .and_then(Value::as_str)
        .ok_or_else(|| ToolError::InvalidArguments("`path` is required".into()))
}

impl Tool for Probe {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: self.name.to_owned(),
            description: String::new(),
            parameters: json!({"type": "object"}),
        }
    }

    fn kind(&self) -> ToolKind {
        self.kind
    }

    fn plan<'a>(
        &'a self,
        arguments: &'a Value,
        ctx: &'a ToolContext,
    ) -> BoxFuture<'a, Result<Plan, ToolError>> {
        Box::pin(async move {
            let raw = path_of(arguments)?;
            let path = ctx.path(raw)?;
            let mut plan = Plan {
                title: format!("{} {raw}", self.name),
                ..Plan::default()
            };
            if self.kind.is_read_only() {
                plan.reads.push(path);
            } else {
                plan.writes.push(path);
            }
            plan.question = arguments
                .get("ask")
                .and_then(Value::as_str)
                .map(|text| Question {
                    text: text.to_owned(),
                    options: Vec::new(),
                });
            Ok(plan)
        })
    }

    fn execute<'a>(
        &'a self,
        arguments: &'a Value,
        plan: &'a Plan,
        ctx: &'a ToolContext,
    ) -> BoxFuture<'a, Result<ToolOutput, ToolError>> {
        Box::pin(async move {
            self.ran.fetch_add(1, Ordering::SeqCst);
            for update in &self.progress {
                ctx.progress.report(update.clone());
                tokio::task::yield_now().await;
            }
            let mut text = format!("done {}", path_of(arguments)?);
            if let Some(answer) = plan.answer.as_ref().and_then(|a| a.answer.as_deref()) {
                text.push_str(&format!(", told {answer}"));
            }
            Ok(ToolOutput::text(text))
        })
    }
}

/// Hooks that answer every `PreToolUse` and `PostToolUse` as the test
/// says, and keep what they were shown.
#[derive(Default)]
struct Told {
    pre: Vec<HookAnswer>,
    post: Vec<HookAnswer>,
    shown: Mutex<Vec<HookInput>>,
}

impl Hooks for Told {
    fn listens(&self, event: HookEvent, _: Option<&str>) -> bool {
        matches!(event, HookEvent::PreToolUse | HookEvent::PostToolUse)
    }

    fn fire(&self, input: HookInput) -> BoxFuture<'_, HookOutcome> {
        let answers = if input.event == HookEvent::PreToolUse {
            self.pre.clone()
        } else {
            self.post.clone()
        };
        self.shown.lock().push(input);
        Box::pin(async move { HookOutcome { answers } })
    }
}

/// A `PreToolUse` hook's answer.
fn pre(answer: HookAnswer) -> Arc<Told> {
    Arc::new(Told {
        pre: vec![answer],
        ..Told::default()
    })
}

/// The answer of the hook `./check.sh`.
fn said() -> HookAnswer {
    HookAnswer {
        hook: "./check.sh".into(),
        ..HookAnswer::default()
    }
}

fn permission(permission: Permission, reason: Option<&str>) -> HookAnswer {
    HookAnswer {
        permission: Some(permission),
        reason: reason.map(str::to_owned),
        ..said()
    }
}

/// What a person does when asked.
#[derive(Debug, Clone)]
enum Person {
    Decides(ApprovalDecision),
    Answers(&'static str),
    /// Cancels the run instead of answering.
    Cancels,
}

/// One run's gate: tools `read_file` (read) and `write_file` (edit), the
/// default policy in `mode`, `hooks`, the in-memory journal.
struct Bench {
    journal: Arc<MemoryJournal>,
    events: broadcast::Sender<Arc<EventRecord>>,
    emitter: Emitter,
    env: CallEnv,
    session: SessionId,
    run: RunId,
    ran: Arc<AtomicUsize>,
    workspace: PathBuf,
    _dir: tempfile::TempDir,
}

impl Bench {
    fn new(mode: Mode, hooks: Arc<dyn Hooks>) -> Self {
        Self::with_progress(mode, hooks, Vec::new())
    }

    /// `read_file` reports `progress` as it runs.
    fn with_progress(mode: Mode, hooks: Arc<dyn Hooks>, progress: Vec<ProgressUpdate>) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let workspace = dir.path().canonicalize().unwrap();
        let journal = Arc::new(MemoryJournal::new());
        let session = SessionId::generate();
        let run = RunId::generate();
        journal.submit(Write::InsertSession(session_row(&session, &workspace)));
        journal.submit(Write::InsertRun {
            id: run.clone(),
            session_id: session.clone(),
            at: 0,
        });
        let (events, _) = broadcast::channel(1024);
        let shared: Arc<dyn Journal> = journal.clone();
        let mut emitter = Emitter::new(&shared, &events, &session, &run);
        emitter.enter(RunState::Running).unwrap();
        let ran = Arc::new(AtomicUsize::new(0));
        let probe = |name, kind, progress| -> Arc<dyn Tool> {
            Arc::new(Probe {
                name,
                kind,
                progress,
                ran: ran.clone(),
            })
        };
        let tools = Toolset::new(vec![
            probe("read_file", ToolKind::Read, progress),
            probe("write_file", ToolKind::Edit, Vec::new()),
        ]);
        let safety = Arc::new(Safety::new(SafetyConfig::default(), Vec::new()));
        let gate = ToolGate {
            tools: tools.clone(),
            rules: PolicyRules::default(),
            safety: safety.clone(),
            approval_timeout: None,
            question_timeout: None,
            hooks,
        };
        let boundary = PathBoundary::new(&workspace, &[], &[], None);
        let env = CallEnv {
            gate: Arc::new(gate),
            tools,
            mode,
            safety,
            ctx: ToolContext {
                session_id: session.clone(),
                workspace: workspace.clone(),
                boundary: Arc::new(boundary),
                files: Files::local(session.clone()),
                cancel: CancellationToken::new(),
                progress: Progress::none(),
                terminal: None,
                memory: None,
                call_id: None,
                run_id: Some(run.clone()),
                skills: None,
            },
            grants: Arc::default(),
            approvals: Arc::default(),
            questions: Arc::default(),
            answerers: Vec::new(),
            delegated: Arc::default(),
            budget_left: Arc::default(),
            only: None,
            subagents: None,
            guard: Arc::new(LoopGuard::new(3)),
            ended: Arc::default(),
        };
        Bench {
            journal,
            events,
            emitter,
            env,
            session,
            run,
            ran,
            workspace,
            _dir: dir,
        }
    }

    /// Runs `calls` as one model turn while a person does each of
    /// `person` in turn when asked; how it ended and the messages it added.
    async fn run(
        &mut self,
        calls: &[ToolCall],
        person: Vec<Person>,
    ) -> (Result<(), Interrupted>, Vec<Message>) {
        let answering = tokio::spawn(answer(
            self.events.subscribe(),
            self.env.approvals.clone(),
            self.env.questions.clone(),
            self.env.ctx.cancel.clone(),
            self.session.clone(),
            person,
        ));
        let mut history = Vec::new();
        let calls = run_calls(&self.env, &mut self.emitter, &mut history, calls);
        let ended = tokio::time::timeout(std::time::Duration::from_secs(20), calls)
            .await
            .expect("the calls ended");
        answering.abort();
        (ended, history)
    }

    async fn tape(&self) -> Vec<Event> {
        let tape = self.journal.tape(&self.run, 0, None).await.unwrap();
        tape.into_iter().map(|record| record.event).collect()
    }

    /// The tape's events, in short: their kind, and a state's state.
    async fn kinds(&self) -> Vec<String> {
        self.tape()
            .await
            .iter()
            .map(|event| {
                if let Event::State { state, .. } = event {
                    format!("state {}", state.as_str())
                } else {
                    event.kind().to_owned()
                }
            })
            .collect()
    }

    /// A call's result on the tape: its output, whether it is an error, its verdict.
    async fn result(&self, call: &str) -> (String, bool, Verdict) {
        self.tape()
            .await
            .into_iter()
            .find_map(|event| {
                let Event::ToolResult {
                    id,
                    output,
                    is_error,
                    verdict,
                    ..
                } = event
                else {
                    return None;
                };
                (id == call).then_some((output, is_error, verdict))
            })
            .unwrap_or_else(|| panic!("no result for {call}"))
    }

    async fn receipts(&self) -> Vec<Receipt> {
        Audit::receipts(&*self.journal, 0, 100).await.unwrap()
    }

    /// The messages the session's history holds.
    async fn history(&self) -> Vec<Message> {
        let entries = self.journal.history(&self.session).await.unwrap();
        entries.into_iter().map(|entry| entry.message).collect()
    }

    fn ran(&self) -> usize {
        self.ran.load(Ordering::SeqCst)
    }
}

fn session_row(id: &SessionId, workspace: &std::path::Path) -> Session {
    Session {
        id: id.clone(),
        workspace: workspace.to_path_buf(),
        origin: Origin::Headless,
        provider: "test".into(),
        model: "m".into(),
        thought_level: None,
        mode: Mode::Supervised,
        title: None,
        mcp_servers: json!([]),
        created_at: 0,
        updated_at: 0,
        closed: false,
        conversation: None,
        prompt: Default::default(),
        parent: None,
    }
}

/// Does what the person does whenever the run asks something.
async fn answer(
    mut events: broadcast::Receiver<Arc<EventRecord>>,
    approvals: Arc<PendingApprovals>,
    questions: Arc<PendingQuestions>,
    cancel: CancellationToken,
    session: SessionId,
    person: Vec<Person>,
) {
    let mut person = person.into_iter();
    while let Ok(record) = events.recv().await {
        let (Event::ApprovalRequested {
            approval_id: asked, ..
        }
        | Event::QuestionAsked {
            question_id: asked, ..
        }) = &record.event
        else {
            continue;
        };
        let answered = match person.next().expect("the person was asked once too often") {
            Person::Decides(decision) => approvals.answer(&session, asked, decision),
            Person::Answers(text) => {
                questions.answer(&session, asked, QuestionAnswer::answered(text))
            }
            Person::Cancels => {
                cancel.cancel();
                true
            }
        };
        assert!(answered, "{asked} was not waiting");
    }
}

fn call(id: &str, name: &str, arguments: Value) -> ToolCall {
    ToolCall {
        id: id.into(),
        name: name.into(),
        arguments,
    }
}

fn tool_message(call_id: &str, content: &str) -> Message {
    Message::Tool {
        call_id: call_id.into(),
        content: content.into(),
        is_error: false,
    }
}

fn error_message(call_id: &str, content: &str) -> Message {
    Message::Tool {
        call_id: call_id.into(),
        content: content.into(),
        is_error: true,
    }
}

/// The approval request on the tape: its reason and arguments.
async fn approval_request(bench: &Bench) -> (String, Value) {
    bench
        .tape()
        .await
        .into_iter()
        .find_map(|event| {
            let Event::ApprovalRequested {
                reason, arguments, ..
            } = event
            else {
                return None;
            };
            Some((reason, arguments))
        })
        .expect("an approval was requested")
}

fn verdicts(receipts: &[Receipt]) -> Vec<(String, Verdict, bool)> {
    receipts
        .iter()
        .map(|r| (r.body.call_id.clone(), r.body.verdict, r.body.is_error))
        .collect()
}

#[tokio::test]
async fn a_call_the_policy_allows_runs_and_is_recorded() {
    let mut bench = Bench::new(Mode::Supervised, Arc::new(NoHooks));
    let read = call("c1", "read_file", json!({"path": "a.txt"}));
    let (ended, history) = bench.run(std::slice::from_ref(&read), Vec::new()).await;
    assert!(ended.is_ok());
    assert_eq!(
        bench.kinds().await,
        ["tool_planned", "tool_started", "tool_result"]
    );
    let planned = bench.tape().await.remove(0);
    assert_eq!(
        planned,
        Event::ToolPlanned {
            id: "c1".into(),
            title: "read_file a.txt".into(),
            locations: vec![bench.workspace.join("a.txt")],
            command: None,
            diffs: Vec::new(),
        }
    );
    assert_eq!(
        bench.result("c1").await,
        ("done a.txt".into(), false, Verdict::Allowed)
    );
    assert_eq!(bench.ran(), 1);
    let receipts = bench.receipts().await;
    assert_eq!(
        verdicts(&receipts),
        [("c1".into(), Verdict::Allowed, false)]
    );
    let receipt = &receipts[0].body;
    assert_eq!(
        (receipt.tool.as_str(), &receipt.session_id, &receipt.run_id),
        ("read_file", &bench.session, &bench.run)
    );
    assert_eq!(receipt.input_hash, json_hash(&read.arguments));
    assert_eq!(receipt.output_hash, sha256_hex(b"done a.txt"));
    assert!(receipt.hooks.is_empty());
    assert_eq!(history, [tool_message("c1", "done a.txt")]);
    assert_eq!(bench.history().await, history);
}

#[tokio::test]
async fn read_only_calls_run_together_and_a_change_runs_alone_after_them() {
    let mut bench = Bench::new(Mode::Full, Arc::new(NoHooks));
    let calls = [
        call("c1", "read_file", json!({"path": "a.txt"})),
        call("c2", "read_file", json!({"path": "b.txt"})),
        call("c3", "write_file", json!({"path": "c.txt"})),
    ];
    let (ended, history) = bench.run(&calls, Vec::new()).await;
    assert!(ended.is_ok());
    assert_eq!(
        bench.kinds().await,
        [
            "tool_planned",
            "tool_planned",
            "tool_started",
            "tool_started",
            "tool_result",
            "tool_result",
            "tool_planned",
            "tool_started",
            "tool_result",
        ]
    );
    assert_eq!(
        history,
        [
            tool_message("c1", "done a.txt"),
            tool_message("c2", "done b.txt"),
            tool_message("c3", "done c.txt"),
        ]
    );
    assert_eq!(
        verdicts(&bench.receipts().await),
        [
            ("c1".into(), Verdict::Allowed, false),
            ("c2".into(), Verdict::Allowed, false),
            ("c3".into(), Verdict::Allowed, false),
        ]
    );
}

#[tokio::test]
async fn a_call_the_policy_asks_about_runs_once_a_person_approves() {
    let mut bench = Bench::new(Mode::Supervised, Arc::new(NoHooks));
    let write = call("c1", "write_file", json!({"path": "a.txt"}));
    let person = vec![Person::Decides(ApprovalDecision::AllowOnce)];
    let (ended, history) = bench.run(&[write], person).await;
    assert!(ended.is_ok());
    assert_eq!(
        bench.kinds().await,
        [
            "tool_planned",
            "state waiting",
            "approval_requested",
            "approval_decided",
            "state running",
            "tool_started",
            "tool_result",
        ]
    );
    let (reason, arguments) = approval_request(&bench).await;
    assert_eq!(reason, "supervised mode: `write_file` changes files");
    assert_eq!(arguments, json!({"path": "a.txt"}));
    assert_eq!(
        bench.result("c1").await,
        ("done a.txt".into(), false, Verdict::Approved)
    );
    assert_eq!(history, [tool_message("c1", "done a.txt")]);
    assert_eq!(
        verdicts(&bench.receipts().await),
        [("c1".into(), Verdict::Approved, false)]
    );
    assert!(bench.env.approvals.waiting(&bench.session).is_empty());
    assert!(
        bench
            .journal
            .grants(&bench.session)
            .await
            .unwrap()
            .is_empty()
    );
}

#[tokio::test]
async fn an_allow_always_is_remembered_and_the_next_call_runs_unasked() {
    let mut bench = Bench::new(Mode::Supervised, Arc::new(NoHooks));
    let person = vec![Person::Decides(ApprovalDecision::AllowAlways)];
    let first = call("c1", "write_file", json!({"path": "a.txt"}));
    bench.run(&[first], person).await.0.ok().unwrap();
    let grant = Grant {
        tool: "write_file".into(),
        scope: String::new(),
        allow: true,
    };
    assert_eq!(*bench.env.grants.lock(), std::slice::from_ref(&grant));
    assert_eq!(bench.journal.grants(&bench.session).await.unwrap(), [grant]);
    let second = call("c2", "write_file", json!({"path": "b.txt"}));
    bench.run(&[second], Vec::new()).await.0.ok().unwrap();
    assert_eq!(
        bench.result("c2").await,
        ("done b.txt".into(), false, Verdict::Approved)
    );
    let asked = bench.kinds().await;
    assert_eq!(
        asked.iter().filter(|k| *k == "approval_requested").count(),
        1,
        "{asked:?}"
    );
}

#[tokio::test]
async fn a_call_a_person_rejects_does_not_run() {
    let mut bench = Bench::new(Mode::Supervised, Arc::new(NoHooks));
    let person = vec![Person::Decides(ApprovalDecision::RejectOnce)];
    let write = call("c1", "write_file", json!({"path": "a.txt"}));
    let (ended, history) = bench.run(&[write], person).await;
    assert!(ended.is_ok());
    assert_eq!(
        bench.kinds().await,
        [
            "tool_planned",
            "state waiting",
            "approval_requested",
            "approval_decided",
            "state running",
            "tool_result",
        ]
    );
    assert_eq!(
        bench.result("c1").await,
        (REJECTED_BY_THE_USER.into(), true, Verdict::Rejected)
    );
    assert_eq!(bench.ran(), 0);
    assert_eq!(history, [error_message("c1", REJECTED_BY_THE_USER)]);
    assert_eq!(
        verdicts(&bench.receipts().await),
        [("c1".into(), Verdict::Rejected, true)]
    );
}

#[tokio::test]
async fn a_reject_always_is_remembered_and_refuses_the_next_call_unasked() {
    let mut bench = Bench::new(Mode::Supervised, Arc::new(NoHooks));
    let person = vec![Person::Decides(ApprovalDecision::RejectAlways)];
    let first = call("c1", "write_file", json!({"path": "a.txt"}));
    bench.run(&[first], person).await.0.ok().unwrap();
    let second = call("c2", "write_file", json!({"path": "b.txt"}));
    bench.run(&[second], Vec::new()).await.0.ok().unwrap();
    let (output, is_error, verdict) = bench.result("c2").await;
    assert!(output.starts_with("rejected: "), "{output}");
    assert_eq!((is_error, verdict), (true, Verdict::Rejected));
    assert_eq!(bench.ran(), 0);
    assert_eq!(
        bench.journal.grants(&bench.session).await.unwrap(),
        [Grant {
            tool: "write_file".into(),
            scope: String::new(),
            allow: false,
        }]
    );
}

#[tokio::test]
async fn an_approval_nobody_gives_in_time_rejects_the_call() {
    let mut bench = Bench::new(Mode::Supervised, Arc::new(NoHooks));
    let gate = Arc::get_mut(&mut bench.env.gate).unwrap();
    gate.approval_timeout = Some(std::time::Duration::from_millis(20));
    let write = call("c1", "write_file", json!({"path": "a.txt"}));
    bench.run(&[write], Vec::new()).await.0.ok().unwrap();
    let decided = bench.tape().await.into_iter().find_map(|event| {
        let Event::ApprovalDecided { decision, .. } = event else {
            return None;
        };
        Some(decision)
    });
    assert_eq!(decided, Some(ApprovalDecision::TimedOut));
    assert_eq!(
        bench.result("c1").await,
        (
            "rejected: nobody approved the call within 0 s".into(),
            true,
            Verdict::Rejected
        )
    );
    assert_eq!(bench.ran(), 0);
}

#[tokio::test]
async fn a_call_the_policy_denies_is_refused_without_asking() {
    let mut bench = Bench::new(Mode::ReadOnly, Arc::new(NoHooks));
    let write = call("c1", "write_file", json!({"path": "a.txt"}));
    let (ended, history) = bench.run(&[write], Vec::new()).await;
    assert!(ended.is_ok());
    assert_eq!(bench.kinds().await, ["tool_planned", "tool_result"]);
    let denied = "denied by policy: read_only mode: `write_file` would change files (edit)";
    assert_eq!(
        bench.result("c1").await,
        (denied.into(), true, Verdict::Denied)
    );
    assert_eq!(bench.ran(), 0);
    assert_eq!(history, [error_message("c1", denied)]);
    assert_eq!(
        verdicts(&bench.receipts().await),
        [("c1".into(), Verdict::Denied, true)]
    );
}

#[tokio::test]
async fn a_call_whose_arguments_do_not_plan_is_settled_before_the_policy() {
    let hooks = Arc::new(Told::default());
    let mut bench = Bench::new(Mode::Full, hooks.clone());
    let calls = [
        call("c1", "read_file", json!({"file": "a.txt"})),
        call("c2", "read_file", json!({"path": "../outside.txt"})),
    ];
    let (ended, history) = bench.run(&calls, Vec::new()).await;
    assert!(ended.is_ok());
    // Nothing planned, nothing started, no hook asked.
    assert_eq!(bench.kinds().await, ["tool_result", "tool_result"]);
    assert!(hooks.shown.lock().is_empty());
    assert_eq!(
        bench.result("c1").await,
        (
            "invalid arguments: `path` is required".into(),
            true,
            Verdict::Invalid
        )
    );
    let (outside, is_error, verdict) = bench.result("c2").await;
    assert!(outside.starts_with("denied by policy: "), "{outside}");
    assert_eq!((is_error, verdict), (true, Verdict::Denied));
    assert_eq!(history.len(), 2);
    assert_eq!(
        verdicts(&bench.receipts().await),
        [
            ("c1".into(), Verdict::Invalid, true),
            ("c2".into(), Verdict::Denied, true),
        ]
    );
    assert_eq!(bench.ran(), 0);
}

#[tokio::test]
async fn a_tool_that_does_not_exist_is_answered_with_the_ones_that_do() {
    let mut bench = Bench::new(Mode::Full, Arc::new(NoHooks));
    let (ended, history) = bench
        .run(&[call("c1", "nope", json!({}))], Vec::new())
        .await;
    assert!(ended.is_ok());
    let unknown = "unknown tool `nope`; available tools: read_file, write_file";
    assert_eq!(bench.kinds().await, ["tool_result"]);
    assert_eq!(
        bench.result("c1").await,
        (unknown.into(), true, Verdict::Invalid)
    );
    assert_eq!(history, [error_message("c1", unknown)]);
    assert_eq!(
        verdicts(&bench.receipts().await),
        [("c1".into(), Verdict::Invalid, true)]
    );
}

#[tokio::test]
async fn a_hook_narrows_an_allowed_call_to_an_approval() {
    let hooks = pre(permission(Permission::Ask, Some("look first")));
    let mut bench = Bench::new(Mode::Supervised, hooks.clone());
    let person = vec![Person::Decides(ApprovalDecision::AllowOnce)];
    let read = call("c1", "read_file", json!({"path": "a.txt"}));
    bench.run(&[read], person).await.0.ok().unwrap();
    let (reason, _) = approval_request(&bench).await;
    assert_eq!(reason, "a hook asks for approval: look first");
    assert_eq!(
        bench.result("c1").await,
        ("done a.txt".into(), false, Verdict::Approved)
    );
    let receipts = bench.receipts().await;
    assert_eq!(receipts[0].body.hooks, ["PreToolUse ./check.sh: ask"]);
    // The hook saw the planned call before the policy.
    let shown = hooks.shown.lock();
    let input = shown[0].to_json();
    assert_eq!(input["tool_name"], "read_file");
    assert_eq!(input["tool_input"], json!({"path": "a.txt"}));
    assert_eq!(input["tool_use_id"], "c1");
    assert_eq!(input["permission_mode"], "supervised");
}

#[tokio::test]
async fn a_hook_that_blocks_refuses_the_call_unplanned() {
    let block = HookAnswer {
        permission: Some(Permission::Deny),
        block: Some("no reads today".into()),
        ..said()
    };
    let mut bench = Bench::new(Mode::Full, pre(block));
    let read = call("c1", "read_file", json!({"path": "a.txt"}));
    bench.run(&[read], Vec::new()).await.0.ok().unwrap();
    assert_eq!(bench.kinds().await, ["tool_result"]);
    assert_eq!(
        bench.result("c1").await,
        (
            "denied by a hook: no reads today".into(),
            true,
            Verdict::Denied
        )
    );
    assert_eq!(bench.ran(), 0);
    let receipts = bench.receipts().await;
    assert_eq!(receipts[0].body.hooks, ["PreToolUse ./check.sh: block"]);
}

#[tokio::test]
async fn a_hooks_allow_never_widens_past_a_policy_deny() {
    let allow = || pre(permission(Permission::Allow, None));
    let mut bench = Bench::new(Mode::ReadOnly, allow());
    let write = call("c1", "write_file", json!({"path": "a.txt"}));
    bench.run(&[write], Vec::new()).await.0.ok().unwrap();
    assert_eq!(
        bench.result("c1").await,
        (
            "denied by policy: read_only mode: `write_file` would change files (edit)".into(),
            true,
            Verdict::Denied
        )
    );
    assert_eq!(bench.ran(), 0);
    let receipts = bench.receipts().await;
    assert_eq!(receipts[0].body.hooks, ["PreToolUse ./check.sh: allow"]);

    // Where the policy asks, the hook's allow skips the approval…
    let mut bench = Bench::new(Mode::Supervised, allow());
    let write = call("c1", "write_file", json!({"path": "a.txt"}));
    bench.run(&[write], Vec::new()).await.0.ok().unwrap();
    assert_eq!(
        bench.result("c1").await,
        ("done a.txt".into(), false, Verdict::Allowed)
    );

    // …but not one only a person may give.
    let mut bench = Bench::new(Mode::Supervised, allow());
    let person = vec![Person::Decides(ApprovalDecision::RejectOnce)];
    let protected = call("c1", "write_file", json!({"path": ".claude/settings.json"}));
    bench.run(&[protected], person).await.0.ok().unwrap();
    let (reason, _) = approval_request(&bench).await;
    assert!(reason.contains("is a protected path"), "{reason}");
    assert_eq!(
        bench.result("c1").await,
        (REJECTED_BY_THE_USER.into(), true, Verdict::Rejected)
    );
    assert_eq!(bench.ran(), 0);
}

#[tokio::test]
async fn a_hooks_new_input_is_planned_and_checked_as_the_models() {
    let rewrite = |path: &str| {
        pre(HookAnswer {
            updated_input: Some(json!({"path": path})),
            ..said()
        })
    };
    let mut bench = Bench::new(Mode::Full, rewrite("b.txt"));
    let read = call("c1", "read_file", json!({"path": "a.txt"}));
    bench.run(&[read], Vec::new()).await.0.ok().unwrap();
    let titles: Vec<String> = bench
        .tape()
        .await
        .into_iter()
        .filter_map(|event| {
            let Event::ToolPlanned { title, .. } = event else {
                return None;
            };
            Some(title)
        })
        .collect();
    assert_eq!(titles, ["read_file b.txt"]);
    assert_eq!(
        bench.result("c1").await,
        ("done b.txt".into(), false, Verdict::Allowed)
    );
    let receipts = bench.receipts().await;
    assert_eq!(
        receipts[0].body.hooks,
        ["PreToolUse ./check.sh: updated input"]
    );

    let mut bench = Bench::new(Mode::Full, rewrite("../outside.txt"));
    let read = call("c1", "read_file", json!({"path": "a.txt"}));
    bench.run(&[read], Vec::new()).await.0.ok().unwrap();
    assert_eq!(bench.kinds().await, ["tool_result"]);
    let (output, is_error, verdict) = bench.result("c1").await;
    assert!(
        output.starts_with("the input a hook gave is refused: denied by policy: "),
        "{output}"
    );
    assert_eq!((is_error, verdict), (true, Verdict::Denied));
    assert_eq!(bench.ran(), 0);
}

#[tokio::test]
async fn a_hook_that_ends_the_run_refuses_the_call_and_marks_the_run() {
    let stop = HookAnswer {
        stop: Some("enough for today".into()),
        ..said()
    };
    let mut bench = Bench::new(Mode::Full, pre(stop));
    let read = call("c1", "read_file", json!({"path": "a.txt"}));
    bench.run(&[read], Vec::new()).await.0.ok().unwrap();
    assert_eq!(
        bench.result("c1").await,
        (
            "not run: a hook ended the run: enough for today".into(),
            true,
            Verdict::Denied
        )
    );
    assert_eq!(
        bench.env.ended_by_hook().as_deref(),
        Some("enough for today")
    );
    assert_eq!(bench.ran(), 0);
}

#[tokio::test]
async fn what_hooks_say_after_a_call_joins_its_result_and_the_person_is_told() {
    let hooks = Arc::new(Told {
        pre: vec![HookAnswer {
            context: Some("reads are logged".into()),
            ..said()
        }],
        post: vec![HookAnswer {
            block: Some("too long".into()),
            message: Some("checked a.txt".into()),
            ..said()
        }],
        shown: Mutex::default(),
    });
    let mut bench = Bench::new(Mode::Full, hooks.clone());
    let read = call("c1", "read_file", json!({"path": "a.txt"}));
    bench.run(&[read], Vec::new()).await.0.ok().unwrap();
    let output = "done a.txt\n\n<hook_context>\nreads are logged\n\
                  A hook says about this result: too long\n</hook_context>";
    assert_eq!(
        bench.result("c1").await,
        (output.into(), false, Verdict::Allowed)
    );
    assert_eq!(
        bench.kinds().await,
        ["tool_planned", "tool_started", "notice", "tool_result"]
    );
    assert!(bench.tape().await.contains(&Event::Notice {
        message: "checked a.txt".into()
    }));
    let post = hooks.shown.lock()[1].to_json();
    assert_eq!(
        post["tool_response"],
        json!({"output": "done a.txt", "is_error": false})
    );
    let receipts = bench.receipts().await;
    assert_eq!(receipts[0].body.hooks, ["PostToolUse ./check.sh: block"]);
    assert_eq!(receipts[0].body.output_hash, sha256_hex(output.as_bytes()));
}

#[tokio::test]
async fn a_question_the_call_asks_is_answered_before_it_runs() {
    let mut bench = Bench::new(Mode::Full, Arc::new(NoHooks));
    let ask = call(
        "c1",
        "read_file",
        json!({"path": "a.txt", "ask": "which one?"}),
    );
    bench
        .run(&[ask], vec![Person::Answers("the blue one")])
        .await
        .0
        .ok()
        .unwrap();
    assert_eq!(
        bench.kinds().await,
        [
            "tool_planned",
            "state waiting",
            "question_asked",
            "question_answered",
            "state running",
            "tool_started",
            "tool_result",
        ]
    );
    assert_eq!(
        bench.result("c1").await,
        (
            "done a.txt, told the blue one".into(),
            false,
            Verdict::Allowed
        )
    );
}

#[tokio::test]
async fn a_cancel_while_an_approval_waits_settles_every_call_left_as_cancelled() {
    let mut bench = Bench::new(Mode::Supervised, Arc::new(NoHooks));
    let calls = [
        call("c1", "write_file", json!({"path": "a.txt"})),
        call("c2", "read_file", json!({"path": "b.txt"})),
    ];
    let (ended, history) = bench.run(&calls, vec![Person::Cancels]).await;
    assert!(matches!(ended, Err(Interrupted::Cancelled)));
    // The run stays waiting: its end is recorded by whoever ends it.
    assert_eq!(
        bench.kinds().await,
        [
            "tool_planned",
            "state waiting",
            "approval_requested",
            "approval_decided",
            "tool_result",
            "tool_result",
        ]
    );
    let decided = bench.tape().await.into_iter().find_map(|event| {
        let Event::ApprovalDecided { decision, .. } = event else {
            return None;
        };
        Some(decision)
    });
    assert_eq!(decided, Some(ApprovalDecision::Cancelled));
    let cancelled = "the run was cancelled before this call ran";
    for id in ["c1", "c2"] {
        assert_eq!(
            bench.result(id).await,
            (cancelled.into(), true, Verdict::Cancelled)
        );
    }
    assert_eq!(
        history,
        [
            error_message("c1", cancelled),
            error_message("c2", cancelled)
        ]
    );
    assert_eq!(
        verdicts(&bench.receipts().await),
        [
            ("c1".into(), Verdict::Cancelled, true),
            ("c2".into(), Verdict::Cancelled, true),
        ]
    );
    assert_eq!(bench.ran(), 0);
    assert!(bench.env.approvals.waiting(&bench.session).is_empty());
}

#[tokio::test]
async fn a_cancel_while_a_question_waits_runs_none_of_its_group() {
    let mut bench = Bench::new(Mode::Full, Arc::new(NoHooks));
    let calls = [
        call("c1", "read_file", json!({"path": "a.txt"})),
        call("c2", "read_file", json!({"path": "b.txt", "ask": "sure?"})),
    ];
    let (ended, history) = bench.run(&calls, vec![Person::Cancels]).await;
    assert!(matches!(ended, Err(Interrupted::Cancelled)));
    assert_eq!(
        bench.kinds().await,
        [
            "tool_planned",
            "tool_planned",
            "state waiting",
            "question_asked",
            "question_answered",
            "tool_result",
            "tool_result",
        ]
    );
    assert_eq!(bench.ran(), 0, "the call prepared before the cancel ran");
    assert_eq!(history.len(), 2);
    assert_eq!(
        verdicts(&bench.receipts().await),
        [
            ("c1".into(), Verdict::Cancelled, true),
            ("c2".into(), Verdict::Cancelled, true),
        ]
    );
}

#[tokio::test]
#[allow(
    clippy::wildcard_enum_match_arm,
    reason = "any event but the call's own on this tape fails the test"
)]
async fn a_calls_live_output_is_shown_whole_and_redacted_before_its_result() {
    let key = "AKIAQ3EGRVY7ZBZ2XJ5K";
    let progress = vec![
        ProgressUpdate::Output("one\ntw".into()),
        ProgressUpdate::Output("o\n".into()),
        ProgressUpdate::Terminal("term-1".into()),
        ProgressUpdate::Output(format!("key {key}\n")),
    ];
    let mut bench = Bench::with_progress(Mode::Full, Arc::new(NoHooks), progress);
    let read = call("c1", "read_file", json!({"path": "a.txt"}));
    bench.run(&[read], Vec::new()).await.0.ok().unwrap();
    let tape = bench.tape().await;
    let result_at = tape
        .iter()
        .position(|e| matches!(e, Event::ToolResult { .. }))
        .unwrap();
    let mut before_terminal = String::new();
    let mut after_terminal = String::new();
    let mut terminal = None;
    for event in &tape[..result_at] {
        match event {
            Event::ToolProgress {
                id,
                output: Some(output),
                terminal_id: None,
            } if id == "c1" => match terminal {
                None => before_terminal.push_str(output),
                Some(_) => after_terminal.push_str(output),
            },
            Event::ToolProgress {
                id,
                output: None,
                terminal_id: Some(terminal_id),
            } if id == "c1" => terminal = Some(terminal_id.clone()),
            Event::ToolPlanned { .. } | Event::ToolStarted { .. } => {}
            other => panic!("{other:?}"),
        }
    }
    assert_eq!(before_terminal, "one\ntwo\n");
    assert_eq!(terminal.as_deref(), Some("term-1"));
    assert!(
        !after_terminal.contains(key) && after_terminal.starts_with("key [REDACTED"),
        "{after_terminal}"
    );
    assert!(
        !tape
            .iter()
            .skip(result_at + 1)
            .any(|e| e.kind() == "tool_progress")
    );
}

#[tokio::test]
async fn the_same_call_again_and_again_is_answered_with_a_note_then_ends_the_run() {
    let mut bench = Bench::new(Mode::Full, Arc::new(NoHooks));
    let read = |id: &str| call(id, "read_file", json!({"path": "a.txt"}));
    // Twice in one turn counts once.
    bench
        .run(&[read("c1"), read("c2")], Vec::new())
        .await
        .0
        .ok()
        .unwrap();
    bench.run(&[read("c3")], Vec::new()).await.0.ok().unwrap();
    assert_eq!(bench.ran(), 3);
    bench.run(&[read("c4")], Vec::new()).await.0.ok().unwrap();
    let (note, is_error, verdict) = bench.result("c4").await;
    assert!(
        note.starts_with(
            "not run: `read_file` was called with these same arguments 3 times in this run"
        ),
        "{note}"
    );
    assert_eq!((is_error, verdict, bench.ran()), (true, Verdict::Denied, 3));
    assert_eq!(bench.env.guard.gave_up(), None);
    bench.run(&[read("c5")], Vec::new()).await.0.ok().unwrap();
    let gave_up = bench.env.guard.gave_up().unwrap();
    assert!(
        gave_up.starts_with("stopped by the loop guard: the model called `read_file` with the same arguments 4 times"),
        "{gave_up}"
    );
    assert_eq!(bench.ran(), 3);
}

#[tokio::test]
async fn a_secret_in_what_a_hook_says_is_redacted_before_the_model_or_the_tape_sees_it() {
    let key = "sk-proj-Abcdefghijklmnopqrstuvwxyz0123456789ABCDEFGH";
    let hooks = Arc::new(Told {
        pre: vec![HookAnswer {
            context: Some(format!("use the key {key}")),
            ..said()
        }],
        post: vec![HookAnswer {
            message: Some(format!("checked with {key}")),
            ..said()
        }],
        shown: Mutex::default(),
    });
    let mut bench = Bench::new(Mode::Full, hooks);
    let read = call("c1", "read_file", json!({"path": "a.txt"}));
    bench.run(&[read], Vec::new()).await.0.ok().unwrap();
    let (output, _, _) = bench.result("c1").await;
    assert!(output.contains("<hook_context>\nuse the key "), "{output}");
    assert!(!output.contains(key), "{output}");
    let tape = format!("{:?}", bench.tape().await);
    assert!(tape.contains("checked with "), "{tape}");
    assert!(!tape.contains(key), "{tape}");
    let history = format!("{:?}", bench.history().await);
    assert!(!history.contains(key), "{history}");
}
