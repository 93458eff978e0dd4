//! Who runs a live session's prompts when several processes share the
//! journal: the session's lease (claimed before a run leaves `queued`,
//! renewed while it works, given up when nothing more is queued), this
//! process's own lease (kept while it has runs), and the control path —
//! cancels and answers for runs another process works, left in the journal
//! for the lease holder and carried out there once.

use super::*;

/// How this process holds leases ([`Runtime::lease_holding`]).
#[derive(Clone)]
pub struct LeaseHolding {
    pub leases: Arc<dyn Leases>,
    /// This process's unique name as a holder.
    pub holder: String,
    pub timing: LeaseTiming,
    pub clock: Arc<dyn Clock>,
}

/// How long a steering message left for another process waits to be taken.
const STEER_WAIT: std::time::Duration = std::time::Duration::from_secs(2);

/// How long an answer left for the process working a run waits to be taken.
const ANSWER_WAIT: std::time::Duration = std::time::Duration::from_secs(2);

impl Runtime {
    /// Starts carrying out requests other processes leave for this one's
    /// runs, once a session is live here (not at start-up: a process that
    /// only answers `initialize` watches nothing).
    pub(super) fn start_taking_controls(&self) {
        let Some(notifier) = self.inner.notifier.clone() else {
            return;
        };
        self.inner.taking_controls.call_once(|| {
            let runtime = self.clone();
            let mut wake = notifier.watch();
            let shutdown = self.inner.shutdown.clone();
            self.inner.tasks.spawn(async move {
                loop {
                    tokio::select! {
                        _ = shutdown.cancelled() => return,
                        changed = wake.changed() => if changed.is_err() { return },
                    }
                    runtime.take_controls().await;
                }
            });
        });
    }

    /// The leases this process holds sessions by, its name as their holder,
    /// how it keeps them and the clock it reads their times from: a part of
    /// the process that must be the only one of its kind (a chat channel
    /// account's delivery) holds its own lease the same way. `None` when no
    /// leases were set.
    pub fn lease_holding(&self) -> Option<LeaseHolding> {
        self.inner
            .leases
            .as_ref()
            .map(|(leases, holder)| LeaseHolding {
                leases: leases.clone(),
                holder: holder.clone(),
                timing: self.inner.config.leases,
                clock: self.inner.clock.clone(),
            })
    }

    /// Holds this process's own lease (`LeaseKey::process`) from its first
    /// run (or from the start, for `pincer serve`, which shows as a live
    /// instance in `pincer store status` so) until shutdown, renewed as a
    /// session's is: while it lives, the runs it queued behind another
    /// process's are its own; once it lapses (the process killed or stopped
    /// past it), whoever opens the journal next (or a serving instance's
    /// periodic recovery) ends them.
    pub fn keep_process_lease(&self) {
        let Some((leases, holder)) = self.inner.leases.clone() else {
            return;
        };
        self.inner.keeping_process_lease.call_once(|| {
            let shutdown = self.inner.shutdown.clone();
            let timing = self.inner.config.leases;
            let clock = self.inner.clock.clone();
            self.inner.tasks.spawn(async move {
                let key = LeaseKey::process(&holder);
                let mut held: Option<Lease> = None;
                loop {
                    let kept = match &held {
                        Some(lease) => leases.renew(lease, clock.now_millis(), timing.ttl_ms).await,
                        None => Err(LeaseError::Lost),
                    };
                    held = match kept {
                        Ok(lease) => Some(lease),
                        Err(_) => match leases
                            .claim(&key, &holder, clock.now_millis(), timing.ttl_ms)
                            .await
                        {
                            Ok(lease) => Some(lease),
                            Err(err) => {
                                tracing::warn!(error = %err, "cannot keep this process's lease");
                                None
                            }
                        },
                    };
                    tokio::select! {
                        _ = shutdown.cancelled() => break,
                        _ = tokio::time::sleep(timing.renew) => {}
                    }
                }
                if let Some(lease) = held
                    && let Err(err) = leases.release(&lease).await
                {
                    tracing::debug!(error = %err, "cannot release this process's lease");
                }
            });
        });
    }

