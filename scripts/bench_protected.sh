#!/usr/bin/env bash
# What keeping the protected paths read-only costs a shell call
# (docs/benchmarks.md, "Protected paths: what a shell call pays"): one
# `pincer run` of 100 shell calls (`true N`) in a git workspace with
# `.claude/`, with the built-in protected paths, then with every one of them
# taken off (`[paths] unprotected`), alternating, ROUNDS times each. The
# difference per call is the snapshot before and after the command, the
# mount namespace and the read-only binds.
#
#   bash scripts/bench_protected.sh [PINCER_BINARY] [ROUNDS]
set -euo pipefail

bin=${1:-target/release/pincer}
rounds=${2:-5}
calls=100
bin=$(realpath "$bin")
[ -x "$bin" ] || { echo "bench_protected: no binary at $bin (cargo build --release)" >&2; exit 2; }

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/ws/.claude" "$work/home" "$work/cfg-off/pincer" "$work/cfg-on/pincer"
git -C "$work/ws" init -q
echo '{}' >"$work/ws/.claude/settings.json"
printf '[paths]\nunprotected = [".claude", ".codex", ".pincer", ".agents", ".mcp.json", ".git/hooks", ".git/config"]\n' \
    >"$work/cfg-off/pincer/config.toml"
python3 - "$work/s.jsonl" "$calls" <<'EOF'
import json, sys
path, calls = sys.argv[1], int(sys.argv[2])
with open(path, "w") as out:
    for i in range(calls):
        out.write(json.dumps([{"tool_call": {"name": "shell", "arguments": {"command": f"true {i}"}}}]) + "\n")
    out.write(json.dumps([{"text": "done"}]) + "\n")
EOF

one() {
    local start end
    start=$(date +%s%N)
    env -i PATH="$PATH" HOME="$work/home" XDG_CONFIG_HOME="$work/cfg-$1" PINCER_DATA_DIR="$work/data-$1" \
        "$bin" run --script "$work/s.jsonl" --mode full --max-turn-requests $((calls + 10)) \
        --cwd "$work/ws" go >/dev/null 2>"$work/err" || { cat "$work/err" >&2; exit 1; }
    end=$(date +%s%N)
    echo $(((end - start) / 1000))
}

echo "load: $(cut -d' ' -f1-3 /proc/loadavg); $(nproc) cores; $("$bin" --version)"
on=()
off=()
for _ in $(seq "$rounds"); do
    on+=("$(one on)")
    off+=("$(one off)")
done
python3 - "$calls" "${on[*]}" "${off[*]}" <<'EOF'
import statistics, sys
calls = int(sys.argv[1])
on = [int(x) / 1000 for x in sys.argv[2].split()]
off = [int(x) / 1000 for x in sys.argv[3].split()]
m_on, m_off = statistics.median(on), statistics.median(off)
print(f"protected:   median {m_on:.0f} ms for {calls} calls ({m_on / calls:.2f} ms a call); runs {on}")
print(f"unprotected: median {m_off:.0f} ms for {calls} calls ({m_off / calls:.2f} ms a call); runs {off}")
print(f"added per shell call: {(m_on - m_off) / calls:.2f} ms")
EOF
