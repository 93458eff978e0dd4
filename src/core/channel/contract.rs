//! The contract suite every backend of [`ChannelJournal`] (and of
//! [`Counts`], which counts what the channels and the runs wrote) must
//! pass: the inbox and its dedupe, the outbox's send intents and their
//! conditional moves, cursors, conversation mappings and pairings, as
//! `docs/channels.md` describes them. A backend's tests call
//! [`channel_contract!`] with an expression that opens a fresh backend; each
//! rule becomes a test of its own.
//!
//! The backend decides no lifecycle: it applies an [`IntentUpdate`] only
//! when the intent is in one of its `from` states, and the channels' code
//! chooses the moves. The rules below make the moves the outbox makes and
//! check the exact state each one leaves.

use crate::core::journal::ChannelJournal;
use std::path::PathBuf;
use std::sync::Arc;

use super::{
    Actor, ChannelMessage, ChannelWrite, ConversationKey, DeliveryReceipt, Failure, FailureKind,
    InboxEntry, InboxState, IntentKind, IntentStatus, IntentUpdate, MessageOrigin, Pairing,
    ReceiptPart, Resolution, SendIntent, Target, TargetKind, Unit, draft_intent_id,
};
use crate::core::event::{RunState, StopReason, Usage};
use crate::core::ids::{RunId, SessionId};
use crate::core::journal::{Counts, JournalError, Write};
use crate::core::session::{Millis, Mode, Origin, PromptSettings, Session};

/// A backend under test.
pub struct Backend {
    /// The channels' port; its `Journal` takes the writes.
    pub journal: Arc<dyn ChannelJournal>,
    pub counts: Arc<dyn Counts>,
    /// Where the backend keeps its files, removed with it.
    pub dir: Option<tempfile::TempDir>,
}

/// Generates one `#[tokio::test]` per rule for the backend `$open` (an
/// expression of type [`Backend`], evaluated once per test).
#[macro_export]
macro_rules! channel_contract {
    ($open:expr) => {
        $crate::channel_contract!(@tests $open;
            an_inbound_message_is_recorded_once_and_the_cursor_still_advances,
            inbox_entries_are_dispatched_with_their_run_then_answered,
            cursors_are_kept_per_channel_account_and_name,
            an_intent_is_recorded_once_per_id,
            a_claimed_intent_is_sent_with_its_receipt,
            a_failed_attempt_is_retried_with_its_count_or_fails,
            old_intents_expire_and_uncertain_sends_stay_unknown,
            a_move_from_a_wrong_status_is_refused_and_changes_nothing,
            a_held_intent_is_let_go_rewritten_or_withheld,
            drafts_are_intents_finalized_in_place_or_retracted,
            intents_are_listed_most_recently_changed_first,
            a_chat_is_mapped_to_its_session_together_with_it,
            senders_are_paired_per_channel_account,
            paired_senders_are_listed_and_revoked,
            runs_and_intents_are_counted_by_state,
        );
    };
    (@tests $open:expr; $($name:ident),* $(,)?) => {
        $(
            #[tokio::test]
            async fn $name() {
                let backend = $open;
                $crate::core::channel::contract::$name(&backend).await;
            }
        )*
    };
}

pub(crate) fn target(chat: &str) -> Target {
    Target {
        kind: TargetKind::Group,
        id: chat.into(),
        thread: Some("7".into()),
    }
}

pub(crate) fn message(account: &str, id: &str, body: &str, at: Millis) -> ChannelMessage {
    ChannelMessage {
        id: id.into(),
        channel: "telegram".into(),
        account: account.into(),
        target: target("-100"),
        sender: Some(Actor {
            id: "u1".into(),
            name: Some("Ada".into()),
            is_bot: false,
        }),
        body: body.into(),
        attachments: vec![super::Attachment {
            kind: "photo".into(),
            name: None,
            reference: "file-1".into(),
            ..Default::default()
        }],
        relation: None,
        origin: MessageOrigin::User,
        at,
    }
}

pub(crate) fn record(message: ChannelMessage, offset: &str, at: Millis) -> Write {
    Write::Channel(ChannelWrite::RecordInbound {
        message,
        cursor: Some(("offset".into(), offset.into())),
        at,
    })
}

fn unit(text: &str) -> Unit {
    Unit {
        text: text.into(),
        markup: None,
        buttons: Vec::new(),
        file: None,
    }
}

pub(crate) fn intent(
    id: &str,
    channel: &str,
    status: IntentStatus,
    created_at: Millis,
) -> SendIntent {
    SendIntent {
        reply_to: Some("41".into()),
        status,
        ..SendIntent::new(
            id.into(),
            (channel, "bot"),
            target("-100"),
            IntentKind::Reply,
            vec![unit("part one"), unit("part two")],
            created_at,
        )
    }
}

pub(crate) fn insert(intent: &SendIntent) -> Write {
    Write::Channel(ChannelWrite::InsertIntent(intent.clone()))
}

fn update(update: IntentUpdate) -> Write {
    Write::Channel(ChannelWrite::UpdateIntent(update))
}

fn receipt(ids: &[&str]) -> DeliveryReceipt {
    DeliveryReceipt {
        parts: ids
            .iter()
            .enumerate()
            .map(|(index, id)| ReceiptPart {
                index,
                platform_id: (*id).into(),
            })
            .collect(),
    }
}

fn failure(kind: FailureKind, message: &str) -> Failure {
    Failure {
        kind,
        message: message.into(),
    }
}

