//! A run at the terminal: its events shown as they come (a burst in one
//! write), the working indicator and the reply's line in progress redrawn
//! in place, approvals and questions asked at the prompt, lines typed
//! meanwhile taken as steering, and Ctrl-C to cancel (twice to leave).

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context as _, anyhow};
use futures::FutureExt as _;

use super::editor::{self, TypeAhead};
use super::markdown::sanitize;
use super::view::{View, is_plain_output, shows_output};
use super::{Chat, Flow, Start};
use crate::core::event::{Event, EventRecord};
use crate::core::ids::{RunId, SessionId};
use crate::core::question::Question;
use crate::core::runtime::Subscription;
use crate::core::session::ContentPart;

/// How soon a second Ctrl-C during a run quits instead of cancelling again.
const QUIT_WINDOW: Duration = Duration::from_secs(2);

/// Most events shown in one write.
const BURST: usize = 4096;

/// The working indicator's frames.
const SPINNER: [&str; 10] = ["⠋", "⠙", "⠹", "⠸", "⠼", "⠴", "⠦", "⠧", "⠇", "⠏"];

/// The longest line in progress redrawn as it comes (each burst redraws
/// it whole): a longer one shows once complete.
const PROVISIONAL_MAX: usize = 2048;

/// How often the working indicator moves.
const TICK: Duration = Duration::from_millis(100);

/// What a working run shows on the line below its output until it is
/// replaced: the working indicator while the model has said nothing, then
/// the reply's line in progress as it arrives (rendered once complete).
/// Erased before anything else is written, by moving back over the rows it
/// took (a long line wraps).
#[derive(Default)]
struct Provisional {
    /// Terminal rows the shown text takes (0: nothing shown).
    rows: usize,
}

impl Provisional {
    /// Erases what is shown.
    fn clear(&mut self, out: &mut String) {
        if self.rows == 0 {
            return;
        }
        out.push('\r');
        if self.rows > 1 {
            out.push_str(&format!("\x1b[{}A", self.rows - 1));
        }
        out.push_str("\x1b[J");
        self.rows = 0;
    }

    /// Shows `text` (one line, no newline), in place of what was shown.
    fn show(&mut self, text: &str, styled_text: &str, out: &mut String) {
        self.clear(out);
        if text.is_empty() {
            return;
        }
        let columns = terminal_size::terminal_size()
            .map_or(80, |(width, _)| usize::from(width.0))
            .max(1);
        let width = unicode_width::UnicodeWidthStr::width(text).max(1);
        out.push_str(styled_text);
        self.rows = width.div_ceil(columns);
    }
}

/// What the loop of one run keeps between events.
struct Running {
    session: SessionId,
    run_id: RunId,
    subscription: Subscription,
    view: View,
    /// When Ctrl-C was last pressed during the run.
    interrupted: Option<Instant>,
    /// When the prompt was sent: the indicator counts from it.
    asked: Instant,
    provisional: Provisional,
    /// Whether the model has shown anything yet (the indicator goes then).
    said: bool,
    /// The indicator's frame.
    frame: usize,
    /// The retry waited for, and when it is made.
    retry: Option<(Instant, Event)>,
    /// Lines typed while the run works.
    type_ahead: TypeAhead,
}

/// What the loop waited for.
enum Next {
    Record(Option<Arc<EventRecord>>),
    Interrupt,
    Tick,
}

impl Running {
    /// A run just started: nothing shown yet, lines typed from now on read
    /// ahead.
    fn new(session: SessionId, run_id: RunId, subscription: Subscription, color: bool) -> Self {
        Self {
            session,
            run_id,
            subscription,
            view: View::new(color),
            interrupted: None,
            asked: Instant::now(),
            provisional: Provisional::default(),
            said: false,
            frame: 0,
            retry: None,
            type_ahead: TypeAhead::start(),
        }
    }

    /// Shows `record` and, while it only adds output, the events already
    /// waiting after it (up to [`BURST`]); the last one taken is returned.
    fn show_burst(&mut self, mut record: Arc<EventRecord>, out: &mut String) -> Arc<EventRecord> {
        let mut taken = 0;
        loop {
            if record.run_id == self.run_id {
                self.view.show(&record.event, out);
            }
            if record.run_id != self.run_id || !is_plain_output(&record.event) || taken >= BURST {
                return record;
            }
            match self.subscription.next().now_or_never() {
                Some(Some(next)) => {
                    record = next;
                    taken += 1;
                }
                Some(None) | None => return record,
            }
        }
    }
}

