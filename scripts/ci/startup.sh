#!/usr/bin/env bash
# The release build's start-up footprint, guarded (docs/benchmarks.md,
# "Start-up"): `.ci/run` builds the profile users run and fails when
#   - start-up runs more than 32 functions the start-up list build.rs hands
#     the linker does not name (traced with callgrind: the ordering loses its
#     effect quietly otherwise, as it did twice; each such function may cost
#     the 64 KiB of code around it), or
#   - pincer's peak resident memory (VmHWM) from spawn through `session/new`,
#     median of 10 processes, with a provider key set or without, is over
#     PINCER_STARTUP_MAX_MIB (default below: the measured figure with a margin,
#     as memory pages are deterministic enough for a bound; time is not).
set -euo pipefail
cd "$(dirname "$0")/../.."
max_mib=${PINCER_STARTUP_MAX_MIB:-13}
if ! command -v valgrind >/dev/null 2>&1; then
    command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ] ||
        { echo "startup: valgrind is missing (the start-up list is checked with callgrind)" >&2; exit 1; }
    echo "startup: installing valgrind with apt-get" >&2
    DEBIAN_FRONTEND=noninteractive apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq valgrind >/dev/null
fi
cargo build --release --locked
bin="${CARGO_TARGET_DIR:-target}/release/pincer"
python3 scripts/startup_order.py --profile release --bin "$bin" --check
python3 scripts/bench_startup.py --bin "$bin" --no-peers -n 10 --max-mib "$max_mib"
