#!/usr/bin/env python3
"""Several `pincer serve` instances on PostgreSQL, against one on SQLite.

Standard library only (Python 3.11+). Builds nothing: point --bin at a binary
built with `cargo build --release`. Starts its own PostgreSQL server (initdb
into a temporary directory; as root, as the `postgres` user), on this
machine, with its default settings (fsync and synchronous_commit on).

Measures, in one run:
1. Runs per second over HTTP: --sessions sessions (default 1,000) made, then
   one prompt each (`?wait=true`, so a run counts once its end is committed),
   from --clients concurrent HTTP clients (default 32), the scripted model
   answering at once; with one instance on SQLite, one on PostgreSQL, and
   three on PostgreSQL (sessions and prompts spread round-robin, each prompt
   sent to another instance than the one that made its session).
2. Cross-instance event latency: a run on instance B streams --chunks text
   chunks (default 300), --gap-ms apart (default 10); instance A's and B's
   session streams (SSE) both read them; for each event, the time from B's
   stream delivering it to A's (A woken by PostgreSQL's LISTEN/NOTIFY).
   p50, p90, p99, max.
3. Start-up to `initialize` of `pincer acp`: spawn to the response, median
   of --starts (default 20), on SQLite and on PostgreSQL.

Durable intents per second on PostgreSQL: `cargo bench --bench outbox --
--store URL` (benches/outbox.rs).

    python3 scripts/bench_scale.py --bin target/release/pincer
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

TOKEN = "bench-scale-token-0123456789abcdef"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Postgres:
    """A PostgreSQL server of the benchmark's own."""

    def __init__(self, root: Path) -> None:
        bins = sorted(Path("/usr/lib/postgresql").glob("*/bin/initdb"))
        if not bins:
            sys.exit("PostgreSQL is not installed (scripts/test-deps.sh installs it)")
        self.bin = bins[-1].parent
        self.dir = root / "pg"
        self.dir.mkdir()
        self.port = free_port()
        self.as_postgres = os.geteuid() == 0
        if self.as_postgres:
            subprocess.run(["chown", "-R", "postgres:postgres", str(self.dir)], check=True)
        self.tool("initdb", "-D", str(self.dir / "data"), "--auth=trust", "-U", "pincer",
                  "--encoding=UTF8", "--no-locale")
        with open(self.dir / "data" / "postgresql.conf", "a") as conf:
            conf.write(f"listen_addresses = '127.0.0.1'\nport = {self.port}\n"
                       f"unix_socket_directories = '{self.dir}'\nmax_connections = 200\n")
        self.tool("pg_ctl", "-D", str(self.dir / "data"), "-l", str(self.dir / "log"), "-w", "start")

    def tool(self, name: str, *args: str) -> None:
        argv = [str(self.bin / name), *args]
        if self.as_postgres:
            argv = ["runuser", "-u", "postgres", "--", *argv]
        subprocess.run(argv, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def database(self, name: str) -> str:
        subprocess.run(["psql", "-X", "-q", "-h", str(self.dir), "-p", str(self.port), "-U", "pincer",
                        "-d", "postgres", "-c", f"CREATE DATABASE {name}"], check=True)
        return f"postgres://pincer@127.0.0.1:{self.port}/{name}?sslmode=disable"

    def stop(self) -> None:
        self.tool("pg_ctl", "-D", str(self.dir / "data"), "-m", "fast", "-w", "stop")


def isolated_env(root: Path, store: str | None) -> dict:
    for sub in ("home", "config", "data"):
        (root / sub).mkdir(parents=True, exist_ok=True)
    # The load is the benchmark's own: the per-token rate limit is off.
    (root / "config" / "pincer").mkdir(exist_ok=True)
    (root / "config" / "pincer" / "config.toml").write_text("[http]\nrate_limit_per_minute = 0\n")
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(root / "home"),
        "XDG_CONFIG_HOME": str(root / "config"),
        "XDG_DATA_HOME": str(root / "data"),
        "PINCER_DATA_DIR": str(root / "data" / "pincer"),
        "PINCER_HTTP_TOKEN": TOKEN,
        "LANG": "C.UTF-8",
    }
    if store:
        env["PINCER_STORE_URL"] = store
    return env


