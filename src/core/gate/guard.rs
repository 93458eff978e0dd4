//! The loop guard: the same tool with the same arguments called `limit`
//! times in one run is answered with a note instead of running again; a
//! call past that marks the run to end.

use std::collections::{HashMap, HashSet};

use parking_lot::Mutex;

use crate::core::session::ToolCall;

/// The loop guard: the same tool with the same arguments called `limit`
/// times in one run is answered with a note instead of running again; a call
/// past that marks the run to end (`LoopGuard::gave_up`).
#[derive(Debug, Default)]
pub struct LoopGuard {
    /// 0: off.
    limit: u32,
    seen: Mutex<HashMap<String, u32>>,
    /// Calls of the current turn: repeats within one turn count once (a
    /// model asking for the same read twice at once is not looping).
    this_turn: Mutex<HashSet<String>>,
    /// The call that went on past the note, as `tool` and how many times.
    gave_up: Mutex<Option<(String, u32)>>,
}

impl LoopGuard {
    pub fn new(limit: u32) -> Self {
        Self {
            limit,
            ..Self::default()
        }
    }

    /// A new model turn's calls begin.
    pub(super) fn start_turn(&self) {
        self.this_turn.lock().clear();
    }

    /// Counts `call`; `Some(note)` when it must not run.
    pub(super) fn check(&self, call: &ToolCall) -> Option<String> {
        if self.limit == 0 {
            return None;
        }
        // `serde_json` objects keep their keys sorted: equal arguments, equal text.
        let key = format!("{}\u{0}{}", call.name, call.arguments);
        if !self.this_turn.lock().insert(key.clone()) {
            return None;
        }
        let count = {
            let mut seen = self.seen.lock();
            let count = seen.entry(key).or_insert(0);
            *count += 1;
            *count
        };
        if count < self.limit {
            return None;
        }
        if count > self.limit {
            *self.gave_up.lock() = Some((call.name.clone(), count));
        }
        Some(format!(
            "not run: `{}` was called with these same arguments {count} times in this run, and \
             the answer will not change. Use what you already have, try another way, or tell the \
             person what is in the way; calling it again ends the run",
            call.name
        ))
    }

    /// The reason to end the run, once a call went on past the note.
    pub fn gave_up(&self) -> Option<String> {
        self.gave_up.lock().as_ref().map(|(tool, count)| {
            format!(
                "stopped by the loop guard: the model called `{tool}` with the same arguments {count} times in one run, and again after it was told the answer would not change (`loop_guard = {}` in the config)",
                self.limit
            )
        })
    }
}
