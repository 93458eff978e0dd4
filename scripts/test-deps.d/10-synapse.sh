# Synapse (PyPI `matrix-synapse`, pinned with its dependencies in
# tests/fixtures/synapse/requirements.txt) in a virtual environment,
# tests/fixtures/synapse/.venv: the real Matrix homeserver the Matrix
# channel's tests start on a loopback port (tests/it/support/matrix.rs).
# Wheels only (no compiler needed); about 15 s on a fresh venv. Sourced by
# scripts/test-deps.sh, which has already made sure python3 has venv.
syn=tests/fixtures/synapse
stamp="$syn/.venv/.pincer-requirements-hash"
want=$(sha256sum "$syn/requirements.txt" | cut -d' ' -f1)
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ] && [ -x "$syn/.venv/bin/python" ]; then
    echo "test-deps: Synapse already installed" >&2
else
    python3 -c 'import sys; sys.exit(sys.version_info < (3, 10))' \
        || fail "Synapse needs Python 3.10 or later, python3 is $(python3 --version 2>&1)"
    echo "test-deps: installing Synapse (pip in $syn/.venv)" >&2
    rm -rf "$syn/.venv"
    python3 -m venv "$syn/.venv" || fail "python3 -m venv $syn/.venv failed"
    "$syn/.venv/bin/pip" install --quiet --disable-pip-version-check --only-binary=:all: \
        -r "$syn/requirements.txt" || fail "pip install -r $syn/requirements.txt failed"
    echo "$want" >"$stamp"
fi
