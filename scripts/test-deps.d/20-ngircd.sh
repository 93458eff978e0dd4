# ngIRCd, the IRC server the IRC channel's tests run against
# (tests/it/support/irc.rs): each test starts its own `ngircd --nodaemon`
# with a configuration of its own on a free loopback port. Debian's
# package starts a system service of its own on port 6667; the tests do not
# use it, and it is stopped and disabled here when this script installs the
# package, so that it holds no port and no PID file the tests could trip on.
# Sourced by scripts/test-deps.sh, which defines `fail`.
if ! command -v ngircd >/dev/null 2>&1 && [ ! -x /usr/sbin/ngircd ]; then
    command -v apt-get >/dev/null 2>&1 || fail "ngircd is missing and apt-get is not available: install ngIRCd (26 or later)"
    [ "$(id -u)" = 0 ] || fail "ngircd is missing: install ngIRCd (or run this script as root to apt-get it)"
    echo "test-deps: installing ngircd with apt-get" >&2
    DEBIAN_FRONTEND=noninteractive apt-get update -qq || fail "apt-get update failed"
    # policy-rc.d 101: the package's maintainer scripts start no service
    # (a policy-rc.d already there is left as it is).
    policy=/usr/sbin/policy-rc.d
    made_policy=
    if [ ! -e "$policy" ]; then
        printf '#!/bin/sh\nexit 101\n' >"$policy" && chmod 755 "$policy" && made_policy=1
    fi
    installed=1
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq ngircd >/dev/null || installed=
    [ -z "$made_policy" ] || rm -f "$policy"
    [ -n "$installed" ] || fail "apt-get install ngircd failed"
    if command -v systemctl >/dev/null 2>&1 && [ -d /run/systemd/system ]; then
        systemctl disable --now ngircd >/dev/null 2>&1 || true
    fi
fi
