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
