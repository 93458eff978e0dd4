//! Schedules through the HTTP face (`docs/schedules.md`), by a port to the
//! process's schedules (`Schedules`, implemented beside `pincer serve`):
//! `GET /v1/schedules`, `POST /v1/schedules`, `GET /v1/schedules/{id}`,
//! `DELETE /v1/schedules/{id}`. Any `pincer serve` fires them.

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use futures::future::BoxFuture;

use crate::views::{ScheduleAdded, ScheduleDeleted, ScheduleDetails, ScheduleList};

use super::AppState;
use super::error::ApiError;
use super::routes::{JsonBody, QueryParams};

/// Why a request about schedules was refused.
#[derive(Debug)]
pub enum Refusal {
    /// The definition cannot be scheduled, naming the field (422).
    Invalid(String),
    /// No such schedule (404).
    Unknown(String),
    /// The store failed (503).
    Unavailable(String),
}

impl From<Refusal> for ApiError {
    fn from(refusal: Refusal) -> Self {
        match refusal {
            Refusal::Invalid(message) => ApiError::unprocessable(message),
            Refusal::Unknown(message) => ApiError::not_found(message),
            Refusal::Unavailable(message) => ApiError::unavailable(message),
        }
    }
}

/// The schedules in the store.
pub trait Schedules: Send + Sync {
    /// Every schedule, oldest first.
    fn list(&self) -> BoxFuture<'static, Result<ScheduleList, Refusal>>;
    /// One, with its newest `limit` fires.
    fn show(
        &self,
        id: String,
        limit: usize,
    ) -> BoxFuture<'static, Result<ScheduleDetails, Refusal>>;
    /// Checks and records one.
    fn add(&self, request: AddSchedule) -> BoxFuture<'static, Result<ScheduleAdded, Refusal>>;
    /// Forgets one and its fires.
    fn remove(&self, id: String) -> BoxFuture<'static, Result<(), Refusal>>;
}

/// `POST /v1/schedules`: give `cron` or `at`, and `workspace` or
/// `session_id`.
#[derive(Debug, serde::Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(rename = "NewSchedule")]
pub struct AddSchedule {
    /// Five fields (minute hour day-of-month month day-of-week) or @hourly,
    /// @daily, @weekly, @monthly, @yearly
    #[serde(default)]
    pub cron: Option<String>,
    /// Once: YYYY-MM-DDTHH:MM in `tz`, or an instant with an offset
    #[serde(default)]
    pub at: Option<String>,
    /// An IANA time zone; default the server's
    #[serde(default)]
    pub tz: Option<String>,
    /// What to ask at each occurrence
    pub prompt: String,
    /// Continue this session at each occurrence
    #[serde(default)]
    pub session_id: Option<String>,
    /// Start a new session in this directory (on the server) at each
    /// occurrence
    #[serde(default)]
    pub workspace: Option<std::path::PathBuf>,
    /// CHANNEL:TARGET: send each reply to this chat
    #[serde(default)]
    pub deliver: Option<String>,
    /// Run an occurrence missed while no `pincer serve` ran if less than
    /// this late (`1h` default, `30m`, `0`)
    #[serde(default)]
    pub catch_up: Option<String>,
    /// The schedule's id (letters, digits, `-`, `_`); default made up
    #[serde(default)]
    pub id: Option<String>,
}

#[derive(Debug, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ShowQuery {
    #[serde(default)]
    limit: Option<usize>,
}

fn port(state: &AppState) -> Result<std::sync::Arc<dyn Schedules>, ApiError> {
    state
        .shared
        .ports
        .schedules
        .clone()
        .ok_or_else(|| ApiError::not_found("schedules are not served by this process"))
}

/// `GET /v1/schedules`.
pub async fn list(State(state): State<AppState>) -> Response {
    match port(&state) {
        Ok(schedules) => match schedules.list().await {
            Ok(value) => axum::Json(value).into_response(),
            Err(refusal) => ApiError::from(refusal).into_response(),
        },
        Err(err) => err.into_response(),
    }
}

/// `POST /v1/schedules`: 201 and the schedule, or 422 naming the field.
pub async fn add(
    State(state): State<AppState>,
    JsonBody(request): JsonBody<AddSchedule>,
) -> Response {
    if request.session_id.is_none() && request.workspace.is_none() {
        return ApiError::unprocessable("workspace: give a workspace or a session_id")
            .into_response();
    }
    if request.session_id.is_some() && request.workspace.is_some() {
        return ApiError::unprocessable("workspace: give a workspace or a session_id, not both")
            .into_response();
    }
    match port(&state) {
        Ok(schedules) => match schedules.add(request).await {
            Ok(value) => (StatusCode::CREATED, axum::Json(value)).into_response(),
            Err(refusal) => ApiError::from(refusal).into_response(),
        },
        Err(err) => err.into_response(),
    }
}

/// `GET /v1/schedules/{schedule_id}`.
pub async fn show(
    State(state): State<AppState>,
    Path(id): Path<String>,
    QueryParams(query): QueryParams<ShowQuery>,
) -> Response {
    let limit = query.limit.unwrap_or(20).clamp(1, 1000);
    match port(&state) {
        Ok(schedules) => match schedules.show(id, limit).await {
            Ok(value) => axum::Json(value).into_response(),
            Err(refusal) => ApiError::from(refusal).into_response(),
        },
        Err(err) => err.into_response(),
    }
}

/// `DELETE /v1/schedules/{schedule_id}`.
pub async fn remove(State(state): State<AppState>, Path(id): Path<String>) -> Response {
    match port(&state) {
        Ok(schedules) => match schedules.remove(id.clone()).await {
            Ok(()) => axum::Json(ScheduleDeleted {
                schedule_id: id,
                deleted: true,
            })
            .into_response(),
            Err(refusal) => ApiError::from(refusal).into_response(),
        },
        Err(err) => err.into_response(),
    }
}
