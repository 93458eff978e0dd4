#!/usr/bin/env bash
# Build time from clean, binary size, start-up time and memory, per profile.
#
#   scripts/bench_build.sh                 # release, then dist
#   scripts/bench_build.sh release         # one profile
#
# Each profile builds from an empty target directory under $BENCH_DIR
# (default /tmp/pincer-bench-build), so nothing is reused between them; the
# crates are already downloaded (`cargo fetch --locked` first). Start-up and
# memory come from scripts/bench_startup.py (pincer alone, -n 20). Prints
# the machine's load before and after each build: a figure taken on a busy
# machine says so. Results go to docs/benchmarks.md by hand.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

profiles=("$@")
[ ${#profiles[@]} -gt 0 ] || profiles=(release dist)
base=${BENCH_DIR:-/tmp/pincer-bench-build}
cargo fetch --locked >/dev/null

for profile in "${profiles[@]}"; do
    dir="$base/$profile"
    rm -rf "$dir"
    mkdir -p "$dir"
    echo "== $profile: load before: $(cut -d' ' -f1-3 /proc/loadavg), $(nproc) CPUs"
    start=$(date +%s.%N)
    CARGO_TARGET_DIR="$dir" cargo build --locked --profile "$profile" --bin pincer 2>"$dir.log" ||
        { tail -20 "$dir.log"; exit 1; }
    end=$(date +%s.%N)
    # `--profile release` builds into release/; a custom profile into its name.
    bin="$dir/$profile/pincer"
    echo "== $profile: built in $(python3 -c "print(f'{$end - $start:.0f}')") s; load after: $(cut -d' ' -f1-3 /proc/loadavg)"
    echo "== $profile: binary $(stat -c %s "$bin") bytes ($(python3 -c "print(f'{$(stat -c %s "$bin")/1048576:.1f}')") MiB)"
    python3 scripts/bench_startup.py --bin "$bin" -n 20 --codex /nonexistent --zeroclaw /nonexistent --markdown
done