fn session(id: &str, at: Millis) -> Session {
    Session {
        id: SessionId::from_string(id.into()),
        workspace: PathBuf::from("/ws"),
        origin: Origin::Channel,
        provider: "p".into(),
        model: "m".into(),
        mode: Mode::Supervised,
        title: None,
        mcp_servers: serde_json::json!([]),
        created_at: at,
        updated_at: at,
        closed: false,
        conversation: Some("telegram/bot/group:-100/7".into()),
        prompt: PromptSettings::default(),
        parent: None,
        thought_level: None,
    }
}

async fn stored(journal: &dyn ChannelJournal, id: &str) -> SendIntent {
    match journal.intent(id).await {
        Ok(Some(intent)) => intent,
        other => panic!("send intent {id}: {other:?}"),
    }
}

async fn open_ids(journal: &dyn ChannelJournal, channel: &str) -> Vec<(String, IntentStatus)> {
    journal
        .open_intents(channel, "bot")
        .await
        .unwrap()
        .into_iter()
        .map(|(intent, _)| (intent.id, intent.status))
        .collect()
}

fn is_conflict(result: &Result<(), JournalError>) -> bool {
    matches!(result, Err(JournalError::Conflict(_)))
}

/// Receive, steps 2 and 3: a message is recorded keyed by its platform id
/// with the polling cursor; a redelivery is refused as a conflict and leaves
/// the recorded message as it was, while the cursor still moves past it.
/// The same id through another account is another message.
pub async fn an_inbound_message_is_recorded_once_and_the_cursor_still_advances(backend: &Backend) {
    let journal = backend.journal.as_ref();
    let first = message("bot", "41", "hello", 5);
    journal
        .commit(record(first.clone(), "42", 10))
        .await
        .unwrap();
    assert_eq!(
        journal.cursor("telegram", "bot", "offset").await.unwrap(),
        Some("42".into())
    );
    let again = journal
        .commit(record(message("bot", "41", "hello again", 6), "43", 11))
        .await;
    assert!(is_conflict(&again), "a redelivery was recorded: {again:?}");
    assert_eq!(
        journal.cursor("telegram", "bot", "offset").await.unwrap(),
        Some("43".into()),
        "the cursor must move past a redelivered message"
    );
    journal
        .commit(record(message("other", "41", "elsewhere", 7), "9", 12))
        .await
        .unwrap();
    assert_eq!(
        journal.open_inbox("telegram", "bot").await.unwrap(),
        [InboxEntry {
            message: first,
            state: InboxState::Recorded,
            run_id: None,
            received_at: 10,
        }]
    );
    let other = journal.open_inbox("telegram", "other").await.unwrap();
    assert_eq!(
        other
            .iter()
            .map(|e| (e.message.body.as_str(), e.received_at))
            .collect::<Vec<_>>(),
        [("elsewhere", 12)]
    );
    assert_eq!(
        journal.cursor("telegram", "bot", "offset").await.unwrap(),
        Some("43".into())
    );
    assert!(
        journal
            .open_inbox("webhook", "bot")
            .await
            .unwrap()
            .is_empty()
    );
}

/// Receive, step 4: a prompt's entries are marked dispatched with their
/// run (a later mark without a run keeps it); answered (`done`) or handled
/// entries leave the open inbox, which lists the rest oldest first.
pub async fn inbox_entries_are_dispatched_with_their_run_then_answered(backend: &Backend) {
    let journal = backend.journal.as_ref();
    for (id, at) in [("3", 30), ("1", 20), ("2", 20), ("4", 40)] {
        journal.submit(record(message("bot", id, &format!("m{id}"), at), id, at));
    }
    journal.flush().await.unwrap();
    let open = |entries: Vec<InboxEntry>| {
        entries
            .into_iter()
            .map(|e| (e.message.id, e.state, e.run_id))
            .collect::<Vec<_>>()
    };
    assert_eq!(
        open(journal.open_inbox("telegram", "bot").await.unwrap()),
        [
            ("1".to_owned(), InboxState::Recorded, None),
            ("2".to_owned(), InboxState::Recorded, None),
            ("3".to_owned(), InboxState::Recorded, None),
            ("4".to_owned(), InboxState::Recorded, None),
        ]
    );
    let run = RunId::from_string("run_inbox".into());
    let set = |ids: &[&str], state, run_id: Option<RunId>| {
        Write::Channel(ChannelWrite::SetInboxState {
            channel: "telegram".into(),
            account: "bot".into(),
            ids: ids.iter().map(|id| (*id).to_owned()).collect(),
            state,
            run_id,
            at: 50,
        })
    };
    journal
        .commit(set(
            &["1", "2", "unknown"],
            InboxState::Dispatched,
            Some(run.clone()),
        ))
        .await
        .unwrap();
    // Marked again without a run: the run stays.
    journal
        .commit(set(&["2"], InboxState::Dispatched, None))
        .await
        .unwrap();
    assert_eq!(
        open(journal.open_inbox("telegram", "bot").await.unwrap()),
        [
            ("1".to_owned(), InboxState::Dispatched, Some(run.clone())),
            ("2".to_owned(), InboxState::Dispatched, Some(run.clone())),
            ("3".to_owned(), InboxState::Recorded, None),
            ("4".to_owned(), InboxState::Recorded, None),
        ]
    );
    journal
        .commit(set(&["1"], InboxState::Done, None))
        .await
        .unwrap();
    journal
        .commit(set(&["3"], InboxState::Handled, None))
        .await
        .unwrap();
    assert_eq!(
        open(journal.open_inbox("telegram", "bot").await.unwrap()),
        [
            ("2".to_owned(), InboxState::Dispatched, Some(run)),
            ("4".to_owned(), InboxState::Recorded, None),
        ]
    );
    // An answered message is still known: its redelivery is refused.
    let again = journal
        .commit(record(message("bot", "1", "m1", 20), "5", 60))
        .await;
    assert!(is_conflict(&again), "{again:?}");
}