class Instance:
    def __init__(self, binary: str, root: Path, store: str | None, script: Path) -> None:
        root.mkdir(parents=True)
        ready = root / "ready"
        self.proc = subprocess.Popen(
            [binary, "serve", "--http", "127.0.0.1:0", "--ready-file", str(ready), "--script", str(script)],
            env=isolated_env(root, store), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
            stderr=open(root / "stderr.log", "w"))
        deadline = time.monotonic() + 30
        while not ready.exists() or not ready.read_text().strip():
            if time.monotonic() > deadline or self.proc.poll() is not None:
                sys.exit(f"an instance did not start: {(root / 'stderr.log').read_text()}")
            time.sleep(0.02)
        host, port = ready.read_text().strip().rsplit(":", 1)
        self.host, self.port = host, int(port)
        self.local = threading.local()

    def conn(self) -> http.client.HTTPConnection:
        conn = getattr(self.local, "conn", None)
        if conn is None:
            conn = http.client.HTTPConnection(self.host, self.port, timeout=120)
            self.local.conn = conn
        return conn

    def call(self, method: str, path: str, body: dict | None = None) -> tuple[int, dict]:
        for attempt in range(2):
            conn = self.conn()
            try:
                conn.request(method, path, body=json.dumps(body) if body is not None else None,
                             headers={"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"})
                response = conn.getresponse()
                data = response.read()
                return response.status, json.loads(data) if data else {}
            except (ConnectionError, http.client.HTTPException):
                conn.close()
                self.local.conn = None
                if attempt:
                    raise
        raise RuntimeError("unreachable")

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()


def runs_per_second(binary: str, root: Path, store: str | None, instances: int,
                    sessions: int, clients: int) -> float:
    root.mkdir(parents=True)
    script = root / "one-turn.jsonl"
    script.write_text(json.dumps([{"text": "ok"}]) + "\n")
    workspace = root / "ws"
    workspace.mkdir()
    servers = [Instance(binary, root / f"i{k}", store, script) for k in range(instances)]
    try:
        with ThreadPoolExecutor(clients) as pool:
            def make(i: int) -> str:
                status, body = servers[i % instances].call("POST", "/v1/sessions", {"workspace": str(workspace)})
                assert status == 201, body
                return body["session_id"]
            ids = list(pool.map(make, range(sessions)))

            def prompt(i: int) -> None:
                server = servers[(i + 1) % instances]
                status, body = server.call("POST", f"/v1/sessions/{ids[i]}/prompt?wait=true", {"prompt": "hi"})
                assert status == 200 and body.get("state") == "completed", (status, body)
            started = time.monotonic()
            list(pool.map(prompt, range(sessions)))
            elapsed = time.monotonic() - started
        return sessions / elapsed
    finally:
        for server in servers:
            server.stop()


def sse(instance: Instance, path: str, seen: dict, stop: threading.Event, opened: threading.Event) -> None:
    conn = http.client.HTTPConnection(instance.host, instance.port, timeout=120)
    conn.request("GET", path, headers={"Authorization": f"Bearer {TOKEN}"})
    response = conn.getresponse()
    opened.set()
    event_id = None
    while not stop.is_set():
        line = response.readline()
        if not line:
            return
        line = line.decode().rstrip("\n")
        if line.startswith("id:"):
            event_id = line[3:].strip()
        elif line.startswith("data:") and event_id:
            seen.setdefault(event_id, time.monotonic())
            data = json.loads(line[5:])
            if data.get("type") == "state" and data.get("state") in ("completed", "failed", "cancelled"):
                return


