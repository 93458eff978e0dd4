//! Commands that inspect state: sessions, runs, the tape, the config, the machine.

use anyhow::anyhow;
use serde_json::json;

use crate::app::Flags;
use crate::app::{Failure, exit};
use crate::cli::{ChannelsCommand, ContextCommand, RunsCommand, SessionsCommand, TapeArgs};
use crate::config::SandboxSetting;
use crate::core::channel::IntentStatus;
use crate::core::event::{Event, EventRecord};
use crate::core::ids::{RunId, SessionId};
use crate::core::journal::{Audit, SessionQuery};
use crate::core::receipt::ChainWalk;
use crate::core::run::RunInfo;
use crate::core::session::{Message, Session};
use crate::stdout::{table, timestamp as time};

fn print(text: &str) -> Result<(), Failure> {
    crate::stdout::write_all(text.as_bytes()).map_err(Failure::failed)
}

fn session_json(session: &Session) -> serde_json::Value {
    let mut value = json!({
        "session_id": session.id.as_str(),
        "workspace": session.workspace,
        "origin": session.origin.as_str(),
        "provider": session.provider,
        "model": session.model,
        "mode": session.mode.as_str(),
        "title": session.title,
        "created_at": session.created_at,
        "updated_at": session.updated_at,
        "closed": session.closed,
        "mcp_servers": session.mcp_servers,
    });
    if let Some(level) = &session.thought_level {
        value["thought_level"] = json!(level);
    }
    if let Some(parent) = &session.parent {
        value["parent"] = json!({
            "session_id": parent.session.as_str(),
            "run_id": parent.run.as_str(),
            "call_id": parent.call,
        });
    }
    value
}

/// A session's state in a listing: closed, its last run's state, or new.
fn session_status(session: &Session, last: Option<&RunInfo>) -> &'static str {
    match last {
        _ if session.closed => "closed",
        Some(run) => run.state.as_str(),
        None => "new",
    }
}

fn run_json(run: &RunInfo) -> serde_json::Value {
    json!({
        "run_id": run.id.as_str(),
        "session_id": run.session_id.as_str(),
        "state": run.state.as_str(),
        "stop_reason": run.stop_reason.map(|r| r.as_str()),
        "error": run.error,
        "usage": run.usage,
        "cost": run.cost,
        "created_at": run.created_at,
        "started_at": run.started_at,
        "ended_at": run.ended_at,
    })
}

