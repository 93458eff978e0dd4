//! Each write applied inside the writer's transaction on PostgreSQL: the
//! core's here, the chat channels' in `channels`, memory's in `memory`.
//! The same effects as the SQLite writer's (`store::writer`), in
//! PostgreSQL's SQL.

use super::conn::Conn;
use futures::future::BoxFuture;

use super::PgFailure;
use super::writer::{GroupLeases, boxed};
use crate::core::approval::Grant;
use crate::core::control::Control;
use crate::core::event::{Event, EventRecord, RunState, StopReason};
use crate::core::hooks::TrustWrite;
use crate::core::ids::{RunId, SessionId};
use crate::core::journal::Write;
use crate::core::lease::Fence;
use crate::core::models::Cost;
use crate::core::receipt::ReceiptBody;
use crate::core::session::{Message, Millis, Mode, Session};
use crate::core::usage::Usage;
use crate::store::StoreError;

type Applied = Result<(), PgFailure>;

fn json<T: serde::Serialize>(value: &T) -> Result<String, PgFailure> {
    serde_json::to_string(value).map_err(|err| PgFailure::Store(StoreError::Write(err.to_string())))
}

fn int(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

/// Applies one write inside the group's transaction.
pub(super) fn apply<'a>(
    client: &'a Conn<'a>,
    write: &'a Write,
    leases: &'a mut GroupLeases,
) -> BoxFuture<'a, Applied> {
    boxed(async move {
        match write {
            Write::InsertSession(session) => insert_session(client, session).await,
            Write::UpdateSettings {
                id,
                provider,
                model,
                thought_level,
                mode,
                at,
            } => {
                update_settings(
                    client,
                    id,
                    provider,
                    model,
                    thought_level.as_deref(),
                    *mode,
                    *at,
                )
                .await
            }
            Write::SetTitle { id, title } => {
                client
                    .execute(
                        "UPDATE sessions SET title = $2 WHERE id = $1",
                        &[&id.as_str(), title],
                    )
                    .await?;
                Ok(())
            }
            Write::SetClosed { id, closed, at } => {
                client
                    .execute(
                        "UPDATE sessions SET closed = $2, updated_at = $3 WHERE id = $1",
                        &[&id.as_str(), closed, at],
                    )
                    .await?;
                Ok(())
            }
            Write::DeleteSession { id, at } => delete_session(client, id, *at).await,
            Write::AppendMessage {
                session_id,
                run_id,
                message,
                at,
            } => append_message(client, session_id.as_str(), run_id.as_ref(), message, *at).await,
            Write::InsertRun { id, session_id, at } => {
                insert_run(client, id, session_id, *at).await
            }
            Write::SetRunState {
                id,
                state,
                stop_reason,
                error,
                usage,
                cost,
                at,
            } => {
                let report = Report {
                    stop_reason: *stop_reason,
                    error: error.as_deref(),
                    usage,
                    cost: cost.as_ref(),
                };
                set_run_state(client, id, *state, &report, *at).await
            }
            Write::InterruptRuns { session, error, at } => {
                interrupt_runs(client, session, error, *at).await
            }
            Write::Control {
                session,
                control,
                at,
            } => leave_control(client, session, control, *at).await,
            Write::TakeControl { id } => take_control(client, *id).await,
            Write::AppendEvent(record) => append_event(client, record).await,
            Write::AppendReceipt(body) => append_receipt(client, body).await,
            Write::PutGrant {
                session_id,
                grant,
                at,
            } => put_grant(client, session_id, grant, *at).await,
            Write::Trust(write) => trust(client, write).await,
            Write::Channel(write) => super::channels::apply(client, write).await,
            Write::Memory(write) => super::memory::apply(client, write).await,
            Write::Schedule(write) => super::schedules::apply(client, write).await,
            Write::Fenced { fence, write } => fenced(client, fence, write, leases).await,
            Write::Together(writes) => together(client, writes, leases).await,
        }
    })
}

