//! `pincer context show`: what a session's next model turn would be sent,
//! counted.

use anyhow::anyhow;

use super::print;
use super::sessions::message_text;
use crate::app::{Failure, Flags, exit};
use crate::cli::ContextCommand;
use crate::core::ids::SessionId;
use crate::core::journal::SessionQuery;
use crate::core::runtime::{ContextView, Runtime};

pub async fn context(flags: &Flags, command: &ContextCommand) -> Result<u8, Failure> {
    let ContextCommand::Show { session, json } = command;
    let opened = crate::app::App::open(flags).await?;
    let runtime = opened.runtime.clone();
    let id = match session {
        Some(id) => SessionId::from_string(id.clone()),
        None => newest_here(&runtime).await?,
    };
    let view = runtime.context(&id).await.map_err(Failure::usage)?;
    let out = if *json {
        let shown = crate::views::ContextView::new(id.as_str(), view);
        format!("{}\n", crate::views::json(&shown))
    } else {
        text(&id, &view)
    };
    print(&out)?;
    opened.store.shutdown();
    Ok(exit::OK)
}

/// The newest session of the current directory.
async fn newest_here(runtime: &Runtime) -> Result<SessionId, Failure> {
    let cwd = std::env::current_dir()
        .and_then(|d| d.canonicalize())
        .map_err(|err| Failure::failed(anyhow!("cannot read the current directory: {err}")))?;
    let newest = runtime
        .list_sessions(SessionQuery {
            workspace: Some(cwd.clone()),
            after: None,
            limit: 1,
            ..SessionQuery::default()
        })
        .await
        .map_err(Failure::failed)?;
    match newest.into_iter().next() {
        Some(session) => Ok(session.id),
        None => Err(Failure::usage(anyhow!(
            "no session in {}; pass --session ID (see `pincer sessions list`)",
            cwd.display()
        ))),
    }
}

fn total(view: &ContextView) -> usize {
    view.system_tokens + view.tool_tokens + view.message_tokens.iter().sum::<usize>()
}

/// How many skills the catalogue offers, which it lists by name only and
/// which it leaves out to stay within its budget.
fn skills_line(view: &ContextView) -> String {
    let count = view.skills;
    let plural = if count == 1 { "" } else { "s" };
    let mut line = match view.skills_shortened.len() {
        0 => format!("skills ({count:>3})     in full in the system prompt\n"),
        n => format!(
            "skills ({count:>3})     {n} of {count} skill{plural} listed by name only to fit the catalogue's budget (least recently used): {}\n",
            view.skills_shortened.join(", ")
        ),
    };
    if !view.skills_omitted.is_empty() {
        line.push_str(&format!(
            "                {} more left out of the catalogue and the skill tool to fit its budget (least recently used): {}\n",
            view.skills_omitted.len(),
            view.skills_omitted.join(", ")
        ));
    }
    line
}

/// The counts, then the system prompt, the tools and the messages.
fn text(id: &SessionId, view: &ContextView) -> String {
    let message_tokens: usize = view.message_tokens.iter().sum();
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
        total(view),
        view.counted_by,
        view.calibration
    );
    if view.skills > 0 {
        out.push_str(&skills_line(view));
    }
    out.push_str("\n--- system prompt ---\n");
    out.push_str(&view.system);
    out.push_str("\n\n--- tools ---\n");
    for tool in &view.tools {
        out.push_str(&format!(
            "{}: {}\n",
            tool.name,
            tool.description.lines().next().unwrap_or_default()
        ));
    }
    out.push_str("\n--- messages ---\n");
    for (message, tokens) in view.messages.iter().zip(&view.message_tokens) {
        out.push_str(&format!("({tokens} tokens)\n"));
        out.push_str(&message_text(message));
    }
    out
}