def cross_instance_latency(binary: str, root: Path, store: str, chunks: int, gap_ms: int) -> list[float]:
    turn = []
    for n in range(chunks):
        turn.append({"text": f"chunk {n} "})
        turn.append({"delay_ms": gap_ms})
    root.mkdir(parents=True)
    script = root / "stream.jsonl"
    script.write_text(json.dumps(turn) + "\n")
    workspace = root / "ws"
    workspace.mkdir()
    a = Instance(binary, root / "a", store, script)
    b = Instance(binary, root / "b", store, script)
    try:
        status, session = a.call("POST", "/v1/sessions", {"workspace": str(workspace)})
        assert status == 201, session
        sid = session["session_id"]
        seen_a: dict = {}
        seen_b: dict = {}
        stop = threading.Event()
        threads = []
        for instance, seen in ((a, seen_a), (b, seen_b)):
            opened = threading.Event()
            thread = threading.Thread(target=sse, args=(instance, f"/v1/sessions/{sid}/events", seen, stop, opened), daemon=True)
            thread.start()
            opened.wait(10)
            threads.append(thread)
        time.sleep(0.3)
        status, run = b.call("POST", f"/v1/sessions/{sid}/prompt?wait=true", {"prompt": "stream"})
        assert status == 200, run
        for thread in threads:
            thread.join(30)
        stop.set()
        latencies = [(seen_a[k] - seen_b[k]) * 1000 for k in seen_b if k in seen_a]
        if len(latencies) < len(seen_b):
            sys.exit(f"A saw {len(latencies)} of the {len(seen_b)} events B saw")
        return latencies
    finally:
        a.stop()
        b.stop()


def startup(binary: str, root: Path, store: str | None, starts: int) -> float:
    times = []
    for n in range(starts):
        env = isolated_env(root / f"s{n}", store)
        started = time.monotonic()
        proc = subprocess.Popen([binary, "acp"], env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=subprocess.DEVNULL)
        assert proc.stdin and proc.stdout
        proc.stdin.write((json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize",
                                      "params": {"protocolVersion": 1, "clientCapabilities": {}}}) + "\n").encode())
        proc.stdin.flush()
        line = proc.stdout.readline()
        times.append((time.monotonic() - started) * 1000)
        assert b'"result"' in line, line
        proc.stdin.close()
        proc.wait(timeout=30)
    return statistics.median(times)


def pct(values: list[float], p: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(round(p / 100 * (len(values) - 1))))]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bin", default="target/release/pincer")
    parser.add_argument("--sessions", type=int, default=1000)
    parser.add_argument("--clients", type=int, default=32)
    parser.add_argument("--chunks", type=int, default=300)
    parser.add_argument("--gap-ms", type=int, default=10)
    parser.add_argument("--starts", type=int, default=20)
    args = parser.parse_args()
    binary = str(Path(args.bin).resolve())
    root = Path(tempfile.mkdtemp(prefix="pincer-bench-scale-"))
    if os.geteuid() == 0:
        os.chmod(root, 0o755)
    pg = Postgres(root)
    try:
        print(f"load average before: {os.getloadavg()[0]:.2f}")
        print(f"runs per second over HTTP, {args.sessions} sessions, one prompt each, {args.clients} clients:")
        for name, store, count in (("1 instance, SQLite", None, 1),
                                   ("1 instance, PostgreSQL", pg.database("runs_one"), 1),
                                   ("3 instances, PostgreSQL", pg.database("runs_three"), 3)):
            rate = runs_per_second(binary, root / name.replace(" ", "_").replace(",", ""), store, count,
                                   args.sessions, args.clients)
            print(f"  {name:<24} {rate:8.0f} runs/s")
        latencies = cross_instance_latency(binary, root / "latency", pg.database("latency"), args.chunks, args.gap_ms)
        print(f"an event on instance B to instance A's SSE stream, {len(latencies)} events: "
              f"p50 {pct(latencies, 50):.1f} ms, p90 {pct(latencies, 90):.1f} ms, "
              f"p99 {pct(latencies, 99):.1f} ms, max {max(latencies):.1f} ms")
        sqlite = startup(binary, root / "start-sqlite", None, args.starts)
        postgres = startup(binary, root / "start-pg", pg.database("startup"), args.starts)
        print(f"start-up to initialize of `pincer acp` (median of {args.starts}): "
              f"SQLite {sqlite:.1f} ms, PostgreSQL {postgres:.1f} ms")
        print(f"load average after: {os.getloadavg()[0]:.2f}")
    finally:
        pg.stop()
        shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
