//! `pincer verify`: walks the receipt chain page by page and cross-checks it
//! against the tape (through the `Audit` port).

use serde_json::json;

use super::print;
use crate::app::{Failure, Flags, exit};
use crate::core::ids::RunId;
use crate::core::journal::Audit;
use crate::core::receipt::{Break, ChainWalk};

/// What the walk found.
struct Verdict {
    walk: ChainWalk,
    /// The first receipt that does not link, if any.
    broken: Option<Break>,
    /// Runs with fewer receipts than tool results: (run, results, receipts).
    missing: Vec<(RunId, u64, u64)>,
}

impl Verdict {
    fn ok(&self) -> bool {
        self.broken.is_none() && self.missing.is_empty()
    }
}

pub async fn verify(flags: &Flags, json_output: bool) -> Result<u8, Failure> {
    let store = crate::app::open_store(flags).await?;
    let verdict = check(&*store).await;
    store.shutdown();
    let verdict = verdict?;
    if json_output {
        print(&format!("{}\n", verdict_json(&verdict)))?;
    } else {
        print(&verdict_text(&verdict))?;
    }
    Ok(if verdict.ok() {
        exit::OK
    } else {
        exit::RUN_FAILED
    })
}

async fn check(audit: &dyn Audit) -> Result<Verdict, Failure> {
    const PAGE: usize = 10_000;
    let mut walk = ChainWalk::default();
    let mut broken = None;
    'pages: loop {
        let page = audit
            .receipts(walk.count() + 1, PAGE)
            .await
            .map_err(Failure::failed)?;
        if page.is_empty() {
            break;
        }
        for receipt in &page {
            if let Err(at) = walk.push(receipt) {
                broken = Some(at);
                break 'pages;
            }
        }
    }
    let missing = audit.missing_receipts().await.map_err(Failure::failed)?;
    Ok(Verdict {
        walk,
        broken,
        missing,
    })
}

fn verdict_json(verdict: &Verdict) -> serde_json::Value {
    json!({
        "ok": verdict.ok(),
        "receipts": verdict.walk.count(),
        "head": verdict.walk.head(),
        "broken": verdict.broken.as_ref().map(|b| json!({"seq": b.seq, "problem": b.problem})),
        "missing": verdict.missing.iter().map(|(run, results, receipts)| json!({
            "run_id": run.as_str(), "tool_results": results, "receipts": receipts,
        })).collect::<Vec<_>>(),
    })
}

fn verdict_text(verdict: &Verdict) -> String {
    let walk = &verdict.walk;
    let mut out = match &verdict.broken {
        Some(at) => format!(
            "BROKEN at receipt {}: {}\n{} receipts before it verify\n",
            at.seq,
            at.problem,
            walk.count()
        ),
        None => format!(
            "ok: {} receipts, chain intact, head {}\n",
            walk.count(),
            walk.head()
        ),
    };
    for (run, results, receipts) in &verdict.missing {
        out.push_str(&format!(
            "MISSING: run {run} has {results} tool results on the tape but {receipts} receipts\n"
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_break_and_missing_receipts_are_each_named() {
        let verdict = Verdict {
            walk: ChainWalk::default(),
            broken: Some(Break {
                seq: 3,
                problem: "hash differs".into(),
            }),
            missing: vec![(RunId::from_string("run_1".into()), 2, 1)],
        };
        assert!(!verdict.ok());
        assert_eq!(
            verdict_text(&verdict),
            "BROKEN at receipt 3: hash differs\n0 receipts before it verify\n\
             MISSING: run run_1 has 2 tool results on the tape but 1 receipts\n"
        );
        let value = verdict_json(&verdict);
        assert_eq!(value["ok"], false);
        assert_eq!(value["broken"]["seq"], 3);
        assert_eq!(value["missing"][0]["tool_results"], 2);
    }

    #[test]
    fn an_empty_chain_is_intact() {
        let verdict = Verdict {
            walk: ChainWalk::default(),
            broken: None,
            missing: Vec::new(),
        };
        assert!(verdict.ok());
        assert!(verdict_text(&verdict).starts_with("ok: 0 receipts, chain intact, head "));
    }
}
