//! How the policy's verdict on a call and the `PreToolUse` hooks' answer
//! combine (`docs/hooks.md`, "How `PreToolUse` meets the policy"): a hook
//! can narrow what the policy lets through, never widen it past a deny.
//!
//! - A hook's block (`deny`, `decision: "block"`, exit 2) refuses the call
//!   whatever the policy says, and `continue: false` also ends the run.
//! - A policy deny stands whatever the hooks say (the mode, a `deny` rule,
//!   a session's `reject_always`).
//! - A hook's `ask` asks where the policy would allow.
//! - A hook's `allow` skips an approval the policy would ask for, but not
//!   one only a person may give (a protected path, `Plan::needs_person`).
//! - An active skill's `allowed-tools` (`core::skills`) pre-approve the
//!   same way, when no hook decided otherwise: an approval the policy
//!   would ask for is skipped, never a deny (a rule, `read_only` mode) nor
//!   an approval only a person may give.

use crate::core::hooks::{HookOutcome, Permission};
use crate::core::policy::Gate;
use crate::core::receipt::Verdict;

/// The policy's verdict on a planned call (the mode's effect included), as
/// [`combine`] weighs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PolicyVerdict {
    /// Runs without asking; `remembered` when a session's `allow_always`
    /// said so.
    Allow { remembered: bool },
    /// A person must approve it first; `person_only` when no hook may waive
    /// that (`policy::needs_person`).
    Ask { reason: String, person_only: bool },
    /// Never runs; `remembered` when a session's `reject_always` said so.
    Deny { reason: String, remembered: bool },
}

impl PolicyVerdict {
    /// The policy's `gate`; `person_only` says (when asked) whether only a
    /// person may approve the call.
    pub fn of(gate: Gate, person_only: impl FnOnce() -> bool) -> Self {
        match gate {
            Gate::Allow { remembered, .. } => PolicyVerdict::Allow { remembered },
            Gate::Ask { reason } => PolicyVerdict::Ask {
                reason,
                person_only: person_only(),
            },
            Gate::Deny { reason, remembered } => PolicyVerdict::Deny { reason, remembered },
        }
    }
}

/// What the `PreToolUse` hooks of a call decided, together (`HookOutcome`
/// combines several: a block from any blocks, `deny` over `ask` over
/// `allow`). A rewritten input is not a decision: it is planned and
/// checked by the policy before the two combine.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HookVerdict {
    /// No hook decided anything (none ran, or none gave a decision).
    None,
    Allow,
    /// Asks for a person's approval, with the reason a hook gave.
    Ask(Option<String>),
    /// Blocked (exit 2, `decision: "block"`, `permissionDecision: "deny"`,
    /// a failure with `on_failure = "block"`), with the reasons.
    Deny(String),
    /// `continue: false`: the call is not run and the run ends after the
    /// current calls, for this reason.
    Stop(String),
}

impl HookVerdict {
    /// What the hooks' answers decide: an end of the run over a block over
    /// their permission decision.
    pub fn of(outcome: &HookOutcome) -> Self {
        if let Some(reason) = outcome.stopped() {
            return HookVerdict::Stop(reason);
        }
        if let Some(reason) = outcome.blocked() {
            return HookVerdict::Deny(reason);
        }
        match outcome.permission() {
            Some((Permission::Allow, _)) => HookVerdict::Allow,
            Some((Permission::Ask, reason)) => HookVerdict::Ask(reason.map(str::to_owned)),
            // The runner gives every `deny` a block too (above); a `deny`
            // without one decides nothing, and outweighs an `allow`.
            Some((Permission::Deny, _)) | None => HookVerdict::None,
        }
    }

    /// Whether the call is refused whatever the policy says (it then runs
    /// with no input a hook gave, and is not shown as planned).
    pub fn refuses(&self) -> bool {
        matches!(self, HookVerdict::Deny(_) | HookVerdict::Stop(_))
    }
}

