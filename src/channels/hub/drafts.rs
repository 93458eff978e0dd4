//! The live draft: a run's reply shown as it is written, in one message
//! sent once and edited in place at most once per the platform's edit
//! interval. Its first send is an intent of its own (`draft:RUN`), so a
//! crash between the platform taking it and Pincer learning its id is
//! known; the reply then finalizes it, deletes it, or says it may show.
//!
//! Where the platform offers ephemeral previews in the chat
//! ([`Adapter::ephemeral_drafts`](super::super::Adapter::ephemeral_drafts):
//! Telegram's `sendMessageDraft` in a private chat), the live draft is one of
//! those instead: shown as often as an edit would be, named by the reply
//! (`draft:RUN`, the same in any process), recorded nowhere. It is never a
//! message, so a crash leaves nothing to finalize, delete or report, and the
//! reply is the only message. When the platform refuses the method for good
//! (an older server), the adapter turns the previews off and the reply's
//! draft goes on as a message edited in place.

use std::time::{Duration, Instant};

use super::super::{DeliveryError, LengthUnit};
use super::Hub;
use crate::core::channel::{
    ChannelWrite, ConversationKey, DeliveryReceipt, Failure, FailureKind, IntentKind, IntentStatus,
    IntentUpdate, ReceiptPart, SendIntent, Target, Unit, draft_intent_id,
};
use crate::core::ids::RunId;
use crate::core::journal::Write;
use crate::core::session::now_millis;

/// What a reply says first when its live draft may be in the chat with its
/// message id unknown (a crash or a lost answer between the platform taking
/// the draft and Pincer learning its id): that draft cannot be finalized or
/// removed, so the person is told it is stale.
pub const DRAFT_LOST: &str = "If a partial draft of this reply shows above, it is stale: Pincer lost track of it (a restart or a lost answer), and this message is the whole reply.";

/// What a reply says first, as a part of its own, when the stale live draft
/// it replaces could not be deleted (too old for the platform to delete, or
/// the platform kept refusing): the draft may show partial text forever.
pub const DRAFT_STALE: &str = "The partial draft of this reply above is stale and could not be removed; the whole reply follows.";

/// A run's live draft, as the process showing it knows it.
pub(super) enum LiveDraft {
    /// Nothing sent yet.
    NotYet,
    /// In the chat: its message id, when it was last edited, what it shows,
    /// and whether an edit's outcome is unknown (the platform may apply it
    /// late, after any edit made now).
    Shown {
        platform_id: String,
        last: Instant,
        text: String,
        unsettled: bool,
    },
    /// An ephemeral preview, never a message: when it was last shown (not
    /// yet: `None`) and what it shows.
    Ephemeral { last: Option<Instant>, text: String },
    /// No more drafting for this run: its first send failed. `maybe_shown`
    /// when the outcome is unknown (the draft may be in the chat).
    Stopped { maybe_shown: bool },
}

impl LiveDraft {
    /// What the reply does about this draft.
    pub(super) fn reference(self) -> DraftRef {
        match self {
            LiveDraft::NotYet
            | LiveDraft::Ephemeral { .. }
            | LiveDraft::Stopped { maybe_shown: false } => DraftRef::None,
            LiveDraft::Shown {
                platform_id,
                unsettled: false,
                ..
            } => DraftRef::Known(platform_id),
            LiveDraft::Shown {
                platform_id,
                unsettled: true,
                ..
            } => DraftRef::Stale(platform_id),
            LiveDraft::Stopped { maybe_shown: true } => DraftRef::MaybeShown,
        }
    }

    /// The draft after its first send: shown with the platform's id, or
    /// stopped (maybe shown, when the send's outcome is unknown).
    fn after_send(sent: Result<String, DeliveryError>, preview: String) -> Self {
        match sent {
            Ok(platform_id) => LiveDraft::Shown {
                platform_id,
                last: Instant::now(),
                text: preview,
                unsettled: false,
            },
            Err(err) => LiveDraft::Stopped {
                maybe_shown: err.kind == FailureKind::Unknown,
            },
        }
    }
}

/// How many times a draft's first send whose answer was lost is made
/// again, on a platform where a repeat is safe.
const DRAFT_SEND_AGAIN: u64 = 2;

/// What a run's reply does about its live draft.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum DraftRef {
    /// There is none: the reply is a fresh message.
    None,
    /// Finalize this message in place: every call on it so far has landed.
    Known(String),
    /// Delete this message, then send the reply afresh: a call on it may
    /// still land (an edit of a stopped process, or one whose outcome is
    /// unknown), and would overwrite a reply finalized in place.
    Stale(String),
    /// One may be in the chat, its id unknown: the reply is a fresh message
    /// that says so first.
    MaybeShown,
}

