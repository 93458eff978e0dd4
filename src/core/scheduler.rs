//! Fires schedules (`core::schedule`): in `pincer serve`, a loop that wakes
//! at each schedule's next occurrence; for `pincer schedule run-now`, one
//! fire at once. A fire is an ordinary run on the tape; its reply, when the
//! schedule delivers, goes to the chat through the outbox (the `Courier`
//! port) under an id derived from the occurrence, so settling it twice (the
//! process that ran it, and a survivor after a crash) sends it once.

use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use super::schedule::{Due, Fire, FireState, Place, Schedule, ScheduleWrite};
use crate::core::channel::Courier;
use crate::core::clock::Clock;
use crate::core::event::RunState;
use crate::core::ids::RunId;
use crate::core::journal::{JournalError, Schedules, Write};
use crate::core::runtime::{NewSession, Runtime};
use crate::core::session::{ContentPart, Message, Millis, Origin};

/// The longest the loop sleeps before reading the schedules again (another
/// process may have added one).
const RELOAD_EVERY: Duration = Duration::from_secs(5);

/// A fire claimed but whose run never appeared after this long: the process
/// that claimed it stopped first.
const START_WITHIN_MS: Millis = 2 * 60 * 1000;

/// What fires schedules.
pub struct Scheduler {
    runtime: Runtime,
    store: Arc<dyn Schedules>,
    courier: Option<Arc<dyn Courier>>,
    clock: Arc<dyn Clock>,
    /// This process, as fires record it.
    by: String,
    /// How often the loop looks, at most (shorter under a test clock,
    /// whose time jumps).
    reload: Duration,
    running: parking_lot::Mutex<std::collections::HashSet<(String, Millis)>>,
}

impl Scheduler {
    pub fn new(
        runtime: Runtime,
        store: Arc<dyn Schedules>,
        courier: Option<Arc<dyn Courier>>,
        clock: Arc<dyn Clock>,
        by: String,
    ) -> Self {
        Self {
            runtime,
            store,
            courier,
            clock,
            by,
            reload: RELOAD_EVERY,
            running: parking_lot::Mutex::default(),
        }
    }

    /// Looks at most this often.
    #[must_use]
    pub fn reloading_every(mut self, every: Duration) -> Self {
        self.reload = every;
        self
    }

    /// Fires every schedule at its times until `stop`. Fires in progress
    /// at `stop` are settled by the next start (their runs end as
    /// interrupted).
    pub async fn serve(self: Arc<Self>, stop: CancellationToken) {
        let mut tasks = tokio::task::JoinSet::new();
        loop {
            let wait = match self.pass(&mut tasks).await {
                Ok(next) => {
                    let now = self.clock.now_millis();
                    next.map_or(self.reload, |next| {
                        Duration::from_millis(u64::try_from(next - now).unwrap_or(0))
                            .min(self.reload)
                    })
                }
                Err(err) => {
                    tracing::warn!(error = %err, "cannot read the schedules");
                    self.reload
                }
            };
            while tasks.try_join_next().is_some() {}
            tokio::select! {
                () = stop.cancelled() => break,
                () = tokio::time::sleep(wait.max(Duration::from_millis(20))) => {}
            }
        }
        tasks.abort_all();
    }