pub async fn sessions(flags: &Flags, command: &SessionsCommand) -> Result<u8, Failure> {
    let opened = crate::app::App::open(flags)?;
    let runtime = opened.runtime;
    match command {
        SessionsCommand::List { cwd, limit, json } => {
            let workspace = cwd
                .as_ref()
                .map(std::path::absolute)
                .transpose()
                .map_err(Failure::usage)?;
            let sessions = runtime
                .list_sessions(SessionQuery {
                    workspace,
                    after: None,
                    limit: *limit,
                })
                .await
                .map_err(Failure::failed)?;
            let mut out = String::new();
            if *json {
                for session in &sessions {
                    out.push_str(&session_json(session).to_string());
                    out.push('\n');
                }
            } else if sessions.is_empty() {
                eprintln!("pincer: no sessions yet");
            } else {
                let mut rows = vec![[
                    "SESSION".to_owned(),
                    "UPDATED".to_owned(),
                    "FROM".to_owned(),
                    "STATUS".to_owned(),
                    "MODEL".to_owned(),
                    "WORKSPACE".to_owned(),
                    "TITLE".to_owned(),
                ]];
                for session in &sessions {
                    let runs = runtime.runs(&session.id).await.map_err(Failure::failed)?;
                    rows.push([
                        session.id.to_string(),
                        time(session.updated_at),
                        session.origin.as_str().to_owned(),
                        session_status(session, runs.last()).to_owned(),
                        format!("{}/{}", session.provider, session.model),
                        session.workspace.display().to_string(),
                        session
                            .title
                            .clone()
                            .unwrap_or_else(|| "(untitled)".to_owned()),
                    ]);
                }
                out = table(&rows);
            }
            print(&out)?;
        }
        SessionsCommand::Rm { ids } => {
            for id in ids {
                let id = SessionId::from_string(id.clone());
                runtime.delete_session(&id).await.map_err(Failure::usage)?;
                eprintln!("pincer: deleted session {id}");
            }
            runtime.shutdown().await;
        }
        SessionsCommand::Show { id, json } => {
            let id = SessionId::from_string(id.clone());
            let session = runtime.session(&id).await.map_err(Failure::usage)?;
            let history = runtime.history(&id).await.map_err(Failure::failed)?;
            let runs = runtime.runs(&id).await.map_err(Failure::failed)?;
            let grants = runtime.grants(&id).await.map_err(Failure::failed)?;
            if *json {
                let value = json!({
                    "session": session_json(&session),
                    "grants": grants,
                    "history": history.iter().map(|entry| json!({
                        "run_id": entry.run_id.as_ref().map(RunId::as_str),
                        "at": entry.at,
                        "message": entry.message,
                    })).collect::<Vec<_>>(),
                    "runs": runs.iter().map(run_json).collect::<Vec<_>>(),
                });
                print(&format!("{value}\n"))?;
            } else {
                let mut out = format!(
                    "session   {}\nworkspace {}\norigin    {}\nmodel     {}/{}\nmode      {}\ntitle     {}\ncreated   {}\nupdated   {}{}\n",
                    session.id,
                    session.workspace.display(),
                    session.origin.as_str(),
                    session.provider,
                    session.model,
                    session.mode.as_str(),
                    session.title.as_deref().unwrap_or("(untitled)"),
                    time(session.created_at),
                    time(session.updated_at),
                    if session.closed { "\nclosed" } else { "" },
                );
                if let Some(parent) = &session.parent {
                    out.push_str(&format!(
                        "subagent  of session {}, run {}, call {}\n",
                        parent.session, parent.run, parent.call
                    ));
                }
                if !grants.is_empty() {
                    out.push_str(&format!("\nremembered approvals ({})\n", grants.len()));
                    for grant in &grants {
                        let scope = if grant.scope.is_empty() {
                            "every call".to_owned()
                        } else {
                            format!("`{}`", grant.scope)
                        };
                        let answer = if grant.allow {
                            "always allow"
                        } else {
                            "always reject"
                        };
                        out.push_str(&format!("  {answer}  {} {scope}\n", grant.tool));
                    }
                }
                out.push_str(&format!("\nruns ({})\n", runs.len()));
                for run in &runs {
                    out.push_str(&format!("  {}\n", run_line(run)));
                }
                out.push_str(&format!("\nhistory ({} messages)\n", history.len()));
                for entry in &history {
                    out.push_str(&message_text(&entry.message));
                }
                print(&out)?;
            }
        }
    }
    opened.store.shutdown();
    Ok(exit::OK)
}

fn run_line(run: &RunInfo) -> String {
    let outcome = match (&run.error, run.stop_reason) {
        (Some(error), _) => format!(" error: {error}"),
        (None, Some(reason)) => format!(" ({})", reason.as_str()),
        (None, None) => String::new(),
    };
    let duration = match (run.started_at, run.ended_at) {
        (Some(start), Some(end)) => format!(" in {} ms", end - start),
        _ => String::new(),
    };
    let cost = run
        .cost
        .as_ref()
        .map(|cost| format!("  cost {cost}"))
        .unwrap_or_default();
    format!(
        "{}  {}  {}{}{}  tokens in {} out {}{}",
        run.id,
        time(run.created_at),
        run.state.as_str(),
        outcome,
        duration,
        run.usage.input_tokens,
        run.usage.output_tokens,
        cost
    )
}

fn message_text(message: &Message) -> String {
    match message {
        Message::User { content } => {
            let text: Vec<String> = content.iter().map(|p| p.to_model_text()).collect();
            format!("> {}\n", text.join(" ").replace('\n', "\n> "))
        }
        Message::Assistant {
            text,
            tool_calls,
            interrupted,
            ..
        } => {
            let mut out = text.clone();
            if !out.ends_with('\n') {
                out.push('\n');
            }
            for call in tool_calls {
                out.push_str(&format!("[tool call {} {}]\n", call.name, call.arguments));
            }
            if *interrupted {
                out.push_str("[interrupted]\n");
            }
            out
        }
        Message::Tool {
            content, is_error, ..
        } => format!(
            "[tool {}: {}]\n",
            if *is_error { "error" } else { "result" },
            content
        ),
        Message::Summary { text, .. } => format!("[summary of the earlier conversation]\n{text}\n"),
        Message::Note { text } => format!("[note: {text}]\n"),
    }
}

