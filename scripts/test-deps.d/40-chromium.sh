# Chromium and Playwright, for the web console's browser tests
# (tests/it/support/browser.rs): Debian's `chromium` (headless, driven over
# the DevTools protocol) with a font for its screenshots, and
# `playwright-core` from npm at the version tests/fixtures/browser's
# package-lock.json pins. playwright-core downloads no browser (and
# PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD keeps any npm install from trying): the
# tests launch Debian's /usr/bin/chromium by path. playwright-core 1.61.1
# is the newest that runs on Node.js 18 (Debian 12's, which
# scripts/test-deps.sh installs where node is missing; 1.62 and later want
# 20); it drives Debian 12's chromium 156 (checked: launch, pages,
# screenshots, console and CSP events). Sourced by scripts/test-deps.sh,
# which defines `fail` and has already made sure Node.js and npm are present.
if ! command -v chromium >/dev/null 2>&1 || [ ! -e /usr/share/fonts/truetype/dejavu/DejaVuSans.ttf ]; then
    command -v apt-get >/dev/null 2>&1 || fail "chromium is missing and apt-get is not available: install Chromium and the DejaVu fonts"
    [ "$(id -u)" = 0 ] || fail "chromium is missing: install Debian's chromium and fonts-dejavu-core (or run this script as root to apt-get them)"
    echo "test-deps: installing chromium and fonts-dejavu-core with apt-get" >&2
    DEBIAN_FRONTEND=noninteractive apt-get update -qq || fail "apt-get update failed"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium fonts-dejavu-core >/dev/null \
        || fail "apt-get install chromium fonts-dejavu-core failed"
fi
export PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1
browser=tests/fixtures/browser
stamp="$browser/node_modules/.pincer-lock-hash"
want=$(sha256sum "$browser/package-lock.json" | cut -d' ' -f1)
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ] \
    && [ -d "$browser/node_modules/playwright-core" ]; then
    echo "test-deps: playwright-core already installed" >&2
else
    echo "test-deps: installing playwright-core (npm ci in $browser)" >&2
    (cd "$browser" && npm ci --no-audit --no-fund --loglevel=error) || fail "npm ci in $browser failed"
    echo "$want" >"$stamp"
fi