    /// One look: settles fires left open by a process that stopped, then
    /// fires what is due. The next occurrence of any schedule.
    async fn pass(
        self: &Arc<Self>,
        tasks: &mut tokio::task::JoinSet<()>,
    ) -> Result<Option<Millis>, JournalError> {
        for fire in self.store.open_fires().await? {
            let key = (fire.schedule_id.clone(), fire.occurrence);
            if !self.running.lock().contains(&key) {
                self.recover(fire).await;
            }
        }
        let schedules = self.store.schedules().await?;
        let last: std::collections::HashMap<String, Millis> =
            self.store.last_fired().await?.into_iter().collect();
        let now = self.clock.now_millis();
        let mut soonest: Option<Millis> = None;
        for schedule in schedules {
            let due = match schedule.due(last.get(&schedule.id).copied(), now) {
                Ok(due) => due,
                Err(err) => {
                    tracing::warn!(schedule = %schedule.id, error = %err, "schedule cannot be read");
                    continue;
                }
            };
            match due {
                Due::Wait(next) => {
                    if let Some(next) = next {
                        soonest = Some(soonest.map_or(next, |s| s.min(next)));
                    }
                }
                Due::Skip(missed) => {
                    let note = missed.note(now, schedule.catch_up_ms, &schedule.tz);
                    let fire =
                        self.fire_record(&schedule, missed.last, FireState::Skipped, Some(note));
                    match self
                        .store
                        .commit(Write::Schedule(ScheduleWrite::Claim(fire)))
                        .await
                    {
                        Ok(()) => {
                            tracing::warn!(schedule = %schedule.id, count = missed.count, "missed occurrences skipped")
                        }
                        Err(JournalError::Conflict(_)) => {}
                        Err(err) => return Err(err),
                    }
                    // Look again at once for the next occurrence.
                    soonest = Some(now);
                }
                Due::Fire {
                    occurrence,
                    earlier,
                } => {
                    let mut writes = Vec::new();
                    if let Some(earlier) = earlier {
                        let note = earlier.superseded_note(&schedule.tz);
                        writes.push(Write::Schedule(ScheduleWrite::Claim(self.fire_record(
                            &schedule,
                            earlier.first,
                            FireState::Skipped,
                            Some(note),
                        ))));
                    }
                    let mut fire =
                        self.fire_record(&schedule, occurrence, FireState::Claimed, None);
                    fire.run_id = Some(RunId::generate());
                    writes.push(Write::Schedule(ScheduleWrite::Claim(fire.clone())));
                    match self.store.commit(Write::Together(writes)).await {
                        Ok(()) => {
                            let this = self.clone();
                            tasks.spawn(async move {
                                this.run(schedule, fire).await;
                            });
                        }
                        // Another process fired it.
                        Err(JournalError::Conflict(_)) => {}
                        Err(err) => return Err(err),
                    }
                    soonest = Some(now);
                }
            }
        }
        Ok(soonest)
    }

    fn fire_record(
        &self,
        schedule: &Schedule,
        occurrence: Millis,
        state: FireState,
        note: Option<String>,
    ) -> Fire {
        let now = self.clock.now_millis();
        Fire {
            schedule_id: schedule.id.clone(),
            occurrence,
            state,
            run_id: None,
            session_id: None,
            intent_id: None,
            note,
            by: self.by.clone(),
            manual: false,
            created_at: now,
            updated_at: now,
        }
    }

    /// `pincer schedule run-now`: fires `schedule` now, here, and waits for
    /// its run; the fire as settled.
    pub async fn run_now(self: &Arc<Self>, schedule: Schedule) -> Result<Fire, JournalError> {
        let mut fire =
            self.fire_record(&schedule, self.clock.now_millis(), FireState::Claimed, None);
        fire.manual = true;
        fire.run_id = Some(RunId::generate());
        self.store
            .commit(Write::Schedule(ScheduleWrite::Claim(fire.clone())))
            .await?;
        Ok(self.run(schedule, fire).await)
    }

    /// Runs a claimed fire to its end: its session, its run, its reply
    /// delivered. The fire as settled.
    async fn run(self: &Arc<Self>, schedule: Schedule, mut fire: Fire) -> Fire {
        let key = (fire.schedule_id.clone(), fire.occurrence);
        self.running.lock().insert(key.clone());
        let settled = self.run_inner(&schedule, &mut fire).await;
        if let Err(note) = settled {
            fire.state = FireState::Failed;
            fire.note = Some(note);
            self.deliver_failure(&schedule, &mut fire).await;
            self.settle(&fire).await;
        }
        self.running.lock().remove(&key);
        fire
    }

    async fn run_inner(&self, schedule: &Schedule, fire: &mut Fire) -> Result<(), String> {
        let run_id = fire.run_id.clone().unwrap_or_else(RunId::generate);
        let session = match &schedule.place {
            Place::Session(id) => self
                .runtime
                .open_session(id)
                .await
                .map_err(|err| format!("cannot open session {id}: {err}"))?,
            Place::Workspace(dir) => self
                .runtime
                .create_session(NewSession {
                    workspace: dir.clone(),
                    origin: Origin::Schedule,
                    mcp_servers: serde_json::json!([]),
                    conversation: None,
                    prompt: Default::default(),
                })
                .await
                .map_err(|err| format!("cannot start a session: {err}"))?,
        };
        fire.session_id = Some(session.id.clone());
        fire.run_id = Some(run_id.clone());
        fire.state = FireState::Running;
        self.settle(fire).await;
        let ticket = self
            .runtime
            .prompt_as(
                &session.id,
                run_id,
                vec![ContentPart::Text {
                    text: schedule.prompt.clone(),
                }],
            )
            .await
            .map_err(|err| format!("cannot start the run: {err}"))?;
        // The run ends (completed, failed, cancelled) or this process stops
        // (then the next start settles the fire from the run's record).
        let _ = ticket.done.await;
        self.conclude(schedule, fire).await;
        Ok(())
    }

