#!/usr/bin/env bash
# Installs what the integration tests need beyond Rust: Node.js and the MCP
# servers of tests/fixtures/mcp (the reference `server-everything` and the
# official TypeScript SDK the fixture server runs on), from the npm registry
# at the versions package-lock.json pins.
#
#   bash scripts/test-deps.sh && cargo test --locked
#
# Idempotent: what is present is not installed again. Installs Node.js with
# apt-get only when `node` is missing (needs root, as in CI).
set -euo pipefail

cd "$(dirname "$0")/.."
fixtures=tests/fixtures/mcp

fail() {
    echo "test-deps: $*" >&2
    exit 1
}

if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
    command -v apt-get >/dev/null 2>&1 || fail "node and npm are missing and apt-get is not available: install Node.js 18 or later"
    [ "$(id -u)" = 0 ] || fail "node and npm are missing: install Node.js 18 or later (or run this script as root to apt-get it)"
    echo "test-deps: installing nodejs and npm with apt-get" >&2
    DEBIAN_FRONTEND=noninteractive apt-get update -qq || fail "apt-get update failed"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nodejs npm >/dev/null || fail "apt-get install nodejs npm failed"
fi

major=$(node -e 'process.stdout.write(String(process.versions.node.split(".")[0]))') \
    || fail "cannot run node"
[ "$major" -ge 18 ] || fail "node $(node --version) is too old: the MCP SDK needs Node.js 18 or later"

# The lock file's hash, stored after a successful install: a changed lock
# installs again, an unchanged one is skipped.
stamp="$fixtures/node_modules/.pincer-lock-hash"
want=$(sha256sum "$fixtures/package-lock.json" | cut -d' ' -f1)
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ] \
    && [ -d "$fixtures/node_modules/@modelcontextprotocol/sdk" ] \
    && [ -d "$fixtures/node_modules/@modelcontextprotocol/server-everything" ]; then
    echo "test-deps: MCP test servers already installed" >&2
    exit 0
fi

echo "test-deps: installing the MCP test servers (npm ci in $fixtures)" >&2
(cd "$fixtures" && npm ci --no-audit --no-fund --loglevel=error) || fail "npm ci in $fixtures failed"
echo "$want" >"$stamp"
echo "test-deps: done" >&2
