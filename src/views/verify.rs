//! The receipt chain's verdict (`pincer verify --json`, `GET /v1/verify`).

use schemars::JsonSchema;
use serde::Serialize;

/// What walking the receipt chain and cross-checking it against the tapes
/// found.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, JsonSchema)]
#[schemars(rename = "Verify", deny_unknown_fields)]
pub struct VerifyView {
    /// The chain links from the first receipt to the last and no run has
    /// fewer receipts than tool results
    pub ok: bool,
    /// Receipts that verify, in order (before the break, if any)
    pub receipts: u64,
    /// The hash of the last receipt that verifies
    pub head: String,
    /// The first receipt that does not link; null: none
    pub broken: Option<ReceiptBreak>,
    /// Runs with fewer receipts than tool results on their tapes
    pub missing: Vec<MissingReceipts>,
}

/// Where the chain breaks.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct ReceiptBreak {
    pub seq: u64,
    pub problem: String,
}

/// A run whose tape has more tool results than it has receipts.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct MissingReceipts {
    pub run_id: String,
    pub tool_results: u64,
    pub receipts: u64,
}

impl From<&crate::core::journal::ChainAudit> for VerifyView {
    fn from(audit: &crate::core::journal::ChainAudit) -> Self {
        VerifyView {
            ok: audit.ok(),
            receipts: audit.walk.count(),
            head: audit.walk.head().to_owned(),
            broken: audit.broken.as_ref().map(|at| ReceiptBreak {
                seq: at.seq,
                problem: at.problem.clone(),
            }),
            missing: audit
                .missing
                .iter()
                .map(|(run, results, receipts)| MissingReceipts {
                    run_id: run.as_str().to_owned(),
                    tool_results: *results,
                    receipts: *receipts,
                })
                .collect(),
        }
    }
}