/// A cursor is one value per channel, account and name, replaced by a later one.
pub async fn cursors_are_kept_per_channel_account_and_name(backend: &Backend) {
    let journal = backend.journal.as_ref();
    let put = |account: &str, name: &str, value: &str| {
        Write::Channel(ChannelWrite::PutCursor {
            channel: "telegram".into(),
            account: account.into(),
            name: name.into(),
            value: value.into(),
        })
    };
    journal.submit(put("bot", "offset", "1"));
    journal.submit(put("bot", "offset", "2"));
    journal.submit(put("bot", "since", "x"));
    journal.commit(put("other", "offset", "9")).await.unwrap();
    assert_eq!(
        journal.cursor("telegram", "bot", "offset").await.unwrap(),
        Some("2".into())
    );
    assert_eq!(
        journal.cursor("telegram", "bot", "since").await.unwrap(),
        Some("x".into())
    );
    assert_eq!(
        journal.cursor("telegram", "other", "offset").await.unwrap(),
        Some("9".into())
    );
    assert_eq!(
        journal.cursor("webhook", "bot", "offset").await.unwrap(),
        None
    );
    assert_eq!(
        journal.cursor("telegram", "bot", "nothing").await.unwrap(),
        None
    );
    // Every account's cursor of a name, by channel and account.
    let all = |c: &str, a: &str, v: &str| (c.to_owned(), a.to_owned(), v.to_owned());
    assert_eq!(
        journal.cursors("offset").await.unwrap(),
        [all("telegram", "bot", "2"), all("telegram", "other", "9")]
    );
    assert_eq!(
        journal.cursors("since").await.unwrap(),
        [all("telegram", "bot", "x")]
    );
    assert!(journal.cursors("nothing").await.unwrap().is_empty());
}

/// Send: an intent's id is its idempotency key; deciding it again (even
/// differently) leaves the recorded one as it is.
pub async fn an_intent_is_recorded_once_per_id(backend: &Backend) {
    let journal = backend.journal.as_ref();
    let mut first = intent("reply:run_1", "telegram", IntentStatus::Pending, 10);
    first.text = Some("part one\n\npart two".into());
    first.session_id = Some(SessionId::from_string("ses_1".into()));
    first.run_id = Some(RunId::from_string("run_1".into()));
    first.next_attempt_at = Some(10);
    journal.commit(insert(&first)).await.unwrap();
    let mut second = intent("reply:run_1", "telegram", IntentStatus::Sending, 20);
    second.units = vec![unit("decided again")];
    journal.commit(insert(&second)).await.unwrap();
    assert_eq!(stored(journal, "reply:run_1").await, first);
    assert_eq!(journal.intent("reply:run_2").await.unwrap(), None);
    assert_eq!(
        open_ids(journal, "telegram").await,
        [("reply:run_1".to_owned(), IntentStatus::Pending)]
    );
}

/// Send: pending ─claim▶ sending ─every part accepted▶ committing ▶ sent,
/// each move with the fields it sets; the intent is open until sent.
/// Two workers claiming at once: one wins, the other is refused.
pub async fn a_claimed_intent_is_sent_with_its_receipt(backend: &Backend) {
    let journal = backend.journal.as_ref();
    let mut expected = intent("reply:run_s", "telegram", IntentStatus::Pending, 10);
    expected.next_attempt_at = Some(10);
    journal.commit(insert(&expected)).await.unwrap();
    let mut claim = IntentUpdate::new(
        "reply:run_s",
        &[IntentStatus::Pending],
        IntentStatus::Sending,
        20,
    );
    claim.attempt = Some(1);
    claim.inflight = Some(0);
    journal.commit(update(claim.clone())).await.unwrap();
    let twice = journal.commit(update(claim)).await;
    assert!(is_conflict(&twice), "claimed twice: {twice:?}");
    expected.status = IntentStatus::Sending;
    expected.attempt = 1;
    expected.next_attempt_at = None;
    expected.inflight = Some(0);
    expected.updated_at = 20;
    assert_eq!(stored(journal, "reply:run_s").await, expected);
    // The first part went out; the second is in flight.
    let mut part = IntentUpdate::new(
        "reply:run_s",
        &[IntentStatus::Sending],
        IntentStatus::Sending,
        21,
    );
    part.inflight = Some(1);
    part.receipt = Some(receipt(&["m1"]));
    journal.commit(update(part)).await.unwrap();
    expected.inflight = Some(1);
    expected.receipt = receipt(&["m1"]);
    expected.updated_at = 21;
    assert_eq!(stored(journal, "reply:run_s").await, expected);
    let mut accepted = IntentUpdate::new(
        "reply:run_s",
        &[IntentStatus::Sending],
        IntentStatus::Committing,
        22,
    );
    accepted.receipt = Some(receipt(&["m1", "m2"]));
    journal.commit(update(accepted)).await.unwrap();
    expected.status = IntentStatus::Committing;
    expected.inflight = None;
    expected.receipt = receipt(&["m1", "m2"]);
    expected.updated_at = 22;
    assert_eq!(stored(journal, "reply:run_s").await, expected);
    assert_eq!(
        open_ids(journal, "telegram").await,
        [("reply:run_s".to_owned(), IntentStatus::Committing)]
    );
    journal
        .commit(update(IntentUpdate::new(
            "reply:run_s",
            &[IntentStatus::Committing],
            IntentStatus::Sent,
            23,
        )))
        .await
        .unwrap();
    expected.status = IntentStatus::Sent;
    expected.updated_at = 23;
    assert_eq!(stored(journal, "reply:run_s").await, expected);
    assert!(open_ids(journal, "telegram").await.is_empty());
    assert_eq!(expected.receipt.primary(), Some("m1"));
}

