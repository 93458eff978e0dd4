//! `pincer schedule add|list|show|rm|run-now`: the schedules in the store
//! (`core::schedule`). `pincer serve` fires them; `run-now` fires one here.

use std::io::Read as _;

use anyhow::anyhow;
use serde_json::json;

use super::print;
use crate::app::{App, Failure, Flags, exit, wiring};
use crate::cli::{ScheduleAddArgs, ScheduleCommand};
use crate::core::ids::SessionId;
use crate::core::journal::{JournalError, Write};
use crate::core::schedule::{
    Definition, Delivery, Fire, FireState, Place, Schedule, ScheduleWrite, local_time,
};

pub async fn schedule(flags: &Flags, command: &ScheduleCommand) -> Result<u8, Failure> {
    match command {
        ScheduleCommand::Add(args) => add(flags, args).await,
        ScheduleCommand::List { json } => list(flags, *json).await,
        ScheduleCommand::Show { id, limit, json } => show(flags, id, *limit, *json).await,
        ScheduleCommand::Rm { id } => remove(flags, id).await,
        ScheduleCommand::RunNow { id, json, .. } => run_now(flags, id, *json).await,
    }
}

async fn add(flags: &Flags, args: &ScheduleAddArgs) -> Result<u8, Failure> {
    let prompt = if args.prompt == "-" {
        let mut text = String::new();
        std::io::stdin().read_to_string(&mut text).map_err(|err| {
            Failure::usage(anyhow!("cannot read the prompt from standard input: {err}"))
        })?;
        text
    } else {
        args.prompt.clone()
    };
    let deliver = args
        .deliver
        .as_deref()
        .map(|text| {
            Delivery::parse(text).ok_or_else(|| {
                Failure::usage(anyhow!(
                    "--deliver: expected CHANNEL:TARGET (`team:#dev`, `tg:42`)"
                ))
            })
        })
        .transpose()?;
    let place = match (&args.session, &args.workspace) {
        (Some(id), _) => Place::Session(SessionId::from_string(id.clone())),
        (None, workspace) => Place::Workspace(super::directory(workspace.as_deref())?),
    };
    let opened = App::open(flags).await?;
    if let Place::Session(id) = &place
        && opened
            .store
            .session(id)
            .await
            .map_err(Failure::failed)?
            .is_none()
    {
        return Err(Failure::usage(anyhow!("--session: no session {id}")));
    }
    if let Some(delivery) = &deliver {
        check_delivery(&opened, delivery).map_err(Failure::usage)?;
    }
    let schedule = Definition {
        cron: args.cron.clone(),
        at: args.at.clone(),
        tz: args.tz.clone(),
        prompt,
        catch_up: Some(args.catch_up.clone()),
        id: args.id.clone(),
    }
    .build(place, deliver, "cli", now())
    .map_err(|err| Failure::usage(anyhow!("--{}", err.replacen('_', "-", 1))))?;
    match opened
        .store
        .commit(Write::Schedule(ScheduleWrite::Put(schedule.clone())))
        .await
    {
        Ok(()) => {}
        Err(JournalError::Conflict(reason)) => {
            return Err(Failure::usage(anyhow!("--id: {reason}")));
        }
        Err(err) => return Err(Failure::failed(err)),
    }
    let next = schedule.next_after(now()).map_err(Failure::failed)?;
    let out = if args.json {
        format!("{}\n", json!({"schedule": schedule, "next": next}))
    } else {
        format!(
            "{}  {}  next: {}\n",
            schedule.id,
            schedule.describe_when(),
            next.map_or_else(|| "never".to_owned(), |n| local_time(n, &schedule.tz))
        )
    };
    print(&out)?;
    opened.store.shutdown();
    Ok(exit::OK)
}

/// The channel is configured here and reads the target.
pub fn check_delivery(app: &App, delivery: &Delivery) -> anyhow::Result<()> {
    if !app.config.channels.contains_key(&delivery.channel) {
        anyhow::bail!(
            "--deliver: no channel {} is configured (a [channels.NAME] table)",
            crate::core::quote::quote(&delivery.channel)
        );
    }
    let adapter = wiring::channel_adapter(&app.config, &delivery.channel, &|name| {
        std::env::var(name).ok()
    })
    .map_err(|err| anyhow!("--deliver: {err:#}"))?;
    adapter
        .target(&delivery.to)
        .map_err(|err| anyhow!("--deliver: {err}"))?;
    Ok(())
}

/// A schedule's next occurrence from now, and its latest fire.
fn summary(schedule: &Schedule, last: Option<&Fire>) -> serde_json::Value {
    let after = last
        .filter(|f| !f.manual)
        .map_or(schedule.created_at - 1, |f| f.occurrence)
        .max(now());
    let next = schedule.next_after(after).ok().flatten();
    json!({"schedule": schedule, "next": next, "last_fire": last})
}

