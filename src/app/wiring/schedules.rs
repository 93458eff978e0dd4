//! The schedules' runner (`core::schedule::runner`) as a process runs it:
//! over the app's runtime and store, delivering through the chat channels
//! when any is configured, on the machine's clock — or, for the tests, on a
//! clock read from the file `PINCER_TEST_CLOCK_FILE` names (an RFC 3339
//! instant; the loop then looks every 100 ms, as that time jumps).

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use crate::app::App;
use crate::core::channel::Courier;
use crate::core::clock::{Clock, SystemClock};
use crate::core::scheduler::Scheduler;
use crate::core::session::Millis;

/// The variable naming the tests' clock file.
pub const TEST_CLOCK: &str = "PINCER_TEST_CLOCK_FILE";

/// The runner for `app`'s schedules.
pub fn scheduler(app: &App) -> Arc<Scheduler> {
    let courier = (!app.config.channels.is_empty()).then(|| {
        Arc::new(super::courier::ChannelCourier::new(
            app.config.clone(),
            app.store.clone(),
        )) as Arc<dyn Courier>
    });
    let test_clock = std::env::var_os(TEST_CLOCK).is_some();
    let scheduler = Scheduler::new(
        app.runtime.clone(),
        app.store.clone(),
        courier,
        clock(),
        crate::store::process_tag().to_owned(),
    );
    Arc::new(if test_clock {
        scheduler.reloading_every(Duration::from_millis(100))
    } else {
        scheduler
    })
}

/// The schedules' clock: the machine's, or the tests' file.
pub fn clock() -> Arc<dyn Clock> {
    match std::env::var_os(TEST_CLOCK) {
        Some(path) => Arc::new(FileClock(PathBuf::from(path))),
        None => Arc::new(SystemClock),
    }
}

/// The time a file says; the machine's while it says nothing readable.
struct FileClock(PathBuf);

impl Clock for FileClock {
    fn now_millis(&self) -> Millis {
        std::fs::read_to_string(&self.0)
            .ok()
            .and_then(|text| text.trim().parse::<jiff::Timestamp>().ok())
            .map_or_else(|| SystemClock.now_millis(), |at| at.as_millisecond())
    }
}

/// Where a new schedule's runs go, as a face was asked.
pub enum Where {
    /// Continue this session (it must exist).
    Session(String),
    /// New sessions in this directory (it must be one).
    Workspace(std::path::PathBuf),
}

/// Why a schedule was not added.
#[derive(Debug, thiserror::Error)]
pub enum AddError {
    /// The definition is wrong: `FIELD: what` (`cron: …`, `deliver: …`).
    #[error("{0}")]
    Invalid(String),
    #[error("the schedule was not recorded: {0}")]
    Store(crate::core::journal::JournalError),
}

/// Checks and records a schedule for any face: the definition
/// (`Definition::build`), the session or workspace, the delivery's channel
/// (configured here) and target (read by its adapter); an id already taken
/// is `id: …`.
pub async fn add(
    app: &App,
    definition: crate::core::schedule::Definition,
    place: Where,
    deliver: Option<&str>,
    origin: &str,
) -> Result<crate::core::schedule::Schedule, AddError> {
    use crate::core::journal::{JournalError, Write};
    use crate::core::schedule::{Delivery, Place, ScheduleWrite};
    let deliver = match deliver {
        None => None,
        Some(text) => {
            let delivery = Delivery::parse(text).ok_or_else(|| {
                AddError::Invalid("deliver: expected CHANNEL:TARGET (`team:#dev`, `tg:42`)".into())
            })?;
            if !app.config.channels.contains_key(&delivery.channel) {
                return Err(AddError::Invalid(format!(
                    "deliver: no channel {} is configured (a [channels.NAME] table)",
                    crate::core::quote::quote(&delivery.channel)
                )));
            }
            let adapter = super::channel_adapter(&app.config, &delivery.channel, &|name| {
                std::env::var(name).ok()
            })
            .map_err(|err| AddError::Invalid(format!("deliver: {err:#}")))?;
            adapter
                .target(&delivery.to)
                .map_err(|err| AddError::Invalid(format!("deliver: {err}")))?;
            Some(delivery)
        }
    };
    let place = match place {
        Where::Session(id) => {
            let id = crate::core::ids::SessionId::from_string(id);
            let found = app
                .store
                .session(&id)
                .await
                .map_err(AddError::Store)?
                .is_some();
            if !found {
                return Err(AddError::Invalid(format!(
                    "session: no session {}",
                    crate::core::quote::quote(id.as_str())
                )));
            }
            Place::Session(id)
        }
        Where::Workspace(dir) => {
            let dir = dir.canonicalize().map_err(|err| {
                AddError::Invalid(format!(
                    "workspace: {}: {err}",
                    crate::core::quote::quote(&dir.to_string_lossy())
                ))
            })?;
            if !dir.is_dir() {
                return Err(AddError::Invalid(format!(
                    "workspace: {} is not a directory",
                    crate::core::quote::quote(&dir.to_string_lossy())
                )));
            }
            Place::Workspace(dir)
        }
    };
    let schedule = definition
        .build(place, deliver, origin, clock().now_millis())
        .map_err(AddError::Invalid)?;
    match app
        .store
        .commit(Write::Schedule(ScheduleWrite::Put(schedule.clone())))
        .await
    {
        Ok(()) => Ok(schedule),
        Err(JournalError::Conflict(reason)) => Err(AddError::Invalid(format!("id: {reason}"))),
        Err(err) => Err(AddError::Store(err)),
    }
}

/// A schedule as the faces show it: the schedule, its next occurrence from
/// now (on the schedules' clock) after its latest timed fire, and that fire.
pub fn view(
    schedule: &crate::core::schedule::Schedule,
    last: Option<&crate::core::schedule::Fire>,
) -> crate::views::ScheduleView {
    let after = last
        .filter(|f| !f.manual)
        .map_or(schedule.created_at - 1, |f| f.occurrence)
        .max(clock().now_millis());
    let next = schedule.next_after(after).ok().flatten();
    crate::views::ScheduleView {
        schedule: schedule.clone(),
        next,
        last_fire: last.cloned(),
    }
}