/// Send: a transient failure puts the intent back to pending with its
/// attempts counted, its next attempt's time and the failure; the next
/// claim counts on. A failure retrying cannot fix ends it as failed. The
/// last failure stays on record after a later success.
pub async fn a_failed_attempt_is_retried_with_its_count_or_fails(backend: &Backend) {
    let journal = backend.journal.as_ref();
    let mut retried = intent("notice:a", "telegram", IntentStatus::Pending, 10);
    let mut failed = intent("notice:b", "telegram", IntentStatus::Pending, 11);
    retried.kind = IntentKind::Notice;
    failed.kind = IntentKind::Notice;
    journal.submit(insert(&retried));
    journal.commit(insert(&failed)).await.unwrap();
    let claim = |id: &str, attempt, at| {
        let mut claim = IntentUpdate::new(id, &[IntentStatus::Pending], IntentStatus::Sending, at);
        claim.attempt = Some(attempt);
        claim.inflight = Some(0);
        update(claim)
    };
    journal.submit(claim("notice:a", 1, 20));
    journal.commit(claim("notice:b", 1, 20)).await.unwrap();
    let mut retry = IntentUpdate::new(
        "notice:a",
        &[IntentStatus::Sending],
        IntentStatus::Pending,
        21,
    );
    retry.next_attempt_at = Some(1_021);
    retry.failure = Some(failure(FailureKind::Transient, "HTTP 502"));
    journal.commit(update(retry)).await.unwrap();
    retried.attempt = 1;
    retried.next_attempt_at = Some(1_021);
    retried.failure = Some(failure(FailureKind::Transient, "HTTP 502"));
    retried.updated_at = 21;
    assert_eq!(stored(journal, "notice:a").await, retried);
    let mut give_up = IntentUpdate::new(
        "notice:b",
        &[IntentStatus::Sending],
        IntentStatus::Failed,
        22,
    );
    give_up.failure = Some(failure(FailureKind::Permission, "bot was kicked"));
    journal.commit(update(give_up)).await.unwrap();
    failed.status = IntentStatus::Failed;
    failed.attempt = 1;
    failed.failure = Some(failure(FailureKind::Permission, "bot was kicked"));
    failed.updated_at = 22;
    assert_eq!(stored(journal, "notice:b").await, failed);
    assert_eq!(
        open_ids(journal, "telegram").await,
        [("notice:a".to_owned(), IntentStatus::Pending)]
    );
    // The second attempt succeeds.
    journal.commit(claim("notice:a", 2, 1_030)).await.unwrap();
    let mut done = IntentUpdate::new(
        "notice:a",
        &[IntentStatus::Sending],
        IntentStatus::Committing,
        1_031,
    );
    done.receipt = Some(receipt(&["m7"]));
    journal.commit(update(done)).await.unwrap();
    retried.status = IntentStatus::Committing;
    retried.attempt = 2;
    retried.next_attempt_at = None;
    retried.receipt = receipt(&["m7"]);
    retried.updated_at = 1_031;
    assert_eq!(stored(journal, "notice:a").await, retried);
}

/// Send and recovery: a pending intent too old to send is expired; a send
/// whose outcome cannot be known is left `unknown_after_send`; an approval
/// prompt answered elsewhere is cancelled. None of them is open any more.
pub async fn old_intents_expire_and_uncertain_sends_stay_unknown(backend: &Backend) {
    let journal = backend.journal.as_ref();
    let old = intent("reply:old", "telegram", IntentStatus::Pending, 1);
    let uncertain = intent("reply:uncertain", "telegram", IntentStatus::Pending, 2);
    let mut prompt = intent("approval:ap_1", "telegram", IntentStatus::Pending, 3);
    prompt.kind = IntentKind::Approval;
    for intent in [&old, &uncertain, &prompt] {
        journal.submit(insert(intent));
    }
    let mut claim = IntentUpdate::new(
        "reply:uncertain",
        &[IntentStatus::Pending],
        IntentStatus::Sending,
        5,
    );
    claim.attempt = Some(1);
    claim.inflight = Some(1);
    claim.receipt = Some(receipt(&["m1"]));
    journal.commit(update(claim)).await.unwrap();
    journal
        .commit(update(IntentUpdate::new(
            "reply:old",
            &[IntentStatus::Pending],
            IntentStatus::Expired,
            900_001,
        )))
        .await
        .unwrap();
    let mut unknown = IntentUpdate::new(
        "reply:uncertain",
        &[IntentStatus::Sending],
        IntentStatus::UnknownAfterSend,
        900_002,
    );
    unknown.failure = Some(failure(FailureKind::Unknown, "the connection closed"));
    journal.commit(update(unknown)).await.unwrap();
    journal
        .commit(update(IntentUpdate::new(
            "approval:ap_1",
            &[IntentStatus::Pending, IntentStatus::Held],
            IntentStatus::Cancelled,
            900_003,
        )))
        .await
        .unwrap();
    assert!(open_ids(journal, "telegram").await.is_empty());
    let expired = stored(journal, "reply:old").await;
    assert_eq!(
        (expired.status, expired.attempt, expired.updated_at),
        (IntentStatus::Expired, 0, 900_001)
    );
    let left = stored(journal, "reply:uncertain").await;
    assert_eq!(left.status, IntentStatus::UnknownAfterSend);
    // What is known of it stays: the part delivered, and the attempt made.
    assert_eq!((left.attempt, left.receipt.clone()), (1, receipt(&["m1"])));
    assert_eq!(left.inflight, None);
    assert_eq!(
        left.failure,
        Some(failure(FailureKind::Unknown, "the connection closed"))
    );
    assert_eq!(
        stored(journal, "approval:ap_1").await.status,
        IntentStatus::Cancelled
    );
    let listed = |status| async move {
        journal
            .intents(None, Some(status), 10)
            .await
            .unwrap()
            .into_iter()
            .map(|i| i.id)
            .collect::<Vec<_>>()
    };
    assert_eq!(
        listed(IntentStatus::UnknownAfterSend).await,
        ["reply:uncertain"]
    );
    assert_eq!(listed(IntentStatus::Expired).await, ["reply:old"]);
    // An operator's resend: pending again from the part in doubt, its
    // expiry counted from the decision; a second decision is refused.
    let resend = Resolution::Resend.update(&left, 950_000).unwrap();
    journal.commit(update(resend.clone())).await.unwrap();
    let resent = stored(journal, "reply:uncertain").await;
    assert_eq!(
        (resent.status, resent.resent_at, resent.decided_at()),
        (IntentStatus::Pending, Some(950_000), 950_000)
    );
    assert_eq!(resent.receipt, receipt(&["m1"]));
    assert!(is_conflict(&journal.commit(update(resend)).await));
    assert!(Resolution::Drop.update(&resent, 950_001).is_err());
}

