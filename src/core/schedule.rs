//! Schedules: a prompt run at times a cron expression names in a time zone,
//! or once at a given time (`pincer schedule`, the `schedule` tool). What
//! is here decides; `core::scheduler` acts.
//!
//! - A schedule's times are wall-clock times in its zone: each matching
//!   local time fires once. A local time a daylight-saving jump skips fires
//!   at the shifted instant (02:30 in a spring-forward gap fires at 03:30); a
//!   local time that occurs twice fires at its first occurrence.
//! - Each occurrence is fired once, across processes and instances: firing
//!   starts by recording the occurrence's [`Fire`] under the key
//!   (schedule, occurrence), and a second record of the same key is refused
//!   (`JournalError::Conflict`); only the process whose record landed runs it.
//! - Missed occurrences (no `pincer serve` was running): the latest is run
//!   when found if it is less than the schedule's `catch_up` late; otherwise
//!   it is skipped and a `skipped` fire says why. Older ones are skipped,
//!   counted in one `skipped` fire.

use std::path::PathBuf;

use chrono::{NaiveDate, NaiveDateTime, NaiveTime};
use serde::{Deserialize, Serialize};
use thiserror::Error;

use super::ids::{RunId, SessionId};
use super::session::Millis;

/// The default missed-run window: an occurrence missed by less runs late.
pub const DEFAULT_CATCH_UP_MS: Millis = 60 * 60 * 1000;

/// An occurrence found this late is on time, whatever `catch_up` says
/// (the loop wakes a little after it).
const ON_TIME_MS: Millis = 60 * 1000;

/// How many missed occurrences are counted one by one before the count
/// says "more than".
const COUNT_AT_MOST: u64 = 1_000;

/// What is wrong with a schedule's definition.
#[derive(Debug, Error, PartialEq, Eq)]
pub enum ScheduleError {
    #[error("cron expression {expr:?}: {reason}")]
    Cron { expr: String, reason: String },
    #[error("time zone {zone:?}: {reason}")]
    Zone { zone: String, reason: String },
    #[error("time {text:?}: {reason}")]
    Time { text: String, reason: String },
}

/// When a schedule fires.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum When {
    /// A five-field cron expression (minute hour day-of-month month
    /// day-of-week), in the schedule's zone.
    Cron { expr: String },
    /// Once, at this instant.
    At { at: Millis },
}

/// Where a schedule's runs go.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Place {
    /// Each run continues this session.
    Session(SessionId),
    /// Each run is a new session in this workspace.
    Workspace(PathBuf),
}

/// Where a run's reply is sent: a chat channel and a chat in it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Delivery {
    pub channel: String,
    /// `CHAT` or `CHAT/THREAD` in the platform's ids.
    pub to: String,
}

impl Delivery {
    /// `CHANNEL:TARGET`.
    pub fn parse(text: &str) -> Option<Self> {
        let (channel, to) = text.split_once(':')?;
        (!channel.trim().is_empty() && !to.trim().is_empty()).then(|| Self {
            channel: channel.trim().to_owned(),
            to: to.trim().to_owned(),
        })
    }
}

impl std::fmt::Display for Delivery {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}", self.channel, self.to)
    }
}

/// A schedule as stored.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Schedule {
    pub id: String,
    pub when: When,
    /// An IANA time zone name (`Europe/Berlin`, `UTC`).
    pub tz: String,
    pub prompt: String,
    pub place: Place,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deliver: Option<Delivery>,
    /// An occurrence missed by less than this runs late; by more, it is
    /// skipped.
    pub catch_up_ms: Millis,
    pub created_at: Millis,
    /// Who made it: `cli`, `http`, or `session SESSION_ID` (the tool).
    pub origin: String,
}

impl Schedule {
    /// Checks the definition: the cron expression parses, the zone is
    /// known.
    pub fn check(&self) -> Result<(), ScheduleError> {
        zone(&self.tz)?;
        if let When::Cron { expr } = &self.when {
            cron(expr)?;
        }
        Ok(())
    }

    /// The first occurrence after `after` (strictly), if any.
    pub fn next_after(&self, after: Millis) -> Result<Option<Millis>, ScheduleError> {
        match &self.when {
            When::At { at } => Ok((*at > after).then_some(*at)),
            When::Cron { expr } => next_cron(&cron(expr)?, &zone(&self.tz)?, after),
        }
    }

