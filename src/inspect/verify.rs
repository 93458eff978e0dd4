//! `pincer verify`: walks the receipt chain page by page and cross-checks it
//! against the tape (`core::journal::audit_chain`, over the `Audit` port;
//! `GET /v1/verify` shows the same verdict).

use super::print;
use crate::app::{Failure, Flags, exit};
use crate::core::journal::{ChainAudit, audit_chain};
use crate::views::VerifyView;

pub async fn verify(flags: &Flags, json_output: bool) -> Result<u8, Failure> {
    let store = crate::app::open_store(flags).await?;
    let verdict = audit_chain(&*store).await;
    store.shutdown();
    let verdict = verdict.map_err(Failure::failed)?;
    if json_output {
        let view = VerifyView::from(&verdict);
        print(&format!("{}\n", crate::views::json(&view)))?;
    } else {
        print(&verdict_text(&verdict))?;
    }
    Ok(if verdict.ok() {
        exit::OK
    } else {
        exit::RUN_FAILED
    })
}

fn verdict_text(verdict: &ChainAudit) -> String {
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
    use crate::core::ids::RunId;
    use crate::core::receipt::{Break, ChainWalk};

    #[test]
    fn a_break_and_missing_receipts_are_each_named() {
        let verdict = ChainAudit {
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
        let value = crate::views::json(&VerifyView::from(&verdict));
        assert_eq!(value["ok"], false);
        assert_eq!(value["broken"]["seq"], 3);
        assert_eq!(value["missing"][0]["tool_results"], 2);
    }

    #[test]
    fn an_empty_chain_is_intact() {
        let verdict = ChainAudit {
            walk: ChainWalk::default(),
            broken: None,
            missing: Vec::new(),
        };
        assert!(verdict.ok());
        assert!(verdict_text(&verdict).starts_with("ok: 0 receipts, chain intact, head "));
    }
}
