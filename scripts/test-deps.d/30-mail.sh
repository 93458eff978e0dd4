# Email: Dovecot's IMAP server, and aiosmtpd (PyPI, pinned in
# tests/fixtures/mail/requirements.txt) in tests/fixtures/mail/.venv for the
# SMTP server tests/fixtures/mail/smtpd.py, which delivers into the Maildirs
# Dovecot serves. The email channel's tests (tests/it/support/mail.rs) start
# both on free loopback ports with configurations of their own; Debian's
# system Dovecot service is not used, and is stopped and disabled here when
# this script installs the package. openssl (installed with PostgreSQL by
# scripts/test-deps.sh) makes their TLS certificates.
# Sourced by scripts/test-deps.sh, which defines `fail`.
if ! command -v dovecot >/dev/null 2>&1 && [ ! -x /usr/sbin/dovecot ] \
    || [ ! -e /usr/lib/dovecot/imap ]; then
    command -v apt-get >/dev/null 2>&1 || fail "dovecot is missing and apt-get is not available: install Dovecot 2.3 with its IMAP server"
    [ "$(id -u)" = 0 ] || fail "dovecot is missing: install dovecot-imapd (or run this script as root to apt-get it)"
    echo "test-deps: installing dovecot-imapd with apt-get" >&2
    DEBIAN_FRONTEND=noninteractive apt-get update -qq || fail "apt-get update failed"
    # policy-rc.d 101: the package's maintainer scripts start no service
    # (a policy-rc.d already there is left as it is).
    policy=/usr/sbin/policy-rc.d
    made_policy=
    if [ ! -e "$policy" ]; then
        printf '#!/bin/sh\nexit 101\n' >"$policy" && chmod 755 "$policy" && made_policy=1
    fi
    installed=1
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq dovecot-imapd >/dev/null || installed=
    [ -z "$made_policy" ] || rm -f "$policy"
    [ -n "$installed" ] || fail "apt-get install dovecot-imapd failed"
    if command -v systemctl >/dev/null 2>&1 && [ -d /run/systemd/system ]; then
        systemctl disable --now dovecot >/dev/null 2>&1 || true
    fi
fi
mail=tests/fixtures/mail
stamp="$mail/.venv/.pincer-requirements-hash"
want=$(sha256sum "$mail/requirements.txt" | cut -d' ' -f1)
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ] && [ -x "$mail/.venv/bin/python" ]; then
    echo "test-deps: aiosmtpd already installed" >&2
else
    echo "test-deps: installing aiosmtpd (pip in $mail/.venv)" >&2
    rm -rf "$mail/.venv"
    python3 -m venv "$mail/.venv" || fail "python3 -m venv $mail/.venv failed"
    "$mail/.venv/bin/pip" install --quiet --disable-pip-version-check -r "$mail/requirements.txt" \
        || fail "pip install -r $mail/requirements.txt failed"
    echo "$want" >"$stamp"
fi