    /// What to do at `now`, the latest occurrence already fired (or
    /// skipped) being `last` (see the module for the missed-run policy).
    pub fn due(&self, last: Option<Millis>, now: Millis) -> Result<Due, ScheduleError> {
        // Occurrences from the schedule's creation on (one at the very
        // millisecond it was made counts).
        let after = last.unwrap_or(self.created_at - 1);
        let latest = self
            .latest_at_or_before(now)?
            .filter(|latest| *latest > after);
        let Some(latest) = latest else {
            return Ok(Due::Wait(self.next_after(after.max(now))?));
        };
        // Count what was missed up to the latest, a bounded walk.
        let mut missed = Missed {
            first: latest,
            last: latest,
            count: 1,
            more: false,
        };
        let mut at = after;
        let mut count = 0;
        while let Some(next) = self.next_after(at)? {
            if next >= latest {
                break;
            }
            if count == 0 {
                missed.first = next;
            }
            count += 1;
            if count >= COUNT_AT_MOST {
                missed.more = true;
                break;
            }
            at = next;
        }
        missed.count += count;
        if now - latest <= self.catch_up_ms.max(ON_TIME_MS) {
            let earlier = (missed.count > 1).then_some(Missed {
                first: missed.first,
                last: missed.first,
                count: missed.count - 1,
                more: missed.more,
            });
            Ok(Due::Fire {
                occurrence: latest,
                earlier,
            })
        } else {
            Ok(Due::Skip(missed))
        }
    }

    /// The latest occurrence at or before `at`.
    fn latest_at_or_before(&self, at: Millis) -> Result<Option<Millis>, ScheduleError> {
        match &self.when {
            When::At { at: once } => Ok((*once <= at).then_some(*once)),
            When::Cron { expr } => {
                let cron = cron(expr)?;
                let tz = zone(&self.tz)?;
                let civil = to_civil(&tz, at)?;
                let found = cron
                    .find_previous_occurrence(&civil.and_utc(), true)
                    .map_err(|err| ScheduleError::Cron {
                        expr: expr.clone(),
                        reason: err.to_string(),
                    })?;
                instant(&tz, found.naive_utc(), i64::MIN).map(|found| found.filter(|f| *f <= at))
            }
        }
    }

    /// `0 9 * * MON-FRI (Europe/Berlin)` or `once at 2026-12-01T09:00:00+01:00[Europe/Berlin]`.
    pub fn describe_when(&self) -> String {
        match &self.when {
            When::Cron { expr } => format!("{expr} ({})", self.tz),
            When::At { at } => format!("once at {}", local_time(*at, &self.tz)),
        }
    }
}

/// A schedule as a person or the model asks for it, before it is checked.
#[derive(Debug, Clone, Default)]
pub struct Definition {
    pub cron: Option<String>,
    pub at: Option<String>,
    /// Default: this machine's zone.
    pub tz: Option<String>,
    pub prompt: String,
    /// `1h`, `30m`, `0`; default one hour.
    pub catch_up: Option<String>,
    /// Default: made up.
    pub id: Option<String>,
}

