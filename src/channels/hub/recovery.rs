//! Recovery, by the process that just took the account's lease: what a
//! stopped process left. Intents it held for their hooks are asked about
//! again; inbox entries it recorded but never dispatched are dispatched;
//! those whose run ended get their reply, after deciding what to do about
//! the run's live draft (`docs/channels.md`, "Recovery").

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use super::drafts::{DraftRef, sent_update};
use super::reply::{Answer, Said};
use super::{Hub, HubError};
use crate::core::channel::{
    ChannelMessage, ChannelWrite, FailureKind, InboxEntry, InboxState, IntentStatus, SendIntent,
    draft_intent_id,
};
use crate::core::event::{RunState, StopReason};
use crate::core::ids::RunId;
use crate::core::journal::Write;
use crate::core::run::{RunInfo, RunOutcome};

impl Hub {
    /// Recovers the outbox, asks the hooks again about the intents a stopped
    /// process held for them, then answers its inbox.
    pub(super) async fn recover(self: &Arc<Self>) -> Result<(), HubError> {
        let recovered = self.outbox.recover().await?;
        if !recovered.unknown.is_empty() || !recovered.expired.is_empty() || recovered.resumed > 0 {
            tracing::warn!(
                channel = self.adapter.channel(),
                resumed = recovered.resumed,
                unknown_after_send = recovered.unknown.len(),
                expired = recovered.expired.len(),
                finished = recovered.finished,
                "recovered the outbox of a stopped process"
            );
        }
        // Messages a stopped process held for their hooks: asked again (none
        // was sent, so nothing goes out twice). Before the inbox's recovery,
        // whose replies ask for themselves.
        for intent in self.outbox.held().await? {
            self.tasks.spawn(self.clone().screen(intent));
        }
        self.recover_inbox().await
    }

    /// Picks up inbound messages a stopped process left: recorded ones are
    /// dispatched; dispatched ones whose run ended get their reply.
    async fn recover_inbox(self: &Arc<Self>) -> Result<(), HubError> {
        let channel = self.adapter.channel().to_owned();
        let account = self.adapter.account().to_owned();
        let open = self.store.open_inbox(&channel, &account).await?;
        if open.is_empty() {
            return Ok(());
        }
        let drafts: HashMap<RunId, String> = self
            .store
            .drafts(&channel, &account)
            .await?
            .into_iter()
            .map(|d| (d.run_id, d.platform_id))
            .collect();
        let (by_run, recorded) = split_open(open);
        for (run_id, messages) in by_run {
            let legacy = drafts.get(&run_id);
            self.answer_left(run_id.clone(), &messages, legacy).await;
        }
        for message in recorded {
            self.coalesce(message);
        }
        Ok(())
    }

    /// Answers the messages a stopped process dispatched to `run_id`, once
    /// that run has ended (a run another live process works is left to it).
    async fn answer_left(
        self: &Arc<Self>,
        run_id: RunId,
        messages: &[ChannelMessage],
        legacy: Option<&String>,
    ) {
        let info = match self.runtime.run(&run_id).await {
            Ok(info) => info,
            Err(err) => {
                tracing::warn!(run = %run_id, error = %err, "a chat message's run is unknown");
                return;
            }
        };
        if !info.state.is_terminal() {
            return; // another live process runs it
        }
        let tape = self.runtime.tape(&run_id, 0).await.unwrap_or_default();
        let said = Said::of(tape.iter().map(|r| &r.event));
        let outcome = outcome_of(&info);
        let Some(answer) = Answer::of(run_id, messages) else {
            return;
        };
        tracing::info!(run = %answer.run_id, state = info.state.as_str(), "answering a chat message a stopped process left");
        let draft = match self.recovered_draft(&answer.run_id, legacy).await {
            Ok(draft) => draft,
            Err(intent) => {
                // Its draft is named again once the platform answers: the
                // adapter connects (logs in) only after recovery, so that
                // reply is decided in the background.
                let hub = self.clone();
                self.tasks.spawn(async move {
                    let draft = hub.send_draft_again(&answer.run_id, &intent).await;
                    hub.finish(&answer, &outcome, &said, draft).await;
                });
                return;
            }
        };
        self.finish(&answer, &outcome, &said, draft).await;
    }

