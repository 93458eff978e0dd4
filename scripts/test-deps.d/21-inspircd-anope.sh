# InspIRCd and Anope, the IRC network with accounts the IRC channel's
# account tests run against (tests/it/support/inspircd.rs): InspIRCd 3
# relays SASL to Anope's NickServ and tags messages with the sender's
# account (IRCv3 `account-tag`), which ngIRCd cannot. (Ergo, an IRCv3
# server with accounts built in, is not packaged in Debian 12: its `ergo`
# is a quantum chemistry program.) The tests start both of their own, with
# configurations of their own on free loopback ports; the packages' system
# services are not used, so they are kept from starting when this script
# installs them, and stopped and disabled where systemd runs.
# Sourced by scripts/test-deps.sh, which defines `fail`.
if ! { command -v inspircd >/dev/null 2>&1 || [ -x /usr/sbin/inspircd ]; } \
    || ! { command -v anope >/dev/null 2>&1 || [ -x /usr/sbin/anope ]; }; then
    command -v apt-get >/dev/null 2>&1 || fail "inspircd or anope is missing and apt-get is not available: install InspIRCd 3 and Anope 2.0"
    [ "$(id -u)" = 0 ] || fail "inspircd or anope is missing: install InspIRCd 3 and Anope 2.0 (or run this script as root to apt-get them)"
    echo "test-deps: installing inspircd and anope with apt-get" >&2
    DEBIAN_FRONTEND=noninteractive apt-get update -qq || fail "apt-get update failed"
    # policy-rc.d 101: the packages' maintainer scripts start no service
    # (a policy-rc.d already there is left as it is).
    policy=/usr/sbin/policy-rc.d
    made_policy=
    if [ ! -e "$policy" ]; then
        printf '#!/bin/sh\nexit 101\n' >"$policy" && chmod 755 "$policy" && made_policy=1
    fi
    installed=1
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends inspircd anope >/dev/null || installed=
    [ -z "$made_policy" ] || rm -f "$policy"
    [ -n "$installed" ] || fail "apt-get install inspircd anope failed"
    if command -v systemctl >/dev/null 2>&1 && [ -d /run/systemd/system ]; then
        systemctl disable --now inspircd anope >/dev/null 2>&1 || true
    fi
fi
