#!/usr/bin/env python3
"""The web console's figures (docs/benchmarks.md, "The web console").

1. A session page with about 10,000 events: how soon headless Chromium
   paints it (first contentful paint) and how soon the whole transcript is
   drawn, median of several loads (tests/fixtures/browser's harness).
2. 100 browser-equivalent SSE clients watching a live run (each one a
   connection to the session's event stream with the console's cookie, as
   `EventSource` opens it): the server's resident memory before and while
   they watch.
3. With --baseline BIN: the release binary's size against a build without
   the console.

    python3 scripts/bench_console.py [--bin target/release/pincer] [--baseline OLD_BIN]

Needs node, chromium and tests/fixtures/browser/node_modules (bash
scripts/test-deps.sh installs them). Prints a Markdown table.
"""

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TOKEN = "bench-token-0123456789abcdef"


def request(base, method, path, body=None, headers=None):
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(base + path, data=data, method=method)
    req.add_header("Authorization", f"Bearer {TOKEN}")
    req.add_header("Content-Type", "application/json")
    for name, value in (headers or {}).items():
        req.add_header(name, value)
    with urllib.request.urlopen(req, timeout=600) as response:
        return json.loads(response.read() or b"null")


def rss_kib(pid):
    fields = {}
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            name, _, value = line.partition(":")
            fields[name] = value.strip()
    return int(fields["VmRSS"].split()[0]), int(fields["VmHWM"].split()[0])


def script_lines(runs, steps, live_steps):
    lines = []
    for run in range(runs):
        turn = []
        for step in range(steps):
            turn.append({"text": f"run {run} chunk {step}. "})
            turn.append({"delay_ms": 3})
        lines.append(turn)
    live = []
    for step in range(live_steps):
        live.append({"text": f"live {step} "})
        live.append({"delay_ms": 100})
    lines.append(live)
    return lines


def login_cookie(base, addr):
    body = f"token={TOKEN}".encode()
    req = urllib.request.Request(base + "/ui/login", data=body, method="POST")
    req.add_header("Content-Type", "application/x-www-form-urlencoded")
    req.add_header("Origin", base)

    class NoRedirect(urllib.request.HTTPRedirectHandler):
        def redirect_request(self, *args, **kwargs):
            return None

    opener = urllib.request.build_opener(NoRedirect)
    try:
        opener.open(req, timeout=10)
    except urllib.error.HTTPError as answer:
        cookie = answer.headers.get("Set-Cookie", "")
        return cookie.split(";")[0]
    raise SystemExit("login did not answer with a redirect")


