//! Schedules as `pincer schedule … --json` and `/v1/schedules` show them.

use schemars::JsonSchema;
use serde::Serialize;

use crate::core::schedule::{Fire, Schedule};
use crate::core::session::Millis;

/// A schedule, its next occurrence and its latest fire.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
pub struct ScheduleView {
    pub schedule: Schedule,
    /// The next occurrence, in milliseconds since the epoch; null: never again
    pub next: Option<Millis>,
    pub last_fire: Option<Fire>,
}

/// Every schedule, oldest first.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
pub struct ScheduleList {
    pub schedules: Vec<ScheduleView>,
}

/// A schedule just recorded, and its first occurrence.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
pub struct ScheduleAdded {
    pub schedule: Schedule,
    /// The first occurrence, in milliseconds since the epoch; null: never
    pub next: Option<Millis>,
}

/// A schedule with its newest fires, newest first.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
pub struct ScheduleDetails {
    #[serde(flatten)]
    pub view: ScheduleView,
    pub fires: Vec<Fire>,
}

/// A schedule forgotten, with its fires.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, JsonSchema)]
pub struct ScheduleDeleted {
    pub schedule_id: String,
    #[schemars(extend("const" = true))]
    pub deleted: bool,
}

impl From<ScheduleView> for ScheduleAdded {
    fn from(view: ScheduleView) -> Self {
        ScheduleAdded {
            schedule: view.schedule,
            next: view.next,
        }
    }
}