async fn fenced(
    client: &Conn<'_>,
    fence: &Fence,
    write: &Write,
    leases: &mut GroupLeases,
) -> Applied {
    let stored = leases.stored(client, &fence.key).await?;
    if !crate::core::lease::admits(stored.as_ref(), fence) {
        return Err(PgFailure::Store(StoreError::Fenced(format!(
            "{}: the lease this write was made under (token {}) is no longer current{}; refused",
            fence.key,
            fence.token,
            stored.map_or(String::new(), |s| format!(
                " (now token {}, {})",
                s.token, s.holder
            ))
        ))));
    }
    apply(client, write, leases).await
}

/// Writes that land together: a savepoint, so one failing write undoes the
/// others of this batch and nothing else of the group.
async fn together(client: &Conn<'_>, writes: &[Write], leases: &mut GroupLeases) -> Applied {
    client.batch_execute("SAVEPOINT together").await?;
    let mut failed = None;
    for write in writes {
        if let Err(err) = apply(client, write, leases).await {
            failed = Some(err);
            break;
        }
    }
    match failed {
        None => {
            client.batch_execute("RELEASE SAVEPOINT together").await?;
            Ok(())
        }
        Some(err) => {
            client
                .batch_execute("ROLLBACK TO SAVEPOINT together; RELEASE SAVEPOINT together")
                .await?;
            Err(err)
        }
    }
}

async fn insert_session(client: &Conn<'_>, s: &Session) -> Applied {
    let inserted = client
        .execute(
            "INSERT INTO sessions (id, workspace, origin, provider, model, mode, title, mcp_servers, created_at, updated_at, closed, conversation, system_prompt, instructions, parent_session, parent_run, parent_call, thought_level)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18)
             ON CONFLICT (id) DO NOTHING",
            &[
                &s.id.as_str(),
                &s.workspace.to_string_lossy().as_ref(),
                &s.origin.as_str(),
                &s.provider,
                &s.model,
                &s.mode.as_str(),
                &s.title,
                &json(&s.mcp_servers)?,
                &s.created_at,
                &s.updated_at,
                &s.closed,
                &s.conversation,
                &s.prompt.system_prompt,
                &s.prompt.instructions,
                &s.parent.as_ref().map(|p| p.session.as_str()),
                &s.parent.as_ref().map(|p| p.run.as_str()),
                &s.parent.as_ref().map(|p| p.call.as_str()),
                &s.thought_level,
            ],
        )
        .await?;
    if inserted == 0 {
        return Err(PgFailure::Store(StoreError::Conflict(format!(
            "session {} exists already",
            s.id
        ))));
    }
    Ok(())
}

async fn update_settings(
    client: &Conn<'_>,
    id: &SessionId,
    provider: &str,
    model: &str,
    thought_level: Option<&str>,
    mode: Mode,
    at: Millis,
) -> Applied {
    client
        .execute(
            "UPDATE sessions SET provider = $2, model = $3, mode = $4, updated_at = $5, thought_level = $6 WHERE id = $1",
            &[&id.as_str(), &provider, &model, &mode.as_str(), &at, &thought_level],
        )
        .await?;
    Ok(())
}

/// The session and its subagents' sessions: tombstones first, so the
/// tape's trigger lets their tapes go.
async fn delete_session(client: &Conn<'_>, id: &SessionId, at: Millis) -> Applied {
    client
        .execute(
            "UPDATE sessions SET deleted_at = $2, closed = TRUE, title = NULL, mcp_servers = '[]',
                    system_prompt = NULL, instructions = NULL, updated_at = $2
             WHERE (id = $1 OR parent_session = $1) AND deleted_at IS NULL",
            &[&id.as_str(), &at],
        )
        .await?;
    for table in ["messages", "grants", "tape", "channel_sessions"] {
        client
            .execute(
                &format!(
                    "DELETE FROM {table} WHERE session_id IN
                       (SELECT id FROM sessions WHERE (id = $1 OR parent_session = $1) AND deleted_at IS NOT NULL)"
                ),
                &[&id.as_str()],
            )
            .await?;
    }
    Ok(())
}