/// What the live draft shows: the text so far, cut to fit the platform's
/// `max` in its unit with an ellipsis.
fn preview(text: &str, max: usize, unit: LengthUnit) -> String {
    let limit = max.saturating_sub(unit.measure("…") + 1).max(1);
    if unit.measure(text) <= limit {
        return text.to_owned();
    }
    format!("{}…", unit.prefix(text, limit))
}

/// Whether a shown draft is edited now: the platform's edit interval has
/// passed since its last edit, and it would show something new.
fn edit_due(since_last: Duration, interval: Duration, shown: &str, preview: &str) -> bool {
    since_last >= interval && shown != preview
}

/// Whether a failed edit may still be applied by the platform, later than
/// any edit made after it: its outcome is unknown.
fn unsettles(kind: FailureKind) -> bool {
    matches!(kind, FailureKind::Unknown | FailureKind::Transient)
}

/// A draft's first send (to `target` of the `channel`'s `account`),
/// recorded `sending` before the platform call.
fn draft_intent(
    (channel, account): (&str, &str),
    target: &Target,
    run_id: &RunId,
    unit: Unit,
) -> SendIntent {
    SendIntent {
        status: IntentStatus::Sending,
        attempt: 1,
        inflight: Some(0),
        run_id: Some(run_id.clone()),
        ..SendIntent::new(
            draft_intent_id(run_id),
            (channel, account),
            target.clone(),
            IntentKind::Draft,
            vec![unit],
            now_millis(),
        )
    }
}

/// A draft intent sent: moved from `from` to `sent`, its message id the receipt.
pub(super) fn sent_update(id: &str, from: IntentStatus, platform_id: &str) -> IntentUpdate {
    let mut update = IntentUpdate::new(id, &[from], IntentStatus::Sent, now_millis());
    update.receipt = Some(DeliveryReceipt {
        parts: vec![ReceiptPart {
            index: 0,
            platform_id: platform_id.to_owned(),
        }],
    });
    update
}

/// A draft's first send failed: `unknown_after_send` (still in flight as
/// far as anyone knows) when its outcome is unknown, else `failed`.
fn unsent_update(id: &str, err: &DeliveryError) -> IntentUpdate {
    let unknown = err.kind == FailureKind::Unknown;
    let status = if unknown {
        IntentStatus::UnknownAfterSend
    } else {
        IntentStatus::Failed
    };
    let mut update = IntentUpdate::new(id, &[IntentStatus::Sending], status, now_millis());
    update.inflight = unknown.then_some(0);
    update.failure = Some(Failure {
        kind: err.kind,
        message: err.message.clone(),
    });
    update
}

impl Hub {
    /// Sends or edits the live draft, at most once per the platform's edit
    /// interval. The first send is an intent of its own (`draft:RUN`),
    /// committed as `sending` before the platform call and given the draft's
    /// message id after it, so a crash in between is known to have left a
    /// draft that may be in the chat.
    pub(super) async fn live(
        &self,
        key: &ConversationKey,
        run_id: &RunId,
        text: &str,
        draft: &mut LiveDraft,
    ) {
        let caps = self.adapter.capabilities();
        let preview = preview(text, caps.max_len, caps.length_unit);
        if preview.trim().is_empty() {
            return;
        }
        let unit = Unit {
            text: preview.clone(),
            ..Unit::default()
        };
        if matches!(draft, LiveDraft::NotYet) && self.adapter.ephemeral_drafts(&key.target) {
            *draft = LiveDraft::Ephemeral {
                last: None,
                text: String::new(),
            };
        }
        match draft {
            LiveDraft::NotYet => *draft = self.first_draft(key, run_id, unit, preview).await,
            LiveDraft::Ephemeral { .. } => {
                self.ephemeral(key, run_id, unit, preview, draft).await;
            }
            LiveDraft::Shown {
                platform_id,
                last,
                text: shown,
                unsettled,
            } => {
                if !edit_due(last.elapsed(), caps.edit_interval, shown, &preview) {
                    return;
                }
                let edited = self.adapter.edit(&key.target, platform_id, &unit).await;
                *last = Instant::now();
                match edited {
                    Ok(()) => *shown = preview,
                    Err(err) => {
                        tracing::debug!(error = %err, "live draft not edited");
                        // The platform may still apply it, later than the
                        // reply's own edit would be.
                        if unsettles(err.kind) {
                            *unsettled = true;
                        }
                    }
                }
            }
            LiveDraft::Stopped { .. } => {}
        }
    }