async fn list(flags: &Flags, json: bool) -> Result<u8, Failure> {
    let opened = App::open(flags).await?;
    let store = opened.store.clone();
    let schedules = store.schedules().await.map_err(Failure::failed)?;
    let mut out = String::new();
    for schedule in &schedules {
        let fires = store
            .fires(Some(&schedule.id), 1)
            .await
            .map_err(Failure::failed)?;
        let view = summary(schedule, fires.first());
        if json {
            out.push_str(&view.to_string());
            out.push('\n');
        } else {
            out.push_str(&line(schedule, &view, fires.first()));
        }
    }
    if schedules.is_empty() && !json {
        out.push_str("no schedules (pincer schedule add --cron EXPR --prompt TEXT)\n");
    }
    print(&out)?;
    store.shutdown();
    Ok(exit::OK)
}

fn line(schedule: &Schedule, view: &serde_json::Value, last: Option<&Fire>) -> String {
    let next = view["next"]
        .as_i64()
        .map_or_else(|| "never".to_owned(), |n| local_time(n, &schedule.tz));
    let last = last.map_or_else(
        || "none yet".to_owned(),
        |f| {
            format!(
                "{} {}",
                local_time(f.occurrence, &schedule.tz),
                f.state.as_str()
            )
        },
    );
    let to = schedule
        .deliver
        .as_ref()
        .map(|d| format!("  → {d}"))
        .unwrap_or_default();
    let prompt: String = schedule.prompt.chars().take(50).collect();
    format!(
        "{}  {}  next: {next}  last: {last}{to}  {prompt:?}\n",
        schedule.id,
        schedule.describe_when(),
    )
}

async fn find(opened: &App, id: &str) -> Result<Schedule, Failure> {
    opened
        .store
        .schedules()
        .await
        .map_err(Failure::failed)?
        .into_iter()
        .find(|s| s.id == id)
        .ok_or_else(|| {
            Failure::usage(anyhow!(
                "no schedule {} (pincer schedule list)",
                crate::core::quote::quote(id)
            ))
        })
}

async fn show(flags: &Flags, id: &str, limit: usize, json: bool) -> Result<u8, Failure> {
    let opened = App::open(flags).await?;
    let schedule = find(&opened, id).await?;
    let fires = opened
        .store
        .fires(Some(id), limit)
        .await
        .map_err(Failure::failed)?;
    let view = summary(&schedule, fires.first());
    let out = if json {
        let mut view = view;
        view["fires"] = serde_json::to_value(&fires).map_err(Failure::failed)?;
        format!("{view}\n")
    } else {
        let mut out = line(&schedule, &view, fires.first());
        out.push_str(&format!("  prompt: {}\n", schedule.prompt));
        out.push_str(&format!(
            "  runs in: {}\n",
            match &schedule.place {
                Place::Session(id) => format!("session {id}"),
                Place::Workspace(dir) => format!("a new session in {}", dir.display()),
            }
        ));
        out.push_str(&format!(
            "  catch_up: {}\n",
            crate::core::schedule::human_duration(schedule.catch_up_ms)
        ));
        for fire in &fires {
            out.push_str(&fire_line(&schedule, fire));
        }
        out
    };
    print(&out)?;
    opened.store.shutdown();
    Ok(exit::OK)
}

fn fire_line(schedule: &Schedule, fire: &Fire) -> String {
    let run = fire
        .run_id
        .as_ref()
        .map(|r| format!("  run {r}"))
        .unwrap_or_default();
    let note = fire
        .note
        .as_ref()
        .map(|n| format!("  {n}"))
        .unwrap_or_default();
    let manual = if fire.manual { " (run-now)" } else { "" };
    format!(
        "  {}  {}{manual}{run}{note}\n",
        local_time(fire.occurrence, &schedule.tz),
        fire.state.as_str()
    )
}

async fn remove(flags: &Flags, id: &str) -> Result<u8, Failure> {
    let opened = App::open(flags).await?;
    match opened
        .store
        .commit(Write::Schedule(ScheduleWrite::Remove { id: id.to_owned() }))
        .await
    {
        Ok(()) => {}
        Err(JournalError::Conflict(_)) => {
            return Err(Failure::usage(anyhow!(
                "no schedule {} (pincer schedule list)",
                crate::core::quote::quote(id)
            )));
        }
        Err(err) => return Err(Failure::failed(err)),
    }
    print(&format!("{id}  removed\n"))?;
    opened.store.shutdown();
    Ok(exit::OK)
}

async fn run_now(flags: &Flags, id: &str, json: bool) -> Result<u8, Failure> {
    let opened = App::open(flags).await?;
    opened.log_problems();
    let schedule = find(&opened, id).await?;
    let scheduler = wiring::schedules::scheduler(&opened);
    let fire = scheduler
        .run_now(schedule.clone())
        .await
        .map_err(Failure::failed)?;
    opened.runtime.shutdown().await;
    let out = if json {
        format!(
            "{}\n",
            serde_json::to_string(&fire).map_err(Failure::failed)?
        )
    } else {
        let intent = fire
            .intent_id
            .as_ref()
            .map(|i| format!("  reply queued as {i}"))
            .unwrap_or_default();
        format!("{}{intent}\n", fire_line(&schedule, &fire).trim())
    };
    print(&out)?;
    opened.store.shutdown();
    Ok(if fire.state == FireState::Done {
        exit::OK
    } else {
        exit::RUN_FAILED
    })
}

/// Now, on the schedules' clock (`wiring::schedules::clock`).
fn now() -> i64 {
    wiring::schedules::clock().now_millis()
}
