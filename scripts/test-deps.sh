#!/usr/bin/env bash
# Installs what the integration tests need beyond Rust: Node.js and the MCP
# servers of tests/fixtures/mcp (the reference `server-everything` and the
# official TypeScript SDK the fixture server runs on), from the npm registry
# at the versions package-lock.json pins; and the OpenAPI fuzzer schemathesis
# (PyPI, the version tests/fixtures/schemathesis/requirements.txt pins) in a
# virtual environment, tests/fixtures/schemathesis/.venv; the official Python
# ACP SDK (PyPI, pinned in tests/fixtures/python-acp/requirements.txt) in
# tests/fixtures/python-acp/.venv; the Agent Skills reference validator
# (PyPI `skills-ref`, pinned in tests/fixtures/skills-ref/requirements.txt)
# in tests/fixtures/skills-ref/.venv; tmux, in which tests/it/terminal.rs
# drives `pincer chat`; curl and script; and PostgreSQL (Debian's
# `postgresql`: initdb, pg_ctl, psql) with openssl, for the store's
# PostgreSQL tests, which start and stop real servers of their own
# (src/testing/postgres.rs: initdb into a temporary directory, as the
# `postgres` user the package makes when the tests run as root; openssl
# makes the certificates of the TLS tests).
#
#   bash scripts/test-deps.sh && cargo test --locked
#
# Idempotent: what is present is not installed again. Installs Node.js,
# Python, curl, script, tmux, PostgreSQL and openssl with apt-get only when
# they are missing (needs root, as in CI); PostgreSQL counts as present when
# initdb is in /usr/lib/postgresql/*/bin or on PATH, and psql on PATH.
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
else
    echo "test-deps: installing the MCP test servers (npm ci in $fixtures)" >&2
    (cd "$fixtures" && npm ci --no-audit --no-fund --loglevel=error) || fail "npm ci in $fixtures failed"
    echo "$want" >"$stamp"
fi

# schemathesis, for the OpenAPI fuzzing test in tests/it/http.rs.
st=tests/fixtures/schemathesis
if ! python3 -c 'import venv, ensurepip' >/dev/null 2>&1; then
    command -v apt-get >/dev/null 2>&1 || fail "python3 with venv is missing and apt-get is not available: install Python 3.9 or later with venv"
    [ "$(id -u)" = 0 ] || fail "python3 with venv is missing: install Python 3.9 or later (or run this script as root to apt-get it)"
    echo "test-deps: installing python3 and python3-venv with apt-get" >&2
    DEBIAN_FRONTEND=noninteractive apt-get update -qq || fail "apt-get update failed"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3 python3-venv >/dev/null || fail "apt-get install python3 python3-venv failed"
fi
stamp="$st/.venv/.pincer-requirements-hash"
want=$(sha256sum "$st/requirements.txt" | cut -d' ' -f1)
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ] && [ -x "$st/.venv/bin/st" ]; then
    echo "test-deps: schemathesis already installed" >&2
else
    echo "test-deps: installing schemathesis (pip in $st/.venv)" >&2
    rm -rf "$st/.venv"
    python3 -m venv "$st/.venv" || fail "python3 -m venv $st/.venv failed"
    "$st/.venv/bin/pip" install --quiet --disable-pip-version-check -r "$st/requirements.txt" \
        || fail "pip install -r $st/requirements.txt failed"
    echo "$want" >"$stamp"
fi
# The official Python ACP SDK, a client of `pincer acp` in tests/it/acp_python.rs.
py=tests/fixtures/python-acp
stamp="$py/.venv/.pincer-requirements-hash"
want=$(sha256sum "$py/requirements.txt" | cut -d' ' -f1)
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ] && [ -x "$py/.venv/bin/python" ]; then
    echo "test-deps: the Python ACP SDK already installed" >&2
else
    python3 -c 'import sys; sys.exit(sys.version_info < (3, 10))' \
        || fail "the Python ACP SDK needs Python 3.10 or later, python3 is $(python3 --version 2>&1)"
    echo "test-deps: installing the Python ACP SDK (pip in $py/.venv)" >&2
    rm -rf "$py/.venv"
    python3 -m venv "$py/.venv" || fail "python3 -m venv $py/.venv failed"
    "$py/.venv/bin/pip" install --quiet --disable-pip-version-check -r "$py/requirements.txt" \
        || fail "pip install -r $py/requirements.txt failed"
    echo "$want" >"$stamp"