    /// What a stopped process left of a run's live draft. A draft it named is
    /// stale: an edit of the stopped process may still land on it, so the
    /// reply deletes it rather than finalizing it in place. A draft whose
    /// first send has no known outcome may be in the chat with its id
    /// unknown: an adapter whose platform deduplicates sends by key sends it
    /// again to learn the id (`Err`: the draft intent to send again);
    /// otherwise the reply will say that a partial draft may show above it.
    async fn recovered_draft(
        &self,
        run_id: &RunId,
        legacy: Option<&String>,
    ) -> Result<DraftRef, SendIntent> {
        let intent = match self.store.intent(&draft_intent_id(run_id)).await {
            Ok(Some(intent)) => intent,
            // Drafts recorded before draft intents existed.
            Ok(None) => return Ok(legacy.map_or(DraftRef::None, |id| DraftRef::Stale(id.clone()))),
            Err(err) => {
                tracing::error!(run = %run_id, error = %err, "cannot read a live draft");
                return Ok(DraftRef::MaybeShown);
            }
        };
        match left_draft(&intent, self.adapter.capabilities().idempotent.send) {
            LeftDraft::Is(draft) => Ok(draft),
            LeftDraft::SendAgain => Err(intent),
        }
    }

    /// Sends a draft whose first send has no known outcome again, with its
    /// key, so the platform names the message it has (or takes it now).
    /// A failure that leaves the send undone (`transient`, `rate_limit`:
    /// the platform down, the adapter not connected yet) is retried, as the
    /// outbox would, for up to `DRAFT_AGAIN_FOR`.
    async fn send_draft_again(&self, run_id: &RunId, intent: &SendIntent) -> DraftRef {
        let Some(unit) = intent.units.first() else {
            return DraftRef::MaybeShown;
        };
        let key = format!("{}:0", intent.id);
        let until = tokio::time::Instant::now() + DRAFT_AGAIN_FOR;
        let mut wait = Duration::from_millis(250);
        let sent = loop {
            let sent = self.adapter.send(&intent.target, unit, None, &key).await;
            let again = match &sent {
                Err(err) if matches!(err.kind, FailureKind::Transient | FailureKind::RateLimit) => {
                    err.retry_after.unwrap_or(wait)
                }
                Ok(_) | Err(_) => break sent,
            };
            if tokio::time::Instant::now() + again > until {
                break sent;
            }
            tokio::select! {
                () = self.cancel.cancelled() => break sent,
                () = tokio::time::sleep(again) => {}
            }
            wait = (wait * 2).min(Duration::from_secs(8));
        };
        match sent {
            Ok(platform_id) => {
                let update = sent_update(&intent.id, intent.status, &platform_id);
                if let Err(err) = self
                    .store
                    .commit(Write::Channel(ChannelWrite::UpdateIntent(update)))
                    .await
                {
                    tracing::error!(run = %run_id, error = %err, "cannot record a live draft's id");
                }
                DraftRef::Stale(platform_id)
            }
            Err(err) => {
                tracing::warn!(run = %run_id, error = %err, "a live draft's id could not be learnt again");
                DraftRef::MaybeShown
            }
        }
    }
}

/// How long recovery keeps trying to send a draft again while the platform
/// is unreachable, before the reply says the draft may show instead.
const DRAFT_AGAIN_FOR: Duration = Duration::from_secs(60);