/// Appends a message to the session's conversation, numbered after its last.
pub(super) async fn append_message(
    client: &Conn<'_>,
    session_id: &str,
    run_id: Option<&RunId>,
    message: &Message,
    at: Millis,
) -> Applied {
    let role = match message {
        Message::User { .. } => "user",
        Message::Assistant { .. } => "assistant",
        Message::Tool { .. } => "tool",
        Message::Summary { .. } => "summary",
        Message::Note { .. } => "note",
    };
    // The session's row is locked first (its `updated_at`), so two
    // instances appending to one session number their messages in turn.
    client
        .execute(
            "UPDATE sessions SET updated_at = $2 WHERE id = $1",
            &[&session_id, &at],
        )
        .await?;
    client
        .execute(
            "INSERT INTO messages (session_id, seq, run_id, role, body, at)
             VALUES ($1, (SELECT COALESCE(MAX(seq), 0) + 1 FROM messages WHERE session_id = $1), $2, $3, $4, $5)",
            &[&session_id, &run_id.map(RunId::as_str), &role, &json(message)?, &at],
        )
        .await?;
    Ok(())
}

/// A run queued, owned by this process, at the next place among its
/// session's runs (the session's row locked: places are handed out in
/// commit order).
async fn insert_run(client: &Conn<'_>, id: &RunId, session_id: &SessionId, at: Millis) -> Applied {
    let row = client
        .query_opt(
            "UPDATE sessions SET runs_made = runs_made + 1, updated_at = $2 WHERE id = $1 RETURNING runs_made",
            &[&session_id.as_str(), &at],
        )
        .await?;
    let pos: i64 = match row {
        Some(row) => row.try_get(0)?,
        // A run of a session this store does not hold (the SQLite writer
        // accepts one too): placed after every other.
        None => client
            .query_one(
                "SELECT COALESCE(MAX(pos), 0) + 1 FROM runs WHERE session_id = $1",
                &[&session_id.as_str()],
            )
            .await?
            .try_get(0)?,
    };
    client
        .execute(
            "INSERT INTO runs (id, session_id, pos, state, owner, created_at) VALUES ($1, $2, $3, 'queued', $4, $5)",
            &[&id.as_str(), &session_id.as_str(), &pos, &crate::store::process_tag(), &at],
        )
        .await?;
    Ok(())
}

/// What a run's state change reports besides the state.
pub(super) struct Report<'a> {
    pub(super) stop_reason: Option<StopReason>,
    pub(super) error: Option<&'a str>,
    pub(super) usage: &'a Usage,
    pub(super) cost: Option<&'a Cost>,
}

pub(super) async fn set_run_state(
    client: &Conn<'_>,
    id: &RunId,
    state: RunState,
    report: &Report<'_>,
    at: Millis,
) -> Applied {
    let started = matches!(state, RunState::Running).then_some(at);
    let ended = state.is_terminal().then_some(at);
    client
        .execute(
            "UPDATE runs SET state = $2, stop_reason = $3, error = $4,
                input_tokens = $5, output_tokens = $6,
                cached_input_tokens = $7, reasoning_tokens = $8, cost = $9, currency = $10,
                started_at = COALESCE(started_at, $11), ended_at = COALESCE($12, ended_at)
             WHERE id = $1",
            &[
                &id.as_str(),
                &state.as_str(),
                &report.stop_reason.map(|r| r.as_str()),
                &report.error,
                &int(report.usage.input_tokens),
                &int(report.usage.output_tokens),
                &int(report.usage.cached_input_tokens),
                &int(report.usage.reasoning_tokens),
                &report.cost.map(|c| c.amount),
                &report.cost.map(|c| c.currency.as_str()),
                &started,
                &ended,
            ],
        )
        .await?;
    Ok(())
}