pub async fn runs(flags: &Flags, command: &RunsCommand) -> Result<u8, Failure> {
    let opened = crate::app::App::open(flags)?;
    let runtime = opened.runtime;
    let RunsCommand::Show { id, json } = command;
    let run = runtime
        .run(&RunId::from_string(id.clone()))
        .await
        .map_err(Failure::usage)?;
    if *json {
        print(&format!("{}\n", run_json(&run)))?;
    } else {
        print(&format!("{}\n", run_line(&run)))?;
    }
    opened.store.shutdown();
    Ok(exit::OK)
}

pub async fn channels(flags: &Flags, command: &ChannelsCommand) -> Result<u8, Failure> {
    let ChannelsCommand::Outbox {
        status,
        limit,
        json,
    } = command;
    let status = match status {
        Some(name) => Some(IntentStatus::parse(name).ok_or_else(|| {
            let known: Vec<&str> = IntentStatus::ALL.iter().map(|s| s.as_str()).collect();
            Failure::usage(anyhow!(
                "--status {name:?}: expected one of {}",
                known.join(", ")
            ))
        })?),
        None => None,
    };
    let opened = crate::app::App::open(flags)?;
    let store = opened.store.clone();
    let intents = store
        .intents(status, *limit)
        .await
        .map_err(Failure::failed)?;
    let mut out = String::new();
    for intent in &intents {
        if *json {
            out.push_str(&serde_json::to_string(intent).map_err(Failure::failed)?);
            out.push('\n');
            continue;
        }
        let ids: Vec<&str> = intent
            .receipt
            .parts
            .iter()
            .map(|p| p.platform_id.as_str())
            .collect();
        out.push_str(&format!(
            "{}  {}  {}/{}  {}  {}  attempt {}  parts {}/{}{}{}\n",
            time(intent.updated_at),
            intent.id,
            intent.channel,
            intent.target.id,
            intent.kind.as_str(),
            intent.status.as_str(),
            intent.attempt,
            ids.len(),
            intent.units.len(),
            if ids.is_empty() {
                String::new()
            } else {
                format!(" [{}]", ids.join(", "))
            },
            intent
                .failure
                .as_ref()
                .map(|f| format!("  {}: {}", f.kind.as_str(), f.message))
                .unwrap_or_default()
        ));
    }
    if intents.is_empty() && !*json {
        out.push_str("no outbound messages\n");
    }
    print(&out)?;
    store.shutdown();
    Ok(exit::OK)
}

/// `pincer context show`: what a session's next model turn would be sent.
pub async fn context(flags: &Flags, command: &ContextCommand) -> Result<u8, Failure> {
    let ContextCommand::Show { session, json } = command;
    let opened = crate::app::App::open(flags)?;
    let runtime = opened.runtime.clone();
    let id = match session {
        Some(id) => SessionId::from_string(id.clone()),
        None => {
            let cwd = std::env::current_dir()
                .and_then(|d| d.canonicalize())
                .map_err(|err| {
                    Failure::failed(anyhow!("cannot read the current directory: {err}"))
                })?;
            let newest = runtime
                .list_sessions(SessionQuery {
                    workspace: Some(cwd.clone()),
                    after: None,
                    limit: 1,
                })
                .await
                .map_err(Failure::failed)?;
            match newest.into_iter().next() {
                Some(session) => session.id,
                None => {
                    return Err(Failure::usage(anyhow!(
                        "no session in {}; pass --session ID (see `pincer sessions list`)",
                        cwd.display()
                    )));
                }
            }
        }
    };
    let view = runtime.context(&id).await.map_err(Failure::usage)?;
    let message_tokens: usize = view.message_tokens.iter().sum();
    let total = view.system_tokens + view.tool_tokens + message_tokens;
    let out = if *json {
        let mut value = serde_json::to_value(&view).map_err(Failure::failed)?;
        value["session_id"] = json!(id.as_str());
        value["total_tokens"] = json!(total);
        format!("{value}\n")
    } else {
        let mut out = format!(
            "session {id} · {}/{} · window {} tokens, {}\n\
             system prompt   {:>7} tokens\n\
             tools ({:>3})     {:>7} tokens\n\
             messages ({:>3})  {:>7} tokens ({} tool outputs shortened, {} messages dropped to fit)\n\
             total           {:>7} tokens (counted by {}, calibrated ×{:.2})\n",
            view.provider,
            view.model,
            view.window,
            view.window_from,
            view.system_tokens,
            view.tools.len(),
            view.tool_tokens,
            view.messages.len(),
            message_tokens,
            view.shortened,
            view.dropped,
            total,
            view.counted_by,
            view.calibration
        );
        out.push_str("\n--- system prompt ---\n");
        out.push_str(&view.system);
        out.push_str("\n\n--- tools ---\n");
        for tool in &view.tools {
            out.push_str(&format!(
                "{}: {}\n",
                tool.name,
                first_line(&tool.description)
            ));
        }
        out.push_str("\n--- messages ---\n");
        for (message, tokens) in view.messages.iter().zip(&view.message_tokens) {
            out.push_str(&format!("({tokens} tokens)\n"));
            out.push_str(&message_text(message));
        }
        out
    };
    print(&out)?;
    opened.store.shutdown();
    Ok(exit::OK)
}

