#!/usr/bin/env bash
# Runs the fuzz targets of fuzz/ (cargo-fuzz, nightly), one at a time, each for
# SECONDS (default 60), starting from the committed corpus:
#
#   scripts/fuzz.sh                      # every target, 60 s each
#   scripts/fuzz.sh 300 sse_decoder      # one target, five minutes
#
# One fuzzing process per target (libFuzzer in-process, no -jobs/-workers).
# New inputs go to fuzz/target/corpus/TARGET (ignored by git); the committed
# fuzz/corpus/TARGET is only read. Ends with one line per target (runs,
# coverage, features, corpus size) and exits 1 if any target crashed, naming
# the artifact under fuzz/artifacts/TARGET and how to replay it.
# FUZZ_ARGS adds libFuzzer flags, e.g. FUZZ_ARGS="-max_len=65536".
# See docs/fuzzing.md.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."

die() {
  echo "fuzz: $*" >&2
  exit 2
}

command -v cargo-fuzz >/dev/null 2>&1 ||
  die "cargo-fuzz is missing: cargo install cargo-fuzz --locked"
rustup toolchain list | grep -q '^nightly' ||
  die "the nightly toolchain is missing: rustup toolchain install nightly"

SECONDS_EACH=60
if [ $# -gt 0 ] && [[ $1 =~ ^[0-9]+$ ]]; then
  SECONDS_EACH=$1
  shift
fi
mapfile -t ALL < <(cargo +nightly fuzz list)
TARGETS=("$@")
[ ${#TARGETS[@]} -gt 0 ] || TARGETS=("${ALL[@]}")
for target in "${TARGETS[@]}"; do
  printf '%s\n' "${ALL[@]}" | grep -qx "$target" ||
    die "no fuzz target $target (there are: ${ALL[*]})"
done

cargo +nightly fuzz build || die "the fuzz targets do not build"

summary=()
crashed=0
for target in "${TARGETS[@]}"; do
  work=fuzz/target/corpus/$target
  artifacts=fuzz/artifacts/$target
  mkdir -p "$work" "$artifacts" "fuzz/corpus/$target"
  log=$(mktemp)
  before=$(find "$artifacts" -type f | sort)
  echo "fuzz: $target for ${SECONDS_EACH}s"
  set +e
  # shellcheck disable=SC2086
  cargo +nightly fuzz run "$target" "$work" "fuzz/corpus/$target" -- \
    -max_total_time="$SECONDS_EACH" -print_final_stats=1 ${FUZZ_ARGS:-} 2>&1 |
    tee "$log" | grep --line-buffered -E '^(#[0-9]+[[:space:]]+(INITED|DONE)|==[0-9]+==|thread|SUMMARY|panicked)'
  status=${PIPESTATUS[0]}
  set -e
  runs=$(grep -oE 'stat::number_of_executed_units: *[0-9]+' "$log" | grep -oE '[0-9]+$' || true)
  last=$(grep -E '^#[0-9]+[[:space:]]' "$log" | tail -n 1 || true)
  cov=$(grep -oE 'cov: [0-9]+' <<<"$last" | grep -oE '[0-9]+' || true)
  ft=$(grep -oE 'ft: [0-9]+' <<<"$last" | grep -oE '[0-9]+' || true)
  corp=$(grep -oE 'corp: [0-9]+/[0-9]+[a-zA-Z]*' <<<"$last" | cut -d' ' -f2 || true)
  if [ "$status" -ne 0 ]; then
    crashed=1
    new=$(comm -13 <(echo "$before") <(find "$artifacts" -type f | sort) | tr '\n' ' ')
    summary+=("$target: CRASHED after ${runs:-?} runs; artifact: ${new:-none written, see the log}")
    summary+=("  replay: cargo +nightly fuzz run $target ${new%% *}")
  else
    summary+=("$target: ${runs:-?} runs, cov ${cov:-?}, ft ${ft:-?}, corpus ${corp:-?}, no crash")
  fi
  rm -f "$log"
done

echo
printf '%s\n' "${summary[@]}"
exit "$crashed"