/// Ends the runs of `session` left `running` or `waiting`, as interrupted.
async fn interrupt_runs(
    client: &Conn<'_>,
    session: &SessionId,
    error: &str,
    at: Millis,
) -> Applied {
    let working = client
        .query(
            "SELECT id FROM runs WHERE session_id = $1 AND state IN ('running', 'waiting')
             ORDER BY created_at, id FOR UPDATE",
            &[&session.as_str()],
        )
        .await?;
    for row in working {
        let run: String = row.try_get(0)?;
        interrupt_run(client, &run, session.as_str(), error, at).await?;
    }
    Ok(())
}

/// Marks one unfinished run failed as interrupted with `error`, keeping
/// what it streamed (as `store::writer::recovery` does on SQLite).
pub(super) async fn interrupt_run(
    client: &Conn<'_>,
    run_id: &str,
    session_id: &str,
    error: &str,
    now: Millis,
) -> Applied {
    let run = RunId::from_string(run_id.to_owned());
    let events = super::reads::tape_in(client, &run, 0, None)
        .await
        .map_err(PgFailure::Store)?;
    keep_partial_turn(client, &run, session_id, &events, now).await?;
    let (usage, cost) = crate::store::used(&events);
    let record = EventRecord {
        session_id: SessionId::from_string(session_id.to_owned()),
        run_id: run.clone(),
        seq: events.last().map_or(0, |e| e.seq + 1),
        at: now,
        event: Event::State {
            state: RunState::Failed,
            stop_reason: None,
            error: Some(error.to_owned()),
            usage: (usage != Usage::default()).then_some(usage),
            cost: cost.clone(),
        },
    };
    append_event(client, &record).await?;
    let report = Report {
        stop_reason: None,
        error: Some(error),
        usage: &usage,
        cost: cost.as_ref(),
    };
    set_run_state(client, &run, RunState::Failed, &report, now).await
}

/// The partial reply of a model turn the run cut short joins the history.
async fn keep_partial_turn(
    client: &Conn<'_>,
    run: &RunId,
    session_id: &str,
    events: &[EventRecord],
    now: Millis,
) -> Applied {
    let row = client
        .query_one(
            "SELECT COUNT(*), COUNT(*) FILTER (WHERE role = 'assistant') FROM messages WHERE run_id = $1",
            &[&run.as_str()],
        )
        .await?;
    let (stored, stored_turns): (i64, i64) = (row.try_get(0)?, row.try_get(1)?);
    if stored == 0 {
        return Ok(());
    }
    let last_said = if stored_turns > 0 {
        client
            .query_opt(
                "SELECT body FROM messages WHERE session_id = $2 AND run_id = $1 AND role = 'assistant'
                 ORDER BY seq DESC LIMIT 1",
                &[&run.as_str(), &session_id],
            )
            .await?
            .map(|row| row.try_get::<_, String>(0))
            .transpose()?
            .and_then(|body| serde_json::from_str::<Message>(&body).ok())
            .and_then(|message| match message {
                Message::Assistant { text, thought, .. } => Some((text, thought)),
                Message::User { .. }
                | Message::Tool { .. }
                | Message::Summary { .. }
                | Message::Note { .. } => None,
            })
    } else {
        None
    };
    let partial = crate::core::run::partial_turn(
        events,
        usize::try_from(stored_turns).unwrap_or(0),
        last_said.as_ref().map(|(t, th)| (t.as_str(), th.as_str())),
    );
    match partial {
        Some(partial) => append_message(client, session_id, Some(run), &partial, now).await,
        None => Ok(()),
    }
}

async fn leave_control(
    client: &Conn<'_>,
    session: &SessionId,
    control: &Control,
    at: Millis,
) -> Applied {
    client
        .execute(
            "INSERT INTO session_controls (session_id, control, at) VALUES ($1, $2, $3)",
            &[&session.as_str(), &json(control)?, &at],
        )
        .await?;
    Ok(())
}

