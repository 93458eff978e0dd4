//! `pincer runs show`: one run, as a line or as JSON; the same line and
//! JSON stand for each run in `pincer sessions show`.

use super::print;
use crate::app::{Failure, Flags, exit};
use crate::cli::RunsCommand;
use crate::core::ids::RunId;
use crate::core::run::RunInfo;
use crate::stdout::timestamp as time;

pub async fn runs(flags: &Flags, command: &RunsCommand) -> Result<u8, Failure> {
    let opened = crate::app::App::open(flags).await?;
    let runtime = opened.runtime;
    let RunsCommand::Show { id, json } = command;
    let run = runtime
        .run(&RunId::from_string(id.clone()))
        .await
        .map_err(Failure::usage)?;
    if *json {
        print(&format!("{}\n", crate::views::run(&run)))?;
    } else {
        print(&format!("{}\n", run_line(&run)))?;
    }
    opened.store.shutdown();
    Ok(exit::OK)
}

pub(super) fn run_line(run: &RunInfo) -> String {
    let outcome = match (&run.error, run.stop_reason) {
        (Some(error), _) => format!(" error: {error}"),
        (None, Some(reason)) => format!(" ({})", reason.as_str()),
        (None, None) => String::new(),
    };
    let duration = match (run.started_at, run.ended_at) {
        (Some(start), Some(end)) => format!(" in {} ms", end - start),
        _ => String::new(),
    };
    let cost = run
        .cost
        .as_ref()
        .map(|cost| format!("  cost {cost}"))
        .unwrap_or_default();
    format!(
        "{}  {}  {}{}{}  tokens in {} out {}{}",
        run.id,
        time(run.created_at),
        run.state.as_str(),
        outcome,
        duration,
        run.usage.input_tokens,
        run.usage.output_tokens,
        cost
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::event::{RunState, StopReason};
    use crate::core::ids::SessionId;
    use crate::core::usage::Usage;

    fn run(state: RunState) -> RunInfo {
        RunInfo {
            id: RunId::from_string("run_1".into()),
            session_id: SessionId::from_string("ses_1".into()),
            state,
            stop_reason: None,
            error: None,
            usage: Usage {
                input_tokens: 4,
                output_tokens: 1,
                ..Usage::default()
            },
            cost: None,
            created_at: 0,
            started_at: None,
            ended_at: None,
        }
    }

    #[test]
    fn a_run_line_says_how_it_ended_how_long_it_took_and_its_tokens() {
        let mut done = run(RunState::Completed);
        done.stop_reason = Some(StopReason::EndTurn);
        done.started_at = Some(10);
        done.ended_at = Some(260);
        let line = run_line(&done);
        assert!(
            line.starts_with("run_1  ")
                && line.ends_with("  completed (end_turn) in 250 ms  tokens in 4 out 1"),
            "{line}"
        );
        let mut failed = run(RunState::Failed);
        failed.error = Some("the provider failed".into());
        failed.stop_reason = Some(StopReason::EndTurn);
        assert!(
            run_line(&failed).ends_with("  failed error: the provider failed  tokens in 4 out 1"),
            "{}",
            run_line(&failed)
        );
    }
}