impl Chat {
    /// Runs a prompt or command, showing its events until it ends.
    pub(super) async fn run(&mut self, start: Start) -> anyhow::Result<Flow> {
        let session = self.session().await?;
        let subscription = self
            .subscription
            .take()
            .context("the session has no event subscription")?;
        // A Ctrl-C from before this run is no request to cancel it.
        while let Some(Some(())) = self.interrupt.recv().now_or_never() {}
        let run_id = RunId::generate();
        let started = match start {
            Start::Prompt(text) => {
                self.runtime
                    .prompt_as(&session, run_id.clone(), vec![ContentPart::Text { text }])
                    .await
            }
            Start::Command(command) => {
                self.runtime
                    .command_as(&session, run_id.clone(), command)
                    .await
            }
        };
        if let Err(err) = started {
            self.subscription = Some(subscription);
            self.write(&format!("error: {err}\n"));
            return Ok(Flow::Continue);
        }
        let mut run = Running::new(session, run_id, subscription, self.color);
        // Until the model says something: a working indicator with the time
        // (or the retry being waited for), drawn at once and on every tick.
        if self.live {
            let mut out = String::new();
            self.draw_indicator(&mut run, &mut out);
            self.write(&out);
        }
        loop {
            match self.next(&mut run).await {
                Next::Tick => self.tick(&mut run),
                Next::Interrupt => {
                    if self.interrupted(&mut run) == Flow::Quit {
                        return Ok(Flow::Quit);
                    }
                }
                Next::Record(record) => {
                    let record =
                        record.ok_or_else(|| anyhow!("the session closed during the run"))?;
                    if self.event(&mut run, record).await? {
                        break;
                    }
                }
            }
        }
        Ok(self.finish(run))
    }

    /// The next event, Ctrl-C, or a tick while something is drawn in place
    /// or typed ahead.
    async fn next(&mut self, run: &mut Running) -> Next {
        let tick = tokio::time::sleep(TICK);
        let ticking = (self.live && !run.said) || run.type_ahead.is_active();
        tokio::select! {
            record = run.subscription.next() => Next::Record(record),
            _ = self.interrupt.recv() => Next::Interrupt,
            _ = tick, if ticking => Next::Tick,
        }
    }

    /// A tick: lines typed ahead taken, the indicator moved or the line in
    /// progress drawn back under them.
    fn tick(&mut self, run: &mut Running) {
        let mut out = String::new();
        let typed = run.type_ahead.lines();
        if !typed.is_empty() {
            // Above the line in progress, which stays pending.
            run.provisional.clear(&mut out);
            self.take_typed(&run.session, typed, &mut out);
        }
        if self.live && !run.said {
            run.frame += 1;
            self.draw_indicator(run, &mut out);
        } else if self.live && !out.is_empty() {
            // The reply's line in progress, back under what was said.
            self.draw_pending(run, &mut out);
        }
        self.write(&out);
    }

    /// Ctrl-C: cancels the run; a second one within [`QUIT_WINDOW`] leaves.
    fn interrupted(&mut self, run: &mut Running) -> Flow {
        let mut out = String::new();
        run.provisional.clear(&mut out);
        run.view.flush(&mut out);
        self.runtime.cancel_run(&run.session, &run.run_id);
        if run.interrupted.is_some_and(|at| at.elapsed() < QUIT_WINDOW) {
            self.write(&out);
            self.write(&self.dim("\nLeaving.\n"));
            return Flow::Quit;
        }
        run.interrupted = Some(Instant::now());
        out.push_str(&self.dim("\nCancelling (Ctrl-C again to leave)\n"));
        self.write(&out);
        Flow::Continue
    }