    /// A fire whose run has ended (by its record): settled, its reply
    /// delivered. Nothing while the run has not ended.
    async fn conclude(&self, schedule: &Schedule, fire: &mut Fire) {
        let Some(run_id) = fire.run_id.clone() else {
            return;
        };
        let run = match self.store.run(&run_id).await {
            Ok(Some(run)) => run,
            Ok(None) => return,
            Err(err) => {
                tracing::warn!(run = %run_id, error = %err, "cannot read a scheduled run");
                return;
            }
        };
        match run.state {
            RunState::Completed => {
                fire.state = FireState::Done;
                if schedule.deliver.is_some() {
                    let reply = self.reply(fire).await;
                    self.deliver(schedule, fire, &reply).await;
                }
            }
            RunState::Failed | RunState::Cancelled => {
                fire.state = FireState::Failed;
                fire.note = Some(match &run.error {
                    Some(error) => format!("the run {}: {error}", run.state.as_str()),
                    None => format!("the run was {}", run.state.as_str()),
                });
                self.deliver_failure(schedule, fire).await;
            }
            RunState::Queued | RunState::Running | RunState::Waiting => return,
        }
        self.settle(fire).await;
    }

    /// The run's reply: its last assistant message's text.
    async fn reply(&self, fire: &Fire) -> String {
        let (Some(session), Some(run_id)) = (&fire.session_id, &fire.run_id) else {
            return String::new();
        };
        let history = self.store.history(session).await.unwrap_or_default();
        history
            .iter()
            .rev()
            .filter(|entry| entry.run_id.as_ref() == Some(run_id))
            .find_map(|entry| {
                if let Message::Assistant { text, .. } = &entry.message
                    && !text.trim().is_empty()
                {
                    Some(text.clone())
                } else {
                    None
                }
            })
            .unwrap_or_default()
    }

    async fn deliver(&self, schedule: &Schedule, fire: &mut Fire, text: &str) {
        let (Some(delivery), Some(courier)) = (&schedule.deliver, &self.courier) else {
            if schedule.deliver.is_some() {
                fire.note = Some("not delivered: no chat channel is configured here".to_owned());
            }
            return;
        };
        let text = if text.trim().is_empty() {
            "(the scheduled run ended without a reply)"
        } else {
            text
        };
        let id = format!("schedule:{}:{}", schedule.id, fire.occurrence);
        match courier
            .send(&delivery.channel, &delivery.to, text, Some(&id))
            .await
        {
            Ok(intent) => fire.intent_id = Some(intent),
            Err(err) => {
                fire.note = Some(format!("not delivered to {delivery}: {err}"));
            }
        }
    }

    async fn deliver_failure(&self, schedule: &Schedule, fire: &mut Fire) {
        if schedule.deliver.is_none() {
            return;
        }
        let note = fire.note.clone().unwrap_or_default();
        let text = format!(
            "Schedule `{}` ({}) did not finish: {note}",
            schedule.id,
            super::schedule::local_time(fire.occurrence, &schedule.tz)
        );
        self.deliver(schedule, fire, &text).await;
        // Keep why it failed first.
        if fire.intent_id.is_some() {
            fire.note = Some(note);
        }
    }

    async fn settle(&self, fire: &Fire) {
        let mut fire = fire.clone();
        fire.updated_at = self.clock.now_millis();
        if let Err(err) = self
            .store
            .commit(Write::Schedule(ScheduleWrite::Settle(fire)))
            .await
        {
            tracing::warn!(error = %err, "cannot record a schedule's fire");
        }
    }

    /// A fire open in the store that no task here follows: a process
    /// stopped while it ran (or before its run started).
    async fn recover(&self, mut fire: Fire) {
        let schedules = self.store.schedules().await.unwrap_or_default();
        let Some(schedule) = schedules.into_iter().find(|s| s.id == fire.schedule_id) else {
            return;
        };
        let run = match &fire.run_id {
            Some(run_id) => self.store.run(run_id).await.ok().flatten(),
            None => None,
        };
        match run {
            Some(run) if !run.state.is_terminal() => {}
            Some(run) => {
                if fire.session_id.is_none() {
                    fire.session_id = Some(run.session_id.clone());
                }
                self.conclude(&schedule, &mut fire).await;
            }
            None if self.clock.now_millis() - fire.created_at > START_WITHIN_MS => {
                fire.state = FireState::Failed;
                fire.note =
                    Some("the process that fired it stopped before its run started".to_owned());
                self.deliver_failure(&schedule, &mut fire).await;
                self.settle(&fire).await;
            }
            None => {}
        }
    }
}