fn first_line(text: &str) -> &str {
    text.lines().next().unwrap_or_default()
}

pub async fn tape(flags: &Flags, args: &TapeArgs) -> Result<u8, Failure> {
    let opened = crate::app::App::open(flags)?;
    let runtime = opened.runtime;
    let events = runtime
        .tape(&RunId::from_string(args.run.clone()), 0)
        .await
        .map_err(Failure::usage)?;
    let mut out = String::new();
    for record in &events {
        if args.json {
            out.push_str(&serde_json::to_string(record).map_err(Failure::failed)?);
            out.push('\n');
        } else {
            out.push_str(&tape_line(record));
        }
    }
    print(&out)?;
    opened.store.shutdown();
    Ok(exit::OK)
}

fn tape_line(record: &EventRecord) -> String {
    let what = match &record.event {
        Event::State {
            state,
            stop_reason,
            error,
            usage,
            cost,
        } => {
            let mut line = format!("state {}", state.as_str());
            if let Some(reason) = stop_reason {
                line.push_str(&format!(" ({})", reason.as_str()));
            }
            if let Some(error) = error {
                line.push_str(&format!(": {error}"));
            }
            if let Some(usage) = usage {
                line.push_str(&format!(
                    "; run tokens in {} out {}",
                    usage.input_tokens, usage.output_tokens
                ));
            }
            if let Some(cost) = cost {
                line.push_str(&format!(", cost {cost}"));
            }
            line
        }
        Event::UserMessage { content } => {
            let text: Vec<String> = content.iter().map(|p| p.to_model_text()).collect();
            format!("user {:?}", text.join(" "))
        }
        Event::ModelTurn {
            index,
            provider,
            model,
        } => format!("model turn {index} ({provider}/{model})"),
        Event::TextDelta { text } => format!("text {text:?}"),
        Event::ThoughtDelta { text } => format!("thought {text:?}"),
        Event::ToolCall {
            id,
            name,
            arguments,
            kind,
        } => format!("tool call {id} {name} ({}) {arguments}", kind.as_str()),
        Event::ToolPlanned { id, title, .. } => format!("tool planned {id} {title:?}"),
        Event::ApprovalRequested {
            approval_id,
            call_id,
            reason,
            ..
        } => format!("approval requested {approval_id} for {call_id}: {reason}"),
        Event::ApprovalDecided {
            approval_id,
            decision,
            ..
        } => format!("approval decided {approval_id}: {}", decision.as_str()),
        Event::QuestionAsked {
            question_id,
            call_id,
            question,
            options,
        } => {
            if options.is_empty() {
                format!("question asked {question_id} for {call_id}: {question:?}")
            } else {
                format!("question asked {question_id} for {call_id}: {question:?} {options:?}")
            }
        }
        Event::SubagentStarted {
            call_id,
            session_id,
            run_id,
            task,
        } => format!("subagent started by {call_id}: session {session_id}, run {run_id}: {task:?}"),
        Event::SubagentEnded {
            session_id,
            run_id,
            state,
            stop_reason,
            ..
        } => format!(
            "subagent ended: session {session_id}, run {run_id} {}{}",
            state.as_str(),
            stop_reason
                .map(|r| format!(" ({})", r.as_str()))
                .unwrap_or_default()
        ),
        Event::QuestionAnswered {
            question_id,
            outcome,
            answer,
            ..
        } => match answer {
            Some(answer) => format!("question answered {question_id}: {answer:?}"),
            None => format!("question answered {question_id}: {}", outcome.as_str()),
        },
        Event::ToolStarted { id } => format!("tool started {id}"),
        Event::ToolProgress {
            id,
            output,
            terminal_id,
        } => match (output, terminal_id) {
            (_, Some(terminal)) => format!("tool progress {id} in terminal {terminal}"),
            (Some(output), None) => format!("tool progress {id} {output:?}"),
            (None, None) => format!("tool progress {id}"),
        },
        Event::Plan { entries } => {
            let done = entries
                .iter()
                .filter(|e| e.status == crate::core::tool::PlanStatus::Completed)
                .count();
            format!("plan {done}/{} done", entries.len())
        }
        Event::SessionInfo { title } => format!("session title {title:?}"),
        Event::Notice { message } => format!("notice {message:?}"),
        Event::Retrying { .. } => record.event.retry_status().unwrap_or_default(),
        Event::Compaction {
            compaction_id,
            trigger,
            status,
            error,
            ..
        } => format!(
            "compaction {compaction_id} ({}) {}{}",
            match trigger {
                crate::core::event::CompactionTrigger::Manual => "manual",
                crate::core::event::CompactionTrigger::Auto => "auto",
            },
            status.as_str(),
            error
                .as_ref()
                .map(|e| format!(": {e:?}"))
                .unwrap_or_default()
        ),
        Event::ToolResult {
            id,
            output,
            is_error,
            verdict,
            diffs: _,
            safety,
        } => {
            let mut line = format!(
                "tool {} {id} [{}] {output:?}",
                if *is_error { "error" } else { "result" },
                verdict.as_str()
            );
            if !safety.is_empty() {
                line.push_str(&format!(" ({})", safety.join("; ")));
            }
            line
        }
        Event::Usage {
            usage,
            model,
            cost,
            context,
            ..
        } => {
            let mut line = format!(
                "usage in {} out {}",
                usage.input_tokens, usage.output_tokens
            );
            if usage.cached_input_tokens > 0 {
                line.push_str(&format!(" (cached {})", usage.cached_input_tokens));
            }
            if let Some(model) = model {
                line.push_str(&format!(" on {model}"));
            }
            if let Some(cost) = cost {
                line.push_str(&format!(", cost {cost}"));
            }
            if let Some(context) = context {
                line.push_str(&format!(", context {}/{}", context.used, context.size));
            }
            line
        }
    };
    format!("{:>5}  {}  {}\n", record.seq, time(record.at), what)
}

