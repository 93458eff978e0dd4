//! The operations the HTTP face offers, shared by the REST routes and the
//! JSON-RPC methods: typed parameters in, the JSON the client sees out.

use std::path::PathBuf;
use std::sync::Arc;

use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::json;

use super::error::ApiError;
use crate::core::approval::ApprovalDecision;
use crate::core::commands::SessionCommand;
use crate::core::event::Event;
use crate::core::ids::{RunId, SessionId};
use crate::core::journal::{SessionCursor, SessionFilter, SessionQuery};
use crate::core::memory::MemoryItem;
use crate::core::memory::{Keeper, MemoryError, MemorySource, NewItem, Patch, Scope, ScopeKeys};
use crate::core::question::{MAX_ANSWER_CHARS, QuestionAnswer, QuestionOutcome};
use crate::core::quote::{clip_message, quote};
use crate::core::run::RunInfo;
use crate::core::runtime::{NewSession, Runtime};
use crate::core::session::{ContentPart, Mode, Origin, PromptSettings};
use crate::views::{
    Answered, ApprovalList, ApprovalView, ContextView, MemoryList, QuestionList, QuestionView,
    Replied, RunList, RunView, SessionDeleted, SessionList, SessionView, SkillDetails, SkillList,
    SteerRefusal, Steered, TapeView, VerifyView,
};

/// The longest memory search query, in characters.
const MAX_QUERY_CHARS: usize = 2000;
/// Sessions per page of a listing, unless the client asks for fewer.
pub const DEFAULT_PAGE: usize = 50;
/// The most sessions one page may hold.
pub const MAX_PAGE: usize = 500;