/// Takes a request off the journal, once: a conflict when another took it.
async fn take_control(client: &Conn<'_>, id: i64) -> Applied {
    let taken = client
        .execute("DELETE FROM session_controls WHERE id = $1", &[&id])
        .await?;
    if taken == 0 {
        return Err(PgFailure::Store(StoreError::Conflict(format!(
            "control {id} was taken already"
        ))));
    }
    // Requests nobody took within ten minutes (their owner gone) go too.
    client
        .execute(
            "DELETE FROM session_controls WHERE at < $1",
            &[&(crate::core::session::now_millis() - 600_000)],
        )
        .await?;
    Ok(())
}

pub(super) async fn append_event(client: &Conn<'_>, record: &EventRecord) -> Applied {
    client
        .execute(
            "INSERT INTO tape (run_id, session_id, seq, at, kind, payload) VALUES ($1, $2, $3, $4, $5, $6)",
            &[
                &record.run_id.as_str(),
                &record.session_id.as_str(),
                &int(record.seq),
                &record.at,
                &record.event.kind(),
                &json(&record.event)?,
            ],
        )
        .await?;
    Ok(())
}

/// Joins the receipt chain: the head row locked, so two instances never
/// link to the same receipt.
async fn append_receipt(client: &Conn<'_>, body: &ReceiptBody) -> Applied {
    let head = client
        .query_one(
            "SELECT seq, hash FROM receipt_head WHERE one FOR UPDATE",
            &[],
        )
        .await?;
    let (seq, prev): (i64, String) = (head.try_get(0)?, head.try_get(1)?);
    let seq = u64::try_from(seq).unwrap_or(0) + 1;
    let receipt = body.clone().chain(seq, &prev);
    client
        .execute(
            "INSERT INTO receipts (seq, session_id, run_id, call_id, tool, input_hash, output_hash, verdict, is_error, at, prev_hash, hash, hooks, skills)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14)",
            &[
                &int(receipt.seq),
                &body.session_id.as_str(),
                &body.run_id.as_str(),
                &body.call_id,
                &body.tool,
                &body.input_hash,
                &body.output_hash,
                &body.verdict.as_str(),
                &body.is_error,
                &body.at,
                &receipt.prev_hash,
                &receipt.hash,
                &(!body.hooks.is_empty()).then(|| body.hooks.join("\n")),
                &(!body.skills.is_empty()).then(|| body.skills.join("\n")),
            ],
        )
        .await?;
    client
        .execute(
            "UPDATE receipt_head SET seq = $1, hash = $2 WHERE one",
            &[&int(receipt.seq), &receipt.hash],
        )
        .await?;
    Ok(())
}

async fn put_grant(
    client: &Conn<'_>,
    session_id: &SessionId,
    grant: &Grant,
    at: Millis,
) -> Applied {
    client
        .execute(
            "INSERT INTO grants (session_id, tool, scope, allow, at) VALUES ($1, $2, $3, $4, $5)
             ON CONFLICT (session_id, tool, scope) DO UPDATE SET allow = excluded.allow, at = excluded.at",
            &[&session_id.as_str(), &grant.tool, &grant.scope, &grant.allow, &at],
        )
        .await?;
    Ok(())
}

async fn trust(client: &Conn<'_>, write: &TrustWrite) -> Applied {
    let TrustWrite::Set {
        root,
        trusted,
        at,
        files,
    } = write;
    let root = root.to_string_lossy();
    if !*trusted {
        client
            .execute(
                "DELETE FROM trusted_roots WHERE root = $1",
                &[&root.as_ref()],
            )
            .await?;
        return Ok(());
    }
    client
        .execute(
            "INSERT INTO trusted_roots (root, at, files) VALUES ($1, $2, $3)
             ON CONFLICT (root) DO UPDATE SET at = excluded.at, files = excluded.files",
            &[&root.as_ref(), at, &json(files)?],
        )
        .await?;
    Ok(())
}