/// Walks the receipt chain page by page and cross-checks it against the tape.
/// `pincer trust [PATH] [--revoke] [--list]`.
pub async fn trust(
    flags: &Flags,
    path: Option<&std::path::Path>,
    revoke: bool,
    list: bool,
) -> Result<u8, Failure> {
    use crate::core::hooks::Hooks as _;
    use crate::core::journal::{Journal, Write};
    let (config, store) = crate::app::open_config_and_store(flags)?;
    let journal: std::sync::Arc<dyn Journal> = std::sync::Arc::new(store.clone());
    if list {
        let roots = journal.trusted_roots().await.map_err(Failure::failed)?;
        store.shutdown();
        let mut out = String::new();
        if roots.is_empty() {
            out.push_str("No project directory is trusted.\n");
        }
        for trust in roots {
            out.push_str(&format!("{}\n", trust.root.display()));
            for file in trust.files.iter().filter(|f| f.digest.is_some()) {
                out.push_str(&format!("  {}\n", file.path));
                for hook in &file.hooks {
                    out.push_str(&format!("    {hook}\n"));
                }
            }
        }
        print(&out)?;
        return Ok(crate::app::exit::OK);
    }
    let dir = match path {
        Some(path) => path.to_path_buf(),
        None => std::env::current_dir().map_err(|err| {
            Failure::failed(anyhow::anyhow!("cannot read the current directory: {err}"))
        })?,
    };
    let dir = dir
        .canonicalize()
        .map_err(|err| Failure::usage(anyhow::anyhow!("{}: {err}", dir.display())))?;
    let root = crate::core::hooks::project_dir(&dir);
    let settings = crate::app::wiring::hook_settings(&config.hooks);
    let hooks = crate::hooks::HookSet::new(&settings, &|name| std::env::var(name).ok())
        .map_err(Failure::usage)?
        .with_trust(journal.clone());
    // Trust is given to the hook files as they are now, which is what the
    // answer lists.
    let found = hooks.workspace_hooks(&root).await;
    journal
        .commit(Write::Trust(crate::core::hooks::TrustWrite::Set {
            root: root.clone(),
            trusted: !revoke,
            at: crate::core::session::now_millis(),
            files: if revoke {
                Vec::new()
            } else {
                found.as_ref().map(|f| f.files.clone()).unwrap_or_default()
            },
        }))
        .await
        .map_err(Failure::failed)?;
    let mut out = if revoke {
        format!(
            "{} is no longer trusted: its hooks do not run.\n",
            root.display()
        )
    } else {
        format!(
            "Trusted {}: its hooks run from now on, as long as their files stay as they are now.\n",
            root.display()
        )
    };
    if !revoke {
        match found {
            Some(found) => {
                for change in &found.changed {
                    out.push_str(&format!("- since last trusted: {change}\n"));
                }
                for hook in &found.hooks {
                    out.push_str(&format!("- {hook}\n"));
                }
                for left in &found.left_out {
                    out.push_str(&format!("- left out: {left}\n"));
                }
            }
            None if config.hooks.import.is_empty() => out.push_str(
                "No workspace hooks are read while `[hooks] import` is not set (docs/hooks.md).\n",
            ),
            None => out.push_str("It brings no hooks Pincer reads.\n"),
        }
    }
    store.shutdown();
    print(&out)?;
    Ok(crate::app::exit::OK)
}