    /// Carries out the requests left in the journal that are about this
    /// process's runs: each taken first (so once), then done as this
    /// process's own face would.
    pub(super) async fn take_controls(&self) {
        let working: Vec<Arc<LiveSession>> = self
            .inner
            .live
            .lock()
            .values()
            .filter(|live| !live.pending.lock().is_empty())
            .cloned()
            .collect();
        for live in working {
            let id = live.session.lock().id.clone();
            let controls = match self.inner.journal.controls(&id).await {
                Ok(controls) => controls,
                Err(err) => {
                    tracing::warn!(session = %id, error = %err, "cannot read requests for the session");
                    continue;
                }
            };
            for (number, control) in controls {
                if !self.is_mine(&live, &id, &control) {
                    continue;
                }
                match self
                    .inner
                    .journal
                    .commit(Write::TakeControl { id: number })
                    .await
                {
                    Ok(()) => self.carry_out(&id, control),
                    Err(JournalError::Conflict(_)) => {}
                    Err(err) => {
                        tracing::warn!(session = %id, error = %err, "cannot take a request for the session");
                    }
                }
            }
        }
    }

    /// Whether a request is about a run, an approval or a question of this process.
    pub(super) fn is_mine(
        &self,
        live: &LiveSession,
        session: &SessionId,
        control: &Control,
    ) -> bool {
        match control {
            Control::Cancel { runs } => live
                .pending
                .lock()
                .iter()
                .any(|(run, _)| runs.contains(run)),
            Control::Approval { approval_id, .. } => {
                self.inner.approvals.waiting(session).contains(approval_id)
            }
            Control::Question { question_id, .. } => {
                self.inner.questions.waiting(session).contains(question_id)
            }
            // The session works here: its run, or its next prompt, takes it.
            Control::Steer { .. } => true,
        }
    }

    pub(super) fn carry_out(&self, session: &SessionId, control: Control) {
        match control {
            Control::Cancel { runs } => {
                for run in runs {
                    self.cancel_run(session, &run);
                }
            }
            Control::Approval {
                approval_id,
                decision,
            } => {
                self.answer_approval(session, &approval_id, decision);
            }
            Control::Question {
                question_id,
                answer,
            } => {
                self.answer_question(session, &question_id, answer);
            }
            Control::Steer { content } => {
                let taken = self
                    .live(session)
                    .and_then(|live| live.steering.put(content.clone()));
                if taken.is_none() {
                    // The run it was for ended: the message becomes a prompt.
                    let (runtime, session) = (self.clone(), session.clone());
                    self.inner.tasks.spawn(async move {
                        if let Err(err) = runtime.prompt(&session, content).await {
                            tracing::warn!(session = %session, error = %err, "cannot send a steering message as a prompt");
                        }
                    });
                }
            }
        }
    }