impl Definition {
    /// The schedule, checked: one of `cron` and `at`, a known zone, a time
    /// in the future, a prompt, a readable `catch_up`, an id of letters,
    /// digits, `-` and `_`. What is wrong names the field.
    pub fn build(
        self,
        place: Place,
        deliver: Option<Delivery>,
        origin: &str,
        now: Millis,
    ) -> Result<Schedule, String> {
        let tz = self.tz.unwrap_or_else(local_zone);
        zone(&tz).map_err(|err| format!("tz: {err}"))?;
        let when = match (self.cron, self.at) {
            (Some(expr), None) => {
                cron(&expr).map_err(|err| format!("cron: {err}"))?;
                When::Cron {
                    expr: expr.trim().to_owned(),
                }
            }
            (None, Some(text)) => {
                let at = parse_time(&text, &tz).map_err(|err| format!("at: {err}"))?;
                if at <= now {
                    return Err(format!("at: {} is in the past", local_time(at, &tz)));
                }
                When::At { at }
            }
            (Some(_), Some(_)) => return Err("give either cron or at, not both".to_owned()),
            (None, None) => return Err("give cron or at".to_owned()),
        };
        if self.prompt.trim().is_empty() {
            return Err("prompt: empty".to_owned());
        }
        let catch_up_ms = match self.catch_up.as_deref() {
            None => DEFAULT_CATCH_UP_MS,
            Some(text) => parse_duration(text).ok_or_else(|| {
                format!(
                    "catch_up: {:?} is not a duration (`1h`, `30m`, `0`)",
                    text.chars().take(20).collect::<String>()
                )
            })?,
        };
        let id = match self.id {
            Some(id) => {
                if id.is_empty()
                    || id.len() > 64
                    || !id
                        .chars()
                        .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
                {
                    return Err("id: expected 1 to 64 letters, digits, `-` or `_`".to_owned());
                }
                id
            }
            None => {
                let fresh = uuid::Uuid::now_v7().simple().to_string();
                format!("s-{}", &fresh[fresh.len() - 10..])
            }
        };
        Ok(Schedule {
            id,
            when,
            tz,
            prompt: self.prompt,
            place,
            deliver,
            catch_up_ms,
            created_at: now,
            origin: origin.to_owned(),
        })
    }
}

/// What a schedule should do now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Due {
    /// Nothing before this occurrence (`None`: never again).
    Wait(Option<Millis>),
    /// Run `occurrence`; `earlier` missed ones are skipped.
    Fire {
        occurrence: Millis,
        earlier: Option<Missed>,
    },
    /// The missed occurrences are too late to run: skipped.
    Skip(Missed),
}

/// Occurrences missed, `first` to `last`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Missed {
    pub first: Millis,
    pub last: Millis,
    pub count: u64,
    /// More were missed than counted.
    pub more: bool,
}

impl Missed {
    fn counted(&self) -> String {
        match (self.count, self.more) {
            (n, true) => format!("more than {n} occurrences"),
            (1, false) => "1 occurrence".to_owned(),
            (n, false) => format!("{n} occurrences"),
        }
    }

    /// Why they were skipped, for the `skipped` fire's note.
    pub fn note(&self, now: Millis, catch_up_ms: Millis, tz: &str) -> String {
        let late = human_duration(now - self.last);
        let window = human_duration(catch_up_ms);
        let count = self.counted();
        if self.first == self.last {
            format!(
                "missed {count} at {} while no `pincer serve` was running: {late} late, more than catch_up ({window})",
                local_time(self.last, tz)
            )
        } else {
            format!(
                "missed {count} from {} to {} while no `pincer serve` was running: {late} late, more than catch_up ({window})",
                local_time(self.first, tz),
                local_time(self.last, tz)
            )
        }
    }

    /// Why older missed occurrences were skipped when a later one ran.
    pub fn superseded_note(&self, tz: &str) -> String {
        let count = self.counted();
        format!(
            "missed {count} from {} while no `pincer serve` was running; only the latest missed one ran",
            local_time(self.first, tz)
        )
    }
}

/// How far a fire got.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum FireState {
    /// Recorded by the process that runs it; its run not started yet.
    Claimed,
    /// Its run started.
    Running,
    /// Its run completed (and its reply, if the schedule delivers, is in
    /// the outbox).
    Done,
    /// Its run failed, was cancelled or never started.
    Failed,
    /// Not run (missed; see the note).
    Skipped,
}

impl FireState {
    pub fn as_str(self) -> &'static str {
        match self {
            FireState::Claimed => "claimed",
            FireState::Running => "running",
            FireState::Done => "done",
            FireState::Failed => "failed",
            FireState::Skipped => "skipped",
        }
    }

    /// Still to be settled.
    pub fn is_open(self) -> bool {
        matches!(self, FireState::Claimed | FireState::Running)
    }
}

/// One occurrence of a schedule, fired (or skipped).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[schemars(rename = "ScheduleFire")]
pub struct Fire {
    pub schedule_id: String,
    pub occurrence: Millis,
    pub state: FireState,
    /// The run, chosen before it starts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_id: Option<RunId>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_id: Option<SessionId>,
    /// The send intent of the delivered reply.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub intent_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    /// The process that fired it (`PID:START@HOST`).
    pub by: String,
    /// Fired by `pincer schedule run-now`, not by the time.
    #[serde(default)]
    pub manual: bool,
    pub created_at: Millis,
    pub updated_at: Millis,
}