/// What becomes of a call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Runs without asking; the verdict its receipt records (`Allowed`, or
    /// `Approved` by a remembered answer).
    Run(Verdict),
    /// Runs once a person approves it; the reason they are shown.
    Ask(String),
    /// Not run: the verdict and what the model reads.
    Refuse(Verdict, String),
    /// Not run, and the run ends after the current calls, for this reason.
    EndRun(String),
}

/// The call's fate from the policy's verdict, the hooks' answer and the
/// active skill whose `allowed-tools` cover the call (`skill`, its name):
/// a hook narrows, never widens past a deny; a skill only pre-approves
/// what the policy would ask a person for.
pub fn combine(policy: PolicyVerdict, hook: HookVerdict, skill: Option<&str>) -> Decision {
    match (policy, hook) {
        (_, HookVerdict::Stop(reason)) => Decision::EndRun(reason),
        (_, HookVerdict::Deny(reason)) => {
            Decision::Refuse(Verdict::Denied, format!("denied by a hook: {reason}"))
        }
        (
            PolicyVerdict::Deny {
                reason,
                remembered: true,
            },
            _,
        ) => Decision::Refuse(Verdict::Rejected, format!("rejected: {reason}")),
        (
            PolicyVerdict::Deny {
                reason,
                remembered: false,
            },
            _,
        ) => Decision::Refuse(Verdict::Denied, format!("denied by policy: {reason}")),
        (PolicyVerdict::Allow { .. }, HookVerdict::Ask(reason)) => Decision::Ask(format!(
            "a hook asks for approval{}",
            reason.map(|r| format!(": {r}")).unwrap_or_default()
        )),
        (PolicyVerdict::Allow { remembered }, HookVerdict::None | HookVerdict::Allow) => {
            Decision::Run(if remembered {
                Verdict::Approved
            } else {
                Verdict::Allowed
            })
        }
        (
            PolicyVerdict::Ask {
                person_only: false, ..
            },
            HookVerdict::Allow,
        ) => Decision::Run(Verdict::Allowed),
        (
            PolicyVerdict::Ask {
                person_only: false, ..
            },
            HookVerdict::None,
        ) if skill.is_some() => Decision::Run(Verdict::Allowed),
        (PolicyVerdict::Ask { reason, .. }, _) => Decision::Ask(reason),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::hooks::HookAnswer;

    fn allow(remembered: bool) -> PolicyVerdict {
        PolicyVerdict::Allow { remembered }
    }

    fn ask(person_only: bool) -> PolicyVerdict {
        PolicyVerdict::Ask {
            reason: "supervised mode: `write_file` changes files".into(),
            person_only,
        }
    }

    fn deny(remembered: bool) -> PolicyVerdict {
        PolicyVerdict::Deny {
            reason: "read_only mode: `write_file` would change files (edit)".into(),
            remembered,
        }
    }

    fn hook_ask(reason: Option<&str>) -> HookVerdict {
        HookVerdict::Ask(reason.map(str::to_owned))
    }

    fn hook_deny() -> HookVerdict {
        HookVerdict::Deny("no writes today".into())
    }

    fn hook_stop() -> HookVerdict {
        HookVerdict::Stop("enough".into())
    }

    fn run(verdict: Verdict) -> Decision {
        Decision::Run(verdict)
    }

    fn asks(reason: &str) -> Decision {
        Decision::Ask(reason.into())
    }

    fn refused(verdict: Verdict, message: &str) -> Decision {
        Decision::Refuse(verdict, message.into())
    }

    /// Every pair of a policy verdict and a hook answer, with what becomes
    /// of the call: `docs/hooks.md`'s table, with remembered answers and
    /// approvals only a person may give.
    #[test]
    fn a_hook_narrows_the_policy_and_never_widens_it_past_a_deny() {
        use Verdict::{Allowed, Approved, Denied, Rejected};
        let policy_asks = "supervised mode: `write_file` changes files";
        let by_hook = "denied by a hook: no writes today";
        let by_policy = "denied by policy: read_only mode: `write_file` would change files (edit)";
        let remembered = "rejected: read_only mode: `write_file` would change files (edit)";
        let ended = Decision::EndRun("enough".into());
        let table: Vec<(PolicyVerdict, HookVerdict, Decision)> = vec![
            // The policy allows.
            (allow(false), HookVerdict::None, run(Allowed)),
            (allow(false), HookVerdict::Allow, run(Allowed)),
            (
                allow(false),
                hook_ask(None),
                asks("a hook asks for approval"),
            ),
            (
                allow(false),
                hook_ask(Some("look first")),
                asks("a hook asks for approval: look first"),
            ),
            (allow(false), hook_deny(), refused(Denied, by_hook)),
            (allow(false), hook_stop(), ended.clone()),
            // A remembered `allow_always` allows.
            (allow(true), HookVerdict::None, run(Approved)),
            (allow(true), HookVerdict::Allow, run(Approved)),
            (
                allow(true),
                hook_ask(None),
                asks("a hook asks for approval"),
            ),
            (
                allow(true),
                hook_ask(Some("look first")),
                asks("a hook asks for approval: look first"),
            ),
            (allow(true), hook_deny(), refused(Denied, by_hook)),
            (allow(true), hook_stop(), ended.clone()),
            // The policy asks.
            (ask(false), HookVerdict::None, asks(policy_asks)),
            (ask(false), HookVerdict::Allow, run(Allowed)),
            (ask(false), hook_ask(None), asks(policy_asks)),
            (ask(false), hook_ask(Some("look first")), asks(policy_asks)),
            (ask(false), hook_deny(), refused(Denied, by_hook)),
            (ask(false), hook_stop(), ended.clone()),
            // The policy asks, and only a person may answer.
            (ask(true), HookVerdict::None, asks(policy_asks)),
            (ask(true), HookVerdict::Allow, asks(policy_asks)),
            (ask(true), hook_ask(None), asks(policy_asks)),
            (ask(true), hook_ask(Some("look first")), asks(policy_asks)),
            (ask(true), hook_deny(), refused(Denied, by_hook)),
            (ask(true), hook_stop(), ended.clone()),
            // The policy denies.
            (deny(false), HookVerdict::None, refused(Denied, by_policy)),
            (deny(false), HookVerdict::Allow, refused(Denied, by_policy)),
            (deny(false), hook_ask(None), refused(Denied, by_policy)),
            (
                deny(false),
                hook_ask(Some("look first")),
                refused(Denied, by_policy),
            ),
            (deny(false), hook_deny(), refused(Denied, by_hook)),
            (deny(false), hook_stop(), ended.clone()),
            // A remembered `reject_always` denies.
            (deny(true), HookVerdict::None, refused(Rejected, remembered)),
            (
                deny(true),
                HookVerdict::Allow,
                refused(Rejected, remembered),
            ),
            (deny(true), hook_ask(None), refused(Rejected, remembered)),
            (
                deny(true),
                hook_ask(Some("look first")),
                refused(Rejected, remembered),
            ),
            (deny(true), hook_deny(), refused(Denied, by_hook)),
            (deny(true), hook_stop(), ended),
        ];
        let policies = [
            allow(false),
            allow(true),
            ask(false),
            ask(true),
            deny(false),
            deny(true),
        ];
        let hooks = [
            HookVerdict::None,
            HookVerdict::Allow,
            hook_ask(None),
            hook_ask(Some("look first")),
            hook_deny(),
            hook_stop(),
        ];
        // Every pair is in the table, once.
        for policy in &policies {
            for hook in &hooks {
                let rows = table
                    .iter()
                    .filter(|(p, h, _)| p == policy && h == hook)
                    .count();
                assert_eq!(rows, 1, "{policy:?} with {hook:?}");
            }
        }
        assert_eq!(table.len(), policies.len() * hooks.len());
        for (policy, hook, want) in &table {
            let row = format!("{policy:?} with {hook:?}");
            assert_eq!(combine(policy.clone(), hook.clone(), None), *want, "{row}");
        }
        // With an active skill whose `allowed-tools` cover the call, one
        // row changes: the policy asks (and a hook may waive it), no hook
        // decided, and the call runs unasked. Every other row stands: a
        // deny, the mode, a hook's ask or block, an approval only a person
        // may give.
        let mut changed = 0;
        for (policy, hook, want) in table {
            let row = format!("{policy:?} with {hook:?} and the skill `git`");
            let pre_approved = policy == ask(false) && hook == HookVerdict::None;
            let want = if pre_approved {
                changed += 1;
                run(Allowed)
            } else {
                want
            };
            assert_eq!(combine(policy, hook, Some("git")), want, "{row}");
        }
        assert_eq!(changed, 1);
        assert_eq!(
            combine(deny(false), HookVerdict::None, Some("git")),
            refused(Denied, by_policy)
        );
        assert_eq!(
            combine(ask(true), HookVerdict::None, Some("git")),
            asks(policy_asks)
        );
    }

    fn answer(hook: &str) -> HookAnswer {
        HookAnswer {
            hook: hook.into(),
            ..HookAnswer::default()
        }
    }

    fn outcome(answers: Vec<HookAnswer>) -> HookOutcome {
        HookOutcome { answers }
    }

    #[test]
    fn the_hooks_answers_decide_an_end_over_a_block_over_their_permission() {
        let allow = HookAnswer {
            permission: Some(Permission::Allow),
            ..answer("a")
        };
        let ask = HookAnswer {
            permission: Some(Permission::Ask),
            reason: Some("look first".into()),
            ..answer("b")
        };
        let deny = HookAnswer {
            permission: Some(Permission::Deny),
            block: Some("no".into()),
            ..answer("c")
        };
        let stop = HookAnswer {
            stop: Some("enough".into()),
            ..answer("d")
        };
        let rewrite = HookAnswer {
            updated_input: Some(serde_json::json!({"path": "b.txt"})),
            ..answer("e")
        };
        for (answers, want) in [
            (vec![], HookVerdict::None),
            (vec![rewrite.clone()], HookVerdict::None),
            (vec![allow.clone()], HookVerdict::Allow),
            (
                vec![allow.clone(), ask.clone()],
                HookVerdict::Ask(Some("look first".into())),
            ),
            (
                vec![ask.clone(), deny.clone(), allow.clone()],
                HookVerdict::Deny("no".into()),
            ),
            (
                vec![deny.clone(), stop.clone()],
                HookVerdict::Stop("enough".into()),
            ),
            // A `deny` without its block (the runner never answers so)
            // decides nothing, and outweighs an `allow`.
            (
                vec![
                    HookAnswer {
                        block: None,
                        ..deny.clone()
                    },
                    allow.clone(),
                ],
                HookVerdict::None,
            ),
        ] {
            let hooks: Vec<String> = answers.iter().map(|a| a.hook.clone()).collect();
            assert_eq!(HookVerdict::of(&outcome(answers)), want, "{hooks:?}");
        }
        assert!(HookVerdict::Deny("no".into()).refuses());
        assert!(HookVerdict::Stop("enough".into()).refuses());
        assert!(!HookVerdict::Ask(None).refuses() && !HookVerdict::Allow.refuses());
    }

    #[test]
    fn only_an_ask_asks_whether_a_person_alone_may_answer() {
        let never = || -> bool { panic!("asked whether only a person may approve") };
        assert_eq!(
            PolicyVerdict::of(
                Gate::Allow {
                    reason: "reads only".into(),
                    remembered: true
                },
                never
            ),
            PolicyVerdict::Allow { remembered: true }
        );
        assert_eq!(
            PolicyVerdict::of(
                Gate::Deny {
                    reason: "no".into(),
                    remembered: false
                },
                never
            ),
            PolicyVerdict::Deny {
                reason: "no".into(),
                remembered: false
            }
        );
        assert_eq!(
            PolicyVerdict::of(
                Gate::Ask {
                    reason: "protected".into()
                },
                || true
            ),
            PolicyVerdict::Ask {
                reason: "protected".into(),
                person_only: true
            }
        );
    }
}