    /// Shows the reply's ephemeral preview, at most once per the platform's
    /// edit interval; when the platform turns out to have none, the draft
    /// goes on as a message edited in place.
    async fn ephemeral(
        &self,
        key: &ConversationKey,
        run_id: &RunId,
        unit: Unit,
        preview: String,
        draft: &mut LiveDraft,
    ) {
        let LiveDraft::Ephemeral { last, text: shown } = draft else {
            return;
        };
        let interval = self.adapter.capabilities().edit_interval;
        if last.is_some_and(|at| !edit_due(at.elapsed(), interval, shown, &preview)) {
            return;
        }
        let result = self
            .adapter
            .draft(&key.target, &draft_intent_id(run_id), &unit)
            .await;
        *last = Some(Instant::now());
        match result {
            Ok(()) => *shown = preview,
            Err(err) if !self.adapter.ephemeral_drafts(&key.target) => {
                tracing::debug!(run = %run_id, error = %err, "no ephemeral draft; a message edited in place instead");
                *draft = self.first_draft(key, run_id, unit, preview).await;
            }
            // Nothing to track: shown again after the next interval.
            Err(err) => tracing::debug!(run = %run_id, error = %err, "ephemeral draft not shown"),
        }
    }

    /// The draft's first send: its intent committed, the platform called,
    /// the outcome committed.
    async fn first_draft(
        &self,
        key: &ConversationKey,
        run_id: &RunId,
        unit: Unit,
        preview: String,
    ) -> LiveDraft {
        let account = (self.adapter.channel(), self.adapter.account());
        let intent = draft_intent(account, &key.target, run_id, unit.clone());
        let id = intent.id.clone();
        if let Err(err) = self
            .store
            .commit(Write::Channel(ChannelWrite::InsertIntent(intent)))
            .await
        {
            tracing::error!(run = %run_id, error = %err, "cannot record a live draft; the reply comes whole");
            return LiveDraft::Stopped { maybe_shown: false };
        }
        let key_of_send = format!("{id}:0");
        let mut sent = self
            .adapter
            .send(&key.target, &unit, None, &key_of_send)
            .await;
        // A send whose answer was lost is made again with its key where the
        // platform recognizes a repeat (Matrix's transaction id): the same
        // message, now named, instead of a draft that may show unnamed.
        let mut again = 0;
        while let Err(err) = &sent
            && err.kind == FailureKind::Unknown
            && self.adapter.capabilities().idempotent.send
            && again < DRAFT_SEND_AGAIN
        {
            again += 1;
            tracing::debug!(run = %run_id, error = %err, "live draft's answer lost; sending it again with its key");
            tokio::time::sleep(Duration::from_millis(250 * again)).await;
            sent = self
                .adapter
                .send(&key.target, &unit, None, &key_of_send)
                .await;
        }
        let update = match &sent {
            Ok(platform_id) => sent_update(&id, IntentStatus::Sending, platform_id),
            Err(err) => {
                tracing::debug!(run = %run_id, error = %err, "live draft not sent; the reply comes whole");
                unsent_update(&id, err)
            }
        };
        if let Err(err) = self
            .store
            .commit(Write::Channel(ChannelWrite::UpdateIntent(update)))
            .await
        {
            tracing::error!(run = %run_id, error = %err, "cannot record a live draft's outcome");
        }
        LiveDraft::after_send(sent, preview)
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::direct_chat;
    use super::*;

    fn unit(text: &str) -> Unit {
        Unit {
            text: text.into(),
            markup: None,
            buttons: Vec::new(),
            file: None,
        }
    }

    #[test]
    fn previews_fit_the_platform() {
        assert_eq!(preview("short", 100, LengthUnit::Chars), "short");
        let long = "x".repeat(50);
        let shown = preview(&long, 20, LengthUnit::Chars);
        assert_eq!(shown.chars().count(), 19);
        assert!(shown.ends_with('…'));
        // Counted in the platform's unit: an emoji is two UTF-16 code
        // units (Telegram) and four bytes, never cut inside.
        let emoji = "😀".repeat(50);
        for unit in [LengthUnit::Chars, LengthUnit::Utf16, LengthUnit::Bytes] {
            let shown = preview(&emoji, 20, unit);
            assert!(unit.measure(&shown) <= 20, "{unit:?}: {shown}");
            assert!(shown.ends_with('…'), "{unit:?}: {shown}");
            assert!(shown.trim_end_matches('…').chars().all(|c| c == '😀'));
        }
        assert_eq!(preview(&emoji, 20, LengthUnit::Utf16).chars().count(), 10);
        assert_eq!(preview(&emoji, 20, LengthUnit::Bytes).chars().count(), 5);
    }

    #[test]
    fn a_draft_is_edited_once_per_interval_and_only_to_show_something_new() {
        let second = Duration::from_secs(1);
        let cases = [
            (Duration::from_millis(999), "a", "ab", false),
            (Duration::from_millis(1000), "a", "ab", true),
            (Duration::from_secs(5), "a", "ab", true),
            (Duration::from_secs(5), "ab", "ab", false),
            (Duration::ZERO, "ab", "ab", false),
        ];
        for (since, shown, preview, due) in cases {
            assert_eq!(
                edit_due(since, second, shown, preview),
                due,
                "{since:?} {shown} {preview}"
            );
        }
    }

    #[test]
    fn only_an_edit_with_an_unknown_outcome_unsettles_a_draft() {
        for kind in FailureKind::ALL {
            let unknown = matches!(kind, FailureKind::Unknown | FailureKind::Transient);
            assert_eq!(unsettles(kind), unknown, "{kind:?}");
        }
    }

    #[test]
    fn a_reply_finalizes_a_settled_draft_deletes_an_unsettled_one_and_reports_one_it_cannot_name() {
        let shown = |unsettled| LiveDraft::Shown {
            platform_id: "7".into(),
            last: Instant::now(),
            text: "partial".into(),
            unsettled,
        };
        assert_eq!(shown(false).reference(), DraftRef::Known("7".into()));
        assert_eq!(shown(true).reference(), DraftRef::Stale("7".into()));
        assert_eq!(LiveDraft::NotYet.reference(), DraftRef::None);
        // An ephemeral preview is never a message: the reply is a fresh one.
        let ephemeral = LiveDraft::Ephemeral {
            last: Some(Instant::now()),
            text: "partial".into(),
        };
        assert_eq!(ephemeral.reference(), DraftRef::None);
        assert_eq!(
            LiveDraft::Stopped { maybe_shown: false }.reference(),
            DraftRef::None
        );
        assert_eq!(
            LiveDraft::Stopped { maybe_shown: true }.reference(),
            DraftRef::MaybeShown
        );
    }

    #[test]
    fn a_first_send_shows_the_draft_or_stops_drafting_maybe_shown_when_its_outcome_is_unknown() {
        let shown = LiveDraft::after_send(Ok("9".into()), "hel".into());
        assert!(matches!(
            &shown,
            LiveDraft::Shown { platform_id, text, unsettled: false, .. } if platform_id == "9" && text == "hel"
        ));
        let lost = DeliveryError::new(FailureKind::Unknown, "connection reset");
        assert_eq!(
            LiveDraft::after_send(Err(lost), "hel".into()).reference(),
            DraftRef::MaybeShown
        );
        let refused = DeliveryError::new(FailureKind::Permission, "blocked");
        assert_eq!(
            LiveDraft::after_send(Err(refused), "hel".into()).reference(),
            DraftRef::None
        );
    }

    #[test]
    fn a_draft_s_first_send_is_recorded_sending_then_sent_failed_or_unknown() {
        let run = RunId::from_string("run_1".into());
        let intent = draft_intent(("telegram", "bot"), &direct_chat(), &run, unit("hel"));
        assert_eq!(intent.id, "draft:run_1");
        assert_eq!(
            (intent.kind, intent.status),
            (IntentKind::Draft, IntentStatus::Sending)
        );
        assert_eq!((intent.attempt, intent.inflight), (1, Some(0)));
        assert_eq!(intent.run_id, Some(run));
        assert_eq!(
            (intent.channel.as_str(), intent.account.as_str()),
            ("telegram", "bot")
        );

        let sent = sent_update(&intent.id, IntentStatus::Sending, "77");
        assert_eq!(
            (sent.from.as_slice(), sent.status),
            (&[IntentStatus::Sending][..], IntentStatus::Sent)
        );
        assert_eq!(sent.receipt.unwrap().primary(), Some("77"));

        let unknown = unsent_update(
            &intent.id,
            &DeliveryError::new(FailureKind::Unknown, "reset"),
        );
        assert_eq!(
            (unknown.status, unknown.inflight),
            (IntentStatus::UnknownAfterSend, Some(0))
        );
        assert_eq!(unknown.failure.unwrap().kind, FailureKind::Unknown);
        let failed = unsent_update(
            &intent.id,
            &DeliveryError::new(FailureKind::NotFound, "chat gone"),
        );
        assert_eq!(
            (failed.status, failed.inflight),
            (IntentStatus::Failed, None)
        );
        assert_eq!(failed.failure.unwrap().message, "chat gone");
    }
}