/// A change to the schedules.
#[derive(Debug, Clone)]
pub enum ScheduleWrite {
    /// Records a new schedule; one with the same id fails with
    /// `JournalError::Conflict`.
    Put(Schedule),
    /// Forgets a schedule and its fires; an unknown id fails with
    /// `JournalError::Conflict`.
    Remove { id: String },
    /// Records a fire; one already recorded for the same schedule and
    /// occurrence fails with `JournalError::Conflict` (so each occurrence is
    /// fired once).
    Claim(Fire),
    /// Replaces a recorded fire (its state, run, note).
    Settle(Fire),
}

/// A strict five-field cron expression (`@daily` and friends allowed).
pub fn cron(expr: &str) -> Result<croner::Cron, ScheduleError> {
    let fields = expr.split_whitespace().count();
    if !expr.trim_start().starts_with('@') && fields != 5 {
        return Err(ScheduleError::Cron {
            expr: expr.chars().take(80).collect(),
            reason: format!(
                "expected 5 fields (minute hour day-of-month month day-of-week), found {fields}"
            ),
        });
    }
    croner::parser::CronParser::builder()
        .seconds(croner::parser::Seconds::Disallowed)
        .year(croner::parser::Year::Disallowed)
        .build()
        .parse(expr)
        .map_err(|err| ScheduleError::Cron {
            expr: expr.chars().take(80).collect(),
            reason: err.to_string().trim_end_matches('.').to_owned(),
        })
}

/// A time zone by its IANA name.
pub fn zone(name: &str) -> Result<jiff::tz::TimeZone, ScheduleError> {
    jiff::tz::TimeZone::get(name).map_err(|err| ScheduleError::Zone {
        zone: name.chars().take(60).collect(),
        reason: err.to_string(),
    })
}

/// This machine's time zone's IANA name (`UTC` when it has none).
pub fn local_zone() -> String {
    jiff::tz::TimeZone::system()
        .iana_name()
        .map_or_else(|| "UTC".to_owned(), str::to_owned)
}

/// `2026-12-01T09:00` (in `tz`) or an instant with an offset
/// (`2026-12-01T09:00:00+01:00`, `…Z`).
pub fn parse_time(text: &str, tz: &str) -> Result<Millis, ScheduleError> {
    let fail = |reason: String| ScheduleError::Time {
        text: text.chars().take(40).collect(),
        reason,
    };
    if let Ok(at) = text.parse::<jiff::Timestamp>() {
        return Ok(at.as_millisecond());
    }
    let civil: jiff::civil::DateTime = text.parse().map_err(|_| {
        fail("expected YYYY-MM-DDTHH:MM, in the zone, or with an offset".to_owned())
    })?;
    let zoned = civil
        .to_zoned(zone(tz)?)
        .map_err(|err| fail(err.to_string()))?;
    Ok(zoned.timestamp().as_millisecond())
}

/// `at` as a time in `tz` (RFC 3339 with the zone's name).
pub fn local_time(at: Millis, tz: &str) -> String {
    let Ok(ts) = jiff::Timestamp::from_millisecond(at) else {
        return at.to_string();
    };
    match zone(tz) {
        Ok(zone) => ts
            .to_zoned(zone)
            .strftime("%Y-%m-%dT%H:%M%:z[%Q]")
            .to_string(),
        Err(_) => ts.to_string(),
    }
}

/// `1h 5m`, `3d 2h`, `45s`.
pub fn human_duration(ms: Millis) -> String {
    let secs = ms.max(0) / 1000;
    let (d, h, m, s) = (secs / 86_400, secs / 3600 % 24, secs / 60 % 60, secs % 60);
    let parts: Vec<String> = [(d, "d"), (h, "h"), (m, "m"), (s, "s")]
        .iter()
        .filter(|(n, _)| *n > 0)
        .take(2)
        .map(|(n, unit)| format!("{n}{unit}"))
        .collect();
    if parts.is_empty() {
        "0s".to_owned()
    } else {
        parts.join(" ")
    }
}

