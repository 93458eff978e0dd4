//! Receipts: every tool invocation leaves one, chained by SHA-256 so that
//! changing, removing or reordering a stored receipt breaks the chain.

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::ids::{RunId, SessionId};
use super::session::Millis;

/// How the gate decided a call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// The policy allowed it without asking.
    Allowed,
    /// A person approved it (or a remembered `allow_always` covered it).
    Approved,
    /// The policy refused it (mode, rule, path boundary).
    Denied,
    /// A person rejected it, or nobody answered in time.
    Rejected,
    /// The arguments could not be understood; nothing ran.
    Invalid,
    /// The run was cancelled before the call ran.
    Cancelled,
}

impl Verdict {
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Allowed => "allowed",
            Verdict::Approved => "approved",
            Verdict::Denied => "denied",
            Verdict::Rejected => "rejected",
            Verdict::Invalid => "invalid",
            Verdict::Cancelled => "cancelled",
        }
    }

    pub fn parse(value: &str) -> Option<Self> {
        [
            Verdict::Allowed,
            Verdict::Approved,
            Verdict::Denied,
            Verdict::Rejected,
            Verdict::Invalid,
            Verdict::Cancelled,
        ]
        .into_iter()
        .find(|v| v.as_str() == value)
    }

    /// Whether the tool ran.
    pub fn ran(self) -> bool {
        matches!(self, Verdict::Allowed | Verdict::Approved)
    }
}

/// The fields of a receipt that its hash covers, before it joins the chain.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReceiptBody {
    pub session_id: SessionId,
    pub run_id: RunId,
    pub call_id: String,
    pub tool: String,
    /// SHA-256 of the call's arguments (canonical JSON).
    pub input_hash: String,
    /// SHA-256 of the output the model saw (after the safety pass).
    pub output_hash: String,
    pub verdict: Verdict,
    pub is_error: bool,
    pub at: Millis,
    /// What each lifecycle hook that ran for the call decided
    /// (`hook: decision`, `core::hooks`); empty when none did.
    pub hooks: Vec<String>,
    /// The skills active when the call was made (`core::skills`), in the
    /// order they became active; empty when none was.
    pub skills: Vec<String>,
}

/// A receipt in the chain.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Receipt {
    /// Position in the chain, from 1 with no gaps.
    pub seq: u64,
    pub body: ReceiptBody,
    /// The previous receipt's hash; 64 zeros for the first.
    pub prev_hash: String,
    pub hash: String,
}

/// The `prev_hash` of the first receipt.
pub const GENESIS: &str = "0000000000000000000000000000000000000000000000000000000000000000";

impl ReceiptBody {
    /// The receipt this body becomes at `seq` after `prev_hash`.
    pub fn chain(self, seq: u64, prev_hash: &str) -> Receipt {
        let hash = receipt_hash(seq, &self, prev_hash);
        Receipt {
            seq,
            body: self,
            prev_hash: prev_hash.to_owned(),
            hash,
        }
    }
}

/// The hash of a receipt: SHA-256 over a fixed, unambiguous layout of every field.
pub fn receipt_hash(seq: u64, body: &ReceiptBody, prev_hash: &str) -> String {
    let mut hasher = Sha256::new();
    let seq = seq.to_string();
    let at = body.at.to_string();
    // Length-prefixed fields: no value can shift bytes into its neighbour.
    let fields: [&[u8]; 11] = [
        b"pincer-receipt-v1",
        seq.as_bytes(),
        body.session_id.as_str().as_bytes(),
        body.run_id.as_str().as_bytes(),
        body.call_id.as_bytes(),
        body.tool.as_bytes(),
        body.input_hash.as_bytes(),
        body.output_hash.as_bytes(),
        body.verdict.as_str().as_bytes(),
        if body.is_error { b"error" } else { b"ok" },
        at.as_bytes(),
    ];
    // The hooks' decisions, when any: a receipt without them hashes as one
    // written before hooks existed.
    let hooks = body.hooks.join("\n");
    let extra: &[&[u8]] = if body.hooks.is_empty() {
        &[]
    } else {
        &[b"hooks", hooks.as_bytes()]
    };
    // The active skills, likewise only when there are some.
    let skills = body.skills.join("\n");
    let active: &[&[u8]] = if body.skills.is_empty() {
        &[]
    } else {
        &[b"skills", skills.as_bytes()]
    };
    for field in fields
        .iter()
        .chain(extra)
        .chain(active)
        .chain([&prev_hash.as_bytes()])
    {
        hasher.update((field.len() as u64).to_le_bytes());
        hasher.update(field);
    }
    hex::encode(hasher.finalize())
}

/// SHA-256 of bytes, as hex.
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

/// SHA-256 of a JSON value in canonical form (object keys sorted, no spaces).
pub fn json_hash(value: &serde_json::Value) -> String {
    // serde_json's default map is ordered by key, so serialising sorts keys.
    let text = serde_json::to_string(value).unwrap_or_default();
    sha256_hex(text.as_bytes())
}

/// Where a chain breaks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Break {
    pub seq: u64,
    pub problem: String,
}

/// Walks a chain one receipt at a time, in order, remembering only the last link.
#[derive(Debug, Clone)]
pub struct ChainWalk {
    prev: String,
    next_seq: u64,
}