/// An update names the states it moves from: from any other it is refused
/// as a conflict and changes nothing, not even the fields it carries; an
/// intent never recorded is a conflict too. Inside `Together`, a refused
/// move undoes the others.
pub async fn a_move_from_a_wrong_status_is_refused_and_changes_nothing(backend: &Backend) {
    let journal = backend.journal.as_ref();
    let pending = intent("reply:p", "telegram", IntentStatus::Pending, 10);
    let sent = intent("reply:s", "telegram", IntentStatus::Pending, 11);
    journal.submit(insert(&pending));
    journal.commit(insert(&sent)).await.unwrap();
    let mut to_sent =
        IntentUpdate::new("reply:s", &[IntentStatus::Pending], IntentStatus::Sent, 12);
    to_sent.receipt = Some(receipt(&["m1"]));
    journal.commit(update(to_sent)).await.unwrap();
    let sent = stored(journal, "reply:s").await;
    let everything = |id: &str, from: &[IntentStatus], status| {
        let mut wrong = IntentUpdate::new(id, from, status, 99);
        wrong.attempt = Some(7);
        wrong.next_attempt_at = Some(99);
        wrong.inflight = Some(1);
        wrong.receipt = Some(receipt(&["x"]));
        wrong.failure = Some(failure(FailureKind::Auth, "no"));
        wrong.edit_of = Some(Some("e".into()));
        wrong.retract = Some(Some("r".into()));
        wrong.units = Some(vec![unit("rewritten")]);
        update(wrong)
    };
    let refused = journal
        .commit(everything(
            "reply:p",
            &[IntentStatus::Sending, IntentStatus::Committing],
            IntentStatus::Sent,
        ))
        .await;
    assert!(is_conflict(&refused), "{refused:?}");
    assert_eq!(stored(journal, "reply:p").await, pending);
    // A finished intent is not moved back.
    let back = journal
        .commit(everything(
            "reply:s",
            &[IntentStatus::Pending],
            IntentStatus::Sending,
        ))
        .await;
    assert!(is_conflict(&back), "{back:?}");
    assert_eq!(stored(journal, "reply:s").await, sent);
    let missing = journal
        .commit(everything(
            "reply:never",
            &[IntentStatus::Pending],
            IntentStatus::Sending,
        ))
        .await;
    assert!(is_conflict(&missing), "{missing:?}");
    assert_eq!(journal.intent("reply:never").await.unwrap(), None);
    let together = journal
        .commit(Write::Together(vec![
            everything("reply:p", &[IntentStatus::Pending], IntentStatus::Sending),
            everything("reply:s", &[IntentStatus::Pending], IntentStatus::Sending),
        ]))
        .await;
    assert!(is_conflict(&together), "{together:?}");
    assert_eq!(stored(journal, "reply:p").await, pending);
    assert_eq!(stored(journal, "reply:s").await, sent);
}

/// With `MessageSending` hooks an intent is recorded held (and open); the
/// hooks let it go as pending, maybe with rewritten units, or withhold it
/// for good.
pub async fn a_held_intent_is_let_go_rewritten_or_withheld(backend: &Backend) {
    let journal = backend.journal.as_ref();
    let mut rewritten = intent("reply:h1", "telegram", IntentStatus::Held, 10);
    rewritten.text = Some("part one\n\npart two".into());
    let withheld = intent("reply:h2", "telegram", IntentStatus::Held, 11);
    journal.submit(insert(&rewritten));
    journal.commit(insert(&withheld)).await.unwrap();
    assert_eq!(
        open_ids(journal, "telegram").await,
        [
            ("reply:h1".to_owned(), IntentStatus::Held),
            ("reply:h2".to_owned(), IntentStatus::Held),
        ]
    );
    let mut go = IntentUpdate::new("reply:h1", &[IntentStatus::Held], IntentStatus::Pending, 12);
    go.units = Some(vec![unit("rewritten by a hook")]);
    go.next_attempt_at = Some(12);
    journal.commit(update(go)).await.unwrap();
    let mut block = IntentUpdate::new(
        "reply:h2",
        &[IntentStatus::Held],
        IntentStatus::Withheld,
        13,
    );
    block.failure = Some(failure(
        FailureKind::InvalidPayload,
        "blocked by ./check.sh",
    ));
    journal.commit(update(block)).await.unwrap();
    rewritten.status = IntentStatus::Pending;
    rewritten.units = vec![unit("rewritten by a hook")];
    rewritten.next_attempt_at = Some(12);
    rewritten.updated_at = 12;
    assert_eq!(stored(journal, "reply:h1").await, rewritten);
    let blocked = stored(journal, "reply:h2").await;
    assert_eq!(
        (blocked.status, blocked.units, blocked.failure),
        (
            IntentStatus::Withheld,
            withheld.units,
            Some(failure(
                FailureKind::InvalidPayload,
                "blocked by ./check.sh"
            ))
        )
    );
    assert_eq!(
        open_ids(journal, "telegram").await,
        [("reply:h1".to_owned(), IntentStatus::Pending)]
    );
}

