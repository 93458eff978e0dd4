//! The schedules' records in the memory journal, with the SQLite store's
//! effects (`store::schedules`).

use std::collections::BTreeMap;

use crate::core::journal::JournalError;
use crate::core::schedule::{Fire, Schedule, ScheduleWrite};
use crate::core::session::Millis;

#[derive(Default, Clone)]
pub(super) struct Book {
    schedules: Vec<Schedule>,
    fires: BTreeMap<(String, Millis), Fire>,
}

impl Book {
    pub(super) fn apply(&mut self, write: ScheduleWrite) -> Result<(), JournalError> {
        match write {
            ScheduleWrite::Put(schedule) => {
                if self.schedules.iter().any(|s| s.id == schedule.id) {
                    return Err(JournalError::Conflict(format!(
                        "a schedule {} already exists",
                        schedule.id
                    )));
                }
                self.schedules.push(schedule);
            }
            ScheduleWrite::Remove { id } => {
                let before = self.schedules.len();
                self.schedules.retain(|s| s.id != id);
                if self.schedules.len() == before {
                    return Err(JournalError::Conflict(format!("no schedule {id}")));
                }
                self.fires.retain(|(schedule, _), _| *schedule != id);
            }
            ScheduleWrite::Claim(fire) => {
                let key = (fire.schedule_id.clone(), fire.occurrence);
                if self.fires.contains_key(&key) {
                    return Err(JournalError::Conflict(format!(
                        "occurrence {} of schedule {} was already fired",
                        fire.occurrence, fire.schedule_id
                    )));
                }
                self.fires.insert(key, fire);
            }
            ScheduleWrite::Settle(fire) => {
                let key = (fire.schedule_id.clone(), fire.occurrence);
                if let Some(recorded) = self.fires.get_mut(&key) {
                    *recorded = fire;
                }
            }
        }
        Ok(())
    }

    pub(super) fn schedules(&self) -> Vec<Schedule> {
        let mut all = self.schedules.clone();
        all.sort_by(|a, b| (a.created_at, &a.id).cmp(&(b.created_at, &b.id)));
        all
    }

    pub(super) fn fires(&self, schedule: Option<&str>, limit: usize) -> Vec<Fire> {
        let mut all: Vec<Fire> = self
            .fires
            .values()
            .filter(|f| schedule.is_none_or(|s| f.schedule_id == s))
            .cloned()
            .collect();
        all.sort_by(|a, b| (b.occurrence, &a.schedule_id).cmp(&(a.occurrence, &b.schedule_id)));
        all.truncate(limit);
        all
    }

    pub(super) fn last_fired(&self) -> Vec<(String, Millis)> {
        let mut last: BTreeMap<String, Millis> = BTreeMap::new();
        for fire in self.fires.values().filter(|f| !f.manual) {
            let entry = last
                .entry(fire.schedule_id.clone())
                .or_insert(fire.occurrence);
            *entry = (*entry).max(fire.occurrence);
        }
        last.into_iter().collect()
    }

    pub(super) fn open_fires(&self) -> Vec<Fire> {
        let mut open: Vec<Fire> = self
            .fires
            .values()
            .filter(|f| f.state.is_open())
            .cloned()
            .collect();
        open.sort_by_key(|f| f.occurrence);
        open
    }
}