/// Parses JSON into `T`; a failure names the offending field.
pub fn parse<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, ApiError> {
    let mut deserializer = serde_json::Deserializer::from_slice(bytes);
    serde_path_to_error::deserialize(&mut deserializer).map_err(|err| {
        let path = err.path().to_string();
        let inner = err.into_inner();
        let syntax = inner.is_syntax() || inner.is_eof();
        let inner = inner.to_string();
        let inner = clip_message(inner.split(" at line ").next().unwrap_or(&inner));
        if syntax || matches!(path.as_str(), "" | "." | "?") {
            ApiError::bad_request(format!("invalid JSON body: {inner}"))
        } else {
            ApiError::bad_request(format!("`{}`: {inner}", quote(&path)))
        }
    })
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateSession {
    /// Absolute path of an existing directory; one that does not exist (or
    /// is no directory) is 404
    #[schemars(length(min = 1), regex(pattern = "^/"))]
    pub workspace: PathBuf,
    /// Default (or null): the configuration's
    #[schemars(with = "Option<Mode>")]
    pub mode: Option<String>,
    /// `provider/model` or a model name; one no provider has is 404; default
    /// (or null): the configuration's
    pub model: Option<String>,
    /// This session's system prompt, replacing the configured or built-in
    /// one (docs/prompt.md)
    pub system_prompt: Option<String>,
    /// Instructions for this session, appended after the configured ones
    pub instructions: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ListSessions {
    pub workspace: Option<PathBuf>,
    pub limit: Option<usize>,
    pub cursor: Option<String>,
    /// Only sessions of this origin (`Origin`'s names); empty: any.
    pub origin: Option<String>,
    /// `open` or `closed`; empty: either.
    pub state: Option<String>,
    /// Only sessions a conversation of the chat channel of this name maps;
    /// empty: any.
    pub channel: Option<String>,
    /// Words each of which the title, id, model or workspace holds, case
    /// aside; empty: any.
    pub q: Option<String>,
}

impl ListSessions {
    /// The filter the parameters ask for; a value that names nothing is
    /// 400 naming its parameter. An empty value asks for nothing.
    pub fn filter(&self) -> Result<SessionFilter, ApiError> {
        let given = |value: &Option<String>| value.clone().filter(|value| !value.is_empty());
        let origin = match given(&self.origin) {
            None => None,
            Some(name) => Some(Origin::parse(&name).ok_or_else(|| {
                ApiError::bad_request(format!(
                    "`origin`: expected one of {}, got {}",
                    Origin::ALL.map(Origin::as_str).join(", "),
                    shown(&name)
                ))
            })?),
        };
        let closed = match given(&self.state).as_deref() {
            None => None,
            Some("open") => Some(false),
            Some("closed") => Some(true),
            Some(other) => {
                return Err(ApiError::bad_request(format!(
                    "`state`: expected open or closed, got {}",
                    shown(other)
                )));
            }
        };
        let q = self.q.as_deref().unwrap_or_default();
        if q.chars().count() > MAX_QUERY_CHARS {
            return Err(ApiError::bad_request(format!(
                "`q`: at most {MAX_QUERY_CHARS} characters"
            )));
        }
        let words: Vec<String> = q.split_whitespace().map(str::to_owned).collect();
        Ok(SessionFilter {
            origin,
            closed,
            channel: given(&self.channel),
            conversation: None,
            words,
        })
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Prompt {
    /// The prompt as plain text.
    pub prompt: Option<String>,
    /// The prompt as content parts (`text`, `resource_link`, `resource`, `image`).
    pub content: Option<Vec<ContentPart>>,
}

/// A session command to queue as a run of its own.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RunCommand {
    pub command: CommandName,
}

/// `compact`: summarize the conversation so far to free the context window;
/// `undo`: revert the file edits of the last turn that made any
#[derive(Debug, Clone, Copy, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum CommandName {
    Compact,
    Undo,
}

/// A person's answer to an approval.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Answer {
    /// `allow_once`, `allow_always`, `reject_once` or `reject_always`
    #[schemars(with = "crate::views::PersonDecision")]
    pub decision: String,
}

/// The answer to a question (`ask_user`): the text, or a decline.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Reply {
    /// The answer; a number picks that option, an option's text that option.
    pub answer: Option<String>,
    /// `true` declines to answer.
    #[serde(default)]
    pub decline: bool,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ListMemory {
    /// Words to search for; without them the newest items come first.
    pub q: Option<String>,
    /// The items this session sees (the person's, its workspace's, its
    /// conversation's).
    pub session_id: Option<String>,
    /// The items a session in this directory would see (the person's and the
    /// workspace's).
    pub workspace: Option<PathBuf>,
    pub limit: Option<usize>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NewMemory {
    pub text: String,
    /// `user`, `workspace` (the default) or `conversation`.
    pub scope: Option<String>,
    /// Whose workspace or conversation: a session's.
    pub session_id: Option<String>,
    /// Whose workspace, without a session.
    pub workspace: Option<PathBuf>,
    pub tags: Option<Vec<String>>,
    pub pinned: Option<bool>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MemoryPatch {
    pub text: Option<String>,
    pub tags: Option<Vec<String>>,
    pub pinned: Option<bool>,
}

/// The operations, over one runtime.
#[derive(Clone)]
pub struct Api {
    pub runtime: Runtime,
    /// What `/v1/skills` lists.
    pub skills: SkillsAccess,
    /// What the health summary counts (`/v1/health/summary`).
    pub counts: Arc<dyn crate::core::journal::Counts>,
}

/// The store's ports the routes read beyond the runtime: the skills and
/// the trust table (`/v1/skills`), the receipt chain (`/v1/verify`).
#[derive(Clone)]
pub struct SkillsAccess {
    pub skills: Arc<dyn crate::core::skills::Skills>,
    pub journal: Arc<dyn crate::core::journal::Journal>,
    pub audit: Arc<dyn crate::core::journal::Audit>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ListSkills {
    /// The workspace whose skills are listed: absolute and existing
    /// (default: the server's current directory).
    pub workspace: Option<PathBuf>,
}

impl Api {
    /// `GET /v1/verify`: the receipt chain walked and cross-checked against
    /// the tapes, as `pincer verify --json` shows it.
    pub async fn verify(&self) -> Result<VerifyView, ApiError> {
        let audit = crate::core::journal::audit_chain(self.skills.audit.as_ref())
            .await
            .map_err(|err| ApiError::unavailable(format!("the receipts cannot be read: {err}")))?;
        Ok(VerifyView::from(&audit))
    }

    /// `GET /v1/skills`: the shape of `pincer skills list --json`.
    pub async fn list_skills(&self, query: ListSkills) -> Result<SkillList, ApiError> {
        Ok(self.skill_listing(query).await?.view())
    }

    /// `GET /v1/skills/{name}`: the shape of `pincer skills show --json`.
    pub async fn skill(&self, name: &str, query: ListSkills) -> Result<SkillDetails, ApiError> {
        let listing = self.skill_listing(query).await?;
        let entry = listing
            .get(name)
            .ok_or_else(|| ApiError::not_found(format!("no skill `{}`", quote(name))))?;
        entry.details().map_err(ApiError::internal)
    }

    async fn skill_listing(&self, query: ListSkills) -> Result<crate::skills::Listing, ApiError> {
        let workspace = match query.workspace {
            Some(dir) if dir.is_absolute() => dir,
            Some(dir) => {
                return Err(ApiError::bad_request(format!(
                    "`workspace` must be absolute, got `{}`",
                    quote(&dir.to_string_lossy())
                )));
            }
            None => std::env::current_dir().map_err(|err| {
                ApiError::internal(format!("cannot read the current directory: {err}"))
            })?,
        };
        let workspace = workspace.canonicalize().map_err(|err| {
            ApiError::bad_request(format!(
                "`workspace` `{}`: {err}",
                quote(&workspace.to_string_lossy())
            ))
        })?;
        let access = self.skills.clone();
        let trusted =
            crate::core::journal::project_trusted(access.journal.as_ref(), &workspace).await;
        tokio::task::spawn_blocking(move || {
            crate::skills::Listing::of(access.skills.as_ref(), &workspace, trusted)
        })
        .await
        .map_err(|err| ApiError::internal(format!("listing skills failed: {err}")))
    }
}

impl Api {
    pub async fn create_session(&self, request: CreateSession) -> Result<SessionView, ApiError> {
        let mode = match request.mode.as_deref() {
            None => None,
            Some(raw) => Some(Mode::parse(raw).ok_or_else(|| {
                ApiError::bad_request(format!(
                    "`mode`: expected read_only, supervised or full, got {}",
                    shown(raw)
                ))
            })?),
        };
        let workspace = request.workspace.to_string_lossy();
        if !request.workspace.is_absolute() {
            return Err(ApiError::bad_request(format!(
                "`workspace`: {} must be an absolute path",
                shown(&workspace)
            )));
        }
        // A well-formed name of something that does not exist: 404, like an
        // unknown session.
        if !request.workspace.is_dir() {
            return Err(ApiError::not_found(format!(
                "`workspace`: {} is not a directory",
                shown(&workspace)
            )));
        }
        if let Some(model) = &request.model
            && self.runtime.providers().find(model).is_none()
        {
            return Err(ApiError::not_found(format!(
                "`model`: unknown model {}",
                shown(model)
            )));
        }
        let mut session = self
            .runtime
            .create_session(NewSession {
                workspace: request.workspace,
                origin: Origin::Http,
                mcp_servers: json!([]),
                conversation: None,
                prompt: PromptSettings {
                    system_prompt: request.system_prompt,
                    instructions: request.instructions,
                },
            })
            .await?;
        if let Some(mode) = mode {
            session = self.runtime.set_mode(&session.id, mode).await?;
        }
        if let Some(model) = &request.model {
            session = self.runtime.set_model(&session.id, model).await?;
        }
        Ok(SessionView::from(&session))
    }

    pub async fn list_sessions(&self, request: ListSessions) -> Result<SessionList, ApiError> {
        let limit = request.limit.unwrap_or(DEFAULT_PAGE);
        if limit == 0 || limit > MAX_PAGE {
            return Err(ApiError::bad_request(format!(
                "`limit`: must be from 1 to {MAX_PAGE}, got {limit}"
            )));
        }
        let after = match request.cursor.as_deref() {
            None => None,
            Some(cursor) => Some(SessionCursor::parse(cursor).ok_or_else(|| {
                ApiError::bad_request(format!(
                    "`cursor`: {} is not a cursor this server issued",
                    shown(cursor)
                ))
            })?),
        };
        let filter = request.filter()?;
        let (sessions, next) = self
            .runtime
            .sessions_page(SessionQuery {
                workspace: request.workspace,
                after,
                limit,
                filter,
            })
            .await?;
        let next = next.map(|cursor| cursor.to_string());
        Ok(SessionList {
            sessions: sessions.iter().map(SessionView::from).collect(),
            next_cursor: next,
        })
    }

    pub async fn session(&self, id: &str) -> Result<SessionView, ApiError> {
        let session = self.runtime.session(&session_id(id)?).await?;
        Ok(SessionView::from(&session))
    }

    /// Deletes a session: its conversation and tapes go; its runs'
    /// summaries and receipts stay.
    pub async fn delete_session(&self, id: &str) -> Result<SessionDeleted, ApiError> {
        let id = session_id(id)?;
        self.runtime.delete_session(&id).await?;
        Ok(SessionDeleted {
            session_id: id.as_str().to_owned(),
            deleted: true,
        })
    }

    /// Steers the session's working prompt with a message: taken in at the
    /// run's next turn boundary (`injected`, with the run), or handed back
    /// when no prompt works (`promptRequired`).
    pub async fn steer(&self, id: &str, request: Prompt) -> Result<Steered, ApiError> {
        let content = prompt_content(request)?;
        let id = session_id(id)?;
        self.runtime.session(&id).await?;
        let here = match self.runtime.steer(&id, content.clone()) {
            Ok(here) => here,
            Err(crate::core::runtime::RuntimeError::SessionNotFound(_)) => None,
            Err(err) => return Err(err.into()),
        };
        // Not working here: maybe another process works the session's run.
        let run = match here {
            Some(run) => Some(run),
            None => self.runtime.steer_elsewhere(&id, content).await?,
        };
        Ok(match run {
            Some(run) => Steered::Injected {
                run_id: run.as_str().to_owned(),
            },
            None => Steered::PromptRequired {
                reason: SteerRefusal::NoRunningTurn,
            },
        })
    }

    /// Queues a prompt (opening the session if it is not live) and returns its
    /// run: as queued, or as it ended when `wait` is set.
    pub async fn prompt(&self, id: &str, request: Prompt, wait: bool) -> Result<RunView, ApiError> {
        let content = prompt_content(request)?;
        let id = session_id(id)?;
        self.runtime.open_session(&id).await?;
        let ticket = self.runtime.prompt(&id, content).await?;
        if !wait {
            let run = self.runtime.run(&ticket.run_id).await?;
            return Ok(RunView::from(&run));
        }
        // A dropped sender means the runtime shut down; the run is recorded either way.
        let _ = ticket.done.await;
        let run = self.runtime.run(&ticket.run_id).await?;
        let mut body = RunView::from(&run);
        // What the model answered, as a person reading the response expects.
        let reply: String = self
            .runtime
            .tape(&ticket.run_id, 0)
            .await?
            .iter()
            .filter_map(|record| {
                let Event::TextDelta { text } = &record.event else {
                    return None;
                };
                Some(text.as_str())
            })
            .collect();
        body.reply = Some(reply);
        Ok(body)
    }

    /// Queues `/compact` or `/undo` as a run of its own, after the runs
    /// before it, as an editor's or the terminal's slash command does.
    pub async fn command(&self, id: &str, request: RunCommand) -> Result<RunView, ApiError> {
        let command = match request.command {
            CommandName::Compact => SessionCommand::Compact,
            CommandName::Undo => SessionCommand::Undo,
        };
        let id = session_id(id)?;
        self.runtime.open_session(&id).await?;
        let ticket = self
            .runtime
            .command_as(&id, RunId::generate(), command)
            .await?;
        let run = self.runtime.run(&ticket.run_id).await?;
        Ok(RunView::from(&run))
    }

    pub async fn runs(&self, session: &str) -> Result<RunList, ApiError> {
        let runs = self.runtime.runs(&session_id(session)?).await?;
        Ok(RunList {
            runs: runs.iter().map(RunView::from).collect(),
        })
    }

    /// What the session's next model turn would be sent (`Runtime::context`).
    pub async fn context(&self, session: &str) -> Result<ContextView, ApiError> {
        let id = session_id(session)?;
        let view = self.runtime.context(&id).await?;
        Ok(ContextView::new(id.as_str(), view))
    }

    pub async fn run(&self, id: &str) -> Result<RunView, ApiError> {
        Ok(RunView::from(&self.run_info(id).await?))
    }

    pub async fn run_info(&self, id: &str) -> Result<RunInfo, ApiError> {
        Ok(self.runtime.run(&run_id(id)?).await?)
    }

    /// Cancels a queued or running run and waits until its end is recorded.
    pub async fn cancel(&self, id: &str) -> Result<RunView, ApiError> {
        let run = self.run_info(id).await?;
        if run.state.is_terminal() {
            return Err(ApiError::conflict(format!(
                "run {} already ended ({})",
                run.id,
                run.state.as_str()
            )));
        }
        // Subscribed before cancelling, so the run's end cannot slip by.
        let mut events = self.runtime.subscribe(&run.session_id).ok();
        if !self.runtime.cancel_run(&run.session_id, &run.id) {
            // Maybe another process works it: asked through the journal,
            // and its end read from there.
            if self.runtime.cancel_run_anywhere(&run.session_id, &run.id) {
                let deadline = tokio::time::Instant::now() + ELSEWHERE_CANCEL_WAIT;
                while tokio::time::Instant::now() < deadline {
                    if self.run_info(id).await?.state.is_terminal() {
                        break;
                    }
                    tokio::time::sleep(std::time::Duration::from_millis(25)).await;
                }
                return self.run(id).await;
            }
            let now = self.run_info(id).await?;
            if now.state.is_terminal() {
                return Ok(RunView::from(&now));
            }
            return Err(ApiError::conflict(format!(
                "run {} is not running in this process",
                run.id
            )));
        }
        if let Some(events) = events.as_mut() {
            while let Some(record) = events.next().await {
                if record.run_id == run.id && record.event.terminal_state().is_some() {
                    break;
                }
            }
        }
        self.run(id).await
    }

    pub async fn tape(&self, id: &str, from_seq: u64) -> Result<TapeView, ApiError> {
        if from_seq > i64::MAX as u64 {
            return Err(ApiError::bad_request(format!(
                "`from_seq`: must be at most {}, got {from_seq}",
                i64::MAX
            )));
        }
        let events = self.runtime.tape(&run_id(id)?, from_seq).await?;
        Ok(TapeView { events })
    }

    /// Approvals waiting for an answer, of one session or of all.
    pub async fn approvals(&self, session: Option<&str>) -> Result<ApprovalList, ApiError> {
        let session = match session {
            Some(id) => {
                let id = session_id(id)?;
                self.runtime.session(&id).await?;
                Some(id)
            }
            None => None,
        };
        let pending = self.runtime.approvals_everywhere(session.as_ref()).await;
        Ok(ApprovalList::of(pending))
    }

    /// Answers a waiting approval; the first answer from any face wins.
    pub async fn answer(&self, approval_id: &str, request: Answer) -> Result<Answered, ApiError> {
        let decision = ApprovalDecision::parse(&request.decision)
            .filter(|d| ApprovalDecision::OPTIONS.contains(d))
            .ok_or_else(|| {
                ApiError::bad_request(format!(
                    "`decision`: expected allow_once, allow_always, reject_once or reject_always, got {}",
                    shown(&request.decision)
                ))
            })?;
        let request = self
            .runtime
            .approvals_everywhere(None)
            .await
            .into_iter()
            .filter_map(ApprovalView::of)
            .find(|approval| approval.approval_id() == approval_id)
            .ok_or_else(|| {
                ApiError::not_found(format!(
                    "approval {} is not waiting for an answer",
                    quote(approval_id)
                ))
            })?;
        if !self
            .runtime
            .answer_approval_of(
                &request.record().session_id,
                &request.record().run_id,
                approval_id,
                decision,
            )
            .await?
        {
            return Err(ApiError::conflict(format!(
                "approval {} was settled meanwhile (answered elsewhere, timed out or its run ended)",
                quote(approval_id)
            )));
        }
        Ok(Answered {
            approval: request,
            decision,
        })
    }
}

impl Api {
    /// Questions waiting for an answer, of one session or of all.
    pub async fn questions(&self, session: Option<&str>) -> Result<QuestionList, ApiError> {
        let session = match session {
            Some(id) => {
                let id = session_id(id)?;
                self.runtime.session(&id).await?;
                Some(id)
            }
            None => None,
        };
        let pending = self.runtime.questions_everywhere(session.as_ref()).await;
        Ok(QuestionList::of(pending))
    }

    /// Answers a waiting question; the first answer from any face wins.
    pub async fn reply(&self, question_id: &str, reply: Reply) -> Result<Replied, ApiError> {
        match (&reply.answer, reply.decline) {
            (Some(_), true) => {
                return Err(ApiError::bad_request(
                    "give `answer` or `decline`, not both",
                ));
            }
            (None, false) => {
                return Err(ApiError::bad_request(
                    "`answer`: missing (or send `\"decline\": true`)",
                ));
            }
            (Some(text), false) if text.chars().count() > MAX_ANSWER_CHARS => {
                return Err(ApiError::bad_request(format!(
                    "`answer`: longer than {MAX_ANSWER_CHARS} characters"
                )));
            }
            _ => {}
        }
        let request = self
            .runtime
            .questions_everywhere(None)
            .await
            .into_iter()
            .filter_map(QuestionView::of)
            .find(|question| question.question_id() == question_id)
            .ok_or_else(|| {
                ApiError::not_found(format!(
                    "question {} is not waiting for an answer",
                    quote(question_id)
                ))
            })?;
        let Some((_, asked)) = request.record().event.question() else {
            return Err(ApiError::not_found("not a question"));
        };
        let answer = match reply.answer {
            None => QuestionAnswer::without(QuestionOutcome::Declined),
            Some(text) => QuestionAnswer::from_reply(&asked, &text),
        };
        if !self
            .runtime
            .answer_question_of(
                &request.record().session_id,
                &request.record().run_id,
                question_id,
                answer.clone(),
            )
            .await?
        {
            return Err(ApiError::conflict(format!(
                "question {} was settled meanwhile (answered elsewhere, timed out or its run ended)",
                quote(question_id)
            )));
        }
        Ok(Replied {
            question: request,
            outcome: answer.outcome,
            answer: answer.answer,
        })
    }
}

/// How long a cancel waits for a run another process works to end.
const ELSEWHERE_CANCEL_WAIT: std::time::Duration = std::time::Duration::from_secs(10);

/// A prompt's content from `prompt` (text) or `content` (parts), checked.
fn prompt_content(request: Prompt) -> Result<Vec<ContentPart>, ApiError> {
    let content = match (request.prompt, request.content) {
        (Some(text), None) => vec![ContentPart::Text { text }],
        (None, Some(content)) => content,
        (Some(_), Some(_)) => {
            return Err(ApiError::bad_request(
                "`prompt` and `content`: give one or the other",
            ));
        }
        (None, None) => {
            return Err(ApiError::bad_request(
                "`prompt`: missing (or give `content`)",
            ));
        }
    };
    if content.is_empty() {
        return Err(ApiError::bad_request("`content`: must not be empty"));
    }
    let empty = content.iter().all(|part| match part {
        ContentPart::Text { text } => blank(text),
        ContentPart::ResourceLink { .. }
        | ContentPart::Resource { .. }
        | ContentPart::Image { .. } => false,
    });
    if empty {
        return Err(ApiError::bad_request("`prompt`: must not be empty"));
    }
    Ok(content)
}

/// A session id from the outside; only its shape is checked here.
pub fn session_id(id: &str) -> Result<SessionId, ApiError> {
    if id.starts_with("ses_") && id.len() < 128 {
        Ok(SessionId::from_string(id.to_owned()))
    } else {
        Err(ApiError::not_found(format!(
            "session {} not found",
            quote(id)
        )))
    }
}

/// A run id from the outside; only its shape is checked here.
pub fn run_id(id: &str) -> Result<RunId, ApiError> {
    if id.starts_with("run_") && id.len() < 128 {
        Ok(RunId::from_string(id.to_owned()))
    } else {
        Err(ApiError::not_found(format!("run {} not found", quote(id))))
    }
}

/// An outside value in an error message: quoted, escaped, and cut to a
/// short prefix with its length when long.
pub fn shown(value: &str) -> String {
    format!("{:?}", quote(value).to_string())
}

/// Whether a prompt's text says nothing: only spaces, tabs and line breaks
/// (the characters the OpenAPI document's pattern names).
pub fn blank(text: &str) -> bool {
    text.chars()
        .all(|c| matches!(c, ' ' | '\t' | '\n' | '\r' | '\x0B' | '\x0C'))
}

/// A memory item's id as a path names it; anything else is no item.
fn memory_id(id: &str) -> Result<&str, ApiError> {
    if id.starts_with("mem_") && id.len() <= 64 {
        Ok(id)
    } else {
        Err(ApiError::not_found(format!("no memory item {}", shown(id))))
    }
}

fn memory_error(err: MemoryError) -> ApiError {
    match err {
        MemoryError::Invalid(err) => ApiError::bad_request(clip_message(&err.to_string())),
        MemoryError::NotFound(id) => ApiError::not_found(format!("no memory item {id}")),
        MemoryError::Conflict(reason) => ApiError::conflict(clip_message(&reason)),
        MemoryError::Backend(err) => {
            tracing::error!(error = %err, "memory request failed");
            ApiError::internal(err.to_string())
        }
    }
}

impl Api {
    fn keeper(&self) -> Result<Keeper, ApiError> {
        self.runtime
            .memory()
            .ok_or_else(|| ApiError::not_found("memory is turned off ([memory] enabled = false)"))
    }

    /// The keys of a session, of a workspace directory, or of a session
    /// with another workspace (both given); `None` without either.
    async fn memory_keys(
        &self,
        session: Option<&str>,
        workspace: Option<&std::path::Path>,
    ) -> Result<Option<ScopeKeys>, ApiError> {
        let mut keys = match session {
            Some(id) => Some(self.runtime.memory_keys(&session_id(id)?).await?),
            None => None,
        };
        if let Some(dir) = workspace {
            let shown_dir = shown(&dir.to_string_lossy());
            if !dir.is_absolute() {
                return Err(ApiError::bad_request(format!(
                    "`workspace`: {shown_dir} must be an absolute path"
                )));
            }
            let dir = dir.canonicalize().map_err(|_| {
                ApiError::not_found(format!("`workspace`: {shown_dir} is not a directory"))
            })?;
            let found = self.runtime.workspace_keys(&dir).await;
            keys = Some(match keys {
                Some(session) => ScopeKeys {
                    workspace: found.workspace,
                    ..session
                },
                None => found,
            });
        }
        Ok(keys)
    }

    pub async fn list_memory(&self, request: ListMemory) -> Result<MemoryList, ApiError> {
        let keeper = self.keeper()?;
        let limit = request.limit.unwrap_or(DEFAULT_PAGE);
        if limit == 0 || limit > MAX_PAGE {
            return Err(ApiError::bad_request(format!(
                "`limit`: expected 1 to {MAX_PAGE}, got {limit}"
            )));
        }
        if let Some(q) = &request.q
            && q.chars().count() > MAX_QUERY_CHARS
        {
            return Err(ApiError::bad_request(format!(
                "`q`: at most {MAX_QUERY_CHARS} characters"
            )));
        }
        let keys = self
            .memory_keys(request.session_id.as_deref(), request.workspace.as_deref())
            .await?;
        let items = keeper
            .find(keys.as_ref(), request.q.as_deref(), limit)
            .await
            .map_err(memory_error)?;
        Ok(MemoryList { items })
    }

    pub async fn add_memory(&self, request: NewMemory) -> Result<MemoryItem, ApiError> {
        let keeper = self.keeper()?;
        let scope = match request.scope.as_deref() {
            None => Scope::Workspace,
            Some(raw) => Scope::parse(raw).ok_or_else(|| {
                ApiError::bad_request(format!(
                    "`scope`: expected user, workspace or conversation, got {}",
                    shown(raw)
                ))
            })?,
        };
        let keys = self
            .memory_keys(request.session_id.as_deref(), request.workspace.as_deref())
            .await?;
        let keys = match (scope, keys) {
            (Scope::User, keys) => keys.unwrap_or_default(),
            (Scope::Workspace, Some(keys)) => keys,
            (Scope::Conversation, Some(keys)) if request.session_id.is_some() => keys,
            (Scope::Workspace, None) => {
                return Err(ApiError::bad_request(
                    "`workspace`: a workspace item needs `workspace` or `session_id`",
                ));
            }
            (Scope::Conversation, _) => {
                return Err(ApiError::bad_request(
                    "`session_id`: a conversation item needs its session",
                ));
            }
        };
        let item = keeper
            .add(
                &keys,
                NewItem {
                    text: request.text,
                    scope,
                    tags: request.tags.unwrap_or_default(),
                    pinned: request.pinned.unwrap_or(false),
                    source: MemorySource {
                        session: request.session_id.map(SessionId::from_string),
                        by: "person".to_owned(),
                        ..MemorySource::default()
                    },
                },
            )
            .await
            .map_err(memory_error)?;
        Ok(item)
    }

    pub async fn memory_item(&self, id: &str) -> Result<MemoryItem, ApiError> {
        let item = self
            .keeper()?
            .get(memory_id(id)?, None)
            .await
            .map_err(memory_error)?;
        Ok(item)
    }

    pub async fn edit_memory(&self, id: &str, patch: MemoryPatch) -> Result<MemoryItem, ApiError> {
        let item = self
            .keeper()?
            .edit(
                memory_id(id)?,
                None,
                Patch {
                    text: patch.text,
                    tags: patch.tags,
                    pinned: patch.pinned,
                },
            )
            .await
            .map_err(memory_error)?;
        Ok(item)
    }

    pub async fn forget_memory(&self, id: &str) -> Result<MemoryItem, ApiError> {
        let item = self
            .keeper()?
            .forget(memory_id(id)?, None)
            .await
            .map_err(memory_error)?;
        Ok(item)
    }
}