impl Default for ChainWalk {
    fn default() -> Self {
        Self {
            prev: GENESIS.to_owned(),
            next_seq: 1,
        }
    }
}

impl ChainWalk {
    /// Checks the next receipt against the chain so far.
    pub fn push(&mut self, receipt: &Receipt) -> Result<(), Break> {
        if receipt.seq != self.next_seq {
            return Err(Break {
                seq: receipt.seq,
                problem: format!(
                    "sequence jumps from {} to {}: receipts are missing",
                    self.next_seq - 1,
                    receipt.seq
                ),
            });
        }
        if receipt.prev_hash != self.prev {
            return Err(Break {
                seq: receipt.seq,
                problem: format!(
                    "prev_hash {} does not match the previous receipt's hash {}",
                    receipt.prev_hash, self.prev
                ),
            });
        }
        let computed = receipt_hash(receipt.seq, &receipt.body, &receipt.prev_hash);
        if computed != receipt.hash {
            return Err(Break {
                seq: receipt.seq,
                problem: format!(
                    "stored hash {} does not match its contents (computed {computed}): the receipt was altered",
                    receipt.hash
                ),
            });
        }
        self.prev = receipt.hash.clone();
        self.next_seq += 1;
        Ok(())
    }

    /// Receipts checked so far.
    pub fn count(&self) -> u64 {
        self.next_seq - 1
    }

    /// The hash of the last receipt checked (the genesis value before any).
    pub fn head(&self) -> &str {
        &self.prev
    }
}

/// Walks receipts in order and reports the first broken link; on success the
/// count and the head hash.
pub fn verify<'a>(receipts: impl IntoIterator<Item = &'a Receipt>) -> Result<(u64, String), Break> {
    let mut walk = ChainWalk::default();
    for receipt in receipts {
        walk.push(receipt)?;
    }
    Ok((walk.count(), walk.head().to_owned()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn body(call: &str) -> ReceiptBody {
        ReceiptBody {
            session_id: SessionId::from_string("ses_1".into()),
            run_id: RunId::from_string("run_1".into()),
            call_id: call.into(),
            tool: "read_file".into(),
            input_hash: sha256_hex(b"{}"),
            output_hash: sha256_hex(b"out"),
            verdict: Verdict::Allowed,
            is_error: false,
            at: 1,
            hooks: Vec::new(),
            skills: Vec::new(),
        }
    }

    fn chain(n: usize) -> Vec<Receipt> {
        let mut prev = GENESIS.to_owned();
        (1..=n as u64)
            .map(|seq| {
                let receipt = body(&format!("c{seq}")).chain(seq, &prev);
                prev = receipt.hash.clone();
                receipt
            })
            .collect()
    }

    #[test]
    fn hooks_are_hashed_only_when_some_decided() {
        // A receipt without hooks hashes as one written before they existed
        // (the v1 layout, pinned here), so older chains still verify.
        let plain = body("c1");
        assert_eq!(
            receipt_hash(1, &plain, GENESIS),
            "9e7a34ddd490391f747699599358d18265b877e4fbba487a6e39586e263a9b32"
        );
        let mut hooked = body("c1");
        hooked.hooks = vec!["PreToolUse ./check.sh: allow".into()];
        let with = receipt_hash(1, &hooked, GENESIS);
        assert_ne!(with, receipt_hash(1, &plain, GENESIS));
        hooked.hooks = vec!["PreToolUse ./check.sh: deny".into()];
        assert_ne!(receipt_hash(1, &hooked, GENESIS), with);
    }

    #[test]
    fn active_skills_are_hashed_only_when_some_were() {
        let plain = body("c1");
        let mut skilled = body("c1");
        skilled.skills = vec!["pdf".into()];
        let with = receipt_hash(1, &skilled, GENESIS);
        assert_ne!(with, receipt_hash(1, &plain, GENESIS));
        skilled.skills = vec!["pdf".into(), "review".into()];
        assert_ne!(receipt_hash(1, &skilled, GENESIS), with);
        // Not the same bytes as a hook's decision with the same text.
        let mut hooked = body("c1");
        hooked.hooks = vec!["pdf".into()];
        assert_ne!(receipt_hash(1, &hooked, GENESIS), with);
    }

    #[test]
    fn an_intact_chain_verifies() {
        let receipts = chain(5);
        let (count, head) = verify(&receipts).unwrap();
        assert_eq!(count, 5);
        assert_eq!(head, receipts[4].hash);
    }

    #[test]
    fn any_change_breaks_the_chain_at_that_receipt() {
        let mut receipts = chain(5);
        receipts[2].body.verdict = Verdict::Approved;
        assert_eq!(verify(&receipts).unwrap_err().seq, 3);

        let mut receipts = chain(5);
        receipts.remove(1);
        assert_eq!(verify(&receipts).unwrap_err().seq, 3);

        // Rehashing a changed receipt does not help: the next link breaks.
        let mut receipts = chain(5);
        receipts[1].body.tool = "shell".into();
        receipts[1].hash = receipt_hash(2, &receipts[1].body, &receipts[1].prev_hash);
        assert_eq!(verify(&receipts).unwrap_err().seq, 3);
    }
}