/// `1h`, `30m`, `1h 30m`, `0`: a duration in milliseconds.
pub fn parse_duration(text: &str) -> Option<Millis> {
    if text.trim() == "0" {
        return Some(0);
    }
    let span: jiff::Span = text.trim().parse().ok()?;
    let total = span
        .total((jiff::Unit::Millisecond, jiff::civil::date(2000, 1, 1)))
        .ok()?;
    // Whole milliseconds of a parsed duration fit easily.
    #[allow(clippy::cast_possible_truncation)]
    let total = total as Millis;
    (total >= 0).then_some(total)
}

/// The wall-clock time of `at` in `tz`, as a naive date-time.
fn to_civil(tz: &jiff::tz::TimeZone, at: Millis) -> Result<NaiveDateTime, ScheduleError> {
    let bad = |reason: String| ScheduleError::Time {
        text: at.to_string(),
        reason,
    };
    let ts = jiff::Timestamp::from_millisecond(at).map_err(|err| bad(err.to_string()))?;
    let dt = ts.to_zoned(tz.clone()).datetime();
    let date = NaiveDate::from_ymd_opt(
        i32::from(dt.year()),
        u32::try_from(dt.month()).unwrap_or(1),
        u32::try_from(dt.day()).unwrap_or(1),
    )
    .ok_or_else(|| bad("out of range".to_owned()))?;
    let time = NaiveTime::from_hms_opt(
        u32::try_from(dt.hour()).unwrap_or(0),
        u32::try_from(dt.minute()).unwrap_or(0),
        u32::try_from(dt.second()).unwrap_or(0),
    )
    .ok_or_else(|| bad("out of range".to_owned()))?;
    Ok(NaiveDateTime::new(date, time))
}

/// The first instant after `after` showing wall-clock time `civil` in `tz`
/// (a time in a gap: the shifted instant; a time shown twice: the first
/// showing after `after`).
fn instant(
    tz: &jiff::tz::TimeZone,
    civil: NaiveDateTime,
    after: Millis,
) -> Result<Option<Millis>, ScheduleError> {
    use chrono::{Datelike as _, Timelike as _};
    let bad = |reason: String| ScheduleError::Time {
        text: civil.to_string(),
        reason,
    };
    let narrow = |n: u32| i8::try_from(n).map_err(|err| bad(err.to_string()));
    let dt = jiff::civil::DateTime::new(
        i16::try_from(civil.year()).map_err(|err| bad(err.to_string()))?,
        narrow(civil.month())?,
        narrow(civil.day())?,
        narrow(civil.hour())?,
        narrow(civil.minute())?,
        0,
        0,
    )
    .map_err(|err| bad(err.to_string()))?;
    let ambiguous = tz.to_ambiguous_zoned(dt);
    let first = ambiguous
        .clone()
        .compatible()
        .map_err(|err| bad(err.to_string()))?
        .timestamp()
        .as_millisecond();
    if first > after {
        return Ok(Some(first));
    }
    if ambiguous.is_ambiguous()
        && let Ok(later) = ambiguous.later()
        && later.timestamp().as_millisecond() > after
    {
        return Ok(Some(later.timestamp().as_millisecond()));
    }
    Ok(None)
}

