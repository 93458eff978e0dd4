#!/usr/bin/env bash
# The VS Code extension (editors/vscode): install its pinned dependencies,
# build it, and run its tests: unit tests against a fake ACP agent, the
# bundled extension against a fake `vscode` module, and the client against
# the real binary (PINCER_BIN, default $CARGO_TARGET_DIR/debug/pincer or target/debug/pincer, which CI builds
# before calling this script).
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
ext="$root/editors/vscode"
target_dir="${CARGO_TARGET_DIR:-target}"
case $target_dir in /*) ;; *) target_dir="$root/$target_dir" ;; esac
export PINCER_BIN="${PINCER_BIN:-$target_dir/debug/pincer}"

fail() {
  echo "vscode.sh: $*" >&2
  exit 1
}

command -v node >/dev/null || fail "node is not installed (Node 20 or newer is needed)"
command -v npm >/dev/null || fail "npm is not installed"
node_major="$(node -p 'process.versions.node.split(".")[0]')"
[ "$node_major" -ge 20 ] || fail "Node $(node --version) is too old; Node 20 or newer is needed"
[ -x "$PINCER_BIN" ] || fail "no pincer binary at $PINCER_BIN; run \`cargo build\` first or set PINCER_BIN"

cd "$ext"
echo "vscode.sh: npm ci"
npm ci --no-audit --no-fund || fail "npm ci failed in editors/vscode"
echo "vscode.sh: npm run build"
npm run build || fail "the extension does not build"
echo "vscode.sh: npm test (PINCER_BIN=$PINCER_BIN)"
npm test || fail "the extension's tests failed"
echo "vscode.sh: ok"