def sse_client(addr, path, cookie, got_event, stop):
    host, port = addr.rsplit(":", 1)
    sock = socket.create_connection((host, int(port)), timeout=60)
    sock.sendall(
        (
            f"GET {path} HTTP/1.1\r\nHost: {addr}\r\nAccept: text/event-stream\r\n"
            f"Cookie: {cookie}\r\nSec-Fetch-Site: same-origin\r\nSec-Fetch-Mode: cors\r\n\r\n"
        ).encode()
    )
    sock.settimeout(1)
    seen = False
    while not stop.is_set():
        try:
            chunk = sock.recv(65536)
        except socket.timeout:
            continue
        if not chunk:
            break
        if not seen and b"data:" in chunk:
            seen = True
            got_event.release()
    sock.close()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--bin", default=os.path.join(ROOT, "target/release/pincer"))
    parser.add_argument("--baseline", help="a release build without the console, for its size")
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--steps", type=int, default=500)
    parser.add_argument("--clients", type=int, default=100)
    parser.add_argument("--loads", type=int, default=5)
    args = parser.parse_args()

    work = tempfile.mkdtemp(prefix="pincer-bench-console-")
    workspace = os.path.join(work, "ws")
    os.makedirs(workspace)
    script = os.path.join(work, "s.jsonl")
    with open(script, "w") as out:
        for line in script_lines(args.runs, args.steps, 300):
            out.write(json.dumps(line) + "\n")
    # The rate limit would refuse most of a hundred streams opened at once.
    os.makedirs(os.path.join(work, "config/pincer"))
    with open(os.path.join(work, "config/pincer/config.toml"), "w") as config:
        config.write("[http]\nrate_limit_per_minute = 0\n")
    ready = os.path.join(work, "ready")
    env = dict(os.environ, PINCER_HTTP_TOKEN=TOKEN, PINCER_DATA_DIR=os.path.join(work, "data"),
               XDG_CONFIG_HOME=os.path.join(work, "config"), HOME=work, RUST_LOG="warn")
    server = subprocess.Popen(
        [args.bin, "serve", "--http", "127.0.0.1:0", "--ready-file", ready, "--script", script],
        env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
        stderr=open(os.path.join(work, "serve.log"), "w"),
    )
    try:
        deadline = time.time() + 30
        while not (os.path.exists(ready) and open(ready).read().strip()):
            if time.time() > deadline:
                raise SystemExit("pincer serve did not start")
            time.sleep(0.05)
        addr = open(ready).read().strip()
        base = f"http://{addr}"
        session = request(base, "POST", "/v1/sessions", {"workspace": workspace})["session_id"]
        started = time.time()
        for run in range(args.runs):
            request(base, "POST", f"/v1/sessions/{session}/prompt?wait=true", {"prompt": f"history {run}"})
        made = time.time() - started
        runs = request(base, "GET", f"/v1/sessions/{session}/runs")["runs"]
        events = sum(len(request(base, "GET", f"/v1/runs/{r['run_id']}/tape")["events"]) for r in runs)
        print(f"history: {len(runs)} runs, {events} events, made in {made:.1f} s", file=sys.stderr)

        # 1. The session page in Chromium.
        page = subprocess.run(
            ["node", os.path.join(ROOT, "scripts/bench_console.mjs")],
            env=dict(os.environ, PINCER_URL=base, PINCER_TOKEN=TOKEN, PINCER_SESSION=session,
                     PINCER_RUNS=str(len(runs)), PINCER_LOADS=str(args.loads),
                     PINCER_ARTIFACTS=os.path.join(work, "shots"), PINCER_BROWSER_TIMEOUT="300"),
            capture_output=True, text=True, cwd=os.path.join(ROOT, "tests/fixtures/browser"),
        )
        result = json.loads(page.stdout.strip().splitlines()[-1]) if page.stdout.strip() else {}
        if not result.get("ok"):
            raise SystemExit(f"the browser run failed: {result.get('error')}\n{page.stderr}")

        # 2. SSE clients watching a live run.
        cookie = login_cookie(base, addr)
        time.sleep(1)
        before_rss, _ = rss_kib(server.pid)
        request(base, "POST", f"/v1/sessions/{session}/prompt", {"prompt": "live"})
        got = threading.Semaphore(0)
        stop = threading.Event()
        threads = [
            threading.Thread(target=sse_client, args=(addr, f"/v1/sessions/{session}/events", cookie, got, stop), daemon=True)
            for _ in range(args.clients)
        ]
        for thread in threads:
            thread.start()
        for _ in range(args.clients):
            if not got.acquire(timeout=60):
                raise SystemExit("not every SSE client received an event")
        peak = before_rss
        for _ in range(50):
            rss, _ = rss_kib(server.pid)
            peak = max(peak, rss)
            time.sleep(0.1)
        stop.set()
        for thread in threads:
            thread.join(timeout=5)

        paints = result["first_paint_ms"]
        drawn = result["drawn_ms"]
        first_run = result["first_run_ms"]
        load = os.getloadavg()
        print("| measure | value |")
        print("| --- | --- |")
        print(f"| session | {len(runs)} runs, {events} events |")
        print(f"| first contentful paint, median of {len(paints)} loads | {statistics.median(paints):.0f} ms (all: {', '.join(f'{p:.0f}' for p in paints)}) |")
        print(f"| first run's reply shown, median | {statistics.median(first_run):.0f} ms (all: {', '.join(f'{d:.0f}' for d in first_run)}) |")
        print(f"| whole transcript drawn, median | {statistics.median(drawn):.0f} ms (all: {', '.join(f'{d:.0f}' for d in drawn)}) |")
        print(f"| server RSS before {args.clients} SSE clients | {before_rss / 1024:.1f} MiB |")
        print(f"| server RSS peak while they watch a live run | {peak / 1024:.1f} MiB (+{(peak - before_rss) / 1024:.1f} MiB) |")
        size = os.path.getsize(args.bin)
        print(f"| release binary | {size / 1024:.0f} KiB |")
        if args.baseline:
            old = os.path.getsize(args.baseline)
            print(f"| baseline binary (no console) | {old / 1024:.0f} KiB (console: +{(size - old) / 1024:.0f} KiB) |")
        print(f"| load average | {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} |")
    finally:
        server.terminate()
        server.wait(timeout=30)


if __name__ == "__main__":
    main()
