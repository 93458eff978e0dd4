#!/usr/bin/env python3
"""The terminal face under a 100,000-chunk reply: how long after the last
chunk the screen shows the reply's end.

`pincer chat` runs in a private tmux server (120x40) with the scripted
provider. Each of N conversations (a new `pincer chat` each) plays one model turn of
100,000 text chunks: 1,000
lines of 100 chunks ("word " x 99, then "word\\n"), the last chunk carrying a
marker unique to the turn. The bench sends the prompt and polls the visible
pane (`tmux capture-pane -p`) every few milliseconds until the marker shows.

  latency = (time the poll that first shows the marker returned)
          - (`at` of the run's last `text_delta` event on the tape)

The event's `at` is when the runtime took the provider's last chunk, so the
figure covers the face's whole share: the event reaching the face, the
renderer, the write to the pty, tmux drawing it, and the poll's own delay
(up to one poll interval plus a `capture-pane`, a few ms: the figure is an
upper bound). Also reported: the time from the prompt to the marker, the
whole reply's trip through the face; and the same latency for the same reply
through `pincer run` with stdout a pipe, which is the core's share (the
provider, the runtime, the tape, a lagging subscriber reading it back)
without the terminal face.

    python3 scripts/bench_terminal.py                    # target/debug/pincer, 5 replies
    python3 scripts/bench_terminal.py --bin target/release/pincer -n 10

With `--indicator`, it measures instead how soon the working indicator shows
after Enter (target: 200 ms), against a model whose first word takes 2 s: for
each of N prompts in one conversation, the time from the `send-keys Enter`
to the first poll that shows `working`; beside it, the time from typing a
character at the prompt to the first poll that shows it (the line editor's
echo: tmux's and the poll's own share of any such figure).

    python3 scripts/bench_terminal.py --bin target/release/pincer --indicator -n 20

Needs tmux (scripts/test-deps.sh installs it). Standard library only.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

LINES = 1000
CHUNKS_PER_LINE = 100
TIMEOUT_S = 60.0
TARGET_MS = 100.0


def tmux(socket: str, *args: str) -> str:
    env = {k: v for k, v in os.environ.items() if k != "TMUX"}
    out = subprocess.run(
        ["tmux", "-L", socket, *args], capture_output=True, text=True, env=env, check=True
    )
    return out.stdout


def turn(marker: str) -> list:
    steps: list = []
    for line in range(LINES):
        steps.append({"repeat": {"count": CHUNKS_PER_LINE - 1, "text": "word "}})
        steps.append({"text": marker if line == LINES - 1 else "word\n"})
    return steps


def wait_screen(socket: str, ready, what: str, poll_s: float = 0.005) -> float:
    deadline = time.monotonic() + TIMEOUT_S
    while True:
        screen = tmux(socket, "capture-pane", "-p")
        seen = time.time()
        if ready(screen):
            return seen
        if time.monotonic() > deadline:
            tail = tmux(socket, "capture-pane", "-p", "-S", "-60")
            raise SystemExit(f"bench_terminal: timed out waiting for {what}; screen:\n{tail}")
        time.sleep(poll_s)


def pincer_json(bin_path: str, data: Path, *args: str):
    out = subprocess.run(
        [bin_path, "--data-dir", str(data), *args], capture_output=True, text=True, check=True
    )
    return out.stdout


def last_delta_at(bin_path: str, data: Path) -> float:
    """When the newest session's last run took its last text chunk (s)."""
    session = json.loads(pincer_json(bin_path, data, "sessions", "list", "--json").splitlines()[0])
    shown = json.loads(pincer_json(bin_path, data, "sessions", "show", session["session_id"], "--json"))
    run_id = shown["runs"][-1]["run_id"]
    tape = pincer_json(bin_path, data, "tape", run_id, "--json")
    deltas = [r for r in map(json.loads, tape.splitlines()) if r.get("type") == "text_delta"]
    # The provider's chunks all wait at once, so the agent loop hands them on
    # in bursts (one delta each, docs/headless.md): check the text, not the count.
    text = "".join(d["text"] for d in deltas)
    if text.count("word") + 1 < LINES * CHUNKS_PER_LINE:
        sys.exit(f"bench_terminal: run {run_id} has {len(text)} bytes of text in {len(deltas)} deltas")
    return deltas[-1]["at"] / 1000.0