    /// Shows an event (with the burst after it) and answers what it asks;
    /// true when it ends the run.
    async fn event(&mut self, run: &mut Running, record: Arc<EventRecord>) -> anyhow::Result<bool> {
        // Events already waiting are shown in the same write: a fast
        // stream costs one write per burst, not one per chunk.
        let mut out = String::new();
        run.provisional.clear(&mut out);
        let record = run.show_burst(record, &mut out);
        let ours = record.run_id == run.run_id;
        if ours && shows_output(&record.event) {
            run.said = true;
        }
        if ours && record.event.retry_status().is_some() {
            self.show_retry(run, &record.event, &mut out);
        }
        let asks = matches!(
            record.event,
            Event::ApprovalRequested { .. } | Event::QuestionAsked { .. }
        );
        // The reply's line in progress, shown as it comes; rendered
        // (Markdown) once complete. Not before a question to the person.
        if self.live && run.said && !asks && record.event.terminal_state().is_none() {
            self.draw_pending(run, &mut out);
        }
        self.write(&out);
        if !ours {
            return Ok(false);
        }
        if asks {
            // Lines typed before the question are not its answer.
            let typed = run.type_ahead.lines();
            if !typed.is_empty() {
                let mut out = String::new();
                self.take_typed(&run.session, typed, &mut out);
                self.write(&out);
            }
        }
        if let Event::ApprovalRequested { approval_id, .. } = &record.event {
            self.approval(run, approval_id).await?;
        }
        if let Some((question_id, asked)) = record.event.question() {
            self.question(run, question_id, &asked).await?;
        }
        Ok(record.event.terminal_state().is_some())
    }

    /// A retry: on the indicator while the model has said nothing, else a
    /// line of its own.
    fn show_retry(&self, run: &mut Running, event: &Event, out: &mut String) {
        if self.live && !run.said {
            let wait = if let Event::Retrying { wait_ms, .. } = event {
                Duration::from_millis(*wait_ms)
            } else {
                Duration::ZERO
            };
            run.retry = Some((Instant::now() + wait, event.clone()));
            self.draw_indicator(run, out);
        } else if let Some(status) = event.retry_status() {
            out.push_str(&self.dim(&format!("{status}\n")));
        }
    }

    /// Asks the approval at the prompt; Ctrl-C there cancels the run.
    async fn approval(&mut self, run: &Running, approval_id: &str) -> anyhow::Result<()> {
        let taken = self.ask_approval().await?.map(|decision| {
            self.runtime
                .answer_approval(&run.session, approval_id, decision)
        });
        self.settled(run, taken, "The approval was already decided.\n");
        Ok(())
    }

    /// Asks the question at the prompt; Ctrl-C there cancels the run.
    async fn question(
        &mut self,
        run: &Running,
        question_id: &str,
        asked: &Question,
    ) -> anyhow::Result<()> {
        let taken = self.ask_question(asked).await?.map(|answer| {
            self.runtime
                .answer_question(&run.session, question_id, answer)
        });
        self.settled(run, taken, "The question was already answered.\n");
        Ok(())
    }

    /// After the person answered: `taken` is whether the answer was the
    /// first (`already` says it was not), `None` when they pressed Ctrl-C
    /// instead (the run is cancelled).
    fn settled(&self, run: &Running, taken: Option<bool>, already: &str) {
        match taken {
            Some(true) => {}
            Some(false) => self.write(&self.dim(already)),
            None => {
                self.runtime.cancel_run(&run.session, &run.run_id);
                self.write(&self.dim("Cancelling\n"));
            }
        }
    }

    /// After the run's end: lines typed meanwhile queued, the subscription
    /// kept for the next run, and a second Ctrl-C that came as the run ended
    /// still leaving.
    fn finish(&mut self, run: Running) -> Flow {
        let Running {
            mut subscription,
            mut type_ahead,
            interrupted,
            ..
        } = run;
        // Lines entered as the run ended wait for the next prompt; what is
        // half typed shows at the prompt once echo is back.
        for line in type_ahead.lines() {
            if !line.trim().is_empty() {
                self.queued.push_back(line);
            }
        }
        drop(type_ahead);
        // What the subscription still holds of this run (events it already
        // delivered from the tape after a lag) is read now, not at the next run.
        while let Some(Some(_)) = subscription.next().now_or_never() {}
        self.subscription = Some(subscription);
        if interrupted.is_some_and(|at| at.elapsed() < QUIT_WINDOW)
            && let Some(Some(())) = self.interrupt.recv().now_or_never()
        {
            self.write(&self.dim("Leaving.\n"));
            return Flow::Quit;
        }
        Flow::Continue
    }