/// Live drafts: a draft's first send is recorded already `sending` (the
/// hub makes the call) and sent with the draft's message id; the reply
/// finalizes it in place (`edit_of`), or, when the draft is gone or stale,
/// drops the edit or deletes the draft (`retract`, cleared once the
/// deletion is committed) and the draft intent is cancelled. Drafts are
/// intents: the live-draft table of earlier versions lists none of them.
pub async fn drafts_are_intents_finalized_in_place_or_retracted(backend: &Backend) {
    let journal = backend.journal.as_ref();
    let run = RunId::from_string("run_d".into());
    let draft_id = draft_intent_id(&run);
    assert_eq!(draft_id, "draft:run_d");
    let mut draft = intent(&draft_id, "telegram", IntentStatus::Sending, 10);
    draft.kind = IntentKind::Draft;
    draft.units = vec![unit("Half a rep")];
    draft.attempt = 1;
    draft.inflight = Some(0);
    draft.run_id = Some(run.clone());
    journal.commit(insert(&draft)).await.unwrap();
    assert_eq!(
        open_ids(journal, "telegram").await,
        [(draft_id.clone(), IntentStatus::Sending)]
    );
    let mut shown = IntentUpdate::new(&draft_id, &[IntentStatus::Sending], IntentStatus::Sent, 11);
    shown.receipt = Some(receipt(&["d1"]));
    journal.commit(update(shown)).await.unwrap();
    let platform_id = stored(journal, &draft_id)
        .await
        .receipt
        .primary()
        .map(str::to_owned);
    assert_eq!(platform_id.as_deref(), Some("d1"));

    // The reply finalizes it in place; the draft it names is gone, so the
    // reply stops editing before it sends afresh.
    let mut reply = intent("reply:run_d", "telegram", IntentStatus::Pending, 12);
    reply.edit_of = platform_id.clone();
    reply.run_id = Some(run.clone());
    journal.commit(insert(&reply)).await.unwrap();
    assert_eq!(stored(journal, "reply:run_d").await.edit_of, platform_id);
    let mut fresh = IntentUpdate::new(
        "reply:run_d",
        &[IntentStatus::Sending, IntentStatus::Pending],
        IntentStatus::Pending,
        13,
    );
    fresh.edit_of = Some(None);
    journal.commit(update(fresh)).await.unwrap();
    let reply_now = stored(journal, "reply:run_d").await;
    assert_eq!((reply_now.edit_of, reply_now.retract), (None, None));

    // After a restart: the stale draft is deleted, then the reply goes out
    // as a fresh message and the draft intent is cancelled.
    let mut stale = intent("reply:run_e", "telegram", IntentStatus::Pending, 14);
    stale.retract = Some("d1".into());
    journal.commit(insert(&stale)).await.unwrap();
    let mut claim = IntentUpdate::new(
        "reply:run_e",
        &[IntentStatus::Pending],
        IntentStatus::Sending,
        15,
    );
    claim.attempt = Some(1);
    claim.inflight = Some(0);
    journal.commit(update(claim)).await.unwrap();
    assert_eq!(
        stored(journal, "reply:run_e").await.retract.as_deref(),
        Some("d1"),
        "an update without `retract` keeps it"
    );
    let mut deleted = IntentUpdate::new(
        "reply:run_e",
        &[IntentStatus::Sending],
        IntentStatus::Sending,
        16,
    );
    deleted.retract = Some(None);
    deleted.inflight = Some(0);
    journal
        .commit(Write::Together(vec![
            update(deleted),
            update(IntentUpdate::new(
                &draft_id,
                &[IntentStatus::Sent],
                IntentStatus::Cancelled,
                16,
            )),
        ]))
        .await
        .unwrap();
    let stale_now = stored(journal, "reply:run_e").await;
    assert_eq!(
        (stale_now.status, stale_now.retract, stale_now.attempt),
        (IntentStatus::Sending, None, 1)
    );
    let draft_now = stored(journal, &draft_id).await;
    assert_eq!(
        (draft_now.status, draft_now.kind, draft_now.receipt),
        (IntentStatus::Cancelled, IntentKind::Draft, receipt(&["d1"]))
    );
    journal
        .commit(Write::Channel(ChannelWrite::DeleteDraft { run_id: run }))
        .await
        .unwrap();
    assert!(journal.drafts("telegram", "bot").await.unwrap().is_empty());
    assert_eq!(
        stored(journal, &draft_id).await.status,
        IntentStatus::Cancelled,
        "forgetting an old draft row leaves the draft intent"
    );
}

