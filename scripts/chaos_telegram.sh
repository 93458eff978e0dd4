#!/usr/bin/env bash
# Chat chaos soak: tests/it/channel_chaos.rs with more kills (200 by default).
# `pincer serve --channel telegram` is killed with SIGKILL at random moments
# against the fake Bot API; then every message must be answered or reported,
# none sent twice blindly, no draft orphaned, every session mapped, and
# `pincer verify` must pass. The result line goes to docs/benchmarks.md.
#
#   scripts/chaos_telegram.sh [KILLS] [SEED]
set -euo pipefail
cd "$(dirname "$0")/.."
export PINCER_CHAOS_KILLS="${1:-200}"
if [[ -n "${2:-}" ]]; then
    export PINCER_CHAOS_SEED="$2"
fi
echo "load before: $(uptime)"
set +e
cargo test --test it channel_chaos -- --nocapture 2>&1 | grep -E '^chaos:|panicked|^test |test result|orphan|duplicate|not quiet|not answered|neither|pincer verify'
status=${PIPESTATUS[0]}
set -e
echo "load after: $(uptime)"
exit "$status"