pub async fn verify(flags: &Flags, json_output: bool) -> Result<u8, Failure> {
    const PAGE: usize = 10_000;
    let store = crate::app::open_store(flags)?;
    let audit: &dyn Audit = &store;
    let mut walk = ChainWalk::default();
    let mut broken = None;
    'pages: loop {
        let page = audit
            .receipts(walk.count() + 1, PAGE)
            .await
            .map_err(Failure::failed)?;
        if page.is_empty() {
            break;
        }
        for receipt in &page {
            if let Err(at) = walk.push(receipt) {
                broken = Some(at);
                break 'pages;
            }
        }
    }
    let missing = audit.missing_receipts().await.map_err(Failure::failed)?;
    store.shutdown();
    let ok = broken.is_none() && missing.is_empty();
    if json_output {
        let value = json!({
            "ok": ok,
            "receipts": walk.count(),
            "head": walk.head(),
            "broken": broken.as_ref().map(|b| json!({"seq": b.seq, "problem": b.problem})),
            "missing": missing.iter().map(|(run, results, receipts)| json!({
                "run_id": run.as_str(), "tool_results": results, "receipts": receipts,
            })).collect::<Vec<_>>(),
        });
        print(&format!("{value}\n"))?;
    } else {
        let mut out = String::new();
        match &broken {
            Some(at) => out.push_str(&format!(
                "BROKEN at receipt {}: {}\n{} receipts before it verify\n",
                at.seq,
                at.problem,
                walk.count()
            )),
            None => out.push_str(&format!(
                "ok: {} receipts, chain intact, head {}\n",
                walk.count(),
                walk.head()
            )),
        }
        for (run, results, receipts) in &missing {
            out.push_str(&format!(
                "MISSING: run {run} has {results} tool results on the tape but {receipts} receipts\n"
            ));
        }
        print(&out)?;
    }
    Ok(if ok { exit::OK } else { exit::RUN_FAILED })
}

pub fn config_show(flags: &Flags) -> Result<u8, Failure> {
    let config = crate::app::load_config(flags).map_err(Failure::usage)?;
    print(&config.render().map_err(Failure::usage)?)?;
    Ok(exit::OK)
}