def chat_command(bin_path: str, scratch: Path, ws: Path, data: Path, script: Path) -> str:
    env = {
        "PATH": os.environ.get("PATH", ""),
        "HOME": str(scratch / "home"),
        "XDG_CONFIG_HOME": str(scratch / "config"),
        "PINCER_DATA_DIR": str(data),
        "RUST_LOG": os.environ.get("RUST_LOG", "warn"),
    }
    return (
        f"cd {shlex.quote(str(ws))} && env -i TERM=\"$TERM\" "
        + " ".join(f"{k}={shlex.quote(v)}" for k, v in env.items())
        + f" {shlex.quote(bin_path)} chat --script {shlex.quote(str(script))}"
        + f" 2>>{shlex.quote(str(scratch / 'stderr.log'))}; sleep 600"
    )


def indicator(bin_path: str, n: int) -> None:
    """Enter -> the working indicator on screen, n prompts in one chat."""
    scratch = Path(tempfile.mkdtemp(prefix="pincer-bench-indicator-"))
    ws, data = scratch / "ws", scratch / "data"
    ws.mkdir()
    script = scratch / "script.jsonl"
    script.write_text(
        "".join(json.dumps([{"delay_ms": 2000}, {"text": f"Answer {i}.\n"}]) + "\n" for i in range(n))
    )
    socket = f"pincer-bench-{os.getpid()}-indicator"
    tmux(socket, "-f", "/dev/null", "new-session", "-d", "-x", "120", "-y", "40",
         chat_command(bin_path, scratch, ws, data, script))
    shown, echoed = [], []
    try:
        wait_screen(socket, lambda s: s.rstrip().endswith(">"), "the prompt", 0.05)
        for index in range(n):
            typed = time.time()
            tmux(socket, "send-keys", "-l", "x")
            seen = wait_screen(socket, lambda s: s.rstrip().endswith("> x"), "the echo", 0.002)
            echoed.append((seen - typed) * 1000.0)
            tmux(socket, "send-keys", "-l", f"{index}")
            wait_screen(socket, lambda s, i=index: s.rstrip().endswith(f"> x{i}"), "the typed prompt", 0.02)
            sent = time.time()
            tmux(socket, "send-keys", "Enter")
            seen = wait_screen(socket, lambda s: "working" in s, "the indicator", 0.002)
            shown.append((seen - sent) * 1000.0)
            wait_screen(socket, lambda s, i=index: f"Answer {i}." in s, "the answer", 0.05)
            wait_screen(socket, lambda s: s.rstrip().endswith(">"), "the prompt", 0.05)
            tmux(socket, "send-keys", "C-l")
            time.sleep(0.1)
            print(f"prompt {index + 1}: indicator {shown[-1]:.1f} ms, echo {echoed[-1]:.1f} ms", file=sys.stderr)
    finally:
        tmux(socket, "kill-server")
    load = Path("/proc/loadavg").read_text().split()[:3]
    med = statistics.median(shown)
    print(f"binary: {bin_path}")
    print(
        f"Enter -> working indicator on screen: median {med:.1f} ms, min {min(shown):.1f}, "
        f"max {max(shown):.1f} (target < 200 ms: {'met' if med < 200 else 'NOT met'})"
    )
    print(
        f"a typed character -> on screen (the line editor's echo): median "
        f"{statistics.median(echoed):.1f} ms, min {min(echoed):.1f}, max {max(echoed):.1f}"
    )
    print(f"load average (1/5/15 min): {' '.join(load)}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--bin", default="target/debug/pincer")
    parser.add_argument("-n", type=int, default=5, help="turns measured")
    parser.add_argument("--indicator", action="store_true", help="measure Enter -> working indicator")
    args = parser.parse_args()
    bin_path = str(Path(args.bin).resolve())
    if not Path(bin_path).exists():
        sys.exit(f"bench_terminal: no binary at {bin_path} (cargo build first)")
    if args.indicator:
        indicator(bin_path, args.n)
        return

    scratch = Path(tempfile.mkdtemp(prefix="pincer-bench-terminal-"))
    ws, data = scratch / "ws", scratch / "data"
    ws.mkdir()
    # One turn per conversation: a second 100,000-chunk reply would not fit
    # the context window beside the first, and the scripted provider would
    # play the first line again.
    marker = "END-OF-REPLY"
    script = scratch / "script.jsonl"
    script.write_text(json.dumps(turn(marker)) + "\n")
    command = chat_command(bin_path, scratch, ws, data, script)
    latencies, totals = [], []
    for index in range(args.n):
        socket = f"pincer-bench-{os.getpid()}-{index}"
        tmux(socket, "-f", "/dev/null", "new-session", "-d", "-x", "120", "-y", "40", command)
        try:
            wait_screen(socket, lambda s: s.rstrip().endswith(">"), "the prompt", 0.05)
            tmux(socket, "send-keys", "-l", f"reply {index}")
            wait_screen(socket, lambda s, i=index: s.rstrip().endswith(f"> reply {i}"), "the typed prompt", 0.02)
            sent = time.time()
            tmux(socket, "send-keys", "Enter")
            seen = wait_screen(socket, lambda s: marker in s, marker)
            wait_screen(socket, lambda s: s.rstrip().endswith(">"), "the prompt", 0.05)
        finally:
            tmux(socket, "kill-server")
        last = last_delta_at(bin_path, data)
        latencies.append((seen - last) * 1000.0)
        totals.append((seen - sent) * 1000.0)
        print(
            f"turn {index + 1}: end on screen {latencies[-1]:.1f} ms after the last chunk; "
            f"prompt to end {totals[-1]:.0f} ms",
            file=sys.stderr,
        )
    # The same reply through `pincer run` (stdout a pipe): the core's share
    # of the figure (provider, runtime, tape, subscription) without the
    # terminal face, its renderer and tmux.
    headless = []
    for index in range(args.n):
        hdata = scratch / f"headless-{index}"
        proc = subprocess.Popen(
            [bin_path, "--data-dir", str(hdata), "run", "--script", str(script), "go"],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            cwd=ws,
        )
        tail = b""
        seen = None
        while True:
            chunk = proc.stdout.read1(65536)
            if not chunk:
                break
            tail = (tail + chunk)[-64:]
            if marker.encode() in tail:
                seen = time.time()
                break
        proc.wait()
        if seen is None:
            sys.exit("bench_terminal: `pincer run` did not print the reply's end")
        headless.append((seen - last_delta_at(bin_path, hdata)) * 1000.0)
    load = Path("/proc/loadavg").read_text().split()[:3]
    median = statistics.median(latencies)
    print(f"binary: {bin_path}")
    print(f"turns: {len(latencies)} of {LINES * CHUNKS_PER_LINE} chunks ({LINES} lines)")
    print(
        f"last chunk -> end on screen: median {median:.1f} ms, "
        f"min {min(latencies):.1f}, max {max(latencies):.1f} (target < {TARGET_MS:.0f} ms: "
        f"{'met' if median < TARGET_MS else 'NOT met'})"
    )
    print(
        f"prompt -> end on screen: median {statistics.median(totals):.0f} ms, "
        f"min {min(totals):.0f}, max {max(totals):.0f}"
    )
    print(
        f"same reply through `pincer run`, last chunk -> end read from its stdout: "
        f"median {statistics.median(headless):.1f} ms, min {min(headless):.1f}, max {max(headless):.1f}"
    )
    print(f"load average (1/5/15 min): {' '.join(load)}")


if __name__ == "__main__":
    main()