fi
# The reference validator of Agent Skills, against which tests/it/skills.rs
# checks `pincer skills validate`.
sr=tests/fixtures/skills-ref
stamp="$sr/.venv/.pincer-requirements-hash"
want=$(sha256sum "$sr/requirements.txt" | cut -d' ' -f1)
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ] && [ -x "$sr/.venv/bin/agentskills" ]; then
    echo "test-deps: skills-ref already installed" >&2
else
    echo "test-deps: installing skills-ref (pip in $sr/.venv)" >&2
    rm -rf "$sr/.venv"
    python3 -m venv "$sr/.venv" || fail "python3 -m venv $sr/.venv failed"
    "$sr/.venv/bin/pip" install --quiet --disable-pip-version-check -r "$sr/requirements.txt" \
        || fail "pip install -r $sr/requirements.txt failed"
    echo "$want" >"$stamp"
fi
# curl and script: the README's HTTP quick start and a terminal for `pincer acp`
# (tests/it/first_hour.rs).
for tool in curl:curl script:bsdutils; do
    command -v "${tool%%:*}" >/dev/null 2>&1 && continue
    package=${tool#*:}
    command -v apt-get >/dev/null 2>&1 || fail "${tool%%:*} is missing and apt-get is not available: install $package"
    [ "$(id -u)" = 0 ] || fail "${tool%%:*} is missing: install $package (or run this script as root to apt-get it)"
    echo "test-deps: installing $package with apt-get" >&2
    DEBIAN_FRONTEND=noninteractive apt-get update -qq || fail "apt-get update failed"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$package" >/dev/null || fail "apt-get install $package failed"
done
# tmux, for the terminal face's tests (tests/it/terminal.rs).
if ! command -v tmux >/dev/null 2>&1; then
    command -v apt-get >/dev/null 2>&1 || fail "tmux is missing and apt-get is not available: install tmux"
    [ "$(id -u)" = 0 ] || fail "tmux is missing: install tmux (or run this script as root to apt-get it)"
    echo "test-deps: installing tmux with apt-get" >&2
    DEBIAN_FRONTEND=noninteractive apt-get update -qq || fail "apt-get update failed"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq tmux >/dev/null || fail "apt-get install tmux failed"
fi
# PostgreSQL (server and psql), for the store's PostgreSQL backend: the
# tests start real servers of their own (src/testing/postgres.rs), as the
# `postgres` user when run as root; openssl makes their TLS certificates.
# The package's own cluster (/etc/postgresql/*/main) is not used.
if ! ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 && ! command -v initdb >/dev/null 2>&1 \
    || ! command -v psql >/dev/null 2>&1 || ! command -v openssl >/dev/null 2>&1; then
    command -v apt-get >/dev/null 2>&1 || fail "PostgreSQL is missing and apt-get is not available: install PostgreSQL 15 or later (initdb, pg_ctl, psql) and openssl"
    [ "$(id -u)" = 0 ] || fail "PostgreSQL is missing: install PostgreSQL 15 or later and openssl (or run this script as root to apt-get them)"
    echo "test-deps: installing postgresql and openssl with apt-get" >&2
    DEBIAN_FRONTEND=noninteractive apt-get update -qq || fail "apt-get update failed"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql openssl >/dev/null \
        || fail "apt-get install postgresql openssl failed"
fi
if [ "$(id -u)" = 0 ] && ! id postgres >/dev/null 2>&1; then
    fail "the postgres user is missing: the PostgreSQL tests run the server as it (PostgreSQL refuses root)"
fi
# The chat platforms' real servers (ngIRCd, Synapse, Dovecot with an SMTP
# server): one script each in scripts/test-deps.d, run in name order with
# the helpers above (`fail`).
for part in scripts/test-deps.d/*.sh; do
    [ -e "$part" ] || continue
    # shellcheck source=/dev/null
    . "$part"
done
echo "test-deps: done" >&2
