//! Live output of running calls as `tool_progress` events: batched per call
//! at most every [`PROGRESS_INTERVAL`], passed through the safety pass, and
//! shown only in pieces the pass can judge whole (whole lines, whole
//! private key blocks); a call's client terminal at once. Events a
//! subagent relays for the parent's tape go out in order with them.

use std::time::Duration;

use tokio::sync::mpsc::UnboundedReceiver;

use super::CallEnv;
use crate::core::emitter::Emitter;
use crate::core::event::Event;
use crate::core::tool::ProgressUpdate;

/// How often a running call's output becomes an event, at most.
const PROGRESS_INTERVAL: Duration = Duration::from_millis(100);

/// Awaits `calls` while turning their progress reports into `tool_progress`
/// events: output batched per call at most every [`PROGRESS_INTERVAL`] and
/// passed through the safety pass; a terminal at once.
pub(super) async fn with_progress<T>(
    env: &CallEnv,
    emitter: &mut Emitter,
    calls: impl std::future::Future<Output = T>,
    mut reports: UnboundedReceiver<(String, ProgressUpdate)>,
    mut relayed: UnboundedReceiver<Event>,
) -> T {
    let mut unshown = Unshown::default();
    let mut tick = tokio::time::interval(PROGRESS_INTERVAL);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    tokio::pin!(calls);
    let done = loop {
        tokio::select! {
            done = &mut calls => break done,
            Some((id, update)) = reports.recv() => {
                unshown.take(env, emitter, id, update, false);
            }
            Some(event) = relayed.recv() => {
                unshown.flush(env, emitter, false);
                emitter.emit(event);
            }
            _ = tick.tick() => unshown.flush(env, emitter, false),
        }
    };
    // Reports sent just before the calls ended.
    while let Ok((id, update)) = reports.try_recv() {
        unshown.take(env, emitter, id, update, true);
    }
    unshown.flush(env, emitter, true);
    while let Ok(event) = relayed.try_recv() {
        emitter.emit(event);
    }
    done
}

/// The calls' output not shown yet, per call id, in the order first
/// reported.
#[derive(Default)]
struct Unshown {
    outputs: Vec<(String, String)>,
}

impl Unshown {
    /// Takes one report: output waits to be shown; a terminal is shown at
    /// once, after what waits (all of it once the calls are `done`).
    fn take(
        &mut self,
        env: &CallEnv,
        emitter: &mut Emitter,
        id: String,
        update: ProgressUpdate,
        done: bool,
    ) {
        match update {
            ProgressUpdate::Output(text) => {
                match self.outputs.iter_mut().find(|(call, _)| *call == id) {
                    Some((_, buffered)) => buffered.push_str(&text),
                    None => self.outputs.push((id, text)),
                }
            }
            ProgressUpdate::Terminal(terminal_id) => {
                self.flush(env, emitter, done);
                emitter.emit(Event::ToolProgress {
                    id,
                    output: None,
                    terminal_id: Some(terminal_id),
                });
            }
        }
    }

    /// Redacts and shows what [`shown_now`] lets go (everything once the
    /// calls are `done`); the rest waits for more output.
    fn flush(&mut self, env: &CallEnv, emitter: &mut Emitter, done: bool) {
        for (id, output) in &mut self.outputs {
            let cut = if done {
                output.len()
            } else {
                shown_now(output)
            };
            if cut == 0 {
                continue;
            }
            let rest = output.split_off(cut);
            let ready = std::mem::replace(output, rest);
            emitter.emit(Event::ToolProgress {
                id: id.clone(),
                output: Some(env.safety.redact(&ready).0),
                terminal_id: None,
            });
        }
        self.outputs.retain(|(_, output)| !output.is_empty());
    }
}

/// How much of a call's buffered live output may be redacted and shown now:
/// whole lines only, and nothing from a private key block's BEGIN line on
/// until its END line came. The safety pass finds a secret only whole: a
/// key cut between two batches would leave its second half unredacted.
fn shown_now(buffered: &str) -> usize {
    let mut cut = buffered.rfind('\n').map_or(0, |i| i + 1);
    if let Some(begin) = buffered[..cut].rfind("-----BEGIN")
        && buffered[begin..cut].contains("PRIVATE KEY")
        && !buffered[begin..].contains("-----END")
    {
        cut = buffered[..begin].rfind('\n').map_or(0, |i| i + 1);
    }
    cut
}

#[cfg(test)]
mod tests {
    use super::shown_now;
    use crate::core::safety::{Safety, SafetyConfig};

    #[test]
    fn live_output_is_shown_by_whole_lines_and_whole_key_blocks() {
        for (buffered, shown) in [
            ("", ""),
            ("partial", ""),
            ("one\ntwo\nthr", "one\ntwo\n"),
            ("a\n-----BEGIN RSA PRIVATE KEY-----\nMIIE\n", "a\n"),
            (
                "a\n-----BEGIN RSA PRIVATE KEY-----\nMIIE\n-----END RSA PRIVATE KEY-----\nb",
                "a\n-----BEGIN RSA PRIVATE KEY-----\nMIIE\n-----END RSA PRIVATE KEY-----\n",
            ),
            (
                "-----BEGIN CERTIFICATE-----\nMIIB\n",
                "-----BEGIN CERTIFICATE-----\nMIIB\n",
            ),
        ] {
            assert_eq!(&buffered[..shown_now(buffered)], shown, "{buffered:?}");
        }
    }

    #[test]
    fn a_key_streamed_in_pieces_is_never_shown() {
        let safety = Safety::new(SafetyConfig::default(), Vec::new());
        let body = "MIIEowIBAAKCAQEAu1SU1LfVLPHCozMxH2Mo4lgOEePzNm0tRgeLezV6ffAt0gun\n\
                    VTLw7onLRnrq0/IzW7yWR7QkrmBL7jTKEn5u+qKhbwKfBstIs+bMY2Zkp18gnTxK\n";
        let key = format!("-----BEGIN RSA PRIVATE KEY-----\n{body}-----END RSA PRIVATE KEY-----\n");
        let text = format!("before\n{key}after\n");
        // Output arriving a few bytes at a time, flushed after each piece.
        let mut buffered = String::new();
        let mut shown = String::new();
        for piece in text.as_bytes().chunks(7) {
            buffered.push_str(std::str::from_utf8(piece).unwrap());
            let cut = shown_now(&buffered);
            let rest = buffered.split_off(cut);
            shown.push_str(&safety.redact(&buffered).0);
            buffered = rest;
        }
        shown.push_str(&safety.redact(&buffered).0);
        assert!(!shown.contains("MIIEowIBAAKCAQEA"), "{shown}");
        assert!(!shown.contains("VTLw7onLRnrq0"), "{shown}");
        assert!(
            shown.starts_with("before\n") && shown.ends_with("after\n"),
            "{shown}"
        );
    }
}
