//! `pincer sessions list|rm|show`: the stored sessions, as a table or JSON
//! lines, and one session whole (its settings, remembered approvals, runs
//! and history).

use serde_json::json;

use super::print;
use super::runs::run_line;
use crate::app::{Failure, Flags, exit};
use crate::cli::SessionsCommand;
use crate::core::approval::Grant;
use crate::core::ids::{RunId, SessionId};
use crate::core::journal::{SessionFilter, SessionQuery};
use crate::core::run::RunInfo;
use crate::core::runtime::Runtime;
use crate::core::session::{Message, Origin, Session};
use crate::stdout::{table, timestamp as time};
use crate::views;

pub async fn sessions(flags: &Flags, command: &SessionsCommand) -> Result<u8, Failure> {
    let opened = crate::app::App::open(flags).await?;
    let runtime = &opened.runtime;
    match command {
        SessionsCommand::List {
            cwd,
            origin,
            state,
            channel,
            search,
            limit,
            json,
        } => {
            let filter = SessionFilter {
                origin: origin.as_deref().and_then(Origin::parse),
                closed: state.as_deref().map(|state| state == "closed"),
                channel: channel.clone(),
                conversation: None,
                words: search
                    .as_deref()
                    .unwrap_or_default()
                    .split_whitespace()
                    .map(str::to_owned)
                    .collect(),
            };
            list(runtime, cwd.as_deref(), filter, *limit, *json).await?
        }
        SessionsCommand::Rm { ids } => rm(runtime, ids).await?,
        SessionsCommand::Show { id, json } => {
            show(runtime, &SessionId::from_string(id.clone()), *json).await?
        }
    }
    opened.store.shutdown();
    Ok(exit::OK)
}

/// `sessions list`: newest first, in `cwd` when given, those that pass
/// `filter` (as `GET /v1/sessions` filters).
async fn list(
    runtime: &Runtime,
    cwd: Option<&std::path::Path>,
    filter: SessionFilter,
    limit: usize,
    json: bool,
) -> Result<(), Failure> {
    let filtered = cwd.is_some() || !filter.is_empty();
    let workspace = cwd
        .map(std::path::absolute)
        .transpose()
        .map_err(Failure::usage)?;
    let sessions = runtime
        .list_sessions(SessionQuery {
            workspace,
            after: None,
            limit,
            filter,
        })
        .await
        .map_err(Failure::failed)?;
    if json {
        let mut out = String::new();
        for session in &sessions {
            out.push_str(&views::session(session).to_string());
            out.push('\n');
        }
        return print(&out);
    }
    if sessions.is_empty() {
        if filtered {
            eprintln!("pincer: no sessions match");
        } else {
            eprintln!("pincer: no sessions yet");
        }
        return print("");
    }
    let mut rows = vec![
        [
            "SESSION",
            "UPDATED",
            "FROM",
            "STATUS",
            "MODEL",
            "WORKSPACE",
            "TITLE",
        ]
        .map(str::to_owned),
    ];
    for session in &sessions {
        let runs = runtime.runs(&session.id).await.map_err(Failure::failed)?;
        rows.push(session_row(session, runs.last()));
    }
    print(&table(&rows))
}

fn session_row(session: &Session, last: Option<&RunInfo>) -> [String; 7] {
    [
        session.id.to_string(),
        time(session.updated_at),
        session.origin.as_str().to_owned(),
        session_status(session, last).to_owned(),
        format!("{}/{}", session.provider, session.model),
        session.workspace.display().to_string(),
        session
            .title
            .clone()
            .unwrap_or_else(|| "(untitled)".to_owned()),
    ]
}

/// `sessions rm`: each session deleted, or the first that cannot be.
async fn rm(runtime: &Runtime, ids: &[String]) -> Result<(), Failure> {
    for id in ids {
        let id = SessionId::from_string(id.clone());
        runtime.delete_session(&id).await.map_err(Failure::usage)?;
        eprintln!("pincer: deleted session {id}");
    }
    runtime.shutdown().await;
    Ok(())
}