/// What recovery makes of a run's `draft:RUN` intent.
#[derive(Debug, PartialEq, Eq)]
enum LeftDraft {
    /// Decided from the intent alone.
    Is(DraftRef),
    /// Its first send has no known outcome and the platform deduplicates
    /// by key: sent again to learn its id.
    SendAgain,
}

/// What a stopped process's draft intent means for the reply: a draft
/// with a known id is stale (deleted, the reply sent afresh); one that was
/// never sent is none; one whose send has no known outcome may show with
/// its id unknown, unless a platform whose sends are idempotent (by key)
/// can name it again.
fn left_draft(intent: &SendIntent, idempotent: bool) -> LeftDraft {
    match intent.status {
        IntentStatus::Sent | IntentStatus::Committing => LeftDraft::Is(
            intent
                .receipt
                .primary()
                .map_or(DraftRef::MaybeShown, |id| DraftRef::Stale(id.to_owned())),
        ),
        IntentStatus::Failed
        | IntentStatus::Cancelled
        | IntentStatus::Expired
        | IntentStatus::Withheld => LeftDraft::Is(DraftRef::None),
        IntentStatus::UnknownAfterSend
        | IntentStatus::Sending
        | IntentStatus::Pending
        | IntentStatus::Held => {
            if idempotent && !intent.units.is_empty() {
                LeftDraft::SendAgain
            } else {
                LeftDraft::Is(DraftRef::MaybeShown)
            }
        }
    }
}

/// The open inbox entries a stopped process left: those dispatched to a
/// run, by run, in order; and those never dispatched.
fn split_open(open: Vec<InboxEntry>) -> (HashMap<RunId, Vec<ChannelMessage>>, Vec<ChannelMessage>) {
    let mut by_run: HashMap<RunId, Vec<ChannelMessage>> = HashMap::new();
    let mut recorded: Vec<ChannelMessage> = Vec::new();
    for entry in open {
        match (entry.state, entry.run_id) {
            (InboxState::Dispatched, Some(run)) => {
                by_run.entry(run).or_default().push(entry.message)
            }
            _ => recorded.push(entry.message),
        }
    }
    (by_run, recorded)
}