    /// The working indicator: the time since Enter, or the retry waited for
    /// (its wait counting down).
    fn draw_indicator(&self, run: &mut Running, out: &mut String) {
        let retry = run
            .retry
            .as_ref()
            .map(|(at, event)| (at.saturating_duration_since(Instant::now()), event));
        let text = indicator(run.frame, run.asked.elapsed(), retry);
        run.provisional.show(&text, &self.dim(&text), out);
    }

    /// The line in progress (the reply's, or the model's thinking), drawn
    /// provisionally until it completes.
    fn draw_pending(&self, run: &mut Running, out: &mut String) {
        let view = &run.view;
        if view.reply.has_pending() && view.reply.pending().len() <= PROVISIONAL_MAX {
            let text = sanitize(view.reply.pending());
            run.provisional.show(&text, &text, out);
        } else if !view.thoughts.pending().is_empty()
            && view.thoughts.pending().len() <= PROVISIONAL_MAX
        {
            let text = format!("  ~ {}", sanitize(view.thoughts.pending()));
            run.provisional.show(&text, &self.dim(&text), out);
        }
    }

    /// Lines typed while the run works: each is steering, taken in at the
    /// model's next turn; a slash command, or a line the run can no longer
    /// take, waits to be the next prompt.
    fn take_typed(&mut self, session: &SessionId, typed: Vec<String>, out: &mut String) {
        for line in typed {
            let line = editor::joined(&line);
            if line.trim().is_empty() {
                continue;
            }
            self.editor.remember(&line);
            let shown = sanitize(&line);
            if crate::core::slash::split(&line).is_some() {
                out.push_str(&self.dim(&format!("> {shown}  (queued: runs after this run)\n")));
                self.queued.push_back(line);
                continue;
            }
            match self
                .runtime
                .steer(session, vec![ContentPart::Text { text: line.clone() }])
            {
                Ok(Some(_)) => out.push_str(&self.dim(&format!(
                    "> {shown}  (steering: the model reads it at its next turn)\n"
                ))),
                Ok(None) => {
                    out.push_str(&self.dim(&format!("> {shown}  (queued as the next prompt)\n")));
                    self.queued.push_back(line);
                }
                Err(err) => out.push_str(&format!("error: {err}\n")),
            }
        }
    }
}

/// The indicator's text: a spinner frame, then the time since the prompt,
/// or the retry waited for (`left` until it is made).
fn indicator(frame: usize, elapsed: Duration, retry: Option<(Duration, &Event)>) -> String {
    let spinner = SPINNER[frame % SPINNER.len()];
    let status = retry.and_then(|(left, event)| {
        let Event::Retrying {
            attempt,
            attempts,
            reason,
            ..
        } = event
        else {
            return None;
        };
        if left.is_zero() {
            return Some(format!(
                "working {}s, attempt {attempt} of {attempts}",
                elapsed.as_secs()
            ));
        }
        Event::Retrying {
            attempt: *attempt,
            attempts: *attempts,
            wait_ms: u64::try_from(left.as_millis()).unwrap_or(u64::MAX),
            reason: reason.clone(),
        }
        .retry_status()
    });
    format!(
        "{spinner} {}",
        status.unwrap_or_else(|| format!("working {}s", elapsed.as_secs()))
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn retrying() -> Event {
        Event::Retrying {
            attempt: 2,
            attempts: 3,
            wait_ms: 9000,
            reason: "429 Too Many Requests".into(),
        }
    }

    #[test]
    fn the_indicator_counts_the_time_or_the_retrys_wait() {
        let elapsed = Duration::from_secs(7);
        assert_eq!(indicator(0, elapsed, None), "⠋ working 7s");
        assert_eq!(indicator(11, elapsed, None), "⠙ working 7s");
        let event = retrying();
        assert_eq!(
            indicator(0, elapsed, Some((Duration::from_millis(2500), &event))),
            "⠋ retrying in 2.5 s (429 Too Many Requests), 2 of 3"
        );
        assert_eq!(
            indicator(0, elapsed, Some((Duration::ZERO, &event))),
            "⠋ working 7s, attempt 2 of 3"
        );
    }
}