/// `sessions show`: one session whole.
async fn show(runtime: &Runtime, id: &SessionId, json: bool) -> Result<(), Failure> {
    let session = runtime.session(id).await.map_err(Failure::usage)?;
    let history = runtime.history(id).await.map_err(Failure::failed)?;
    let runs = runtime.runs(id).await.map_err(Failure::failed)?;
    let grants = runtime.grants(id).await.map_err(Failure::failed)?;
    if json {
        let value = json!({
            "session": views::session(&session),
            "grants": grants,
            "history": history.iter().map(|entry| json!({
                "run_id": entry.run_id.as_ref().map(RunId::as_str),
                "at": entry.at,
                "message": entry.message,
            })).collect::<Vec<_>>(),
            "runs": runs.iter().map(views::run).collect::<Vec<_>>(),
        });
        return print(&format!("{value}\n"));
    }
    let mut out = settings_text(&session);
    out.push_str(&grants_text(&grants));
    out.push_str(&format!("\nruns ({})\n", runs.len()));
    for run in &runs {
        out.push_str(&format!("  {}\n", run_line(run)));
    }
    out.push_str(&format!("\nhistory ({} messages)\n", history.len()));
    for entry in &history {
        out.push_str(&message_text(&entry.message));
    }
    print(&out)
}

/// A session's settings, a line each.
fn settings_text(session: &Session) -> String {
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
    out
}

/// The remembered approvals, when there are any.
fn grants_text(grants: &[Grant]) -> String {
    if grants.is_empty() {
        return String::new();
    }
    let mut out = format!("\nremembered approvals ({})\n", grants.len());
    for grant in grants {
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
    out
}

/// A session's state in a listing: closed, its last run's state, or new.
fn session_status(session: &Session, last: Option<&RunInfo>) -> &'static str {
    match last {
        _ if session.closed => "closed",
        Some(run) => run.state.as_str(),
        None => "new",
    }
}

/// A message of the history as `sessions show` and `context show` print it.
pub(super) fn message_text(message: &Message) -> String {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::session::{ContentPart, ToolCall};

    #[test]
    fn each_message_reads_as_in_a_transcript() {
        let user = Message::User {
            content: vec![ContentPart::Text {
                text: "two\nlines".into(),
            }],
        };
        assert_eq!(message_text(&user), "> two\n> lines\n");
        let assistant = Message::Assistant {
            text: "Looking.".into(),
            thought: String::new(),
            tool_calls: vec![ToolCall {
                id: "c1".into(),
                name: "read_file".into(),
                arguments: serde_json::json!({"path": "a"}),
            }],
            interrupted: true,
        };
        assert_eq!(
            message_text(&assistant),
            "Looking.\n[tool call read_file {\"path\":\"a\"}]\n[interrupted]\n"
        );
        let tool = Message::Tool {
            call_id: "c1".into(),
            content: "no such file".into(),
            is_error: true,
        };
        assert_eq!(message_text(&tool), "[tool error: no such file]\n");
        let summary = Message::Summary {
            text: "Earlier: edits.".into(),
            turns: 3,
        };
        assert_eq!(
            message_text(&summary),
            "[summary of the earlier conversation]\nEarlier: edits.\n"
        );
        assert_eq!(
            message_text(&Message::Note {
                text: "undone".into()
            }),
            "[note: undone]\n"
        );
    }

    #[test]
    fn remembered_approvals_name_their_scope() {
        assert_eq!(grants_text(&[]), "");
        let grants = [
            Grant {
                tool: "shell".into(),
                scope: "cargo test".into(),
                allow: true,
            },
            Grant {
                tool: "write_file".into(),
                scope: String::new(),
                allow: false,
            },
        ];
        assert_eq!(
            grants_text(&grants),
            "\nremembered approvals (2)\n  always allow  shell `cargo test`\n  always reject  write_file every call\n"
        );
    }
}
