//! What waits for a person: approvals and questions, as the tape records
//! their request (its place, then the fields of the event), and what an
//! answer settled.

use std::sync::Arc;

use schemars::JsonSchema;
use serde::Serialize;

use crate::core::approval::ApprovalDecision;
use crate::core::event::{Event, EventRecord};
use crate::core::question::QuestionOutcome;

/// An approval waiting for an answer: its `approval_requested` event.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(transparent)]
pub struct ApprovalView(Arc<EventRecord>);

impl ApprovalView {
    /// The view of an `approval_requested` event; `None` for another.
    pub fn of(record: Arc<EventRecord>) -> Option<Self> {
        matches!(record.event, Event::ApprovalRequested { .. }).then_some(Self(record))
    }

    pub fn approval_id(&self) -> &str {
        let Event::ApprovalRequested { approval_id, .. } = &self.0.event else {
            return "";
        };
        approval_id
    }

    pub fn record(&self) -> &EventRecord {
        &self.0
    }
}

/// A question (`ask_user`) waiting for an answer: its `question_asked` event.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(transparent)]
pub struct QuestionView(Arc<EventRecord>);

impl QuestionView {
    /// The view of a `question_asked` event; `None` for another.
    pub fn of(record: Arc<EventRecord>) -> Option<Self> {
        matches!(record.event, Event::QuestionAsked { .. }).then_some(Self(record))
    }

    pub fn question_id(&self) -> &str {
        self.0.event.question().map_or("", |(id, _)| id)
    }

    pub fn record(&self) -> &EventRecord {
        &self.0
    }
}

/// Approvals waiting for an answer.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct ApprovalList {
    pub approvals: Vec<ApprovalView>,
}

impl ApprovalList {
    /// The approvals among `records`.
    pub fn of(records: Vec<Arc<EventRecord>>) -> Self {
        Self {
            approvals: records.into_iter().filter_map(ApprovalView::of).collect(),
        }
    }
}

/// Questions waiting for an answer.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct QuestionList {
    pub questions: Vec<QuestionView>,
}

impl QuestionList {
    /// The questions among `records`.
    pub fn of(records: Vec<Arc<EventRecord>>) -> Self {
        Self {
            questions: records.into_iter().filter_map(QuestionView::of).collect(),
        }
    }
}

/// An approval answered, and how.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct Answered {
    pub approval: ApprovalView,
    #[schemars(with = "super::PersonDecision")]
    pub decision: ApprovalDecision,
}

/// A question answered (or declined), and the answer it took.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct Replied {
    pub question: QuestionView,
    #[schemars(with = "super::PersonOutcome")]
    pub outcome: QuestionOutcome,
    /// The answer: an option's text where the reply picked one
    pub answer: Option<String>,
}
