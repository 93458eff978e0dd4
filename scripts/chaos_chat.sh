#!/usr/bin/env bash
# Chat chaos soak across Matrix and IRC: tests/it/chat_chaos.rs with more
# kills (100 by default). One `pincer serve --channel matrix --channel irc`
# is killed with SIGKILL at random moments against a real Synapse (behind a
# proxy that delays and always delivers sends, edits and redactions) and a
# real ngIRCd while people write in Matrix rooms and on IRC; then every
# Matrix message must be answered (nothing left unknown_after_send), every
# recorded IRC message answered or reported and none lost but at a kill,
# nothing shown more often than decided, no draft orphaned, every session
# mapped, and `pincer verify` must pass. The result line goes to
# docs/benchmarks.md.
#
#   scripts/chaos_chat.sh [KILLS] [SEED]
#
# The whole output goes to target/chaos_chat.log; PINCER_CHAOS_KEEP=1 keeps
# the run's data directory (its path is printed) for a post-mortem.
set -euo pipefail
cd "$(dirname "$0")/.."
export PINCER_CHAOS_KILLS="${1:-100}"
if [[ -n "${2:-}" ]]; then
    export PINCER_CHAOS_SEED="$2"
fi
echo "load before: $(uptime)"
set +e
log="${CARGO_TARGET_DIR:-target}/chaos_chat.log"
mkdir -p "$(dirname "$log")"
cargo test --test it chat_chaos -- --nocapture 2>&1 | tee "$log" | grep -E '^chaos:|panicked|^test |test result|orphan|duplicate|not quiet|not answered|neither|lost|pincer verify|data in'
status=${PIPESTATUS[0]}
set -e
echo "whole output: $log"
echo "load after: $(uptime)"
exit "$status"