    /// Steers the prompt run another process works on session `id` (see
    /// [`Control::Steer`]): left in the journal for that process, which
    /// takes it at once. Returns that run; `None` when no other process
    /// works a run of the session, or none took the message within
    /// `STEER_WAIT` (it is then taken back, so it is refused, never left
    /// to arrive later).
    pub async fn steer_elsewhere(
        &self,
        id: &SessionId,
        content: Vec<ContentPart>,
    ) -> Result<Option<RunId>, RuntimeError> {
        if self.inner.notifier.is_none() {
            return Ok(None);
        }
        let session = self.session(id).await?;
        self.check_content(&session.provider, &session.model, &content)?;
        let Some(run) = self
            .inner
            .journal
            .runs(id)
            .await?
            .into_iter()
            .rev()
            .find(|run| {
                matches!(run.state, RunState::Running | RunState::Waiting)
                    && !self.works_here(id, &run.id)
            })
        else {
            return Ok(None);
        };
        let control = Control::Steer { content };
        self.inner
            .journal
            .commit(Write::Control {
                session: id.clone(),
                control: control.clone(),
                at: self.now(),
            })
            .await?;
        let deadline = tokio::time::Instant::now() + STEER_WAIT;
        loop {
            let left: Vec<i64> = self
                .inner
                .journal
                .controls(id)
                .await?
                .into_iter()
                .filter(|(_, c)| c == &control)
                .map(|(number, _)| number)
                .collect();
            let Some(&mine) = left.first() else {
                return Ok(Some(run.id));
            };
            if tokio::time::Instant::now() >= deadline {
                // Taken back (the conditional delete decides who had it).
                return match self
                    .inner
                    .journal
                    .commit(Write::TakeControl { id: mine })
                    .await
                {
                    Ok(()) => Ok(None),
                    Err(JournalError::Conflict(_)) => Ok(Some(run.id)),
                    Err(err) => Err(err.into()),
                };
            }
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
    }

    /// Answers an approval that `run` of the session asks, wherever the run
    /// works: here, or in another process whose run this one follows from
    /// the tape, through the journal (see `Runtime::answer_elsewhere`).
    /// True when this answer is the one the run got; false when the
    /// approval was settled otherwise (answered first by someone else,
    /// timed out, its run ended) or no process took the answer.
    pub async fn answer_approval_of(
        &self,
        session: &SessionId,
        run: &RunId,
        approval_id: &str,
        decision: ApprovalDecision,
    ) -> Result<bool, RuntimeError> {
        if self.works_here(session, run) || self.inner.notifier.is_none() {
            return Ok(self.answer_approval(session, approval_id, decision));
        }
        let control = Control::Approval {
            approval_id: approval_id.to_owned(),
            decision,
        };
        self.answer_elsewhere(session, run, control, |event| {
            matches!(event, Event::ApprovalDecided { approval_id: id, .. } if id == approval_id)
        })
        .await
    }

    /// Answers a question that `run` of the session asks, wherever the run
    /// works (see [`Runtime::answer_approval_of`]).
    pub async fn answer_question_of(
        &self,
        session: &SessionId,
        run: &RunId,
        question_id: &str,
        answer: QuestionAnswer,
    ) -> Result<bool, RuntimeError> {
        if self.works_here(session, run) || self.inner.notifier.is_none() {
            return Ok(self.answer_question(session, question_id, answer));
        }
        let control = Control::Question {
            question_id: question_id.to_owned(),
            answer,
        };
        self.answer_elsewhere(session, run, control, |event| {
            matches!(event, Event::QuestionAnswered { question_id: id, .. } if id == question_id)
        })
        .await
    }

    /// Leaves an answer (`control`) for the process working `run` and
    /// waits to learn whether it won: true once that process took it (it
    /// takes an answer only while its request still waits, so the run got
    /// this one); false when the request was settled otherwise first (the
    /// tape shows an event that `settles` it, or the run's end) or nobody
    /// took the answer within `ANSWER_WAIT`: it is then taken back, so two
    /// faces answering at once are never both told they were heard, and
    /// an answer left over is never carried out later.
    pub(super) async fn answer_elsewhere(
        &self,
        session: &SessionId,
        run: &RunId,
        control: Control,
        settles: impl Fn(&Event) -> bool,
    ) -> Result<bool, RuntimeError> {
        self.inner
            .journal
            .commit(Write::Control {
                session: session.clone(),
                control: control.clone(),
                at: now_millis(),
            })
            .await?;
        let deadline = tokio::time::Instant::now() + ANSWER_WAIT;
        let mut read_to = 0;
        loop {
            // Equal answers cannot be told apart, nor need to be: whichever
            // of them is taken, the run got what each said.
            let left = self
                .inner
                .journal
                .controls(session)
                .await?
                .into_iter()
                .find(|(_, c)| c == &control);
            let Some((mine, _)) = left else {
                return Ok(true);
            };
            let tape = self.inner.journal.tape(run, read_to, None).await?;
            let settled = tape
                .iter()
                .any(|record| settles(&record.event) || record.event.terminal_state().is_some());
            read_to = tape.last().map_or(read_to, |record| record.seq + 1);
            if settled || tokio::time::Instant::now() >= deadline {
                // Taken back, unless the owner took it meanwhile.
                return match self
                    .inner
                    .journal
                    .commit(Write::TakeControl { id: mine })
                    .await
                {
                    Ok(()) => Ok(false),
                    Err(JournalError::Conflict(_)) => Ok(true),
                    Err(err) => Err(err.into()),
                };
            }
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
    }

    /// Whether this process works (or has queued) `run` of the session.
    pub(super) fn works_here(&self, session: &SessionId, run: &RunId) -> bool {
        self.live(session)
            .is_some_and(|live| live.pending.lock().iter().any(|(id, _)| id == run))
    }

    /// Leaves `control` in the journal for the process running the
    /// session's runs, when another holds its lease.
    pub(super) fn pass_on(&self, session: &SessionId, control: Control) {
        self.inner.journal.submit(Write::Control {
            session: session.clone(),
            control,
            at: now_millis(),
        });
    }

    /// Takes the session's lease now, for a prompt about to be sent, or
    /// says who holds it (`RuntimeError::Busy`): a face that must not wait
    /// (`pincer run --no-wait`) asks this first.
    pub async fn claim_now(&self, id: &SessionId) -> Result<(), RuntimeError> {
        let Some((leases, holder)) = self.inner.leases.as_ref() else {
            return Ok(());
        };
        let timing = self.inner.config.leases;
        match leases
            .claim(&LeaseKey::session(id), holder, self.now(), timing.ttl_ms)
            .await
        {
            Ok(_) => Ok(()),
            Err(LeaseError::Held { holder, .. }) => Err(RuntimeError::Busy { holder }),
            Err(err) => Err(RuntimeError::Lease(err.to_string())),
        }
    }

    /// Waits until this process holds the session's lease (telling the
    /// person once that another process runs it), then keeps it renewed
    /// until [`Runtime::let_go`]. `Err` with how the run ends when it is
    /// cancelled meanwhile or the lease cannot be had.
    pub(super) async fn hold(
        &self,
        id: &SessionId,
        cancel: &CancellationToken,
        emitter: &mut Emitter,
    ) -> Result<Option<Held>, RunOutcome> {
        let Some((leases, holder)) = self.inner.leases.as_ref() else {
            return Ok(None);
        };
        let timing = self.inner.config.leases;
        let mut told = false;
        let lease = loop {
            match leases
                .claim(&LeaseKey::session(id), holder, self.now(), timing.ttl_ms)
                .await
            {
                Ok(lease) => break lease,
                Err(LeaseError::Held { holder: other, .. }) => {
                    if !told {
                        told = true;
                        emitter.emit(Event::Notice {
                            message: format!(
                                "Another Pincer process ({other}) is running this session; this prompt runs once it is done."
                            ),
                        });
                    }
                    tokio::select! {
                        _ = cancel.cancelled() => return Err(RunOutcome::Cancelled),
                        _ = tokio::time::sleep(timing.poll) => {}
                    }
                }
                Err(err) => {
                    return Err(RunOutcome::Failed(format!(
                        "cannot take the session's lease: {err}"
                    )));
                }
            }
        };
        emitter.fence_with(Some(lease.fence()));
        // Holding the lease, no other process may have a run of this session
        // working: one left `running` or `waiting` belongs to a process that
        // lost the lease (killed, or stopped past its expiry). Ended here,
        // under this lease, so exactly once.
        let interrupted = self
            .inner
            .journal
            .commit(emitter.fenced(Write::InterruptRuns {
                session: id.clone(),
                error: "interrupted: the process running it stopped holding the session (it was killed or stopped past its lease)".to_owned(),
                at: now_millis(),
            }))
            .await;
        if let Err(err) = interrupted {
            return Err(RunOutcome::Failed(format!(
                "cannot take over the session: {err}"
            )));
        }
        let lease = Arc::new(Mutex::new(lease));
        let renewal = CancellationToken::new();
        let (leases, kept, stop, run, shutdown, clock) = (
            leases.clone(),
            lease.clone(),
            renewal.clone(),
            cancel.clone(),
            self.inner.shutdown.clone(),
            self.inner.clock.clone(),
        );
        self.inner.tasks.spawn(async move {
            loop {
                tokio::select! {
                    _ = stop.cancelled() => return,
                    _ = shutdown.cancelled() => return,
                    _ = tokio::time::sleep(timing.renew) => {}
                }
                let current = kept.lock().clone();
                match leases.renew(&current, clock.now_millis(), timing.ttl_ms).await {
                    Ok(renewed) => *kept.lock() = renewed,
                    Err(err) => {
                        // Another process may run the session now: this
                        // run must stop rather than write beside it.
                        tracing::warn!(session = %current.key, error = %err, "lost the session's lease; cancelling its run");
                        run.cancel();
                        return;
                    }
                }
            }
        });
        Ok(Some(Held { lease, renewal }))
    }

    /// Stops renewing a run's lease and gives it up, unless more runs of
    /// the session wait in this process (they take it on at once).
    pub(super) async fn let_go(&self, held: Option<Held>, more: bool) {
        let (Some(held), Some((leases, _))) = (held, self.inner.leases.as_ref()) else {
            return;
        };
        held.renewal.cancel();
        if more {
            return;
        }
        let lease = held.lease.lock().clone();
        if let Err(err) = leases.release(&lease).await {
            tracing::warn!(session = %lease.key, error = %err, "cannot release the session's lease");
        }
    }

    /// The approvals waiting for an answer wherever their runs work: this
    /// process's, and those of runs other processes sharing the journal
    /// work (read from the tapes of runs `waiting`), of one session or of
    /// every session, oldest first. Answer one with
    /// [`Runtime::answer_approval_of`].
    pub async fn approvals_everywhere(&self, session: Option<&SessionId>) -> Vec<Arc<EventRecord>> {
        let mut found = self.pending_approvals(session);
        found.extend(self.asked_elsewhere(session, true).await);
        found.sort_by_key(|record| record.at);
        found
    }

    /// The questions waiting for an answer wherever their runs work (see
    /// [`Runtime::approvals_everywhere`]).
    pub async fn questions_everywhere(&self, session: Option<&SessionId>) -> Vec<Arc<EventRecord>> {
        let mut found = self.pending_questions(session);
        found.extend(self.asked_elsewhere(session, false).await);
        found.sort_by_key(|record| record.at);
        found
    }

    /// The approvals (or questions) asked on the tapes of waiting runs that
    /// work in other processes and not answered there yet.
    pub(super) async fn asked_elsewhere(
        &self,
        session: Option<&SessionId>,
        approvals: bool,
    ) -> Vec<Arc<EventRecord>> {
        if self.inner.notifier.is_none() {
            return Vec::new();
        }
        let runs = match self.inner.journal.waiting_runs().await {
            Ok(runs) => runs,
            Err(err) => {
                tracing::warn!(error = %err, "cannot read the runs waiting for an answer");
                return Vec::new();
            }
        };
        let mut found = Vec::new();
        for run in runs {
            if session.is_some_and(|s| s != &run.session_id)
                || self.works_here(&run.session_id, &run.id)
            {
                continue;
            }
            let tape = match self.inner.journal.tape(&run.id, 0, None).await {
                Ok(tape) => tape,
                Err(err) => {
                    tracing::warn!(run = %run.id, error = %err, "cannot read a waiting run's tape");
                    continue;
                }
            };
            let mut open: Vec<(String, EventRecord)> = Vec::new();
            for record in tape {
                match (&record.event, approvals) {
                    (
                        Event::ApprovalRequested {
                            approval_id: id, ..
                        },
                        true,
                    )
                    | (
                        Event::QuestionAsked {
                            question_id: id, ..
                        },
                        false,
                    ) => {
                        open.push((id.clone(), record.clone()));
                    }
                    (
                        Event::ApprovalDecided {
                            approval_id: id, ..
                        },
                        true,
                    )
                    | (
                        Event::QuestionAnswered {
                            question_id: id, ..
                        },
                        false,
                    ) => {
                        open.retain(|(asked, _)| asked != id);
                    }
                    _ => {}
                }
            }
            found.extend(open.into_iter().map(|(_, record)| Arc::new(record)));
        }
        found
    }

    /// Cancels a run wherever it works: here, or, when other processes
    /// share the journal, in the process whose run it is (through the
    /// journal: it ends there, and its end reaches the tape). False when it
    /// works nowhere this process can reach.
    pub fn cancel_run_anywhere(&self, session: &SessionId, run: &RunId) -> bool {
        if self.cancel_run(session, run) {
            return true;
        }
        if self.inner.notifier.is_none() {
            return false;
        }
        self.pass_on(
            session,
            Control::Cancel {
                runs: vec![run.clone()],
            },
        );
        true
    }
}