/// How an ended run ended, as its reply tells it.
fn outcome_of(info: &RunInfo) -> RunOutcome {
    match info.state {
        RunState::Completed => {
            RunOutcome::Completed(info.stop_reason.unwrap_or(StopReason::EndTurn))
        }
        RunState::Cancelled => RunOutcome::Cancelled,
        RunState::Failed | RunState::Queued | RunState::Running | RunState::Waiting => {
            RunOutcome::Failed(
                info.error
                    .clone()
                    .unwrap_or_else(|| "the run failed".to_owned()),
            )
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::{self, direct_chat};
    use super::*;
    use crate::core::channel::{DeliveryReceipt, IntentKind, ReceiptPart, Unit};
    use crate::core::ids::SessionId;
    use crate::core::usage::Usage;

    fn draft(status: IntentStatus, sent_as: Option<&str>, units: usize) -> SendIntent {
        SendIntent {
            id: "draft:run_1".into(),
            channel: "webhook".into(),
            account: "peer".into(),
            target: direct_chat(),
            kind: IntentKind::Draft,
            units: (0..units)
                .map(|_| Unit {
                    text: "partial".into(),
                    markup: None,
                    buttons: Vec::new(),
                    file: None,
                })
                .collect(),
            text: None,
            edit_of: None,
            retract: None,
            reply_to: None,
            status,
            attempt: 1,
            next_attempt_at: None,
            inflight: None,
            receipt: DeliveryReceipt {
                parts: sent_as
                    .map(|id| ReceiptPart {
                        index: 0,
                        platform_id: id.into(),
                    })
                    .into_iter()
                    .collect(),
            },
            failure: None,
            session_id: None,
            run_id: None,
            created_at: 0,
            updated_at: 0,
            resent_at: None,
        }
    }

    #[test]
    fn a_left_draft_with_an_id_is_stale_one_never_sent_is_none_and_one_in_doubt_is_named_again_only_by_key()
     {
        use IntentStatus::*;
        let stale = LeftDraft::Is(DraftRef::Stale("7".into()));
        let maybe = LeftDraft::Is(DraftRef::MaybeShown);
        let none = LeftDraft::Is(DraftRef::None);
        for idempotent in [false, true] {
            assert_eq!(left_draft(&draft(Sent, Some("7"), 1), idempotent), stale);
            assert_eq!(
                left_draft(&draft(Committing, Some("7"), 1), idempotent),
                stale
            );
            assert_eq!(left_draft(&draft(Sent, None, 1), idempotent), maybe);
            for status in [Failed, Cancelled, Expired, Withheld] {
                assert_eq!(
                    left_draft(&draft(status, None, 1), idempotent),
                    none,
                    "{status:?}"
                );
            }
        }
        for status in [UnknownAfterSend, Sending, Pending, Held] {
            assert_eq!(
                left_draft(&draft(status, None, 1), false),
                maybe,
                "{status:?}"
            );
            assert_eq!(
                left_draft(&draft(status, None, 1), true),
                LeftDraft::SendAgain,
                "{status:?}"
            );
            assert_eq!(
                left_draft(&draft(status, None, 0), true),
                maybe,
                "{status:?} without a unit"
            );
        }
    }

    fn entry(id: &str, state: InboxState, run: Option<&str>) -> InboxEntry {
        InboxEntry {
            message: testing::message(id, id),
            state,
            run_id: run.map(|r| RunId::from_string(r.into())),
            received_at: 0,
        }
    }

    #[test]
    fn open_entries_split_into_those_a_run_answers_and_those_never_dispatched() {
        let (by_run, recorded) = split_open(vec![
            entry("1", InboxState::Dispatched, Some("run_a")),
            entry("2", InboxState::Recorded, None),
            entry("3", InboxState::Dispatched, Some("run_b")),
            entry("4", InboxState::Dispatched, Some("run_a")),
            entry("5", InboxState::Dispatched, None),
        ]);
        let ids = |messages: &[ChannelMessage]| -> Vec<String> {
            messages.iter().map(|m| m.id.clone()).collect()
        };
        assert_eq!(by_run.len(), 2);
        assert_eq!(
            ids(&by_run[&RunId::from_string("run_a".into())]),
            ["1", "4"]
        );
        assert_eq!(ids(&by_run[&RunId::from_string("run_b".into())]), ["3"]);
        assert_eq!(ids(&recorded), ["2", "5"]);
    }

    fn info(state: RunState, stop_reason: Option<StopReason>, error: Option<&str>) -> RunInfo {
        RunInfo {
            id: RunId::from_string("run_1".into()),
            session_id: SessionId::from_string("ses_1".into()),
            state,
            stop_reason,
            error: error.map(str::to_owned),
            usage: Usage::default(),
            cost: None,
            created_at: 0,
            started_at: None,
            ended_at: None,
        }
    }

    #[test]
    fn an_ended_run_s_outcome_comes_from_its_summary() {
        assert_eq!(
            outcome_of(&info(
                RunState::Completed,
                Some(StopReason::MaxTokens),
                None
            )),
            RunOutcome::Completed(StopReason::MaxTokens)
        );
        assert_eq!(
            outcome_of(&info(RunState::Completed, None, None)),
            RunOutcome::Completed(StopReason::EndTurn)
        );
        assert_eq!(
            outcome_of(&info(RunState::Cancelled, None, None)),
            RunOutcome::Cancelled
        );
        assert_eq!(
            outcome_of(&info(RunState::Failed, None, Some("interrupted"))),
            RunOutcome::Failed("interrupted".into())
        );
        assert_eq!(
            outcome_of(&info(RunState::Failed, None, None)),
            RunOutcome::Failed("the run failed".into())
        );
    }
}