/// `pincer channels outbox`: the most recently changed first (ties by id),
/// of one channel or all, of one status or all, at most `limit`.
pub async fn intents_are_listed_most_recently_changed_first(backend: &Backend) {
    let journal = backend.journal.as_ref();
    for (id, channel, created) in [
        ("a", "telegram", 1),
        ("b", "webhook", 2),
        ("c", "telegram", 3),
        ("d", "telegram", 4),
    ] {
        journal.submit(insert(&intent(id, channel, IntentStatus::Pending, created)));
    }
    // `a` changes last; `b` and `c` change at the same time.
    for (id, at) in [("b", 20), ("c", 20), ("a", 30)] {
        journal.submit(update(IntentUpdate::new(
            id,
            &[IntentStatus::Pending],
            IntentStatus::Failed,
            at,
        )));
    }
    journal.flush().await.unwrap();
    let ids = |intents: Vec<SendIntent>| intents.into_iter().map(|i| i.id).collect::<Vec<_>>();
    assert_eq!(
        ids(journal.intents(None, None, 10).await.unwrap()),
        ["a", "b", "c", "d"]
    );
    assert_eq!(
        ids(journal.intents(None, None, 2).await.unwrap()),
        ["a", "b"]
    );
    assert_eq!(
        ids(journal
            .intents(None, Some(IntentStatus::Pending), 10)
            .await
            .unwrap()),
        ["d"]
    );
    assert!(
        journal
            .intents(None, Some(IntentStatus::Sent), 10)
            .await
            .unwrap()
            .is_empty()
    );
    assert!(journal.intents(None, None, 0).await.unwrap().is_empty());
    assert_eq!(
        ids(journal.intents(Some("telegram"), None, 10).await.unwrap()),
        ["a", "c", "d"],
        "one channel's intents, in the same order"
    );
    assert_eq!(
        ids(journal.intents(Some("telegram"), None, 1).await.unwrap()),
        ["a"],
        "the limit counts the channel's intents only"
    );
    assert_eq!(
        ids(journal
            .intents(Some("telegram"), Some(IntentStatus::Failed), 10)
            .await
            .unwrap()),
        ["a", "c"]
    );
    assert!(
        journal
            .intents(Some("irc"), None, 10)
            .await
            .unwrap()
            .is_empty()
    );
    assert_eq!(open_ids(journal, "webhook").await, []);
    assert_eq!(
        open_ids(journal, "telegram").await,
        [("d".to_owned(), IntentStatus::Pending)]
    );
}

/// A chat's session and its mapping land together or not at all; `/new`
/// maps the chat to another session; another thread of the same chat is
/// another conversation; deleting a session forgets its mapping.
pub async fn a_chat_is_mapped_to_its_session_together_with_it(backend: &Backend) {
    let journal = backend.journal.as_ref();
    let key = ConversationKey {
        channel: "telegram".into(),
        account: "bot".into(),
        target: target("-100"),
    };
    let first = session("ses_chat", 1);
    let map = |key: &ConversationKey, session: &Session, at| {
        Write::Channel(ChannelWrite::MapConversation {
            key: key.clone(),
            session_id: session.id.clone(),
            at,
        })
    };
    journal
        .commit(Write::Together(vec![
            Write::InsertSession(first.clone()),
            map(&key, &first, 1),
        ]))
        .await
        .unwrap();
    assert_eq!(
        journal.conversation(&key).await.unwrap(),
        Some(first.id.clone())
    );
    assert_eq!(
        journal.session(&first.id).await.unwrap(),
        Some(first.clone())
    );
    // A second chat whose session cannot be written is not mapped either.
    let mut other_thread = key.clone();
    other_thread.target.thread = Some("8".into());
    let failed = journal
        .commit(Write::Together(vec![
            map(&other_thread, &first, 2),
            Write::InsertSession(first.clone()),
        ]))
        .await;
    assert!(failed.is_err(), "a session was inserted twice");
    assert_eq!(journal.conversation(&other_thread).await.unwrap(), None);
    // `/new`.
    let second = session("ses_chat_new", 3);
    journal
        .commit(Write::Together(vec![
            Write::InsertSession(second.clone()),
            map(&key, &second, 3),
        ]))
        .await
        .unwrap();
    assert_eq!(
        journal.conversation(&key).await.unwrap(),
        Some(second.id.clone())
    );
    let mut direct = key.clone();
    direct.target.kind = TargetKind::Direct;
    assert_eq!(journal.conversation(&direct).await.unwrap(), None);
    journal
        .commit(Write::DeleteSession {
            id: second.id.clone(),
            at: 4,
        })
        .await
        .unwrap();
    assert_eq!(journal.conversation(&key).await.unwrap(), None);
    assert!(journal.session(&first.id).await.unwrap().is_some());
}

/// `/pair CODE`: a paired sender is kept per channel account; pairing again
/// changes nothing.
pub async fn senders_are_paired_per_channel_account(backend: &Backend) {
    let journal = backend.journal.as_ref();
    let pair = |account: &str, sender: &str, at| {
        Write::Channel(ChannelWrite::PairPeer {
            channel: "telegram".into(),
            account: account.into(),
            sender: sender.into(),
            at,
        })
    };
    assert!(!journal.is_paired("telegram", "bot", "u1").await.unwrap());
    journal.commit(pair("bot", "u1", 1)).await.unwrap();
    journal.commit(pair("bot", "u1", 2)).await.unwrap();
    assert!(journal.is_paired("telegram", "bot", "u1").await.unwrap());
    assert!(!journal.is_paired("telegram", "other", "u1").await.unwrap());
    assert!(!journal.is_paired("telegram", "bot", "u2").await.unwrap());
    assert!(!journal.is_paired("webhook", "bot", "u1").await.unwrap());
}

