//! `pincer schedule add|list|show|rm|run-now`: the schedules in the store
//! (`core::schedule`). `pincer serve` fires them; `run-now` fires one here.

use std::io::Read as _;

use anyhow::anyhow;

use super::print;
use crate::app::wiring::schedules::{AddError, Where};
use crate::app::{App, Failure, Flags, exit, wiring};
use crate::cli::{ScheduleAddArgs, ScheduleCommand};
use crate::core::journal::{JournalError, Write};
use crate::core::schedule::{
    Definition, Fire, FireState, Place, Schedule, ScheduleWrite, local_time,
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
    let place = match (&args.session, &args.workspace) {
        (Some(id), _) => Where::Session(id.clone()),
        (None, Some(dir)) => Where::Workspace(dir.clone()),
        (None, None) => Where::Workspace(super::directory(None)?),
    };
    let opened = App::open(flags).await?;
    let definition = Definition {
        cron: args.cron.clone(),
        at: args.at.clone(),
        tz: args.tz.clone(),
        prompt,
        catch_up: Some(args.catch_up.clone()),
        id: args.id.clone(),
    };
    let schedule =
        wiring::schedules::add(&opened, definition, place, args.deliver.as_deref(), "cli")
            .await
            .map_err(|err| match err {
                // `catch_up: …` is `--catch-up`'s.
                AddError::Invalid(reason) => Failure::usage(anyhow!("--{}", option_named(&reason))),
                AddError::Store(err) => Failure::failed(err),
            })?;
    let view = wiring::schedules::view(&schedule, None);
    let out = if args.json {
        let added = crate::views::ScheduleAdded::from(view);
        format!("{}\n", crate::views::json(&added))
    } else {
        format!(
            "{}  {}  next: {}\n",
            schedule.id,
            schedule.describe_when(),
            view.next
                .map_or_else(|| "never".to_owned(), |n| local_time(n, &schedule.tz))
        )
    };
    print(&out)?;
    opened.store.shutdown();
    Ok(exit::OK)
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
        let view = wiring::schedules::view(schedule, fires.first());
        if json {
            out.push_str(&crate::views::json(&view).to_string());
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

fn line(schedule: &Schedule, view: &crate::views::ScheduleView, last: Option<&Fire>) -> String {
    let next = view
        .next
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
    let view = wiring::schedules::view(&schedule, fires.first());
    let out = if json {
        let details = crate::views::ScheduleDetails { view, fires };
        format!("{}\n", crate::views::json(&details))
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

/// `catch_up: …` as `catch-up: …`: a field's name as its option's.
fn option_named(reason: &str) -> String {
    match reason.split_once(": ") {
        Some((field, rest)) => format!("{}: {rest}", field.replace('_', "-")),
        None => reason.to_owned(),
    }
}