/// The sandbox as `pincer doctor` and `initialize` report it: what the kernel
/// offers and what the configuration asks for.
pub async fn doctor(flags: &Flags, online: bool) -> Result<u8, Failure> {
    let mut problems = 0;
    let mut report = |ok: bool, what: &str, detail: String| {
        if !ok {
            problems += 1;
        }
        let mark = if ok { "ok  " } else { "FAIL" };
        format!("{mark} {what:<12} {detail}\n")
    };
    let mut out = format!("pincer {}\n", env!("CARGO_PKG_VERSION"));
    let config = match crate::app::load_config(flags) {
        Ok(config) => {
            let file = config
                .file
                .as_ref()
                .map_or_else(|| "none (defaults)".to_owned(), |p| p.display().to_string());
            out.push_str(&report(true, "config", file));
            config
        }
        Err(err) => {
            out.push_str(&report(false, "config", err.to_string()));
            print(&out)?;
            return Ok(exit::USAGE);
        }
    };
    out.push_str(&report(
        true,
        "data dir",
        config.data_dir.value.display().to_string(),
    ));
    let (built, provider_problems) = crate::app::wiring::providers(&config);
    let loop_config = crate::app::wiring::runtime_config(&config).loop_config;
    if config.providers.is_empty() {
        out.push_str(&report(
            false,
            "providers",
            "none configured: run `pincer login`, or set OPENAI_API_KEY (OPENAI_BASE_URL for a \
             local server) and pass --model to `pincer run` (docs/providers.md)"
                .into(),
        ));
    }
    let config_file = config
        .file
        .as_ref()
        .map_or_else(|| "the config file".to_owned(), |p| p.display().to_string());
    let env = |name: &str| std::env::var(name).ok().filter(|v| !v.is_empty());
    for (name, provider) in &config.providers {
        let what = format!("provider {name}");
        let setup: Vec<&str> = provider_problems
            .iter()
            .filter(|p| !p.new_sessions_only && p.message.starts_with(&format!("provider {name}:")))
            .map(|p| p.message.as_str())
            .collect();
        if !setup.is_empty() {
            out.push_str(&report(false, &what, setup.join("; ")));
            continue;
        }
        let p = &provider.value;
        let is_default = config.provider.as_ref().is_some_and(|d| &d.value == name);
        let model = if is_default {
            config.model.as_ref().map(|m| m.value.clone())
        } else {
            None
        }
        .or_else(|| p.models.first().cloned())
        .or_else(|| {
            (p.kind == crate::providers::ProviderKind::Scripted)
                .then(|| crate::providers::SCRIPTED_MODEL.to_owned())
        });
        let mut detail = format!("{} from {}", p.kind.as_str(), provider.origin);
        if is_default {
            detail.push_str(", the default");
        }
        let access = crate::app::wiring::access(p, &env);
        if let Some(url) = &access.base_url {
            detail.push_str(&format!(", {url}"));
        }
        if access.api_key.is_some() {
            detail.push_str(", key set");
        }
        let Some(model) = model else {
            if p.kind == crate::providers::ProviderKind::Failover {
                out.push_str(&report(true, &what, detail));
                continue;
            }
            let fix = if is_default {
                format!(
                    "set `model = \"...\"` in {config_file} or PINCER_MODEL, or `models = [\"...\"]` in [providers.{name}]"
                )
            } else {
                format!("set `models = [\"...\"]` in [providers.{name}] of {config_file}")
            };
            out.push_str(&report(false, &what, format!("{detail}; no model: {fix}")));
            continue;
        };
        detail.push_str(&format!(", model {model}"));
        let remote = matches!(
            p.kind,
            crate::providers::ProviderKind::Openai | crate::providers::ProviderKind::Anthropic
        );
        if online && remote {
            let answered = crate::providers::list_models(
                &p.kind,
                access.base_url.as_deref(),
                access.api_key.as_deref(),
                std::time::Duration::from_secs(5),
            )
            .await;
            match answered {
                Ok(models) => {
                    detail.push_str(&format!("; answers ({} models listed)", models.len()));
                    let window = crate::core::models::Window::resolve(
                        loop_config.configured_window(&model),
                        built.window_source(name).as_deref(),
                        &model,
                    )
                    .await;
                    detail.push_str(&format!(
                        "; window {} tokens, {}",
                        window.tokens, window.origin
                    ));
                    out.push_str(&report(true, &what, detail));
                }
                Err(err) => out.push_str(&report(
                    false,
                    &what,
                    format!("{detail}; does not answer: {err} (check the URL or key; `pincer login` checks both)"),
                )),
            }
        } else {
            out.push_str(&report(true, &what, detail));
        }
    }
    if config.memory.enabled.unwrap_or(true) {
        match crate::app::wiring::embedder(&config, &env) {
            Ok(None) => out.push_str(&report(
                true,
                "memory",
                "searched by words (set `embeddings` in [memory] to search by meaning too)".into(),
            )),
            Ok(Some(embedder)) if online => {
                let probe = ["pincer doctor".to_owned()];
                match embedder.embed(&probe).await {
                    Ok(vectors) => out.push_str(&report(
                        true,
                        "memory",
                        format!(
                            "searched by words and meaning; embeddings from {} answer ({} dimensions)",
                            embedder.label(),
                            vectors.first().map_or(0, Vec::len)
                        ),
                    )),
                    Err(err) => out.push_str(&report(
                        false,
                        "memory",
                        format!(
                            "embeddings from {} do not answer: {} (memory is searched by words alone until they do)",
                            embedder.label(),
                            err.message
                        ),
                    )),
                }
            }
            Ok(Some(embedder)) => out.push_str(&report(
                true,
                "memory",
                format!(
                    "searched by words and meaning, embeddings from {} (not asked; --online asks)",
                    embedder.label()
                ),
            )),
            Err(message) => out.push_str(&report(false, "memory", message)),
        }
    }
    let mcp = crate::mcp::Factory::new(crate::app::wiring::mcp_settings(&config));
    if !config.mcp_servers.is_empty() {
        let here = std::env::current_dir().unwrap_or_else(|_| std::path::PathBuf::from("/"));
        for (name, outcome) in mcp.check(&here).await {
            let what = format!("mcp {name}");
            match outcome {
                Ok(tools) => out.push_str(&report(true, &what, format!("started, {tools} tools"))),
                Err(problem) => out.push_str(&report(
                    false,
                    &what,
                    format!("{problem} (fix [mcpServers.{name}] in {config_file})"),
                )),
            }
        }
    }
    let path = config.database_path();
    match crate::store::Store::open(&path) {
        Ok((store, _)) => {
            let version = crate::store::probe(&path).map_err(Failure::failed)?;
            out.push_str(&report(
                true,
                "database",
                format!("{} (schema version {version})", path.display()),
            ));
            store.shutdown();
        }
        Err(err) => out.push_str(&report(false, "database", err.to_string())),
    }
    let (ok, token) = crate::http::auth::describe(
        &crate::app::wiring::token_place(&config),
        &config.data_dir.value,
        &|name| std::env::var(name).ok(),
    );
    out.push_str(&report(ok, "http token", token));
    let sandbox = crate::sandbox::status();
    let setting = config.sandbox.value;
    let ok = sandbox.enforced || setting == SandboxSetting::BestEffort;
    let consequence = match (sandbox.enforced, setting) {
        (true, _) => "shell commands run confined",
        (false, SandboxSetting::BestEffort) => {
            "shell commands run unconfined (sandbox = \"best_effort\")"
        }
        (false, SandboxSetting::Required) => "shell commands are refused (sandbox = \"required\")",
    };
    out.push_str(&report(
        ok,
        "sandbox",
        format!("{}; {consequence}", sandbox.detail),
    ));
    let protected = config.paths.protected_entries().join(", ");
    out.push_str(&report(
        true,
        "protected",
        match crate::sandbox::readonly::available() {
            Ok(()) => format!("{protected}: read-only for commands (a mount namespace each)"),
            Err(why) => format!(
                "{protected}: {why}; what a command writes there is undone after it instead"
            ),
        },
    ));
    print(&out)?;
    if problems > 0 {
        Err(Failure::failed(anyhow!("{problems} problem(s) found")))
    } else {
        Ok(exit::OK)
    }
}