/// `pincer channels pairs`: the paired senders listed by channel, account
/// and when they paired; revoking one forgets it in every account of the
/// channel, and revoking one not paired is a conflict that changes nothing.
pub async fn paired_senders_are_listed_and_revoked(backend: &Backend) {
    let journal = backend.journal.as_ref();
    let pair = |channel: &str, account: &str, sender: &str, at| {
        Write::Channel(ChannelWrite::PairPeer {
            channel: channel.into(),
            account: account.into(),
            sender: sender.into(),
            at,
        })
    };
    let unpair = |channel: &str, sender: &str| {
        Write::Channel(ChannelWrite::UnpairPeer {
            channel: channel.into(),
            sender: sender.into(),
        })
    };
    assert!(journal.pairs(None).await.unwrap().is_empty());
    journal
        .commit(pair("telegram", "bot", "u2", 5))
        .await
        .unwrap();
    journal
        .commit(pair("telegram", "bot", "u1", 7))
        .await
        .unwrap();
    journal
        .commit(pair("telegram", "bot", "u1", 9))
        .await
        .unwrap();
    journal
        .commit(pair("telegram", "old", "u1", 3))
        .await
        .unwrap();
    journal
        .commit(pair("webhook", "hook", "u1", 1))
        .await
        .unwrap();
    let listed = |pairs: Vec<Pairing>| -> Vec<(String, String, String, Millis)> {
        pairs
            .into_iter()
            .map(|p| (p.channel, p.account, p.sender, p.paired_at))
            .collect()
    };
    let row = |c: &str, a: &str, s: &str, at| (c.to_owned(), a.to_owned(), s.to_owned(), at);
    assert_eq!(
        listed(journal.pairs(None).await.unwrap()),
        vec![
            row("telegram", "bot", "u2", 5),
            row("telegram", "bot", "u1", 7),
            row("telegram", "old", "u1", 3),
            row("webhook", "hook", "u1", 1),
        ],
        "pairing again keeps the first time"
    );
    assert_eq!(
        listed(journal.pairs(Some("webhook")).await.unwrap()),
        vec![row("webhook", "hook", "u1", 1)]
    );
    journal.commit(unpair("telegram", "u1")).await.unwrap();
    assert!(!journal.is_paired("telegram", "bot", "u1").await.unwrap());
    assert!(!journal.is_paired("telegram", "old", "u1").await.unwrap());
    assert!(journal.is_paired("telegram", "bot", "u2").await.unwrap());
    assert!(journal.is_paired("webhook", "hook", "u1").await.unwrap());
    assert!(is_conflict(&journal.commit(unpair("telegram", "u1")).await));
    assert!(is_conflict(&journal.commit(unpair("irc", "u2")).await));
    assert_eq!(
        listed(journal.pairs(None).await.unwrap()),
        vec![
            row("telegram", "bot", "u2", 5),
            row("webhook", "hook", "u1", 1)
        ]
    );
    journal
        .commit(pair("telegram", "bot", "u1", 11))
        .await
        .unwrap();
    assert!(journal.is_paired("telegram", "bot", "u1").await.unwrap());
}

/// `/metrics`: runs per state and intents per channel and status, states
/// with none left out.
pub async fn runs_and_intents_are_counted_by_state(backend: &Backend) {
    let journal = backend.journal.as_ref();
    assert!(backend.counts.run_counts().await.unwrap().is_empty());
    assert!(backend.counts.intent_counts().await.unwrap().is_empty());
    journal.submit(Write::InsertSession(session("ses_counts", 1)));
    let states = [
        RunState::Completed,
        RunState::Completed,
        RunState::Failed,
        RunState::Queued,
        RunState::Waiting,
    ];
    for (n, state) in states.into_iter().enumerate() {
        let id = RunId::from_string(format!("run_count_{n}"));
        journal.submit(Write::InsertRun {
            id: id.clone(),
            session_id: SessionId::from_string("ses_counts".into()),
            at: 2,
        });
        if state != RunState::Queued {
            journal.submit(Write::SetRunState {
                id,
                state,
                stop_reason: state.is_terminal().then_some(StopReason::EndTurn),
                error: None,
                usage: Usage::default(),
                cost: None,
                at: 3,
            });
        }
    }
    for (id, channel, status) in [
        ("t1", "telegram", IntentStatus::Pending),
        ("t2", "telegram", IntentStatus::Pending),
        ("t3", "telegram", IntentStatus::Held),
        ("t4", "telegram", IntentStatus::Sent),
        ("w1", "webhook", IntentStatus::Pending),
    ] {
        journal.submit(insert(&intent(id, channel, IntentStatus::Pending, 1)));
        if status != IntentStatus::Pending {
            journal.submit(update(IntentUpdate::new(
                id,
                &[IntentStatus::Pending],
                status,
                2,
            )));
        }
    }
    // A move refused is not counted.
    journal.submit(update(IntentUpdate::new(
        "w1",
        &[IntentStatus::Sending],
        IntentStatus::Failed,
        3,
    )));
    journal.flush().await.unwrap();
    let mut runs = backend.counts.run_counts().await.unwrap();
    runs.sort_by_key(|(state, _)| state.as_str());
    assert_eq!(
        runs,
        [
            (RunState::Completed, 2),
            (RunState::Failed, 1),
            (RunState::Queued, 1),
            (RunState::Waiting, 1),
        ]
    );
    let mut intents = backend.counts.intent_counts().await.unwrap();
    intents.sort_by(|a, b| (&a.0, a.1.as_str()).cmp(&(&b.0, b.1.as_str())));
    assert_eq!(
        intents,
        [
            ("telegram".to_owned(), IntentStatus::Held, 1),
            ("telegram".to_owned(), IntentStatus::Pending, 2),
            ("telegram".to_owned(), IntentStatus::Sent, 1),
            ("webhook".to_owned(), IntentStatus::Pending, 1),
        ]
    );
}
