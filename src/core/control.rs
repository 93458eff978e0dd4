//! What a face asks of a session whose run another process works, through
//! the journal: the process holding the session's lease reads it when woken
//! (`core::notify`) and carries it out, exactly as if its own face had asked.
//! A request names what it is about (runs, an approval, a question), so one
//! that arrives too late is a no-op, never applied to something newer.

use serde::{Deserialize, Serialize};

use super::approval::ApprovalDecision;
use super::ids::RunId;
use super::question::QuestionAnswer;
use super::session::ContentPart;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Control {
    /// Stop these runs (working or queued).
    Cancel { runs: Vec<RunId> },
    /// A person's answer to an approval the owner's run waits for; the first
    /// answer wins, there as everywhere.
    Approval {
        approval_id: String,
        decision: ApprovalDecision,
    },
    /// A person's answer to a question the owner's run asked.
    Question {
        question_id: String,
        answer: QuestionAnswer,
    },
    /// A message for the session's working prompt run, taken in at its next
    /// turn boundary; if that run ended meanwhile, the owner sends it as a
    /// prompt of its own, so it is never lost once taken.
    Steer { content: Vec<ContentPart> },
}