/// The first cron occurrence after `after` in `tz`: the next matching
/// wall-clock minute, as an instant.
fn next_cron(
    cron: &croner::Cron,
    tz: &jiff::tz::TimeZone,
    after: Millis,
) -> Result<Option<Millis>, ScheduleError> {
    let mut civil = to_civil(tz, after)?.and_utc();
    // A wall-clock time shown twice can yield an instant not after `after`;
    // a few steps always pass it.
    for _ in 0..8 {
        let Ok(next) = cron.find_next_occurrence(&civil, false) else {
            return Ok(None);
        };
        if let Some(found) = instant(tz, next.naive_utc(), after)? {
            return Ok(Some(found));
        }
        civil = next;
    }
    Ok(None)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(text: &str) -> Millis {
        text.parse::<jiff::Timestamp>().unwrap().as_millisecond()
    }

    fn schedule(expr: &str, tz: &str, created: &str) -> Schedule {
        Schedule {
            id: "s".into(),
            when: When::Cron { expr: expr.into() },
            tz: tz.into(),
            prompt: "p".into(),
            place: Place::Workspace("/tmp".into()),
            deliver: None,
            catch_up_ms: DEFAULT_CATCH_UP_MS,
            created_at: at(created),
            origin: "cli".into(),
        }
    }

    #[test]
    fn a_weekday_morning_in_berlin_is_the_right_instant_in_winter_and_summer() {
        let s = schedule("0 9 * * MON-FRI", "Europe/Berlin", "2026-11-27T12:00:00Z");
        // Friday 27 Nov 2026 after noon: next is Monday 30 Nov, 09:00 CET = 08:00Z.
        assert_eq!(
            s.next_after(at("2026-11-27T12:00:00Z")).unwrap(),
            Some(at("2026-11-30T08:00:00Z"))
        );
        // In summer (CEST) 09:00 is 07:00Z.
        assert_eq!(
            s.next_after(at("2026-07-01T06:00:00Z")).unwrap(),
            Some(at("2026-07-01T07:00:00Z"))
        );
    }

    #[test]
    fn daylight_saving_gaps_shift_and_folds_fire_once() {
        // 2026-03-29 02:30 does not exist in Berlin: it fires at 03:30 CEST.
        let gap = schedule("30 2 * * *", "Europe/Berlin", "2026-03-28T12:00:00Z");
        assert_eq!(
            gap.next_after(at("2026-03-28T12:00:00Z")).unwrap(),
            Some(at("2026-03-29T01:30:00Z"))
        );
        // 2026-10-25 02:30 happens twice: it fires at the first, then the
        // next day.
        let fold = schedule("30 2 * * *", "Europe/Berlin", "2026-10-24T12:00:00Z");
        let first = fold
            .next_after(at("2026-10-24T12:00:00Z"))
            .unwrap()
            .unwrap();
        assert_eq!(first, at("2026-10-25T00:30:00Z"));
        assert_eq!(
            fold.next_after(first).unwrap(),
            Some(at("2026-10-26T01:30:00Z"))
        );
        // Created during the second 02:xx hour, it does not fire at 02:30
        // again before tomorrow... unless 02:30 (second showing) is still
        // ahead: created at 02:10 CET (second showing) = 01:10Z.
        let inside = fold.next_after(at("2026-10-25T01:10:00Z")).unwrap();
        assert_eq!(inside, Some(at("2026-10-25T01:30:00Z")));
    }

    #[test]
    fn the_missed_run_policy_runs_the_latest_within_catch_up_and_skips_the_rest() {
        let s = schedule("0 * * * *", "UTC", "2026-12-01T00:30:00Z");
        // Nothing due before 01:00.
        assert_eq!(
            s.due(None, at("2026-12-01T00:59:00Z")).unwrap(),
            Due::Wait(Some(at("2026-12-01T01:00:00Z")))
        );
        // At 01:00:05 the 01:00 occurrence fires.
        assert_eq!(
            s.due(None, at("2026-12-01T01:00:05Z")).unwrap(),
            Due::Fire {
                occurrence: at("2026-12-01T01:00:00Z"),
                earlier: None
            }
        );
        // Down from 00:30 to 05:20: 01..05 missed; 05:00 is 20 min late, run
        // it, the four before are skipped.
        assert_eq!(
            s.due(None, at("2026-12-01T05:20:00Z")).unwrap(),
            Due::Fire {
                occurrence: at("2026-12-01T05:00:00Z"),
                earlier: Some(Missed {
                    first: at("2026-12-01T01:00:00Z"),
                    last: at("2026-12-01T01:00:00Z"),
                    count: 4,
                    more: false
                })
            }
        );
        // With a 10-minute window, 05:00 at 05:20 is skipped with the rest.
        let strict = Schedule {
            catch_up_ms: 10 * 60 * 1000,
            ..s.clone()
        };
        assert_eq!(
            strict.due(None, at("2026-12-01T05:20:00Z")).unwrap(),
            Due::Skip(Missed {
                first: at("2026-12-01T01:00:00Z"),
                last: at("2026-12-01T05:00:00Z"),
                count: 5,
                more: false
            })
        );
        // After the 05:00 fire, nothing until 06:00.
        assert_eq!(
            s.due(Some(at("2026-12-01T05:00:00Z")), at("2026-12-01T05:20:00Z"))
                .unwrap(),
            Due::Wait(Some(at("2026-12-01T06:00:00Z")))
        );
    }

    #[test]
    fn a_one_off_time_fires_once_then_never() {
        let s = Schedule {
            when: When::At {
                at: at("2026-12-01T08:00:00Z"),
            },
            ..schedule("* * * * *", "UTC", "2026-11-30T00:00:00Z")
        };
        assert_eq!(
            s.due(None, at("2026-12-01T07:00:00Z")).unwrap(),
            Due::Wait(Some(at("2026-12-01T08:00:00Z")))
        );
        assert!(matches!(
            s.due(None, at("2026-12-01T08:00:01Z")).unwrap(),
            Due::Fire { .. }
        ));
        assert_eq!(
            s.due(Some(at("2026-12-01T08:00:00Z")), at("2026-12-02T00:00:00Z"))
                .unwrap(),
            Due::Wait(None)
        );
    }

    #[test]
    fn a_schedule_down_for_a_year_is_counted_without_walking_it_all() {
        // Hourly, down for a year: skipped, "more than" counted.
        let s = Schedule {
            catch_up_ms: 10_000,
            ..schedule("0 * * * *", "UTC", "2025-01-01T00:30:00Z")
        };
        let now = at("2026-01-01T00:20:00Z");
        let Due::Skip(missed) = s.due(None, now).unwrap() else {
            panic!("expected a skip");
        };
        assert!(missed.more);
        assert_eq!(missed.first, at("2025-01-01T01:00:00Z"));
        assert_eq!(missed.last, at("2026-01-01T00:00:00Z"));
        let note = missed.note(now, 10_000, "UTC");
        assert!(
            note.starts_with("missed more than 1001 occurrences from 2025-01-01T01:00+00:00[UTC] to 2026-01-01T00:00+00:00[UTC]"),
            "{note}"
        );
        assert!(
            note.ends_with("20m late, more than catch_up (10s)"),
            "{note}"
        );
        // Minutely: the latest is under a minute old, so on time; the rest
        // are skipped.
        let s = schedule("* * * * *", "UTC", "2025-01-01T00:00:00Z");
        let Due::Fire {
            occurrence,
            earlier,
        } = s.due(None, at("2026-01-01T00:00:30Z")).unwrap()
        else {
            panic!("expected a fire");
        };
        assert_eq!(occurrence, at("2026-01-01T00:00:00Z"));
        assert!(earlier.is_some_and(|e| e.more && e.first == at("2025-01-01T00:00:00Z")));
    }

    #[test]
    fn bad_definitions_are_named() {
        let err = cron("0 9 * *").unwrap_err().to_string();
        assert!(err.contains("expected 5 fields"), "{err}");
        let err = cron("0 25 * * *").unwrap_err().to_string();
        assert!(err.starts_with("cron expression \"0 25 * * *\""), "{err}");
        assert!(cron("0 9 * * MON-FRI").is_ok());
        assert!(cron("@daily").is_ok());
        let err = zone("Mars/Olympus").unwrap_err().to_string();
        assert!(err.starts_with("time zone \"Mars/Olympus\""), "{err}");
        assert_eq!(
            parse_time("2026-12-01T09:00", "Europe/Berlin").unwrap(),
            at("2026-12-01T08:00:00Z")
        );
        assert_eq!(
            parse_time("2026-12-01T09:00:00Z", "Europe/Berlin").unwrap(),
            at("2026-12-01T09:00:00Z")
        );
        assert!(parse_time("tomorrow", "UTC").is_err());
        assert_eq!(parse_duration("1h"), Some(3_600_000));
        assert_eq!(parse_duration("1h 30m"), Some(5_400_000));
        assert_eq!(parse_duration("0"), Some(0));
        assert_eq!(parse_duration("soon"), None);
        assert_eq!(
            Delivery::parse("team:#general"),
            Some(Delivery {
                channel: "team".into(),
                to: "#general".into()
            })
        );
        assert_eq!(Delivery::parse("team"), None);
    }
}
